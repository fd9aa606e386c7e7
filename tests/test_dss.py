"""The DSS suite: its queries and answer checks on real DuckDB and a real managed PostgreSQL."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest

from refbench.engines.postgres import ManagedPostgres
from refbench.suites.dss import datagen
from refbench.suites.dss.answers import as_expected, compare, engine_kinds, reference_answer
from refbench.suites.dss.engines import DuckDbEngine, PostgresEngine
from refbench.suites.dss.queries import QUERIES, STREAM_ORDERS, min_streams, stream_queries


@pytest.fixture(scope="module")
def sf1_data(tmp_path_factory):
    return tmp_path_factory.mktemp("tpch-sf1"), 1.0


@pytest.mark.slow
def test_duckdb_answers_match_the_reference_set_at_sf1(sf1_data):
    data, sf = sf1_data
    info = datagen.generate(data, sf)
    assert not info["reused"] and info["bytes"]["lineitem"] > 600e6
    assert datagen.generate(data, sf)["reused"]  # a complete set is not generated twice
    engine = DuckDbEngine(data / "tpch.duckdb")
    loaded = engine.load(data, sf)
    assert loaded["rows"]["lineitem"] == 6_001_215 and engine.loaded(sf)
    try:
        for q, text in stream_queries(0, sf):
            rows, seconds = engine.run(text)
            assert compare(q, rows, reference_answer(q)) is None, f"Q{q}: {compare(q, rows, reference_answer(q))}"
            assert seconds > 0
    finally:
        engine.close()


def test_a_wrong_answer_is_caught():
    expected = reference_answer(1)
    rows = [tuple(row) for row in expected]
    assert compare(1, rows, expected) is None
    money = [list(r) for r in rows]
    money[0][3] = str(float(money[0][3]) + 150)  # a SUM off by more than 100
    assert "row 1, column 4 (sum)" in compare(1, [tuple(r) for r in money], expected)
    average = [list(r) for r in rows]
    average[2][6] = str(round(float(average[2][6]) * 1.02, 2))  # an AVG off by 2%
    assert "row 3, column 7 (avg)" in compare(1, [tuple(r) for r in average], expected)
    assert compare(1, [tuple(r) for r in rows[:-1]], expected) == "3 rows, expected 4"
    assert "row 2, column 1 (str)" in compare(1, [tuple(r) for r in [rows[0], rows[0], rows[2], rows[3]]], expected)


def test_the_two_engines_agree_on_every_query_of_several_streams(tmp_path):
    sf = 0.01
    data = tmp_path / "data"
    datagen.generate(data, sf)
    base = Path(tempfile.mkdtemp(prefix="refbench-test-dss-"))
    base.chmod(0o755)
    server = ManagedPostgres(base / "pgdata", {})
    server.start()
    duck = DuckDbEngine(tmp_path / "tpch.duckdb")
    try:
        duck.load(data, sf)
        duck.open()
        pg = PostgresEngine(server.database("tpch"), server, 2)
        pg.load(data, sf)
        pg.open()
        for stream in (0, 1, 2):
            for q, text in stream_queries(stream, sf):
                d_rows, _ = duck.run(text)
                p_rows, _ = pg.run(text)
                assert compare(q, p_rows, as_expected(d_rows), engine_kinds(q)) is None, f"stream {stream} Q{q}"
        assert pg.cold() == "PostgreSQL restarted" and pg.run("SELECT count(*) FROM nation")[0] == [(25,)]
        assert duck.cold().startswith("DuckDB") and duck.run("SELECT count(*) FROM region")[0] == [(5,)]
        pg.close()
    finally:
        duck.close()
        server.stop()
        shutil.rmtree(base, ignore_errors=True)


def test_streams_follow_the_specification_orders_and_parameters():
    assert [q for q, _ in stream_queries(0, 1)] == STREAM_ORDERS[0]
    assert [q for q, _ in stream_queries(7, 1)] == STREAM_ORDERS[7]
    assert all(sorted(order) == list(range(1, 23)) for order in STREAM_ORDERS)
    assert stream_queries(3, 1) == stream_queries(3, 1)  # seeded: the same run twice
    assert stream_queries(3, 1) != stream_queries(4, 1)
    assert "interval '90' day" in dict(stream_queries(0, 1))[1]
    assert "'13', '31', '23', '29', '30', '18', '17'" in dict(stream_queries(0, 1))[22]
    assert "* 0.01" in dict(stream_queries(0, 0.01))[11]  # FRACTION = 0.0001 / SF
    assert len(QUERIES) == 22 and "{" not in "".join(text for _, text in stream_queries(5, 1))
    assert [min_streams(sf) for sf in (0.01, 1, 10, 100, 1000)] == [2, 2, 3, 5, 7]


def test_tpchgen_failure_is_one_sentence(tmp_path):
    from refbench.errors import UserError

    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.raises(UserError, match="cannot create the TPC-H data directory .*: Not a directory"):
        datagen.generate(blocker / "data", 0.01)


@pytest.mark.slow
def test_dss_runs_every_mode_on_both_engines_and_a_wrong_answer_fails_the_run(tmp_path, refbench):
    import json

    shared = Path(tempfile.mkdtemp(prefix="refbench-test-dss-data-"))
    shared.chmod(0o755)
    args = ["dss", "--sf", "0.01", "--streams", "2", "--data-dir", str(shared), "--runs-dir", "runs"]
    try:
        first = refbench(*args)
        assert first.code == 0, first.stderr
        run = tmp_path / first.last_line
        records = {p.stem: json.loads(p.read_text()) for p in (run / "records" / "dss").glob("[!.]*.json")}
        for engine in ("duckdb", "postgres"):
            assert {f"{engine}-q{q:02d}" for q in range(1, 23)} | {f"{engine}-power", f"{engine}-throughput"} <= set(records)
            q6 = records[f"{engine}-q06"]["metrics"]
            assert q6["cold_s"] > 0 and q6["warm_s"] > 0 and q6["rows"] == 1
            power = records[f"{engine}-power"]["metrics"]
            assert power["power"] > 0 and {f"Q{q}_s" for q in range(1, 23)} | {"RF1_s", "RF2_s"} <= set(power)
            throughput = records[f"{engine}-throughput"]
            assert throughput["metrics"]["streams"] == 2 and throughput["metrics"]["throughput"] > 0
            assert throughput["extra"]["stream_orders"] == {"1": STREAM_ORDERS[1], "2": STREAM_ORDERS[2]}
        findings = json.loads((run / "findings" / "dss.json").read_text())
        assert [f["passed"] for f in findings] == [True] and "same answers" in findings[0]["check"]
        assert {"individual", "figures", "power_steps", "load", "settings"} <= {p.stem for p in (run / "tables" / "dss").glob("*.csv")}
        assert {"single_stream", "parallel_streams", "duckdb_long_queries", "postgres_short_queries"} <= {
            p.stem for p in (run / "charts" / "dss").glob("*.png")}
        assert "Power, throughput and their combination" in (run / "report.html").read_text()

        # The same data and databases again, with one PostgreSQL row changed behind refbench's back.
        server = ManagedPostgres(shared / "pgdata", {})
        server.start()
        try:
            from refbench.engines.postgres import connect

            with connect(server.database("tpch"), autocommit=True) as conn:
                conn.execute("DELETE FROM lineitem WHERE l_orderkey = 1 AND l_linenumber = 1")  # one count off in Q1
        finally:
            server.stop()
        second = refbench(*args, "--modes", "power")
        assert second.code == 1, second.stderr
        assert "FAILED" in second.stderr and "same answers" in second.stderr and "Q1" in second.stderr
        compared = refbench("compare", str(run), str(tmp_path / second.last_line), "--json")
        assert compared.code == 0, compared.stderr
        in_both = {(f["case"], f["metric"]) for f in compared.json()["figures"]}
        assert {("duckdb-power", "elapsed_s"), ("postgres-power", "power"), ("postgres-power", "Q17_s")} <= in_both
    finally:
        ManagedPostgres(shared / "pgdata", {}).stop_stale()
        shutil.rmtree(shared, ignore_errors=True)


def test_compare_sums_up_each_engine_as_the_geometric_mean_of_its_query_speedups():
    from refbench.report.compare import overall, verdict

    rows = []
    for engine, factors in (("duckdb", (2.0, 8.0, 4.0)), ("postgres", (1.0, 1.0, 1.0))):
        for q, f in enumerate(factors, start=1):
            factor, words = verdict("cold_s", 10.0, 10.0 / f)
            rows.append({"suite": "dss", "case": f"{engine}-q{q:02d}", "metric": "cold_s", "factor": factor, "B vs A": words})
    summary = {r["group"]: r for r in overall(rows)}
    assert summary["duckdb"]["geometric mean factor"] == 4.0 and summary["duckdb"]["B vs A"] == "4.00× faster"
    assert summary["postgres"]["B vs A"] == "same" and summary["postgres"]["cases"] == 3
    assert overall(rows[:2]) == []  # two cases are not enough for an overall figure
