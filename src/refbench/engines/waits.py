"""Active session sampling, as ASH and pg_wait_sampling do it: about ten times a second, one query of the server's
own view of its sessions says what each active one is doing — waiting on an event (IO:WALSync, Lock:tuple,
LWLock:BufferMapping…) or running ("CPU"). Over a measured interval the samples make a wait profile: each class and
event's share of the sampled session time (the shares add up to 100%), and per second the average number of active
sessions in each class, the stacked area of an ASH view.

The sampler is a thread of refbench's own with its own connection: its queries wait on the server, not on Python,
and its CPU (the thread's own) is kept beside the profile."""

from __future__ import annotations

import os
import platform
import re
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any, Callable

SAMPLE_HZ = 10

QUOTA, QUEUE = "throttled by its CPU quota", "queued for a CPU"  # the events of the class "CPU wait"

# The foreground sessions of this database that are active, with the parallel workers of their queries (a query's
# time is its leader's and its workers'), the sampler's own connection left out. A running session has no wait
# event: it is on a CPU or in the run queue. The third column says which rows are parallel workers, the fourth is
# the process (RunQueueWatch reads its run delay).
POSTGRES_ACTIVE_SESSIONS = (
    "SELECT coalesce(wait_event_type, 'CPU'), coalesce(wait_event, 'CPU'), backend_type = 'parallel worker', pid "
    "FROM pg_stat_activity WHERE backend_type IN ('client backend', 'parallel worker') AND state = 'active' "
    "AND pid <> pg_backend_pid() AND datname = current_database()")


# MariaDB's foreground sessions of this database that are running a statement: waiting on a row lock (InnoDB's
# transaction in LOCK WAIT, named by the table and the row's key it asked for, so that many sessions on one row read
# as a hot row), on a metadata or table lock (the processlist's state), on file I/O (performance_schema's current
# waits, the finished ones left out: a thread's last wait stays in events_waits_current after it ends), committing
# (RedoLogWatch tells whether that is waiting for the redo log), or running.
MARIADB_ACTIVE_SESSIONS = (
    "SELECT CASE WHEN t.trx_state = 'LOCK WAIT' OR th.PROCESSLIST_STATE LIKE 'Waiting for%lock%' THEN 'Lock' "
    "WHEN w.EVENT_NAME IS NOT NULL THEN 'IO' ELSE 'CPU' END, "
    "CASE WHEN t.trx_state = 'LOCK WAIT' THEN concat('row lock on ', coalesce(l.lock_table, 'a table'), "
    "coalesce(concat(' row ', l.lock_data), '')) "
    "WHEN th.PROCESSLIST_STATE LIKE 'Waiting for%lock%' THEN lower(substring(th.PROCESSLIST_STATE, 13)) "
    "WHEN w.EVENT_NAME IS NOT NULL THEN concat(substring_index(w.EVENT_NAME, '/', -1), ' ', lower(w.OPERATION)) "
    # A commit's stages; with the thread pool a session whose commit waits for its redo log write shows the
    # stage after it (MariaDB 10.6 on answers the client once the write is durable).
    "WHEN th.PROCESSLIST_STATE IN ('Commit', 'Starting cleanup') THEN 'commit' ELSE 'CPU' END "
    "FROM performance_schema.threads th "  # not information_schema.PROCESSLIST: twice the server's time per sample
    "LEFT JOIN performance_schema.events_waits_current w ON w.THREAD_ID = th.THREAD_ID AND w.END_EVENT_ID IS NULL "
    "AND w.EVENT_NAME LIKE 'wait/io/file/%' "
    "LEFT JOIN information_schema.INNODB_TRX t ON t.trx_mysql_thread_id = th.PROCESSLIST_ID "
    "LEFT JOIN information_schema.INNODB_LOCKS l ON l.lock_id = t.trx_requested_lock_id "
    "WHERE th.PROCESSLIST_COMMAND = 'Query' AND th.PROCESSLIST_DB = DATABASE() AND th.PROCESSLIST_ID <> CONNECTION_ID()")

REDO_WAIT = "redo log write at commit"

# What a wait means for the stack, by (class, event) or by class: PostgreSQL's names (pg_stat_activity), then
# MariaDB's (performance_schema's file, and the operation).
MEANINGS = {
    ("IO", "WALSync"): "flush", ("IO", "WALWrite"): "flush", ("IO", "WALInitSync"): "flush",
    ("IO", "WALInitWrite"): "flush", ("LWLock", "WALWrite"): "flush",  # waiting for another session's flush
    ("IO", "DataFileRead"): "read", ("IO", "DataFilePrefetch"): "read", ("IO", "BufFileRead"): "read",
    # waiting for the read of a page another process has in flight: the read's latency all the same
    ("IPC", "BufferIO"): "read", ("LWLock", "BufferIO"): "read",
    ("IO", "DataFileWrite"): "write", ("IO", "DataFileExtend"): "write", ("IO", "BufFileWrite"): "write",
    ("IO", "DataFileFlush"): "write", ("IO", "DataFileSync"): "write",
    ("Client", "ClientRead"): "client", ("Client", "ClientWrite"): "client",
    ("IO", "innodb_log_file sync"): "flush", ("IO", "innodb_log_file write"): "flush",
    ("IO", "innodb_data_file read"): "read", ("IO", "innodb_data_file write"): "write",
    ("IO", "innodb_data_file sync"): "write", ("IO", "innodb_temp_file read"): "read",
    ("IO", REDO_WAIT): "flush",
    ("IO", "block read"): "read", ("IO", "temp write"): "write",  # DuckDB's profiler (engines.duckdb.QueryProfiler)
}
CLASS_MEANINGS = {"CPU": "cpu", "CPU wait": "cpuwait", "Unseen": "unseen", "Lock": "locks", "LWLock": "contention", "BufferPin": "contention", "IO": "io",
                  "IPC": "ipc", "Timeout": "other", "Activity": "other", "Extension": "other", "Client": "client"}


# A parallel query's processes waiting for each other: the leader for its workers' rows, a worker for the leader to
# take them, all of them at a parallel hash join's barriers. Their waits are not a limit of the stack; the workers'
# own (CPU, reads) are.
PARALLEL_EVENTS = {"ExecuteGather", "ParallelFinish", "BgWorkerShutdown", "BgWorkerStartup", "MessageQueueSend",
                   "MessageQueuePutMessage", "MessageQueueReceive", "MessageQueueInternal", "ParallelBitmapScan",
                   "ParallelCreateIndexScan"}


def meaning(kind: str, event: str) -> str:
    if kind == "IPC" and (event in PARALLEL_EVENTS or event.startswith("Hash")):
        return "parallel"
    return MEANINGS.get((kind, event)) or CLASS_MEANINGS.get(kind, "other")


def by_meaning(waits: dict[str, Any]) -> list[tuple[str, float, list[dict[str, Any]]]]:
    """(meaning, share %, its events) largest first."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for e in waits.get("events") or []:
        groups.setdefault(meaning(e["class"], e["event"]), []).append(e)
    # min(): the events' shares are rounded each, and their sum may pass 100 by a rounding (100.01)
    return sorted(((m, min(round(sum(e["share_pct"] for e in es), 2), 100.0), es) for m, es in groups.items()),
                  key=lambda g: -g[1])


NOT_A_LIMIT = {"parallel"}  # a query's processes waiting for each other: their own waits say what limits them


def limits(waits: dict[str, Any]) -> list[tuple[str, float, list[dict[str, Any]]]]:
    """by_meaning without what is no limit of the stack (a leader waiting for its own parallel workers)."""
    groups = by_meaning(waits)
    return [g for g in groups if g[0] not in NOT_A_LIMIT] or groups


def figures(waits: dict[str, Any] | None, io: dict[str, Any] | None) -> dict[str, float]:
    """A record's figures from its interval's profile and timed I/O, for compare and history: the share of session
    time per meaning (wait_flush_pct, wait_cpu_pct…) and the time per WAL flush and per block read."""
    out: dict[str, float] = {}
    if waits and waits.get("session_samples"):
        out |= {f"wait_{m}_pct": share for m, share, _ in by_meaning(waits)}
        out["active_sessions"] = waits["avg_active_sessions"]
    for key, name in (("ms_per_flush", "wal_flush_ms"), ("ms_per_read", "block_read_ms")):
        if (io or {}).get(key) is not None:
            out[name] = io[key]
    return out


# The system calls that write or flush a file, by machine (the numbers differ).
WRITE_SYSCALLS = {
    "x86_64": {1, 18, 20, 74, 75, 296, 328},  # write, pwrite64, writev, fsync, fdatasync, pwritev, pwritev2
    "aarch64": {64, 66, 68, 82, 83, 70, 287},  # write, writev, pwrite64, fsync, fdatasync, pwritev, pwritev2
}


class RedoLogWatch:
    """Whether the server is writing or flushing its redo log at this moment, in the kernel's words: one of its
    threads inside a write or flush system call on the log file (/proc/PID/task/*/syscall). MariaDB 10.8 on writes
    its redo log past performance_schema, so a session whose commit waits for the log looks like it is running;
    a session in a commit stage while the log is being written is waiting for it. The share of samples with the log
    in flight, times the interval, over the log writes the server counted, is the time per log write.

    ``for_server`` gives None where the watch cannot see: another machine's server, no permission to read the
    server's /proc (root or the server's own user can), an unknown machine, no log file found."""

    RELIST_S = 1.0  # threads come and go rarely: their list is read again once a second

    def __init__(self, tasks: Path, log_fds: set[int], syscalls: set[int]):
        self.tasks, self.log_fds, self.syscalls = tasks, log_fds, syscalls
        self.ticks = self.in_flight_ticks = 0
        self._files: dict[str, int] = {}  # thread id -> its open syscall file: read again, not reopened (18× less)
        self._listed = float("-inf")

    @classmethod
    def for_server(cls, pid: int | None, log_name: re.Pattern = re.compile(r"/ib_logfile\d+$")) -> "RedoLogWatch | None":
        syscalls = WRITE_SYSCALLS.get(platform.machine())
        if not pid or not syscalls:
            return None
        proc = Path(f"/proc/{pid}")
        try:
            (proc / "task" / str(pid) / "syscall").read_text()  # readable by this user?
            listed = list((proc / "fd").iterdir())
        except OSError:
            return None
        fds = set()
        for fd in listed:
            try:
                if log_name.search(os.readlink(fd)):
                    fds.add(int(fd.name))
            except OSError:  # closed since it was listed: the server opens and closes files all the time
                continue
        return cls(proc / "task", fds, syscalls) if fds else None

    def _syscall_files(self) -> list[int]:
        if time.monotonic() - self._listed >= self.RELIST_S:
            self._listed = time.monotonic()
            try:
                now = {t.name for t in self.tasks.iterdir()}
            except OSError:  # the server has ended
                now = set()
            for gone in set(self._files) - now:
                os.close(self._files.pop(gone))
            for new in now - set(self._files):
                try:
                    self._files[new] = os.open(self.tasks / new / "syscall", os.O_RDONLY)
                except OSError:
                    pass
        return list(self._files.values())

    def in_flight(self) -> bool:
        for fd in self._syscall_files():
            try:
                fields = os.pread(fd, 128, 0).split()
            except OSError:  # the thread ended since the last listing
                continue
            if len(fields) > 1 and fields[0].isdigit() and int(fields[0]) in self.syscalls \
                    and int(fields[1], 16) in self.log_fds:
                return True
        return False

    def close(self) -> None:
        for fd in self._files.values():
            os.close(fd)
        self._files.clear()

    def classify(self, rows: list) -> list:
        """A sample's sessions with each committing one waiting for the redo log while it is in flight, running
        otherwise."""
        self.ticks += 1
        busy = self.in_flight()
        self.in_flight_ticks += busy
        return [(("IO", REDO_WAIT) if busy else ("CPU", "CPU")) if tuple(r) == ("CPU", "commit") else r for r in rows]

    def summary(self) -> dict[str, Any]:
        return {"redo_log_in_flight_pct": round(100 * self.in_flight_ticks / self.ticks, 2) if self.ticks else None}


class RunQueueWatch:
    """Whether each sampled session's process spent the time since its last sample waiting for a CPU: its run delay
    (/proc/PID/schedstat, the time it was runnable but not running) grew by at least QUEUED_SHARE of that time. Such a
    sample is "CPU wait: queued for a CPU" whatever wait the session showed: a backend whose fsync returned but which
    has not run since still shows IO:WALSync, and one in a CPU queue shows no wait at all.

    For a server on this host whose processes this user may read (root, or the server's own user); ``for_server``
    gives None elsewhere. A row's process is counted only when it is a child or a thread of the server's root
    process, so a pid seen from another namespace is never read as one of ours."""

    QUEUED_SHARE = 0.5

    def __init__(self, root_pid: int):
        self.root_pid = root_pid
        self.queued = 0
        self._last: dict[int, tuple[float, int]] = {}  # pid -> (when read, its run delay in ns then)
        self._ours: dict[int, bool] = {}

    @classmethod
    def for_server(cls, pid: int | None) -> "RunQueueWatch | None":
        if not pid:
            return None
        try:
            Path(f"/proc/{pid}/schedstat").read_text()
        except OSError:
            return None
        return cls(pid)

    def _delay_ns(self, pid: int) -> int | None:
        if pid not in self._ours:  # a child of the server (a PostgreSQL backend) or one of its threads
            try:
                status = dict(line.split(":\t", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines()
                              if ":\t" in line)
                self._ours[pid] = self.root_pid in (int(status["PPid"]), int(status["Tgid"]))
            except (OSError, ValueError, KeyError):
                self._ours[pid] = False
        if not self._ours[pid]:
            return None
        try:
            return int(Path(f"/proc/{pid}/schedstat").read_text().split()[1])
        except (OSError, ValueError, IndexError):
            return None

    def classify(self, rows: list) -> list:
        """A sample's rows (class, event, worker, pid) as (class, event, worker), a queued session's as CPU wait."""
        now, seen, out = time.monotonic(), {}, []
        for kind, event, worker, pid, *_ in rows:
            delay = self._delay_ns(pid) if isinstance(pid, int) else None
            if delay is not None:
                seen[pid] = (now, delay)
                if (last := self._last.get(pid)) and now > last[0] and \
                        (delay - last[1]) / 1e9 >= self.QUEUED_SHARE * (now - last[0]):
                    kind, event = "CPU wait", QUEUE
                    self.queued += 1
            out.append((kind, event, worker))
        self._last = seen
        if len(self._ours) > 10_000:  # processes come and go: forget those no longer sampled
            self._ours = {pid: ours for pid, ours in self._ours.items() if pid in seen}
        return out

    def close(self) -> None:
        pass

    def summary(self) -> dict[str, Any]:
        return {"queued_samples": self.queued}


def commits_as_running(rows: list) -> list:
    """Without a RedoLogWatch: a session in a commit stage is counted running (nothing tells its wait)."""
    return [("CPU", "CPU") if tuple(r) == ("CPU", "commit") else r for r in rows]


class SessionSampler:
    """``connect()`` opens the sampler's connection (autocommit); ``query`` returns one (class, event) row per active
    session. ``start()`` and ``stop()`` bracket the measured interval; ``stop()`` returns the profile."""

    def __init__(self, connect: Callable[[], Any], query: str, hz: float = SAMPLE_HZ,
                 fetch: Callable[[Any, str], list] = lambda conn, query: conn.execute(query).fetchall(),
                 watch: RedoLogWatch | RunQueueWatch | None = None, classify: Callable[[list], list] | None = None):
        """``classify``: what a sample's rows say once the server's state beside them is known (a RedoLogWatch's
        classify, which also adds its summary to the profile)."""
        self.connect, self.query, self.period, self.fetch = connect, query, 1.0 / hz, fetch
        self.watch, self.classify = watch, (watch.classify if watch is not None else classify)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._events: Counter[tuple[str, str]] = Counter()
        self._per_second: dict[int, Counter[str]] = {}
        self._ticks = 0
        self._workers = 0  # session samples that were a parallel worker of another session's query
        self._query_s = 0.0
        self._cpu_s = 0.0
        self._error: str | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._sample, name="refbench-session-sampler", daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        cpu0 = time.thread_time()
        try:
            with self.connect() as conn:
                begin = time.monotonic()
                due = begin
                while not self._stop.wait(max(0.0, due - time.monotonic())):
                    t0 = time.monotonic()
                    rows = self.fetch(conn, self.query)
                    if self.classify is not None:
                        rows = self.classify(rows)
                    self._query_s += time.monotonic() - t0
                    second = int(t0 - begin)
                    bucket = self._per_second.setdefault(second, Counter())
                    for kind, event, *worker in rows:
                        self._events[(kind, event)] += 1
                        self._workers += bool(worker and worker[0])
                        bucket[kind] += 1
                    bucket["_ticks"] += 1
                    self._ticks += 1
                    due += self.period
                    if due < time.monotonic():  # fell behind (a stalled server): the next tick now, not a burst
                        due = time.monotonic()
        except Exception as exc:  # the profile is an explanation, never a reason to lose a measurement
            self._error = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"
        finally:
            self._cpu_s = time.thread_time() - cpu0

    def stop(self) -> dict[str, Any]:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        events, rows = by_table(self._events)
        out = profile(events, self._per_second, self._ticks, self.period, self._query_s, self._cpu_s, self._error)
        if rows:
            total = sum(events.values())
            out["lock_rows"] = [{"row": row, "share_pct": round(100 * n / total, 2)} for row, n in rows.most_common(3)]
        if self._workers:
            out["parallel_worker_pct"] = round(100 * self._workers / out["session_samples"], 1)
        if self.watch is not None:
            self.watch.close()
            out |= self.watch.summary()
        return out


LOCKED_ROW = re.compile(r"^(row lock on .+?) row (.+)$")


def by_table(events: Counter) -> tuple[Counter, Counter]:
    """Row-lock waits named by their table in the profile ("row lock on `db`.`warehouse`"), and apart from it the
    rows waited for ("`db`.`warehouse` row 1": sample counts), whose few most waited for name a hot row."""
    tables: Counter[tuple[str, str]] = Counter()
    rows: Counter[str] = Counter()
    for (kind, event), n in events.items():
        if kind == "Lock" and (locked := LOCKED_ROW.match(event)):
            tables[(kind, locked.group(1))] += n
            rows[f"{locked.group(1).removeprefix('row lock on ')} row {locked.group(2)}"] += n
        else:
            tables[(kind, event)] += n
    return tables, rows


def shares(weights: Counter) -> dict[str, Any]:
    """Each (class, event)'s share of the whole and each class's, in percent, largest first: a profile's "events"
    and "classes" (from sample counts here, from measured seconds in DuckDB's QueryProfiler)."""
    total = sum(weights.values())
    if not total:
        return {"events": [], "classes": {}}
    by_class: Counter[str] = Counter()
    for (kind, _), n in weights.items():
        by_class[kind] += n
    return {"events": [{"class": kind, "event": event, "share_pct": round(100 * n / total, 2)}
                       for (kind, event), n in weights.most_common()],
            "classes": {kind: round(100 * n / total, 2) for kind, n in by_class.most_common()}}


def profile(events: Counter, per_second: dict[int, Counter], ticks: int, period: float, query_s: float, cpu_s: float,
            error: str | None) -> dict[str, Any]:
    """The samples as a record keeps them: shares of the sampled session time per event and per class (each list
    adding up to 100%), the average active sessions, and per second the average active sessions in each class."""
    total = sum(events.values())
    out: dict[str, Any] = {
        "hz": round(1 / period), "samples": ticks, "session_samples": total,
        "avg_active_sessions": round(total / ticks, 3) if ticks else None, **shares(events),
        "per_second": [{"second": s, **{k: round(n / c["_ticks"], 3) for k, n in c.items() if k != "_ticks"}}
                       for s, c in sorted(per_second.items())],
        "sampler_cpu_s": round(cpu_s, 4), "sampler_query_ms": round(1000 * query_s / ticks, 3) if ticks else None,
    }
    if error:
        out["error"] = error
    return out


# Reconciliation (reconcile): what moves a sampled "running" share, and when a wait is far above the device's time.
MIN_MOVED_S = 0.5  # session seconds: below this the ticks of CPU accounting and of sampling decide, not the server
MIN_MOVED_SHARE = 0.05  # of the sampled running time
FAR_ABOVE_DEVICE = 3.0  # a flush or read taking this many times the device's own await…
FAR_ABOVE_DEVICE_MS = 0.5  # …and at least this much longer spent its time elsewhere than in the device
CPU_EVIDENCE_PCT = 10.0  # of periods throttled, or of session time its threads queued: the server's CPU is starved


def reconcile(waits: dict[str, Any], machine: dict[str, Any] | None, io: dict[str, Any] | None,
              device: dict[str, Any] | None) -> dict[str, Any]:
    """A sampled profile checked against the server's measured time (refbench.host.contention's split of the same
    interval): a session sampled "running" was on a CPU only as long as the server had CPU time, and its threads
    waited for a CPU as long as their run delay says. So the running share keeps at most the server's CPU seconds;
    beyond them, up to the run delay (a CPU quota's throttling included), it becomes "CPU wait"; what is left was
    neither running nor queued: a wait the server does not show ("Unseen"). A flush or read wait far above the device's own await while
    the CPU was starved is CPU wait for its part above the device's time. The profile keeps what it moved
    ("reconciled"). Sampled profiles only (DuckDB's measures its threads' time itself).

    The part of a flush or read wait above the device's time moved to CPU wait is at most what the server's run delay
    has left once the sampled running is accounted: each second moved is a second some server thread was measured
    queued for a CPU."""
    if not waits.get("session_samples") or "busy_threads" in waits or not machine or \
            machine.get("server_cpu_s") is None or not waits.get("avg_active_sessions"):
        return waits
    session_s = waits["avg_active_sessions"] * machine["interval_s"]
    seconds = {(e["class"], e["event"]): e["share_pct"] / 100 * session_s for e in waits["events"]}
    throttled = machine.get("server_throttled") or {}
    throttled_pct = 100 * throttled.get("throttled_periods", 0) / throttled["periods"] if throttled.get("periods") else 0.0
    held = throttled_pct >= CPU_EVIDENCE_PCT  # by its quota
    cpu_wait = ("CPU wait", QUOTA if held else QUEUE)
    # Sampled running: on a CPU for as long as the server had one, then queued for as long as its threads were.
    running = seconds.pop(("CPU", "CPU"), 0.0)
    kept = min(running, machine["server_cpu_s"])
    # Time the server's threads waited for a CPU: their run delay, or (when its quota held the cgroup back longer
    # than the threads' run delay shows) the time the cgroup was throttled, during which a thread of it was runnable.
    waited = max(machine.get("server_runqueue_s") or 0.0, throttled.get("throttled_s") or 0.0)
    # Samples a RunQueueWatch already found queued hold part of that run delay.
    already = seconds.get(("CPU wait", QUEUE), 0.0)
    waited = max(0.0, waited - already)
    if already and held:  # queued while the quota held the server back: the quota's time
        seconds[cpu_wait] = seconds.get(cpu_wait, 0.0) + seconds.pop(("CPU wait", QUEUE))
    queued = min(running - kept, waited)
    unseen = running - kept - queued
    note: dict[str, Any] = {"running_sampled_s": round(running, 2), "server_cpu_s": machine["server_cpu_s"],
                            "server_runqueue_s": machine.get("server_runqueue_s"), "throttled_periods_pct": round(throttled_pct, 1)}
    if queued < max(MIN_MOVED_S, MIN_MOVED_SHARE * running):
        queued, kept = 0.0, kept + queued
    if unseen < max(MIN_MOVED_S, MIN_MOVED_SHARE * running):
        unseen, kept = 0.0, kept + unseen
    # The server's own evidence only: a neighbour's load on the machine starves this server when its threads queue.
    starved = held or 100 * waited / session_s >= CPU_EVIDENCE_PCT
    # What the run delay left after the sampled running: the most of a flush or read wait that can have been
    # waiting for a CPU (a device throttled above its queue also makes flushes far slower than its await).
    beyond, unexplained_queue = 0.0, max(0.0, waited - queued)
    for kind, event in list(seconds):
        what = meaning(kind, event)
        per_op, await_ms = _times(what, io, device)
        if what in ("flush", "read") and await_ms is None and held:
            # A server whose device refbench cannot see (a user's, by --dsn), held back by its quota: its threads'
            # measured queueing is the stronger evidence, and takes the wait's time up to what it left.
            moved = min(seconds[(kind, event)], unexplained_queue - beyond)
            seconds[(kind, event)] -= moved
            beyond += moved
            note[f"{what}_device_unseen"] = True
        elif starved and per_op and await_ms and per_op >= FAR_ABOVE_DEVICE * await_ms and \
                per_op - await_ms >= FAR_ABOVE_DEVICE_MS:
            moved = min(seconds[(kind, event)] * (1 - await_ms / per_op), unexplained_queue - beyond)
            seconds[(kind, event)] -= moved
            beyond += moved
            note[f"{what}_ms_per_op"], note[f"device_{what}_await_ms"] = per_op, await_ms
    if not (queued or unseen or beyond or (already and held)):
        return {**waits, "reconciled": note}
    seconds[("CPU", "CPU")] = kept
    seconds[cpu_wait] = seconds.get(cpu_wait, 0.0) + queued + beyond
    if unseen:
        seconds[("Unseen", "not on a CPU, not queued")] = unseen
    note |= {"moved_to_cpu_wait_s": round(queued + beyond, 2), "of_it_io_beyond_device_s": round(beyond, 2),
             "unseen_s": round(unseen, 2)}
    return {**waits, **shares(Counter({k: v for k, v in seconds.items() if v > 0})), "reconciled": note}


def _times(what: str, io: dict[str, Any] | None, device: dict[str, Any] | None) -> tuple[float | None, float | None]:
    """(ms per flush or read as the database timed it, the device's own await for the same kind of request)."""
    io, device = io or {}, device or {}
    if what == "flush":
        return io.get("ms_per_flush"), device.get("device_w_await_ms")
    if what == "read":
        return io.get("ms_per_read"), device.get("device_r_await_ms")
    return None, None
