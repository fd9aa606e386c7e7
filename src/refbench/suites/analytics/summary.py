"""The mixed analytics workload's tables and charts: the mixed analytics paper's per-node table (Tables 1 and 2), per-job
figures, throughput and IOPS over time with the peak (its Graph 1), the storage throughput test and the host
tuning that matters for this workload."""

from __future__ import annotations

from typing import Any

from refbench.suites import Chart, Headline, Record, Table

RATIO_NOTE = ("Over the jobs that completed (a failed job's times are in the per-job table only). "
              "CPU/real-time ratio: (user + system CPU) / real time. Below 1 the CPU is waiting on resources, "
              "usually I/O; above 1, threaded procedures use more CPU than wall-clock time (the mixed analytics paper: 1.04–1.05). "
              "The node's value is the mean over its jobs, as the mixed analytics paper's 'frequency mean'.")


# suites.SuiteBase.figures
FIGURES = ("mean_cpu_real_ratio", "write_mb_s", "read_mb_s", "write_mb_s_per_core", "read_mb_s_per_core")


def mean_of(jobs: list[dict[str, Any]], key: str) -> float | None:
    values = [j[key] for j in jobs if j.get(key) is not None]
    return round(sum(values) / len(values), 3) if values else None


def minutes_of(jobs: list[dict[str, Any]], key: str) -> float:
    return round(sum(j[key] for j in jobs) / 60, 2)


def summarize(records: list[Record]) -> list[Table]:
    workloads = sorted((r for r in records if r.case_id == "workload"), key=lambda r: r.host)
    iotests = [r for r in records if r.case_id.startswith("iotest")]
    tables = []
    if workloads:
        tables += _workload_tables(workloads)
    if iotests:
        tables.append(Table("iotest", "Storage throughput test (MB/s per physical core)", [{
            "node": r.host, "locations": r.extra["locations"], "directory": r.extra["directory"],
            "device": r.extra["device"] or "none", "writers": r.extra["writers"], "file MiB": r.extra["file_mib"],
            "write MB/s": r.metrics["write_mb_s"], "write MB/s per core": r.metrics["write_mb_s_per_core"],
            "write": r.extra["write_verdict"], "read MB/s": r.metrics["read_mb_s"],
            "read MB/s per core": r.metrics["read_mb_s_per_core"], "read": r.extra["read_verdict"],
            "read from device %": r.metrics["read_from_device_pct"], "warning": r.extra["warning"] or "none",
        } for r in iotests], note="The rhel_iotest method: one writer per physical core, 64 KiB blocks, fsync, then "
                                  "concurrent read-back. SAS's guidance: 100–150 MB/s of sustained throughput per core."))
    if workloads:
        tuning = workloads[0].extra.get("tuning", [])
        tables.append(Table("tuning", "Host tuning for this workload (the mixed analytics paper's tuned profile)", [{
            "setting": c["setting"], "current": c["current"], "recommended": c["recommended"], "status": c["status"],
            "why": c["why"], "fix": c["fix"]} for c in tuning],
            note="From the host audit (refbench host): the settings the mixed analytics paper's sas-performance profile changes, and the "
                 "queue settings of the devices under DATA, WORK and UTIL.",
            report_columns=[]))  # the report has the whole audit once, in its host section
    return tables


def _workload_tables(workloads: list[Record]) -> list[Table]:
    nodes = [{
        "node": r.host, "mean CPU/real-time ratio": r.metrics["mean_cpu_real_ratio"] and round(r.metrics["mean_cpu_real_ratio"], 2),
        "elapsed run time (min, workload aggregate)": r.metrics["elapsed_min_sum"],
        "user CPU time (min, workload aggregate)": r.metrics["user_cpu_min_sum"],
        "system CPU time (min, workload aggregate)": r.metrics["system_cpu_min_sum"],
        "jobs": r.metrics["jobs"], "failed": r.metrics["jobs_failed"], "wall time (min)": round(r.metrics["wall_s"] / 60, 2),
        "average concurrent jobs": r.metrics["avg_concurrent_jobs"], "read GB": r.metrics["read_gb_sum"],
        "written GB": r.metrics["written_gb_sum"], "peak MB/s": r.metrics["peak_mb_s"], "peak IOPS": r.metrics["peak_iops"],
    } for r in workloads]
    jobs = [{"node": r.host, **{k: v for k, v in j.items() if k != "checks"},
             "checks passed": f"{sum(c['passed'] for c in j['checks'])}/{len(j['checks'])}"}
            for r in workloads for j in r.extra["jobs"]]
    kinds = []
    for r in workloads:
        for kind in ("computation", "memory", "io"):
            ran = [j for j in r.extra["jobs"] if j["kind"] == kind and j["status"] == "ok"]
            if ran:
                kinds.append({
                    "node": r.host, "kind": kind, "jobs": len(ran), "mean CPU/real-time ratio": mean_of(ran, "cpu_real_ratio"),
                    "elapsed min": minutes_of(ran, "real_s"), "user CPU min": minutes_of(ran, "user_cpu_s"),
                    "system CPU min": minutes_of(ran, "system_cpu_s"),
                    "read GB": round(sum(j["read_mb"] for j in ran) / 1000, 3),
                    "written GB": round(sum(j["written_mb"] for j in ran) / 1000, 3)})
    tests = [{"test": name, "kind": t["kind"], "stands for": t["models"], "engine": t["engine"],
              "threaded": "yes" if t["threaded"] else "no", "reads": "+".join(t["reads"]) or "generated data",
              "writes": "+".join(t["writes"]) or "nothing", "why this engine": t["why"]}
             for name, t in workloads[0].extra["tests"].items()]
    locations = [{"node": r.host, "location": name, "path": loc["path"], "device": loc["device"] or "none",
                  "peak space used MB": loc["peak_space_mb"]}
                 for r in workloads for name, loc in r.extra["locations"].items()]
    storage = [{"node": r.host, **p} for r in workloads for p in r.extra["storage_series"]]
    concurrency = [{"node": r.host, "t_s": t, "jobs running": n} for r in workloads for t, n in r.extra["timeline"]]
    inputs = workloads[0].extra["inputs"]
    return [
        Table("nodes", "Per node: CPU/real-time ratio and workload aggregates (the mixed analytics paper, Tables 1 and 2)", nodes,
              note=RATIO_NOTE + " Elapsed, user and system minutes are summed over the node's jobs. Peaks are per second "
                                "over the devices under DATA, WORK and UTIL.", overview=True),
        Table("kinds", "By kind of test", kinds),
        Table("jobs", "Per job", jobs, note="Real time from launch to exit; CPU from the kernel's rusage; read/written: "
                                            "bytes the job moved to and from storage (/proc/PID/io read_bytes and write_bytes "
                                            "− cancelled_write_bytes); read/write calls: bytes through read() and write().",
              report_columns=["node", "job", "kind", "status", "real_s", "user_cpu_s", "system_cpu_s", "cpu_real_ratio",
                              "read_mb", "written_mb", "max_rss_mb", "checks passed", "error"]),
        Table("tests", "The tests", tests, note=f"Inputs: {inputs['rows']:,} rows, {sum(inputs['files'].values()) / 1e9:.2f} GB "
                                                 f"in DATA ({'reused' if inputs.get('reused') else 'generated for this run'})."),
        Table("locations", "File-system locations", locations, note="Peak space: the most the running jobs held at once "
                                                                    "(sampled twice a second); DATA: its inputs."),
        Table("storage", "Throughput and IOPS over time", storage, report_columns=[]),
        Table("concurrency", "Jobs running over time", concurrency, report_columns=[]),
    ]


def charts(tables: list[Table]) -> list[Chart]:
    by = {t.name: t.rows for t in tables}
    out = []
    storage = by.get("storage", [])
    if storage:
        multi = len({p["node"] for p in storage}) > 1
        series: dict[str, list[tuple[Any, float]]] = {}
        iops: dict[str, list[tuple[Any, float]]] = {}
        for p in storage:
            prefix = f"{p['node']} " if multi else ""
            series.setdefault(f"{prefix}read", []).append((p["t_s"], p["read_mb_s"]))
            series.setdefault(f"{prefix}write", []).append((p["t_s"], p["write_mb_s"]))
            iops.setdefault(f"{prefix}IOPS", []).append((p["t_s"], p["iops"]))
        peak = max(p["mb_s"] for p in storage)
        out.append(Chart("throughput", f"Throughput over time (peak {peak:,.0f} MB/s)", "seconds from the first job's launch",
                         "MB/s", series, note="DATA, WORK and UTIL devices, once a second (the mixed analytics paper's Graph 1)."))
        out.append(Chart("iops", f"IOPS over time (peak {max(p['iops'] for p in storage):,.0f})",
                         "seconds from the first job's launch", "IOPS", iops))
    if by.get("concurrency"):
        running: dict[str, list[tuple[Any, float]]] = {}
        for p in by["concurrency"]:
            running.setdefault(p["node"], []).append((p["t_s"], p["jobs running"]))
        out.append(Chart("concurrency", "Jobs running", "seconds from the first job's launch", "jobs", running))
    if by.get("jobs"):
        ratios: dict[str, list[float]] = {}
        for j in by["jobs"]:
            ratios.setdefault(j["test"], []).append(j["cpu_real_ratio"])
        out.append(Chart("cpu_ratio_by_test", "CPU/real-time ratio by test", "test", "(user + system) / real",
                         {"mean over replicas": [(t, round(sum(v) / len(v), 2)) for t, v in ratios.items()]}, kind="bar",
                         note="Below 1: waiting on I/O or other resources; above 1: threaded."))
    if by.get("iotest"):
        out.append(Chart("iotest", "Storage throughput test: MB/s per physical core", "locations", "MB/s per core",
                         {"write": [(r["locations"], r["write MB/s per core"]) for r in by["iotest"]],
                          "read": [(r["locations"], r["read MB/s per core"]) for r in by["iotest"]]}, kind="bar",
                         note="SAS's guidance: 100–150 MB/s per core."))
    return out


def headlines(records: list[Record], tables: list[Table]) -> list[Headline]:
    """The storage throughput test's MB/s per core (write, read) per location set, and the workload's mean
    CPU/real-time ratio."""
    out = []
    for r in (r for r in records if r.case_id.startswith("iotest")):
        where = f" ({r.extra['locations']})"
        for side in ("write", "read"):
            out.append(Headline(f"{side} MB/s per core{where}", r.metrics[f"{side}_mb_s_per_core"], "MB/s per core",
                                r.case_id, f"{side}_mb_s_per_core", r.extra[f"{side}_verdict"],
                                of=r.extra["locations"].lower().replace("+", "-")))
    for r in (r for r in records if r.case_id == "workload"):
        if r.metrics.get("mean_cpu_real_ratio") is not None:
            out.append(Headline("CPU/real-time ratio (mean over the jobs)", r.metrics["mean_cpu_real_ratio"], "", r.case_id,
                                "mean_cpu_real_ratio", f"{r.metrics['jobs'] - r.metrics['jobs_failed']} of {r.metrics['jobs']} jobs, "
                                f"{r.metrics['avg_concurrent_jobs']:g} at a time", figure="CPU/real-time ratio, job mean"))
    return out
