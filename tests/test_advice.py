"""The verdict's "next" sentences: the limit, its evidence, what to try and the command that tries it."""

from __future__ import annotations

import html
import json
import re
import shlex

import pytest

from refbench.report.advice import Reading, advise
from refbench.report.why import next_steps

FLUSH = ("in all 3 repeats, storage flush latency: 51% of session time waiting (IO:WALSync 32%, LWLock:WALWrite 17%), "
         "0.383 ms per WAL flush on vda (1,295 a second); then CPU 44% (80 samples); host: neither saturated")


def _advise(suite, engine, resource, phrase, storage, unrated, run_path, profile, first_engine, **load):
    """The advice for a run whose only limit is ``resource``."""
    return advise(suite, Reading(suite, engine, resource, [resource], storage), phrase, unrated, run_path, profile,
                  first_engine, [], **load)


def test_a_flush_limit_names_its_evidence_and_the_settings_tune_tries_first_with_their_units():
    said = _advise("oltp", "postgres", "flush", FLUSH, {"hit_ratio_pct": 97.0}, "",
                  "runs/R", "standard", True)
    assert said.sentence.startswith("postgres: storage flush latency: 51% of session time waiting, 0.383 ms per WAL "
                                    "flush on vda (1,295 a second); try commit_delay (µs) and wal_buffers, since commits "
                                    "wait for WAL")
    # The command is tune's own, which tries those first: its dry run says so (test_tune_dry_run_orders_…).
    assert said.command == "refbench tune --suite oltp --baseline runs/R" and said.short == "try commit_delay and wal_buffers"
    assert "memory" not in said.sentence


def test_every_setting_is_said_with_its_unit():
    from refbench.engines.knobs import setting_said, settings_said

    assert setting_said("commit_delay", "230") == "commit_delay=230 µs"
    assert setting_said("innodb_io_capacity", "2000") == "innodb_io_capacity=2000 pages a second"
    assert settings_said({"shared_buffers": "512MB", "wal_compression": "on"}) == "shared_buffers=512MB, wal_compression=on"


def test_from_memory_the_advice_says_how_to_rate_the_storage_first():
    said = _advise("oltp", "postgres", "flush", FLUSH, {"hit_ratio_pct": 99.9}, "",
                  "runs/R", "quick", True)
    assert "measured from memory (cache hit ratio 99.9%), so tuning now tunes an in-memory stack" in said.sentence
    assert "--profile standard" in said.sentence
    unrated = _advise("dss", "duckdb", "cpu", "CPU: 100% of query thread time", {}, "20 of 24 times under 0.1 s",
                     "runs/R", "quick", True)
    assert "not rated at this size (20 of 24 times under 0.1 s)" in unrated.sentence and "try threads, since" in unrated.sentence
    device = _advise("device", "", "device", "vda (84% busy, queue 15.6); the CPU: refbench 42%", {},
                    "", "runs/R", "quick", True)
    # No engine setting addresses a device: the host's do, tried as root.
    assert device.sentence.startswith("a saturated device: vda (84% busy, queue 15.6); try vm.") and "(as root)" in device.sentence
    assert device.command == "refbench tune --suite device --baseline runs/R --apply-host"


def test_another_engine_is_tuned_from_its_own_run_and_limits_no_setting_relieves_say_what_instead():
    other = _advise("dss", "postgres", "read", "storage read latency: 38%", {}, "", "runs/R",
                   "standard", False)
    assert shlex.split(other.command)[:6] == ["refbench", "tune", "--suite", "dss", "--profile", "standard"]
    assert "dss.engines=[\"postgres\"]" in other.command and "--baseline" not in other.command
    # Waiting for a CPU: what to do follows from what held it, as measured.
    for machine, said in (({"others_pct": 40.0}, "measure again on a quiet host"),
                          ({"server_throttled": {"periods": 150, "throttled_periods": 150, "quota_cpus": 0.4}},
                           "lift the server's CPU quota"),
                          ({"others_pct": 2.0, "server_runqueue_avg": 1.3, "cores": 2}, "more cores, or fewer users")):
        starved = _advise("oltp", "postgres", "cpuwait", "waiting for CPU (queued): 87%", {"machine": machine}, "",
                          "runs/R", "quick", True)
        assert starved.command == "" and starved.short.startswith(said), (machine, starved)
    locks = _advise("oltp", "mariadb", "locks", "row locks: 40%", {}, "", "runs/R", "quick", True,
                   load_now=16, warehouses=1)
    assert locks.command == "refbench oltp --warehouses 4"
    offered = _advise("oltp", "postgres", "neither", "neither saturated (CPU 40%)", {}, "",
                     "runs/R", "quick", True, load_now=2)
    assert offered.command == "refbench oltp --users 4,8,16"


@pytest.mark.slow
def test_the_command_the_verdict_prints_runs_the_tune_it_names(tmp_path, refbench):
    base = refbench("run", "--suite", "sleepy", "--set", "sleepy.cases=2", "--set", "sleepy.sleep_s=1.2", "--repeats", "1",
                    "--runs-dir", "runs")
    assert base.code == 0, base.stderr
    run = tmp_path / base.last_line
    verdict = json.loads((run / "verdict.json").read_text())[0]
    step, advice = verdict["next"], verdict["advice"]
    assert step["command"] == f"refbench tune --suite sleepy --baseline runs/{run.name}", step
    assert f"next: {step['short']}" in base.stdout
    assert any(line.endswith(step["command"]) for line in base.stdout.splitlines())  # whole, on a line
    report = (run / "report.html").read_text()  # the evidence, then what to try, in the report's "Why"
    (tried, _), = next_steps(verdict, set())
    assert f"<b>Bottleneck</b>: {html.escape(verdict['bottleneck'])}" in report and html.escape(tried) in report
    advised = step["short"].removeprefix("try ").split(" and ")
    command = shlex.split(step["command"])
    # Tune's own plan: its dry run lists the advised settings first, marked as what limits the run.
    planned = refbench(*command[1:], "--runs-dir", "runs", "--dry-run")
    assert planned.code == 0, planned.stderr
    trials = re.findall(r"^ +\d+\. (\S+): .*?(  ← what limits it)?$", planned.stdout, re.M)
    assert [name for name, first in trials if first] == advised and [name for name, _ in trials][:len(advised)] == advised
    assert not (tmp_path / "runs" / "tune").exists()  # a dry run writes nothing
    tuned = refbench(*command[1:], "--runs-dir", "runs", "--budget", "20m", "--repeats", "2", "--json")
    assert tuned.code == 0, tuned.stderr
    journey = json.loads(tuned.stdout[:tuned.stdout.rindex("}") + 1])
    assert list(journey["steps"][0]["change"]) == advised[:1], journey["steps"]  # the first trial, as advised


def test_every_command_the_advice_prints_runs_as_printed(tmp_path, refbench):
    """Each kind of command a next step gives (more load per suite, more warehouses, the long form of a failed check),
    run as printed with --dry-run: it parses and its plan checks."""
    commands = [_advise(suite, "", "neither", "neither saturated (CPU 40%)", {}, "", "runs/R", "quick", True,
                        load_now=2).command for suite in ("oltp", "device", "dss", "dw", "analytics")]
    commands.append(_advise("oltp", "mariadb", "locks", "row locks: 40%", {}, "", "runs/R", "quick", True,
                            warehouses=1).command)
    for command in commands:
        said = refbench(*shlex.split(command)[1:], "--dry-run")
        assert said.code == 0, (command, said.stderr)


def test_an_oltp_record_without_its_engine_is_advised_postgres_settings_as_tune_tries_them():
    """oltp records before they named their engine: the advice for a flush limit named no setting, while tune tried
    commit_delay first for it."""
    from refbench.engines.knobs import first_trials
    from refbench.records import Record
    from refbench.report.verdict import Limited, tune_reading

    storage = {"waits": {"session_samples": 80, "avg_active_sessions": 1.7, "samples": 80,
                         "events": [{"class": "IO", "event": "WALSync", "share_pct": 60.0},
                                    {"class": "CPU", "event": "CPU", "share_pct": 40.0}]}}
    record = Record({"nopm": 1000.0}, params={"users": 2, "repeat": 1, "warehouses": 1}, extra={"storage": storage})
    reading = tune_reading("oltp", Limited("", "flush", "storage flush latency: 60%", record, "u2-r1", {}), {})
    assert reading.engine == "postgres" and reading.limits[:2] == ["flush", "cpu"]
    said = advise("oltp", reading, "storage flush latency: 60%", "", "runs/R", "quick", True, [])
    assert said.short == "try " + " and ".join(k.name for k in first_trials(reading.trials([]), reading.limits))
    assert said.short == "try commit_delay and wal_buffers" and said.command == "refbench tune --suite oltp --baseline runs/R"
