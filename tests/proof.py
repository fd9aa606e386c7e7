"""compare's proof on this machine (`make test-false-changes`) and the code it proves: the result file it writes
(docs/false-changes.json) names, for each of its parts, the fingerprint of every file or definition that decides
compare's answers as it was when that part ran. A fingerprint is the code's syntax tree without its docstrings, so a
comment or a reflowed line keeps it and any change to what the code does breaks it."""

from __future__ import annotations

import ast
import json
import subprocess
from datetime import datetime, timezone
from hashlib import sha256
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULT = ROOT / "docs" / "false-changes.json"
# What decides compare's answers: the estimator (intervals, families, the repeats asked for), the disturbed rule,
# compare itself, the figures it compares, and the run-to-run spread the catalog pools for it.
GUARDED = {
    "src/refbench/estimate.py": None,
    "src/refbench/host/contention.py": None,
    "src/refbench/report/compare.py": None,
    "src/refbench/figures/__init__.py": None,
    "src/refbench/catalog/__init__.py": "Catalog.spreads",
}
PARTS = ["pairs", "memory hog", "synchronous_commit=off", "1 → 4 users", "write-throttled device"]
# Guarded code a part never runs, so a change to it leaves that part's result standing: the memory hog part runs
# `refbench oltp` beside a hog and reads the records' marks, and a run's code never reaches compare (pyproject's
# "run-not-compare" contract holds it).
NOT_RUN_BY = {"memory hog": {"src/refbench/report/compare.py"}}


def _without_docstrings(tree: ast.AST) -> ast.AST:
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr) \
                and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
            node.body = body[1:] or [ast.Pass()]
    return tree


def _definition(tree: ast.Module, dotted: str) -> ast.AST:
    node: ast.AST = tree
    for name in dotted.split("."):
        node = next(n for n in node.body if isinstance(n, (ast.ClassDef, ast.FunctionDef)) and n.name == name)
    return node


def fingerprint(source: str, definition: str | None = None) -> str:
    tree = _without_docstrings(ast.parse(source))
    return sha256(ast.dump(_definition(tree, definition) if definition else tree).encode()).hexdigest()[:16]


def fingerprints(root: Path = ROOT) -> dict[str, str]:
    return {path + (f":{d}" if d else ""): fingerprint((root / path).read_text(), d) for path, d in GUARDED.items()}


def record(part: str, code: dict[str, str], passed: bool, summary: str, detail: dict) -> None:
    """Writes one part's result into the result file, with ``code``: the fingerprints of the code it ran on, taken
    when it started."""
    assert part in PARTS, part
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    results = json.loads(RESULT.read_text()) if RESULT.exists() else {}
    results[part] = {"passed": passed, "summary": summary, "code": code,
                     "commit": head.stdout.strip() or None,
                     "utc": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M"), **detail}
    RESULT.write_text(json.dumps(results, indent=1, ensure_ascii=False, default=str) + "\n")


def stale() -> list[str]:
    """What keeps the last proof from standing for this code: a part missing, failed, or run on other code."""
    results = json.loads(RESULT.read_text()) if RESULT.exists() else {}
    now, problems = fingerprints(), []
    for part in PARTS:
        result = results.get(part)
        if result is None:
            problems.append(f"{part}: no result")
            continue
        if not result["passed"]:
            problems.append(f"{part}: failed ({result['summary']})")
        changed = [name for name, value in now.items()
                   if name not in NOT_RUN_BY.get(part, ()) and result["code"].get(name) != value]
        if changed:
            problems.append(f"{part}: ran on other code of {', '.join(changed)}")
    return problems
