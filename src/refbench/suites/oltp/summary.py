"""The OLTP suite's tables and charts: the OLTP orders-per-minute paper's throughput and latency by load level, throughput over time."""

from __future__ import annotations

from typing import Any

from refbench.suites import Chart, Headline, Record, Table, is_figure
from refbench.suites.oltp.driver import TX


# suites.SuiteBase.figures
FIGURES = ("users", "nopm", "tpm")


def summarize(records: list[Record]) -> list[Table]:
    if not records:
        return []
    records = sorted(records, key=lambda r: r.metrics["users"])
    scaling = [{
        "users": r.metrics["users"], "measured": _times(r), "NOPM": r.metrics["nopm"], "TPM": r.metrics["tpm"],
        "New-Order avg ms": r.metrics["new_order_lat_avg_ms"], "New-Order p99 ms": r.metrics["new_order_lat_p99_ms"],
        "New-Order p99.9 ms": r.metrics["new_order_lat_p999_ms"], "driver CPU share %": r.metrics["driver_cpu_share_pct"],
        "errors": r.metrics["errors"],
    } for r in records]
    latency = [{
        "users": r.metrics["users"], "transaction": tx, "count": r.metrics[f"{tx}_count"],
        "mix %": r.metrics[f"{tx}_mix_pct"], **{f"{k} ms": r.metrics[f"{tx}_lat_{k}_ms"] for k in ("avg", "p50", "p95", "p99", "p999", "max")},
    } for r in records for tx in TX]
    series = [{"case": r.case_id, "users": r.metrics["users"], **point} for r in records for point in r.extra.get("series", [])]
    load = records[0].extra.get("load", {})
    load_rows = [{"table": name, "rows (estimate)": t["rows_estimate"], "size MB": round(t["bytes"] / 1e6, 1)}
                 for name, t in sorted(load.get("tables", {}).items())]
    settings = [{"setting": k, "value": v} for k, v in sorted(records[0].extra.get("settings", {}).items())]
    load_note = (f"{load.get('warehouses')} warehouse(s): reused an existing load" if load.get("reused") else
                 f"{load.get('warehouses')} warehouse(s), {load.get('rows', 0):,} rows loaded with COPY in "
                 f"{load.get('load_s')} s, keys, indexes, vacuum and checkpoint in {load.get('index_s')} s")
    return [
        Table("scaling", "Throughput and New-Order latency by load level", scaling,
              note="NOPM: New-Orders per minute from the schema (Σ D_NEXT_O_ID). TPM: database transactions per minute.",
              overview=True),
        Table("latency", "Latency per transaction type", latency, note="Measured interval only; HDR histograms."),
        Table("series", "Throughput and latency over time", series,
              note="10-second buckets (1-second when a case is shorter than a minute); t_s: where a bucket starts, in "
                   "seconds from the start of the measurement (ramp-up is negative).",
              report_columns=[]),
        Table("load", "Schema size", load_rows, note=f"{load_note}; total {load.get('total_bytes', 0) / 1e6:,.1f} MB on disk."),
        Table("settings", f"{records[0].extra.get('settings', {}).get('engine', 'PostgreSQL')} settings", settings, note=f"Database: {records[0].extra.get('database')}."),
    ]


def _times(r: Record) -> str:
    """How many times the level was measured: its figures are the median repeat's (refbench.suites.repeats)."""
    n = r.extra.get("repeats", {}).get("n", 1)
    return "once" if n == 1 else f"{n}×, median"


def charts(tables: list[Table]) -> list[Chart]:
    by = {t.name: t.rows for t in tables}
    scaling = by.get("scaling", [])
    if not scaling:
        return []
    out = [
        Chart("throughput_by_users", "Throughput by load level", "virtual users", "per minute",
              {"NOPM": [(r["users"], r["NOPM"]) for r in scaling], "TPM": [(r["users"], r["TPM"]) for r in scaling]}),
        Chart("latency_by_users", "New-Order latency by load level", "virtual users", "ms",
              {"average": [(r["users"], r["New-Order avg ms"]) for r in scaling],
               "p99.9": [(r["users"], r["New-Order p99.9 ms"]) for r in scaling]}),
    ]
    series: dict[str, list[tuple[Any, float]]] = {}
    for point in by.get("series", []):
        label = f"{point['users']} user{'s' if point['users'] > 1 else ''} ({point['case']})"
        series.setdefault(label, []).append((point["t_s"] + point["seconds"] / 2, point["new_orders_per_min"]))
    if series:
        out.append(Chart("throughput_over_time", "New-Orders per minute over time (ramp-up included)",
                         "seconds from the start of the measurement (ramp-up < 0)", "New-Orders per minute", series))
    return out


def headlines(records: list[Record], tables: list[Table]) -> list[Headline]:
    """NOPM and TPM at the user count that gave the most New-Orders, with its New-Order p99. A level measured
    several times comes here as its median repeat (refbench.suites.repeats)."""
    if not records:
        return []
    best = max(records, key=lambda r: r.metrics["nopm"])
    m = best.metrics
    users = f"{m['users']:,} user{'s' if m['users'] > 1 else ''}"
    p99_ms = m.get("new_order_lat_p99_ms")
    p99 = f"New-Order p99 {p99_ms:,.1f} ms" if is_figure(p99_ms) else "New-Order p99 — (no New-Order in the window)"
    return [Headline(f"NOPM at the best load level ({users})", m["nopm"], "NOPM", best.case_id, "nopm", p99, f"NOPM, {users}"),
            Headline(f"TPM at the best load level ({users})", m["tpm"], "TPM", best.case_id, "tpm", figure=f"TPM, {users}")]
