"""The runs catalog: built from the run directories, updated incrementally, rebuilt when deleted."""

from __future__ import annotations

import json
from pathlib import Path

from refbench.catalog import CATALOG_FILE, Catalog

SLEEPY = ("sleepy", "--set", "sleepy.sleep_s=0", "--runs-dir", "runs")


def test_the_catalog_indexes_new_runs_skips_a_corrupt_one_and_rebuilds_from_the_directories(tmp_path, refbench):
    first = refbench(*SLEEPY, "--name", "one")
    second = refbench(*SLEEPY, "--name", "two", "--speed", "2")
    assert first.code == 0 and second.code == 0, first.stderr + second.stderr
    runs = tmp_path / "runs"
    catalog = Catalog(runs)
    assert catalog.update() == 2 and catalog.update() == 0  # nothing changed: nothing indexed again
    listed = {r["name"]: r for r in catalog.runs()}
    assert listed["two"]["headlines"][0]["value"] == 8000.0 and listed["one"]["status"] == "complete"
    assert catalog.runs(suite="device") == []

    (tmp_path / second.last_line / "tags.json").write_text(json.dumps({"firmware": "2.1"}))
    assert catalog.update() == 1
    assert [r["name"] for r in catalog.runs(tags={"firmware": "2.1"})] == ["two"]

    (tmp_path / first.last_line / "run.json").write_text("{ not json")
    warnings: list[str] = []
    catalog.update(warnings.append)
    assert len(warnings) == 1 and "one" in warnings[0]
    assert [r["name"] for r in catalog.runs()] == ["two"]
    catalog.close()

    (runs / CATALOG_FILE).unlink()
    rebuilt = Catalog(runs)
    rebuilt.update()
    assert [r["name"] for r in rebuilt.runs()] == ["two"]  # the corrupt run is skipped, the other comes back
    rebuilt.close()
