"""How long each suite takes at each profile: the one table every stated duration comes from (`run --help`, each
suite's `--profile` help, the dry run, the README; tests/test_timings.py holds the README to it).

Every time is the 2-core, 24 GiB development VM's, with the profile's defaults, measuring alone. A time is
"measured" (a run's start to end), "measured in part" (its longest parts measured, the rest reckoned) or
"estimated" (reckoned from the options and measured rates); where there is neither, the table says so.
"""

from __future__ import annotations

from dataclasses import dataclass

HOST = "a 2-core VM"
SUITES = ("device", "oltp", "dss", "dw", "analytics")  # the demo's, in its order
DEMO = "demo"  # plans/quick.toml: every suite at the quick profile, as `make demo` runs it


def duration(seconds: float) -> str:
    """A time as people say it: 45 s, 3 min 16 s, 35 min, 1 h 15 min, 11 h."""
    seconds = round(seconds)
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 600:
        return f"{seconds // 60} min" + (f" {seconds % 60} s" if seconds % 60 else "")
    hours, minutes = divmod(round(seconds / 60), 60)
    return (f"{hours} h" + (f" {minutes} min" if minutes else "")) if hours else f"{minutes} min"


@dataclass(frozen=True)
class Timing:
    seconds: float
    basis: str  # measured | measured in part | estimated
    upto_s: float = 0.0  # a range's upper end, when the time is one
    condition: str = ""  # what the time holds for, when the profile alone does not say: "at 1,000 warehouses"
    source: str = ""  # the run or command it comes from

    def said(self) -> str:
        """"31 min", "about 35 min (estimated)", "30–70 min (estimated)"."""
        span = f"{duration(self.seconds)}–{duration(self.upto_s)}" if self.upto_s else duration(self.seconds)
        if self.basis != "measured" and not self.upto_s:
            span = f"about {span}"
        where = f" {self.condition}" if self.condition else ""
        return f"{span}{where}" + ("" if self.basis == "measured" else f" ({self.basis})")


TIMES: dict[tuple[str, str], Timing] = {
    # `time make demo` and `time refbench SUITE` (its defaults) in a fresh clone at 43662de, 2026-11-26, one at a time,
    # each case measured once (the quick profile's repeats were 1 then; the dry run says so beside them).
    # The demo with its 3 repeats (2026-11-27), beside the false-change reference test's runs.
    (DEMO, "quick"): Timing(909, "measured", condition="with 3 repeats, beside another benchmark",
                            source="refbench run --plan plans/quick.toml, what make demo runs: run 20261127T140717Z-demo"),
    ("device", "quick"): Timing(65, "measured", source="refbench device"),
    ("oltp", "quick"): Timing(33, "measured", source="refbench oltp"),
    ("dss", "quick"): Timing(16, "measured", source="refbench dss (DuckDB and PostgreSQL)"),
    ("dw", "quick"): Timing(36, "measured", source="refbench dw"),
    ("analytics", "quick"): Timing(49, "measured", source="refbench analytics"),
    ("device", "standard"): Timing(1800, "estimated", upto_s=4200, source="120 points × 10–30 s + preconditioning"),
    ("oltp", "standard"): Timing(1860, "measured", source="a 22-s load, then 5 × 6 min"),
    ("dss", "standard"): Timing(4500, "measured in part", source="README, dss: the queries timed, the loads measured"),
    ("dw", "standard"): Timing(2100, "estimated", source="the dss load, then 2 × 10 min"),
    ("device", "full"): Timing(39600, "estimated", source="576 points × 60 s + preconditioning"),
    ("oltp", "full"): Timing(9000, "estimated", condition="at 1,000 warehouses",
                             source="load about 25 min at the measured 1.5 s a warehouse, then 4 × 30 min"),
}
NOT_MEASURED = "not measured"


def said(suite: str, profile: str) -> str:
    timing = TIMES.get((suite, profile))
    return timing.said() if timing else NOT_MEASURED


def profile_help() -> str:
    """The run command's --profile help: the demo's time, then each profile's time per suite."""
    quick = [TIMES[(s, "quick")].seconds for s in SUITES]

    def per_suite(profile: str) -> str:
        missing = [s for s in SUITES if (s, profile) not in TIMES]
        return ", ".join(f"{s} {said(s, profile)}" for s in SUITES if s not in missing) + (
            f"; {', '.join(missing)} {NOT_MEASURED}" if missing else "")

    return (f"quick: every suite, {said(DEMO, 'quick')} for the demo (one suite {duration(min(quick))}–"
            f"{duration(max(quick))}) | standard: {per_suite('standard')} | full (what the papers ran): "
            f"{per_suite('full')} — on {HOST}; default: quick.")


def suite_profile_help(suite: str) -> str:
    return " | ".join(f"{profile}: {said(suite, profile)}" for profile in ("quick", "standard", "full")) + \
        f" (on {HOST}; default: quick)."
