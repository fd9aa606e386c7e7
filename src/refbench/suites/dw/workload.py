"""The rating workload: concurrent sessions run a scan-heavy mix of the decision-support queries for a fixed
interval, while the engine's memory is capped and the data files are kept out of the OS page cache, so that the
storage is what gets measured (the DWFT rating paper caps SQL Server's memory, which reads with direct I/O).

PostgreSQL and DuckDB read through the OS page cache, so capping their own buffers is not enough: every
``evict_s`` seconds the data files' cached pages are dropped with posix_fadvise(DONTNEED), for those files only (the
row store's only when it has no cache bound, which keeps its page cache small itself).
"""

from __future__ import annotations

import random
import threading
import time
from pathlib import Path
from typing import Any, Callable

from refbench.host.cachebound import PeriodicEviction
from refbench.host.telemetry import SECTOR_BYTES, cpu_rates, read_cpu, read_disks
from refbench.suites.dss.queries import QUERIES, random_parameters

# Queries whose work is mostly scanning lineitem and orders: the Fast Track mix is scan-heavy by design.
SCAN_MIX = [1, 6, 14, 12, 3, 5, 10, 7, 9, 18]
PROC = Path("/proc")


def run(engine, sf: float, sessions: int, duration_s: float, seed: int, files: list[Path], evict_s: float,
        device: str | None, probe, on_live: Callable[[float, int], None] | None = None) -> dict[str, Any]:
    """Runs the mix on ``sessions`` sessions for ``duration_s``; returns what completed and what the host did, with
    the ``probe``'s storage figures (suites.storage) of the interval. ``on_live(seconds, queries completed)`` about
    once a second."""
    stop = threading.Event()
    completed: list[tuple[int, float]] = []  # (query, seconds) finished inside the interval
    errors: list[str] = []
    lock = threading.Lock()
    open_sessions = [engine.session() for _ in range(sessions)]

    def session_loop(index: int, session) -> None:
        rng = random.Random(seed * 1000 + index)
        mix = SCAN_MIX[index % len(SCAN_MIX):] + SCAN_MIX[:index % len(SCAN_MIX)]  # sessions start apart in the mix
        while not stop.is_set():
            params = random_parameters(sf, rng)
            for q in mix:
                if stop.is_set():
                    return
                try:
                    _, seconds = session.run(QUERIES[q].format(**params[q]).strip())
                except Exception as exc:  # a query cancelled at the end of the interval, or a real failure
                    if not stop.is_set():
                        with lock:
                            errors.append(f"Q{q}: {str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__}")
                        stop.set()
                    return
                if not stop.is_set():
                    with lock:
                        completed.append((q, seconds))

    threads = [threading.Thread(target=session_loop, args=(i, s)) for i, s in enumerate(open_sessions)]
    eviction = PeriodicEviction(lambda: files, evict_s).start() if evict_s > 0 and files else None
    before = engine.usage()
    probe.start()
    cpu0, disks0, t0 = read_cpu(PROC), read_disks(PROC), time.time()
    for t in threads:
        t.start()
    while (left := t0 + duration_s - time.time()) > 0 and not stop.wait(min(1.0, left)):
        if on_live:
            on_live(time.time() - t0, len(completed))
    stop.set()
    cpu1, disks1, t1 = read_cpu(PROC), read_disks(PROC), time.time()
    try:
        seen_storage, failed = probe.stop(), None
    except MemoryError as exc:  # raised once the sessions have stopped
        seen_storage, failed = None, exc
    after = engine.usage() if failed is None else {}
    if eviction is not None:
        eviction.stop()
    for s in open_sessions:
        s.cancel()
    for t in threads:
        t.join()
    for s in open_sessions:
        s.close()
    if failed is not None:
        raise failed
    interval = t1 - t0
    physical = None
    if device and device in disks0 and device in disks1:
        physical = (disks1[device][1] - disks0[device][1]) * SECTOR_BYTES / 1e6 / interval
    logical = None
    if "logical_read_bytes" in before:
        logical = (after["logical_read_bytes"] - before["logical_read_bytes"]) / 1e6 / interval
    cpu = None
    if cpu0 and cpu1:
        rates = cpu_rates(cpu0, cpu1)
        cpu = 100 - rates["idle_pct"] - rates["iowait_pct"]
    return {"interval_s": interval, "started_epoch_s": t0, "ended_epoch_s": t1, "completed": completed,
            "errors": errors, "physical_mb_s": physical, "logical_mb_s": logical, "cpu_pct": cpu, "storage": seen_storage}
