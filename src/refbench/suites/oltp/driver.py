"""The load generator: N virtual users, each its own process with its own connection, running the TPC-C mix
against the server-side functions. Ramp-up, then a timed measurement; latencies go into HDR histograms.

A virtual user's home warehouse is spread evenly over all warehouses (user i → warehouse i mod W + 1), so no
warehouse is a hot spot. Keying and think times are off unless asked for (5.2.5.7).
"""

from __future__ import annotations

import math
import multiprocessing
import os
import queue
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from hdrh.histogram import HdrHistogram
from psycopg import pq

from refbench.children import forked_worker
from refbench.engines.postgres import connect
from refbench.errors import UserError
from refbench.suites.oltp import database
from refbench.suites.oltp.inputs import INPUTS
from refbench.suites.oltp.rand import TpccRandom

TX = ["new_order", "payment", "order_status", "delivery", "stock_level"]
DECK = ["new_order"] * 10 + ["payment"] * 10 + ["order_status", "delivery", "stock_level"]  # 23 cards, 5.2.4.2
KEYING_S = {"new_order": 18, "payment": 3, "order_status": 2, "delivery": 2, "stock_level": 2}
THINK_MEAN_S = {"new_order": 12, "payment": 12, "order_status": 10, "delivery": 5, "stock_level": 5}
SQL = {
    "new_order": "SELECT tpcc.new_order($1, $2, $3, $4::int[], $5::int[], $6::int[])",
    "payment": "SELECT tpcc.payment($1, $2, $3, $4, $5, $6::text, $7::numeric)",
    "order_status": "SELECT tpcc.order_status($1, $2, $3, $4::text)",
    "delivery": "SELECT tpcc.delivery($1, $2)",
    "stock_level": "SELECT tpcc.stock_level($1, $2, $3)",
}
ROLLBACK_SQLSTATE = "RB001"
# Errors after which going on would only measure the failure: the virtual user stops and the case fails.
FATAL_SQLSTATE_CLASSES = {
    "53": "the database server ran out of disk space, memory or connections",
    "57": "the database server was shut down or the transaction was cancelled",
    "58": "the database server had an I/O error",
    "XX": "the database server had an internal error",
    "42": "the TPC-C tables or functions are missing or were changed",
}
HIST_MAX_US = 120_000_000
DECKS_PER_BATCH = 4


def series_bucket_s(run_s: float) -> int:
    """The width of the throughput-over-time buckets: 10 seconds, as the papers plot, or 1 second when a case
    is shorter than a minute (the quick profile), where 10-second buckets would leave a chart of two points."""
    return 10 if run_s >= 60 else 1


def _histogram() -> HdrHistogram:
    return HdrHistogram(1, HIST_MAX_US, 3)


def _cpu_s() -> float:
    t = os.times()
    return t.user + t.system


def _pause(seconds: float, stop: Any) -> None:
    """Keying or think time, cut short when the run stops."""
    until = time.monotonic() + seconds
    while not stop.value and (left := until - time.monotonic()) > 0:
        time.sleep(min(0.2, left))


def _virtual_user(index: int, dsn: str, warehouses: int, think: bool, seed: int, bucket_s: float, window: Any, go: Any,
                  stop: Any, out: Any, parent: int) -> None:
    forked_worker()
    try:
        conn = connect(dsn, autocommit=True)
    except UserError as exc:
        out.put(("error", index, str(exc)))
        return
    # libpq's prepared-statement call, without psycopg's cursor machinery: it halves the driver's CPU per
    # transaction, and the driver's CPU is CPU the database under test does not get.
    pgconn = conn.pgconn
    for tx, query in SQL.items():
        prepared = pgconn.prepare(tx.encode(), query.encode())
        if prepared.status != pq.ExecStatus.COMMAND_OK:
            out.put(("error", index, prepared.error_message.decode(errors="replace").strip()))
            return
    names = {tx: tx.encode() for tx in TX}
    out.put(("ready", index, None))
    rng = TpccRandom(seed * 1000 + index)
    w = index % warehouses + 1
    others = [x for x in range(1, warehouses + 1) if x != w]
    # One histogram and one count per (10-second slot, transaction, outcome); slots count from the start of the
    # measurement (ramp-up slots are negative), so the measured figures are the sum of slots 0 and up.
    hist: dict[tuple[int, str], HdrHistogram] = {}
    counts: dict[tuple[int, str, str], int] = {}
    errors: dict[str, int] = {}
    go.wait()
    start, end = window[0], window[1]
    cpu_at_start = cpu_at_end = None
    ok = pq.ExecStatus.TUPLES_OK

    while not stop.value:
        # Work in batches of a few decks: their inputs are made together and their results folded together.
        # Between two transactions the database evicts the driver from the CPU caches, and Python run cold costs
        # several times more: batching cut the driver's CPU per transaction by a third.
        batch = []
        for _ in range(DECKS_PER_BATCH):
            deck = list(DECK)
            rng.shuffle(deck)
            batch += deck
        inputs = [(tx, names[tx], INPUTS[tx](rng, w, others)) for tx in batch]
        results = []
        for tx, name, params in inputs:
            if stop.value or os.getppid() != parent:  # a killed runner leaves no user behind
                break
            if think:
                _pause(KEYING_S[tx], stop)
            t = time.perf_counter()
            result = pgconn.exec_prepared(name, params)
            latency_us = int((time.perf_counter() - t) * 1e6)
            now = time.time()
            if result.status == ok:
                outcome = "ok"
            else:
                sqlstate = (result.error_field(pq.DiagnosticField.SQLSTATE) or b"?").decode()
                outcome = "rollback" if sqlstate == ROLLBACK_SQLSTATE else "error"
                if outcome == "error":
                    if pgconn.status != pq.ConnStatus.OK:
                        first = pgconn.error_message.decode(errors="replace").strip().splitlines()[:1] or ["?"]
                        out.put(("error", index, "lost its connection: " + " ".join(first[0].split())))
                        return
                    if sqlstate[:2] in FATAL_SQLSTATE_CLASSES:
                        message = (result.error_field(pq.DiagnosticField.MESSAGE_PRIMARY) or b"").decode(errors="replace")
                        out.put(("error", index, f"stopped: {FATAL_SQLSTATE_CLASSES[sqlstate[:2]]} ({sqlstate}: {message})"))
                        return
                    errors[sqlstate] = errors.get(sqlstate, 0) + 1
            if now <= end:
                results.append((int((now - start) // bucket_s), tx, outcome, latency_us))
                if cpu_at_start is None and now >= start:
                    cpu_at_start = _cpu_s()
            elif cpu_at_end is None:
                cpu_at_end = _cpu_s()
            if think:
                _pause(min(-math.log(1 - rng.random()) * THINK_MEAN_S[tx], 10 * THINK_MEAN_S[tx]), stop)
        for slot, tx, outcome, latency_us in results:
            key = (slot, tx, outcome)
            counts[key] = counts.get(key, 0) + 1
            if outcome != "error":
                h = hist.get((slot, tx))
                if h is None:  # not setdefault: a histogram is costly to build, once per slot is enough
                    h = hist[(slot, tx)] = _histogram()
                h.record_value(min(max(latency_us, 1), HIST_MAX_US))
        if os.getppid() != parent:
            return
    if cpu_at_end is None:
        cpu_at_end = _cpu_s()
    conn.close()
    out.put(("done", index, {
        "hist": {key: h.encode() for key, h in hist.items()}, "counts": counts, "errors": errors,
        "cpu_s": (cpu_at_end - cpu_at_start) if cpu_at_start is not None else 0.0,
    }))


def _stat(pid: int) -> tuple[str, int, int, int] | None:
    """(command name, parent pid, own CPU ticks, reaped children's CPU ticks) of a process, from /proc."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2:].split()
    return (stat[stat.index("(") + 1:stat.rindex(")")], int(fields[1]), int(fields[11]) + int(fields[12]),
            int(fields[13]) + int(fields[14]))


def server_pid(conn: Any) -> int | None:
    """The postmaster of the server behind ``conn`` when it runs on this host (the parent of the connection's
    backend); None for a server elsewhere, whose CPU this host cannot see."""
    backend = _stat(conn.info.backend_pid)
    if backend is None or backend[0] != "postgres":
        return None
    postmaster = _stat(backend[1])
    return backend[1] if postmaster is not None and postmaster[0] == "postgres" else None


def postgres_cpu_s(postmaster: int) -> float:
    """CPU seconds used so far by one PostgreSQL server: its postmaster and live children, plus what its exited
    children (backends of closed connections) used, which the kernel adds to the postmaster's children's totals when
    it reaps them. Only that server: another PostgreSQL on the host (a neighbour's run) is not counted."""
    own = _stat(postmaster)
    if own is None:
        return 0.0
    total = own[2] + own[3]
    for pid in filter(str.isdigit, os.listdir("/proc")):
        child = _stat(int(pid))
        if child is not None and child[1] == postmaster:
            total += child[2]
    return total / os.sysconf("SC_CLK_TCK")


@dataclass
class DriverResult:
    users: int
    measured_s: float
    counters_start: dict[str, int]
    counters_end: dict[str, int]
    db_cpu_s: float | None  # None: the server runs on another host
    driver_cpu_s: float
    histograms: dict[str, HdrHistogram]
    counts: dict[str, dict[str, int]]
    errors: dict[str, int]
    series: list[dict[str, Any]] = field(default_factory=list)


def run(dsn: str, warehouses: int, users: int, rampup_s: float, duration_s: float, think: bool, seed: int,
        on_tick: Callable[[float], None] | None = None) -> DriverResult:
    mp = multiprocessing.get_context("fork")
    bucket_s = series_bucket_s(rampup_s + duration_s)
    window = mp.Array("d", 2)
    # stop is read before every transaction: a plain shared byte, not an Event, whose lock all users would share.
    go, stop, out = mp.Event(), mp.RawValue("b", 0), mp.Queue()
    procs = [mp.Process(target=_virtual_user, daemon=True,
                        args=(i, dsn, warehouses, think, seed, bucket_s, window, go, stop, out, os.getpid()))
             for i in range(users)]
    for p in procs:
        p.start()
    try:
        for _ in range(users):
            kind, index, detail = out.get(timeout=60)
            if kind == "error":
                raise UserError(f"virtual user {index} could not start: {detail}")
        with connect(dsn, autocommit=True) as conn:
            server = server_pid(conn)
            run_start = time.time()
            window[0], window[1] = run_start + rampup_s, run_start + rampup_s + duration_s
            go.set()
            _watch_until(window[0], run_start, out, on_tick)
            counters_start, cpu_start, t_start = database.counters(conn), _server_cpu_s(server), time.time()
            _watch_until(window[1], run_start, out, on_tick)
            counters_end, cpu_end, t_end = database.counters(conn), _server_cpu_s(server), time.time()
        stop.value = 1
        done = []
        while len(done) < users:
            try:
                kind, index, detail = out.get(timeout=120)
            except queue.Empty:
                raise UserError("virtual users did not finish within 120 s after the measurement ended") from None
            if kind == "error":
                raise UserError(f"virtual user {index} {detail}")
            if kind == "done":
                done.append(detail)
    finally:
        stop.value = 1
        go.set()
        for p in procs:
            p.join(timeout=10)
            if p.is_alive():
                p.kill()
    db_cpu_s = cpu_end - cpu_start if server is not None else None
    return _combine(users, t_end - t_start, counters_start, counters_end, db_cpu_s, done, rampup_s, duration_s, bucket_s)


def _server_cpu_s(server: int | None) -> float | None:
    return postgres_cpu_s(server) if server is not None else None


def _watch_until(t: float, run_start: float, out: Any, on_tick: Callable[[float], None] | None) -> None:
    """Waits until ``t``; a virtual user that fails meanwhile ends the case at once."""
    while (left := t - time.time()) > 0:
        try:
            kind, index, detail = out.get(timeout=min(1.0, left))
        except queue.Empty:
            pass
        else:
            raise UserError(f"virtual user {index} {detail}")
        if on_tick:
            on_tick(time.time() - run_start)


def _combine(users, measured_s, c0, c1, db_cpu_s, done, rampup_s, duration_s, bucket_s) -> DriverResult:
    hists = {tx: _histogram() for tx in TX}
    counts = {tx: {"ok": 0, "rollback": 0, "error": 0} for tx in TX}
    errors: dict[str, int] = {}
    slots: dict[int, dict[str, Any]] = {}
    for part in done:
        for (slot, tx), encoded in part["hist"].items():
            h = HdrHistogram.decode(encoded)
            slots.setdefault(slot, {"tx": 0, "new_order": 0, "hist": _histogram()})["hist"].add(h)
            if slot >= 0:
                hists[tx].add(h)
        for (slot, tx, outcome), n in part["counts"].items():
            if slot >= 0:
                counts[tx][outcome] += n
            if outcome != "error":
                s = slots.setdefault(slot, {"tx": 0, "new_order": 0, "hist": _histogram()})
                s["tx"] += n
                s["new_order"] += n if tx == "new_order" and outcome == "ok" else 0
        for code, n in part["errors"].items():
            errors[code] = errors.get(code, 0) + n
    series = []
    for slot, v in sorted(slots.items()):
        begins, ends = max(slot * bucket_s, -rampup_s), min((slot + 1) * bucket_s, duration_s)
        if ends - begins < 1:
            continue
        series.append({"t_s": begins, "seconds": round(ends - begins, 1), "tx_per_min": round(v["tx"] * 60 / (ends - begins), 1),
                       "new_orders_per_min": round(v["new_order"] * 60 / (ends - begins), 1),
                       "lat_avg_ms": round(v["hist"].get_mean_value() / 1000, 3) if v["tx"] else None,
                       "lat_p99_ms": round(v["hist"].get_value_at_percentile(99) / 1000, 3) if v["tx"] else None})
    return DriverResult(users, measured_s, c0, c1, db_cpu_s, sum(p["cpu_s"] for p in done), hists, counts, errors, series)
