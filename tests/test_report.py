"""report on real runs of the test suite (compare: test_compare.py)."""

from __future__ import annotations

import json
import re
from pathlib import Path


def _run(refbench, tmp_path, *args):
    result = refbench("sleepy", "--runs-dir", str(tmp_path / "runs"), "--set", "sleepy.sleep_s=0", *args)
    assert result.code == 0, result.stderr
    return Path(result.last_line)


def test_report_is_self_contained_and_has_every_section(tmp_path, refbench):
    run = _run(refbench, tmp_path, "--name", "a")
    result = refbench("report", str(run))
    assert result.code == 0, result.stderr
    html = (run / "report.html").read_text()
    for heading in ("Host", "Block devices", "Tuning audit", "Suite: sleepy", "Correctness", "Per case",
                    "How it was measured", "Host activity during the run", "Plan"):
        assert heading in html, heading
    assert "all 2 checks passed" in html
    assert re.search(r'<img alt="Throughput by case" src="data:image/png;base64,', html)
    assert not re.search(r'(src|href)="(https?:|/)', html)  # nothing loaded from outside the file
    assert (run / "charts" / "sleepy" / "ops.png").is_file() and (run / "charts" / "sleepy" / "ops.svg").is_file()
    assert (run / "tables" / "sleepy" / "per_case.csv").read_text().startswith("case,ops_per_s,lat_ms")


def test_failed_correctness_check_fails_the_run_loudly(tmp_path, refbench):
    result = refbench("sleepy", "--runs-dir", str(tmp_path / "runs"), "--set", "sleepy.sleep_s=0", "--fail-check")
    assert result.code == 1
    assert "FAILED" in result.stderr
    html = (Path(result.last_line) / "report.html").read_text()
    assert "1 check(s) FAILED" in html


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
