"""compare on real runs of the test suite: ratios, what counts as a change, what is printed and written."""

from __future__ import annotations

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
    assert "2.00× slower" in reverse.stdout and "busy_pct" not in reverse.stdout  # unchanged: not shown
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
    assert len((result.stdout + result.stderr).splitlines()) <= 80, result.stdout
    figures = [line.split() for line in result.stdout.splitlines() if line.strip().startswith("sleepy ")]
    assert len(figures) == 1 and figures[0][:3] == ["sleepy", "case-039", "ops_per_s"]  # the headline, and only it
    assert figures[0][3] == figures[0][4] and figures[0][5] == "same"
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
    assert noise["headline"]  # the verdict names one repeat's record ("case-000-r2"): its figure is the headline
    assert faster["significant"] and faster["p"] < 0.05 and faster["basis"] == "Welch t-test, 3 repeats vs 10 samples"
    assert ("B", "case-000", "busy_pct") not in rows  # the same in all three: neither headline nor change
    assert rows[("B", "case-000", "lat_ms")]["B vs A"] == "same"  # shown because it changed in C

    # (wall_elapsed_s is a real time, which may change beyond its noise: left out here)
    two = refbench("compare", str(a), str(b), "--metric", "ops_per_s")
    assert two.code == 0 and "no significant change" in two.stdout, two.stdout
    three = refbench("compare", str(a), str(b), str(c), "--metric", "ops_per_s")
    assert "not significant" in three.stdout and "faster" in three.stdout and "no significant change" not in three.stdout


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


@pytest.mark.parametrize("t, df", [(12.706, 1), (2.228, 10), (2.086, 20), (1.984, 100)])
def test_welch_p_agrees_with_the_t_table(t, df):
    from refbench.report.compare import _incomplete_beta, welch_p

    # the two-sided p of Student's t at the table's 95% critical values
    assert _incomplete_beta(df / 2, 0.5, df / (df + t * t)) == pytest.approx(0.05, abs=2e-4)
    # equal sizes and variances: Welch's test is Student's, t = 2 with 8 degrees of freedom gives p = 0.0805
    assert welch_p([1, 2, 3, 4, 5], [3, 4, 5, 6, 7]) == pytest.approx(0.0805, abs=1e-4)
    assert welch_p([5, 5, 5], [5, 5, 5]) == 1.0 and welch_p([5, 5, 5], [6, 6, 6]) == 0.0


def test_which_way_is_better_for_each_kind_of_figure():
    from refbench.report.compare import direction, verdict

    assert [direction(m) for m in ("iops", "read_mb_s", "mb_s", "nopm", "tpm")] == [1] * 5
    assert [direction(m) for m in ("read_lat_p99_us", "new_order_lat_avg_ms", "elapsed_s")] == [-1, -1, -1]
    assert [direction(m) for m in ("runtime_s", "measured_s", "db_cpu_s", "device_busy_pct", "steady_state_at_s")] == [0] * 5
    assert verdict("read_lat_p99_us", 200.0, 100.0) == (2.0, "2.00× faster")
    assert verdict("iops", 1000.0, 995.0)[1] == "same"
