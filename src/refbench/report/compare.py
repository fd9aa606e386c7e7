"""Two runs side by side: every figure they share, with the ratio and which way is better."""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

from refbench.fileio import atomic_write_text
from refbench.report import html as h
from refbench.runstore import Run

# Throughput-like names (higher is better) are tested first, because "read_mb_s" also ends in "_s".
HIGHER_IS_BETTER = re.compile(r"(_per_(s|min|h)|_mb_s|_mib_s|_gb_s|_b_s|iops|nopm|tpm|qph|throughput|rate)", re.I)
LOWER_IS_BETTER = re.compile(r"(lat|latency|await|elapsed|duration|_s$|_ms$|_us$|_ns$|_min$)", re.I)
# Durations a run chose rather than achieved (how long a point ran or was measured, when steady state came),
# and CPU seconds over a fixed interval (less is not better when less work was done).
NEUTRAL = re.compile(r"(runtime|measured|cpu_s$|_at_s$|_pct$)", re.I)
SAME_WITHIN = 0.01


def direction(metric: str) -> int:
    """+1 when a higher value is better, -1 when lower is better, 0 when neither (percentages, counts)."""
    if NEUTRAL.search(metric):
        return 0
    if HIGHER_IS_BETTER.search(metric):
        return 1
    if LOWER_IS_BETTER.search(metric):
        return -1
    return 0


def verdict(metric: str, a: float, b: float) -> tuple[float | None, str]:
    """(B relative to A, words). The factor is how many times better (or worse) B is than A."""
    if a == 0 or b == 0:
        return None, "—"
    sense = direction(metric)
    ratio = b / a
    if sense == 0:
        return ratio, f"{ratio:.2f}× A"
    better = ratio if sense > 0 else 1 / ratio
    if abs(better - 1) < SAME_WITHIN:
        return better, "same"
    return better, f"{better:.2f}× faster" if better > 1 else f"{1 / better:.2f}× slower"


def figures(run: Run) -> dict[tuple[str, str], dict[str, Any]]:
    """(suite, case) -> metrics. A cluster run's figures are its totals across nodes, one case per node count
    ("u4-r1@2n": the case on 2 nodes)."""
    if not run.plan.hosts:
        return {(r.suite, r.case_id): r.metrics for r in run.records()}
    from refbench.cluster.summary import tables

    totals = next(t for t in tables(run) if t.name == "cluster_totals")
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for t in totals.rows:
        out.setdefault((t["suite"], f"{t['case']}@{t['nodes']}n"), {})[t["figure"]] = t["total (sum or mean)"]
    return out


def shared_figures(a: Run, b: Run) -> list[dict[str, Any]]:
    a_figures = figures(a)
    rows = []
    for (suite, case), metrics_b in figures(b).items():
        metrics_a = a_figures.get((suite, case))
        if metrics_a is None:
            continue
        for metric, vb in metrics_b.items():
            va = metrics_a.get(metric)
            if not _is_number(va) or not _is_number(vb):
                continue
            factor, words = verdict(metric, va, vb)
            rows.append({"suite": suite, "case": case, "metric": metric, "A": va, "B": vb, "factor": factor, "B vs A": words})
    return rows


def overall(rows: list[dict[str, Any]], minimum_cases: int = 3) -> list[dict[str, Any]]:
    """The paper's overall ratio: for each figure with a better direction, the geometric mean of its factors over
    the cases of one group (the first part of the case id: an engine, a target), e.g. cold_s over 22 queries."""
    groups: dict[tuple[str, str, str], list[float]] = {}
    for r in rows:
        if r["factor"] is not None and direction(r["metric"]) != 0:
            groups.setdefault((r["suite"], r["case"].split("-")[0], r["metric"]), []).append(r["factor"])
    out = []
    for (suite, group, metric), factors in sorted(groups.items()):
        if len(factors) >= minimum_cases:
            mean = math.exp(sum(math.log(f) for f in factors) / len(factors))
            words = "same" if abs(mean - 1) < SAME_WITHIN else f"{mean:.2f}× faster" if mean > 1 else f"{1 / mean:.2f}× slower"
            out.append({"suite": suite, "group": group, "metric": metric, "cases": len(factors),
                        "geometric mean factor": round(mean, 3), "B vs A": words})
    return out


def configuration_rows(a: Run, b: Run) -> list[dict[str, Any]]:
    """The host and plan facts that tell two configurations apart."""

    def facts(run: Run) -> dict[str, Any]:
        meta = run.meta
        inv = meta.get("inventory", {})
        cpu, mem, system = inv.get("cpu", {}), inv.get("memory", {}), inv.get("system", {})
        return {
            "run": run.path.name, "host": meta.get("host"), "CPU": cpu.get("model"),
            "cores / threads": f"{cpu.get('cores')} / {cpu.get('threads')}", "memory GiB": mem.get("total_gib"),
            "kernel": system.get("kernel"), "profile": meta["plan"].get("profile"),
            "targets": ", ".join(meta["plan"].get("targets", [])) or "—",
            **{f"{k} version": v for k, v in (meta.get("tools") or {}).items()},
        }

    fa, fb = facts(a), facts(b)
    return [{"fact": k, "A": fa.get(k), "B": fb.get(k), "differs": "yes" if fa.get(k) != fb.get(k) else ""} for k in dict.fromkeys([*fa, *fb])]


def write_html(a: Run, b: Run, rows: list[dict[str, Any]], out: Path) -> Path:
    body = [
        f"<h1>refbench comparison</h1><p class='sub'>A = {h.esc(a.path.name)} · B = {h.esc(b.path.name)}</p>",
        "<p class='note'>“faster” means better in the figure's own sense: higher throughput or lower latency/time. "
        "The factor is how many times better B is than A; figures without a better direction (percentages) show B/A.</p>",
        "<h2>Configurations</h2>", h.table(configuration_rows(a, b)),
        *(["<h2>Overall</h2><p class='note'>Geometric mean of each figure's factor over the cases of a group "
           "(an engine's 22 queries, a target's sweep points).</p>", h.table(overall(rows))] if overall(rows) else []),
        f"<h2>Shared figures ({len(rows)})</h2>",
        h.table(rows, max_rows=5000) if rows else "<p class='note'>The two runs share no figures (no case measured in both).</p>",
    ]
    atomic_write_text(out, h.page(f"refbench compare {a.path.name} vs {b.path.name}", "".join(body)))
    return out


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)
