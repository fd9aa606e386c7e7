"""What a run leaves behind: no run.lock once it ends (complete, failed, interrupted), results readable by everyone,
and work data that `refbench clean` removes from kept or interrupted runs, never a place another run owns or uses.
The suites' own targets are in test_targets.py."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

from rich.console import Console

from conftest import cli_env, refbench_command, wait_for
from refbench import runner
from refbench.plan import load_plan
from refbench.runstore import Run

SLEEPY = ["sleepy", "--runs-dir", "runs", "--set", "sleepy.sleep_s=0"]


def _status(run: Path) -> str:
    return json.loads((run / "run.json").read_text())["status"]


def _start_long_run(tmp_path: Path, cases: int = 20) -> tuple[subprocess.Popen, Path]:
    """A sleepy run of cases of 0.3 s, once it has recorded its first case (and so holds its lock)."""
    proc = subprocess.Popen(refbench_command(*SLEEPY, "--set", f"sleepy.cases={cases}", "--set", "sleepy.sleep_s=0.3"),
                            cwd=tmp_path, env=cli_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    record = wait_for(lambda: next((tmp_path / "runs").glob("*-sleepy/records/sleepy/*.json"), None), 60, "a record")
    return proc, record.parents[2]


def test_results_are_readable_by_everyone_whatever_the_umask(tmp_path):
    made = subprocess.run(refbench_command(*SLEEPY, "--set", "sleepy.cases=1"), cwd=tmp_path, env=cli_env(),
                          capture_output=True, text=True, timeout=120, preexec_fn=lambda: os.umask(0o077))
    assert made.returncode == 0, made.stderr
    run = tmp_path / made.stdout.strip().splitlines()[-1]
    for path in (run / "report.html", run / "tables" / "sleepy" / "per_case.csv", run / "tables" / "sleepy" / "per_case.parquet",
                 run / "charts" / "sleepy" / "ops.svg", run / "run.json", run / "records" / "sleepy" / "case-000.json"):
        assert path.stat().st_mode & 0o777 == 0o644, path
    for directory in (run, run / "tables" / "sleepy", run / "charts"):
        assert directory.stat().st_mode & 0o777 == 0o755, directory


def test_a_failed_run_keeps_no_lock(tmp_path, refbench):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    (tmp_path / "plan.toml").write_text(f'work_dir = "{blocker}"\n')  # the suite cannot make its work directory
    failed = refbench(*SLEEPY, "--plan", "plan.toml", "--set", "sleepy.cases=1")
    assert failed.code != 0
    run = next((tmp_path / "runs").iterdir())
    assert _status(run) == "failed" and not (run / "run.lock").exists()


def test_ctrl_c_leaves_no_lock_and_clean_removes_the_work_data_but_not_the_records(tmp_path, refbench):
    proc, run = _start_long_run(tmp_path)
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=60) == 130
    assert _status(run) == "interrupted" and not (run / "run.lock").exists()
    assert (run / "work" / "sleepy" / "journal.log").is_file()  # kept for resume
    records = sorted(p.name for p in (run / "records" / "sleepy").iterdir())

    cleaned = refbench("clean", str(run))
    assert cleaned.code == 0, cleaned.stderr
    assert cleaned.stderr.startswith(f"removed {run}/work (") and "work data removed:" in cleaned.stderr
    assert not (run / "work").exists() and not (run / "run.lock").exists()
    assert sorted(p.name for p in (run / "records" / "sleepy").iterdir()) == records and (run / "run.json").is_file()


def test_a_kill_9_leaves_a_lock_file_that_blocks_neither_clean_nor_resume(tmp_path, refbench):
    proc, run = _start_long_run(tmp_path, cases=8)
    proc.kill()
    proc.wait()
    assert (run / "run.lock").exists()  # kill -9 runs no cleanup; the kernel released the lock itself
    (run / "records" / "sleepy" / ".tmp-cut.json").write_text('{"suite": "sl')  # a write the kill cut short
    assert refbench("runs", "--runs-dir", "runs", "--json").json()[0]["status"] == "interrupted"
    cleaned = refbench("clean", "--all-work", "--runs-dir", "runs")
    assert cleaned.code == 0 and f"removed runs/{run.name}/work (" in cleaned.stderr, cleaned.stderr
    resumed = refbench("resume", str(run))
    assert resumed.code == 0, resumed.stderr
    assert _status(run) == "complete" and not (run / "run.lock").exists() and not (run / "work").exists()
    assert len(list((run / "records" / "sleepy").glob("*.json"))) == 8


def test_clean_refuses_a_run_in_use_and_all_work_skips_it(tmp_path, refbench):
    proc, run = _start_long_run(tmp_path)
    try:
        refused = refbench("clean", str(run))
        assert refused.code == 2 and refused.stderr.strip() == f"refbench: run {run} is in use by another refbench process."
        skipped = refbench("clean", "--all-work", "--runs-dir", "runs")
        assert skipped.code == 0 and f"skipped runs/{run.name}: in use by another refbench process" in skipped.stderr
        assert (run / "work" / "sleepy" / "journal.log").is_file()
    finally:
        proc.kill()
        proc.wait()
    assert refbench("clean").code == 2 and refbench("clean", str(run), "--all-work").code == 2  # RUN or --all-work


def test_clean_removes_only_what_the_run_created_and_no_place_a_later_or_running_run_owns(tmp_path):
    """Ownership of places outside the run directory, on runs made in-process: created vs reused, a later run that
    created the same path anew, a running run that uses it."""
    console = Console(quiet=True)
    target = tmp_path / "target"
    target.mkdir()

    def new_run(name: str) -> Run:
        return Run.create(load_plan(flags={"runs_dir": str(tmp_path / "runs"), "name": name}), {})

    first, theirs = new_run("first"), target / "theirs"
    theirs.write_text("not refbench's")
    first.claim_work([target / "db" / "base", theirs], "oltp")  # its topmost missing directory is the run's
    (target / "db" / "base").mkdir(parents=True)
    assert [(Path(p["path"]).name, p["created"]) for p in first.work_places()] == [("db", True), ("theirs", False)]
    assert [place for place, _ in runner.clean([first], console)] == [target / "db"]
    assert sorted(p.name for p in target.iterdir()) == ["theirs"] and first.work_places()[0]["path"] == str(theirs)

    first.claim_work([target / "data"], "dss")
    (target / "data").mkdir()
    second = new_run("second")
    second.claim_work([target / "data"], "dss")  # reuses the first run's data: still the first's to remove
    second.lock()  # running
    assert runner.clean([first], console) == [] and (target / "data").is_dir()
    second.unlock()
    assert [place for place, _ in runner.clean([first], console)] == [target / "data"]

    first.claim_work([target / "log"], "dss")
    (target / "log").write_text("")
    (target / "log").unlink()  # the first run's is gone (removed by hand) ...
    third = new_run("third")
    third.claim_work([target / "log"], "dss")  # ... and a later run made it anew: the later run's
    (target / "log").write_text("")
    assert runner.clean([first], console) == [] and (target / "log").exists()
    assert [place for place, _ in runner.clean([third], console)] == [target / "log"]
    assert sorted(p.name for p in target.iterdir()) == ["theirs"]
