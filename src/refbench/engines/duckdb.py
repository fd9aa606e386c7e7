"""DuckDB as refbench's column store: an in-process database in one file (placed on the storage under test),
loaded from the generated CSV files. "Cold" means the database closed and opened again: its buffer cache starts
empty, and the OS page cache is dropped separately by the caller."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any

from refbench.engines import Dataset, Placement, QueryTimeout, sql_statements
from refbench.errors import UserError


class DuckDb:
    def __init__(self, path: Path, memory_limit: str | None = None):
        self.path = Path(path)
        self.settings = {"memory_limit": memory_limit} if memory_limit else {}
        self.conn = None

    def open(self) -> "DuckDb":
        import duckdb

        self.close()
        self.conn = duckdb.connect(str(self.path), config={k: str(v) for k, v in self.settings.items()})
        return self

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None

    def restart(self) -> None:
        self.open()

    def execute(self, sql: str) -> list[tuple]:
        return self.conn.execute(sql).fetchall()

    def load_csv(self, table: str, csv: Path) -> int:
        self.conn.execute(f"COPY {table} FROM '{csv}' (FORMAT csv, HEADER true)")
        return self.conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]

    def version(self) -> str:
        return self.conn.execute("SELECT version()").fetchone()[0]


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
    """refbench.engines.Engine for DuckDB: no server, one database file."""

    name = "duckdb"
    title = "DuckDB"
    kind = "column store"
    in_process = True
    server = None
    dsn = ""

    def __init__(self, path: Path, dataset: Dataset, memory_limit: str = ""):
        self.db = DuckDb(path, memory_limit=memory_limit or None)
        self.dataset = dataset

    @classmethod
    def create(cls, dataset: Dataset, place: Placement) -> "DuckDbEngine":
        return cls(place.location, dataset, place.settings.get("memory_limit", ""))

    @classmethod
    def require_installed(cls) -> None:
        """In-process: the duckdb package is one of refbench's own dependencies."""

    @classmethod
    def check_dsn(cls, dsn: str) -> None:
        raise UserError("DuckDB runs inside refbench and has no server to connect to: drop the DSN.")

    @classmethod
    def reaches(cls, directory: Path) -> bool:
        return True  # refbench's own process writes the file

    @classmethod
    def managed_data_dir(cls, preferred: Path, fallback: Path) -> Path:
        return preferred

    def start(self) -> None:
        """Nothing to start: the database opens in refbench's process."""

    def stop(self) -> None:
        self.close()

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
            for statement in sql_statements(self.dataset.sql(self.name, "schema")):
                loader.execute(statement)
            rows = {t: loader.load_csv(t, data_dir / f"{t}.csv") for t in self.dataset.tables}
            loader.execute(f"CREATE TABLE refbench_load AS SELECT {scale_factor}::DOUBLE AS scale_factor")
            loader.execute("CHECKPOINT")
        except duckdb.Error as exc:
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            raise UserError(f"loading the {self.dataset.title} tables into DuckDB failed: {first.rstrip('.')}.") from None
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

    def data_location(self) -> Path:
        return self.db.path

    def data_files(self) -> list[Path] | None:
        return [p for p in (self.db.path, Path(f"{self.db.path}.wal")) if p.exists()]

    def server_pid(self) -> int:
        """refbench's own process: DuckDB's reads are its own (not its children's, a managed server among them)."""
        return os.getpid()

    def counters(self) -> dict[str, int]:
        """DuckDB counts no buffer hits and misses."""
        return {}

    def database_bytes(self) -> int | None:
        return self.db.path.stat().st_size if self.db.path.exists() else None

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
        for t in self.dataset.tables:
            blocks = self.db.execute(f"SELECT count(DISTINCT block_id) FROM pragma_storage_info('{t}') "
                                     "WHERE block_id IS NOT NULL")[0][0]
            tables[t] = blocks * block
        return {"tables_bytes": tables, "database_bytes": self.db.path.stat().st_size}

    def connect(self):
        """Another connection to the open database (DuckDB allows one database object per file in a process)."""
        if self.db.conn is None:
            self.db.open()
        return self.db.conn.cursor()

    def settings(self, names: list[str] | None = None) -> dict[str, str]:
        wanted = names or ["threads", "memory_limit", "max_temp_directory_size"]
        rows = self.db.execute("SELECT name, value FROM duckdb_settings() WHERE name IN ("
                               + ", ".join(f"'{n}'" for n in wanted) + ")")
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


ENGINE = DuckDbEngine
