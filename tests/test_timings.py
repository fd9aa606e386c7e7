"""Every duration refbench states comes from one table of measured times (refbench.timings): the README's table of
times is written from it (`python -m refbench.timings --readme`), and `run --help`, each suite's --profile help and
the dry run say the same thing."""

from __future__ import annotations

from pathlib import Path

import pytest

from refbench import timings
from refbench.timings import BEGIN, DEMO, END, PROFILES, SUITES, TIMES, duration, readme_table, said

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()


def _flat(text: str) -> str:
    return " ".join(text.split())


def test_the_readmes_table_of_times_is_the_one_the_table_writes(tmp_path, capsys):
    block = README[README.index(BEGIN) + len(BEGIN):README.index(END)]
    assert block == f"\n{readme_table()}\n", "the README's table of times is not timings.py's: run " \
                                             "`.venv/bin/python -m refbench.timings --readme`"
    assert README.count(BEGIN) == README.count(END) == 1
    for suite in SUITES:
        for profile in PROFILES:
            timing = TIMES.get((suite, profile))
            assert (timing.cell() if timing else timings.NOT_MEASURED) in block, (suite, profile)
    # A README that drifts is found (--check), and written back as the table says.
    drifted = tmp_path / "README.md"
    drifted.write_text(README.replace(f"| dss | {said('dss', 'quick')} |", "| dss | 28 s |"))
    assert timings.main(["--readme", str(drifted), "--check"]) == 1
    assert "differs from src/refbench/timings.py's" in capsys.readouterr().err
    assert timings.main(["--readme", str(drifted)]) == 0 and drifted.read_text() == README
    assert timings.main(["--readme", str(drifted), "--check"]) == 0


def test_no_other_table_in_the_readme_states_a_profiles_time():
    """The profiles table says what each profile runs and the space it needs; its times are the table of times'."""
    header = next(line for line in README.splitlines() if line.startswith("| suite | `standard` runs"))
    assert "time" not in header, header
    # The demo's time where the demo is described: the example run's verdict (tests/test_example.py), which the
    # manual's home includes.
    demo = _flat(README[README.index("`make demo` runs the quick plan"):][:1200])
    assert f"{TIMES[(DEMO, 'quick')].repeats} repeats, {duration(TIMES[(DEMO, 'quick')].seconds)};" in demo, demo
    assert '--8<-- "README.md:verdict"' in (ROOT / "docs" / "index.md").read_text()


def test_a_time_is_said_with_how_it_was_had():
    assert all(t.basis in ("measured", "measured in part", "estimated") for t in TIMES.values())
    assert said("oltp", "standard") == "31 min" and said("dw", "standard") == "about 35 min (estimated)"
    assert said("device", "standard") == "30 min–1 h 10 min (estimated)" and said("analytics", "full") == "not measured"
    assert said(DEMO, "quick") == "5 min 41 s with 3 repeats"
    assert TIMES[("oltp", "standard")].cell() == "31 min (measured: a 22-s load, then 5 × 6 min)"
    assert TIMES[("oltp", "full")].cell().startswith("about 2 h 30 min at 1,000 warehouses (estimated: load about")


@pytest.mark.live
def test_help_and_dry_run_say_the_tables_times(refbench, tmp_path):
    help_text = _flat(refbench("run", "--help").stdout)
    assert f"the demo (every suite) {said(DEMO, 'quick')} |" in help_text
    assert all(f"{s} {said(s, 'standard')}" in help_text for s in SUITES if (s, "standard") in TIMES)
    oltp_help = _flat(refbench("oltp", "--help").stdout)
    assert f"standard: {said('oltp', 'standard')}" in oltp_help
    dry = refbench("run", "--plan", str(ROOT / "plans" / "quick.toml"), "--runs-dir", str(tmp_path / "runs"), "--dry-run")
    assert dry.code == 0, dry.stderr
    text = _flat(dry.stdout)
    demo = TIMES[(DEMO, "quick")]
    assert f"measured: the demo (every suite at the quick profile) took {demo.said()} on a 2-core VM ({demo.source})" in text
    for suite in SUITES:  # with the example demo's 3 repeats, as the plan measures them
        assert f"measured: the quick profile's defaults took {said(suite, 'quick')} on a 2-core VM" in text, suite
        assert f"took {said(suite, 'quick')} on a 2-core VM (each case measured once" not in text, suite
