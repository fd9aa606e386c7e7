"""The SSD characterization paper's sweep: the full profile's matrix, and a sweep of the full profile run end to end on
real fio at a very short duration per point, killed midway and resumed."""

from __future__ import annotations

import json
import random
import signal
import time
from pathlib import Path

import pytest

from conftest import wait_for
from refbench.plan import load_plan
from refbench.suites.device import PAPER_BLOCK_SIZES, PAPER_QUEUE_DEPTHS, DeviceSuite


def test_the_full_profile_sweeps_the_papers_576_points():
    plan = load_plan(suites=["device"], flags={"profile": "full"})
    points = [c.params for c in DeviceSuite().cases(plan) if c.params["kind"] == "point"]
    modes = {(p["pattern"], p["write_pct"]) for p in points}
    assert modes == {(pattern, w) for pattern in ("random", "sequential") for w in (0, 30, 100)}
    assert sorted({p["iodepth"] for p in points}) == PAPER_QUEUE_DEPTHS == [1, 2, 4, 8, 16, 32, 64, 128]
    assert sorted({p["bs"] for p in points}) == PAPER_BLOCK_SIZES and len(PAPER_BLOCK_SIZES) == 12
    assert len(points) == len({tuple(sorted(p.items())) for p in points}) == 6 * 8 * 12 == 576


def _points(run: Path) -> dict[str, dict]:
    return {p.stem: json.loads(p.read_text()) for p in (run / "records" / "device").glob("[!.]*.json")}


@pytest.mark.slow
def test_the_whole_sweep_killed_midway_resumes_with_no_point_lost_or_measured_twice(tmp_path, refbench, process_tree):
    runs = tmp_path / "runs"
    # 100 ms a point: what each point costs is then mostly fio's own start and stop (about 0.3 s) and refbench's (at
    # 10 ms, a point beside a busy neighbour once completed no I/O at all). Three of the
    # paper's twelve block sizes and three of its eight queue depths, the smallest and largest of each: 54 points, the
    # six access modes all there.
    narrowed = {"block-sizes": "512,64k,1m", "iodepths": "1,16,128"}
    tree = process_tree("device", str(tmp_path), "--profile", "full", "--runs-dir", str(runs), "--size", "16m",
                        *(arg for name, value in narrowed.items() for arg in (f"--{name}", value)),
                        "--numjobs", "1", "--no-checks", "--no-precondition", "--min-runtime-s", "0.1",
                        "--max-runtime-s", "0.1", "--repeats", "3", linger_s=5)  # the profile's (conftest sets 1)
    records = lambda: list(runs.glob("*/records/device/[!.]*.json"))  # noqa: E731 (not a .tmp- file being written)
    wait_for(lambda: len(records()) >= 22, 600, "close to half of the sweep", every_s=0.1)
    tree.signal(signal.SIGKILL)
    assert tree.finish()["survivors"] == []
    run = next(runs.glob("*-device"))
    before = _points(run)
    assert 22 <= len(before) < 54

    t0 = time.monotonic()
    resumed = refbench("resume", str(run))
    assert resumed.code == 0, resumed.stderr
    assert f"54 cases, {len(before)} already recorded" in resumed.stderr
    after = _points(run)
    plan = load_plan(suites=["device"], flags={"profile": "full"},
                     suite_flags={"device": {name.replace("-", "_"): value for name, value in narrowed.items()}})
    points = {c.id for c in DeviceSuite().cases(plan) if c.params["kind"] == "point"}
    # Every point, and the full profile's repeats: the peak random and sequential points twice more each, and each
    # point a peak moved to after those repeats (this fast, noisy target's peaks move), twice more too.
    repeats = set(after) - points
    repeated = {r.rsplit("-r", 1)[0] for r in repeats}
    assert points <= set(after) and len(repeats) == 2 * len(repeated) and len(repeated) >= 2 and repeated <= points, repeats
    for case_id, record in before.items():
        assert after[case_id] == record  # recorded before the kill: kept as it was, not measured again
    fresh = [r for case_id, r in after.items() if case_id not in before]
    assert len(fresh) == 54 + len(repeats) - len(before) and all(r["started_epoch_s"] > max(b["ended_epoch_s"] for b in before.values())
                                                   for r in fresh)
    assert all(r["metrics"]["iops"] > 0 for r in after.values()), "a point measured nothing"
    findings = json.loads((run / "findings" / "device.json").read_text())
    assert findings == [{"check": "sweep points completed", "passed": True,
                         "detail": f"54 of 54 points measured, and {len(repeats)} repeats of the peak points"}]
    assert (run / "report.html").is_file() and not list(run.rglob(".tmp-*"))
    print(f"resume measured {len(fresh)} points in {time.monotonic() - t0:.0f} s")


@pytest.mark.slow
def test_no_process_of_a_sweep_outlives_a_kill_9_at_twenty_random_moments(tmp_path, process_tree):
    """At 10 ms a point, fio processes start several times a second: some kills land in the instant one starts."""
    moments = random.Random()
    seed = moments.randrange(1 << 32)
    moments.seed(seed)
    survivors = []
    for kill in range(20):
        runs = tmp_path / f"runs-{kill}"
        tree = process_tree("device", str(tmp_path), "--profile", "full", "--runs-dir", str(runs), "--size", "16m",
                            "--numjobs", "1", "--no-checks", "--no-precondition", "--min-runtime-s", "0.01",
                            "--max-runtime-s", "0.01", linger_s=5)
        wait_for(lambda: next(runs.glob("*/records/device/*.json"), None), 120, "the sweep's first point", every_s=0.02)
        time.sleep(moments.uniform(0, 1.0))
        tree.signal(signal.SIGKILL)
        ended = tree.finish()
        assert ended["code"] == -signal.SIGKILL, ended["stderr"]  # killed during the sweep, not after it
        survivors += ended["survivors"]
    assert survivors == [], f"alive 5 s after a kill -9 of refbench (random moments, seed {seed})"
