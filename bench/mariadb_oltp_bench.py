"""refbench's OLTP driver on a managed MariaDB: NOPM, the driver's CPU per New-Order and its share of all the CPU
the benchmark used (driver + mariadbd), at each user count, and the build's time (LOAD DATA LOCAL INFILE, then the
secondary indexes, ANALYZE, the procedures and the write-out of the load's pages).

The driver runs as bench/oltp_bench.py runs it (a process of its own whose tree is sampled): `driver.run(
transactions_at(dsn), …)` with the managed server's mysql:// DSN. The server has oltp's defaults: a 128 MB buffer
pool (PostgreSQL's shared_buffers in oltp_bench.py), durable commits, doublewrite, a 1 GB redo log.

Usage: .venv/bin/python bench/mariadb_oltp_bench.py [--warehouses 10] [--users 4,64] [--seconds 60] [--rampup 10]
       [--rounds 3] [--work-dir /var/tmp]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from oltp_bench import Source, cpu_per_new_order_us, median, run_refbench, share  # noqa: E402

from refbench.engines.mariadb import ManagedMariaDB  # noqa: E402
from refbench.suites.oltp import database, transactions_at  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--warehouses", type=int, default=10)
    parser.add_argument("--users", default="4,64")
    parser.add_argument("--seconds", type=int, default=60)
    parser.add_argument("--rampup", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--work-dir", default=tempfile.gettempdir())
    args = parser.parse_args()
    user_counts = [int(u) for u in args.users.split(",") if u]
    base = Path(tempfile.mkdtemp(prefix="refbench-mariadb-oltp-bench-", dir=args.work_dir))
    base.chmod(0o755)
    server = ManagedMariaDB(base / "data", {"innodb_buffer_pool_size": "128M", "innodb_log_file_size": "1G",
                                            "max_connections": str(max(user_counts) + 20)})
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}\n", flush=True)
    server.start()
    runs: dict[int, list[dict]] = {}
    try:
        dsn = server.database("tpcc")
        side = transactions_at(dsn)
        t0 = time.monotonic()
        info = database.build(side, args.warehouses, os.cpu_count() or 1, True, lambda *_: None)
        build_s = time.monotonic() - t0
        print(f"build of {args.warehouses} warehouses: {build_s:.1f} s (rows {info['load_s']} s, indexes, procedures "
              f"and write-out {info['index_s']} s)", flush=True)
        for i in range(args.rounds):
            for users in (user_counts if i % 2 == 0 else list(reversed(user_counts))):
                with side.connect() as conn:
                    side.flush_dirty_pages(conn)  # each run starts with the last one's pages written, as CHECKPOINT does
                result = run_refbench(Source("refbench", None, 10**6), dsn, args.warehouses, users, args.seconds,
                                      args.rampup, i + 1)
                runs.setdefault(users, []).append(result)
                print(f"{users} users, round {i + 1}: {result['nopm']:,.0f} NOPM, driver share {share(result):.1f}%, "
                      f"{cpu_per_new_order_us(result):,.0f} µs driver CPU per New-Order", flush=True)
    finally:
        server.stop()
        shutil.rmtree(base, ignore_errors=True)
    print(f"\n{args.warehouses} warehouses, managed MariaDB ({server.settings}), {args.rounds} rounds of "
          f"{args.rampup} s warm-up + {args.seconds} s measured, user counts in alternation; medians. Load average at "
          f"the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}.\n")
    print("| users | NOPM | driver CPU per New-Order | driver share of benchmark CPU |\n|---|---|---|---|")
    for users in user_counts:
        rs = runs[users]
        print(f"| {users} | {median(rs, lambda r: r['nopm']):,.0f} | {median(rs, cpu_per_new_order_us):,.0f} µs | "
              f"{median(rs, share):.1f}% |")


if __name__ == "__main__":
    main()
