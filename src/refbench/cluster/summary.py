"""A cluster run's own tables, charts and report: each node's figures, their total, their uniformity (min, max
and spread across nodes, as the mixed-analytics paper's Table 2 shows per node) and the scaling series over the steps (the OLTP
paper's orders per minute by node count). Which figures, and whether they add up, each suite says in its
``node_figures`` (metric -> "sum" or "mean"); a suite that says nothing is listed per node only in its own
node reports."""

from __future__ import annotations

from typing import Any

from refbench.figures.cluster import findings, node_figures_of, node_runs, tables, verdicts
from refbench.fileio import atomic_write_text
from refbench.report import UNITS_NOTE, write_table
from refbench.report import html as h
from refbench.report.charts import render_figure
from refbench.runstore import Run
from refbench.suites import Chart, Table

MAX_SERIES = 8


def charts(tables_: list[Table]) -> list[Chart]:
    by = {t.name: t.rows for t in tables_}
    out = []
    totals = by.get("cluster_totals", [])
    for suite in dict.fromkeys(t["suite"] for t in totals):
        headline = next(iter(node_figures_of(suite)), None)
        rows = [t for t in totals if t["suite"] == suite and t["figure"] == headline]
        cases = list(dict.fromkeys(t["case"] for t in rows))[:MAX_SERIES]
        series = {case: sorted((t["nodes"], t["total (sum or mean)"]) for t in rows if t["case"] == case) for case in cases}
        if series:
            out.append(Chart(f"scaling_{suite}", f"{suite}: {headline} by node count", "nodes", headline, series,
                             note="Sum over the nodes" if rows[0]["how"] == "sum" else "Mean over the nodes"))
        largest = max(t["nodes"] for t in rows) if rows else 0
        per_node = [f for f in by.get("cluster_figures", []) if f["suite"] == suite and f["figure"] == headline
                    and f["nodes"] == largest and f["case"] in cases]
        if largest > 1 and per_node:
            bars: dict[str, list[tuple[Any, float]]] = {}
            for f in per_node:
                bars.setdefault(f["case"], []).append((f["node"], f["value"]))
            out.append(Chart(f"uniformity_{suite}", f"{suite}: {headline} per node ({largest} nodes)", "node", headline,
                             bars, kind="bar"))
    return out


def _transport(plan: dict[str, Any]) -> str:
    """Whether the ends of the cluster were authenticated and encrypted: a reader of the report must know."""
    if plan.get("tls_ca_file"):
        return ("Connections between the coordinator, the scheduler and the workers: TLS, every end's certificate "
                f"checked against the CA in {plan['tls_ca_file']}.")
    if plan.get("scheduler"):
        return ("Connections between the coordinator, the scheduler and the workers were without TLS: the plan and the "
                "results crossed the network unencrypted, and the ends were not authenticated. For a shared network give "
                "--tls-ca-file, --tls-cert and --tls-key.")
    return ("A local cluster on 127.0.0.1, with TLS and a certificate made for this run, which only refbench and its "
            "workers held: no other user of this host could connect to its scheduler.")


def _verdict_table(verdict: list[dict[str, Any]]) -> str:
    """The answer first, as on a single host's report: per step and suite the total, then each node."""
    def figures(v: dict[str, Any]) -> str:
        return "<br>".join(f"{h.esc(x['label'])}: " + (f'<span class="note">not rated at this size ({h.esc(x["unrated"])})</span>'
                                                       if x.get("unrated") else f"<b>{h.esc(h.fmt(x['value']))} {h.esc(x['unit'])}</b>")
                           for x in v["headlines"]) or "—"

    rows = "".join(f"<tr><td>{h.esc(v['suite'])}</td><td>{h.esc(v['scope'])}</td><td>{figures(v)}</td>"
                   f'<td data-label="Correctness checks">{h.esc(v["correctness"])}</td>'
                   f'<td data-label="Bottleneck">{h.esc(v["bottleneck"])}</td></tr>' for v in verdict)
    return h.scroll('<table class="verdict"><thead><tr><th>Suite</th><th>Scope</th><th>Headline figures</th>'
                    f"<th>Correctness checks</th><th>Bottleneck</th></tr></thead><tbody>{rows}</tbody></table>")


def build_cluster_report(run: Run) -> bool:
    """Writes the cluster run's tables, charts and report.html; returns True when every node and check passed."""
    meta = run.meta
    made = tables(run)
    for t in made:
        if t.rows:
            write_table(run.tables_dir / "cluster", t)
    rendered = [(c, render_figure(c, run.charts_dir / "cluster")) for c in charts(made)]
    checks = findings(run)
    passed, failed = sum(f.passed for _, f in checks), sum(not f.passed for _, f in checks)
    verdict = verdicts(run)
    run.write_verdicts(verdict)
    body = [f"<h1>refbench cluster report — {h.esc(meta['name'])}</h1>",
            f'<p class="sub">{h.esc(run.path.name)} · status <b>{h.esc(run.status())}</b> · scheduler '
            f"{h.esc(meta.get('cluster', {}).get('scheduler'))} · steps {h.esc(meta['plan'].get('hosts'))} · "
            f"{h.esc(meta.get('started_utc'))} → {h.esc(meta.get('ended_utc') or 'not finished')}</p>",
            h.banner(passed, failed), _verdict_table(verdict), f'<p class="note">{h.esc(_transport(meta["plan"]))}</p>',
            f'<p class="note">{UNITS_NOTE}</p>', "<h2>Correctness</h2>",
            h.table([{"where": w, "check": f.check, "result": "pass" if f.passed else "FAIL", "detail": f.detail}
                     for w, f in checks], classes={"result": "{value}"})]
    for t in made:
        body.append(f"<h2>{h.esc(t.title)}</h2>")
        if t.note:
            body.append(f'<p class="note">{h.esc(t.note)}</p>')
        body.append(h.table(t.rows, t.report_columns))
    if rendered:
        body.append('<div class="grid">' + "".join(h.chart(r, c.title) for c, r in rendered) + "</div>")
    links = [f'<li><a href="{h.esc(node_run.path.relative_to(run.path))}/report.html">{step} node(s): {h.esc(node)}</a></li>'
             for (step, node), node_run in node_runs(run).items()]
    body.append("<h2>Each node's own report</h2><ul>" + "".join(links) + "</ul>")
    atomic_write_text(run.report_path, h.page(f"refbench cluster — {meta['name']}", "".join(body)))
    return failed == 0
