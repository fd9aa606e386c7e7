"""One trial of `refbench tune`: the same suite run as A and as B in turns (A B A B …), each run a normal refbench run
kept in the tune directory, and the headline figure of the runs judged with the comparison's own statistics
(report.compare.significance: Welch's t-test on the logarithms, the ratio's 95% interval)."""

from __future__ import annotations

import functools
import json
import math
import signal
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from refbench.children import die_with_parent, watchdog
from refbench.report.compare import SAME_WITHIN, Figure, direction, repeats_to_resolve, significance
from refbench.suites import get_suite, is_figure


@dataclass
class Objective:
    """The figure a tune improves: the baseline's lead headline (its metric, and what tells it from the suite's
    other headlines of that metric)."""

    suite: str
    metric: str
    of: str
    label: str
    unit: str

    def value_in(self, verdict: list[dict[str, Any]]) -> float | None:
        for v in verdict:
            if v.get("suite") != self.suite:
                continue
            mine = [h for h in v.get("headlines", []) if h.get("metric") == self.metric and h.get("of", "") == self.of]
            for h in mine or v.get("headlines", [])[:1]:
                return float(h["value"]) if is_figure(h.get("value")) and not h.get("unrated") else None
        return None


@dataclass
class SideRun:
    side: str  # "A" or "B"
    run: str  # the run directory
    value: float | None
    wall_s: float
    error: str = ""


@dataclass
class Judgement:
    kept: bool
    gain_pct: float | None  # how much better B is than A (the objective's direction), %
    ci_low_pct: float | None
    ci_high_pct: float | None
    p: float | None
    why: str
    a: list[float] = field(default_factory=list)
    b: list[float] = field(default_factory=list)


def toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    return json.dumps(str(value))  # a TOML basic string is a JSON string


def plan_text(profile: str, suite: str, options: dict[str, Any], comment: str = "",
              top: dict[str, Any] | None = None) -> str:
    """A plan of ``suite`` with ``options``; ``top``: the plan's own keys besides (its targets, work_dir…)."""
    # repeats = 1: tune repeats runs itself, A B A B; a profile's own repeats would measure each run's case again.
    lines = [f"# {line}" for line in comment.splitlines()] + [f"profile = {toml_value(profile)}",
                                                               f"suites = [{toml_value(suite)}]", "repeats = 1"]
    lines += [f"{key} = {toml_value(value)}" for key, value in (top or {}).items()] + ["", f"[{suite}]"]
    # Only what differs from the suite's defaults at the profile: a plan says what it changes (and a plan may not
    # write some defaults back, such as an empty list of settings).
    schema = get_suite(suite).options
    lines += [f"{key} = {toml_value(value)}" for key, value in options.items()
              if value is not None and (key not in schema or value != schema[key].default_for(profile))]
    return "\n".join(lines) + "\n"


RUN_STOP_S = 60.0  # what a run is given to stop its server cleanly after a SIGTERM


def run_side(plan: Path, runs_dir: Path, name: str, log: Path, objective: Objective | None, side: str) -> SideRun:
    """One refbench run of ``plan``; its output goes to ``log``. Ctrl-C reaches the run too (same terminal), which
    stops cleanly; tune waits for that before it goes on stopping."""
    started = time.monotonic()
    with open(log, "ab") as out:
        out.write(f"\n=== {side}: refbench run --plan {plan} --name {name}\n".encode())
        out.flush()
        child = subprocess.Popen([sys.executable, "-m", "refbench", "run", "--plan", str(plan), "--runs-dir",
                                  str(runs_dir), "--name", name, "--json"], stdin=subprocess.DEVNULL,
                                 stdout=subprocess.PIPE, stderr=out,
                                 preexec_fn=functools.partial(die_with_parent, signal.SIGTERM))
        # Should tune be killed, its watchdog waits for the run to stop its server before it removes what tune made.
        guard = watchdog().register(pid=child.pid, grace_s=RUN_STOP_S)
        try:
            stdout, _ = child.communicate()
        except KeyboardInterrupt:
            try:  # Ctrl-C in a terminal reached the run as well; a signal sent to tune alone did not
                child.wait(timeout=2)
            except subprocess.TimeoutExpired:
                child.send_signal(signal.SIGINT)
                child.wait()
            raise
        finally:
            guard.release()
        out.write(stdout)
    lines = [line for line in stdout.decode(errors="replace").splitlines() if line.strip()]
    wall = time.monotonic() - started
    run_dir = Path(lines[-1]) if lines else None
    if child.returncode not in (0, 1) or run_dir is None or not (run_dir / "verdict.json").exists():
        tail = [line for line in log.read_text(errors="replace").splitlines() if line.startswith("refbench:")]
        return SideRun(side, str(run_dir or ""), None, wall, tail[-1] if tail else f"exit status {child.returncode}")
    if child.returncode == 1:
        return SideRun(side, str(run_dir), None, wall, "a correctness check failed (see the run's report)")
    value = objective.value_in(json.loads((run_dir / "verdict.json").read_text())) if objective else None
    return SideRun(side, str(run_dir), value, wall, "" if value is not None or objective is None else
                   f"the run has no {objective.label}")


def interleaved(repeats: int, run: Callable[[str, int], SideRun]) -> list[SideRun]:
    """A B A B …: ``repeats`` runs a side, in turns, so that a drift of the host (a neighbour, a warming cache) falls
    on both sides alike. Stops at the first run that fails."""
    out = []
    for i in range(repeats):
        for side in "AB":
            out.append(run(side, i + 1))
            if out[-1].error:
                return out
    return out


def judge(metric: str, runs: list[SideRun]) -> Judgement:
    """Kept when B is better than A significantly (the comparison's rule) and by at least SAME_WITHIN."""
    failed = next((r for r in runs if r.error), None)
    a = [r.value for r in runs if r.side == "A" and r.value is not None]
    b = [r.value for r in runs if r.side == "B" and r.value is not None]
    if failed is not None:
        return Judgement(False, None, None, None, None, f"{failed.side} run failed: {failed.error}", a, b)
    if len(a) < 2 or len(b) < 2:
        return Judgement(False, None, None, None, None, "one run a side cannot tell a change from noise", a, b)
    fa, fb = Figure(statistics.fmean(a), a, f"{len(a)} repeats"), Figure(statistics.fmean(b), b, f"{len(b)} repeats")
    significant, test, _ = significance(fa, fb)
    sense = direction(metric) or 1
    gain = (fb.value / fa.value) ** sense - 1 if fa.value and fb.value else math.nan
    low = high = None
    if test is not None and test.low > 0:
        low, high = sorted(((test.low ** sense) - 1, (test.high ** sense) - 1))
    better = significant and gain >= SAME_WITHIN
    worse = significant and gain <= -SAME_WITHIN
    interval = f" (95% CI {low:+.1%} … {high:+.1%}, p {test.p:.3f})" if low is not None else ""
    why = (f"better by {gain:+.1%}{interval}" if better else f"worse by {gain:+.1%}{interval}" if worse else
           f"no significant change: {gain:+.1%}{interval}")
    if not significant and test is not None and test.log_sd:
        n = repeats_to_resolve(test.log_sd)
        why += (f"; the runs spread by {math.expm1(test.log_sd):.1%} each: "
                + (f"--repeats {n} would resolve a 5% change" if n else "more than 50 a side would be needed to resolve 5%"))
    return Judgement(better, round(gain * 100, 2), None if low is None else round(low * 100, 2),
                     None if high is None else round(high * 100, 2), None if test is None else round(test.p, 4),
                     why, a, b)
