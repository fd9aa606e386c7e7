"""Where the machine's time went while an interval was measured, so that a starved CPU is never called a slow disk.

A ``MachineTime`` reads the kernel's counters at the start and the end of a measured interval and splits the
machine's CPU time (cores × seconds) into: the run's own (refbench and everything it started: its driver threads,
fio, a managed server), the database server's (its process tree, out of the run's own when refbench started it),
everything else's (other processes, the kernel's own threads and interrupts) and steal (the hypervisor gave the
time to another machine). Beside it, for the server: the time its threads were runnable but waited for a CPU
(/proc/PID/task/*/schedstat's run delay, which counts time a CPU quota held them too), its CPU cgroup's throttling
(cpu.stat) and pressure; for the machine: Linux pressure stall information (/proc/pressure: the share of the
interval some task was stalled on CPU, I/O or memory); and for the measured device the bytes other processes moved:
its reads less the run's own (/proc/PID/io, which counts a read when it is asked of the device), its writes less what
the run's own counters say it wrote (an engine's; /proc/PID/io charges a write when a page is dirtied, a page dirtied
again after its flush whole each time, so it is never taken as bytes written).

A measurement is *disturbed* when its neighbours cost it what they can be proven to have taken: more than
DISTURBED_CPU_PCT of the machine's CPU, or QUEUED_CPU_PCT while the run's threads queued for a CPU, or the
hypervisor's steal of DISTURBED_STEAL_PCT; more than
DISTURBED_DEVICE_PCT of the bytes the device read; DISTURBED_WRITE_MB_S of device writes the run did not make; or
the memory a cache bound promised the server. Its figures are kept, marked, and not compared as if quiet.

Units: seconds of CPU; percentages of the machine's CPU time (all cores) or of the interval; MB = 10^6 bytes.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any, Callable

from refbench.host.cachebound import children, inside_mount, read_cgroups
from refbench.host.telemetry import SECTOR_BYTES, read_cpu, read_disks, read_process_io

PROC = Path("/proc")
TICKS_PER_S = os.sysconf("SC_CLK_TCK")
# Of the machine's CPU time, whatever the run's threads did: a loop taking 18–20% of this 2-core VM cost quick oltp
# runs 35% of their NOPM and fio 15% of its IOPS (fio's thread barely queued: its completions did).
DISTURBED_CPU_PCT = 15.0
DISTURBED_DEVICE_PCT = 50.0  # of the bytes the measured device read
DISTURBED_DEVICE_MIN_MB_S = 5.0  # neighbours reading less than this do not disturb a device, whatever their share
# A lighter one costs a run whose threads queue for a CPU: the loop queued the server's threads of 2 users twice as
# long (0.30 → 0.59 threads waiting on average), and 1 user's four times (0.04 → 0.15–0.26).
QUEUED_CPU_PCT = 10.0
# Another VM's load costs more than the CPU it steals: at 6–10% steal fio lost a third of its IOPS on this VM (the
# hypervisor's I/O path is shared too), at 5% steal one oltp user 16% of its NOPM.
DISTURBED_STEAL_PCT = 5.0
QUEUED_THREADS = 0.1  # the server's and the run's threads waiting for a CPU, on average
# Device writes beyond what the run's counters say it wrote: the engines count their data and log pages, not the
# file system's journal nor a new WAL segment's zeroes, so a quiet run leaves up to 22 MB/s unexplained here; a
# 4 KiB random writer beside it, 57–79.
DISTURBED_WRITE_MB_S = 40.0
OWN_WRITES_UNCOUNTED = 2.0  # × the run's counted writes: what a heavier run may leave unexplained (quiet here: 1–2.8×)
MEMORY_SHORT = 0.9  # of the page cache a bound promised, what must have been there
# Of the memory the kernel calls available, what a server's page cache cannot count on: beside a process holding all
# but 251 MB, the server's cache held 327 MB of its 462 MB of data (1,024 MB promised) and lost 16% of its NOPM.
MEMORY_RESERVE_MB = 512
PRESSURE = ("cpu", "io", "memory")
MIN_INTERVAL_S = 1.0  # CPU time is counted in ticks of 10 ms: a shorter interval's split would be mostly rounding


def process_tree(pid: int) -> list[int]:
    """A process and its live descendants."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo += children(p)
    return out


def cpu_ticks(pid: int) -> tuple[int, int]:
    """A process's own CPU ticks (all its threads) and those of the children it has reaped; 0, 0 when it is gone."""
    try:
        stat = (PROC / str(pid) / "stat").read_text()
        fields = [int(f) for f in stat[stat.rindex(")") + 2:].split()[11:15]]
        return fields[0] + fields[1], fields[2] + fields[3]
    except (OSError, ValueError, IndexError):
        return 0, 0


def interval_ticks(a: dict[int, tuple[int, int]], b: dict[int, tuple[int, int]]) -> int:
    """The CPU ticks a set of processes used between two readings of each one's (own, reaped children's) ticks. A
    child reaped meanwhile brings its whole life into its parent's reaped ticks: what it had used by the first
    reading is taken out again, so a connection closed at the interval's start does not count its past."""
    total = 0
    for pid, (own, reaped) in b.items():
        before_own, before_reaped = a.get(pid, (0, 0))
        total += own - before_own + reaped - before_reaped
    total -= sum(own + reaped for pid, (own, reaped) in a.items() if pid not in b)
    return max(0, total)


def run_delay_ns(pid: int) -> int:
    """Nanoseconds a process's threads have spent runnable but not running (the scheduler's run delay)."""
    total = 0
    try:
        threads = os.listdir(PROC / str(pid) / "task")
    except OSError:
        return 0
    for thread in threads:
        try:
            total += int((PROC / str(pid) / "task" / thread / "schedstat").read_text().split()[1])
        except (OSError, ValueError, IndexError):
            continue
    return total


def pressure_totals(directory: Path, suffix: str = "") -> dict[str, int]:
    """{"cpu_some": µs, "io_full": µs, …} from the pressure files in ``directory`` (/proc/pressure: "cpu"; a cgroup:
    "cpu.pressure"). Empty where the kernel keeps none."""
    out = {}
    for resource in PRESSURE:
        try:
            lines = (directory / f"{resource}{suffix}").read_text().splitlines()
        except OSError:
            continue
        for line in lines:
            kind, _, rest = line.partition(" ")
            total = dict(part.split("=") for part in rest.split()).get("total")
            if total is not None:
                out[f"{resource}_{kind}"] = int(total)
    return out


def cgroup_dirs(pid: int) -> tuple[Path | None, Path | None]:
    """The directories of a process's CPU cgroup (cgroup v1's cpu controller, or v2's) and of its cgroup v2 (where
    the pressure files are), or None where they are not visible here. The root cgroup v2 is None: its pressure is the
    machine's (/proc/pressure)."""
    try:
        v1, v2, mounts = read_cgroups(PROC / str(pid) / "cgroup", PROC / "self" / "mountinfo")
    except OSError:
        return None, None
    v1_cpu = v1.get("cpu")
    cpu_dir = v2_dir = None
    for root, mount_point, fstype, options in mounts:
        if fstype == "cgroup" and "cpu" in options and v1_cpu is not None:
            cpu_dir = inside_mount(mount_point, root, v1_cpu) or cpu_dir
        elif fstype == "cgroup2" and v2 not in (None, "/"):
            v2_dir = inside_mount(mount_point, root, v2) or v2_dir
    if cpu_dir is None and v2_dir is not None and (v2_dir / "cpu.max").exists():
        cpu_dir = v2_dir
    return cpu_dir, v2_dir


def throttling(cpu_dir: Path | None) -> dict[str, int]:
    """A CPU cgroup's periods, throttled periods and throttled µs so far (cpu.stat, v1 or v2)."""
    if cpu_dir is None:
        return {}
    try:
        stat = dict(line.split() for line in (cpu_dir / "cpu.stat").read_text().splitlines() if " " in line)
    except (OSError, ValueError):
        return {}
    out = {k: int(stat[k]) for k in ("nr_periods", "nr_throttled") if k in stat}
    if "throttled_usec" in stat:
        out["throttled_us"] = int(stat["throttled_usec"])
    elif "throttled_time" in stat:  # v1: nanoseconds
        out["throttled_us"] = int(stat["throttled_time"]) // 1000
    return out


def cpu_quota(cpu_dir: Path | None) -> float | None:
    """The CPUs a cgroup may use (its quota over its period), None when unbounded."""
    if cpu_dir is None:
        return None
    try:
        if (cpu_dir / "cpu.max").exists():
            quota, period = (cpu_dir / "cpu.max").read_text().split()
            return None if quota == "max" else int(quota) / int(period)
        quota = int((cpu_dir / "cpu.cfs_quota_us").read_text())
        return None if quota < 0 else quota / int((cpu_dir / "cpu.cfs_period_us").read_text())
    except (OSError, ValueError):
        return None


def available_mb() -> float | None:
    """The memory the kernel says could be given to a new demand without swapping (MemAvailable), in MB."""
    try:
        for line in (PROC / "meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024 / 1e6
    except (OSError, ValueError, IndexError):
        pass
    return None


def _tree_read_bytes(pids: list[int]) -> int:
    return sum(read_process_io(pid).get("read_bytes", 0) for pid in pids)


class MachineTime:
    """``start()`` and ``stop()`` bracket a measured interval; ``stop()`` returns its split (see the module)."""

    def __init__(self, server_pid: Callable[[], int | None] | None = None, device: str | None = None,
                 with_children: bool = True, own_pid: int | None = None):
        """``server_pid``: the database server's root process now (None: no server on this host, or none to read),
        with its descendants unless not ``with_children`` (an engine inside refbench's own process); ``device``: the
        measured device (None: the one that moved the most bytes)."""
        self.server_pid, self.device, self.own_pid = server_pid or (lambda: None), device, own_pid or os.getpid()
        self.with_children = with_children
        self._start: dict[str, Any] | None = None

    def _snapshot(self) -> dict[str, Any]:
        server = self.server_pid()
        server_tree = (process_tree(server) if self.with_children else [server]) if server else []
        in_server = set(server_tree)
        own_tree = [p for p in process_tree(self.own_pid) if p not in in_server]
        cpu_dir, v2_dir = cgroup_dirs(server) if server else (None, None)
        return {
            "t": time.monotonic(), "machine": read_cpu(PROC), "server": server,
            "own_ticks": {p: cpu_ticks(p) for p in own_tree},
            # A server started inside refbench's tree is the run's own child: its time is the server's, not the run's.
            "server_ticks": {p: cpu_ticks(p) for p in server_tree},
            "run_delay": {p: run_delay_ns(p) for p in server_tree},
            "own_run_delay": {p: run_delay_ns(p) for p in own_tree}, "available_mb": available_mb(),
            "throttling": throttling(cpu_dir), "quota": cpu_quota(cpu_dir),
            "server_pressure": pressure_totals(v2_dir, suffix=".pressure") if v2_dir else {},
            "pressure": pressure_totals(PROC / "pressure"),
            "disks": read_disks(PROC), "read_bytes": _tree_read_bytes(own_tree + server_tree),
        }

    def start(self) -> None:
        self._start = self._snapshot()

    def stop(self, own_written_bytes: float | None = None) -> dict[str, Any]:
        """``own_written_bytes``: what the run wrote in the interval, by counters that mean what the device was
        asked to write (an engine's own); None when nothing counts it, and then others' writes are not known."""
        assert self._start is not None, "stop() before start()"
        return split(self._start, self._snapshot(), self.device, own_written_bytes)


def split(a: dict[str, Any], b: dict[str, Any], device: str | None, own_written_bytes: float | None = None) -> dict[str, Any]:
    """The interval between two snapshots as a record keeps it."""
    seconds = max(b["t"] - a["t"], 1e-9)
    cores = os.cpu_count() or 1
    out: dict[str, Any] = {"interval_s": round(seconds, 3), "cores": cores}
    if seconds < MIN_INTERVAL_S:
        return out | {"note": f"shorter than {MIN_INTERVAL_S:g} s: the kernel's CPU ticks cannot split it"}
    if a["machine"] and b["machine"]:
        d = {k: b["machine"][k] - a["machine"][k] for k in b["machine"]}
        total = sum(d.values()) or 1
        capacity_s = total / TICKS_PER_S  # the machine's CPU time in the interval, as /proc/stat counted it
        busy_s = (total - d["idle"] - d["iowait"] - d["steal"]) / TICKS_PER_S
        # Processes' ticks and the machine's are counted apart: bounded, so that the parts never pass the whole.
        own_s = min(busy_s, interval_ticks(a["own_ticks"], b["own_ticks"]) / TICKS_PER_S)
        same_server = a["server"] and a["server"] == b["server"]
        server_s = min(busy_s - own_s, interval_ticks(a["server_ticks"], b["server_ticks"]) / TICKS_PER_S) if same_server else None
        others_s = max(0.0, busy_s - own_s - (server_s or 0.0))
        steal_s = d["steal"] / TICKS_PER_S
        out |= {"own_cpu_s": round(own_s, 2), "server_cpu_s": None if server_s is None else round(server_s, 2),
                "others_cpu_s": round(others_s, 2), "steal_s": round(steal_s, 2),
                "own_pct": _pct(own_s, capacity_s), "server_pct": None if server_s is None else _pct(server_s, capacity_s),
                "others_pct": _pct(others_s, capacity_s), "steal_pct": _pct(steal_s, capacity_s),
                "idle_pct": _pct((d["idle"] + d["iowait"]) / TICKS_PER_S, capacity_s)}
    own_delay_ns = sum(b["own_run_delay"][p] - a["own_run_delay"][p] for p in b["own_run_delay"] if p in a["own_run_delay"])
    out["own_runqueue_avg"] = round(max(0, own_delay_ns) / 1e9 / seconds, 3)  # the run's threads waiting, on average
    if a["available_mb"] is not None and b["available_mb"] is not None:
        out["memory_available_mb"] = round(min(a["available_mb"], b["available_mb"]))
    if a["server"] and a["server"] == b["server"]:
        delay_ns = sum(b["run_delay"][p] - a["run_delay"][p] for p in b["run_delay"] if p in a["run_delay"])
        out["server_runqueue_s"] = round(max(0, delay_ns) / 1e9, 3)
        out["server_runqueue_avg"] = round(max(0, delay_ns) / 1e9 / seconds, 3)  # server threads waiting, on average
        if a["throttling"] and b["throttling"] and (b["quota"] is not None or b["throttling"] != a["throttling"]):
            t0, t1 = a["throttling"], b["throttling"]
            out["server_throttled"] = {"periods": t1.get("nr_periods", 0) - t0.get("nr_periods", 0),
                                       "throttled_periods": t1.get("nr_throttled", 0) - t0.get("nr_throttled", 0),
                                       "throttled_s": round((t1.get("throttled_us", 0) - t0.get("throttled_us", 0)) / 1e6, 3),
                                       "quota_cpus": b["quota"]}
        if pressure := _pressure_pct(a["server_pressure"], b["server_pressure"], seconds):
            out["server_pressure_pct"] = pressure
    if pressure := _pressure_pct(a["pressure"], b["pressure"], seconds):
        out["pressure_pct"] = pressure
    out |= _others_io(a, b, seconds, device, own_written_bytes)
    return out


def _pct(part: float, whole: float) -> float:
    return round(100 * part / whole, 1) if whole else 0.0


def _pressure_pct(a: dict[str, int], b: dict[str, int], seconds: float) -> dict[str, float]:
    """The share of the interval some (or all: "full") tasks were stalled, per resource."""
    return {k: round(min(100.0, (b[k] - a[k]) / 1e6 / seconds * 100), 1) for k in b if k in a}


def _others_io(a: dict[str, Any], b: dict[str, Any], seconds: float, device: str | None,
               own_written_bytes: float | None) -> dict[str, Any]:
    """The device's MB/s and the part of it other processes moved: the device's reads less the run's own (its
    processes' /proc/PID/io, a managed server's included), its writes less ``own_written_bytes`` (None: not known)."""
    moved = {name: sum(b["disks"][name][i] - a["disks"][name][i] for i in (1, 4)) for name in b["disks"]
             if name in a["disks"]}
    if device is None or device not in moved:
        device = max(moved, key=moved.get) if moved and max(moved.values()) > 0 else None
    if device is None:
        return {}
    read_mb = (b["disks"][device][1] - a["disks"][device][1]) * SECTOR_BYTES / 1e6
    written_mb = (b["disks"][device][4] - a["disks"][device][4]) * SECTOR_BYTES / 1e6
    own_read_mb = (b["read_bytes"] - a["read_bytes"]) / 1e6
    return {"device": device, "device_read_mb_s": round(read_mb / seconds, 2),
            "device_write_mb_s": round(written_mb / seconds, 2),
            "others_read_mb_s": round(max(0.0, read_mb - own_read_mb) / seconds, 2),
            "others_write_mb_s": None if own_written_bytes is None else
            round(max(0.0, written_mb - own_written_bytes / 1e6) / seconds, 2)}


def disturbed(machine: dict[str, Any] | None, storage: dict[str, Any] | None = None) -> str | None:
    """What neighbours cost an interval, in words ("other processes used 61% of the CPU"), or None when it was clean.
    ``storage``: a database probe's figures, whose cache bound says what memory the server was promised.
    REFBENCH_DISTURBED=off judges none (refbench's own tests, which run beside each other on purpose)."""
    if not machine or os.environ.get("REFBENCH_DISTURBED", "").lower() == "off":
        return None
    said = []
    others, steal = machine.get("others_pct") or 0.0, machine.get("steal_pct") or 0.0
    queued = (machine.get("server_runqueue_avg") or 0.0) + (machine.get("own_runqueue_avg") or 0.0)
    taken = f"other processes used {others:.0f}% of the CPU" + (f" and the hypervisor took {steal:.0f}% (steal)"
                                                               if steal >= 1 else "")
    if others + steal > DISTURBED_CPU_PCT:
        said.append(taken)
    elif others + steal >= QUEUED_CPU_PCT and queued >= QUEUED_THREADS:
        said.append(f"{taken} while the run's threads queued for one ({queued:.2g} waiting on average)")
    elif steal >= DISTURBED_STEAL_PCT:
        said.append(f"the hypervisor took {steal:.0f}% of the CPU (steal)")
    device = machine.get("device")
    read, others_read = machine.get("device_read_mb_s") or 0.0, machine.get("others_read_mb_s") or 0.0
    if others_read >= DISTURBED_DEVICE_MIN_MB_S and read and 100 * others_read / read > DISTURBED_DEVICE_PCT:
        said.append(f"other processes read {others_read:,.1f} of {read:,.1f} MB/s from {device}")
    written, others_write = machine.get("device_write_mb_s") or 0.0, machine.get("others_write_mb_s") or 0.0
    if others_write >= max(DISTURBED_WRITE_MB_S, OWN_WRITES_UNCOUNTED * (written - others_write)):
        said.append(f"other processes wrote {others_write:,.0f} of the {written:,.0f} MB/s written to {device}")
    if short := _memory_short(machine, storage or {}):
        said.append(short)
    return "; ".join(said) or None


def _memory_short(machine: dict[str, Any], storage: dict[str, Any]) -> str | None:
    """The page cache a cache bound promised the server, when other processes left less of it than the data needed:
    what the server's cgroup held at the end, and what it could still have taken of the memory available."""
    bound, available = storage.get("bound") or {}, machine.get("memory_available_mb")
    if not bound.get("cache_mb") or available is None or storage.get("page_cache_end_mb") is None:
        return None
    needed = min(bound["cache_mb"], storage.get("data_mb") or bound["cache_mb"])
    room = storage["page_cache_end_mb"] + max(0.0, available - MEMORY_RESERVE_MB)
    if room >= MEMORY_SHORT * needed:
        return None
    return (f"other processes left the server {room:,.0f} MB for its page cache of {bound['cache_mb']:,} MB "
            f"(its data {storage.get('data_mb') or 0:,.0f} MB, {available:,.0f} MB available)")
