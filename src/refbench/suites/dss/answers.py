"""Checking query answers within the specification's tolerance (TPC-H 2.1.3.5): against the reference answer set
at SF1, and between the two engines at any scale.

Column kinds (the reference set's colprecision.txt): str and dates compare as text; cnt and int exactly; num
after rounding to 0.01; sum (money) within 100; avg and rat within 1% after rounding to 0.01.
"""

from __future__ import annotations

import decimal
from datetime import date, datetime
from importlib.resources import files
from typing import Any

TOLERANCES = ("str", "cnt", "int", "num", "sum", "avg", "rat")


def reference_answer(query: int) -> list[list[str]]:
    """The rows of the SF1 reference answer of a query (stream 0's parameters), as text."""
    text = files("refbench.suites.dss").joinpath("answers_sf1", f"q{query}.out").read_text()
    return [[cell.strip() for cell in line.split("|")] for line in text.splitlines()[1:] if line.strip()]


def column_kinds(query: int) -> list[str]:
    lines = files("refbench.suites.dss").joinpath("answers_sf1", "colprecision.txt").read_text().splitlines()
    return lines[query - 1].split()


def as_text(value: Any) -> str:
    if isinstance(value, (date, datetime)):
        return value.strftime("%Y-%m-%d")
    if isinstance(value, (float, decimal.Decimal)):
        return f"{value:.2f}"
    return "" if value is None else str(value).strip()


def compare(query: int, rows: list[tuple], expected: list[list[str]], kinds: list[str] | None = None) -> str | None:
    """None when ``rows`` match ``expected`` within tolerance; otherwise the first difference, in words."""
    kinds = kinds or column_kinds(query)
    if len(rows) != len(expected):
        return f"{len(rows)} rows, expected {len(expected)}"
    for i, (got, want) in enumerate(zip(rows, expected), start=1):
        if len(got) != len(want):
            return f"row {i} has {len(got)} columns, expected {len(want)}"
        for j, (value, reference, kind) in enumerate(zip(got, want, kinds), start=1):
            if not _close(kind, value, reference):
                return f"row {i}, column {j} ({kind}): {as_text(value)!r}, expected {reference!r}"
    return None


def _close(kind: str, value: Any, reference: str) -> bool:
    if kind == "str" or as_text(value) == reference:  # text, or equal as written (also both empty: NULL)
        return as_text(value) == reference
    try:
        got, want = float(value), float(reference)
    except (TypeError, ValueError):
        return False
    if kind in ("cnt", "int"):
        return got == want
    if kind == "num":
        return abs(round(got, 2) - round(want, 2)) <= 0.01 + 1e-9
    if kind == "sum":
        return abs(got - want) <= 100
    return abs(round(got, 2) - round(want, 2)) <= 0.01 * abs(round(want, 2)) + 1e-9  # avg, rat


def as_expected(rows: list[tuple]) -> list[list[str]]:
    """One engine's rows in the reference set's text form, to check the other engine against."""
    return [[as_text(v) for v in row] for row in rows]
