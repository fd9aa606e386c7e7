"""The mixed analytics workload of the mixed-analytics paper (SAS on an all-flash array), as an open method: nineteen tests —
ten computation, two memory, seven I/O — run as separate processes, replicated and launched back to back to hold
a target concurrency, on three file-system locations (DATA, WORK, UTIL). Judged by each job's CPU/real-time
ratio from the kernel's accounting, the node's summed CPU and elapsed minutes, and the storage's throughput and
IOPS over time; plus SAS's storage throughput test (MB/s per core) and the host tuning that matters here.

Where things are: catalog.py lists the tests and what they need; computation_tests.py, memory_tests.py and
io_tests.py hold the tests; inputs.py generates DATA; job.py runs one job; launcher.py runs them all and
measures them; iotest.py is the storage throughput test; summary.py makes the tables and charts.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from refbench.fileio import writable_directory
from refbench.options import SEED_MAX, Option, Plan, PlanError
from refbench.suites.repeats import strip_repeat
from refbench.suites import Case, Estimate, Finding, Record, SuiteBase
from refbench.suites.analytics import inputs, launcher
from refbench.suites.analytics.catalog import LOCATIONS, TEST_NAMES, TESTS, AnalyticsTest
from refbench.suites.analytics.summary import mean_of, minutes_of
from refbench.suites.device.targets import device_of, directory_target, note_directory_targets

# The audit's checks that the mixed-analytics paper's tuned profile sets, and the data devices' queue settings.
TUNING_SETTINGS = ("CPU frequency governor", "CPU energy/performance bias", "Transparent huge pages", "vm.dirty_ratio",
                   "vm.dirty_background_ratio", "vm.swappiness", "kernel.sched_min_granularity_ns",
                   "kernel.sched_wakeup_granularity_ns")


# For --dry-run's estimate, from the quick profile on the 2-core VM: 19 jobs at 2 M rows summed 1.93 elapsed minutes
# beside other work (load average 4.7-6.2; the README's demo, 0.80), about 3 s a job per million rows; the inputs take
# about 260 bytes a row (README); the throughput test writes and reads its files at an assumed 500 MB/s.
JOB_S_PER_MILLION_ROWS = 3.0
INPUT_BYTES_PER_ROW = 260
ASSUMED_IO_B_S = 500e6


class AnalyticsSuite(SuiteBase):
    name = "analytics"
    # The mixed-analytics paper's Table 2 per node and its four-node totals; the first is charted by node count.
    node_figures = {"mean_cpu_real_ratio": "mean", "elapsed_min_sum": "sum", "user_cpu_min_sum": "sum",
                    "system_cpu_min_sum": "sum", "peak_mb_s": "mean", "write_mb_s_per_core": "mean",
                    "read_mb_s_per_core": "mean"}
    # Wall time on the 2-core VM: quick measured with `refbench analytics --profile quick` (README); the others as README says.
    summary = ("Mixed analytics like the mixed analytics paper: 19 tests (10 computation, 2 memory, 7 I/O) on DuckDB, Polars and NumPy, "
               "run as separate processes at a target concurrency over DATA, WORK and UTIL; per-job real time, user and "
               "system CPU and bytes read/written from the kernel, the node's CPU/real-time ratio, throughput and IOPS "
               "over time, and SAS's storage throughput test in MB/s per core.")
    targets_help = ("One directory: DATA, WORK and UTIL go in DIR/data, DIR/work and DIR/util (one storage throughput "
                    "test); or three: DATA, WORK and UTIL in that order, like --data-dir, --work-dir and --util-dir. Each "
                    "is an existing directory; what refbench puts there is removed at the end (--keep-work keeps it).")
    examples = [
        "refbench analytics /mnt/data /mnt/work /mnt/util     # the mixed analytics paper's three file systems",
        "refbench analytics                                   # quick: 19 jobs, 2 at a time, 2 M rows",
        "refbench analytics --data-dir /mnt/data --work-dir /mnt/work --util-dir /mnt/util --profile standard",
        "refbench analytics --profile full                    # the paper's size: 77 jobs, 20 at a time",
        "refbench analytics --tests correlation_matrix --jobs 1 --concurrency 1 --no-iotest",
    ]
    options = {
        "data_dir": Option(str, "", "DATA: the permanent inputs (SASDATA in the mixed analytics paper); default: the work directory."),
        "work_dir": Option(str, "", "WORK: each job's working data (SASWORK); default: the work directory."),
        "util_dir": Option(str, "", "UTIL: sort and utility spill (UTILLOC); default: the work directory."),
        "rows": Option(int, {"quick": 2_000_000, "standard": 20_000_000, "full": 100_000_000},
                       "Rows of the generated sales table (about 200 bytes each as CSV + Parquet).", minimum=10_000,
                       maximum=10_000_000_000),
        "tests": Option(list, list(TEST_NAMES), "Which tests to launch.", item=str, choices=TEST_NAMES),
        "jobs": Option(int, {"quick": 19, "standard": 38, "full": 77}, "Jobs launched in all, cycling through the tests "
                       "(the mixed analytics paper: 77).", minimum=1, maximum=10_000),
        "concurrency": Option(int, {"quick": 2, "standard": 10, "full": 20}, "Jobs running at once (the mixed analytics paper: 20).",
                              minimum=1, maximum=512),
        "threads": Option(int, {"quick": 2, "standard": 4, "full": 4}, "Threads of each threaded test (SAS's CPUCOUNT).",
                          minimum=1, maximum=256),
        "job_memory_mb": Option(int, {"quick": 128, "standard": 1024, "full": 4096}, "Memory each DuckDB job may use "
                                "before it spills to UTIL (SAS's MEMSIZE).", minimum=64, maximum=1_000_000, unit="MB"),
        "evict_inputs": Option(bool, True, "Drop a job's DATA inputs from the page cache as it starts, so a run smaller "
                                           "than memory still reads from storage."),
        "fsync": Option(bool, True, "Flush each job's outputs to storage when it ends, so a run smaller than memory "
                                    "still writes to storage."),
        "iotest": Option(bool, True, "Run the storage throughput test (MB/s per core) on each location."),
        "iotest_file_mib": Option(int, {"quick": 256, "standard": 0, "full": 0}, "File per writer, MiB (0 = large enough "
                                  "that all files together are twice the memory).", minimum=0,
                                  maximum=2**20, unit="MiB"),
        "iotest_zero_buffers": Option(bool, False, "Write zeros, as rhel_iotest's dd from /dev/zero does (storage that "
                                      "detects zeros or compresses will look faster; by default the data does not compress)."),
        "cores": Option(int, 0, "Physical cores: writers in the throughput test (0 = this host's).", minimum=0,
                        maximum=4096),
        "seed": Option(int, 1, "Seed of the tests' random choices.", minimum=0, maximum=SEED_MAX),
    }

    def cases(self, plan: Plan) -> list[Case]:
        o = plan.options[self.name]
        _placed_locations(plan)  # a conflict or a wrong number of targets is refused here, before the run directory
        for target in plan.targets:
            directory_target(target)
        cases = [Case("workload", {"jobs": o["jobs"], "concurrency": o["concurrency"]},
                      f"{o['jobs']} jobs, {o['concurrency']} at a time")]
        if o["iotest"]:
            for label in _location_groups(plan):
                cases.append(Case(f"iotest-{label.lower().replace('+', '-')}", {"locations": label},
                                  f"storage throughput test on {label}"))
        return cases

    def estimate(self, plan: Plan, cases: list[Case]) -> Estimate:
        o = plan.options[self.name]
        job_s = JOB_S_PER_MILLION_ROWS * o["rows"] / 1e6
        times = max(1, plan.repeats)  # the workload and each throughput test are headline cases
        seconds = times * o["jobs"] * job_s / min(o["concurrency"], os.cpu_count() or 1)
        placed = _placed_locations(plan)
        base = plan.work_dir or plan.runs_dir
        inputs_bytes = o["rows"] * INPUT_BYTES_PER_ROW
        space = [(placed["DATA"][1] or base, inputs_bytes, "analytics: the generated inputs in DATA")]
        cores = o["cores"] or os.cpu_count() or 1
        memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        iotest_bytes = cores * (o["iotest_file_mib"] * 2**20 if o["iotest_file_mib"] else 2 * memory // cores)
        for group in (_location_groups(plan) if o["iotest"] else []):
            space.append((placed[group.split("+")[0]][1] or base, iotest_bytes, f"analytics: the throughput test's files on {group}"))
            seconds += times * 2 * iotest_bytes / ASSUMED_IO_B_S
        seconds += inputs_bytes / ASSUMED_IO_B_S
        cpus = os.cpu_count() or 1
        at_once = f"{o['concurrency']} at a time" + (f" sharing this host's {cpus} CPU{'s' if cpus > 1 else ''}"
                                                      if o["concurrency"] > cpus else "")
        return Estimate(seconds, f"{o['jobs']} jobs × {job_s:,.1f} s ({o['rows']:,} rows), {at_once}, the inputs and the "
                        f"throughput test at an assumed {ASSUMED_IO_B_S / 1e6:,.0f} MB/s"
                        + (f"; the jobs and the throughput test {times} times each" if times > 1 else ""), space)

    def _locations(self, ctx) -> dict[str, Path]:
        return {name: (Path(path) if path else ctx.work_dir / name.lower()).resolve()
                for name, (_, path) in _placed_locations(ctx.plan).items()}

    def prepare(self, ctx) -> None:
        o = ctx.options
        locations = self._locations(ctx)
        note_directory_targets(ctx)
        # Every place refbench writes in DATA, WORK and UTIL (a location it creates: the whole of it) goes with the
        # run's work data; what else a location holds stays.
        jobs = launcher.schedule([all_tests()[name] for name in o["tests"]], o["jobs"])
        ctx.claim(*(locations["DATA"] / f for name in inputs.FILES for f in (name, f"{name}.partial")),
                  locations["DATA"] / inputs.MARKER, *(locations[n] / job.id for n in ("WORK", "UTIL") for job in jobs),
                  *(path / "iotest" for path in locations.values()))
        for name, path in locations.items():
            writable_directory(path, f"the {name} location")
        with ctx.task(f"inputs for {o['rows']:,} rows in {locations['DATA']}", total=None):
            ctx.state["inputs"] = inputs.ensure(locations["DATA"], o["rows"], os.cpu_count() or 1, ctx.log)
        ctx.state["locations"] = locations

    def measure(self, ctx, case: Case) -> Record:
        if "locations" not in case.params:  # the workload, or a repeat of it ("workload-r2")
            return self._workload(ctx)
        return self._iotest(ctx, case)

    def _workload(self, ctx) -> Record:
        o = ctx.options
        locations = ctx.state["locations"]
        tests = [all_tests()[name] for name in o["tests"]]
        jobs = launcher.schedule(tests, o["jobs"])
        spec = {"rows": o["rows"], "memory_mb": o["job_memory_mb"], "seed": o["seed"], "fsync": o["fsync"],
                "evict_inputs": o["evict_inputs"]}
        with ctx.task(f"{len(jobs)} jobs, {o['concurrency']} at a time", total=len(jobs)) as task:
            def ended(job: dict[str, Any]) -> None:
                task.advance()
                if job["status"] != "ok":
                    ctx.log(f"job {job['job']} failed: {job['error']}")

            def live(running: list[str], ended_count: int) -> None:
                shown = ", ".join(running[:3]) + (f" and {len(running) - 3} more" if len(running) > 3 else "")
                ctx.live(f"{len(running)} job(s) running{': ' + shown if running else ''}; {ended_count} of {len(jobs)} ended")

            seen = launcher.run(jobs, o["concurrency"], locations, spec, o["threads"], ctx.raw_dir("workload") / "jobs", ended,
                                live)
        ctx.telemetry.wait_for_sample_after(seen["ended_epoch_s"])
        devices = {name: device_of(path) for name, path in locations.items()}
        series = self._storage_series(ctx, devices, seen["started_epoch_s"], seen["ended_epoch_s"])
        done = [j for j in seen["jobs"] if j["status"] == "ok"]  # a failed job's partial times would mislead
        metrics = {
            "jobs": len(seen["jobs"]), "jobs_failed": sum(j["status"] != "ok" for j in seen["jobs"]), "wall_s": seen["wall_s"],
            "mean_cpu_real_ratio": mean_of(done, "cpu_real_ratio"),
            "elapsed_min_sum": minutes_of(done, "real_s"), "user_cpu_min_sum": minutes_of(done, "user_cpu_s"),
            "system_cpu_min_sum": minutes_of(done, "system_cpu_s"),
            "avg_concurrent_jobs": round(sum(j["real_s"] for j in seen["jobs"]) / seen["wall_s"], 2),
            "read_gb_sum": round(sum(j["read_mb"] for j in done) / 1000, 3),
            "written_gb_sum": round(sum(j["written_mb"] for j in done) / 1000, 3),
            "peak_mb_s": max((p["mb_s"] for p in series), default=None) if any(devices.values()) else None,
            "peak_iops": max((p["iops"] for p in series), default=None) if any(devices.values()) else None,
        }
        audit = [c for c in ctx.run.meta.get("audit", [])
                 if c["setting"] in TUNING_SETTINGS or any(f"({d})" in c["setting"] for d in set(devices.values()) if d)]
        extra = {
            "jobs": seen["jobs"], "timeline": seen["timeline"], "storage_series": series,
            "interval_epoch_s": [seen["started_epoch_s"], seen["ended_epoch_s"]],
            "locations": {name: {"path": str(path), "device": devices[name], "peak_space_mb": seen["peak_space_mb"][name]}
                          for name, path in locations.items()},
            "inputs": ctx.state["inputs"], "tuning": audit, "target_description": ctx.state.get("target_description"),
            "tests": {t.name: {"kind": t.kind, "engine": t.engine, "models": t.models, "why": t.why, "reads": list(t.reads),
                               "writes": list(t.writes), "threaded": t.threaded} for t in tests},
        }
        return Record(metrics, method=(
            f"{len(jobs)} jobs of {len(tests)} tests, each its own process, launched back to back so that "
            f"{o['concurrency']} run at once; threaded tests use {o['threads']} threads, DuckDB jobs {o['job_memory_mb']} MB "
            f"before spilling to UTIL; inputs: {o['rows']:,} generated rows in DATA"
            f"{', dropped from the page cache as each job starts' if o['evict_inputs'] else ''}"
            f"{'; outputs flushed to storage as each job ends' if o['fsync'] else ''}. Real time from launch to exit; user and "
            "system CPU from wait4's rusage; bytes read and written from /proc/PID/io (read_bytes; write_bytes − "
            "cancelled_write_bytes), read after exit and before reaping. CPU/real-time ratio = (user + system) / real, "
            "averaged over jobs as the mixed-analytics paper's 'frequency mean'. Throughput and IOPS: /proc/diskstats, once a second, "
            "summed over the locations' devices."), extra=extra)

    def _storage_series(self, ctx, devices: dict[str, str | None], t0: float, t1: float) -> list[dict[str, Any]]:
        names = sorted({d for d in devices.values() if d})
        series = []
        for sample in ctx.telemetry.between(t0, t1):
            disks = [sample["disks"][n] for n in names if n in sample["disks"]]
            series.append({
                "t_s": round(sample["t"] - t0, 1),
                "read_mb_s": round(sum(d["read_mb_s"] for d in disks), 2),
                "write_mb_s": round(sum(d["write_mb_s"] for d in disks), 2),
                "mb_s": round(sum(d["read_mb_s"] + d["write_mb_s"] for d in disks), 2),
                "iops": round(sum(d["r_iops"] + d["w_iops"] for d in disks), 1),
            })
        return series

    def _iotest(self, ctx, case: Case) -> Record:
        from refbench.suites.analytics import iotest  # here, not above: every job imports this package

        o = ctx.options
        label = case.params["locations"]
        directory = ctx.state["locations"][label.split("+")[0]] / "iotest"
        cores = o["cores"] or ctx.run.meta.get("inventory", {}).get("cpu", {}).get("cores") or os.cpu_count() or 1
        memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        file_mib = o["iotest_file_mib"] or -(-2 * memory // (cores * 2**20))
        with ctx.task(f"storage throughput test on {label}: {cores} writers × {file_mib:,} MiB", total=None):
            seen = iotest.run(directory, cores, file_mib, memory, ctx.raw_dir(case), o["iotest_zero_buffers"])
        if seen["warning"]:
            ctx.log(f"throughput test on {label}: {seen['warning']}")
        metrics = {k: seen[k] for k in ("write_mb_s", "read_mb_s", "write_mb_s_per_core", "read_mb_s_per_core",
                                        "read_from_device_pct")}
        return Record(metrics, method=(
            f"rhel_iotest method with fio: {cores} writers (one per physical core), each writing a {file_mib:,} MiB file "
            f"of {'zeros' if o['iotest_zero_buffers'] else 'incompressible data'} in 64 KiB blocks (psync) and fsyncing it, then all reading their files back at once (fio invalidate=1 "
            "drops them from the page cache first). MB/s per core = the total / writers; SAS's guidance is 100–150."),
            extra={**seen, "locations": label, "write_verdict": iotest.verdict(seen["write_mb_s_per_core"]),
                   "read_verdict": iotest.verdict(seen["read_mb_s_per_core"])})

    def check(self, ctx) -> list[Finding]:
        findings = []
        for r in ctx.run.records(self.name):
            if strip_repeat(r.case_id) != "workload":  # its repeats too ("workload-r2")
                continue
            jobs = r.extra["jobs"]
            failed = [j for j in jobs if j["status"] != "ok"]
            findings.append(Finding("every job completed", not failed,
                                    "; ".join(f"{j['job']}: {j['error']}" for j in failed) or f"{len(jobs)} jobs"))
            wrong = [f"{j['job']}: {c['check']} ({c['detail']})" for j in jobs for c in j["checks"] if not c["passed"]]
            checked = sum(len(j["checks"]) for j in jobs)
            findings.append(Finding("every job's answers are right", not wrong and checked > 0,
                                    "; ".join(wrong) or f"{checked} checks in {len(jobs) - len(failed)} jobs"))
        return findings


def _placed_locations(plan: Plan) -> dict[str, tuple[str, str]]:
    """DATA, WORK and UTIL as the plan places them: name -> (the storage it is on, its directory; "" for the run's
    work directory). From --data-dir, --work-dir and --util-dir, or from the targets: one holds all three, three
    are one each."""
    o = plan.options["analytics"]
    given = {name: o[f"{name.lower()}_dir"] for name in LOCATIONS}
    if not plan.targets:
        return {name: (str(Path(path).resolve()) if path else "", path) for name, path in given.items()}
    if any(given.values()):
        options = ", ".join(f"{name.lower()}_dir" for name, path in given.items() if path)
        raise PlanError(f"[analytics] targets and {options} both say where the data goes; give one of them.")
    if len(plan.targets) == 1:
        base = plan.targets[0]
        return {name: (str(Path(base).resolve()), str(Path(base) / name.lower())) for name in LOCATIONS}
    if len(plan.targets) == 3:
        return {name: (str(Path(path).resolve()), path) for name, path in zip(LOCATIONS, plan.targets)}
    raise PlanError(f"[analytics] takes one target directory (DATA, WORK and UTIL in it) or three (DATA, WORK, UTIL), "
                    f"not {len(plan.targets)}.")


def _location_groups(plan: Plan) -> list[str]:
    """DATA, WORK and UTIL grouped by the storage they are on, e.g. ["DATA+WORK+UTIL"] when they share one."""
    groups: dict[str, list[str]] = {}
    for name, (storage, _) in _placed_locations(plan).items():
        groups.setdefault(storage, []).append(name)
    return ["+".join(names) for names in groups.values()]


def all_tests() -> dict[str, AnalyticsTest]:
    """The nineteen tests, each registered when its module (numpy and engines with it) is imported."""
    from refbench.suites.analytics import computation_tests, io_tests, memory_tests  # noqa: F401  (they register)

    assert set(TESTS) == set(TEST_NAMES), "a test is registered but not listed in TEST_NAMES, or the other way round"
    return {name: TESTS[name] for name in TEST_NAMES}
