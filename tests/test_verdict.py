"""The answer a run ends with: the verdict (headlines, correctness, bottleneck) and the acceptance thresholds."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from refbench.report.verdict import name_bottleneck
from refbench.suites import Record

SLEEPY = ("sleepy", "--set", "sleepy.sleep_s=0")


@pytest.mark.live
def test_a_run_ends_with_its_verdict_and_then_its_directory(tmp_path, refbench):
    result = refbench(*SLEEPY, "--runs-dir", "runs")
    assert result.code == 0, result.stderr
    lines = result.stdout.strip().splitlines()
    run = tmp_path / lines[-1]
    assert (run / "report.html").is_file()
    text = "\n".join(lines[:-1])
    # In a few lines: the figure, the checks, the limit, the next step, and where the evidence is.
    assert lines[0] == f"verdict — {run.name}" and len(lines) <= 8, text
    assert lines[1] == "sleepy     case-003: 4,000 ops/s"  # the best of cases 1,000 to 4,000 ops/s
    assert lines[2].startswith("2 passed   limit: ") and "\nwhy: refbench why " in text
    # The long form: every headline with its note, the checks, the bottleneck in full.
    why = refbench("why", lines[-1], "sleepy")
    assert why.code == 0 and "peak throughput: 4,000 ops/s" in why.stdout and "correctness: all 2 checks passed" in why.stdout
    assert "bottleneck: " in why.stdout, why.stdout + why.stderr
    assert refbench("why", lines[-1], "oltp").code == 2  # not in this run
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


@pytest.mark.live
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
    # A file holding only an [accept] table, with the name the verdict gives its headline.
    name = json.loads((run / "verdict.json").read_text())[0]["headlines"][0]["threshold"]
    assert name == "sleepy.ops_per_s"
    looser = tmp_path / "looser.toml"
    looser.write_text(f'[accept]\n"sleepy.case-000.lat_ms" = "<= 20"\nsleepy.nosuch = "> 1"\n"{name}" = "> 1"\n')
    mixed = refbench("check", str(run), "--accept", str(looser), "--json")
    assert mixed.code == 3, mixed.stderr
    results = {r["threshold"]: r for r in mixed.json()["accept"]}
    assert results["sleepy.case-000.lat_ms <= 20"]["passed"] and results["sleepy.ops_per_s > 1"]["passed"]
    assert not results["sleepy.nosuch > 1"]["passed"]
    assert "sleepy.nosuch is not a sleepy headline figure (those are: sleepy.ops_per_s)" in results["sleepy.nosuch > 1"]["detail"]
    empty = tmp_path / "empty.toml"
    empty.write_text('[sleepy]\nsleep_s = 1\n')
    refused = refbench("check", str(run), "--accept", str(empty))
    assert refused.code == 2 and "has no [accept] table" in refused.stderr and len(refused.stderr.splitlines()) == 1
    assert not list(Path(run).glob("*.tmp*"))

    # With repeats, a threshold says what they say of the figure: their interval, and when it reaches across.
    noisy = refbench("run", "--plan", str(plan), "--runs-dir", "runs", "--repeats", "3", "--set", "sleepy.noise_pct=20",
                     "--set", "sleepy.seed=0")
    value = json.loads((tmp_path / noisy.last_line / "verdict.json").read_text())[0]["headlines"][0]["value"]
    at_the_edge = tmp_path / "edge.toml"
    at_the_edge.write_text(f'[accept]\nsleepy.ops_per_s = ">= {value}"\n"sleepy.case-000.lat_ms" = "<= 20"\n')
    judged = {r["threshold"]: r for r in refbench("check", noisy.last_line, "--runs-dir", "runs", "--accept",
                                                  str(at_the_edge), "--json").json()["accept"]}
    edge, = [r for name, r in judged.items() if name.startswith("sleepy.ops_per_s >= ")]
    assert edge["passed"] and "its 3 repeats: 95% interval " in edge["detail"], edge
    assert "across the limit: another run may not give the same answer" in edge["detail"]
    assert "repeats" not in judged["sleepy.case-000.lat_ms <= 20"]["detail"]  # a case measured once


def test_a_headline_that_shares_its_metric_is_named_by_what_tells_it_apart():
    from refbench.suites import Headline

    assert Headline("duckdb: power", 360.0, "queries/h × SF", "duckdb-power", "power", of="duckdb").threshold("dss") == "dss.power.duckdb"
    assert Headline("NOPM at the best load level", 1.0, "NOPM", "u2-r1", "nopm").threshold("oltp") == "oltp.nopm"


def test_a_malformed_threshold_is_refused_before_the_run(tmp_path, refbench):
    plan = tmp_path / "bad.toml"
    plan.write_text('suites = ["sleepy"]\n[accept]\nsleepy.ops_per_s = "at least 5"\n')
    result = refbench("run", "--plan", str(plan), "--runs-dir", "runs")
    assert result.code == 2 and "bad.toml:3: [accept] \"sleepy.ops_per_s\" must be a condition" in result.stderr
    plan.write_text('suites = ["sleepy"]\n[accept]\ndevice.iops = ">= 5"\n')
    result = refbench("run", "--plan", str(plan), "--runs-dir", "runs")
    assert result.code == 2 and "names suite 'device', which this run does not include" in result.stderr
    assert not (tmp_path / "runs").exists()


def test_a_figure_too_small_to_rate_says_so_instead_of_standing_as_a_figure():
    from dataclasses import asdict

    from refbench.report.brief import figure_items
    from refbench.suites import Headline, Record
    from refbench.suites.dss.summary import _power_unrated
    from refbench.suites.dw.summary import _rating_unrated

    # Every time under TPC-H's 0.1 s floor: power is the floor's figure, 3600·SF / 0.1, whatever the engine.
    quick = {f"Q{q}_s": 0.012 for q in range(1, 23)} | {"RF1_s": 0.02, "RF2_s": 0.03, "elapsed_s": 0.5}
    assert _power_unrated(quick) == "24 of 24 times under TPC-H's 0.1 s floor; a larger --sf rates it"
    assert _power_unrated({k: 2.5 for k in quick}) == ""
    # A DW rating stands for at most 100 times the data measured: SF 0.1 cannot rate 0.91 TB.
    assert _rating_unrated([Record({}, extra={"sf": 0.1})], 0.91).endswith("rate with --sf 10 or more")
    assert _rating_unrated([Record({}, extra={"sf": 10})], 0.91) == ""
    power = Headline("duckdb: power", 360.0, "queries/h × SF", "duckdb-power", "power", of="duckdb",
                     unrated=_power_unrated(quick))
    assert figure_items([asdict(power)]) == ["power: not rated at this size (duckdb)"]  # no figure stands for it


@pytest.mark.live
def test_check_refuses_a_threshold_on_a_figure_the_verdict_does_not_rate(tmp_path, refbench):
    """A quick dss run's power is TPC-H's 0.1 s floor's figure, "not rated at this size": a threshold on it, by any of
    its names, fails in one sentence saying why, even when the number would meet it; the case's other figures are
    judged as usual."""
    result = refbench("dss", "--sf", "0.01", "--engines", "duckdb", "--modes", "power", "--runs-dir", "runs")
    assert result.code == 0, result.stderr
    headline, = json.loads((tmp_path / result.last_line / "verdict.json").read_text())[0]["headlines"]
    assert headline["threshold"] == "dss.power.duckdb" and headline["unrated"], headline  # most times under 0.1 s
    accept = tmp_path / "accept.toml"
    accept.write_text('[accept]\n"dss.power.duckdb" = ">= 1"\n"dss.power" = "> 0"\n"dss.duckdb-power.power" = ">= 1"\n'
                      '"dss.duckdb-power.elapsed_s" = "> 0"\n')
    checked = refbench("check", result.last_line, "--runs-dir", "runs", "--accept", str(accept))
    assert checked.code == 3, checked.stderr
    lines = [line.strip() for line in checked.stdout.splitlines()[1:]]
    reason = f"is not rated at this size, so no threshold can judge it: {headline['unrated']})"
    for line, figure in zip(lines, ("dss.power.duckdb", "dss.power", "dss.duckdb-power.power")):
        assert line.startswith(f"FAIL  {figure} ") and f"refused: {figure} (duckdb: power) {reason}" in line, line
    assert lines[3].startswith("pass  dss.duckdb-power.elapsed_s > 0") and len(lines) == 4
    as_json = refbench("check", result.last_line, "--runs-dir", "runs", "--accept", str(accept), "--json").json()
    refused = as_json["accept"][0]
    assert (refused["value"], refused["passed"]) == (headline["value"], False)  # what it measured, not judged


@pytest.mark.live
def test_a_figure_prints_the_same_digits_on_every_surface(tmp_path, refbench):
    """One formatter (formats.figure_said): the terminal's verdict, verdict.json, `why`, the report and `runs` say a
    headline with the digits its repeats' spread allows."""
    import html

    made = refbench("sleepy", "--runs-dir", "runs", "--set", "sleepy.cases=2", "--set", "sleepy.sleep_s=0",
                    "--noise-pct", "10", "--repeats", "3")
    assert made.code == 0, made.stderr
    run = tmp_path / made.last_line
    headline = json.loads((run / "verdict.json").read_text())[0]["headlines"][0]
    said = headline["said"]
    assert re.fullmatch(r"[\d,.]+ ops/s \([\d,.]+–[\d,.]+\)", said), said  # measured 3 times: its range
    assert said in made.stdout and said in refbench("why", str(run)).stdout
    assert html.escape(said) in (run / "report.html").read_text()
    listed = refbench("runs", "--runs-dir", "runs")
    assert said.split(" (")[0] in listed.stdout, listed.stdout
