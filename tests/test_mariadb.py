"""The managed MariaDB server (refbench.engines.mariadb) on a real mariadbd: where it listens, who gets in, what it
runs and counts, that it does not outlive its stop or a kill -9 of the process that started it; and the one sentence
for each bad input (a DSN, a missing binary, an old or foreign server, a user without the privileges)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import textwrap
from concurrent.futures import ThreadPoolExecutor
from decimal import Decimal
from pathlib import Path

import pytest

from conftest import TESTS, wait_for
from process_tree import descendants
from refbench.engines import mariadb
from refbench.engines.managed import ServerDidNotStart
from refbench.engines.mariadb import (ManagedMariaDB, block_counts, check_server, check_server_settings, connect, hit_ratio,
                                      load_lines, server_settings)
from refbench.errors import UserError

pytestmark = pytest.mark.skipif(not shutil.which("mariadbd") and not os.path.exists("/usr/sbin/mariadbd"),
                                reason="mariadb-server is not installed (make setup installs it)")


@pytest.fixture
def base():
    """A directory of the test's own that the mysql system user can reach (pytest's tmp_path is closed to it); a
    server a failing test left in it is stopped."""
    path = Path(tempfile.mkdtemp(prefix="refbench-test-mariadb-"))
    path.chmod(0o755)
    yield path
    ManagedMariaDB(path / "data", {}).stop_stale()
    shutil.rmtree(path, ignore_errors=True)


def _listening_tcp(pid: int) -> list[tuple[str, int]]:
    """(address, port) of the TCP sockets process ``pid`` itself listens on: its own socket inodes, looked up in its
    network namespace's tables (which list every process's sockets)."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except FileNotFoundError:  # closed since the listing: the server opens and closes files as it runs
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    found = []
    for table in ("tcp", "tcp6"):
        for line in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in inodes:  # 0A: LISTEN
                address, port = fields[1].split(":")
                if table == "tcp":
                    address = ".".join(str(b) for b in reversed(bytes.fromhex(address)))
                found.append((address, int(port, 16)))
    return found


def _call(conn, sql: str, params: tuple = ()) -> list[tuple]:
    cursor = conn.cursor()
    cursor.execute(sql, params)
    rows = list(cursor.fetchall()) if cursor.description else []
    while cursor.nextset():
        pass
    return rows


@pytest.mark.live
def test_a_managed_server_listens_on_its_socket_and_loopback_only_runs_procedures_counts_and_stops(base, tmp_path):
    password_file = tmp_path / "secrets" / "oltp-mariadb.password"
    server = ManagedMariaDB(base / "data", {"innodb-buffer-pool-size": "32M"}, password_file)
    server.start()
    try:
        pid = server.process.pid
        assert _listening_tcp(pid) == [("127.0.0.1", server.port)]
        assert stat.S_IMODE(server.socket_dir.stat().st_mode) == 0o700 and server.socket.is_socket()
        assert stat.S_IMODE(password_file.stat().st_mode) == 0o600
        assert password_file.read_text().strip() == server.password

        with connect(server.database("tpcc"), autocommit=True) as conn:
            check_server(conn)
            assert server_settings(conn, ["bind_address", "innodb_buffer_pool_size", "innodb_flush_log_at_trx_commit",
                                          "innodb_doublewrite", "skip_name_resolve", "innodb_buffer_pool_load_at_startup"]) == {
                "bind_address": "127.0.0.1", "innodb_buffer_pool_size": str(32 * 2**20),
                "innodb_flush_log_at_trx_commit": "1", "innodb_doublewrite": "ON", "skip_name_resolve": "ON",
                "innodb_buffer_pool_load_at_startup": "OFF"}
            before = block_counts(conn)
            _call(conn, "CREATE TABLE district (d_id INT PRIMARY KEY, d_next_o_id INT NOT NULL, d_pad CHAR(200))")
            _call(conn, "INSERT INTO district SELECT seq, 3001, 'x' FROM seq_1_to_2000")
            _call(conn, """CREATE PROCEDURE next_order(IN d INT)
                           BEGIN
                             DECLARE o INT;
                             START TRANSACTION;
                             SELECT d_next_o_id INTO o FROM district WHERE d_id = d FOR UPDATE;
                             UPDATE district SET d_next_o_id = o + 1 WHERE d_id = d;
                             COMMIT;
                             SELECT o;
                           END""")
            assert [_call(conn, "CALL next_order(%s)", (7,))[0][0] for _ in range(3)] == [3001, 3002, 3003]
            _call(conn, "SELECT COUNT(*) FROM district WHERE d_pad = 'y'")  # a scan of the table's pages
            _call(conn, "ANALYZE TABLE district")
            after = block_counts(conn)
        assert after["blocks_hit"] > before["blocks_hit"] and after["block_bytes"] == 16384
        assert after["log_written_bytes"] > before["log_written_bytes"]
        assert after["database_bytes"] > 2000 * 200
        assert 0 < hit_ratio(before, after) <= 1

        # TCP takes the generated password, and nothing else.
        with connect(server.tcp_dsn) as conn:
            assert _call(conn, "SELECT CURRENT_USER()")[0][0] == "refbench@127.0.0.1"
        with pytest.raises(UserError, match=r"^cannot connect to MariaDB at 'mysql://refbench:\*\*\*@127.0.0.1:\d+/': "
                                            r"Access denied for user 'refbench'@'127.0.0.1' \(using password: YES\)\.$"):
            connect(f"mysql://refbench:wrong@127.0.0.1:{server.port}/")
    finally:
        server.stop()
    assert not Path(f"/proc/{pid}").exists() or Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z"
    assert not any("mariadbd" in cmd for cmd in descendants(os.getpid()).values())
    assert server.socket_dir is None and not any(Path(tempfile.gettempdir()).glob(f"refbench-mariadb-*/{pid}"))

    # Started again on the data directory: the same password (the run's file), the table still there, and an empty
    # buffer pool (none saved at the stop, none loaded at the start): the table's pages come from storage again.
    server.start()
    try:
        with connect(server.database("tpcc")) as conn:
            before = block_counts(conn)
            assert _call(conn, "SELECT d_next_o_id FROM district WHERE d_id = 7") == [(3004,)]
            _call(conn, "SELECT COUNT(*) FROM district WHERE d_pad = 'y'")
            assert block_counts(conn)["blocks_read"] - before["blocks_read"] >= 2000 * 200 / 16384
        port, socket_dir, pid = server.port, server.socket_dir, server.process.pid
        server.restart()  # the same port and socket, a new process
        assert (server.port, server.socket_dir) == (port, socket_dir) and server.process.pid != pid
        with connect(server.tcp_dsn + "tpcc") as conn:
            assert _call(conn, "SELECT d_next_o_id FROM district WHERE d_id = 7") == [(3004,)]
    finally:
        server.stop()


HOLDER = textwrap.dedent("""
    import sys, time
    from refbench.engines.mariadb import ManagedMariaDB
    server = ManagedMariaDB(sys.argv[1], {"innodb_buffer_pool_size": "32M"})
    server.start()
    print(server.process.pid, server.socket_dir, flush=True)
    time.sleep(600)
""")


@pytest.mark.live
def test_a_kill_9_of_the_process_that_started_it_leaves_no_server(base, tmp_path):
    out, err = tmp_path / "holder.out", tmp_path / "holder.err"
    harness = subprocess.Popen([sys.executable, str(TESTS / "process_tree.py"), "--linger-s", "15", "--stdout", str(out),
                                "--stderr", str(err), "--", sys.executable, "-c", HOLDER, str(base / "data")],
                               stdout=subprocess.PIPE, text=True)
    try:
        holder = json.loads(harness.stdout.readline())["pid"]
        server_pid, socket_dir = wait_for(lambda: out.read_text().split() or None, 120, "the server to start")
        assert "mariadbd" in descendants(holder)[int(server_pid)]
        os.kill(holder, signal.SIGKILL)
        result = json.loads(harness.communicate(timeout=60)[0].strip().splitlines()[-1])
    finally:
        if harness.poll() is None:
            harness.kill()
    assert result["survivors"] == [], err.read_text()
    assert result["code"] == -signal.SIGKILL and result["gone_after_s"] is not None
    assert not Path(socket_dir).exists()


@pytest.mark.live
def test_data_directories_initialised_at_the_same_time_do_not_spoil_each_other(base):
    # A bootstrapping mariadbd removes the "#sql*" files it finds in its tmpdir: sharing /tmp, one of four installs
    # started together lost a temporary table (1 in 6 here; in CI, a whole test module's server).
    servers = [ManagedMariaDB(base / f"data{n}", {}) for n in range(4)]
    with ThreadPoolExecutor(len(servers)) as pool:
        assert list(pool.map(lambda server: server.initialize(), servers)) == [True] * len(servers)
    assert all((server.data_dir / "mysql" / "global_priv.frm").exists() for server in servers)


def test_a_data_directory_the_mysql_user_cannot_reach_is_one_sentence(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("the server runs as refbench's own user, which reaches its own directories")
    closed = tmp_path / "closed"  # pytest's tmp_path is mode 0700, root's
    with pytest.raises(UserError, match=r"^the mysql system user cannot reach .*closed/data: a parent directory is closed"):
        ManagedMariaDB(closed / "data", {}).start()
    assert not closed.exists()  # nothing was created
    assert not ManagedMariaDB.reachable(closed / "data") and ManagedMariaDB.reachable(Path("/var/tmp/new/data"))


@pytest.mark.live
def test_a_user_without_the_privileges_is_one_sentence(base):
    server = ManagedMariaDB(base / "data", {"innodb_buffer_pool_size": "32M"})
    server.start()
    try:
        server.database("tpcc")
        with connect(server.dsn) as conn:
            _call(conn, "CREATE USER 'reader'@'127.0.0.1' IDENTIFIED BY 'reader-pw'")
            _call(conn, "GRANT SELECT, INSERT ON `tpc_`.* TO 'reader'@'127.0.0.1'")
        with connect(f"mysql://reader:reader-pw@127.0.0.1:{server.port}/tpcc") as conn:
            with pytest.raises(UserError) as caught:
                check_server(conn)
        assert str(caught.value) == (
            "the MariaDB user reader@127.0.0.1 lacks the privileges UPDATE, DELETE, CREATE, DROP, INDEX, ALTER, CREATE "
            "ROUTINE, ALTER ROUTINE, EXECUTE, CREATE TEMPORARY TABLES on database 'tpcc', which the benchmark needs (GRANT ALL ON `tpcc`.* TO it).")
    finally:
        server.stop()


@pytest.mark.parametrize("dsn, sentence", [
    ("mysql://bench:secret@127.0.0.1:1/tpcc",
     r"^cannot connect to MariaDB at 'mysql://bench:\*\*\*@127.0.0.1:1/tpcc': Can't connect to server on '127.0.0.1'\.$"),
    ("mysql://bench@localhost/tpcc?unix_socket=/nonexistent/mysqld.sock",
     r"^cannot connect to MariaDB at 'mysql://bench@localhost/tpcc\?unix_socket=/nonexistent/mysqld.sock': "
     r"Can't connect to local server through socket '/nonexistent/mysqld.sock' \(No such file or directory\)\.$"),
    ("mysql://bench@nosuchhost.invalid/tpcc",
     r"^cannot connect to MariaDB at 'mysql://bench@nosuchhost.invalid/tpcc': Unknown server host 'nosuchhost.invalid'\.$"),
    ("postgresql://bench@db1/tpcc", r"^'postgresql://bench@db1/tpcc' is not a MariaDB DSN; write it as mysql://"),
    ("mysql://bench:secret@[::1/tpcc", r"^'mysql://bench:\*\*\*@\[::1/tpcc' is not a valid URI \(Invalid IPv6 URL\)"),
    ("mysql://bench@db1:99999/tpcc", r"^the port of 'mysql://bench@db1:99999/tpcc' is not a number from 1 to 65535\.$"),
    ("mysql://bench@db1/tpcc?ssl=1", r"^'mysql://bench@db1/tpcc\?ssl=1' has the parameter 'ssl', which refbench does not"),
])
def test_a_bad_or_unreachable_dsn_is_one_sentence_without_its_password(dsn, sentence):
    with pytest.raises(UserError, match=sentence) as caught:
        connect(dsn)
    assert "secret" not in str(caught.value) and "\n" not in str(caught.value)


def test_a_missing_server_binary_is_one_sentence(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.setattr(mariadb, "BINARY_DIRS", ("/nonexistent",))
    with pytest.raises(UserError, match=r"^the MariaDB server is not installed \(mariadb-install-db not found\); "
                                        r"install it with 'apt-get install mariadb-server'"):
        mariadb.require_server_binaries()


@pytest.mark.parametrize("version, problem", [
    ("10.11.19-MariaDB-0+deb12u1", None),
    ("10.6.21-MariaDB", None),
    ("11.4.5-MariaDB-log", None),
    ("5.5.5-10.11.6-MariaDB", None),  # the handshake's prefix for old MySQL clients
    ("10.5.27-MariaDB", "the MariaDB server is version 10.5.27-MariaDB, too old for refbench's SQL, which needs 10.6 or newer."),
    ("8.0.36", "the server at this DSN is not MariaDB (its version is '8.0.36'); refbench's mysql:// engine drives MariaDB only."),
])
def test_a_server_too_old_or_not_mariadb_is_one_sentence(version, problem):
    assert mariadb.version_problem(version) == problem


@pytest.mark.parametrize("settings, sentence", [
    ({"innodb_buffer_pool_sise": "64M"}, "[oltp] mariadb_settings item 'innodb_buffer_pool_sise=64M' is refused by MariaDB: "
                                         "unknown variable 'innodb_buffer_pool_sise=64M'."),
    ({"innodb-buffer-pool-size": "64X"}, "the setting innodb_buffer_pool_size is refused by MariaDB: Unknown suffix 'X' used "
                                         "for variable 'innodb-buffer-pool-size' (value '64X'); legal suffix characters "
                                         "are: K, M, G, T, P, E."),
    ({"innodb_flush_log_at_trx_commit": "7"}, "the setting innodb_flush_log_at_trx_commit is refused by MariaDB: option "
                                              "'innodb-flush-log-at-trx-commit': unsigned value 7 adjusted to 3."),
    ({"innodb_doublewrite": "maybe"}, "the setting innodb_doublewrite is refused by MariaDB: ignoring option "
                                      "'--innodb-doublewrite' due to invalid value 'maybe'."),
    ({"bind-address": "0.0.0.0"}, "the setting bind-address sets bind_address, which refbench sets itself for the MariaDB "
                                  "server it manages."),
])
@pytest.mark.live
def test_a_setting_mariadbd_refuses_is_one_sentence_and_nothing_is_written(settings, sentence, base):
    origins = {"innodb_buffer_pool_sise": "[oltp] mariadb_settings item 'innodb_buffer_pool_sise=64M'"}
    with pytest.raises(UserError) as caught:
        check_server_settings(settings, origins)
    assert str(caught.value) == sentence
    with pytest.raises(UserError):
        ManagedMariaDB(base / "data", settings).start()
    assert not (base / "data").exists()
    check_server_settings({"innodb_buffer_pool_size": "64M", "innodb-flush-log-at-trx-commit": "2"})


@pytest.mark.live
def test_a_server_that_cannot_start_says_why_in_one_sentence(base):
    server = ManagedMariaDB(base / "data", {"innodb_buffer_pool_size": "32M"})
    server.start()
    server.stop()
    (base / "data" / "ib_logfile0").unlink()  # InnoDB's redo log: without it InnoDB refuses to start
    with pytest.raises(ServerDidNotStart) as caught:
        server.start()
    # The cause first, then what followed from it, in the server's words; no setting is to blame.
    assert str(caught.value).startswith("MariaDB did not start with the settings innodb_buffer_pool_size=32M: [ERROR] "
                                        "InnoDB: File ./ib_logfile0 was not found; [ERROR] "), str(caught.value)
    assert "\n" not in str(caught.value)
    assert mariadb.last_panic() == f"InnoDB: File ./ib_logfile0 was not found (its log: {base / 'data.log'})"
    server.stop()
    assert not any("mariadbd" in cmd for cmd in descendants(os.getpid()).values())


@pytest.mark.live
def test_rows_in_copy_text_format_stream_in_with_load_data_local_infile(base, tmp_path, monkeypatch):
    server = ManagedMariaDB(base / "data", {"innodb_buffer_pool_size": "32M"})
    server.start()
    # The loader's pipes are made in the temporary directory: this test's own, so another test's loads are not seen.
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    try:
        with connect(server.database("tpcc"), local_infile=True, autocommit=True) as conn:
            _call(conn, "CREATE TABLE item (i_id INT PRIMARY KEY, i_name VARCHAR(24), i_price DECIMAL(5,2), i_data VARCHAR(50))")
            null, escaped_tab = "\\N", "a\\tb"  # COPY's text format: NULL, and a tab inside a value
            lines = (f"{i}\titem {i}\t{i % 100}.25\t{null if i % 10 == 0 else escaped_tab}\n" for i in range(1, 20001))
            pipes_before = set(Path(tempfile.gettempdir()).glob("refbench-load-*"))
            assert load_lines(conn, "item", "i_id, i_name, i_price, i_data", lines) == 20000
            assert _call(conn, "SELECT COUNT(*), SUM(i_data IS NULL), MAX(i_data), SUM(i_price) FROM item") == [
                (20000, 2000, "a\tb", Decimal(sum(i % 100 for i in range(1, 20001))) + Decimal("0.25") * 20000)]
            assert set(Path(tempfile.gettempdir()).glob("refbench-load-*")) <= pipes_before

            with pytest.raises(Exception, match="doesn't exist"):  # the statement fails before it reads: no hang
                load_lines(conn, "no_such_table", "a", iter(["1\n"] * 10000))
            with pytest.raises(ValueError, match="a loader's own error"):
                def failing():
                    yield "20001\tlast\t1.00\tx\n"
                    raise ValueError("a loader's own error")
                load_lines(conn, "item", "i_id, i_name, i_price, i_data", failing())

            _call(conn, "SET GLOBAL local_infile = OFF")
            with pytest.raises(UserError, match=r"^the MariaDB server refuses LOAD DATA LOCAL INFILE, which refbench loads "
                                                r"with \(.+\); set local_infile=ON on it\.$"):
                load_lines(conn, "item", "i_id", iter(["30000\n"]))
    finally:
        server.stop()
