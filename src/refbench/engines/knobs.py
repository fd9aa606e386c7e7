"""The engine settings worth changing, by what each relieves: the catalog both `refbench tune` (which tries them)
and the verdict (which names the first to try) read.

A knob addresses what a wait profile or the host's telemetry said limits a stack, in waits.MEANINGS' words (flush,
read, write, cpu, locks, contention) or the host's (device, cpu). Settings that trade durability for speed
(synchronous_commit, innodb_flush_log_at_trx_commit, fsync) are never in it: a tuned profile must keep every commit
on storage.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

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
    printed_unit: str = ""  # what a bare number means, said beside it: commit_delay=230 µs
    suites: tuple[str, ...] = ROW_STORES
    paths: tuple[str, ...] = ()  # a host setting's files under /proc/sys or /sys

    @property
    def numeric(self) -> bool:
        return not self.choices

    def value_text(self, value: float) -> str:
        return f"{int(round(value))}{self.unit}"

    def said(self, value: str) -> str:
        """A value as a person reads it, with its unit: "230 µs", "512MB", "on"."""
        return f"{value} {self.printed_unit}" if self.printed_unit and re.fullmatch(r"\d+(\.\d+)?", value) else value


ENGINE_KNOBS = [
    # PostgreSQL
    Knob("shared_buffers", "engine", "postgres", ("read", "write", "contention"),
         "a larger buffer cache turns storage reads into buffer hits (under a cache bound it is memory moved from the "
         "page cache to PostgreSQL's own, the bound stays)", low=64, high=0, unit="MB", suites=MEMORY_SUITES),
    Knob("commit_delay", "engine", "postgres", ("flush",),
         "commits wait for WAL flushes: a committing session that waits commit_delay µs lets one flush carry several "
         "commits (group commit), fewer flushes per commit", low=10, high=1000, printed_unit="µs"),
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
         "checkpoint forces them out in the foreground", low=200, high=20000, printed_unit="pages a second"),
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


def ranked(knobs: list[Knob], bottleneck: list[str], evidence: dict[str, str] | None = None) -> list[Knob]:
    """The knobs addressing the first named resource first, then the second's…, then the rest in catalog order; ahead
    of them all, those addressing a named resource that the baseline's own counters point at (``evidence``)."""
    def rank(k: Knob) -> tuple[int, int]:
        hits = [i for i, what in enumerate(bottleneck) if what in k.addresses]
        return (0 if hits and k.name in (evidence or {}) else 1), hits[0] if hits else len(bottleneck)
    return sorted(knobs, key=rank)


def setting_said(name: str, value: str) -> str:
    """"commit_delay=230 µs": a setting as tune prints it, a bare number with its unit."""
    knob = next((k for k in ENGINE_KNOBS if k.name == name), None)
    return f"{name}={knob.said(value) if knob else value}"


def settings_said(change: dict[str, str]) -> str:
    return ", ".join(setting_said(name, value) for name, value in change.items())
