"""The DSS suite's two engines behind one small surface: load the generated tables, run a query and time it,
start cold, report sizes and settings. Column store: DuckDB, in-process. Row store: PostgreSQL (the managed
instance of refbench.engines.postgres, or the user's server through a DSN) with keys and indexes.
"""

from __future__ import annotations

import re
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from importlib.resources import files
from pathlib import Path
from typing import Any

from refbench.engines.duckdb import DuckDb
from refbench.host.pagecache import files_under
from refbench.engines.postgres import ManagedPostgres, connect, run_in_parallel, server_settings, sql_statements
from refbench.errors import UserError
from refbench.suites.dss.datagen import TABLES


def sql(name: str) -> str:
    return files("refbench.suites.dss").joinpath("sql", f"{name}.sql").read_text()


class QueryTimeout(Exception):
    """A query ran past its time limit and was cancelled by the engine."""

    def __init__(self, timeout_s: float):
        super().__init__(f"cancelled after the {timeout_s:g} s query timeout")
        self.timeout_s = timeout_s


def _duckdb_run(conn, query: str, timeout_s: float | None) -> tuple[list[tuple], float]:
    """One query on a DuckDB connection; past ``timeout_s`` a timer thread interrupts it (DuckDB has no
    statement timeout of its own). The lock keeps a late timer from interrupting the next query instead."""
    import duckdb

    lock, running, fired = threading.Lock(), [True], [False]

    def interrupt() -> None:
        with lock:
            if running[0]:
                fired[0] = True
                conn.interrupt()

    timer = threading.Timer(timeout_s, interrupt) if timeout_s else None
    t0 = time.perf_counter()
    if timer:
        timer.start()
    try:
        rows = conn.execute(query).fetchall()
    except (duckdb.InterruptException, RuntimeError) as exc:
        if fired[0]:
            raise QueryTimeout(timeout_s) from None
        # In the main thread, an interrupt that is not the timeout's is Ctrl-C or SIGTERM reaching the query (DuckDB
        # turns the signal into "Query interrupted"): the run is being stopped, not failing. In another thread it
        # is the caller's cancel(), which the caller expects as the engine's error.
        interrupted = isinstance(exc, duckdb.InterruptException) or "interrupted" in str(exc).lower()
        if interrupted and threading.current_thread() is threading.main_thread():
            raise KeyboardInterrupt from exc
        raise
    finally:
        with lock:
            running[0] = False
        if timer:
            timer.cancel()
    return rows, time.perf_counter() - t0


class DuckDbEngine:
    name = "duckdb"
    kind = "column store"

    def __init__(self, path: Path, memory_limit: str = ""):
        self.db = DuckDb(path, memory_limit=memory_limit or None)

    def loaded(self, scale_factor: float) -> bool:
        if not self.db.path.exists():
            return False
        self.db.open()
        try:
            return self.db.execute("SELECT scale_factor FROM refbench_load")[0][0] == scale_factor
        except Exception:  # no such table: an interrupted load
            return False

    def load(self, data_dir: Path, scale_factor: float) -> dict[str, Any]:
        import duckdb

        self.db.close()
        for suffix in ("", ".wal"):
            Path(f"{self.db.path}{suffix}").unlink(missing_ok=True)
        loader = DuckDb(self.db.path).open()  # without the memory cap, which is for measuring, not loading
        t0 = time.monotonic()
        try:
            for statement in sql_statements(sql("schema")):
                loader.execute(statement)
            rows = {t: loader.load_csv(t, data_dir / f"{t}.csv") for t in TABLES}
            loader.execute(f"CREATE TABLE refbench_load AS SELECT {scale_factor}::DOUBLE AS scale_factor")
            loader.execute("CHECKPOINT")
        except duckdb.Error as exc:
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            raise UserError(f"loading the TPC-H tables into DuckDB failed: {first.rstrip('.')}.") from None
        finally:
            loader.close()
        return {"load_s": round(time.monotonic() - t0, 2), "rows": rows}

    def open(self) -> None:
        self.db.open()

    def close(self) -> None:
        self.db.close()

    def cold(self) -> str:
        self.db.restart()
        return "DuckDB closed and opened again"

    def data_files(self) -> list[Path] | None:
        return [p for p in (self.db.path, Path(f"{self.db.path}.wal")) if p.exists()]

    def run(self, query: str, timeout_s: float | None = None) -> tuple[list[tuple], float]:
        return _duckdb_run(self.db.conn, query, timeout_s)

    def session(self) -> "DuckDbSession":
        """Another connection to the same database, for a stream of its own (DuckDB runs them in parallel)."""
        return DuckDbSession(self.db.conn.cursor())

    def usage(self) -> dict[str, int]:
        """Counters of temporary and log space written; DuckDB exposes none that survive a query."""
        return {}

    def sizes(self) -> dict[str, Any]:
        block = self.db.execute("SELECT block_size FROM pragma_database_size()")[0][0]
        tables = {}
        for t in TABLES:
            blocks = self.db.execute(f"SELECT count(DISTINCT block_id) FROM pragma_storage_info('{t}') "
                                     "WHERE block_id IS NOT NULL")[0][0]
            tables[t] = blocks * block
        return {"tables_bytes": tables, "database_bytes": self.db.path.stat().st_size}

    def settings(self) -> dict[str, str]:
        rows = self.db.execute("SELECT name, value FROM duckdb_settings() WHERE name IN "
                               "('threads', 'memory_limit', 'max_temp_directory_size')")
        return {"version": self.db.version(), **dict(rows)}


class DuckDbSession:
    def __init__(self, conn):
        self.conn = conn

    def run(self, query: str, timeout_s: float | None = None) -> tuple[list[tuple], float]:
        return _duckdb_run(self.conn, query, timeout_s)

    def cancel(self) -> None:
        self.conn.interrupt()

    def close(self) -> None:
        self.conn.close()


class PostgresSession:
    def __init__(self, dsn: str):
        self.conn = connect(dsn, autocommit=True)
        self.timeout_ms: int | None = None  # the session's statement_timeout, once set

    def run(self, query: str, timeout_s: float | None = None) -> tuple[list[tuple], float]:
        import psycopg

        # statement_timeout is set only when it changes (queries have one, the refresh functions none), so the
        # timed call stays one round trip.
        wanted = max(1, round(timeout_s * 1000)) if timeout_s else 0
        if wanted != self.timeout_ms:
            self.conn.execute(f"SET statement_timeout = {wanted}")
            self.timeout_ms = wanted
        t0 = time.perf_counter()
        try:
            cursor = self.conn.execute(query)
            rows = cursor.fetchall() if cursor.description else []
        except psycopg.errors.QueryCanceled:
            if not timeout_s:
                raise
            raise QueryTimeout(timeout_s) from None
        return rows, time.perf_counter() - t0

    def cancel(self) -> None:
        self.conn.cancel_safe()

    def close(self) -> None:
        self.conn.close()


def _copy_table(dsn: str, table: str, csv: Path, server_file: bool) -> int:
    """One table in one transaction: TRUNCATE then COPY FREEZE. The rows land frozen and all-visible (VACUUM has
    nothing left to do), and with wal_level=minimal a table truncated in the same transaction is not WAL-logged
    at all — at SF 10 that is 10 GB of log not written. The managed server reads the file itself (no client
    process on a CPU the backend needs); a user's server gets it through the connection."""
    from psycopg import sql as q

    with connect(dsn, autocommit=True) as conn, conn.transaction(), conn.cursor() as cur:
        cur.execute(q.SQL("TRUNCATE {}").format(q.Identifier(table)))
        options = q.SQL("(FORMAT csv, HEADER true, FREEZE true)")
        if server_file:
            cur.execute(q.SQL("COPY {} FROM {} ").format(q.Identifier(table), q.Literal(str(csv))) + options)
        else:
            with cur.copy(q.SQL("COPY {} FROM STDIN ").format(q.Identifier(table)) + options) as copy, open(csv, "rb") as f:
                while chunk := f.read(1 << 20):
                    copy.write(chunk)
        return cur.rowcount


class PostgresEngine:
    name = "postgres"
    kind = "row store"

    # Per index build: an SF 10 lineitem index sorts about 2 GB of keys; two builds run at once.
    INDEX_SETTINGS = {"maintenance_work_mem": "1GB"}

    def __init__(self, dsn: str, server: ManagedPostgres | None, workers: int):
        self.dsn, self.server, self.workers = dsn, server, max(1, workers)
        self.main: PostgresSession | None = None

    def loaded(self, scale_factor: float) -> bool:
        with connect(self.dsn, autocommit=True) as conn:
            if not conn.execute("SELECT to_regclass('refbench_load') IS NOT NULL").fetchone()[0]:
                return False
            return conn.execute("SELECT scale_factor FROM refbench_load").fetchone()[0] == scale_factor

    def load(self, data_dir: Path, scale_factor: float) -> dict[str, Any]:
        """COPY of every table (largest first, as many at once as there are workers), then the indexes built the
        same way, then the keys on them and VACUUM ANALYZE: the order a DBA loads a warehouse in, and the one
        whose cost grows linearly with the data."""
        import psycopg

        self.close()
        data_dir = data_dir.absolute()  # the server reads the files itself, from its own working directory
        t0 = time.monotonic()
        size = {t: (data_dir / f"{t}.csv").stat().st_size for t in TABLES}
        largest_first = sorted(TABLES, key=lambda t: -size[t])
        server_file = self.server is not None and all(self.server.can_read(data_dir / f"{t}.csv") for t in TABLES)
        try:
            with connect(self.dsn, autocommit=True) as conn:
                conn.execute("DROP TABLE IF EXISTS refbench_load, " + ", ".join(TABLES) + " CASCADE")
                for statement in sql_statements(sql("schema")):
                    conn.execute(statement)
            with ThreadPoolExecutor(self.workers) as pool:
                counts = pool.map(lambda t: _copy_table(self.dsn, t, data_dir / f"{t}.csv", server_file), largest_first)
                rows = dict(zip(largest_first, counts))
            load_s = time.monotonic() - t0
            indexes = sorted(sql_statements(sql("indexes")), key=lambda s: -size[re.search(r" ON (\w+)", s)[1]])
            run_in_parallel(self.dsn, [[s] for s in indexes], self.workers, self.INDEX_SETTINGS)
            with connect(self.dsn, autocommit=True) as conn:
                for statement in sql_statements(sql("keys")):
                    conn.execute(statement)
            run_in_parallel(self.dsn, [[f"VACUUM (FREEZE, ANALYZE) {t}"] for t in largest_first], self.workers, {})
            with connect(self.dsn, autocommit=True) as conn:
                conn.execute("CREATE TABLE refbench_load (scale_factor double precision)")
                conn.execute("INSERT INTO refbench_load VALUES (%s)", (scale_factor,))
        except psycopg.Error as exc:
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            raise UserError(f"loading the TPC-H tables into PostgreSQL failed: {first.rstrip('.')}.") from None
        return {"load_s": round(load_s, 2), "index_s": round(time.monotonic() - t0 - load_s, 2), "rows": rows,
                "copy": "server-side COPY FREEZE" if server_file else "COPY FREEZE through the connection"}

    def open(self) -> None:
        if self.main is None:
            self.main = PostgresSession(self.dsn)

    def close(self) -> None:
        if self.main is not None:
            self.main.close()
            self.main = None

    def session(self) -> PostgresSession:
        return PostgresSession(self.dsn)

    def cold(self) -> str:
        self.close()
        if self.server is not None:
            self.server.restart()
            how = "PostgreSQL restarted"
        else:
            how = "a new connection (a user's server keeps its shared buffers)"
        self.open()
        return how

    def data_files(self) -> list[Path] | None:
        """None for a user's server: its files are not refbench's to touch, and may be on another host."""
        return None if self.server is None else files_under([self.server.data_dir / "base"])

    def run(self, query: str, timeout_s: float | None = None) -> tuple[list[tuple], float]:
        return self.main.run(query, timeout_s)

    def usage(self) -> dict[str, int]:
        """Temporary files (sorts and hashes that spilled) and WAL written so far (the paper's temp and log sizing),
        and the table and index bytes the executor consumed, from the buffer cache or not (the logical scan)."""
        rows, _ = self.run("SELECT temp_bytes, pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint, "
                           "(blks_read + blks_hit) * current_setting('block_size')::bigint "
                           "FROM pg_stat_database WHERE datname = current_database()")
        return {"temp_bytes": int(rows[0][0]), "wal_bytes": int(rows[0][1]), "logical_read_bytes": int(rows[0][2])}

    def sizes(self) -> dict[str, Any]:
        with connect(self.dsn, autocommit=True) as conn:
            rows = conn.execute("SELECT relname, pg_table_size(oid), pg_indexes_size(oid) FROM pg_class "
                                "WHERE relname = ANY(%s) AND relkind = 'r' AND relnamespace = 'public'::regnamespace",
                                (TABLES,)).fetchall()
            database = conn.execute("SELECT pg_database_size(current_database())").fetchone()[0]
        return {"tables_bytes": {r[0]: r[1] for r in rows}, "indexes_bytes": {r[0]: r[2] for r in rows},
                "database_bytes": database}

    def settings(self) -> dict[str, str]:
        with connect(self.dsn, autocommit=True) as conn:
            return server_settings(conn, ["server_version", "shared_buffers", "work_mem", "max_parallel_workers_per_gather",
                                          "effective_cache_size", "random_page_cost"])
