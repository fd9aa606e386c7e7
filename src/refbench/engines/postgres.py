"""PostgreSQL: a managed instance refbench starts and stops itself, or the user's server through a DSN.

The managed instance is initdb'd into a data directory the user can place on the storage under test, and runs with
the settings refbench passes on the command line (so the report records exactly what ran). PostgreSQL refuses to
run as root; as root, refbench runs it as the ``postgres`` system user.

Nobody else on the machine gets in: the server listens on a unix socket in a directory only its account can enter
(mode 0700), which refbench's own clients use, and on 127.0.0.1, where every connection needs the password refbench
generates (SCRAM; in a 0600 file of the run, for a person who wants to look in while it runs). pg_hba.conf is
rewritten on every start, so a data directory from an older refbench is closed too.

It does not outlive refbench: ``postgres`` is refbench's own child (not daemonized by pg_ctl), gets a fast shutdown
(SIGINT) from the kernel when refbench's main thread ends, and refbench's watchdog (refbench.children) stops it and
removes its socket directory after a kill -9.
"""

from __future__ import annotations

import functools
import os
import pwd
import re
import signal
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from refbench.engines import (
    ConnectionLost, Dataset, QueryTimeout, ServerEngine, TransactionFailed, answered_in_time, sql_statements,
)
from refbench.engines.managed import (ManagedProcess, ServerDidNotStart, account_can as _account_can,
                                      as_account as _as_account)
from refbench.errors import UserError
from refbench.fileio import atomic_write_text
from refbench.engines.waits import POSTGRES_ACTIVE_SESSIONS, RunQueueWatch, SessionSampler
from refbench.host.cachebound import Bound
from refbench.host.pagecache import files_under
from refbench.host.inventory import postgres_binary
from refbench.redaction import redact

__all__ = ["ENGINE", "TRANSACTIONAL", "ManagedPostgres", "PostgresEngine", "PostgresTransactional", "block_counts", "connect", "managed_data_dir", "redact", "require_server_binaries", "server_settings"]

SUPERUSER = "refbench"
START_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 120.0

HBA = """\
# Written by refbench each time it starts this server: changes made here are overwritten.
# The unix socket may trust its clients because its directory is mode 0700 and owned by the server's account:
# nobody but that account and root can reach it.
local   all   all                  trust
# TCP on loopback only, and only with the password refbench generated for the run (its secrets/ directory).
host    all   all   127.0.0.1/32   scram-sha-256
host    all   all   ::1/128        scram-sha-256
"""


def _binary(name: str) -> str:
    path = postgres_binary(name)
    if not path:
        raise UserError(f"the PostgreSQL server is not installed ({name} not found); install it with "
                        "'apt-get install postgresql' (make demo does this), or pass --dsn to use your own server.")
    return path


def _run_as() -> pwd.struct_passwd | None:
    """The account the server runs under: ourselves, or 'postgres' when we are root."""
    if os.geteuid() != 0:
        return None
    try:
        return pwd.getpwnam("postgres")
    except KeyError:
        raise UserError("refbench runs as root, which PostgreSQL refuses, and there is no 'postgres' user to run it as; "
                        "run refbench as another user or install the postgresql package.") from None


class ManagedPostgres(ManagedProcess):
    """initdb / start / stop of a private PostgreSQL server. ``password_file`` keeps the TCP password (a file of the
    run, so that a resumed run keeps it); without one the password lives in memory only. ``cache_bytes`` bounds the
    page cache of the server's files while a case is measured (host.cachebound); 0 leaves it unbounded. ``log_dir``:
    where the WAL goes (initdb --waldir; pg_wal is then a link to it), e.g. on another device than the data."""

    socket_prefix = "refbench-pg-"
    title = "PostgreSQL"
    error_line = re.compile(r"\b(?:FATAL|PANIC|ERROR):.*")

    def __init__(self, data_dir: Path, settings: dict[str, str], password_file: Path | None = None,
                 cache_bytes: int = 0, log_dir: Path | None = None):
        self.data_dir = Path(data_dir).absolute()
        self.log_dir = Path(log_dir).absolute() if log_dir else None
        self.settings = dict(settings)
        self.password_file = Path(password_file).absolute() if password_file else None
        self.account = _run_as()
        self.log_file = self.data_dir.parent / f"{self.data_dir.name}.log"
        self.bound = Bound(cache_bytes, self.data_dir / "base") if cache_bytes else None
        self._init_process()

    @staticmethod
    def reachable(directory: Path) -> bool:
        """Whether the server's account can reach ``directory`` (root's home, for one, is closed to it)."""
        account = _run_as()
        probe = Path(directory)
        while not probe.exists():
            probe = probe.parent
        return _account_can(account, "-x", probe)

    def can_read(self, path: Path) -> bool:
        """Whether the server itself can read ``path`` (for a server-side COPY FROM a file)."""
        return _account_can(self.account, "-r", path)

    @property
    def dsn(self) -> str:
        return f"host={self.socket_dir} port={self.port} user={SUPERUSER} dbname=postgres"

    def database(self, name: str) -> str:
        """The DSN of database ``name`` on this server, created if it does not exist yet."""
        with connect(self.dsn, autocommit=True) as conn:
            if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone():
                conn.execute(f'CREATE DATABASE "{name}"')
        return self.dsn.replace("dbname=postgres", f"dbname={name}")

    def _run(self, argv: list[str], what: str) -> subprocess.CompletedProcess:
        result = subprocess.run(argv, capture_output=True, text=True, start_new_session=True, stdin=subprocess.DEVNULL,
                                **_as_account(self.account))
        if result.returncode != 0:
            detail = _last_error(result.stderr + result.stdout + _tail(self.log_file))
            raise ServerDidNotStart(f"PostgreSQL {what} of {self.data_dir} failed: {detail}.")
        return result

    def initialize(self) -> bool:
        """initdb when the data directory is new; returns True if it did."""
        if (self.data_dir / "PG_VERSION").exists():
            return False
        self.data_dir.mkdir(parents=True, exist_ok=True)
        if any(self.data_dir.iterdir()):
            raise ServerDidNotStart(f"{self.data_dir} is not empty and is not a PostgreSQL data directory; choose another --data-dir.")
        self._own(self.data_dir)
        if not _account_can(self.account, "-w", self.data_dir):
            raise ServerDidNotStart(f"the postgres system user cannot reach {self.data_dir}: a parent directory is closed to other "
                            "users (chmod o+x it, or choose another --data-dir).")
        self.log_file.touch()
        self._own(self.log_file)
        waldir = []
        if self.log_dir is not None:
            self.log_dir.mkdir(parents=True, exist_ok=True)
            if any(self.log_dir.iterdir()):
                raise ServerDidNotStart(f"{self.log_dir} is not empty; the WAL needs a directory of its own (log_dir).")
            self._own(self.log_dir)
            waldir = [f"--waldir={self.log_dir}"]
        # Host connections are rejected until start() writes the real pg_hba.conf and sets the password.
        self._run([_binary("initdb"), "-D", str(self.data_dir), "-U", SUPERUSER, "--auth-local=trust",
                   "--auth-host=reject", "-E", "UTF8", "--no-locale", "--no-instructions", *waldir], "initdb")
        return True

    def start(self) -> None:
        self.initialize()
        self._open()
        self._launch()
        self._set_password()

    def _launch(self) -> None:
        self._write_hba()
        # refbench's own settings last: a plan's pg_settings cannot move the server off loopback or the closed socket.
        # The server times its own I/O (the reads and WAL flushes the wait profile explains); a plan may turn it off.
        options = {"track_io_timing": "on", "track_wal_io_timing": "on", **self.settings, "port": str(self.port),
                   "listen_addresses": "127.0.0.1",
                   "unix_socket_directories": str(self.socket_dir)}
        argv = [_binary("postgres"), "-D", str(self.data_dir)]
        for name, value in options.items():
            argv += ["-c", f"{name}={value}"]
        _LAUNCHED[self.log_file] = self.log_file.stat().st_size if self.log_file.exists() else 0
        # SIGINT is a fast shutdown; after a kill -9 of refbench, then immediate (which still stops the backends).
        self._spawn(argv, signal.SIGINT, 5.0, (signal.SIGINT, signal.SIGQUIT, signal.SIGKILL))
        self._wait_until_ready()

    def _wait_until_ready(self) -> None:
        """As pg_ctl -w does: until postmaster.pid names our process and says "ready"."""
        assert self.process is not None
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            if self.process.poll() is not None:
                self._stop_own()
                raise self._did_not_start()
            try:
                lines = (self.data_dir / "postmaster.pid").read_text().splitlines()
            except OSError:
                lines = []
            if len(lines) >= 8 and lines[0].strip() == str(self.process.pid) and lines[7].strip() == "ready":
                return
            if time.monotonic() > deadline:
                self._stop_own()
                raise self._did_not_start(f"did not accept connections within {START_TIMEOUT_S:g} s")
            time.sleep(0.05)

    def _write_hba(self) -> None:
        path = self.data_dir / "pg_hba.conf"
        atomic_write_text(path, HBA, mode=0o600)
        self._own(path)

    def _set_password(self) -> None:
        from psycopg import sql

        with connect(self.dsn, autocommit=True) as conn:
            # Sent as its SCRAM verifier, so the password itself is in no statement the server could log.
            verifier = conn.pgconn.encrypt_password(self.password.encode(), SUPERUSER.encode(), b"scram-sha-256")
            conn.execute(sql.SQL("ALTER ROLE {} PASSWORD {}").format(sql.Identifier(SUPERUSER),
                                                                     sql.Literal(verifier.decode())))

    def _stop_own(self) -> None:
        """Fast shutdown of the server this object started, as pg_ctl -m fast, and immediate if that hangs."""
        steps = [(signal.SIGINT, STOP_TIMEOUT_S), (signal.SIGQUIT, 10.0), (signal.SIGKILL, None)]
        if self.process is not None and _panic_since_launch(self.log_file):
            # Crash recovery after a PANIC on a full disk can spin without heeding a fast shutdown (two minutes
            # seen); there is nothing clean left to shut down, so immediate it is.
            steps = steps[1:]
        self._shut_down(steps)

    def stop_stale(self) -> None:
        """Stops a server of this data directory that another process started (a refbench that was killed)."""
        if (self.data_dir / "postmaster.pid").exists():
            subprocess.run([_binary("pg_ctl"), "-D", str(self.data_dir), "-m", "fast", "-w", "-t", "120", "stop"],
                           capture_output=True, start_new_session=True, **_as_account(self.account))


# The log of every server this process launched, and its size then: what a server logged since is this run's.
_LAUNCHED: dict[Path, int] = {}


def last_panic() -> str | None:
    """The last PANIC a server this process launched logged, with its log's path: a PANIC stops the whole server,
    and its clients see only a lost connection, so the log is where the reason is (a full disk for its WAL, say)."""
    found = None
    for log in _LAUNCHED:
        found = _panic_since_launch(log) or found
    return found


def _panic_since_launch(log: Path) -> str | None:
    try:
        with open(log, "rb") as f:
            f.seek(_LAUNCHED.get(log, 0))
            lines = f.read().decode(errors="replace").splitlines()
    except OSError:
        return None
    panics = [line.split("PANIC:", 1)[1].strip() for line in lines if "PANIC:" in line]
    return f"PANIC: {panics[-1]} (its log: {log})" if panics else None


def managed_data_dir(preferred: Path, fallback: Path, reachable=None) -> Path:
    """``preferred`` if the server's account can reach it (``reachable``, PostgreSQL's by default; MariaDB passes
    its own); otherwise ``fallback`` (a checkout in root's home is closed to the postgres account), created with its
    parents open to it."""
    if (reachable or ManagedPostgres.reachable)(preferred.parent):
        return preferred
    fallback.parent.mkdir(parents=True, exist_ok=True)
    for part in fallback.parents:
        if part in (Path("/var/tmp"), Path("/tmp"), Path("/")):
            break
        part.chmod(0o755)
    return fallback


def require_server_binaries() -> None:
    for name in ("initdb", "pg_ctl", "postgres"):
        _binary(name)


def connect(dsn: str, **kwargs: Any):
    """A psycopg connection, with a one-sentence UserError for the failures a user can cause."""
    import psycopg

    try:
        return psycopg.connect(dsn, connect_timeout=10, **kwargs)
    except psycopg.OperationalError as exc:
        raise UserError(f"cannot connect to PostgreSQL at '{redact(dsn)}': {_last_error(str(exc))}.") from None


def run_in_parallel(dsn: str, groups: list[list[str]], workers: int, settings: dict[str, str]) -> None:
    """Each group of statements in order on a connection of its own (``settings`` SET on it first), ``workers``
    groups at once, started in the order given (the longest first); the first failure is raised. A load's index
    builds and vacuums each use one or two CPUs, and the largest table's alone takes minutes."""
    def run(group: list[str]) -> None:
        with connect(dsn, autocommit=True) as conn:
            for name, value in settings.items():
                conn.execute(f"SET {name} = '{value}'")
            for statement in group:
                conn.execute(statement)

    with ThreadPoolExecutor(max(1, workers)) as pool:
        list(pool.map(run, groups))


def block_counts(dsn: str) -> dict[str, float]:
    """The database's cumulative buffer cache counters: blocks found in shared_buffers (hit) and blocks asked of the
    OS (read, from its page cache or from storage), with the block size and the database's size; and the I/O as the
    server times it: the time its block reads took (track_io_timing) and its WAL flushes and the time they took
    (pg_stat_wal, PostgreSQL 14 on, timed with track_wal_io_timing); the WAL written, how much of it full-page images,
    and the checkpoints, timed or requested (by WAL volume reaching max_wal_size, or by a command)."""
    with connect(dsn, autocommit=True) as conn:
        row = conn.execute("SELECT blks_read, blks_hit, current_setting('block_size')::int, "
                           "pg_database_size(current_database()), blk_read_time FROM pg_stat_database "
                           "WHERE datname = current_database()").fetchone()
        out: dict[str, float] = dict(zip(("blocks_read", "blocks_hit", "block_bytes", "database_bytes"), map(int, row[:4])))
        out["read_time_ms"] = float(row[4])
        timing = ["track_io_timing"] + (["track_wal_io_timing"] if conn.info.server_version >= 140000 else [])
        if off := [name for name, value in server_settings(conn, timing).items() if value != "on"]:
            out["io_timing_off"] = off  # the times above stay 0: say so rather than print a time per read of nothing
        version = conn.info.server_version
        if 140000 <= version < 180000:  # 18 moved the WAL's write and sync counts to pg_stat_io
            syncs, sync_ms, writes, write_ms = conn.execute(
                "SELECT wal_sync, wal_sync_time, wal_write, wal_write_time FROM pg_stat_wal").fetchone()
            out |= {"wal_syncs": int(syncs), "wal_sync_ms": float(sync_ms), "wal_writes": int(writes),
                    "wal_write_ms": float(write_ms)}
        if version >= 140000:
            records, fpi, wal_bytes = conn.execute("SELECT wal_records, wal_fpi, wal_bytes FROM pg_stat_wal").fetchone()
            out |= {"wal_records": int(records), "wal_fpi": int(fpi), "wal_bytes": int(wal_bytes)}
        # 17 moved the checkpoint counters to a view of their own.
        timed, requested = conn.execute("SELECT num_timed, num_requested FROM pg_stat_checkpointer" if version >= 170000
                                        else "SELECT checkpoints_timed, checkpoints_req FROM pg_stat_bgwriter").fetchone()
        out |= {"checkpoints_timed": int(timed), "checkpoints_requested": int(requested)}
        if (written := written_bytes(conn, version)) is not None:
            out["written_bytes"] = written
    return out


def written_bytes(conn, version: int) -> int | None:
    """The bytes the whole server has written to its files so far, as its own counters count them (what the device
    was asked to write, not what the kernel charged its processes: a page dirtied again after its fdatasync is
    charged to /proc/PID/io whole each time). WAL: at least one WAL page per write, since each write rewrites the
    page its last record ends in; data pages: the checkpointer's, the background writer's and the backends'; and
    temporary files. None before PostgreSQL 14 (no pg_stat_wal)."""
    if version < 140000:
        return None
    if version >= 160000:  # every backend type's writes of relation pages, in pg_stat_io
        data = conn.execute("SELECT coalesce(sum(" + ("write_bytes" if version >= 180000 else "writes * op_bytes")
                            + "), 0) FROM pg_stat_io WHERE object = 'relation'").fetchone()[0]
    else:
        data = conn.execute("SELECT (buffers_checkpoint + buffers_clean + buffers_backend) "
                            "* current_setting('block_size')::bigint FROM pg_stat_bgwriter").fetchone()[0]
    if version >= 180000:  # 18 counts the WAL's writes in pg_stat_io, in bytes
        wal = conn.execute("SELECT coalesce(sum(write_bytes), 0) FROM pg_stat_io WHERE object = 'wal'").fetchone()[0]
    else:
        wal_bytes, writes, page = conn.execute("SELECT wal_bytes, wal_write, current_setting('wal_block_size')::int "
                                               "FROM pg_stat_wal").fetchone()
        wal = max(int(wal_bytes), int(writes) * page)
    temp = conn.execute("SELECT coalesce(sum(temp_bytes), 0) FROM pg_stat_database").fetchone()[0]
    return int(data) + int(wal) + int(temp)


def server_settings(conn, names: list[str]) -> dict[str, str]:
    rows = conn.execute("SELECT name, current_setting(name) FROM pg_settings WHERE name = ANY(%s)", (names,)).fetchall()
    return dict(rows)


def _tail(path: Path, lines: int = 5) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def _last_error(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    for line in reversed(lines):
        if re.search(r"(FATAL|ERROR|error|failed|No space|could not)", line):
            return re.sub(r"^.*?(FATAL|ERROR):\s*", "", line).rstrip(".")
    return (lines[-1] if lines else "no detail").rstrip(".")


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
        with answered_in_time(self.conn.fileno(), timeout_s, "PostgreSQL") as given_up:
            try:
                cursor = self.conn.execute(query)
                rows = cursor.fetchall() if cursor.description else []
            except psycopg.errors.QueryCanceled:
                if not timeout_s:
                    raise
                raise QueryTimeout(timeout_s) from None
            except psycopg.OperationalError:
                given_up()
                raise
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


class PostgresEngine(ServerEngine):
    """refbench.engines.Engine for PostgreSQL: a managed server (``server``) or a user's (``server`` None)."""

    name = "postgres"
    title = "PostgreSQL"
    kind = "row store"
    in_process = False
    buffer_cache = "shared buffers"
    Session = PostgresSession
    Managed = ManagedPostgres

    # Per index build: an SF 10 lineitem index sorts about 2 GB of keys; two builds run at once.
    INDEX_SETTINGS = {"maintenance_work_mem": "1GB"}

    @classmethod
    def require_installed(cls) -> None:
        require_server_binaries()

    @classmethod
    def check_dsn(cls, dsn: str) -> None:
        with connect(dsn, autocommit=True):
            pass

    @classmethod
    def reaches(cls, directory: Path) -> bool:
        return ManagedPostgres.reachable(directory)

    @classmethod
    def managed_data_dir(cls, preferred: Path, fallback: Path) -> Path:
        return managed_data_dir(preferred, fallback)

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
        tables = self.dataset.tables
        size = {t: (data_dir / f"{t}.csv").stat().st_size for t in tables}
        largest_first = sorted(tables, key=lambda t: -size[t])
        server_file = self.server is not None and all(self.server.can_read(data_dir / f"{t}.csv") for t in tables)
        try:
            with connect(self.dsn, autocommit=True) as conn:
                conn.execute("DROP TABLE IF EXISTS refbench_load, " + ", ".join(tables) + " CASCADE")
                for statement in sql_statements(self.dataset.sql(self.name, "schema")):
                    conn.execute(statement)
            with ThreadPoolExecutor(self.workers) as pool:
                counts = pool.map(lambda t: _copy_table(self.dsn, t, data_dir / f"{t}.csv", server_file), largest_first)
                rows = dict(zip(largest_first, counts))
            load_s = time.monotonic() - t0
            indexes = sorted(sql_statements(self.dataset.sql(self.name, "indexes")), key=lambda s: -size[re.search(r" ON (\w+)", s)[1]])
            run_in_parallel(self.dsn, [[s] for s in indexes], self.workers, self.INDEX_SETTINGS)
            with connect(self.dsn, autocommit=True) as conn:
                for statement in sql_statements(self.dataset.sql(self.name, "keys")):
                    conn.execute(statement)
            run_in_parallel(self.dsn, [[f"VACUUM (FREEZE, ANALYZE) {t}"] for t in largest_first], self.workers, {})
            with connect(self.dsn, autocommit=True) as conn:
                conn.execute("CREATE TABLE refbench_load (scale_factor double precision)")
                conn.execute("INSERT INTO refbench_load VALUES (%s)", (scale_factor,))
        except psycopg.Error as exc:
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            raise UserError(f"loading the {self.dataset.title} tables into PostgreSQL failed: {first.rstrip('.')}.") from None
        return {"load_s": round(load_s, 2), "index_s": round(time.monotonic() - t0 - load_s, 2), "rows": rows,
                "copy": "server-side COPY FREEZE" if server_file else "COPY FREEZE through the connection"}

    def data_files(self) -> list[Path] | None:
        """None for a user's server: its files are not refbench's to touch, and may be on another host."""
        return None if self.server is None else files_under([self.server.data_dir / "base"])

    def counters(self) -> dict[str, float]:
        return block_counts(self.dsn)

    def find_local_pid(self, conn) -> int | None:
        return postmaster_pid(conn)

    def wait_sampler(self) -> SessionSampler:
        # Prepared: the view's plan is made once, not ten times a second.
        return SessionSampler(lambda: connect(self.dsn, autocommit=True), POSTGRES_ACTIVE_SESSIONS,
                              fetch=lambda conn, query: conn.execute(query, prepare=True).fetchall(),
                              watch=RunQueueWatch.for_server(self.local_server_pid()))

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
                                (list(self.dataset.tables),)).fetchall()
            database = conn.execute("SELECT pg_database_size(current_database())").fetchone()[0]
        return {"tables_bytes": {r[0]: r[1] for r in rows}, "indexes_bytes": {r[0]: r[2] for r in rows},
                "database_bytes": database}

    def connect(self):
        return connect(self.dsn, autocommit=True)

    def settings(self, names: list[str] | None = None) -> dict[str, str]:
        with connect(self.dsn, autocommit=True) as conn:
            return server_settings(conn, names or ["server_version", "shared_buffers", "work_mem",
                                                   "max_parallel_workers_per_gather", "effective_cache_size",
                                                   "random_page_cost"])


ENGINE = PostgresEngine


# ---- the OLTP side (refbench.engines.Transactional): the oltp suite's schema tpcc in the database ----------------


# Errors after which going on would only measure the failure: the virtual user stops and the case fails.
FATAL_SQLSTATE_CLASSES = {
    "53": "the database server ran out of disk space, memory or connections",
    "57": "the database server was shut down or the transaction was cancelled",
    "58": "the database server had an I/O error",
    "XX": "the database server had an internal error",
    "42": "the TPC-C tables or functions are missing or were changed",
}
# The server's shutdown, crash or restart under a session: admin_shutdown, crash_shutdown, cannot_connect_now.
SERVER_SHUT_DOWN = ("57P01", "57P02", "57P03")


def proc_stat(pid: int) -> tuple[str, int, int, int] | None:
    """(command name, parent pid, own CPU ticks, reaped children's CPU ticks) of a process, from /proc."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        fields = stat[stat.rindex(")") + 2:].split()
        return (stat[stat.index("(") + 1:stat.rindex(")")], int(fields[1]), int(fields[11]) + int(fields[12]),
                int(fields[13]) + int(fields[14]))
    except (OSError, ValueError, IndexError):  # gone between the listing and the read
        return None


def postmaster_pid(conn: Any) -> int | None:
    """The postmaster of the server behind ``conn`` when it runs on this host (the parent of the connection's
    backend); None for a server elsewhere, whose CPU this host cannot see."""
    backend = proc_stat(conn.info.backend_pid)
    if backend is None or backend[0] != "postgres":
        return None
    postmaster = proc_stat(backend[1])
    return backend[1] if postmaster is not None and postmaster[0] == "postgres" else None


def postgres_cpu_s(postmaster: int) -> float:
    """CPU seconds used so far by one PostgreSQL server: its postmaster and live children, plus what its exited
    children (backends of closed connections) used, which the kernel adds to the postmaster's children's totals when
    it reaps them. Only that server: another PostgreSQL on the host (a neighbour's run) is not counted."""
    own = proc_stat(postmaster)
    if own is None:
        return 0.0
    total = own[2] + own[3]
    for pid in filter(str.isdigit, os.listdir("/proc")):
        child = proc_stat(int(pid))
        if child is not None and child[1] == postmaster:
            total += child[2]
    return total / os.sysconf("SC_CLK_TCK")


class PostgresClient:
    """refbench.engines.TransactionClient on libpq's prepared-statement calls, without psycopg's cursor machinery: it
    halves the driver's CPU per transaction, and the driver's CPU is CPU the database under test does not get."""

    __slots__ = ("conn", "pgconn", "names", "rollback_code", "result", "ok", "error")

    def __init__(self, dsn: str, calls: dict[str, str], rollback_code: str):
        from psycopg import OperationalError, pq

        # Looked up once here, not once per transaction.
        self.ok, self.error = pq.ExecStatus.TUPLES_OK, OperationalError

        try:
            self.conn = connect(dsn, autocommit=True)
        except UserError as exc:
            raise TransactionFailed(f"could not start: {exc}") from None
        self.pgconn = self.conn.pgconn
        self.names = {tx: tx.encode() for tx in calls}
        self.rollback_code, self.result = rollback_code, None
        for tx, query in calls.items():
            prepared = self.pgconn.prepare(self.names[tx], query.encode())
            if prepared.status != pq.ExecStatus.COMMAND_OK:
                self.conn.close()
                raise TransactionFailed("could not start: " + prepared.error_message.decode(errors="replace").strip())

    def fileno(self) -> int:
        return self.pgconn.socket

    def call(self, tx: str, params: list) -> str:
        try:
            result = self.pgconn.exec_prepared(self.names[tx], params)
        except self.error:
            raise self.lost() from None
        return "ok" if result.status == self.ok else self._outcome(result)

    def send(self, tx: str, params: list) -> None:
        try:
            self.pgconn.send_query_prepared(self.names[tx], params)
        except self.error:
            raise self.lost() from None

    def receive(self) -> str | None:
        pgconn = self.pgconn
        try:
            pgconn.consume_input()
        except self.error:
            raise self.lost() from None
        # A call's result, then libpq's end of it (when the server's ReadyForQuery has arrived too).
        while not pgconn.is_busy():
            result = pgconn.get_result()
            if result is None:
                result, self.result = self.result, None
                return "ok" if result.status == self.ok else self._outcome(result)
            self.result = result
        return None

    def _outcome(self, result: Any) -> str:
        from psycopg import pq

        sqlstate = (result.error_field(pq.DiagnosticField.SQLSTATE) or b"?").decode()
        if sqlstate == self.rollback_code:
            return "rollback"
        if self.pgconn.status != pq.ConnStatus.OK:
            raise self.lost()
        if sqlstate[:2] in FATAL_SQLSTATE_CLASSES:
            message = (result.error_field(pq.DiagnosticField.MESSAGE_PRIMARY) or b"").decode(errors="replace")
            failed = ConnectionLost if sqlstate in SERVER_SHUT_DOWN else TransactionFailed
            raise failed(f"stopped: {FATAL_SQLSTATE_CLASSES[sqlstate[:2]]} ({sqlstate}: {message})")
        return sqlstate

    def lost(self) -> ConnectionLost:
        first = self.pgconn.error_message.decode(errors="replace").strip().splitlines()[:1] or ["?"]
        return ConnectionLost("lost its connection: " + " ".join(first[0].split()))

    def close(self) -> None:
        self.conn.close()


class PostgresTransactional:
    """refbench.engines.Transactional for PostgreSQL: the dataset's tables in schema tpcc, loaded by COPY (one
    transaction per loader), then keys, indexes and VACUUM (FREEZE, ANALYZE); the transactions are PL/pgSQL
    functions called as prepared statements."""

    name = "postgres"
    new_order_lines = "arrays"
    SCHEMA = "tpcc"

    def __init__(self, dsn: str, dataset: Dataset):
        import psycopg.pq  # noqa: F401  imported before the driver forks its workers: they share its pages

        self.dsn, self.dataset = dsn, dataset

    @classmethod
    def create(cls, engine: Any, dataset: Dataset) -> "PostgresTransactional":
        return cls(engine.dsn, dataset)

    def connect(self):
        return connect(self.dsn, autocommit=True)

    def check_user(self, users: int, own: int) -> None:
        with self.connect() as conn:
            ok = conn.execute("SELECT has_database_privilege(current_database(), 'CREATE')").fetchone()[0]
            if not ok:
                user, db = conn.execute("SELECT current_user, current_database()").fetchone()
                raise UserError(f"PostgreSQL user '{user}' may not create schemas in database '{db}'; "
                                f"grant it with: GRANT CREATE ON DATABASE {db} TO {user};")
            # The connections free now for this role (superusers may also take the reserved ones).
            limit, reserved, used = conn.execute(
                "SELECT current_setting('max_connections')::int, "
                "CASE WHEN (SELECT rolsuper FROM pg_roles WHERE rolname = current_user) THEN 0 "
                "ELSE current_setting('superuser_reserved_connections')::int "
                "+ coalesce(current_setting('reserved_connections', true)::int, 0) END, "
                "(SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend')").fetchone()
        free = limit - reserved - used + 1  # this check's own connection is free again when the run starts
        if free < users + own:
            reserve = f", {reserved} reserved for superusers" if reserved else ""
            raise UserError(f"the PostgreSQL server has {free} free connection(s) (max_connections {limit}, {used} in use"
                            f"{reserve}) and {users} virtual user(s) need {users + own} (one each and {own} of refbench's "
                            "own); raise its max_connections or lower the user count.")

    def loaded_warehouses(self) -> int | None:
        with self.connect() as conn:
            if not conn.execute(f"SELECT to_regclass('{self.SCHEMA}.refbench_load') IS NOT NULL").fetchone()[0]:
                return None
            row = conn.execute(f"SELECT warehouses FROM {self.SCHEMA}.refbench_load").fetchone()
        return row[0] if row else None

    def create_schema(self) -> None:
        with self.connect() as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS {self.SCHEMA} CASCADE")
            conn.execute(self.dataset.sql(self.name, "schema"))

    def loader(self):
        # One transaction per loader (a warehouse): one commit (and WAL flush) instead of one per COPY.
        return connect(self.dsn)

    def copy_rows(self, conn, table: str, columns: str, rows) -> int:
        count = 0
        with conn.cursor() as cur, cur.copy(f"COPY {self.SCHEMA}.{table} ({columns}) FROM STDIN") as copy:
            for row in rows:
                copy.write_row(row)
                count += 1
        return count

    def copy_lines(self, conn, table: str, columns: str, lines) -> int:
        """The generated values hold no tab, newline or backslash, so they need no escaping: formatting a row with one
        % is about half the cost of psycopg's write_row per field, and the load's CPU is mostly this."""
        count = 0
        with conn.cursor() as cur, cur.copy(f"COPY {self.SCHEMA}.{table} ({columns}) FROM STDIN") as copy:
            chunk: list[str] = []
            for line in lines:
                chunk.append(line)
                if len(chunk) == 4096:
                    copy.write("".join(chunk))
                    count += len(chunk)
                    chunk = []
            copy.write("".join(chunk))
            count += len(chunk)
        return count

    def finish_tables(self, tables: list[str], workers: int) -> None:
        """Keys, indexes, then VACUUM (FREEZE, ANALYZE) of each table, the tables shared out over ``workers``
        connections, largest first: a 100-warehouse load's order_line alone is several GB."""
        statements: dict[str, list[str]] = {t: [] for t in tables}
        for statement in sql_statements(self.dataset.sql(self.name, "indexes")):
            statements[re.search(rf"{self.SCHEMA}\.(\w+)", statement).group(1)].append(statement)
        # Freshly copied rows have no hint bits and no visibility map yet; without the VACUUM the first case would pay
        # for setting them (and autovacuum would do it in the middle of a measurement), and the cases would disagree.
        # maintenance_work_mem: a large table's keys sorted in memory rather than in temporary files; the server's
        # default (64 MB) is made for many sessions, this is one of a few.
        run_in_parallel(self.dsn, [statements[t] + [f"VACUUM (FREEZE, ANALYZE) {self.SCHEMA}.{t}"] for t in tables],
                        workers, {"maintenance_work_mem": "256MB"})

    def install(self, transactions: list[str]) -> None:
        with self.connect() as conn:
            for name in transactions:
                conn.execute(self.dataset.sql(self.name, name))

    def mark_loaded(self, warehouses: int, rows: int) -> None:
        import psycopg

        with self.connect() as conn:
            conn.execute(f"CREATE TABLE {self.SCHEMA}.refbench_load (warehouses int, rows bigint, "
                         "loaded_at timestamptz DEFAULT now())")
            conn.execute(f"INSERT INTO {self.SCHEMA}.refbench_load (warehouses, rows) VALUES (%s, %s)", (warehouses, rows))
            # Writes the load out now, so that its checkpoint does not fall into the first measurement. A user's
            # server may not let this user checkpoint; then the server does it in its own time.
            try:
                conn.execute("CHECKPOINT")
            except psycopg.errors.InsufficientPrivilege:
                pass

    def sizes(self) -> dict[str, Any]:
        with self.connect() as conn:
            rows = conn.execute(
                "SELECT c.relname, pg_total_relation_size(c.oid), c.reltuples::bigint FROM pg_class c "
                "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relkind = 'r'",
                (self.SCHEMA,)).fetchall()
        tables = {name: {"bytes": size, "rows_estimate": tuples} for name, size, tuples in rows if name in self.dataset.tables}
        return {"tables": tables, "total_bytes": sum(t["bytes"] for t in tables.values())}

    def script(self, conn, text: str, params: dict[str, Any]) -> tuple:
        """In one transaction, or a savepoint of the caller's: a script's SET LOCALs end with it."""
        row: tuple = ()
        with conn.transaction():
            for statement in sql_statements(text):
                cursor = conn.execute(statement, params if "%(" in statement else None)
                if cursor.description:
                    row = cursor.fetchone()
        return row

    def counters(self, conn) -> dict[str, int]:
        next_o_id = conn.execute(f"SELECT sum(d_next_o_id)::bigint FROM {self.SCHEMA}.district").fetchone()[0]
        commits, rollbacks = conn.execute(
            "SELECT xact_commit, xact_rollback FROM pg_stat_database WHERE datname = current_database()").fetchone()
        return {"sum_d_next_o_id": int(next_o_id), "xact_commit": int(commits), "xact_rollback": int(rollbacks)}

    def server_cpu(self, conn):
        postmaster = postmaster_pid(conn)
        return None if postmaster is None else functools.partial(postgres_cpu_s, postmaster)

    def client(self, calls: dict[str, str], rollback_code: str) -> PostgresClient:
        return PostgresClient(self.dsn, calls, rollback_code)

    def failure(self, exc: BaseException) -> str | None:
        import psycopg

        if not isinstance(exc, psycopg.Error):
            return None
        return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


TRANSACTIONAL = PostgresTransactional
