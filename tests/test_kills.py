"""Kills anywhere: SIGKILL, SIGTERM or SIGINT of refbench while it loads, measures or checks leaves every finished
record as it was, no process of that run alive a few seconds later (servers, loaders, virtual users, fio, jobs),
and a run that `refbench resume` completes. Each test looks only at the descendants of its own refbench process
(tests/process_tree.py)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import TESTS, cli_env, wait_for

pytestmark = pytest.mark.slow
LINGER_S = 5  # "nothing outlives refbench for more than a few seconds"


def _records(run: Path, suite: str) -> dict[str, bytes]:
    # [!.]: finished records only, not one being written (.tmp-*.json, which pathlib's * matches)
    return {p.stem: p.read_bytes() for p in (run / "records" / suite).glob("[!.]*.json")}


def _resume_completes(refbench, run: Path, suite: str, before: dict[str, bytes], expected: set[str]) -> None:
    resumed = refbench("resume", str(run), timeout=600)
    assert resumed.code == 0, resumed.stderr
    after = _records(run, suite)
    assert set(after) == expected
    for case_id, content in before.items():
        assert after[case_id] == content, f"{case_id}, finished before the kill, changed"
    assert json.loads((run / "run.json").read_text())["status"] == "complete"


def test_oltp_killed_during_the_load_leaves_nothing_running_and_resumes(tmp_path, refbench, process_tree, reachable_dir):
    runs = tmp_path / "runs"
    tree = process_tree("oltp", "--warehouses", "2", "--rampup-s", "1", "--duration-s", "2", "--users", "1,2",
                        "--load-workers", "2", "--data-dir", str(reachable_dir / "pgdata"), "--runs-dir", str(runs),
                        linger_s=LINGER_S)
    wait_for(tree.forked_workers, 120, "the loader processes")
    time.sleep(1)
    tree.signal(signal.SIGKILL)
    ended = tree.finish()
    assert ended["survivors"] == [], "processes outlived a SIGKILLed refbench"
    run = next(runs.iterdir())
    assert _records(run, "oltp") == {}
    _resume_completes(refbench, run, "oltp", {}, {"u1-r1", "u2-r1"})


def test_dss_interrupted_during_the_queries_stops_both_engines_and_resumes(tmp_path, refbench, process_tree, reachable_dir):
    runs = tmp_path / "runs"
    tree = process_tree("dss", "--sf", "0.01", "--modes", "individual,power", "--data-dir", str(reachable_dir / "tpch"),
                        "--runs-dir", str(runs), linger_s=LINGER_S)
    records = wait_for(lambda: next(runs.glob("*/records/dss"), None), 300, "the first query record")
    wait_for(lambda: len(list(records.glob("[!.]*.json"))) >= 3, 120, "three query records")
    tree.signal(signal.SIGINT)
    ended = tree.finish()
    assert ended["code"] == 130, ended["stderr"]
    assert "refbench resume" in ended["stderr"]
    assert ended["survivors"] == []
    run = records.parents[1]
    before = _records(run, "dss")
    assert 3 <= len(before) < 46
    expected = {f"{e}-q{q:02d}" for e in ("duckdb", "postgres") for q in range(1, 23)} | {"duckdb-power", "postgres-power"}
    _resume_completes(refbench, run, "dss", before, expected)


def test_analytics_killed_while_its_jobs_run_leaves_no_job_and_resumes(tmp_path, refbench, process_tree):
    runs = tmp_path / "runs"
    tree = process_tree("analytics", "--tests", "correlation_matrix", "--jobs", "2", "--concurrency", "2",
                        "--rows", "200000", "--no-iotest", "--runs-dir", str(runs), linger_s=LINGER_S)
    wait_for(lambda: any("refbench.suites.analytics.job" in cmd for cmd in tree.children().values()), 300, "a job")
    tree.signal(signal.SIGKILL)
    assert tree.finish()["survivors"] == []
    run = next(runs.iterdir())
    assert _records(run, "analytics") == {}  # one case, the workload, which the kill cut short
    _resume_completes(refbench, run, "analytics", {}, {"workload"})


# A parent killed while its child is between the fork and its request for the kernel's signal (the preexec function
# sleeps there, so the kill always lands in that instant), and a child that would run on for a minute.
KILLED_WHILE_ITS_CHILD_STARTS = """
import os, signal, subprocess, threading, time
from refbench.children import die_with_parent
def late():
    time.sleep(1.0)
    die_with_parent()
threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGKILL)).start()
subprocess.Popen(["sleep", "60"], preexec_fn=late)
"""


def test_a_child_started_in_the_instant_its_parent_is_killed_does_not_run_on(tmp_path):
    out, err = tmp_path / "parent.out", tmp_path / "parent.err"
    harness = subprocess.run([sys.executable, str(TESTS / "process_tree.py"), "--linger-s", str(LINGER_S), "--stdout",
                              str(out), "--stderr", str(err), "--", sys.executable, "-c", KILLED_WHILE_ITS_CHILD_STARTS],
                             capture_output=True, text=True, timeout=120, env=cli_env())
    ended = json.loads(harness.stdout.strip().splitlines()[-1])
    assert ended["code"] == -signal.SIGKILL, err.read_text()
    assert ended["survivors"] == [], "a child outlived its parent killed while it started"
