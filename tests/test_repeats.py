"""Repeats of the headline cases (--repeats): which cases, in which order, what the tables see, what compare
learns from them about this host's noise."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from conftest import cli_env, refbench_command
from refbench.suites.repeats import one_per_configuration, repeat_cases, repeat_id
from refbench.suites import Case, Headline, Record, Table
from test_report import _run


class TwoTargets:
    """A suite whose headlines come from one case of each of two targets."""

    name = "two"

    def summarize(self, records):
        return [Table("all", "all", [{"case": r.case_id} for r in records])]

    def headlines(self, records, tables):
        out = []
        for target in ("t0", "t1"):
            best = max((r for r in records if r.params["target"] == target), key=lambda r: r.metrics["iops"])
            out.append(Headline(f"{target} peak", best.metrics["iops"], "IOPS", best.case_id, "iops"))
        return out


def _record(case: Case, iops: float, lat: float = 1.0) -> Record:
    return Record({"lat_ms": lat, "iops": iops}, suite="two", case_id=case.id, params=dict(case.params))


def test_the_headline_cases_are_measured_again_round_after_round():
    cases = [Case(f"{t}-qd{q}", {"target": t, "qd": q}) for t in ("t0", "t1") for q in (1, 32)]
    records = [_record(c, 100 * c.params["qd"] + (5 if c.params["target"] == "t1" else 0)) for c in cases]
    again = repeat_cases(TwoTargets(), cases, records, 3)
    # t0's and t1's peak points, A B A B: a drift of the host falls on both alike
    assert [c.id for c in again] == ["t0-qd32-r2", "t1-qd32-r2", "t0-qd32-r3", "t1-qd32-r3"]
    assert again[0].params == {"target": "t0", "qd": 32, "repeat": 2}
    assert repeat_cases(TwoTargets(), cases, records, 1) == []
    # A resumed run repeats the same cases whatever its repeats measured since.
    later = records + [_record(again[0], 1.0), _record(again[1], 99_999.0)]
    assert repeat_cases(TwoTargets(), cases, later, 3) == again
    assert repeat_id(Case("u4-r1", {"users": 4, "repeat": 1}), 3) == "u4-r3"  # a case that numbers itself


def test_a_headline_that_moved_after_the_repeats_to_a_case_measured_once_is_repeated_too():
    cases = [Case(f"{t}-qd{q}", {"target": t, "qd": q}) for t in ("t0", "t1") for q in (1, 32)]
    first = {("t0", 1): 250, ("t0", 32): 300, ("t1", 1): 10, ("t1", 32): 20}
    records = [_record(c, first[(c.params["target"], c.params["qd"])]) for c in cases]
    again = repeat_cases(TwoTargets(), cases, records, 3)
    assert [c.id for c in again] == ["t0-qd32-r2", "t1-qd32-r2", "t0-qd32-r3", "t1-qd32-r3"]
    # t0-qd32's repeats fall below t0-qd1's one measurement: t0's headline moves to qd1, which is repeated too.
    later = records + [_record(c, iops) for c, iops in zip(again, (100, 20, 120, 20))]
    recorded = {r.case_id for r in later}
    moved = repeat_cases(TwoTargets(), cases, later, 3, after_repeats=True)
    assert [c.id for c in moved if c.id not in recorded] == ["t0-qd1-r2", "t0-qd1-r3"]
    # Once measured, nothing is left to repeat, whichever way the medians fall now.
    done = later + [_record(c, 1) for c in moved if c.id not in recorded]
    assert all(c.id in {r.case_id for r in done} for c in repeat_cases(TwoTargets(), cases, done, 3, after_repeats=True))


def test_the_tables_see_each_configuration_once_as_its_median_repeat():
    case = Case("t0-qd32", {"target": "t0", "qd": 32})
    # The headline figure (iops) decides the median, not the first figure that differs (lat_ms).
    repeats = [_record(case, 300, lat=9), _record(Case("t0-qd32-r2", {**case.params, "repeat": 2}), 100, lat=1),
               _record(Case("t0-qd32-r3", {**case.params, "repeat": 3}), 200, lat=5)]
    other = _record(Case("t1-qd32", {"target": "t1", "qd": 32}), 50)
    merged = one_per_configuration(repeats + [other], TwoTargets())
    assert len(merged) == 2 and merged[1] is other
    median = merged[0]
    assert median.case_id == "t0-qd32" and median.metrics == {"lat_ms": 5, "iops": 200}
    assert median.extra["repeats"] == {"n": 3, "metric": "iops", "values": [300, 100, 200],
                                       "cases": ["t0-qd32", "t0-qd32-r2", "t0-qd32-r3"], "median_case": "t0-qd32-r3"}
    assert one_per_configuration([other]) == [other]
    # Each figure its own repeats' median: lat_ms 6, 1, 9 gives r1's 6, beside iops' r3; the rest is r3's.
    repeats[0].metrics["lat_ms"], repeats[2].metrics["lat_ms"], repeats[2].extra["seen"] = 6, 9, "r3's"
    merged = one_per_configuration(repeats + [other], TwoTargets())[0]
    assert merged.metrics == {"lat_ms": 6, "iops": 200} and merged.extra["seen"] == "r3's"


@pytest.mark.live
def test_a_run_with_repeats_says_so_and_gives_compare_this_hosts_noise(tmp_path, refbench):
    a = _run(refbench, tmp_path, "--set", "sleepy.cases=2", "--noise-pct", "10", "--repeats", "3")
    records = sorted(p.stem for p in (a / "records" / "sleepy").glob("*.json"))
    assert records == ["case-000", "case-001", "case-001-r2", "case-001-r3"]  # case-001 is the faster: the headline
    headline, = json.loads((a / "verdict.json").read_text())[0]["headlines"]
    assert headline["case"] == "case-001" and headline["repeats"] == 3 and headline["repeat"].startswith("case-001")
    assert headline["low"] < headline["value"] < headline["high"] and headline["spread"] == headline["high"] - headline["low"]
    b = _run(refbench, tmp_path, "--set", "sleepy.cases=2", "--noise-pct", "10", "--seed", "2", "--speed", "1.5")
    result = refbench("compare", str(a), str(b), "--json", "--all")
    assert result.code == 0, result.stderr
    rows = {(f["case"], f["metric"]): f for f in result.json()["figures"]}
    measured = rows[("case-000", "ops_per_s")]  # once a side: tested against the spread the repeats measured
    assert measured["basis"].startswith("1 vs 1, against this host's spread of ")
    assert "3 repeats of other sleepy cases in 1 run on this host" in measured["basis"]
    assert measured["answer"] == "faster" and measured["ci_low"] > 1  # 1.5 times as fast: far beyond it
    # lat_ms does not spread at all over the repeats: a spread of 0 is no spread to test with
    assert rows[("case-000", "lat_ms")]["answer"] == "cannot tell"
    text = refbench("compare", str(a), str(b), "--runs-dir", str(tmp_path / "runs")).stdout
    assert "1 a side: tested against this host's spread of " in text, text


@pytest.mark.live
def test_every_profile_repeats_its_headline_cases_three_times_and_the_dry_run_shows_the_cost(tmp_path):
    env = cli_env()
    env.pop("REFBENCH_REPEATS")  # the suite's own default for tests (conftest): here, the profile's
    plan = Path(__file__).parents[1] / "plans" / "quick.toml"
    shown = subprocess.run(refbench_command("run", "--plan", str(plan), "--dry-run"), capture_output=True, text=True,
                           env=env, cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert re.search(r"repeats +profile default \(quick\) +3", shown.stdout), shown.stdout
    text = " ".join(shown.stdout.split())
    took, alone = re.search(r"they take about (.+?) of it \(--repeats 1: about (.+?);", text).groups()
    assert took != "0 s" and alone in text  # the cost of the repeats, and the time without them
    one = subprocess.run(refbench_command("run", "--plan", str(plan), "--dry-run"), capture_output=True, text=True,
                         env={**env, "REFBENCH_REPEATS": "1"}, cwd=tmp_path)
    assert re.search(r"repeats +environment \$REFBENCH_REPEATS +1", one.stdout) and "they take about" not in one.stdout
    bad = subprocess.run(refbench_command("run", "--plan", str(plan), "--dry-run"), capture_output=True, text=True,
                         env={**env, "REFBENCH_REPEATS": "many"}, cwd=tmp_path)
    assert bad.returncode == 2 and bad.stderr.strip() == "refbench: $REFBENCH_REPEATS must be an integer, not 'many'."
