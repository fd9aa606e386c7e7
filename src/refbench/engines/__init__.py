"""The real engines refbench drives: fio (I/O) and the SQL databases, one module each behind the one interface
below (postgres.py, duckdb.py, mariadb.py…). A suite asks for a database engine by name — ``open_engine("duckdb",
dataset, placement)`` — and never imports an engine's module or its client library: adding a database is one module
here, registered in ``_MODULES``, and its dialect's SQL files in the suites it supports.

What belongs to whom: the *suite* owns the workload — its tables, the generated files, its SQL files (the
``Dataset``); the *engine* owns how a database runs it — a managed server or a user's server (DSN), connections,
the bulk load, cold starts, counters, version and settings.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import re
import socket
import sys
import threading
import time
from dataclasses import dataclass, field
from importlib.resources import files
from pathlib import Path
from typing import Any, Callable, Iterator, Protocol

from refbench.engines.managed import ended_server
from refbench.errors import ServerGone, UserError

# name -> module; each module's ENGINE is its class. Imported only when asked for: a run with DuckDB alone never
# imports psycopg, and a refbench without one engine's client still runs the others.
_MODULES = {"duckdb": "refbench.engines.duckdb", "postgres": "refbench.engines.postgres",
            "mariadb": "refbench.engines.mariadb"}
# The schemes of a URI DSN, by engine. A libpq key=value string ('host=db1 dbname=tpch') has none and is
# PostgreSQL's: plans and the README have always given it that way.
_DSN_SCHEMES = {"postgresql": "postgres", "postgres": "postgres", "mysql": "mariadb", "mariadb": "mariadb"}


class QueryTimeout(Exception):
    """A query ran past its time limit and was cancelled by the engine."""

    def __init__(self, timeout_s: float):
        super().__init__(f"cancelled after the {timeout_s:g} s query timeout")
        self.timeout_s = timeout_s


# How long past its own limit refbench waits for a server that does not answer (a measurement window past its length,
# a query past its timeout) before it calls the server stalled and gives the call up.
ANSWER_BOUND_S = 30.0


def shut_socket(fd: int) -> None:
    """Shuts down the connection of socket ``fd``, from any thread: a call waiting on it returns at once, failed."""
    with contextlib.suppress(OSError), socket.socket(fileno=os.dup(fd)) as s:
        s.shutdown(socket.SHUT_RDWR)  # the connection's, not only the duplicate descriptor's


@contextlib.contextmanager
def answered_by(fd: int, deadline: float) -> Iterator[threading.Event]:
    """Holds the calls made inside on the connection of socket ``fd`` to ``deadline`` (time.time()): a server that has
    not answered by then has the socket shut under the call, which fails at once. A stopped server (SIGSTOP, storage
    that hangs) keeps no timeout of its own, and its kernel keeps the connection alive, so without this the call would
    wait for ever. The event yielded is set once the socket is shut: the connection is of no more use."""
    shut = threading.Event()

    def shut_down() -> None:
        shut.set()
        shut_socket(fd)

    timer = threading.Timer(max(0.0, deadline - time.time()), shut_down)
    timer.daemon = True
    timer.start()
    try:
        yield shut
    finally:
        timer.cancel()


@contextlib.contextmanager
def answered_in_time(fd: int, timeout_s: float | None, server: str) -> Iterator[Callable[[], None]]:
    """A query on socket ``fd`` held to its timeout (which the server keeps, and a stopped one does not) and
    ANSWER_BOUND_S more. Yields what the caller calls on a client error: a ServerGone when it was this that shut the
    connection. Without a timeout, the query waits as long as it takes."""
    if not timeout_s:
        yield lambda: None
        return
    with answered_by(fd, time.time() + timeout_s + ANSWER_BOUND_S) as shut:
        def given_up() -> None:
            if shut.is_set():
                raise ServerGone(f"the {server} server did not answer a query within its {timeout_s:g} s timeout and "
                                 f"{ANSWER_BOUND_S:g} s more: it stopped answering") from None

        yield given_up


@dataclass(frozen=True)
class Dataset:
    """A suite's tables and SQL files. The SQL of script ``name`` for an engine is ``sql/<engine>/<name>.sql`` in
    ``package`` when the engine has its own dialect of it, else the common ``sql/<name>.sql``.

    Scripts an engine's ``load`` runs: ``schema`` (the tables; required), then, for a row store, ``indexes`` (one
    CREATE INDEX per statement, built in parallel) and ``keys`` (constraints on them; MariaDB adds its keys to the
    empty tables, before the load, as its keys.sql says)."""

    name: str                 # the database's name on a server, e.g. "tpch"
    title: str                # as the workload is called in messages, e.g. "TPC-H"
    tables: tuple[str, ...]   # loaded from <data_dir>/<table>.csv (with a header line)
    package: str              # the suite's package, holding sql/

    def sql(self, engine: str, name: str) -> str:
        base = files(self.package).joinpath("sql")
        own = base.joinpath(engine, f"{name}.sql")
        return (own if own.is_file() else base.joinpath(f"{name}.sql")).read_text()


@dataclass(frozen=True)
class Placement:
    """Where and how a suite wants its engine. ``location`` is the database file of an in-process engine, or the
    data directory of a managed server (initialised there, on the storage under test); ``dsn``, when given,
    replaces the managed server with the user's. ``settings`` are the engine's own (a managed server's
    name -> value, or an in-process engine's configuration, e.g. DuckDB's memory_limit); ``cache_bytes`` bounds the
    page cache of a managed server's files while measuring (0: unbounded); ``workers`` is how many connections a
    load uses at once; ``log_dir``, when given, is where a managed server keeps its write-ahead log instead of its data
    directory (PostgreSQL's pg_wal: initdb --waldir; MariaDB's redo log: innodb_log_group_home_dir), e.g. on another
    device."""

    location: Path
    dsn: str = ""
    settings: dict[str, str] = field(default_factory=dict)
    password_file: Path | None = None
    cache_bytes: int = 0
    workers: int = 1
    log_dir: Path | None = None


class Session(Protocol):
    """One connection of its own, for a stream of queries running beside others."""

    def run(self, query: str, timeout_s: float | None = None) -> tuple[list[tuple], float]:
        """The query's rows and its time in seconds (the engine's execution and the fetch); past ``timeout_s``
        the engine cancels it and QueryTimeout is raised."""

    def cancel(self) -> None:
        """Cancels the query running now, from another thread."""

    def close(self) -> None: ...


class ManagedServer(Protocol):
    """A database server refbench runs itself: its own account's processes, a unix socket and 127.0.0.1 only."""

    data_dir: Path            # on the storage under test
    log_file: Path
    port: int                 # on 127.0.0.1
    password_file: Path | None
    bound: Any                # host.cachebound.Bound of its page cache, or None
    process: Any              # the server's main process (subprocess.Popen) while it runs

    def start(self) -> None: ...
    def stop(self) -> None: ...
    def restart(self) -> None:
        """Stops and starts it again on the same port and socket: its buffer cache starts empty."""


class Engine(Protocol):
    """A SQL database a suite loads a Dataset into and queries. Sizes are bytes, times seconds."""

    name: str                 # the registry's name: "postgres", "duckdb", "mariadb"
    title: str                # as people write it: "PostgreSQL", "DuckDB"
    kind: str                 # "row store" or "column store"
    in_process: bool          # runs inside refbench (its I/O is refbench's own), not as a server
    server: ManagedServer | None  # the managed server; None in-process or for a user's server (a DSN)
    dsn: str                  # how to reach a server ("" in-process)

    @classmethod
    def create(cls, dataset: Dataset, place: Placement) -> "Engine":
        """The engine for ``dataset`` at ``place``; nothing is started or written until start()."""

    # ---- checks before a run writes anything (classmethods: no engine exists yet) ----
    @classmethod
    def require_installed(cls) -> None:
        """A UserError naming what to install when the managed server's binaries are missing."""

    @classmethod
    def check_dsn(cls, dsn: str) -> None:
        """Connects once to a user's server: a UserError in one sentence if it cannot."""

    @classmethod
    def reaches(cls, directory: Path) -> bool:
        """Whether the managed server's account can reach ``directory`` (as root the server runs as another user)."""

    @classmethod
    def managed_data_dir(cls, preferred: Path, fallback: Path) -> Path:
        """``preferred`` if the server's account can reach it, else ``fallback``, opened to it."""

    # ---- lifecycle ----
    def start(self) -> None:
        """Starts the managed server (initialising its data directory) and creates the dataset's database; for a
        user's server or an in-process engine, nothing."""

    def stop(self) -> None:
        """Closes the connections and stops the managed server."""

    # ---- data ----
    def loaded(self, scale_factor: float) -> bool:
        """Whether the dataset is already loaded, complete, at this scale factor (a load is reused then)."""

    def load(self, data_dir: Path, scale_factor: float) -> dict[str, Any]:
        """Drops and bulk-loads every table from ``data_dir``/<table>.csv, with the indexes and keys of a row store.
        Returns at least {"load_s": seconds, "rows": {table: rows}}; a failure is a UserError."""

    # ---- queries ----
    def connect(self) -> Any:
        """A new connection of the engine's client library (DB-API, autocommit) to the dataset's database, for a
        suite's own SQL in the engine's dialect; a context manager that closes it."""

    def open(self) -> None:
        """Opens the main connection that run() uses."""

    def close(self) -> None: ...

    def run(self, query: str, timeout_s: float | None = None) -> tuple[list[tuple], float]:
        """As Session.run, on the main connection."""

    def session(self) -> Session:
        """Another connection, for a stream of its own."""

    def cold(self) -> str:
        """Empties the engine's own buffer cache (a restart, a reopen) and reopens; says how, in words. The OS page
        cache is the caller's (data_files)."""

    # ---- files, counters and the report ----
    def data_location(self) -> Path | None:
        """Where the engine's data is on this host (a database file, a data directory); None for a user's server."""

    def data_files(self) -> list[Path] | None:
        """The data files to evict from the OS page cache before a cold query; None when they are not refbench's
        (a user's server)."""

    def server_pid(self) -> int | None:
        """The process whose /proc/PID/io (with its children's, unless in_process) is the engine's own I/O; None when
        it is not ours to read."""

    def counters(self) -> dict[str, int]:
        """Cumulative buffer cache counters: blocks_hit, blocks_read (asked of the OS), block_bytes and
        database_bytes; {} when the engine counts none. Where the engine times its I/O, also read_time_ms (and
        timed_reads when it counts its timed reads itself), wal_syncs, wal_sync_ms, wal_writes and wal_write_ms,
        and where it counts them wal_records, wal_fpi, wal_bytes, checkpoints_timed and checkpoints_requested
        (storage.io_latency reads them). An engine whose sessions can be sampled also offers
        ``wait_sampler()``: a SessionSampler (refbench.engines.waits; PostgreSQL, MariaDB) or, where there are no
        sessions to sample, an object with the same start() and stop() giving a profile of the same shape (DuckDB's
        QueryProfiler)."""

    def usage(self) -> dict[str, int]:
        """Cumulative bytes written to temporary files (temp_bytes) and the log (wal_bytes), and bytes of tables and
        indexes the executor consumed (logical_read_bytes), where the engine counts them."""

    def database_bytes(self) -> int | None:
        """The database's size now."""

    def sizes(self) -> dict[str, Any]:
        """{"tables_bytes": {table: bytes}, "database_bytes": bytes[, "indexes_bytes": {table: bytes}]}."""

    def settings(self, names: list[str] | None = None) -> dict[str, str]:
        """The version and the settings that shape the figures, for the report: ``names`` (the engine's own names),
        or by default those that shape a query workload's."""


class TransactionFailed(Exception):
    """A virtual user's call failed in a way after which going on would only measure the failure (a lost connection,
    a full disk, missing procedures): the case ends, and the message says what happened, in words."""


class ConnectionLost(TransactionFailed):
    """The server closed a virtual user's connection, or was shut down under it: the server is gone, not the input."""


class TransactionClient(Protocol):
    """One virtual user's own connection, calling the workload's transactions: each is one statement (a server-side
    function or stored procedure of the dataset's SQL files) given by the suite as ``calls`` (transaction -> the
    statement in the engine's dialect, parameters as the engine's client marks them). Parameters are text (bytes) or
    None. An outcome is "ok", "rollback" (the transaction ended with ``rollback_code``, its designed rollback) or the
    error code of any other error (counted as an error); TransactionFailed ends the case.

    Two ways to call, so that one process drives many users: ``call`` waits for the outcome; ``send`` returns at once,
    and ``receive`` is called when ``fileno()`` is readable (select/epoll), returning None until the whole outcome
    has arrived."""

    def fileno(self) -> int: ...
    def call(self, tx: str, params: list[bytes | None]) -> str: ...
    def send(self, tx: str, params: list[bytes | None]) -> None: ...
    def receive(self) -> str | None: ...
    def close(self) -> None: ...


class Transactional(Protocol):
    """What an OLTP workload asks of a server engine beside Engine, for a started engine's database (``create``):
    the user's rights, the bulk load of generated rows, the indexes, statistics and transactions' procedures after it,
    the counters the figures come from, the server's CPU, and the virtual users' clients. The SQL is the dataset's (its
    files per engine); the engine supplies how its server runs it. Picklable: loader processes receive it."""

    name: str                 # the engine's registry name
    dataset: Dataset
    new_order_lines: str  # how New-Order's lines are passed: "arrays" (three int[]) or "json" (one array of triples)

    @classmethod
    def create(cls, engine: "Engine", dataset: Dataset) -> "Transactional": ...

    def check_user(self, users: int, own: int) -> None:
        """A UserError in one sentence when the user may not build the schema and its procedures, or the server
        cannot take a connection for each of ``users`` virtual users and ``own`` of refbench's."""

    def loaded_warehouses(self) -> int | None:
        """The warehouses of a complete earlier load, or None."""

    def create_schema(self) -> None:
        """Drops the dataset's tables and creates them empty (schema)."""

    def loader(self) -> Any:
        """A connection for one loader process, a context manager committing its rows once at the end."""

    def copy_rows(self, conn: Any, table: str, columns: str, rows: Any) -> int: ...

    def copy_lines(self, conn: Any, table: str, columns: str, lines: Any) -> int:
        """Bulk load of rows already in COPY's text format (tab-separated, \\N for NULL, one per line)."""

    def finish_tables(self, tables: list[str], workers: int) -> None:
        """The indexes (indexes) and statistics of the loaded tables, largest first, ``workers`` at once."""

    def install(self, transactions: list[str]) -> None:
        """The transactions' functions or procedures, one SQL file each."""

    def mark_loaded(self, warehouses: int, rows: int) -> None:
        """Records the load as complete, and writes it out so that the first measurement does not pay for it."""

    def sizes(self) -> dict[str, Any]: ...

    def connect(self) -> Any:
        """A DB-API connection (autocommit) to the database, for the suite's own SQL in the engine's dialect; its
        ``fileno()`` is its socket's."""

    def script(self, conn: Any, text: str, params: dict[str, Any]) -> tuple:
        """Runs an SQL script's statements in order on ``conn`` (``params`` for those that name them); the row of the
        one statement that returns rows."""

    def counters(self, conn: Any) -> dict[str, int]:
        """sum_d_next_o_id (NOPM's counter), xact_commit and xact_rollback (TPM's), cumulative."""

    def server_cpu(self, conn: Any) -> Any:
        """A function giving the server's CPU seconds so far, or None when the server is not on this host."""

    def client(self, calls: dict[str, str], rollback_code: str) -> TransactionClient: ...

    def failure(self, exc: BaseException) -> str | None:
        """The first line of a client library error's message (a full disk, a lost server), None for other errors."""


class ServerEngine:
    """What the engines with a server (managed, or a user's behind a DSN) share: the dataset's database on it, the
    main connection run() uses, restarts for a cold cache, the server's files and process. A subclass sets ``title``,
    ``buffer_cache`` (its cache's name, for cold()'s words), ``Session`` (its session class, opened on a DSN) and
    ``Managed`` (its managed server's class)."""

    title: str
    buffer_cache: str
    Session: Any
    Managed: Any  # the managed server's class: (data_dir, settings, password_file, cache_bytes=…)

    @classmethod
    def create(cls, dataset: Dataset, place: Placement) -> "ServerEngine":
        if place.dsn:
            return cls(place.dsn, None, place.workers, dataset)
        server = cls.Managed(place.location, place.settings, place.password_file, cache_bytes=place.cache_bytes,
                             **({"log_dir": place.log_dir} if place.log_dir else {}))
        return cls("", server, place.workers, dataset)

    def __init__(self, dsn: str, server: Any, workers: int, dataset: Dataset):
        """``dsn`` is the dataset's database; for a managed ``server`` not started yet, "" until start()."""
        self.dsn, self.server, self.workers, self.dataset = dsn, server, max(1, workers), dataset
        self.main: Any = None

    def start(self) -> None:
        if self.server is not None:
            self.server.start()
            self.dsn = self.server.database(self.dataset.name)

    def stop(self) -> None:
        self.close()
        if self.server is not None:
            self.server.stop()

    def open(self) -> None:
        if self.main is None:
            self.main = self.session()

    def close(self) -> None:
        if self.main is not None:
            self.main.close()
            self.main = None

    def session(self) -> Session:
        return self.Session(self.dsn)

    def run(self, query: str, timeout_s: float | None = None) -> tuple[list[tuple], float]:
        return self.main.run(query, timeout_s)

    def cold(self) -> str:
        self.close()
        if self.server is not None:
            self.server.restart()
            how = f"{self.title} restarted"
        else:
            how = f"a new connection (a user's server keeps its {self.buffer_cache})"
        self.open()
        return how

    def data_location(self) -> Path | None:
        return None if self.server is None else self.server.data_dir

    def server_pid(self) -> int | None:
        if self.server is None or self.server.process is None:
            return None
        return self.server.process.pid

    def database_bytes(self) -> int | None:
        return self.counters()["database_bytes"]

    def local_server_pid(self) -> int | None:
        """The server's root process when it runs on this host: the managed one's, or a user's found from the main
        connection (find_local_pid); None for a server elsewhere or one this user may not see. For the machine's
        split of a measured interval (refbench.host.contention), not for the server's own I/O, which is the
        managed server's alone."""
        if self.server is not None:
            return self.server_pid()
        if getattr(self, "_local_pid", None) is None:
            self._local_pid = 0
            try:
                session = self.main or self.session()
                try:
                    self._local_pid = self.find_local_pid(session.conn) or 0
                finally:
                    if session is not self.main:
                        session.close()
            except Exception:  # a server that cannot say: no split of its time, and the run goes on
                pass
        return self._local_pid or None

    def find_local_pid(self, conn: Any) -> int | None:
        """A user's server's root process on this host, from one of its connections; None when it is elsewhere."""
        return None


def sql_statements(text: str) -> list[str]:
    """The statements of an SQL script, its comment lines left out."""
    lines = [line for line in text.splitlines() if not line.lstrip().startswith("--")]
    return [s.strip() for s in "\n".join(lines).split(";") if s.strip()]


def names() -> tuple[str, ...]:
    """Every engine refbench knows by name."""
    return tuple(_MODULES)


def get_engine(name: str) -> type[Engine]:
    """The engine class registered as ``name``."""
    if name not in _MODULES:
        raise UserError(f"there is no engine '{name}'; refbench knows {', '.join(_MODULES)}.")
    try:
        module = importlib.import_module(_MODULES[name])
    except ModuleNotFoundError as exc:
        if exc.name != _MODULES[name]:
            raise
        raise UserError(f"the {name} engine is not part of this refbench yet.") from None
    return module.ENGINE


def transactional(engine: Engine, dataset: Dataset) -> Transactional:
    """The OLTP side of a started ``engine`` (its module's TRANSACTIONAL), for ``dataset``."""
    module = importlib.import_module(_MODULES[engine.name])
    kind = getattr(module, "TRANSACTIONAL", None)
    if kind is None:
        raise UserError(f"the {engine.title} engine does not run OLTP transactions.")
    return kind.create(engine, dataset)


def open_engine(name: str, dataset: Dataset, place: Placement) -> Engine:
    """The engine ``name`` for ``dataset`` at ``place``, not started yet."""
    return get_engine(name).create(dataset, place)


def engine_for_dsn(dsn: str) -> str:
    """The engine a connection string is for: postgresql:// and postgres:// (or a libpq key=value string) are
    PostgreSQL's, mysql:// and mariadb:// MariaDB's."""
    scheme = re.match(r"\s*([A-Za-z][A-Za-z0-9+.-]*)://", dsn)
    if scheme is None:
        if re.match(r"\s*[A-Za-z_]+\s*=", dsn):
            return "postgres"
        raise UserError("the DSN is neither a URI (postgresql://…, mysql://…) nor a libpq key=value string.")
    engine = _DSN_SCHEMES.get(scheme.group(1).lower())
    if engine is None:
        raise UserError(f"the DSN's scheme '{scheme.group(1)}://' names no engine refbench drives; use postgresql://, "
                        "postgres://, mysql:// or mariadb://.")
    return engine


def last_server_failure() -> str | None:
    """What the last managed server of this process that failed logged, in a sentence, or that it ended (killed,
    crashed): a server that stops (a PostgreSQL PANIC, a MariaDB that waits for disk space) leaves its clients only a
    lost or silent connection, so its log is where the reason is. Asks only the engines this process imported: the
    others ran no server."""
    for module_name in _MODULES.values():
        module = sys.modules.get(module_name)
        if module is not None and hasattr(module, "last_panic") and (failure := module.last_panic()):
            return f"the managed {module.ENGINE.title} stopped: {failure}"
    return ended_server()
