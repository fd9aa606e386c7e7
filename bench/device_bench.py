"""Device-suite benchmarks against raw fio, run in one command so both sides see the same noisy machine.

(a) overhead: the same point through `refbench device` and as a plain fio command, interleaved, repeated;
    refbench's median IOPS should be at least 0.97 × fio's.
(b) steady state: a set of points run for the paper's fixed 60 s and with refbench's adaptive stop
    (SNIA window of 5 s, 10–60 s); time saved and the IOPS difference.
(c) overhead per point, over several points: each point's time as refbench's runner measured the case (fio,
    reading its reports, the point's telemetry) and its IOPS, against the same fio command's wall time and IOPS
    run plainly, interleaved; the target is at most 1% more time and 1% fewer IOPS.

Usage: .venv/bin/python bench/device_bench.py [--dir DIR] [--repeats 5] [--part a|b|c|both]
Prints Markdown for docs/BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REFBENCH = [sys.executable, "-m", "refbench"]
SIZE = "1g"


def refbench_point(directory: Path, runs: Path, rw_flags: list[str], seconds_min: int, seconds_max: int, stop: bool) -> dict:
    argv = [*REFBENCH, "device", str(directory), "--runs-dir", str(runs), "--size", SIZE, "--no-checks", "--no-precondition",
            "--numjobs", "2", "--min-runtime-s", str(seconds_min), "--max-runtime-s", str(seconds_max),
            "--stop-at-steady-state" if stop else "--no-stop-at-steady-state", "--ss-window", "5", *rw_flags]
    t0 = time.monotonic()
    out = subprocess.run(argv, capture_output=True, text=True, check=True).stdout.strip().splitlines()[-1]
    wall = time.monotonic() - t0
    records = [json.loads(p.read_text()) for p in (Path(out) / "records" / "device").glob("*.json")]
    return {"records": records, "wall_s": wall, "run": out}


def plain_fio(command_file: Path) -> float:
    """Runs the exact fio command refbench ran, minus its live status reports, and returns IOPS."""
    argv = [a for a in command_file.read_text().split() if not a.startswith(("--status-interval", "--output-format"))]
    out = subprocess.run([*argv, "--output-format=json"], capture_output=True, text=True, check=True).stdout
    job = json.loads(out[out.index("{"):])["jobs"][0]
    return float(job["read"]["iops"]) + float(job["write"]["iops"])


def part_a(directory: Path, runs: Path, repeats: int) -> str:
    flags = ["--patterns", "random", "--write-shares", "0", "--iodepths", "16", "--block-sizes", "4k"]
    ours, theirs = [], []
    for _ in range(repeats):
        result = refbench_point(directory, runs, flags, 10, 10, stop=False)
        (record,) = result["records"]
        ours.append(record["metrics"]["iops"])
        command = Path(result["run"]) / "raw" / "device" / record["case_id"] / "fio-command.txt"
        # fio's test file was removed at the end of the refbench run; plain fio lays out its own at the same size.
        theirs.append(plain_fio(command))
    ratio = statistics.median(ours) / statistics.median(theirs)
    return (
        "| point | refbench median IOPS | plain fio median IOPS | ratio | target |\n|---|---|---|---|---|\n"
        f"| random read, 4 KiB, QD16 × 2 jobs, 10 s, {repeats} interleaved repeats | {statistics.median(ours):,.0f} | "
        f"{statistics.median(theirs):,.0f} | **{ratio:.3f}** | ≥ 0.97 |\n\n"
        f"refbench runs: {', '.join(f'{x:,.0f}' for x in ours)}; fio runs: {', '.join(f'{x:,.0f}' for x in theirs)}\n"
    )


POINTS_B = [
    ("random read 4 KiB QD1", ["--patterns", "random", "--write-shares", "0", "--iodepths", "1", "--block-sizes", "4k"]),
    ("random read 4 KiB QD16", ["--patterns", "random", "--write-shares", "0", "--iodepths", "16", "--block-sizes", "4k"]),
    ("random 30% write 8 KiB QD8", ["--patterns", "random", "--write-shares", "30", "--iodepths", "8", "--block-sizes", "8k"]),
    ("sequential read 128 KiB QD16", ["--patterns", "sequential", "--write-shares", "0", "--iodepths", "16", "--block-sizes", "128k"]),
]


def part_b(directory: Path, runs: Path) -> str:
    rows = ["| point | fixed 60 s: IOPS | adaptive: IOPS | adaptive: seconds | steady at (s) | time saved | IOPS difference |",
            "|---|---|---|---|---|---|---|"]
    fixed_total = adaptive_total = 0.0
    for title, flags in POINTS_B:
        fixed = refbench_point(directory, runs, flags, 60, 60, stop=False)["records"][0]["metrics"]
        adaptive = refbench_point(directory, runs, flags, 10, 60, stop=True)["records"][0]["metrics"]
        fixed_total += fixed["runtime_s"]
        adaptive_total += adaptive["runtime_s"]
        diff = (adaptive["iops"] - fixed["iops"]) / fixed["iops"]
        rows.append(f"| {title} | {fixed['iops']:,.0f} | {adaptive['iops']:,.0f} | {adaptive['runtime_s']:.0f} | "
                    f"{adaptive['steady_state_at_s'] or 'not reached'} | {1 - adaptive['runtime_s'] / fixed['runtime_s']:.0%} | {diff:+.1%} |")
    rows.append(f"| **all** | | | {adaptive_total:.0f} of {fixed_total:.0f} s | | **{1 - adaptive_total / fixed_total:.0%}** | |")
    return "\n".join(rows) + "\n"


def plain_fio_timed(command_file: Path, test_file: Path) -> tuple[float, float]:
    """The exact fio command refbench ran, live status reports included, on ``test_file`` (laid out already, as
    refbench's own test file was when it ran the point): (wall seconds, IOPS)."""
    argv = [f"--filename={test_file}" if a.startswith("--filename=") else a for a in command_file.read_text().split()]
    if not test_file.exists():  # fio's layout of a new file is not part of a point's time
        subprocess.run([*argv, "--create_only=1"], capture_output=True, check=True)
    t0 = time.monotonic()
    out = subprocess.run(argv, capture_output=True, text=True, check=True).stdout
    wall = time.monotonic() - t0
    start = out.rfind("\n{") + 1  # each status report is a whole JSON object; the last one is the final report
    job = json.loads(out[start if out[start:start + 1] == "{" else out.index("{"):])["jobs"][0]
    return wall, float(job["read"]["iops"]) + float(job["write"]["iops"])


def part_c(directory: Path, runs: Path, repeats: int, seconds: int) -> str:
    rows = ["| point | refbench case s | plain fio s | time overhead | refbench IOPS | plain fio IOPS | IOPS ratio |",
            "|---|---|---|---|---|---|---|"]
    worst_time, worst_iops = -1.0, 2.0
    for title, flags in POINTS_B:
        ours_s, ours_iops, fio_s, fio_iops = [], [], [], []
        command = None

        def plain() -> None:
            wall, iops = plain_fio_timed(command, directory / "plain-fio.dat")
            fio_s.append(wall)
            fio_iops.append(iops)

        for repeat in range(repeats):
            if repeat % 2:  # the order alternates, so that whatever the first of a pair meets falls on both
                plain()
            result = refbench_point(directory, runs, flags, seconds, seconds, stop=False)
            (record,) = result["records"]
            ours_s.append(record["elapsed_s"])
            ours_iops.append(record["metrics"]["iops"])
            command = Path(result["run"]) / "raw" / "device" / record["case_id"] / "fio-command.txt"
            if not repeat % 2:
                plain()
        t_over = statistics.median(ours_s) / statistics.median(fio_s) - 1
        ratio = statistics.median(ours_iops) / statistics.median(fio_iops)
        worst_time, worst_iops = max(worst_time, t_over), min(worst_iops, ratio)
        rows.append(f"| {title}, {seconds} s | {statistics.median(ours_s):.3f} | {statistics.median(fio_s):.3f} | "
                    f"{t_over:+.2%} | {statistics.median(ours_iops):,.0f} | {statistics.median(fio_iops):,.0f} | {ratio:.3f} |")
    rows.append(f"| **worst point** | | | **{worst_time:+.2%}** (target ≤ +1%) | | | **{worst_iops:.3f}** (target ≥ 0.99) |")
    return "\n".join(rows) + f"\n\nMedians of {repeats} interleaved repeats per point (refbench and the same fio command, in alternating order).\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dir", type=Path, default=None, help="directory on the storage to test (default: a temporary one)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--part", choices=("a", "b", "c", "both"), default="both")
    parser.add_argument("--seconds", type=int, default=10, help="seconds per point in part c")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        directory, runs = Path(tmp), Path(tmp) / "runs"
        if args.part in ("a", "both"):
            print("### (a) refbench vs plain fio, same point\n")
            print(part_a(directory, runs, args.repeats))
        if args.part in ("b", "both"):
            print("### (b) adaptive steady state vs fixed 60 s\n")
            print(part_b(directory, runs))
        if args.part == "c":
            print("### (c) overhead per point against plain fio, several points\n")
            print(part_c(directory, runs, args.repeats, args.seconds))


if __name__ == "__main__":
    main()
