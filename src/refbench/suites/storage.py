"""The database suites' cache bound (oltp, dss, dw) and the proof, per record, that the storage was exercised.

The bound: ``cache_mb`` is the page cache the managed server may hold while a case is measured, on top of its own
memory (shared_buffers, its processes), enforced by host.cachebound: a cgroup whose limit follows the server's own
memory plus cache_mb, or else periodic eviction of its data files. The memory that can hold data is then
cache_mb + shared_buffers, "the bound"; the standard and full profiles size cache_mb so that the data is at least
4 times the bound.

The proof: a ``Probe`` around a record's measured interval puts a ``storage`` dict into the record: the engine's
buffer hit ratio, what the server itself read from storage (its own /proc/PID/io, so a neighbour's I/O on the same
device does not count), the data device's IOPS and MB/s (the whole device, neighbours included), and the data's size
against the bound. ``verdicts`` turns a suite's records into the sentence the terminal and the report print.
"""

from __future__ import annotations

import contextlib
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable

from refbench.engines.settings import pg_size_bytes
from refbench.host.cachebound import last_oom, process_tree_io
from refbench.engines.waits import reconcile
from refbench.host.contention import MachineTime
from refbench.host.observe import Unobserved, observing
from refbench.host.telemetry import disk_rates, read_disks, read_process_io
from refbench.options import Option, PlanError

AUTO = -1
MIN_CACHE_MB = 32  # less leaves no room for the files in flight (WAL, temporary files) and the server thrashes
DATA_PER_BOUND = 4  # standard and full: the data is at least this many times the bound
# The verdict's rule.
MIN_READ_MB_S = 1.0
# Of the bytes the engine asked for: guards against a little storage reading beside gigabytes served from memory. Low,
# because an OLTP engine asks mostly for hot index pages: at 10 warehouses with 4.6x data per bound, 0.3% came from
# storage (4.1 MB/s) where an unbounded run had 0.1% (0.8 MB/s, the cache thinned by neighbours).
MIN_STORAGE_SHARE_PCT = 0.1
RULE = (f"Storage exercised: over every interval the suite measured, its repeats too, the database server itself read at least "
        f"{MIN_READ_MB_S:g} MB/s from storage (its own processes' read_bytes in /proc/PID/io, so other processes' I/O "
        f"on the device does not count), and that was at least {MIN_STORAGE_SHARE_PCT:g}% of the bytes the engine "
        "asked for (buffer hits and misses × block size, where the engine counts them). Otherwise the figures were "
        "measured from memory and do not rate the storage.")
PROC = Path("/proc")
SAMPLE_SESSIONS = Option(bool, True, "Sample the database's active sessions 10 times a second while measuring (DuckDB: "
                                     "profile each query), for the wait profile that names the bottleneck in its words "
                                     "(off: the host's figures only, and a managed MariaDB without performance_schema).")

def unsampled_mariadb(o: dict[str, Any]) -> dict[str, str]:
    """The managed MariaDB's performance_schema off when its sessions are not sampled: its instruments cost the
    server NOPM (docs/BENCHMARKS.md) and only the wait profile reads them. A plan's mariadb_settings may still set it."""
    return {} if o.get("sample_sessions", True) else {"performance_schema": "OFF"}


CACHE_MB = Option(int, {"quick": 0, "standard": AUTO, "full": AUTO},
                  "Page cache the managed server may hold while measuring, MB, on top of its own memory "
                  f"(shared_buffers, its processes): 0 = unbounded, {AUTO} = sized so the data is {DATA_PER_BOUND}x "
                  "cache_mb + shared_buffers.", minimum=AUTO, maximum=10_000_000, unit="MB")


@dataclass(frozen=True)
class ServerMemory:
    """The managed server's memory for data while measuring, in MB (10^6 bytes): cache_mb + shared_buffers."""

    cache_mb: int
    shared_buffers_mb: float

    @property
    def bound_mb(self) -> float:
        return self.cache_mb + self.shared_buffers_mb

    @staticmethod
    def cache_bytes(memory: "ServerMemory | None") -> int:
        """The page cache ManagedPostgres is bounded to (0: unbounded)."""
        return memory.cache_mb * 10**6 if memory else 0

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "bound_mb": round(self.bound_mb)}


def server_memory(cache_mb: int, data_bytes: int, settings: dict[str, str]) -> ServerMemory | None:
    """The managed server's bound for option value ``cache_mb`` (AUTO: sized from the data's estimated size), or
    None when unbounded. Refuses, before anything is written, a bound that cannot work."""
    if cache_mb == 0:
        return None
    shared_mb = pg_size_bytes(settings.get("shared_buffers", "128MB"), 8192) / 1e6
    host_mb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 1e6
    if cache_mb == AUTO:
        # The bound is a quarter of the data, and at most half the host's memory (the rest is the host's own).
        cache_mb = max(MIN_CACHE_MB, int(min(data_bytes / 1e6 / DATA_PER_BOUND, host_mb / 2) - shared_mb))
        return ServerMemory(cache_mb, round(shared_mb, 1))
    if cache_mb < MIN_CACHE_MB:
        raise PlanError(f"cache_mb {cache_mb} leaves the server too little page cache for the files it writes (WAL, "
                        f"temporary files); use at least {MIN_CACHE_MB}, or 0 for no bound.")
    memory = ServerMemory(cache_mb, round(shared_mb, 1))
    if memory.bound_mb > host_mb:
        raise PlanError(f"cache_mb {cache_mb} bounds nothing: with shared_buffers it is {memory.bound_mb:,.0f} MB, more "
                        f"than this host's {host_mb:,.0f} MB of memory; lower it, or use 0 for no bound.")
    return memory


def say_bound(ctx, memory: ServerMemory | None, server, data_bytes: int) -> None:
    """The one line the terminal shows about the bound, when the suite starts."""
    if server is None:
        if ctx.options.get("cache_mb"):
            ctx.log("cache_mb is ignored: refbench cannot bound the memory of a server it does not manage (--dsn); "
                    "it measures as is, and says below whether the storage was exercised")
        return
    if memory is None:
        ctx.log("no cache bound (cache_mb = 0): the server and the OS page cache may hold all of the data in memory, "
                "so the figures may not rate the storage")
        return
    ctx.log(f"cache bound while measuring: {memory.bound_mb:,.0f} MB for data (page cache {memory.cache_mb:,} MB + "
            f"shared_buffers {memory.shared_buffers_mb:,.0f} MB) against about {data_bytes / 1e6:,.0f} MB of data, by "
            f"{server.bound.method}")


def bounded(server):
    """The managed server's bound for one measurement (nothing for an unbounded server or a user's)."""
    bound = getattr(server, "bound", None)
    return bound.applied() if bound is not None else contextlib.nullcontext()


class Probe:
    """The storage figures of one measured interval: ``start()`` at its beginning, ``stop()`` at its end."""

    def __init__(self, engine: str, pid: Callable[[], int | None], device: str | None,
                 blocks: Callable[[], dict[str, int]] | None = None, memory: ServerMemory | None = None,
                 server=None, data_bytes: Callable[[], int | None] | None = None, with_children: bool = True,
                 counters_restart_with_server: bool = False, sampler=None,
                 machine_pid: Callable[[], int | None] | None = None):
        """``pid``: the server's process now (its descendants count too when ``with_children``), None when it is
        not ours to read; ``blocks``: the engine's buffer counters (refbench.engines.Engine.counters), which start
        again from 0 in a restarted server when ``counters_restart_with_server``."""
        self.engine, self.pid, self.device, self.blocks, self.memory = engine, pid, device, blocks, memory
        self.server, self.data_bytes, self.with_children = server, data_bytes, with_children
        self.counters_restart_with_server = counters_restart_with_server
        self.sampler = sampler  # the engine's session sampler (refbench.engines.waits), for the wait profile
        # Who had the CPU: the server (``machine_pid``: a user's server on this host too), the run, its neighbours.
        self.machine = MachineTime(machine_pid or pid, device, with_children) if observing() else Unobserved()
        self._start: dict[str, Any] | None = None
        self._oom_kills = 0

    def _snapshot(self) -> dict[str, Any]:
        pid = self.pid()
        io = (process_tree_io(pid) if self.with_children else read_process_io(pid)) if pid else {}
        return {"t": time.monotonic(), "pid": pid, "io": io,
                "disks": read_disks(PROC), "blocks": self.blocks() if self.blocks else {}}

    def start(self) -> None:
        cgroup = self._cgroup()
        self._oom_kills = cgroup.read_oom_kills() if cgroup else 0
        self.machine.start()
        self._start = self._snapshot()
        if self.sampler is not None:
            self.sampler.start()

    def started(self) -> bool:
        return self._start is not None

    def _cgroup(self):
        bound = getattr(self.server, "bound", None)
        return bound.cgroup if bound is not None else None

    def stop(self) -> dict[str, Any]:
        """The interval's figures; a MemoryError when the kernel killed a server process at the bound meanwhile (the
        runner turns it into its one sentence, and the case is measured again on resume)."""
        assert self._start is not None, "stop() before start()"
        waits = self.sampler.stop() if self.sampler is not None else None
        a, b = self._start, self._snapshot()
        # A server restarted inside the interval (a cold query) is a new process: all of its reads are new, and so
        # are its buffer counters where the engine keeps them in the process (InnoDB's; PostgreSQL saves its own at
        # shutdown). The old process's counters are then no baseline: taken as one, a hit ratio came out at 100.1%.
        restarted = a["pid"] != b["pid"]
        io0 = {} if restarted else a["io"]
        blocks0 = {} if restarted and self.counters_restart_with_server else a["blocks"]
        # What the server wrote, as its own counters count it: /proc/PID/io charges a page dirtied again after its
        # flush whole each time (500 commits of 512 bytes: 1,049 MB charged, 6.25 MB on the device).
        written = (b["blocks"]["written_bytes"] - blocks0["written_bytes"]
                   if "written_bytes" in (b["blocks"] or {}) and "written_bytes" in blocks0 else None)
        machine = self.machine.stop(None if restarted else written)
        cgroup = self._cgroup()
        if cgroup is not None and cgroup.read_oom_kills() > self._oom_kills:
            raise MemoryError(last_oom())
        seconds = max(b["t"] - a["t"], 1e-9)
        out: dict[str, Any] = {"engine": self.engine, "interval_s": round(seconds, 3), "device": self.device,
                               "server_read_mb": None, "server_read_mb_s": None, "server_write_mb_s": None}
        if b["io"]:  # empty for a server refbench does not manage: its processes are not ours to read
            read = b["io"]["read_bytes"] - io0.get("read_bytes", 0)
            out |= {"server_read_mb": round(read / 1e6, 3), "server_read_mb_s": round(read / 1e6 / seconds, 3)}
        if written is not None:
            out["server_write_mb_s"] = round(written / 1e6 / seconds, 3)
        if a["blocks"] and b["blocks"]:
            hit = b["blocks"]["blocks_hit"] - blocks0.get("blocks_hit", 0)
            missed = b["blocks"]["blocks_read"] - blocks0.get("blocks_read", 0)
            out |= {"blocks_hit": hit, "blocks_read": missed,
                    "hit_ratio_pct": round(100 * hit / (hit + missed), 2) if hit + missed else None,
                    "requested_mb": round((hit + missed) * b["blocks"]["block_bytes"] / 1e6, 3)}
            out["io_latency"] = io_latency(blocks0, b["blocks"], missed, seconds,
                                           (waits or {}).get("redo_log_in_flight_pct"))
        dev = self.device
        if dev and dev in a["disks"] and dev in b["disks"]:
            rates = disk_rates(a["disks"][dev], b["disks"][dev], seconds)
            out |= {f"device_{k}": round(rates[k], 3) for k in ("r_iops", "w_iops", "read_mb_s", "write_mb_s",
                                                                   "r_await_ms", "w_await_ms", "avg_queue")}
        out["machine"] = machine
        if waits is not None:
            if "io_latency" in waits and not out.get("io_latency"):  # an engine's profiler timed the reads itself
                out["io_latency"] = waits.pop("io_latency")
            out["waits"] = reconcile(waits, machine, out.get("io_latency"), out)
        data = (b["blocks"] or {}).get("database_bytes") or (self.data_bytes() if self.data_bytes else None)
        out["data_mb"] = round(data / 1e6, 1) if data else None
        if self.memory is not None:
            out["bound"] = {**self.memory.to_dict(), "method": self.server.bound.method}
            out["data_per_bound"] = round(data / 1e6 / self.memory.bound_mb, 2) if data else None
            if cgroup is not None and (cache := cgroup.page_cache_bytes()) is not None:
                out["page_cache_end_mb"] = round(cache / 1e6, 1)
                out["server_own_memory_end_mb"] = round((cgroup.own_bytes() or 0) / 1e6, 1)
        else:
            out["bound"] = None
        return out


def engine_probe(engine, memory: ServerMemory | None, sessions: bool = False) -> Probe:
    """A probe of one engine (refbench.engines.Engine): the managed server's own processes, or refbench's for an
    in-process engine (not its children, a managed server among them), the device under its data and its buffer
    counters; for a user's server only its counters. ``memory`` counts for a managed server only. ``sessions``:
    sample the engine's sessions for a wait profile as well (for intervals of seconds: a workload, not one query)."""
    from refbench.suites.device.targets import device_of

    location = engine.data_location()
    sampler = getattr(engine, "wait_sampler", None) if sessions else None
    return Probe(engine.name, engine.server_pid, device_of(location) if location is not None else None, engine.counters,
                 memory if engine.server is not None else None, engine.server, data_bytes=engine.database_bytes,
                 with_children=not engine.in_process,
                 counters_restart_with_server=getattr(engine, "counters_restart_with_server", False),
                 sampler=sampler() if sampler else None,
                 machine_pid=getattr(engine, "local_server_pid", None))


def wait_figures(seen: dict[str, Any] | None) -> dict[str, float]:
    """The figures a probe's interval adds to its record: where session time went and the timed I/O."""
    from refbench.engines.waits import figures

    return figures((seen or {}).get("waits"), (seen or {}).get("io_latency"))


def io_latency(before: dict[str, Any], after: dict[str, Any], reads: int, seconds: float,
               log_busy_pct: float | None = None) -> dict[str, Any] | None:
    """The engine's I/O as it counted and timed it over the interval: block reads asked of the OS (its page cache or
    the device) and the time each took, log flushes (WAL or redo made durable) and the time each took. None for an
    engine that counts neither; a time is None where the engine does not keep it. An engine that counts its log
    writes without timing them (MariaDB) has their time from the share of the interval the log was seen in flight
    (``log_busy_pct``, RedoLogWatch): one write at a time, so busy time over the count is the time per write."""
    if "read_time_ms" not in after and "wal_syncs" not in after:
        return None

    def delta(key: str) -> float | None:
        return after[key] - before.get(key, 0) if key in after else None

    if "timed_reads" in after:  # the engine counts its timed reads itself (MariaDB: file reads, not pages)
        reads = int(delta("timed_reads"))
    read_ms, flushes, flush_ms = delta("read_time_ms"), delta("wal_syncs"), delta("wal_sync_ms")
    untimed = after.get("io_timing_off") or []
    read_ms = None if "track_io_timing" in untimed else read_ms
    flush_ms = None if "track_wal_io_timing" in untimed else flush_ms
    writes, write_ms = delta("wal_writes"), delta("wal_write_ms")
    # Counters that restart with the server (a crash, an immediate restart) would give a negative count.
    wal_bytes, records, fpi = (max(0, delta(k)) if k in after else None for k in ("wal_bytes", "wal_records", "wal_fpi"))
    sampled = flush_ms is None and log_busy_pct is not None and bool(flushes)
    if sampled:
        flush_ms = log_busy_pct / 100 * seconds * 1000
    return {"reads": reads, "read_ms": None if read_ms is None else round(read_ms, 3),
            "ms_per_read": round(read_ms / reads, 4) if reads and read_ms else None,
            "flushes": flushes, "flush_ms": None if flush_ms is None else round(flush_ms, 3),
            **({"flush_ms_basis": "sampled: the share of samples with the log in flight"} if sampled else {}),
            "ms_per_flush": round(flush_ms / flushes, 4) if flushes and flush_ms else None,
            "flushes_per_s": round(flushes / seconds, 1) if flushes is not None else None,
            "log_writes": writes, "ms_per_log_write": round(write_ms / writes, 4) if writes and write_ms else None,
            **({"wal_mb": round(wal_bytes / 1e6, 1), "wal_mb_per_s": round(wal_bytes / 1e6 / seconds, 2),
                "full_page_image_pct": round(100 * fpi / records, 1) if records else None} if wal_bytes is not None else {}),
            **({"untimed": after["io_timing_off"]} if after.get("io_timing_off") else {}),
            **({"checkpoints_timed": max(0, int(delta("checkpoints_timed"))),
                "checkpoints_requested": max(0, int(delta("checkpoints_requested")))} if "checkpoints_timed" in after
               else {})}


def verdicts(records: list) -> list[str]:
    """One sentence per engine of a suite's records: storage exercised, or measured from memory."""
    by_engine: dict[str, list[dict[str, Any]]] = {}
    for r in records:
        if storage := r.extra.get("storage"):
            by_engine.setdefault(storage["engine"], []).append(storage)
    lines = []
    for engine, parts in by_engine.items():
        seconds = sum(p["interval_s"] for p in parts)
        read_mb = sum(p["server_read_mb"] or 0 for p in parts)
        rate = read_mb / seconds if seconds else 0.0
        hits = sum(p.get("blocks_hit") or 0 for p in parts)
        misses = sum(p.get("blocks_read") or 0 for p in parts)
        requested = sum(p.get("requested_mb") or 0 for p in parts)
        hit_ratio = f"hit ratio {100 * hits / (hits + misses):.1f}%" if hits + misses else "no hit ratio (the engine counts none)"
        device = next((p["device"] for p in parts if p.get("device")), None) or "its storage"
        share_ok = not requested or 100 * read_mb / requested >= MIN_STORAGE_SHARE_PCT
        prefix = f"{engine}: " if len(by_engine) > 1 else ""
        if any(p["server_read_mb"] is None for p in parts):
            lines.append(f"{prefix}storage not proven: the server's own reads are unknown (a server refbench does not "
                         f"manage); {hit_ratio}, {_device_reads(parts, device)}")
        elif rate >= MIN_READ_MB_S and share_ok:
            lines.append(f"{prefix}storage exercised: {rate:,.1f} MB/s read from {device}, {hit_ratio}")
        else:
            bound = "" if any(p.get("bound") for p in parts) else "; no cache bound"
            lines.append(f"{prefix}measured from memory: this figure does not rate the storage (the server read "
                         f"{rate:,.2f} MB/s of its own from {device}, {hit_ratio}{bound})")
    return lines


def say_verdicts(ctx) -> None:
    for line in verdicts(ctx.run.records(ctx.suite)):
        ctx.log(line)


def _device_reads(parts: list[dict[str, Any]], device: str) -> str:
    """What the device read, all processes together; said as unknown when the server's device is not this host's."""
    values = [p["device_read_mb_s"] for p in parts if p.get("device_read_mb_s") is not None]
    if not values:
        return "its device's reads unknown (the server's data is not on a device of this host that refbench can see)"
    return f"{device} read {sum(values) / len(values):,.1f} MB/s in all"


def bound_methods(records: list) -> str:
    """How the records' bounds were enforced, in words."""
    methods = list(dict.fromkeys((r.extra["storage"].get("bound") or {}).get("method", "no cache bound")
                                 for r in records if r.extra.get("storage")))
    return "bounded by " + "; ".join(methods) if methods != ["no cache bound"] else "no cache bound (cache_mb = 0)"


def table(records: list) -> list[dict[str, Any]]:
    """The report's per-record storage rows."""
    rows = []
    for r in records:
        if s := r.extra.get("storage"):
            rows.append({"case": r.case_id, "engine": s["engine"], "interval_s": s["interval_s"],
                         "hit_ratio_pct": s.get("hit_ratio_pct"), "server_read_mb_s": s["server_read_mb_s"],
                         "server_write_mb_s": s["server_write_mb_s"], "device": s.get("device"),
                         "device_r_iops": s.get("device_r_iops"), "device_w_iops": s.get("device_w_iops"),
                         "device_read_mb_s": s.get("device_read_mb_s"), "device_write_mb_s": s.get("device_write_mb_s"),
                         "data_mb": s.get("data_mb"), "bound_mb": (s.get("bound") or {}).get("bound_mb"),
                         "page_cache_end_mb": s.get("page_cache_end_mb")})
    return rows
