"""The DSS suite: its queries and answer checks on real DuckDB and a real managed PostgreSQL."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest

from refbench.engines.postgres import ManagedPostgres
from refbench.suites.dss import datagen
from refbench.suites.dss.answers import as_expected, compare, reference_answer
from refbench.suites.dss.engines import DuckDbEngine, PostgresEngine
from refbench.suites.dss.queries import QUERIES, STREAM_ORDERS, min_streams, stream_queries


@pytest.fixture(scope="module")
def sf1_data(tmp_path_factory):
    return tmp_path_factory.mktemp("tpch-sf1"), 1.0


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
                assert compare(q, p_rows, as_expected(d_rows)) is None, f"stream {stream} Q{q}"
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
