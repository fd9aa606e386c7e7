"""What limits the server, in its own words: the wait profile sampled from its sessions, and the bottleneck line it
gives, on purpose-made bottlenecks of a real managed PostgreSQL (and MariaDB's CPU-bound one)."""

from __future__ import annotations

import functools
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from pathlib import Path

import pytest

from conftest import cli_env, refbench_command, wait_for
from refbench.children import die_with_parent
from refbench.engines.duckdb import DuckDbEngine
from refbench.engines.waits import REDO_WAIT, RedoLogWatch, by_meaning, figures, profile
from refbench.report.waits import change_line, explain, profile_changes
from refbench.suites import Record

BLKIO = Path("/sys/fs/cgroup/blkio")


def _profile(events: dict[tuple[str, str], int], ticks: int = 10) -> dict:
    return profile(Counter(events), {0: Counter({"_ticks": ticks, **{k: n for (k, _), n in events.items()}})}, ticks,
                   0.1, 0.01, 0.001, None)


def test_a_profile_shares_session_time_and_adds_up_to_100_percent():
    p = _profile({("CPU", "CPU"): 6, ("IO", "WALSync"): 3, ("LWLock", "WALWrite"): 1})
    assert p["session_samples"] == 10 and p["avg_active_sessions"] == 1.0
    assert [(e["class"], e["event"], e["share_pct"]) for e in p["events"]] == [
        ("CPU", "CPU", 60.0), ("IO", "WALSync", 30.0), ("LWLock", "WALWrite", 10.0)]
    assert p["classes"] == {"CPU": 60.0, "IO": 30.0, "LWLock": 10.0}
    # A session waiting for another's WAL flush (LWLock:WALWrite) is flush time too.
    assert [(m, share) for m, share, _ in by_meaning(p)] == [("cpu", 60.0), ("flush", 40.0)]
    # every event of a meaning rounded up a little: the meaning's share is still a share
    assert by_meaning({"events": [{"class": "CPU", "event": f"op{i}", "share_pct": 33.337} for i in range(3)]})[0][1] == 100.0
    assert figures(p, {"ms_per_flush": 1.9, "ms_per_read": None}) == {
        "wait_cpu_pct": 60.0, "wait_flush_pct": 40.0, "active_sessions": 1.0, "wal_flush_ms": 1.9}


def test_the_bottleneck_is_said_as_a_dba_would():
    flush = _profile({("IO", "WALSync"): 58, ("CPU", "CPU"): 42})
    assert explain(flush, {"ms_per_flush": 1.9, "flushes_per_s": 410.0}, "vda").startswith(
        "storage flush latency: 58% of session time waiting (IO:WALSync 58%), 1.9 ms per WAL flush on vda (410 a second)")
    read = _profile({("IO", "DataFileRead"): 41, ("CPU", "CPU"): 30, ("Lock", "tuple"): 29})
    assert explain(read, {"ms_per_read": 0.8}, "vda").startswith(
        "storage read latency: 41% of session time waiting (IO:DataFileRead 41%), 0.8 ms per block read on vda; then CPU 30%")
    assert explain(_profile({("Lock", "tuple"): 35, ("CPU", "CPU"): 30, ("Lock", "transactionid"): 35}), None, None) \
        .startswith("row locks: 70% of session time waiting")
    assert explain(_profile({("CPU", "CPU"): 83, ("IO", "WALSync"): 17}), None, None).startswith(
        "CPU: 83% of session time running (not waiting)")
    assert explain(_profile({}), None, None) is None  # no session was active: nothing to say


def _record(case: str, events: dict[tuple[str, str], int], **io) -> Record:
    return Record({}, suite="oltp", case_id=case, extra={"storage": {"waits": _profile(events), "io_latency": io}})


def test_a_comparison_says_how_what_limits_it_changed():
    throttled = [_record("u2", {("IO", "WALSync"): 80, ("CPU", "CPU"): 20}, ms_per_flush=99.8)]
    repeats = [_record("u2-r1", {("CPU", "CPU"): 90, ("IO", "WALSync"): 10}, ms_per_flush=0.2),
               _record("u2-r2", {("CPU", "CPU"): 96, ("IO", "WALSync"): 4}, ms_per_flush=0.4)]
    change, = profile_changes(["A", "B"], [{("oltp", "u2"): throttled}, {("oltp", "u2"): repeats}])
    assert (change["limit_A"], change["limit_B"]) == ("storage flush latency", "CPU")
    # the repeats' mean on B's side; the largest share on either side first
    assert [(s["means"], s["A_pct"], s["B_pct"], s["points"]) for s in change["shares"]] == [
        ("CPU", 20.0, 93.0, 73.0), ("storage flush latency", 80.0, 7.0, -73.0)]
    assert change_line(change) == ("oltp u2: limited by storage flush latency → CPU; CPU 20% → 93%, storage flush "
                                   "latency 80% → 7%; 99.8 → 0.3 ms per WAL flush")
    # a case without a profile on one side (a DuckDB run, sampling off) has nothing to compare
    assert profile_changes(["A", "B"], [{("oltp", "u2"): throttled}, {("oltp", "u2"): [_record("u2", {})]}]) == []


WRITER = """
import os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT)
print("open", flush=True)
while sys.argv[2] == "write":
    os.pwrite(fd, os.urandom(4096), 0)
    os.fdatasync(fd)
time.sleep(60)
"""


@pytest.mark.parametrize("writing", [True, False])
def test_the_redo_log_is_seen_in_flight_from_the_kernel_only_while_it_is_written(tmp_path, writing):
    process = subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path / "ib_logfile0"), "write" if writing else "idle"],
                               stdout=subprocess.PIPE, text=True, preexec_fn=functools.partial(die_with_parent, signal.SIGTERM))
    try:
        assert process.stdout.readline() == "open\n"
        watch = RedoLogWatch.for_server(process.pid)
        assert watch is not None and watch.log_fds
        # A session in a commit stage waits for the log while a thread writes or flushes it, and runs otherwise.
        seen: Counter = Counter()
        for _ in range(200):  # a second's worth, spread out: the writer also runs between its calls
            seen.update(tuple(row) for row in watch.classify([("CPU", "commit"), ("Lock", "row lock")]))
            time.sleep(0.005)
        assert seen[("Lock", "row lock")] == 200  # other waits are left as they are
        assert (seen[("IO", REDO_WAIT)] > 0) == writing and seen[("IO", REDO_WAIT)] + seen[("CPU", "CPU")] == 200, seen
        assert (watch.summary()["redo_log_in_flight_pct"] > 0) == writing
        watch.close()
    finally:
        process.kill()
        process.wait()
    assert RedoLogWatch.for_server(os.getpid()) is None  # no log file open: nothing to watch


def test_duckdb_says_where_its_query_time_went_from_its_own_profiler(tmp_path):
    engine = DuckDbEngine(tmp_path / "t.duckdb", dataset=None)
    engine.open()
    try:
        engine.run("CREATE TABLE t AS SELECT range AS i, range % 97 AS g FROM range(3000000)")
        profiler = engine.wait_sampler()
        profiler.start()
        engine.run("SELECT g, sum(i) FROM t GROUP BY g")
        stream = engine.session()  # another stream's connection profiles too
        stream.run("SELECT count(*) FROM t a JOIN t b USING (i) WHERE a.g = 3")
        with pytest.raises(Exception):
            stream.run("SELECT no_such_column FROM t")  # a failed query has no profile
        profile = profiler.stop()
        assert engine.profiler is None
        engine.run("SELECT count(*) FROM t")  # after the interval: not profiled
        stream.close()
    finally:
        engine.close()
    assert profile["samples"] == 2 and profile["source"] == "DuckDB's profiler"
    assert sum(e["share_pct"] for e in profile["events"]) == pytest.approx(100, abs=0.1)
    assert {("CPU", "scan"), ("CPU", "aggregate"), ("CPU", "join")} <= {(e["class"], e["event"]) for e in profile["events"]}
    assert profile["per_second"] and profile["busy_threads"] > 0 and profile["profiling_cost_s"] >= 0
    line = explain(profile, None, None)
    assert line.startswith("CPU: ") and "of query thread time in operators (" in line and line.endswith(" 2 queries)")


def test_a_managed_mariadb_whose_sessions_are_not_sampled_runs_without_performance_schema():
    from refbench.suites.oltp import OltpSuite, _server_settings

    o = {k: v.default["quick"] if isinstance(v.default, dict) and "quick" in v.default else v.default
         for k, v in OltpSuite.options.items()} | {"engine": "mariadb"}
    assert "performance_schema" not in _server_settings(o)  # mariadb.DEFAULTS then keep it on, the file waits instrumented
    assert _server_settings(o | {"sample_sessions": False})["performance_schema"] == "OFF"
    # a plan's own setting wins
    assert _server_settings(o | {"sample_sessions": False, "mariadb_settings": ["performance_schema=ON"]})[
        "performance_schema"] == "ON"


def _join_throttled(group: Path) -> None:
    (group / "cgroup.procs").write_text(str(os.getpid()))
    die_with_parent(signal.SIGTERM)


def _device_number(path: Path) -> str:
    st = os.stat(path)
    return f"{os.major(st.st_dev)}:{os.minor(st.st_dev)}"


BOTTLENECKS = {
    # Every commit waits for its WAL flush, and the device takes 30 writes a second from this server.
    "flush": ("storage flush latency", ["--users", "2"]),
    # 4 warehouses (about 400 MB) behind a 48 MB cache bound and 16 MB of shared_buffers: most rows come from storage.
    "read": ("storage read latency", ["--warehouses", "4", "--users", "4", "--set", "oltp.cache_mb=48",
                                      "--set", "oltp.shared_buffers=16MB"]),
    # 16 users on one warehouse: they queue for the same district and stock rows.
    "locks": ("row locks", ["--users", "16"]),
    # The data in memory and commits that do not wait for their flush: the sessions only run.
    "cpu": ("CPU", ["--users", "2", "--set", 'oltp.pg_settings=["max_wal_size=1GB","synchronous_commit=off"]']),
    # The same throttle on MariaDB: its sessions wait in their commit while a server thread writes the redo log.
    "mariadb-flush": ("storage flush latency", ["--engine", "mariadb", "--users", "2", "--set", 'oltp.mariadb_settings=['
                      '"innodb_log_file_size=1G","thread_handling=pool-of-threads"]']),
    # The same on MariaDB: the redo log written at each commit but flushed once a second.
    "mariadb-cpu": ("CPU", ["--engine", "mariadb", "--users", "2", "--set", 'oltp.mariadb_settings=['
                            '"innodb_log_file_size=1G","thread_handling=pool-of-threads","innodb_flush_log_at_trx_commit=2"]']),
}


@pytest.mark.slow
@pytest.mark.reference  # `make test-reference`: about 80 s of real runs that `make test`'s 15 minutes cannot hold
@pytest.mark.parametrize("bottleneck", list(BOTTLENECKS))
def test_a_purpose_made_bottleneck_is_named_from_the_wait_profile(bottleneck, tmp_path, reachable_dir):
    phrase, args = BOTTLENECKS[bottleneck]
    preexec = functools.partial(die_with_parent, signal.SIGTERM)
    group = None
    if bottleneck.endswith("flush"):
        if not (BLKIO / "blkio.throttle.write_iops_device").exists():
            pytest.skip("no cgroup v1 blkio controller here to throttle the device's writes with")
        group = BLKIO / f"refbench-test-{uuid.uuid4().hex[:8]}"
        group.mkdir()
        preexec = functools.partial(_join_throttled, group)  # the run and all it starts, its server too
    command = refbench_command("oltp", "--warehouses", "1", "--rampup-s", "2", "--duration-s", "5", *args,
                               "--data-dir", str(reachable_dir / "data"), "--runs-dir", "runs")
    process = subprocess.Popen(command, cwd=tmp_path, env=cli_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, preexec_fn=preexec)
    try:
        if group is not None:
            # Throttled from the end of the load to the end of the measurement: the load and the server's last
            # checkpoint at full speed, the measured commits at 30 device writes a second.
            limit = group / "blkio.throttle.write_iops_device"
            device = _device_number(reachable_dir)
            wait_for(lambda: list(tmp_path.glob("runs/*/work/oltp/load.json")), 300, "the load", every_s=0.2)
            limit.write_text(f"{device} 30")
            wait_for(lambda: list(tmp_path.glob("runs/*/records/oltp/*.json")) or process.poll() is not None, 300,
                     "the measurement", every_s=0.2)
            limit.write_text(f"{device} 0")
        stdout, stderr = process.communicate(timeout=600)
    finally:
        process.kill()
        process.wait()
        if group is not None:  # once the run's server has stopped too (a moment after the run ends), it is empty
            wait_for(lambda: not (group / "cgroup.procs").read_text().strip(), 60, "the server's end", every_s=0.2)
            group.rmdir()
    # A throttled run commits a few dozen transactions in its 5 s: too few to judge the mix by, which fails its
    # check, saying so; no other check may fail.
    failed = [line for line in stderr.splitlines() if line.startswith("FAILED")]
    assert process.returncode == (1 if failed else 0), stderr
    assert all("too short to judge the mix" in line for line in failed), stderr
    run = tmp_path / stdout.strip().splitlines()[-1]
    bottleneck_line = json.loads((run / "verdict.json").read_text())[0]["bottleneck"]
    # A case run beside other work (the tests run two at a time) may be named from its queue for the CPU, its own
    # limit then next.
    assert bottleneck_line.startswith(f"{phrase}: ") or (bottleneck_line.startswith("waiting for CPU (queued") and (
        phrase == "CPU" or f"; then {phrase} " in bottleneck_line)), bottleneck_line
    assert "; host: " in bottleneck_line  # the host's own figures after the database's words
