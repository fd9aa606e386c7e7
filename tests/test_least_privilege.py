"""Nobody let in, nothing left behind: the managed PostgreSQL refuses other local users, dies with the refbench that
started it (even by kill -9), no password reaches a run file, the report or the terminal, and the report shows what
came from the host or the plan as text, never as markup."""

from __future__ import annotations

import json
import os
import pwd
import secrets
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from conftest import cli_env, refbench_command
from refbench.engines.postgres import ManagedPostgres, connect
from refbench.host.inventory import postgres_binary
from refbench.redaction import redact

TINY_OLTP = ["oltp", "--warehouses", "1", "--rampup-s", "1", "--duration-s", "3", "--users", "1,2"]


# ---- helpers: only our own processes, files and users --------------------------------------------------------------


def _alive(pid: int) -> bool:
    """Running (a zombie waiting for its reaper has ended)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat[stat.rindex(")") + 2] != "Z"


def _children(pid: int) -> list[int]:
    out = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            out += [int(p) for p in (task / "children").read_text().split()]
        except OSError:
            continue
    return out


def _wait_for(predicate, timeout_s: float, what: str):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout_s:g} s waiting for {what}")


def _postmaster(data_dir: Path) -> tuple[int, Path] | None:
    """(pid, socket directory) from the data directory's own postmaster.pid, once the server is ready."""
    try:
        lines = (data_dir / "postmaster.pid").read_text().splitlines()
    except OSError:
        return None
    if len(lines) >= 8 and lines[7].strip() == "ready":
        return int(lines[0]), Path(lines[4])
    return None


@pytest.fixture
def other_user():
    """A local account that is neither root nor the server's, removed afterwards."""
    if os.geteuid() != 0:
        pytest.skip("creating another local user needs root")
    if not shutil.which("useradd"):
        pytest.skip("useradd is not installed")
    name = f"rbpriv{secrets.token_hex(4)}"
    subprocess.run(["useradd", "--no-create-home", "--user-group", "--shell", "/usr/sbin/nologin", name], check=True)
    try:
        yield pwd.getpwnam(name)
    finally:
        subprocess.run(["userdel", name], check=False)


def _as(user: pwd.struct_passwd, *argv: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(list(argv), user=user.pw_uid, group=user.pw_gid, extra_groups=[], cwd="/", capture_output=True,
                          text=True, timeout=30, env={"PATH": "/usr/bin:/bin", "PGCONNECT_TIMEOUT": "5", **env})


# ---- nobody let in -------------------------------------------------------------------------------------------------


def test_another_local_user_gets_neither_tcp_without_the_password_nor_the_socket(other_user, data_dir, tmp_path):
    server = ManagedPostgres(data_dir, {}, tmp_path / "run" / "secrets" / "oltp-postgres.password")
    server.initialize()
    # What initdb --auth=trust wrote for older refbench versions: start() must close it again.
    (data_dir / "pg_hba.conf").write_text("local all all trust\nhost all all 127.0.0.1/32 trust\n")
    server.start()
    try:
        psql = postgres_binary("psql")
        as_superuser = [psql, "-w", "-p", str(server.port), "-U", "refbench", "-d", "postgres", "-Atc", "SELECT 1"]

        no_password = _as(other_user, *as_superuser, "-h", "127.0.0.1")
        assert no_password.returncode != 0 and "no password supplied" in no_password.stderr, no_password
        wrong = _as(other_user, *as_superuser, "-h", "127.0.0.1", PGPASSWORD="guessed")
        assert wrong.returncode != 0 and "password authentication failed" in wrong.stderr, wrong

        assert _as(other_user, "test", "-x", str(server.socket_dir)).returncode != 0
        listing = _as(other_user, "ls", str(server.socket_dir))
        assert listing.returncode != 0 and "Permission denied" in listing.stderr
        through_socket = _as(other_user, *as_superuser, "-h", str(server.socket_dir))
        assert through_socket.returncode != 0 and "Permission denied" in through_socket.stderr, through_socket
        assert (server.socket_dir.stat().st_mode & 0o777) == 0o700

        # The password is the run's, readable by its owner only; with it, TCP works (the port is not simply closed).
        assert (server.password_file.stat().st_mode & 0o777) == 0o600
        assert (server.password_file.parent.stat().st_mode & 0o777) == 0o700
        assert _as(other_user, "cat", str(server.password_file)).returncode != 0
        password = server.password_file.read_text().strip()
        owner = subprocess.run([*as_superuser, "-h", "127.0.0.1"], capture_output=True, text=True, timeout=30,
                               env={**os.environ, "PGPASSWORD": password})
        assert owner.returncode == 0 and owner.stdout.strip() == "1", owner.stderr
        # The server's account has its own groups, none of root's.
        pid, _ = _postmaster(data_dir)
        groups = next(line for line in Path(f"/proc/{pid}/status").read_text().splitlines() if line.startswith("Groups:"))
        assert "0" not in groups.split()[1:]
    finally:
        server.stop()


def test_a_restart_keeps_the_password_and_the_closed_socket(data_dir, tmp_path):
    """The cold-query restart of dss: same port, socket directory and password, and still no trust on TCP."""
    server = ManagedPostgres(data_dir, {}, tmp_path / "secrets" / "dss-postgres.password")
    server.start()
    try:
        socket_dir, port, first_pid = server.socket_dir, server.port, _postmaster(data_dir)[0]
        server.restart()
        pid, listed_socket_dir = _postmaster(data_dir)
        assert pid != first_pid and not _alive(first_pid)
        assert (server.socket_dir, server.port, listed_socket_dir) == (socket_dir, port, socket_dir)
        dsn = f"host=127.0.0.1 port={port} user=refbench dbname=postgres"
        with connect(f"{dsn} password={server.password_file.read_text().strip()}") as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)
        with pytest.raises(Exception, match="no password supplied|password authentication failed"):
            connect(f"{dsn} password=")
    finally:
        server.stop()
    assert not socket_dir.exists() and _postmaster(data_dir) is None and not _alive(pid)


# ---- nothing left behind -------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_sigkill_of_refbench_stops_its_postgres_and_removes_the_socket_directory(tmp_path, data_dir):
    proc = subprocess.Popen(refbench_command(*TINY_OLTP, "--duration-s", "30", "--data-dir", str(data_dir),
                                             "--runs-dir", "runs"),
                            cwd=tmp_path, env=cli_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        pid, socket_dir = _wait_for(lambda: _postmaster(data_dir), 120, "the managed server")
        # Into the measurement: the virtual users' backends are connected.
        _wait_for(lambda: list((tmp_path / "runs").glob("*/work/oltp/load.json")), 120, "the schema")
        time.sleep(2)
        backends = _children(pid)
        watchdogs = [c for c in _children(proc.pid) if b"refbench.children" in Path(f"/proc/{c}/cmdline").read_bytes()]
        assert len(backends) > 3 and len(watchdogs) == 1 and socket_dir.is_dir()
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        _wait_for(lambda: not _alive(pid) and not any(map(_alive, backends)), 10, "the postmaster and its backends to end")
        _wait_for(lambda: not socket_dir.exists(), 10, f"{socket_dir} to be removed")
        _wait_for(lambda: not _alive(watchdogs[0]), 10, "the watchdog to exit")
        assert not (data_dir / "postmaster.pid").exists()  # a clean shutdown, not a crash
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


OWNER = textwrap.dedent("""
    import json, os, signal, subprocess, sys, time
    from refbench.children import watchdog

    base = sys.argv[1]
    server = subprocess.Popen(["sleep", "600"], start_new_session=True)
    group = subprocess.Popen(["sh", "-c", "sleep 600 & sleep 600 & wait"], start_new_session=True)
    stubborn = subprocess.Popen([sys.executable, "-c", "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
                                 "print(flush=True); time.sleep(600)"], stdout=subprocess.PIPE, start_new_session=True)
    stubborn.stdout.readline()  # its SIGTERM handler is in place
    os.mkdir(f"{base}/socket"); os.mkdir(f"{base}/kept")
    guards = [
        watchdog().register(remove=[f"{base}/socket"]),
        watchdog().register(pid=server.pid, command=["touch", f"{base}/stop-command-ran"]),
        watchdog().register(process_group=group.pid, signals=[signal.SIGTERM]),
        watchdog().register(pid=stubborn.pid, grace_s=0.5),
        watchdog().register(remove=[f"{base}/kept"]),
    ]
    guards[-1].release()
    print(json.dumps({"watchdog": watchdog().process.pid, "server": server.pid, "group": group.pid,
                      "stubborn": stubborn.pid}), flush=True)
    if sys.argv[2] == "exit":
        for guard in guards[:-1]:
            guard.release()
        for p in (server, group, stubborn):
            p.kill(); p.wait()
        sys.exit(0)
    time.sleep(600)
""")


def _start_owner(tmp_path: Path, how: str) -> tuple[subprocess.Popen, dict[str, int]]:
    owner = subprocess.Popen([sys.executable, "-c", OWNER, str(tmp_path), how], stdout=subprocess.PIPE, text=True,
                             env=cli_env())
    return owner, json.loads(owner.stdout.readline())


def test_the_watchdog_undoes_what_a_killed_owner_registered_and_exits(tmp_path):
    owner, pids = _start_owner(tmp_path, "stay")
    group_members = _wait_for(lambda: len(_children(pids["group"])) == 2 and _children(pids["group"]), 10,
                              "the group's two members")
    os.kill(owner.pid, signal.SIGKILL)
    owner.wait()
    everything = [pids["server"], pids["group"], pids["stubborn"], *group_members]
    _wait_for(lambda: not any(map(_alive, everything)), 10, f"every registered process to end: {[p for p in everything if _alive(p)]}")
    _wait_for(lambda: not (tmp_path / "socket").exists(), 10, "the registered directory to be removed")
    assert (tmp_path / "stop-command-ran").exists()
    assert (tmp_path / "kept").is_dir()  # released: not the watchdog's business any more
    _wait_for(lambda: not _alive(pids["watchdog"]), 10, "the watchdog to exit")


def test_the_watchdog_leaves_with_a_normal_exit_and_touches_nothing_released(tmp_path):
    owner, pids = _start_owner(tmp_path, "exit")
    assert owner.wait(timeout=30) == 0
    _wait_for(lambda: not _alive(pids["watchdog"]), 10, "the watchdog to exit")
    assert (tmp_path / "socket").is_dir() and (tmp_path / "kept").is_dir()
    assert not (tmp_path / "stop-command-ran").exists()


# ---- no password shown ---------------------------------------------------------------------------------------------


def test_passwords_are_masked_in_every_form_a_dsn_takes():
    assert redact("host=db password=s3cret dbname=x") == "host=db password=*** dbname=x"
    assert redact("host=db password = 'with space' dbname=x") == "host=db password = *** dbname=x"
    assert redact("postgresql://bench:s3cret@db:5432/tpcc?sslmode=require") == "postgresql://bench:***@db:5432/tpcc?sslmode=require"
    assert redact("postgres://:s3cret@db/x") == "postgres://:***@db/x"
    assert "s3cret" not in redact("postgresql://db/x?sslmode=require&password=s3cret")
    assert redact("/data/pgdata") == "/data/pgdata"


@pytest.mark.slow
def test_a_dsn_password_reaches_no_file_of_the_run_and_resume_still_connects(tmp_path, data_dir):
    password = f"pw-{secrets.token_hex(12)}"
    server = ManagedPostgres(data_dir, {})
    server.start()
    try:
        with connect(server.dsn, autocommit=True) as conn:
            conn.execute(f"CREATE ROLE bench LOGIN PASSWORD '{password}'")
            conn.execute("CREATE DATABASE bench OWNER bench")
        dsn = f"host=127.0.0.1 port={server.port} user=bench password={password} dbname=bench"
        # Files, not pipes: the children of a killed refbench may hold a pipe a little longer.
        with open(tmp_path / "first.out", "w") as out, open(tmp_path / "first.err", "w") as err:
            proc = subprocess.Popen(refbench_command(*TINY_OLTP, "--dsn", dsn, "--runs-dir", "runs"), cwd=tmp_path,
                                    env=cli_env(), stdout=out, stderr=err)
        load = _wait_for(lambda: next((tmp_path / "runs").glob("*/work/oltp/load.json"), None), 180, "the schema")
        time.sleep(2.5)  # measuring the first case: its virtual users notice the kill and leave
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        first_out, first_err = (tmp_path / "first.out").read_text(), (tmp_path / "first.err").read_text()
        run = load.parent.parent.parent
        records = run / "records" / "oltp"
        status = [sys.executable, "-c", f"from refbench.runstore import Run; print(Run({str(run)!r}).status())"]
        _wait_for(lambda: subprocess.run(status, capture_output=True, text=True).stdout.strip() == "interrupted", 30,
                  "the killed run's lock to be free")

        resumed = subprocess.run(refbench_command("resume", str(run)), cwd=tmp_path, env=cli_env(), capture_output=True,
                                 text=True, timeout=300)
        assert resumed.returncode == 0, resumed.stderr
        assert sorted(p.stem for p in records.glob("[!.]*.json")) == ["u1-r1", "u2-r1"]
        shown = [first_out, first_err, resumed.stdout, resumed.stderr]
        for args in (["report", str(run)], ["runs", "--runs-dir", "runs", "--json"]):
            result = subprocess.run(refbench_command(*args), cwd=tmp_path, env=cli_env(), capture_output=True, text=True,
                                    timeout=120)
            assert result.returncode == 0, result.stderr
            shown += [result.stdout, result.stderr]
    finally:
        server.stop()

    assert not [text for text in shown if password in text]
    secrets_dir = run / "secrets"
    leaked = [p for p in run.rglob("*") if p.is_file() and secrets_dir not in p.parents and password.encode() in p.read_bytes()]
    assert leaked == []
    meta = json.loads((run / "run.json").read_text())
    assert meta["plan"]["options"]["oltp"]["dsn"].endswith("password=*** dbname=bench")
    assert any("password=***" in arg for arg in meta["argv"])
    assert "password=***" in (run / "report.html").read_text()
    # The one place it is kept, for resume: readable by the owner only.
    assert (secrets_dir.stat().st_mode & 0o777) == 0o700
    assert [p.name for p in secrets_dir.iterdir()] == ["plan.json"]
    assert ((secrets_dir / "plan.json").stat().st_mode & 0o777) == 0o600 and password in (secrets_dir / "plan.json").read_text()


# ---- the report shows text, not markup -----------------------------------------------------------------------------


@pytest.mark.live
def test_plan_values_appear_in_the_report_as_text_only(tmp_path, refbench):
    marker = "<script>alert(1)</script>"
    plan = tmp_path / "plan.toml"
    plan.write_text(f'name = "escaped"\nwork_dir = "{tmp_path}/work-{marker}"\nsuites = ["sleepy"]\n'
                    '[sleepy]\ncases = 1\nsleep_s = 0\n')
    result = refbench("run", "--plan", str(plan), "--runs-dir", "runs")
    assert result.code == 0, result.stderr
    html = (tmp_path / result.last_line / "report.html").read_text()
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "<script" not in html.lower()


def test_a_run_name_with_markup_is_refused_before_anything_is_written(tmp_path, refbench):
    result = refbench("sleepy", "--name", "<script>", "--runs-dir", "runs")
    assert result.code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "--name" in lines[0] and "letters, digits" in lines[0], lines
    assert not (tmp_path / "runs").exists()


@pytest.mark.slow
def test_a_local_cluster_lets_in_only_its_own_workers_and_its_report_says_so(tmp_path, refbench):
    from distributed import Client
    from rich.console import Console

    from refbench.cluster.coordinator import connect
    from refbench.plan import Plan

    client, cluster = connect(Plan(hosts=[1]), Console(file=open(os.devnull, "w")))
    try:
        address = cluster.scheduler_address
        assert address.startswith("tls://127.0.0.1:")
        assert client.submit(lambda: 41 + 1).result(timeout=60) == 42  # refbench itself, with the certificate
        for intruder in (address.replace("tls://", "tcp://"), address):  # plain TCP, and TLS without the certificate
            with pytest.raises(Exception):
                Client(intruder, timeout=5).submit(lambda: 1).result(timeout=10)
    finally:
        client.close()
        cluster.close()

    result = refbench("run", "--suite", "sleepy", "--set", "sleepy.cases=1", "--set", "sleepy.sleep_s=0", "--hosts", "1",
                      "--runs-dir", "runs", timeout=240)
    assert result.code == 0, result.stderr
    html = (tmp_path / result.last_line / "report.html").read_text()
    assert "with TLS and a certificate made for this run" in html