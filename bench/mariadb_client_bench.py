"""The two maintained C-based Python clients of MariaDB (three ways), side by side on the OLTP driver's kind of work: one connection
calling a small stored procedure in a tight loop, as a virtual user does.

The clients: MariaDB Connector/Python (PyPI ``mariadb``, on MariaDB Connector/C), with its default cursor (text
protocol) and with its prepared cursor (binary protocol, the CALL prepared once), and ``mysqlclient`` (``MySQLdb``,
on the same libmariadb here, text protocol only). pymysql, pure Python, is left out.

The procedure is New-Order's first step: in one transaction, read a district's next order number with FOR UPDATE,
advance it, commit, and return the number and the district's tax as a result set. The server is a managed MariaDB
(refbench.engines.mariadb) with innodb_flush_log_at_trx_commit=0 here: the clients are compared, not the storage's
fsync, which would hide their difference in its own time.

Measured per client and round: calls/s (wall time) and the CPU µs per call of this process (user + system, which is
the client's work only: the server is another process), over --calls calls on 10 districts in turn. The clients take
turns in each of --rounds rounds (the order reversed every other round), so that a neighbour's burst spreads over
all; the table gives each round and the median.

refbench depends on mysqlclient only; the peer is installed for this benchmark: .venv/bin/pip install mariadb
Usage: .venv/bin/python bench/mariadb_client_bench.py [--calls 20000] [--rounds 3] [--dir /var/tmp/refbench-mariadb-client-bench]
Prints a Markdown table for docs/BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata
import os
import shutil
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from refbench.engines.mariadb import ManagedMariaDB, parse_dsn, server_version  # noqa: E402

SCHEMA = [
    "CREATE OR REPLACE TABLE district (d_w_id INT NOT NULL, d_id INT NOT NULL, d_next_o_id INT NOT NULL, "
    "d_tax DECIMAL(4,4) NOT NULL, d_name VARCHAR(10) NOT NULL, PRIMARY KEY (d_w_id, d_id)) ENGINE=InnoDB",
    "INSERT INTO district SELECT 1, seq, 3001, seq / 100, CONCAT('district', seq) FROM seq_1_to_10",
    """CREATE OR REPLACE PROCEDURE next_order(IN w INT, IN d INT)
BEGIN
  DECLARE o INT;
  DECLARE tax DECIMAL(4,4);
  START TRANSACTION;
  SELECT d_next_o_id, d_tax INTO o, tax FROM district WHERE d_w_id = w AND d_id = d FOR UPDATE;
  UPDATE district SET d_next_o_id = o + 1 WHERE d_w_id = w AND d_id = d;
  COMMIT;
  SELECT o, tax;
END""",
]


def connect(client: str, dsn: str):
    module = importlib.import_module("mariadb" if client == "mariadb" else "MySQLdb")
    return module.connect(**parse_dsn(dsn), autocommit=True)


def loop(client: str, dsn: str, calls: int) -> tuple[float, float]:
    """calls/s and CPU µs per call of ``calls`` CALLs, each result read and the CALL's own status result consumed."""
    conn = connect(client.removesuffix(" prepared"), dsn)
    # mariadb's prepared cursor: the binary protocol, the statement prepared once on the server and executed again.
    cursor = conn.cursor(prepared=True) if client.endswith(" prepared") else conn.cursor()
    orders = 0
    wall, cpu = time.perf_counter(), time.process_time()
    for i in range(calls):
        cursor.execute("CALL next_order(%s, %s)", (1, i % 10 + 1))
        orders += cursor.fetchone()[0] > 0
        while cursor.nextset():
            pass
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    conn.close()
    assert orders == calls, (client, orders, calls)
    return calls / wall, cpu / calls * 1e6


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--dir", type=Path, default=Path("/var/tmp/refbench-mariadb-client-bench"))
    args = parser.parse_args()
    shutil.rmtree(args.dir, ignore_errors=True)
    args.dir.mkdir(parents=True)
    args.dir.chmod(0o755)  # the mysql system user runs the server when this runs as root
    server = ManagedMariaDB(args.dir / "data", {"innodb_buffer_pool_size": "128M", "innodb_flush_log_at_trx_commit": "0"})
    server.start()
    try:
        dsn = server.database("bench")
        with connect("mysqlclient", dsn) as conn:
            for statement in SCHEMA:
                conn.cursor().execute(statement)
            version = server_version(conn)
        clients = {name: f"{name} {importlib.metadata.version(name.split()[0])}"
                   for name in ("mariadb", "mariadb prepared", "mysqlclient")}
        results: dict[str, list[tuple[float, float]]] = {name: [] for name in clients}
        for name in clients:  # warms the server's buffer pool and the procedure's cache
            loop(name, dsn, 1000)
        for round_ in range(args.rounds):
            for name in (list(clients) if round_ % 2 == 0 else reversed(clients)):
                results[name].append(loop(name, dsn, args.calls))
                print(f"round {round_ + 1} {name}: {results[name][-1][0]:,.0f} calls/s, "
                      f"{results[name][-1][1]:.1f} CPU µs/call", file=sys.stderr, flush=True)
    finally:
        server.stop()
        shutil.rmtree(args.dir, ignore_errors=True)
    load = os.getloadavg()[0]
    print(f"\n{args.calls:,} CALLs of next_order per client and round, {args.rounds} rounds alternating "
          f"(load average {load:.2f} at the end); MariaDB {version}\n")
    print("| client | calls/s (rounds) | median calls/s | client CPU µs/call (rounds) | median CPU µs/call |")
    print("|---|---|---|---|---|")
    for name, label in clients.items():
        rates, cpus = zip(*results[name])
        print(f"| {label} | {', '.join(f'{r:,.0f}' for r in rates)} | {statistics.median(rates):,.0f} | "
              f"{', '.join(f'{c:.1f}' for c in cpus)} | {statistics.median(cpus):.1f} |")


if __name__ == "__main__":
    main()
