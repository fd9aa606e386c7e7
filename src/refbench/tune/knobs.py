"""What `refbench tune` may change, and why: engine settings by what they relieve, host settings, and how each is
written into a plan (engine) or onto the host (host.py).

A knob addresses what the baseline's wait profile or host telemetry said limits it, in waits.MEANINGS' words
(flush, read, write, cpu, locks, contention) or the host's (device, cpu). The knobs that address the bottleneck are
tried first; the others for the same engine follow while the budget lasts. Settings that trade durability for speed
(synchronous_commit, innodb_flush_log_at_trx_commit, fsync) are never proposed: a tuned profile must keep every
commit on storage.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Any

ROW_STORES = ("oltp", "dss", "dw")
# The DWFT rating caps the memory by its rules (the dw suite's memory options): tune does not move it there.
MEMORY_SUITES = ("oltp", "dss")


@dataclass(frozen=True)
class Knob:
    name: str
    kind: str  # "engine", "host", or "option" (a suite's own option, from its tune_knobs)
    engine: str  # postgres | mariadb | duckdb; "" for a host setting
    addresses: tuple[str, ...]
    why: str
    choices: tuple[str, ...] = ()  # values to try, one A/B each; none: numeric, searched between low and high
    low: float = 0.0
    high: float = 0.0
    unit: str = ""  # how a numeric value is written: "MB" → 512MB, "M" → 512M, "" → 512
    suites: tuple[str, ...] = ROW_STORES
    paths: tuple[str, ...] = ()  # a host setting's files under /proc/sys or /sys

    @property
    def numeric(self) -> bool:
        return not self.choices

    def value_text(self, value: float) -> str:
        return f"{int(round(value))}{self.unit}"


ENGINE_KNOBS = [
    # PostgreSQL
    Knob("shared_buffers", "engine", "postgres", ("read", "write", "contention"),
         "a larger buffer cache turns storage reads into buffer hits (under a cache bound it is memory moved from the "
         "page cache to PostgreSQL's own, the bound stays)", low=64, high=0, unit="MB", suites=MEMORY_SUITES),
    Knob("commit_delay", "engine", "postgres", ("flush",),
         "commits wait for WAL flushes: a committing session that waits commit_delay µs lets one flush carry several "
         "commits (group commit), fewer flushes per commit", low=10, high=1000),
    Knob("wal_buffers", "engine", "postgres", ("flush", "contention"),
         "WAL written before it is flushed waits in wal_buffers; a larger one lets a busy server write WAL in fewer, "
         "larger writes", choices=("16MB", "64MB")),
    Knob("max_wal_size", "engine", "postgres", ("write", "flush"),
         "checkpoints come every max_wal_size of WAL; fewer of them write fewer dirty pages and full-page images",
         low=1024, high=16384, unit="MB"),
    Knob("wal_compression", "engine", "postgres", ("flush", "write"),
         "full-page images after each checkpoint are most of the WAL written; compressed, less is flushed per commit",
         choices=("on",)),
    Knob("checkpoint_timeout", "engine", "postgres", ("write", "flush"),
         "a checkpoint also comes every checkpoint_timeout: further apart, fewer dirty pages and full-page images are "
         "written for the same work", choices=("15min", "30min")),
    Knob("effective_io_concurrency", "engine", "postgres", ("read",),
         "bitmap heap scans prefetch this many blocks ahead; storage with deep queues answers many reads at once",
         choices=("32", "200"), suites=("dss", "dw")),
    Knob("work_mem", "engine", "postgres", ("write", "read"),
         "sorts and hashes larger than work_mem spill to temporary files and read them back",
         low=16, high=1024, unit="MB", suites=("dss", "dw")),
    Knob("jit", "engine", "postgres", ("cpu",),
         "JIT compilation costs each query tens of milliseconds of CPU, more than it saves on short queries",
         choices=("off",), suites=("dss", "dw")),
    # MariaDB
    Knob("innodb_buffer_pool_size", "engine", "mariadb", ("read", "write", "contention"),
         "a larger buffer pool turns storage reads into page hits (under a cache bound it is memory moved from the page "
         "cache to InnoDB's own, the bound stays)", low=64, high=0, unit="M", suites=MEMORY_SUITES),
    Knob("innodb_log_file_size", "engine", "mariadb", ("flush", "write"),
         "a larger redo log lets InnoDB write dirty pages later and in larger batches (fewer checkpoint flushes)",
         low=256, high=8192, unit="M"),
    Knob("innodb_flush_method", "engine", "mariadb", ("read", "write", "flush"),
         "O_DIRECT keeps data pages out of the page cache (no double buffering, no write-back storms); fsync leaves "
         "them to it", choices=("O_DIRECT", "fsync", "O_DIRECT_NO_FSYNC")),
    Knob("innodb_io_capacity", "engine", "mariadb", ("write", "flush"),
         "how many pages a second InnoDB's background flushing writes: too low and dirty pages pile up until a "
         "checkpoint forces them out in the foreground", low=200, high=20000),
    Knob("innodb_log_buffer_size", "engine", "mariadb", ("flush",),
         "transactions' redo waits in the log buffer until it is written; a larger one writes it in fewer, larger "
         "writes", choices=("64M", "256M")),
    Knob("thread_handling", "engine", "mariadb", ("cpu", "contention", "locks"),
         "the thread pool runs a few threads for many connections (less switching); one thread per connection has no "
         "queue to wait in", choices=("pool-of-threads", "one-thread-per-connection"), suites=("oltp", "dss", "dw")),
    # DuckDB
    Knob("threads", "engine", "duckdb", ("cpu",),
         "DuckDB runs each query on this many threads; more than the cores only adds switching, fewer leaves cores "
         "idle", low=1, high=0, suites=("dss", "dw")),
    Knob("memory_limit", "engine", "duckdb", ("read", "write"),
         "operators that need more than the memory limit spill to temporary files", low=128, high=0, unit="MB",
         suites=("dss",)),
]


def placement(directory: str) -> Knob:
    """The WAL (MariaDB: the redo log) on another device (the oltp suite's wal_dir): commits' flushes no longer queue
    behind data I/O."""
    return Knob("wal_dir", "option", "", ("flush", "write", "device"),
                "log flushes share the data's device; on a device of their own, commits do not wait behind data reads "
                "and checkpoint writes", choices=(directory,), suites=("oltp",))


# The plan option each engine setting lives in, per suite: its own option, or the engine's settings list.
OWN_OPTION = {
    ("oltp", "shared_buffers"): "shared_buffers", ("dss", "shared_buffers"): "shared_buffers",
    ("oltp", "innodb_buffer_pool_size"): "shared_buffers", ("dss", "innodb_buffer_pool_size"): "mariadb_buffer_pool",
    ("dss", "memory_limit"): "duckdb_memory_limit",
    ("dss", "threads"): "duckdb_threads", ("dw", "threads"): "duckdb_threads",
}
SETTINGS_LIST = {"postgres": "pg_settings", "mariadb": "mariadb_settings"}
DEFAULTS = {"shared_buffers": "128MB", "innodb_buffer_pool_size": "128M", "thread_handling": "one-thread-per-connection",
            "innodb_flush_method": "O_DIRECT", "wal_buffers": "4MB"}  # the servers' own, where the plan sets none


def engine_settings(suite: str, engine: str, options: dict[str, Any]) -> dict[str, str]:
    """The engine's settings a plan's resolved options give it: its list, then the options of its own."""
    out = dict(item.split("=", 1) for item in options.get(SETTINGS_LIST.get(engine, ""), []) or [] if "=" in item)
    for (s, name), option in OWN_OPTION.items():
        if s == suite and option in options and options[option] not in ("", 0) and _engine_of(name) == engine:
            out[name] = str(options[option])
    return {k.strip(): v.strip() for k, v in out.items()}


def _engine_of(name: str) -> str:
    return next(k.engine for k in ENGINE_KNOBS if k.name == name)


def with_settings(suite: str, engine: str, options: dict[str, Any], settings: dict[str, str]) -> dict[str, Any]:
    """The options with ``settings`` of ``engine`` written in: an own option set, or the list's entry replaced (the
    plan's other entries kept, so a changed list never drops the suite's defaults)."""
    out = dict(options)
    listed = list(out.get(SETTINGS_LIST.get(engine, ""), []) or [])
    for name, value in settings.items():
        option = OWN_OPTION.get((suite, name))
        if option:
            out[option] = int(value) if option == "duckdb_threads" else value
            continue
        listed = [item for item in listed if item.split("=", 1)[0].strip() != name] + [f"{name}={value}"]
    if engine in SETTINGS_LIST:
        out[SETTINGS_LIST[engine]] = listed
    return out


def memory_mb(storage: dict[str, Any]) -> float:
    """The memory a buffer cache may be searched up to: the baseline's cache bound when it had one (the bound stays,
    the split between the engine and the page cache moves), else a quarter of the host's memory."""
    bound = (storage.get("bound") or {}).get("bound_mb")
    return float(bound) if bound else os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 1e6 / 4


def search_range(knob: Knob, memory: float, cpus: int) -> tuple[float, float]:
    """(low, high) for a numeric knob; a memory knob up to three quarters of ``memory`` (MB), threads up to 2 × the CPUs."""
    if knob.name == "threads":
        return 1, max(2, 2 * cpus)
    if knob.high:
        return knob.low, knob.high
    return knob.low, max(knob.low * 2, memory * 0.75)


def current_value(knob: Knob, settings: dict[str, str]) -> str:
    return settings.get(knob.name, DEFAULTS.get(knob.name, ""))


def same_value(knob: Knob, a: str, b: str) -> bool:
    """Whether two values of a knob are one setting (512MB and 0.5GB are)."""
    return a == b or (knob.unit in ("MB", "M") and number(a) is not None and number(a) == number(b))


def number(text: str) -> float | None:
    """A setting's value as the number a knob searches (sizes in MB), when it is one."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMGT]?)B?\s*", text or "", re.I)
    return float(m.group(1)) * {"": 1, "K": 1 / 1024, "M": 1, "G": 1024, "T": 1 << 20}[m.group(2).upper()] if m else None


def option_value(text: str) -> Any:
    """A suite option's value as a plan holds it: a number where the text is one."""
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def ranked(knobs: list[Knob], bottleneck: list[str], evidence: dict[str, str] | None = None) -> list[Knob]:
    """The knobs addressing the first named resource first, then the second's…, then the rest in catalog order; ahead
    of them all, those addressing a named resource that the baseline's own counters point at (``evidence``)."""
    def rank(k: Knob) -> tuple[int, int]:
        hits = [i for i, what in enumerate(bottleneck) if what in k.addresses]
        return (0 if hits and k.name in (evidence or {}) else 1), hits[0] if hits else len(bottleneck)
    return sorted(knobs, key=rank)


# A share of WAL records with a full-page image above which compressing them is worth a trial first.
FULL_PAGE_IMAGES_PCT = 10


def evidence(storage: dict[str, Any]) -> dict[str, str]:
    """What the baseline's measured interval says about a knob, from the server's own counters, in a DBA's words:
    checkpoints requested because the WAL reached max_wal_size (PostgreSQL also logs "checkpoints are occurring too
    frequently"), and the full-page images that follow each checkpoint."""
    io = storage.get("io_latency") or {}
    seconds = storage.get("interval_s")
    found = {}
    if io.get("checkpoints_requested"):
        # Requested, not timed: refbench issues no CHECKPOINT while it measures, so the WAL reached max_wal_size.
        rate = f" ({io['wal_mb_per_s']} MB/s of WAL)" if io.get("wal_mb_per_s") is not None else ""
        found["max_wal_size"] = (f"{io['checkpoints_requested']} checkpoint(s) requested by WAL volume"
                                 + (f" in the measured {seconds:.0f} s" if seconds else "") + rate)
    if (io.get("full_page_image_pct") or 0) >= FULL_PAGE_IMAGES_PCT:
        found["wal_compression"] = f"{io['full_page_image_pct']:g}% of the WAL records carried a full-page image"
    return found
