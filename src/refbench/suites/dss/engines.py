"""The DSS suite's two engines behind one small surface: load the generated tables, run a query and time it,
start cold, report sizes and settings. Column store: DuckDB, in-process. Row store: PostgreSQL (the managed
instance of refbench.engines.postgres, or the user's server through a DSN) with keys and indexes.
"""

from __future__ import annotations

import multiprocessing
import time
from importlib.resources import files
from pathlib import Path
from typing import Any

from refbench.children import forked_worker
from refbench.engines.duckdb import DuckDb
from refbench.engines.postgres import ManagedPostgres, connect, server_settings
from refbench.errors import UserError
from refbench.suites.dss.datagen import TABLES


def sql(name: str) -> str:
    return files("refbench.suites.dss").joinpath("sql", f"{name}.sql").read_text()


def _statements(text: str) -> list[str]:
    lines = [line for line in text.splitlines() if not line.lstrip().startswith("--")]
    return [s.strip() for s in "\n".join(lines).split(";") if s.strip()]


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
            for statement in _statements(sql("schema")):
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

    def run(self, query: str) -> tuple[list[tuple], float]:
        return self.db.timed(query)

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

    def run(self, query: str) -> tuple[list[tuple], float]:
        t0 = time.perf_counter()
        rows = self.conn.execute(query).fetchall()
        return rows, time.perf_counter() - t0

    def cancel(self) -> None:
        self.conn.interrupt()

    def close(self) -> None:
        self.conn.close()


class PostgresSession:
    def __init__(self, dsn: str):
        self.conn = connect(dsn, autocommit=True)

    def run(self, query: str) -> tuple[list[tuple], float]:
        t0 = time.perf_counter()
        cursor = self.conn.execute(query)
        rows = cursor.fetchall() if cursor.description else []
        return rows, time.perf_counter() - t0

    def cancel(self) -> None:
        self.conn.cancel_safe()

    def close(self) -> None:
        self.conn.close()


def _copy_table(job: tuple[str, str, str]) -> tuple[str, int]:
    dsn, table, csv = job
    with connect(dsn, autocommit=True) as conn, conn.cursor() as cur:
        with cur.copy(f"COPY {table} FROM STDIN (FORMAT csv, HEADER true)") as copy, open(csv, "rb") as f:
            while chunk := f.read(1 << 20):
                copy.write(chunk)
        return table, cur.rowcount


class PostgresEngine:
    name = "postgres"
    kind = "row store"

    def __init__(self, dsn: str, server: ManagedPostgres | None, workers: int):
        self.dsn, self.server, self.workers = dsn, server, max(1, workers)
        self.main: PostgresSession | None = None

    def loaded(self, scale_factor: float) -> bool:
        with connect(self.dsn, autocommit=True) as conn:
            if not conn.execute("SELECT to_regclass('refbench_load') IS NOT NULL").fetchone()[0]:
                return False
            return conn.execute("SELECT scale_factor FROM refbench_load").fetchone()[0] == scale_factor

    def load(self, data_dir: Path, scale_factor: float) -> dict[str, Any]:
        import psycopg

        self.close()
        t0 = time.monotonic()
        try:
            with connect(self.dsn, autocommit=True) as conn:
                conn.execute("DROP TABLE IF EXISTS refbench_load, " + ", ".join(TABLES) + " CASCADE")
                for statement in _statements(sql("schema")):
                    conn.execute(statement)
            # Largest first, so the longest COPY starts at once.
            jobs = sorted(((self.dsn, t, str(data_dir / f"{t}.csv")) for t in TABLES),
                          key=lambda j: -Path(j[2]).stat().st_size)
            with multiprocessing.get_context("fork").Pool(self.workers, initializer=forked_worker) as pool:
                rows = dict(pool.imap_unordered(_copy_table, jobs))
            load_s = time.monotonic() - t0
            with connect(self.dsn, autocommit=True) as conn:
                for statement in _statements(sql("indexes")):
                    conn.execute(statement)
                conn.execute("VACUUM (FREEZE, ANALYZE)")
                conn.execute("CREATE TABLE refbench_load (scale_factor double precision)")
                conn.execute("INSERT INTO refbench_load VALUES (%s)", (scale_factor,))
        except psycopg.Error as exc:
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            raise UserError(f"loading the TPC-H tables into PostgreSQL failed: {first.rstrip('.')}.") from None
        return {"load_s": round(load_s, 2), "index_s": round(time.monotonic() - t0 - load_s, 2), "rows": rows}

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

    def run(self, query: str) -> tuple[list[tuple], float]:
        return self.main.run(query)

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
