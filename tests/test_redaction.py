"""Passwords masked whatever they hold: every form of DSN refbench takes (libpq key=value, postgresql:// URIs and
their ?password=, mysql:// URIs), with '@', ':', '/', '%'-escapes, quotes, backslashes and spaces in the password."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from urllib.parse import quote

import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, Phase, example, given, settings, strategies as st
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict

from conftest import cli_env, refbench_command
from refbench.engines.mariadb import ManagedMariaDB, connect as mariadb_connect, parse_dsn
from refbench.engines.postgres import ManagedPostgres, connect as pg_connect
from refbench.engines.settings import dsn_problem
from refbench.errors import UserError
from refbench.redaction import redact

# What makes a password hard to find the end of, in one form or another.
TRICKY = "@:/%?#&='\"\\ ,;[]!$*+"


@st.composite
def passwords(draw) -> tuple[str, list[str]]:
    """(a password, its markers): tricky characters around markers no DSN or message holds otherwise, so that a piece
    of the password left visible (the 'ss@' of 'p@ss') is found, not only the whole."""
    pieces = draw(st.lists(st.text(TRICKY, max_size=4), min_size=1, max_size=5))
    markers = [f"Qz{i}{draw(st.text('abcXYZ019', min_size=1, max_size=3))}K" for i in range(len(pieces))]
    password = "".join(piece + marker for piece, marker in zip(pieces, markers)) + draw(st.text(TRICKY, max_size=3))
    return password, markers


def _libpq_quoted(password: str) -> str:
    return "'" + password.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _libpq_escaped(password: str) -> str:
    """libpq's unquoted value: a backslash before whatever would end it or start a quote."""
    return "".join("\\" + c if c in " \\'" else c for c in password)


# Each form as written (with the password, the server's host and port), and the parser that reads it: the test reads
# the password back with it, so the DSNs are real ones, not look-alikes.
READ_BACK = {"libpq": lambda dsn: conninfo_to_dict(dsn)["password"], "mysql": lambda dsn: parse_dsn(dsn)["password"]}
FORMS = {
    "key=value quoted": ("libpq", lambda pw, host, port:
                         f"host={host} port={port} user=bench password={_libpq_quoted(pw)} dbname=tpcc"),
    "key=value escaped": ("libpq", lambda pw, host, port:
                          f"host={host} port={port} user=bench password={_libpq_escaped(pw)} dbname=tpcc"),
    "postgresql URI": ("libpq", lambda pw, host, port:
                       f"postgresql://bench:{quote(pw, safe='')}@{host}:{port}/tpcc?sslmode=disable"),
    "postgresql ?password=": ("libpq", lambda pw, host, port:
                              f"postgresql://bench@{host}:{port}/tpcc?password={quote(pw, safe='')}&sslmode=disable"),
    "mysql URI": ("mysql", lambda pw, host, port: f"mysql://bench:{quote(pw, safe='')}@{host}:{port}/tpcc"),
    # urlsplit takes the userinfo to the last '@' of the host part: '@', ':', quotes and spaces work unescaped.
    "mysql URI, unescaped": ("mysql", lambda pw, host, port: f"mysql://bench:{pw}@{host}:{port}/tpcc"),
}


def _dsn(form: str, password: str, host: str, port: int) -> tuple[str, str]:
    """(the DSN of ``form``, the password it holds): unescaped in a URI, '/', '?', '#' end the host part, '%' starts
    an escape and brackets an IPv6 address, so that form's password goes without them."""
    if form == "mysql URI, unescaped":
        password = "".join(c for c in password if c not in "/?#%[]")
    parser, write = FORMS[form]
    dsn = write(password, host, port)
    assert READ_BACK[parser](dsn) == password
    return dsn, password


def _shown_in(text: str, password: str, markers: list[str]) -> list[str]:
    return [s for s in [password, quote(password, safe=""), *markers] if s in text]


@pytest.mark.parametrize("form", FORMS)
@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(secret=passwords())
def test_no_piece_of_any_password_survives_redaction_and_the_rest_of_the_dsn_does(form, secret):
    password, markers = secret
    dsn, password = _dsn(form, password, "db1.example", 5432)
    for text in (dsn, f"cannot connect to MariaDB at '{dsn}': Access denied for user 'bench'@'db1.example'.",
                 f"--dsn={dsn}"):
        shown = redact(text)
        assert _shown_in(shown, password, markers) == [], shown
        assert "***" in shown and "db1.example" in shown and "tpcc" in shown, shown


@settings(max_examples=300, deadline=None)
@given(secret=passwords())
def test_a_mysql_uri_broken_by_its_password_is_masked_in_full_all_the_same(secret):
    """A '/' or '#' written raw ends urlsplit's host part: the DSN fails, and its message still repeats it masked."""
    password, markers = secret
    shown = redact(f"the port of 'mysql://bench:{password}@db1.example/tpcc' is not a number from 1 to 65535.")
    assert _shown_in(shown, password, markers) == [], shown


@settings(max_examples=300, deadline=None)
@given(secret=passwords())
def test_a_mysql_uri_that_does_not_parse_is_refused_in_words_that_hold_no_piece_of_its_password(secret):
    password, markers = secret
    password = "[" + "".join(c for c in password if c not in "/?#[]") + "]"  # urlsplit quotes what is in brackets
    with pytest.raises(UserError) as refused:
        parse_dsn(f"mysql://bench:{password}@db1.example:3306/tpcc")
    assert _shown_in(str(refused.value), password, markers) == [], str(refused.value)


def test_the_defects_seen_and_what_stays_visible():
    assert redact("mysql://bob:p@ss@h/x") == "mysql://bob:***@h/x"
    assert redact("postgresql://bob:a:b/c@h:5432/x") == "postgresql://bob:***@h:5432/x"
    assert redact("host=h password='it''s x' dbname=d") == "host=h password=*** dbname=d"
    assert redact(r"host=h password=it\'s\ x dbname=d") == "host=h password=*** dbname=d"
    assert redact("host=h password='never closed dbname=d") == "host=h password=***"
    assert redact("postgresql://h/x?password=p%40ss&sslmode=require") == "postgresql://h/x?password=***&sslmode=require"
    assert redact("Access denied for user 'bob'@'localhost' (using password: YES)") == \
        "Access denied for user 'bob'@'localhost' (using password: YES)"
    assert redact("mysql://bob@h/x and postgresql://h:5432/x") == "mysql://bob@h/x and postgresql://h:5432/x"


def test_a_libpq_message_about_a_bad_dsn_does_not_quote_a_piece_of_its_password():
    problem = dsn_problem("host=h password='it''s x' dbname=d")
    assert problem is not None and "'s" not in problem and '"***"' in problem, problem


@settings(max_examples=200, deadline=None)
@given(secret=passwords())
def test_a_postgresql_uri_with_a_raw_at_in_its_password_is_refused_in_words_that_hold_no_piece_of_it(secret):
    """libpq ends a URI's password at its first '@' and takes the rest for the host, which its own errors then quote
    ("failed to resolve host 'ss@db1'"): such a URI is refused before it is tried, asking for %40."""
    password, markers = secret
    password = "".join(c for c in password if c not in "/?#") + "@x"  # '/', '?', '#' would end the host part first
    problem = dsn_problem(f"postgresql://bench:{password}@db1.example:5432/tpcc")
    assert problem is not None and "%40" in problem and _shown_in(problem, password, markers) == [], problem


# ---- end to end: a run through a DSN with such a password, and everything it shows and writes ------------------------

# 4 s: beside make test's other workers a 2-s window once held 41 transactions, too few to judge the mix by (a failed
# check, exit 1); what is under test here is what the run shows and writes.
TINY_OLTP = ["oltp", "--warehouses", "1", "--rampup-s", "0", "--duration-s", "4", "--users", "1"]
# A password of every tricky kind at once, run first whatever Hypothesis draws.
NASTY = ("p@ss:w/rd%40 'it''s' \\Qz0aK @h/x", ["Qz0aK"])


@pytest.fixture(scope="module")
def server_dir():
    """Where the module's servers keep their data: reachable by their system accounts (pytest's tmp_path is not)."""
    base = Path(tempfile.mkdtemp(prefix="refbench-test-redaction-"))
    base.chmod(0o755)
    yield base
    shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="module")
def postgres_bench(server_dir):
    """A managed PostgreSQL with a database tpcc of a user bench: (its port, a function that sets bench's password)."""
    server = ManagedPostgres(server_dir / "pgdata", {})
    server.start()
    try:
        with pg_connect(server.dsn, autocommit=True) as conn:
            conn.execute("CREATE ROLE bench LOGIN")
            conn.execute("CREATE DATABASE tpcc OWNER bench")

        def set_password(password: str) -> None:
            with pg_connect(server.dsn, autocommit=True) as conn:
                conn.execute(sql.SQL("ALTER ROLE bench PASSWORD {}").format(sql.Literal(password)))

        yield server.port, set_password
    finally:
        server.stop()


@pytest.fixture(scope="module")
def mariadb_bench(server_dir):
    """The same on a managed MariaDB."""
    if not shutil.which("mariadbd") and not os.path.exists("/usr/sbin/mariadbd"):
        pytest.skip("mariadb-server is not installed (make setup installs it)")
    server = ManagedMariaDB(server_dir / "mariadb", {"innodb_buffer_pool_size": "64M"})
    server.start()
    try:
        with mariadb_connect(server.dsn) as conn:
            conn.cursor().execute("CREATE DATABASE tpcc")

        def set_password(password: str) -> None:
            with mariadb_connect(server.dsn) as conn:
                for host in ("localhost", "127.0.0.1"):
                    conn.cursor().execute(f"CREATE OR REPLACE USER 'bench'@'{host}' IDENTIFIED BY %s", (password,))
                    conn.cursor().execute(f"GRANT ALL ON tpcc.* TO 'bench'@'{host}'")

        yield server.port, set_password
    finally:
        server.stop()


def _texts_of(path: Path) -> str:
    """What a file of a run holds as text: a Parquet table's cells (they may be compressed), else its bytes."""
    if path.suffix == ".parquet":
        return str(pq.read_table(path).to_pylist())
    return path.read_bytes().decode(errors="replace")


def _run_shows_no_password(tmp_path_factory, port: int, set_password, form: str, secret: tuple[str, list[str]]) -> None:
    """A tiny OLTP run through the DSN of ``form`` with the password of ``secret``: no piece of it in what the run
    prints, in any file of the run but its secrets/, in the catalog or in `runs --json`."""
    dsn, password = _dsn(form, secret[0], "127.0.0.1", port)
    set_password(password)
    cwd = tmp_path_factory.mktemp("run")

    def refbench(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(refbench_command(*args), cwd=cwd, env=cli_env(), capture_output=True, text=True,
                              timeout=600)

    run = refbench(*TINY_OLTP, "--dsn", dsn, "--runs-dir", "runs")
    assert run.returncode == 0, run.stderr  # it connected with the password: the DSN and its reading are right
    directory = cwd / run.stdout.strip().splitlines()[-1]
    listed = refbench("runs", "--runs-dir", "runs", "--json")
    assert listed.returncode == 0 and str(directory.name) in listed.stdout, listed.stderr
    # And the other places a DSN is repeated: the dry run's options, the sentence for a server that refuses.
    dry = refbench(*TINY_OLTP, "--dsn", dsn, "--dry-run")
    assert dry.returncode == 0 and "***" in dry.stdout, dry.stderr
    refused = refbench(*TINY_OLTP, "--dsn", dsn.replace(f":{port}", ":1").replace(f"port={port}", "port=1"))
    assert refused.returncode == 2 and "cannot connect" in refused.stderr, refused.stderr
    shown = {"stdout": run.stdout, "stderr": run.stderr, "runs --json": listed.stdout + listed.stderr,
             "--dry-run": dry.stdout + dry.stderr, "refused": refused.stdout + refused.stderr}
    secrets_dir = directory / "secrets"
    for path in [*directory.rglob("*"), cwd / "runs" / "catalog.sqlite"]:
        if path.is_file() and secrets_dir not in path.parents and path.suffix != ".png":
            shown[str(path.relative_to(cwd))] = _texts_of(path)
    assert {"run.json", "report.html", "verdict.json"} <= {Path(name).name for name in shown}
    leaked = {name: _shown_in(text, password, secret[1]) for name, text in shown.items()}
    assert {name: found for name, found in leaked.items() if found} == {}
    plan = json.loads((directory / "run.json").read_text())["plan"]
    assert "***" in plan["options"]["oltp"]["dsn"] and "127.0.0.1" in plan["options"]["oltp"]["dsn"]
    assert [dsn] == [value for _, value in json.loads((secrets_dir / "plan.json").read_text())]  # kept for resume


E2E = settings(max_examples=1, deadline=None, phases=[Phase.explicit, Phase.generate],  # a shrink reruns the CLI
               suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


@pytest.mark.slow
@E2E
@given(form=st.sampled_from(["key=value quoted", "key=value escaped", "postgresql URI", "postgresql ?password="]),
       secret=passwords())
@example(form="key=value quoted", secret=NASTY)
def test_a_postgresql_dsn_password_appears_in_nothing_a_run_shows_or_writes(postgres_bench, tmp_path_factory, form,
                                                                            secret):
    _run_shows_no_password(tmp_path_factory, *postgres_bench, form, secret)


@pytest.mark.slow
@E2E
@given(form=st.sampled_from(["mysql URI", "mysql URI, unescaped"]), secret=passwords())
@example(form="mysql URI, unescaped", secret=NASTY)
def test_a_mariadb_dsn_password_appears_in_nothing_a_run_shows_or_writes(mariadb_bench, tmp_path_factory, form, secret):
    _run_shows_no_password(tmp_path_factory, *mariadb_bench, form, secret)
