"""The TPC-C schema in a database: build (schema, parallel load, keys, functions), reuse, size, counters."""

from __future__ import annotations

import re
import time
from importlib.resources import files
from typing import Any, Callable

from refbench.engines.postgres import connect, run_in_parallel, sql_statements
from refbench.errors import UserError
from refbench.suites.oltp.load import load_all

TABLES = ["warehouse", "district", "customer", "history", "oorder", "new_order", "order_line", "item", "stock"]
LARGEST_FIRST = ["order_line", "stock", "customer", "oorder", "history", "new_order", "item", "district", "warehouse"]
TRANSACTIONS = ["new_order", "payment", "order_status", "delivery", "stock_level"]


def sql(name: str) -> str:
    return files("refbench.suites.oltp").joinpath("sql", f"{name}.sql").read_text()


def loaded_warehouses(conn) -> int | None:
    """Warehouses of a complete earlier load, or None when there is none."""
    exists = conn.execute("SELECT to_regclass('tpcc.refbench_load') IS NOT NULL").fetchone()[0]
    if not exists:
        return None
    row = conn.execute("SELECT warehouses FROM tpcc.refbench_load").fetchone()
    return row[0] if row else None


def build(dsn: str, warehouses: int, workers: int, rebuild: bool, on_progress: Callable[[str, float], None]) -> dict[str, Any]:
    """Makes the schema hold exactly ``warehouses`` warehouses; returns what the load did and cost."""
    import psycopg

    try:
        return _build(dsn, warehouses, workers, rebuild, on_progress)
    except psycopg.Error as exc:  # a full disk, a lost connection, a server that stopped
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise UserError(f"building the TPC-C schema failed: {first.rstrip('.')}.") from None


def _build(dsn: str, warehouses: int, workers: int, rebuild: bool, on_progress: Callable[[str, float], None]) -> dict[str, Any]:
    with connect(dsn, autocommit=True) as conn:
        check_privileges(conn)
        present = loaded_warehouses(conn)
        if present == warehouses and not rebuild:
            _install_functions(conn)
            return {"reused": True, "warehouses": warehouses, **sizes(conn)}
        if present is not None and present != warehouses and not rebuild:
            raise UserError(f"the database already holds a TPC-C schema of {present} warehouse(s), not {warehouses}; "
                            "pass --rebuild to drop and reload it.")
        conn.execute("DROP SCHEMA IF EXISTS tpcc CASCADE")
        conn.execute(sql("schema"))
    done = [0]

    def step() -> None:
        done[0] += 1
        on_progress("loading", done[0] / (warehouses + 1))

    rows, load_s = load_all(dsn, warehouses, workers, step)
    t0 = time.monotonic()
    on_progress("keys, indexes and vacuum of", 1.0)
    _finish_tables(dsn, workers)
    with connect(dsn, autocommit=True) as conn:
        _install_functions(conn)
        conn.execute("CREATE TABLE tpcc.refbench_load (warehouses int, rows bigint, loaded_at timestamptz DEFAULT now())")
        conn.execute("INSERT INTO tpcc.refbench_load (warehouses, rows) VALUES (%s, %s)", (warehouses, rows))
        _checkpoint(conn)
        index_s = time.monotonic() - t0
        return {"reused": False, "warehouses": warehouses, "rows": rows, "load_s": round(load_s, 2),
                "index_s": round(index_s, 2), **sizes(conn)}


def _finish_tables(dsn: str, workers: int) -> None:
    """Keys, indexes, then VACUUM (FREEZE, ANALYZE) of each table, the tables shared out over ``workers``
    connections, largest first: a 100-warehouse load's order_line alone is several GB."""
    statements: dict[str, list[str]] = {t: [] for t in TABLES}
    for statement in sql_statements(sql("indexes")):
        statements[re.search(r"tpcc\.(\w+)", statement).group(1)].append(statement)
    # Freshly copied rows have no hint bits and no visibility map yet; without the VACUUM the first case would pay
    # for setting them (and autovacuum would do it in the middle of a measurement), and the cases would disagree.
    # maintenance_work_mem: a large table's keys sorted in memory rather than in temporary files; the server's
    # default (64 MB) is made for many sessions, this is one of a few.
    run_in_parallel(dsn, [statements[t] + [f"VACUUM (FREEZE, ANALYZE) tpcc.{t}"] for t in LARGEST_FIRST], workers,
                    {"maintenance_work_mem": "256MB"})


def _checkpoint(conn) -> None:
    """Writes the load out now, so that its checkpoint does not fall into the first measurement. A user's server
    may not let this user checkpoint; then the server does it in its own time."""
    import psycopg

    try:
        conn.execute("CHECKPOINT")
    except psycopg.errors.InsufficientPrivilege:
        pass


def _install_functions(conn) -> None:
    for name in TRANSACTIONS:
        conn.execute(sql(name))


def check_privileges(conn) -> None:
    ok = conn.execute("SELECT has_database_privilege(current_database(), 'CREATE')").fetchone()[0]
    if not ok:
        user, db = conn.execute("SELECT current_user, current_database()").fetchone()
        raise UserError(f"PostgreSQL user '{user}' may not create schemas in database '{db}'; "
                        f"grant it with: GRANT CREATE ON DATABASE {db} TO {user};")


def require_connections(conn, users: int, own: int) -> None:
    """Refuses, before the run, a server that cannot take a connection for each of ``users`` virtual users and
    ``own`` of refbench's: the connections free now for this role (superusers may also take the reserved ones)."""
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


def sizes(conn) -> dict[str, Any]:
    rows = conn.execute(
        "SELECT c.relname, pg_total_relation_size(c.oid), c.reltuples::bigint FROM pg_class c "
        "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'tpcc' AND c.relkind = 'r'").fetchall()
    tables = {name: {"bytes": size, "rows_estimate": tuples} for name, size, tuples in rows if name in TABLES}
    return {"tables": tables, "total_bytes": sum(t["bytes"] for t in tables.values())}


def counters(conn) -> dict[str, int]:
    """The two counters NOPM and TPM come from: Σ D_NEXT_O_ID, and the database's commits + rollbacks."""
    next_o_id = conn.execute("SELECT sum(d_next_o_id)::bigint FROM tpcc.district").fetchone()[0]
    commits, rollbacks = conn.execute(
        "SELECT xact_commit, xact_rollback FROM pg_stat_database WHERE datname = current_database()").fetchone()
    return {"sum_d_next_o_id": int(next_o_id), "xact_commit": int(commits), "xact_rollback": int(rollbacks)}
