"""The DW rating's tables and its rating sheet (an HTML table in the report), laid out like the DWFT rating paper's
certification table."""

from __future__ import annotations

import math
from typing import Any

from refbench.suites import Chart, Headline, Record, Table
from refbench.suites.dw.capacity import CapacityRules, shown_tb

NA = "N/A"  # on the sheet; the tables keep None, which their Parquet and CSV files need
STORES_NOTE = ("Queries/h/TB: queries completed in the interval per hour × raw data in TB. I/O throughput: the average "
               "of the physical and logical scan rates, as the DWFT rating paper defines it; N/A where the engine has no "
               "logical-read counter (DuckDB, as the DWFT rating paper's column store).")


# Row stores first, as the paper lists them; PostgreSQL first among them (the rating's scan rate is the first row
# store's).
ORDER = ("postgres", "mariadb", "duckdb")


# suites.SuiteBase.figures
FIGURES = ("queries_per_hour_per_tb", "queries_per_hour")


def _in_order(records: list[Record]) -> list[Record]:
    return sorted(records, key=lambda r: (r.extra["store"] != "row store", ORDER.index(r.params["engine"])
                                          if r.params["engine"] in ORDER else len(ORDER), r.params["engine"]))


def _fmt(value: Any, digits: int = 0) -> Any:
    return None if value is None else round(value, digits) if digits else round(value)


def summarize(records: list[Record]) -> list[Table]:
    if not records:
        return []
    ordered = _in_order(records)
    stores = []
    relative: dict[str, Any] = {}
    for r in ordered:
        engine = r.params["engine"]
        ref = r.extra.get("reference")
        rel = (round(100 * r.metrics["queries_per_hour_per_tb"] / ref["queries_per_hour_per_tb"])
               if ref and ref["queries_per_hour_per_tb"] else None)
        relative[engine] = rel
        stores.append({
            "store": r.extra["store"], "engine": engine, "relative throughput %": _fmt(rel),
            "measured throughput (queries/h/TB)": r.metrics["queries_per_hour_per_tb"],
            "queries/h": r.metrics["queries_per_hour"],
            "measured scan rate physical (MB/s)": _fmt(r.metrics["physical_scan_mb_s"], 1),
            "measured scan rate logical (MB/s)": _fmt(r.metrics["logical_scan_mb_s"], 1),
            "measured I/O throughput (MB/s)": _fmt(r.metrics["io_throughput_mb_s"], 1),
            "measured CPU (avg.) %": _fmt(r.metrics["cpu_avg_pct"], 1),
        })
    first = records[0]
    inputs = first.extra["capacity_inputs"]
    rules = CapacityRules(**inputs["rules"])
    row_store = next((r for r in ordered if r.extra["store"] == "row store"), None)
    column_store = next((r for r in ordered if r.extra["store"] == "column store"), None)
    scan = (row_store or first).metrics["physical_scan_mb_s"]
    rating = rules.rate(inputs["data_volume_gb"], scan, inputs["memory_gb"])
    reference = next((r.extra["reference"]["run"] for r in records if r.extra.get("reference")), None)
    primary = [{
        "rated user data capacity (TB)": shown_tb(rating["rated_tb"]),
        "row store relative throughput %": _fmt(relative.get(row_store.params["engine"])) if row_store else None,
        "column store relative throughput %": _fmt(relative.get(column_store.params["engine"])) if column_store else None,
        "maximum user data capacity (TB)": shown_tb(rating["limits_tb"]["maximum user data capacity"]),
        "rating decided by": rating["decided_by"],
    }]
    limits = [{"limit": name, "TB": tb, "rule": _rule(name, rules, inputs, scan), "decides": "yes" if name == rating["decided_by"] else ""}
              for name, tb in rating["limits_tb"].items()]
    facts = dict(first.extra.get("system", {}))
    facts["database"] = "; ".join(f"{r.extra['store']}: {r.params['engine']} {r.extra['system']['database']}"
                                  for r in records if r.extra.get("system"))
    system = [{"item": k, "value": v} for k, v in facts.items()]
    tables = [
        Table("primary", "Primary metrics", primary,
              note=f"Relative throughput against {reference}." if reference else
                   "Relative throughput: N/A — name a reference run with --reference.", report_columns=[]),
        Table("stores", "Row store and column store", stores, note=STORES_NOTE, report_columns=[]),
        Table("capacity", "Capacity rules and limits", limits,
              note=f"Data volume {inputs['data_volume_gb']:,} GB ({inputs['volume_from']}); memory {inputs['memory_gb']} GB "
                   f"({inputs['memory_from']}). Rated capacity = the smallest limit."),
        Table("system", "System", system, report_columns=[]),
    ]
    return [_rating_sheet(tables)] + tables


def engines_compared(tables: list[Table]) -> list[dict[str, Any]]:
    """Each store's rated figures, engine first."""
    rows = next((t.rows for t in tables if t.name == "stores"), [])
    return [{"engine": r["engine"], **{k: v for k, v in r.items() if k != "engine"}} for r in rows]


def _rating_sheet(tables: list[Table]) -> Table:
    """The system, the primary metrics and each store's figures in one table of sections, like the certification
    table; the report shows it in place of the three tables it gathers."""
    by = {t.name: t.rows for t in tables}
    sections: list[tuple[str, list[tuple[str, Any]]]] = [
        ("System", [(r["item"], r["value"]) for r in by["system"]]),
        ("Primary metrics", list(by["primary"][0].items())),
        *((f"{store['store'].title()} ({store['engine']})", [(k, v) for k, v in store.items() if k not in ("store", "engine")])
          for store in by["stores"]),
    ]
    from refbench.formats import fmt  # one number format: the sheet's values are text, as on the paper's sheet

    notes = {t.name: t.note for t in tables}
    return Table("rating_sheet", "refbench data-warehouse rating sheet",
                 [{"section": section, "item": item, "value": NA if value is None else fmt(value)}
                  for section, lines in sections for item, value in lines], note=f"{notes['primary']} {STORES_NOTE}")

def _rule(name: str, rules: CapacityRules, inputs: dict[str, Any], scan: float | None) -> str:
    if name == "maximum user data capacity":
        return (f"{inputs['data_volume_gb']:,} GB × (1 − {rules.free_space_pct:g}% free space) × (1 − "
                f"{rules.temp_reserve_pct:g}% temp reserve) × {rules.compression:g}:1 compression (the DWFT rating paper's defaults)")
    if name == "throughput limit":
        return (f"a full scan within {rules.scan_hours:g} h at the row store's {scan:,.0f} MB/s physical scan rate, "
                f"× {rules.compression:g}:1 compression (refbench's rule)")
    return f"{inputs['memory_gb']} GB memory / {rules.memory_gb_per_tb:g} GB per TB (refbench's rule, from the DWFT rating paper's 512 GB for 36 TB)"


def charts(tables: list[Table]) -> list[Chart]:
    return []  # the rating sheet is a table (text people can read, copy and search), not a picture of one


EXTRAPOLATES_AT_MOST = 100  # refbench's rule: a rating stands for at most 100 times the data it measured


def _rating_unrated(records: list[Record], rated_tb: float) -> str:
    """Why the rating cannot stand: it would stand for more than EXTRAPOLATES_AT_MOST times the data measured (SF
    GB of raw data), as a quick run's SF 0.1 rating most of a TB would."""
    sf = next((r.extra["sf"] for r in records if "sf" in r.extra), None)
    if sf is None or sf * EXTRAPOLATES_AT_MOST >= rated_tb * 1000:
        return ""
    needed = rated_tb * 1000 / EXTRAPOLATES_AT_MOST
    return (f"SF {sf:g}, {sf:g} GB of data, would rate {rated_tb:g} TB, more than {EXTRAPOLATES_AT_MOST} times what it "
            f"measured; rate with --sf {math.ceil(needed):g} or more")


def headlines(records: list[Record], tables: list[Table]) -> list[Headline]:
    """The rated capacity (derived from every record) and each store's measured queries/h/TB."""
    primary = next((t.rows[0] for t in tables if t.name == "primary"), None)
    out = []
    if primary and primary["rated user data capacity (TB)"] is not None:
        rated = primary["rated user data capacity (TB)"]
        out.append(Headline("rated user data capacity", rated, "TB", "", "rated_tb",
                            f"decided by the {primary['rating decided by']}", unrated=_rating_unrated(records, rated)))
    for r in _in_order(records):
        out.append(Headline(f"{r.extra['store']} ({r.params['engine']}): throughput", r.metrics["queries_per_hour_per_tb"],
                            "queries/h/TB", r.case_id, "queries_per_hour_per_tb",
                            f"{r.metrics['queries_per_hour']:,.0f} queries/h", of=r.params["engine"]))
    return out
