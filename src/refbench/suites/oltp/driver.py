"""The load generator: N virtual users on a few worker processes (one per CPU), each worker driving its users'
connections asynchronously; a few users (up to two per CPU) each get a process of their own. Ramp-up, then a timed
measurement; latencies go into HDR histograms.

A virtual user is a connection and its own random inputs, not a process: a worker sends a user's next call as
soon as its previous one returned (the engine client's non-blocking send — libpq's prepared statement on PostgreSQL,
a CALL through mysqlclient's _mysql on MariaDB — then epoll over all the worker's sockets), so hundreds of users cost
a few processes. The users' connections open one after another over the first half of the ramp-up, as a real client
population logs in, not as one burst.

A virtual user's home warehouse is spread evenly over all warehouses (user i → warehouse i mod W + 1), so no
warehouse is a hot spot. Keying and think times are off unless asked for (5.2.5.7).
"""

from __future__ import annotations

import contextlib
import heapq
import math
import multiprocessing
import os
import queue
import select
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

from hdrh.histogram import HdrHistogram

from refbench.children import forked_worker
from refbench.engines import (
    ANSWER_BOUND_S, ConnectionLost, TransactionFailed, Transactional, answered_by, shut_socket,
)
from refbench.errors import ServerGone, UserError
from refbench.suites.oltp.inputs import inputs_for
from refbench.suites.oltp.rand import TpccRandom

TX = ["new_order", "payment", "order_status", "delivery", "stock_level"]
DECK = ["new_order"] * 10 + ["payment"] * 10 + ["order_status", "delivery", "stock_level"]  # 23 cards, 5.2.4.2
KEYING_S = {"new_order": 18, "payment": 3, "order_status": 2, "delivery": 2, "stock_level": 2}
THINK_MEAN_S = {"new_order": 12, "payment": 12, "order_status": 10, "delivery": 5, "stock_level": 5}
# Each transaction's one statement in each engine's dialect (the functions and procedures of sql/ and sql/mariadb/),
# and the error code with which New-Order reports its designed rollback (new_order.sql's RAISE, or its SIGNAL).
CALLS = {
    "postgres": {
        "new_order": "SELECT tpcc.new_order($1, $2, $3, $4::int[], $5::int[], $6::int[])",
        "payment": "SELECT tpcc.payment($1, $2, $3, $4, $5, $6::text, $7::numeric)",
        "order_status": "SELECT tpcc.order_status($1, $2, $3, $4::text)",
        "delivery": "SELECT tpcc.delivery($1, $2)",
        "stock_level": "SELECT tpcc.stock_level($1, $2, $3)",
    },
    "mariadb": {tx: f"CALL {tx}({', '.join(['%s'] * n)})"
                for tx, n in {"new_order": 4, "payment": 7, "order_status": 4, "delivery": 2, "stock_level": 3}.items()},
}
ROLLBACK_CODE = {"postgres": "RB001", "mariadb": "1644"}
HIST_MAX_US = 120_000_000
SERIES_BUCKETS_PER_OCTAVE = 16
SERIES_BUCKETS = int(math.log2(HIST_MAX_US) * SERIES_BUCKETS_PER_OCTAVE) + 1
_log2 = math.log2
POLL_S = 0.2  # the longest a worker waits before it looks at the stop flag again
# Transactions a worker notes before it records them: recorded between two database calls, each one ran on caches
# the database had just evicted. With the inputs of four decks made together, for the same reason, this halved the
# new driver's excess CPU per New-Order over the old process-per-user driver's at 4 users (1.10x to 1.05x).
RECORD_EVERY = 128
DECKS_PER_DEAL = 4
# No virtual user's transaction completed for this long while one was in flight: the server made no progress, and
# the case is marked stalled. A window whose edge the server has not answered ANSWER_BOUND_S past it ends there.
STALL_S = 10.0
STOP_GRACE_S = 5.0  # how long after the runner stops the measurement a worker waits for a call's answer


def series_bucket_s(run_s: float) -> int:
    """The width of the throughput-over-time buckets: 10 seconds, as the papers plot, or 1 second when a case
    is shorter than a minute (the quick profile), where 10-second buckets would leave a chart of two points."""
    return 10 if run_s >= 60 else 1


def worker_count(users: int) -> int:
    """A process per user, on libpq's blocking call, up to two users per CPU; beyond, one worker per CPU, each
    driving its share of the users asynchronously. On the 2-core VM, 4 users cost the driver 7% less CPU per
    New-Order in 4 processes than in 2 asynchronous workers, and 8 users 4% more (docs/BENCHMARKS.md)."""
    cpus = os.cpu_count() or 1
    return users if users <= 2 * cpus else cpus


def _histogram() -> HdrHistogram:
    return HdrHistogram(1, HIST_MAX_US, 3)


def _cpu_s() -> float:
    t = os.times()
    return t.user + t.system


class _Failed(Exception):
    """A virtual user's failure that ends the case: (user index, what happened, whether the server is gone)."""


def _failed(index: int, exc: TransactionFailed) -> _Failed:
    return _Failed(index, str(exc), isinstance(exc, ConnectionLost))


class _User:
    """One virtual user: its connection, its random inputs and the transactions it has dealt but not run."""

    __slots__ = ("index", "client", "inputs", "rng", "w", "others", "dealt", "tx", "sent")

    def __init__(self, index: int, side: Transactional, warehouses: int, seed: int):
        self.index = index
        try:
            self.client = side.client(CALLS[side.name], ROLLBACK_CODE[side.name])
        except TransactionFailed as exc:
            raise _failed(index, exc) from None
        self.inputs = inputs_for(side.new_order_lines)
        self.rng = TpccRandom(seed * 1000 + index)
        self.w = index % warehouses + 1
        self.others = [x for x in range(1, warehouses + 1) if x != self.w]
        self.dealt: list[tuple[str, list]] = []
        self.tx, self.sent = "", 0.0

    def deal(self) -> list[tuple[str, list]]:
        """The next few shuffled decks, each card with its inputs, in the order they run: made together, because
        between two database calls the database evicts the driver from the CPU caches and Python run cold costs
        several times more."""
        rng, w, others = self.rng, self.w, self.others
        cards = []
        for _ in range(DECKS_PER_DEAL):
            deck = list(DECK)
            rng.shuffle(deck)
            cards += deck
        inputs = self.inputs
        return [(tx, inputs[tx](rng, w, others)) for tx in cards]

    def next_tx(self) -> str:
        """The next card of the user's dealt decks (dealt holds them last first)."""
        if not self.dealt:
            self.dealt = self.deal()
            self.dealt.reverse()
        return self.dealt[-1][0]

    def send(self) -> None:
        self.tx, params = self.dealt.pop()
        self.sent = time.perf_counter()
        try:
            self.client.send(self.tx, params)
        except TransactionFailed as exc:
            raise _failed(self.index, exc) from None


class _Tally:
    """A worker's figures. The measured interval's latencies go into one full HDR histogram per transaction; each
    time slot of the series keeps its counts, its latencies' sum and a log-scale histogram of them (16 buckets per
    octave: 4.4% wide, a few kB), so memory grows by that per slot, not by a histogram per slot, transaction and
    user; and recording into it is a fifth of an HDR histogram's cost."""

    def __init__(self, window: Any, bucket_s: float, live: Any = None, live_offset: int = 0):
        self.start, self.end, self.bucket_s = window[0], window[1], bucket_s
        # The measured New-Orders' log-scale latency buckets, shared with the parent, which reads the figures so far
        # from them while the case runs (this worker's own slice: no lock).
        self.live, self.live_offset = live, live_offset
        self.hist = {tx: _histogram() for tx in TX}
        self.counts: dict[tuple[str, str], int] = {}
        self.slots: dict[int, list] = {}  # slot -> [transactions, New-Orders, latency sum, log-scale buckets]
        self.errors: dict[str, int] = {}
        # Per transaction, the longest time one in flight at the window's end had taken by then: a transaction the
        # server held across the end counts in the window's max latency.
        self.at_end_us: dict[str, int] = {}
        self.cpu_at_start = self.cpu_at_end = None

    def add(self, tx: str, outcome: str, latency_us: int, now: float) -> None:
        if now > self.end:
            if self.cpu_at_end is None:
                self.cpu_at_end = _cpu_s()
            if outcome != "error":
                self.in_flight(tx, now - latency_us / 1e6)
            return
        # Slots count from the start of the measurement: ramp-up slots are negative, and only the measured
        # interval's transactions count in the totals.
        slot = int((now - self.start) // self.bucket_s)
        if slot >= 0:
            if self.cpu_at_start is None:
                self.cpu_at_start = _cpu_s()
            self.counts[(tx, outcome)] = self.counts.get((tx, outcome), 0) + 1
        if outcome == "error":
            return
        latency_us = min(max(latency_us, 1), HIST_MAX_US)
        if slot >= 0:
            self.hist[tx].record_value(latency_us)
        s = self.slots.get(slot)
        if s is None:
            s = self.slots[slot] = [0, 0, 0, [0] * SERIES_BUCKETS]
        bucket = int(_log2(latency_us) * SERIES_BUCKETS_PER_OCTAVE)
        s[0] += 1
        s[1] += tx == "new_order" and outcome == "ok"
        s[2] += latency_us
        s[3][bucket] += 1
        if slot >= 0 and tx == "new_order" and outcome == "ok" and self.live is not None:
            self.live[self.live_offset + bucket] += 1

    def in_flight(self, tx: str, sent: float) -> None:
        """A transaction sent at ``sent`` (time.time()) that had not completed when the window ended."""
        so_far_us = int((self.end - sent) * 1e6)
        if so_far_us > self.at_end_us.get(tx, 0):
            self.at_end_us[tx] = so_far_us

    def record(self, noted: list[tuple[str, str, int, float]]) -> None:
        """Records the noted transactions (tx, outcome, latency µs, when) and empties the list."""
        for tx, outcome, latency_us, now in noted:
            self.add(tx, outcome, latency_us, now)
        noted.clear()

    def next_edge(self) -> float:
        """The window's edge whose CPU reading is still to be taken: a transaction past it is recorded at once."""
        return self.start if self.cpu_at_start is None else self.end

    def encode(self) -> dict[str, Any]:
        cpu_at_end = self.cpu_at_end if self.cpu_at_end is not None else _cpu_s()
        return {"hist": {tx: h.encode() for tx, h in self.hist.items() if h.get_total_count()},
                "counts": self.counts, "errors": self.errors, "at_end_us": self.at_end_us,
                "slots": self.slots,
                "cpu_s": cpu_at_end - self.cpu_at_start if self.cpu_at_start is not None else 0.0}


def _worker(indices: list[int], users: int, side: Transactional, warehouses: int, think: bool, seed: int, bucket_s: float,
            window: Any, go: Any, stop: Any, out: Any, parent: int, live: Any, progress: Any, k: int) -> None:
    forked_worker()
    out.put(("ready", indices[0], None))
    go.wait()
    if stop.value:
        return
    tally = _Tally(window, bucket_s, live, k * SERIES_BUCKETS)
    clock = _Clock(progress, k)
    open_over_s = (window[0] - window[2]) / 2
    # (when, user index): logins spread evenly over the first half of the ramp-up, across all workers.
    logins = [(window[2] + open_over_s * i / users, i) for i in indices]
    logins.reverse()
    open_users: list[_User] = []
    try:
        if len(logins) == 1 and not think:
            finished = _drive_one(logins[0], side, warehouses, seed, tally, stop, parent, open_users, clock)
        else:
            finished = _drive_many(logins, side, warehouses, seed, think, tally, stop, parent, open_users, clock)
    except _Failed as failed:
        index, detail, gone = failed.args
        out.put(("gone" if gone else "error", index, detail))
        return
    finally:
        for user in open_users:
            user.client.close()
    if finished:
        out.put(("done", indices[0], tally.encode()))


class _Clock:
    """A worker's two clocks in the array shared with the parent, which judges from them whether the server makes
    progress: when the worker last saw a transaction complete, and since when it has had one in flight (0: none)."""

    __slots__ = ("progress", "done_at", "busy_since")

    def __init__(self, progress: Any, k: int):
        self.progress, self.done_at, self.busy_since = progress, 2 * k, 2 * k + 1

    def completed(self, now: float) -> None:
        self.progress[self.done_at] = now

    def busy(self, in_flight: bool, now: float) -> None:
        if not in_flight:
            self.progress[self.busy_since] = 0.0
        elif not self.progress[self.busy_since]:
            self.progress[self.busy_since] = now


def _error(code: str, tally: _Tally) -> str:
    """An error that is neither New-Order's designed rollback nor one that ends the case: counted by its code."""
    tally.errors[code] = tally.errors.get(code, 0) + 1
    return "error"


def _drive_one(login: tuple[float, int], side: Transactional, warehouses: int, seed: int, tally: _Tally, stop: Any,
               parent: int, open_users: list, clock: _Clock) -> bool:
    """A worker with a single user and no think times: the client's blocking call (on PostgreSQL, one C call per
    transaction) costs the driver less CPU than the asynchronous loop, which pays for its epoll round and result
    polling in Python. A call still unanswered STOP_GRACE_S after the runner stopped the measurement is given up, and
    counted in flight at the window's end. Returns False when the runner is gone."""
    while (left := login[0] - time.time()) > 0:
        if stop.value:
            return True
        time.sleep(min(left, POLL_S))
    user = _User(login[1], side, warehouses, seed)
    open_users.append(user)
    call, perf_counter, wall = user.client.call, time.perf_counter, time.time
    completed = clock.completed
    clock.busy(True, wall())  # from now on, always a call in flight or about to be
    noted: list[tuple[str, str, int, float]] = []
    edge = tally.next_edge()
    with _given_up_after_stop(stop, user.client.fileno()) as given_up:
        while not stop.value:
            for tx, params in user.deal():
                sent = perf_counter()
                try:
                    outcome = call(tx, params)
                except TransactionFailed as exc:
                    if not given_up.is_set():
                        raise _failed(user.index, exc) from None
                    tally.record(noted)
                    tally.in_flight(tx, wall() - (perf_counter() - sent))
                    return True
                latency_us = int((perf_counter() - sent) * 1e6)
                now = wall()
                completed(now)
                if outcome != "ok" and outcome != "rollback":
                    outcome = _error(outcome, tally)
                noted.append((tx, outcome, latency_us, now))
                if now >= edge:
                    tally.record(noted)
                    edge = tally.next_edge()
                if stop.value:
                    break
            tally.record(noted)
            # A killed runner leaves no user behind: looked at once per deal, not a system call per transaction.
            if os.getppid() != parent:
                return False
    return True


@contextlib.contextmanager
def _given_up_after_stop(stop: Any, fd: int) -> Iterator[threading.Event]:
    """Gives up the call on socket ``fd`` that the server still holds STOP_GRACE_S after the runner stopped the
    measurement (it gave up on the server, or the server is slow to answer): the socket is shut, the event set."""
    given_up, finished = threading.Event(), threading.Event()

    def watch() -> None:
        while not finished.wait(POLL_S):
            if stop.value:
                if not finished.wait(STOP_GRACE_S):
                    given_up.set()
                    shut_socket(fd)
                return

    threading.Thread(target=watch, name="refbench-oltp-give-up", daemon=True).start()
    try:
        yield given_up
    finally:
        finished.set()


def _drive_many(logins: list, side: Transactional, warehouses: int, seed: int, think: bool, tally: _Tally, stop: Any,
                parent: int, open_users: list, clock: _Clock) -> bool:
    """Sends each user's next call as soon as its previous one returned, waiting on all the worker's sockets at
    once; the calls still unanswered when it stops count in flight at the window's end. Returns False when the runner
    is gone."""
    waiting: list[tuple[float, int, _User]] = []  # (when to send, user index, user): keying and think times
    by_fd: dict[int, _User] = {}
    poller = select.epoll()
    noted: list[tuple[str, str, int, float]] = []
    edge = tally.next_edge()
    try:
        rounds = 0
        while not stop.value:
            timeout = POLL_S
            if logins or waiting:
                now = time.time()
                timeout = _start_due(logins, waiting, now, side, warehouses, seed, think, open_users, by_fd, poller)
            events = poller.poll(timeout)
            rounds += 1
            # Looked at when idle, and every 256 rounds when busy, not at the cost of a system call per transaction.
            if (not events or not rounds & 255) and os.getppid() != parent:
                return False
            if not events and noted:
                tally.record(noted)
            now = 0.0
            for fd, _ in events:
                user = by_fd[fd]
                try:
                    outcome = user.client.receive()
                except TransactionFailed as exc:
                    raise _failed(user.index, exc) from None
                if outcome is None:
                    continue
                latency_us = int((time.perf_counter() - user.sent) * 1e6)
                now = time.time()
                tx = user.tx
                if outcome != "ok" and outcome != "rollback":
                    outcome = _error(outcome, tally)
                noted.append((tx, outcome, latency_us, now))
                if len(noted) >= RECORD_EVERY or now >= edge:
                    tally.record(noted)
                    edge = tally.next_edge()
                following = user.next_tx()
                if think:
                    think_s = min(-math.log(1 - user.rng.random()) * THINK_MEAN_S[tx], 10 * THINK_MEAN_S[tx])
                    heapq.heappush(waiting, (now + think_s + KEYING_S[following], user.index, user))
                else:
                    user.send()
            if now:
                clock.completed(now)
            # The users not waiting out a keying or think time have a call in flight.
            clock.busy(len(by_fd) > len(waiting), now or time.time())
    finally:
        poller.close()
    tally.record(noted)
    resting = {id(user) for _, _, user in waiting}
    for user in by_fd.values():
        if id(user) not in resting:
            tally.in_flight(user.tx, time.time() - (time.perf_counter() - user.sent))
    return True


def _start_due(logins: list, waiting: list, now: float, side: Transactional, warehouses: int, seed: int, think: bool,
               open_users: list, by_fd: dict, poller: Any) -> float:
    """Logs in the users whose time has come and sends the calls whose keying or think time is over; returns how
    long the worker may wait for results before the next of those is due."""
    while logins and logins[-1][0] <= now:
        user = _User(logins.pop()[1], side, warehouses, seed)
        open_users.append(user)
        fd = user.client.fileno()
        by_fd[fd] = user
        poller.register(fd, select.EPOLLIN)
        tx = user.next_tx()
        if think:
            heapq.heappush(waiting, (now + KEYING_S[tx], user.index, user))
        else:
            user.send()
    while waiting and waiting[0][0] <= now:
        heapq.heappop(waiting)[2].send()
    timeout = POLL_S
    if logins:
        timeout = min(timeout, logins[-1][0] - now)
    if waiting:
        timeout = min(timeout, waiting[0][0] - now)
    return max(timeout, 0)


def rss_bytes(pids: list[int]) -> int:
    """The resident memory of these processes, summed (pages shared after fork count once per process)."""
    total = 0
    for pid in pids:
        try:
            total += int(Path(f"/proc/{pid}/statm").read_text().split()[1])
        except (OSError, IndexError):
            pass
    return total * os.sysconf("SC_PAGE_SIZE")


@dataclass(frozen=True)
class Stall:
    """The longest time the server made no progress while the case ran: no virtual user's transaction completed while
    one was in flight."""

    seconds: float
    from_s: float  # when it began, in seconds from the window's start (negative: in the ramp-up)
    # The edge of the window ("start", "end") the server had not answered ANSWER_BOUND_S past, where the case ended;
    # "" when it answered.
    unanswered: str = ""

    def said(self, window_s: float) -> str:
        begun = f"{self.from_s:.0f} s into" if self.from_s >= 0 else f"{-self.from_s:.0f} s before"
        said = f"the server made no progress for {self.seconds:.0f} s, from {begun} the {window_s:g}-s window"
        if self.unanswered:
            said += f", which refbench ended {ANSWER_BOUND_S:g} s past its {self.unanswered}"
        return said


@dataclass
class DriverResult:
    users: int
    measured_s: float  # between the two readings of the server's counters
    counters_start: dict[str, int] | None  # None: the server did not answer at the window's edges (stall.unanswered)
    counters_end: dict[str, int] | None
    db_cpu_s: float | None  # None: the server runs on another host
    driver_cpu_s: float
    histograms: dict[str, HdrHistogram]
    counts: dict[str, dict[str, int]]
    errors: dict[str, int]
    series: list[dict[str, Any]] = field(default_factory=list)
    processes: int = 0  # the driver's processes: its parent (the runner) and its workers
    rss_peak_bytes: int = 0  # the largest sum of their resident memory, sampled every second
    window_s: float = 0.0  # the window the driver counts in: transactions that completed within it
    # How long after the window's edges the counters were read (the later edge's): the server's counters and the
    # driver's count cover windows this far apart, so that many seconds of transactions may be in one and not the other.
    counters_late_s: float = 0.0
    # Per transaction, the longest time one still in flight at the window's end had taken by then (µs).
    at_end_us: dict[str, int] = field(default_factory=dict)
    stall: Stall | None = None  # the server made no progress for STALL_S or more, or did not answer


def run(side: Transactional, warehouses: int, users: int, rampup_s: float, duration_s: float, think: bool, seed: int,
        on_tick: Callable[[float], None] | None = None,
        on_live: Callable[["SoFar"], None] | None = None) -> DriverResult:
    """The case: ramp-up, then the measured window. ``on_tick(seconds since the start)`` about once a second;
    ``on_live(SoFar)`` with the measured window's New-Orders so far, as often. A server that has not answered the
    counters' reading ANSWER_BOUND_S past an edge of the window ends the case there (no tick follows), its figures
    the driver's own count, and ``stall.unanswered`` says so."""
    mp = multiprocessing.get_context("fork")
    bucket_s = series_bucket_s(rampup_s + duration_s)
    window = mp.Array("d", 3)  # measurement start, measurement end, run start
    # stop is read in every round of a worker's loop: a plain shared byte, not an Event, whose lock they would share.
    go, stop, out = mp.Event(), mp.RawValue("b", 0), mp.Queue()
    workers = worker_count(users)
    live = mp.RawArray("q", workers * SERIES_BUCKETS)
    progress = mp.RawArray("d", 2 * workers)  # each worker's _Clock
    procs = [mp.Process(target=_worker, daemon=True,
                        args=(list(range(k, users, workers)), users, side, warehouses, think, seed, bucket_s, window, go,
                              stop, out, os.getpid(), live, progress, k))
             for k in range(workers)]
    for p in procs:
        p.start()
    pids = [os.getpid()] + [p.pid for p in procs]
    rss_peak = [rss_bytes(pids)]

    def tick(elapsed_s: float) -> None:
        rss_peak[0] = max(rss_peak[0], rss_bytes(pids))
        if on_tick:
            on_tick(elapsed_s)
        if on_live and elapsed_s > rampup_s:
            on_live(SoFar.of(live, workers, min(elapsed_s, rampup_s + duration_s) - rampup_s))

    stalls = None
    try:
        for _ in range(workers):
            kind, index, detail = out.get(timeout=60)
        with side.connect() as conn:
            server_cpu_s = side.server_cpu(conn) or (lambda: None)
            run_start = time.time()
            window[0], window[1], window[2] = run_start + rampup_s, run_start + rampup_s + duration_s, run_start
            stalls = _Stalls(progress, workers, window[0])
            go.set()
            # At each edge of the window the counters are read first and the tick (the caller's storage probe, which
            # reads /proc and queries the server) comes after: the other way round, it delayed the reading.
            _watch_until(window[0], run_start, out, tick)
            start = end = None
            if start := _read_edge(side, conn, server_cpu_s, window[0]):
                tick(start[2] - run_start)
                _watch_until(window[1], run_start, out, tick)
                if end := _read_edge(side, conn, server_cpu_s, window[1]):
                    tick(end[2] - run_start)
            stall = stalls.end(*(() if end else ("end", window[1]) if start else ("start", window[0])))
        stop.value = 1
        done = []
        while len(done) < workers:
            try:
                kind, index, detail = out.get(timeout=120)
            except queue.Empty:
                raise UserError("virtual users did not finish within 120 s after the measurement ended") from None
            if kind != "done":
                raise _failure(kind, index, detail)
            done.append(detail)
    finally:
        stop.value = 1
        go.set()
        if stalls is not None:
            stalls.end()
        for p in procs:
            p.join(timeout=10)
            if p.is_alive():
                p.kill()
    if end:
        (counters_start, cpu_start, t_start), (counters_end, cpu_end, t_end) = start, end
        measured_s, late_s = t_end - t_start, max(t_start - window[0], t_end - window[1])
        db_cpu_s = cpu_end - cpu_start if cpu_end is not None else None
    else:  # the server did not answer at an edge: the driver's own count over its window
        counters_start, counters_end, measured_s, late_s, db_cpu_s = None, None, duration_s, ANSWER_BOUND_S, None
    result = _combine(users, measured_s, counters_start, counters_end, db_cpu_s, done, rampup_s, duration_s, bucket_s)
    result.processes, result.rss_peak_bytes = len(pids), rss_peak[0]
    result.window_s, result.counters_late_s, result.stall = duration_s, late_s, stall
    return result


def _read_edge(side: Transactional, conn: Any, server_cpu_s: Callable[[], float | None],
               edge: float) -> tuple[dict[str, int], float | None, float] | None:
    """The server's counters and CPU at an edge of the window, and when they were read; None when the server had not
    answered ANSWER_BOUND_S past the edge."""
    with answered_by(conn.fileno(), edge + ANSWER_BOUND_S) as given_up:
        try:
            counters = side.counters(conn)
        except Exception:
            if given_up.is_set():
                return None
            raise
    return None if given_up.is_set() else (counters, server_cpu_s(), time.time())


class _Stalls:
    """Judges twice a second, from the workers' clocks (_Clock), whether the server makes progress: the longest time,
    reaching into the measured window, in which no virtual user's transaction completed while one was in flight."""

    def __init__(self, progress: Any, workers: int, window_start: float):
        self.progress, self.workers, self.window_start = progress, workers, window_start
        self.longest, self.since = 0.0, 0.0
        self._ended = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="refbench-oltp-progress", daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        while not self._ended.wait(0.5):
            self._judge()

    def _judge(self) -> None:
        now, clocks = time.time(), self.progress[:2 * self.workers]
        waiting = [busy for busy in clocks[1::2] if busy]
        if now < self.window_start or not waiting:
            return
        since = max(max(clocks[0::2]), min(waiting))
        if now - since > self.longest:
            self.longest, self.since = now - since, since

    def end(self, unanswered: str = "", edge: float = 0.0) -> Stall | None:
        """Stops judging (again: nothing), and says the longest stall when the server made no progress for STALL_S or
        more, or did not answer the reading at the window's ``unanswered`` edge (at ``edge``): then no less than that
        reading waited, whether or not a virtual user had a call in flight."""
        if self._ended.is_set():
            return None
        self._ended.set()
        self._thread.join()
        self._judge()
        if unanswered and time.time() - edge > self.longest:
            self.longest, self.since = time.time() - edge, edge
        if self.longest < STALL_S:
            return None
        return Stall(round(self.longest, 1), round(self.since - self.window_start, 1), unanswered)


def _failure(kind: str, index: int, detail: str) -> UserError:
    """A virtual user's failure that ended the case: the server's going (``kind`` "gone") is not the user's input."""
    return (ServerGone if kind == "gone" else UserError)(f"virtual user {index} {detail}")


def _watch_until(t: float, run_start: float, out: Any, on_tick: Callable[[float], None]) -> None:
    """Waits until ``t``, ticking about once a second before it (the tick at ``t`` is the caller's); a virtual user
    that fails meanwhile ends the case at once."""
    while (left := t - time.time()) > 0:
        try:
            kind, index, detail = out.get(timeout=min(1.0, left))
        except queue.Empty:
            pass
        else:
            raise _failure(kind, index, detail)
        if (now := time.time()) < t:
            on_tick(now - run_start)


@dataclass
class SoFar:
    """The measured window's New-Orders so far, as the workers last recorded them (they record every few hundred
    transactions, so the figures lag by a moment)."""

    seconds: float
    new_orders: int
    p99_us: float | None

    @classmethod
    def of(cls, live: Any, workers: int, seconds: float) -> "SoFar":
        buckets = [sum(live[k * SERIES_BUCKETS + b] for k in range(workers)) for b in range(SERIES_BUCKETS)]
        total = sum(buckets)
        return cls(seconds, total, _percentile_us(buckets, 99) if total else None)

    def said(self) -> str:
        nopm = self.new_orders / self.seconds * 60 if self.seconds > 0 else 0
        p99 = "—" if self.p99_us is None else f"{self.p99_us / 1000:,.1f} ms"
        return f"NOPM {nopm:,.0f}, New-Order p99 {p99} so far ({self.seconds:.0f} s measured)"


def _percentile_us(buckets: list[int], pct: float) -> float:
    """The upper edge of the log-scale bucket that holds the ``pct`` percentile."""
    rank, seen = pct / 100 * sum(buckets), 0
    for i, n in enumerate(buckets):
        seen += n
        if seen >= rank:
            return 2 ** ((i + 1) / SERIES_BUCKETS_PER_OCTAVE)
    return HIST_MAX_US


def _combine(users, measured_s, c0, c1, db_cpu_s, done, rampup_s, duration_s, bucket_s) -> DriverResult:
    hists = {tx: _histogram() for tx in TX}
    counts = {tx: {"ok": 0, "rollback": 0, "error": 0} for tx in TX}
    errors: dict[str, int] = {}
    at_end_us: dict[str, int] = {}
    slots: dict[int, list] = {}  # slot -> [transactions, New-Orders, latency sum, log-scale buckets]
    for part in done:
        for tx, encoded in part["hist"].items():
            hists[tx].add(HdrHistogram.decode(encoded))
        for (tx, outcome), n in part["counts"].items():
            counts[tx][outcome] += n
        for slot, (n, new_orders, latency_us, buckets) in part["slots"].items():
            s = slots.setdefault(slot, [0, 0, 0, [0] * SERIES_BUCKETS])
            s[0] += n
            s[1] += new_orders
            s[2] += latency_us
            s[3] = [a + b for a, b in zip(s[3], buckets)]
        for code, n in part["errors"].items():
            errors[code] = errors.get(code, 0) + n
        for tx, us in part["at_end_us"].items():
            at_end_us[tx] = max(at_end_us.get(tx, 0), us)
    series = []
    for slot, (n, new_orders, latency_us, buckets) in sorted(slots.items()):
        begins, ends = max(slot * bucket_s, -rampup_s), min((slot + 1) * bucket_s, duration_s)
        if ends - begins < 1:
            continue
        series.append({"t_s": begins, "seconds": round(ends - begins, 1), "tx_per_min": round(n * 60 / (ends - begins), 1),
                       "new_orders_per_min": round(new_orders * 60 / (ends - begins), 1),
                       "lat_avg_ms": round(latency_us / n / 1000, 3) if n else None,
                       "lat_p99_ms": round(_percentile_us(buckets, 99) / 1000, 3) if n else None})
    return DriverResult(users, measured_s, c0, c1, db_cpu_s, sum(p["cpu_s"] for p in done), hists, counts, errors, series,
                        at_end_us=at_end_us)
