"""What the wait-profile sampling costs: the same OLTP case with and without it, interleaved (A B A B …) on one
loaded database, in one command. Reports the sampler's own CPU and the time its queries took on the server, each
as a share of the server's CPU over the interval (db_cpu_s), and NOPM sampled / unsampled with Welch's test.

    .venv/bin/python bench/waits_bench.py --engine postgres --repeats 3 --duration-s 30
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from scipy import stats

ROOT = Path(__file__).resolve().parent.parent
REFBENCH = [str(ROOT / ".venv" / "bin" / "refbench")]


def one(work: Path, engine: str, users: int, warehouses: int, duration_s: int, sampled: bool) -> dict:
    command = [*REFBENCH, "oltp", "--engine", engine, "--warehouses", str(warehouses), "--users", str(users),
               "--rampup-s", "5", "--duration-s", str(duration_s), "--data-dir", str(work / f"{engine}-data"),
               "--runs-dir", str(work / "runs"), "--sample-sessions" if sampled else "--no-sample-sessions"]
    p = subprocess.run(command, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(p.stderr)
    run = Path(p.stdout.strip().splitlines()[-1])
    record = json.loads(next((run / "records" / "oltp").glob("u*.json")).read_text())
    return {"nopm": record["metrics"]["nopm"], "db_cpu_s": record["metrics"]["db_cpu_s"],
            "measured_s": record["metrics"]["measured_s"], "waits": record["extra"]["storage"].get("waits")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--engine", default="postgres", choices=["postgres", "mariadb"])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--users", type=int, default=4)
    ap.add_argument("--warehouses", type=int, default=2)
    ap.add_argument("--duration-s", type=int, default=30)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="refbench-waits-bench-", dir="/var/tmp") as scratch:
        work = Path(scratch)
        work.chmod(0o755)
        sampled, unsampled = [], []
        for i in range(a.repeats):  # A B A B: drift in the host hits both sides alike
            for side, out in ((True, sampled), (False, unsampled)):
                out.append(one(work, a.engine, a.users, a.warehouses, a.duration_s, side))
                print(f"repeat {i + 1} {'sampled' if side else 'unsampled'}: {out[-1]['nopm']:,.0f} NOPM", flush=True)
    nopm_s, nopm_u = [r["nopm"] for r in sampled], [r["nopm"] for r in unsampled]
    p = stats.ttest_ind(nopm_s, nopm_u, equal_var=False).pvalue
    own = [100 * r["waits"]["sampler_cpu_s"] / r["db_cpu_s"] for r in sampled]
    queries = [100 * r["waits"]["sampler_query_ms"] * r["waits"]["samples"] / 1000 / r["db_cpu_s"] for r in sampled]
    print(f"\n{a.engine}, {a.users} users, {a.warehouses} warehouses, {a.duration_s} s measured, {a.repeats} interleaved repeats")
    print(f"NOPM sampled {statistics.median(nopm_s):,.0f} / unsampled {statistics.median(nopm_u):,.0f} = "
          f"{statistics.median(nopm_s) / statistics.median(nopm_u):.3f} (Welch p = {p:.2f}; sampled {nopm_s}, unsampled {nopm_u})")
    print(f"sampler's own CPU: {statistics.median(own):.2f}% of the server's CPU (median; {[round(x, 2) for x in own]})")
    print(f"its queries' time on the server (an upper bound: waiting included): {statistics.median(queries):.2f}% of the "
          f"server's CPU (median; {[round(x, 2) for x in queries]})")


if __name__ == "__main__":
    main()
