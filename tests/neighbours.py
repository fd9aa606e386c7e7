"""Neighbours made on purpose (issue 51): the load users' shared machines have beside a run. Each is a process of the
test's own, started by a context manager and stopped (with whatever it wrote) when it leaves.

- ``cpu_loop(share)``: a loop that spins ``share`` of the machine's CPU time (all cores), sleeping in between.
- ``writer(directory, block)``: fio writing direct to a file of its own in ``directory``: 4 KiB random writes, or
  1 MiB sequential ones, as fast as the device takes them.
- ``memory_hog(leave_mb)``: a process that holds (touched, so resident) all of the machine's available memory but
  ``leave_mb``.
"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator

from refbench.children import die_with_parent
from refbench.host.contention import available_mb

PERIOD_S = 0.01  # the CPU loop's cycle: spin, then sleep for the rest


@contextlib.contextmanager
def _running(command: list[str], ready: Path | None = None) -> Iterator[subprocess.Popen]:
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                               preexec_fn=functools.partial(die_with_parent, signal.SIGKILL))
    try:
        if ready is not None:  # the neighbour says when it holds what it was made to hold
            deadline = time.monotonic() + 120
            while not ready.exists():
                assert process.poll() is None, process.stderr.read().decode()
                assert time.monotonic() < deadline, "the neighbour did not get ready in 120 s"
                time.sleep(0.1)
        yield process
        assert process.poll() is None, f"the neighbour ended early: {process.stderr.read().decode()}"
    finally:
        process.kill()
        process.wait()


@contextlib.contextmanager
def _python_holding(code: str, ready: Path) -> Iterator[subprocess.Popen]:
    """Python running ``code``, which creates ``ready`` once it holds what it holds; ``ready`` removed after."""
    try:
        with _running([sys.executable, "-c", code], ready=ready) as process:
            yield process
    finally:
        ready.unlink(missing_ok=True)


@contextlib.contextmanager
def cpu_loop(share: float) -> Iterator[subprocess.Popen]:
    """Spins ``share`` (0–1) of the machine's CPU time: that share of all cores, from one process."""
    busy_s = min(1.0, share * (os.cpu_count() or 1)) * PERIOD_S
    code = ("import time\n"
            "while True:\n"
            f"    end = time.monotonic() + {busy_s!r}\n"
            "    while time.monotonic() < end: pass\n"
            f"    time.sleep({PERIOD_S - busy_s!r})\n")
    with _running([sys.executable, "-c", code]) as process:
        yield process


@contextlib.contextmanager
def writer(directory: Path, block: str = "4k") -> Iterator[subprocess.Popen]:
    """fio writing direct to its own 512 MiB file in ``directory``: random 4 KiB writes ("4k"), or sequential
    1 MiB ones ("1m"), at queue depth 4, until stopped."""
    target = directory / f"neighbour-writer-{os.getpid()}-{block}"
    pattern = "randwrite" if block == "4k" else "write"
    command = [shutil.which("fio") or "fio", "--name=neighbour", f"--filename={target}", "--size=512m",
               f"--rw={pattern}", f"--bs={block}", "--direct=1", "--ioengine=libaio", "--iodepth=4",
               "--time_based", "--runtime=86400", "--output-format=terse",
               "--thread"]  # its job a thread of the process started here, so that stopping it stops the writes
    try:
        with _running(command) as process:
            time.sleep(2)  # laid out and writing
            yield process
    finally:
        target.unlink(missing_ok=True)


@contextlib.contextmanager
def memory_hog(leave_mb: float, ready: Path) -> Iterator[subprocess.Popen]:
    """Holds all of the machine's available memory but ``leave_mb`` (MB), every page touched, until stopped;
    ``ready``: a file of the test's own the hog creates once it holds it."""
    available = available_mb()
    assert available is not None, "no MemAvailable in /proc/meminfo"
    hold = int((available - leave_mb) * 1e6)
    assert hold > 0, f"only {available:,.0f} MB available: nothing to hold"
    code = ("import sys, time\n"
            f"block = bytearray({hold})\n"
            "block[::4096] = b'\\x01' * len(range(0, len(block), 4096))\n"  # touched: resident, not a promise
            f"open({str(ready)!r}, 'w').close()\n"
            "while True: time.sleep(1)\n")
    with _python_holding(code, ready) as process:
        yield process


@contextlib.contextmanager
def memory_balloon(leave_mb: float, ready: Path) -> Iterator[subprocess.Popen]:
    """Keeps the machine's available memory at ``leave_mb`` (MB) until stopped, as a hypervisor's balloon does: it
    takes what the kernel could give the page cache and gives memory back as the run beside it allocates (a hog of
    a fixed size left 250 MB too few for a run's own processes, and the kernel's OOM killer stopped the hog).
    ``ready``: a file of the test's own the balloon creates once the memory left is down to ``leave_mb``."""
    code = ("import time\n"
            "CHUNK = 32 * 2**20\n"
            "held, told = [], False\n"
            "def spare_mb():\n"
            "    for line in open('/proc/meminfo'):\n"
            "        if line.startswith('MemAvailable:'):\n"
            f"            return int(line.split()[1]) * 1024 / 1e6 - {leave_mb!r}\n"
            "while True:\n"
            "    spare = spare_mb()\n"
            "    if spare > 64:\n"
            "        for _ in range(max(1, int(min(spare, 4096) * 1e6 // CHUNK))):\n"
            "            block = bytearray(CHUNK)\n"
            "            block[::4096] = b'\\x01' * (CHUNK // 4096)\n"  # touched: resident, not a promise
            "            held.append(block)\n"
            "    elif spare < -16 and held:\n"
            "        del held[-max(1, int(-spare * 1e6 // CHUNK)):]\n"
            "    elif not told:\n"
            f"        open({str(ready)!r}, 'w').close()\n"
            "        told = True\n"
            "    time.sleep(0.2)\n")
    with _python_holding(code, ready) as process:
        yield process
