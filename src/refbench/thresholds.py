"""The [accept] table's syntax: figure = "condition" lines, read by the plan (which checks them before a run starts)
and by acceptance (accept.py, which evaluates them against a run)."""

from __future__ import annotations

import operator
import re
from dataclasses import dataclass
from typing import Any, Callable

from refbench.errors import UserError

OPERATORS: dict[str, Callable[[float, float], bool]] = {
    ">=": operator.ge, "<=": operator.le, ">": operator.gt, "<": operator.lt, "==": operator.eq}
CONDITION = re.compile(r"\s*(>=|<=|==|>|<)\s*([-+]?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?)\s*")


@dataclass(frozen=True)
class Threshold:
    figure: str
    op: str
    limit: float

    def __str__(self) -> str:
        return f"{self.figure} {self.op} {self.limit:g}"


def parse(table: Any, where: Callable[[str], str]) -> list[Threshold]:
    """The [accept] table's thresholds; ``where(key)`` names a key for an error (file:line)."""
    if not isinstance(table, dict):
        raise UserError(f"{where('')} must be a table ([accept]) of figure = \">= number\" lines.")
    if not _flatten(table):
        raise UserError(f"{where('')} is empty: nothing to check (write figure = \">= number\" lines under it, e.g. "
                        "oltp.nopm = \">= 50000\").")
    out = []
    for figure, condition in _flatten(table).items():
        if figure.count(".") < 1:
            raise UserError(f"{where(figure)} must name a suite's figure as suite.metric or suite.case.metric.")
        m = CONDITION.fullmatch(condition) if isinstance(condition, str) else None
        if not m:
            raise UserError(f"{where(figure)} must be a condition such as \">= 50000\" (one of {', '.join(OPERATORS)} "
                            f"and a number), not {condition!r}.")
        out.append(Threshold(figure, m.group(1), float(m.group(2))))
    return out


def _flatten(table: dict[str, Any]) -> dict[str, Any]:
    """TOML reads oltp.nopm = "…" as a table oltp holding nopm: back to dotted names (in the file's order; a loop,
    not recursion, however deep the tables)."""
    out: dict[str, Any] = {}
    stack = [("", iter(table.items()))]
    while stack:
        prefix, items = stack[-1]
        for key, value in items:
            if isinstance(value, dict):
                stack.append((f"{prefix}{key}.", iter(value.items())))
                break
            out[f"{prefix}{key}"] = value
        else:
            stack.pop()
    return out
