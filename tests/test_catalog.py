"""The runs catalog, tags, `refbench runs` and `refbench history`: built from the run directories, updated
incrementally, rebuilt when deleted."""

from __future__ import annotations

import json

from refbench.catalog import CATALOG_FILE, Catalog

SLEEPY = ("sleepy", "--set", "sleepy.sleep_s=0", "--runs-dir", "runs")


def test_the_catalog_indexes_new_runs_marks_a_corrupt_one_and_rebuilds_from_the_directories(tmp_path, refbench):
    first = refbench(*SLEEPY, "--name", "one")
    second = refbench(*SLEEPY, "--name", "two", "--speed", "2")
    assert first.code == 0 and second.code == 0, first.stderr + second.stderr
    runs = tmp_path / "runs"
    assert (runs / CATALOG_FILE).exists()  # each run indexed itself when it ended
    catalog = Catalog(runs)
    assert catalog.update() == 0  # nothing changed since: nothing indexed again
    listed = {r["name"]: r for r in catalog.runs()}
    assert listed["two"]["headlines"][0]["value"] == 8000.0 and listed["one"]["status"] == "complete"
    assert catalog.runs(suite="device") == [] and len(catalog.runs(suite="sleepy")) == 2

    (tmp_path / second.last_line / "tags.json").write_text(json.dumps({"firmware": "2.1"}))
    assert catalog.update() == 1
    assert [r["name"] for r in catalog.runs(tags={"firmware": "2.1"})] == ["two"]

    record = next((tmp_path / first.last_line / "records" / "sleepy").glob("*.json"))
    record.write_text("{ not json")  # edited in place: the directory's time does not change, the file's does
    warnings: list[str] = []
    catalog.update(warnings.append)
    assert len(warnings) == 1 and str(record) in warnings[0]
    listed = {r["name"] or r["run"]: r for r in catalog.runs()}
    assert listed["two"]["status"] == "complete" and listed["two"]["headlines"]
    corrupt = next(r for r in listed.values() if r["status"].startswith("corrupt"))
    assert corrupt["run"] == first.last_line.split("/")[-1] and not corrupt["headlines"]
    catalog.close()

    (runs / CATALOG_FILE).unlink()
    with Catalog(runs) as rebuilt:
        assert rebuilt.update() == 2
        assert [r["status"] for r in rebuilt.runs()][0] == "complete"


def test_tags_filters_and_history_over_several_runs(tmp_path, refbench):
    made = []
    for speed, firmware in ((1, "2.1"), (2, "2.2"), (3, "2.2")):
        result = refbench(*SLEEPY, "--name", f"s{speed}", "--speed", str(speed), "--tag", f"firmware={firmware}",
                          "--tag", "array=raid10")
        assert result.code == 0, result.stderr
        made.append(result.last_line.split("/")[-1])
    bad = refbench(*SLEEPY, "--tag", "no equals sign")
    assert bad.code == 2 and "NAME=VALUE" in bad.stderr

    listed = refbench("runs", "--runs-dir", "runs", "--tag", "firmware=2.2", "--json")
    assert listed.code == 0, listed.stderr
    assert [r["run"] for r in listed.json()] == made[:0:-1]  # newest first
    assert all(r["tags"] == {"firmware": "2.2", "array": "raid10"} for r in listed.json())
    assert refbench("runs", "--runs-dir", "runs", "--suite", "device", "--json").json() == []
    assert len(refbench("runs", "--runs-dir", "runs", "--since", "1d", "--json").json()) == 3
    assert refbench("runs", "--runs-dir", "runs", "--since", "yesterday").code == 2

    retag = refbench("tag", made[0], "firmware=2.2", "array=", "--runs-dir", "runs")
    assert retag.code == 0, retag.stderr
    tagged = {r["run"]: r["tags"] for r in refbench("runs", "--runs-dir", "runs", "--tag", "firmware=2.2", "--json").json()}
    assert tagged[made[0]] == {"firmware": "2.2"} and len(tagged) == 3

    table = refbench("runs", "--runs-dir", "runs")
    assert table.code == 0 and "12,000 ops/s" in table.stdout and "firmware=2.2" in table.stdout

    history = refbench("history", "sleepy.ops_per_s", "--runs-dir", "runs", "--json")
    assert history.code == 0, history.stderr
    points = history.json()["points"]
    assert [p["run"] for p in points] == made and [p["value"] for p in points] == [4000.0, 8000.0, 12000.0]
    assert all(p["n"] and p["low"] <= p["value"] <= p["high"] for p in points)  # the spread of each run's samples
    svg = (tmp_path / history.json()["chart"]).read_text()
    assert "<svg" in svg and (tmp_path / history.json()["chart"]).with_suffix(".png").stat().st_size > 0

    one_case = refbench("history", "sleepy.case-001.ops_per_s", "--runs-dir", "runs", "--tag", "firmware=2.2")
    assert one_case.code == 0 and "over 3 runs" in one_case.stdout, one_case.stderr
    typo = refbench("history", "sleepy.ops_per_sec", "--runs-dir", "runs")
    assert typo.code == 2 and "did you mean sleepy.ops_per_s" in typo.stderr
    assert refbench("history", "nosuite.x", "--runs-dir", "runs").code == 2
