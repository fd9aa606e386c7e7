"""The device suite's tables and charts, shaped like the SSD characterization paper's: one summary per access mode (rows block
size, columns queue depth), IOPS and MB/s charts per access mode with a line per queue depth, and — beyond
the paper — latency-vs-IOPS curves per block size."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from refbench.suites import Chart, Headline, Record, Table
from refbench.suites.device.sweep import AccessMode, size_label

LATENCY_NOTE = "p99 completion latency of reads (of writes for 100% write modes)"


# suites.SuiteBase.figures
FIGURES = ("iops", "mb_s")


def _point_row(r: Record) -> dict[str, Any]:
    p, m = r.params, r.metrics
    mode = AccessMode(p["pattern"], p["write_pct"])
    row = {"target": p["target"], "target_path": r.extra.get("target_path"), "access_mode": mode.title, "mode_id": mode.id,
           "iodepth": p["iodepth"], "bs_bytes": p["bs"], "block_size": size_label(p["bs"])}
    for key in ("iops", "mb_s", "read_iops", "read_mb_s", "write_iops", "write_mb_s",
                "read_lat_mean_us", "read_lat_p50_us", "read_lat_p99_us", "read_lat_p999_us",
                "write_lat_mean_us", "write_lat_p50_us", "write_lat_p99_us", "write_lat_p999_us",
                "fio_usr_cpu_pct", "fio_sys_cpu_pct", "host_cpu_user_pct", "host_cpu_system_pct", "device_busy_pct",
                "runtime_s", "steady_state_reached", "steady_state_at_s", "steady_state_window_iops", "error"):
        row[key] = m.get(key)
    return row


def summarize(records: list[Record]) -> list[Table]:
    tables: list[Table] = []
    check_rows = [
        {"target": r.params["target"], "target_path": r.extra.get("target_path"), "check": r.params["check"],
         "result": "pass" if r.metrics.get("passed") else "FAIL", "detail": r.extra.get("detail", "")}
        for r in records if r.params.get("kind") == "check"
    ]
    if check_rows:
        tables.append(Table("checks", "Compatibility checks (the SSD characterization paper's HCTS sequence)", check_rows,
                            report_columns=[]))  # the report has them once, as the suite's correctness checks
    pre_rows = [
        {"target": r.params["target"], "phase": "128 KiB sequential write" if r.params["phase"] == "seq" else "4 KiB random write",
         **{k: v for k, v in r.metrics.items()}, "elapsed_wall_s": round(r.elapsed_s, 1)}
        for r in records if r.params.get("kind") == "precondition"
    ]
    if pre_rows:
        tables.append(Table("preconditioning", "Preconditioning", pre_rows,
                            note="Workload-independent (full sequential passes) then workload-dependent (random writes until steady state)."))
    points = [_point_row(r) for r in records if r.params.get("kind") == "point"]
    if not points:
        return tables
    by_mode: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for row in points:
        by_mode[(row["target"], row["mode_id"])].append(row)
    for (target, mode_id), rows in by_mode.items():
        depths = sorted({r["iodepth"] for r in rows})
        cells = {(r["bs_bytes"], r["iodepth"]): r for r in rows}
        summary = []
        for bs in sorted({r["bs_bytes"] for r in rows}):
            line: dict[str, Any] = {"block_size": size_label(bs), "bs_bytes": bs}
            for qd in depths:
                cell = cells.get((bs, qd))
                line[f"QD{qd} IOPS"] = cell["iops"] if cell else None
                line[f"QD{qd} MB/s"] = cell["mb_s"] if cell else None
            summary.append(line)
        tables.append(Table(f"{target}_{mode_id.replace('-', '_')}",
                            f"{target} — {rows[0]['access_mode']}: IOPS and MB/s by block size and queue depth",
                            summary, note=f"Target {target}: {rows[0]['target_path']}. Rows: block size. "
                                          "Columns: queue depth per worker. MB/s = 10^6 bytes/s."))
    reached = sum(bool(r["steady_state_reached"]) for r in points)
    tables.append(Table("points", "Every point", points,
                        note=f"Steady state reached at {reached} of {len(points)} points. Latencies are completion latencies in µs.",
                        report_columns=["target", "access_mode", "iodepth", "block_size", "iops", "mb_s", "read_lat_p99_us",
                                        "write_lat_p99_us", "device_busy_pct", "host_cpu_user_pct", "host_cpu_system_pct",
                                        "steady_state_reached", "steady_state_at_s", "error"]))
    return tables


def charts(tables: list[Table]) -> list[Chart]:
    points = next((t.rows for t in tables if t.name == "points"), [])
    points = [r for r in points if r.get("iops") is not None]
    out: list[Chart] = []
    targets = list(dict.fromkeys(r["target"] for r in points))
    # Every point is grouped once (target → mode → queue depth or block size), so the charts cost what the points do.
    by_target: dict[str, dict[str, list[dict[str, Any]]]] = defaultdict(lambda: defaultdict(list))
    for r in sorted(points, key=lambda r: (r["bs_bytes"], r["iodepth"])):
        by_target[r["target"]][r["mode_id"]].append(r)
    for target in targets:
        modes = by_target[target]
        by_bs: dict[int, dict[str, list[dict[str, Any]]]] = defaultdict(lambda: defaultdict(list))
        for mode_id, rows in modes.items():
            title = rows[0]["access_mode"]
            by_qd: dict[int, list[dict[str, Any]]] = defaultdict(list)
            for r in rows:
                by_qd[r["iodepth"]].append(r)
                by_bs[r["bs_bytes"]][mode_id].append(r)
            for metric, label in (("iops", "IOPS"), ("mb_s", "MB/s")):
                series = {f"QD{qd}": [(r["block_size"], r[metric]) for r in by_qd[qd]] for qd in sorted(by_qd)}
                out.append(Chart(f"{target}_{mode_id}_{metric}", f"{target}: {label}, {title}", "block size", label, series))
        for bs in sorted(by_bs):
            series = {}
            for mode_id, rows in by_bs[bs].items():
                lat_key = "write_lat_p99_us" if mode_id.endswith("-w100") else "read_lat_p99_us"
                pts = [(r["iops"], r[lat_key]) for r in rows if r[lat_key] is not None]
                if pts:
                    series[rows[0]["access_mode"]] = pts
            if series:
                out.append(Chart(f"{target}_latency_vs_iops_bs{bs}", f"{target}: latency vs IOPS, {size_label(bs)} blocks "
                                 "(points: rising queue depth)", "IOPS", f"{LATENCY_NOTE} (µs)", series, logy=True))
    if len(targets) > 1:
        for mode_id in dict.fromkeys(r["mode_id"] for r in points):
            rows = [r for r in points if r["mode_id"] == mode_id]
            deepest = max(r["iodepth"] for r in rows)
            series = {
                f"{t} ({next(r['target_path'] for r in rows if r['target'] == t)})":
                    [(r["block_size"], r["iops"]) for r in sorted(rows, key=lambda r: r["bs_bytes"]) if r["target"] == t and r["iodepth"] == deepest]
                for t in targets
            }
            out.append(Chart(f"targets_{mode_id}_iops", f"Targets side by side: IOPS, {rows[0]['access_mode']}, QD{deepest}",
                             "block size", "IOPS", series))
    return out


def headlines(records: list[Record], tables: list[Table]) -> list[Headline]:
    """Per target, the peak IOPS of the random points and the peak MB/s of the sequential ones, each with the
    p99 latency it came at."""
    points = [r for r in records if r.params.get("kind") == "point" and r.metrics.get("iops")]
    targets = list(dict.fromkeys(r.params["target"] for r in points))
    out = []
    for target in targets:
        prefix = f"{target}: " if len(targets) > 1 else ""
        mine = [r for r in points if r.params["target"] == target]
        for pattern, metric, unit in (("random", "iops", "IOPS"), ("sequential", "mb_s", "MB/s")):
            if candidates := [r for r in mine if r.params["pattern"] == pattern]:
                best = max(candidates, key=lambda r: r.metrics[metric])
                p = best.params
                mode = AccessMode(p["pattern"], p["write_pct"]).title
                point = f"{unit}, {mode}, {size_label(p['bs'])}, QD {p['iodepth']}"
                out.append(Headline(f"{prefix}peak {point}", best.metrics[metric], unit, best.case_id, metric, _p99(best),
                                    figure=prefix + point, of=target if len(targets) > 1 else ""))
    return out


def _p99(r: Record) -> str:
    side = "write" if r.params["write_pct"] == 100 else "read"
    p99 = r.metrics.get(f"{side}_lat_p99_us")
    return "" if p99 is None else f"{side} p99 {p99:,.0f} µs"
