"""compare on real runs of the test suite: ratios, what counts as a change, what is printed and written."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from conftest import cli_env, refbench_command
from test_report import _run


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
    # ops_per_s has ten samples a side, tested; lat_ms one measurement a side, beyond the noise floor.
    assert figures[("case-000", "ops_per_s")]["basis"] == "Welch t-test, 10 samples vs 10 samples"
    assert figures[("case-000", "ops_per_s")]["significant"] and figures[("case-000", "lat_ms")]["significant"]
    assert figures[("case-000", "lat_ms")]["basis"].startswith("1 measurement")
    assert not figures[("case-000", "busy_pct")]["significant"]
    html = Path(data["html"]).read_text()
    assert "Configurations" in html and "2.00× faster" in html

    reverse = refbench("compare", str(b), str(a), "--runs-dir", str(tmp_path / "runs"))
    assert reverse.code == 0, reverse.stderr
    assert "busy_pct" not in reverse.stdout and "lat_ms" not in reverse.stdout  # counted, not shown:
    lines = reverse.stdout.splitlines()
    assert re.fullmatch(r"sleepy: 1 slower; \d+ of \d+ others changed, \d+ untested\*", lines[2]), lines  # lat_ms among them
    assert "* once a side: beyond 5% (assumed), untested" in lines  # no repeats on this host: the assumed floor
    assert "lat_ms" in refbench("compare", str(b), str(a), "--all", "--runs-dir", str(tmp_path / "runs")).stdout
    # the answer first: the headline figure, B / A with its interval, the measurements a side, the answer
    assert re.fullmatch(r"  ops/s, case-003 +0\.50× \(0\.\d\d–0\.\d\d\) +10 vs 10 +slower", lines[3]), lines
    assert "no significant change" not in reverse.stdout

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


def test_a_run_against_itself_is_short_and_says_no_significant_change(tmp_path, refbench):
    run = _run(refbench, tmp_path, "--set", "sleepy.cases=40", "--noise-pct", "10")
    result = refbench("compare", str(run), str(run))
    assert result.code == 0, result.stderr
    assert "no significant change" in result.stdout
    assert len(result.stdout.splitlines()) <= 25, result.stdout
    answer, = [line for line in result.stdout.splitlines()[2:] if line.startswith("  ")]  # the headline, and only it
    assert answer.split() == ["ops/s,", "case-039", "1.00×", "10", "vs", "10", "same"]  # per-second samples
    assert "sleepy: 1 same; 0 of 119 others changed" in result.stdout  # 40 cases × ops, lat, elapsed; busy_pct describes
    everything = refbench("compare", str(run), str(run), "--all")
    assert len(everything.stdout.splitlines()) > 160  # 40 cases × 4 figures: the default leaves them out
    assert "no significant change" in everything.stdout


def test_noise_is_not_a_change_and_repeats_are_one_figure(tmp_path, refbench):
    # Three runs of one case with ±20% per-second noise: A and B differ only by the noise's seed (three repeats
    # each), C is 1.5 times as fast.
    common = ("--set", "sleepy.cases=1", "--noise-pct", "20")
    a = _run(refbench, tmp_path, *common, "--seed", "1", "--repeats", "3")
    b = _run(refbench, tmp_path, *common, "--seed", "2", "--repeats", "3")
    c = _run(refbench, tmp_path, *common, "--seed", "3", "--speed", "1.5")
    result = refbench("compare", str(a), str(b), str(c), "--json")
    assert result.code == 0, result.stderr
    rows = {(f["vs"], f["case"], f["metric"]): f for f in result.json()["figures"]}
    noise, faster = rows[("B", "case-000", "ops_per_s")], rows[("C", "case-000", "ops_per_s")]
    assert noise["A"] != noise["B"] and not noise["significant"] and noise["p"] >= 0.05
    assert noise["basis"] == "Welch t-test, 3 repeats vs 3 repeats"
    assert noise["headline"]  # the case of the repeats (case-000, -r2, -r3) is the headline
    assert faster["significant"] and faster["p"] < 0.05 and faster["basis"] == "Welch t-test, 3 repeats vs 10 samples"
    assert ("B", "case-000", "busy_pct") not in rows  # the same in all three: neither headline nor change
    assert ("C", "case-000", "lat_ms") not in rows  # measured once a side: counted, not listed (untested)

    # (wall_elapsed_s is a real time, which may change beyond its noise: left out here)
    two = refbench("compare", str(a), str(b), "--metric", "ops_per_s")
    assert two.code == 0 and "no significant change" in two.stdout, two.stdout
    three = refbench("compare", str(a), str(b), str(c), "--metric", "ops_per_s")
    lines = three.stdout.splitlines()
    answers = {lines[i - 1].split(" (")[1][0]: lines[i] for i, line in enumerate(lines) if line.startswith("  ops/s,")}
    assert answers["C"].endswith(" faster") and not answers["B"].endswith(("faster", "slower")), lines
    assert "overall (B against A): no significant change; 1 cannot tell" in lines
    assert "overall (C against A): 1 faster" in lines


def test_compare_needs_two_runs_and_its_help_fits_80_columns(tmp_path, refbench):
    run = _run(refbench, tmp_path)
    alone = refbench("compare", str(run))
    assert alone.code == 2 and "at least two runs" in alone.stderr and len(alone.stderr.strip().splitlines()) == 1
    shown = subprocess.run(refbench_command("compare", "--help"), capture_output=True, text=True,
                           env=cli_env(COLUMNS="80", TERM="dumb"))
    assert shown.returncode == 0 and all(len(line) <= 80 for line in shown.stdout.splitlines())
    for flag in ("--all", "--metric", "--out", "--json", "--runs-dir", "refbench compare"):
        assert flag in shown.stdout
    from refbench.report.compare import ALPHA, NOISE_FLOOR, SAME_WITHIN

    # the help states the rule with compare's own numbers (it cannot import them: that would load matplotlib)
    text = " ".join(shown.stdout.split())
    assert f"p < {ALPHA}" in text and f"at least {SAME_WITHIN:.0%}" in text and f"beyond {NOISE_FLOOR:.0%}" in text


def test_the_ratio_and_its_interval_come_from_welchs_test_on_the_logarithms():
    import math

    from refbench.report.compare import Figure, ratio_test, repeats_to_resolve

    # logarithms 0, 1, 2 against 1, 2, 3: Student's t = 1.2247 with 4 degrees of freedom, two-sided p = 0.2879
    a, b = [math.exp(v) for v in (0, 1, 2)], [math.exp(v) for v in (1, 2, 3)]
    test = ratio_test(Figure(sum(a) / 3, a, "3 repeats"), Figure(sum(b) / 3, b, "3 repeats"))
    assert test.p == pytest.approx(0.2879, abs=1e-3) and test.low < math.e < test.high and test.log_sd == pytest.approx(1.0)
    same = ratio_test(Figure(5, [5, 5, 5], "3 repeats"), Figure(6, [6, 6, 6], "3 repeats"))
    assert same.p == 0.0 and same.low == same.high == pytest.approx(1.2)
    # the noisier the host, the more repeats a 5% change needs
    assert repeats_to_resolve(0.01) < repeats_to_resolve(0.03) < repeats_to_resolve(0.05)


def _same_or_changed(rng, change: float, tested=None):
    """One comparison as compare makes it: 20 figures measured 3 times a side (5% spread), 10 kept as 120
    per-second samples that follow each other closely (AR(1), ρ = 0.7, 5% spread), B ``change`` times A."""
    import numpy as np

    from refbench.report.compare import Figure, decide

    def series(level):
        x = np.empty(120)
        x[0] = rng.normal(0, 0.05)
        for i in range(1, 120):
            x[i] = 0.7 * x[i - 1] + rng.normal(0, 0.05 * math.sqrt(1 - 0.49))
        return list(level * np.exp(x))

    import math

    pairs = []
    for _ in range(20):
        a, b = list(100 * np.exp(rng.normal(0, 0.05, 3))), list(100 * change * np.exp(rng.normal(0, 0.05, 3)))
        pairs.append((Figure(float(np.mean(a)), a, "3 repeats"), Figure(float(np.mean(b)), b, "3 repeats")))
    for _ in range(10):
        a, b = series(100), series(100 * change)
        pairs.append((Figure(float(np.mean(a)), a, "120 samples"), Figure(float(np.mean(b)), b, "120 samples")))
    return [significant for significant, *_ in decide(pairs)]


def test_two_runs_of_one_configuration_report_a_change_less_than_one_time_in_twenty():
    """The false-change rate of a whole comparison (any of its 30 figures said to change) over 200 simulated
    comparisons of one configuration with itself; and the same rule finds a 20% change in most figures."""
    import numpy as np

    rng = np.random.default_rng(2026)
    false_changes = sum(any(_same_or_changed(rng, 1.0)) for _ in range(200)) / 200
    assert false_changes < 0.05
    found = sum(sum(_same_or_changed(rng, 1.2)) for _ in range(10)) / (10 * 30)
    assert found > 0.6


def test_which_way_is_better_for_each_kind_of_figure():
    from refbench.report.compare import direction, verdict

    assert [direction(m) for m in ("iops", "read_mb_s", "mb_s", "nopm", "tpm", "power")] == [1] * 6
    assert [direction(m) for m in ("read_lat_p99_us", "new_order_lat_avg_ms", "elapsed_s")] == [-1, -1, -1]
    assert [direction(m) for m in ("runtime_s", "measured_s", "db_cpu_s", "device_busy_pct", "steady_state_at_s")] == [0] * 5
    assert verdict("read_lat_p99_us", 200.0, 100.0) == (2.0, "2.00× faster")
    assert verdict("iops", 1000.0, 995.0)[1] == "same"
