"""The DSS suite: its queries and answer checks on real DuckDB and a real managed PostgreSQL."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import tempfile
from pathlib import Path

import pytest

from refbench.engines.duckdb import DuckDbEngine
from refbench.engines.mariadb import ManagedMariaDB
from refbench.engines.postgres import ManagedPostgres, PostgresEngine
from refbench.suites.dss import datagen
from refbench.suites.dss.answers import as_expected, compare, reference_answer
from refbench.suites.dss.queries import QUERIES, STREAM_ORDERS, min_streams, stream_queries


@pytest.mark.slow
@pytest.mark.reference
@pytest.mark.timeout(1800)  # a shared or slower machine: 900 s was cut short once beside a full `make test`
def test_duckdb_answers_match_the_reference_set_at_sf1(tpch_sf1):
    (data, info), sf = tpch_sf1, 1.0
    assert not info["reused"] and info["bytes"]["lineitem"] > 600e6
    assert datagen.generate(data, sf)["reused"]  # a complete set is not generated twice
    engine = DuckDbEngine(data / "tpch.duckdb", datagen.TPCH)
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


@pytest.mark.live
def test_the_two_engines_agree_on_every_query_of_several_streams(tmp_path):
    sf = 0.01
    base = Path(tempfile.mkdtemp(prefix="refbench-test-dss-"))
    base.chmod(0o755)
    data = base / "data"  # where the server's own account can read it (pytest's tmp_path is closed to it)
    datagen.generate(data, sf)
    server = ManagedPostgres(base / "pgdata", {})
    server.start()
    duck = DuckDbEngine(tmp_path / "tpch.duckdb", datagen.TPCH)
    try:
        duck.load(data, sf)
        duck.open()
        pg = PostgresEngine(server.database("tpch"), server, 2, datagen.TPCH)
        loaded = pg.load(data, sf)
        assert loaded["copy"] == "server-side COPY FREEZE"
        # A user's server (no managed server to read the files) gets the same rows through the connection.
        through = PostgresEngine(server.database("tpch_dsn"), None, 2, datagen.TPCH).load(data, sf)
        assert through["copy"] == "COPY FREEZE through the connection" and through["rows"] == loaded["rows"]
        pg.open()
        # COPY FREEZE left nothing for VACUUM to freeze: every page of lineitem is all-frozen in the visibility map.
        assert pg.run("CREATE EXTENSION IF NOT EXISTS pg_visibility")[1] >= 0
        assert pg.run("SELECT count(*) FILTER (WHERE NOT all_frozen) FROM pg_visibility_map('lineitem')")[0] == [(0,)]
        for stream in (0, 1, 2):
            for q, text in stream_queries(stream, sf):
                d_rows, _ = duck.run(text)
                p_rows, _ = pg.run(text)
                assert compare(q, p_rows, as_expected(d_rows), between_engines=True) is None, f"stream {stream} Q{q}"
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


def _fake_tpchgen(directory: Path, monkeypatch, version: str, stderr: str = "") -> None:
    """A tpchgen-cli of ``version`` first on PATH (none beside this Python), failing with ``stderr`` when given."""
    directory.mkdir()
    fake = directory / "tpchgen-cli"
    fail = f"printf '%s' {shlex.quote(stderr)} >&2; exit 2" if stderr else "exit 0"
    fake.write_text(f'#!/bin/sh\n[ "$1" = --version ] && {{ echo "tpchgen-cli {version}"; exit 0; }}\n{fail}\n')
    fake.chmod(0o755)
    monkeypatch.setattr(datagen.sys, "executable", str(directory / "python"))
    monkeypatch.setenv("PATH", f"{directory}:{os.environ['PATH']}")
    datagen.generator_version.cache_clear()


@pytest.mark.parametrize("version", ["1.1.0", "2.0.0", "3.0.0", "5.0.0"])
def test_another_tpchgen_version_is_refused_in_one_sentence_before_any_data(tmp_path, monkeypatch, version):
    from refbench.errors import UserError

    _fake_tpchgen(tmp_path / "bin", monkeypatch, version)
    with pytest.raises(UserError, match=rf"tpchgen-cli {version}; refbench drives 4\.x, the version its kept answers "
                                        r"were computed on: install it with 'make setup' \(or pip install "
                                        r"'tpchgen-cli>=4\.0,<5'\)\.$"):
        datagen.generate(tmp_path / "data", 0.01)
    assert not (tmp_path / "data").exists() or not any((tmp_path / "data").iterdir())
    datagen.generator_version.cache_clear()


def test_a_failing_tpchgen_shows_its_first_error_line(tmp_path, monkeypatch):
    from refbench.errors import UserError

    _fake_tpchgen(tmp_path / "bin", monkeypatch, "4.0.0",
                  "error: unexpected argument '--overwrite' found\n\nUsage: tpchgen-cli csv [OPTIONS]\n\n"
                  "For more information, try '--help'.\n")
    with pytest.raises(UserError, match=r"could not generate scale factor 0\.01 in .*: error: unexpected argument "
                                        r"'--overwrite' found$"):
        datagen.generate(tmp_path / "data", 0.01)
    datagen.generator_version.cache_clear()


def test_the_generator_pin_is_the_kept_sets_and_the_runs_record_it(tmp_path):
    import lzma
    import tomllib
    from importlib.resources import files

    from refbench.suites.dss import answers

    pyproject = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())
    assert datagen.PIN in pyproject["project"]["dependencies"]
    for sf in answers.KEPT_SCALE_FACTORS:
        path = files("refbench.suites.dss").joinpath(answers.KEPT_DIR, answers.kept_file_name(sf))
        with path.open("rb") as raw, lzma.open(raw, "rt") as f:
            made_with = json.load(f)["made_with"]["tpchgen-cli"]
        assert made_with.split(".")[0] == str(datagen.GENERATOR_MAJOR), (sf, made_with)
    info = datagen.generate(tmp_path / "data", 0.01)
    assert info["generator"] == f"tpchgen-cli {datagen.generator_version(datagen.tpchgen())}"
    assert json.loads((tmp_path / "data" / datagen.MARKER).read_text())["generator"] == info["generator"]


@pytest.mark.slow
def test_dss_runs_every_mode_on_every_engine_and_a_wrong_answer_fails_the_run(tmp_path, refbench):
    import json

    shared = Path(tempfile.mkdtemp(prefix="refbench-test-dss-data-"))
    shared.chmod(0o755)
    args = ["dss", "--sf", "0.01", "--streams", "2", "--engines", "duckdb,postgres,mariadb", "--data-dir", str(shared),
            "--runs-dir", "runs", "--keep-work"]
    try:
        first = refbench(*args)
        assert first.code == 0, first.stderr
        run = tmp_path / first.last_line
        records = {p.stem: json.loads(p.read_text()) for p in (run / "records" / "dss").glob("[!.]*.json")}
        for engine in ("duckdb", "postgres", "mariadb"):
            assert {f"{engine}-q{q:02d}" for q in range(1, 23)} | {f"{engine}-power", f"{engine}-throughput"} <= set(records)
            q6 = records[f"{engine}-q06"]["metrics"]
            assert q6["cold_s"] > 0 and q6["warm_s"] > 0 and q6["rows"] == 1
            power = records[f"{engine}-power"]["metrics"]
            assert power["power"] > 0 and {f"Q{q}_s" for q in range(1, 23)} | {"RF1_s", "RF2_s"} <= set(power)
            throughput = records[f"{engine}-throughput"]
            assert throughput["metrics"]["streams"] == 2 and throughput["metrics"]["throughput"] > 0
            assert throughput["extra"]["stream_orders"] == {"1": STREAM_ORDERS[1], "2": STREAM_ORDERS[2]}
        # DuckDB's streams say where their time went from its profiler: the power stream's 22 queries and each
        # statement of its refresh functions, in operators and block reads.
        profile = records["duckdb-power"]["extra"]["storage"]["waits"]
        assert profile["source"] == "DuckDB's profiler" and profile["samples"] > 24, profile
        assert sum(e["share_pct"] for e in profile["events"]) == pytest.approx(100, abs=0.1)
        assert ("CPU", "scan") in {(e["class"], e["event"]) for e in profile["events"]}
        assert records["duckdb-power"]["metrics"]["wait_cpu_pct"] > 0
        assert "io_latency" in records["duckdb-throughput"]["extra"]["storage"]
        findings = json.loads((run / "findings" / "dss.json").read_text())
        assert all(f["passed"] for f in findings), [f for f in findings if not f["passed"]]
        # Every answer of every engine and stream, against the answers refbench keeps for SF 0.01; each finding names
        # one engine, and the engines table counts each engine's own.
        checks = {f["check"]: f["detail"] for f in findings}
        for engine in ("duckdb", "postgres", "mariadb"):
            for kind, n in (("stream 0", 22), ("power stream", 22), ("throughput streams", 44)):
                detail = checks.pop(f"{engine}: {kind} answers checked at full precision")
                assert detail.startswith(f"{n} answers compared at full precision: "), (engine, kind, detail)
                assert "against the answers kept for SF 0.01" in detail
        assert not checks
        verdict = json.loads((run / "verdict.json").read_text())[0]
        assert [(e["engine"], e["kind"], e["checks"]) for e in verdict["engines"]] == [
            ("duckdb", "column store", "3 passed"), ("mariadb", "row store", "3 passed"),
            ("postgres", "row store", "3 passed")]
        assert all(e["load s"] > 0 and e["power"] > 0 and e["query time geometric mean s"] > 0 for e in verdict["engines"])
        assert "the engines compared" in (run / "report.html").read_text()
        assert {"individual", "figures", "power_steps", "load", "settings"} <= {p.stem for p in (run / "tables" / "dss").glob("*.csv")}
        assert {"single_stream", "parallel_streams", "duckdb_long_queries", "postgres_short_queries"} <= {
            p.stem for p in (run / "charts" / "dss").glob("*.png")}
        assert "Engines compared: load, power, throughput and their combination" in (run / "report.html").read_text()

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
        failed = [line for line in second.stderr.splitlines() if line.startswith("FAILED")]
        assert [line.split(" — ")[0] for line in failed] == [
            "FAILED dss: postgres: stream 0 answers checked at full precision",
            "FAILED dss: postgres: power stream answers checked at full precision"], failed  # its Q1 saw it too
        assert "wrong: Q1 of stream 0: row " in failed[0] and "against the answers kept for SF 0.01" in failed[0]
        compared = refbench("compare", str(run), str(tmp_path / second.last_line), "--json", "--all")
        assert compared.code == 0, compared.stderr
        in_both = {(f["case"], f["metric"]) for f in compared.json()["figures"]}
        assert {("duckdb-power", "elapsed_s"), ("postgres-power", "power"), ("postgres-power", "Q17_s")} <= in_both
    finally:
        ManagedPostgres(shared / "pgdata", {}).stop_stale()
        ManagedMariaDB(shared / "mariadb", {}).stop_stale()
        shutil.rmtree(shared, ignore_errors=True)


def test_compare_sums_up_each_engine_as_the_geometric_mean_of_its_query_speedups():
    from refbench.report.compare import overall, verdict

    rows = []
    for engine, factors in (("duckdb", (2.0, 8.0, 4.0)), ("postgres", (1.0, 1.0, 1.0))):
        for q, f in enumerate(factors, start=1):
            factor, words = verdict("cold_s", 10.0, 10.0 / f)
            rows.append({"vs": "B", "suite": "dss", "case": f"{engine}-q{q:02d}", "metric": "cold_s", "factor": factor,
                         "B vs A": words})
    summary = {r["group"]: r for r in overall(rows)}
    assert summary["duckdb"]["geometric mean factor"] == 4.0 and summary["duckdb"]["against A"] == "4.00× faster"
    assert summary["postgres"]["against A"] == "same" and summary["postgres"]["cases"] == 3
    assert overall(rows[:2]) == []  # two cases are not enough for an overall figure


def test_a_runaway_query_is_cancelled_at_the_timeout_on_both_engines(tmp_path, reachable_dir):
    import time

    from refbench.engines import QueryTimeout
    from refbench.engines.duckdb import DuckDbSession
    from refbench.engines.postgres import PostgresSession

    duck = DuckDbEngine(tmp_path / "empty.duckdb", datagen.TPCH)
    duck.open()
    server = ManagedPostgres(reachable_dir / "pgdata", {})
    server.start()
    try:
        pg = PostgresSession(server.database("postgres"))
        sessions = {"duckdb": (duck.session(), "SELECT count(*) FROM range(100000000000) t(i) WHERE i % 7 = 3"),
                    "postgres": (pg, "SELECT pg_sleep(60)")}
        for name, (session, runaway) in sessions.items():
            t0 = time.monotonic()
            with pytest.raises(QueryTimeout, match="cancelled after the 0.3 s query timeout"):
                session.run(runaway, timeout_s=0.3)
            assert time.monotonic() - t0 < 30, name  # cancelled, not run to its end (minutes at least)
            assert session.run("SELECT 42", timeout_s=0.3)[0] == [(42,)], name  # the session goes on
        assert pg.run("SHOW statement_timeout")[0] == [("0",)]  # a call without a limit (the refresh functions) has none
        assert isinstance(sessions["duckdb"][0], DuckDbSession)
        pg.close()
    finally:
        duck.close()
        server.stop()


def test_a_tiny_query_timeout_is_recorded_and_the_run_finishes(refbench, tmp_path, reachable_dir):
    import json

    result = refbench("dss", "--sf", "0.01", "--modes", "power,throughput", "--query-timeout-s", "0.001",
                      "--data-dir", str(reachable_dir / "tpch"), "--runs-dir", "runs")
    assert result.code == 1, result.stderr  # finished, with the answers it could not check counted as failed checks
    run = tmp_path / result.last_line
    for engine in ("duckdb", "postgres"):
        power = json.loads((run / "records" / "dss" / f"{engine}-power.json").read_text())
        assert power["metrics"]["timed_out"].startswith("Q") and "Incomplete" in power["method"]
        assert power["metrics"]["Q1_s"] >= 0.001
        throughput = json.loads((run / "records" / "dss" / f"{engine}-throughput.json").read_text())
        assert throughput["metrics"]["timed_out"].startswith("stream ") and "Incomplete" in throughput["method"]
    findings = json.loads((run / "findings" / "dss.json").read_text())
    assert any("ran past the 0.001 s query timeout" in f["detail"] for f in findings if not f["passed"])
    report = (run / "report.html").read_text()
    assert "no: queries timed out" in report and "answers checked at full precision" in report


def test_the_space_check_names_what_each_engine_needs_where(tmp_path):
    from refbench.suites.dss import BYTES_PER_SF, MARIADB_FIXED_BYTES, space_needed

    o = {"sf": 10.0, "dsn": "", "pg_data_dir": str(tmp_path / "pg"), "shared_buffers": "256MB",
         "pg_settings": ["max_wal_size=2GB"]}
    needs = space_needed(o, tmp_path / "data", ["duckdb", "postgres", "mariadb"], tmp_path / "work")
    assert needs[tmp_path / "data" / "mariadb"] == {"MariaDB tables, indexes and logs": 10 * BYTES_PER_SF["mariadb"]
                                                    + MARIADB_FIXED_BYTES}
    # A DSN's engine is the user's server: nothing of it is written here, and the other server is still managed.
    driven = space_needed({**o, "dsn": "mysql://bench@db1/tpch"}, tmp_path / "data", ["postgres", "mariadb"],
                          tmp_path / "work")
    assert tmp_path / "data" / "mariadb" not in driven and tmp_path / "pg" in driven
    assert needs[tmp_path / "data"] == {"generated CSV": 10 * BYTES_PER_SF["csv"], "DuckDB database": 10 * BYTES_PER_SF["duckdb"]}
    assert needs[tmp_path / "pg"] == {"PostgreSQL tables, indexes, temporary files and WAL":
                                      10 * (BYTES_PER_SF["postgres"] + BYTES_PER_SF["postgres_temp"]) + 2 * 2**30}
    # A complete earlier generation of the same scale factor is reused, so it needs no more space.
    datagen.generate(tmp_path / "small" / "tpch-sf0.01", 0.01)
    assert "generated CSV" not in space_needed({**o, "sf": 0.01}, tmp_path / "small", ["duckdb"],
                                               tmp_path / "work")[tmp_path / "small"]
    # Queries whose answers refbench keeps none of: the answer check's own DuckDB, in the run's work directory.
    apart = "the answer check's DuckDB (no answers kept for these queries)"
    assert tmp_path / "work" not in needs  # SF 10, stream 0 alone (dw): kept
    for seeded in ({"seed": 2, "streams": 0}, {"seed": 1, "streams": 4}, {"sf": 3.0}):
        assert space_needed({**o, **seeded}, tmp_path / "data", ["postgres"], tmp_path / "work")[tmp_path / "work"] == {
            apart: ({**o, **seeded}["sf"]) * BYTES_PER_SF["duckdb"]}, seeded
    assert tmp_path / "work" not in space_needed({**o, "seed": 1, "streams": 3}, tmp_path / "data", ["postgres"],
                                                 tmp_path / "work")


def test_a_scale_factor_that_does_not_fit_is_refused_before_anything_is_written(refbench, tmp_path, reachable_dir):
    result = refbench("dss", "--sf", "100000", "--data-dir", str(reachable_dir / "tpch"), "--runs-dir", "runs")
    assert result.code != 0 and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "not enough free space in" in result.stderr and "SF 100000 (" in result.stderr
    assert "generated CSV 113,300.0 GB" in result.stderr and " GB free" in result.stderr and "GiB" not in result.stderr  # one unit system to a sentence
    assert not (reachable_dir / "tpch").exists() and not (tmp_path / "runs").exists()


def test_the_managed_server_loads_from_a_data_directory_given_relative_to_refbench(reachable_dir, monkeypatch):
    """`make demo`'s data directory is relative to where refbench runs; the managed server reads the CSV files itself
    (server-side COPY), from its own working directory, so it must be given their absolute paths."""
    datagen.generate(reachable_dir / "tpch", 0.01)
    monkeypatch.chdir(reachable_dir)
    server = ManagedPostgres(reachable_dir / "pgdata", {})
    server.start()
    try:
        assert server.can_read(Path("tpch") / "lineitem.csv")  # so the server reads the files, not the client
        engine = PostgresEngine(server.database("tpch"), server, 1, datagen.TPCH)
        loaded = engine.load(Path("tpch"), 0.01)
        assert loaded["rows"]["lineitem"] > 50_000 and engine.loaded(0.01)
        engine.close()
    finally:
        server.stop()
