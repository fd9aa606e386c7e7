"""The data-warehouse rating: its capacity rules, relative throughput, and a run on real engines."""

from __future__ import annotations

import os
import shutil

import pytest

from refbench.suites.dw.capacity import CapacityRules, whole_tb


def test_capacity_rules_reproduce_paper_000():
    rules = CapacityRules()
    assert whole_tb(rules.maximum_tb(12_000)) == 41  # 12,000 GB data volume → "Maximum User Data Capacity (TB) 41"
    assert rules.maximum_tb(12_000) == pytest.approx(40.5)
    rating = rules.rate(12_000, physical_scan_mb_s=4_849, memory_gb=512)
    assert whole_tb(rating["rated_tb"]) == 36 and rating["decided_by"] == "memory limit"  # "Rated User Capacity (TB) 36"
    assert rating["limits_tb"]["throughput limit"] > rating["limits_tb"]["maximum user data capacity"]


def test_each_limit_can_decide_and_the_rules_are_configurable():
    rules = CapacityRules()
    assert rules.rate(100, physical_scan_mb_s=10_000, memory_gb=10_000)["decided_by"] == "maximum user data capacity"
    assert rules.rate(100_000, physical_scan_mb_s=50, memory_gb=10_000)["decided_by"] == "throughput limit"
    strict = CapacityRules(free_space_pct=20, temp_reserve_pct=50, compression=2)
    assert strict.maximum_tb(1000) == pytest.approx(1000 * 0.8 * 0.5 * 2 / 1000)
    assert strict.rate(1000, None, 1)["rules"]["compression"] == 2


@pytest.mark.slow
def test_a_dw_run_rates_both_stores_and_agrees_with_an_independent_reading(tmp_path, refbench):
    import json
    import shutil
    import tempfile
    from pathlib import Path

    from refbench.engines.postgres import ManagedPostgres
    from refbench.host.telemetry import Telemetry

    data = Path(tempfile.mkdtemp(prefix="refbench-test-dw-"))
    data.chmod(0o755)
    try:
        first = refbench("dw", "--duration-s", "10", "--data-dir", str(data), "--runs-dir", "runs", "--keep-work", timeout=300)
        assert first.code == 0, first.stderr
        run = tmp_path / first.last_line
        records = {p.stem: json.loads(p.read_text()) for p in (run / "records" / "dw").glob("[!.]*.json")}
        assert set(records) == {"postgres", "duckdb"}
        row = records["postgres"]
        m = row["metrics"]
        assert m["queries_completed"] > 0 and m["queries_per_hour_per_tb"] > 0
        assert m["physical_scan_mb_s"] > 0 and m["logical_scan_mb_s"] > 0  # memory capped, data kept out of the cache
        assert m["io_throughput_mb_s"] == pytest.approx((m["physical_scan_mb_s"] + m["logical_scan_mb_s"]) / 2, abs=0.01)
        assert records["duckdb"]["metrics"]["logical_scan_mb_s"] is None  # N/A, as the DWFT rating paper's column store
        # The physical scan rate against the run's own once-a-second /proc/diskstats samples over the interval.
        t0, t1 = row["extra"]["interval_epoch_s"]
        sampled = Telemetry(run / "telemetry" / "samples.jsonl").device(row["extra"]["device"], t0, t1)["read_mb_s"]
        assert sampled == pytest.approx(m["physical_scan_mb_s"], rel=0.10)
        csv = (run / "tables" / "dw" / "primary.csv").read_text()
        assert "rating decided by" in csv and any(limit in csv for limit in ("maximum user data capacity", "memory limit", "throughput limit"))
        sheet = (run / "tables" / "dw" / "rating_sheet.csv").read_text()
        assert "Primary metrics,rated user data capacity (TB)," in sheet and "Row Store (postgres),queries/h," in sheet
        assert "refbench data-warehouse rating sheet</h3>" in (run / "report.html").read_text()  # a table, not an image

        # A second run names the first as its reference.
        second = refbench("dw", "--duration-s", "3", "--data-dir", str(data), "--runs-dir", "runs",
                          "--reference", first.last_line, timeout=300)
        assert second.code == 0, second.stderr
        again = tmp_path / second.last_line
        reference = json.loads((again / "records" / "dw" / "duckdb.json").read_text())["extra"]["reference"]
        assert reference["run"] == run.name
        assert reference["queries_per_hour_per_tb"] == records["duckdb"]["metrics"]["queries_per_hour_per_tb"]
        relative = (again / "tables" / "dw" / "stores.csv").read_text()
        assert "column store,duckdb," in relative
    finally:
        ManagedPostgres(data / "pgdata", {}).stop_stale()
        shutil.rmtree(data, ignore_errors=True)


def test_relative_throughput_of_a_run_against_itself_is_100_percent():
    from refbench.suites import Record
    from refbench.suites.dw.summary import summarize

    def record(engine, qphtb):
        return Record({"queries_per_hour_per_tb": qphtb, "queries_per_hour": qphtb * 1000, "physical_scan_mb_s": 100.0,
                       "logical_scan_mb_s": None, "io_throughput_mb_s": None, "cpu_avg_pct": 50.0},
                      extra={"store": "column store", "reference": {"run": "self", "queries_per_hour_per_tb": qphtb},
                             "capacity_inputs": {"data_volume_gb": 12_000, "memory_gb": 512, "volume_from": "test",
                                                 "memory_from": "test", "rules": {}}},
                      params={"engine": engine})

    tables = {t.name: t.rows for t in summarize([record("duckdb", 2365.0)])}
    assert tables["stores"][0]["relative throughput %"] == 100
    assert tables["primary"][0]["column store relative throughput %"] == 100
    assert tables["primary"][0]["maximum user data capacity (TB)"] == 41


@pytest.mark.slow
@pytest.mark.skipif(not shutil.which("mariadbd") and not os.path.exists("/usr/sbin/mariadbd"),
                    reason="mariadb-server is not installed")
def test_mariadb_is_rated_as_a_row_store_beside_the_column_store(tmp_path, refbench):
    """MariaDB through the whole dw suite, at SF 0.01 to stay short: its logical scan rate comes from its buffer pool's
    page requests, its data files are not evicted (O_DIRECT), and the rated figures per store sit side by side."""
    import json
    import tempfile
    from pathlib import Path

    from refbench.engines.mariadb import ManagedMariaDB

    data = Path(tempfile.mkdtemp(prefix="refbench-test-dw-mariadb-"))
    data.chmod(0o755)
    try:
        result = refbench("dw", "--engines", "mariadb,duckdb", "--sf", "0.01", "--duration-s", "3", "--data-dir", str(data),
                          "--runs-dir", "runs", timeout=300)
        assert result.code == 0, result.stderr
        run = tmp_path / result.last_line
        maria = json.loads((run / "records" / "dw" / "mariadb.json").read_text())
        assert maria["extra"]["store"] == "row store" and maria["extra"]["data_files"] == 0
        assert maria["metrics"]["queries_completed"] > 0 and maria["metrics"]["logical_scan_mb_s"] > 0
        assert "innodb_buffer_pool_size 64M" in maria["method"] and "O_DIRECT" in maria["method"]
        sheet = (run / "tables" / "dw" / "rating_sheet.csv").read_text()
        assert "Row Store (mariadb),queries/h," in sheet and "Column Store (duckdb),queries/h," in sheet
        verdict = json.loads((run / "verdict.json").read_text())[0]
        assert [(e["engine"], e["store"], e["checks"]) for e in verdict["engines"]] == [
            ("mariadb", "row store", "2 passed"), ("duckdb", "column store", "2 passed")]  # its answers + its interval
        assert verdict["checks_failed"] == 0 and not (data / "mariadb").exists()  # the run's own server, removed
    finally:
        ManagedMariaDB(data / "mariadb", {}).stop_stale()
        shutil.rmtree(data, ignore_errors=True)
