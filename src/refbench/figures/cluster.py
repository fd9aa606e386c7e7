"""A cluster run's figures from its nodes' runs: each node's figures, their total and their uniformity across the
nodes, per step, and each node's checks; what the cluster report (summary.py) and compare read. Which figures, and
whether they add up, each suite says in its ``node_figures`` (metric -> "sum" or "mean")."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from refbench.errors import UserError
from refbench.runstore import Run
from refbench.suites import Finding, Table, get_suite


def node_dir(run: Run, step: int, node: str) -> Path:
    return run.path / "nodes" / f"{step}-nodes" / node


def node_figures_of(suite: str) -> dict[str, str]:
    try:
        return getattr(get_suite(suite), "node_figures", {})
    except UserError:
        return {}  # a suite only the workers know: its figures stay in the nodes' own reports


def steps_of(run: Run) -> dict[int, dict[str, dict[str, Any]]]:
    return {int(step): nodes for step, nodes in run.meta.get("cluster", {}).get("steps", {}).items()}


def node_runs(run: Run) -> dict[tuple[int, str], Run]:
    out = {}
    for step, nodes in steps_of(run).items():
        for node in nodes:
            path = node_dir(run, step, node)
            if (path / "run.json").is_file():
                out[(step, node)] = Run(path)
    return out


def tables(run: Run) -> list[Table]:
    steps, runs = steps_of(run), node_runs(run)
    nodes = []
    for step, ns in steps.items():
        first = min((o["started_epoch_s"] for o in ns.values() if o.get("started_epoch_s")), default=None)
        nodes += [{"nodes": step, "node": node, "host": o.get("host"), "status": o["status"], "error": o.get("error") or "",
                   "address": o.get("address"),
                   "started after the first node (s)": round(o["started_epoch_s"] - first, 3) if o.get("started_epoch_s") else None,
                   "ran (s)": round(o["ended_epoch_s"] - o["started_epoch_s"], 1) if o.get("ended_epoch_s") else None}
                  for node, o in ns.items()]
    figures: list[dict[str, Any]] = []
    for (step, node), node_run in runs.items():
        for r in node_run.records():
            wanted = node_figures_of(r.suite)
            for figure, how in wanted.items():
                value = r.metrics.get(figure)
                if isinstance(value, (int, float)) and not isinstance(value, bool):
                    figures.append({"nodes": step, "suite": r.suite, "case": r.case_id, "figure": figure, "how": how,
                                    "node": node, "host": r.host, "value": value})
    groups: dict[tuple, list[dict[str, Any]]] = {}
    for f in figures:
        groups.setdefault((f["nodes"], f["suite"], f["case"], f["figure"], f["how"]), []).append(f)
    totals = []
    for (step, suite, case, figure, how), rows in groups.items():
        values = [r["value"] for r in rows]
        mean = sum(values) / len(values)
        totals.append({"nodes": step, "suite": suite, "case": case, "figure": figure,
                       "total (sum or mean)": round(sum(values) if how == "sum" else mean, 3), "how": how,
                       "nodes reporting": len(values), "min": min(values), "max": max(values),
                       "spread %": round(100 * (max(values) - min(values)) / mean, 1) if mean else None})
    return [
        Table("cluster_nodes", "Nodes per step", nodes,
              note="Started: when each node began the plan, after the start barrier; each then prepares its own data "
                   "(generation, database load) before it measures, so later phases align only as closely as those do."),
        Table("cluster_totals", "Totals and uniformity across nodes", totals,
              note="Total: the sum over nodes for figures that add up (throughput), the mean for the rest (latency, "
                   "ratios). Uniformity: min and max over the nodes, spread = (max − min) / mean."),
        Table("cluster_figures", "Per-node figures", figures, report_columns=["nodes", "suite", "case", "figure", "node",
                                                                              "host", "value"]),
    ]


def findings(run: Run) -> list[tuple[str, Finding]]:
    """(where, finding): each node's own correctness checks, and one per node saying whether it completed."""
    out = []
    runs = node_runs(run)
    for step, nodes in steps_of(run).items():
        for node, o in nodes.items():
            where = f"{step} node(s) / {node}"
            out.append((where, Finding("the node completed", o["status"] == "ok", o.get("error") or o.get("host") or "")))
            if (step, node) in runs:
                for suite, fs in runs[(step, node)].findings().items():
                    out += [(f"{where} / {suite}", f) for f in fs]
    return out


def verdicts(run: Run) -> list[dict[str, Any]]:
    """The cluster run's verdict, as a single-host run's verdict.json holds one: per step (the most nodes first) and
    suite, the headline figures of the step's nodes in total (their sum, or mean, as the suite's node_figures say,
    for the case the first node's headline names: the same figure the comparison and the catalog read), then each
    node's own verdict. Entries carry a ``scope``: "total, 2 node(s)" or "node1, 2 node(s)"."""
    runs, steps = node_runs(run), steps_of(run)
    totals = {(t["nodes"], t["suite"], t["case"], t["figure"]): t for t in tables(run)[1].rows}
    total, each = [], []
    for step in sorted(steps, reverse=True):
        by_suite: dict[str, list[tuple[str, dict[str, Any]]]] = {}
        for node, outcome in sorted(steps[step].items()):
            node_run = runs.get((step, node))
            for v in (node_run.verdicts()) if node_run else []:
                by_suite.setdefault(v["suite"], []).append((node, v))
                each.append({**v, "scope": f"{node}, {step} node(s)"})
        incomplete = sum(o["status"] != "ok" for o in steps[step].values())
        for suite, entries in by_suite.items():
            headlines = []
            for h in entries[0][1]["headlines"]:
                t = totals.get((step, suite, h["case"], h["metric"]))
                if t is None:
                    continue  # a figure that does not add up over nodes (the suite's node_figures do not name it)
                how = "total over" if t["how"] == "sum" else "mean over"
                headlines.append({**h, "label": f"{h['label']}, {how} {step} node(s)", "value": t["total (sum or mean)"],
                                  "case": f"{h['case']}@{step}n", "figure": f"{h.get('figure') or h['label']} @ {step} node{'s' if step > 1 else ''}",
                                  "spread": 0.0, "note": f"{t['nodes reporting']} node(s) reporting, spread across them "
                                                         f"{t['spread %']}%"})
            passed = sum(v["checks_passed"] for _, v in entries)
            failed = sum(v["checks_failed"] for _, v in entries) + incomplete
            checks = passed + failed
            total.append({"suite": suite, "scope": f"total, {step} node(s)", "headlines": headlines,
                          "checks_passed": passed, "checks_failed": failed,
                          "correctness": (f"{failed} of {checks} checks FAILED" if failed else f"all {checks} checks passed")
                          + (f" ({incomplete} node(s) did not complete)" if incomplete else ""),
                          "bottleneck": _per_node(entries), "engines": []})
    return total + each


def _per_node(entries: list[tuple[str, dict[str, Any]]]) -> str:
    """The nodes' bottlenecks, each phrase once with the nodes it limited: "every node: CPU (99%), storage idle"."""
    nodes_of: dict[str, list[str]] = {}
    for node, v in entries:
        nodes_of.setdefault(v["bottleneck"], []).append(node)
    if len(nodes_of) == 1:
        return f"every node: {next(iter(nodes_of))}"
    return "; ".join(f"{', '.join(nodes)}: {phrase}" for phrase, nodes in nodes_of.items())
