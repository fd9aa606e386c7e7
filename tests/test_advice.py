"""The verdict's "next" sentences: the limit, its evidence, what to try and the command that tries it."""

from __future__ import annotations

import html
import json
import shlex

import pytest

from refbench.report.advice import advise

FLUSH = ("in all 3 repeats, storage flush latency: 51% of session time waiting (IO:WALSync 32%, LWLock:WALWrite 17%), "
         "0.383 ms per WAL flush on vda (1,295 a second); then CPU 44% (80 samples); host: neither saturated")


def test_a_flush_limit_names_its_evidence_and_the_settings_tune_tries_first_with_their_units():
    said = advise("oltp", "postgres", "flush", "storage flush latency", FLUSH, {"hit_ratio_pct": 97.0}, "",
                  "runs/R", "standard", True, [])
    assert said.sentence.startswith("postgres: storage flush latency: 51% of session time waiting, 0.383 ms per WAL "
                                    "flush on vda (1,295 a second); try commit_delay (µs) and wal_buffers, since commits "
                                    "wait for WAL")
    assert said.command == "refbench tune --suite oltp --baseline runs/R --only commit_delay,wal_buffers"
    assert "memory" not in said.sentence


def test_every_setting_is_said_with_its_unit():
    from refbench.engines.knobs import setting_said, settings_said

    assert setting_said("commit_delay", "230") == "commit_delay=230 µs"
    assert setting_said("innodb_io_capacity", "2000") == "innodb_io_capacity=2000 pages a second"
    assert settings_said({"shared_buffers": "512MB", "wal_compression": "on"}) == "shared_buffers=512MB, wal_compression=on"


def test_from_memory_the_advice_says_how_to_rate_the_storage_first():
    said = advise("oltp", "postgres", "flush", "storage flush latency", FLUSH, {"hit_ratio_pct": 99.9}, "",
                  "runs/R", "quick", True, [])
    assert "measured from memory (cache hit ratio 99.9%), so tuning now tunes an in-memory stack" in said.sentence
    assert "--profile standard" in said.sentence
    unrated = advise("dss", "duckdb", "cpu", "CPU", "CPU: 100% of query thread time", {}, "20 of 24 times under 0.1 s",
                     "runs/R", "quick", True, [])
    assert "not rated at this size (20 of 24 times under 0.1 s)" in unrated.sentence and "try threads, since" in unrated.sentence
    device = advise("device", "", "device", "a saturated device", "vda (84% busy, queue 15.6); the CPU: refbench 42%", {},
                    "", "runs/R", "quick", True, [])
    assert device.sentence.startswith("a saturated device: vda (84% busy, queue 15.6); no device setting")


def test_another_engine_is_tuned_from_its_own_run_and_limits_no_setting_relieves_say_what_instead():
    other = advise("dss", "postgres", "read", "storage read latency", "storage read latency: 38%", {}, "", "runs/R",
                   "standard", False, [])
    assert shlex.split(other.command)[:6] == ["refbench", "tune", "--suite", "dss", "--profile", "standard"]
    assert "dss.engines=[\"postgres\"]" in other.command and "--baseline" not in other.command
    starved = advise("oltp", "postgres", "cpuwait", "waiting for CPU", "waiting for CPU (queued): 87%", {}, "",
                     "runs/R", "quick", True, [])
    assert starved.command == "" and "quiet host" in starved.sentence
    locks = advise("oltp", "mariadb", "locks", "row locks", "row locks: 40%", {}, "", "runs/R", "quick", True, [],
                   load_now=16, warehouses=1)
    assert locks.command == "refbench oltp --warehouses 4"
    offered = advise("oltp", "postgres", "neither", "the load offered", "neither saturated (CPU 40%)", {}, "",
                     "runs/R", "quick", True, [], load_now=2)
    assert offered.command == "refbench oltp --users 4,8,16"


@pytest.mark.slow
def test_the_command_the_verdict_prints_runs_the_tune_it_names(tmp_path, refbench):
    base = refbench("run", "--suite", "sleepy", "--set", "sleepy.cases=2", "--set", "sleepy.sleep_s=1.2", "--repeats", "1",
                    "--runs-dir", "runs")
    assert base.code == 0, base.stderr
    run = tmp_path / base.last_line
    advice = json.loads((run / "verdict.json").read_text())[0]["advice"]
    assert advice and advice[0]["command"].startswith("refbench tune --suite sleepy --baseline "), advice
    assert f"next: {advice[0]['text']}" in base.stdout  # the terminal's words are verdict.json's
    assert html.escape(advice[0]["sentence"]) in (run / "report.html").read_text()  # and the report's
    command = shlex.split(advice[0]["command"])
    tuned = refbench(*command[1:], "--runs-dir", "runs", "--budget", "20m", "--repeats", "2", "--json")
    assert tuned.code == 0, tuned.stderr
    journey = json.loads(tuned.stdout[:tuned.stdout.rindex("}") + 1])
    tried = {name for step in journey["steps"] for name in step["change"]}
    assert tried and tried <= set(command[-1].split(",")), journey["steps"]
