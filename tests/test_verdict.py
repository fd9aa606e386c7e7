"""The answer a run ends with: the verdict (headlines, correctness, bottleneck) and the acceptance thresholds."""

from __future__ import annotations

import json
from pathlib import Path

from refbench.report.verdict import name_bottleneck
from refbench.suites import Record

SLEEPY = ("sleepy", "--set", "sleepy.sleep_s=0")


def test_a_run_ends_with_its_verdict_and_then_its_directory(tmp_path, refbench):
    result = refbench(*SLEEPY, "--runs-dir", "runs")
    assert result.code == 0, result.stderr
    lines = result.stdout.strip().splitlines()
    run = tmp_path / lines[-1]
    assert (run / "report.html").is_file()
    text = "\n".join(lines[:-1])
    assert "verdict" in text and "peak throughput: 4,000 ops/s" in text  # the best of cases 1,000 to 4,000 ops/s
    assert "correctness: all 2 checks passed" in text
    assert "bottleneck: " in text
    saved = json.loads((run / "verdict.json").read_text())
    assert saved[0]["suite"] == "sleepy" and saved[0]["headlines"][0]["value"] == 4000.0

    as_json = refbench(*SLEEPY, "--runs-dir", "runs", "--json", "--speed", "2")
    assert as_json.code == 0, as_json.stderr
    *document, last = as_json.stdout.strip().splitlines()
    assert (tmp_path / last / "verdict.json").is_file()
    data = json.loads("\n".join(document))
    headline = data["verdict"][0]["headlines"][0]
    assert (headline["value"], headline["unit"], headline["case"]) == (8000.0, "ops/s", "case-003")
    assert data["verdict"][0]["correctness"] == "all 2 checks passed" and data["correctness_passed"] is True


def test_the_bottleneck_names_a_saturated_device_a_busy_cpu_or_neither():
    record = Record(metrics={"driver_cpu_share_pct": 12.3}, extra={"storage": {"hit_ratio_pct": 99.6}})
    busy_disk = {"cpu": {"user_pct": 20, "system_pct": 10, "steal_pct": 0},
                 "disks": {"vda": {"busy_pct": 97.6, "avg_queue": 31.2}, "vdb": {"busy_pct": 3, "avg_queue": 0.1}}}
    assert name_bottleneck(Record(metrics={}), busy_disk) == ("device", "vda (98% busy, queue 31.2)")
    busy_cpu = {"cpu": {"user_pct": 80, "system_pct": 15, "steal_pct": 2}, "disks": {"vda": {"busy_pct": 4, "avg_queue": 0.1}}}
    assert name_bottleneck(record, busy_cpu) == (
        "cpu", "CPU (97%), storage idle; the load driver's share 12%, cache hit ratio 99.6%: measured from memory")
    idle = {"cpu": {"user_pct": 30, "system_pct": 5, "steal_pct": 0}, "disks": {"vda": {"busy_pct": 40, "avg_queue": 2}}}
    resource, phrase = name_bottleneck(Record(metrics={}), idle)
    assert resource == "neither" and phrase.startswith("neither saturated (CPU 35%, vda 40% busy)")
    assert name_bottleneck(Record(metrics={}), {})[0] == "unknown"


def test_acceptance_thresholds_pass_or_fail_with_their_own_exit_status(tmp_path, refbench):
    plan = tmp_path / "accept.toml"
    plan.write_text('suites = ["sleepy"]\n[sleepy]\nsleep_s = 0.0\n[accept]\n'
                    'sleepy.ops_per_s = ">= 3000"\n"sleepy.case-000.lat_ms" = "<= 5"\n')
    result = refbench("run", "--plan", str(plan), "--runs-dir", "runs")
    assert result.code == 3, result.stderr  # lat_ms is 10: one threshold failed, the run itself is sound
    run = tmp_path / result.last_line
    assert "1 of 2 acceptance thresholds FAILED" in result.stdout
    assert "pass  sleepy.ops_per_s >= 3000" in result.stdout and "FAIL  sleepy.case-000.lat_ms <= 5" in result.stdout
    saved = json.loads((run / "accept.json").read_text())
    assert [(r["threshold"], r["value"], r["passed"]) for r in saved] == [
        ("sleepy.ops_per_s >= 3000", 4000.0, True), ("sleepy.case-000.lat_ms <= 5", 10.0, False)]

    again = refbench("check", str(run))
    assert again.code == 3 and "FAIL  sleepy.case-000.lat_ms <= 5" in again.stdout
    looser = tmp_path / "looser.toml"
    looser.write_text('[sleepy]\n[accept]\n"sleepy.case-000.lat_ms" = "<= 20"\nsleepy.nosuch = "> 1"\n')
    mixed = refbench("check", str(run), "--plan", str(looser), "--json")
    assert mixed.code == 3, mixed.stderr
    results = {r["threshold"]: r for r in mixed.json()["accept"]}
    assert results["sleepy.case-000.lat_ms <= 20"]["passed"]
    assert not results["sleepy.nosuch > 1"]["passed"] and "not a sleepy headline figure" in results["sleepy.nosuch > 1"]["detail"]
    assert not list(Path(run).glob("*.tmp*"))


def test_a_malformed_threshold_is_refused_before_the_run(tmp_path, refbench):
    plan = tmp_path / "bad.toml"
    plan.write_text('suites = ["sleepy"]\n[accept]\nsleepy.ops_per_s = "at least 5"\n')
    result = refbench("run", "--plan", str(plan), "--runs-dir", "runs")
    assert result.code == 2 and "bad.toml:3: [accept] \"sleepy.ops_per_s\" must be a condition" in result.stderr
    plan.write_text('suites = ["sleepy"]\n[accept]\ndevice.iops = ">= 5"\n')
    result = refbench("run", "--plan", str(plan), "--runs-dir", "runs")
    assert result.code == 2 and "names suite 'device', which this run does not include" in result.stderr
    assert not (tmp_path / "runs").exists()
