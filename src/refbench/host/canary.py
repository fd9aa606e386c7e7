"""A canary: a short fixed probe of the host, taken before and after each measured case, for what no process
counter sees — a neighbour in another VM on shared storage, a busy hypervisor, a CPU that runs slower.

One probe is a fixed CPU loop (its median time over CPU_LOOPS tries), FSYNCS 4 KiB writes each made durable with
fdatasync, and READS 4 KiB direct reads (O_DIRECT: the device, not the page cache) of a 1 MiB file, all in the
run's work directory: about 15–25 ms on this VM, under 0.5% of a quick case. Each figure is a median in ms. The
same probe on a quiet host reads the same; when a run's probes move beyond their own spread, or two runs' differ,
the host changed, whatever its counters say.
"""

from __future__ import annotations

import mmap
import os
import statistics
import time
from pathlib import Path
from typing import Any

from refbench.fileio import make_directories

CPU_LOOPS, LOOP_N = 5, 20_000
FSYNCS = READS = 8
BLOCK = 4096
FILE_BYTES = 1 << 20
FIGURES = {"cpu_ms": "CPU loop", "fsync_ms": "fsync", "read_ms": "direct read"}
# A figure moved when it is this many times its baseline and this many ms beyond it (a quiet VM's repeated probes
# agree within about 1.3×; a device or CPU shared with a loud neighbour moves them 2–10×).
MOVED_FACTOR = 1.5
MOVED_MS = {"cpu_ms": 0.5, "fsync_ms": 0.2, "read_ms": 0.1}


def probe(directory: Path) -> dict[str, Any]:
    """One canary in ``directory`` (created if missing): {"cpu_ms", "fsync_ms", "read_ms", "cost_ms"}; a figure
    is None where the file system cannot give it (no O_DIRECT on tmpfs)."""
    started = time.perf_counter()
    make_directories(directory)
    out = {"cpu_ms": _cpu_ms(), "fsync_ms": _fsync_ms(directory / "canary-fsync"),
           "read_ms": _direct_read_ms(directory / "canary-read")}
    return {k: None if v is None else round(v, 3) for k, v in out.items()} | \
        {"cost_ms": round(1000 * (time.perf_counter() - started), 1)}


def _cpu_ms() -> float:
    times = []
    for _ in range(CPU_LOOPS):
        t = time.perf_counter()
        total = 0
        for i in range(LOOP_N):
            total += i
        times.append(1000 * (time.perf_counter() - t))
    return statistics.median(times)


def _fsync_ms(path: Path) -> float | None:
    block, times = b"\0" * BLOCK, []
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    except OSError:
        return None
    try:
        for i in range(FSYNCS):
            os.pwrite(fd, block, i * BLOCK)
            t = time.perf_counter()
            os.fdatasync(fd)
            times.append(1000 * (time.perf_counter() - t))
    except OSError:
        return None
    finally:
        os.close(fd)
    return statistics.median(times)


def _direct_read_ms(path: Path) -> float | None:
    if not path.exists() or path.stat().st_size != FILE_BYTES:
        try:
            path.unlink(missing_ok=True)
            with os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600), "wb") as f:
                f.write(os.urandom(FILE_BYTES))
                f.flush()
                os.fsync(f.fileno())
        except OSError:
            return None
    buffer = mmap.mmap(-1, BLOCK)  # page-aligned, as O_DIRECT needs
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECT", 0))
    except OSError:  # a file system without direct I/O
        return None
    times = []
    try:
        for i in range(READS):
            offset = (i * 37 % (FILE_BYTES // BLOCK)) * BLOCK  # spread over the file, the same every probe
            t = time.perf_counter()
            os.preadv(fd, [buffer], offset)
            times.append(1000 * (time.perf_counter() - t))
    except OSError:
        return None
    finally:
        os.close(fd)
        buffer.close()
    return statistics.median(times)


def medians(probes: list[dict[str, Any]]) -> dict[str, float]:
    """Each figure's median over several probes (those that have it)."""
    return {k: statistics.median(vs) for k in FIGURES if (vs := [p[k] for p in probes if p.get(k) is not None])}


def moved(baseline: list[dict[str, Any]], now: list[dict[str, Any]]) -> str:
    """How the probes ``now`` differ from ``baseline`` beyond the baseline's own spread, in words ("fsync 0.26 →
    0.85 ms"); "" when they agree."""
    said = []
    before, after = medians(baseline), medians(now)
    for k, name in FIGURES.items():
        if k not in before or k not in after:
            continue
        spread = [p[k] for p in baseline if p.get(k) is not None]
        seen = [p[k] for p in now if p.get(k) is not None]
        a, b = before[k], after[k]
        # Every probe now beyond every probe of the baseline, and its median far from the baseline's.
        grew = b >= MOVED_FACTOR * a and b - a >= MOVED_MS[k] and min(seen) > max(spread)
        fell = a >= MOVED_FACTOR * b and a - b >= MOVED_MS[k] and max(seen) < min(spread)
        if grew or fell:
            said.append(f"{name} {_ms(a)} → {_ms(b)} ms")
    return ", ".join(said)


def _ms(value: float) -> str:
    return f"{value:.2f}" if value < 10 else f"{value:.0f}"
