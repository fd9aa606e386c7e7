"""The DW rating's tables and its one-page rating sheet, laid out like the DWFT rating paper's certification table."""

from __future__ import annotations

from typing import Any

from refbench.suites import Chart, Headline, Record, Table
from refbench.suites.dw.capacity import CapacityRules, shown_tb

NA = "N/A"  # on the sheet; the tables keep None, which their Parquet and CSV files need


def _fmt(value: Any, digits: int = 0) -> Any:
    return None if value is None else round(value, digits) if digits else round(value)


def summarize(records: list[Record]) -> list[Table]:
    if not records:
        return []
    by_engine = {r.params["engine"]: r for r in records}
    stores = []
    relative: dict[str, Any] = {}
    for engine, r in sorted(by_engine.items(), key=lambda kv: kv[0] != "postgres"):  # row store first, as the paper
        ref = r.extra.get("reference")
        rel = (round(100 * r.metrics["queries_per_hour_per_tb"] / ref["queries_per_hour_per_tb"])
               if ref and ref["queries_per_hour_per_tb"] else None)
        relative[engine] = rel
        stores.append({
            "store": r.extra["store"], "engine": engine, "relative throughput %": _fmt(rel),
            "measured throughput (queries/hr/TB)": r.metrics["queries_per_hour_per_tb"],
            "queries/hr": r.metrics["queries_per_hour"],
            "measured scan rate physical (MB/s)": _fmt(r.metrics["physical_scan_mb_s"], 1),
            "measured scan rate logical (MB/s)": _fmt(r.metrics["logical_scan_mb_s"], 1),
            "measured I/O throughput (MB/s)": _fmt(r.metrics["io_throughput_mb_s"], 1),
            "measured CPU (avg.) %": _fmt(r.metrics["cpu_avg_pct"], 1),
        })
    first = records[0]
    inputs = first.extra["capacity_inputs"]
    rules = CapacityRules(**inputs["rules"])
    row_store = by_engine.get("postgres")
    scan = (row_store or first).metrics["physical_scan_mb_s"]
    rating = rules.rate(inputs["data_volume_gb"], scan, inputs["memory_gb"])
    reference = next((r.extra["reference"]["run"] for r in records if r.extra.get("reference")), None)
    primary = [{
        "rated user data capacity (TB)": shown_tb(rating["rated_tb"]),
        "row store relative throughput %": _fmt(relative.get("postgres")),
        "column store relative throughput %": _fmt(relative.get("duckdb")),
        "maximum user data capacity (TB)": shown_tb(rating["limits_tb"]["maximum user data capacity"]),
        "rating decided by": rating["decided_by"],
    }]
    limits = [{"limit": name, "TB": tb, "rule": _rule(name, rules, inputs, scan), "decides": "yes" if name == rating["decided_by"] else ""}
              for name, tb in rating["limits_tb"].items()]
    facts = dict(first.extra.get("system", {}))
    facts["database"] = "; ".join(f"{r.extra['store']}: {r.params['engine']} {r.extra['system']['database']}"
                                  for r in records if r.extra.get("system"))
    system = [{"item": k, "value": v} for k, v in facts.items()]
    return [
        Table("primary", "Primary metrics", primary,
              note=f"Relative throughput against {reference}." if reference else
                   "Relative throughput: N/A — name a reference run with --reference."),
        Table("stores", "Row store and column store", stores,
              note="Queries/hr/TB: queries completed in the interval per hour × raw data in TB. I/O throughput: the "
                   "average of the physical and logical scan rates, as the DWFT rating paper defines it; N/A where the engine has "
                   "no logical-read counter (DuckDB, as the DWFT rating paper's column store)."),
        Table("capacity", "Capacity rules and limits", limits,
              note=f"Data volume {inputs['data_volume_gb']:,} GB ({inputs['volume_from']}); memory {inputs['memory_gb']} GB "
                   f"({inputs['memory_from']}). Rated capacity = the smallest limit."),
        Table("system", "System", system),
    ]


def _rule(name: str, rules: CapacityRules, inputs: dict[str, Any], scan: float | None) -> str:
    if name == "maximum user data capacity":
        return (f"{inputs['data_volume_gb']:,} GB × (1 − {rules.free_space_pct:g}% free space) × (1 − "
                f"{rules.temp_reserve_pct:g}% temp reserve) × {rules.compression:g}:1 compression (the DWFT rating paper's defaults)")
    if name == "throughput limit":
        return (f"a full scan within {rules.scan_hours:g} h at the row store's {scan:,.0f} MB/s physical scan rate, "
                f"× {rules.compression:g}:1 compression (refbench's rule)")
    return f"{inputs['memory_gb']} GB memory / {rules.memory_gb_per_tb:g} GB per TB (refbench's rule, from the DWFT rating paper's 512 GB for 36 TB)"


def charts(tables: list[Table]) -> list[Chart]:
    by = {t.name: t.rows for t in tables}
    if "primary" not in by:
        return []
    sections: dict[str, list[tuple[str, Any]]] = {}
    sections["System"] = [(r["item"], r["value"]) for r in by.get("system", [])]
    sections["Primary metrics"] = [(k, NA if v is None else v) for k, v in by["primary"][0].items()]
    for store in by.get("stores", []):
        sections[f"{store['store'].title()} ({store['engine']})"] = [
            (k, NA if v is None else v) for k, v in store.items() if k not in ("store", "engine")]
    return [Chart("rating_sheet", "refbench data-warehouse rating sheet", "", "", sections, kind="sheet")]


def headlines(records: list[Record], tables: list[Table]) -> list[Headline]:
    """The rated capacity (derived from every record) and each store's measured queries/hr/TB."""
    primary = next((t.rows[0] for t in tables if t.name == "primary"), None)
    out = []
    if primary and primary["rated user data capacity (TB)"] is not None:
        out.append(Headline("rated user data capacity", primary["rated user data capacity (TB)"], "TB", "", "rated_tb",
                            f"decided by the {primary['rating decided by']}"))
    for r in sorted(records, key=lambda r: r.params["engine"] != "postgres"):
        out.append(Headline(f"{r.extra['store']} ({r.params['engine']}): throughput", r.metrics["queries_per_hour_per_tb"],
                            "queries/h/TB", r.case_id, "queries_per_hour_per_tb",
                            f"{r.metrics['queries_per_hour']:,.0f} queries/h"))
    return out
