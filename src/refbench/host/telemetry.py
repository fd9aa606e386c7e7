"""Telemetry: /proc/diskstats and /proc/stat sampled once a second while a run measures.

The sampler is its own process (so a busy suite cannot delay it) that appends one JSON line per second to
the run's telemetry file. A line holds per-interval rates, so a torn last line after kill -9 loses one
second, nothing more. Suites and the report ask for a time window: "read MB/s on sdb during this query".

Units: MB = 10^6 bytes; percentages of the interval; await in milliseconds.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from refbench.fileio import NotRegular, make_directories, open_own_file, open_regular, skipped

SECTOR_BYTES = 512  # /proc/diskstats counts 512-byte sectors whatever the device's sector size
CPU_FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")
DISK_METRICS = ("r_iops", "w_iops", "read_mb_s", "write_mb_s", "busy_pct", "avg_queue", "r_await_ms", "w_await_ms")
CPU_METRICS = ("user_pct", "system_pct", "iowait_pct", "idle_pct", "steal_pct")


def read_cpu(proc: Path) -> dict[str, int] | None:
    try:
        for line in (proc / "stat").read_text().splitlines():
            if line.startswith("cpu "):
                values = [int(v) for v in line.split()[1:]]
                return dict(zip(CPU_FIELDS, values + [0] * (len(CPU_FIELDS) - len(values))))
    except (OSError, ValueError):
        pass
    return None


def read_process_io(pid: int | str) -> dict[str, int]:
    """/proc/PID/io (``pid`` may be "self"): read_bytes and write_bytes are what the process submitted to block devices,
    with the counts of the children it has reaped. Empty when the process is gone."""
    try:
        text = Path(f"/proc/{pid}/io").read_text()
        return {k: int(v) for k, v in (line.split(": ") for line in text.splitlines())}
    except (OSError, ValueError):  # gone, or ended while it was read
        return {}


def read_disks(proc: Path) -> dict[str, tuple[int, ...]]:
    """name -> (reads, sectors read, ms reading, writes, sectors written, ms writing, ms busy, weighted ms)."""
    out = {}
    try:
        lines = (proc / "diskstats").read_text().splitlines()
    except OSError:
        return out
    for line in lines:
        f = line.split()
        if len(f) < 14 or f[2].startswith(("ram", "zram")):
            continue
        try:
            v = [int(x) for x in f[3:14]]
        except ValueError:
            continue
        if v[0] == 0 and v[4] == 0:
            continue  # never used: an idle loop device and the like
        out[f[2]] = (v[0], v[2], v[3], v[4], v[6], v[7], v[9], v[10])
    return out


def cpu_rates(before: dict[str, int], after: dict[str, int]) -> dict[str, float]:
    d = {k: after[k] - before[k] for k in CPU_FIELDS}
    total = sum(d.values()) or 1
    return {
        "user_pct": 100 * (d["user"] + d["nice"]) / total,
        "system_pct": 100 * (d["system"] + d["irq"] + d["softirq"]) / total,
        "iowait_pct": 100 * d["iowait"] / total,
        "idle_pct": 100 * d["idle"] / total,
        "steal_pct": 100 * d["steal"] / total,
    }


def disk_rates(before: tuple[int, ...], after: tuple[int, ...], seconds: float) -> dict[str, float]:
    reads, rsect, rms, writes, wsect, wms, busy_ms, weighted_ms = (a - b for a, b in zip(after, before))
    return {
        "r_iops": reads / seconds,
        "w_iops": writes / seconds,
        "read_mb_s": rsect * SECTOR_BYTES / 1e6 / seconds,
        "write_mb_s": wsect * SECTOR_BYTES / 1e6 / seconds,
        "busy_pct": min(100.0, 100 * busy_ms / (seconds * 1000)),
        "avg_queue": weighted_ms / (seconds * 1000),
        "r_await_ms": rms / reads if reads else 0.0,
        "w_await_ms": wms / writes if writes else 0.0,
    }


def sample_line(prev_t: float, prev_cpu: dict[str, int] | None, prev_disks: dict[str, tuple[int, ...]],
                t: float, cpu: dict[str, int] | None, disks: dict[str, tuple[int, ...]]) -> str:
    """One line of the telemetry file: the rates between two readings of the counters."""
    dt = t - prev_t
    sample: dict[str, Any] = {"t": round(t, 3), "dt": round(dt, 3)}
    if cpu and prev_cpu:
        sample["cpu"] = {k: round(v, 2) for k, v in cpu_rates(prev_cpu, cpu).items()}
    sample["disks"] = {
        name: {k: round(v, 3) for k, v in disk_rates(prev_disks[name], now, dt).items()}
        for name, now in disks.items()
        if name in prev_disks
    }
    return json.dumps(sample, separators=(",", ":")) + "\n"


def sample_forever(out: Path, interval_s: float, proc: Path, parent_pid: int | None) -> None:
    """Appends one line per interval until SIGTERM or until the parent process is gone."""
    stop = False

    def on_term(*_: Any) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C goes to the runner, which stops us cleanly
    make_directories(out.parent)
    prev_t, prev_cpu, prev_disks = time.time(), read_cpu(proc), read_disks(proc)
    next_tick = time.monotonic() + interval_s
    fd = open_own_file(out, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    cut = False  # a write that failed part-way (a full disk) left half a line: the next one starts on a new line
    try:
        while not stop:
            time.sleep(max(0.0, next_tick - time.monotonic()))
            next_tick += interval_s
            if parent_pid is not None and os.getppid() != parent_pid:
                break  # the runner died (kill -9): do not outlive it
            t, cpu, disks = time.time(), read_cpu(proc), read_disks(proc)
            line = (("\n" if cut else "") + sample_line(prev_t, prev_cpu, prev_disks, t, cpu, disks)).encode()
            try:
                cut = os.write(fd, line) != len(line)
            except OSError:  # no space: this second goes unrecorded, and the run says why it stops
                cut = True
            prev_t, prev_cpu, prev_disks = t, cpu, disks
    finally:
        os.close(fd)


class Sampler:
    """Runs the sampler process for the length of a ``with`` block."""

    def __init__(self, out: Path, interval_s: float = 1.0, proc: str = "/proc"):
        self.out, self.interval_s, self.proc = out, interval_s, proc
        self.process: subprocess.Popen | None = None

    def __enter__(self) -> "Sampler":
        self.process = subprocess.Popen(
            [sys.executable, "-m", "refbench.host.telemetry", "--out", str(self.out),
             "--interval", str(self.interval_s), "--proc", self.proc, "--parent", str(os.getpid())],
            stdin=subprocess.DEVNULL, start_new_session=True,
        )
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.process and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


@dataclass
class Window:
    """Telemetry summarized over one time window: means of each per-second rate, and peaks."""

    seconds: int
    cpu: dict[str, float]
    disks: dict[str, dict[str, float]]

    def to_dict(self, active_only: bool = True) -> dict[str, Any]:
        disks = {n: d for n, d in self.disks.items() if d["r_iops"] or d["w_iops"]} if active_only else self.disks
        return {"samples": self.seconds, "cpu": self.cpu, "disks": disks}


def _midpoint(sample: dict[str, Any]) -> float:
    # A sample stamped t covers (t - dt, t]; a window keeps those whose interval lies mostly inside it.
    return sample["t"] - sample["dt"] / 2


class Telemetry:
    """Reads a run's telemetry file; tolerant of a torn line.

    The file grows by one line a second for as long as the run lasts (86,400 lines a day) and every record asks
    for its own window, so no question reads the whole file: the lines are in time order, a window is found by
    bisecting the file's bytes (or, as records come in time order, where the previous window ended), the newest
    sample by reading the file's tail. A run's records together read the file about once."""

    BISECT_STOP_BYTES = 16384  # below this a linear read is cheaper than more probes
    READ_BYTES = 2048  # what one probe or one tail read costs (a few lines), rather than a default 8–128 KiB buffer

    def __init__(self, path: Path):
        self.path = path
        # (epoch, offset, inode): no sample whose interval's midpoint is later than epoch begins before offset.
        self._resume: tuple[float, int, int] | None = None

    def _open(self, buffering: int) -> Any:
        """The samples file, or None when there is none, or something else than a file (said: a FIFO would hold
        every reader)."""
        try:
            return os.fdopen(open_regular(self.path), "rb", buffering=buffering)
        except FileNotFoundError:
            return None
        except NotRegular as odd:
            skipped(self.path, odd.kind)
            return None

    def samples(self) -> Iterator[dict[str, Any]]:
        """Every sample in time order."""
        for _, sample in self._lines(None):
            yield sample

    def _lines(self, after_epoch_s: float | None) -> Iterator[tuple[int, dict[str, Any]]]:
        """(offset, sample) in time order, from the first sample whose midpoint is after ``after_epoch_s``."""
        if (f := self._open(self.READ_BYTES)) is None:
            return
        with f:
            offset = 0 if after_epoch_s is None else self._offset_before(f, after_epoch_s)
            f.seek(offset)
            while line := f.readline():
                at, offset = offset, offset + len(line)
                sample = _parse(line)
                if sample is not None and (after_epoch_s is None or _midpoint(sample) > after_epoch_s):
                    yield at, sample

    def _offset_before(self, f: Any, epoch_s: float) -> int:
        """An offset at a line start such that no sample with its midpoint after ``epoch_s`` begins before it."""
        stat = os.fstat(f.fileno())
        lo, hi = 0, stat.st_size
        step = None
        if self._resume and self._resume[2] == stat.st_ino and self._resume[0] <= epoch_s and self._resume[1] <= hi:
            # The window is most likely just after the previous one: gallop forward from there, then bisect.
            lo, step = self._resume[1], self.BISECT_STOP_BYTES
        while hi - lo > self.BISECT_STOP_BYTES:
            probe = min(hi, lo + step) if step else (lo + hi) // 2
            line_start, first = self._first_at(f, probe)
            if first is None or _midpoint(first) > epoch_s:
                hi, step = probe, None
            else:
                lo, step = line_start, step and step * 2
        return lo

    @staticmethod
    def _first_at(f: Any, offset: int) -> tuple[int, dict[str, Any] | None]:
        """The first complete sample that begins after ``offset``, and where its line starts."""
        f.seek(offset)
        f.readline()  # the rest of the line the offset fell into
        line_start = f.tell()
        while line := f.readline():
            if (sample := _parse(line)) is not None:
                return line_start, sample
            line_start = f.tell()
        return line_start, None

    def last_sample(self) -> dict[str, Any] | None:
        """The newest complete sample, read from the end of the file."""
        if (f := self._open(0)) is None:
            return None
        with f:
            end = os.fstat(f.fileno()).st_size
            tail, chunk = b"", self.READ_BYTES
            while end > 0:
                start = max(0, end - chunk)
                f.seek(start)
                tail = f.read(end - start) + tail
                end, chunk = start, chunk * 2
                lines = tail.split(b"\n")
                for line in reversed(lines if start == 0 else lines[1:]):  # lines[0] may be cut by the seek
                    if (sample := _parse(line)) is not None:
                        return sample
            return None

    def wait_for_sample_after(self, t: float, timeout_s: float = 1.5, slack_s: float = 0.0) -> None:
        """Waits (briefly) until the sampler has written a sample stamped at or after ``t - slack_s``."""
        deadline = time.time() + timeout_s
        while True:
            last = self.last_sample()
            if (last is not None and last["t"] >= t - slack_s) or time.time() >= deadline:
                return
            time.sleep(0.1)

    def between(self, start_epoch_s: float, end_epoch_s: float) -> list[dict[str, Any]]:
        out = []
        for at, sample in self._lines(start_epoch_s):
            if _midpoint(sample) > end_epoch_s:
                self._resume = (end_epoch_s, at, os.stat(self.path).st_ino)
                break
            out.append(sample)
        return out

    def window(self, start_epoch_s: float, end_epoch_s: float) -> Window | None:
        samples = self.between(start_epoch_s, end_epoch_s)
        if not samples:
            return None
        cpu = [s["cpu"] for s in samples if "cpu" in s]
        cpu_mean = {k: round(sum(c[k] for c in cpu) / len(cpu), 2) for k in CPU_METRICS} if cpu else {}
        disks: dict[str, dict[str, float]] = {}
        for name in {n for s in samples for n in s["disks"]}:
            rows = [s["disks"].get(name) for s in samples]
            rows = [r for r in rows if r is not None]
            summary = {k: round(sum(r[k] for r in rows) / len(rows), 3) for k in DISK_METRICS}
            summary["peak_read_mb_s"] = max(r["read_mb_s"] for r in rows)
            summary["peak_write_mb_s"] = max(r["write_mb_s"] for r in rows)
            summary["peak_busy_pct"] = max(r["busy_pct"] for r in rows)
            disks[name] = summary
        return Window(len(samples), cpu_mean, disks)

    def device(self, name: str, start_epoch_s: float, end_epoch_s: float) -> dict[str, float] | None:
        """One device over a window, e.g. ``device("sdb", t0, t1)["read_mb_s"]``."""
        window = self.window(start_epoch_s, end_epoch_s)
        return window.disks.get(name) if window else None


def _parse(line: bytes) -> dict[str, Any] | None:
    try:
        sample = json.loads(line)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None  # a torn line (kill -9, full disk): one second lost
    return sample if isinstance(sample, dict) and "t" in sample and "dt" in sample else None


def main() -> None:
    parser = argparse.ArgumentParser(description="refbench telemetry sampler (started by the runner)")
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--interval", type=float, default=1.0)
    parser.add_argument("--proc", default="/proc")
    parser.add_argument("--parent", type=int)
    args = parser.parse_args()
    sample_forever(args.out, args.interval, Path(args.proc), args.parent)


if __name__ == "__main__":
    main()
