"""MariaDB as a dss engine, through the registry as a suite opens it: tpchgen's SF 0.01 CSVs loaded with LOAD DATA
LOCAL INFILE, then stream 0's 22 queries in the same SQL text as DuckDB's, compared with DuckDB's answers the way
the suite's check compares them with the answers refbench keeps (rows tied on the ORDER BY as a set)."""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
import time
from pathlib import Path

import pytest

from refbench import engines
from refbench.engines import QueryTimeout
from refbench.engines.mariadb import ManagedMariaDB
from refbench.errors import UserError
from refbench.runstore import Run
from refbench.suites import Record, storage
from refbench.suites.dss import datagen, refresh
from refbench.suites.dss.answers import LOADED, as_expected, compare, kept_answer, reference_answer
from refbench.suites.dss.queries import stream_queries

pytestmark = pytest.mark.skipif(not shutil.which("mariadbd") and not os.path.exists("/usr/sbin/mariadbd"),
                                reason="mariadb-server is not installed (make setup installs it)")

SF = 0.01


@pytest.fixture(scope="module")
def base():
    """A directory the mysql system user can reach (pytest's tmp_path is closed to it)."""
    path = Path(tempfile.mkdtemp(prefix="refbench-test-mariadb-dss-"))
    path.chmod(0o755)
    yield path
    ManagedMariaDB(path / "data", {}).stop_stale()
    shutil.rmtree(path, ignore_errors=True)


def test_mariadb_loads_tpch_and_agrees_with_duckdb_on_stream_0(base):
    data = base / "csv"
    datagen.generate(data, SF)
    duck = engines.open_engine("duckdb", datagen.TPCH, engines.Placement(base / "tpch.duckdb"))
    maria = engines.open_engine("mariadb", datagen.TPCH, engines.Placement(
        base / "data", settings={"innodb_buffer_pool_size": "64M"}, password_file=base / "password", workers=2))
    assert maria.name == "mariadb" and maria.kind == "row store"
    duck.start()
    maria.start()
    try:
        assert not maria.loaded(SF)
        loaded = maria.load(data, SF)
        duck.load(data, SF)
        duck.open()
        assert loaded["rows"] == {t: duck.run(f"SELECT count(*) FROM {t}")[0][0][0] for t in datagen.TABLES}
        assert maria.loaded(SF) and not maria.loaded(0.1)
        maria.open()
        before = maria.counters()
        wrong = {}
        for q, text in stream_queries(0, SF):
            rows, seconds = maria.run(text, timeout_s=60)
            assert seconds > 0
            difference = (compare(q, rows, as_expected(duck.run(text)[0]), between_engines=True)
                          or compare(q, rows, kept_answer(SF, q, text, LOADED), between_engines=True))
            if difference:
                wrong[q] = difference
        assert wrong == {}
        after = maria.counters()
        assert after["blocks_hit"] > before["blocks_hit"] and after["block_bytes"] == 16384
        assert maria.sizes()["tables_bytes"]["lineitem"] > 0 and maria.usage()["logical_read_bytes"] > 0
        assert maria.settings()["innodb_buffer_pool_size"] == str(64 << 20)
        assert "MariaDB" in maria.settings()["version"]
        # On-disk temporary tables go to the storage under test with the data, not to /tmp.
        assert maria.settings(["tmpdir"])["tmpdir"] == str(base / "data" / "#tmp")
        with pytest.raises(QueryTimeout):  # a cross join of lineitem with itself: minutes, cut at 0.2 s
            maria.run("SELECT count(*) FROM lineitem a, lineitem b WHERE a.l_comment < b.l_comment", timeout_s=0.2)
        assert maria.run("SELECT count(*) FROM region")[0] == [(5,)]  # the session still works, without a timeout
        session = maria.session()
        threading.Timer(0.3, session.cancel).start()
        t0 = time.monotonic()
        with pytest.raises(Exception, match="interrupted"):  # cancel() from another thread: KILL QUERY
            session.run("SELECT count(*) FROM lineitem a, lineitem b WHERE a.l_comment < b.l_comment")
        assert time.monotonic() - t0 < 30
        session.close()
        # A cold query restarts the server inside the probe's interval, and InnoDB's counters start again from 0:
        # the interval's page requests are the new server's own, not its counters less the old server's (which made a
        # hit ratio of 100.1% at SF 1).
        probe = storage.engine_probe(maria, None)
        probe.start()
        maria.cold()
        maria.run(dict(stream_queries(0, SF))[6])
        seen = probe.stop()
        since_restart = maria.counters()
        assert seen["blocks_hit"] > 0 and seen["blocks_read"] >= 0 and 0 <= seen["hit_ratio_pct"] <= 100
        assert seen["blocks_hit"] + seen["blocks_read"] <= since_restart["blocks_hit"] + since_restart["blocks_read"]
        (data / "region.csv").write_text("r_regionkey,r_name,r_comment\n0,AFRICA,x\nnot a number,EUROPE,y\n")
        # Two warnings: the value is not a number, and read as 0 it repeats the first row's key.
        with pytest.raises(UserError,
                           match=r"^loading .*region.csv into MariaDB gave 2 warnings, the first: Incorrect integer value"):
            maria.load(data, SF)
        assert not maria.loaded(SF)  # a failed load is not taken for a complete one
        assert "restarted" in maria.cold() and maria.run("SELECT count(*) FROM nation")[0] == [(25,)]
        assert maria.data_files() and maria.server_pid() == maria.server.process.pid
    finally:
        maria.stop()
        duck.stop()
    assert maria.server.process is None


@pytest.mark.slow
@pytest.mark.reference
@pytest.mark.timeout(1800)  # a shared or slower machine: 900 s was cut short once beside a full `make test`
def test_mariadb_answers_match_the_reference_set_at_sf1_and_a_refresh_pair_leaves_the_data_as_it_was(tpch_sf1, base):
    """The TPC-H reference answers at SF 1 (what the dss suite checks at that scale), on the CSVs test_dss's DuckDB
    test uses too. A 2 GB buffer pool holds the data, so the queries' time is the engine's, not the disk's."""
    data, _ = tpch_sf1
    maria = engines.open_engine("mariadb", datagen.TPCH, engines.Placement(
        base / "sf1", settings={"innodb_buffer_pool_size": "2G"}, password_file=base / "sf1-password", workers=2))
    maria.start()
    try:
        assert maria.load(data, 1.0)["rows"]["lineitem"] == 6_001_215
        maria.open()
        wrong = {}
        for q, text in stream_queries(0, 1.0):
            difference = compare(q, maria.run(text, timeout_s=600)[0], reference_answer(q))
            if difference:
                wrong[q] = difference
        assert wrong == {}
        count = "SELECT (SELECT count(*) FROM orders), (SELECT count(*) FROM lineitem)"
        before = maria.run(count)[0]
        refresh.rf1(maria.run, 1.0, 0, maria.name)  # through the derived table MariaDB needs (error 1235 otherwise)
        added = maria.run(count)[0][0]
        assert added[0] == before[0][0] + 1500 and added[1] > before[0][1] + 1500  # each order has 1 to 7 lines
        refresh.rf2(maria.run, 1.0, 0)
        assert maria.run(count)[0] == before
    finally:
        maria.stop()


def test_a_share_out_of_its_range_is_an_internal_error_naming_it_where_records_are_written(tmp_path):
    """A hit ratio above 100% is a bug in how it was computed, not a figure: writing the record fails, naming it."""
    run = Run(tmp_path)
    impossible = Record({"cold_s": 1.5, "cold_cpu_pct": 40.0}, extra={"storage": {"hit_ratio_pct": 100.1}},
                        suite="dss", case_id="mariadb-q6")
    with pytest.raises(ValueError, match=r"dss mariadb-q6: .*extra\.storage\.hit_ratio_pct = 100\.1$"):
        run.write_record(impossible)
    assert not run.record_path("dss", "mariadb-q6").exists()
    impossible.extra["storage"]["hit_ratio_pct"] = 100.0
    impossible.metrics["new_order_mix_pct"] = -0.5
    with pytest.raises(ValueError, match=r"metrics\.new_order_mix_pct = -0\.5$"):
        run.write_record(impossible)
    impossible.metrics["new_order_mix_pct"] = 0.0
    impossible.metrics["difference_pct"] = -7.5  # a signed difference, not a share
    run.write_record(impossible)
    assert run.records("dss")[0].extra["storage"]["hit_ratio_pct"] == 100.0
