"""What a measurement produces: a suite's cases and records, its findings, tables, charts and headlines.

The data every floor above reads and writes (the run store keeps them, the suites make them, the report shows
them), kept at the ground so that none of those floors needs another to name them.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import re
import types
import typing
from dataclasses import dataclass, field
from typing import Any, Literal, NotRequired, TypedDict


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


# ---- what each file of a run holds, field by field --------------------------------------------------------------
# The writers declare what they write here (a key not declared is refused as it is written: RecordExtra, RunMeta,
# VerdictEntry), and the readers check each file against the same declaration as they read it: a field of another type
# is the run's one "damaged" sentence, never an error inside whatever reads it next.

class Canary(TypedDict, total=False):  # {} where nothing was watched
    cpu_ms: float | None
    fsync_ms: float | None
    read_ms: float | None
    cost_ms: float


class RecordExtra(TypedDict, total=False):
    """What a record's ``extra`` may hold: the runner's own keys (canary, disturbed, host_changed) and the suites'."""

    # the runner's
    canary: dict[str, Canary]  # before and after
    disturbed: str
    host_changed: str
    stalled: str  # the server answered nothing for a while in the window (suites.ServerStalled)
    # shared by several suites (the report, verdict, compare and tune read them)
    storage: dict[str, Any] | None  # None: a measurement its server stalled in, cut short
    settings: dict[str, Any]
    load: dict[str, Any]
    engine: str
    store: str
    system: dict[str, Any]
    device: str
    directory: str
    target_description: str | None
    target_kind: str
    target_path: str
    target_spec: str
    interval_epoch_s: list[float]
    detail: str
    warning: str
    repeats: dict[str, Any]
    series: list[dict[str, Any]]
    # oltp
    consistency_before: dict[str, Any]
    database: str
    errors: dict[str, Any]
    # dss and dw
    answer_check: str
    data: dict[str, Any]
    stream_orders: dict[str, list[int]]
    capacity_inputs: dict[str, Any]
    data_files: int
    queries: dict[str, Any]
    reference: dict[str, Any] | None
    run: str
    sf: float
    # device
    own_written_bytes: int
    # analytics
    block: str
    file_mib: float
    files_exceed_memory: bool
    inputs: dict[str, Any]
    jobs: list[dict[str, Any]]
    locations: dict[str, Any] | str
    read_from_device_pct: float
    read_mb_s: float
    read_mb_s_per_core: float
    read_phase_s: float
    read_verdict: str
    storage_series: list[dict[str, Any]]
    tests: dict[str, Any]
    timeline: list[list[float]]
    tuning: list[dict[str, Any]]
    write_mb_s: float
    write_mb_s_per_core: float
    write_verdict: str
    writers: int
    zero_buffers: bool


def _as_written(cls: type, **more: Any) -> Any:
    """A TypedDict of the fields of the dataclass ``cls`` as asdict writes them (those with a default may be absent
    from an older file), and ``more``: generated, so that a field added to ``cls`` is checked the day it is added."""
    hints = typing.get_type_hints(cls)
    fields = {f.name: hints[f.name] if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
              else NotRequired[hints[f.name]] for f in dataclasses.fields(cls)}
    return TypedDict(f"{cls.__name__}Written", {**fields, **more})  # type: ignore[operator]


VerdictHeadline = _as_written(Headline, threshold=NotRequired[str], said=NotRequired[str])


class VerdictEntry(TypedDict):
    """One suite's entry of verdict.json (report.verdict.SuiteVerdict.to_dict; a cluster run's summary)."""

    suite: str
    headlines: list[VerdictHeadline]
    checks_passed: int
    checks_failed: int
    correctness: str
    bottleneck: str
    scope: NotRequired[str]
    engines: NotRequired[list[dict[str, Any]]]
    bottleneck_repeats: NotRequired[list[dict[str, Any]]]
    disturbed: NotRequired[str]
    advice: NotRequired[list[dict[str, Any]]]
    limit: NotRequired[str]
    next: NotRequired[dict[str, Any]]
    durability: NotRequired[str]


def json_kind(value: Any) -> str:
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, (list, tuple)):
        return "a list"
    if isinstance(value, str):
        return "a string"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true or false"
    return "a number"


@functools.cache
def _fields(cls: type) -> tuple[dict[str, Any], frozenset[str]]:
    """A TypedDict's or dataclass's fields with their types, and which must be there. (A TypedDict's own
    __required_keys__ cannot be read under postponed annotations before Python 3.12: read from the hints instead.)"""
    hints = typing.get_type_hints(cls, include_extras=True)
    if typing.is_typeddict(cls):
        marked = {k: typing.get_origin(h) for k, h in hints.items()}
        required = {k for k, m in marked.items() if m is typing.Required or (cls.__total__ and m is not typing.NotRequired)}
    else:
        required = {f.name for f in dataclasses.fields(cls)
                    if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING}
    return hints, frozenset(required)


def shape_problem(value: Any, hint: Any, where: str, strict: bool = False) -> str | None:
    """Why ``value`` (parsed JSON) is not of the type ``hint`` (a TypedDict, a dataclass, list[…], dict[…, …], a union,
    Literal, a plain type or Any), as "WHERE is a string, not a finite number"; None when it is. ``strict``: a key a TypedDict does
    not declare is a problem too (for the writers: what they write is declared)."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is typing.NotRequired or origin is typing.Required:
        return shape_problem(value, args[0], where, strict)
    if hint is Any:
        return None
    if origin in (typing.Union, types.UnionType):
        problems = [shape_problem(value, arm, where, strict) for arm in args]
        if None in problems:
            return None
        # Of the same kind as one of the arms (an object), what is wrong inside it says more than "not one of".
        inner = [p for arm, p in zip(args, problems) if p and not p.startswith(f"{where} is ")]
        return inner[0] if inner else _mismatch(value, hint, where)
    if hint is None or hint is type(None):
        return None if value is None else _mismatch(value, hint, where)
    if origin is Literal:
        return None if value in args else f"{where} is {value!r}, not one of {', '.join(map(repr, args))}"
    if typing.is_typeddict(hint) or dataclasses.is_dataclass(hint):
        if not isinstance(value, dict):
            return _mismatch(value, hint, where)
        fields, required = _fields(hint)
        for key in (k for k in fields if k in required):
            if key not in value:
                return f"{where} has no '{key}'"
        for key, item in value.items():
            if key in fields:
                if problem := shape_problem(item, fields[key], f"{where}.{key}", strict):
                    return problem
            elif strict:
                return f"{where}.{key} is not declared (refbench.records.{hint.__name__})"
        return None
    if origin is list or hint is list:
        if not isinstance(value, (list, tuple)):  # a tuple written is a list read
            return _mismatch(value, hint, where)
        for i, item in enumerate(value):
            if args and (problem := shape_problem(item, args[0], f"{where}[{i}]", strict)):
                return problem
        return None
    if origin is dict or hint is dict:
        if not isinstance(value, dict):
            return _mismatch(value, hint, where)
        for key, item in value.items():  # not its keys: JSON makes every key text, whatever the writer had
            if args and (problem := shape_problem(item, args[1], f"{where}.{key}", strict)):
                return problem
        return None
    if hint is float:
        return None if is_figure(value) else _mismatch(value, hint, where)
    if hint is int:
        return None if isinstance(value, int) and not isinstance(value, bool) else _mismatch(value, hint, where)
    if hint in (str, bool):
        return None if isinstance(value, hint) else _mismatch(value, hint, where)
    return None


_KINDS = {str: "a string", int: "a whole number", float: "a finite number", bool: "true or false", type(None): "null",
          list: "a list", dict: "an object"}


def _kind_of(hint: Any) -> str:
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(dict.fromkeys(_kind_of(arm) for arm in typing.get_args(hint)))
    if hint is None:
        return "null"
    if typing.is_typeddict(hint) or dataclasses.is_dataclass(hint) or origin is dict:
        return "an object"
    return _KINDS.get(origin or hint, getattr(hint, "__name__", str(hint)))


def _mismatch(value: Any, hint: Any, where: str) -> str:
    said = json_kind(value)
    if said == "a number" and not is_figure(value):
        said = f"{value!r}, not a finite number"
    return f"{where} is {said}, not {_kind_of(hint)}"
