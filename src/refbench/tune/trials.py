"""One trial of `refbench tune`: the same suite run as A and as B in turns (A B B A, then A B B A again for more
repeats), each run a normal refbench run kept in the tune directory, and the headline figure of the runs judged by
the one estimator every comparison uses (refbench.estimate: Student's pooled t-test on the logarithms of the runs' figures,
each run a replicate; the interval at the confidence of the family judged, Bonferroni)."""

from __future__ import annotations

import functools
import json
import math
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from refbench import estimate
from refbench.children import die_with_parent, watchdog
from refbench.figures import direction
from refbench.report.compare import SAME_WITHIN
from refbench.runstore import Run
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
    load: str = ""  # the loaded database the run started from a copy of ("": it loaded its own, or has none)
    disturbed: str = ""  # neighbours took the machine while its objective was measured (its verdict says how)
    run_again: bool = False  # disturbed, and measured again in its place: not judged


@dataclass
class Judgement:
    kept: bool
    gain_pct: float | None  # how much better B is than A (the objective's direction), %
    ci_low_pct: float | None
    ci_high_pct: float | None
    p: float | None  # unadjusted
    why: str
    a: list[float] = field(default_factory=list)
    b: list[float] = field(default_factory=list)
    family: int = 1  # the comparisons judged together (Bonferroni): the interval and the p that decided are over it
    p_adjusted: float | None = None


def toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    return json.dumps(str(value))  # a TOML basic string is a JSON string


def plan_text(profile: str, suite: str, options: dict[str, Any], comment: str = "",
              top: dict[str, Any] | None = None, repeats: int = 1) -> str:
    """A plan of ``suite`` with ``options``; ``top``: the plan's own keys besides (its targets, work_dir…)."""
    # repeats = 1 in tune's own runs: tune repeats runs itself, A B B A; a profile's own repeats would measure each
    # run's case again. The tuned plan says the repeats its answer was judged at.
    lines = [f"# {line}" for line in comment.splitlines()] + [f"profile = {toml_value(profile)}",
                                                               f"suites = [{toml_value(suite)}]", f"repeats = {repeats}"]
    lines += [f"{key} = {toml_value(value)}" for key, value in (top or {}).items()] + ["", f"[{suite}]"]
    # Only what differs from the suite's defaults at the profile: a plan says what it changes (and a plan may not
    # write some defaults back, such as an empty list of settings).
    schema = get_suite(suite).options
    lines += [f"{key} = {toml_value(value)}" for key, value in options.items()
              if value is not None and (key not in schema or value != schema[key].default_for(profile))]
    return "\n".join(lines) + "\n"


RUN_STOP_S = 60.0  # what a run is given to stop its server cleanly after a SIGTERM


LIVE_EVERY_S = 15.0  # how often tune shows the figures so far of the run it waits for


def run_side(plan: Path, runs_dir: Path, name: str, log: Path, objective: Objective | None, side: str,
             live: Callable[[str], None] = lambda line: None) -> SideRun:
    """One refbench run of ``plan``; its output goes to ``log``, and every LIVE_EVERY_S the newest line it wrote there
    (its figures so far, every few seconds, or the step it is at) to ``live``. Ctrl-C reaches the run too (same
    terminal), which stops cleanly; tune waits for that before it goes on stopping."""
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
            stdout, said, offset = None, "", log.stat().st_size
            while stdout is None:
                try:
                    stdout, _ = child.communicate(timeout=LIVE_EVERY_S)
                except subprocess.TimeoutExpired:
                    newest, offset = _newest_line(log, offset)
                    if newest and newest != said:
                        live(newest)
                        said = newest
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
        failed = [f.check for suite in Run(run_dir).findings().values() for f in suite if not f.passed]
        named = f": {'; '.join(failed[:3])}{' …' if len(failed) > 3 else ''}" if failed else ""
        return SideRun(side, str(run_dir), None, wall, f"a correctness check failed{named} (the run's report says why)")
    verdict = json.loads((run_dir / "verdict.json").read_text())
    value = objective.value_in(verdict) if objective else None
    disturbed = next((v.get("disturbed", "") for v in verdict if objective and v.get("suite") == objective.suite), "")
    return SideRun(side, str(run_dir), value, wall, "" if value is not None or objective is None else
                   f"the run has no {objective.label}", disturbed=disturbed)


def _newest_line(log: Path, offset: int) -> tuple[str, int]:
    """The last whole line the run wrote to the log after ``offset`` (its figures so far, or the step it is at), and
    where its last whole line ends: a line still being written is read the next time, whole."""
    with open(log, "rb") as f:
        f.seek(offset)
        added = f.read()
    whole = added[:added.rfind(b"\n") + 1]
    lines = [line.strip() for line in whole.decode(errors="replace").splitlines() if line.strip()]
    return (lines[-1] if lines else ""), offset + len(whole)


def interleaved(repeats: int, run: Callable[[str, int], SideRun],
                again: Callable[[SideRun], bool] = lambda _: False) -> list[SideRun]:
    """A B B A …: ``repeats`` runs a side in pairs whose order alternates (A B, B A, A B, …), so that a drift of the
    host (a neighbour, a warming cache, a filling device) falls on both sides alike: with A always first, a drift
    down would favour A. ``run(side, i)``: the i-th run of that side (also the i-th pair). Stops at the first run
    that fails. A run its neighbours disturbed is run again while ``again(it)`` says the budget allows (once each),
    and the disturbed one is kept but not judged (judge)."""
    out = []
    for i in range(1, repeats + 1):
        for side in ("AB" if i % 2 else "BA"):
            out.append(run(side, i))
            if out[-1].disturbed and not out[-1].error and again(out[-1]):
                out[-1].run_again = True
                out.append(run(side, i))
            if out[-1].error:
                return out
    return out


def judge(metric: str, runs: list[SideRun], family: int = 1) -> Judgement:
    """Kept when B is better than A significantly — estimate.ratio's t-test on the runs, its p adjusted over
    ``family`` comparisons (Bonferroni) below ALPHA — and by at least SAME_WITHIN."""
    failed = next((r for r in runs if r.error), None)
    # A disturbed run measured the neighbours as much as the change; one run again in its place is judged instead.
    runs = [r for r in runs if not r.run_again]
    a = [r.value for r in runs if r.side == "A" and r.value is not None]
    b = [r.value for r in runs if r.side == "B" and r.value is not None]
    family = max(1, family)
    if failed is not None:
        return Judgement(False, None, None, None, None, f"{failed.side} run failed: {failed.error}", a, b, family)
    if len(a) < 2 or len(b) < 2:
        return Judgement(False, None, None, None, None, "one run a side cannot tell a change from noise", a, b, family)
    est = estimate.ratio(a, b, family)
    if est.ratio is None or est.p is None:
        return Judgement(False, None, None, None, None, f"not judged: {est.basis}", a, b, family)
    sense = direction(metric) or 1
    gain = est.ratio ** sense - 1 if est.ratio > 0 else math.nan
    low = high = None
    if est.low is not None and est.low > 0:
        low, high = sorted(((est.low ** sense) - 1, (est.high ** sense) - 1))
    better = est.significant and gain >= SAME_WITHIN
    worse = est.significant and gain <= -SAME_WITHIN
    p_words = f"p {est.p:.3f}" if family == 1 else f"p {est.p:.3f}, {est.p_adjusted:.3f} adjusted for {family}"
    level = "95% CI" if family == 1 else f"{est.confidence:.1%} CI, Bonferroni over {family}"
    interval = f" ({level} {low:+.1%} … {high:+.1%}, {p_words})" if low is not None else f" ({p_words})"
    if better:
        why = f"better by {gain:+.1%}{interval}"
    elif worse:
        why = f"worse by {gain:+.1%}{interval}"
    elif est.significant:
        why = f"no change worth keeping: {gain:+.1%}{interval}, under the {SAME_WITHIN:.0%} a kept change needs"
    else:
        why = f"no significant change: {gain:+.1%}{interval}"
        if est.log_sd:
            n = estimate.repeats_to_resolve(est.log_sd, family=family)
            why += (f"; the runs spread by {math.expm1(est.log_sd):.1%} each: "
                    + (f"--repeats {n} would resolve a {estimate.RESOLVE:.0%} change" if n else
                       f"more than {estimate.MOST_REPEATS} a side would be needed to resolve {estimate.RESOLVE:.0%}"))
    return Judgement(better, round(gain * 100, 2), None if low is None else round(low * 100, 2),
                     None if high is None else round(high * 100, 2), round(est.p, 4), why, a, b, family,
                     round(est.p_adjusted, 4))


def adjusted_for_trials(judgements: Sequence[Judgement], kept: Sequence[bool] | None = None
                        ) -> list[tuple[float | None, str]]:
    """What a multiple-comparison correction over every trial tried says of each: (its p adjusted for them all,
    Bonferroni; the words when a trial that was kept would not be kept after it, else ""). Each trial is judged on
    its own at ALPHA, so among many trials of changes that do nothing one in twenty is kept by chance: a trial that
    holds only unadjusted says so. ``kept``: which trials' changes were kept (default: each judgement's own)."""
    tried = len(judgements)
    kept = [j.kept for j in judgements] if kept is None else list(kept)
    out = []
    for judgement, was_kept in zip(judgements, kept):
        if judgement.p is None:
            out.append((None, ""))
            continue
        adjusted = min(1.0, judgement.p * tried)
        note = ""
        if was_kept and tried > 1 and adjusted >= estimate.ALPHA:
            note = (f"kept at p {_p_text(judgement.p)}, "
                    f"but not after adjusting for the {tried} trials tried (Bonferroni: p {_p_text(adjusted)})")
        out.append((round(adjusted, 4), note))
    return out


def _p_text(p: float) -> str:
    return f"{p:.2g}" if p >= 0.01 else f"{p:.1g}" if p >= 0.001 else "< 0.001"
