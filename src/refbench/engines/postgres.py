"""PostgreSQL: a managed instance refbench starts and stops itself, or the user's server through a DSN.

The managed instance is initdb'd into a data directory the user can place on the storage under test, listens
on a unix socket and 127.0.0.1 only, and runs with the settings refbench passes on the command line (so the
report records exactly what ran). PostgreSQL refuses to run as root; as root, refbench runs it as the
``postgres`` system user.
"""

from __future__ import annotations

import os
import pwd
import re
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from refbench.errors import UserError
from refbench.host.inventory import postgres_binary

SUPERUSER = "refbench"


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


def _demote(account: pwd.struct_passwd | None):
    if account is None:
        return None

    def switch() -> None:
        os.setgid(account.pw_gid)
        os.setuid(account.pw_uid)

    return switch


def _account_can(account: pwd.struct_passwd | None, test_flag: str, path: Path) -> bool:
    """``test FLAG PATH`` as the server's account: can it enter (-x) or write (-w) there?"""
    return account is None or subprocess.run(["test", test_flag, str(path)], preexec_fn=_demote(account)).returncode == 0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ManagedPostgres:
    """initdb / start / stop of a private PostgreSQL server."""

    def __init__(self, data_dir: Path, settings: dict[str, str]):
        self.data_dir = Path(data_dir).absolute()
        self.settings = dict(settings)
        self.account = _run_as()
        self.port = 0
        self.socket_dir: Path | None = None
        self.log_file = self.data_dir.parent / f"{self.data_dir.name}.log"

    @staticmethod
    def reachable(directory: Path) -> bool:
        """Whether the server's account can reach ``directory`` (root's home, for one, is closed to it)."""
        account = _run_as()
        probe = Path(directory)
        while not probe.exists():
            probe = probe.parent
        return _account_can(account, "-x", probe)

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
        result = subprocess.run(argv, capture_output=True, text=True, preexec_fn=_demote(self.account),
                                start_new_session=True, stdin=subprocess.DEVNULL)
        if result.returncode != 0:
            detail = _last_error(result.stderr + result.stdout + _tail(self.log_file))
            raise UserError(f"PostgreSQL {what} failed: {detail}.")
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
        self._run([_binary("initdb"), "-D", str(self.data_dir), "-U", SUPERUSER, "--auth=trust", "-E", "UTF8",
                   "--no-locale", "--no-instructions"], "initdb")
        return True

    def start(self) -> None:
        self.initialize()
        self.stop_stale()
        self.port = free_port()
        # A short socket path: unix socket paths are limited to about 100 bytes, run directories are long.
        self.socket_dir = Path(tempfile.mkdtemp(prefix="refbench-pg-"))
        self._own(self.socket_dir)
        self._launch()

    def restart(self) -> None:
        """Stops and starts the server on the same port and socket, so its buffer cache starts empty."""
        self.stop_stale()
        self._launch()

    def _launch(self) -> None:
        options = {"port": str(self.port), "listen_addresses": "127.0.0.1", "unix_socket_directories": str(self.socket_dir),
                   **self.settings}
        opts = " ".join(f"-c {k}={_quote(v)}" for k, v in options.items())
        self._run([_binary("pg_ctl"), "-D", str(self.data_dir), "-l", str(self.log_file), "-o", opts, "-w", "-t", "120",
                   "start"], "start")

    def stop(self) -> None:
        self.stop_stale()
        if self.socket_dir is not None:
            shutil.rmtree(self.socket_dir, ignore_errors=True)
            self.socket_dir = None

    def stop_stale(self) -> None:
        """Stops the server of this data directory if one runs: ours, or one a killed refbench left behind."""
        if (self.data_dir / "postmaster.pid").exists():
            subprocess.run([_binary("pg_ctl"), "-D", str(self.data_dir), "-m", "fast", "-w", "-t", "120", "stop"],
                           capture_output=True, preexec_fn=_demote(self.account), start_new_session=True)


def managed_data_dir(preferred: Path, fallback: Path) -> Path:
    """``preferred`` if the server's account can reach it; otherwise ``fallback`` (a checkout in root's home is
    closed to the postgres account), created with its parents open to it."""
    if ManagedPostgres.reachable(preferred.parent):
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


def redact(dsn: str) -> str:
    return re.sub(r"(password\s*=\s*)\S+", r"\1***", re.sub(r"(://[^:/@]+:)[^@]+@", r"\1***@", dsn))


def server_settings(conn, names: list[str]) -> dict[str, str]:
    rows = conn.execute("SELECT name, current_setting(name) FROM pg_settings WHERE name = ANY(%s)", (names,)).fetchall()
    return dict(rows)


def _quote(value: str) -> str:
    return value if re.fullmatch(r"[A-Za-z0-9_./:-]+", value) else "'" + value.replace("'", "''") + "'"


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
