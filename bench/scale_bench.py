"""How each suite's cost grows with the size of the work: each part measures a cost at three sizes and prints the
log-log growth exponent (the least-squares slope of log cost against log size). 1 is linear; the target is
at most 1.1 for every part.

Parts (choose with --parts; the default runs the cheap ones):
  report      time to write the report of a device run of 30 / 144 / 576 sweep records (synthetic records, real
              report code: tables, charts, HTML)
  telemetry   time to attach a window to every record of a run (one record per minute) and to write the report's
              telemetry section, for 10 / 60 / 240 minutes of per-second samples (a synthetic series in the
              sampler's own line format)
  sweep       wall time of a real fio device sweep of 24 / 96 / 576 points at 0.05 s per point, and refbench's
              time per point over raw fio's for the same jobs (the wrapper's overhead)
  oltp-load   `refbench oltp` load time at 1 / 10 / 100 warehouses (from the run's load record)
  dss-load    generation + load time at SF 0.1 / 1 / 10, per engine (the suite's loader, no queries)
  oltp-rss    the oltp driver's peak resident memory at 4 / 64 / 384 users

The oltp parts drive the public CLI (`refbench oltp --set ...`) and read their figures from the run directory; the
dss part calls the suite's own generate-and-load, so both measure whatever driver and loader the checkout has.

Usage: .venv/bin/python bench/scale_bench.py [--parts report,telemetry,sweep,oltp-load,dss-load,oltp-rss] [--dir DIR]
Prints a Markdown table for docs/BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from rich.console import Console  # noqa: E402

from refbench.host.cachebound import children  # noqa: E402
from refbench.host.telemetry import Telemetry, sample_line  # noqa: E402
from refbench.plan import load_plan  # noqa: E402
from refbench.report import build_report  # noqa: E402
from refbench.report.telemetry import telemetry_charts  # noqa: E402
from refbench.runstore import Run  # noqa: E402
from refbench.suites import Record  # noqa: E402
from refbench.suites.device import PAPER_BLOCK_SIZES, PAPER_QUEUE_DEPTHS, DeviceSuite  # noqa: E402
from refbench.suites.dss import timed_generate_and_load  # noqa: E402

REFBENCH = [sys.executable, "-m", "refbench"]
TARGET_EXPONENT = 1.1


def exponent(sizes: list[float], costs: list[float]) -> float:
    """Least-squares slope of log(cost) against log(size)."""
    xs, ys = [math.log(s) for s in sizes], [math.log(c) for c in costs]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)


# ---- report: device records ------------------------------------------------------------------------------

def _device_plan(runs: Path, block_sizes: list[int], iodepths: list[int]):
    return load_plan(flags={"runs_dir": str(runs), "profile": "full", "name": "synthetic"}, suites=["device"],
                     sets=["device.checks=false", "device.precondition=false",
                           f"device.block_sizes=[{','.join(map(str, block_sizes))}]",
                           f"device.iodepths=[{','.join(map(str, iodepths))}]"])


def synthetic_device_run(runs: Path, block_sizes: list[int], iodepths: list[int]) -> Run:
    """A finished device run whose sweep records have the shape and plausible figures of real ones."""
    plan = _device_plan(runs, block_sizes, iodepths)
    run = Run.create(plan, {"host": "synthetic", "inventory": {}, "audit": [], "tools": {}})
    t = 1_700_000_000.0
    for case in DeviceSuite().cases(plan):
        p = case.params
        iops = 200_000 / (1 + p["bs"] / 4096) * min(p["iodepth"], 32) / 32
        w = p["write_pct"] / 100
        metrics = {"read_iops": round(iops * (1 - w), 1), "write_iops": round(iops * w, 1), "iops": round(iops, 1),
                   "mb_s": round(iops * p["bs"] / 1e6, 3), "read_mb_s": round(iops * (1 - w) * p["bs"] / 1e6, 3),
                   "write_mb_s": round(iops * w * p["bs"] / 1e6, 3), "runtime_s": 60.0,
                   "steady_state_reached": True, "steady_state_at_s": 7, "steady_state_window_iops": round(iops, 1)}
        for d in ("read", "write"):
            for q, f in (("mean", 1), ("p50", 0.8), ("p99", 4), ("p999", 9)):
                metrics[f"{d}_lat_{q}_us"] = round(p["iodepth"] * 1e6 / max(iops, 1) * f, 2)
        run.write_record(Record(metrics, method="synthetic", extra={"target_path": "/synthetic", "device": "vda"},
                                suite="device", case_id=case.id, params=dict(p), started_epoch_s=t, ended_epoch_s=t + 60,
                                elapsed_s=60.0))
        t += 60
    run.update(status="complete")
    return run


def part_report(work: Path) -> dict[str, Any]:
    # 30 records: 6 modes × QD 1 × 5 sizes; 144: 6 × 4 × 6; 576: the paper's whole matrix.
    shapes = [(PAPER_BLOCK_SIZES[3:8], [1]), (PAPER_BLOCK_SIZES[3:9], [1, 4, 16, 64]), (PAPER_BLOCK_SIZES, PAPER_QUEUE_DEPTHS)]
    sizes, costs, cpu = [], [], []
    for block_sizes, iodepths in shapes:
        run = synthetic_device_run(work / "report-runs", block_sizes, iodepths)
        best = best_cpu = math.inf
        for _ in range(2):
            t0, c0 = time.perf_counter(), _cpu_s()
            build_report(run, Console(quiet=True))
            best, best_cpu = min(best, time.perf_counter() - t0), min(best_cpu, _cpu_s() - c0)
        sizes.append(len(run.records("device")))
        costs.append(best)
        cpu.append(best_cpu)
    return {"part": "report", "what": "report time, device records", "sizes": sizes, "unit": "records",
            "costs": costs, "cost_unit": "s", "target": "< 5 s at 576",
            "note": "CPU seconds (this process and its chart workers): " + " / ".join(f"{c:.2f}" for c in cpu)}


def _cpu_s() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


# ---- telemetry -------------------------------------------------------------------------------------------

def synthetic_series(path: Path, seconds: int, disks: tuple[str, ...] = ("vda", "vdb", "loop0"),
                     t0: float = 1_700_000_000.0) -> float:
    """Per-second samples in the sampler's own line format (its sample_line), from made-up counters."""
    def cpu(i: int) -> dict[str, int]:
        return dict(user=100 * i, nice=0, system=40 * i, idle=50 * i + (i * i) % 7, iowait=10 * i, irq=0, softirq=0, steal=0)

    def counters(i: int, k: int) -> tuple[int, ...]:
        return tuple(v * i * (k + 1) + (i * 31) % 17 for v in (200, 1600, 300, 50, 800, 100, 600, 900))

    with open(path, "w") as f:
        for i in range(1, seconds + 1):
            f.write(sample_line(t0 + i - 1, cpu(i - 1), {d: counters(i - 1, k) for k, d in enumerate(disks)},
                                t0 + i, cpu(i), {d: counters(i, k) for k, d in enumerate(disks)}))
    return t0


def part_telemetry(work: Path) -> dict[str, Any]:
    from refbench.report.charts import render

    sizes, costs = [10, 60, 240], []
    for minutes in sizes:
        path = work / f"telemetry-{minutes}.jsonl"
        t0 = synthetic_series(path, minutes * 60)
        start = time.perf_counter()
        tel = Telemetry(path)
        for k in range(minutes):  # a record a minute, attached the way the runner does it
            tel.wait_for_sample_after(t0 + 60 * k + 60, timeout_s=0, slack_s=1.0)
            tel.window(t0 + 60 * k, t0 + 60 * k + 60)
        for chart in telemetry_charts(path, work / f"tables-{minutes}"):
            render(chart, work / f"charts-{minutes}")
        costs.append(time.perf_counter() - start)
    return {"part": "telemetry", "what": "attach a window per record + report's telemetry section", "sizes": sizes,
            "unit": "minutes", "costs": costs, "cost_unit": "s", "target": "< 5 s at 60 min"}


# ---- the device sweep against raw fio --------------------------------------------------------------------

def part_sweep(work: Path) -> dict[str, Any]:
    """A real sweep at 0.05 s a point; each run's fio commands are then replayed as plain fio, one after another,
    so that refbench's time per point (fio and everything around it) is set against fio's alone."""
    target = work / "sweep-target"
    target.mkdir(exist_ok=True)
    shapes = [(["4k", "64k"], "1,2"), (["4k", "8k", "64k", "1m"], "1,2,4,8"), (None, None)]
    sizes, costs, overheads, peaks = [], [], [], []
    for block_sizes, iodepths in shapes:
        argv = [*REFBENCH, "device", str(target), "--profile", "full", "--runs-dir", str(work / "sweep-runs"),
                "--size", "16m", "--no-checks", "--no-precondition", "--numjobs", "1",
                "--min-runtime-s", "0.05", "--max-runtime-s", "0.05"]
        if block_sizes:
            argv += ["--block-sizes", ",".join(block_sizes), "--iodepths", iodepths]
        peak = [0]
        out = _cli_run(argv, sample_rss=lambda pid: peak.__setitem__(0, max(peak[0], _status_kb(pid, "VmHWM"))))
        peaks.append(peak[0] / 1024)
        records = _records(out, "device")
        span = max(r["ended_epoch_s"] for r in records) - min(r["started_epoch_s"] for r in records)
        sizes.append(len(records))
        costs.append(span)
        # Plain fio, the same commands in the same order, on the same (re-created) test file.
        commands = [(Path(out) / "raw" / "device" / r["case_id"] / "fio-command.txt").read_text().split() for r in
                    sorted(records, key=lambda r: r["started_epoch_s"])]
        t0 = time.monotonic()
        for command in commands:
            subprocess.run(command, capture_output=True, check=True)
        fio_s = time.monotonic() - t0
        overheads.append((span - fio_s) / len(records))
    per_point = ", ".join(f"{o * 1000:+.0f} ms" for o in overheads)
    return {"part": "sweep", "what": "device sweep wall time, 0.05-s points", "sizes": sizes, "unit": "points",
            "costs": costs, "cost_unit": "s", "target": "576 points end to end",
            "note": f"refbench's time per point minus plain fio's (same commands): {per_point}; the runner's peak "
                    f"RSS: {' / '.join(f'{m:.0f}' for m in peaks)} MiB"}


# ---- oltp and dss through the CLI ------------------------------------------------------------------------

def _cli_run(argv: list[str], sample_rss: Callable[[int], None] | None = None) -> Path:
    """Runs a refbench command; returns its run directory (the last line it prints)."""
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if sample_rss is not None:
        stop = threading.Event()
        thread = threading.Thread(target=lambda: _poll(proc.pid, sample_rss, stop), daemon=True)
        thread.start()
    out, err = proc.communicate()
    if sample_rss is not None:
        stop.set()
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed: {err.strip().splitlines()[-1] if err.strip() else proc.returncode}")
    return Path(out.strip().splitlines()[-1])


def _poll(pid: int, sample: Callable[[int], None], stop: threading.Event) -> None:
    while not stop.wait(0.5):
        sample(pid)


def _records(run: Path, suite: str) -> list[dict[str, Any]]:
    return [json.loads(p.read_text()) for p in (run / "records" / suite).glob("*.json")]


def part_oltp_load(work: Path) -> dict[str, Any]:
    sizes, costs = [1, 10, 100], []
    for wh in sizes:
        run = _cli_run([*REFBENCH, "oltp", "--runs-dir", str(work / "oltp-runs"), "--set", f"oltp.warehouses={wh}",
                        "--set", "oltp.users=[1]", "--set", "oltp.duration_s=5", "--set", "oltp.rampup_s=1"])
        load = _records(run, "oltp")[0]["extra"]["load"]  # COPY, then keys, indexes, VACUUM and a checkpoint
        costs.append(load["load_s"] + load["index_s"])
        shutil.rmtree(run, ignore_errors=True)
    return {"part": "oltp-load", "what": "oltp load time", "sizes": sizes, "unit": "warehouses", "costs": costs,
            "cost_unit": "s", "target": "100 WH < 6 min"}


def part_dss_load(work: Path) -> list[dict[str, Any]]:
    """Generation + load only (the suite's own loader, timed by timed_generate_and_load): a run of the suite would
    add its queries, whose cost at SF 10 is not what this part measures."""
    sizes, steps = [0.1, 1, 10], []
    for sf in sizes:  # each scale factor's data is removed once timed: SF 10 alone is about 33 GB
        steps.append(timed_generate_and_load(Path(tempfile.mkdtemp(prefix="scale-dss-", dir=work)), sf))
    return [{"part": f"dss-load ({engine})", "what": "dss generate + load time", "sizes": sizes, "unit": "SF",
             "costs": [step["generate_s"] + step[engine]["load_s"] for step in steps], "cost_unit": "s",
             "target": "per SF at SF 10 ≤ 1.2 × at SF 1"} for engine in ("duckdb", "postgres")]


def _status_kb(pid: int, field: str) -> int:
    try:
        return int(next(line.split()[1] for line in Path(f"/proc/{pid}/status").read_text().splitlines()
                        if line.startswith(field + ":")))
    except (OSError, StopIteration):
        return 0


def _tree_rss_kb(pid: int) -> int:
    """Resident memory of a process and its descendants (the driver's workers), except database servers."""
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        try:
            if Path(f"/proc/{p}/comm").read_text().strip() == "postgres":
                continue
        except OSError:
            continue
        total += _status_kb(p, "VmRSS")
        todo += children(p)
    return total


def part_oltp_rss(work: Path) -> dict[str, Any]:
    sizes, costs = [4, 64, 384], []
    for users in sizes:
        peak = [0]
        run = _cli_run([*REFBENCH, "oltp", "--runs-dir", str(work / "oltp-runs"), "--set", "oltp.warehouses=4",
                        "--set", f"oltp.users=[{users}]", "--set", "oltp.duration_s=20", "--set", "oltp.rampup_s=10"],
                       sample_rss=lambda pid: peak.__setitem__(0, max(peak[0], _tree_rss_kb(pid))))
        costs.append(peak[0] / 1024)
        shutil.rmtree(run, ignore_errors=True)
    return {"part": "oltp-rss", "what": "oltp driver peak RSS (refbench and its children, no server)", "sizes": sizes,
            "unit": "users", "costs": costs, "cost_unit": "MiB", "target": "384 users < 4 GB"}


PARTS: dict[str, Callable[[Path], Any]] = {
    "report": part_report, "telemetry": part_telemetry, "sweep": part_sweep,
    "oltp-load": part_oltp_load, "dss-load": part_dss_load, "oltp-rss": part_oltp_rss,
}


def row(result: dict[str, Any]) -> str:
    e = exponent(result["sizes"], result["costs"])
    sizes = " / ".join(f"{s:g}" for s in result["sizes"])
    costs = " / ".join(f"{c:.2f}" for c in result["costs"])
    verdict = "ok" if e <= TARGET_EXPONENT else "**over**"
    return (f"| {result['part']} | {result['what']} | {sizes} {result['unit']} | {costs} {result['cost_unit']} | "
            f"**{e:.2f}** ({verdict}) | {result['target']} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--parts", default="report,telemetry", help=f"comma-separated, of: {', '.join(PARTS)}")
    parser.add_argument("--dir", type=Path, default=Path("/var/tmp"), help="where scratch data goes")
    args = parser.parse_args()
    parts = [p.strip() for p in args.parts.split(",") if p.strip()]
    unknown = [p for p in parts if p not in PARTS]
    if unknown:
        parser.error(f"unknown part(s) {', '.join(unknown)}; the parts are {', '.join(PARTS)}")
    args.dir.mkdir(parents=True, exist_ok=True)
    print("| part | cost | sizes | cost at each size | growth exponent | target |\n|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory(prefix="refbench-scale-", dir=args.dir) as tmp:
        Path(tmp).chmod(0o755)  # managed servers run as the postgres system user, below it
        notes = []
        for name in parts:
            results = PARTS[name](Path(tmp))
            for result in results if isinstance(results, list) else [results]:
                print(row(result), flush=True)
                if result.get("note"):
                    notes.append(f"{result['part']}: {result['note']}")
        peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(f"\nThis process's peak RSS: {peak_mib:.0f} MiB.")
        for note in notes:
            print(f"\n{note}")


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.default_int_handler)
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
