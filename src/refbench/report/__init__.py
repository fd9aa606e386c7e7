"""The report: tables (Parquet + CSV), charts (PNG + SVG) and a self-contained report.html per run."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from rich.console import Console

from refbench.errors import UserError
from refbench.fileio import atomic_write_bytes, atomic_write_text
from refbench.report import html as h
from refbench.report.charts import render_all
from refbench.report.telemetry import telemetry_charts
from refbench.runstore import Run
from refbench.suites import Chart, Record, Table, get_suite, storage

UNITS_NOTE = (
    "Units: MB = 10<sup>6</sup> bytes and MB/s = 10<sup>6</sup> bytes per second (as storage vendors quote them); "
    "KiB/MiB/GiB = 2<sup>10</sup>/2<sup>20</sup>/2<sup>30</sup> bytes (block sizes, memory). Latencies in µs or ms as "
    "named; percentages are of the measurement interval. Every figure names its unit in its column."
)


def write_table(directory: Path, table: Table) -> None:
    """One table as Parquet and CSV, each written atomically."""
    rows = table.rows
    sink = pa.BufferOutputStream()
    pq.write_table(pa.Table.from_pylist(rows), sink)
    atomic_write_bytes(directory / f"{table.name}.parquet", sink.getvalue().to_pybytes())
    text = io.StringIO()
    writer = csv.DictWriter(text, fieldnames=list(dict.fromkeys(k for r in rows for k in r)))
    writer.writeheader()
    writer.writerows(rows)
    atomic_write_text(directory / f"{table.name}.csv", text.getvalue())


def suite_outputs(run: Run, suite_name: str, console: Console | None = None) -> tuple[list[Table], list[tuple[Chart, Path]], list[Record]]:
    records = run.records(suite_name)
    try:
        suite = get_suite(suite_name)
    except UserError as exc:
        if console:
            console.print(f"[yellow]report: {exc} Its records are listed without its tables and charts.[/yellow]")
        return [], [], records
    tables = suite.summarize(records) if records else []
    for t in tables:
        write_table(run.tables_dir / suite_name, t)
    charts = suite.charts(tables) if tables else []
    charts = list(zip(charts, render_all(charts, run.charts_dir / suite_name)))
    return tables, charts, records


def telemetry_outputs(run: Run) -> list[tuple[Chart, Path]]:
    charts = telemetry_charts(run.telemetry_path, run.tables_dir)
    return list(zip(charts, render_all(charts, run.charts_dir)))


def build_report(run: Run, console: Console | None = None) -> Path:
    meta = run.meta
    plan = meta["plan"]
    suites = list(dict.fromkeys(plan.get("suites", []) + run.suites_with_records()))
    findings = run.findings()
    passed = sum(f.passed for fs in findings.values() for f in fs)
    failed = sum(not f.passed for fs in findings.values() for f in fs)

    body = [
        f"<h1>refbench report — {h.esc(meta['name'])}</h1>",
        f'<p class="sub">{h.esc(run.path.name)} · status <b>{h.esc(run.status())}</b> · profile {h.esc(plan.get("profile"))} · '
        f"host {h.esc(meta.get('host'))} · {h.esc(meta.get('started_utc'))} → {h.esc(meta.get('ended_utc') or 'not finished')}</p>",
        h.banner(passed, failed),
        f'<p class="note">{UNITS_NOTE}</p>',
    ]
    if run.status() != "complete":
        body.append(f'<div class="banner failed">This run is {h.esc(run.status())}: the report shows the cases recorded so far. '
                    f"Continue it with <code>refbench resume {h.esc(run.path)}</code>.</div>")
    body.append(_host_section(meta))
    for name in suites:
        body.append(_suite_section(run, name, findings.get(name, []), console))
    tel_charts = telemetry_outputs(run)
    body.append("<h2>Host activity during the run</h2>")
    if tel_charts:
        body.append('<p class="note">Sampled once a second from /proc/stat and /proc/diskstats for the whole run.</p>')
        body.append('<div class="grid">' + "".join(h.image(p, c.title) for c, p in tel_charts) + "</div>")
    else:
        body.append('<p class="note">No telemetry samples (the run was shorter than a second).</p>')
    body.append("<h2>Plan</h2><details><summary>The resolved plan this run used</summary>"
                f"<pre>{h.esc(json.dumps(plan, indent=2))}</pre></details>")
    atomic_write_text(run.report_path, h.page(f"refbench — {meta['name']}", "".join(body)))
    return run.report_path


def _host_section(meta: dict[str, Any]) -> str:
    inv = meta.get("inventory", {})
    system, cpu, mem, numa = (inv.get(k, {}) for k in ("system", "cpu", "memory", "numa"))
    out = ["<h2>Host</h2>", h.key_values([
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
    ])]
    devices = [
        {"device": d["name"], "model": d.get("model"), "size_GB": round(d["size_bytes"] / 1e9, 1) if d.get("size_bytes") else None,
         "rotational": d.get("rotational"), "logical/physical sector B": f"{h.fmt(d.get('logical_sector_bytes'))}/{h.fmt(d.get('physical_sector_bytes'))}",
         "scheduler": d.get("scheduler"), "nr_requests": d.get("nr_requests"), "read_ahead_KiB": d.get("read_ahead_kb")}
        for d in inv.get("block_devices", [])
    ]
    out += ["<h3>Block devices</h3>", h.table(devices)]
    out += ["<h3>File systems</h3>", h.table(inv.get("mounts", []), ["device", "mountpoint", "fstype", "size_gib", "free_gib", "options"])]
    audit = meta.get("audit", [])
    changes = sum(c["status"] == "change" for c in audit)
    out += [f"<h3>Tuning audit</h3><p class='note'>{changes} setting(s) differ from the recommendation; "
            "'unknown' means this host (often a VM or container) does not expose the setting. "
            "<code>refbench host --tuned-profile FILE</code> writes a tuned profile with these values.</p>",
            h.table(audit, ["setting", "current", "recommended", "status", "why", "fix"], classes={"status": "{value}"})]
    return "".join(out)


def _suite_section(run: Run, name: str, findings: list, console: Console | None) -> str:
    tables, charts, records = suite_outputs(run, name, console)
    out = [f"<h2>Suite: {h.esc(name)}</h2>"]
    if targets := list(dict.fromkeys(r.extra["target_description"] for r in records if r.extra.get("target_description"))):
        out.append(f'<p class="note">Target{"s" if len(targets) > 1 else ""}: {h.esc("; ".join(targets))}.</p>')
    if verdicts := storage.verdicts(records):
        out.append("<h3>Storage</h3>" + "".join(f"<p><b>{h.esc(v)}</b></p>" for v in verdicts))
        out.append(f'<p class="note">{h.esc(storage.RULE)} Device figures are the whole device\'s, neighbours '
                   "included. The bound is the page cache the server may hold while measuring (cache_mb) + its "
                   f"shared_buffers; {h.esc(storage.bound_methods(records))}.</p>")
        out.append(h.table(storage.table(records)))
    if findings:
        out.append("<h3>Correctness</h3>")
        out.append(h.table([{"check": f.check, "result": "pass" if f.passed else "FAIL", "detail": f.detail} for f in findings],
                           classes={"result": "{value}"}))
    else:
        out.append('<p class="note">This suite reported no correctness checks.</p>')
    for t in tables:
        out.append(f"<h3>{h.esc(t.title)}</h3>")
        if t.note:
            out.append(f'<p class="note">{h.esc(t.note)}</p>')
        if t.report_columns == []:
            out.append(f'<p class="note">{len(t.rows)} rows in tables/{h.esc(name)}/{h.esc(t.name)}.csv and .parquet (charted below).</p>')
            continue
        out.append(h.table(t.rows, t.report_columns))
        if t.report_columns:
            out.append(f'<p class="note">All columns are in tables/{h.esc(name)}/{h.esc(t.name)}.csv and .parquet.</p>')
    if charts:
        out.append('<div class="grid">' + "".join(h.image(p, c.title) for c, p in charts) + "</div>")
    methods = list(dict.fromkeys(r.method for r in records if r.method))
    out.append("<h3>How it was measured</h3>")
    out.append(f"<p class='note'>{len(records)} case(s) recorded; each record keeps its start and end time, its parameters, "
               "and the host telemetry of its own interval (CPU %, device MB/s, busy %).</p>")
    out.extend(f"<p>{h.esc(m)}</p>" for m in methods)
    return "".join(out)
