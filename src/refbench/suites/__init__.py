"""The one interface every suite implements, and the registry the runner, plan and CLI look suites up in.

A suite is a class with a ``name``, a ``summary``, an ``options`` schema (its plan section and CLI flags)
and seven methods. The runner calls them in this order, and never special-cases a suite:

    cases(plan)        -> list[Case]      the matrix of measurements this plan asks for (stable ids)
    prepare(ctx)       -> None            create data / precondition; idempotent (runs again on resume)
    measure(ctx, case) -> Record          one measurement; the runner stamps it and writes it atomically (a
                                          ServerStalled carries one too: written, then the run ends)
    check(ctx)         -> list[Finding]   correctness: answers, consistency, verify
    summarize(records) -> list[Table]     the tables the papers print
    charts(tables)     -> list[Chart]     the figures the papers show (rendered by the report)
    headlines(records, tables) -> list[Headline]   what the run's verdict leads with: the best it measured

The last three (and ``engines_compared``) are a suite's summary: a built-in suite subclasses ``SuiteBase``, which
takes them from the ``summary.py`` beside it. The data they pass around (Case, Record, Table…) is refbench.records'.
"""

from __future__ import annotations

import functools
import importlib
import os
from types import ModuleType
from typing import TYPE_CHECKING, Any, Protocol

from refbench.errors import ServerGone, UserError
from refbench.records import (Case, Chart, Estimate, Finding, Headline, Record, Table, impossible_figures,
                              is_figure)

if TYPE_CHECKING:
    from refbench.options import Option, Plan
    from refbench.suites.context import SuiteContext

__all__ = ["Case", "Chart", "Estimate", "Finding", "Headline", "Record", "Table", "impossible_figures", "is_figure",
           "Suite", "SuiteBase", "get_suite", "suite_names"]


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


class ServerStalled(ServerGone):
    """A measurement the server stopped answering in: its record (``extra["stalled"]`` says how) is written like any
    other, and then the run ends, since nothing more can be measured on that server."""

    def __init__(self, record: Record, said: str):
        super().__init__(said)
        self.record = record


class DamagedFigure(UserError):
    """A record holding, where its suite computes with a number, something else ("lots", null)."""

    def __init__(self, record: Record, name: str):
        self.where = f"records/{record.suite}/{record.case_id}.json: {name} is not a finite number"
        super().__init__(f"{self.where} ({record.metrics[name]!r}): the record is damaged; remove it, and 'refbench "
                         "resume' measures that case again.")


def check_figures(records: list[Record], names: tuple[str, ...]) -> None:
    """Raises DamagedFigure for the first record whose metric of ``names`` is present and not a finite number."""
    for record in records:
        for name in names:
            if name in record.metrics and not is_figure(record.metrics[name]):
                raise DamagedFigure(record, name)


def suite_figures(name: str) -> tuple[str, ...]:
    """The metrics suite ``name`` computes with (its summary's FIGURES); none for a suite not installed here."""
    try:
        suite = get_suite(name)
    except UserError:
        return ()
    return getattr(suite, "figures", ())


class SuiteBase:
    """What every built-in suite shares: its tables, charts, headlines and engine comparison come from the module
    ``summary`` beside its class (suites/<name>/summary.py), so a suite writes its cases, checks and summary, nothing
    else. The summary loads when a report needs it, not when the suite is looked up (the CLI lists every suite)."""

    @property
    def _summary(self) -> ModuleType:
        return importlib.import_module(f"{type(self).__module__}.summary")

    @property
    def figures(self) -> tuple[str, ...]:
        """The metrics its tables, charts and headlines compute with (its summary's FIGURES): a record holding one
        that is no number is damaged (check_figures)."""
        return getattr(self._summary, "FIGURES", ())

    def summarize(self, records: list[Record]) -> list[Table]:
        check_figures(records, self.figures)
        return self._summary.summarize(records)

    def charts(self, tables: list[Table]) -> list[Chart]:
        return self._summary.charts(tables)

    def headlines(self, records: list[Record], tables: list[Table]) -> list[Headline]:
        check_figures(records, self.figures)
        return self._summary.headlines(records, tables)

    def engines_compared(self, tables: list[Table]) -> list[dict[str, Any]]:
        """One row per engine run, for a suite that runs several (dss, dw); none for the others."""
        compared = getattr(self._summary, "engines_compared", None)
        return compared(tables) if compared else []


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
