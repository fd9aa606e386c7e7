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
    except OSError:
        return {}
    return {k: int(v) for k, v in (line.split(": ") for line in text.splitlines())}


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


def sample_forever(out: Path, interval_s: float, proc: Path, parent_pid: int | None) -> None:
    """Appends one line per interval until SIGTERM or until the parent process is gone."""
    stop = False

    def on_term(*_: Any) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C goes to the runner, which stops us cleanly
    out.parent.mkdir(parents=True, exist_ok=True)
    prev_t, prev_cpu, prev_disks = time.time(), read_cpu(proc), read_disks(proc)
    next_tick = time.monotonic() + interval_s
    fd = os.open(out, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    cut = False  # a write that failed part-way (a full disk) left half a line: the next one starts on a new line
    try:
        while not stop:
            time.sleep(max(0.0, next_tick - time.monotonic()))
            next_tick += interval_s
            if parent_pid is not None and os.getppid() != parent_pid:
                break  # the runner died (kill -9): do not outlive it
            t, cpu, disks = time.time(), read_cpu(proc), read_disks(proc)
            dt = t - prev_t
            sample: dict[str, Any] = {"t": round(t, 3), "dt": round(dt, 3)}
            if cpu and prev_cpu:
                sample["cpu"] = {k: round(v, 2) for k, v in cpu_rates(prev_cpu, cpu).items()}
            sample["disks"] = {
                name: {k: round(v, 3) for k, v in disk_rates(prev_disks[name], now, dt).items()}
                for name, now in disks.items()
                if name in prev_disks
            }
            line = (("\n" if cut else "") + json.dumps(sample, separators=(",", ":")) + "\n").encode()
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


class Telemetry:
    """Reads a run's telemetry file; tolerant of a torn last line."""

    def __init__(self, path: Path):
        self.path = path

    def samples(self) -> Iterator[dict[str, Any]]:
        try:
            with open(self.path) as f:
                for line in f:
                    try:
                        yield json.loads(line)
                    except json.JSONDecodeError:
                        continue
        except FileNotFoundError:
            return

    def wait_for_sample_after(self, t: float, timeout_s: float = 1.5, slack_s: float = 0.0) -> None:
        """Waits (briefly) until the sampler has written a sample stamped at or after ``t - slack_s``."""
        deadline = time.time() + timeout_s
        while True:
            last = None
            for last in self.samples():
                pass
            if (last is not None and last["t"] >= t - slack_s) or time.time() >= deadline:
                return
            time.sleep(0.1)

    def between(self, start_epoch_s: float, end_epoch_s: float) -> list[dict[str, Any]]:
        # A sample stamped t covers (t - dt, t]; keep those whose interval lies mostly inside the window.
        return [s for s in self.samples() if start_epoch_s < s["t"] - s["dt"] / 2 <= end_epoch_s]

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

    def rows(self) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """(cpu rows, disk rows) for the consolidated Parquet tables."""
        cpu_rows, disk_rows = [], []
        for s in self.samples():
            if "cpu" in s:
                cpu_rows.append({"epoch_s": s["t"], **s["cpu"]})
            for name, d in s["disks"].items():
                disk_rows.append({"epoch_s": s["t"], "device": name, **d})
        return cpu_rows, disk_rows


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
