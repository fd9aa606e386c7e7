"""A run killed with SIGKILL mid-run resumes with every case recorded exactly once."""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path

import pytest

from conftest import cli_env, refbench_command, wait_for as _wait_for


@pytest.mark.slow
def test_sigkill_mid_run_then_resume_records_every_case_exactly_once(tmp_path, refbench, process_tree):
    runs = tmp_path / "runs"
    cases = 10
    tree = process_tree("sleepy", "--runs-dir", str(runs), "--set", f"sleepy.cases={cases}", "--set", "sleepy.sleep_s=0.3",
                        "--keep-work")  # the journal in work/ tells what was measured
    run_dir = _wait_for(lambda: next(runs.glob("*-sleepy"), None), 30, "the run directory")
    records = run_dir / "records" / "sleepy"
    _wait_for(lambda: records.is_dir() and len(list(records.glob("[!.]*.json"))) >= 3, 60, "three records")
    # Kill while a case is being measured: its start is in the journal but its record is not written.
    journal = run_dir / "work" / "sleepy" / "journal.log"
    _wait_for(lambda: journal.read_text().splitlines()[-1].startswith("start"), 10, "a case in progress")
    tree.signal(signal.SIGKILL)
    recorded_before = {p.stem for p in records.glob("[!.]*.json")}
    assert 3 <= len(recorded_before) < cases
    ended = tree.finish()
    assert ended["survivors"] == [], "the telemetry sampler outlived its runner"
    listing = refbench("runs", "--runs-dir", str(runs), "--json")
    assert listing.code == 0, listing.stderr
    assert [r["status"] for r in listing.json()] == ["interrupted"]

    resumed = refbench("resume", run_dir.name, "--runs-dir", str(runs))
    assert resumed.code == 0, resumed.stderr
    assert resumed.last_line == str(run_dir)

    files = sorted(records.glob("[!.]*.json"))
    ids = [json.loads(p.read_text())["case_id"] for p in files]
    assert ids == [f"case-{i:03d}" for i in range(cases)]  # every case, each once
    assert not list(run_dir.rglob(".tmp-*"))

    lines = journal.read_text().splitlines()
    ends = [line.split()[1] for line in lines if line.startswith("end")]
    for case_id in recorded_before:
        assert lines.count(f"start {case_id}") == 1, f"{case_id} was recorded before the kill but measured again"
    assert sorted(set(ends)) == ids
    meta = json.loads((run_dir / "run.json").read_text())
    assert meta["status"] == "complete" and meta["ended_utc"]
    assert (run_dir / "report.html").is_file()
    assert (run_dir / "tables" / "sleepy" / "per_case.parquet").is_file()

    again = refbench("resume", str(run_dir))
    assert again.code == 0 and "already complete" in again.stderr
    assert len(list(records.glob("[!.]*.json"))) == cases


@pytest.mark.live
def test_a_run_in_use_cannot_be_resumed_twice(tmp_path, refbench):
    runs = tmp_path / "runs"
    proc = subprocess.Popen(
        refbench_command("sleepy", "--runs-dir", str(runs), "--set", "sleepy.cases=20", "--set", "sleepy.sleep_s=0.3"),
        cwd=tmp_path, env=cli_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )
    try:
        run_dir = _wait_for(lambda: next(runs.glob("*-sleepy/records/sleepy/*.json"), None), 60, "a record").parents[2]
        second = refbench("resume", str(run_dir))
        assert second.code == 2
        assert "in use by another refbench process" in second.stderr
    finally:
        proc.kill()
        proc.wait()


def test_a_kill_while_the_report_is_written_leaves_a_run_that_resume_completes(tmp_path, refbench, process_tree):
    runs = tmp_path / "runs"
    tree = process_tree("sleepy", "--runs-dir", str(runs), "--set", "sleepy.cases=2", "--set", "sleepy.sleep_s=0",
                        env={"SLEEPY_SUMMARIZE_S": "30"})
    run_dir = _wait_for(lambda: next(runs.glob("*-sleepy"), None), 30, "the run directory")
    _wait_for(lambda: (run_dir / "findings" / "sleepy.json").is_file(), 60, "the checks to be written")  # the report is next
    tree.signal(signal.SIGKILL)
    assert tree.finish()["survivors"] == []
    assert json.loads((run_dir / "run.json").read_text())["status"] == "running"  # killed: not complete
    listing = refbench("runs", "--runs-dir", str(runs), "--json")
    assert [r["status"] for r in listing.json()] == ["interrupted"]

    resumed = refbench("resume", str(run_dir))
    assert resumed.code == 0, resumed.stderr
    assert json.loads((run_dir / "run.json").read_text())["status"] == "complete"
    assert (run_dir / "report.html").is_file()


@pytest.mark.live
def test_a_complete_run_keeps_no_lock_and_no_work_data_and_its_files_are_readable(tmp_path, refbench):
    result = refbench("sleepy", "--runs-dir", "runs", "--set", "sleepy.cases=2", "--set", "sleepy.sleep_s=0")
    assert result.code == 0, result.stderr
    run_dir = tmp_path / result.last_line
    assert not (run_dir / "run.lock").exists()
    assert not (run_dir / "work").exists() and "work data removed" in result.stderr
    for path in (run_dir / "report.html", run_dir / "run.json", next((run_dir / "records" / "sleepy").glob("[!.]*.json"))):
        assert path.stat().st_mode & 0o077 == 0o044, f"{path} is not readable by others, or writable by them"

    kept = refbench("sleepy", "--runs-dir", "runs", "--set", "sleepy.cases=1", "--keep-work")
    assert kept.code == 0, kept.stderr
    assert (tmp_path / kept.last_line / "work" / "sleepy" / "journal.log").is_file()



@pytest.mark.slow
def test_resume_sets_a_corrupt_record_aside_and_measures_that_case_again(tmp_path, refbench):
    """A record is written atomically, so a corrupt one was edited or damaged on disk: resume neither trusts nor
    deletes it (it stays beside as .corrupt) and measures that case again, also in a run that had completed."""
    runs = tmp_path / "runs"
    made = refbench("sleepy", "--runs-dir", str(runs), "--set", "sleepy.cases=4", "--set", "sleepy.sleep_s=0",
                    "--keep-work")  # the journal in work/ tells which cases were measured
    assert made.code == 0, made.stderr
    run_dir = Path(made.last_line)
    records = run_dir / "records" / "sleepy"
    damaged = records / "case-002.json"
    broken = damaged.read_bytes()[:60]
    damaged.write_bytes(broken)
    kept = {p.name: p.read_bytes() for p in records.glob("[!.]*.json") if p != damaged}

    report = refbench("report", str(run_dir))
    assert report.code == 2 and f"{damaged} is not valid JSON at line" in report.stderr, report.stderr
    assert f"refbench resume {run_dir}" in report.stderr

    resumed = refbench("resume", str(run_dir))
    assert resumed.code == 0, resumed.stderr
    assert f"set aside {damaged} as case-002.json.corrupt" in resumed.stderr
    assert (records / "case-002.json.corrupt").read_bytes() == broken
    assert json.loads(damaged.read_text())["case_id"] == "case-002"  # measured again, whole
    assert {p.name: p.read_bytes() for p in records.glob("[!.]*.json") if p != damaged} == kept  # the others untouched
    journal = (run_dir / "work" / "sleepy" / "journal.log").read_text().splitlines()
    assert journal.count("start case-002") == 2 and journal.count("start case-001") == 1
    listing = refbench("runs", "--runs-dir", str(runs), "--json")
    assert [r["status"] for r in listing.json()] == ["complete"] and not listing.stderr

@pytest.mark.live
def test_a_run_started_by_an_older_refbench_without_a_newer_option_is_refused_with_one_sentence(tmp_path, refbench):
    result = refbench("sleepy", "--runs-dir", "runs", "--set", "sleepy.cases=1", "--set", "sleepy.sleep_s=0")
    assert result.code == 0, result.stderr
    meta_path = tmp_path / result.last_line / "run.json"
    meta = json.loads(meta_path.read_text())
    meta["status"] = "running"  # as a kill leaves it
    del meta["plan"]["options"]["sleepy"]["sleep_s"]  # an option this refbench has and the older one had not
    meta_path.write_text(json.dumps(meta))
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    resumed = refbench("resume", result.last_line, "--runs-dir", "runs")
    assert resumed.code == 2
    assert "was started by an older refbench whose sleepy options lack sleep_s" in resumed.stderr
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before
