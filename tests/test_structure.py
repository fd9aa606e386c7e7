"""The layout's promises that code can check: refbench's floors (pyproject's [tool.importlinter] contract), which
import-linter checks, and one run's records read once."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def _lint_imports(tree: Path) -> subprocess.CompletedProcess:
    """import-linter over the refbench under ``tree``/src, with ``tree``'s pyproject contract."""
    return subprocess.run([str(LINT_IMPORTS), "--no-cache", "--no-logo"], cwd=tree, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(tree / "src")}, timeout=120)


def test_the_floors_hold_with_every_module_on_one_and_no_loop():
    done = _lint_imports(ROOT)
    assert done.returncode == 0 and "Contracts: 3 kept, 0 broken." in done.stdout, done.stdout + done.stderr


def test_an_import_up_a_floor_a_module_on_no_floor_and_a_loop_are_each_refused(tmp_path):
    """The contracts are not a formality: an import from a floor above (even one for type hints only), a new module
    placed on no floor, two modules of one package importing each other, and a run's code reaching compare (from
    inside a function) each break one."""
    shutil.copytree(ROOT / "src" / "refbench", tmp_path / "src" / "refbench",
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    suites = tmp_path / "src/refbench/suites/__init__.py"
    suites.write_text(suites.read_text() + "\nif TYPE_CHECKING:\n    from refbench.runner import execute\n")
    (tmp_path / "src/refbench/newthing.py").write_text('"""A module nobody placed."""\n')
    catalog = tmp_path / "src/refbench/suites/analytics/catalog.py"
    catalog.write_text(catalog.read_text() + "\nfrom refbench.suites.analytics import io_tests  # noqa\n")
    runner = tmp_path / "src/refbench/runner.py"
    runner.write_text(runner.read_text() + "\n\ndef _compared():\n    from refbench.report import compare  # noqa\n")
    done = _lint_imports(tmp_path)
    assert done.returncode == 1 and "Contracts: 0 kept, 3 broken." in done.stdout, done.stdout + done.stderr
    assert "refbench.runner is not allowed to import refbench.report.compare" in done.stdout
    assert "refbench.suites is not allowed to import refbench.runner" in done.stdout
    assert "- refbench.newthing" in done.stdout and "not listed as layers" in done.stdout
    assert "No cycles are allowed in refbench.suites.analytics" in done.stdout


@pytest.mark.live
def test_report_verdict_compare_acceptance_and_catalog_of_one_run_read_each_record_once(tmp_path, refbench, monkeypatch):
    from refbench import accept
    from refbench.catalog import Catalog
    from refbench.report import build_report
    from refbench.report.compare import shared_figures
    from refbench.report.verdict import run_verdict
    from refbench.runstore import Run
    from test_report import _run

    made = _run(refbench, tmp_path, "--set", "sleepy.cases=6", "--repeats", "2")
    run = Run(made)
    parsed = []
    real = Run._parse_record
    monkeypatch.setattr(Run, "_parse_record", lambda self, path: parsed.append(path) or real(self, path))
    build_report(run)
    run_verdict(run)
    accept.evaluate(run, accept.parse({"sleepy": {"ops_per_s": ">= 1"}}, str))
    shared_figures([run, run])
    with Catalog(made.parent, tmp_path / "catalog.sqlite") as catalog:  # the catalog indexes the same loaded run
        catalog.index(run, warn=pytest.fail)
        assert catalog.runs()[0]["records"] == 7
    assert sorted(parsed) == sorted(set(parsed)) and len(parsed) == 7  # six cases and the headline's repeat
