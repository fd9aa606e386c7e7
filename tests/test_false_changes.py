"""Proven on this machine (issue 40, point 8): how often `refbench compare` calls a change where there is none, and
whether it finds real ones.

Twenty pairs of real same-configuration quick runs (device, oltp, dss; three repeats of each headline case) go into
one runs directory, as a user's would: runs 2k and 2k+1 are pair k, and every other pair runs beside a CPU-bound
neighbour (a process that spins on one core, started before the pair and killed after it). A pair is a false change
when any headline figure of `refbench compare A B` answers "faster" or "slower"; at most 5% of the pairs (1 of 20)
may. Then three real changes, each a fresh baseline of the same plan and the changed run, both at three repeats:
PostgreSQL's synchronous_commit=off (oltp), 1 → 4 virtual users (oltp), and the device's writes throttled (device),
each of which must be found in the right direction on the headline figure it moves.

Slow (37 min for the pairs, 8 min for the changes, on the 2-core VM; 56 min beside other work): `make test-false-changes`
(not in CI, whose 90 minutes cannot hold it beside `make test` and `make test-reference`), or
`.venv/bin/python -m pytest -m false_changes tests/test_false_changes.py -s -p no:xdist` to see the measured figures
(docs/BENCHMARKS.md, "False changes and power of compare", gives them); `--basetemp DIR` keeps the runs and
false_changes.json where pytest's rotation of its temporary directories will not remove them.
"""

from __future__ import annotations

import functools
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

import proof
from conftest import cli_env, refbench_command
from refbench.children import die_with_parent

pytestmark = [pytest.mark.slow, pytest.mark.false_changes]

PAIRS = 20
MOST_FALSE = 0.05  # of the pairs
CHANGED = {"faster", "slower", "changed"}  # "changed": a figure without a better direction (none of these has one)
RUN_TIMEOUT_S = 1200  # a hang guard: a run takes about a minute, two beside the neighbour

# As short as the suites allow while still real: one fio point (4 KiB random, 30% writes so that a write throttle
# shows, QD 16, 64 MiB, no preconditioning or checks), one warehouse at one user for 5 s after 2 s of ramp-up, the
# DSS power and throughput streams on DuckDB at SF 0.01. Repeats said here: tests' REFBENCH_REPEATS=1 must not win.
PLAN = """\
name = "{name}"
profile = "quick"
suites = ["device", "oltp", "dss"]
repeats = 3

[device]
size = 67108864
block_sizes = [4096]
iodepths = [16]
numjobs = 1
patterns = ["random"]
write_shares = [30]
precondition = false
checks = false

[oltp]
warehouses = 1
users = [{users}]
rampup_s = 2
duration_s = {duration_s}
pg_settings = [{pg_settings}]

[dss]
sf = 0.01
engines = ["duckdb"]
modes = ["power", "throughput"]
"""
BASE = {"users": "1", "pg_settings": '"max_wal_size=1GB"', "duration_s": "5"}
# The oltp changes are measured over 20 s, both sides: at 5 s the repeats of one run spread by 12–16% at one user on
# this VM, and the 1.2–1.45× that synchronous_commit=off and 1 → 4 users gave there is not resolved at 3 repeats.
CHANGE_WINDOW = {"duration_s": "20"}


def write_plan(path: Path, name: str, **changes: str) -> Path:
    path.write_text(PLAN.format(name=name, **(BASE | changes)))
    return path


def run_plan(tmp_path: Path, plan: Path, runs: Path, preexec=None, on_stderr=None) -> str:
    """One real run of the plan into ``runs``: the run directory's name. ``on_stderr`` sees each progress line."""
    out = tmp_path / f"run-{uuid.uuid4().hex[:8]}.out"
    with out.open("w") as stdout:
        process = subprocess.Popen(refbench_command("run", "--plan", str(plan), "--runs-dir", str(runs)), cwd=tmp_path,
                                   env=cli_env(REFBENCH_STATE_DIR=str(tmp_path / "state")), stdout=stdout,
                                   stderr=subprocess.PIPE, text=True,
                                   preexec_fn=preexec or functools.partial(die_with_parent, signal.SIGTERM))
        err = []
        try:
            deadline = time.monotonic() + RUN_TIMEOUT_S
            for line in process.stderr:
                err.append(line)
                if on_stderr:
                    on_stderr(line)
                assert time.monotonic() < deadline, f"the run took over {RUN_TIMEOUT_S} s"
            process.wait(timeout=60)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
    assert process.returncode == 0, "".join(err)
    return Path(out.read_text().strip().splitlines()[-1]).name


def compare(tmp_path: Path, runs: Path, a: str, b: str) -> list[dict]:
    """The answers of `refbench compare A B --json`: the overall and per-suite effects and the headline figures."""
    p = subprocess.run(refbench_command("compare", a, b, "--runs-dir", str(runs), "--json"), cwd=tmp_path,
                       env=cli_env(REFBENCH_STATE_DIR=str(tmp_path / "state")), capture_output=True, text=True,
                       timeout=600)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)["answers"]


def interval(a: dict) -> str:
    ratio = "—" if a.get("ratio") is None else f"{a['ratio']:.3f}×"
    return ratio + ("" if a.get("ci_low") is None else f" ({a['ci_low']:.3f}–{a['ci_high']:.3f})")


def headline_line(a: dict) -> str:
    return (f"    {a['suite']:<6} {a['figure']:<45} {interval(a):<26} {a['answer']:<12} "
            f"n {a['n'][0]} vs {a['n'][1]}; {a['basis']}{'; ' + a['why'] if a.get('why') else ''}")


def effect_line(a: dict) -> str:
    return f"    {a['kind']:<7} {a['suite'] or 'all':<6} {'significant' if a['significant'] else 'not significant':<16} {a['answer']}"


def spinner() -> subprocess.Popen:
    """The CPU-bound neighbour: a process of this test's own that spins on one core until killed."""
    return subprocess.Popen([sys.executable, "-c", "while True: pass"],
                            preexec_fn=functools.partial(die_with_parent, signal.SIGKILL))


@pytest.mark.timeout(3 * 3600)  # pyproject's 900 s is for one ordinary test: this one is 40 runs
def test_same_configuration_pairs_rarely_answer_faster_or_slower(tmp_path):
    plan, runs = write_plan(tmp_path / "plan.toml", "false-changes"), tmp_path / "runs"
    started, pairs, code = time.monotonic(), [], proof.fingerprints()
    for k in range(PAIRS):
        beside = k % 2 == 1
        neighbour = spinner() if beside else None
        try:
            pair_started = time.monotonic()
            a, b = run_plan(tmp_path, plan, runs), run_plan(tmp_path, plan, runs)
            seconds = time.monotonic() - pair_started
        finally:
            if neighbour is not None:
                neighbour.kill()
                neighbour.wait()
        found = compare(tmp_path, runs, a, b)
        heads = [x for x in found if x["kind"] == "headline"]
        effects = [x for x in found if x["kind"] in ("overall", "suite")]
        pair = {"pair": k, "neighbour": beside, "A": a, "B": b, "seconds": round(seconds),
                "false_change": any(x["answer"] in CHANGED for x in heads),
                "effect_change": any(x["significant"] for x in effects),
                "headlines": heads, "effects": effects}
        pairs.append(pair)
        print(f"\npair {k:2} {'beside a CPU-bound neighbour' if beside else 'quiet':<28} {a} vs {b}  {seconds:.0f} s  "
              f"headline change: {'YES' if pair['false_change'] else 'no'}; effect change: "
              f"{'YES' if pair['effect_change'] else 'no'}", flush=True)
        for x in heads:
            print(headline_line(x))
        for x in effects:
            print(effect_line(x))

    wall = time.monotonic() - started
    (tmp_path / "false_changes.json").write_text(json.dumps(pairs, indent=1, default=str))
    false = [p for p in pairs if p["false_change"]]
    quiet = [p for p in pairs if not p["neighbour"]]
    noisy = [p for p in pairs if p["neighbour"]]
    print(f"\nfalse changes (any headline faster/slower): {len(false)} of {len(pairs)} pairs "
          f"({len(false) / len(pairs):.0%}); quiet {sum(p['false_change'] for p in quiet)} of {len(quiet)}, "
          f"beside a neighbour {sum(p['false_change'] for p in noisy)} of {len(noisy)}")
    print(f"pairs whose overall or a suite effect was significant: {sum(p['effect_change'] for p in pairs)} of "
          f"{len(pairs)}; quiet {sum(p['effect_change'] for p in quiet)}, beside a neighbour "
          f"{sum(p['effect_change'] for p in noisy)}")
    by_figure: dict[str, dict[str, int]] = {}
    for p in pairs:
        for x in p["headlines"]:
            tally = by_figure.setdefault(f"{x['suite']}: {x['figure']}", {})
            tally[x["answer"]] = tally.get(x["answer"], 0) + 1
    for figure, tally in by_figure.items():
        print(f"  {figure}: " + ", ".join(f"{n} {word}" for word, n in sorted(tally.items())))
    print(f"wall time: {wall / 60:.1f} min for {2 * len(pairs)} runs and {len(pairs)} comparisons "
          f"({wall / (2 * len(pairs)):.0f} s a run); every pair: {tmp_path / 'false_changes.json'}")
    proof.record("pairs", code, len(false) <= MOST_FALSE * len(pairs),
                 f"{len(false)} of {len(pairs)} pairs called a change (quiet {sum(p['false_change'] for p in quiet)} "
                 f"of {len(quiet)}, beside a CPU-bound neighbour {sum(p['false_change'] for p in noisy)} of {len(noisy)})",
                 {"minutes": round(wall / 60, 1), "by_figure": by_figure})
    assert len(false) <= MOST_FALSE * len(pairs), [
        (p["pair"], "neighbour" if p["neighbour"] else "quiet",
         [(x["suite"], x["figure"], interval(x), x["answer"], x["basis"]) for x in p["headlines"] if x["answer"] in CHANGED])
        for p in false]


# ---- real changes ---------------------------------------------------------------------------------------------

BLKIO = Path("/sys/fs/cgroup/blkio")  # cgroup v1 (this VM)
UNIFIED = Path("/sys/fs/cgroup")  # cgroup v2, when it is the only hierarchy
WRITE_IOPS = 2000  # the throttled device's writes a second (unthrottled, this point does about 10,000)


class WriteThrottle:
    """A cgroup of this test's own whose members' writes to one device are limited to WRITE_IOPS a second (fio's
    direct I/O is charged to the process that issues it): cgroup v1's blkio throttle, else cgroup v2's io.max."""

    def __init__(self, path: Path):
        st = os.stat(path)
        self.device = f"{os.major(st.st_dev)}:{os.minor(st.st_dev)}"
        name = f"refbench-test-{uuid.uuid4().hex[:8]}"
        if (BLKIO / "blkio.throttle.write_iops_device").exists():
            self.group, self.limit_file = BLKIO / name, "blkio.throttle.write_iops_device"
            self.on, self.off = f"{self.device} {WRITE_IOPS}", f"{self.device} 0"
        elif (UNIFIED / "cgroup.controllers").exists() and "io" in (UNIFIED / "cgroup.subtree_control").read_text().split():
            self.group, self.limit_file = UNIFIED / name, "io.max"
            self.on, self.off = f"{self.device} wiops={WRITE_IOPS}", f"{self.device} wiops=max"
        else:
            pytest.skip("no cgroup blkio throttle (v1) or io controller (v2) here to throttle the device's writes with")
        self.group.mkdir()

    def set(self, on: bool) -> None:
        (self.group / self.limit_file).write_text(self.on if on else self.off)

    def join(self) -> None:  # in the run's process before exec: the run and all it starts (fio) are in the group
        (self.group / "cgroup.procs").write_text(str(os.getpid()))
        die_with_parent(signal.SIGTERM)

    def remove(self) -> None:
        self.group.rmdir()  # the run has ended: the group is empty


CHANGES = {
    # (what the changed plan says, the figure it must move: suite, metric, answer)
    "synchronous_commit=off": ({"pg_settings": '"max_wal_size=1GB", "synchronous_commit=off"'}, ("oltp", "nopm", "faster")),
    "1 → 4 users": ({"users": "4"}, ("oltp", "nopm", "faster")),
    "write-throttled device": ({}, ("device", "iops", "slower")),
}


@pytest.mark.timeout(3 * RUN_TIMEOUT_S)
@pytest.mark.parametrize("change", list(CHANGES))
def test_a_real_change_is_found_at_three_repeats(tmp_path, change):
    changes, (suite, metric, expected) = CHANGES[change]
    runs = tmp_path / "runs"
    started, code = time.monotonic(), proof.fingerprints()
    window = CHANGE_WINDOW if suite == "oltp" else {}
    a = run_plan(tmp_path, write_plan(tmp_path / "base.toml", "base", **window), runs)
    changed = write_plan(tmp_path / "changed.toml", "changed", **window, **changes)
    if change == "write-throttled device":
        throttle = WriteThrottle(runs)
        throttle.set(True)  # from the start to the end of the device suite (the first); oltp and dss unthrottled

        def unthrottle(line: str) -> None:
            if line.startswith("oltp:"):
                throttle.set(False)

        try:
            b = run_plan(tmp_path, changed, runs, preexec=throttle.join, on_stderr=unthrottle)
        finally:
            throttle.set(False)
            throttle.remove()
    else:
        b = run_plan(tmp_path, changed, runs)
    wall = time.monotonic() - started
    found = compare(tmp_path, runs, a, b)
    heads = [x for x in found if x["kind"] == "headline"]
    print(f"\n{change}: {a} vs {b}, {wall:.0f} s for the two runs")
    for x in heads:
        print(headline_line(x))
    for x in found:
        if x["kind"] in ("overall", "suite"):
            print(effect_line(x))
    moved = [x for x in heads if (x["suite"], x["metric"]) == (suite, metric)]
    proof.record(change, code, bool(moved) and all(x["answer"] == expected for x in moved),
                 "; ".join(f"{x['figure']}: {interval(x)} {x['answer']}" for x in moved) or f"no {suite} {metric} headline",
                 {"expected": f"{suite} {metric} {expected}", "seconds": round(wall)})
    assert moved, (f"compare shares no {suite} {metric} headline between A and B; the runs' headlines: "
                   f"{_headlines_of(runs / a)} vs {_headlines_of(runs / b)}")
    assert all(x["answer"] == expected for x in moved), [(x["figure"], interval(x), x["answer"], x["why"]) for x in moved]


def _headlines_of(run: Path) -> list[str]:
    return [f"{h.get('figure') or h.get('label')}: {h.get('value')}" for v in json.loads((run / "verdict.json").read_text())
            for h in v.get("headlines", [])]
