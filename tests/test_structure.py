"""The layout's promises that code can check: no import circle among the modules that read and write runs."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "refbench"
# The run's pieces: a plan is read, a run made and stored, reported, checked, catalogued, run on several hosts.
PARTS = ("plan", "thresholds", "accept", "report", "runstore", "runner", "catalog", "cluster")


def _modules() -> dict[str, Path]:
    out = {}
    for path in SRC.rglob("*.py"):
        name = ".".join(("refbench", *path.relative_to(SRC).with_suffix("").parts)).removesuffix(".__init__")
        if name.count(".") and name.split(".")[1] in PARTS:
            out[name] = path
    return out


def _imports(modules: dict[str, Path]) -> dict[str, set[str]]:
    """module -> the modules of PARTS it imports, at the top or inside a function alike (a lazy import is still a
    dependency; importing a.b runs a's __init__ first), not under TYPE_CHECKING (type hints only)."""
    graph: dict[str, set[str]] = {}
    for module, path in modules.items():
        tree = ast.parse(path.read_text())
        typing_only = {id(n) for node in ast.walk(tree) if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
                       for n in ast.walk(node)}
        named: set[str] = set()
        for node in ast.walk(tree):
            if id(node) in typing_only:
                continue
            if isinstance(node, ast.Import):
                named |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module:
                named |= {node.module} | {f"{node.module}.{a.name}" for a in node.names}
        edges = set()
        for name in named:
            parts = name.split(".")
            edges |= {".".join(parts[:i]) for i in range(2, len(parts) + 1)} & set(modules)  # with the packages above
        graph[module] = edges - {module} - {".".join(module.split(".")[:i]) for i in range(2, module.count(".") + 1)}
    return graph


def test_no_import_circle_among_plan_accept_report_runstore_runner_catalog_and_cluster():
    graph = _imports(_modules())
    circles = set()
    for start in graph:
        stack = [(start, [start])]
        while stack:
            module, path = stack.pop()
            for nxt in graph[module]:
                if nxt == start:
                    circles.add(" -> ".join(path + [start]))
                elif nxt not in path and len(path) < 8:
                    stack.append((nxt, path + [nxt]))
    assert sorted(circles, key=len)[:5] == []
    reached, todo = set(), ["refbench.plan"]  # a plan is read without acceptance or report code
    while todo:
        for nxt in graph[todo.pop()] - reached:
            reached.add(nxt)
            todo.append(nxt)
    assert not {m for m in reached if m.startswith(("refbench.accept", "refbench.report"))}, reached


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
