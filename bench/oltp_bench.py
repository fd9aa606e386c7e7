"""OLTP benchmark: refbench's driver against go-tpc (PingCAP) and pgbench on the same managed PostgreSQL.

One command, one server, the same settings, warehouses and connections for both TPC-C drivers, run in
alternation (refbench, go-tpc, go-tpc, refbench, …) so that the shared machine's drift falls on both:
- NOPM ratio (refbench / go-tpc), both counted the same way: Σ D_NEXT_O_ID delta over the same measured
  window after the same warm-up (go-tpc calls its own New-Orders per minute "tpmC"),
- driver CPU per New-Order, and the driver's share of all CPU the benchmark used (driver + PostgreSQL),
- load time ratio (both up to frozen, analyzed tables: go-tpc's prepare, then the VACUUM refbench's build ends with).
pgbench (TPC-B-like, built into PostgreSQL) gives the server's raw transaction rate on the same instance.

Usage: .venv/bin/python bench/oltp_bench.py [--warehouses 4] [--users 4] [--seconds 60] [--rounds 3]
Prints Markdown for docs/BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import re
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from refbench.engines.postgres import ManagedPostgres, connect, postgres_binary
from refbench.suites.oltp import database, driver, figures

HERE = Path(__file__).parent


def process_cpu_s(pid: int) -> float:
    import os

    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def new_orders(dsn: str, table: str) -> int:
    with connect(dsn, autocommit=True) as conn:
        return int(conn.execute(f"SELECT sum(d_next_o_id) FROM {table}").fetchone()[0])


def run_refbench(dsn: str, warehouses: int, users: int, seconds: int, rampup: int, seed: int) -> dict:
    result = driver.run(dsn, warehouses, users, rampup, seconds, False, seed)
    m = figures(result)
    return {"nopm": m["nopm"], "new_orders": m["new_orders_schema_delta"], "driver_cpu_s": result.driver_cpu_s,
            "db_cpu_s": result.db_cpu_s}


def run_go_tpc(go_tpc: str, common: list[str], dsn: str, warehouses: int, users: int, seconds: int, rampup: int) -> dict:
    """go-tpc runs for ramp-up + measurement + 5 s; the window [ramp-up, ramp-up + seconds] is measured from
    outside, exactly as refbench measures its own: the schema's New-Order counter and both sides' CPU."""
    proc = subprocess.Popen([go_tpc, "tpcc", "run", *common, "--warehouses", str(warehouses), "-T", str(users),
                             "--time", f"{rampup + seconds + 5}s", "--interval", "1000s"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    time.sleep(rampup)
    with connect(dsn, autocommit=True) as conn:
        server = driver.server_pid(conn)
    no0, cpu0, db0, t0 = new_orders(dsn, "district"), process_cpu_s(proc.pid), driver.postgres_cpu_s(server), time.time()
    time.sleep(seconds)
    no1, cpu1, db1, t1 = new_orders(dsn, "district"), process_cpu_s(proc.pid), driver.postgres_cpu_s(server), time.time()
    out = proc.communicate()[0]
    if proc.returncode != 0:
        raise SystemExit(f"go-tpc failed: {out.strip().splitlines()[-1:]}")
    reported = re.findall(r"tpmC: ([0-9.]+)", out)
    return {"nopm": (no1 - no0) / ((t1 - t0) / 60), "tpmc_reported": float(reported[-1]) if reported else None,
            "new_orders": no1 - no0, "driver_cpu_s": cpu1 - cpu0, "db_cpu_s": db1 - db0}


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
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    go_tpc = subprocess.run([str(HERE / "peers" / "build-go-tpc.sh")], check=True, capture_output=True, text=True).stdout.strip()
    base = Path(tempfile.mkdtemp(prefix="refbench-oltp-bench-"))
    base.chmod(0o755)
    server = ManagedPostgres(base / "pgdata", {"shared_buffers": "128MB", "max_connections": "100", "max_wal_size": "1GB"})
    server.start()
    ours, theirs = [], []
    try:
        ours_dsn, theirs_dsn = server.database("refbench"), server.database("gotpc")
        t0 = time.monotonic()
        database.build(ours_dsn, args.warehouses, 2, True, lambda *_: None)
        ours_load_s = time.monotonic() - t0
        common = ["-d", "postgres", "-H", "127.0.0.1", "-P", str(server.port), "-U", "refbench", "-D", "gotpc",
                  "--conn-params", "sslmode=disable"]
        t0 = time.monotonic()
        subprocess.run([go_tpc, "tpcc", "prepare", *common, "--warehouses", str(args.warehouses),
                        "-T", str(min(args.users, 4)), "--dropdata"], check=True, capture_output=True, text=True)
        with connect(theirs_dsn, autocommit=True) as conn:
            conn.execute("VACUUM (FREEZE, ANALYZE)")  # the state refbench's build leaves its own tables in
        theirs_load_s = time.monotonic() - t0
        for i in range(args.rounds):
            for who in (("refbench", "go-tpc") if i % 2 == 0 else ("go-tpc", "refbench")):
                with connect(server.dsn, autocommit=True) as conn:
                    conn.execute("CHECKPOINT")  # each run starts from the same state of the buffers and the WAL
                if who == "refbench":
                    ours.append(run_refbench(ours_dsn, args.warehouses, args.users, args.seconds, args.rampup, i + 1))
                else:
                    theirs.append(run_go_tpc(go_tpc, common, theirs_dsn, args.warehouses, args.users, args.seconds, args.rampup))
        tps = run_pgbench(server.port, args.users, args.seconds)
    finally:
        server.stop()
        shutil.rmtree(base, ignore_errors=True)

    def median(runs: list[dict], f) -> float:
        return statistics.median(f(r) for r in runs)

    def share(r: dict) -> float:
        return 100 * r["driver_cpu_s"] / (r["driver_cpu_s"] + r["db_cpu_s"])

    def cpu_per_new_order_us(r: dict) -> float:
        return 1e6 * r["driver_cpu_s"] / r["new_orders"]

    nopm_ours, nopm_theirs = median(ours, lambda r: r["nopm"]), median(theirs, lambda r: r["nopm"])
    cpu_ours, cpu_theirs = median(ours, cpu_per_new_order_us), median(theirs, cpu_per_new_order_us)
    print(f"{args.warehouses} warehouses, {args.users} connections, managed PostgreSQL 15 (shared_buffers 128MB), both "
          f"drivers on the same instance; {args.rounds} alternating rounds, each {args.rampup} s warm-up then "
          f"{args.seconds} s measured; medians.\n")
    print("| figure | refbench | go-tpc | ratio | target |\n|---|---|---|---|---|")
    print(f"| New-Orders per minute | {nopm_ours:,.0f} | {nopm_theirs:,.0f} (its own tpmC, whole run: "
          f"{median(theirs, lambda r: r['tpmc_reported'] or 0):,.0f}) | **{nopm_ours / nopm_theirs:.2f}×** | ≥ 2.5× |")
    print(f"| driver CPU per New-Order | {cpu_ours:,.0f} µs | {cpu_theirs:,.0f} µs | {cpu_ours / cpu_theirs:.2f}× | |")
    print(f"| driver share of benchmark CPU | **{median(ours, share):.1f}%** | {median(theirs, share):.1f}% | | ≤ 15% |")
    print(f"| load time | {ours_load_s:.1f} s | {theirs_load_s:.1f} s | {ours_load_s / theirs_load_s:.2f}× | |")
    print("\nRounds (NOPM, refbench / go-tpc): " + "; ".join(
        f"{a['nopm']:,.0f} / {b['nopm']:,.0f} = {a['nopm'] / b['nopm']:.2f}×" for a, b in zip(ours, theirs)))
    print(f"\npgbench (TPC-B-like, -M prepared, scale 10, {args.users} clients, {args.seconds} s) on the same instance: "
          f"{tps:,.0f} transactions/s.")


if __name__ == "__main__":
    main()
