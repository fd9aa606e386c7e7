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
from refbench.timings import DEMO, HOST, HOST_CPUS, SUITES, TIMES, Timing, duration


def dry_run(plan: Plan) -> list[str]:
    """The dry run's lines; raises UserError, after they are built, when the plan's data cannot fit."""
    before = {name: dict(options) for name, options in plan.options.items()}
    cases = runner.expand(plan)
    estimates = {name: _estimate(name, plan, cases[name]) for name in plan.suites}
    once = _once(plan) if plan.repeats > 1 else {name: e.seconds if e else 0.0 for name, e in estimates.items()}
    defaults = _once(plan, defaults=True)
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
        lines += ["", f"{name}: {count}"]
        if estimate:
            lines += _wrap(f"estimate for this plan, {_with_repeats(plan)}: about {duration(estimate.seconds)}", 2)
            lines += _wrap(f"reckoned as: {estimate.method}", 4)
        else:
            lines += ["  no time estimate (the suite offers none)"]
        timing = TIMES.get((name, plan.profile))
        lines += _wrap(_measured(f"the {plan.profile} profile's defaults", timing, plan.profile), 2)
        if estimate and timing and (why := _why(estimate.seconds, once[name], timing, plan, name, defaults.get(name))):
            lines += _wrap(why, 2)
        width = max((len(c.id) for c in cases[name]), default=0)
        lines += [f"  {c.id:<{width}}  {c.title}" for c in cases[name]]
        total += estimate.seconds if estimate else 0
    if plan.suites:
        missing = [name for name in plan.suites if not estimates[name]]
        amount = f"more than {duration(total)} ({', '.join(missing)} not estimated)" if missing else f"about {duration(total)}"
        lines += [""] + _wrap(f"estimate for this plan in all, {_with_repeats(plan)}: {amount} (measuring alone on this "
                              "host; the host inventory and the report add seconds)", 0)
        total_once = sum(once.values())
        if plan.repeats > 1 and not missing:
            lines += _wrap(f"repeats: each headline case measured {plan.repeats} times ({plan.origins.get('repeats', '')}), "
                           f"so that compare can tell a change from this host's noise; they take about "
                           f"{duration(max(0.0, total - total_once))} of it (--repeats 1: about {duration(total_once)}; compare "
                           "then tests against the spread earlier repeats measured on this host, if any)", 0)
        if plan.profile == "quick" and len(plan.suites) > 1:
            demo = TIMES[(DEMO, "quick")]
            lines += _wrap(_measured("the demo (every suite at the quick profile)", demo, "quick")
                           + f" ({demo.source})", 0)
            if not missing and (why := _why(total, total_once, demo, plan, None)):
                lines += _wrap(why, 0)
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


def _once(plan: Plan, defaults: bool = False) -> dict[str, float]:
    """Each suite's estimated time with each case measured once: of this plan, or of its profile's defaults (of the
    suites whose defaults fit here: the estimate is then held against the table's time of them)."""
    options = {name: ({key: option.default_for(plan.profile) for key, option in get_suite(name).options.items()}
                      if defaults else dict(o)) for name, o in plan.options.items()}
    single = dataclasses.replace(plan, repeats=1, options=options)
    try:
        cases = runner.expand(single)
    except UserError:  # the defaults do not fit, or need what this plan gives
        return {}
    return {name: e.seconds if (e := _estimate(name, single, cases[name])) else 0.0 for name in single.suites}


def _wrap(text: str, indent: int) -> list[str]:
    return textwrap.wrap(text, 78, initial_indent=" " * indent, subsequent_indent=" " * (indent + 2))


def _with_repeats(plan: Plan) -> str:
    return f"with its {plan.repeats} repeats" if plan.repeats > 1 else "each case once"


def _measured(what: str, timing: Timing | None, profile: str) -> str:
    """The table's time beside the estimate, said as what it is: "measured: the standard profile's defaults took 31 min
    on a 2-core VM (each case measured once, before repeats became the default)"."""
    if timing is None:
        return f"measured: not yet at the {profile} profile (the table of times has none)"
    verb = "take" if timing.basis == "estimated" else "took"
    once = ("each case measured once, before repeats became the default" if timing.basis != "estimated"
            else "each case once") if timing.repeats == 1 else ""
    return f"{timing.basis}: {what} {verb} {timing.said(basis=False)} on {HOST}" + (f" ({once})" if once else "")


def _why(estimate_s: float, once_s: float, timing: Timing, plan: Plan, name: str | None,
         defaults_s: float | None = None) -> str:
    """Where the estimate and the table's time differ by more than a quarter, one line saying why; else "".
    ``once_s``: the estimate with each case once; ``defaults_s``: the estimate of the profile's defaults, each case
    once (is the estimate itself off, or does the plan differ?)."""
    low, high = timing.lo_hi()

    def off(seconds: float) -> float:
        return 0.0 if low <= seconds <= high else seconds / high - 1 if seconds > high else seconds / low - 1

    def longer(fraction: float) -> str:  # 37% longer, 2.1× as long, 48% shorter
        return f"{1 + fraction:.1f}× as long" if fraction > 1 else f"{abs(fraction):.0%} {'longer' if fraction > 0 else 'shorter'}"

    difference = off(estimate_s)
    if abs(difference) <= DIFFERS:
        return ""
    reasons = []
    # The repeats are a reason when they move the estimate the way it differs, by more than a little.
    repeated = (plan.repeats - timing.repeats) * difference > 0 and (timing.repeats != 1
                                                                      or estimate_s - once_s >= 0.05 * estimate_s)
    if repeated and timing.repeats == 1:
        reasons.append(f"it counts the {plan.repeats} repeats (about {duration(max(0.0, estimate_s - once_s))} of it; "
                       f"without them about {duration(once_s)})")
    elif repeated:
        reasons.append(f"it counts {plan.repeats} repeat{'s' if plan.repeats > 1 else ''}, the measured run "
                       f"{timing.repeats}")
    rest = off(once_s) if timing.repeats == 1 else off(estimate_s) if plan.repeats == timing.repeats else 0.0
    if abs(rest) > DIFFERS or not reasons:
        if name is None and tuple(plan.suites) != SUITES:
            reasons.append(f"this plan runs {', '.join(plan.suites)}, the demo {', '.join(SUITES)}")
        changed = _changed(plan, name) if name else []
        if changed:
            reasons.append(f"this plan's {' and '.join([', '.join(changed[:-1]), changed[-1]])} differ from the defaults"
                           if len(changed) > 1 else f"this plan's {changed[0]} differs from the default")
        error = off(defaults_s) if defaults_s is not None else rest or difference  # the estimate's own
        if abs(error) > DIFFERS or not reasons:
            context = [f"this host has {os.cpu_count()} CPUs, the VM {HOST_CPUS}"] if (os.cpu_count() or 1) != HOST_CPUS else []
            context += [f"the measured run shared the host with {timing.beside}"] if timing.beside else []
            context += [f"the time beside it is {timing.basis}{' too' * (timing.basis == 'estimated')}"] \
                if timing.basis != "measured" else []
            reckoned = "reckoned from the options and rates measured earlier, not from a run"
            reasons += context or [f"the estimate{' of the defaults' if changed else ''} is itself {longer(error)}, being "
                                   f"{reckoned}" if reasons else f"it is {reckoned}"]
    if timing.beside and difference < 0 and not any(timing.beside in reason for reason in reasons):
        reasons.append(f"the measured run shared the host with {timing.beside}")
    return f"why the estimate is {longer(difference)}: " + "; ".join(reasons)


DIFFERS = 0.25  # the estimate and the table's time differ enough to say why


def _changed(plan: Plan, name: str) -> list[str]:
    """The suite's options that this plan sets away from the profile's defaults, as "key=value"."""
    options = get_suite(name).options
    changed = [f"{key}={shown_value(value, key)}" for key, value in plan.options[name].items()
               if key in options and value != options[key].default_for(plan.profile)]
    return changed[:3] + ([f"{len(changed) - 3} more"] if len(changed) > 3 else [])


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
