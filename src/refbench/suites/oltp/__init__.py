"""The OLTP suite: the OLTP orders-per-minute paper's order-processing workload, derived from TPC-C, on PostgreSQL or
MariaDB.

Where things are: the transactions are server-side functions, one file each, in sql/ (new_order.sql is
New-Order; MariaDB's stored procedures in sql/mariadb/); driver.py is the load generator; load.py fills the tables;
consistency.py holds the checks. How each engine's server loads, counts and calls them is the engine's
(refbench.engines.Transactional).
Figures are NOPM and TPM — never tpmC: this is a derived workload, not an audited TPC-C result.
"""

from __future__ import annotations

import json
import math
import os
import re
from pathlib import Path
from typing import Any

from refbench.engines import (
    Dataset, Engine, Placement, Transactional, engine_for_dsn, get_engine, open_engine, transactional,
)
from refbench.engines.settings import (
    check_server_settings, mariadb_setting_problem, pg_setting_problem, pg_size_bytes, pg_size_problem,
    server_dsn_problem, setting_origins, settings_dict,
)
from refbench.fileio import atomic_write_text
from refbench.options import DAY_S, PROFILES, SEED_MAX, SETTINGS_HELP, WEEK_S, Option, Plan, PlanError
from refbench.redaction import redact
from refbench.suites import Case, Estimate, Finding, Record, ServerStalled, SuiteBase, storage
from refbench.suites.device.targets import (
    FREE_SPACE_MARGIN, check_one_directory_target, free_bytes, note_directory_targets, require_free_space,
    require_server_reach,
)
from refbench.suites.oltp import consistency, database, driver

USERS_MAX = 1000
MIX_MINIMUM_PCT = {"payment": 43.0, "order_status": 4.0, "delivery": 4.0, "stock_level": 4.0}
P90_LIMIT_S = {"new_order": 5, "payment": 5, "order_status": 5, "delivery": 5, "stock_level": 20}
# The full profile's warehouse count when the plan leaves it to the free space: the OLTP orders-per-minute paper ran
# far more data than memory; 10,000 warehouses (about 1 TB) is where refbench stops growing it.
AUTO_WAREHOUSES_MAX = 10_000
WAREHOUSES_MAX = 100_000  # about 10 TB: the largest a plan may ask for
# Connections refbench itself holds while virtual users run: the driver's counters, the runner's checks.
OWN_CONNECTIONS = 2
# The engines oltp runs on, and the settings each reports (its durability among them).
ENGINES = ("postgres", "mariadb")
REPORTED_SETTINGS = {
    "postgres": ["shared_buffers", "max_connections", "synchronous_commit", "fsync", "full_page_writes", "wal_level",
                 "max_wal_size", "checkpoint_timeout", "effective_cache_size", "work_mem", "server_version"],
    "mariadb": ["innodb_buffer_pool_size", "max_connections", "innodb_flush_log_at_trx_commit", "innodb_doublewrite",
                "innodb_flush_method", "innodb_log_file_size", "log_bin", "sync_binlog", "tx_isolation",
                "default_storage_engine", "thread_handling"],
}


# The database the engine creates, and the SQL files of sql/ (PostgreSQL's PL/pgSQL functions) and sql/mariadb/
# (MariaDB's procedures). The engine's CSV load is not used: load.py generates the rows and streams them in through
# the engine's Transactional.
TPCC = Dataset("refbench", "TPC-C", tuple(database.TABLES), "refbench.suites.oltp")

WAREHOUSE_BYTES = 100 * 10**6  # tables and indexes of one warehouse
# For --dry-run's estimate, on the 2-core VM: a load takes 1.5 s a warehouse (README, the full profile's load); initdb,
# the server's start and stop and the consistency checks took the rest of the quick profile's 33 s (23 s of cases).
# MariaDB's build of 10 warehouses took 1.13x and 1.61x PostgreSQL's, the two built in alternation (2026-11-25).
LOAD_S_PER_WAREHOUSE = {"postgres": 1.5, "mariadb": 2.0}
SETUP_S = 10


def load_bytes(warehouses: int) -> int:
    """What a load takes on disk: about 100 MB of tables and indexes per warehouse, and the WAL written meanwhile
    (about 150 MB per warehouse, kept to a few GB by checkpoints)."""
    return warehouses * WAREHOUSE_BYTES + min(warehouses * 150 * 10**6, 2 * 2**30)


def server_memory(o: dict[str, Any]) -> "storage.ServerMemory | None":
    return storage.server_memory(o["cache_mb"], o["warehouses"] * WAREHOUSE_BYTES, {"shared_buffers": o["shared_buffers"]})


def _space_bytes(o: dict[str, Any]) -> int:
    """What the managed server's data directory takes: the load, and for MariaDB its redo log, which InnoDB creates at
    its full size (innodb_log_file_size, 96 MB unless set) beside a few system tablespaces (about 100 MB)."""
    if engine_name(o) != "mariadb":
        return load_bytes(o["warehouses"])
    log = _server_settings(o).get("innodb_log_file_size", "96M")
    size = re.fullmatch(r"(\d+)([KMGT]?)", log.strip().upper())
    log_bytes = int(size[1]) * 1024 ** " KMGT".index(size[2] or " ") if size else 2**30  # the server judges the value
    return load_bytes(o["warehouses"]) + log_bytes + 100 * 10**6


def engine_name(o: dict[str, Any]) -> str:
    """The engine the options ask for: the engine option, else the DSN's (mysql:// is MariaDB's), else postgres."""
    if not o["dsn"]:
        return o["engine"] or "postgres"
    named = engine_for_dsn(o["dsn"])
    if o["engine"] and o["engine"] != named:
        raise PlanError(f"[oltp] engine {o['engine']} contradicts the dsn, which is a {get_engine(named).title} DSN; "
                        "leave engine out, or give a DSN of its server.")
    return named


def _engine_problem(value: str) -> str | None:
    if value in ("",) + ENGINES:
        return None
    return f"must be {' or '.join(ENGINES)}, not {value!r}"


def auto_warehouses(free: int) -> int:
    """As many warehouses as a third of ``free`` bytes holds (the load, then what the run adds to the tables, and
    room for a resumed run's space check after the load), up to AUTO_WAREHOUSES_MAX; at least 1."""
    budget = free // 3 - FREE_SPACE_MARGIN
    fit = max(1, budget // WAREHOUSE_BYTES)
    while fit > 1 and load_bytes(fit) > budget:
        fit -= 1
    return min(fit, AUTO_WAREHOUSES_MAX)


def user_counts(o: dict[str, Any]) -> list[int]:
    """The user counts of the cases. With the specification's keying and think times, a warehouse has 10 users
    (terminals), as 4.2.2 requires: a plan that leaves the users at their default gets 10 per warehouse, and one
    that asks for other counts is refused."""
    if not o["think_times"]:
        return o["users"]
    spec = 10 * o["warehouses"]
    if o["users"] == [spec] or any(o["users"] == OltpSuite.options["users"].default_for(p) for p in PROFILES):
        if spec > USERS_MAX:
            raise PlanError(f"[oltp] think_times runs 10 users per warehouse, and {o['warehouses']:,} warehouses would "
                            f"need {spec:,}, more than the {USERS_MAX:,} refbench drives; set warehouses to "
                            f"{USERS_MAX // 10:,} or fewer.")
        return [spec]
    raise PlanError(f"[oltp] think_times runs the specification's 10 users per warehouse: {spec:,} for "
                    f"{o['warehouses']:,} warehouse(s), not {', '.join(map(str, o['users']))}; leave users out, or set "
                    "warehouses to a tenth of the users.")


def _server_settings(o: dict[str, Any]) -> dict[str, str]:
    """The managed server's settings: the buffer cache (shared_buffers, or MariaDB's buffer pool of that size), a
    connection for every virtual user and some for refbench's own (the loaders, the checks), then pg_settings or
    mariadb_settings."""
    connections = str(max(user_counts(o)) + 20)
    if engine_name(o) == "mariadb":
        pool = {"innodb_buffer_pool_size": str(pg_size_bytes(o["shared_buffers"], 8192)), "max_connections": connections}
        return pool | storage.unsampled_mariadb(o) | settings_dict(o["mariadb_settings"])
    settings = {"shared_buffers": o["shared_buffers"], "max_connections": connections}
    return settings | settings_dict(o["pg_settings"])


class OltpSuite(SuiteBase):
    name = "oltp"
    # What a cluster run totals across nodes (sum) or averages (mean); the first is charted by node count,
    # as the OLTP orders-per-minute paper charts orders per minute by node count.
    node_figures = {"nopm": "sum", "tpm": "sum", "new_order_lat_avg_ms": "mean", "new_order_lat_p999_ms": "mean"}
    # Wall time on the 2-core VM: quick measured with `refbench oltp --profile quick` (README); the others as README says.
    summary = ("Order processing like the OLTP orders-per-minute paper (derived from TPC-C) on PostgreSQL or MariaDB: virtual users against W "
               "warehouses, ramp-up then a timed measurement, NOPM and TPM, latency percentiles per transaction, "
               "a user-count scaling series, and the consistency conditions checked before and after.")
    targets_help = ("One directory for the database (existing): the managed server's data goes in "
                    "DIR/oltp-pgdata (MariaDB: DIR/oltp-mariadb-data), like --data-dir, and is removed at the end unless "
                    "--keep-work; not with --dsn.")
    examples = [
        "refbench oltp /mnt/nvme0                       # the database on /mnt/nvme0",
        "refbench oltp                                  # managed PostgreSQL, quick profile",
        "refbench oltp --data-dir /mnt/nvme0/pg --warehouses 10 --users 1,2,4,8,16 --profile standard",
        "refbench oltp --dsn 'host=db1 user=bench dbname=tpcc' --warehouses 100 --rebuild",
        "refbench oltp --engine mariadb /mnt/nvme0             # managed MariaDB, its data on /mnt/nvme0",
        "refbench oltp --dsn 'mysql://bench:secret@db1/tpcc' --warehouses 10",
    ]
    options = {
        "warehouses": Option(int, {"quick": 1, "standard": 10, "full": 0},
                             "Warehouses (about 100 MB each); 0: as many as a third of the free space holds, up to "
                             f"{AUTO_WAREHOUSES_MAX:,}.", minimum=0, maximum=WAREHOUSES_MAX),
        "users": Option(list, {"quick": [1, 2], "standard": [1, 2, 4, 8, 16], "full": [48, 96, 192, 384]},
                        "Virtual users per case: a list makes a scaling series (with think_times: 10 per warehouse).",
                        item=int, minimum=1, maximum=USERS_MAX),
        "rampup_s": Option(int, {"quick": 3, "standard": 60, "full": 900}, "Ramp-up seconds before measuring.", minimum=0,
                           maximum=DAY_S, unit="s"),
        "duration_s": Option(int, {"quick": 8, "standard": 300, "full": 900}, "Measured seconds.", minimum=1,
                             maximum=WEEK_S, unit="s"),
        "think_times": Option(bool, False, "Use the specification's keying and think times, at 10 users per warehouse "
                                           "(off: drive load)."),
        "engine": Option(str, "", "Database engine: postgres or mariadb (default: the dsn's, else postgres).",
                         check=_engine_problem),
        "dsn": Option(str, "", "Drive this server instead of a managed one: a libpq connection string or "
                               "postgresql://… for PostgreSQL, mysql://user:password@host:port/database for MariaDB.",
                      check=server_dsn_problem),
        "data_dir": Option(str, "", "Data directory of the managed server (default: in the work directory); put it on the storage under test."),
        "wal_dir": Option(str, "", "An existing directory, on another device than the data, for the managed server's "
                                   "log: PostgreSQL's write-ahead log (in DIR/oltp-pgwal, initdb --waldir), MariaDB's "
                                   "redo log (in DIR/oltp-redo, innodb_log_group_home_dir); default: with the data."),
        "shared_buffers": Option(str, "128MB", "Managed server's buffer cache (MariaDB: innodb_buffer_pool_size): the "
                                 "memory cap that pushes I/O to storage.", check=pg_size_problem),
        "pg_settings": Option(list, ["max_wal_size=1GB"], SETTINGS_HELP, item=str, adds_settings=True,
                              check=pg_setting_problem),
        # The thread pool is MariaDB's own answer to many connections on few cores (a production setting; durability is
        # untouched): at 64 users on 2 cores it gave refbench's driver 2.1-2.4x the NOPM of a thread per connection, at
        # 0.55-0.63x the server CPU per New-Order (docs/BENCHMARKS.md).
        "mariadb_settings": Option(list, ["innodb_log_file_size=1G", "thread_handling=pool-of-threads"], SETTINGS_HELP,
                                   item=str, adds_settings=True, check=mariadb_setting_problem("shared_buffers")),
        "cache_mb": storage.CACHE_MB,
        "sample_sessions": storage.SAMPLE_SESSIONS,
        "rebuild": Option(bool, False, "Drop and reload a schema that exists."),
        "reload_each_case": Option(bool, False, "The OLTP orders-per-minute paper's cycle: drop, load and run for every case."),
        "load_workers": Option(int, 0, "Loader processes (0 = one per CPU).", minimum=0, maximum=1024),
        "seed": Option(int, 1, "Seed of the virtual users' random inputs.", minimum=0, maximum=SEED_MAX),
    }

    # ---- the matrix ----------------------------------------------------------------------------------

    def cases(self, plan: Plan) -> list[Case]:
        o = plan.options[self.name]
        if o["dsn"] and o["data_dir"]:
            raise PlanError("[oltp] dsn and data_dir exclude each other: data_dir places the managed server, dsn replaces it.")
        if o["dsn"] and plan.targets:
            raise PlanError(f"[oltp] dsn and the target {plan.targets[0]} exclude each other: the target places the managed "
                            "server, dsn replaces it.")
        name = engine_name(o)
        check_one_directory_target(plan, self.name, "data_dir")
        if o["wal_dir"]:
            if o["dsn"]:
                raise PlanError("[oltp] wal_dir places the WAL (or redo log) of the server refbench manages; with dsn "
                                "the server is yours.")
            if not Path(o["wal_dir"]).is_dir():
                raise PlanError(f"[oltp] wal_dir {o['wal_dir']} is not an existing directory.")
            require_server_reach(Path(o["wal_dir"]), "wal_dir", name)
        if plan.targets:
            require_server_reach(Path(plan.targets[0]), "target", name)
        elif o["data_dir"]:
            require_server_reach(Path(o["data_dir"]).parent, "the directory of data_dir", name)
        where = _load_dir(plan)
        if o["warehouses"] == 0:
            # Resolved once, here, before the plan is written into the run: a resumed run keeps this count.
            o["warehouses"] = _auto_warehouses_of(o, where)
        users = user_counts(o)
        # Problems a user can fix are found here, before the run directory exists.
        if o["dsn"]:
            transactional(open_engine(name, TPCC, Placement(Path(), dsn=o["dsn"])), TPCC).check_user(max(users), OWN_CONNECTIONS)
        else:
            get_engine(name).require_installed()
            _check_settings(name, o)
            server_memory(o)  # a cache bound that cannot work is refused here
            require_free_space(Path(where), _space_bytes(o),
                               f"{o['warehouses']} warehouse(s) (about {_space_bytes(o) / 1e9:,.1f} GB of "
                               "tables, indexes and WAL)")
        # Each load level once; the plan's repeats measure the best one again ("u4-r2", refbench.suites.repeats).
        return [Case(f"u{u}-r1", {"users": u, "repeat": 1, "warehouses": o["warehouses"], "engine": name},
                     f"{u} user{'s' if u > 1 else ''}")
                for u in users]

    def estimate(self, plan: Plan, cases: list[Case]) -> Estimate:
        o = plan.options[self.name]
        loads = len(cases) if o["reload_each_case"] else 1
        per_warehouse_s = LOAD_S_PER_WAREHOUSE[engine_name(o)]
        again = plan.repeats - 1 if plan.repeats > 1 else 0  # the best load level measured again
        load_s = (loads + (again if o["reload_each_case"] else 0)) * o["warehouses"] * per_warehouse_s
        seconds = SETUP_S + load_s + (len(cases) + again) * (o["rampup_s"] + o["duration_s"])
        space = [] if o["dsn"] else [(_load_dir(plan), _space_bytes(o),
                                      f"oltp: {o['warehouses']:,} warehouse(s) of tables, indexes and WAL")]
        title = get_engine(engine_name(o)).title
        return Estimate(seconds, f"{title} ({'at the dsn' if o['dsn'] else 'managed'}): {SETUP_S} s to start, {loads} load(s) of {o['warehouses']:,} warehouse(s) at {per_warehouse_s:g} s each "
                        f"+ {len(cases)} case(s) × ({o['rampup_s']} s ramp-up + {o['duration_s']} s measured)"
                        + (f" + the best level {again} more time{'s' if again > 1 else ''}" if again else ""), space)

    # ---- the database --------------------------------------------------------------------------------

    def prepare(self, ctx) -> None:
        o = ctx.options
        name = engine_name(o)
        memory = ctx.state["memory"] = None if o["dsn"] else server_memory(o)
        if o["dsn"]:
            place = Placement(Path(), dsn=o["dsn"])
        else:
            data = self._data_dir(ctx, name)
            wal = Path(o["wal_dir"]) / WAL_DIR_NAMES[name] if o["wal_dir"] else None
            if wal is not None and not data.exists():  # an existing data directory is kept, and its log with it
                ctx.claim(wal)
            place = Placement(data, settings=_server_settings(o),
                              password_file=ctx.run.secret_path(f"{ctx.suite}-{name}.password"),
                              cache_bytes=storage.ServerMemory.cache_bytes(memory), log_dir=wal)
        engine: Engine = open_engine(name, TPCC, place)
        ctx.state["engine"] = engine
        if engine.server is None:
            engine.start()
            ctx.log(f"driving the {engine.title} at '{redact(engine.dsn)}'")
        else:
            server = engine.server
            ctx.claim(server.data_dir, server.log_file)
            with ctx.task(f"starting the managed {engine.title}"):
                engine.start()
            ctx.log(f"managed {engine.title} in {server.data_dir} (a unix socket, and 127.0.0.1:{server.port} with the "
                    f"password in {server.password_file})" + (f"; its WAL in {place.log_dir}" if place.log_dir else ""))
        ctx.state["side"] = transactional(engine, TPCC)
        storage.say_bound(ctx, memory, engine.server, o["warehouses"] * WAREHOUSE_BYTES)
        self._build(ctx, rebuild=o["rebuild"])

    def _data_dir(self, ctx, name: str) -> Path:
        if ctx.options["data_dir"]:
            return Path(ctx.options["data_dir"])
        if ctx.plan.targets:
            note_directory_targets(ctx)
            return Path(ctx.plan.targets[0]) / f"oltp-{DATA_DIR_NAMES[name]}"
        return self._default_data_dir(ctx, name)

    @staticmethod
    def _default_data_dir(ctx, name: str) -> Path:
        preferred = ctx.work_dir / DATA_DIR_NAMES[name]
        chosen = get_engine(name).managed_data_dir(preferred, ctx.scratch_dir / DATA_DIR_NAMES[name])
        if chosen != preferred:
            account = "mysql" if name == "mariadb" else "postgres"
            ctx.log(f"the {account} user cannot reach {ctx.work_dir}; the managed server's data goes to {chosen.parent} instead")
        return chosen

    def _build(self, ctx, rebuild: bool) -> None:
        o = ctx.options
        with ctx.task(f"schema of {o['warehouses']} warehouse(s)", total=1.0) as task:
            info = database.build(ctx.state["side"], o["warehouses"], o["load_workers"] or os.cpu_count() or 1, rebuild,
                                  lambda what, done: task.update(done, f"oltp: {what} {o['warehouses']} warehouse(s)"))
        engine = ctx.state["engine"]
        info["engine"] = engine.name
        info["settings"] = {"engine": engine.title, **engine.settings(REPORTED_SETTINGS[engine.name])}
        side = ctx.state["side"]
        with side.connect() as conn:
            # A database loaded just now is checked as loaded (condition 11 in its load-time form); a reused one
            # may have run before.
            info["consistency_before"] = {str(k): v for k, v in consistency.check(side, conn, at_load=not info["reused"]).items()}
        ctx.state["load"] = info
        state_file = ctx.work_dir / "load.json"
        if not info["reused"] or not state_file.exists():
            atomic_write_text(state_file, json.dumps(info))  # the first build's cost is what the report shows

    def close(self, ctx) -> None:
        ctx.state.pop("side", None)
        engine = ctx.state.pop("engine", None)
        if engine is not None:
            engine.stop()

    # ---- one case ------------------------------------------------------------------------------------

    def measure(self, ctx, case: Case) -> Record:
        o = ctx.options
        if o["reload_each_case"]:
            self._build(ctx, rebuild=True)
        users, total = case.params["users"], o["rampup_s"] + o["duration_s"]
        engine = ctx.state["engine"]
        probe = storage.engine_probe(engine, ctx.state["memory"], sessions=o["sample_sessions"])
        seen: dict[str, Any] = {}

        def tick(s: float) -> None:
            """The driver ticks about once a second and at the window's edges: the probe covers the window."""
            task.update(min(s, total))
            if s >= o["rampup_s"] and not probe.started():
                probe.start()
            if s >= total and probe.started() and not seen:
                seen.update(probe.stop())

        with ctx.task(f"{case.title}: {o['rampup_s']} s ramp-up + {o['duration_s']} s measured", total=total) as task:
            with storage.bounded(engine.server):
                if o["rampup_s"] == 0:
                    probe.start()
                result = driver.run(ctx.state["side"], o["warehouses"], users, o["rampup_s"], o["duration_s"],
                                    o["think_times"], o["seed"] + case.params["repeat"], on_tick=tick,
                                    on_live=lambda so_far: ctx.live(f"{case.title}: {so_far.said()}"))
        stall = result.stall
        if probe.started() and not seen and not (stall and stall.unanswered):  # the probe would ask the server too
            seen.update(probe.stop())
        metrics = figures(result) | storage.wait_figures(seen)
        load = json.loads((ctx.work_dir / "load.json").read_text())
        record = Record(metrics, method=(
            f"{users} virtual users on {result.processes - 1} worker process(es), each user with its own connection "
            f"(opened one after another over the first half of the ramp-up) and a home warehouse spread evenly over "
            f"{o['warehouses']} warehouse(s); the TPC-C mix from a shuffled 23-card deck; on {engine.title}, "
            f"transactions are {METHOD[engine.name][0]}; keying/think times {'on' if o['think_times'] else 'off'}; "
            f"{o['rampup_s']} s ramp-up, then {o['duration_s']} s measured. NOPM = Σ D_NEXT_O_ID delta per minute; "
            f"TPM = NOPM plus the other transactions that ended in the measured window (rolled-back New-Orders and the "
            f"other four), per minute, as the driver counts them; {METHOD[engine.name][1]} per minute "
            f"(tpm_server_counters) is kept beside it and checks nothing: the server publishes its counters late "
            f"(PostgreSQL's backends about once a second) and counts refbench's own queries too; "
            "latencies from HDR histograms (µs resolution, 3 significant digits)."),
            extra={"series": result.series, "errors": result.errors, "settings": ctx.state["load"]["settings"],
                   "load": {k: v for k, v in load.items() if k != "consistency_before"},
                   "consistency_before": ctx.state["load"]["consistency_before"],
                   "database": "managed" if not o["dsn"] else redact(o["dsn"]), "storage": seen or None,
                   "target_description": ctx.state.get("target_description")})
        if stall:
            record.extra["stalled"] = stall.said(o["duration_s"])
            if stall.unanswered:
                server = f"the managed {engine.title}" if engine.server else f"the {engine.title} server"
                raise ServerStalled(record, f"{server} stopped answering while {case.id} was measured: "
                                            f"{record.extra['stalled']}; its record is kept, marked stalled")
        return record

    # ---- correctness ---------------------------------------------------------------------------------

    def check(self, ctx) -> list[Finding]:
        side = ctx.state["side"]
        with side.connect() as conn:
            after = consistency.check(side, conn)
        before = ctx.state["load"]["consistency_before"]
        findings = []
        for n, (text, violations) in after.items():
            was = before.get(str(n), [text, 0])[1]
            unit = consistency.CONDITIONS[n][1]
            findings.append(Finding(f"consistency condition {n}: {text}", violations == 0 and was == 0,
                                    f"{unit} violating it before the run: {was}, after: {violations}"))
        records = ctx.run.records(self.name)
        findings += mix_findings(records)
        storage.say_verdicts(ctx)
        return findings


# The managed server's data directory, by engine, under the work directory or a target.
DATA_DIR_NAMES = {"postgres": "pgdata", "mariadb": "mariadb-data"}
WAL_DIR_NAMES = {"postgres": "oltp-pgwal", "mariadb": "oltp-redo"}
# How each engine's transactions run and what its own commit counters are, for a record's method.
METHOD = {"postgres": ("PL/pgSQL functions called as prepared statements", "pg_stat_database commits + rollbacks"),
          "mariadb": ("stored procedures, one CALL each", "the server's Com_commit + Com_rollback")}


def _check_settings(name: str, o: dict[str, Any]) -> None:
    """The managed server's settings, judged by the installed server before anything is written."""
    if name == "mariadb":
        get_engine("mariadb").check_settings(_server_settings(o), setting_origins("oltp", o, "mariadb_settings"))
    else:
        check_server_settings(_server_settings(o), setting_origins("oltp", o))


def transactions_at(dsn: str) -> Transactional:
    """The OLTP side of the server at ``dsn`` (PostgreSQL or MariaDB, by the DSN's form), for the benchmarks:
    ``database.build(transactions_at(dsn), …)`` loads it and ``driver.run(transactions_at(dsn), …)`` drives it."""
    return transactional(open_engine(engine_for_dsn(dsn), TPCC, Placement(Path(), dsn=dsn)), TPCC)


def _load_dir(plan: Plan) -> str:
    """Where the managed server's data goes, as far as the plan says before the run directory exists."""
    o = plan.options[OltpSuite.name]
    return o["data_dir"] or (plan.targets[0] if plan.targets else "") or plan.work_dir or plan.runs_dir


def _auto_warehouses_of(o: dict[str, Any], where: str) -> int:
    if o["dsn"]:
        raise PlanError("[oltp] warehouses 0 sizes the load to the free space of the managed server's data directory; "
                        "with a dsn refbench cannot see that space: set warehouses.")
    return auto_warehouses(free_bytes(Path(where)))


def figures(r: "driver.DriverResult") -> dict[str, Any]:
    """NOPM from the schema (D_NEXT_O_ID); TPM is NOPM plus every other transaction that ended in the driver's window
    (rolled-back New-Orders and the other four), as the driver counts them. The server's own commit and rollback
    counters are kept beside it for reference, neither as the figure nor as a check: PostgreSQL's backends flush theirs to
    pg_stat_database about once a second (pg_stat_force_next_flush() flushes the calling backend's only), and a short
    window read them far below the driver's count (239.5 TPM beside 5,749 NOPM). The committed New-Orders are the
    schema's in both figures: the driver's count of them covers a window up to counters_late_s apart from the schema's
    and misses those it saw complete after the window ended (at most one a user), so a count of all of the driver's
    transactions could come out below NOPM on a starved machine (375 beside 587.6 at 120 users). A server that did not
    answer at an edge of the window (the case is marked stalled) leaves the driver's own count of New-Orders."""
    minutes = r.measured_s / 60
    if r.counters_start is None or r.counters_end is None:
        new_orders, delta, xacts = r.counts["new_order"]["ok"], None, None
    else:
        new_orders = delta = r.counters_end["sum_d_next_o_id"] - r.counters_start["sum_d_next_o_id"]
        xacts = sum(r.counters_end[k] - r.counters_start[k] for k in ("xact_commit", "xact_rollback"))
    others = sum(sum(outcomes.values()) for outcomes in r.counts.values()) - r.counts["new_order"]["ok"]
    m: dict[str, Any] = {
        "users": r.users, "measured_s": round(r.measured_s, 3), "nopm": round(new_orders / minutes, 1),
        "tpm": round(new_orders / minutes + others / (r.window_s / 60), 1),
        "tpm_server_counters": round(xacts / minutes, 1) if xacts is not None else None,
        "counters_late_s": round(r.counters_late_s, 3),
        "new_orders_schema_delta": delta, "new_orders_committed_by_driver": r.counts["new_order"]["ok"],
    }
    completed = {tx: c["ok"] + c["rollback"] for tx, c in r.counts.items()}
    total = sum(completed.values()) or 1
    for tx in driver.TX:
        h = r.histograms[tx]
        m[f"{tx}_count"] = completed[tx]
        m[f"{tx}_mix_pct"] = round(100 * completed[tx] / total, 2)
        has = h.get_total_count() > 0
        m[f"{tx}_lat_avg_ms"] = round(h.get_mean_value() / 1000, 3) if has else None
        for name, p in (("p50", 50), ("p90", 90), ("p95", 95), ("p99", 99), ("p999", 99.9)):
            m[f"{tx}_lat_{name}_ms"] = round(h.get_value_at_percentile(p) / 1000, 3) if has else None
        # The window's longest, counting a transaction the server still held at its end for its time so far.
        longest_us = max(h.get_max_value() if has else 0, r.at_end_us.get(tx, 0))
        m[f"{tx}_lat_max_ms"] = round(longest_us / 1000, 3) if longest_us else None
    m["new_order_rollbacks"] = r.counts["new_order"]["rollback"]
    m["new_order_rollback_pct"] = round(100 * r.counts["new_order"]["rollback"] / (completed["new_order"] or 1), 2)
    m["errors"] = sum(c["error"] for c in r.counts.values())
    m["driver_cpu_s"] = round(r.driver_cpu_s, 2)
    m["db_cpu_s"] = round(r.db_cpu_s, 2) if r.db_cpu_s is not None else None
    both = r.driver_cpu_s + r.db_cpu_s if r.db_cpu_s is not None else 0
    m["driver_cpu_share_pct"] = round(100 * r.driver_cpu_s / both, 1) if both else None
    m["driver_processes"] = r.processes
    m["driver_rss_mb"] = round(r.rss_peak_bytes / 1e6, 1)
    return m


def deck_edge_allowance(users: int, cards: int) -> int:
    """How far the window's edges may move a transaction's count from its deck share: each user deals whole shuffled
    23-card decks, and the window cuts one at each end. At most all of a partial deck's ``cards`` per user and edge;
    but a cut at a random place in a shuffled deck holds a hypergeometric share of them (variance k(23-k)/22·p(1-p),
    largest for a cut in the middle), independently per user and edge: 4 standard deviations of that sum, where it is
    the smaller bound, is what the edges move the count by but once in tens of thousands of checks."""
    deck = len(driver.DECK)
    share = cards / deck
    variance = (deck / 2) ** 2 / (deck - 1) * share * (1 - share)
    return min(2 * users * cards, math.ceil(4 * math.sqrt(2 * users * variance)))


def mix_findings(records: list[Record]) -> list[Finding]:
    """The observed mix against the specification's minimums, the rollback rate, the 90th-percentile limits."""
    if not records:
        return []
    counts = {tx: sum(r.metrics[f"{tx}_count"] for r in records) for tx in driver.TX}
    total = sum(counts.values())
    users = sum(r.metrics["users"] for r in records)
    findings = []
    for tx, minimum in MIX_MINIMUM_PCT.items():
        cards = driver.DECK.count(tx)
        slack, needed = deck_edge_allowance(users, cards), minimum / 100 * total
        share = 100 * counts[tx] / total if total else 0.0
        deck = f"deck share {100 * cards / len(driver.DECK):.2f}%; window edges allow ±{slack} transactions"
        if slack >= needed:  # none at all would pass: a check that cannot fail says so instead of passing
            findings.append(Finding(f"mix: {tx} ≥ {minimum:g}%", False,
                                    f"too short to judge the mix: {total} transactions ({deck}, at least the "
                                    f"{needed:.0f} the minimum asks for); it takes more than "
                                    f"{100 * slack / minimum:,.0f} transactions to judge: measure longer"))
            continue
        findings.append(Finding(f"mix: {tx} ≥ {minimum:g}%", counts[tx] + slack >= needed,
                                f"{share:.2f}% of {total} transactions ({deck})"))
    new_orders = counts["new_order"]
    rollbacks = sum(r.metrics["new_order_rollbacks"] for r in records)
    sigma = math.sqrt(new_orders * 0.01 * 0.99)
    findings.append(Finding("New-Order rollbacks ≈ 1%", abs(rollbacks - 0.01 * new_orders) <= 4 * sigma + 1,
                            f"{rollbacks} of {new_orders} New-Orders rolled back ({100 * rollbacks / (new_orders or 1):.2f}%)"))
    for tx, limit in P90_LIMIT_S.items():
        worst = max((r.metrics[f"{tx}_lat_p90_ms"] or 0) for r in records)
        findings.append(Finding(f"90th percentile {tx} ≤ {limit} s", worst <= limit * 1000, f"worst case: {worst:.1f} ms"))
    return findings

