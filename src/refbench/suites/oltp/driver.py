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
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from hdrh.histogram import HdrHistogram
from psycopg import pq

from refbench.engines.postgres import connect
from refbench.errors import UserError
from refbench.suites.oltp import database
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
UNUSED_ITEM = 100_001
ROLLBACK_SQLSTATE = "RB001"
HIST_MAX_US = 120_000_000
BUCKET_S = 10


def _histogram() -> HdrHistogram:
    return HdrHistogram(1, HIST_MAX_US, 3)


def transaction_args(tx: str, rng: TpccRandom, w: int, warehouses: int, others: list[int] | None = None) -> tuple:
    d = rng.randint(1, 10)
    if others is None:
        others = [x for x in range(1, warehouses + 1) if x != w]
    if tx == "new_order":
        lines, items = [], set()
        for _ in range(rng.randint(5, 15)):
            item = rng.item_id()
            while item in items:  # distinct items, so each line updates its own stock row
                item = rng.item_id()
            items.add(item)
            remote = others and rng.randint(1, 100) == 1
            lines.append((rng.choice(others) if remote else w, item, rng.randint(1, 10)))
        lines.sort()
        if rng.randint(1, 100) == 1:  # 1% roll back: the last line names an unused item (2.4.1.4)
            lines[-1] = (lines[-1][0], UNUSED_ITEM, lines[-1][2])
        # Arrays travel as text literals: psycopg's list adaptation costs the driver more CPU than the server's cast.
        return (w, d, rng.customer_id(), _int_array(l[1] for l in lines), _int_array(l[0] for l in lines),
                _int_array(l[2] for l in lines))
    if tx == "payment":
        c_w, c_d = (rng.choice(others), rng.randint(1, 10)) if others and rng.randint(1, 100) <= 15 else (w, d)
        by_name = rng.randint(1, 100) <= 60
        return (w, d, c_w, c_d, None if by_name else rng.customer_id(), rng.run_last_name() if by_name else None,
                round(rng.uniform(1, 5000), 2))
    if tx == "order_status":
        by_name = rng.randint(1, 100) <= 60
        return (w, d, None if by_name else rng.customer_id(), rng.run_last_name() if by_name else None)
    if tx == "delivery":
        return (w, rng.randint(1, 10))
    return (w, d, rng.randint(10, 20))


def _int_array(values) -> str:
    return "{" + ",".join(map(str, values)) + "}"


def _cpu_s() -> float:
    t = os.times()
    return t.user + t.system


def _virtual_user(index: int, dsn: str, warehouses: int, think: bool, seed: int, window: Any, go: Any, stop: Any,
                  out: Any, parent: int) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the runner, which stops the users
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
    hist = {tx: _histogram() for tx in TX}
    counts = {tx: {"ok": 0, "rollback": 0, "error": 0} for tx in TX}
    errors: dict[str, int] = {}
    buckets: dict[int, dict[str, Any]] = {}
    deck: list[str] = []
    go.wait()
    start, end, run_start = window[0], window[1], window[2]
    cpu_at_start = cpu_at_end = None

    while not stop.is_set() and os.getppid() == parent:  # a killed runner leaves no user behind
        if not deck:
            deck = list(DECK)
            rng.shuffle(deck)
        tx = deck.pop()
        params = [None if a is None else str(a).encode() for a in transaction_args(tx, rng, w, warehouses, others)]
        if think:
            time.sleep(KEYING_S[tx])
        t = time.perf_counter()
        result = pgconn.exec_prepared(names[tx], params)
        if result.status == pq.ExecStatus.TUPLES_OK:
            outcome = "ok"
        else:
            if pgconn.status != pq.ConnStatus.OK:
                out.put(("error", index, "lost its connection: " + pgconn.error_message.decode(errors="replace").strip()))
                return
            sqlstate = (result.error_field(pq.DiagnosticField.SQLSTATE) or b"?").decode()
            outcome = "rollback" if sqlstate == ROLLBACK_SQLSTATE else "error"
            if outcome == "error":
                errors[sqlstate] = errors.get(sqlstate, 0) + 1
        latency_us = max(1, int((time.perf_counter() - t) * 1e6))
        now = time.time()
        if cpu_at_start is None and now >= start:
            cpu_at_start = _cpu_s()
        if start <= now <= end:
            counts[tx][outcome] += 1
            if outcome != "error":
                hist[tx].record_value(min(latency_us, HIST_MAX_US))
        elif now > end and cpu_at_end is None:
            cpu_at_end = _cpu_s()
        slot = int((now - run_start) // BUCKET_S)
        bucket = buckets.get(slot)
        if bucket is None:  # not setdefault: a histogram is costly to build, once per bucket is enough
            bucket = buckets[slot] = {"tx": 0, "new_order": 0, "hist": _histogram()}
        if outcome != "error":
            bucket["tx"] += 1
            bucket["new_order"] += tx == "new_order" and outcome == "ok"
            bucket["hist"].record_value(min(latency_us, HIST_MAX_US))
        if think:
            time.sleep(min(-math.log(1 - rng.random()) * THINK_MEAN_S[tx], 10 * THINK_MEAN_S[tx]))
    if cpu_at_end is None:
        cpu_at_end = _cpu_s()
    conn.close()
    out.put(("done", index, {
        "hist": {tx: h.encode() for tx, h in hist.items()},
        "counts": counts, "errors": errors,
        "buckets": {b: {"tx": v["tx"], "new_order": v["new_order"], "hist": v["hist"].encode()} for b, v in buckets.items()},
        "cpu_s": (cpu_at_end - cpu_at_start) if cpu_at_start is not None else 0.0,
    }))


def postgres_cpu_s() -> float:
    """CPU seconds used so far by PostgreSQL on this host: every live 'postgres' process, plus what the
    postmaster's exited children (backends of closed connections) used, which the kernel adds to its
    children's totals when it reaps them."""
    ticks = os.sysconf("SC_CLK_TCK")
    procs = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            continue
        if stat[stat.index("(") + 1:stat.rindex(")")] == "postgres":
            fields = stat[stat.rindex(")") + 2:].split()
            procs[int(pid)] = (int(fields[1]), int(fields[11]) + int(fields[12]), int(fields[13]) + int(fields[14]))
    total = 0
    for ppid, own, children in procs.values():
        total += own
        if ppid not in procs:  # a postmaster
            total += children
    return total / ticks


@dataclass
class DriverResult:
    users: int
    measured_s: float
    counters_start: dict[str, int]
    counters_end: dict[str, int]
    db_cpu_s: float
    driver_cpu_s: float
    histograms: dict[str, HdrHistogram]
    counts: dict[str, dict[str, int]]
    errors: dict[str, int]
    series: list[dict[str, Any]] = field(default_factory=list)


def run(dsn: str, warehouses: int, users: int, rampup_s: float, duration_s: float, think: bool, seed: int,
        on_tick: Callable[[float], None] | None = None) -> DriverResult:
    mp = multiprocessing.get_context("fork")
    window = mp.Array("d", 3)
    go, stop, out = mp.Event(), mp.Event(), mp.Queue()
    procs = [mp.Process(target=_virtual_user, args=(i, dsn, warehouses, think, seed, window, go, stop, out, os.getpid()),
                        daemon=True)
             for i in range(users)]
    for p in procs:
        p.start()
    try:
        for _ in range(users):
            kind, index, detail = out.get(timeout=60)
            if kind == "error":
                raise UserError(f"virtual user {index} could not start: {detail}")
        with connect(dsn, autocommit=True) as conn:
            run_start = time.time()
            window[0], window[1], window[2] = run_start + rampup_s, run_start + rampup_s + duration_s, run_start
            go.set()
            _sleep_until(window[0], run_start, on_tick)
            counters_start, cpu_start, t_start = database.counters(conn), postgres_cpu_s(), time.time()
            _sleep_until(window[1], run_start, on_tick)
            counters_end, cpu_end, t_end = database.counters(conn), postgres_cpu_s(), time.time()
        stop.set()
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
        stop.set()
        go.set()
        for p in procs:
            p.join(timeout=10)
            if p.is_alive():
                p.kill()
    return _combine(users, t_end - t_start, counters_start, counters_end, cpu_end - cpu_start, done, rampup_s + duration_s)


def _sleep_until(t: float, run_start: float, on_tick: Callable[[float], None] | None) -> None:
    while (left := t - time.time()) > 0:
        time.sleep(min(1.0, left))
        if on_tick:
            on_tick(time.time() - run_start)


def _combine(users, measured_s, c0, c1, db_cpu_s, done, run_s) -> DriverResult:
    hists = {tx: _histogram() for tx in TX}
    counts = {tx: {"ok": 0, "rollback": 0, "error": 0} for tx in TX}
    errors: dict[str, int] = {}
    buckets: dict[int, dict[str, Any]] = {}
    for part in done:
        for tx in TX:
            hists[tx].add(HdrHistogram.decode(part["hist"][tx]))
            for k, v in part["counts"][tx].items():
                counts[tx][k] += v
        for code, n in part["errors"].items():
            errors[code] = errors.get(code, 0) + n
        for b, v in part["buckets"].items():
            slot = buckets.setdefault(int(b), {"tx": 0, "new_order": 0, "hist": _histogram()})
            slot["tx"] += v["tx"]
            slot["new_order"] += v["new_order"]
            slot["hist"].add(HdrHistogram.decode(v["hist"]))
    series = []
    for b, v in sorted(buckets.items()):
        seconds = min(BUCKET_S, run_s - b * BUCKET_S)  # the last bucket ends with the measurement
        if seconds < 1:
            continue
        series.append({"t_s": b * BUCKET_S, "seconds": round(seconds, 1), "tx_per_min": round(v["tx"] * 60 / seconds, 1),
                       "new_orders_per_min": round(v["new_order"] * 60 / seconds, 1),
                       "lat_avg_ms": round(v["hist"].get_mean_value() / 1000, 3) if v["tx"] else None,
                       "lat_p99_ms": round(v["hist"].get_value_at_percentile(99) / 1000, 3) if v["tx"] else None})
    return DriverResult(users, measured_s, c0, c1, db_cpu_s, sum(p["cpu_s"] for p in done), hists, counts, errors, series)
