"""compare's false-change proof stands for the code that makes compare's answers: `make test-false-changes` (45 min,
run by hand) wrote docs/false-changes.json on the estimator, the disturbed rule and compare as they are now, it
passed, and docs/BENCHMARKS.md quotes it."""

from __future__ import annotations

import json

import proof

RUN_IT = ("run `make test-false-changes` on a quiet machine and commit docs/false-changes.json and its figures in "
          "docs/BENCHMARKS.md")


def test_the_last_proof_ran_on_this_code_and_passed():
    problems = proof.stale()
    assert not problems, f"compare's proof does not stand for this code ({'; '.join(problems)}): {RUN_IT}"


def test_the_benchmarks_page_quotes_the_last_proof():
    results = json.loads(proof.RESULT.read_text())
    page = " ".join((proof.ROOT / "docs" / "BENCHMARKS.md").read_text().split())
    said = {part: results.get(part, {}).get("summary", "(no result)") for part in proof.PARTS}
    missing = [f"{part}: {summary}" for part, summary in said.items() if summary not in page]
    assert not missing, f"docs/BENCHMARKS.md does not quote the last proof's {missing}: {RUN_IT}"


def test_a_change_to_what_the_code_does_breaks_its_fingerprint_and_a_comment_does_not():
    source = (proof.ROOT / "src/refbench/host/contention.py").read_text()
    before = proof.fingerprint(source)

    def edited(old: str, new: str) -> str:
        assert old in source
        return proof.fingerprint(source.replace(old, new, 1))

    assert edited("DISTURBED_CPU_PCT = 15.0", "DISTURBED_CPU_PCT = 15.0  # a new comment") == before
    assert edited('"""Where the machine', '"""Reworded: where the machine') == before
    assert edited("DISTURBED_CPU_PCT = 15.0", "DISTURBED_CPU_PCT = 20.0") != before
    catalog = (proof.ROOT / "src/refbench/catalog/__init__.py").read_text()
    spreads = proof.fingerprint(catalog, "Catalog.spreads")
    assert "newest: int = 20" in catalog
    assert proof.fingerprint(catalog.replace("newest: int = 20", "newest: int = 10"), "Catalog.spreads") != spreads
    assert proof.fingerprint(catalog + "\n\ndef elsewhere():\n    return 1\n", "Catalog.spreads") == spreads
