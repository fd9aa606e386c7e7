"""The runs catalog, tags, `refbench runs` and `refbench history`: built from the run directories, updated
incrementally, rebuilt when deleted."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest

from conftest import cli_env, refbench_command
from refbench.catalog import CATALOG_FILE, Catalog
from refbench.catalog.history import parse_figure
from refbench.errors import UserError
from refbench.runstore import Run

SLEEPY = ("sleepy", "--set", "sleepy.sleep_s=0", "--runs-dir", "runs")


@pytest.fixture(scope="module")
def three_runs(tmp_path_factory):
    """Three finished runs of the test suite at speeds 1, 2 and 3, tagged firmware 2.1, 2.2 and 2.2 (made once)."""
    base = tmp_path_factory.mktemp("made")
    names = []
    for speed, firmware in ((1, "2.1"), (2, "2.2"), (3, "2.2")):
        p = subprocess.run(refbench_command(*SLEEPY, "--name", f"s{speed}", "--speed", str(speed), "--tag",
                                            f"firmware={firmware}", "--tag", "array=raid10"),
                           cwd=base, env=cli_env(), capture_output=True, text=True, timeout=300)
        assert p.returncode == 0, p.stderr
        names.append(p.stdout.strip().splitlines()[-1].split("/")[-1])
    return base / "runs", names


@pytest.fixture
def runs(three_runs, tmp_path):
    shutil.copytree(three_runs[0], tmp_path / "runs")
    return tmp_path / "runs", three_runs[1]


def test_the_catalog_indexes_new_runs_marks_a_corrupt_one_and_rebuilds_from_the_directories(runs):
    runs, (slow, middle, fast) = runs
    assert (runs / CATALOG_FILE).exists()  # each run indexed itself when it ended
    catalog = Catalog(runs)
    assert catalog.update() == 0  # nothing changed since: nothing indexed again
    listed = {r["run"]: r for r in catalog.runs()}
    assert listed[middle]["headlines"][0]["value"] == 8000.0 and listed[slow]["status"] == "complete"
    assert catalog.runs(suite="device") == [] and len(catalog.runs(suite="sleepy")) == 3
    assert [r["run"] for r in catalog.runs(since="2000-01-01T00:00:00Z", limit=2)] == [fast, middle]

    (runs / middle / "tags.json").write_text(json.dumps({"firmware": "3.0"}))
    assert catalog.update() == 1
    assert [r["run"] for r in catalog.runs(tags={"firmware": "3.0"})] == [middle]

    record = next((runs / slow / "records" / "sleepy").glob("*.json"))
    record.write_text("{ not json")  # edited in place: the directory's time does not change, the file's does
    warnings: list[str] = []
    catalog.update(warnings.append)
    assert len(warnings) == 1 and str(record) in warnings[0]
    listed = {r["run"]: r for r in catalog.runs()}
    assert listed[slow]["status"].startswith("corrupt") and not listed[slow]["headlines"]
    assert listed[middle]["status"] == "complete" and listed[middle]["headlines"]

    # A run measured now, then killed: its files do not change, its lock is left free.
    meta = runs / fast / "run.json"
    meta.write_text(json.dumps({**json.loads(meta.read_text()), "status": "running"}))
    holder = Run(runs / fast)
    holder.lock()
    catalog.update()
    assert catalog.runs(since="2000-01-01T00:00:00Z", limit=1)[0]["status"] == "running"
    os.close(holder._lock_fd)  # as a kill -9 leaves it
    assert catalog.update() == 1 and catalog.runs(limit=1)[0]["status"] == "interrupted"
    catalog.close()

    (runs / CATALOG_FILE).unlink()
    shutil.rmtree(runs / fast)
    with Catalog(runs) as rebuilt:
        assert rebuilt.update() == 2
        assert {r["run"]: r["status"].split(":")[0] for r in rebuilt.runs()} == {slow: "corrupt", middle: "complete"}

    (runs / CATALOG_FILE).write_bytes(b"not a database" * 300)  # overwritten: rebuilt as if deleted
    with Catalog(runs) as rebuilt:
        assert rebuilt.update() == 2 and {r["run"] for r in rebuilt.runs()} == {slow, middle}


def test_runs_tag_and_history_on_the_command_line(runs, refbench):
    runs, made = runs
    bad = refbench(*SLEEPY, "--tag", "no equals sign")
    assert bad.code == 2 and "NAME=VALUE" in bad.stderr

    listed = refbench("runs", "--runs-dir", "runs", "--tag", "firmware=2.2", "--json")
    assert listed.code == 0, listed.stderr
    assert [r["run"] for r in listed.json()] == made[:0:-1]  # newest first
    assert all(r["tags"] == {"firmware": "2.2", "array": "raid10"} for r in listed.json())
    assert len(refbench("runs", "--runs-dir", "runs", "--suite", "sleepy", "--since", "1d", "--json").json()) == 3
    for since in ("yesterday", "900000d"):  # not a date; before the year 1
        wrong = refbench("runs", "--runs-dir", "runs", "--since", since)
        assert wrong.code == 2 and wrong.stderr.count("\n") == 1 and "since" in wrong.stderr, wrong.stderr

    retag = refbench("tag", made[0], "firmware=2.2", "array=", "--runs-dir", "runs")
    assert retag.code == 0, retag.stderr
    assert json.loads((runs / made[0] / "tags.json").read_text()) == {"firmware": "2.2"}
    table = refbench("runs", "--runs-dir", "runs", "--tag", "firmware=2.2")
    assert table.code == 0 and table.stdout.count("firmware=2.2") == 3 and "12,000 ops/s" in table.stdout

    history = refbench("history", "sleepy.ops_per_s", "--runs-dir", "runs", "--json")
    assert history.code == 0, history.stderr
    points = history.json()["points"]
    assert [p["run"] for p in points] == made and [p["value"] for p in points] == [4000.0, 8000.0, 12000.0]
    assert all(p["n"] == 10 and p["low"] <= p["value"] <= p["high"] for p in points)  # the spread of each run's samples
    chart = runs.parent / history.json()["chart"]
    assert "<svg" in chart.read_text() and chart.with_suffix(".png").stat().st_size > 0

    unwritable = refbench("history", "sleepy.ops_per_s", "--runs-dir", "runs", "--out", "/proc/refbench-history")
    assert unwritable.code == 2 and "cannot write the trend chart to /proc/refbench-history" in unwritable.stderr
    assert unwritable.stderr.count("\n") == 1, unwritable.stderr

    one_case = refbench("history", "sleepy.case-001.ops_per_s", "--runs-dir", "runs", "--tag", "array=raid10")
    assert one_case.code == 0 and "over 2 runs" in one_case.stdout, one_case.stderr
    typo = refbench("history", "sleepy.ops_per_sec", "--runs-dir", "runs")
    assert typo.code == 2 and "did you mean sleepy.ops_per_s" in typo.stderr
    for wrong in ("nosuite.x", "oltp", "oltp..nopm"):
        with pytest.raises(UserError):
            parse_figure(wrong)
