"""No run dies of /proc: every read of another process's /proc files tolerates that process (or one of its threads)
ending at any instant — between listing it and reading it, or between two of its files.

A process tree made for the test churns: its root forks children and starts threads that end within milliseconds,
and a killer ends others at random moments. Every /proc reader refbench has walks that tree over and over while it
churns; then a real run is measured on a PostgreSQL whose children the test ends at random moments."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time

import pytest

from conftest import refbench_command

CHURN = r"""
import os, random, sys, threading, time
random.seed(int(sys.argv[1]))

def reap():
    while True:
        try:
            os.wait()
        except ChildProcessError:
            time.sleep(0.0005)

def brief_thread():
    time.sleep(random.random() / 1000)

threading.Thread(target=reap, daemon=True).start()
while True:
    if os.fork() == 0:
        if random.random() < 0.5:
            threading.Thread(target=brief_thread).start()
        time.sleep(random.random() / 1000)
        os._exit(0)
    threading.Thread(target=brief_thread).start()
    time.sleep(random.random() / 2000)
"""

@pytest.fixture
def churning_tree():
    root = subprocess.Popen([sys.executable, "-c", CHURN, "7"])
    stop = threading.Event()

    def killer() -> None:
        """Ends the root's children at random moments, as a crash or an OOM kill would."""
        from refbench.host.cachebound import children

        rng = random.Random(3)
        while not stop.is_set():
            for pid in children(root.pid):
                if rng.random() < 0.3:
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
            time.sleep(rng.random() / 100)

    thread = threading.Thread(target=killer, daemon=True)
    thread.start()
    yield root.pid
    stop.set()
    thread.join()
    root.kill()
    root.wait()


def test_every_proc_reader_survives_processes_ending_at_any_instant(churning_tree):
    from refbench.children import start_time
    from refbench.engines.postgres import postgres_cpu_s, proc_stat
    from refbench.host.cachebound import children, process_tree_io
    from refbench.host.telemetry import read_process_io
    from refbench.suites.oltp.driver import rss_bytes

    root = churning_tree
    deadline, walks, seen = time.monotonic() + 3, 0, set()
    while time.monotonic() < deadline:
        assert process_tree_io(root).keys() == {"read_bytes", "write_bytes"}
        kids = children(root)
        seen.update(kids)
        for pid in kids:
            proc_stat(pid), start_time(pid), read_process_io(pid), children(pid)
        rss_bytes([root, *kids])
        postgres_cpu_s(root)
        walks += 1
    # The tree churned under the readers: children came and went while they walked it (fewer on a busy machine).
    assert walks > 10 and len(seen) > 10, (walks, len(seen))
    assert start_time(root) is not None and start_time(2**22 + 1) is None


@pytest.mark.slow
def test_a_sampled_run_completes_while_server_children_end_at_random_moments(tmp_path, reachable_dir):
    """A dss run on its managed PostgreSQL, whose process tree refbench walks for the server's own I/O and whose
    sessions it samples, while the test keeps connecting to that server and ending its own backends at random
    moments (SIGTERM, as pg_terminate_backend does): the server's children come and go all through the measured
    intervals. The run completes, its checks pass, and its records hold the server's I/O."""
    import json

    import psycopg

    data, runs = reachable_dir / "data", tmp_path / "runs"
    data.mkdir()
    run = subprocess.Popen(refbench_command("dss", "--engines", "postgres", "--modes", "power",
                                            "--data-dir", str(data), "--runs-dir", str(runs)),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    ended: list[int] = []

    def server_dsn() -> str | None:
        """The managed server's TCP address (its postmaster.pid, once ready) and password (the run's secrets)."""
        try:
            lines = (data / "pgdata" / "postmaster.pid").read_text().splitlines()
            password = next(runs.glob("*/secrets/dss-postgres.password")).read_text().strip()
        except (OSError, StopIteration):
            return None
        ready = len(lines) >= 8 and lines[7].strip() == "ready"
        return f"host=127.0.0.1 port={lines[3].strip()} user=refbench password={password} dbname=postgres" \
            if ready else None

    def churn() -> None:
        rng = random.Random(5)
        while run.poll() is None:
            dsn = server_dsn()
            try:
                conn = psycopg.connect(dsn, autocommit=True, connect_timeout=5) if dsn else None
            except psycopg.Error:
                conn = None
            if conn is None:
                time.sleep(0.1)
                continue
            backend = conn.info.backend_pid
            if rng.random() < 0.5:
                threading.Thread(target=_busy, args=(conn,), daemon=True).start()
            time.sleep(rng.random() / 20)
            try:
                os.kill(backend, signal.SIGTERM)
                ended.append(backend)
            except ProcessLookupError:
                pass
            time.sleep(rng.random() / 50)

    thread = threading.Thread(target=churn, daemon=True)
    thread.start()
    try:
        stdout, stderr = run.communicate(timeout=600)
    finally:
        run.kill()
        run.wait()
        thread.join()
    assert run.returncode == 0, stderr[-3000:]
    assert "internal error" not in stderr
    assert len(ended) > 20, len(ended)
    records = [json.loads(p.read_text()) for p in runs.glob("*/records/dss/*.json")]
    assert len(records) == 1, records
    # The server's own I/O was read from its process tree, walked while its children came and went.
    assert all(r["extra"]["storage"]["server_read_mb"] is not None for r in records), [r["extra"]["storage"] for r in records]


def _busy(conn) -> None:
    """A query on the connection until the server ends its backend."""
    try:
        conn.execute("SELECT count(*) FROM generate_series(1, 50000000)")
    except Exception:
        pass
    finally:
        conn.close()
