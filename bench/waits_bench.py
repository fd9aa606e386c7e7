"""What the wait profile costs, in one command, each arm interleaved with its peer (A B A B …) on one loaded database:

- postgres, mariadb: the same OLTP case with and without session sampling. Reports the sampler's own CPU and the time
  its queries took on the server, each as a share of the server's CPU over the interval (db_cpu_s), the server's CPU
  per New-Order on each side (the sampling's cost as the server paid it, measured directly), and NOPM sampled /
  unsampled with Welch's test.
- mariadb --arm performance-schema: the same case unsampled, with the managed server's performance_schema wait
  instruments on (refbench's default) and off: what keeping them on costs.
- mariadb --arm query-cost --against FILE: the server's CPU per sample of this refbench's sampler query against the
  one in FILE (an older src/refbench/engines/waits.py, e.g. from `git show COMMIT:src/refbench/engines/waits.py`),
  measured directly, interleaved.
- postgres --arm observers: the same case with everything refbench watches the host and the server with (the
  sampler, the canary, the split of the machine's time) and with none of it (REFBENCH_OBSERVE=off): NOPM each side.
- duckdb: the TPC-H power and throughput streams with and without DuckDB's profiler (--sf 1): queries/h × SF each
  side and the profiler's own calls' time as a share of the streams' time.

    .venv/bin/python bench/waits_bench.py --engine postgres --repeats 3 --duration-s 30
    .venv/bin/python bench/waits_bench.py --engine mariadb --arm performance-schema --repeats 3
    .venv/bin/python bench/waits_bench.py --engine duckdb --repeats 3 --sf 1
    .venv/bin/python bench/waits_bench.py --engine postgres --arm observers --repeats 6 --duration-s 20
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from scipy import stats

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
REFBENCH = [str(ROOT / ".venv" / "bin" / "refbench")]


def _run(command: list[str], observed: bool = True) -> Path:
    """``observed``: with refbench's canary and its split of the machine's time (REFBENCH_OBSERVE)."""
    p = subprocess.run(command, capture_output=True, text=True, env={**os.environ, "REFBENCH_OBSERVE": "" if observed else "off"})
    if p.returncode != 0:
        sys.exit(p.stderr)
    return Path(p.stdout.strip().splitlines()[-1])


def one(work: Path, engine: str, users: int, warehouses: int, duration_s: int, sampled: bool,
        performance_schema: bool = True, observed: bool = True) -> dict:
    """One OLTP run; on MariaDB the server's performance_schema as ``performance_schema`` says (refbench turns it off
    with --no-sample-sessions unless a setting keeps it), its other settings the suite's defaults."""
    from refbench.suites.oltp import OltpSuite

    command = [*REFBENCH, "oltp", "--engine", engine, "--warehouses", str(warehouses), "--users", str(users),
               "--rampup-s", "5", "--duration-s", str(duration_s), "--data-dir", str(work / f"{engine}-data"),
               "--runs-dir", str(work / "runs"), "--sample-sessions" if sampled else "--no-sample-sessions"]
    if engine == "mariadb":
        settings = [*OltpSuite.options["mariadb_settings"].default, f"performance_schema={'ON' if performance_schema else 'OFF'}"]
        command += ["--set", "oltp.mariadb_settings=" + json.dumps(settings)]
    record = json.loads(next((_run(command, observed) / "records" / "oltp").glob("u*.json")).read_text())
    m = record["metrics"]
    return {"nopm": m["nopm"], "db_cpu_s": m["db_cpu_s"], "measured_s": m["measured_s"],
            "cpu_ms_per_new_order": 1000 * m["db_cpu_s"] / m["new_orders_schema_delta"],
            "waits": record["extra"]["storage"].get("waits")}


def one_dss(work: Path, sf: float, profiled: bool) -> dict:
    run = _run([*REFBENCH, "dss", "--engines", "duckdb", "--modes", "power,throughput", "--sf", str(sf),
                "--data-dir", str(work / "tpch"), "--runs-dir", str(work / "runs"),
                "--sample-sessions" if profiled else "--no-sample-sessions"])
    out = {}
    for mode in ("power", "throughput"):
        record = json.loads((run / "records" / "dss" / f"duckdb-{mode}.json").read_text())
        waits = record["extra"]["storage"].get("waits") or {}
        out[mode] = record["metrics"][mode]
        out[f"{mode}_cost_pct"] = 100 * waits["profiling_cost_s"] / record["extra"]["storage"]["interval_s"] if waits else None
    return out


def _ratio(a: list[float], b: list[float]) -> str:
    p = stats.ttest_ind(a, b, equal_var=False).pvalue
    return f"{statistics.median(a) / statistics.median(b):.3f} (Welch p = {p:.2f}; {a} vs {b})"


def duckdb_main(a) -> None:
    with tempfile.TemporaryDirectory(prefix="refbench-waits-bench-", dir="/var/tmp") as scratch:
        work = Path(scratch)
        sides: dict[bool, list[dict]] = {True: [], False: []}
        for i in range(a.repeats):
            for side in (True, False):
                sides[side].append(one_dss(work, a.sf, side))
                print(f"repeat {i + 1} {'profiled' if side else 'unprofiled'}: {sides[side][-1]}", flush=True)
    print(f"\nduckdb, TPC-H SF {a.sf:g}, power and throughput streams, {a.repeats} interleaved repeats")
    for mode in ("power", "throughput"):
        print(f"{mode} profiled / unprofiled: {_ratio([r[mode] for r in sides[True]], [r[mode] for r in sides[False]])}")
        costs = [round(r[f"{mode}_cost_pct"], 3) for r in sides[True]]
        print(f"{mode}: the profiler's calls (on, read back, off) {statistics.median(costs):.3f}% of the stream's time "
              f"(median; {costs})")


def observers_main(a) -> None:
    """Everything refbench watches the host and the server with (the session sampler, the canary, the split of the
    machine's time, the run-queue watch) against none of it, interleaved: what watching costs NOPM."""
    with tempfile.TemporaryDirectory(prefix="refbench-waits-bench-", dir="/var/tmp") as scratch:
        work = Path(scratch)
        work.chmod(0o755)
        sides: dict[bool, list[float]] = {True: [], False: []}
        for i in range(a.repeats):  # A B A B: drift in the host hits both sides alike
            for side in (True, False):
                sides[side].append(one(work, a.engine, a.users, a.warehouses, a.duration_s, side, observed=side)["nopm"])
                print(f"repeat {i + 1} {'observed' if side else 'unobserved'}: {sides[side][-1]:,.0f} NOPM", flush=True)
    print(f"\n{a.engine}, {a.warehouses} warehouses, {a.users} users, {a.duration_s} s, {a.repeats} interleaved pairs")
    print(f"NOPM observed / unobserved: {_ratio(sides[True], sides[False])}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--engine", default="postgres", choices=["postgres", "mariadb", "duckdb"])
    ap.add_argument("--against", type=Path, help="--arm query-cost: an older waits.py whose MariaDB query to measure")
    ap.add_argument("--arm", default="sampling", choices=["sampling", "performance-schema", "query-cost", "observers"],
                    help="what is on in one arm and off in the other (performance-schema: MariaDB only)")
    ap.add_argument("--sf", type=float, default=1.0, help="TPC-H scale factor (duckdb)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--users", type=int, default=4)
    ap.add_argument("--warehouses", type=int, default=2)
    ap.add_argument("--duration-s", type=int, default=30)
    a = ap.parse_args()
    if a.engine == "duckdb":
        return duckdb_main(a)
    if a.arm == "performance-schema":
        return performance_schema_main(a)
    if a.arm == "query-cost":
        return query_cost_main(a)
    if a.arm == "observers":
        return observers_main(a)
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
    if a.engine == "mariadb":
        with tempfile.TemporaryDirectory(prefix="refbench-waits-bench-", dir="/var/tmp") as scratch:
            Path(scratch).chmod(0o755)
            cost = mariadb_cpu_per_sample(Path(scratch), a.users)
        per_s = [cost["server_cpu_ms_per_sample"] * r["waits"]["samples"] / 1000 / r["db_cpu_s"] * 100 for r in sampled]
        print(f"the sampler's query on the server, measured directly ({cost}): {statistics.median(per_s):.3f}% of the "
              f"server's CPU at the runs' sample counts (median; {[round(x, 3) for x in per_s]})")
    per_order_s, per_order_u = [r["cpu_ms_per_new_order"] for r in sampled], [r["cpu_ms_per_new_order"] for r in unsampled]
    print(f"server CPU per New-Order, sampled / unsampled (the sampling's cost as the server paid it): "
          f"{_ratio([round(x, 3) for x in per_order_s], [round(x, 3) for x in per_order_u])}")


def _process_cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def mariadb_cpu_per_sample(work: Path, sessions: int, samples: int = 3000) -> dict:
    """What one sample costs the MariaDB server, measured directly: a managed server with ``sessions`` connections
    each inside a statement (SELECT SLEEP), the sampler's query run ``samples`` times, the server's own CPU
    (/proc/PID/stat) over the loop less its CPU over as long idle with the same sessions."""
    from refbench.engines.mariadb import ManagedMariaDB, _rows, connect
    from refbench.engines.waits import MARIADB_ACTIVE_SESSIONS

    server = ManagedMariaDB(work / "cost-mariadb", {})
    server.start()
    try:
        dsn = server.database("mysql")
        busy = [connect(dsn, autocommit=True) for _ in range(sessions)]

        def sleep_in_a_statement(conn) -> None:
            try:
                _rows(conn, "SELECT SLEEP(120)")
            except Exception:  # the server stopping under it, at the end
                pass

        sleepers = [threading.Thread(target=sleep_in_a_statement, args=(c,), daemon=True) for c in busy]
        for t in sleepers:
            t.start()
        time.sleep(1)
        pid = server.process.pid
        with connect(dsn, autocommit=True) as conn:
            query = MARIADB_ACTIVE_SESSIONS  # the sessions' database is this one's, mysql
            active = len(_rows(conn, query))
            cpu0, t0 = _process_cpu_s(pid), time.monotonic()
            for _ in range(samples):
                _rows(conn, query)
            loop_cpu, loop_s = _process_cpu_s(pid) - cpu0, time.monotonic() - t0
        cpu1 = _process_cpu_s(pid)
        time.sleep(loop_s)
        idle_cpu = _process_cpu_s(pid) - cpu1
    finally:
        server.stop()
    return {"active_sessions_seen": active, "samples": samples, "loop_s": round(loop_s, 2),
            "server_cpu_ms_per_sample": round(1000 * (loop_cpu - idle_cpu) / samples, 4)}


def query_cost_main(a) -> None:
    import importlib.util

    import refbench.engines.waits as waits

    spec = importlib.util.spec_from_file_location("older_waits", a.against)
    older = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(older)
    queries = {"before": older.MARIADB_ACTIVE_SESSIONS, "now": waits.MARIADB_ACTIVE_SESSIONS}
    costs: dict[str, list[float]] = {"before": [], "now": []}
    for i in range(a.repeats):
        for side, query in queries.items():  # A B A B: the query the cost function reads is swapped in
            waits.MARIADB_ACTIVE_SESSIONS = query
            with tempfile.TemporaryDirectory(prefix="refbench-waits-bench-", dir="/var/tmp") as scratch:
                Path(scratch).chmod(0o755)
                costs[side].append(mariadb_cpu_per_sample(Path(scratch), a.users)["server_cpu_ms_per_sample"])
            print(f"repeat {i + 1} {side}: {costs[side][-1]} ms of server CPU per sample", flush=True)
    print(f"server CPU per sample, before / now: {_ratio(costs['before'], costs['now'])}")


def performance_schema_main(a) -> None:
    with tempfile.TemporaryDirectory(prefix="refbench-waits-bench-", dir="/var/tmp") as scratch:
        work = Path(scratch)
        work.chmod(0o755)
        sides: dict[bool, list[dict]] = {True: [], False: []}
        for i in range(a.repeats):
            for side in (True, False):
                sides[side].append(one(work, "mariadb", a.users, a.warehouses, a.duration_s, False, performance_schema=side))
                print(f"repeat {i + 1} performance_schema {'on' if side else 'off'}: {sides[side][-1]['nopm']:,.0f} NOPM",
                      flush=True)
    print(f"\nmariadb unsampled, {a.users} users, {a.warehouses} warehouses, {a.duration_s} s measured, {a.repeats} "
          "interleaved repeats: performance_schema with the file wait instruments on / off")
    print(f"NOPM: {_ratio([r['nopm'] for r in sides[True]], [r['nopm'] for r in sides[False]])}")
    per_order = {side: [round(r["cpu_ms_per_new_order"], 3) for r in rows] for side, rows in sides.items()}
    print(f"server CPU per New-Order (ms): {_ratio(per_order[True], per_order[False])}")


if __name__ == "__main__":
    main()
