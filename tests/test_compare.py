"""compare on real runs of the test suite: ratios, what counts as a change, what is printed and written."""

from __future__ import annotations

import csv
import io
import re
import subprocess
from pathlib import Path

import pytest

from conftest import cli_env, refbench_command
from test_report import _run


@pytest.mark.live
def test_compare_two_runs_gives_ratios_and_each_compare_writes_its_own_file(tmp_path, refbench):
    a = _run(refbench, tmp_path, "--name", "slow")
    b = _run(refbench, tmp_path, "--name", "fast", "--speed", "2")
    result = refbench("compare", str(a), str(b), "--json", "--all")
    assert result.code == 0, result.stderr
    data = result.json()
    figures = {(f["case"], f["metric"]): f for f in data["figures"]}
    assert len({case for case, _ in figures}) == 4
    assert figures[("case-000", "ops_per_s")]["B vs A"] == "2.00× faster"
    assert figures[("case-000", "lat_ms")]["B vs A"] == "2.00× faster"  # half the latency
    assert figures[("case-000", "busy_pct")]["B vs A"] == "1.00× A"  # no better direction
    # Measured once a side, and no repeats on this host yet: nothing to test with, whatever the seconds say.
    once = figures[("case-003", "ops_per_s")]
    assert once["basis"] == "1 measurement a side, and no measured spread of this figure on this host"
    assert once["answer"] == "cannot tell" and not once["significant"] and once["ci_low"] is None
    assert "--repeats 3" in once["why"]
    html = Path(data["html"]).read_text()
    assert "Configurations" in html and "2.00× faster" in html

    # Once this host's spread is measured (a run with repeats), the same two runs are tested against it.
    _run(refbench, tmp_path, "--name", "spread", "--repeats", "3", "--noise-pct", "5")
    reverse = refbench("compare", str(b), str(a), "--runs-dir", str(tmp_path / "runs"))
    assert reverse.code == 0, reverse.stderr
    assert "busy_pct" not in reverse.stdout and "lat_ms" not in reverse.stdout  # counted, not shown:
    lines = reverse.stdout.splitlines()
    assert re.fullmatch(r"sleepy: 2\.00× slower \(\d\.\d\d–\d\.\d\d\); 1 slower; \d+ of \d+ others changed", lines[1]), lines
    # the headline figure, B / A with the interval its answer used, the replicates a side, the answer
    assert re.fullmatch(r"  ops/s, case-003 +0\.50× \(0\.\d\d–0\.\d\d\) +1 vs 1 +slower", lines[3]), lines
    assert any(line.startswith("1 a side: tested against this host's spread of ") for line in lines), lines
    assert "lat_ms" in refbench("compare", str(b), str(a), "--all", "--runs-dir", str(tmp_path / "runs")).stdout

    # Every compare of the same runs that shows something else writes a file of its own.
    written = {}
    for extra in ([], ["--metric", "lat"], ["--all"], ["--metric", "lat", "--all"]):
        result = refbench("compare", str(a), str(b), *extra)
        assert result.code == 0, result.stderr
        path = Path(result.stderr.strip().splitlines()[-1].removeprefix("comparison: "))
        assert path not in written.values() and a.name in path.name and b.name in path.name
        written[tuple(extra)] = path
    assert len({p.read_text() for p in written.values()}) == 4  # none overwrote another
    assert "ops_per_s" not in written[("--metric", "lat")].read_text()


@pytest.mark.live
def test_two_runs_of_the_same_values_are_short_and_say_no_change(tmp_path, refbench):
    # The same seed: the same noise, so the same figures (but the seconds each case took).
    a, b = (_run(refbench, tmp_path, "--set", "sleepy.cases=40", "--noise-pct", "10") for _ in range(2))
    result = refbench("compare", str(a), str(b))
    assert result.code == 0, result.stderr
    assert len(result.stdout.splitlines()) <= 25, result.stdout
    assert result.stdout.splitlines()[1].startswith("sleepy: no change: identical values; 1 same; "), result.stdout
    answer, = [line for line in result.stdout.splitlines()[2:] if line.startswith("  ops")]  # the headline, and only it
    assert answer.split() == ["ops/s,", "case-039", "1.00×", "1", "vs", "1", "same"]
    everything = refbench("compare", str(a), str(b), "--all")
    assert len(everything.stdout.splitlines()) > 160  # 40 cases × 4 figures: the default leaves them out


@pytest.mark.live
def test_a_run_named_twice_is_one_replicate_and_a_run_on_two_sides_is_refused(tmp_path, refbench):
    a, b = (_run(refbench, tmp_path, "--set", "sleepy.cases=1", "--noise-pct", "20", "--seed", str(seed))
            for seed in (1, 2))
    once = refbench("compare", str(a), str(b), "--json", "--all")
    thrice = refbench("compare", f"{a},{a.name},{a}", f"{b},{b},{b}", "--json", "--all")
    assert thrice.code == 0, thrice.stderr
    assert [f["n"] for f in thrice.json()["figures"]] == [f["n"] for f in once.json()["figures"]] != []
    assert thrice.json()["lines"] == once.json()["lines"]
    assert thrice.stderr.splitlines()[:2] == [
        f"A names {a.name} more than once: a run is one replicate, so it counts once.",
        f"B names {b.name} more than once: a run is one replicate, so it counts once."], thrice.stderr
    pages = set((tmp_path / "runs").glob("compare-*"))
    for sides in ((str(a), a.name), (f"{a},{b}", str(a)), (str(a), str(b), str(b))):
        refused = refbench("compare", *sides)
        assert refused.code == 2 and len(refused.stderr.strip().splitlines()) == 1, refused.stderr
        assert "is on two sides" in refused.stderr and "can be on one side only" in refused.stderr
    assert set((tmp_path / "runs").glob("compare-*")) == pages, "a refused comparison wrote its page"

    from test_dashboard import Server, _get

    server = Server(tmp_path)
    try:
        status, page = _get(server.base + f"compare?run={a.name},{b.name}&run={a.name}")
    finally:
        server.stop()
    assert status == 400 and "can be on one side only" in page, page


@pytest.mark.live
def test_noise_is_not_a_change_and_runs_or_repeats_are_the_replicates(tmp_path, refbench):
    # Runs of one case with ±20% noise: A and B differ only by the noise's seed (three repeats each), C is 1.5
    # times as fast, measured once.
    common = ("--set", "sleepy.cases=1", "--noise-pct", "20")
    a = _run(refbench, tmp_path, *common, "--seed", "1", "--repeats", "3")
    b = _run(refbench, tmp_path, *common, "--seed", "2", "--repeats", "3")
    c = _run(refbench, tmp_path, *common, "--seed", "3", "--speed", "1.5")
    result = refbench("compare", str(a), str(b), str(c), "--json")
    assert result.code == 0, result.stderr
    rows = {(f["vs"], f["case"], f["metric"]): f for f in result.json()["figures"]}
    noise, faster = rows[("B", "case-000", "ops_per_s")], rows[("C", "case-000", "ops_per_s")]
    assert noise["A"] != noise["B"] and not noise["significant"]
    assert noise["basis"] == "Student's pooled t-test on the logarithms, 3 vs 3 replicates"
    assert noise["headline"]  # the case of the repeats (case-000, -r2, -r3) is the headline
    assert faster["significant"] and faster["p"] < 0.05 and faster["n"] == [3, 1]
    assert faster["basis"].startswith("3 vs 1, against this host's spread of ")
    assert faster["ci_low"] > 1  # the interval the answer used excludes 1
    assert ("B", "case-000", "busy_pct") not in rows  # the same in all three: neither headline nor change

    two = refbench("compare", str(a), str(b), "--metric", "ops_per_s")
    assert two.code == 0 and "no significant change" in two.stdout.splitlines()[1], two.stdout
    three = refbench("compare", str(a), str(b), str(c), "--metric", "ops_per_s")
    lines = three.stdout.splitlines()
    assert lines[1].startswith("sleepy (B against A): no significant change"), lines
    assert next(line for line in lines if line.startswith("sleepy (C against A)")).split(": ")[1].startswith("1.5")
    # Two runs a side: each run one replicate (the mean of its repeats).
    d = _run(refbench, tmp_path, *common, "--seed", "4", "--speed", "1.5")
    sides = refbench("compare", f"{a},{b}", f"{c},{d}", "--json", "--metric", "ops_per_s")
    assert sides.code == 0, sides.stderr
    row, = [f for f in sides.json()["figures"] if f["case"] == "case-000"]
    assert row["n"] == [2, 2] and row["basis"] == "Student's pooled t-test on the logarithms, 2 vs 2 replicates"
    assert f"A = {a.name},{b.name}" in refbench("compare", f"{a},{b}", f"{c},{d}").stdout


@pytest.mark.live
def test_a_disturbed_repeat_is_left_out_and_said_not_its_whole_side(tmp_path, refbench):
    import json

    common = ("--set", "sleepy.cases=1", "--noise-pct", "5", "--repeats", "3")
    a, b, c = (_run(refbench, tmp_path, *common, "--seed", str(seed)) for seed in (1, 2, 3))
    for run, repeats in ((b, ("-r2",)), (c, ("", "-r2", "-r3"))):  # one of B's repeats, all of C's
        for repeat in repeats:
            path = run / "records" / "sleepy" / f"case-000{repeat}.json"
            record = json.loads(path.read_text())
            record["extra"]["disturbed"] = "other processes used 40% of the CPU"
            path.write_text(json.dumps(record))
    result = refbench("compare", str(a), str(b), str(c), "--json", "--metric", "ops_per_s")
    assert result.code == 0, result.stderr
    rows = {f["vs"]: f for f in result.json()["figures"] if f["case"] == "case-000"}
    assert rows["B"]["n"] == [3, 2] and rows["B"]["answer"] != "not compared", rows["B"]
    assert rows["B"]["left_out"] == "B: 1 of 3 repeats left out, disturbed: other processes used 40% of the CPU"
    assert rows["C"]["answer"] == "not compared" and rows["C"]["why"].startswith("disturbed: C: other processes")
    # A side of runs: C, disturbed throughout, is left out of the side {B, C}.
    sides = refbench("compare", str(a), f"{b},{c}", "--json", "--metric", "ops_per_s")
    row, = [f for f in sides.json()["figures"] if f["case"] == "case-000"]
    assert row["answer"] != "not compared" and row["left_out"].startswith("B: 1 of 2 runs left out"), row
    shown = refbench("compare", str(a), str(b), "--metric", "ops_per_s")
    assert "B: 1 of 3 repeats left out, disturbed: other processes used 40% of the CPU" in shown.stdout, shown.stdout
    assert "measured" not in shown.stdout  # one run a side, one after the other: nothing to say
    # B measured two hours after A: said, with what would tell drift from change.
    meta = json.loads((b / "run.json").read_text())
    meta["started_utc"], meta["ended_utc"] = "2099-01-01T02:00:00Z", "2099-01-01T02:01:00Z"
    (b / "run.json").write_text(json.dumps(meta))
    meta = json.loads((a / "run.json").read_text())
    meta["started_utc"], meta["ended_utc"] = "2099-01-01T00:00:00Z", "2099-01-01T00:01:00Z"
    (a / "run.json").write_text(json.dumps(meta))
    apart = refbench("compare", str(a), str(b), "--metric", "ops_per_s")
    assert "B measured 119 min after A, not in turn with it: a change may be this host's drift" in \
        " ".join(apart.stdout.split()), apart.stdout


@pytest.mark.live
def test_compare_needs_two_runs_and_its_help_fits_80_columns(tmp_path, refbench):
    run = _run(refbench, tmp_path)
    alone = refbench("compare", str(run))
    assert alone.code == 2 and "at least two runs" in alone.stderr and len(alone.stderr.strip().splitlines()) == 1
    shown = subprocess.run(refbench_command("compare", "--help"), capture_output=True, text=True,
                           env=cli_env(COLUMNS="80", TERM="dumb"))
    assert shown.returncode == 0 and all(len(line) <= 80 for line in shown.stdout.splitlines())
    for flag in ("--all", "--metric", "--out", "--json", "--runs-dir", "refbench compare", "RUN,RUN", "--format",
                 "--format markdown", "--format csv"):
        assert flag in shown.stdout
    text = " ".join(shown.stdout.split())
    assert "never the seconds of one run" in text and "Bonferroni" in text and "--repeats 3" in text


@pytest.mark.live
def test_a_side_of_several_runs_compares_whatever_case_each_run_repeated(tmp_path, refbench):
    """OLTP numbers a case's first measurement ("u2-r1") and repeats only the best load level: a case repeated in
    one run and measured once in another is still one figure, on the command line and on the dashboard."""
    from test_dashboard import Server, _get

    numbered = ("--set", "sleepy.numbered=true", "--repeats", "2", "--noise-pct", "5", "--seed", "0")
    # The headline (and so the repeated case) is the last case: case-001 in A's runs, case-002 in B.
    a1, a2 = (_run(refbench, tmp_path, *numbered, "--set", "sleepy.cases=2") for _ in range(2))
    b = _run(refbench, tmp_path, *numbered, "--set", "sleepy.cases=3")
    result = refbench("compare", f"{a1},{a2}", str(b), "--json", "--all", "--metric", "ops_per_s")
    assert result.code == 0, result.stderr
    rows = {f["case"]: f for f in result.json()["figures"]}
    assert {"case-000", "case-001", "case-001 → case-002"} == set(rows), rows  # case-001: repeated in A, once in B
    assert rows["case-001"]["n"] == [2, 1] and rows["case-000"]["n"] == [2, 1]
    shown = refbench("compare", str(a1), str(a2), str(b), "--runs-dir", str(tmp_path / "runs"))
    assert shown.code == 0 and "the runs share no figures" not in shown.stdout, shown.stdout
    assert re.search(r"^sleepy \(C against A\): ", shown.stdout, re.M), shown.stdout

    server = Server(tmp_path)
    try:
        status, page = _get(server.base + f"compare?run={a1.name},{a2.name}&run={b.name}&all=1&metric=ops_per_s")
    finally:
        server.stop()
    assert status == 200, page
    assert f"A = {a1.name},{a2.name}" in page and f"B = {b.name}" in page
    assert "case-000" in page and "case-001" in page and "2 vs 1" in page


def test_the_ratio_and_its_interval_come_from_a_t_test_on_the_logarithms():
    import math

    from refbench import estimate

    # logarithms 0, 1, 2 against 1, 2, 3: Student's t = 1.2247 with 4 degrees of freedom, two-sided p = 0.2879
    a, b = [math.exp(v) for v in (0, 1, 2)], [math.exp(v) for v in (1, 2, 3)]
    test = estimate.ratio(a, b)
    assert test.p == pytest.approx(0.2879, abs=1e-3) and test.low < math.e < test.high and test.log_sd == pytest.approx(1.0)
    # every replicate equal on each side (a figure rounded coarser than it spreads): no spread measured, so
    # "cannot tell" — unless this host's spread of the figure is known, which then judges the difference
    same = estimate.ratio([5, 5, 5], [6, 6, 6])
    assert same.p is None and same.ratio == pytest.approx(1.2) and estimate.answer(same, 1)[0] == "cannot tell"
    assert estimate.ratio([5, 5, 5], [5, 5, 5]).p == 1.0
    known = estimate.ratio([5, 5, 5], [6, 6, 6], spread=estimate.Spread(0.02, 8, "8 repeats"))
    assert known.significant and known.low > 1
    # equal sizes: Student's pooled test, whose degrees of freedom stay 2n − 2 when one side spreads more
    uneven = estimate.ratio([100, 101, 99], [110, 130, 90])
    assert uneven.df == 4 and uneven.basis.startswith("Student's pooled t-test")
    assert estimate.ratio([100, 101, 99, 100], [110, 130, 90]).basis.startswith("Welch's t-test")
    # the noisier the host, the more repeats a 5% change needs
    assert estimate.repeats_to_resolve(0.01) < estimate.repeats_to_resolve(0.03) < estimate.repeats_to_resolve(0.05)
    # A host this quiet resolves 5% at two a side (a million simulated pairs: every one found it), where the
    # noncentral t's tail is NaN in SciPy.
    assert estimate.repeats_to_resolve(0.0014) == 2
    # one a side: tested only against a measured spread
    assert estimate.ratio([100], [130]).p is None
    against = estimate.ratio([100], [130], spread=estimate.Spread(0.02, 8, "8 repeats"))
    assert against.significant and against.low > 1
    # two replicates a million apart, in a family of a thousand: an interval past what a float holds is infinite
    wild = estimate.ratio([1, 1e6], [2, 3]).adjusted(1000, "1,000 figures")
    assert wild.high == math.inf and not wild.significant


def test_an_interval_and_its_answer_never_disagree_in_a_family():
    """Bonferroni over the headline figures, false-coverage intervals over the others: an interval excludes 1
    exactly when the answer is a change, for every figure of 300 simulated comparisons."""
    import numpy as np

    from refbench import estimate

    rng = np.random.default_rng(40)
    for _ in range(300):
        change = rng.choice([1.0, 1.03, 1.1])
        raw = [estimate.ratio(100 * np.exp(rng.normal(0, 0.05, 3)), 100 * change * np.exp(rng.normal(0, 0.05, 3)))
               for _ in range(12)]
        for family in (estimate.bonferroni(raw[:4], "headline figures"), estimate.false_discovery(raw[4:], "others")):
            for e in family:
                word, _ = estimate.answer(e, 1)
                excludes = e.low > 1 or e.high < 1
                assert excludes == (word in ("faster", "slower")), (e, word)
                assert not (excludes and word == "cannot tell")


def _same_or_changed(rng, change: float, spread: float = 0.05):
    """The headline answers of one comparison as compare makes them: 6 headline figures measured 3 times a side
    (``spread``: the sd of a logarithm), B ``change`` times A; True for each said to change."""
    import numpy as np

    from refbench import estimate

    raw = [estimate.ratio(list(100 * np.exp(rng.normal(0, spread, 3))), list(100 * change * np.exp(rng.normal(0, spread, 3))))
           for _ in range(6)]
    return [e.significant for e in estimate.bonferroni(raw, "headline figures")]


def test_two_runs_of_one_configuration_report_a_change_less_than_one_time_in_twenty():
    """The false-change rate of a whole comparison (any of its headline figures said to change) over 400 simulated
    comparisons of one configuration with itself; and the same rule finds a 20% change in most figures when runs
    spread by 3% (three a side, six figures in the family: at 5% it finds a third of them, and says so)."""
    import numpy as np

    rng = np.random.default_rng(2026)
    false_changes = sum(any(_same_or_changed(rng, 1.0)) for _ in range(400)) / 400
    assert false_changes <= 0.05
    found = sum(sum(_same_or_changed(rng, 1.2, spread=0.03)) for _ in range(20)) / (20 * 6)
    assert found > 0.6


def test_which_way_is_better_for_each_kind_of_figure():
    from refbench.report.compare import direction, verdict

    assert [direction(m) for m in ("iops", "read_mb_s", "mb_s", "nopm", "tpm", "power")] == [1] * 6
    assert [direction(m) for m in ("read_lat_p99_us", "new_order_lat_avg_ms", "elapsed_s")] == [-1, -1, -1]
    assert [direction(m) for m in ("runtime_s", "measured_s", "db_cpu_s", "device_busy_pct", "steady_state_at_s")] == [0] * 5
    assert verdict("read_lat_p99_us", 200.0, 100.0) == (2.0, "2.00× faster")
    assert verdict("iops", 1000.0, 995.0)[1] == "same"


@pytest.mark.live
def test_runs_of_one_configuration_give_this_hosts_run_to_run_spread(tmp_path, refbench):
    from refbench import estimate
    from refbench.catalog import Catalog
    from refbench.figures import Figure, configuration
    from refbench.report.compare import estimate_change
    from refbench.runstore import Run

    # seed 0: each run draws its own noise, as a real measurement does; the three plans are one configuration
    made = [_run(refbench, tmp_path, "--set", "sleepy.cases=1", "--noise-pct", "20", "--seed", "0", "--repeats", "2")
            for _ in range(3)]
    _run(refbench, tmp_path, "--set", "sleepy.cases=1", "--noise-pct", "20", "--seed", "0", "--speed", "3")  # another
    run = Run(made[0])
    with Catalog(made[0].parent) as catalog:
        catalog.update()
        spreads = catalog.spreads(run.meta.get("host"), run.plan.profile, [("sleepy", "case-000", "ops_per_s")],
                                  {configuration(run.meta["plan"])})[("sleepy", "case-000", "ops_per_s")]
    assert re.fullmatch(r"3 runs of this configuration on this host, \d{4}-\d\d-\d\d \d\d:\d\d(–\d\d:\d\d)? UTC",
                        spreads["runs"].source) and spreads["runs"].df == 2, spreads["runs"].source
    assert spreads["repeats"].source == "6 repeats in 3 runs on this host"

    # Repeats within each run that agree closely, runs that do not: the run is the replicate, the wider interval kept.
    a, b = Figure(100, [99.9, 100, 100.1], "3 repeats"), Figure(104, [103.9, 104, 104.1], "3 repeats")
    assert estimate_change(a, b, {}).significant  # the repeats alone would call it
    wide = estimate_change(a, b, {"runs": estimate.Spread(0.05, 6, "7 runs of this configuration on this host")})
    assert not wide.significant and "7 runs of this configuration" in wide.basis and wide.n == (1, 1)
    # What would tell is more of what spread: runs here, not repeats of one run.
    assert "runs a side, taken in turn" in estimate.answer(wide, 1)[1], estimate.answer(wide, 1)
    close = estimate_change(a, Figure(101.7, [95, 102, 108], "3 repeats"), {})
    assert estimate.answer(close, 1)[1].startswith("repeats spread by") and "--repeats " in estimate.answer(close, 1)[1]


def test_runs_taken_in_turn_are_compared_pair_by_pair():
    from refbench.figures import Figure
    from refbench.report.compare import estimate_change

    # The host drifts 10% a pair; B is 3% faster within each pair. Unpaired, the drift hides it; paired, it cancels.
    a_values, b_values = [100, 110, 121, 133], [103, 113.4, 124.4, 137.2]
    a_started, b_started = [0, 200, 400, 600], [100, 300, 500, 700]
    in_turn = estimate_change(Figure(116, a_values, "4 runs", started=a_started),
                              Figure(119.5, b_values, "4 runs", started=b_started), {})
    assert in_turn.basis == "paired t-test on the logarithms, 4 pairs of runs taken in turn", in_turn.basis
    assert in_turn.significant and 1.02 < in_turn.low < in_turn.ratio < in_turn.high < 1.04
    # The same values with every B after every A: not in turn, so not paired, and the drift is part of the noise.
    after = estimate_change(Figure(116, a_values, "4 runs", started=a_started),
                            Figure(119.5, b_values, "4 runs", started=[800, 900, 1000, 1100]), {})
    assert after.basis.startswith("Student's pooled") and not after.significant


def test_the_figures_of_one_case_count_once_in_a_suites_effect():
    """NOPM and TPM count the same transactions: taken as two independent figures, a suite's effect would be
    sure of what was measured once (seen: "1.50× slower" between oltp runs of one configuration)."""
    from refbench import estimate

    nopm = estimate.ratio([100, 80, 120], [90, 70, 95])
    one = estimate.geometric_mean([nopm])
    both = estimate.geometric_mean([estimate.together([nopm, nopm])])
    assert (both.low, both.high) == pytest.approx((one.low, one.high))
    twice = estimate.geometric_mean([nopm, nopm])  # what the suite line did before
    assert twice.high - twice.low < one.high - one.low


@pytest.mark.live
def test_a_headline_from_another_case_is_compared_with_its_like(tmp_path, refbench):
    """1 → 4 users: the best load level is another case in each run; the runs' bests are still compared."""
    a = _run(refbench, tmp_path, "--set", "sleepy.cases=2", "--repeats", "2", "--noise-pct", "5")
    b = _run(refbench, tmp_path, "--set", "sleepy.cases=4", "--repeats", "2", "--noise-pct", "5")
    result = refbench("compare", str(a), str(b), "--json")
    assert result.code == 0, result.stderr
    heads = {a["case"]: a for a in result.json()["answers"] if a["kind"] == "headline"}
    crossed = heads["case-001 → case-003"]
    assert crossed["figure"] == "ops/s, case-001 → case-003" and crossed["ratio"] == pytest.approx(2, rel=0.1)
    assert crossed["n"] == [2, 2] and crossed["answer"] == "faster", crossed
    assert "case-001" in heads  # the case both measured, compared as itself too


def _cells(line: str) -> list[str]:
    """A markdown table row's cells, their escaped bars put back."""
    assert line.startswith("|") and line.endswith("|"), line
    return [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", line)[1:-1]]


@pytest.mark.live
def test_markdown_and_csv_say_what_json_says(tmp_path, refbench):
    from refbench.formats import fmt

    common = ("--set", "sleepy.cases=2", "--noise-pct", "5", "--repeats", "3")
    a = _run(refbench, tmp_path, *common, "--seed", "1")
    b = _run(refbench, tmp_path, *common, "--seed", "2", "--speed", "1.5")
    c = _run(refbench, tmp_path, *common, "--seed", "3", "--speed", "0.8")
    runs = [str(a), str(b), str(c)]
    data = refbench("compare", *runs, "--json").json()
    found, figures = data["answers"], {(f["vs"], f["case"], f["metric"]): f for f in data["figures"]}
    heads = [x for x in found if x["kind"] == "headline"]
    assert sorted(x["answer"] for x in heads) == ["faster", "slower"]

    # For a ticket: which run is which, the overall and suite answers, then a table of the headline figures.
    shown = refbench("compare", *runs, "--format", "markdown")
    assert shown.code == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert lines[0] == f"**refbench compare**: A = `{a.name}` · B = `{b.name}` · C = `{c.name}`"
    assert [line for line in lines if line.startswith("- **")] == [
        f"- **{x['suite'] or 'overall'}** ({x['vs']} against A): {x['answer']}" + (f"; {x['summary']}" if x["kind"] == "suite" else "")
        for x in found if x["kind"] != "headline"]
    start = lines.index(next(line for line in lines if line.startswith("| run | figure |")))
    end = next(i for i in range(start, len(lines)) if not lines[i].startswith("|"))
    header, rule, *rows = [_cells(line) for line in lines[start:end]]
    assert header == ["run", "figure", "A", "B", "B / A (95% CI)", "n", "answer"]
    assert len(rule) == len(header) and all(set(cell) <= set(":-") for cell in rule)
    assert len(rows) == len(heads)
    for row, x in zip(rows, heads):
        measured = figures[(x["vs"], x["case"], x["metric"])]
        assert row == [x["vs"], f"{x['suite']} {x['figure']}", f"{fmt(measured['A'])} ops/s", f"{fmt(measured['B'])} ops/s",
                       f"{x['ratio']:.2f}× ({x['ci_low']:.2f}–{x['ci_high']:.2f})", f"{x['n'][0]} vs {x['n'][1]}",
                       x["answer"] + (f" ({x['why']})" if x["why"] else "")]
    # Every table in it is whole: each row as many cells as its header.
    tables = [[_cells(line) for line in block.splitlines()] for block in re.findall(r"(?m)(?:^\|.*\n?)+", shown.stdout)]
    assert tables and all(len({len(row) for row in table}) == 1 for table in tables)

    # For a spreadsheet: a row per figure and compared run, the numbers and units in columns, --json's figures.
    every = refbench("compare", *runs, "--all", "--json").json()["figures"]
    sheet = refbench("compare", *runs, "--all", "--format", "csv")
    assert sheet.code == 0, sheet.stderr
    table = list(csv.DictReader(io.StringIO(sheet.stdout)))
    assert len(table) == len(every) == 2 * 2 * 4  # C and B, 2 cases, 4 figures a case
    for row, f in zip(table, every):
        assert (row["vs"], row["suite"], row["case"], row["metric"], row["answer"]) == (f["vs"], f["suite"], f["case"], f["metric"], f["answer"])
        assert (row["a_run"], row["b_run"]) == (a.name, f["run"])
        assert float(row["a"]) == f["A"] and float(row["b"]) == f["B"] and float(row["ratio_b_a"]) == pytest.approx(f["B"] / f["A"])
        assert [float(row[k]) if row[k] else None for k in ("ci_low", "ci_high")] == [f["ci_low"], f["ci_high"]]
        assert (int(row["n_a"]), int(row["n_b"])) == tuple(f["n"]) and (row["headline"] == "yes") == f["headline"]
    units = {row["metric"]: row["unit"] for row in table}
    assert (units["ops_per_s"], units["lat_ms"], units["busy_pct"]) == ("ops/s", "ms", "%"), units

    # --format json is --json; a format it does not know, or two outputs, are refused in one sentence.
    assert refbench("compare", str(a), str(b), "--format", "json").json() == refbench("compare", str(a), str(b), "--json").json()
    for wrong in (("--format", "xlsx"), ("--format", "csv", "--json")):
        refused = refbench("compare", str(a), str(b), *wrong)
        assert refused.code == 2 and not refused.stdout and len(refused.stderr.strip().splitlines()) == 1, refused
    assert "markdown" in refbench("compare", str(a), str(b), "--format", "xlsx").stderr


def test_a_headline_said_in_words_turns_with_the_figure():
    """The dot plot's words: a latency halved is 2× faster, and the interval is turned with the factor."""
    from refbench.report.compare import headline_words

    def said(metric, answer, ratio, low, high):
        return headline_words({"metric": metric, "answer": answer, "ratio": ratio, "ci_low": low, "ci_high": high})

    assert said("lat_ms", "faster", 0.5, 0.4, 0.625) == "2.00× faster (1.60–2.50)"
    assert said("ops_per_s", "faster", 1.59, 1.17, 2.16) == "1.59× faster (1.17–2.16)"
    assert said("ops_per_s", "slower", 0.8, 0.5, 0.9) == "1.25× slower (1.11–2.00)"
    assert said("lat_ms", "slower", 2.0, 1.6, 2.5) == "2.00× slower (1.60–2.50)"
    assert said("ops_per_s", "cannot tell", 1.02, 0.9, 1.2) == "cannot tell: 1.02× (0.90–1.20)"
    assert said("ops_per_s", "cannot tell", 1.3, None, None) == "cannot tell: 1.30×"
    assert said("busy_pct", "changed", 1.3, 1.1, 1.5) == "changed: 1.30× (1.10–1.50)"


def test_a_dot_plot_places_what_it_can(tmp_path):
    """An interval with an end at 0 or ∞ (a few replicates in a large family) runs to the axis's edge; a ratio that
    cannot be placed on a log axis is left out; the axis always has 1× in the middle."""
    import math

    from refbench.report.charts import Ratio, render_ratios

    rows = [Ratio("wide", 2.0, 0.0, math.inf, "cannot tell: 2.00× (0.00–∞)"), Ratio("zero", 0.0, None, None, "—"),
            Ratio("tight", 1.01, 0.99, 1.03, "no change: 1.01× (0.99–1.03)")]
    svg = render_ratios(rows, "ratios", tmp_path).svg.read_text()
    assert "ratios-dot-1" in svg and "ratios-dot-2" not in svg  # two rows: the zero one left out
    clip = re.search(r'<clipPath id="[^"]+">\s*<rect x="([\d.]+)" y="[\d.]+" width="([\d.]+)"', svg)
    left, width = float(clip.group(1)), float(clip.group(2))
    ends = [float(v) for v in re.search(r'id="ratios-ci-0">\s*<path d="M ([\d.]+) [\d.]+\s*L ([\d.]+)', svg).groups()]
    assert ends == pytest.approx([left, left + width], abs=0.5)
    one = float(re.search(r'id="ratios-one">\s*<path d="M ([\d.]+)', svg).group(1))
    assert one == pytest.approx(left + width / 2, abs=0.5)


@pytest.mark.live
def test_names_reach_a_spreadsheet_inert_markdown_whole_and_the_terminal_literally(tmp_path, refbench):
    """Run directories renamed by hand: a formula, a sign, markdown's backtick and a newline, Rich's markup."""
    made = [_run(refbench, tmp_path, "--set", "sleepy.cases=2", "--seed", str(seed)) for seed in (1, 2)]
    a, b = tmp_path / "runs" / "@SUM(1+1)", tmp_path / "runs" / "-2+3 `x`\n[bold]y[link=x]z"
    made[0].rename(a)
    made[1].rename(b)
    sheet = refbench("compare", str(a), str(b), "--all", "--format", "csv")
    assert sheet.code == 0, sheet.stderr
    rows = list(csv.DictReader(io.StringIO(sheet.stdout)))
    assert rows and all(r["a_run"] == "'@SUM(1+1)" and r["b_run"] == f"'{b.name}" for r in rows)
    ticket = refbench("compare", str(a), str(b), "--format", "markdown")
    assert ticket.stdout.splitlines()[0] == ("**refbench compare**: A = `@SUM(1+1)` · B = "
                                             "``-2+3 `x` [bold]y[link=x]z``")
    listed = refbench("runs", "--runs-dir", str(tmp_path / "runs"), "--json")
    assert {r["run"] for r in listed.json()} == {a.name, b.name}
    table = subprocess.run(refbench_command("runs", "--runs-dir", str(tmp_path / "runs")), cwd=tmp_path,
                           env=cli_env(COLUMNS="250"), capture_output=True, text=True, timeout=120)
    assert "[bold]y[link=x]z" in table.stdout and "@SUM(1+1)" in table.stdout, table.stdout
    said = refbench("compare", str(a), str(b))
    assert said.code == 0 and "[bold]y[link=x]z" in said.stdout, said.stdout
    assert f"comparison: {tmp_path / 'runs'}" in said.stderr and "[bold]y[link=x]z" in refbench("report", str(b)).stderr


OBEYED = ("\x1b]", "\x07", "\x9b", "\u202e")  # an OSC (a window title), BEL, C1's CSI, RIGHT-TO-LEFT OVERRIDE


@pytest.mark.live
def test_control_characters_a_run_holds_are_shown_not_obeyed_by_every_printer(tmp_path, refbench):
    """A run directory renamed by hand, a tag (refbench tag takes C1 and bidirectional marks), a host and a verdict
    edited: verdict, why, runs, history and compare show each control character as its escape, on a terminal and
    to a pipe."""
    import json

    a, made = (_run(refbench, tmp_path, "--set", "sleepy.cases=1", "--seed", str(seed)) for seed in (1, 2))
    b = made.with_name(made.name + "-\x1b]0;owned\x07\x9b2J\u202eevil")
    made.rename(b)
    assert refbench("tag", str(b), "t=\u202ex\x9b1m").code == 0
    meta = json.loads((b / "run.json").read_text())
    meta["host"] = "db\x1b]0;host\x07"
    (b / "run.json").write_text(json.dumps(meta))
    verdicts = json.loads((b / "verdict.json").read_text())
    for key in ("limit", "bottleneck"):  # the verdict's and why's
        verdicts[0][key] += " \x1b]0;verdict\x07"
    (b / "verdict.json").write_text(json.dumps(verdicts))
    commands = [("verdict", str(b)), ("why", str(b)), ("runs",), ("history", "sleepy.ops_per_s"),
                ("compare", str(a), str(b)), ("compare", str(a), str(b), "--format", "markdown")]
    for terminal in ("1", "0"):
        for args in commands:
            shown = subprocess.run(refbench_command(*args, "--runs-dir", str(tmp_path / "runs")), cwd=tmp_path,
                                   env=cli_env(TTY_COMPATIBLE=terminal, COLUMNS="300"), capture_output=True, text=True,
                                   timeout=120)
            said = shown.stdout + shown.stderr
            assert shown.returncode == 0, (args, said)
            assert not [c for c in OBEYED if c in said], (terminal, args, said)
            assert "\\x1b]0;owned\\x07\\x9b2J\\u202eevil" in said or args[0] == "history", (terminal, args, said)
            if args[0] in ("verdict", "why"):
                assert "\\x1b]0;verdict\\x07" in said, (terminal, args, said)
            if args[0] in ("runs", "history"):
                assert "\\u202ex\\x9b1m" in said and "db\\x1b]0;host\\x07" in said, (terminal, args, said)
