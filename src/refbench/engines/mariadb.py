"""MariaDB: a managed server refbench starts and stops itself, or the user's server through a mysql:// DSN.

The managed server is installed (``mariadb-install-db``) into a data directory the user can place on the storage under
test and started with ``--no-defaults``: nothing of the system's /etc/mysql (its datadir, socket, port 3306) reaches
it, and every setting it runs with is on its command line, so the report records exactly what ran. As root, refbench
runs it as the ``mysql`` system user (mariadbd refuses root unless told otherwise, and should).

Nobody else on the machine gets in: it listens on a unix socket in a directory only its account can enter (mode
0700) and on 127.0.0.1 with ``--skip-name-resolve``. Its only accounts are the installer's (root, and refbench's own
system user, both by unix_socket authentication, which checks the peer's uid) and ``refbench``, whose password
refbench generates (kept in a 0600 file of the run) and sends as its hash only.

It does not outlive refbench: ``mariadbd`` is refbench's own child, gets SIGTERM (its clean shutdown) from the kernel
when refbench's main thread ends, and refbench's watchdog (refbench.children) stops it and removes its socket
directory after a kill -9.

InnoDB reads and writes its data files with O_DIRECT (innodb_flush_method's default since 10.6), so what it reads
comes from storage or its buffer pool. The bounded page cache of the conditions work (host.cachebound) still applies
when asked for (``cache_bytes``, as ManagedPostgres has it), so that both engines run under the same bound: its redo
log and temporary files go through the page cache.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import hashlib
import os
import pwd
import re
import shutil
import signal
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Iterable
from urllib.parse import parse_qs, unquote, urlsplit

from refbench.children import owned_temp_dir, watchdog
from refbench.engines import (
    ConnectionLost, Dataset, QueryTimeout, ServerEngine, TransactionFailed, answered_in_time, sql_statements,
)
from refbench.engines.waits import MARIADB_ACTIVE_SESSIONS, RedoLogWatch, SessionSampler, commits_as_running
from refbench.engines.managed import (ManagedProcess, ServerDidNotStart, account_can as _account_can,
                                      as_account as _as_account)
from refbench.engines.postgres import (
    _last_error, managed_data_dir, proc_stat,
)
from refbench.errors import UserError
from refbench.host.cachebound import Bound
from refbench.host.pagecache import files_under
from refbench.redaction import redact, redact_quoted

__all__ = ["ENGINE", "TRANSACTIONAL", "ManagedMariaDB", "MariaDbTransactional", "MariaDbEngine", "block_counts", "check_server", "check_server_settings", "connect", "last_panic", "load_lines", "parse_dsn",
           "require_server_binaries", "server_settings", "server_version", "version_problem"]

USER = "refbench"
START_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 120.0
# The oldest MariaDB whose SQL refbench may use: common table expressions and window functions (10.2), INSERT …
# RETURNING (10.5) and JSON_TABLE (10.6, which New-Order's item lists are read with); 10.6 is also the oldest
# long-term series of MariaDB's own. Tested on 10.11 (Debian 12).
MINIMUM_VERSION = (10, 6)
# What the engine's SQL files do in the benchmark's database: create and fill tables, index them, create and call
# stored procedures, and make the consistency check's temporary table.
NEEDED_PRIVILEGES = ("SELECT", "INSERT", "UPDATE", "DELETE", "CREATE", "DROP", "INDEX", "ALTER", "CREATE ROUTINE",
                     "ALTER ROUTINE", "EXECUTE", "CREATE TEMPORARY TABLES")
# Durable defaults, as a production server is set up; a plan's settings come after them and may change them (the
# report shows what ran). The buffer pool is neither saved at shutdown nor loaded at startup (both on by default):
# a restart must start with an empty buffer pool, as PostgreSQL's does.
DEFAULTS = {
    "default_storage_engine": "InnoDB",
    "innodb_flush_log_at_trx_commit": "1",
    "innodb_doublewrite": "ON",
    "innodb_buffer_pool_dump_at_shutdown": "OFF",
    "innodb_buffer_pool_load_at_startup": "OFF",
    # What the wait profile and the timed I/O read: file I/O timed by performance_schema, the current waits kept;
    # every other instrument off, as nothing reads them (what the rest costs: docs/BENCHMARKS.md). A setting given
    # as a tuple is given to the server once per value. Off altogether when sessions are not sampled
    # (suites.storage.unsampled_mariadb).
    "performance_schema": "ON",
    "performance_schema_instrument": ("%=OFF", "wait/io/file/%=ON"),
    "performance_schema_consumer_events_waits_current": "ON",
    "performance_schema_consumer_statements_digest": "OFF",
}
# Set by refbench itself (after the plan's settings, so they win): its data directory, its closed socket, loopback,
# and its temporary files in the data directory.
RESERVED = ("datadir", "socket", "port", "bind_address", "skip_networking", "skip_name_resolve", "pid_file",
            "log_error", "user", "basedir", "skip_grant_tables", "tmpdir")
# The server's tmpdir, inside its data directory: on-disk temporary tables (a large GROUP BY, a sort) then land on the
# storage under test like the data, and go with it; tmpdir's default, /tmp, is neither (and may be small). The '#'
# keeps it from being taken for a database (SHOW DATABASES lists it as '#mysql50##tmp', which no one can use).
TMP_DIR = "#tmp"


# Where Debian puts the server's binaries: mariadbd is in /usr/sbin, which a user's PATH may not have.
BINARY_DIRS = ("/usr/sbin", "/usr/bin")


def _find(name: str) -> str | None:
    return shutil.which(name) or next((p for d in BINARY_DIRS if os.access(p := f"{d}/{name}", os.X_OK)), None)


def _binary(name: str) -> str:
    path = _find(name)
    if not path:
        raise UserError(f"the MariaDB server is not installed ({name} not found); install it with "
                        "'apt-get install mariadb-server' (make setup does this), or pass a mysql:// DSN to use your "
                        "own server.")
    return path


def require_server_binaries() -> None:
    for name in ("mariadb-install-db", "mariadbd"):
        _binary(name)


def _setting_name(name: str) -> str:
    """A server variable as SHOW VARIABLES spells it: mariadbd takes dashes and underscores alike."""
    return name.strip().lower().replace("-", "_")


def check_server_settings(settings: dict[str, str], origins: dict[str, str] | None = None) -> None:
    """Lets the installed mariadbd judge ``settings`` (name -> value) without starting it, before anything is written:
    a name refbench sets itself, an unknown variable, a bad size suffix or a value it would ignore or adjust ends here
    with the server's own words. ``origins`` names where each setting came from ("[oltp] mariadb_settings item …").
    Without the binary nothing is checked (require_server_binaries says what is missing)."""
    origins = {_setting_name(k): v for k, v in (origins or {}).items()}
    for name in settings:
        if _setting_name(name) in RESERVED:
            raise UserError(f"{origins.get(_setting_name(name), f'the setting {name}')} sets {_setting_name(name)}, "
                            "which refbench sets itself for the MariaDB server it manages.")
    mariadbd = _find("mariadbd")
    if not mariadbd or not settings:
        return
    # --help --verbose parses every option as a start would, then prints the variables and exits.
    argv = [mariadbd, "--no-defaults", *(f"--{name}={value}" for name, value in settings.items()), "--verbose", "--help"]
    try:
        result = subprocess.run(argv, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
                                env={**os.environ, "LC_ALL": "C"})
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise UserError(f"{mariadbd} could not check the server settings: {exc}.") from None
    # An error in an InnoDB option does not even fail the parse (the plugin is disabled instead); a value out of range
    # is adjusted and one it cannot read is ignored, with a warning only.
    refused = [line for line in result.stderr.splitlines()
               if "[ERROR]" in line or re.search(r"\[Warning\].*(ignoring option|adjusted to)", line)]
    if result.returncode == 0 and not refused:
        return
    message = re.sub(r"^.*?\[(ERROR|Warning)\]\s*(Buffered error:\s*)?(\S*mariadbd:\s*)?", "",
                     (refused or result.stderr.strip().splitlines()[-1:] or ["no message"])[0]).rstrip(".")
    message = re.sub(r"\.\s+(\w)", lambda m: "; " + m[1].lower(), message)  # one sentence
    named = re.search(r"(?:variable|option) '-*([^'=]+)", message)
    name = _setting_name(named.group(1)) if named else ""
    origin = origins.get(name, f"the setting {name}" if name else "a server setting")
    raise UserError(f"{origin} is refused by MariaDB: {message}.")


def _run_as() -> pwd.struct_passwd | None:
    """The account the server runs under: ourselves, or 'mysql' when we are root."""
    if os.geteuid() != 0:
        return None
    try:
        return pwd.getpwnam("mysql")
    except KeyError:
        raise UserError("refbench runs as root, and there is no 'mysql' user to run MariaDB as; install the "
                        "mariadb-server package (which creates it) or run refbench as another user.") from None


def _native_password_hash(password: str) -> str:
    """What mysql_native_password stores: the password itself never needs to be in a statement the server could log."""
    return "*" + hashlib.sha1(hashlib.sha1(password.encode()).digest()).hexdigest().upper()


class ManagedMariaDB(ManagedProcess):
    """install / start / stop of a private MariaDB server. ``settings`` are server variables (name -> value, dashes or
    underscores), innodb_buffer_pool_size among them; ``password_file`` keeps the refbench user's password (a file of
    the run, so that a resumed run keeps it); without one it lives in memory only. ``cache_bytes`` bounds the page
    cache of the server's files while a case is measured (host.cachebound); 0 leaves it unbounded."""

    socket_prefix = "refbench-mariadb-"
    title = "MariaDB"
    error_line = re.compile(r"\[ERROR\] (?!Aborting\s*$).*")

    def __init__(self, data_dir: Path, settings: dict[str, str], password_file: Path | None = None,
                 cache_bytes: int = 0, log_dir: Path | None = None):
        self.data_dir = Path(data_dir).absolute()
        # The redo log's directory (innodb_log_group_home_dir) when it is not the data's, e.g. on another device.
        self.log_dir = Path(log_dir).absolute() if log_dir else None
        self.settings = {_setting_name(name): str(value) for name, value in settings.items()}
        self.password_file = Path(password_file).absolute() if password_file else None
        self.account = _run_as()
        self.log_file = self.data_dir.parent / f"{self.data_dir.name}.log"
        self.pid_file = self.data_dir / "mariadbd.pid"
        self.bound = Bound(cache_bytes, self.data_dir) if cache_bytes else None
        self._init_process()

    @staticmethod
    def reachable(directory: Path) -> bool:
        """Whether the server's account can reach ``directory``, or its nearest existing parent (root's home, for one,
        is closed to it)."""
        probe = Path(directory)
        while not probe.exists():
            probe = probe.parent
        return _account_can(_run_as(), "-x", probe)

    @property
    def socket(self) -> Path:
        assert self.socket_dir is not None, "the server is not started"
        return self.socket_dir / "mariadbd.sock"

    @property
    def dsn(self) -> str:
        """The refbench user's DSN through the unix socket (what refbench's own clients use)."""
        return f"mysql://{USER}:{self.password}@localhost/?unix_socket={self.socket}"

    @property
    def tcp_dsn(self) -> str:
        return f"mysql://{USER}:{self.password}@127.0.0.1:{self.port}/"

    def database(self, name: str) -> str:
        """The DSN of database ``name`` on this server, created if it does not exist yet."""
        if not re.fullmatch(r"\w+", name):
            raise ValueError(f"not a plain database name: {name!r}")
        with connect(self.dsn) as conn:
            conn.cursor().execute(f"CREATE DATABASE IF NOT EXISTS `{name}`")
        return self.dsn.replace("/?", f"/{name}?")

    def initialize(self) -> bool:
        """mariadb-install-db when the data directory is new; returns True if it did."""
        if (self.data_dir / "mysql").is_dir():
            return False
        if not self.reachable(self.data_dir):  # asked before anything is created
            raise ServerDidNotStart(f"the mysql system user cannot reach {self.data_dir}: a parent directory is closed to other "
                            "users (chmod o+x it, or choose another --data-dir).")
        self.data_dir.mkdir(parents=True, exist_ok=True)
        if any(self.data_dir.iterdir()):
            raise ServerDidNotStart(f"{self.data_dir} is not empty and is not a MariaDB data directory; choose another --data-dir.")
        self._own(self.data_dir)
        if self.log_dir is not None:
            self.log_dir.mkdir(parents=True, exist_ok=True)
            if any(self.log_dir.iterdir()):
                raise ServerDidNotStart(f"{self.log_dir} is not empty; the redo log needs a directory of its own (log_dir).")
            self._own(self.log_dir)
        # The second unix_socket account is refbench's own system user (root, or whoever runs it): start() logs in
        # with it to create the refbench user.
        me = pwd.getpwuid(os.geteuid()).pw_name
        # A temporary directory of its own: a bootstrapping mariadbd removes every "#sql*" file in its tmpdir when it
        # starts, so two installs sharing /tmp remove each other's temporary tables ("Unknown table
        # 'mysql.tmp_user_sys'", seen when parallel tests initialised two servers at once).
        scratch = owned_temp_dir("refbench-mariadb-install-", self.account.pw_uid if self.account is not None else None)
        guard = watchdog().register(remove=[scratch])
        try:
            self._own(scratch)
            argv = [_binary("mariadb-install-db"), "--no-defaults", f"--datadir={self.data_dir}",
                    f"--auth-root-socket-user={me}", "--skip-test-db", "--skip-name-resolve", f"--tmpdir={scratch}",
                    *([f"--innodb-log-group-home-dir={self.log_dir}"] if self.log_dir else [])]
            result = subprocess.run(argv, capture_output=True, text=True, start_new_session=True,
                                    stdin=subprocess.DEVNULL, **_as_account(self.account))
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
            guard.release()
        if result.returncode != 0:
            raise ServerDidNotStart(f"mariadb-install-db failed: {_last_error(result.stderr + result.stdout)}.")
        return True

    def start(self) -> None:
        check_server_settings(self.settings)  # before mariadb-install-db writes anything
        self.initialize()
        (self.data_dir / TMP_DIR).mkdir(exist_ok=True)
        self._own(self.data_dir / TMP_DIR)
        # mariadbd opens its error log as its own account: a reused data directory's log may be new (a copy's).
        self.log_file.touch()
        self._own(self.log_file)
        self._open()
        self._launch()
        self._create_user()

    def _launch(self) -> None:
        options = {**DEFAULTS, **self.settings, "datadir": str(self.data_dir), "socket": str(self.socket),
                   "port": str(self.port), "bind_address": "127.0.0.1", "pid_file": str(self.pid_file),
                   "log_error": str(self.log_file), "tmpdir": str(self.data_dir / TMP_DIR),
                   **({"innodb_log_group_home_dir": str(self.log_dir)} if self.log_dir else {})}
        # --no-defaults must come first; flags without a value are refbench's own.
        argv = [_binary("mariadbd"), "--no-defaults", *(f"--{name}={value}" for name, values in options.items()
                                                         for value in (values if isinstance(values, tuple) else (values,))),
                "--skip-name-resolve"]
        _LAUNCHED[self.log_file] = self.log_file.stat().st_size if self.log_file.exists() else 0
        # SIGTERM is mariadbd's clean shutdown; SIGKILL is safe for InnoDB too (its redo log recovers it).
        self._spawn(argv, signal.SIGTERM, 10.0, (signal.SIGTERM, signal.SIGKILL))
        self._wait_until_ready()

    def _wait_until_ready(self) -> None:
        assert self.process is not None
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            if self.process.poll() is not None:
                self._stop_own()
                raise self._did_not_start()
            if "ready for connections" in _since_launch(self.log_file) and self.socket.exists():
                return
            if time.monotonic() > deadline:
                self._stop_own()
                raise self._did_not_start(f"did not accept connections within {START_TIMEOUT_S:g} s")
            time.sleep(0.05)

    def _create_user(self) -> None:
        """The refbench user, on the socket and on 127.0.0.1, with this run's password (again on every start: the
        password file may be a new run's)."""
        me = pwd.getpwuid(os.geteuid()).pw_name
        hashed = _native_password_hash(self.password)
        with _driver().connect(unix_socket=str(self.socket), user=me, connect_timeout=10) as conn:
            cursor = conn.cursor()
            for host in ("localhost", "127.0.0.1"):
                cursor.execute(f"CREATE OR REPLACE USER '{USER}'@'{host}' IDENTIFIED BY PASSWORD '{hashed}'")
                cursor.execute(f"GRANT ALL PRIVILEGES ON *.* TO '{USER}'@'{host}' WITH GRANT OPTION")

    def _stop_own(self) -> None:
        """Clean shutdown (SIGTERM) of the server this object started, and SIGKILL if that hangs."""
        self._shut_down([(signal.SIGTERM, STOP_TIMEOUT_S), (signal.SIGKILL, None)])

    def stop_stale(self) -> None:
        """Stops a server of this data directory that another process started (a refbench that was killed)."""
        try:
            pid = int(self.pid_file.read_text().split()[0])
            pidfd = os.pidfd_open(pid)
        except (OSError, ValueError, IndexError):
            return
        try:
            # The pid file outlives a server killed with SIGKILL, and its pid may be another process's by now.
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            if f"--datadir={self.data_dir}".encode() not in cmdline:
                return
            for signum, wait_s in ((signal.SIGTERM, STOP_TIMEOUT_S), (signal.SIGKILL, 10.0)):
                signal.pidfd_send_signal(pidfd, signum)
                deadline = time.monotonic() + wait_s
                while time.monotonic() < deadline and Path(f"/proc/{pid}").exists():
                    time.sleep(0.05)
                if not Path(f"/proc/{pid}").exists():
                    return
        except (OSError, ProcessLookupError):
            return
        finally:
            os.close(pidfd)


# The log of every server this process launched, and its size then: what a server logged since is this run's.
_LAUNCHED: dict[Path, int] = {}


def _since_launch(log: Path) -> str:
    try:
        with open(log, "rb") as f:
            f.seek(_LAUNCHED.get(log, 0))
            return f.read().decode(errors="replace")
    except OSError:
        return ""


def _server_error(log: Path) -> str | None:
    """The first error a server logged since it was launched, without its time stamp: the cause, which the errors
    after it follow from (a missing redo log, then InnoDB's failed start, then "Aborting"); or the disk-full wait
    (mariadbd waits for space instead of failing, and its clients just stop getting answers)."""
    for line in _since_launch(log).splitlines():
        if "[ERROR]" in line or "Disk is full" in line or "Disk full" in line:
            return re.sub(r"^.*?\[(ERROR|Warning)\]\s*", "", line).strip().rstrip(".")
    return None


def last_panic() -> str | None:
    """The error of the last server this process launched that logged one (its first), with its log's path: when a server crashes or waits for
    disk space, its clients see only a lost or silent connection, so the log is where the reason is."""
    found = None
    for log in _LAUNCHED:
        error = _server_error(log)
        found = f"{error} (its log: {log})" if error else found
    return found


# ---- the client ---------------------------------------------------------------------------------------------------


def _driver():
    """mysqlclient (MySQLdb, on libmariadb): of the two C-based clients it costs the least CPU per stored-procedure
    call, and calls fastest, beside MariaDB Connector/Python with either of its cursors
    (bench/mariadb_client_bench.py)."""
    import MySQLdb

    return MySQLdb


def parse_dsn(dsn: str) -> dict[str, Any]:
    """The connection arguments of a mysql:// (or mariadb://) URI: mysql://user:password@host:port/database, with
    ?unix_socket=/path for a local socket."""
    try:
        parts = urlsplit(dsn)
    except ValueError as exc:  # "Invalid IPv6 URL" and the like
        raise UserError(f"'{redact(dsn)}' is not a valid URI ({redact_quoted(str(exc), dsn)}); write it as "
                        "mysql://user:password@host:port/database.") from None
    if parts.scheme not in ("mysql", "mariadb"):
        raise UserError(f"'{redact(dsn)}' is not a MariaDB DSN; write it as mysql://user:password@host:port/database.")
    try:
        port = parts.port
    except ValueError:
        raise UserError(f"the port of '{redact(dsn)}' is not a number from 1 to 65535.") from None
    args: dict[str, Any] = {"host": parts.hostname or "localhost", "port": port or 3306,
                            "user": unquote(parts.username) if parts.username else pwd.getpwuid(os.geteuid()).pw_name}
    if parts.password is not None:
        args["password"] = unquote(parts.password)
    if parts.path.strip("/"):
        args["database"] = unquote(parts.path.strip("/"))
    for name, values in parse_qs(parts.query).items():
        if name != "unix_socket":
            raise UserError(f"'{redact(dsn)}' has the parameter '{name}', which refbench does not know (only unix_socket).")
        args["unix_socket"] = values[-1]
    return args


def connect(dsn: str, **kwargs: Any):
    """A connection to the server of ``dsn``, with a one-sentence UserError for the failures a user can cause."""
    driver = _driver()
    try:
        return driver.connect(**parse_dsn(dsn), connect_timeout=10, **kwargs)
    except driver.Error as exc:
        raise UserError(f"cannot connect to MariaDB at '{redact(dsn)}': {_client_error(exc)}.") from None


def _client_error(exc: Exception) -> str:
    """The client's message without its error number (MySQLdb's errors are (number, message)), and the system error
    at its end in words: libmariadb's "(115)" after a refused TCP connection is its non-blocking connect's
    EINPROGRESS, which says nothing, so it goes."""
    text = str(exc.args[-1]).strip() if exc.args else ""
    text = text.splitlines()[0] if text else type(exc).__name__
    text = re.sub(r" \((-?\d+)\)$", lambda m: f" ({os.strerror(int(m[1]))})"
                  if int(m[1]) > 0 and int(m[1]) != errno.EINPROGRESS else "", text)
    return redact(text).rstrip(".")


def _refused_local_infile(exc: Exception) -> None:
    """A UserError if ``exc`` is the server refusing LOAD DATA LOCAL INFILE."""
    if exc.args and exc.args[0] in (1148, 4166):  # ER_NOT_ALLOWED_COMMAND, ER_LOAD_INFILE_CAPABILITY_DISABLED
        raise UserError(f"the MariaDB server refuses LOAD DATA LOCAL INFILE, which refbench loads with "
                        f"({_client_error(exc)}); set local_infile=ON on it.") from None


def load_lines(conn, table: str, columns: str, lines: Iterable[str]) -> int:
    """LOAD DATA LOCAL INFILE of rows in PostgreSQL COPY's text format, which is LOAD DATA's default too (tab-separated,
    backslash escapes, \\N for NULL, one row per line), so a loader's lines serve both engines. They are streamed
    through a named pipe in a private directory: the client reads it as the file it sends, while a thread writes the
    lines, and nothing lands on disk. ``conn`` needs local_infile=True (connect's keyword)."""
    directory = owned_temp_dir("refbench-load-")
    fifo = directory / "rows"
    os.mkfifo(fifo, 0o600)
    failure: list[BaseException] = []

    def write() -> None:
        try:
            with open(fifo, "w") as f:
                # Both ends are open: the pipe needs no name any more. Removed now, it is not left behind by a loader
                # killed during its load (a SIGTERM'd worker runs no cleanup); only the instant before this is, and
                # the next start removes that (owned_temp_dir).
                shutil.rmtree(directory, ignore_errors=True)
                chunk: list[str] = []
                for line in lines:
                    chunk.append(line)
                    if len(chunk) == 4096:
                        f.write("".join(chunk))
                        chunk = []
                f.write("".join(chunk))
        except BrokenPipeError:
            pass  # the statement failed and its error is raised instead
        except BaseException as exc:  # re-raised by the caller's thread; the statement then fails on a short file
            failure.append(exc)

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    driver = _driver()
    try:
        cursor = conn.cursor()
        cursor.execute(f"LOAD DATA LOCAL INFILE %s INTO TABLE {table} ({columns})", (str(fifo),))
        count = cursor.rowcount
    except driver.Error as exc:
        _refused_local_infile(exc)
        raise
    finally:
        # A statement that failed before it opened the pipe leaves the writer waiting for a reader: one that opens
        # and closes it ends its wait (its next write fails with a broken pipe). Again until the writer is gone: it
        # may not have reached its open() yet when the first reader came and went.
        while writer.is_alive():
            try:
                os.close(os.open(fifo, os.O_RDONLY | os.O_NONBLOCK))
            except FileNotFoundError:
                pass  # the writer had its reader and removed the pipe: it ends on a broken pipe
            writer.join(0.05)
        shutil.rmtree(directory, ignore_errors=True)
    if failure:
        raise failure[0]
    return count


def _load_marked(conn) -> bool:
    """Whether the database holds refbench_load, the table a finished load leaves."""
    return bool(_rows(conn, "SELECT COUNT(*) FROM information_schema.TABLES WHERE table_schema = DATABASE() "
                            "AND table_name = 'refbench_load'")[0][0])


def _create_schema(dsn: str, dataset: Dataset, dialect: str) -> None:
    """The dataset's tables, new and empty (and no refbench_load: the load is not done)."""
    with connect(dsn, autocommit=True) as conn:
        cursor = conn.cursor()
        cursor.execute("DROP TABLE IF EXISTS refbench_load, " + ", ".join(dataset.tables))
        for statement in sql_statements(dataset.sql(dialect, "schema")):
            cursor.execute(statement)


def _indexes_by_table(dataset: Dataset, dialect: str) -> dict[str, list[str]]:
    """The dataset's CREATE INDEX statements grouped by their table (one table's builds run in sequence)."""
    by_table: dict[str, list[str]] = {}
    for statement in sql_statements(dataset.sql(dialect, "indexes")):
        by_table.setdefault(re.search(r" ON (\w+)", statement)[1], []).append(statement)
    return by_table


def _rows(conn, sql: str, params: tuple = ()) -> list[tuple]:
    """A statement's rows; without ``params`` it is sent as written, so that a '%' in it (a LIKE pattern) is not
    taken for a placeholder."""
    cursor = conn.cursor()
    if params:
        cursor.execute(sql, params)
    else:
        cursor.execute(sql)
    return list(cursor.fetchall())


def server_version(conn) -> str:
    return _rows(conn, "SELECT VERSION()")[0][0]


def server_settings(conn, names: list[str]) -> dict[str, str]:
    """Server variables by name (as MariaDB spells them, with underscores), for the report."""
    if not names:
        return {}
    marks = ", ".join(["%s"] * len(names))
    return {name.lower(): value for name, value in
            _rows(conn, f"SHOW GLOBAL VARIABLES WHERE Variable_name IN ({marks})", tuple(names))}


def check_server(conn, database: str | None = None) -> None:
    """That the server is a MariaDB new enough for refbench's SQL, and that the connected user may do in ``database``
    (the connection's own when None) what the benchmark does there: one sentence otherwise."""
    problem = version_problem(server_version(conn))
    if problem:
        raise UserError(problem)
    database = database or _rows(conn, "SELECT DATABASE()")[0][0]
    missing = [p for p in NEEDED_PRIVILEGES if p not in _privileges(conn, database)]
    if missing:
        user = _rows(conn, "SELECT CURRENT_USER()")[0][0]
        where = f"database '{database}'" if database else "its databases"
        raise UserError(f"the MariaDB user {user} lacks the privileges {', '.join(missing)} on {where}, which the "
                        f"benchmark needs (GRANT ALL ON `{database or 'tpcc'}`.* TO it).")


def version_problem(version: str) -> str | None:
    """What is wrong with a server of this VERSION() for refbench's SQL, or None."""
    # "5.5.5-" is a prefix of MariaDB's handshake for old MySQL clients (10.x would read as older than 5.6).
    numbers = re.match(r"(?:5\.5\.5-)?(\d+)\.(\d+)", version)
    if "mariadb" not in version.lower() or not numbers:
        return (f"the server at this DSN is not MariaDB (its version is '{version}'); refbench's mysql:// engine "
                "drives MariaDB only.")
    if tuple(map(int, numbers.groups())) < MINIMUM_VERSION:
        return (f"the MariaDB server is version {version}, too old for refbench's SQL, which needs "
                f"{'.'.join(map(str, MINIMUM_VERSION))} or newer.")
    return None


def _privileges(conn, database: str | None) -> set[str]:
    """The privileges the connected user (with its current role) has on every table of ``database``: the global ones
    and those granted on the database (SHOW GRANTS spells them out, patterns with % and _ included)."""
    granted: set[str] = set()
    for (line,) in _rows(conn, "SHOW GRANTS"):
        m = re.match(r"GRANT (.+?) ON (\S+) TO ", line)
        if not m:
            continue  # a role granted to the user: SHOW GRANTS lists the current role's own grants separately
        target = m.group(2)
        if target == "*.*" or (database and target.endswith(".*") and _matches(target[:-2].strip("`"), database)):
            privileges = {p.strip().upper() for p in re.split(r",\s*", m.group(1))}
            granted |= set(NEEDED_PRIVILEGES) if "ALL PRIVILEGES" in privileges or "ALL" in privileges else privileges
    return granted


def _matches(pattern: str, name: str) -> bool:
    """A database name of GRANT … ON: % and _ are wildcards unless escaped with a backslash."""
    regex = "".join(re.escape(c[-1]) if c.startswith("\\") else ".*" if c == "%" else "." if c == "_" else re.escape(c)
                    for c in re.findall(r"\\.|.", pattern))
    return re.fullmatch(regex, name) is not None


def block_counts(conn) -> dict[str, int]:
    """InnoDB's cumulative buffer pool counters, in PostgreSQL's shape (block_counts there): pages found in the buffer
    pool (hit) and pages read from storage (read: O_DIRECT, no page cache between), the page size, the connection's
    database's size (as its table statistics have it: ANALYZE TABLE after a load brings them up to date); and the bytes InnoDB read and wrote in its data files (doublewrite included; pages are written
    by its page cleaner, later than the commits that changed them) and in its redo log (at each commit)."""
    status = dict(_rows(conn, "SHOW GLOBAL STATUS WHERE Variable_name IN ('Innodb_buffer_pool_read_requests', "
                              "'Innodb_buffer_pool_reads', 'Innodb_page_size', 'Innodb_data_read', "
                              "'Innodb_data_written', 'Innodb_os_log_written')"))
    size = _rows(conn, "SELECT COALESCE(SUM(data_length + index_length), 0) FROM information_schema.TABLES "
                       "WHERE table_schema = DATABASE()")[0][0]
    requests, reads = int(status["Innodb_buffer_pool_read_requests"]), int(status["Innodb_buffer_pool_reads"])
    return {"blocks_read": reads, "blocks_hit": requests - reads, "block_bytes": int(status["Innodb_page_size"]),
            "database_bytes": int(size), "data_read_bytes": int(status["Innodb_data_read"]),
            "data_written_bytes": int(status["Innodb_data_written"]), "log_written_bytes": int(status["Innodb_os_log_written"]),
            "written_bytes": int(status["Innodb_data_written"]) + int(status["Innodb_os_log_written"])}


PICOSECONDS_PER_MS = 1e9


def timed_io(conn) -> dict[str, float]:
    """InnoDB's I/O in PostgreSQL's shape (postgres.block_counts): its data file reads and their time as
    performance_schema timed them (when the server runs with it, as the managed one does), and its redo log writes,
    each made durable at commit (innodb_flush_log_at_trx_commit = 1), counted but not timed: MariaDB 10.8 on writes the
    redo log past performance_schema's file instruments."""
    out: dict[str, float] = {"wal_syncs": int(dict(_rows(conn, "SHOW GLOBAL STATUS LIKE 'Innodb_log_writes'"))
                                              .get("Innodb_log_writes", 0))}
    try:
        rows = _rows(conn, "SELECT COUNT_READ, SUM_TIMER_READ FROM performance_schema.file_summary_by_event_name "
                                 "WHERE EVENT_NAME = 'wait/io/file/innodb/innodb_data_file'")
    except Exception:  # no performance_schema on a user's server: the times are left out, not the measurement
        return out
    if rows and rows[0][0]:
        out |= {"timed_reads": int(rows[0][0]), "read_time_ms": float(rows[0][1]) / PICOSECONDS_PER_MS}
    return out


def hit_ratio(before: dict[str, int], after: dict[str, int]) -> float | None:
    """The share of page requests between two block_counts that the buffer pool answered (None if there were none)."""
    hits, reads = after["blocks_hit"] - before["blocks_hit"], after["blocks_read"] - before["blocks_read"]
    return hits / (hits + reads) if hits + reads > 0 else None


# ---- the engine behind refbench.engines' interface -------------------------------------------------------------


ER_STATEMENT_TIMEOUT = 1969  # "Query execution was interrupted (max_statement_time exceeded)"


class MariaDbSession:
    def __init__(self, dsn: str):
        self.dsn = dsn
        self.conn = connect(dsn, autocommit=True)
        # Read now: the client refuses any call on a connection another thread is running a query on.
        self.thread_id = self.conn.thread_id()
        self.timeout_s: float | None = None  # the session's max_statement_time, once set

    def run(self, query: str, timeout_s: float | None = None) -> tuple[list[tuple], float]:
        # max_statement_time is set only when it changes, so the timed call stays one round trip.
        wanted = float(timeout_s or 0)
        if wanted != self.timeout_s:
            self.conn.cursor().execute(f"SET SESSION max_statement_time = {wanted:.6f}")
            self.timeout_s = wanted
        driver = _driver()
        t0 = time.perf_counter()
        with answered_in_time(self.conn.fileno(), timeout_s, "MariaDB") as given_up:
            try:
                cursor = self.conn.cursor()
                cursor.execute(query)
                rows = list(cursor.fetchall()) if cursor.description else []
            except driver.OperationalError as exc:
                given_up()
                if not timeout_s or not exc.args or exc.args[0] != ER_STATEMENT_TIMEOUT:
                    raise
                raise QueryTimeout(timeout_s) from None
        return rows, time.perf_counter() - t0

    def cancel(self) -> None:
        """KILL QUERY from a connection of its own: a connection busy with a query cannot be asked anything."""
        with connect(self.dsn) as conn:
            conn.cursor().execute(f"KILL QUERY {self.thread_id}")

    def close(self) -> None:
        self.conn.close()


def _load_table(dsn: str, table: str, csv: Path) -> int:
    """One LOAD DATA LOCAL INFILE of tpchgen's CSV (a header line, fields quoted when they hold a comma). LOCAL makes
    a value that does not fit its column a warning instead of an error, so any warning fails the load."""
    with connect(dsn, autocommit=True, local_infile=True) as conn:
        cursor = conn.cursor()
        cursor.execute(f"TRUNCATE TABLE {table}")
        try:
            cursor.execute(f"LOAD DATA LOCAL INFILE %s INTO TABLE {table} FIELDS TERMINATED BY ',' "
                           "OPTIONALLY ENCLOSED BY '\"' IGNORE 1 LINES", (str(csv),))
        except _driver().Error as exc:
            _refused_local_infile(exc)
            raise
        _fail_on_warnings(conn, str(csv))
        return cursor.rowcount


def _fail_on_warnings(conn, what: str) -> None:
    """LOAD DATA turns a value that does not fit its column into a warning, and loads on: a warning fails the load."""
    warnings = conn.warning_count()
    if warnings:
        message = _rows(conn, "SHOW WARNINGS LIMIT 1")[0][2]
        raise UserError(f"loading {what} into MariaDB gave {warnings} warning{'s' * (warnings > 1)}, the first: "
                        f"{message.rstrip('.')}.")


class MariaDbEngine(ServerEngine):
    """refbench.engines.Engine for MariaDB: a managed server (``server``) or a user's (``server`` None, a mysql://
    DSN)."""

    name = "mariadb"
    title = "MariaDB"
    kind = "row store"
    in_process = False
    buffer_cache = "buffer pool"  # not reloaded at a restart (DEFAULTS)
    counters_restart_with_server = True  # InnoDB's status counters live in the process (storage.Probe)
    Session = MariaDbSession
    Managed = ManagedMariaDB

    @classmethod
    def require_installed(cls) -> None:
        require_server_binaries()

    @classmethod
    def check_settings(cls, settings: dict[str, str], origins: dict[str, str]) -> None:
        """A managed server's variables judged by mariadbd before anything is written (check_server_settings)."""
        check_server_settings(settings, origins)

    @classmethod
    def check_dsn(cls, dsn: str) -> None:
        with connect(dsn) as conn:
            problem = version_problem(server_version(conn))
        if problem:
            raise UserError(problem)

    @classmethod
    def reaches(cls, directory: Path) -> bool:
        return ManagedMariaDB.reachable(directory)

    @classmethod
    def managed_data_dir(cls, preferred: Path, fallback: Path) -> Path:
        return managed_data_dir(preferred, fallback, ManagedMariaDB.reachable)

    def loaded(self, scale_factor: float) -> bool:
        with connect(self.dsn, autocommit=True) as conn:
            if not _load_marked(conn):
                return False
            return _rows(conn, "SELECT scale_factor FROM refbench_load")[0][0] == scale_factor

    def load(self, data_dir: Path, scale_factor: float) -> dict[str, Any]:
        """The tables and their keys (keys.sql, on the empty tables: see there why), LOAD DATA LOCAL INFILE of every
        table (largest first, as many at once as there are workers), then each table's indexes (one table's in
        sequence: an index build locks its table's metadata; tables in parallel), then ANALYZE TABLE for the
        optimizer's statistics."""
        self.close()
        data_dir = data_dir.absolute()
        t0 = time.monotonic()
        tables = self.dataset.tables
        size = {t: (data_dir / f"{t}.csv").stat().st_size for t in tables}
        largest_first = sorted(tables, key=lambda t: -size[t])
        driver = _driver()
        try:
            _create_schema(self.dsn, self.dataset, self.name)
            self._in_parallel([sql_statements(self.dataset.sql(self.name, "keys"))])
            with ThreadPoolExecutor(self.workers) as pool:
                counts = pool.map(lambda t: _load_table(self.dsn, t, data_dir / f"{t}.csv"), largest_first)
                rows = dict(zip(largest_first, counts))
            load_s = time.monotonic() - t0
            by_table = _indexes_by_table(self.dataset, self.name)
            self._in_parallel([by_table[t] for t in largest_first if t in by_table])
            self._in_parallel([[f"ANALYZE TABLE {t}"] for t in largest_first])
            with connect(self.dsn, autocommit=True) as conn:
                cursor = conn.cursor()
                cursor.execute("CREATE TABLE refbench_load (scale_factor DOUBLE)")
                cursor.execute("INSERT INTO refbench_load VALUES (%s)", (scale_factor,))
        except driver.Error as exc:
            raise UserError(f"loading the {self.dataset.title} tables into MariaDB failed: {_client_error(exc)}.") from None
        return {"load_s": round(load_s, 2), "index_s": round(time.monotonic() - t0 - load_s, 2), "rows": rows,
                "copy": "LOAD DATA LOCAL INFILE"}

    def _in_parallel(self, groups: list[list[str]]) -> None:
        _each_in_parallel(self.dsn, groups, self.workers)

    def data_files(self) -> list[Path] | None:
        """None for a user's server: its files are not refbench's to touch. InnoDB reads with O_DIRECT, so the page
        cache holds little of them; the caller's eviction is harmless."""
        return None if self.server is None else files_under([self.server.data_dir / self.dataset.name])

    def counters(self) -> dict[str, float]:
        with connect(self.dsn, autocommit=True) as conn:
            counts = block_counts(conn)
            timed = timed_io(conn)
        return {k: counts[k] for k in ("blocks_hit", "blocks_read", "block_bytes", "database_bytes")} | timed

    def find_local_pid(self, conn) -> int | None:
        return local_mariadbd(conn)

    def wait_sampler(self) -> SessionSampler:
        return SessionSampler(lambda: connect(self.dsn, autocommit=True), MARIADB_ACTIVE_SESSIONS, fetch=_rows,
                              watch=RedoLogWatch.for_server(self.local_server_pid()), classify=commits_as_running)

    def usage(self) -> dict[str, int]:
        """The redo log written (wal_bytes) and the pages the executor asked of the buffer pool (logical_read_bytes);
        MariaDB counts temporary tables on disk, not their bytes, so temp_bytes is left out."""
        with connect(self.dsn, autocommit=True) as conn:
            counts = block_counts(conn)
        return {"wal_bytes": counts["log_written_bytes"],
                "logical_read_bytes": (counts["blocks_hit"] + counts["blocks_read"]) * counts["block_bytes"]}

    def sizes(self) -> dict[str, Any]:
        with connect(self.dsn, autocommit=True) as conn:
            rows = _rows(conn, "SELECT table_name, data_length, index_length FROM information_schema.TABLES "
                               "WHERE table_schema = DATABASE()")
        mine = [r for r in rows if r[0] in self.dataset.tables]
        return {"tables_bytes": {r[0]: int(r[1]) for r in mine}, "indexes_bytes": {r[0]: int(r[2]) for r in mine},
                "database_bytes": sum(int(r[1]) + int(r[2]) for r in rows)}

    def connect(self):
        return connect(self.dsn, autocommit=True)

    def settings(self, names: list[str] | None = None) -> dict[str, str]:
        with connect(self.dsn, autocommit=True) as conn:
            return {"version": server_version(conn),
                    **server_settings(conn, names or ["innodb_buffer_pool_size", "innodb_flush_method",
                                                      "join_buffer_size", "sort_buffer_size", "tmp_table_size",
                                                      "max_heap_table_size", "optimizer_search_depth"])}


ENGINE = MariaDbEngine


# ---- the OLTP side (refbench.engines.Transactional): the oltp suite's tables in the DSN's database ----------------


# Client errors after which a virtual user's connection is gone.
_LOST = {2006, 2013, 2055, 4031}  # server gone, lost during the query, lost at reading, idle timeout
_SHUTDOWN = 1053  # ER_SERVER_SHUTDOWN
# Server errors after which going on would only measure the failure: the virtual user stops and the case fails.
_FATAL = {
    **dict.fromkeys((1021, 1037, 1038, 1040, 1041, 1114), "the database server ran out of disk space, memory or connections"),
    **dict.fromkeys((1053, 1317, 1927), "the database server was shut down or the transaction was cancelled"),
    **dict.fromkeys((1030, 1034, 1180, 1181), "the database server's storage engine failed"),
    **dict.fromkeys((1054, 1064, 1146, 1305, 1318), "the TPC-C tables or procedures are missing or were changed"),
}


class MariaDbClient:
    """refbench.engines.TransactionClient on mysqlclient's low-level connection (_mysql): ``send_query`` sends a CALL
    and returns, ``read_query_result`` reads its outcome once the socket (``fileno``) is readable, so one process
    drives many users as on PostgreSQL. The values go into the CALL's text as quoted, escaped literals (the protocol's
    text form; a server-side prepared CALL would cost a round trip more per user at login and nothing less per call)."""

    __slots__ = ("conn", "templates", "rollback_code", "error", "literal")

    def __init__(self, dsn: str, calls: dict[str, str], rollback_code: str):
        try:
            self.conn = connect(dsn, autocommit=True)
        except UserError as exc:
            raise TransactionFailed(f"could not start: {exc}") from None
        self.templates = {tx: query.encode() for tx, query in calls.items()}
        self.rollback_code, self.error, self.literal = rollback_code, _driver().MySQLError, self.conn.string_literal

    def fileno(self) -> int:
        return self.conn.fileno()

    def _query(self, tx: str, params: list) -> bytes:
        literal = self.literal
        return self.templates[tx] % tuple([b"NULL" if p is None else literal(p) for p in params])

    def call(self, tx: str, params: list) -> str:
        try:
            self.conn.send_query(self._query(tx, params))
        except self.error as exc:
            return self._outcome(exc)
        return self.receive()

    def send(self, tx: str, params: list) -> None:
        try:
            self.conn.send_query(self._query(tx, params))
        except self.error as exc:
            self._outcome(exc)  # a send fails only when the connection is gone: raised there

    def receive(self) -> str:
        """The CALL's outcome: its one-row result, then the procedure's closing status, which the server sends right
        after it (the procedures select their result after their COMMIT), so neither read waits for the server."""
        conn = self.conn
        try:
            conn.read_query_result()
            conn.store_result()
            while conn.next_result() == 0:
                conn.store_result()
        except self.error as exc:
            return self._outcome(exc)
        return "ok"

    def _outcome(self, exc: BaseException) -> str:
        code = exc.args[0] if exc.args and isinstance(exc.args[0], int) else 0
        if str(code) == self.rollback_code:
            return "rollback"
        if code in _LOST or not exc.args:
            raise ConnectionLost(f"lost its connection: {_client_error(exc)}")
        if code in _FATAL:
            failed = ConnectionLost if code == _SHUTDOWN else TransactionFailed
            raise failed(f"stopped: {_FATAL[code]} ({code}: {_client_error(exc)})")
        return str(code)

    def close(self) -> None:
        self.conn.close()


@contextlib.contextmanager
def _loader_connection(dsn: str):
    """A loader's connection: LOAD DATA LOCAL allowed, its rows committed once when the block ends."""
    conn = connect(dsn, local_infile=True, autocommit=False)
    try:
        yield conn
        conn.commit()
    finally:
        conn.close()


def _each_in_parallel(dsn: str, groups: list[list[str]], workers: int) -> None:
    """Each group's statements in order on a connection of its own, ``workers`` groups at once."""
    def run(group: list[str]) -> None:
        with connect(dsn, autocommit=True) as conn:
            cursor = conn.cursor()
            for statement in group:
                cursor.execute(statement)
                if cursor.description:
                    cursor.fetchall()  # ANALYZE TABLE answers with a result set

    with ThreadPoolExecutor(max(1, workers)) as pool:
        list(pool.map(run, [g for g in groups if g]))


def local_mariadbd(conn) -> int | None:
    """A user's server on this host: its process, from its pid file when this user may read it."""
    try:
        pid = int(Path(_rows(conn, "SELECT @@pid_file")[0][0]).read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    stat = proc_stat(pid)
    return pid if stat is not None and stat[0] in ("mariadbd", "mysqld") else None


def _process_cpu_s(pid: int) -> float | None:
    """CPU seconds so far of one process and all its threads (mariadbd is one process)."""
    stat = proc_stat(pid)
    return None if stat is None else stat[2] / os.sysconf("SC_CLK_TCK")


class MariaDbTransactional:
    """refbench.engines.Transactional for MariaDB: the dataset's tables in the DSN's database (InnoDB, keys declared
    with the tables so rows land in key order), loaded by LOAD DATA LOCAL INFILE (one transaction per loader), then the
    secondary indexes and ANALYZE TABLE; the transactions are stored procedures, one CALL each."""

    name = "mariadb"
    new_order_lines = "json"
    # How long mark_loaded waits for InnoDB to write the load's dirty pages out before the first measurement.
    FLUSH_WAIT_S = 300.0

    def __init__(self, dsn: str, dataset: Dataset, server_pid: int | None):
        _driver()  # imported before the driver forks its workers: they share its pages
        self.dsn, self.dataset, self.server_pid = dsn, dataset, server_pid

    @classmethod
    def create(cls, engine: Any, dataset: Dataset) -> "MariaDbTransactional":
        return cls(engine.dsn, dataset, engine.server_pid())

    def connect(self):
        return connect(self.dsn, autocommit=True)

    def check_user(self, users: int, own: int) -> None:
        with self.connect() as conn:
            check_server(conn)
            limit = int(_rows(conn, "SELECT @@max_connections")[0][0])
            used = int(_rows(conn, "SHOW GLOBAL STATUS LIKE 'Threads_connected'")[0][1])
        free = limit - used + 1  # this check's own connection is free again when the run starts
        if free < users + own:
            raise UserError(f"the MariaDB server has {free} free connection(s) (max_connections {limit}, {used} in use) "
                            f"and {users} virtual user(s) need {users + own} (one each and {own} of refbench's own); "
                            "raise its max_connections or lower the user count.")

    def loaded_warehouses(self) -> int | None:
        with self.connect() as conn:
            if not _load_marked(conn):
                return None
            found = _rows(conn, "SELECT warehouses FROM refbench_load")
        return found[0][0] if found else None

    def create_schema(self) -> None:
        _create_schema(self.dsn, self.dataset, self.name)

    def loader(self):
        return _loader_connection(self.dsn)

    def copy_rows(self, conn, table: str, columns: str, rows) -> int:
        return self.copy_lines(conn, table, columns,
                               ("\t".join(r"\N" if v is None else str(v) for v in row) + "\n" for row in rows))

    def copy_lines(self, conn, table: str, columns: str, lines) -> int:
        count = load_lines(conn, table, columns, lines)
        _fail_on_warnings(conn, table)
        return count

    def finish_tables(self, tables: list[str], workers: int) -> None:
        """One table's indexes in sequence (a build locks its table's metadata), tables in parallel, then ANALYZE."""
        by_table = _indexes_by_table(self.dataset, self.name)
        _each_in_parallel(self.dsn, [by_table.get(t, []) + [f"ANALYZE TABLE {t}"] for t in tables], workers)

    def install(self, transactions: list[str]) -> None:
        with self.connect() as conn:
            for name in transactions:
                conn.cursor().execute(self.dataset.sql(self.name, name))  # one CREATE OR REPLACE PROCEDURE, whole

    def mark_loaded(self, warehouses: int, rows: int) -> None:
        with self.connect() as conn:
            cursor = conn.cursor()
            cursor.execute("CREATE TABLE refbench_load (warehouses int, loaded_rows bigint, "
                           "loaded_at DATETIME DEFAULT CURRENT_TIMESTAMP)")
            cursor.execute("INSERT INTO refbench_load (warehouses, loaded_rows) VALUES (%s, %s)", (warehouses, rows))
            self.flush_dirty_pages(conn)

    def flush_dirty_pages(self, conn) -> None:
        """PostgreSQL's CHECKPOINT after a load, for InnoDB: the page cleaner is told to keep no dirty page, at an I/O
        rate the storage sets rather than innodb_io_capacity's (200 pages/s by default: a 2-warehouse load took 70 s),
        until the load's pages are written, so that their writing does not fall into the first measurement. A user's
        server may not let this user set them; then the server writes them in its own time."""
        names = ("innodb_io_capacity_max", "innodb_io_capacity", "innodb_max_dirty_pages_pct")
        before = dict(_rows(conn, "SHOW GLOBAL VARIABLES WHERE Variable_name IN (%s, %s, %s)", names))
        cursor = conn.cursor()
        changed: list[str] = []
        try:
            for name, value in zip(names, ("1000000", "1000000", "0")):
                cursor.execute(f"SET GLOBAL {name} = {value}")
                changed.append(name)
            deadline = time.monotonic() + self.FLUSH_WAIT_S
            while time.monotonic() < deadline:
                if int(_rows(conn, "SHOW GLOBAL STATUS LIKE 'Innodb_buffer_pool_pages_dirty'")[0][1]) < 64:
                    break
                time.sleep(0.1)
        except _driver().OperationalError:
            pass  # no SUPER or SYSTEM VARIABLES ADMIN on a user's server
        finally:
            for name in reversed(changed):
                cursor.execute(f"SET GLOBAL {name} = {before[name]}")

    def sizes(self) -> dict[str, Any]:
        with self.connect() as conn:
            found = _rows(conn, "SELECT table_name, data_length + index_length, table_rows FROM information_schema.TABLES "
                                "WHERE table_schema = DATABASE()")
        tables = {name: {"bytes": int(size), "rows_estimate": int(n or 0)} for name, size, n in found
                  if name in self.dataset.tables}
        return {"tables": tables, "total_bytes": sum(t["bytes"] for t in tables.values())}

    def script(self, conn, text: str, params: dict[str, Any]) -> tuple:
        row: tuple = ()
        cursor = conn.cursor()
        for statement in sql_statements(text):
            cursor.execute(statement, params if "%(" in statement else None)
            if cursor.description:
                row = cursor.fetchone()
            while cursor.nextset():
                pass
        return row

    def counters(self, conn) -> dict[str, int]:
        """TPM's counter is the server's: a CALL's COMMIT or ROLLBACK counts once in Com_commit or Com_rollback (the
        statements inside a procedure count in Handler_commit, not there), for all the server's databases."""
        next_o_id = _rows(conn, "SELECT sum(d_next_o_id) FROM district")[0][0]
        status = dict(_rows(conn, "SHOW GLOBAL STATUS WHERE Variable_name IN ('Com_commit', 'Com_rollback')"))
        return {"sum_d_next_o_id": int(next_o_id), "xact_commit": int(status["Com_commit"]),
                "xact_rollback": int(status["Com_rollback"])}

    def server_cpu(self, conn):
        pid = self.server_pid or local_mariadbd(conn)
        return None if pid is None else functools.partial(_process_cpu_s, pid)

    def client(self, calls: dict[str, str], rollback_code: str) -> MariaDbClient:
        return MariaDbClient(self.dsn, calls, rollback_code)

    def failure(self, exc: BaseException) -> str | None:
        return _client_error(exc) if isinstance(exc, _driver().Error) else None


TRANSACTIONAL = MariaDbTransactional
