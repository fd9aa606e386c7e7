"""Running out of disk space while measuring or while writing the report: one sentence naming the resource and the
path, exit status 75, and a run that `refbench resume` completes once space is freed."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import wait_for

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="mounting a small tmpfs needs root")


@pytest.fixture
def small_fs(tmp_path):
    """A 16 MiB tmpfs of the test's own, so filling it touches nothing else."""
    mountpoint = tmp_path / "small"
    mountpoint.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m,mode=0755", "refbench-test", str(mountpoint)], check=True)
    try:
        yield mountpoint
    finally:
        subprocess.run(["umount", "-l", str(mountpoint)], check=False)


def fill(directory: Path) -> Path:
    """Writes a file until the file system is full; removing it frees the space again."""
    filler = directory / "filler"
    # Unbuffered: a buffered file keeps the bytes the last write could not place and fails again when it closes.
    with open(filler, "wb", buffering=0) as f:
        try:
            while True:
                f.write(b"\0" * 65536)
        except OSError:
            pass
    return filler


def _one_sentence_about_space(stderr: str, where: Path) -> None:
    lines = [line for line in stderr.splitlines() if line.startswith("refbench:")]
    assert len(lines) == 1, stderr
    assert "out of disk space" in lines[0] and str(where) in lines[0] and "refbench resume" in lines[0], lines[0]
    assert "Traceback" not in stderr


@needs_root
def test_a_full_disk_while_measuring_stops_the_run_resumably(small_fs, process_tree):
    runs = small_fs / "runs"
    tree = process_tree("sleepy", "--runs-dir", str(runs), "--set", "sleepy.cases=12", "--set", "sleepy.sleep_s=0.4")
    records = wait_for(lambda: next(runs.glob("*/records/sleepy"), None), 60, "the first record")
    wait_for(lambda: len(list(records.glob("[!.]*.json"))) >= 2, 60, "two records")
    filler = fill(small_fs)
    ended = tree.finish()
    assert ended["code"] == 75, ended["stderr"]
    _one_sentence_about_space(ended["stderr"], runs)
    assert ended["survivors"] == []
    run = records.parents[1]
    before = {p.name: p.read_bytes() for p in records.glob("[!.]*.json")}
    assert 2 <= len(before) < 12

    filler.unlink()
    resumed = tree_result = process_tree("resume", str(run)).finish()
    assert resumed["code"] == 0, tree_result["stderr"]
    after = {p.name: p.read_bytes() for p in records.glob("[!.]*.json")}
    assert len(after) == 12 and all(after[name] == content for name, content in before.items())
    assert json.loads((run / "run.json").read_text())["status"] == "complete"


@needs_root
def test_a_full_disk_while_writing_the_report_stops_the_run_resumably(small_fs, process_tree):
    runs = small_fs / "runs"
    tree = process_tree("sleepy", "--runs-dir", str(runs), "--set", "sleepy.cases=2", "--set", "sleepy.sleep_s=0",
                        env={"SLEEPY_SUMMARIZE_S": "3"})
    findings = wait_for(lambda: next(runs.glob("*/findings/sleepy.json"), None), 60, "the checks")
    filler = fill(small_fs)  # while the report's tables are being made
    ended = tree.finish()
    assert ended["code"] == 75, ended["stderr"]
    _one_sentence_about_space(ended["stderr"], runs)
    run = findings.parents[1]
    assert not (run / "report.html").exists()

    filler.unlink()
    resumed = process_tree("resume", str(run)).finish()
    assert resumed["code"] == 0, resumed["stderr"]
    assert (run / "report.html").is_file()
    assert json.loads((run / "run.json").read_text())["status"] == "complete"


@pytest.mark.live
def test_out_of_memory_in_duckdb_is_one_sentence_and_resumable(tmp_path, refbench):
    result = refbench("dss", "--sf", "0.01", "--engines", "duckdb", "--duckdb-memory-limit", "2MB", "--modes", "power",
                      "--runs-dir", "runs")
    assert result.code == 75, result.stderr
    line, = [line for line in result.stderr.splitlines() if line.startswith("refbench:")]
    assert "out of memory (Out of Memory Error" in line and "refbench resume runs/" in line
    assert "Possible solutions" not in line  # DuckDB's advice would make it a paragraph


def test_out_of_file_descriptors_names_the_limit(tmp_path):
    import errno
    import resource

    from refbench.exhaustion import explain

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    opened = []
    resource.setrlimit(resource.RLIMIT_NOFILE, (64, hard))
    try:
        with pytest.raises(OSError) as caught:
            for i in range(100):
                opened.append(open(tmp_path / f"f{i}", "w"))
        assert caught.value.errno == errno.EMFILE
        explained = explain(caught.value, tmp_path / "run")
    finally:
        for f in opened:
            f.close()
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    assert explained is not None and explained.exit_code == 75
    assert "out of file descriptors" in str(explained) and "ulimit -n, now 64" in str(explained)
    assert str(tmp_path) in str(explained)  # the file it could not open


@needs_root
@pytest.mark.live
def test_a_postgresql_panic_on_a_full_disk_is_caught_and_explained(tmp_path):
    import shutil
    import tempfile

    import psycopg

    from refbench.engines.postgres import ManagedPostgres, connect
    from refbench.plan import Plan
    from refbench.runner import diagnose
    from refbench.runstore import Run

    base = Path(tempfile.mkdtemp(prefix="refbench-test-panic-"))  # the postgres account reaches it, unlike tmp_path
    base.chmod(0o755)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=96m,mode=0755", "refbench-test", str(base)], check=True)
    server = ManagedPostgres(base / "pgdata", {"shared_buffers": "16MB"})
    try:
        server.start()
        with connect(server.dsn, autocommit=True) as conn:
            fill(base)
            # WAL without touching a table: the server must start a new WAL segment file, and there is no space for it.
            with pytest.raises(psycopg.Error) as caught:
                for _ in range(64):
                    conn.execute("SELECT pg_logical_emit_message(false, 'refbench', repeat('x', 1000000))")
                    conn.execute("SELECT pg_switch_wal()")
        run = Run.create(Plan(runs_dir=str(tmp_path / "runs")), {})
        explained = diagnose(caught.value, run)
    finally:
        server.stop()
        subprocess.run(["umount", "-l", str(base)], check=False)
        shutil.rmtree(base, ignore_errors=True)
    message = str(explained)
    assert "PANIC" not in str(caught.value)  # the client saw only the connection drop …
    assert "the managed PostgreSQL stopped: PANIC:" in message and "No space left on device" in message  # … we say why
    assert "out of disk space" in message and "pg_wal" in message and "refbench resume" in message
    assert explained.exit_code == 75


@pytest.mark.slow
def test_running_out_of_database_connections_is_one_sentence_and_resumable(tmp_path, loaded_postgres, process_tree):
    """The server had a connection for every user when the run was checked, and another client takes them once
    the first virtual user runs: the users still logging in during the ramp-up find none left. The run's database
    is loaded already (a copy of the one-warehouse template): the run reuses it."""
    import psycopg

    from refbench.engines.postgres import connect

    server = loaded_postgres({"max_connections": "30"})
    server.start()
    hogs = []
    try:
        dsn = server.database("refbench")
        tree = process_tree("oltp", "--dsn", dsn, "--warehouses", "1", "--users", "12", "--rampup-s", "10",
                            "--duration-s", "2", "--runs-dir", "runs")

        hogs.append(connect(dsn, autocommit=True))
        wait_for(lambda: hogs[0].execute("SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'SELECT tpcc.%'")
                 .fetchone()[0], 300, "the first virtual user's transactions", 0.1)
        with pytest.raises(psycopg.OperationalError, match="too many clients"):
            while True:  # every connection left, while the other users are still logging in
                hogs.append(psycopg.connect(dsn))
        ended = tree.finish()
        assert ended["code"] == 75, ended["stderr"]
        line, = [line for line in ended["stderr"].splitlines() if line.startswith("refbench:")]
        assert "out of database connections" in line and "too many clients" in line and "max_connections" in line, line
        assert "refbench resume" in line

        for conn in hogs:  # the other client goes away
            conn.close()
        hogs = []
        run = next((tmp_path / "runs").iterdir())
        resumed = process_tree("resume", str(run)).finish()
        assert resumed["code"] == 0, resumed["stderr"]
        assert [p.stem for p in (run / "records" / "oltp").glob("[!.]*.json")] == ["u12-r1"]
    finally:
        for conn in hogs:
            conn.close()
        server.stop()


@needs_root
@pytest.mark.parametrize("how", ["read-only", "full"])
def test_a_read_only_or_full_runs_directory_is_one_sentence_and_the_resource_status(small_fs, tmp_path, refbench, how):
    made = [refbench("sleepy", "--runs-dir", str(small_fs / "runs"), "--set", "sleepy.sleep_s=0", "--set",
                     "sleepy.cases=2") for _ in range(2)]
    assert all(m.code == 0 for m in made), [m.stderr for m in made]
    run, other = (Path(m.last_line) for m in made)
    shutil.rmtree(run / "tables")  # what report writes again
    if how == "read-only":
        subprocess.run(["mount", "-o", "remount,ro", str(small_fs)], check=True)
    else:
        fill(small_fs)
    for args in (("report", str(run)), ("compare", str(run), str(other), "--out", str(small_fs / "c.html")),
                 ("tag", str(run), "firmware=2.1"), ("clean", str(run))):
        done = refbench(*args)
        assert done.code == 75, (args, done.code, done.stderr)
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and str(small_fs) in lines[0] and "internal error" not in lines[0], (args, done.stderr)
        assert ("is read-only; remount it read-write" if how == "read-only" else "out of disk space") in lines[0], lines
