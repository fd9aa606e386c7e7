"""Before and after a change that must not move a figure (an engine moved behind an interface, say): the same
command on two source trees, interleaved (before, after, then after, before, …), so that the shared machine's drift
falls on both. Each part runs refbench from the tree's src/ (PYTHONPATH), in a process of its own:

  dss-load  generation + load of SF --sf into DuckDB and a managed PostgreSQL (the dss suite's own
            timed_generate_and_load, as bench/scale_bench.py's dss-load part at one size)
  oltp-load `refbench oltp` at --warehouses, its load record's load + index time (scale_bench.py's oltp-load
            part at one size)
  dw        `refbench dw` at the quick profile: each store's queries/hour and logical and physical scan MB/s

For each figure: every round of each tree, the ratio of the medians after / before, and each tree's spread
(largest / smallest round), the noise against which the ratio is read.

Usage: .venv/bin/python bench/before_after_bench.py --before SRC [--after SRC] [--parts dss-load,oltp-load,dw]
       [--rounds 2] [--sf 1] [--warehouses 10] [--work-dir /var/tmp]
SRC is a src/ directory, e.g. `git archive main src | tar -x -C /var/tmp/before` gives /var/tmp/before/src.
Prints Markdown for docs/BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent

DSS_LOAD = """
import json, sys
from pathlib import Path
from refbench.suites.dss import timed_generate_and_load
out = timed_generate_and_load(Path(sys.argv[1]), float(sys.argv[2]), ("duckdb", "postgres"))
print(json.dumps({"generate_s": out["generate_s"], "duckdb load_s": out["duckdb"]["load_s"],
                  "postgres load_s": out["postgres"]["load_s"]}))
"""


def _refbench(src: str, argv: list[str]) -> subprocess.CompletedProcess:
    result = subprocess.run([sys.executable, *argv], capture_output=True, text=True, env={**os.environ, "PYTHONPATH": src})
    if result.returncode != 0:
        raise SystemExit(f"{' '.join(argv[:4])} on {src} failed: {(result.stderr.strip() or result.stdout.strip())[-500:]}")
    return result


def _records(run: Path, suite: str) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted((run / "records" / suite).glob("*.json"))]


def dss_load(src: str, work: Path, args) -> dict[str, float]:
    scratch = Path(tempfile.mkdtemp(prefix="dss-", dir=work))  # timed_generate_and_load removes it
    return json.loads(_refbench(src, ["-c", DSS_LOAD, str(scratch), str(args.sf)]).stdout.strip().splitlines()[-1])


def oltp_load(src: str, work: Path, args) -> dict[str, float]:
    out = _refbench(src, ["-m", "refbench", "oltp", "--runs-dir", str(work / "oltp-runs"), "--set",
                          f"oltp.warehouses={args.warehouses}", "--set", "oltp.users=[1]", "--set", "oltp.duration_s=5",
                          "--set", "oltp.rampup_s=1"]).stdout
    run = Path(out.strip().splitlines()[-1])
    load = _records(run, "oltp")[0]["extra"]["load"]
    shutil.rmtree(run, ignore_errors=True)
    return {"load_s": load["load_s"], "index_s": load["index_s"], "load + index s": load["load_s"] + load["index_s"]}


def dw(src: str, work: Path, args) -> dict[str, float]:
    out = _refbench(src, ["-m", "refbench", "dw", "--profile", "quick", "--runs-dir", str(work / "dw-runs")]).stdout
    run = Path(out.strip().splitlines()[-1])
    figures = {}
    for record in _records(run, "dw"):
        store, m = record["params"]["engine"], record["metrics"]
        figures |= {f"{store} queries/h": m["queries_per_hour"], f"{store} logical scan MB/s": m["logical_scan_mb_s"],
                    f"{store} physical scan MB/s": m["physical_scan_mb_s"]}
    shutil.rmtree(run, ignore_errors=True)
    return {k: v for k, v in figures.items() if v is not None}


PARTS = {"dss-load": dss_load, "oltp-load": oltp_load, "dw": dw}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--before", required=True, help="the older tree's src/ directory")
    parser.add_argument("--after", default=str(HERE.parent / "src"), help="the newer tree's src/ (default: this checkout's)")
    parser.add_argument("--parts", default="dss-load,oltp-load,dw", help=f"comma-separated, of: {', '.join(PARTS)}")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--sf", type=float, default=1.0)
    parser.add_argument("--warehouses", type=int, default=10)
    parser.add_argument("--work-dir", default="/var/tmp", help="where scratch data and run directories go")
    args = parser.parse_args()
    trees = {"before": str(Path(args.before).absolute()), "after": str(Path(args.after).absolute())}
    parts = [p for p in args.parts.split(",") if p]
    if unknown := [p for p in parts if p not in PARTS]:
        raise SystemExit(f"unknown part(s): {', '.join(unknown)}; choose from {', '.join(PARTS)}")
    work = Path(tempfile.mkdtemp(prefix="before-after-", dir=args.work_dir))
    work.chmod(0o755)  # the managed servers' accounts read and write below it
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}\n", flush=True)
    got: dict[tuple[str, str], list[dict[str, float]]] = {}
    try:
        for part in parts:
            for i in range(args.rounds):
                for tree in (["before", "after"] if i % 2 == 0 else ["after", "before"]):
                    figures = PARTS[part](trees[tree], work, args)
                    got.setdefault((part, tree), []).append(figures)
                    print(f"{part}, {tree}, round {i + 1}: " + ", ".join(f"{k} {v:,.2f}" for k, v in figures.items())
                          + f" (load average {os.getloadavg()[0]:.2f})", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"\n{args.rounds} interleaved rounds per tree; before = {trees['before']}, after = {trees['after']}; "
          f"load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}.\n")
    print("| part | figure | before (rounds) | after (rounds) | after / before (medians) | spread before | spread after |\n"
          "|---|---|---|---|---|---|---|")
    for part in parts:
        for name in got[(part, "after")][0]:
            old = [r[name] for r in got[(part, "before")] if name in r]
            new = [r[name] for r in got[(part, "after")] if name in r]
            if not old or not new or min(old + new) <= 0:
                continue
            print(f"| {part} | {name} | {', '.join(f'{x:,.2f}' for x in old)} | {', '.join(f'{x:,.2f}' for x in new)} | "
                  f"{statistics.median(new) / statistics.median(old):.3f} | {max(old) / min(old):.2f}× | "
                  f"{max(new) / min(new):.2f}× |")


if __name__ == "__main__":
    main()
