"""The bottleneck across repeats: each repeat of a headline case is named on its own, the verdict names the limit
that held in most of them and says when it varies; verdict.json keeps each repeat's limit; tune reads the majority."""

from __future__ import annotations

from collections import Counter

import pytest

from conftest import TEST_SUITES
from refbench.engines.waits import profile
from refbench.plan import Plan
from refbench.report.brief import brief_lines
from refbench.report.verdict import name_bottleneck, run_verdict, tune_reading_of
from refbench.runstore import Run
from refbench.suites import Record

FLUSH = {("IO", "WALSync"): 52, ("CPU", "CPU"): 48}
CPU = {("CPU", "CPU"): 54, ("IO", "WALSync"): 46}
HOST = {"samples": 5, "cpu": {"user_pct": 40, "system_pct": 10, "steal_pct": 0},
        "disks": {"vda": {"busy_pct": 45, "avg_queue": 1.5}}}


@pytest.fixture(autouse=True)
def _sleepy(monkeypatch):
    monkeypatch.setenv("REFBENCH_SUITES", TEST_SUITES)


def _waits(events: dict[tuple[str, str], int]) -> dict:
    return profile(Counter(events), {0: Counter({"_ticks": 100, **{k: n for (k, _), n in events.items()}})}, 100,
                   0.1, 0.01, 0.001, None)


def _record(case: str, ops: float, events: dict[tuple[str, str], int], repeat: int | None = None,
            at: float = 0.0) -> Record:
    """A sleepy record (case-001 is the faster: the headline) with a wait profile and its own telemetry window."""
    index = 0 if case.startswith("case-000") else 1
    return Record({"ops_per_s": ops, "lat_ms": 10.0}, suite="sleepy", case_id=case,
                  params={"index": index, **({"repeat": repeat} if repeat else {})},
                  started_epoch_s=1000.0 + at, ended_epoch_s=1010.0 + at, elapsed_s=10.0, telemetry=HOST,
                  extra={"storage": {"waits": _waits(events), "io_latency": {"ms_per_flush": 1.9, "flushes_per_s": 410.0},
                                     "device": "vda"}})


def _run(tmp_path, *headline_repeats: tuple[float, dict]) -> Run:
    """case-000 once, then case-001 measured once per (ops/s, wait events) given."""
    run = Run.create(Plan(runs_dir=str(tmp_path / "runs")), {})
    run.write_record(_record("case-000", 500.0, CPU))
    for k, (ops, events) in enumerate(headline_repeats, start=1):
        run.write_record(_record("case-001" if k == 1 else f"case-001-r{k}", ops, events, k if k > 1 else None, 20.0 * k))
    return run


def _bottleneck(run: Run) -> str:
    verdict, = run_verdict(run)
    # The terminal's verdict says the limit in a few words, the one `refbench why` says in full.
    assert f"limit: {verdict.limit}\n" in "\n".join(brief_lines([verdict.to_dict()], run.path.name, str(run.path), 200))
    return verdict.bottleneck


def test_repeats_that_disagree_name_the_limit_most_held_and_say_that_it_varies(tmp_path):
    # The median repeat (2,050 ops/s) is the CPU-bound one: the verdict still names the limit of the other two.
    run = _run(tmp_path, (2000.0, FLUSH), (2050.0, CPU), (2100.0, FLUSH))
    said = _bottleneck(run)
    assert said.startswith("storage flush latency in 2 of 3 repeats, CPU in 1: storage flush latency: 52% of session "
                           "time waiting (IO:WALSync 52%), 1.9 ms per WAL flush on vda"), said
    verdict, = run_verdict(run)
    assert verdict.headlines[0].case == "case-001" and verdict.headlines[0].value == 2050.0  # the median's figure
    assert verdict.to_dict()["bottleneck_repeats"] == [
        {"case": "case-001", "repeats": ["case-001", "case-001-r2", "case-001-r3"],
         "limits": ["storage flush latency", "CPU", "storage flush latency"]}]
    assert tune_reading_of(run, "sleepy", "case-001").limits[0] == "flush"  # tune addresses the majority's limit first

    # Two CPU-bound of three: CPU, from a CPU-bound repeat's profile.
    run = _run(tmp_path, (2000.0, CPU), (2050.0, FLUSH), (2100.0, CPU))
    assert _bottleneck(run).startswith("CPU in 2 of 3 repeats, storage flush latency in 1: CPU: 54% of session time "
                                       "running (not waiting)")
    assert tune_reading_of(run, "sleepy", "case-001").limits[0] == "cpu"


def test_repeats_that_agree_say_so_briefly_and_a_tie_names_both(tmp_path):
    run = _run(tmp_path, (2000.0, FLUSH), (2050.0, FLUSH), (2100.0, FLUSH))
    assert _bottleneck(run).startswith("in all 3 repeats, storage flush latency: 52% of session time waiting")
    assert run_verdict(run)[0].to_dict()["bottleneck_repeats"][0]["limits"] == ["storage flush latency"] * 3

    # One each: both named, the evidence the median repeat's (the lower of two: the CPU-bound one).
    run = _run(tmp_path, (2100.0, FLUSH), (2000.0, CPU))
    assert _bottleneck(run).startswith("CPU in 1 of 2 repeats, storage flush latency in 1 (a tie): CPU: 54% of session")


def test_a_case_measured_once_is_named_as_before(tmp_path):
    run = _run(tmp_path, (2000.0, FLUSH))
    record = next(r for r in run.records("sleepy") if r.case_id == "case-001")
    assert _bottleneck(run) == name_bottleneck(record, HOST)[1]
    assert "repeats" not in _bottleneck(run)
    assert run_verdict(run)[0].to_dict()["bottleneck_repeats"] == []
    assert tune_reading_of(run, "sleepy", "case-001").limits == ["flush", "cpu", "neither"]
