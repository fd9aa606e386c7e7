"""What a measurement produces: a suite's cases and records, its findings, tables, charts and headlines.

The data every floor above reads and writes (the run store keeps them, the suites make them, the report shows
them), kept at the ground so that none of those floors needs another to name them.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Case:
    """One measurement of a suite. ``id`` names its record file, so it must be stable and path-safe."""

    id: str
    params: dict[str, Any]
    title: str = ""


@dataclass
class Record:
    """The result of one case. Suites fill metrics (units in the names) and say how they measured;
    the runner fills the rest (suite, case, host, times, telemetry)."""

    metrics: dict[str, Any]
    method: str = ""
    extra: dict[str, Any] = field(default_factory=dict)
    suite: str = ""
    case_id: str = ""
    params: dict[str, Any] = field(default_factory=dict)
    host: str = ""
    started_utc: str = ""
    ended_utc: str = ""
    started_epoch_s: float = 0.0
    ended_epoch_s: float = 0.0
    elapsed_s: float = 0.0
    telemetry: dict[str, Any] = field(default_factory=dict)


# A figure named as a share of a whole: a percentage (…_pct) or a fraction (…hit_ratio, …_share). Not shares though
# named in percent: a signed difference, and fio's CPU of a job, summed over the job's threads.
_SHARE = re.compile(r"(_pct|hit_ratio|_share)$")
_NOT_A_SHARE = re.compile(r"difference_pct$|^fio_(usr|sys)_cpu_pct$")
_ROUNDING = 1e-6  # 100 − idle − iowait may come out at −1e-14


def is_figure(value: Any) -> bool:
    """A measured number: an int or a float, not a bool (True is an int to Python), and finite."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


# No measurement comes near this: a figure beyond it (1e308) is a damaged file, and a sum over it would overflow.
FIGURE_LIMIT = 1e18


def figure_problem(name: str, value: Any) -> str | None:
    """Why a metric's value is no figure refbench can compute with, or None. A metric may also be text, a flag or
    none (a device's model, a query that timed out, no New-Order in the window)."""
    if value is None or isinstance(value, (bool, str)):
        return None
    if isinstance(value, (int, float)):
        return None if math.isfinite(value) and abs(value) <= FIGURE_LIMIT else f"{name} is not a finite number ({value:g})"
    return f"{name} is not a number (a {type(value).__name__})"


def impossible_figures(record: Record) -> list[str]:
    """The record's shares outside their range (0–100 for a percentage, 0–1 for a fraction), as "where = value":
    such a figure is a bug in how it was computed, not a measurement."""
    found: list[str] = []

    def walk(value: Any, where: str, name: str) -> None:
        if isinstance(value, dict):
            for key, item in value.items():
                walk(item, f"{where}.{key}", str(key))
        elif isinstance(value, list):
            for i, item in enumerate(value):
                walk(item, f"{where}[{i}]", name)
        elif isinstance(value, (int, float)) and not isinstance(value, bool) and _SHARE.search(name) \
                and not _NOT_A_SHARE.search(name):
            top = 100 if name.endswith("_pct") else 1
            if not -_ROUNDING <= value <= top + _ROUNDING:  # NaN too
                found.append(f"{where} = {value}")

    for part in ("metrics", "extra", "telemetry"):
        walk(getattr(record, part), part, part)
    return found


@dataclass(frozen=True)
class Finding:
    """A correctness check's verdict, shown pass/fail in the report."""

    check: str
    passed: bool
    detail: str = ""


@dataclass
class Table:
    """A table as the papers print it. Rows are dicts; column names carry their units."""

    name: str
    title: str
    rows: list[dict[str, Any]]
    note: str = ""
    report_columns: list[str] | None = None  # what the HTML report shows; the files keep every column
    overview: bool = False  # shown open in the report's suite overview; other tables are in its collapsed detail


@dataclass
class Chart:
    """A figure described as data; the report renders it to PNG and SVG."""

    name: str
    title: str
    xlabel: str
    ylabel: str
    series: dict[str, list[tuple[Any, float]]]
    kind: str = "line"  # line | bar | area (stacked)
    logx: bool = False
    logy: bool = False
    note: str = ""
    spans: list[tuple[float, float, str]] = field(default_factory=list)  # shaded x ranges with a name: phases of a run
    ranges: dict[str, list[tuple[float, float, float]]] = field(default_factory=dict)  # series -> (x, low, high) bars
    tips: dict[str, list[str]] = field(default_factory=dict)  # series -> what hovering each point shows, if not its value


@dataclass(frozen=True)
class Headline:
    """A figure the run's verdict leads with, and the record it comes from (case "" when the suite derives it from
    several records, as the DW rating's capacity)."""

    label: str
    value: float
    unit: str
    case: str
    metric: str
    note: str = ""
    figure: str = ""  # its name when runs are compared, where "peak" or "best" would describe only one of them
    of: str = ""  # what tells it from the suite's other headlines of the same metric: an engine, a target
    unrated: str = ""  # why the run was too small to rate this figure (then it is shown as "not rated at this size")
    spread: float = 0.0  # high − low of its repeats, when it was measured more than once: how many digits it has
    low: float | None = None  # its repeats' lowest and highest value, when it was measured more than once
    high: float | None = None
    repeats: int = 0  # measured more than once: how many repeats its value is the median of (suites.repeats)
    repeat: str = ""  # and the repeat that measured that median value (its case id): its own, whatever the others'

    @property
    def compared_as(self) -> str:
        return self.figure or self.label

    def threshold(self, suite: str) -> str:
        """Its name in an [accept] table: dss.power.duckdb, oltp.nopm."""
        return f"{suite}.{self.metric}" + (f".{self.of}" if self.of else "")


@dataclass(frozen=True)
class Estimate:
    """What a plan will take, said before it runs (``refbench run --dry-run``): the suite's wall time, how that was
    reckoned, and what it writes where. A suite may offer ``estimate(plan, cases) -> Estimate``; it is optional."""

    seconds: float
    method: str  # the reckoning in words, e.g. "2 × (3 s ramp-up + 8 s measured) + the load"
    space: list[tuple[str, int, str]] = field(default_factory=list)  # (directory, bytes, what goes there)
