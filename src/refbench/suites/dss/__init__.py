"""The DSS suite: the DSS paper's decision-support workload, derived from TPC-H, on a column store (DuckDB) and
row stores (PostgreSQL, MariaDB). The 22 queries run one by one cold and warm, as one stream with the refresh functions
(power), and as parallel streams in the specification's orders (throughput).

Where things are: queries.py holds the 22 queries, their parameters and the stream orders; the engines are
refbench.engines' (asked for by name), with the schema and index SQL in sql/ (sql/<engine>/ for a dialect's own);
refresh.py RF1 and RF2; answers.py the rules answers are compared by and the answers refbench keeps, checks.py the
check of every answer a run computed; summary.py the tables and charts. Figures are
"power", "throughput" and their combination — never QphH: this is a derived workload, not an audited result.
"""

from __future__ import annotations

import json
import math
import os
import threading
import time
from pathlib import Path
from typing import Any

from refbench.engines import Engine, Placement, QueryTimeout, engine_for_dsn, get_engine, open_engine
from refbench.engines.settings import (
    check_server_settings, duckdb_size_problem, mariadb_setting_problem, mariadb_size_bytes, mariadb_size_problem,
    optional, pg_setting_problem, pg_size_bytes, pg_size_problem, server_dsn_problem, setting_origins, settings_dict,
)
from refbench.errors import ServerGone, UserError
from refbench.fileio import atomic_write_text
from refbench.host import pagecache
from refbench.redaction import redact
from refbench.host.telemetry import cpu_rates, disk_rates, read_cpu, read_disks
from refbench.options import DAY_S, ENGINES, SEED_MAX, SETTINGS_HELP, SF_MAX, Option, Plan, PlanError
from refbench.suites import Case, Estimate, Finding, Record, SuiteBase, storage
from refbench.suites.device.targets import (
    check_one_directory_target, device_of, free_bytes, note_directory_targets, require_free_space, require_server_reach,
)
from refbench.suites.dss import answers, datagen, refresh
from refbench.suites.dss.answers import LOADED, refresh_free, with_rf1
from refbench.suites.dss.checks import answer_check, check_answers, data_seen, needs_answers_apart, repeat_tag, save_answer
from refbench.suites.dss.queries import min_streams, stream_queries

MODES = ("individual", "power", "throughput")
PROC = Path("/proc")


class OnTpchData:
    """The TPC-H data and the engines it is loaded in, which dss measures and dw measures too: prepared (generated,
    loaded, or found loaded) before the suite's cases, the engines stopped after them."""

    def prepare(self, ctx) -> None:
        prepare_data_and_engines(ctx)

    def close(self, ctx) -> None:
        close_engines(ctx)


class DssSuite(OnTpchData, SuiteBase):
    name = "dss"
    # What a cluster run averages across nodes; each node answers for its own database.
    node_figures = {"power": "mean", "throughput": "mean", "warm_s": "mean"}
    # Wall time on the 2-core VM: quick measured with `refbench dss --profile quick` (README); the others as README says.
    summary = ("Decision support like the DSS paper (derived from TPC-H): the 22 queries on DuckDB (column store), "
               "PostgreSQL and MariaDB (row stores) — each query cold and warm, one stream with the refresh functions (power), "
               "parallel streams in the specification's orders (throughput) — with every answer of every stream checked "
               "at full precision against the answers refbench keeps (SF 0.01, 0.1, 1 and 10; elsewhere against the "
               "other engines'), and at SF 1 against the TPC-H reference answers too.")
    targets_help = ("One directory for the data (existing): the generated data, the DuckDB database and "
                    "the managed PostgreSQL and MariaDB go there, like --data-dir DIR, and are removed at the end unless "
                    "--keep-work.")
    examples = [
        "refbench dss /mnt/nvme0 --sf 1                  # data and databases on /mnt/nvme0",
        "refbench dss                                    # quick: SF 0.01, both engines, every mode",
        "refbench dss --sf 10 --data-dir /mnt/nvme0/tpch --profile standard",
        "refbench dss --sf 1 --engines duckdb --modes individual,power",
        "refbench dss --engines mariadb --mariadb-buffer-pool 2G   # MariaDB alone, its answers checked",
        "refbench dss --sf 10 --engines mariadb --dsn 'mysql://bench:secret@db1/tpch'   # your MariaDB",
        "refbench dss --sf 100 --streams 7 --dsn 'host=db1 user=bench dbname=tpch' --profile full",
    ]
    options = {
        "sf": Option(float, {"quick": 0.01, "standard": 10.0, "full": 100.0},
                     "Scale factor (SF 1 ≈ 1 GB of data; full's SF 100 runs where the space check finds room, else "
                     "choose --sf 30).", minimum=0.001, maximum=SF_MAX),
        "engines": Option(list, ["duckdb", "postgres"], "Engines: duckdb (column store), postgres and mariadb (row "
                          "stores).",
                          item=str, choices=ENGINES),
        "modes": Option(list, list(MODES), "individual (each query cold, then warm), power, throughput.", item=str,
                        choices=MODES),
        # Each stream holds a connection, and the managed server allows 100; the specification asks for 11 at most.
        "streams": Option(int, 0, "Throughput streams (0 = the specification's minimum for the scale factor).", minimum=0,
                          maximum=64),
        "data_dir": Option(str, "", "Where the generated data and the DuckDB database go (default: the work directory); "
                                    "put it on the storage under test."),
        "dsn": Option(str, "", "Drive this server instead of a managed one: a PostgreSQL (libpq connection string or "
                               "postgresql://…) or a MariaDB (mysql://user:password@host:port/database).", check=server_dsn_problem),
        "pg_data_dir": Option(str, "", "Data directory of the managed PostgreSQL (default: in the data directory)."),
        "shared_buffers": Option(str, "256MB", "Managed PostgreSQL's buffer cache: the memory cap that pushes I/O to storage.",
                                 check=pg_size_problem),
        "pg_settings": Option(list, ["work_mem=64MB", "max_wal_size=4GB"], SETTINGS_HELP,
                              item=str, adds_settings=True, check=pg_setting_problem),
        "duckdb_memory_limit": Option(str, "", "DuckDB's memory limit, e.g. 4GB (default: DuckDB's own, 80% of RAM).",
                                      check=optional(duckdb_size_problem)),
        "duckdb_threads": Option(int, 0, "DuckDB's threads per query (0: DuckDB's own, one per CPU).", minimum=0,
                                 maximum=1024),
        "mariadb_buffer_pool": Option(str, "", "Managed MariaDB's buffer pool (innodb_buffer_pool_size), its only cache of "
                                      "the data (InnoDB reads with O_DIRECT), e.g. 2G (default: the memory the managed "
                                      "PostgreSQL gets for data — shared_buffers + cache_mb when cache_mb bounds it, "
                                      "else room for all of the data, at most half of this host's memory).",
                                      check=optional(mariadb_size_problem)),
        "mariadb_settings": Option(list, [], SETTINGS_HELP, item=str, adds_settings=True,
                                   check=mariadb_setting_problem("mariadb_buffer_pool")),
        "drop_caches": Option(bool, True, "Evict the engine's data files from the OS page cache before each cold "
                              "query (posix_fadvise, those files only)."),
        "cache_mb": storage.CACHE_MB,
        "sample_sessions": storage.SAMPLE_SESSIONS,
        "seed": Option(int, 1, "Seed of the random query parameters of streams 1 and up.", minimum=0, maximum=SEED_MAX),
        # Far above the slowest query of a sound configuration at the profile's scale on a small host (at SF 10 on
        # 2 cores PostgreSQL's longest, Q18, took 106 s; see the README), short enough to end a runaway.
        "query_timeout_s": Option(float, {"quick": 300.0, "standard": 3600.0, "full": 4 * 3600.0},
                                  "A query running longer is cancelled and recorded as a timeout (0 = no limit).",
                                  minimum=0, maximum=DAY_S, unit="s"),
    }

    # ---- the matrix ----------------------------------------------------------------------------------

    def cases(self, plan: Plan) -> list[Case]:
        o = plan.options[self.name]
        engines = checked_engines(self.name, plan)
        streams = o["streams"] or min_streams(o["sf"])
        cases = []
        for engine in engines:
            if "individual" in o["modes"]:
                cases += [Case(f"{engine}-q{q:02d}", {"engine": engine, "mode": "individual", "query": q},
                               f"{engine} Q{q} cold and warm") for q in range(1, 23)]
            if "power" in o["modes"]:
                cases.append(Case(f"{engine}-power", {"engine": engine, "mode": "power"}, f"{engine} power stream"))
            if "throughput" in o["modes"]:
                cases.append(Case(f"{engine}-throughput", {"engine": engine, "mode": "throughput", "streams": streams},
                                  f"{engine} {streams} parallel streams"))
        return cases

    def estimate(self, plan: Plan, cases: list[Case]) -> Estimate:
        o = plan.options[self.name]
        engines = list(dict.fromkeys(c.params["engine"] for c in cases))
        streams = o["streams"] or min_streams(o["sf"])
        seconds = load_seconds(o["sf"], engines)
        again = plan.repeats - 1 if plan.repeats > 1 and ({"power", "throughput"} & set(o["modes"])) else 0
        for e in engines:
            stream_s = o["sf"] * STREAM_S_PER_SF[e]
            per_mode = {"individual": 2 * stream_s + 22 * COLD_QUERY_S[e], "power": stream_s, "throughput": streams * stream_s}
            seconds += sum(per_mode[m] for m in o["modes"])
            seconds += again * sum(per_mode[m] for m in o["modes"] if m != "individual")  # the headline streams again
        said = {"individual": "the 22 queries cold and warm (2 streams' time)", "power": "a power stream",
                "throughput": f"{streams} parallel streams on shared CPUs"}
        modes = [said[m] for m in said if m in o["modes"]]
        headline = [m for m in ("power", "throughput") if m in o["modes"]]
        return Estimate(seconds, f"generation and loads at SF {o['sf']:g}, then per engine {', '.join(modes[:-1])}"
                        f"{' and ' if len(modes) > 1 else ''}{modes[-1]} (the stream times measured at SF 10 on the "
                        "2-core VM, MariaDB's at SF 1, scaled by SF)"
                        + (f", each engine's {' and '.join(headline)} stream{'s' if len(headline) > 1 else ''} {again} "
                           f"more time{'s' if again > 1 else ''}" if again else ""),
                        space_list(self.name, plan, engines))

    # ---- one case ------------------------------------------------------------------------------------

    def measure(self, ctx, case: Case) -> Record:
        engine = ctx.state["engines"][case.params["engine"]]
        sf = ctx.options["sf"]
        extra = {"load": ctx.state["loads"][engine.name], "data": ctx.state["data"], "engine": engine.name,
                 "target_description": ctx.state.get("target_description"),
                 "answer_check": answer_check(sf)}
        # A stream lasts seconds; one query, milliseconds: too short for samples ten times a second.
        probe = engine_probe(ctx, engine, sessions=ctx.options["sample_sessions"] and case.params["mode"] != "individual")
        with storage.bounded(engine.server):
            probe.start()
            if case.params["mode"] == "individual":
                record = self._individual(ctx, engine, case.params["query"], extra)
            elif case.params["mode"] == "power":
                record = self._power(ctx, engine, sf, extra, repeat_tag(case))
            else:
                record = self._throughput(ctx, engine, sf, case.params["streams"], extra, repeat_tag(case))
            extra["storage"] = probe.stop()
        record.metrics |= storage.wait_figures(extra["storage"])
        return record

    def _individual(self, ctx, engine, query: int, extra: dict[str, Any]) -> Record:
        text = dict(stream_queries(0, ctx.options["sf"]))[query]
        how = engine.cold()
        caches = _evict_data_files(engine) if ctx.options["drop_caches"] else "the OS page cache was kept (drop_caches = false)"
        timeout_s = ctx.options["query_timeout_s"] or None
        cold_rows, cold = self._observed(ctx, lambda: engine.run(text, timeout_s))
        # A query that ran past the limit cold is not run again warm: it would only hold the run up once more.
        warm_rows, warm = (None, {}) if cold_rows is None else self._observed(ctx, lambda: engine.run(text, timeout_s))
        save_answer(ctx, engine.name, "", query, text, LOADED, cold_rows if warm_rows is None else warm_rows)
        timed_out = [when for when, seen in (("cold", cold), ("warm", warm)) if seen.get("timed_out")]
        metrics = {"query": query, "cold_s": round(cold["seconds"], 4),
                   "warm_s": round(warm["seconds"], 4) if "seconds" in warm else None,
                   "rows": len(warm_rows) if warm_rows is not None else None,
                   **{f"cold_{k}": v for k, v in cold.items() if k not in ("seconds", "timed_out")},
                   **{f"warm_{k}": v for k, v in warm.items() if k not in ("seconds", "timed_out")}}
        if timed_out:
            metrics["timed_out"] = " and ".join(timed_out)
        return Record(metrics, method=(f"Q{query} with the validation parameters, on {engine.name} ({engine.kind}): "
                                       f"cold — {caches}, {how} — then warm, at once again. Times are the engine "
                                       "call from submit to the last row fetched"
                                       + (f"; a run cancelled at the {timeout_s:g} s query timeout counts as that long "
                                          "(a lower bound)." if timed_out else ".")), extra=extra)

    def _observed(self, ctx, call) -> tuple[list[tuple] | None, dict[str, Any]]:
        """Runs ``call`` and measures the host around it: CPU % and read MB/s of the data's device. A query
        cancelled at the time limit gives no rows, the limit as its time and ``timed_out``."""
        device = ctx.state["device"]
        cpu0, disks0 = read_cpu(PROC), read_disks(PROC)
        try:
            rows, seconds = call()
            seen: dict[str, Any] = {"seconds": seconds}
        except QueryTimeout as timeout:
            rows, seconds = None, timeout.timeout_s
            seen = {"seconds": seconds, "timed_out": True}
        cpu1, disks1 = read_cpu(PROC), read_disks(PROC)
        if cpu0 and cpu1:
            rates = cpu_rates(cpu0, cpu1)
            seen["cpu_pct"] = round(max(0.0, 100 - rates["idle_pct"] - rates["iowait_pct"]), 1)
        if device and device in disks0 and device in disks1 and seconds > 0:
            seen["read_mb_s"] = round(disk_rates(disks0[device], disks1[device], seconds)["read_mb_s"], 2)
        return rows, seen

    def _power(self, ctx, engine, sf: float, extra: dict[str, Any], repeat: str) -> Record:
        times: dict[str, float] = {}
        host: dict[str, float] = {}  # per query: CPU % and the data device's read MB/s
        timed_out: list[str] = []
        timeout_s = ctx.options["query_timeout_s"] or None
        before = engine.usage()
        with ctx.task(f"{engine.name}: RF1, 22 queries, RF2", total=24) as task:
            t0 = time.perf_counter()
            ctx.live(f"{engine.name} power stream: RF1 running")
            times["RF1"] = refresh.rf1(engine.run, sf, 0, engine.name)
            task.advance()
            for done, (q, text) in enumerate(stream_queries(0, sf), 1):
                ctx.live(f"{engine.name} power stream: {done} of 24 steps (RF1, 22 queries, RF2), Q{q} running")
                rows, seen = self._observed(ctx, lambda: engine.run(text, timeout_s))
                save_answer(ctx, engine.name, f"power-{repeat}", q, text, LOADED if refresh_free(text) else with_rf1(0), rows)
                times[f"Q{q}"] = seen.pop("seconds")
                if seen.pop("timed_out", False):
                    timed_out.append(f"Q{q}")
                host |= {f"Q{q}_{k}": v for k, v in seen.items()}
                task.advance()
            times["RF2"] = refresh.rf2(engine.run, sf, 0)
            elapsed = time.perf_counter() - t0
        metrics = {"elapsed_s": round(elapsed, 3), "power": round(power_at_size(sf, list(times.values())), 1),
                   **_space_used(before, engine.usage()), **{f"{k}_s": round(v, 4) for k, v in times.items()}, **host}
        method = (f"One session on {engine.name}: RF1 (SF·1500 orders inserted), the 22 queries in stream 0's order "
                  "with the validation parameters, RF2 (those orders deleted). power = 3600·SF / geometric mean of the "
                  "24 times (5.4.1).")
        if timed_out:
            metrics["timed_out"] = ", ".join(timed_out)
            method += (f" Incomplete: {metrics['timed_out']} ran past the {timeout_s:g} s query timeout and count as "
                       "that long, so power is an upper bound.")
        return Record(metrics, method=method, extra=extra)

    def _throughput(self, ctx, engine, sf: float, streams: int, extra: dict[str, Any], repeat: str) -> Record:
        results: dict[str, Any] = {}
        errors: list[str] = []
        gone: list[str] = []  # the errors of the streams whose server stopped answering
        timed_out: list[str] = []
        seed = ctx.options["seed"]
        timeout_s = ctx.options["query_timeout_s"] or None
        # Each answer with when it was asked and answered, and when each refresh pair changed the data (its number,
        # RF1's start, RF2's end): which data an answer was computed on (data_seen) is known once every stream has ended.
        answered: dict[tuple[int, int], tuple[str, float, float, list[list[str]] | None]] = {}
        refreshes: list[tuple[int, float, float]] = []
        running: dict[int, int] = {}  # stream → the query it is running, for the live line

        def query_stream(s: int) -> None:
            session = engine.session()
            try:
                t0 = time.perf_counter()
                for q, text in stream_queries(s, sf, seed):
                    running[s] = q
                    asked = time.perf_counter()
                    try:
                        rows = answers.as_expected(session.run(text, timeout_s)[0])
                    except QueryTimeout:  # the stream goes on with its next query, as a user's would
                        timed_out.append(f"stream {s} Q{q}")
                        rows = None
                    answered[s, q] = (text, asked, time.perf_counter(), rows)
                results[f"stream_{s}_s"] = time.perf_counter() - t0
                running.pop(s, None)
            except Exception as exc:  # reported below, after every stream has stopped
                errors.append(f"stream {s}: {str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__}")
                if isinstance(exc, ServerGone):
                    gone.append(errors[-1])
            finally:
                session.close()

        def refresh_stream() -> None:
            session = engine.session()
            try:
                t0 = time.perf_counter()
                for pair in range(1, streams + 1):
                    started = time.perf_counter()
                    refresh.rf1(session.run, sf, pair, engine.name)
                    refresh.rf2(session.run, sf, pair)
                    refreshes.append((pair, started, time.perf_counter()))
                results["refresh_stream_s"] = time.perf_counter() - t0
            except Exception as exc:
                errors.append(f"refresh stream: {str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__}")
            finally:
                session.close()

        threads = [threading.Thread(target=query_stream, args=(s,)) for s in range(1, streams + 1)]
        threads.append(threading.Thread(target=refresh_stream))
        before = engine.usage()
        with ctx.task(f"{engine.name}: {streams} query streams and a refresh stream"):
            t0 = time.perf_counter()
            for t in threads:
                t.start()
            while alive := [t for t in threads if t.is_alive()]:
                alive[0].join(timeout=1)  # returns the moment it ends: the elapsed time is not rounded up
                now = ", ".join(f"stream {s} Q{q}" for s, q in sorted(dict(running).items()))
                ctx.live(f"{engine.name} throughput: {len(answered)} of {streams * 22} queries answered"
                         + (f"; running {now}" if now else ""))
            elapsed = time.perf_counter() - t0
        if errors:
            failed = ServerGone if gone else UserError
            raise failed(f"the throughput test on {engine.name} failed: {(gone or errors)[0]}.")
        for (s, q), (text, asked, done, rows) in answered.items():
            data, could_see = data_seen(text, asked, done, refreshes)
            save_answer(ctx, engine.name, f"stream{s}-{repeat}", q, text, data, rows, could_see)
        extra["stream_orders"] = {s: [q for q, _ in stream_queries(s, sf, seed)] for s in range(1, streams + 1)}
        metrics = {"streams": streams, "elapsed_s": round(elapsed, 3),
                   "throughput": round(throughput_at_size(sf, streams, elapsed), 1), **_space_used(before, engine.usage()),
                   **{k: round(v, 3) for k, v in sorted(results.items())}}
        method = (f"{streams} query streams at once on {engine.name}, stream s running the 22 queries in Appendix A's "
                  f"row s with seeded random parameters, plus one refresh stream of {streams} RF1/RF2 pairs. "
                  "throughput = S·22·3600 / Ts · SF (5.4.2).")
        if timed_out:
            metrics["timed_out"] = ", ".join(sorted(timed_out))
            method += (f" Incomplete: {len(timed_out)} queries ran past the {timeout_s:g} s query timeout and were "
                       "cancelled, so the streams did less than the specification's work and throughput is an upper bound.")
        return Record(metrics, method=method, extra=extra)

    # ---- correctness ---------------------------------------------------------------------------------

    def check(self, ctx) -> list[Finding]:
        storage.say_verdicts(ctx)
        return check_answers(ctx)


def dsn_engine(o: dict[str, Any]) -> str | None:
    """The engine the suite's dsn option drives (its scheme says which); the other server engines are managed."""
    return engine_for_dsn(o["dsn"]) if o["dsn"] else None


def checked_engines(suite: str, plan: Plan) -> list[str]:
    """The engines a dss-style suite (dss, dw) will use, after checking everything they need is there: a usable target,
    tpchgen-cli, and for each server engine a reachable DSN or its server binaries and settings."""
    o = plan.options[suite]
    check_one_directory_target(plan, suite, "data_dir")
    engines = [e for e in o["engines"] if e in plan.engines]
    if not engines:
        raise PlanError(f"[{suite}] engines {o['engines']} and the plan's engines {plan.engines} have none in common.")
    driven = dsn_engine(o)
    if driven and driven not in engines:
        raise PlanError(f"[{suite}] dsn is a {get_engine(driven).title} DSN, and the engines {engines} do not include "
                        f"{driven}.")
    if driven == "postgres" and o["pg_data_dir"]:
        raise PlanError(f"[{suite}] dsn and pg_data_dir exclude each other: pg_data_dir places the managed server, dsn "
                        "replaces it.")
    datagen.tpchgen()
    if "postgres" in engines:
        postgres = get_engine("postgres")
        if driven == "postgres":
            postgres.check_dsn(o["dsn"])
        else:
            postgres.require_installed()
            check_server_settings(managed_settings(o), setting_origins(suite, o))
            pg_server_memory(o)  # a cache bound that cannot work is refused here
            # The run's work directory may be closed to the server's account (_managed_data_dir moves it then); a place
            # the user named may not be: that is the storage under test.
            if o["pg_data_dir"]:
                require_server_reach(Path(o["pg_data_dir"]).parent, "the directory of pg_data_dir")
            elif o["data_dir"] or plan.targets:
                require_server_reach(Path(o["data_dir"] or plan.targets[0]), "data_dir" if o["data_dir"] else "target")
    if "mariadb" in engines:
        mariadb = get_engine("mariadb")
        if driven == "mariadb":
            mariadb.check_dsn(o["dsn"])
        else:
            mariadb.require_installed()
            mariadb.check_settings(mariadb_settings(o), mariadb_origins(suite, o))
            if o["data_dir"] or plan.targets:
                require_server_reach(Path(o["data_dir"] or plan.targets[0]), "data_dir" if o["data_dir"] else "target",
                                     "mariadb")
    require_space(suite, plan, engines)
    return engines


# What SF 1 takes on disk, measured at SF 10 (bench/dss_bench.py --scaling 1,10: 11.32 GB of CSV, a 2.80 GB DuckDB
# file, an 18.83 GB PostgreSQL data directory after the load; SF 1 is a tenth of each): tpchgen-cli's CSV, DuckDB's
# database file, PostgreSQL's tables and indexes, and the temporary files of the PostgreSQL queries that spill
# (work_mem 64MB: the SF 10 power stream wrote 5.0 GB of them, summed over its queries, so at most that at once).
# The WAL is kept near max_wal_size by checkpoints.
# MariaDB's data directory, measured at SF 1 (README, dss): its database 2.01 GB after the load and 2.27 GB after
# two individual passes and a power stream (the refresh functions' inserts and deletes), plus 0.13 GB of growth of the
# system tablespace (the load's undo), per SF unit; and at any scale the 100 MB redo log, the temporary tablespace
# and the system tables. Its on-disk temporary tables (in #tmp there) are not counted: not measured yet.
MARIADB_BYTES_PER_SF = 2.4e9
MARIADB_FIXED_BYTES = 0.13e9
BYTES_PER_SF = {"csv": 1.133e9, "duckdb": 0.28e9, "postgres": 1.89e9, "postgres_temp": 0.5e9,
                "mariadb": MARIADB_BYTES_PER_SF}
SCALE_FACTORS = (1, 10, 30, 100, 300, 1000)  # the specification's


def space_needed(o: dict[str, Any], where: Path, engines: list[str], work: Path) -> dict[Path, dict[str, float]]:
    """What a run of options ``o`` will write, by directory: the generated CSV and the DuckDB database in the data
    directory, the managed PostgreSQL (tables, indexes, temporary files, WAL) in its own data directory, and in the
    run's work directory ``work`` the DuckDB the answer check loads where refbench keeps no answers. What an
    earlier run left there for the same scale factor (the CSV, the DuckDB file, the PostgreSQL data directory)
    is counted as already written."""
    sf, data = o["sf"], where / f"tpch-sf{o['sf']:g}"
    needs: dict[Path, dict[str, float]] = {}
    if needs_answers_apart(o):
        needs.setdefault(work, {})["the answer check's DuckDB (no answers kept for these queries)"] = \
            sf * BYTES_PER_SF["duckdb"]
    if datagen.generated(data, sf) is None:
        needs.setdefault(where, {})["generated CSV"] = sf * BYTES_PER_SF["csv"]
    if "duckdb" in engines:
        duck = where / f"tpch-sf{sf:g}.duckdb"
        needs.setdefault(where, {})["DuckDB database"] = max(0.0, sf * BYTES_PER_SF["duckdb"] - _size_of(duck))
    if "postgres" in engines and dsn_engine(o) != "postgres":
        pgdata = Path(o["pg_data_dir"]) if o["pg_data_dir"] else where / "pgdata"
        settings = managed_settings(o)
        wal = pg_size_bytes(settings.get("max_wal_size", "1GB"), 2**20)  # max_wal_size's own unit is MB
        tables = sf * (BYTES_PER_SF["postgres"] + BYTES_PER_SF["postgres_temp"]) + wal
        needs.setdefault(pgdata, {})["PostgreSQL tables, indexes, temporary files and WAL"] = max(0.0, tables - _size_of(pgdata))
    if "mariadb" in engines and dsn_engine(o) != "mariadb":
        datadir = where / "mariadb"
        tables = sf * BYTES_PER_SF["mariadb"] + MARIADB_FIXED_BYTES
        needs.setdefault(datadir, {})["MariaDB tables, indexes and logs"] = max(0.0, tables - _size_of(datadir))
    return needs


# For --dry-run's estimate, per SF unit on the 2-core VM (README, dss): generation 224 s and the loads 427 s
# (DuckDB) and 447 s (PostgreSQL) at SF 10; a power stream 122 s and 552 s; a cold query's engine restart; and the
# engines' start and the answer check, the rest of the quick profile's 28 s (13 s of cases).
# MariaDB's, measured at SF 1 on the same VM (README, dss): the load with its indexes and ANALYZE (60.4 s at load
# average under 1 with a 2G buffer pool; 295 s at load average 20 with 256M), a power stream with the default buffer
# pool (67.9 s at load average 15-20), a restart (0.4-1.7 s).
MARIADB_LOAD_S_PER_SF = 60.0
MARIADB_STREAM_S_PER_SF = 68.0
MARIADB_COLD_QUERY_S = 1.0
GENERATE_S_PER_SF = 22.4
LOAD_S_PER_SF = {"duckdb": 42.7, "postgres": 44.7, "mariadb": MARIADB_LOAD_S_PER_SF}
STREAM_S_PER_SF = {"duckdb": 12.2, "postgres": 55.2, "mariadb": MARIADB_STREAM_S_PER_SF}
COLD_QUERY_S = {"duckdb": 0.05, "postgres": 0.4, "mariadb": MARIADB_COLD_QUERY_S}
SETUP_S = 15


def load_seconds(sf: float, engines: list[str]) -> float:
    """The estimated time to start the engines, generate SF's data and load it into ``engines``."""
    return SETUP_S + sf * (GENERATE_S_PER_SF + sum(LOAD_S_PER_SF[e] for e in engines))


def _data_base(suite: str, plan: Plan) -> Path:
    o = plan.options[suite]
    return Path(o["data_dir"] or (plan.targets[0] if plan.targets else "") or plan.work_dir or plan.runs_dir)


def _work_base(plan: Plan) -> Path:
    return Path(plan.work_dir or plan.runs_dir)


def space_list(suite: str, plan: Plan, engines: list[str]) -> list[tuple[str, int, str]]:
    """What a dss-style suite writes, as --dry-run lists it: (directory, bytes, what)."""
    return [(str(directory), int(size), f"{suite}: {what}")
            for directory, parts in space_needed(plan.options[suite], _data_base(suite, plan), engines,
                                                 _work_base(plan)).items()
            for what, size in parts.items()]


def require_space(suite: str, plan: Plan, engines: list[str]) -> None:
    """Refuses a run whose data would not fit, file system by file system, before anything is written."""
    o = plan.options[suite]
    by_fs: dict[int, tuple[Path, dict[str, float]]] = {}
    for directory, parts in space_needed(o, _data_base(suite, plan), engines, _work_base(plan)).items():
        _, merged = by_fs.setdefault(_file_system(directory), (directory, {}))
        merged.update(parts)
    for directory, parts in by_fs.values():
        needed = int(sum(parts.values()))
        what = (f"SF {o['sf']:g} ({needed / 1e9:,.1f} GB: "
                + ", ".join(f"{name} {size / 1e9:,.1f} GB" for name, size in parts.items() if size) + ")")
        try:
            require_free_space(directory, needed, what)
        except UserError as exc:
            free = free_bytes(directory)
            fits = [f for f in SCALE_FACTORS if f < o["sf"] and f * needed / o["sf"] < free]
            raise UserError(str(exc).rstrip(".") + (f"; SF {fits[-1]:g} would fit (--sf {fits[-1]:g})." if fits else ".")) from None


def _nearest_existing(path: Path) -> Path:
    path = path.absolute()
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def _file_system(path: Path) -> int:
    return os.stat(_nearest_existing(path)).st_dev


def _size_of(path: Path) -> int:
    """Bytes of a file, or of every file under a directory; 0 when it is not there."""
    if path.is_file():
        return path.stat().st_size
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) if path.is_dir() else 0


# No replication from a benchmark's own server: with the minimal WAL level the load's COPY and index builds into
# tables created or truncated in their transaction write no log at all (the load's cost stays linear in the data
# instead of adding a checkpoint every max_wal_size). The refresh functions and queries log as on any server.
LOAD_SETTINGS = {"wal_level": "minimal", "max_wal_senders": "0"}


def pg_server_memory(o: dict[str, Any]) -> "storage.ServerMemory | None":
    """The managed PostgreSQL's cache bound in a dss-style suite (dss, dw)."""
    return storage.server_memory(o["cache_mb"], int(o["sf"] * BYTES_PER_SF["postgres"]), managed_settings(o))


def engine_probe(ctx, engine: Engine, sessions: bool = False) -> "storage.Probe":
    """The storage probe of one engine's measured interval, with its sessions sampled when ``sessions``."""
    return storage.engine_probe(engine, ctx.state.get("memory"), sessions)


def mariadb_settings(o: dict[str, Any]) -> dict[str, str]:
    """The managed MariaDB's server variables in a dss-style suite: the buffer pool (and performance_schema off when
    sessions are not sampled), then mariadb_settings."""
    return {"innodb_buffer_pool_size": mariadb_buffer_pool(o), **storage.unsampled_mariadb(o),
            **settings_dict(o["mariadb_settings"])}


def mariadb_buffer_pool(o: dict[str, Any]) -> str:
    """The option's buffer pool, or by default the same memory for data as the managed PostgreSQL's: its cache bound
    (shared_buffers + cache_mb), or without one room for the data (PostgreSQL's page cache may hold it all), at most
    half the host's memory and at least 128 MiB. InnoDB has no page cache beneath: this is all it gets."""
    if o["mariadb_buffer_pool"]:
        return o["mariadb_buffer_pool"]
    memory = pg_server_memory(o)
    host_mb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 1e6
    data_mb = memory.bound_mb if memory else min(o["sf"] * BYTES_PER_SF["mariadb"] / 1e6, host_mb / 2)
    return f"{max(128, int(data_mb * 1e6 / 2**20))}M"


def mariadb_origins(suite: str, o: dict[str, Any]) -> dict[str, str]:
    """Where each of mariadb_settings' variables comes from, for the server's refusal in one sentence."""
    return {"innodb_buffer_pool_size": f"[{suite}] mariadb_buffer_pool '{mariadb_buffer_pool(o)}'",
            **{item.partition("=")[0].strip().lower(): f"[{suite}] mariadb_settings item '{item}'"
               for item in o["mariadb_settings"]}}


def managed_settings(o: dict[str, Any]) -> dict[str, str]:
    """The managed PostgreSQL's settings of a dss-style suite: the buffer cache, the load's WAL level, then
    pg_settings (which may override either)."""
    return {"shared_buffers": o["shared_buffers"], **LOAD_SETTINGS, **settings_dict(o["pg_settings"])}


def engine_names(ctx) -> list[str]:
    return [e for e in ctx.options["engines"] if e in ctx.plan.engines]


def prepare_data_and_engines(ctx) -> None:
    """Generates (or reuses) the data, starts the engines and loads them (or reuses a load): what the DSS and DW
    suites share. Needs the options sf, engines, data_dir, dsn, pg_data_dir, shared_buffers, pg_settings,
    duckdb_memory_limit and cache_mb; fills ctx.state with data, data_dir, device, engines, server, memory and loads."""
    o = ctx.options
    base = Path(o["data_dir"]) if o["data_dir"] else Path(ctx.plan.targets[0]) if ctx.plan.targets else ctx.work_dir
    note_directory_targets(ctx)
    data = base / f"tpch-sf{o['sf']:g}"
    # What this run creates in the data directory is removed with its work data; an earlier run's, reused, is not.
    ctx.claim(data, *(base / f"{data.name}{end}" for end in (".duckdb", ".duckdb.wal", ".duckdb.tmp", "-loads.json")))
    with ctx.task(f"generating SF {o['sf']:g} with tpchgen-cli"):
        ctx.state["data"] = datagen.generate(data, o["sf"])
    ctx.log(f"data: {data} ({'reused' if ctx.state['data']['reused'] else 'generated'}, on "
            f"{device_of(data) or 'no block device'})")
    ctx.state["data_dir"], ctx.state["device"] = data, device_of(data)
    engines: dict[str, Engine] = {}
    ctx.state["engines"] = engines  # filled as they start: close_engines stops those started when one fails
    for name in (e for e in ENGINES if e in engine_names(ctx)):  # the column store first, as always
        engine = engines[name] = open_engine(name, datagen.TPCH, _placement(ctx, name, base))
        if engine.server is not None:
            server = engine.server
            ctx.claim(server.data_dir, server.log_file)
            with ctx.task(f"starting the managed {engine.title}"):
                engine.start()
            ctx.log(f"managed {engine.title} in {server.data_dir} (a unix socket, and 127.0.0.1:{server.port} with the "
                    f"password in {server.password_file})")
        else:
            engine.start()
            if engine.dsn:
                ctx.log(f"driving the {engine.title} at '{redact(engine.dsn)}'")
        if name == "mariadb" and engine.server is not None:
            ctx.log(f"no page cache bound for MariaDB (InnoDB reads with O_DIRECT): its buffer pool "
                    f"({mariadb_size_bytes(mariadb_buffer_pool(o)) / 1e6:,.0f} MB) is all the memory its data gets, "
                    f"against about {o['sf'] * BYTES_PER_SF[name] / 1e6:,.0f} MB of data")
        elif not engine.in_process:
            storage.say_bound(ctx, ctx.state.setdefault("memory", None), engine.server,
                              int(o["sf"] * BYTES_PER_SF[name]))
    # What each load cost is kept beside the data, so that a later run reusing the databases still reports it.
    loads_file = base / f"tpch-sf{o['sf']:g}-loads.json"
    loads = json.loads(loads_file.read_text()) if loads_file.exists() else {}
    for name, engine in engines.items():
        if engine.loaded(o["sf"]):
            loads[name] = {**loads.get(name, {}), "reused": True}
        else:
            with ctx.task(f"loading SF {o['sf']:g} into {name}"):
                loads[name] = {**engine.load(data, o["sf"]), "reused": False}
            atomic_write_text(loads_file, json.dumps(loads))
        engine.open()
        loads[name] |= {"sizes": engine.sizes(), "settings": engine.settings(), "kind": engine.kind}
    ctx.state["loads"] = loads


def close_engines(ctx) -> None:
    for engine in ctx.state.pop("engines", {}).values():
        engine.stop()


def power_at_size(sf: float, seconds: list[float]) -> float:
    """5.4.1: 3600·SF over the geometric mean of the query and refresh times, each rounded to 0.1 s (at least 0.1),
    and none below a thousandth of the longest."""
    times = [max(0.1, round(s, 1)) for s in seconds]
    floor = max(times) / 1000
    times = [max(t, floor) for t in times]
    return 3600 * sf / math.exp(sum(math.log(t) for t in times) / len(times))


def throughput_at_size(sf: float, streams: int, elapsed_s: float) -> float:
    """5.4.2: S·22·3600 / Ts · SF, Ts rounded to 0.1 s."""
    return streams * 22 * 3600 / max(0.1, round(elapsed_s, 1)) * sf


def _space_used(before: dict[str, int], after: dict[str, int]) -> dict[str, float]:
    """temp_mb, wal_mb: what the engine wrote to temporary files and its log during the case."""
    return {f"{k.removesuffix('_bytes')}_mb": round((after[k] - before[k]) / 1e6, 1) for k in before}


def _evict_data_files(engine) -> str:
    """Only the engine's own files: dropping the whole OS page cache would also empty a neighbour's (another run, a
    database on the same host) and change what that one measures."""
    files = engine.data_files()
    if files is None:
        return "the OS page cache of a server refbench does not manage was kept (it may be on another host)"
    pagecache.evict(files, write_back=True)
    return f"its {len(files)} data file(s) evicted from the OS page cache"


def _placement(ctx, name: str, base: Path) -> Placement:
    """Where engine ``name`` goes in a dss-style suite, and its settings from the suite's options."""
    o = ctx.options
    if name == "duckdb":
        return Placement(base / f"tpch-sf{o['sf']:g}.duckdb", settings={"memory_limit": o["duckdb_memory_limit"],
                                                                       "threads": o.get("duckdb_threads") or ""})
    workers = os.cpu_count() or 1
    if dsn_engine(o) == name:
        return Placement(Path(), dsn=o["dsn"], workers=workers)
    password_file = ctx.run.secret_path(f"{ctx.suite}-{name}.password")
    if name == "mariadb":
        # No page-cache bound: InnoDB reads with O_DIRECT, so its buffer pool is all the memory its data gets.
        return Placement(_managed_data_dir(ctx, base, name, "mariadb"), settings=mariadb_settings(o),
                         password_file=password_file, workers=workers)
    memory = ctx.state["memory"] = pg_server_memory(o)
    return Placement(Path(o["pg_data_dir"]) if o["pg_data_dir"] else _managed_data_dir(ctx, base, name, "pgdata"),
                     settings=managed_settings(o), password_file=password_file,
                     cache_bytes=storage.ServerMemory.cache_bytes(memory), workers=workers)


def _managed_data_dir(ctx, base: Path, name: str, directory: str) -> Path:
    preferred = base / directory
    chosen = get_engine(name).managed_data_dir(preferred, ctx.scratch_dir / directory)
    if chosen != preferred:
        ctx.log(f"the {name} server's account cannot reach {base}; the managed server's data goes to {chosen.parent} "
                "instead")
    return chosen


def timed_generate_and_load(base: Path, sf: float, engines: tuple[str, ...] = ("duckdb", "postgres")) -> dict[str, Any]:
    """Generates scale factor ``sf`` afresh in ``base`` and loads it into each engine as the suite does — DuckDB,
    and a managed PostgreSQL with the standard profile's settings — timing each step, then removes ``base`` (give it a
    scratch directory of its own).
    For benchmarks of the load's cost against the data size (bench/dss_bench.py --scaling, bench/scale_bench.py).

    Returns {"sf", "csv_bytes", "generate_s", ENGINE: {"load_s", "database_bytes"[, "copy_s", "index_s",
    "data_dir_bytes"]}}; an engine's generate + load time is generate_s + its load_s."""
    import shutil

    base.mkdir(parents=True, exist_ok=True)
    base.chmod(0o755)  # the managed server's account reads the CSV (server-side COPY) and writes its data directory
    out: dict[str, Any] = {"sf": sf}
    try:
        t0 = time.monotonic()
        info = datagen.generate(base / "data", sf)
        out |= {"generate_s": round(time.monotonic() - t0, 2), "csv_bytes": sum(info["bytes"].values())}
        if "duckdb" in engines:
            duck = open_engine("duckdb", datagen.TPCH, Placement(base / "tpch.duckdb"))
            t0 = time.monotonic()
            duck.load(base / "data", sf)
            out["duckdb"] = {"load_s": round(time.monotonic() - t0, 2), "database_bytes": _size_of(base / "tpch.duckdb")}
        if "postgres" in engines:
            defaults = {k: DssSuite.options[k].default_for("standard") for k in ("shared_buffers", "pg_settings")}
            pg = open_engine("postgres", datagen.TPCH, Placement(base / "pgdata", settings=managed_settings(defaults),
                                                                 workers=os.cpu_count() or 1))
            pg.start()
            try:
                t0 = time.monotonic()
                load = pg.load(base / "data", sf)
                out["postgres"] = {"load_s": round(time.monotonic() - t0, 2), "copy_s": load["load_s"],
                                   "index_s": load["index_s"], "database_bytes": pg.sizes()["database_bytes"]}
            finally:
                pg.stop()
            out["postgres"]["data_dir_bytes"] = _size_of(base / "pgdata")
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return out
