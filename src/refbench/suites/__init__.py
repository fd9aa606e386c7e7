"""The one interface every suite implements, and the registry the runner, plan and CLI look suites up in.

A suite is a class with a ``name``, a ``summary``, an ``options`` schema (its plan section and CLI flags)
and seven methods. The runner calls them in this order, and never special-cases a suite:

    cases(plan)        -> list[Case]      the matrix of measurements this plan asks for (stable ids)
    prepare(ctx)       -> None            create data / precondition; idempotent (runs again on resume)
    measure(ctx, case) -> Record          one measurement; the runner stamps it and writes it atomically
    check(ctx)         -> list[Finding]   correctness: answers, consistency, verify
    summarize(records) -> list[Table]     the tables the papers print
    charts(tables)     -> list[Chart]     the figures the papers show (rendered by the report)
    headlines(records, tables) -> list[Headline]   what the run's verdict leads with: the best it measured
"""

from __future__ import annotations

import functools
import importlib
import os
import math
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from refbench.errors import UserError

if TYPE_CHECKING:
    from refbench.plan import Option, Plan
    from refbench.runner import SuiteContext


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


class Suite(Protocol):
    name: str
    summary: str
    options: dict[str, "Option"]

    def cases(self, plan: "Plan") -> list[Case]: ...
    def prepare(self, ctx: "SuiteContext") -> None: ...
    def measure(self, ctx: "SuiteContext", case: Case) -> Record: ...
    def check(self, ctx: "SuiteContext") -> list[Finding]: ...
    def summarize(self, records: list[Record]) -> list[Table]: ...
    def charts(self, tables: list[Table]) -> list[Chart]: ...
    def headlines(self, records: list[Record], tables: list[Table]) -> list[Headline]: ...


# Built-in suites register here as they land: name -> "module:Class".
BUILTIN_SUITES: dict[str, str] = {
    "device": "refbench.suites.device:DeviceSuite",
    "oltp": "refbench.suites.oltp:OltpSuite",
    "dss": "refbench.suites.dss:DssSuite",
    "dw": "refbench.suites.dw:DwSuite",
    "analytics": "refbench.suites.analytics:AnalyticsSuite",
}

# Extra suites, e.g. a site's own or a test's: entry points in the group "refbench.suites", or
# REFBENCH_SUITES="name=module:Class,..." in the environment.
PLUGIN_ENV = "REFBENCH_SUITES"


@functools.cache
def _installed_suite_paths() -> dict[str, str]:
    """Entry points, read once per process: each lookup reads every installed package's metadata (15 ms)."""
    from importlib.metadata import entry_points  # here: analytics jobs import this package and need no plugins

    return {ep.name: ep.value for ep in entry_points(group="refbench.suites")}


def _suite_paths() -> dict[str, str]:
    paths = dict(BUILTIN_SUITES)
    for name, path in _installed_suite_paths().items():
        paths.setdefault(name, path)
    for item in filter(None, (s.strip() for s in os.environ.get(PLUGIN_ENV, "").split(","))):
        name, sep, path = item.partition("=")
        if not sep or ":" not in path:
            raise UserError(f"{PLUGIN_ENV} entry '{item}' is not of the form name=module:Class.")
        paths[name.strip()] = path.strip()
    return paths


def suite_names() -> list[str]:
    return list(_suite_paths())


def get_suite(name: str) -> Suite:
    paths = _suite_paths()
    if name not in paths:
        known = ", ".join(paths) or "none yet"
        raise UserError(f"'{name}' is not a known suite (known: {known}).")
    module_name, _, class_name = paths[name].partition(":")
    try:
        suite_class = getattr(importlib.import_module(module_name), class_name)
    except (ImportError, AttributeError) as exc:
        raise UserError(f"suite '{name}' could not be loaded from {paths[name]}: {exc}.") from exc
    return suite_class()
