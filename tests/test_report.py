"""report on real runs of the test suite (compare: test_compare.py)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest


def _run(refbench, tmp_path, *args):
    result = refbench("sleepy", "--runs-dir", str(tmp_path / "runs"), "--set", "sleepy.sleep_s=0", *args)
    assert result.code == 0, result.stderr
    return Path(result.last_line)


@pytest.mark.live
def test_report_is_self_contained_and_has_every_section(tmp_path, refbench):
    # 1 s a case: the once-a-second telemetry has the three samples a host chart needs, and the chart marks the suite.
    made = refbench("sleepy", "--runs-dir", str(tmp_path / "runs"), "--set", "sleepy.sleep_s=1", "--name", "a")
    assert made.code == 0, made.stderr
    run = Path(made.last_line)
    result = refbench("report", str(run))
    assert result.code == 0, result.stderr
    html = (run / "report.html").read_text()
    assert (run / "report.html").stat().st_mode & 0o777 == 0o644
    assert '<meta name="viewport" content="width=device-width' in html and "@media print" in html
    # Summary, contents, then per suite: headline, correctness and key chart, then its folded detail (tables, method,
    # per-case detail); then the host, once.
    order = ['class="summary"', "all 2 checks passed", 'class="verdict"', "case-003: 4,000 ops/s", "<b>limit</b>: ",
             '<nav class="toc">', '<li><a href="#suite-sleepy">', '<section id="suite-sleepy">',
             "peak throughput: <b>4,000 ops/s</b>", "<b>Correctness</b>", "<b>Why</b>: ", "<b>Bottleneck</b>: ",
             "<figure><svg", '<details class="detail"><summary>Detail:', "<h3>Per case</h3>", "How it was measured",
             "<summary>Per-case detail (4 cases)", 'id="host-activity"', "Tuning audit", "<h3>Block devices</h3>", "<h2>Plan</h2>"]
    at = [html.find(marker) for marker in order]
    assert -1 not in at and at == sorted(at), dict(zip(order, at))
    assert html.count("slept and wrote 256 KiB with fsync") == 1  # the method once, for its 4 cases
    assert "4 cases measured this way" in html
    assert html.count("<b>Tuning audit</b>") == 1 and html.count("Every audited setting</h3>") == 1  # the host once
    # Every header names its unit: ops_per_s is "ops (per s)", lat_ms "lat (ms)".
    assert "<th>ops (per s)</th>" in html and "<th>lat (ms)</th>" in html
    # Charts inline as SVG, each data point with its value for hovering; the host charts mark when the suite ran.
    assert '<g class="pt"><circle' in html and "ops/s at case case-003</text>" in html
    activity = html[html.index('id="host-activity"'):html.index('<section id="host">')]
    assert re.search(r"<text[^>]*>sleepy</text>", activity)  # the shaded span's name
    assert not re.search(r'(src|href)="(https?:|/)', html)  # nothing loaded from outside the file
    assert "<script" not in html
    assert (run / "charts" / "sleepy" / "ops.png").is_file() and (run / "charts" / "sleepy" / "ops.svg").is_file()
    assert (run / "tables" / "sleepy" / "per_case.csv").read_text().startswith("case,ops_per_s,lat_ms")


@pytest.mark.live
def test_acceptance_results_are_on_the_first_screen(tmp_path, refbench):
    plan = tmp_path / "plan.toml"
    plan.write_text('suites = ["sleepy"]\n[sleepy]\nsleep_s = 0.0\n[accept]\n'
                    'sleepy.ops_per_s = ">= 3000"\n"sleepy.case-000.lat_ms" = "<= 5"\n')
    result = refbench("run", "--plan", str(plan), "--runs-dir", "runs")
    assert result.code == 3, result.stderr
    html = (tmp_path / result.last_line / "report.html").read_text()
    summary = html[:html.index('<nav class="toc">')]
    assert "Acceptance thresholds" in summary and "1 of 2 FAILED" in summary
    assert "sleepy.case-000.lat_ms &lt;= 5" in summary


def test_numbers_have_one_format_and_headers_their_unit():
    from refbench.formats import fitted, fmt
    from refbench.report.html import header

    assert [fmt(v) for v in (1234567.8, 1234, 12.3456, 0.00123456, 0.0, None, True)] == [
        "1,234,568", "1,234", "12.3", "0.00123", "0", "—", "yes"]
    assert [fmt(v) for v in (0.46, 0.91, 279.9)] == ["0.46", "0.91", "280"]  # no false precision (0.4600 s)
    # A figure measured several times shows the digits its repeats' spread allows, no more.
    assert [fitted(63096.0, 400.0), fitted(63096.0, 4000.0), fitted(0.912, 0.05), fitted(7826.0, 0.0)] == [
        "63,100", "63,000", "0.91", "7,826"]
    assert [header(c) for c in ("read_mb_s", "read_lat_p99_us", "ops_per_s", "cpu_pct", "size_gib", "query", "mb_s",
                                "write_iops")] == [
        "read (MB/s)", "read lat p99 (µs)", "ops (per s)", "cpu (%)", "size (GiB)", "query", "MB/s", "write (IOPS)"]
    assert header("write MB/s per core") == "write MB/s per core"  # already written for people


@pytest.mark.live
def test_failed_correctness_check_fails_the_run_loudly(tmp_path, refbench):
    result = refbench("sleepy", "--runs-dir", str(tmp_path / "runs"), "--set", "sleepy.sleep_s=0", "--fail-check")
    assert result.code == 1
    assert "FAILED" in result.stderr
    html = (Path(result.last_line) / "report.html").read_text()
    assert "1 check(s) FAILED" in html


@pytest.mark.live
def test_runs_lists_and_run_without_suites_writes_host_report(tmp_path, refbench):
    result = refbench("run", "--runs-dir", "runs", "--name", "hostonly")
    assert result.code == 0, result.stderr
    run = tmp_path / result.last_line
    meta = json.loads((run / "run.json").read_text())
    assert meta["status"] == "complete" and meta["inventory"]["cpu"]["threads"]
    assert any(c["setting"] == "vm.swappiness" for c in meta["audit"])
    assert "Tuning audit" in (run / "report.html").read_text()
    listing = refbench("runs", "--runs-dir", "runs")
    assert listing.code == 0 and "hostonly" in listing.stdout and "complete" in listing.stdout


def test_a_tables_csv_opens_as_text_in_a_spreadsheet_and_its_parquet_keeps_the_values(tmp_path):
    import csv
    import pyarrow.parquet as pq
    from refbench.records import Table
    from refbench.report import write_table

    rows = [{"case": "=cmd|' /C calc'!A0", "host": "@evil", "tag": "-2+3", "lat_ms": -1.5, "note": "plain"}]
    write_table(tmp_path, Table("t", "T", rows))
    with open(tmp_path / "t.csv", newline="") as f:
        assert list(csv.DictReader(f)) == [{"case": "'=cmd|' /C calc'!A0", "host": "'@evil", "tag": "'-2+3",
                                            "lat_ms": "-1.5", "note": "plain"}]
    assert pq.read_table(tmp_path / "t.parquet").to_pylist() == rows
