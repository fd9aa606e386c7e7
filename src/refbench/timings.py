"""How long each suite takes at each profile: the one table every stated duration comes from (`run --help`, each
suite's `--profile` help, the dry run, the README's table of times, which `python -m refbench.timings --readme`
writes from it; tests/test_timings.py holds the README to it).

Every time is the 2-core, 24 GiB development VM's, with the profile's defaults, measuring alone and each case once,
unless its entry says otherwise (the quick profile's: the example demo's, with its 3 repeats). A time is "measured" (a
run's start to end), "measured in part" (its longest parts measured, the rest reckoned) or "estimated" (reckoned
from the options and measured rates); where there is neither, the table says so.
"""

from __future__ import annotations

import argparse
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

HOST = "a 2-core VM"
HOST_CPUS = 2
HOST_IN_FULL = "the 2-core, 24 GiB development VM"
SUITES = ("device", "oltp", "dss", "dw", "analytics")  # the demo's, in its order
PROFILES = ("quick", "standard", "full")
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
    how: str = ""  # how the time adds up, for the README's table: "a 22-s load, then 5 × 6 min"
    repeats: int = 1  # each headline case measured this many times
    beside: str = ""  # what else ran on the host meanwhile, when something did

    @property
    def span(self) -> str:
        """"31 min", "about 35 min", "30 min–1 h 10 min"."""
        if self.upto_s:
            return f"{duration(self.seconds)}–{duration(self.upto_s)}"
        return duration(self.seconds) if self.basis == "measured" else f"about {duration(self.seconds)}"

    def said(self, basis: bool = True) -> str:
        """"31 min", "about 35 min (estimated)", "30 min–1 h 10 min (estimated)", "15 min with 3 repeats, beside
        another benchmark"; without the basis when ``basis`` is false."""
        text = " ".join(filter(None, [self.span, self.condition, f"with {self.repeats} repeats" if self.repeats > 1 else ""]))
        text += f", beside {self.beside}" if self.beside else ""
        return text + ("" if self.basis == "measured" or not basis else f" ({self.basis})")

    def cell(self) -> str:
        """The README table's cell: the time, and how it was had when that is more than a run of the defaults."""
        if self.how:
            return f"{self.said(basis=False)} ({self.basis}: {self.how})"
        return self.said()

    def lo_hi(self) -> tuple[float, float]:
        return self.seconds, self.upto_s or self.seconds


TIMES: dict[tuple[str, str], Timing] = {
    # The quick profile: the example run (scripts/example_run.py, docs/example/facts.json), `make demo` alone with its
    # 3 repeats, each suite's time as its bar ended (dss on the demo's three engines). The README's example verdict is
    # its. Each case measured once (2026-11-26, a fresh clone at 43662de) they took device 65 s, oltp 33 s, dss 16 s
    # (two engines), dw 36 s, analytics 49 s; beside the false-change reference test's runs the demo took 15 min.
    (DEMO, "quick"): Timing(341, "measured", repeats=3,
                            source="refbench run --plan plans/quick.toml, what make demo runs: run 20261129T152421Z-demo"),
    ("device", "quick"): Timing(67, "measured", repeats=3, source="the demo's device suite"),
    ("oltp", "quick"): Timing(51, "measured", repeats=3, source="the demo's oltp suite"),
    ("dss", "quick"): Timing(34, "measured", repeats=3, condition="on three engines",
                             source="the demo's dss suite (DuckDB, PostgreSQL and MariaDB)"),
    ("dw", "quick"): Timing(70, "measured", repeats=3, source="the demo's dw suite"),
    ("analytics", "quick"): Timing(103, "measured", repeats=3, source="the demo's analytics suite"),
    ("device", "standard"): Timing(1800, "estimated", upto_s=4200, how="120 points × 10–30 s + preconditioning"),
    ("oltp", "standard"): Timing(1860, "measured", how="a 22-s load, then 5 × 6 min"),
    ("dss", "standard"): Timing(4500, "measured in part",
                                how="the loads and power streams measured, the rest reckoned from them; the dss page says how"),
    ("dw", "standard"): Timing(2100, "estimated", how="the dss load, then 2 × 10 min"),
    ("device", "full"): Timing(39600, "estimated", how="576 points × 60 s + preconditioning"),
    ("oltp", "full"): Timing(9000, "estimated", condition="at 1,000 warehouses",
                             how="load about 25 min at the measured 1.5 s a warehouse, then 4 × 30 min"),
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

    return (f"quick: one suite {duration(min(quick))}–{duration(max(quick))}; the demo (every suite) "
            f"{said(DEMO, 'quick')} | standard: {per_suite('standard')} | full (what the papers ran): "
            f"{per_suite('full')} — on {HOST}, standard and full each case once; default: quick.")


def suite_profile_help(suite: str) -> str:
    return " | ".join(f"{profile}: {said(suite, profile)}" for profile in PROFILES) + \
        f" (on {HOST}; standard and full each case once; default: quick)."


# ---- the README's table of times ------------------------------------------------------------------------------

README = Path(__file__).resolve().parents[2] / "README.md"
BEGIN, END = "<!-- times:begin -->", "<!-- times:end -->"


def readme_table() -> str:
    """The README's table of times, between (not including) its markers: every suite's time at every profile, the
    demo's, and what they are."""
    lines = ["<!-- written by `python -m refbench.timings --readme` from src/refbench/timings.py: edit the times there -->",
             "| suite | " + " | ".join(f"`{p}`" for p in PROFILES) + " |", "|---" * (1 + len(PROFILES)) + "|"]
    for suite in SUITES:
        lines.append(f"| {suite} | " + " | ".join(TIMES[(suite, p)].cell() if (suite, p) in TIMES else NOT_MEASURED
                                                   for p in PROFILES) + " |")
    demo = TIMES[(DEMO, "quick")]
    lines.append("| the demo (`make demo`: every suite at `quick`) | "
                 + " | ".join(demo.cell() if p == "quick" else "—" for p in PROFILES) + " |")
    lines += [""] + textwrap.wrap(
        f"Each time is {HOST_IN_FULL}'s, with the profile's defaults, measuring alone: `quick` the example demo's "
        "suites with their 3 repeats (the README's example verdict is its), `standard` and `full` each case once (before "
        "3 repeats became the default) unless it says otherwise; \"measured in part\": its longest parts measured, the "
        "rest reckoned. `--dry-run` says two things per suite: its estimate for your plan on your host, repeats "
        "included, and the time in this table, with why they differ where they differ by more than a quarter.", 118,
        break_on_hyphens=False)
    return "\n".join(lines)


def rewrite_readme(text: str) -> str:
    """``text`` (the README) with the table of times between its markers written anew."""
    start, end = text.index(BEGIN) + len(BEGIN), text.index(END)
    return text[:start] + "\n" + readme_table() + "\n" + text[end:]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m refbench.timings", description="The table of times, as the README shows it.")
    parser.add_argument("--readme", nargs="?", const=str(README), metavar="FILE",
                        help="rewrite the table between the times markers of FILE (default: the README.md of this checkout)")
    parser.add_argument("--check", action="store_true", help="with --readme: change nothing, exit 1 if the file differs")
    args = parser.parse_args(argv)
    if not args.readme:
        print(readme_table())
        return 0
    path = Path(args.readme)
    text = path.read_text()
    new = rewrite_readme(text)
    if args.check:
        if new != text:
            print(f"{path}: the table of times differs from src/refbench/timings.py's; "
                  "`python -m refbench.timings --readme` rewrites it.", file=sys.stderr)
            return 1
        return 0
    if new != text:
        path.write_text(new)
        print(f"{path}: table of times rewritten")
    return 0


if __name__ == "__main__":
    sys.exit(main())
