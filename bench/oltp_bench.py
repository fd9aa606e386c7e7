"""OLTP benchmark: refbench's driver against go-tpc (PingCAP) and pgbench on the same managed PostgreSQL.

One command, one server, the same settings, warehouses and connections for both TPC-C drivers:
- NOPM ratio (refbench / go-tpc; go-tpc calls its New-Orders per minute "tpmC"),
- driver CPU per New-Order, and the driver's share of all CPU the benchmark used (driver + PostgreSQL),
- load time ratio.
pgbench (TPC-B-like, built into PostgreSQL) gives the server's raw transaction rate on the same instance.

Usage: .venv/bin/python bench/oltp_bench.py [--warehouses 4] [--users 4] [--seconds 60]
Prints Markdown for docs/BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import re
import resource
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from refbench.engines.postgres import ManagedPostgres, connect, postgres_binary
from refbench.suites.oltp import database, driver
from refbench.suites.oltp import figures

HERE = Path(__file__).parent


def children_cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def run_refbench(dsn: str, warehouses: int, users: int, seconds: int, rampup: int) -> dict:
    t0 = time.monotonic()
    info = database.build(dsn, warehouses, 2, True, lambda *_: None)
    load_s = time.monotonic() - t0
    result = driver.run(dsn, warehouses, users, rampup, seconds, False, 1)
    m = figures(result)
    return {"nopm": m["nopm"], "new_orders": m["new_orders_schema_delta"], "driver_cpu_s": result.driver_cpu_s,
            "db_cpu_s": result.db_cpu_s, "load_s": load_s, "rows": info["rows"]}


def run_go_tpc(go_tpc: str, port: int, warehouses: int, users: int, seconds: int, rampup: int) -> dict:
    common = ["-d", "postgres", "-H", "127.0.0.1", "-P", str(port), "-U", "refbench", "-D", "gotpc",
              "--conn-params", "sslmode=disable"]
    t0 = time.monotonic()
    subprocess.run([go_tpc, "tpcc", "prepare", *common, "--warehouses", str(warehouses), "-T", str(min(users, 4)),
                    "--dropdata"], check=True, capture_output=True, text=True)
    load_s = time.monotonic() - t0
    with connect(f"host=127.0.0.1 port={port} user=refbench dbname=gotpc", autocommit=True) as conn:
        before = conn.execute("SELECT sum(d_next_o_id) FROM district").fetchone()[0]
    cpu0, db0 = children_cpu_s(), driver.postgres_cpu_s()
    out = subprocess.run([go_tpc, "tpcc", "run", *common, "--warehouses", str(warehouses), "-T", str(users),
                          "--time", f"{rampup + seconds}s", "--interval", "1000s"], capture_output=True, text=True)
    cpu1, db1 = children_cpu_s(), driver.postgres_cpu_s()
    with connect(f"host=127.0.0.1 port={port} user=refbench dbname=gotpc", autocommit=True) as conn:
        after = conn.execute("SELECT sum(d_next_o_id) FROM district").fetchone()[0]
    reported = re.findall(r"tpmC: ([0-9.]+)", out.stdout)
    new_orders = int(after - before)
    return {"nopm": new_orders / ((rampup + seconds) / 60), "tpmc_reported": float(reported[-1]) if reported else None,
            "new_orders": new_orders, "driver_cpu_s": cpu1 - cpu0, "db_cpu_s": db1 - db0, "load_s": load_s}


def run_pgbench(port: int, users: int, seconds: int) -> float:
    pgbench = postgres_binary("pgbench")
    base = ["-h", "127.0.0.1", "-p", str(port), "-U", "refbench"]
    subprocess.run([pgbench, *base, "-i", "-q", "-s", "10", "postgres"], check=True, capture_output=True)
    out = subprocess.run([pgbench, *base, "-c", str(users), "-j", str(users), "-T", str(seconds), "-M", "prepared",
                          "postgres"], check=True, capture_output=True, text=True).stdout
    return float(re.search(r"tps = ([0-9.]+)", out).group(1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--warehouses", type=int, default=4)
    parser.add_argument("--users", type=int, default=4)
    parser.add_argument("--seconds", type=int, default=60)
    parser.add_argument("--rampup", type=int, default=10)
    args = parser.parse_args()
    go_tpc = subprocess.run([str(HERE / "peers" / "build-go-tpc.sh")], check=True, capture_output=True, text=True).stdout.strip()
    base = Path(tempfile.mkdtemp(prefix="refbench-oltp-bench-"))
    base.chmod(0o755)
    server = ManagedPostgres(base / "pgdata", {"shared_buffers": "128MB", "max_connections": "100", "max_wal_size": "1GB"})
    server.start()
    try:
        server.database("gotpc")
        ours = run_refbench(server.database("refbench"), args.warehouses, args.users,
                            args.seconds, args.rampup)
        theirs = run_go_tpc(go_tpc, server.port, args.warehouses, args.users, args.seconds, args.rampup)
        tps = run_pgbench(server.port, args.users, args.seconds)
    finally:
        server.stop()
        shutil.rmtree(base, ignore_errors=True)

    def share(r: dict) -> float:
        return 100 * r["driver_cpu_s"] / (r["driver_cpu_s"] + r["db_cpu_s"])

    def cpu_per_new_order_us(r: dict) -> float:
        return 1e6 * r["driver_cpu_s"] / r["new_orders"]

    print(f"{args.warehouses} warehouses, {args.users} connections, {args.seconds} s measured "
          f"(refbench after {args.rampup} s ramp-up; go-tpc over its whole {args.rampup + args.seconds} s), "
          "managed PostgreSQL 15, shared_buffers 128MB, on the same instance.\n")
    print("| figure | refbench | go-tpc | ratio | target |\n|---|---|---|---|---|")
    print(f"| New-Orders per minute | {ours['nopm']:,.0f} | {theirs['nopm']:,.0f} (its own tpmC: {theirs['tpmc_reported'] or 0:,.0f}) | "
          f"**{ours['nopm'] / theirs['nopm']:.2f}×** | ≥ 2.5× |")
    print(f"| driver CPU per New-Order | {cpu_per_new_order_us(ours):,.0f} µs | {cpu_per_new_order_us(theirs):,.0f} µs | "
          f"{cpu_per_new_order_us(ours) / cpu_per_new_order_us(theirs):.2f}× | |")
    print(f"| driver share of benchmark CPU | **{share(ours):.1f}%** | {share(theirs):.1f}% | | ≤ 15% |")
    print(f"| load time | {ours['load_s']:.1f} s | {theirs['load_s']:.1f} s | {ours['load_s'] / theirs['load_s']:.2f}× | |")
    print(f"\npgbench (TPC-B-like, -M prepared, scale 10, {args.users} clients) on the same instance: {tps:,.0f} transactions/s.")


if __name__ == "__main__":
    main()
