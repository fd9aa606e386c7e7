"""The DSS suite's tables and charts, shaped like the DSS paper's: per-query cold and warm times (long- and short-
running queries apart), the single stream's and the parallel streams' elapsed times, and the sizing figures."""

from __future__ import annotations

import math
import re
import statistics
from typing import Any

from refbench.suites import Chart, Headline, Record, Table


# suites.SuiteBase.figures
FIGURES = ("power", "throughput", "elapsed_s", "streams", "cold_s", "warm_s")


def summarize(records: list[Record]) -> list[Table]:
    if not records:
        return []
    by_mode: dict[str, list[Record]] = {}
    for r in records:
        by_mode.setdefault(r.params["mode"], []).append(r)
    tables = []
    individual = sorted(by_mode.get("individual", []), key=lambda r: (r.params["engine"], r.params["query"]))
    if individual:
        tables.append(Table("individual", "Individual queries, cold and warm", [{
            "engine": r.params["engine"], "query": f"Q{r.params['query']}", "cold s": r.metrics["cold_s"],
            "warm s": r.metrics["warm_s"], "cold/warm": round(r.metrics["cold_s"] / r.metrics["warm_s"], 2) if r.metrics["warm_s"] else None,
            "timed out": r.metrics.get("timed_out"),
            "cold read MB/s": r.metrics.get("cold_read_mb_s"), "cold CPU %": r.metrics.get("cold_cpu_pct"),
            "warm CPU %": r.metrics.get("warm_cpu_pct"), "rows": r.metrics["rows"],
        } for r in individual], note="Validation parameters (stream 0). Read MB/s: the data's device during the query; "
                                     "CPU %: the whole host. A query that reads at high MB/s with CPU to spare is "
                                     "storage-bound. Timed out: cancelled at the query timeout, its time is the limit "
                                     "(a lower bound), and a query timed out cold is not run warm." + _checked(records)))
    figures = {engine: _engine(records, engine) for engine in sorted({r.params["engine"] for r in records})}
    for r in by_mode.get("power", []):
        f = figures.setdefault(r.params["engine"], {})
        f |= {"power": r.metrics["power"], "power stream s": r.metrics["elapsed_s"],
              "query time geometric mean s": _query_mean_s(r.metrics), "power timed out": r.metrics.get("timed_out")}
        f |= {f"power {k.replace('_mb', ' MB')}": r.metrics[k] for k in ("temp_mb", "wal_mb") if k in r.metrics}
    for r in by_mode.get("throughput", []):
        f = figures.setdefault(r.params["engine"], {})
        f |= {"throughput": r.metrics["throughput"], "streams": r.metrics["streams"], "parallel streams s": r.metrics["elapsed_s"],
              "throughput timed out": r.metrics.get("timed_out")}
        f |= {f"throughput {k.replace('_mb', ' MB')}": r.metrics[k] for k in ("temp_mb", "wal_mb") if k in r.metrics}
    if figures:
        rows = []
        for engine, f in sorted(figures.items()):
            combined = math.sqrt(f["power"] * f["throughput"]) if "power" in f and "throughput" in f else None
            incomplete = bool(f.get("power timed out") or f.get("throughput timed out"))
            rows.append({"engine": engine, **f, "power × throughput (geometric mean)": round(combined, 1) if combined else None,
                         "complete": "no: queries timed out" if incomplete else "yes"})
        tables.append(Table("figures", "Engines compared: load, power, throughput and their combination", rows,
                            note="One row per engine run. load s: the bulk load with its indexes and statistics (empty when "
                                 "the run reused an earlier run's load). data MB: tables and indexes on disk. Power and throughput are "
                                 "derived from TPC-H 5.4 at the run's scale factor; not comparable with audited "
                                 "TPC-H results (never QphH). query time geometric mean s: of the power stream's 22 "
                                 "queries. hit ratio %: the share of the pages the engine asked for that its own buffer "
                                 "cache held, over its measured cases (DuckDB counts none). temp MB and wal MB: what "
                                 "the engine wrote to temporary files and to its log during the test (the paper's "
                                 "tempdb and log sizing; MariaDB counts no temporary bytes). A figure with queries "
                                 "that timed out is incomplete: those queries count as long as the limit, so it is "
                                 "an upper bound." + _checked(records)))
    power = [{"engine": r.params["engine"], "step": k[:-2], "seconds": v, "read MB/s": r.metrics.get(f"{k[:-2]}_read_mb_s"),
              "CPU %": r.metrics.get(f"{k[:-2]}_cpu_pct"),
              "timed out": k[:-2] in r.metrics.get("timed_out", "").split(", ")}
             for r in by_mode.get("power", []) for k, v in r.metrics.items()
             if k.endswith("_s") and k != "elapsed_s" and not k.endswith("_mb_s")]
    if power:
        tables.append(Table("power_steps", "Power stream: each step", power, note="Stream 0's order: RF1, the 22 queries, RF2."))
    load = []
    for r in records:
        l = r.extra.get("load", {})
        sizes = l.get("sizes", {})
        for table, rows in sorted(l.get("rows", {}).items()):
            entry = {"engine": r.params["engine"], "table": table, "rows": rows,
                     "table MB": round(sizes.get("tables_bytes", {}).get(table, 0) / 1e6, 1)}
            if "indexes_bytes" in sizes:
                entry["index MB"] = round(sizes["indexes_bytes"].get(table, 0) / 1e6, 1)
            if entry not in load:
                load.append(entry)
    if load:
        notes = []
        for engine in sorted({r.params["engine"] for r in records}):
            l = next(r.extra["load"] for r in records if r.params["engine"] == engine)
            data = next(r.extra["data"] for r in records if r.params["engine"] == engine)
            raw = sum(data.get("bytes", {}).values())
            notes.append(f"{engine}: " + ("reused an earlier load" if l.get("reused") else f"loaded in {l.get('load_s')} s")
                         + (f" + {l['index_s']} s for keys, indexes and VACUUM" if "index_s" in l and not l.get("reused") else "")
                         + f", {l['sizes']['database_bytes'] / 1e6:,.0f} MB on disk "
                         f"({l['sizes']['database_bytes'] / raw:.2f}× the {raw / 1e6:,.0f} MB of generated CSV)")
        tables.append(Table("load", "Load and on-disk footprint", load, note="; ".join(notes) + "."))
    settings = []
    for engine in sorted({r.params["engine"] for r in records}):
        l = next(r.extra["load"] for r in records if r.params["engine"] == engine)
        settings += [{"engine": engine, "setting": k, "value": v} for k, v in sorted(l.get("settings", {}).items())]
    if settings:
        tables.append(Table("settings", "Engine settings", settings))
    return tables


# The columns of the engines' comparison in the verdict (the figures table has them all, and more).
COMPARED = ("engine", "kind", "load s", "data MB", "power", "throughput", "query time geometric mean s", "hit ratio %")


def engines_compared(tables: list[Table]) -> list[dict[str, Any]]:
    rows = next((t.rows for t in tables if t.name == "figures"), [])
    return [{k: r.get(k) for k in COMPARED} for r in rows]


def _engine(records: list[Record], engine: str) -> dict[str, Any]:
    """What every mode of a run shows of one engine: its kind, its load, its size and its buffer cache's hit ratio."""
    mine = [r for r in records if r.params["engine"] == engine]
    load = mine[0].extra.get("load", {})
    load_s = None if load.get("reused") or "load_s" not in load else round(load["load_s"] + load.get("index_s", 0), 2)
    hits = sum((r.extra.get("storage") or {}).get("blocks_hit") or 0 for r in mine)
    misses = sum((r.extra.get("storage") or {}).get("blocks_read") or 0 for r in mine)
    size = load.get("sizes", {}).get("database_bytes")
    return {"kind": load.get("kind"), "load s": load_s,
            "data MB": round(size / 1e6, 1) if size else None,
            "hit ratio %": round(100 * hits / (hits + misses), 2) if hits + misses else None}


def _query_mean_s(metrics: dict[str, Any]) -> float | None:
    """The geometric mean of a power stream's query times (the refresh functions left out)."""
    times = [v for k, v in metrics.items() if re.fullmatch(r"Q\d+_s", k) and v]
    return float(f"{math.exp(statistics.fmean(map(math.log, times))):.3g}") if times else None


def _checked(records: list[Record]) -> str:
    checks = sorted({r.extra["answer_check"] for r in records if r.extra.get("answer_check")})
    return f" Answers checked by: {'; '.join(checks)}." if checks else ""


def charts(tables: list[Table]) -> list[Chart]:
    by = {t.name: t.rows for t in tables}
    out = []
    individual = by.get("individual", [])
    for engine in sorted({r["engine"] for r in individual}):
        rows = [r for r in individual if r["engine"] == engine]
        # The paper splits long- and short-running queries so that the short ones stay readable.
        threshold = statistics.median(r["cold s"] for r in rows)
        for part, keep in (("long", lambda r: r["cold s"] > threshold), ("short", lambda r: r["cold s"] <= threshold)):
            chosen = [r for r in rows if keep(r)]
            if chosen:
                out.append(Chart(f"{engine}_{part}_queries", f"{engine}: {part}-running queries, cold and warm "
                                 f"({'above' if part == 'long' else 'at or below'} the median cold time, {threshold:.3g} s)",
                                 "query", "seconds", {"cold": [(r["query"], r["cold s"]) for r in chosen],
                                                      "warm": [(r["query"], r["warm s"] or 0) for r in chosen]}, kind="bar"))
    figures = by.get("figures", [])
    if any("power stream s" in f for f in figures):
        out.append(Chart("single_stream", "Single query stream (power test), elapsed", "engine", "seconds",
                         {"power stream": [(f["engine"], f["power stream s"]) for f in figures if "power stream s" in f]},
                         kind="bar"))
    if any("parallel streams s" in f for f in figures):
        out.append(Chart("parallel_streams", "Parallel query streams (throughput test), elapsed", "engine", "seconds",
                         {"elapsed": [(f"{f['engine']} ({f['streams']} streams)", f["parallel streams s"])
                                      for f in figures if "parallel streams s" in f]}, kind="bar"))
    return out


def _power_unrated(metrics: dict[str, Any]) -> str:
    """Why power cannot rate an engine at this scale: TPC-H counts every time under 0.1 s as 0.1 s, so when most of
    the 24 times are that short, power is the floor's figure (3600·SF / 0.1), the same for every engine."""
    times = [v for k, v in metrics.items() if re.fullmatch(r"(Q\d+|RF[12])_s", k) and isinstance(v, (int, float))]
    floored = sum(1 for t in times if round(t, 1) <= 0.1)
    if times and floored * 2 > len(times):
        return f"{floored} of {len(times)} times under TPC-H's 0.1 s floor; a larger --sf rates it"
    return ""


def headlines(records: list[Record], tables: list[Table]) -> list[Headline]:
    """Per engine, the power figure (with the geometric mean of the power stream's 22 query times it comes from)
    and the throughput figure."""
    out = []
    for r in sorted((r for r in records if r.params["mode"] in ("power", "throughput")),
                    key=lambda r: (r.params["engine"], r.params["mode"])):
        engine, m = r.params["engine"], r.metrics
        if r.params["mode"] == "power":
            mean = f"geometric mean of the query times {_query_mean_s(m):,.3g} s" if _query_mean_s(m) else ""
            out.append(Headline(f"{engine}: power", m["power"], "queries/h × SF", r.case_id, "power", mean, of=engine,
                                unrated=_power_unrated(m)))
        else:
            out.append(Headline(f"{engine}: throughput", m["throughput"], "queries/h × SF", r.case_id, "throughput",
                                f"{m['streams']} streams", of=engine))
    return out
