"""The engine and host settings worth changing, by what each relieves: the catalog both `refbench tune` (which tries
them) and the verdict (which names the first to try) read, and the order tune tries them in (trial_order).

A knob addresses what a wait profile or the host's telemetry said limits a stack, in waits.MEANINGS' words (flush,
read, write, cpu, locks, contention) or the host's (device, cpu). Settings that trade durability for speed
(engines.settings.DURABILITY_TRADED: fsync, synchronous_commit, innodb_flush_log_at_trx_commit…) are never in it: a
tuned profile must keep every commit on storage.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, replace
from typing import Any

from refbench.host.sysfs import SysRoot, bracketed
from refbench.host.tuning import CHANGE, audit

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
         "them to it", choices=("O_DIRECT", "fsync")),
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


FIRST_TRIALS = 2  # the settings the verdict's advice names: tune's first trials


def trial_order(suite: str, engine: str, limits: list[str], evidence: dict[str, str], suite_knobs: list[Knob],
                extra: list[Knob] = ()) -> list[Knob]:
    """The settings `refbench tune` tries, in the order it tries them: the engine's for this suite, the suite's own
    options and ``extra`` (the host's with --apply-host, the WAL's place with --wal-dir), ranked by the limits the
    baseline named. The verdict's advice names the first of them (first_trials): one plan, said twice."""
    found = [k for k in ENGINE_KNOBS if k.engine == engine and suite in k.suites] + list(suite_knobs) + list(extra)
    return ranked(found, limits, evidence)


def first_trials(order: list[Knob], limits: list[str]) -> list[Knob]:
    """The first FIRST_TRIALS of ``order`` as long as each addresses a named limit: what the advice says to try."""
    out = []
    for knob in order[:FIRST_TRIALS]:
        if not set(knob.addresses) & set(limits):
            break
        out.append(knob)
    return out


def setting_said(name: str, value: str) -> str:
    """"commit_delay=230 µs": a setting as tune prints it, a bare number with its unit."""
    knob = next((k for k in ENGINE_KNOBS if k.name == name), None)
    return f"{name}={knob.said(value) if knob else value}"


def settings_said(change: dict[str, str]) -> str:
    return ", ".join(setting_said(name, value) for name, value in change.items())


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


def sysroot() -> SysRoot:
    """The tree host settings are read and written under: the machine's, or a copy a test made (REFBENCH_SYSROOT)."""
    return SysRoot(os.environ.get("REFBENCH_SYSROOT") or "/")


# The host settings tune may offer, by the names host_knobs gives them (a device's own after its name: "I/O scheduler
# (vda)"), for --only to be checked before the baseline runs.
HOST_SETTINGS = ("vm.dirty_background_ratio", "vm.dirty_ratio", "Transparent huge pages", "CPU frequency governor",
                 "I/O scheduler", "Read-ahead")


def host_knobs(suite: str, device: str | None, root: SysRoot | None = None, writable_only: bool = True) -> list[Knob]:
    """The host settings worth a trial on this host: those it exposes, at another value than the one tried; named as
    the tuning audit (refbench host) names them, and those it flags first. ``writable_only``: those this process may
    change (tune's); else those root may (the advice's, for a command run as root)."""
    root = root or sysroot()
    out = []

    def offer(name: str, paths: list[str], choices: list[str], addresses: tuple[str, ...], why: str) -> None:
        assert name.split(" (")[0] in HOST_SETTINGS, name  # the list --only is checked against
        paths = [p for p in paths if root.path(p).exists()]
        current = {setting_value(root, p) for p in paths}
        choices = [c for c in choices if current != {c}]
        if paths and choices and (not writable_only or os.access(root.path(paths[0]), os.W_OK)):
            out.append(Knob(name, "host", "", addresses, why, tuple(choices), paths=tuple(paths),
                            suites=(suite,)))

    offer("vm.dirty_background_ratio", ["/proc/sys/vm/dirty_background_ratio"], ["5", "10"], ("flush", "write", "device"),
          "background write-back starts when this share of memory is dirty: earlier, and checkpoints and spills "
          "meet a device that is already writing instead of a burst")
    offer("vm.dirty_ratio", ["/proc/sys/vm/dirty_ratio"], ["10", "40"], ("flush", "write", "device"),
          "writers are made to write back themselves past this share of dirty memory (the mixed-analytics paper: 40)")
    offer("Transparent huge pages", ["/sys/kernel/mm/transparent_hugepage/enabled"], ["never"], ("cpu",),
          "compaction and khugepaged stalls show up as latency; databases advise never (the mixed-analytics paper too)")
    governors = [f"/sys/devices/system/cpu/{c}/cpufreq/scaling_governor" for c in root.listdir("/sys/devices/system/cpu")
                 if c.startswith("cpu") and c[3:].isdigit()]
    offer("CPU frequency governor", governors, ["performance"], ("cpu",),
          "a CPU that ramps its clock up on demand adds latency and cuts throughput under a bursty load")
    if device and (disk := _disk(root, device)):
        available = (root.read(f"/sys/block/{disk}/queue/scheduler") or "").replace("[", "").replace("]", "").split()
        offer(f"I/O scheduler ({disk})", [f"/sys/block/{disk}/queue/scheduler"],
              [s for s in ("none", "mq-deadline") if s in available], ("read", "flush", "write", "device"),
              "the kernel's scheduler orders and merges requests; fast devices with their own queues do better without")
        if suite in ("dss", "dw", "analytics", "device"):
            offer(f"Read-ahead ({disk})", [f"/sys/block/{disk}/queue/read_ahead_kb"], ["4096"], ("read", "device"),
                  "scans read sequentially; a large read-ahead keeps the device's queue full (tuned's "
                  "throughput-performance: 4096 KiB)")
    flagged = {c.setting: c for c in audit(root) if c.status == CHANGE}
    return sorted((replace(k, why=f"{k.why}; the tuning audit flags it (now {flagged[k.name].current}, recommended "
                                  f"{flagged[k.name].recommended})") if k.name in flagged else k for k in out),
                  key=lambda k: k.name not in flagged)


def _disk(root: SysRoot, device: str) -> str | None:
    """The whole disk a device (or partition) belongs to, whose queue settings apply to it."""
    if root.path(f"/sys/block/{device}/queue").exists():
        return device
    parent = root.path(f"/sys/class/block/{device}").resolve().parent.name
    return parent if root.path(f"/sys/block/{parent}/queue").exists() else None


def setting_value(root: SysRoot, relative: str) -> str:
    text = root.read(relative) or ""
    return (bracketed(text) if "[" in text else text.strip()) or ""
