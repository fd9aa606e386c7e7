"""The runs catalog, tags, `refbench runs` and `refbench history`: built from the run directories, updated
incrementally, rebuilt when deleted."""

from __future__ import annotations

import json
import os
import re
import shutil
import sqlite3
import subprocess
import tempfile
from pathlib import Path

import pytest

from conftest import cli_env, refbench_command
from test_exhaustion import fill, small_fs  # noqa: F401  small_fs: the 16 MiB tmpfs fixture, filled by fill
from refbench.catalog import CATALOG_FILE, Catalog, read_catalog
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
    said: list[str] = []
    assert read_catalog(runs, lambda catalog: {r["run"] for r in catalog.runs()}, said.append) == {slow, middle}
    assert len(said) == 1 and "was damaged (file is not a database)" in said[0]


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
    assert all(p["n"] is None for p in points)  # measured once each: the seconds of a run are not repeats
    # The newest run against the runs before it, each one replicate: two runs 2× apart leave a 12,000 ops/s
    # newest too uncertain to call.
    latest, = history.json()["latest"]
    assert latest["run"] == made[-1] and latest["against"] == 2 and latest["ratio"] > 1
    assert latest["answer"] == "cannot tell" and latest["ci_low"] < 1 < latest["ci_high"], latest
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


def overwrite_page_of(catalog_file, table: str) -> None:
    """Random bytes over the page in the middle of the file that holds ``table``'s rows (its root page), as a torn
    write or a bad sector leaves it; the header and the other pages stay as they were."""
    with sqlite3.connect(catalog_file) as db:
        page = db.execute("SELECT rootpage FROM sqlite_master WHERE name = ?", (table,)).fetchone()[0]
        page_size, pages = db.execute("PRAGMA page_size").fetchone()[0], db.execute("PRAGMA page_count").fetchone()[0]
    db.close()
    assert 1 < page < pages and not os.path.exists(f"{catalog_file}-wal")  # all in the file, none in the WAL
    with open(catalog_file, "r+b") as f:
        f.seek((page - 1) * page_size)
        f.write(os.urandom(page_size))


def _warnings(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if "runs catalog" in line]


@pytest.mark.parametrize("table, command", [
    ("runs", ("runs", "--json")),  # read by every update
    ("headlines", ("runs", "--json")),  # read only by the listing, after an update that went well
    ("figures", ("history", "sleepy.case-001.ops_per_s", "--json")),  # read only by history
])
def test_a_damaged_page_in_the_middle_of_the_catalog_is_rebuilt_from_the_run_directories(runs, refbench, table, command):
    runs, made = runs
    overwrite_page_of(runs / CATALOG_FILE, table)
    ended = subprocess.Popen(["true"])
    ended.wait()
    killed_rebuild = runs / f"{CATALOG_FILE}.building-{ended.pid}-1"  # what a rebuild killed halfway leaves
    killed_rebuild.write_bytes(b"half a catalog")
    damaged = refbench(*command, "--runs-dir", "runs")
    assert damaged.code == 0, damaged.stderr
    listed = damaged.json() if command[0] == "runs" else damaged.json()["points"]
    assert sorted(r["run"] for r in listed) == made
    assert _warnings(damaged.stderr) == [f"refbench: warning: the runs catalog runs/{CATALOG_FILE} was damaged (database "
                                         "disk image is malformed) and has been rebuilt from the run directories."]
    with sqlite3.connect(runs / CATALOG_FILE) as db:
        assert db.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    db.close()
    assert sorted(p.name for p in runs.glob(CATALOG_FILE + "*")) == [CATALOG_FILE]  # built aside, renamed over it
    again = refbench(*command, "--runs-dir", "runs")
    assert again.code == 0 and not _warnings(again.stderr), again.stderr  # said once: healed for good
    assert again.stdout == damaged.stdout


@pytest.fixture
def shared_runs(runs):
    """The runs in a directory the unprivileged user 'nobody' can reach (pytest's tmp_path is closed to others)."""
    base = Path(tempfile.mkdtemp(prefix="refbench-test-catalog-"))
    try:
        base.chmod(0o755)
        shutil.copytree(runs[0], base / "runs")
        yield base / "runs", runs[1]
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _could_not_be_used(stderr: str, why: str) -> None:
    assert len(_warnings(stderr)) == 1, stderr
    assert re.fullmatch(rf"refbench: warning: the runs catalog \S+{CATALOG_FILE} could not be used \(.*(?:{why}).*\): the "
                        r"runs were read from their directories instead\.", _warnings(stderr)[0]), stderr


def _tag_unindexed(runs, run: str) -> None:
    """A change the catalog has not seen: the listing shows it only if it came from the run directories."""
    (runs / run / "tags.json").write_text(json.dumps({"firmware": "9.9"}))


def test_a_catalog_that_cannot_be_written_gives_way_to_the_run_directories(runs, refbench):
    runs, made = runs
    catalog_file = runs / CATALOG_FILE
    before = catalog_file.read_bytes()
    _tag_unindexed(runs, made[0])

    # Locked: another process holds a write transaction for longer than the catalog waits.
    holder = sqlite3.connect(catalog_file, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        locked = refbench("runs", "--runs-dir", "runs", "--json")
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert locked.code == 0, locked.stderr
    _could_not_be_used(locked.stderr, "database is locked")
    assert {r["run"]: r["tags"] for r in locked.json()}[made[0]] == {"firmware": "9.9"}

    # Immutable (chattr +i): not even root may write it.
    if subprocess.run(["chattr", "+i", str(catalog_file)], capture_output=True).returncode != 0:
        pytest.skip(f"this file system refuses chattr +i on {catalog_file}")
    try:
        immutable = refbench("runs", "--runs-dir", "runs", "--json")
        history = refbench("history", "sleepy.ops_per_s", "--runs-dir", "runs", "--json", "--tag", "firmware=9.9")
    finally:
        subprocess.run(["chattr", "-i", str(catalog_file)], check=True)
    assert immutable.code == 0, immutable.stderr
    _could_not_be_used(immutable.stderr, "readonly")
    assert sorted(r["run"] for r in immutable.json()) == made
    assert {r["run"]: r["tags"] for r in immutable.json()}[made[0]] == {"firmware": "9.9"}
    assert history.code == 0 and [p["run"] for p in history.json()["points"]] == made[:1], history.stderr
    _could_not_be_used(history.stderr, "readonly")
    assert catalog_file.read_bytes() == before


@pytest.mark.skipif(os.geteuid() != 0, reason="running as another user needs root")
def test_a_catalog_this_user_may_only_read_gives_way_to_the_run_directories(shared_runs):
    runs, made = shared_runs
    (runs / CATALOG_FILE).chmod(0o444)
    as_nobody = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"]

    def listed() -> tuple[dict[str, dict], str]:
        p = subprocess.run([*as_nobody, *refbench_command("runs", "--runs-dir", str(runs), "--json")],
                           env=cli_env(), capture_output=True, text=True, timeout=300)
        assert p.returncode == 0, p.stderr
        return {r["run"]: r["tags"] for r in json.loads(p.stdout)}, p.stderr

    _tag_unindexed(runs, made[0])
    tags, stderr = listed()
    assert sorted(tags) == made and tags[made[0]] == {"firmware": "9.9"}
    # SQLite cannot even read a WAL catalog here: its shared-memory index (-shm) cannot be made beside it.
    _could_not_be_used(stderr, "readonly")
    assert sorted(p.name for p in runs.glob(CATALOG_FILE + "*")) == [CATALOG_FILE]


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a small tmpfs needs root")
def test_a_catalog_on_a_full_disk_gives_way_to_the_run_directories(runs, small_fs, refbench):
    runs, made = runs
    shutil.copytree(runs, small_fs / "runs")
    _tag_unindexed(small_fs / "runs", made[1])
    filler = fill(small_fs)
    try:
        full = refbench("runs", "--runs-dir", str(small_fs / "runs"), "--json")
    finally:
        filler.unlink()
    assert full.code == 0, full.stderr
    _could_not_be_used(full.stderr, "full|disk I/O error")  # the WAL or its index cannot grow
    assert {r["run"]: r["tags"] for r in full.json()}[made[1]] == {"firmware": "9.9"}


@pytest.mark.live
def test_the_runs_list_at_80_columns_stacks_rather_than_cuts_a_figure(tmp_path, refbench):
    import subprocess

    from conftest import cli_env, refbench_command
    from test_report import _run

    run = _run(refbench, tmp_path, "--set", "sleepy.cases=20", "--speed", "7.5")  # a peak of 150,000 ops/s
    shown = subprocess.run(refbench_command("runs", "--runs-dir", str(tmp_path / "runs")), capture_output=True,
                           text=True, env=cli_env(COLUMNS="80"))
    assert shown.returncode == 0, shown.stderr
    assert "…" not in shown.stdout and all(len(line) <= 80 for line in shown.stdout.splitlines()), shown.stdout
    assert f"run: {run.name}" in shown.stdout and "150,000 ops/s" in shown.stdout


@pytest.mark.parametrize("value", ["1e308", "Infinity", "NaN", "[1]", "{}"])
def test_a_figure_no_measurement_can_be_makes_one_run_damaged_and_the_others_work(runs, value):
    runs, (slow, middle, fast) = runs
    record = sorted((runs / slow / "records" / "sleepy").glob("*.json"))[0]
    record.write_text(re.sub(r'"ops_per_s": [^,}]+', f'"ops_per_s": {value}', record.read_text(), count=1))
    run = lambda *args: subprocess.run(refbench_command(*args), cwd=runs.parent, env=cli_env(), capture_output=True,
                                       text=True, timeout=120)
    listed = run("runs", "--runs-dir", "runs", "--json")
    assert listed.returncode == 0, listed.stderr
    status = {r["run"]: r["status"] for r in json.loads(listed.stdout)}
    assert status[slow] == f"damaged: {record.relative_to(runs / slow)}: ops_per_s is not " + (
        "a number (a list)" if value == "[1]" else "a number (a dict)" if value == "{}" else
        f"a finite number ({float(value):g})")
    assert status[middle] == status[fast] == "complete"
    assert run("history", "sleepy.ops_per_s", "--runs-dir", "runs").returncode == 0
    assert run("compare", f"runs/{middle}", f"runs/{fast}").returncode == 0  # the other runs keep working
    for command in (("compare", f"runs/{middle}", f"runs/{slow}"), ("report", f"runs/{slow}")):
        said = run(*command)
        assert said.returncode == 2 and len(said.stderr.strip().splitlines()) == 1, said.stderr
        assert f"{record.relative_to(runs.parent)} is damaged: ops_per_s is not" in said.stderr, said.stderr


@pytest.mark.parametrize("value", ["lots", None, True])
def test_a_figure_of_the_wrong_type_is_a_damaged_record_not_an_internal_error(value):
    from refbench.suites import DamagedFigure, Record, get_suite

    oltp = get_suite("oltp")
    record = Record({"users": 2, "nopm": value, "tpm": 90.0}, suite="oltp", case_id="u2-r1")
    for call in (lambda: oltp.summarize([record]), lambda: oltp.headlines([record], [])):
        with pytest.raises(DamagedFigure, match=r"^records/oltp/u2-r1\.json: nopm is not a finite number "):
            call()


def _edit_json(path: Path, change) -> None:
    path.write_text(json.dumps(change(json.loads(path.read_text()))))


FIELD_DAMAGE = {
    # name: (the file, how, the field the sentence names)
    "disturbed an object": ("records/sleepy/case-000.json", lambda d: {**d, "extra": {**d["extra"], "disturbed": {"a": 1}}},
                            "extra.disturbed is an object, not a string"),
    "disturbed a list": ("records/sleepy/case-000.json", lambda d: {**d, "extra": {**d["extra"], "disturbed": [1]}},
                         "extra.disturbed is a list, not a string"),
    "canary's figure text": ("records/sleepy/case-000.json",
                             lambda d: {**d, "extra": {**d["extra"], "canary": {"before": {"cpu_ms": "fast"}}}},
                             "extra.canary.before.cpu_ms is a string, not a finite number or null"),
    "run.json's audit text": ("run.json", lambda d: {**d, "audit": "none"}, "run.audit is a string, not a list"),
}


@pytest.mark.parametrize("kind", FIELD_DAMAGE)
def test_a_field_of_the_wrong_type_is_the_runs_one_damaged_sentence_everywhere(runs, kind):
    from test_dashboard import Server, _get

    runs, (slow, middle, fast) = runs
    relative, change, problem = FIELD_DAMAGE[kind]
    _edit_json(runs / slow / relative, change)
    (runs / CATALOG_FILE).unlink()
    run = lambda *args: subprocess.run(refbench_command(*args), cwd=runs.parent, env=cli_env(), capture_output=True,
                                       text=True, timeout=120)
    listed = run("runs", "--runs-dir", "runs", "--json")
    assert listed.returncode == 0, listed.stderr
    status = {r["run"]: r["status"] for r in json.loads(listed.stdout)}
    assert problem in status[slow] and status[middle] == status[fast] == "complete", status
    assert len(listed.stderr.strip().splitlines()) == 1 and problem in listed.stderr, listed.stderr
    assert run("history", "sleepy.ops_per_s", "--runs-dir", "runs").returncode == 0
    for command in (("report", f"runs/{slow}"), ("compare", f"runs/{middle}", f"runs/{slow}")):
        said = run(*command)
        assert said.returncode == 2 and len(said.stderr.strip().splitlines()) == 1, said.stderr
        assert problem in said.stderr and "internal error" not in said.stderr, said.stderr
    server = Server(runs.parent)
    try:
        status, page = _get(server.base + (f"?token={server.token}" if server.token else ""))
        assert status == 200 and slow in page and fast in page
    finally:
        server.stop()


@pytest.mark.parametrize("verdict, problem", [('{"suite": "sleepy"}', "verdict is an object, not a list"),
                                              ('[{"suite": 1}]', "verdict[0] has no 'headlines'"),
                                              ('[{"suite": "sleepy", "headlines": "fast"}]', None)])
def test_a_verdict_of_the_wrong_shape_is_one_sentence_in_why_and_verdict(runs, verdict, problem):
    runs, (slow, _, _) = runs
    (runs / slow / "verdict.json").write_text(verdict)
    for command in ("why", "verdict"):
        said = subprocess.run(refbench_command(command, f"runs/{slow}"), cwd=runs.parent, env=cli_env(),
                              capture_output=True, text=True, timeout=120)
        assert said.returncode == 2 and len(said.stderr.strip().splitlines()) == 1, said.stderr
        assert "internal error" not in said.stderr and "verdict.json is damaged: verdict" in said.stderr, said.stderr
        assert problem is None or problem in said.stderr, said.stderr


def test_a_writer_writes_only_fields_it_declared(tmp_path):
    """What readers check is the writers' own declaration: a key a writer did not declare is refused as it is written,
    so that a new field is declared, and so checked, the day it is added."""
    from refbench.records import Record
    from refbench.runstore import Run

    (tmp_path / "r").mkdir()
    run = Run(tmp_path / "r")
    with pytest.raises(ValueError, match=r"record's extra\.colour is not declared \(refbench\.records\.RecordExtra\)"):
        run.write_record(Record({"ops_per_s": 1.0}, extra={"colour": "blue"}, suite="sleepy", case_id="c"))
    with pytest.raises(ValueError, match=r"record's extra\.disturbed is a number, not a string"):
        run.write_record(Record({"ops_per_s": 1.0}, extra={"disturbed": 3}, suite="sleepy", case_id="c"))
    with pytest.raises(ValueError, match=r"verdict\[0\]\.mood is not declared"):
        run.write_verdicts([{"suite": "s", "headlines": [], "checks_passed": 0, "checks_failed": 0, "correctness": "",
                             "bottleneck": "", "mood": "good"}])
    assert not list((tmp_path / "r").rglob("*.json"))
