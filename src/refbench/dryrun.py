"""``refbench run --dry-run``: the plan as a run would use it, after the same checks a run makes before it writes,
and nothing written — every option with its value and where it came from, each suite's cases, an estimate of the
time, and the space each directory needs against what its file system has free."""

from __future__ import annotations

import dataclasses

import os
import textwrap
from pathlib import Path
from typing import Any

from refbench import runner
from refbench.errors import UserError
from refbench.plan import TOP_LEVEL, Plan
from refbench.redaction import redact
from refbench.suites import Case, Estimate, get_suite
from refbench.suites.device.targets import FREE_SPACE_MARGIN, free_bytes
from refbench.timings import DEMO, HOST, TIMES, duration


def dry_run(plan: Plan) -> list[str]:
    """The dry run's lines; raises UserError, after they are built, when the plan's data cannot fit."""
    before = {name: dict(options) for name, options in plan.options.items()}
    cases = runner.expand(plan)
    estimates = {name: _estimate(name, plan, cases[name]) for name in plan.suites}
    lines = ["dry run: the plan as a run would use it; nothing was written.", "", "plan:"]
    lines += _option_lines({key: getattr(plan, key) for key in TOP_LEVEL}, plan.origins)
    for name in plan.suites:
        resolved = plan.options[name]
        origins = {key: plan.origins.get(f"{name}.{key}", "") for key in resolved}
        for key, value in resolved.items():
            if before[name].get(key) != value:  # sized by the suite itself, e.g. warehouses 0: to the free space
                origins[key] += f", then {value!r} sized by {name} (was {before[name][key]!r})"
        lines += ["", f"{name} options:"] + _option_lines(resolved, origins)
    total = 0.0
    for name in plan.suites:
        estimate = estimates[name]
        count = f"{len(cases[name])} case{'' if len(cases[name]) == 1 else 's'}"
        lines += ["", f"{name}: {count}, " + (f"about {duration(estimate.seconds)} (an estimate)" if estimate
                                              else "no time estimate (the suite offers none)")]
        if estimate:
            lines += textwrap.wrap(f"reckoned as: {estimate.method}", 78, initial_indent="  ", subsequent_indent="    ")
        if timing := TIMES.get((name, plan.profile)):
            once = " measuring each case once" if plan.profile == "quick" else ""
            lines += textwrap.wrap(f"the {plan.profile} profile's defaults took {timing.said()}{once} on {HOST}", 78,
                                   initial_indent="  ", subsequent_indent="    ")
        width = max((len(c.id) for c in cases[name]), default=0)
        lines += [f"  {c.id:<{width}}  {c.title}" for c in cases[name]]
        total += estimate.seconds if estimate else 0
    if plan.suites:
        missing = [name for name in plan.suites if not estimates[name]]
        amount = f"more than {duration(total)} ({', '.join(missing)} not estimated)" if missing else f"about {duration(total)}"
        lines += [""] + textwrap.wrap(f"time: {amount} in all (an estimate, for measuring alone on this host; the host "
                                      "inventory and the report add seconds)", 78, subsequent_indent="  ")
        if plan.repeats > 1 and not missing:
            once = _total_once(plan)
            lines += textwrap.wrap(f"repeats: each headline case measured {plan.repeats} times ({plan.origins.get('repeats', '')}), "
                                   f"so that compare can tell a change from this host's noise; they take about "
                                   f"{duration(max(0.0, total - once))} of it (--repeats 1: about {duration(once)}; compare "
                                   "then tests against the spread earlier repeats measured on this host, if any)", 78, subsequent_indent="  ")
        demo = TIMES[(DEMO, "quick")]
        if plan.profile == "quick" and len(plan.suites) > 1:
            lines += textwrap.wrap(f"the demo (every suite at the quick profile) took {demo.said()} on {HOST} "
                                   f"({demo.source})", 78, subsequent_indent="  ")
    lines += ["", "space (what the plan writes, against the free space now):"]
    problems = []
    for directory, parts in _by_file_system(estimates).items():
        needed, free = sum(size for _, size, _ in parts), free_bytes(Path(directory))
        fits = needed + FREE_SPACE_MARGIN <= free
        lines.append(f"  {directory}: needs {gb(needed)} of {gb(free)} free — {'fits' if fits else 'DOES NOT FIT'}")
        lines += [f"    {gb(size)}  {what} ({path})" for path, size, what in parts]
        if not fits:
            problems.append(f"the file system of {directory} has {gb(free)} free and the plan needs {gb(needed)} there "
                            f"({', '.join(what for _, _, what in parts)})")
    if not any(e and e.space for e in estimates.values()):
        lines.append("  nothing beyond the run directory's records and report")
    if problems:
        raise DoesNotFit(lines, f"the plan does not fit: {'; '.join(problems)}.")
    return lines


def _total_once(plan: Plan) -> float:
    """The plan's estimated time with each case measured once."""
    single = dataclasses.replace(plan, repeats=1, options={name: dict(o) for name, o in plan.options.items()})
    cases = runner.expand(single)
    return sum(e.seconds for name in single.suites if (e := _estimate(name, single, cases[name])))


class DoesNotFit(UserError):
    """The dry run's lines, and the sentence that refuses the plan."""

    def __init__(self, lines: list[str], sentence: str):
        super().__init__(sentence)
        self.lines = lines


def _estimate(name: str, plan: Plan, cases: list[Case]) -> Estimate | None:
    hook = getattr(get_suite(name), "estimate", None)
    return hook(plan, cases) if hook is not None else None


def _by_file_system(estimates: dict[str, Estimate | None]) -> dict[str, list[tuple[str, int, str]]]:
    """Each estimate's (directory, bytes, what), gathered under the first directory named on each file system."""
    groups: dict[int, tuple[str, list[tuple[str, int, str]]]] = {}
    for estimate in estimates.values():
        for directory, size, what in estimate.space if estimate else []:
            first, parts = groups.setdefault(_device(directory), (directory, []))
            parts.append((directory, size, what))
    return {first: parts for first, parts in groups.values()}


def _device(directory: str) -> int:
    existing = Path(directory).absolute()
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    return os.stat(existing).st_dev


def _option_lines(values: dict[str, Any], origins: dict[str, str]) -> list[str]:
    """One line an option: key, where the value came from, value (last: a list can be long)."""
    width = max(len(k) for k in values)
    origin_width = max(len(origins.get(k, "")) for k in values)
    return [f"  {key:<{width}}  {origins.get(key, ''):<{origin_width}}  {shown_value(value, key)}" for key, value in values.items()]


def shown_value(value: Any, key: str = "") -> str:
    """A value as a flag takes it: lists comma-separated, byte sizes (keys ending in size or sizes) as 4k, 1m, 32g."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return ",".join(shown_value(v, key) for v in value) or "(none)"
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, str):
        return redact(value) if value else '""'
    if isinstance(value, int) and key.endswith(("size", "sizes")):
        for suffix, unit in (("g", 2**30), ("m", 2**20), ("k", 2**10)):
            if value and value % unit == 0:
                return f"{value // unit}{suffix}"
    return str(value)


def gb(size: float) -> str:
    return f"{size / 1e9:,.2f} GB"
