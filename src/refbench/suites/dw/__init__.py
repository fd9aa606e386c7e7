"""The data-warehouse rating: what the DWFT rating paper publishes for a server + storage configuration (a Fast Track
rating), as an open method. Concurrent sessions run a scan-heavy query mix for a fixed interval on the row
store and the column store, with the engines' memory capped and the data kept out of the page cache; from that
come the measured throughput (queries/h/TB), the physical and logical scan rates, the I/O throughput and the
CPU, then the capacity rating and the throughput relative to a reference run, on one rating sheet.

Where things are: workload.py runs the sessions and reads the counters; capacity.py states the capacity rules;
summary.py builds the tables and the rating sheet. Data and engines are the DSS suite's.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

from refbench.engines import get_engine
from refbench.engines.settings import (
    duckdb_size_problem, mariadb_setting_problem, mariadb_size_problem, pg_setting_problem, pg_size_problem,
    server_dsn_problem,
)
from refbench.errors import UserError
from refbench.options import DAY_S, ENGINES, SEED_MAX, SETTINGS_HELP, SF_MAX, WEEK_S, Option, Plan
from refbench.suites.repeats import one_per_configuration
from refbench.runstore import Run
from refbench.suites import Case, Estimate, Finding, Record, SuiteBase, get_suite, storage
from refbench.suites.device.targets import device_of
from refbench.suites.dss import (
    OnTpchData, check_answers, checked_engines, engine_probe, load_seconds, space_list,
)
from refbench.suites.dw import capacity, workload


# Each engine's memory cap, as the method names it: (its name, the option that sets it).
MEMORY_CAP = {"postgres": ("shared_buffers", "shared_buffers"), "duckdb": ("memory_limit", "duckdb_memory_limit"),
              "mariadb": ("innodb_buffer_pool_size", "mariadb_buffer_pool")}
DIRECT_IO = {"mariadb"}  # InnoDB reads its data files with O_DIRECT: nothing of them to evict from the page cache


class DwSuite(OnTpchData, SuiteBase):
    name = "dw"
    # What a cluster run totals across nodes (sum) or averages (mean); the first is charted by node count.
    node_figures = {"queries_per_hour": "sum", "physical_scan_mb_s": "sum", "cpu_avg_pct": "mean"}
    # Wall time on the 2-core VM: quick measured with `refbench dw --profile quick` (README); the others as README says.
    summary = ("Data-warehouse rating like the DWFT rating paper (a Fast Track rating, as an open method): concurrent sessions "
               "run a scan-heavy query mix on the row store (PostgreSQL) and the column store (DuckDB) with memory "
               "capped; measured throughput (queries/h/TB), physical and logical scan rates, I/O throughput, CPU; "
               "rated and maximum user data capacity; throughput relative to a reference run; the rating sheet.")
    targets_help = ("One directory for the data (existing): the generated data, the DuckDB database and "
                    "the managed PostgreSQL go there, like --data-dir DIR, and are removed at the end unless --keep-work.")
    examples = [
        "refbench dw /mnt/nvme0                           # rate the storage under /mnt/nvme0",
        "refbench dw                                      # quick: SF 0.1, both stores, 2 sessions, 10 s each",
        "refbench dw --sf 10 --data-dir /mnt/nvme0/dw --sessions 8 --duration-s 600 --profile standard",
        "refbench dw --sf 10 --data-dir /mnt/sas/dw --reference runs/20261122T101500Z-nvme",
    ]
    options = {
        "sf": Option(float, {"quick": 0.1, "standard": 10.0, "full": 1000.0}, "Scale factor (SF 1000 ≈ the paper's 1 TB).",
                     minimum=0.001, maximum=SF_MAX),
        # MariaDB by request: its rating at the quick profile's capped buffer pool, and its answer check at SF 0.1,
        # took 3 minutes of the 2-core VM (README, dw).
        "engines": Option(list, ["duckdb", "postgres"], "Stores: postgres and mariadb (row stores), duckdb (column store).",
                          item=str, choices=ENGINES),
        "sessions": Option(int, {"quick": 2, "standard": 8, "full": 16}, "Concurrent query sessions.", minimum=1, maximum=256),
        "duration_s": Option(int, {"quick": 10, "standard": 600, "full": 3600}, "Measurement interval per store, seconds.",
                             minimum=1, maximum=WEEK_S, unit="s"),
        "data_dir": Option(str, "", "Where the data, the DuckDB database and the managed PostgreSQL go (default: the "
                                    "work directory); put it on the storage under test."),
        "dsn": Option(str, "", "Rate this server instead of a managed one, a PostgreSQL (libpq string) or a MariaDB "
                               "(mysql://…): its files cannot be kept out of its host's page cache, and its physical scan "
                               "rate is not measured.", check=server_dsn_problem),
        "pg_data_dir": Option(str, "", "Data directory of the managed PostgreSQL (default: in the data directory)."),
        "shared_buffers": Option(str, {"quick": "16MB", "standard": "1GB", "full": "64GB"},
                                 "The row store's memory cap, about a tenth of its data or less (the DWFT rating paper caps SQL Server "
                                 "at 118 GB for 1 TB).", check=pg_size_problem),
        "pg_settings": Option(list, ["work_mem=32MB", "max_wal_size=4GB"], SETTINGS_HELP, item=str, adds_settings=True,
                              check=pg_setting_problem),
        "duckdb_memory_limit": Option(str, {"quick": "128MB", "standard": "1GB", "full": "64GB"}, "The column store's memory cap.",
                                      check=duckdb_size_problem),
        "duckdb_threads": Option(int, 0, "DuckDB's threads per query (0: DuckDB's own, one per CPU).", minimum=0,
                                 maximum=1024),
        # Quick's 64M, not PostgreSQL's 16MB: with O_DIRECT nothing is beneath the buffer pool, and at 16M stream 0's
        # answer check at SF 0.1 took 9-15 s a query on the 2-core VM.
        "mariadb_buffer_pool": Option(str, {"quick": "64M", "standard": "1G", "full": "64G"},
                                      "The MariaDB row store's memory cap (innodb_buffer_pool_size; InnoDB reads with "
                                      "O_DIRECT, so this is all the memory its data gets).", check=mariadb_size_problem),
        "mariadb_settings": Option(list, [], SETTINGS_HELP, item=str, adds_settings=True,
                                   check=mariadb_setting_problem("mariadb_buffer_pool")),
        "evict_s": Option(float, 1.0, "Drop the data files from the OS page cache this often, seconds (0 = never); "
                          "the row store's only when it has no cache bound (cache_mb).", minimum=0, maximum=DAY_S,
                          unit="s"),
        "cache_mb": storage.CACHE_MB,
        "sample_sessions": storage.SAMPLE_SESSIONS,
        "data_volume_gb": Option(float, 0.0, "Capacity of the data volume in GB (0 = the file system holding the data).",
                                 minimum=0, maximum=1e6, unit="GB"),
        "memory_gb": Option(float, 0.0, "Server memory for the memory limit, GB (0 = this host's).", minimum=0,
                            maximum=1e5, unit="GB"),
        "free_space_pct": Option(float, capacity.FREE_SPACE_PCT, "Free-space reserve of the data volume, % (the DWFT rating paper: 10).",
                                 minimum=0, maximum=99, unit="%"),
        "temp_reserve_pct": Option(float, capacity.TEMP_RESERVE_PCT, "Temp-space reserve, % (the DWFT rating paper: 25).",
                                   minimum=0, maximum=99, unit="%"),
        "compression": Option(float, capacity.COMPRESSION, "Assumed compression ratio (the DWFT rating paper: 5:1).", minimum=1,
                              maximum=100),
        "scan_hours": Option(float, capacity.SCAN_HOURS, "Throughput limit: a full scan must fit in this many hours.",
                             minimum=0.01, maximum=WEEK_S / 3600, unit="h"),
        "memory_gb_per_tb": Option(float, capacity.MEMORY_GB_PER_TB, "Memory limit: GB of server memory per TB of user "
                                   "data (14.2: the DWFT rating paper's 512 GB for 36 TB).", minimum=0.01,
                                   maximum=10_000, unit="GB"),
        "reference": Option(str, "", "An earlier dw run to report relative throughput against (as the DWFT rating paper against "
                                     "its reference configuration)."),
        "seed": Option(int, 1, "Seed of the random query parameters.", minimum=0, maximum=SEED_MAX),
    }

    def cases(self, plan: Plan) -> list[Case]:
        o = plan.options[self.name]
        engines = checked_engines(self.name, plan)
        if o["reference"]:
            reference_figures(o["reference"], Path(plan.runs_dir))  # an unknown reference fails here, before anything
        return [Case(e, {"engine": e}, f"{get_engine(e).kind} ({e}), {o['sessions']} sessions, {o['duration_s']} s") for e in engines]

    def estimate(self, plan: Plan, cases: list[Case]) -> Estimate:
        o = plan.options[self.name]
        engines = [c.id for c in cases]
        measured = len(engines) * max(1, plan.repeats)  # each store's workload is a headline case
        return Estimate(load_seconds(o["sf"], engines) + measured * o["duration_s"],
                        f"generation and loads at SF {o['sf']:g} (as dss), then {len(engines)} store(s) × "
                        f"{o['duration_s']} s measured" + (f", {plan.repeats} times each" if plan.repeats > 1 else ""),
                        space_list(self.name, plan, engines))

    def measure(self, ctx, case: Case) -> Record:
        o = ctx.options
        engine = ctx.state["engines"][case.params["engine"]]
        files, where = self._data_files(ctx, engine)
        device = device_of(where) if where else None
        with ctx.task(f"{engine.kind}: {o['sessions']} sessions for {o['duration_s']} s", total=None), \
                storage.bounded(engine.server):
            seen = workload.run(engine, o["sf"], o["sessions"], o["duration_s"], o["seed"], files, o["evict_s"], device,
                                engine_probe(ctx, engine, sessions=o["sample_sessions"]),
                                lambda seconds, done: ctx.live(f"{engine.kind}: {done:,} queries completed in {seconds:.0f} s "
                                                               f"({done * 3600 / max(seconds, 1):,.0f} an hour so far)"))
        if seen["errors"]:
            raise UserError(f"the {engine.kind} workload failed: {seen['errors'][0]}.")
        raw_tb = o["sf"] / 1000  # SF 1 is 1 GB of raw data
        per_hour = len(seen["completed"]) * 3600 / seen["interval_s"]
        physical, logical = seen["physical_mb_s"], seen["logical_mb_s"]
        metrics = {
            "queries_completed": len(seen["completed"]), "queries_per_hour": round(per_hour, 1),
            "queries_per_hour_per_tb": round(per_hour * raw_tb, 4),
            "physical_scan_mb_s": None if physical is None else round(physical, 2),
            "logical_scan_mb_s": None if logical is None else round(logical, 2),
            "io_throughput_mb_s": round((physical + logical) / 2, 2) if physical is not None and logical is not None else None,
            "cpu_avg_pct": None if seen["cpu_pct"] is None else round(seen["cpu_pct"], 1),
            "interval_s": round(seen["interval_s"], 3),
            **storage.wait_figures(seen["storage"]),
        }
        counts: dict[str, int] = {}
        for q, _ in seen["completed"]:
            counts[f"Q{q}"] = counts.get(f"Q{q}", 0) + 1
        extra = {
            "engine": engine.name, "store": engine.kind, "device": device, "data_files": len(files), "sf": o["sf"],
            "interval_epoch_s": [seen["started_epoch_s"], seen["ended_epoch_s"]], "queries": counts,
            "load": ctx.state["loads"][engine.name], "capacity_inputs": self._capacity_inputs(ctx),
            "reference": (reference_figures(o["reference"], Path(ctx.plan.runs_dir)).get(engine.name)
                          if o["reference"] else None),
            "target_description": ctx.state.get("target_description"), "storage": seen["storage"],
            "run": ctx.run.path.name, "system": _system(ctx.run.meta.get("inventory", {}), device, engine.settings()),
        }
        kept_out = ("data read with O_DIRECT, past the page cache" if engine.name in DIRECT_IO and engine.server else
                    f"data files dropped from the page cache every {o['evict_s']:g} s" if files else
                    "page cache bounded (cache_mb; see Storage)" if engine.server and engine.server.bound
                    else "page cache not bounded")
        cap = MEMORY_CAP[engine.name]
        return Record(metrics, method=(
            f"{o['sessions']} sessions on the {engine.kind} ({engine.name}), each cycling through the "
            f"scan-heavy mix Q{', Q'.join(map(str, workload.SCAN_MIX))} with random parameters, for {o['duration_s']} s; "
            f"memory capped ({cap[0]} {o[cap[1]]}), "
            f"{kept_out}. Queries/h/TB: queries completed "
            f"inside the interval per hour × raw data in TB (SF {o['sf']:g} = {raw_tb:g} TB). Physical scan: MB/s read "
            "from the data's device (/proc/diskstats). Logical scan: table and index MB/s the engine consumed "
            "(PostgreSQL: blocks read + hit × block size; MariaDB: buffer pool page requests × page size; DuckDB exposes "
            "no such counter: N/A, as the DWFT rating paper reports for its column store). I/O throughput: the average of the two, as the DWFT rating paper defines it."), extra=extra)

    def _data_files(self, ctx, engine) -> tuple[list[Path], Path | None]:
        """The engine's data files (kept out of the page cache) and where they are."""
        where = engine.data_location()
        if where is None:
            return [], None  # a user's server: its files are not ours to touch
        if engine.server is not None and (engine.server.bound is not None or engine.name in DIRECT_IO):
            return [], where  # its cache bound, or its direct I/O, keeps them out of memory
        return engine.data_files(), where

    def _capacity_inputs(self, ctx) -> dict[str, Any]:
        o = ctx.options
        volume = o["data_volume_gb"] or shutil.disk_usage(ctx.state["data_dir"]).total / 1e9
        memory = o["memory_gb"] or os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 1e9
        rules = {k: o[k] for k in ("free_space_pct", "temp_reserve_pct", "compression", "scan_hours", "memory_gb_per_tb")}
        return {"data_volume_gb": round(volume, 1), "memory_gb": round(memory, 1), "rules": rules,
                "volume_from": "--data-volume-gb" if o["data_volume_gb"] else f"the file system holding {ctx.state['data_dir']}",
                "memory_from": "--memory-gb" if o["memory_gb"] else "this host's memory"}

    def check(self, ctx) -> list[Finding]:
        storage.say_verdicts(ctx)
        findings = check_answers(ctx)
        for r in ctx.run.records(self.name):
            repeat = f", repeat {r.params['repeat']}" if "repeat" in r.params else ""
            findings.append(Finding(f"{r.extra['store']} ({r.params['engine']}{repeat}): queries completed during the interval",
                                    r.metrics["queries_completed"] > 0,
                                    f"{r.metrics['queries_completed']} in {r.metrics['interval_s']} s"))
        return findings


def _system(inventory: dict[str, Any], device: str | None, settings: dict[str, str]) -> dict[str, Any]:
    """The rating sheet's system block: what the DWFT rating paper's certification table lists."""
    cpu, memory, system = inventory.get("cpu", {}), inventory.get("memory", {}), inventory.get("system", {})
    disk = next((d for d in inventory.get("block_devices", [])
                 if device and (d["name"] == device or device in d.get("partitions", []))), None)
    storage = (f"{disk['name']}: {disk.get('model') or 'unknown model'}, {disk['size_bytes'] / 1e12:.2f} TB, "
               f"{'rotational' if disk.get('rotational') else 'solid state'}") if disk else "not a local block device"
    return {"system": inventory.get("hostname"), "processor": f"{cpu.get('model')} ({cpu.get('sockets')}/{cpu.get('cores')}/"
            f"{cpu.get('threads')} sockets/cores/threads)", "memory": f"{memory.get('total_gib')} GiB",
            "operating system": f"{system.get('distribution')}, Linux {system.get('kernel')}",
            "database": settings.get("server_version") or settings.get("version"), "storage": storage}


def reference_figures(reference: str, runs_dir: Path) -> dict[str, dict[str, Any]]:
    """The reference run's measured throughput per engine, for relative throughput."""
    run = Run.find(reference, str(runs_dir))
    figures = {r.case_id: {"run": run.path.name, "queries_per_hour_per_tb": r.metrics["queries_per_hour_per_tb"]}
               for r in one_per_configuration(run.records("dw"), get_suite("dw"))}
    if not figures:
        raise UserError(f"the reference run {run.path.name} has no dw measurements to compare with.")
    return figures
