"""The example run every claim about the demo comes from: scripts/example_run.py keeps a real demo's verdict in
docs/example/ with its facts and writes the README's example verdict from it. The README and the table of times say
what it holds, and its verdict fits one screen."""

from __future__ import annotations

import importlib.util
import json
import math
import re
from pathlib import Path

import pytest

from refbench.timings import DEMO, TIMES

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("example_run", ROOT / "scripts" / "example_run.py")
example = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(example)
ROWS, COLUMNS = 30, 80


def test_the_readme_and_the_table_of_times_quote_the_example_run():
    text = (ROOT / "README.md").read_text()
    assert example.rewrite_readme(text) == text, ("the README's example verdict is not the example run's, as this "
                                                  "code says it: `python scripts/example_run.py RUN` rewrites it")
    facts = example.facts()
    assert TIMES[(DEMO, "quick")].seconds == facts["wall_s"]  # the table of times says the same, and its suites'
    assert {suite: TIMES[(suite, "quick")].seconds for suite in facts["suite_s"]} == facts["suite_s"]
    assert all(TIMES[(suite, "quick")].repeats == facts["repeats"] for suite in facts["suite_s"])
    assert f"about {facts['space_gb']:g} GB free" in text  # the quick start: what its dry run said
    # One demo quoted for what the demo does: no other demo run named where the README and the manual's home say it.
    for page in (ROOT / "README.md", ROOT / "docs" / "index.md"):
        named = set(re.findall(r"\d{8}T\d{6}Z-demo", page.read_text()))
        assert named <= {facts["run"]}, (page.name, named)


def test_each_suite_says_its_limit_in_ten_words_and_one_next_step_with_a_command():
    facts = example.facts()
    for v in json.loads((ROOT / "docs" / "example" / facts["run"] / "verdict.json").read_text()):
        engine = next((e for e in ("postgres", "mariadb", "duckdb") if v["limit"].startswith(f"{e}: ")), "")
        assert len(v["limit"].removeprefix(f"{engine}: ").split()) <= 10 and re.search(r"\d", v["limit"]), v["limit"]
        assert v["next"]["short"] and v["next"]["command"].startswith("refbench "), v["next"]


def _rows(lines: list[str]) -> int:
    """The rows a terminal COLUMNS wide takes for these lines (a longer line wraps)."""
    return sum(max(1, math.ceil(len(line) / COLUMNS)) for line in lines)


@pytest.mark.live
def test_the_demos_verdict_fits_one_80_column_screen(tmp_path, refbench):
    from test_progress import _on_a_terminal

    run = ROOT / "docs" / "example" / example.facts()["run"]
    shown = _on_a_terminal(tmp_path, "verdict", str(run), columns=COLUMNS)
    lines = [line.rstrip() for line in re.split(r"\r?\n", shown.strip())]
    assert lines[0].startswith(f"verdict — {run.name} · figures: ") and lines[-1] == f"why: refbench why {run}", lines
    assert len(json.loads((run / "verdict.json").read_text())) == 5  # the demo's five suites
    assert all(len(line) <= COLUMNS for line in lines) and _rows(lines) <= ROWS, "\n".join(lines)
    piped = refbench("verdict", str(run))
    assert piped.code == 0 and len(piped.stdout.splitlines()) <= ROWS, piped.stdout
