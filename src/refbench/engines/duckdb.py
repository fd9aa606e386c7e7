"""DuckDB as refbench's column store: an in-process database in one file (placed on the storage under test),
loaded from the generated CSV files. "Cold" means the database closed and opened again: its buffer cache starts
empty, and the OS page cache is dropped separately by the caller."""

from __future__ import annotations

import json
import os
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any, Callable

from refbench.engines import Dataset, Placement, QueryTimeout, sql_statements
from refbench.engines.waits import shares
from refbench.errors import UserError


class DuckDb:
    def __init__(self, path: Path, memory_limit: str | None = None, threads: int | str | None = None):
        self.path = Path(path)
        self.settings = {k: v for k, v in (("memory_limit", memory_limit), ("threads", threads)) if v}
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


# DuckDB's operators by what their time is spent on, for the profile's events (the rest under their own name).
OPERATOR_KINDS = {
    "TABLE_SCAN": "scan", "READ_CSV": "scan", "READ_PARQUET": "scan", "SEQ_SCAN": "scan", "INDEX_SCAN": "scan",
    "HASH_JOIN": "join", "NESTED_LOOP_JOIN": "join", "PIECEWISE_MERGE_JOIN": "join", "IE_JOIN": "join",
    "CROSS_PRODUCT": "join", "DELIM_JOIN": "join", "LEFT_DELIM_JOIN": "join", "RIGHT_DELIM_JOIN": "join",
    "ASOF_JOIN": "join", "POSITIONAL_JOIN": "join", "BLOCKWISE_NL_JOIN": "join",
    "HASH_GROUP_BY": "aggregate", "PERFECT_HASH_GROUP_BY": "aggregate", "UNGROUPED_AGGREGATE": "aggregate",
    "SIMPLE_AGGREGATE": "aggregate", "WINDOW": "aggregate", "STREAMING_WINDOW": "aggregate",
    "ORDER_BY": "sort", "TOP_N": "sort",
    "FILTER": "filter and projection", "PROJECTION": "filter and projection",
}


class QueryProfiler:
    """Where DuckDB's query time goes, from its own profiler: for every query of the measured interval, the time its
    threads spent in each kind of operator (scans, joins, aggregates, sorts…), and within it the time reading blocks
    from storage and writing temporary files, which DuckDB times itself. The profile has the wait profile's shape
    (refbench.engines.waits.profile): shares of the query threads' time adding up to 100%, the reads' time as
    "IO:block read", the operators' own as "CPU:<kind>", and per second the busy threads in each class (each query's
    time spread over the seconds it ran).

    ``start()`` and ``stop()`` bracket the interval as a SessionSampler's do; the engine's connections profile their
    queries while it is started."""

    def __init__(self, engine: "DuckDbEngine"):
        self.engine = engine
        self._lock = threading.Lock()
        self._events: Counter[tuple[str, str]] = Counter()
        self._per_second: dict[int, dict[str, float]] = {}
        self._queries = 0
        self._reads = 0
        self._read_s = 0.0
        self._read_bytes = 0
        self._begin = 0.0
        self._cost_s = 0.0
        self._connections: dict[int, Any] = {}  # held, so that no other connection takes a profiled one's id

    def start(self) -> None:
        self._begin = time.monotonic()
        self.engine.profiler = self

    def enable(self, conn) -> None:
        """Profiling on for a connection, every statement (the refresh functions' too), until stop()."""
        with self._lock:
            if id(conn) not in self._connections:
                conn.execute("PRAGMA enable_profiling = 'no_output'")
                conn.execute("SET profiling_coverage = 'ALL'")
                self._connections[id(conn)] = conn

    def add(self, info: dict[str, Any], started: float, ended: float, cost_s: float = 0.0) -> None:
        """One query's profile (get_profiling_information as JSON), run from ``started`` to ``ended`` (monotonic);
        ``cost_s``: the time turning the profiler on and reading it back took."""
        operators: dict[str, float] = {}
        root = info.get("operator")
        stack = list(root) if isinstance(root, list) else [root or {}]
        while stack:
            node = stack.pop()
            kind = node.get("type") or ""
            if kind and kind != "RESULT_COLLECTOR":
                name = OPERATOR_KINDS.get(kind, kind.lower().replace("_", " "))
                operators[name] = operators.get(name, 0.0) + float(node.get("timing") or 0.0)
            stack += node.get("children") or []
        total = sum(operators.values())
        io = info.get("io") or {}
        read_s, write_s = float(io.get("total_read_time") or 0.0), float(io.get("total_write_time") or 0.0)
        # The reads and spills happen inside the operators' time: the operators keep the rest.
        own = max(total - read_s - write_s, 0.0) / total if total else 0.0
        events = {("CPU", name): t * own for name, t in operators.items() if t > 0}
        events |= {k: v for k, v in ((("IO", "block read"), read_s), (("IO", "temp write"), write_s)) if v > 0}
        with self._lock:
            self._queries += 1
            self._cost_s += cost_s
            self._reads += int(io.get("total_read_operations") or 0)
            self._read_s += read_s
            self._read_bytes += int(io.get("total_bytes_read") or 0)
            self._events.update(events)
            first, last = int(started - self._begin), int(ended - self._begin)
            span = max(ended - started, 1e-9)
            for second in range(max(first, 0), last + 1):
                overlap = min(ended, self._begin + second + 1) - max(started, self._begin + second)
                bucket = self._per_second.setdefault(second, {})
                for (kind, _), seconds in events.items():
                    bucket[kind] = bucket.get(kind, 0.0) + seconds * max(overlap, 0.0) / span

    def stop(self) -> dict[str, Any]:
        import duckdb

        self.engine.profiler = None
        for conn in self._connections.values():
            try:
                conn.execute("PRAGMA disable_profiling")
            except duckdb.Error:  # a stream's connection closed since
                pass
        self._connections.clear()
        wall = max(time.monotonic() - self._begin, 1e-9)
        with self._lock:
            total = sum(self._events.values())
            return {
                "source": "DuckDB's profiler", "of": "query thread time", "samples": self._queries,
                "session_samples": self._queries if total else 0,
                "avg_active_sessions": round(total / wall, 3), "busy_threads": round(total / wall, 3),
                **shares(self._events),
                "per_second": [{"second": sec, **{k: round(t, 3) for k, t in bucket.items()}}
                               for sec, bucket in sorted(self._per_second.items())],
                "profiling_cost_s": round(self._cost_s, 4),
                "io_latency": {"reads": self._reads, "read_ms": round(1000 * self._read_s, 3),
                               "ms_per_read": round(1000 * self._read_s / self._reads, 4) if self._reads else None,
                               "read_mb": round(self._read_bytes / 1e6, 3)},
            }


def _profiled(conn, profiler: QueryProfiler | None, run: Callable[[], tuple[list[tuple], float]]) -> tuple[list[tuple], float]:
    """``run`` with DuckDB's profiler on for the connection and its profile added to ``profiler``; turning it on (once
    per connection) and reading it back stay outside the query's own time, their cost kept beside the profile."""
    if profiler is None:
        return run()
    t0 = time.perf_counter()
    profiler.enable(conn)
    cost = time.perf_counter() - t0
    started = time.monotonic()
    rows, seconds = run()  # a query that fails or times out leaves no profile
    t1 = time.perf_counter()
    info = conn.get_profiling_information(format="json")
    profiler.add(json.loads(info), started, started + seconds, cost + time.perf_counter() - t1)
    return rows, seconds


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
    profiler: QueryProfiler | None = None  # while a QueryProfiler is started

    def __init__(self, path: Path, dataset: Dataset, memory_limit: str = "", threads: int | str = ""):
        self.db = DuckDb(path, memory_limit=memory_limit or None, threads=threads or None)
        self.dataset = dataset

    @classmethod
    def create(cls, dataset: Dataset, place: Placement) -> "DuckDbEngine":
        return cls(place.location, dataset, place.settings.get("memory_limit", ""), place.settings.get("threads", ""))

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
        conn = self.db.conn
        return _profiled(conn, self.profiler, lambda: _duckdb_run(conn, query, timeout_s))

    def session(self) -> "DuckDbSession":
        """Another connection to the same database, for a stream of its own (DuckDB runs them in parallel)."""
        return DuckDbSession(self.db.conn.cursor(), self)

    def wait_sampler(self) -> QueryProfiler:
        return QueryProfiler(self)

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
    def __init__(self, conn, engine: DuckDbEngine):
        self.conn, self.engine = conn, engine

    def run(self, query: str, timeout_s: float | None = None) -> tuple[list[tuple], float]:
        return _profiled(self.conn, self.engine.profiler, lambda: _duckdb_run(self.conn, query, timeout_s))

    def cancel(self) -> None:
        self.conn.interrupt()

    def close(self) -> None:
        self.conn.close()


ENGINE = DuckDbEngine
