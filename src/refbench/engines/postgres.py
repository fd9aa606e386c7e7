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
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from refbench.children import die_with_parent, watchdog
from refbench.engines import Dataset, Placement, QueryTimeout, ServerEngine, sql_statements
from refbench.errors import UserError
from refbench.host.cachebound import Bound
from refbench.host.pagecache import files_under
from refbench.host.inventory import postgres_binary
from refbench.redaction import read_private, redact, write_private

__all__ = ["ENGINE", "ManagedPostgres", "PostgresEngine", "block_counts", "connect", "managed_data_dir", "redact", "require_server_binaries", "server_settings",
           "sql_statements"]

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


def _as_account(account: pwd.struct_passwd | None) -> dict[str, Any]:
    """subprocess arguments that run a command as ``account`` with its own groups only (none of root's)."""
    if account is None:
        return {}
    return {"user": account.pw_uid, "group": account.pw_gid,
            "extra_groups": os.getgrouplist(account.pw_name, account.pw_gid)}


def _join_then_become(join, account: pwd.struct_passwd | None, then) -> None:
    """A server's preexec_fn: join its cgroup as root, then become its account, as _as_account would have."""
    join()
    if account is not None:
        os.setgroups(os.getgrouplist(account.pw_name, account.pw_gid))
        os.setregid(account.pw_gid, account.pw_gid)
        os.setreuid(account.pw_uid, account.pw_uid)
    if then is not None:
        then()


def _account_can(account: pwd.struct_passwd | None, test_flag: str, path: Path) -> bool:
    """``test FLAG PATH`` as the server's account: can it enter (-x), read (-r) or write (-w) there?"""
    return account is None or subprocess.run(["test", test_flag, str(path)], **_as_account(account)).returncode == 0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ManagedPostgres:
    """initdb / start / stop of a private PostgreSQL server. ``password_file`` keeps the TCP password (a file of the
    run, so that a resumed run keeps it); without one the password lives in memory only. ``cache_bytes`` bounds the
    page cache of the server's files while a case is measured (host.cachebound); 0 leaves it unbounded."""

    def __init__(self, data_dir: Path, settings: dict[str, str], password_file: Path | None = None,
                 cache_bytes: int = 0):
        self.data_dir = Path(data_dir).absolute()
        self.settings = dict(settings)
        self.password_file = Path(password_file).absolute() if password_file else None
        self.account = _run_as()
        self.port = 0
        self.socket_dir: Path | None = None
        self.log_file = self.data_dir.parent / f"{self.data_dir.name}.log"
        self.process: subprocess.Popen | None = None
        self.bound = Bound(cache_bytes, self.data_dir / "base") if cache_bytes else None
        self._password: str | None = None
        self._socket_guard = self._server_guard = self._bound_guard = None

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
            raise UserError(f"PostgreSQL {what} of {self.data_dir} failed: {detail}.")
        return result

    def _own(self, path: Path) -> None:
        if self.account is not None:
            os.chown(path, self.account.pw_uid, self.account.pw_gid)

    def initialize(self) -> bool:
        """initdb when the data directory is new; returns True if it did."""
        if (self.data_dir / "PG_VERSION").exists():
            return False
        self.data_dir.mkdir(parents=True, exist_ok=True)
        if any(self.data_dir.iterdir()):
            raise UserError(f"{self.data_dir} is not empty and is not a PostgreSQL data directory; choose another --data-dir.")
        self._own(self.data_dir)
        if not _account_can(self.account, "-w", self.data_dir):
            raise UserError(f"the postgres system user cannot reach {self.data_dir}: a parent directory is closed to other "
                            "users (chmod o+x it, or choose another --data-dir).")
        self.log_file.touch()
        self._own(self.log_file)
        # Host connections are rejected until start() writes the real pg_hba.conf and sets the password.
        self._run([_binary("initdb"), "-D", str(self.data_dir), "-U", SUPERUSER, "--auth-local=trust",
                   "--auth-host=reject", "-E", "UTF8", "--no-locale", "--no-instructions"], "initdb")
        return True

    def start(self) -> None:
        self.initialize()
        self.stop_stale()
        self.port = free_port()
        # A short socket path (unix socket paths are limited to about 100 bytes, run directories are long), made
        # mode 0700 by mkdtemp: the socket trusts whoever reaches it.
        self.socket_dir = Path(tempfile.mkdtemp(prefix="refbench-pg-"))
        self._socket_guard = watchdog().register(remove=[self.socket_dir])
        self._own(self.socket_dir)
        if self.bound is not None:
            self.bound.create()
            if self.bound.cgroup is not None:  # removed after the server is stopped: registered before it
                self._bound_guard = watchdog().register(remove=[self.bound.cgroup.path])
        self._launch()
        self._set_password()

    def restart(self) -> None:
        """Stops and starts the server on the same port and socket, so its buffer cache starts empty."""
        self._stop_own()
        self.stop_stale()
        self._launch()

    def _launch(self) -> None:
        self._write_hba()
        # refbench's own settings last: a plan's pg_settings cannot move the server off loopback or the closed socket.
        options = {**self.settings, "port": str(self.port), "listen_addresses": "127.0.0.1",
                   "unix_socket_directories": str(self.socket_dir)}
        argv = [_binary("postgres"), "-D", str(self.data_dir)]
        for name, value in options.items():
            argv += ["-c", f"{name}={value}"]
        # The kernel's signal reaches the server when the thread that started it ends: only the main thread lives
        # as long as refbench.
        on_death = functools.partial(die_with_parent, signal.SIGINT) if threading.current_thread() is threading.main_thread() else None
        _LAUNCHED[self.log_file] = self.log_file.stat().st_size if self.log_file.exists() else 0
        account, preexec = _as_account(self.account), on_death
        if self.bound is not None and self.bound.cgroup is not None:
            # The server joins its cgroup before exec, so every process it forks is bounded from the start. Joining
            # takes root, so here the switch to the server's account is done after it, not by subprocess.
            account, preexec = {}, functools.partial(_join_then_become, self.bound.join, self.account, on_death)
        with open(self.log_file, "ab") as log:
            self.process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                            start_new_session=True, preexec_fn=preexec, **account)
        # Fast shutdown, then immediate (which still stops the backends), then SIGKILL.
        self._server_guard = watchdog().register(pid=self.process.pid, grace_s=5.0,
                                                 signals=(signal.SIGINT, signal.SIGQUIT, signal.SIGKILL))
        self._wait_until_ready()

    def _wait_until_ready(self) -> None:
        """As pg_ctl -w does: until postmaster.pid names our process and says "ready"."""
        assert self.process is not None
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            if self.process.poll() is not None:
                self._stop_own()
                raise UserError(f"PostgreSQL start failed: {_last_error(_tail(self.log_file))}.")
            try:
                lines = (self.data_dir / "postmaster.pid").read_text().splitlines()
            except OSError:
                lines = []
            if len(lines) >= 8 and lines[0].strip() == str(self.process.pid) and lines[7].strip() == "ready":
                return
            if time.monotonic() > deadline:
                self._stop_own()
                raise UserError(f"PostgreSQL did not accept connections within {START_TIMEOUT_S:g} s "
                                f"(its log: {self.log_file}).")
            time.sleep(0.05)

    def _write_hba(self) -> None:
        path = self.data_dir / "pg_hba.conf"
        path.write_text(HBA)
        path.chmod(0o600)
        self._own(path)

    @property
    def password(self) -> str:
        """The TCP password of this server: the run's, once generated."""
        if self._password is None:
            kept = read_private(self.password_file) if self.password_file else None
            self._password = kept.strip() if kept else secrets.token_urlsafe(24)
            if self.password_file and not kept:
                write_private(self.password_file, self._password + "\n")
        return self._password

    def _set_password(self) -> None:
        from psycopg import sql

        with connect(self.dsn, autocommit=True) as conn:
            # Sent as its SCRAM verifier, so the password itself is in no statement the server could log.
            verifier = conn.pgconn.encrypt_password(self.password.encode(), SUPERUSER.encode(), b"scram-sha-256")
            conn.execute(sql.SQL("ALTER ROLE {} PASSWORD {}").format(sql.Identifier(SUPERUSER),
                                                                     sql.Literal(verifier.decode())))

    def stop(self) -> None:
        self._stop_own()
        self.stop_stale()
        if self.socket_dir is not None:
            shutil.rmtree(self.socket_dir, ignore_errors=True)
            self.socket_dir = None
        if self.bound is not None:
            self.bound.close()
        if self._bound_guard is not None:
            self._bound_guard.release()
            self._bound_guard = None
        if self._socket_guard is not None:
            self._socket_guard.release()
            self._socket_guard = None

    def _stop_own(self) -> None:
        """Fast shutdown of the server this object started, as pg_ctl -m fast, and immediate if that hangs."""
        if self.process is not None:
            steps = [(signal.SIGINT, STOP_TIMEOUT_S), (signal.SIGQUIT, 10.0), (signal.SIGKILL, None)]
            if _panic_since_launch(self.log_file):
                # Crash recovery after a PANIC on a full disk can spin without heeding a fast shutdown (two minutes
                # seen); there is nothing clean left to shut down, so immediate it is.
                steps = steps[1:]
            for signum, wait_s in steps:
                if self.process.poll() is not None:
                    break
                self.process.send_signal(signum)
                try:
                    self.process.wait(wait_s)
                except subprocess.TimeoutExpired:
                    continue
            self.process = None
        if self._server_guard is not None:
            self._server_guard.release()
            self._server_guard = None

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


def block_counts(dsn: str) -> dict[str, int]:
    """The database's cumulative buffer cache counters: blocks found in shared_buffers (hit) and blocks asked of the
    OS (read, from its page cache or from storage), with the block size and the database's size."""
    with connect(dsn, autocommit=True) as conn:
        row = conn.execute("SELECT blks_read, blks_hit, current_setting('block_size')::int, "
                           "pg_database_size(current_database()) FROM pg_stat_database "
                           "WHERE datname = current_database()").fetchone()
    return dict(zip(("blocks_read", "blocks_hit", "block_bytes", "database_bytes"), map(int, row)))


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


class PostgresEngine(ServerEngine):
    """refbench.engines.Engine for PostgreSQL: a managed server (``server``) or a user's (``server`` None)."""

    name = "postgres"
    title = "PostgreSQL"
    kind = "row store"
    in_process = False
    buffer_cache = "shared buffers"
    Session = PostgresSession

    # Per index build: an SF 10 lineitem index sorts about 2 GB of keys; two builds run at once.
    INDEX_SETTINGS = {"maintenance_work_mem": "1GB"}

    @classmethod
    def create(cls, dataset: Dataset, place: Placement) -> "PostgresEngine":
        if place.dsn:
            return cls(place.dsn, None, place.workers, dataset)
        server = ManagedPostgres(place.location, place.settings, place.password_file, cache_bytes=place.cache_bytes)
        return cls("", server, place.workers, dataset)

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

    def counters(self) -> dict[str, int]:
        return block_counts(self.dsn)

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
