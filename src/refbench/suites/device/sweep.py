"""The performance sweep of the SSD characterization paper and its preconditioning, on fio, with a steady-state stop
per point.

Six access modes (random/sequential × 0/30/100% writes) × queue depths × block sizes, each point run by
``numjobs`` fio workers. IOPS is sampled every second; a point stops once the SNIA steady-state criteria hold
over the window after the minimum time (when stopping is on), or at the maximum time.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from refbench.engines.fio import FioResult, run_fio
from refbench.measure import steady_state
from refbench.suites.device.checks import fio_filename
from refbench.suites.device.targets import Target


@dataclass(frozen=True)
class AccessMode:
    pattern: str  # random | sequential
    write_pct: int

    @property
    def id(self) -> str:
        return f"{'rand' if self.pattern == 'random' else 'seq'}-w{self.write_pct}"

    @property
    def title(self) -> str:
        """As people say it: random read, sequential write, random 70/30 read/write."""
        if self.write_pct in (0, 100):
            return f"{self.pattern} {'read' if self.write_pct == 0 else 'write'}"
        return f"{self.pattern} {100 - self.write_pct}/{self.write_pct} read/write"

    @property
    def fio_rw(self) -> str:
        prefix = "rand" if self.pattern == "random" else ""
        if self.write_pct == 0:
            return f"{prefix}read"
        if self.write_pct == 100:
            return f"{prefix}write"
        return f"{prefix}rw"


def access_modes(patterns: list[str], write_shares: list[int]) -> list[AccessMode]:
    return [AccessMode(p, w) for p in patterns for w in write_shares]


def size_label(nbytes: int) -> str:
    for unit, factor in (("MiB", 2**20), ("KiB", 2**10)):
        if nbytes >= factor and nbytes % factor == 0:
            return f"{nbytes // factor} {unit}"
    return f"{nbytes} B"


def bs_id(nbytes: int) -> str:
    return size_label(nbytes).replace(" MiB", "m").replace(" KiB", "k").replace(" B", "b")


def fio_seconds(seconds: float) -> int | str:
    """fio's runtime: whole seconds as such, a fraction in milliseconds (fio reads a bare number as seconds)."""
    return int(seconds) if seconds == int(seconds) else f"{round(seconds * 1000)}ms"


def base_job(target: Target, options: dict[str, Any]) -> dict[str, Any]:
    return {"filename": fio_filename(target.path), "size": target.size_bytes, "direct": 1,
            "ioengine": options["ioengine"], "group_reporting": True}


@dataclass
class PointResult:
    fio: FioResult
    steady_state_reached: bool
    steady_state_at_s: int | None
    window_iops: float | None


def run_point(target: Target, mode: AccessMode, iodepth: int, bs: int, options: dict[str, Any], raw_dir: Path,
              on_second: Callable[[int, float], None] | None = None) -> PointResult:
    numjobs = options["numjobs"]
    job = base_job(target, options) | {
        "name": f"{mode.id}-qd{iodepth}-bs{bs_id(bs)}", "rw": mode.fio_rw, "bs": bs, "iodepth": iodepth,
        "numjobs": numjobs, "time_based": True, "runtime": fio_seconds(options["max_runtime_s"]), "randrepeat": 0,
    }
    if 0 < mode.write_pct < 100:
        job["rwmixwrite"] = mode.write_pct
    if mode.pattern == "random":
        job["norandommap"] = True
    else:
        # Each worker streams through its own slice, as sequential multi-stream tests do.
        per_job = (target.size_bytes // numjobs) // bs * bs
        job["size"], job["offset_increment"] = per_job, per_job
    return _run_until_steady(job, options["min_runtime_s"], options["ss_window"], options["stop_at_steady_state"],
                             raw_dir, on_second)


def precondition_sequential(target: Target, options: dict[str, Any], raw_dir: Path,
                            on_progress: Callable[[float], None] | None = None) -> FioResult:
    """Workload-independent preconditioning: write the whole target ``passes`` times with 128 KiB blocks."""
    job = base_job(target, options) | {"name": "precondition-seq", "rw": "write", "bs": "128k", "iodepth": 32,
                                       "numjobs": 1, "loops": options["precondition_passes"]}
    total = target.size_bytes * options["precondition_passes"]

    def progress(samples: list[float], report: dict[str, Any]) -> bool:
        if on_progress:
            on_progress(min(1.0, int(report["jobs"][0]["write"]["io_bytes"]) / total))
        return False

    return run_fio(job, raw_dir, on_sample=progress)


def precondition_random(target: Target, options: dict[str, Any], raw_dir: Path,
                        on_second: Callable[[int, float], None] | None = None) -> PointResult:
    """Workload-dependent preconditioning: 4 KiB random writes for a duration or until steady state."""
    job = base_job(target, options) | {"name": "precondition-rand", "rw": "randwrite", "bs": "4k", "iodepth": 32,
                                       "numjobs": options["numjobs"], "time_based": True,
                                       "runtime": options["precondition_random_s"], "randrepeat": 0, "norandommap": True}
    window = options["ss_window"]
    return _run_until_steady(job, window, window, True, raw_dir, on_second)


def _run_until_steady(job: dict[str, Any], min_s: int, window: int, stop: bool, raw_dir: Path,
                      on_second: Callable[[int, float], None] | None) -> PointResult:
    first_reached: list[int] = []
    window_iops: list[float] = []

    def on_sample(samples: list[float], report: dict[str, Any]) -> bool:
        if on_second:  # seconds so far, and the last second's IOPS
            on_second(len(samples), samples[-1])
        state = steady_state(samples, window)
        if state.reached and not first_reached:
            first_reached.append(len(samples))
            window_iops.append(state.mean)
        return stop and state.reached and len(samples) >= min_s

    result = run_fio(job, raw_dir, on_sample=on_sample)
    return PointResult(result, bool(first_reached), first_reached[0] if first_reached else None,
                       round(window_iops[0], 1) if window_iops else None)
