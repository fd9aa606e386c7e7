"""The report: tables (Parquet + CSV), charts (PNG + SVG) and a self-contained report.html per run."""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console

from refbench.errors import UserError
from refbench.fileio import atomic_write_bytes, atomic_write_text
from refbench.formats import spreadsheet_text
from refbench.report import html as h, waits
from refbench.report.brief import figure_items, figure_with_rule, figures_rule, note_of
from refbench.report.why import limits_once, next_steps
from refbench.report.verdict import run_verdict
from refbench.suites.repeats import one_per_configuration
from refbench.runstore import Run, iso, utc_now
from refbench.suites import Chart, Record, Table, get_suite, storage

if TYPE_CHECKING:  # the report's heavy modules (matplotlib, pyarrow) load when a report is written, not with every command
    from refbench.report.charts import Rendered

UNITS_NOTE = (
    "Units: MB = 10<sup>6</sup> bytes and MB/s = 10<sup>6</sup> bytes per second (as storage vendors quote them); "
    "KiB/MiB/GiB = 2<sup>10</sup>/2<sup>20</sup>/2<sup>30</sup> bytes (block sizes, memory). Latencies in µs or ms as "
    "named; percentages are of the measurement interval. Every figure names its unit in its column."
)


def write_table(directory: Path, table: Table) -> None:
    """One table as Parquet and CSV (its text cells inert in a spreadsheet), each written atomically."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = table.rows
    sink = pa.BufferOutputStream()
    pq.write_table(pa.Table.from_pylist(rows), sink)
    atomic_write_bytes(directory / f"{table.name}.parquet", sink.getvalue().to_pybytes())
    text = io.StringIO()
    writer = csv.DictWriter(text, fieldnames=list(dict.fromkeys(k for r in rows for k in r)))
    writer.writeheader()
    writer.writerows({k: spreadsheet_text(v) for k, v in r.items()} for r in rows)
    atomic_write_text(directory / f"{table.name}.csv", text.getvalue())


def suite_outputs(run: Run, suite_name: str, console: Console | None = None) -> tuple[list[Table], list[tuple[Chart, Rendered]], list[Record]]:
    records = run.records(suite_name)
    try:
        suite = get_suite(suite_name)
    except UserError as exc:
        if console:
            console.print(f"[yellow]report: {exc} Its records are listed without its tables and charts.[/yellow]")
        return [], [], records
    records = one_per_configuration(records, suite)  # a case's repeats as its median one; compare reads them all
    tables = suite.summarize(records) if records else []
    charts = suite.charts(tables) if tables else []
    tables += waits.tables(records)
    charts += [c for r in records if (c := waits.profile_chart(r))]
    for t in tables:
        write_table(run.tables_dir / suite_name, t)
    charts = [c for c in charts if _worth_a_chart(c)]
    from refbench.report.charts import render_all

    charts = list(zip(charts, render_all(charts, run.charts_dir / suite_name)))
    return tables, charts, records


def _worth_a_chart(chart: Chart) -> bool:
    """Three points at least, on one line or in bars: two points (QD 1 and QD 16) read better as a table's row."""
    if chart.kind == "bar":
        return sum(len(points) for points in chart.series.values()) >= 3
    return max((len(points) for points in chart.series.values()), default=0) >= 3


def phases(run: Run, suites: list[str]) -> list[tuple[float, float, str]]:
    """When each suite ran, from its records' start and end times: suites run one after the other."""
    out = []
    for name in suites:
        records = [r for r in run.records(name) if r.started_epoch_s and r.ended_epoch_s]
        if records:
            out.append((min(r.started_epoch_s for r in records), max(r.ended_epoch_s for r in records), name))
    return out


def telemetry_outputs(run: Run, suites: list[str] = ()) -> list[tuple[Chart, Rendered]]:
    from refbench.report.charts import render_all
    from refbench.report.telemetry import telemetry_charts

    charts = telemetry_charts(run.telemetry_path, run.tables_dir, phases(run, list(suites)))
    return list(zip(charts, render_all(charts, run.charts_dir)))


def build_report(run: Run, console: Console | None = None) -> Path:
    meta = run.meta
    plan = meta["plan"]
    suites = list(dict.fromkeys(plan.get("suites", []) + run.suites_with_records()))
    findings = run.findings()
    passed = sum(f.passed for fs in findings.values() for f in fs)
    failed = sum(not f.passed for fs in findings.values() for f in fs)
    outputs = {name: suite_outputs(run, name, console) for name in suites}
    verdicts = {v.suite: v for v in run_verdict(run, {name: o[0] for name, o in outputs.items()})}
    said = [v.to_dict() for v in verdicts.values()]
    run.write_verdicts(said)
    common, rule = figures_rule(said)

    # The run's own last step writes the report while its status still says running: it has measured everything.
    status, ended = (("complete", iso(utc_now())) if run.status() == "running" and run.held_here
                     else (run.status(), meta.get("ended_utc") or "not finished"))
    summary = [
        f"<h1>refbench report — {h.esc(meta['name'])}</h1>",
        f'<p class="sub">{h.esc(run.path.name)} · status <b>{h.esc(status)}</b> · profile {h.esc(plan.get("profile"))} · '
        f"{h.esc(meta.get('started_utc'))} → {h.esc(ended)}</p>",
        f'<p class="hostline"><b>Host</b> {h.esc(host_line(meta))}</p>',
    ]
    if status != "complete":
        summary.append(f'<div class="banner failed">This run is {h.esc(status)}: the report shows the cases recorded so far. '
                       f"Continue it with <code>refbench resume {h.esc(run.path)}</code>.</div>")
    summary.append(h.banner(passed, failed))
    if verdicts:
        summary.append(_verdict_table(said, rule, common))
    summary.append(_acceptance(run.read_json(run.accept_path)))
    body = [f'<section class="summary" id="summary">{"".join(summary)}</section>']

    sections = [(f"suite-{name}", f"{name}: {_suite_summary(name)}", name) for name in suites]
    sections += [("host-activity", "Host activity during the run", None), ("host", "Host, devices and tuning audit", None),
                 ("plan", "Plan", None)]
    body.append('<nav class="toc"><b>Contents</b><ol>'
                + "".join(f'<li><a href="#{h.esc(anchor)}">{h.esc(title)}</a></li>' for anchor, title, _ in sections)
                + "</ol></nav>")
    for anchor, title, name in sections[:len(suites)]:
        body.append(_suite_section(name, anchor, title, outputs[name], run.records(name), findings.get(name, []),
                                   next((v for v in said if v["suite"] == name), None), common))
    tel_charts = telemetry_outputs(run, suites)
    body.append('<section id="host-activity"><h2>Host activity during the run</h2>')
    if tel_charts:
        body.append('<p class="note">Sampled once a second from /proc/stat and /proc/diskstats for the whole run; the shaded '
                    "spans are the suites, from their first case's start to their last case's end.</p>")
        body.append('<div class="grid">' + "".join(h.chart(r, c.title) for c, r in tel_charts) + "</div>")
    else:
        body.append('<p class="note">Too few telemetry samples for a chart: the run lasted under three seconds.</p>')
    body.append("</section>")
    body.append(_host_section(meta))
    body.append(f'<p class="note">{UNITS_NOTE}</p>')
    body.append('<section id="plan"><h2>Plan</h2><details><summary>The resolved plan this run used</summary>'
                f"<pre>{h.esc(json.dumps(plan, indent=2))}</pre></details></section>")
    atomic_write_text(run.report_path, h.page(f"refbench — {meta['name']}", "".join(body)))
    return run.report_path


def host_line(meta: dict[str, Any]) -> str:
    """The host in one line: name, machine, CPU, memory, system."""
    inv = meta.get("inventory", {})
    system, cpu, mem = (inv.get(k, {}) for k in ("system", "cpu", "memory"))
    machine = " ".join(filter(None, [system.get("vendor"), system.get("product")]))
    threads = f"{h.fmt(cpu.get('cores'))} cores / {h.fmt(cpu.get('threads'))} threads" if cpu.get("threads") else None
    memory = f"{h.fmt(mem.get('total_gib'))} GiB memory" if mem.get("total_gib") is not None else None
    virt = system.get("virtualization")
    parts = [inv.get("hostname") or meta.get("host"), machine or None, f"({virt})" if virt and virt != "none" else None,
             cpu.get("model"), threads, memory, system.get("distribution"), f"kernel {system['kernel']}" if system.get("kernel") else None]
    return " · ".join(str(p) for p in parts if p)


def _suite_summary(name: str) -> str:
    try:
        return get_suite(name).summary.split(":")[0].split(" (")[0].rstrip(".")
    except UserError:
        return "suite not installed"


def _headlines(v: dict[str, Any], common: int | None) -> str:
    """Every headline in full, as `refbench why` says it: its label, the figure with its repeats' range, its note."""
    return "<br>".join(f"{h.esc(x['label'])}: <span class=\"note\">not rated at this size ({h.esc(x['unrated'])}; "
                       f"measured {h.esc(h.fmt(x['value']))} {h.esc(x['unit'])})</span>" if x.get("unrated") else
                       f"{h.esc(x['label'])}: <b>{h.esc(figure_with_rule(x, common))}</b>"
                       + (f' <span class="note">{h.esc(note)}</span>' if (note := note_of(x)) else "")
                       for x in v["headlines"]) or "—"


def _checks(v: dict[str, Any]) -> str:
    if v["checks_failed"]:
        return f'<span class="FAIL">{v["checks_failed"]} FAILED</span>, {v["checks_passed"]} passed'
    return f'<span class="pass">{v["checks_passed"]} passed</span>' if v["checks_passed"] else "none"


def _step(said: str, command: str) -> str:
    """A next step, its command as code to copy."""
    return h.esc(said) + (f": <code>{h.esc(command)}</code>" if command else "")


def _figure(item: str) -> str:
    """A headline in the verdict's few words; one not rated at this size is a note, not a figure."""
    return f'<span class="note">{h.esc(item)}</span>' if "not rated at this size" in item else h.esc(item)


def _verdict_table(verdicts: list[dict[str, Any]], rule: str, common: int | None) -> str:
    """The terminal's verdict as a table (refbench.report.brief): figures (the rule they follow said once, in their
    column's head), checks, the limit in a few words and the one next step; each suite's section below has the
    evidence."""
    def limit(v: dict[str, Any]) -> str:
        said = [f"<b>limit</b>: {h.esc(v['limit'])}"] if v.get("limit") else []
        if v.get("disturbed"):
            said.append(f"<b>disturbed</b>: {h.esc(v['disturbed'])}")
        if v.get("durability"):
            said.append(f"<b>durability traded for speed</b>: {h.esc(v['durability'])}")
        if v.get("next"):
            said.append(f"<b>next</b>: {_step(v['next']['short'], v['next'].get('command') or '')}")
        return "<br>".join(said) or "—"

    rows = "".join(f'<tr><td><a href="#suite-{h.esc(v["suite"])}">{h.esc(v["suite"])}</a></td>'
                   f'<td>{"<br>".join(_figure(item) for item in figure_items(v["headlines"], common)) or "—"}</td>'
                   f'<td data-label="Correctness checks">{_checks(v)}</td><td data-label="Limit and next step">{limit(v)}</td></tr>'
                   for v in verdicts)
    head = f"Headline figures: {h.esc(rule.removeprefix('figures: '))}" if rule else "Headline figures"
    return h.scroll(f'<table class="verdict"><thead><tr><th>Suite</th><th>{head}</th><th>Correctness checks</th>'
                    f"<th>Limit and next step</th></tr></thead><tbody>{rows}</tbody></table>")


def _acceptance(results: list[dict[str, Any]] | None) -> str:
    """The plan's acceptance thresholds as the run evaluated them (accept.json), when it had any."""
    if not results:
        return ""
    failed = sum(not r["passed"] for r in results)
    rows = [{"threshold": r["threshold"], "measured": r.get("value"), "result": "pass" if r["passed"] else "FAIL",
             "detail": r.get("detail", "")} for r in results]
    head = (f'<span class="FAIL">{failed} of {len(results)} FAILED</span>' if failed
            else f'<span class="pass">all {len(results)} met</span>')
    return f"<p><b>Acceptance thresholds</b>: {head}</p>" + h.table(rows, classes={"result": "{value}"})


def _host_section(meta: dict[str, Any]) -> str:
    inv = meta.get("inventory", {})
    system, cpu, mem, numa = (inv.get(k, {}) for k in ("system", "cpu", "memory", "numa"))
    audit = meta.get("audit", [])
    changes = [c for c in audit if c["status"] == "change"]
    columns = ["setting", "current", "recommended", "status", "why", "fix"]
    out = ['<section id="host"><h2>Host, devices and tuning audit</h2>',
           f"<p id='tuning-audit'><b>Tuning audit</b>: {len(changes)} of {len(audit)} setting(s) differ from the "
           "recommendation" + (f": {h.esc(', '.join(c['setting'] for c in changes))}." if changes else ".") + "</p>"]
    out.append('<details class="detail"><summary>Detail: ' + ("the settings that differ and why, " if changes else "")
               + "the host, its block devices, file systems and every audited setting</summary>")
    if changes:
        out.append(h.table(changes, columns, classes={"status": "{value}"}))
    out.append(h.key_values([
        ("Host name", inv.get("hostname")),
        ("System", " ".join(filter(None, [system.get("vendor"), system.get("product")])) or None),
        ("Virtualization", system.get("virtualization")),
        ("Distribution", system.get("distribution")),
        ("Kernel", system.get("kernel")),
        ("CPU", cpu.get("model")),
        ("Sockets / cores / threads", f"{h.fmt(cpu.get('sockets'))} / {h.fmt(cpu.get('cores'))} / {h.fmt(cpu.get('threads'))}"),
        ("Memory (GiB)", mem.get("total_gib")),
        ("Swap (GiB)", mem.get("swap_total_gib")),
        ("NUMA nodes", numa.get("nodes")),
        *((f"{tool} version", v or "not found") for tool, v in (meta.get("tools") or {}).items()),
    ]))
    devices = [
        {"device": d["name"], "model": d.get("model"), "size (GB)": round(d["size_bytes"] / 1e9, 1) if d.get("size_bytes") else None,
         "rotational": d.get("rotational"), "logical/physical sector (bytes)": f"{h.fmt(d.get('logical_sector_bytes'))}/{h.fmt(d.get('physical_sector_bytes'))}",
         "scheduler": d.get("scheduler"), "nr_requests": d.get("nr_requests"), "read-ahead (KiB)": d.get("read_ahead_kb")}
        for d in inv.get("block_devices", [])
    ]
    out += ["<h3>Block devices</h3>", h.table(devices)]
    mounts = [{"device": m.get("device"), "mountpoint": m.get("mountpoint"), "fstype": m.get("fstype"),
               **{f"{k} (GB)": round(m[f"{k}_gib"] * 2**30 / 1e9, 1) if m.get(f"{k}_gib") is not None else None
                  for k in ("size", "free")}, "options": m.get("options")}
              for m in inv.get("mounts", [])]  # capacity in GB, as the block devices' sizes above
    out += ["<h3>File systems</h3>", h.table(mounts)]
    out += ["<h3>Every audited setting</h3><p class='note'>'unknown' means this host (often a VM or container) does not "
            "expose the setting. <code>refbench host --tuned-profile FILE</code> writes a tuned profile with these values.</p>",
            h.table(audit, columns, classes={"status": "{value}"}), "</details></section>"]
    return "".join(out)


_NUMBERS = re.compile(r"\d+(?:[.,]\d+)*")


def _methods(records: list[Record]) -> str:
    """How the suite measured, once: cases whose method sentences differ only in their numbers (the query, the block
    size, the user count) share one paragraph, with how many cases it stands for."""
    groups: dict[str, list[Record]] = {}
    for r in records:
        if r.method:
            groups.setdefault(_NUMBERS.sub("#", r.method), []).append(r)
    out = []
    for same in groups.values():
        first = same[0]
        more = (f' <span class="note">({len(same)} cases measured this way, each with its own parameters; '
                f"this is {h.esc(first.case_id)}.)</span>") if len(same) > 1 else ""
        out.append(f"<p>{h.esc(first.method)}{more}</p>")
    return "".join(out)


def _cases(records: list[Record]) -> str:
    """Every case's parameters and figures, folded away: the tables above are what people read first."""
    rows = [{"case": r.case_id, "parameters": ", ".join(f"{k}={h.fmt(v)}" for k, v in r.params.items()),
             "figures": ", ".join(f"{k} {h.fmt(v)}" for k, v in r.metrics.items() if not isinstance(v, (dict, list))),
             "elapsed (s)": round(r.elapsed_s, 1), "started (UTC)": r.started_utc} for r in records]
    return (f"<details><summary>Per-case detail ({len(records)} case{'s' if len(records) != 1 else ''})</summary>"
            f"{h.table(rows)}</details>")


def _suite_section(name: str, anchor: str, title: str, outputs: tuple[list[Table], list[tuple[Chart, Rendered]], list[Record]],
                   measured: list[Record], findings: list, verdict: dict[str, Any] | None, common: int | None) -> str:
    """The suite in a few lines (headlines, bottleneck, storage, correctness) beside its key chart, and everything
    else (the other charts and tables, how it was measured, every case) in one detail people open when they want it.
    ``measured``: every repeat, which the storage figures are over, as the run's progress said them."""
    tables, charts, records = outputs
    facts = []
    if verdict and verdict["headlines"]:
        facts.append(f"<p>{_headlines(verdict, common)}</p>")
    storage_verdicts = storage.verdicts(measured)
    facts += [f"<p>{h.esc(v)}</p>" for v in storage_verdicts]
    facts.append(_correctness(findings))
    if verdict:  # the verdict's limit and next step, with their evidence: `refbench why`'s words, folded
        lines = limits_once(verdict)
        limits = "<br>".join([f"<b>Bottleneck</b>{h.esc(lines[0].removeprefix('bottleneck'))}"]
                             + [f"&emsp;{h.esc(line.strip())}" for line in lines[1:]])
        facts.append(f'<details class="why"><summary><b>Why</b>: {h.esc(verdict["limit"] or verdict["bottleneck"])}'
                     f"</summary><p>{limits}</p>"
                     + "".join(f"<p><b>Next</b>: {_step(said, command)}</p>" for said, command in next_steps(verdict, set()))
                     + "</details>")

    shown = [t for t in tables if t.report_columns != []]  # [] : in the files only, shown as charts or in another table
    key_chart = h.chart(charts[0][1], charts[0][0].title) if charts else ""
    out = [f'<section id="{h.esc(anchor)}"><h2>{h.esc(title)}</h2>',
           f'<div class="overview"><div>{"".join(facts)}</div>{key_chart}</div>',
           *(_table(name, t) for t in shown if t.overview)]

    detail = []
    if verdict and len(verdict["engines"]) > 1:
        detail.append("<h3>The engines compared</h3>" + h.table(verdict["engines"]))
    if targets := list(dict.fromkeys(r.extra["target_description"] for r in records if r.extra.get("target_description"))):
        detail.append(f'<p class="note">Target{"s" if len(targets) > 1 else ""}: {h.esc("; ".join(targets))}.</p>')
    if len(charts) > 1:
        detail.append('<div class="grid">' + "".join(h.chart(r, c.title) for c, r in charts[1:]) + "</div>")
    detail += [_table(name, t) for t in shown if not t.overview]
    if files_only := [t for t in tables if t.report_columns == []]:
        detail.append('<p class="note">In the files only (shown as charts or in another table): '
                      + "; ".join(f"{h.esc(t.title)}, tables/{h.esc(name)}/{h.esc(t.name)}.csv ({len(t.rows):,} rows)" for t in files_only)
                      + ".</p>")
    if storage_verdicts:
        detail.append(f'<h3>Storage</h3><p class="note">{h.esc(storage.RULE)} Device figures are the whole device\'s, '
                      "neighbours included. The bound is the page cache the server may hold while measuring (cache_mb) + "
                      f"its shared_buffers; {h.esc(storage.bound_methods(measured))}.</p>")
        detail.append(h.table(storage.table(measured)))
    detail.append("<h3>How it was measured</h3>")
    detail.append(f"<p class='note'>{len(records)} case(s) recorded; each record keeps its start and end time, its parameters, "
                  "and the host telemetry of its own interval (CPU %, device MB/s, busy %).</p>")
    detail.append(_methods(records))
    if records:
        detail.append(_cases(records))
    what = ", ".join(filter(None, ["the engines compared" if verdict and len(verdict["engines"]) > 1 else "",
                                   f"{len(charts) - 1} more chart{'s' if len(charts) != 2 else ''}" if len(charts) > 1 else "",
                                   f"{len(shown) - sum(t.overview for t in shown)} table(s)",
                                   "storage" if storage_verdicts else "", "how it was measured",
                                   f"{len(records)} case(s)"]))
    out.append(f'<details class="detail"><summary>Detail: {h.esc(what)}</summary>{"".join(detail)}</details></section>')
    return "".join(out)


def _table(suite: str, t: Table) -> str:
    out = [f"<h3>{h.esc(t.title)}</h3>"]
    if t.note:
        out.append(f'<p class="note">{h.esc(t.note)}</p>')
    out.append(h.table(t.rows, t.report_columns, classes={"result": "{value}", "status": "{value}"}))
    if t.report_columns:
        out.append(f'<p class="note">All columns are in tables/{h.esc(suite)}/{h.esc(t.name)}.csv and .parquet.</p>')
    return "".join(out)


def _correctness(findings: list) -> str:
    """One line when every check passed (the checks folded under it); the failures open, in a table of their own."""
    if not findings:
        return '<p class="note">This suite reported no correctness checks.</p>'
    rows = [{"check": f.check, "result": "pass" if f.passed else "FAIL", "detail": f.detail} for f in findings]
    failed = [r for r in rows if r["result"] == "FAIL"]
    passes = [r for r in rows if r["result"] == "pass"]
    folded = (f'<details class="checks"><summary><b>Correctness</b>: <span class="pass">{len(passes)} check(s) passed'
              f"</span></summary>{h.table(passes, classes={'result': '{value}'})}</details>") if passes else ""
    if not failed:
        return folded
    return (f'<p><b>Correctness</b>: <span class="FAIL">{len(failed)} of {len(rows)} check(s) FAILED</span></p>'
            + h.table(failed, classes={"result": "{value}"}) + folded)
