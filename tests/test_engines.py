"""The one engine interface: suites reach databases only through refbench.engines, the registry finds engines by
name and by DSN, and every registered engine has the whole interface."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

import refbench.engines as engines
from refbench.engines import Engine, engine_for_dsn, get_engine
from refbench.errors import UserError

SUITES = Path(engines.__file__).parent.parent / "suites"
# What a suite may import from refbench.engines besides the interface: the plan's checks of engine settings, and fio,
# which drives I/O, not a database.
ALLOWED = {"refbench.engines", "refbench.engines.settings", "refbench.engines.fio",
           "refbench.engines.waits"}  # the sampler and what a wait means: no engine of its own
CLIENTS = {"psycopg", "psycopg2", "duckdb", "mariadb", "MySQLdb", "pymysql"}
# Not under the rule: the mixed analytics suite uses DuckDB as a computation library beside pandas and Dask (its
# workload), not as a database engine behind the interface.
EXEMPT = {"analytics"}
# Modules still reaching an engine directly (none now: oltp moved behind refbench.engines.Transactional). Each must
# still break the rule, so this list can only shrink.
PENDING: set[str] = set()


def _concrete_imports(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                 else [node.module or ""] if isinstance(node, ast.ImportFrom) and node.level == 0 else [])
        for name in names:
            if name.split(".")[0] in CLIENTS or (name.startswith("refbench.engines.") and name not in ALLOWED):
                found.append(name)
    return found


def test_no_suite_imports_a_concrete_engine():
    modules = {str(p.relative_to(SUITES)): p for p in SUITES.rglob("*.py") if p.relative_to(SUITES).parts[0] not in EXEMPT}
    assert "dss/__init__.py" in modules and "storage.py" in modules
    broken = {name: found for name, p in modules.items() if (found := _concrete_imports(p))}
    assert {name: found for name, found in broken.items() if name not in PENDING} == {}
    assert set(PENDING) <= set(broken), f"moved behind the interface, take off PENDING: {set(PENDING) - set(broken)}"


@pytest.mark.parametrize("dsn, engine", [
    ("postgresql://bench@db1/tpch", "postgres"), ("postgres://db1/tpch", "postgres"),
    ("host=db1 user=bench dbname=tpch", "postgres"), ("mysql://bench@db1/tpcc", "mariadb"),
    ("MariaDB://bench:secret@127.0.0.1:3306/tpcc", "mariadb"),
])
def test_the_dsn_names_its_engine(dsn, engine):
    assert engine_for_dsn(dsn) == engine


@pytest.mark.parametrize("dsn, says", [
    ("sqlite:///tmp/x.db", "'sqlite://' names no engine"), ("db1/tpch", "neither a URI"),
])
def test_a_dsn_of_no_known_engine_is_one_sentence(dsn, says):
    with pytest.raises(UserError, match=says) as caught:
        engine_for_dsn(dsn)
    assert str(caught.value).count(". ") == 0 and str(caught.value).endswith(".")


def test_an_unknown_engine_name_is_refused():
    with pytest.raises(UserError, match="there is no engine 'oracle'; refbench knows duckdb, postgres, mariadb."):
        get_engine("oracle")


@pytest.mark.parametrize("name", ["duckdb", "postgres", "mariadb"])
def test_each_engine_has_the_whole_interface(name):
    cls = get_engine(name)
    wanted = {n for n, v in vars(Engine).items() if not n.startswith("_") and (callable(v) or isinstance(v, classmethod))}
    wanted |= set(Engine.__annotations__)
    missing = {n for n in wanted if not hasattr(cls, n) and n not in ("server", "dsn")}  # instance attributes
    assert missing == set() and cls.name == name
    for method in ("create", "require_installed", "check_dsn", "reaches", "managed_data_dir"):
        assert inspect.ismethod(getattr(cls, method)), method  # callable before an engine exists


def test_a_dialect_file_of_an_engine_replaces_the_common_one(tmp_path, monkeypatch):
    package = tmp_path / "fakesuite"
    (package / "sql" / "mariadb").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "sql" / "schema.sql").write_text("CREATE TABLE t (a int);")
    (package / "sql" / "mariadb" / "schema.sql").write_text("CREATE TABLE t (a int) ENGINE=InnoDB;")
    monkeypatch.syspath_prepend(str(tmp_path))
    data = engines.Dataset("fake", "Fake", ("t",), "fakesuite")
    assert data.sql("postgres", "schema") == "CREATE TABLE t (a int);"
    assert data.sql("mariadb", "schema").endswith("ENGINE=InnoDB;")


def test_duckdb_through_the_registry_loads_a_dataset_and_answers(tmp_path, monkeypatch):
    """The whole path a suite takes, on a two-table dataset of its own: open_engine, start, load, query, stop."""
    import os

    package = tmp_path / "twotables"
    (package / "sql").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "sql" / "schema.sql").write_text("-- the tables\nCREATE TABLE a (x INTEGER);\nCREATE TABLE b (y VARCHAR);")
    monkeypatch.syspath_prepend(str(tmp_path))
    data = tmp_path / "data"
    data.mkdir()
    (data / "a.csv").write_text("x\n1\n2\n3\n")
    (data / "b.csv").write_text("y\nq\n")
    engine = engines.open_engine("duckdb", engines.Dataset("two", "Two", ("a", "b"), "twotables"),
                                 engines.Placement(tmp_path / "two.duckdb", settings={"memory_limit": "64MB"}))
    engine.start()
    try:
        assert not engine.loaded(1.0)
        assert engine.load(data, 1.0)["rows"] == {"a": 3, "b": 1} and engine.loaded(1.0) and not engine.loaded(2.0)
        engine.open()
        assert engine.run("SELECT sum(x) FROM a")[0] == [(6,)]
        assert engine.settings(["memory_limit"])["memory_limit"] == "61.0 MiB"  # the placement's 64 MB, in DuckDB's words
        assert engine.server is None and engine.server_pid() == os.getpid() and engine.counters() == {}
        assert engine.data_location() == tmp_path / "two.duckdb" and engine.data_files()[0] == tmp_path / "two.duckdb"
    finally:
        engine.stop()
