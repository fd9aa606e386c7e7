"""Every duration refbench states comes from one table of measured times (refbench.timings): the README, `run
--help`, each suite's --profile help and the dry run say the same thing."""

from __future__ import annotations

from pathlib import Path

from refbench.timings import DEMO, SUITES, TIMES, said

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()


def _flat(text: str) -> str:
    return " ".join(text.split())


def test_the_readme_says_the_tables_times():
    demo = _flat(README[README.index("`make demo` runs the quick plan"):][:1000])
    assert f"it took {said(DEMO, 'quick')}" in demo, demo
    rows = {cells[1].strip(): [c.strip() for c in cells] for cells in
            (line.split("|") for line in README.splitlines() if line.startswith("| ") and line.count("|") == 8)}
    for suite in SUITES:
        row = rows[suite]  # | suite | standard runs | time | space | full runs | time | space |
        assert row[3].startswith(said(suite, "standard")), (suite, row[3])
        assert row[6].startswith(said(suite, "full")), (suite, row[6])
    assert f"# quick (all five suites: {said(DEMO, 'quick')} for the demo)" in README  # the plan file example
    quick = _flat(README[README.index("against the measured"):][:200])
    assert quick.startswith("against the measured " + ", ".join(said(s, "quick") for s in SUITES[:-1])
                            + f" and {said(SUITES[-1], 'quick')};"), quick


def test_a_time_is_said_with_how_it_was_had():
    assert all(t.basis in ("measured", "measured in part", "estimated") for t in TIMES.values())
    assert said("oltp", "standard") == "31 min" and said("dw", "standard") == "about 35 min (estimated)"
    assert said("device", "standard") == "30 min–1 h 10 min (estimated)" and said("analytics", "full") == "not measured"


def test_help_and_dry_run_say_the_tables_times(refbench, tmp_path):
    help_text = _flat(refbench("run", "--help").stdout)
    assert f"{said(DEMO, 'quick')} for the demo" in help_text
    assert all(f"{s} {said(s, 'standard')}" in help_text for s in SUITES if (s, "standard") in TIMES)
    oltp_help = _flat(refbench("oltp", "--help").stdout)
    assert f"standard: {said('oltp', 'standard')}" in oltp_help
    dry = refbench("run", "--plan", str(ROOT / "plans" / "quick.toml"), "--runs-dir", str(tmp_path / "runs"), "--dry-run")
    assert dry.code == 0, dry.stderr
    text = _flat(dry.stdout)
    assert f"the demo (every suite at the quick profile) took {said(DEMO, 'quick')}" in text
    for suite in SUITES:
        assert f"the quick profile's defaults took {said(suite, 'quick')}" in text, suite
