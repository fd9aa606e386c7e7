"""OLTP benchmark: refbench's driver against go-tpc (PingCAP) and pgbench on the same managed PostgreSQL (or,
with --engine mariadb, go-tpc's MySQL TPC-C and sysbench on the same managed MariaDB), the driver's cost as the
user count grows, and the load's time per warehouse as the warehouse count grows.

One command, one server, the same settings, warehouses and connections for both TPC-C drivers, run in
alternation (refbench, go-tpc, go-tpc, refbench, …) so that the shared machine's drift falls on both. For each
user count in --users:
- NOPM ratio (refbench / go-tpc), both counted the same way: Σ D_NEXT_O_ID delta over the same measured
  window after the same warm-up (go-tpc calls its own New-Orders per minute "tpmC"),
- driver CPU per New-Order, and the driver's share of all CPU the benchmark used (driver + server),
- the driver's resident memory: the peak over the run of the sum of RSS over its processes (the process that
  runs the driver, started for each run, and every process it forked; not the server or the watchdog) and of
  PSS (RSS with shared pages split between their sharers, which the sum of RSS counts once per process),
- load time ratio (both up to the state refbench's build leaves: go-tpc's prepare, then on PostgreSQL the VACUUM
  FREEZE ANALYZE, on MariaDB the ANALYZE TABLE and the write-out of the load's dirty pages).
pgbench (TPC-B-like, built into PostgreSQL) or sysbench's oltp_read_write (MariaDB; `apt-get install sysbench`)
gives the server's raw transaction rate on the same instance.
--loads 10,100 loads those warehouse counts into fresh databases, interleaved over --load-rounds rounds, and
prints the time per warehouse of each and its ratio to the first's.

Before and after a change of the driver, in one command: --before runs an older refbench's driver (its src/
directory, e.g. from `git archive`), up to a user count, in alternation with this checkout's:

    .venv/bin/python bench/oltp_bench.py --before /var/tmp/before/src:64 --users 4,64,384 --no-go-tpc --no-pgbench

Usage: .venv/bin/python bench/oltp_bench.py [--engine postgres|mariadb] [--warehouses 10] [--users 4,64]
       [--seconds 60] [--rounds 3] [--before SRC[:MAX_USERS]] [--no-refbench] [--no-go-tpc] [--no-reference]
       [--loads 10,100 [--load-rounds 2]]
Prints Markdown for docs/BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from refbench.engines.postgres import ManagedPostgres, connect, postgres_binary
from refbench.suites.oltp import database, driver, figures

HERE = Path(__file__).parent


def own_cpu_s() -> float:
    """CPU seconds of this process and of its children waited for (the build's loader processes, go-tpc's prepare)."""
    return sum(u.ru_utime + u.ru_stime for u in (resource.getrusage(resource.RUSAGE_SELF),
                                                 resource.getrusage(resource.RUSAGE_CHILDREN)))


def process_cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _children() -> dict[int, list[int]]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                ppid = int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    return children


def driver_processes(root: int) -> list[int]:
    """``root`` and its descendants, less the database server's processes and refbench's watchdog (neither is
    the driver)."""
    children, found, todo = _children(), [], [root]
    while todo:
        pid = todo.pop()
        try:
            comm = Path(f"/proc/{pid}/comm").read_text().strip()
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if comm in ("postgres", "mariadbd") or b"refbench.children" in cmdline or b"go-tpc" in cmdline:
            continue
        found.append(pid)
        todo += children.get(pid, [])
    return found


def memory_kb(pid: int) -> tuple[int, int]:
    """(RSS, PSS) of one process in kB."""
    try:
        text = Path(f"/proc/{pid}/smaps_rollup").read_text()
    except OSError:
        return 0, 0
    values = dict(re.findall(r"^(Rss|Pss):\s+(\d+) kB", text, re.M))
    return int(values.get("Rss", 0)), int(values.get("Pss", 0))


class MemorySampler:
    """Peak of the summed RSS and PSS of a process tree, sampled every half second in a thread."""

    def __init__(self, root: int):
        self.root, self.rss_kb, self.pss_kb, self.processes = root, 0, 0, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self._stop.wait(0.5):
            pids = driver_processes(self.root)
            totals = [memory_kb(p) for p in pids]
            self.rss_kb = max(self.rss_kb, sum(r for r, _ in totals))
            self.pss_kb = max(self.pss_kb, sum(p for _, p in totals))
            self.processes = max(self.processes, len(pids))

    def __enter__(self) -> "MemorySampler":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


def run_refbench(source: "Source", dsn: str, warehouses: int, users: int, seconds: int, rampup: int, seed: int) -> dict:
    """One run of the driver of ``source`` in a process of its own (the driver's parent), whose tree is sampled."""
    env = {**os.environ, "PYTHONPATH": source.src} if source.src else dict(os.environ)
    proc = subprocess.Popen([sys.executable, __file__, "--run-driver", json.dumps([dsn, warehouses, users, rampup, seconds, seed])],
                            stdout=subprocess.PIPE, text=True, env=env)
    with MemorySampler(proc.pid) as memory:
        out = proc.communicate()[0]
    if proc.returncode != 0:
        raise SystemExit(f"the {source.name} driver failed at {users} users")
    return {**json.loads(out), "rss_kb": memory.rss_kb, "pss_kb": memory.pss_kb, "processes": memory.processes}


def _run_driver(arguments: str) -> None:
    dsn, warehouses, users, rampup, seconds, seed = json.loads(arguments)
    try:
        server = transactions_at(dsn)
    except ImportError:  # an older refbench's driver (--before), which took the DSN itself
        server = dsn
    result = driver.run(server, warehouses, users, rampup, seconds, False, seed)
    m = figures(result)
    print(json.dumps({"nopm": m["nopm"], "new_orders": m["new_orders_schema_delta"], "driver_cpu_s": result.driver_cpu_s,
                      "db_cpu_s": result.db_cpu_s}))


@dataclass
class Source:
    """A version of refbench's driver: its source directory (None: this checkout) and the most users it runs."""
    name: str
    src: str | None
    max_users: int

    @staticmethod
    def parse(text: str) -> "Source":
        name, _, rest = text.partition("=")
        src, _, limit = rest.partition(":")
        return Source(name, str(Path(src).absolute()), int(limit) if limit else 10**6)


class Postgres:
    """The managed PostgreSQL 15 of a refbench oltp run (its defaults: shared_buffers 128MB, max_wal_size 1GB), and
    what each driver needs of it. pgbench (TPC-B-like, built into PostgreSQL) is the server's raw transaction rate."""
    title = "managed PostgreSQL 15 (shared_buffers 128MB)"
    go_tpc_prepare: list[str] = []

    def __init__(self, base: Path, max_users: int):
        self.server = ManagedPostgres(base / "pgdata", {"shared_buffers": "128MB", "max_connections": str(max_users + 20),
                                                        "max_wal_size": "1GB"})

    def start(self) -> None:
        self.server.start()

    def stop(self) -> None:
        self.server.stop()

    def database(self, name: str) -> str:
        return self.server.database(name)

    def drop(self, name: str) -> None:
        with connect(self.server.dsn, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE {name}")

    def new_orders(self, dsn: str) -> int:
        with connect(dsn, autocommit=True) as conn:
            return int(conn.execute("SELECT sum(d_next_o_id) FROM district").fetchone()[0])

    def checkpoint(self) -> None:
        with connect(self.server.dsn, autocommit=True) as conn:
            conn.execute("CHECKPOINT")

    def go_tpc_args(self, db: str) -> list[str]:
        return ["-d", "postgres", "-H", "127.0.0.1", "-P", str(self.server.port), "-U", "refbench",
                "-p", self.server.password, "-D", db, "--conn-params", "sslmode=disable"]

    def after_prepare(self, dsn: str) -> None:
        with connect(dsn, autocommit=True) as conn:
            conn.execute("VACUUM (FREEZE, ANALYZE)")  # the state refbench's build leaves its own tables in

    def reference(self, users: int, seconds: int) -> str:
        pgbench = postgres_binary("pgbench")
        base = ["-h", "127.0.0.1", "-p", str(self.server.port), "-U", "refbench"]
        env = {**os.environ, "PGPASSWORD": self.server.password}
        subprocess.run([pgbench, *base, "-i", "-q", "-s", "10", "postgres"], check=True, capture_output=True, env=env)
        out = subprocess.run([pgbench, *base, "-c", str(users), "-j", str(min(users, os.cpu_count() or 1)), "-T",
                              str(seconds), "-M", "prepared", "postgres"], check=True, capture_output=True, text=True,
                             env=env).stdout
        tps = float(re.search(r"tps = ([0-9.]+)", out).group(1))
        return (f"pgbench (TPC-B-like, -M prepared, scale 10, {users} clients, {seconds} s) on the same instance: "
                f"{tps:,.0f} transactions/s.")


class MariaDb:
    """A managed MariaDB as `refbench oltp --engine mariadb` starts it by default: ManagedMariaDB's durable defaults
    (InnoDB, innodb_flush_log_at_trx_commit=1, doublewrite on, binlog off), a buffer pool of oltp's shared_buffers
    (128MB), oltp's mariadb_settings (innodb_log_file_size=1G, thread_handling=pool-of-threads) and a connection for every user and some for
    refbench's own. sysbench's oltp_read_write is the server's raw transaction rate, as pgbench is PostgreSQL's."""
    title = ("managed MariaDB 10.11 (durable: innodb_flush_log_at_trx_commit=1, doublewrite; innodb_buffer_pool_size "
             "128M, innodb_log_file_size 1G, thread pool)")
    # go-tpc's prepare ends with its consistency checks, whose correlated subqueries (3.3.2.10 and on) run for many
    # minutes on MariaDB; refbench's build does not check either (its conditions are the run's), so both time the load.
    go_tpc_prepare = ["--no-check"]

    def __init__(self, base: Path, max_users: int, settings: dict[str, str] | None = None):
        from refbench.engines import mariadb  # not in an older refbench (--before)

        self.mariadb = mariadb
        self.server = mariadb.ManagedMariaDB(base / "mariadb", {"innodb_buffer_pool_size": "128M",
                                                                "innodb_log_file_size": "1G",
                                                                "thread_handling": "pool-of-threads",
                                                                "max_connections": str(max_users + 20),
                                                                **(settings or {})})
        if settings:  # what ran, in the tables' titles
            self.title += " with " + ", ".join(f"{k}={v}" for k, v in settings.items())

    def start(self) -> None:
        self.server.start()

    def stop(self) -> None:
        self.server.stop()

    def database(self, name: str) -> str:
        return self.server.database(name)

    def _execute(self, dsn: str, sql: str) -> list[tuple]:
        with self.mariadb.connect(dsn, autocommit=True) as conn:
            cursor = conn.cursor()
            cursor.execute(sql)
            return list(cursor.fetchall())

    def drop(self, name: str) -> None:
        self._execute(self.server.dsn, f"DROP DATABASE `{name}`")

    def new_orders(self, dsn: str) -> int:
        return int(self._execute(dsn, "SELECT sum(d_next_o_id) FROM district")[0][0])

    def checkpoint(self) -> None:
        """refbench's own write-out of the buffer pool's dirty pages, which its build ends with (InnoDB's nearest to
        PostgreSQL's CHECKPOINT)."""
        side = transactions_at(self.server.database("refbench"))
        with side.connect() as conn:
            side.flush_dirty_pages(conn)

    def go_tpc_args(self, db: str) -> list[str]:
        return ["-d", "mysql", "-H", "127.0.0.1", "-P", str(self.server.port), "-U", "refbench",
                "-p", self.server.password, "-D", db]

    def after_prepare(self, dsn: str) -> None:
        # the state refbench's build leaves its own tables in: statistics gathered, the load's pages written
        tables = [name for name, in self._execute(dsn, "SHOW TABLES")]
        self._execute(dsn, "ANALYZE TABLE " + ", ".join(f"`{t}`" for t in tables))
        self.checkpoint()

    def reference(self, users: int, seconds: int) -> str:
        """sysbench 1.0's oltp_read_write (14 reads, 4 writes a transaction) on 10 tables of 100,000 rows (about
        the data of pgbench's scale 10), over TCP like go-tpc."""
        sysbench = shutil.which("sysbench")
        if sysbench is None:
            raise SystemExit("sysbench is not installed: apt-get install sysbench (or run with --no-reference)")
        self.database("sbtest")
        base = [sysbench, "oltp_read_write", "--db-driver=mysql", "--mysql-host=127.0.0.1",
                f"--mysql-port={self.server.port}", "--mysql-user=refbench", f"--mysql-password={self.server.password}",
                "--mysql-db=sbtest", "--tables=10", "--table-size=100000"]
        subprocess.run([*base, f"--threads={min(users, os.cpu_count() or 1)}", "prepare"], check=True,
                       capture_output=True)
        self.checkpoint()
        out = subprocess.run([*base, f"--threads={users}", f"--time={seconds}", "run"], check=True,
                             capture_output=True, text=True).stdout
        tps = float(re.search(r"transactions:\s+\d+\s+\(([0-9.]+) per sec", out).group(1))
        return (f"sysbench oltp_read_write (10 tables of 100,000 rows, {users} threads, {seconds} s) on the same "
                f"instance: {tps:,.0f} transactions/s.")


ENGINES = {"postgres": Postgres, "mariadb": MariaDb}


def run_go_tpc(go_tpc: str, engine, server_cpu_s, common: list[str], dsn: str, warehouses: int, users: int,
               seconds: int, rampup: int) -> dict:
    """go-tpc runs for ramp-up + measurement + 5 s; the window [ramp-up, ramp-up + seconds] is measured from
    outside, exactly as refbench measures its own: the schema's New-Order counter and both sides' CPU."""
    proc = subprocess.Popen([go_tpc, "tpcc", "run", *common, "--warehouses", str(warehouses), "-T", str(users),
                             "--time", f"{rampup + seconds + 5}s", "--interval", "1000s"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    time.sleep(rampup)
    no0, cpu0, db0, t0 = engine.new_orders(dsn), process_cpu_s(proc.pid), server_cpu_s(), time.time()
    time.sleep(seconds)
    no1, cpu1, db1, t1 = engine.new_orders(dsn), process_cpu_s(proc.pid), server_cpu_s(), time.time()
    rss_kb, pss_kb = memory_kb(proc.pid)
    out = proc.communicate()[0]
    if proc.returncode != 0:
        raise SystemExit(f"go-tpc failed: {out.strip().splitlines()[-1:]}")
    reported = re.findall(r"tpmC: ([0-9.]+)", out)
    return {"nopm": (no1 - no0) / ((t1 - t0) / 60), "tpmc_reported": float(reported[-1]) if reported else None,
            "new_orders": no1 - no0, "driver_cpu_s": cpu1 - cpu0, "db_cpu_s": db1 - db0, "rss_kb": rss_kb,
            "pss_kb": pss_kb, "processes": 1}


def transactions_at(dsn: str):
    """refbench's OLTP side of the server at ``dsn``: its build, counters, server CPU (imported here: an older
    refbench, whose driver --before runs, has none)."""
    from refbench.suites.oltp import transactions_at

    return transactions_at(dsn)


def build(dsn: str, warehouses: int) -> None:
    """refbench's whole build: schema, parallel bulk load, keys and indexes, then PostgreSQL's VACUUM FREEZE ANALYZE
    and CHECKPOINT, or MariaDB's ANALYZE, procedures and the write-out of the load's pages."""
    database.build(transactions_at(dsn), warehouses, os.cpu_count() or 1, True, lambda *_: None)


def measure_loads(engine, loads: list[int], rounds: int) -> dict[int, list[float]]:
    """Seconds of refbench's whole build per warehouse count, interleaved."""
    seconds: dict[int, list[float]] = {w: [] for w in loads}
    for i in range(rounds):
        for w in (loads if i % 2 == 0 else list(reversed(loads))):
            dsn = engine.database(f"load{w}")
            t0 = time.monotonic()
            build(dsn, w)
            seconds[w].append(time.monotonic() - t0)
            engine.drop(f"load{w}")
    return seconds


def median(runs: list[dict], f) -> float:
    return statistics.median(f(r) for r in runs)


def share(r: dict) -> float:
    return 100 * r["driver_cpu_s"] / (r["driver_cpu_s"] + r["db_cpu_s"])


def cpu_per_new_order_us(r: dict) -> float:
    return 1e6 * r["driver_cpu_s"] / r["new_orders"]


def server_cpu_per_new_order_us(r: dict) -> float:
    return 1e6 * r["db_cpu_s"] / r["new_orders"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--engine", choices=sorted(ENGINES), default="postgres", help="the server both drivers run on")
    parser.add_argument("--warehouses", type=int, default=10)
    parser.add_argument("--users", default="4", help="user counts, comma-separated (4,64,384)")
    parser.add_argument("--seconds", type=int, default=60)
    parser.add_argument("--rampup", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--before", metavar="SRC[:MAX_USERS]", type=lambda text: Source.parse("before=" + text),
                        help="also run the driver of this source directory (an older refbench's src/), up to "
                             "MAX_USERS users, in alternation with this checkout's")
    parser.add_argument("--no-refbench", action="store_true", help="the peers alone (no load or run of refbench)")
    parser.add_argument("--no-go-tpc", action="store_true", help="refbench's driver alone (no load or run of go-tpc)")
    parser.add_argument("--no-reference", "--no-pgbench", dest="no_reference", action="store_true",
                        help="no pgbench (PostgreSQL) or sysbench (MariaDB) run")
    parser.add_argument("--loads", default="", help="warehouse counts whose load time to compare, comma-separated (10,100)")
    parser.add_argument("--load-rounds", type=int, default=2)
    parser.add_argument("--mariadb-settings", default="", metavar="NAME=VALUE,…",
                        help="more settings of the managed MariaDB, which both drivers run on (--engine mariadb)")
    parser.add_argument("--work-dir", default=tempfile.gettempdir(), help="where the managed server's data goes")
    parser.add_argument("--run-driver", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.run_driver:
        return _run_driver(args.run_driver)
    user_counts = [int(u) for u in args.users.split(",") if u]
    loads = [int(w) for w in args.loads.split(",") if w]
    sources = [] if args.no_refbench else (
        ([args.before] if args.before else []) + [Source("after" if args.before else "refbench", None, 10**6)])
    go_tpc = None if args.no_go_tpc or not user_counts else subprocess.run(
        [str(HERE / "peers" / "build-go-tpc.sh")], check=True, capture_output=True, text=True).stdout.strip()
    drivers = [s.name for s in sources] + (["go-tpc"] if go_tpc else [])
    base = Path(tempfile.mkdtemp(prefix="refbench-oltp-bench-", dir=args.work_dir))
    base.chmod(0o755)
    settings = dict(item.split("=", 1) for item in args.mariadb_settings.split(",") if item)
    if settings and args.engine != "mariadb":
        parser.error("--mariadb-settings needs --engine mariadb")
    engine = ENGINES[args.engine](base, max(user_counts + [80]), *([settings] if settings else []))
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}\n", flush=True)
    engine.start()
    runs: dict[tuple[str, int], list[dict]] = {}
    reference = ours_load_s = theirs_load_s = None
    try:
        if loads:
            load_s = measure_loads(engine, loads, args.load_rounds)
            load_average = os.getloadavg()
        if user_counts:
            ours_dsn, theirs_dsn = engine.database("refbench"), engine.database("gotpc")
            side = transactions_at(ours_dsn)
            with side.connect() as conn:
                server_cpu_s = side.server_cpu(conn)  # the server's CPU seconds so far, as refbench's driver reads them
            if sources:
                t0, client0, server0 = time.monotonic(), own_cpu_s(), server_cpu_s()
                build(ours_dsn, args.warehouses)
                ours_load_s = time.monotonic() - t0
                ours_load_cpu = own_cpu_s() - client0, server_cpu_s() - server0
            common = engine.go_tpc_args("gotpc")
            if go_tpc:
                t0, client0, server0 = time.monotonic(), own_cpu_s(), server_cpu_s()
                subprocess.run([go_tpc, "tpcc", "prepare", *common, "--warehouses", str(args.warehouses),
                                "-T", str(min(user_counts[0], 4)), "--dropdata", *engine.go_tpc_prepare], check=True, capture_output=True, text=True)
                engine.after_prepare(theirs_dsn)
                theirs_load_s = time.monotonic() - t0
                theirs_load_cpu = own_cpu_s() - client0, server_cpu_s() - server0
        for users in user_counts:
            for i in range(args.rounds):
                for who in (drivers if i % 2 == 0 else list(reversed(drivers))):
                    source = next((s for s in sources if s.name == who), None)
                    if source is not None and users > source.max_users:
                        continue
                    engine.checkpoint()  # each run starts from the same state of the buffers and the log
                    if source is not None:
                        result = run_refbench(source, ours_dsn, args.warehouses, users, args.seconds, args.rampup,
                                              i + 1)
                    else:
                        result = run_go_tpc(go_tpc, engine, server_cpu_s, common, theirs_dsn, args.warehouses, users, args.seconds,
                                            args.rampup)
                    runs.setdefault((who, users), []).append(result)
                    print(f"{who}, {users} users, round {i + 1}: {result['nopm']:,.0f} NOPM, driver share "
                          f"{share(result):.1f}%, RSS {result['rss_kb'] / 1e3:,.0f} MB, load average "
                          f"{os.getloadavg()[0]:.2f}", flush=True)
        if user_counts and not args.no_reference:
            reference = engine.reference(user_counts[0], args.seconds)
    finally:
        engine.stop()
        shutil.rmtree(base, ignore_errors=True)

    if user_counts:
        print(f"\n{args.warehouses} warehouses, {engine.title}; drivers "
              f"{', '.join(drivers)} in alternation on the same instance, {args.rounds} rounds, each {args.rampup} s "
              f"warm-up then {args.seconds} s measured; medians (memory: the largest peak). Load average at the end: "
              f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}.\n")
        print("| users | driver | NOPM | driver CPU per New-Order | server CPU per New-Order | driver share of benchmark "
              "CPU | driver processes | driver RSS (sum) | driver PSS (sum) |\n|---|---|---|---|---|---|---|---|---|")
        for users in user_counts:
            for name in drivers:
                if rs := runs.get((name, users)):
                    print(f"| {users} | {name} | {median(rs, lambda r: r['nopm']):,.0f} | "
                          f"{median(rs, cpu_per_new_order_us):,.0f} µs | {median(rs, server_cpu_per_new_order_us):,.0f} µs | "
                          f"{median(rs, share):.1f}% | "
                          f"{max(r['processes'] for r in rs)} | {max(r['rss_kb'] for r in rs) / 1e3:,.0f} MB | "
                          f"{max(r['pss_kb'] for r in rs) / 1e3:,.0f} MB |")
        for users in user_counts:
            present = [name for name in drivers if runs.get((name, users))]
            print(f"\nRounds at {users} users (NOPM, {' / '.join(present)}): " + "; ".join(
                " / ".join(f"{r['nopm']:,.0f}" for r in rounds) for rounds in zip(*(runs[(n, users)] for n in present))))
            if "refbench" in present and "go-tpc" in present:
                ratios = [a["nopm"] / b["nopm"] for a, b in zip(runs[("refbench", users)], runs[("go-tpc", users)])]
                print(f"NOPM ratio refbench / go-tpc at {users} users, per round: "
                      f"{', '.join(f'{x:.2f}×' for x in ratios)} (median {statistics.median(ratios):.2f}×)")
        if theirs_load_s:
            # CPU seconds of the loading client (refbench's generators and loaders, go-tpc) and of the server
            print(f"\nload time of {args.warehouses} warehouses: go-tpc {theirs_load_s:.1f} s (client CPU "
                  f"{theirs_load_cpu[0]:.1f} s, server CPU {theirs_load_cpu[1]:.1f} s)" + (
                f", refbench {ours_load_s:.1f} s (client CPU {ours_load_cpu[0]:.1f} s, server CPU "
                f"{ours_load_cpu[1]:.1f} s; refbench {theirs_load_s / ours_load_s:.2f}× faster)" if ours_load_s else ""))
        if reference is not None:
            print(f"\n{reference}")
    if loads:
        first = statistics.median(load_s[loads[0]]) / loads[0]
        print(f"\nLoad (refbench's whole build) into a fresh database, {engine.title}, "
              f"{args.load_rounds} interleaved rounds, medians; load average after the loads: "
              f"{' '.join(f'{x:.2f}' for x in load_average)}.\n")
        print("| warehouses | load time | per warehouse | per warehouse vs. " + f"{loads[0]} WH | rounds |\n|---|---|---|---|---|")
        for w in loads:
            sec = statistics.median(load_s[w])
            print(f"| {w} | {sec:.1f} s | {sec / w:.2f} s | {sec / w / first:.2f}× | "
                  + ", ".join(f"{x:.1f} s" for x in load_s[w]) + " |")


if __name__ == "__main__":
    main()
