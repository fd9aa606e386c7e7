"""DSS benchmark: refbench's data generation and loads against go-tpc's `tpch prepare`, and refbench's harness
overhead on query times, on one managed PostgreSQL and an in-process DuckDB.

1. Load: tpchgen-cli + parallel COPY + keys, indexes and VACUUM into PostgreSQL, against go-tpc (PingCAP)
   `tpch prepare --sf N` into another database of the same server (primary keys only). DuckDB's load is shown
   beside it. Target: refbench ≥ 3× faster than the peer.
2. Harness overhead: stream 0 on both engines, refbench's measured time per query (submit to last row fetched,
   what the suite reports) against the engine's own timing of the same execution — DuckDB's profiler
   (query.total_time) and PostgreSQL's pg_stat_statements (total_exec_time). Target: under 2% in sum.

3. Scaling (--scaling 1,10): generation + load time per SF unit at each scale factor, per engine, in interleaved
   rounds (SF 1, SF 10, SF 1, SF 10…, so a neighbour's load lands on both), with the load average at each
   step. Target: at the largest SF at most 1.2× the time per SF unit of the smallest. Needs about 40 GB free
   at SF 10 (CSV, DuckDB and PostgreSQL at once); everything is removed after each step.

Usage: .venv/bin/python bench/dss_bench.py [--sf 1] [--repeats 3]
       .venv/bin/python bench/dss_bench.py --scaling 1,10 [--rounds 2] [--dir /var/tmp]
Prints Markdown for docs/BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from refbench.engines.duckdb import DuckDbEngine
from refbench.engines.postgres import ManagedPostgres, PostgresEngine, connect
from refbench.suites.dss import datagen, timed_generate_and_load
from refbench.suites.dss.queries import stream_queries

HERE = Path(__file__).parent


def duckdb_overhead(engine: DuckDbEngine, sf: float, repeats: int) -> tuple[float, float]:
    # Profiles collected without output: writing each one to a file would land inside refbench's timing.
    engine.run("SET enable_profiling = 'no_output'")
    ours = theirs = 0.0
    for _ in range(repeats):
        for _, text in stream_queries(0, sf):
            _, seconds = engine.run(text)
            ours += seconds
            theirs += json.loads(engine.db.conn.get_profiling_information(format="json"))["query"]["total_time"]
    engine.run("RESET enable_profiling")
    return ours, theirs


def postgres_overhead(engine: PostgresEngine, sf: float, repeats: int) -> tuple[float, float]:
    engine.run("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
    ours = 0.0
    engine.run("SELECT pg_stat_statements_reset()")
    for _ in range(repeats):
        for _, text in stream_queries(0, sf):
            ours += engine.run(text)[1]
    rows, _ = engine.run("SELECT sum(total_exec_time) / 1000 FROM pg_stat_statements "
                         "WHERE query NOT LIKE '%pg_stat_statements%'")
    return ours, float(rows[0][0])


def scaling(sfs: list[float], rounds: int, where: Path) -> None:
    runs: list[dict] = []
    for r in range(rounds):
        for sf in sfs:
            load0 = os.getloadavg()[0]
            out = timed_generate_and_load(Path(tempfile.mkdtemp(prefix="refbench-dss-scaling-", dir=where)), sf)
            out |= {"round": r + 1, "loadavg": (load0, os.getloadavg()[0])}
            print(f"<!-- {json.dumps(out)} -->", flush=True)
            runs.append(out)
    print(f"Generate + load per SF unit, {rounds} interleaved rounds; load average (1 min) before/after each step in "
          f"brackets. {os.cpu_count()} CPUs.\n")
    print("| engine | SF | round | generate s | load s | (generate + load) / SF | load avg |\n|---|---|---|---|---|---|---|")
    per_unit: dict[tuple[str, float], list[float]] = {}
    for out in runs:
        for engine in ("duckdb", "postgres"):
            total = out["generate_s"] + out[engine]["load_s"]
            per_unit.setdefault((engine, out["sf"]), []).append(total / out["sf"])
            print(f"| {engine} | {out['sf']:g} | {out['round']} | {out['generate_s']:.1f} | {out[engine]['load_s']:.1f}"
                  + (f" (COPY {out[engine]['copy_s']:.1f} + indexes {out[engine]['index_s']:.1f})" if engine == "postgres" else "")
                  + f" | {total / out['sf']:.1f} s | {out['loadavg'][0]:.1f} → {out['loadavg'][1]:.1f} |")
    print("\n| engine | s per SF unit at SF " + " | at SF ".join(f"{sf:g}" for sf in sfs)
          + f" | ratio SF {sfs[-1]:g} / SF {sfs[0]:g} (median) | target |\n|---|" + "---|" * (len(sfs) + 2))
    for engine in ("duckdb", "postgres"):
        medians = [statistics.median(per_unit[(engine, sf)]) for sf in sfs]
        print(f"| {engine} | " + " | ".join(f"{m:.1f}" for m in medians) + f" | **{medians[-1] / medians[0]:.2f}** | ≤ 1.2 |")
    sizes = [out for out in runs if out["sf"] == sfs[-1]][-1]
    print(f"\nAt SF {sfs[-1]:g}: CSV {sizes['csv_bytes'] / 1e9:.2f} GB, DuckDB {sizes['duckdb']['database_bytes'] / 1e9:.2f} GB, "
          f"PostgreSQL database {sizes['postgres']['database_bytes'] / 1e9:.2f} GB "
          f"(data directory {sizes['postgres']['data_dir_bytes'] / 1e9:.2f} GB).")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sf", type=float, default=1.0)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--scaling", help="scale factors to compare, smallest first, e.g. 1,10")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--dir", type=Path, default=Path(tempfile.gettempdir()), help="where the scaling data goes")
    args = parser.parse_args()
    if args.scaling:
        scaling([float(x) for x in args.scaling.split(",")], args.rounds, args.dir)
        return
    go_tpc = subprocess.run([str(HERE / "peers" / "build-go-tpc.sh")], check=True, capture_output=True, text=True).stdout.strip()
    base = Path(tempfile.mkdtemp(prefix="refbench-dss-bench-"))
    base.chmod(0o755)
    server = ManagedPostgres(base / "pgdata", {"shared_buffers": "256MB", "work_mem": "64MB", "max_wal_size": "4GB",
                                               "shared_preload_libraries": "pg_stat_statements"})
    server.start()
    try:
        server.database("gotpc")
        t0 = time.monotonic()
        info = datagen.generate(base / "data", args.sf)
        generate_s = time.monotonic() - t0
        pg = PostgresEngine(server.database("tpch"), server, 2, datagen.TPCH)
        t0 = time.monotonic()
        pg_load = pg.load(base / "data", args.sf)
        pg_s = time.monotonic() - t0
        duck = DuckDbEngine(base / "tpch.duckdb", datagen.TPCH)
        t0 = time.monotonic()
        duck.load(base / "data", args.sf)
        duck_s = time.monotonic() - t0
        t0 = time.monotonic()
        # The managed server asks every client for its password, the peer too.
        peer = subprocess.run([go_tpc, "tpch", "prepare", "-d", "postgres", "-H", "127.0.0.1", "-P", str(server.port),
                               "-U", "refbench", "-p", server.password, "-D", "gotpc", "--conn-params", "sslmode=disable",
                               "--sf", f"{args.sf:g}", "--dropdata"], capture_output=True, text=True)
        if peer.returncode != 0:
            sys.exit(f"go-tpc tpch prepare failed: {(peer.stderr or peer.stdout).strip()[-2000:]}")
        peer_s = time.monotonic() - t0
        with connect(server.database("gotpc"), autocommit=True) as conn:
            peer_rows = conn.execute("SELECT count(*) FROM lineitem").fetchone()[0]
        duck.open()
        pg.open()
        duck_ours, duck_engine = duckdb_overhead(duck, args.sf, args.repeats)
        pg_ours, pg_engine = postgres_overhead(pg, args.sf, args.repeats)
        duck.close()
        pg.close()
    finally:
        server.stop()
        shutil.rmtree(base, ignore_errors=True)

    ours_pg = generate_s + pg_s
    print(f"SF {args.sf:g}; managed PostgreSQL 15 (shared_buffers 256MB, work_mem 64MB) and DuckDB in-process, on the same "
          f"machine; {info['bytes']['lineitem'] / 1e6:,.0f} MB of lineitem CSV; go-tpc loaded {peer_rows:,} lineitem rows.\n")
    print("| load | refbench | go-tpc `tpch prepare` | refbench faster by | target |\n|---|---|---|---|---|")
    print(f"| generate + PostgreSQL (keys, indexes, VACUUM) | {ours_pg:.1f} s (generate {generate_s:.1f} + COPY "
          f"{pg_load['load_s']:.1f} + indexes and VACUUM {pg_load['index_s']:.1f}) | {peer_s:.1f} s (primary keys only) | "
          f"**{peer_s / ours_pg:.1f}×** | ≥ 3× |")
    print(f"| generate + PostgreSQL + DuckDB | {ours_pg + duck_s:.1f} s (DuckDB {duck_s:.1f}) | | "
          f"{peer_s / (ours_pg + duck_s):.1f}× | |")
    print("\n| harness overhead (stream 0, "
          f"{args.repeats}×22 queries) | refbench's time | engine's own time | overhead | target |\n|---|---|---|---|---|")
    for name, ours, theirs, how in (("DuckDB", duck_ours, duck_engine, "profiler query.total_time"),
                                    ("PostgreSQL", pg_ours, pg_engine, "pg_stat_statements total_exec_time")):
        print(f"| {name} | {ours:.3f} s | {theirs:.3f} s ({how}) | **{100 * (ours / theirs - 1):+.2f}%** | < 2% |")


if __name__ == "__main__":
    main()
