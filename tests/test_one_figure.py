"""One figure, one value: the progress, the verdict, `why`, verdict.json, the report and the runs catalog say the same
value of a figure, its rule (the median of its repeats) said once; a figure's range and the repeat that measured it
are its own; `why` folds to the terminal and says each clause once; setup says nothing on stdout."""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from conftest import cli_env, refbench_command
from refbench.plan import Plan
from refbench.report.verdict import run_verdict
from refbench.runstore import Run
from refbench.suites import Record, get_suite
from refbench.suites.repeats import one_per_configuration

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "docs" / "example" / "20261129T152421Z-demo"
RULE = "median of 3 repeats"


@pytest.mark.live
def test_a_figure_is_one_value_on_every_surface_its_rule_said_once(tmp_path, refbench):
    # Each case's first measurement reads 40 MB, its repeats none (a cache that holds the data after the first pass).
    made = refbench("sleepy", "--runs-dir", "runs", "--set", "sleepy.cases=2", "--set", "sleepy.sleep_s=0.2",
                    "--first-read-mb", "40", "--noise-pct", "10", "--repeats", "3")
    assert made.code == 0, made.stderr
    run = tmp_path / made.last_line
    assert made.stdout.startswith("verdict — "), made.stdout  # nothing of the run's preparation before the verdict
    records = {p.stem: json.loads(p.read_text()) for p in (run / "records" / "sleepy").glob("*.json")}
    report = (run / "report.html").read_text()
    # The storage figure: over every interval measured, repeats too, in the progress as in the report.
    storage = [r["extra"]["storage"] for r in records.values()]
    rate = sum(s["server_read_mb"] for s in storage) / sum(s["interval_s"] for s in storage)
    progress, = re.findall(r"^sleepy: (storage exercised: .*)$", made.stderr, re.M)
    assert f"{rate:,.1f} MB/s" in progress and html.escape(progress) in report, progress
    # The headline: the median of its repeats, in the verdict, `why`, the report and the catalog, the rule once.
    headline = json.loads((run / "verdict.json").read_text())[0]["headlines"][0]
    said = headline["said"]
    why = refbench("why", str(run)).stdout
    for surface in (made.stdout, why, html.unescape(report)):
        assert said in surface and surface.count(RULE) == 1, surface
    repeats = {c: r["metrics"]["ops_per_s"] for c, r in records.items() if c.startswith(headline["case"])}
    assert len(repeats) == 3 and headline["repeats"] == 3
    assert headline["value"] == statistics.median(repeats.values()) == repeats[headline["repeat"]]
    assert (headline["low"], headline["high"]) == (min(repeats.values()), max(repeats.values()))
    listed, = [h for r in refbench("runs", "--runs-dir", "runs", "--json").json() for h in r["headlines"]]
    assert (listed["value"], listed["low"], listed["high"], listed["n"]) == (headline["value"], headline["low"],
                                                                             headline["high"], 3)


def _iotest(case: str, repeat: int, write: float, read: float) -> Record:
    verdict = "above the guidance (> 150 MB/s per core)"
    return Record({"write_mb_s": 2 * write, "write_mb_s_per_core": write, "read_mb_s": 2 * read,
                   "read_mb_s_per_core": read, "read_from_device_pct": 100.0}, suite="analytics", case_id=case,
                  params={"locations": "DATA+WORK+UTIL", **({"repeat": repeat} if repeat > 1 else {})},
                  started_epoch_s=1000.0 * repeat, ended_epoch_s=1000.0 * repeat + 10, elapsed_s=10.0,
                  extra={"locations": "DATA+WORK+UTIL", "directory": "/d", "device": "vda", "writers": 2,
                         "file_mib": 8, "write_verdict": verdict, "read_verdict": verdict, "warning": ""})


def test_a_figure_takes_its_range_and_its_repeat_from_its_own_repeats(tmp_path):
    """Analytics' write figure beside its read figure: the read figure's median repeat (r3) is the write figure's
    highest, so the write figure is its own repeats' median (r2's), not r3's."""
    run = Run.create(Plan(runs_dir=str(tmp_path / "runs")), {})
    measured = {("iotest-data-work-util", 1): (300.0, 200.0), ("iotest-data-work-util-r2", 2): (500.0, 100.0),
                ("iotest-data-work-util-r3", 3): (700.0, 150.0)}
    for (case, k), (write, read) in measured.items():
        run.write_record(_iotest(case, k, write, read))
    verdict, = run_verdict(run)
    by = {h.metric: h for h in verdict.headlines}
    write, read = by["write_mb_s_per_core"], by["read_mb_s_per_core"]
    assert (write.value, write.low, write.high) == (500.0, 300.0, 700.0)
    assert (write.repeat, write.repeats) == ("iotest-data-work-util-r2", 3)
    assert (read.value, read.low, read.high, read.repeat) == (150.0, 100.0, 200.0, "iotest-data-work-util-r3")
    # The report's table says what the verdict says.
    suite = get_suite("analytics")
    row, = next(t for t in suite.summarize(one_per_configuration(run.records("analytics"), suite))
                if t.name == "iotest").rows
    assert (row["write MB/s per core"], row["read MB/s per core"]) == (write.value, read.value)


def _why(run: Path, columns: str | None) -> list[str]:
    env = cli_env(**({"COLUMNS": columns} if columns else {}))
    said = subprocess.run(refbench_command("why", str(run)), capture_output=True, text=True, env=env, timeout=60)
    assert said.returncode == 0, said.stderr
    return said.stdout.splitlines()


def _clauses(lines: list[str], suites: list[str]) -> Counter:
    """Per suite, its rows' clauses (split at "; " outside parentheses), each row's wrapped lines joined again."""
    rows, suite = [], ""
    for line in lines[1:]:
        if line.split(" ")[0] in suites:
            suite = line.split()[0]
        elif line[:1] not in ("", " "):  # a command folded at the left edge
            continue
        if line.startswith(" " * 13) and rows:  # a wrapped row's next line
            rows[-1] = (rows[-1][0], f"{rows[-1][1]} {line.strip()}")
        else:
            rows.append((suite, line[11:].strip()))
    counts: Counter = Counter()
    for suite, row in rows:
        depth, start = 0, 0
        for i, char in enumerate(row + "; "):
            depth += (char == "(") - (char == ")")
            if depth == 0 and (row + "; ").startswith("; ", i):
                if len(clause := row[start:i].removeprefix("next: ").strip()) > 20:
                    counts[(suite, clause)] += 1
                start = i + 2
    return counts


@pytest.mark.parametrize("columns", [None, "60", "120"])
def test_why_folds_to_the_terminal_and_says_each_clause_once(tmp_path, columns):
    """On the example demo run's verdict (docs/example): no line wider than COLUMNS (80 when it is not set, as for a
    pipe), and no clause said twice in a suite (the dss engines' common host limit and caveat, the rule)."""
    run = tmp_path / EXAMPLE.name
    shutil.copytree(EXAMPLE, run)
    lines = _why(run, columns)
    width = int(columns or 80)
    assert max(map(len, lines)) <= width, "\n".join(line for line in lines if len(line) > width)
    assert lines[0] == f"why — {run.name} · figures: {RULE} (lowest–highest)" or lines[1].startswith("figures: ")
    assert "\n".join(lines).count(RULE) == 1
    suites = [v["suite"] for v in json.loads((run / "verdict.json").read_text())]
    repeated = [clause for clause, n in _clauses(lines, suites).items() if n > 1]
    assert not repeated, repeated
    pasted = "\n".join(lines).replace(" \\\n  ", " ")  # a folded command runs as pasted
    assert "refbench tune --suite analytics --baseline" in pasted and "--apply-host" in pasted


def test_setup_says_what_it_does_on_stderr_and_nothing_on_stdout(tmp_path):
    """What setup prints before the verdict of `make demo` (its lines, and what the commands it runs print) goes to
    stderr. A virtual environment without pip stops it at its first step that prints: installing refbench."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    said = subprocess.run(["bash", str(ROOT / "scripts" / "setup.sh")], capture_output=True, text=True, timeout=300,
                          env={**env, "VENV": str(venv)})
    assert f"setup: installing refbench and its Python dependencies into {venv}" in said.stderr, said.stderr
    assert said.stdout == "" and not (venv / ".refbench-installed").exists()
