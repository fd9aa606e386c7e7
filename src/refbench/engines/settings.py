"""Engine settings as the engines spell them: PostgreSQL's and DuckDB's memory sizes, PostgreSQL server settings
(name=value) and libpq connection strings. The plan checks their syntax when it is read; a managed PostgreSQL's
settings are then checked by the server binary itself (names and values, with its own messages), before anything
is written, instead of when the server starts after the run directory exists.

The ``*_problem`` functions are Option checks: they return what is wrong, or None.
"""

from __future__ import annotations

import difflib
import functools
import os
import re
import subprocess
from typing import Any

from refbench.children import owned_temp_directory
from refbench.errors import UserError
from refbench.host.inventory import postgres_binary
from refbench.redaction import redact_quoted

PG_MEMORY_UNITS = ("B", "kB", "MB", "GB", "TB")
PG_TIME_UNITS = ("us", "ms", "s", "min", "h", "d")
# Set by refbench itself: the managed server listens where refbench connects and on 127.0.0.1 only, never wider.
PG_RESERVED = ("port", "listen_addresses", "unix_socket_directories", "data_directory", "config_file", "hba_file",
               "ident_file")
# DuckDB's units (case-insensitive): KB, MB… count in 1000s, KiB, MiB… in 1024s, B/bytes single bytes.
_DUCKDB_UNITS = {"b": 1, "bytes": 1, "k": 10**3, "kb": 10**3, "m": 10**6, "mb": 10**6, "g": 10**9, "gb": 10**9,
                 "t": 10**12, "tb": 10**12, "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}
DUCKDB_MINIMUM_BYTES = 10**6  # below about 1 MB DuckDB cannot even open a database


def pg_size_problem(value: str) -> str | None:
    """A PostgreSQL memory size: a positive number with an optional unit (none = the parameter's own unit)."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([A-Za-z]*)\s*", value)
    if not m or m.group(2) not in ("", *PG_MEMORY_UNITS):
        return (f"must be a size such as 128MB, 1GB or 8kB (PostgreSQL's units: {', '.join(PG_MEMORY_UNITS)}, "
                f"case as shown), not {value!r}")
    if float(m.group(1)) == 0:
        return f"must be more than zero, not {value!r}"
    return None


_PG_UNIT_BYTES = {"B": 1, "kB": 2**10, "MB": 2**20, "GB": 2**30, "TB": 2**40}


def pg_size_bytes(value: str, unit_bytes: int) -> int:
    """A checked PostgreSQL memory size in bytes; a bare number counts in the parameter's own unit (``unit_bytes``:
    8192 for shared_buffers, 1024 for work_mem)."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([A-Za-z]*)\s*", value)
    assert m, value
    return int(float(m.group(1)) * (_PG_UNIT_BYTES[m.group(2)] if m.group(2) else unit_bytes))


def pg_setting_problem(item: str) -> str | None:
    """One managed-server setting, name=value; a value that looks like a quantity needs one of PostgreSQL's units."""
    m = re.fullmatch(r"([A-Za-z_][A-Za-z0-9_.]*)=(.*)", item)
    if not m or not m.group(2).strip():
        return "must look like name=value, e.g. work_mem=64MB (no spaces around '=')"
    name, value = m.group(1).lower(), m.group(2).strip()
    if name in PG_RESERVED:
        return f"sets {name}, which refbench sets itself for the server it manages"
    if name == "shared_buffers":
        return "sets shared_buffers, which has its own option (shared_buffers)"
    quantity = re.fullmatch(r"[+-]?\d+(?:\.\d+)?\s*([A-Za-z]+)", value)
    if quantity and quantity.group(1) not in PG_MEMORY_UNITS + PG_TIME_UNITS:
        return (f"gives {name} the unit '{quantity.group(1)}', which PostgreSQL does not know (memory: "
                f"{', '.join(PG_MEMORY_UNITS)}; time: {', '.join(PG_TIME_UNITS)}; case as shown)")
    return None


def duckdb_size_problem(value: str) -> str | None:
    """DuckDB's memory limit: a number with a unit DuckDB knows, at least enough to open a database."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([A-Za-z]+)\s*", value)
    if not m or m.group(2).lower() not in _DUCKDB_UNITS:
        return f"must be a size such as 512MB, 4GB or 4GiB (DuckDB needs the unit), not {value!r}"
    if float(m.group(1)) * _DUCKDB_UNITS[m.group(2).lower()] < DUCKDB_MINIMUM_BYTES:
        return f"must be at least 1MB (DuckDB cannot open a database with less), not {value!r}"
    return None


def optional(check):
    """The check for an option whose empty value means 'the engine's default'."""
    return lambda value: check(value) if value else None


def dsn_problem(value: str) -> str | None:
    """A libpq connection string (key=value pairs or a postgresql:// URI); the value is never repeated: it may
    hold a password."""
    if not value:
        return None
    import psycopg
    from psycopg.conninfo import conninfo_to_dict

    scheme, _, rest = value.strip().partition("://")
    if rest and scheme.lower() in ("postgresql", "postgres") and re.split(r"[/?]", rest, maxsplit=1)[0].count("@") > 1:
        # libpq ends the user and password at the first '@' and takes the rest for the host, which its errors then
        # repeat: a piece of the password would be shown.
        return ("holds '@' in its user name or password, which a postgresql:// URI must write as %40 "
                "(postgresql://bench:p%40ss@db1/tpch)")
    try:
        conninfo_to_dict(value)
    except psycopg.Error as exc:
        reason = str(exc).strip().splitlines()[0].rstrip(".") if str(exc).strip() else type(exc).__name__
        reason = redact_quoted(reason, value)
        return (f"must be a libpq connection string such as 'host=db1 user=bench dbname=tpcc' or postgresql://…, "
                f"and is not ({reason})")
    return None


def server_dsn_problem(value: str) -> str | None:
    """A DSN of either server engine: a mysql:// (or mariadb://) URI for MariaDB, else libpq's forms (key=value or
    postgresql://…); the value is never repeated."""
    if not value:
        return None
    from refbench.engines import engine_for_dsn

    try:
        engine = engine_for_dsn(value) if "://" in value else "postgres"
    except UserError as exc:
        return "is not usable: " + str(exc)[0].lower() + str(exc)[1:].rstrip(".")
    return mysql_dsn_problem(value) if engine == "mariadb" else dsn_problem(value)


def mysql_dsn_problem(value: str) -> str | None:
    """A MariaDB DSN, mysql://user:password@host:port/database; what is wrong, in words that never repeat it."""
    from refbench.engines.mariadb import parse_dsn

    try:
        parse_dsn(value.strip())
    except UserError as exc:
        return f"must be a MariaDB DSN such as mysql://bench@db1/tpch, and is not: {exc}".rstrip(".")
    return None


# MariaDB's size suffixes (case-insensitive, powers of 1024); a bare number is bytes.
_MARIADB_UNITS = {"": 1, "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40}


def mariadb_size_problem(value: str) -> str | None:
    """A MariaDB size such as 256M or 2G (the server checks its range when the plan is checked)."""
    m = re.fullmatch(r"\s*(\d+)\s*([kmgtKMGT]?)\s*", value)
    if not m or int(m.group(1)) == 0:
        return f"must be a size such as 256M or 2G (MariaDB's units: K, M, G, T), not {value!r}"
    return None


def mariadb_size_bytes(value: str) -> int:
    m = re.fullmatch(r"\s*(\d+)\s*([kmgtKMGT]?)\s*", value)
    assert m, value
    return int(m.group(1)) * _MARIADB_UNITS[m.group(2).lower()]


def settings_dict(items: list[str]) -> dict[str, str]:
    """Checked name=value items as the name -> value a server is started with."""
    return {name.strip().lower(): value.strip() for name, _, value in (item.partition("=") for item in items)}


# A boolean turned off as PostgreSQL reads one (any unique prefix of off, false or no) and MariaDB does (OFF, 0).
OFF = frozenset({"0", "off", "of", "false", "fals", "fal", "fa", "f", "no", "n"})


# What makes a commit cheaper by keeping less on storage, in the engines' own manuals' words. PostgreSQL: fsync off
# and full_page_writes off "might lead to unrecoverable data corruption" after a crash; synchronous_commit off loses
# the last commits (its other values all flush locally on a server without synchronous standbys); wal_sync_method's
# values all make the WAL durable. MariaDB: innodb_flush_log_at_trx_commit 0 or 2 can lose the last second of commits
# (1 and 3 flush at each commit); innodb_doublewrite off (or fast) leaves torn pages unrepaired; innodb_flush_method
# O_DIRECT_NO_FSYNC, nosync and littlesync skip the data files' fsync ("unsuitable for some file systems"); sync_binlog
# 0 leaves the binary log, when there is one, to the OS. Each a predicate on the value as the setting is given.
DURABILITY_TRADED = {
    "fsync": OFF.__contains__,
    "full_page_writes": OFF.__contains__,
    "synchronous_commit": OFF.__contains__,
    "innodb_flush_log_at_trx_commit": lambda value: value not in ("1", "3"),
    "innodb_doublewrite": lambda value: value in OFF or value == "fast",
    "innodb_flush_method": lambda value: value in ("o_direct_no_fsync", "nosync", "littlesync", "2", "3", "5"),
    "sync_binlog": lambda value: value == "0",
}


def durability_traded(settings: dict[str, str]) -> list[str]:
    """Each of a server's ``settings`` (name -> value, as given or as the server reports them) that trades durability
    for speed, as name=value; sync_binlog only with a binary log (log_bin given, and not off)."""
    given = {name.lower().replace("-", "_"): str(value).strip().strip("'\"") for name, value in settings.items()}
    with_binlog = given.get("log_bin", "off").lower() not in OFF
    return [f"{name}={given[name]}" for name, trades in DURABILITY_TRADED.items()
            if name in given and trades(given[name].lower()) and (name != "sync_binlog" or with_binlog)]


@functools.cache
def _parameter_names(postgres: str) -> frozenset[str]:
    out = subprocess.run([postgres, "--describe-config"], capture_output=True, text=True, timeout=60,
                         stdin=subprocess.DEVNULL).stdout
    return frozenset(line.split("\t", 1)[0] for line in out.splitlines() if line)


def check_server_settings(settings: dict[str, str], origins: dict[str, str]) -> None:
    """Lets the installed PostgreSQL server judge ``settings`` (name -> value) without starting it: an unknown name
    (``postgres --describe-config`` lists the known ones), a bad unit or a value out of range ends here with the
    server's own words. ``origins`` names where each setting came from ("[oltp] shared_buffers"); settings without
    one are refbench's own. Without the binaries nothing is checked (require_server_binaries says what is missing)."""
    postgres = postgres_binary("postgres")
    if not postgres or not settings:
        return
    names = _parameter_names(postgres)
    for name in settings:
        if "." not in name and names and name not in names:  # a name with a dot is an extension's, unknown here
            close = difflib.get_close_matches(name, sorted(names), n=1)
            raise UserError(f"{origins.get(name, name)} names '{name}', which is not a parameter of the PostgreSQL "
                            f"server {postgres}" + (f" (did you mean '{close[0]}'?)." if close else "."))
    with owned_temp_directory("refbench-pgcheck-") as empty:
        # "-C" first: the server prints one setting and exits, after parsing every -c, and allows root to do so.
        argv = [postgres, "-C", next(iter(settings)), "-D", str(empty), "--config-file=/dev/null"]
        argv += [arg for name, value in settings.items() for arg in ("-c", f"{name}={value}")]
        try:
            result = subprocess.run(argv, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
                                    env={**os.environ, "LC_ALL": "C", "LC_MESSAGES": "C"})
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise UserError(f"{postgres} could not check the server settings: {exc}.") from None
    if result.returncode == 0:
        return
    fatal = _log_message(result.stderr, "FATAL") or result.stderr.strip().splitlines()[-1:] or ["no message"]
    hint = _log_message(result.stderr, "HINT")
    refused = re.search(r'parameter "([^"]+)"', fatal[0])
    name = refused.group(1) if refused else ""
    origin = origins.get(name, f"the setting {name}" if name else "a server setting")
    detail = fatal[0].rstrip(".") + (f" ({hint[0].rstrip('.')})" if hint else "")
    raise UserError(f"{origin} is refused by PostgreSQL: {detail}.")


def _log_message(stderr: str, level: str) -> list[str]:
    return [m.group(1).strip() for m in re.finditer(rf"{level}:\s+(.*)", stderr)]


def setting_origins(suite: str, options: dict[str, Any], key: str = "pg_settings") -> dict[str, str]:
    """Where each managed-server setting of a suite's options comes from, for check_server_settings' messages:
    ``key`` names the option of more settings (pg_settings, or mariadb_settings, whose buffer pool is shared_buffers'
    size)."""
    origins = {"shared_buffers": f"[{suite}] shared_buffers '{options['shared_buffers']}'"}
    origins["innodb_buffer_pool_size"] = origins["shared_buffers"]
    for item in options[key]:
        origins[item.partition("=")[0].strip().lower()] = f"[{suite}] {key} item '{item}'"
    return origins


def mariadb_setting_problem(pool_option: str):
    """The check of one managed MariaDB setting, name=value (the server itself judges the value when the plan is
    checked); ``pool_option`` is the suite's option that sizes the buffer pool."""
    def problem(item: str) -> str | None:
        from refbench.engines.mariadb import RESERVED

        m = re.fullmatch(r"([A-Za-z_][A-Za-z0-9_-]*)=(.*)", item)
        if not m or not m.group(2).strip():
            return "must look like name=value, e.g. innodb_log_file_size=1G (no spaces around '=')"
        name = m.group(1).lower().replace("-", "_")
        if name in RESERVED:
            return f"sets {name}, which refbench sets itself for the server it manages"
        if name == "innodb_buffer_pool_size":
            return f"sets innodb_buffer_pool_size, which has its own option ({pool_option})"
        return None
    return problem


