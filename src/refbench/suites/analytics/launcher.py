"""The launcher: starts the workload's jobs as separate processes, back to back, holding a target number
running at once (the mixed-analytics paper launches 77 jobs to average 20 concurrent), and measures each from outside with
the kernel's own accounting — wait4's rusage for CPU time, /proc/PID/io for bytes read and written.

A job's /proc/PID/io is read after it has exited but before it is reaped (waitid with WNOWAIT), so even a job
that crashed or was killed is measured. A job that fails is recorded as failed and the others go on.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from refbench.children import die_with_parent
from refbench.fileio import make_directories
from refbench.host.telemetry import read_process_io
from refbench.removal import remove_quietly
from refbench.suites.analytics.catalog import LOCATIONS, AnalyticsTest

MB = 1e6
SPACE_SAMPLE_S = 0.1  # how often the space WORK and UTIL hold is read


@dataclass(frozen=True)
class Job:
    id: str
    test: AnalyticsTest
    replica: int


def schedule(tests: list[AnalyticsTest], jobs: int) -> list[Job]:
    """``jobs`` launches cycling through the tests, so each is replicated about jobs/len(tests) times."""
    return [Job(f"{i + 1:03d}-{tests[i % len(tests)].name}", tests[i % len(tests)], i // len(tests) + 1) for i in range(jobs)]


@dataclass
class _Running:
    job: Job
    process: subprocess.Popen
    started: float
    dirs: dict[str, Path]
    result: Path
    log: Path


def _footprint(directory: Path) -> int:
    total = 0
    for root, _, files in os.walk(directory):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_size
            except OSError:
                pass  # removed while we looked
    return total


def run(jobs: list[Job], concurrency: int, locations: dict[str, Path], spec: dict[str, Any], threads: int,
        logs: Path, on_end: Callable[[dict[str, Any]], None] | None = None,
        on_live: Callable[[list[str], int], None] | None = None) -> dict[str, Any]:
    """Runs every job, ``concurrency`` at a time; returns per-job figures and the workload's timeline.
    ``on_end(job's figures)`` as each job ends; ``on_live(the jobs running, how many ended)`` about once a second."""
    make_directories(logs)
    queue, running, finished = list(jobs), [], []
    timeline: list[tuple[float, int]] = []  # (seconds since start, jobs running)
    peak_space = {name: 0 for name in LOCATIONS}
    t0 = time.monotonic()
    epoch0 = time.time()
    next_space_sample = next_live = 0.0

    def start(job: Job) -> _Running:
        dirs = {"DATA": locations["DATA"], "WORK": locations["WORK"] / job.id, "UTIL": locations["UTIL"] / job.id}
        for name in ("WORK", "UTIL"):
            remove_quietly(dirs[name])  # WORK may be in a target another user can write
            dirs[name].mkdir(parents=True)
        result, log = logs / f"{job.id}.json", logs / f"{job.id}.log"
        result.unlink(missing_ok=True)
        log.unlink(missing_ok=True)  # made anew below, so that a link left in its place is not written through
        job_spec = {**spec, "test": job.test.name, "module": job.test.run.__module__, "data": str(dirs["DATA"]), "work": str(dirs["WORK"]),
                    "util": str(dirs["UTIL"]), "threads": threads if job.test.threaded else 1, "result": str(result)}
        with os.fdopen(os.open(log, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644), "wb") as out:
            process = subprocess.Popen([sys.executable, "-m", "refbench.suites.analytics.job", json.dumps(job_spec)],
                                       stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                       preexec_fn=die_with_parent)
        return _Running(job, process, time.monotonic(), dirs, result, log)

    def finish(r: _Running, ended: float) -> dict[str, Any]:
        io = read_process_io(r.process.pid)  # still readable: the job has exited but is not reaped yet
        _, status, usage = os.wait4(r.process.pid, 0)
        r.process.returncode = os.waitstatus_to_exitcode(status)
        real = ended - r.started
        outcome = json.loads(r.result.read_text()) if r.result.exists() else {}
        error = _failure(r.process.returncode, r.log) if r.process.returncode != 0 or not outcome else ""
        cpu = usage.ru_utime + usage.ru_stime
        return {
            "job": r.job.id, "test": r.job.test.name, "kind": r.job.test.kind, "replica": r.job.replica,
            "status": "failed" if error else "ok", "error": error,
            "started_s": round(r.started - t0, 3), "ended_s": round(ended - t0, 3), "real_s": round(real, 3),
            "user_cpu_s": round(usage.ru_utime, 3), "system_cpu_s": round(usage.ru_stime, 3),
            "cpu_real_ratio": round(cpu / real, 3) if real > 0 else None,
            "read_mb": round(io.get("read_bytes", 0) / MB, 3),
            "written_mb": round((io.get("write_bytes", 0) - io.get("cancelled_write_bytes", 0)) / MB, 3),
            "read_calls_mb": round(io.get("rchar", 0) / MB, 3), "write_calls_mb": round(io.get("wchar", 0) / MB, 3),
            "max_rss_mb": round(usage.ru_maxrss / 1024, 1), "threads": threads if r.job.test.threaded else 1,
            "checks": outcome.get("checks", []),
        }

    try:
        while queue or running:
            exited = [(r, time.monotonic()) for r in running
                      if os.waitid(os.P_PID, r.process.pid, os.WEXITED | os.WNOWAIT | os.WNOHANG) is not None]
            for r, ended in exited:
                running.remove(r)
                finished.append(finish(r, ended))
                timeline.append((round(ended - t0, 3), len(running)))
                if on_end:
                    on_end(finished[-1])
            while queue and len(running) < concurrency:  # the next jobs start before the last ones' WORK is removed
                running.append(start(queue.pop(0)))
                timeline.append((round(time.monotonic() - t0, 3), len(running)))
            for r, _ in exited:
                for name in ("WORK", "UTIL"):
                    remove_quietly(r.dirs[name])  # SAS removes a session's WORK when it ends
            if time.monotonic() >= next_space_sample:
                for name in ("WORK", "UTIL"):
                    used = sum(_footprint(r.dirs[name]) for r in running)
                    peak_space[name] = max(peak_space[name], used)
                # Often: DuckDB's sort spills to UTIL and removes the spill when it ends, at the quick profile's
                # size within a second (a full make test once sampled none of it at 0.5 s).
                next_space_sample = time.monotonic() + SPACE_SAMPLE_S
            if on_live and time.monotonic() >= next_live:
                on_live([r.job.id for r in running], len(finished))
                next_live = time.monotonic() + 1
            time.sleep(0.02)
    except BaseException:
        for r in running:
            r.process.kill()
            r.process.wait()
            for name in ("WORK", "UTIL"):
                remove_quietly(r.dirs[name])
        raise
    wall = time.monotonic() - t0
    peak_space["DATA"] = sum(p.stat().st_size for p in locations["DATA"].iterdir() if p.is_file())
    return {"jobs": finished, "wall_s": round(wall, 3), "started_epoch_s": epoch0, "ended_epoch_s": epoch0 + wall,
            "timeline": timeline, "peak_space_mb": {k: round(v / MB, 1) for k, v in peak_space.items()}}


def _failure(code: int, log: Path) -> str:
    if code < 0:
        return f"killed by signal {-code} ({signal.Signals(-code).name})"
    try:
        lines = [line for line in log.read_text(errors="replace").splitlines() if line.strip()]
    except OSError:
        lines = []
    last = lines[-1].strip() if lines else "no output"
    return f"exit status {code}: {last}" if code else f"ended without a result: {last}"
