"""fio as refbench's I/O engine: command lines, a live view of per-second IOPS, stopping a job early once
steady state holds, and the figures refbench reports from fio's JSON.

fio is started with ``--status-interval=1 --output-format=json``: it prints a cumulative JSON report every
second and a final one when it ends (also after SIGINT, which is how a job is stopped early).
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from refbench.children import die_with_parent
from refbench.errors import UserError
from refbench.fileio import atomic_write_text, make_directories

PERCENTILES = "50:99:99.9"
PERCENTILE_KEYS = {"p50": "50.000000", "p99": "99.000000", "p999": "99.900000"}


def fio_binary() -> str:
    path = shutil.which("fio")
    if not path:
        raise UserError("fio is not installed; install it with 'apt-get install fio' (make demo does this for you).")
    return path


def job_args(options: dict[str, Any]) -> list[str]:
    """``{"rw": "randread", "bs": 4096, "direct": True}`` → ``["--rw=randread", "--bs=4096", "--direct=1"]``."""
    args = []
    for key, value in options.items():
        if value is None or value is False:
            continue
        args.append(f"--{key}" if value is True else f"--{key}={value}")
    return args


@dataclass
class FioResult:
    final: dict[str, Any]  # fio's last (complete) JSON report
    iops_per_s: list[float] = field(default_factory=list)  # one sample per status interval
    stopped_early: bool = False
    stopped_at_s: float | None = None
    stderr: str = ""

    @property
    def job(self) -> dict[str, Any]:
        return self.final["jobs"][0]

    def io_bytes(self) -> int:
        return int(self.job["read"]["io_bytes"]) + int(self.job["write"]["io_bytes"])

    def metrics(self) -> dict[str, Any]:
        """The per-point figures: IOPS, MB/s (SI), completion latency percentiles in µs, fio's CPU."""
        job = self.job
        out: dict[str, Any] = {}
        total_iops = total_mb_s = 0.0
        for direction in ("read", "write"):
            d = job[direction]
            iops, mb_s = float(d["iops"]), float(d["bw_bytes"]) / 1e6
            total_iops += iops
            total_mb_s += mb_s
            out[f"{direction}_iops"] = round(iops, 1)
            out[f"{direction}_mb_s"] = round(mb_s, 3)
            clat = d.get("clat_ns", {})
            has_io = int(d.get("total_ios", 0)) > 0
            out[f"{direction}_lat_mean_us"] = round(clat.get("mean", 0) / 1000, 2) if has_io else None
            percentiles = clat.get("percentile", {})
            for name, key in PERCENTILE_KEYS.items():
                out[f"{direction}_lat_{name}_us"] = round(percentiles[key] / 1000, 2) if has_io and key in percentiles else None
        out["iops"] = round(total_iops, 1)
        out["mb_s"] = round(total_mb_s, 3)
        out["fio_usr_cpu_pct"] = round(float(job.get("usr_cpu", 0)), 2)
        out["fio_sys_cpu_pct"] = round(float(job.get("sys_cpu", 0)), 2)
        out["runtime_s"] = round(float(job.get("job_runtime", 0)) / 1000 / max(1, _numjobs(job)), 2)
        return out


def _numjobs(job: dict[str, Any]) -> int:
    try:
        return int(job.get("job options", {}).get("numjobs", 1))
    except ValueError:
        return 1


def run_fio(
    options: dict[str, Any],
    raw_dir: Path | None = None,
    on_sample: Callable[[list[float], dict[str, Any]], bool] | None = None,
) -> FioResult:
    """Runs one fio job. ``on_sample(iops_samples, report)`` is called after every per-second report and
    returns True to stop the job now (steady state reached); fio then still writes its final report."""
    # Jobs as threads of the one fio process (--thread), not processes of their own: a fio job process sets up its
    # own session, and one left waiting for a main process that died (of the SIGTERM a dying refbench had the kernel
    # send) lived on for good — the fio found alive 5 s after a kill -9 of refbench. As one process, fio ends
    # whole with the kernel's SIGKILL when refbench dies.
    argv = [fio_binary(), "--thread", *job_args(options), "--status-interval=1", "--output-format=json",
            f"--percentile_list={PERCENTILES}"]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL,
                            preexec_fn=die_with_parent)
    stderr_chunks: list[str] = []
    reader = threading.Thread(target=lambda: stderr_chunks.append(proc.stderr.read()), daemon=True)
    reader.start()
    last_report: dict[str, Any] | None = None  # only the last: an hour-long job prints 3,600 of them
    samples: list[float] = []
    stopped_at: float | None = None
    started = time.monotonic()
    previous: tuple[float, int] | None = None
    buffer: list[str] = []
    try:
        for line in proc.stdout:
            if not buffer and not line.startswith("{"):
                continue  # fio's occasional plain-text notes on stdout
            buffer.append(line)
            if line.rstrip("\n") != "}":
                continue
            try:
                report = json.loads("".join(buffer))
            except json.JSONDecodeError:
                continue  # not the end of the top-level object after all
            buffer = []
            last_report = report
            job = report["jobs"][0]
            now = (report["timestamp_ms"] / 1000, int(job["read"]["total_ios"]) + int(job["write"]["total_ios"]))
            if stopped_at is None and (previous is None or now[0] > previous[0]):
                if previous is None:  # the first second: fio's own average since the job started
                    samples.append(float(job["read"]["iops"]) + float(job["write"]["iops"]))
                else:
                    samples.append((now[1] - previous[1]) / (now[0] - previous[0]))
                if on_sample is not None and on_sample(samples, report):
                    stopped_at = time.monotonic() - started
                    proc.send_signal(signal.SIGINT)
            previous = now if stopped_at is None else previous
    except BaseException:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        raise
    proc.wait()
    reader.join(timeout=5)
    stderr = "".join(stderr_chunks)
    if raw_dir is not None:
        make_directories(raw_dir)
        atomic_write_text(raw_dir / "fio-command.txt", " ".join(argv) + "\n")
        if last_report is not None:
            atomic_write_text(raw_dir / "fio.json", json.dumps(last_report, indent=1))
            atomic_write_text(raw_dir / "fio-iops-per-second.json", json.dumps(samples))
        if stderr:
            atomic_write_text(raw_dir / "fio-stderr.txt", stderr)
    if last_report is None or (proc.returncode != 0 and stopped_at is None):
        message = _first_error(stderr) or f"fio exited with status {proc.returncode}"
        raise FioError(message)
    if int(last_report["jobs"][0].get("error", 0)):
        raise FioError(_first_error(stderr) or f"fio reported error {last_report['jobs'][0]['error']}")
    return FioResult(last_report, samples, stopped_at is not None, stopped_at, stderr)


class FioError(Exception):
    """fio could not run a job (bad alignment for O_DIRECT, device error, verify failure...)."""


def _first_error(stderr: str) -> str:
    for line in stderr.splitlines():
        if "error" in line.lower() or "fio:" in line or "verify" in line.lower():
            return line.strip()
    return stderr.strip().splitlines()[0] if stderr.strip() else ""
