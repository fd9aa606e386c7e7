"""The OLTP suite on a real managed PostgreSQL with a one-warehouse schema."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from refbench.engines.postgres import ManagedPostgres, connect
from refbench.suites.oltp import consistency, database, transactions_at
from refbench.suites.oltp.driver import TX
from refbench.suites.oltp.inputs import INPUTS
from refbench.suites.oltp.rand import TpccRandom, last_name

TINY = ["--warehouses", "1", "--rampup-s", "1", "--duration-s", "4"]


def _server_running(data: Path) -> bool:
    return (data / "postmaster.pid").exists()


def _driver_count_allowance(m: dict, series: list[dict], users: int) -> float:
    """How far the driver's New-Order count may be from the schema delta. The driver counts the orders that completed
    in its window; the schema delta, those committed between two readings of D_NEXT_O_ID taken up to counters_late_s
    after the window's edges (0.5 s and more on a loaded machine: 1,474 against 1,701 beside another refbench run).
    So they differ by the orders of that lateness, at the highest per-interval rate of the run, and by at most one
    order in flight per user at each edge (committed on one side of it, seen by the driver on the other)."""
    peak_per_s = max(s["new_orders_per_min"] for s in series) / 60
    return users + peak_per_s * m["counters_late_s"]


@pytest.mark.slow
def test_oltp_run_is_consistent_and_nopm_is_the_schema_delta(tmp_path, refbench, data_dir):
    result = refbench("oltp", *TINY, "--users", "1,2", "--data-dir", str(data_dir), "--runs-dir", "runs")
    assert result.code == 0, result.stderr
    run = tmp_path / result.last_line
    assert not _server_running(data_dir)  # stopped at the end
    for users in (1, 2):
        record = json.loads((run / "records" / "oltp" / f"u{users}-r1.json").read_text())
        m = record["metrics"]
        assert m["nopm"] > 0 and m["tpm"] > m["nopm"]
        assert abs(m["nopm"] - m["new_orders_schema_delta"] / (m["measured_s"] / 60)) <= 0.001 * m["nopm"]
        assert abs(m["new_orders_committed_by_driver"] - m["new_orders_schema_delta"]) <= \
            _driver_count_allowance(m, record["extra"]["series"], users)
        assert m["new_order_lat_p50_ms"] <= m["new_order_lat_p99_ms"] <= m["new_order_lat_p999_ms"] <= m["new_order_lat_max_ms"]
        assert sum(m[f"{tx}_count"] for tx in TX) > 0 and m["errors"] == 0
        assert 0 < m["driver_cpu_share_pct"] < 100
        # What the sessions did, sampled from pg_stat_activity over the measured interval: every sampled session
        # running (CPU) or waiting on a named event, the shares adding up to 100%, and the WAL flushes the server
        # timed (each New-Order commits, so there are flushes).
        waits, io = record["extra"]["storage"]["waits"], record["extra"]["storage"]["io_latency"]
        assert waits["samples"] >= 0.5 * 4 * waits["hz"] and waits["session_samples"] > 0, waits
        assert sum(e["share_pct"] for e in waits["events"]) == pytest.approx(100, abs=0.1)
        assert all(e["event"] for e in waits["events"]) and "error" not in waits
        assert io["flushes"] > 0 and 0 < io["ms_per_flush"] < 1000, io
        # The WAL written and the checkpoints over the same interval (the load's own checkpoint came before it).
        assert io["wal_mb"] > 0 and 0 <= io["full_page_image_pct"] <= 100 and io["checkpoints_requested"] == 0, io
        assert m["wal_flush_ms"] == io["ms_per_flush"] and sum(v for k, v in m.items() if k.startswith("wait_")) \
            == pytest.approx(100, abs=0.5)
    verdict = json.loads((run / "verdict.json").read_text())[0]
    assert re.search(r"\d+% of session time", verdict["bottleneck"]) and "; host: " in verdict["bottleneck"]
    assert "What the sessions waited on" in (run / "report.html").read_text()
    findings = json.loads((run / "findings" / "oltp.json").read_text())
    names = {f["check"] for f in findings}
    assert {f"consistency condition {n}" for n in range(1, 13)} <= {n.split(":")[0] for n in names}
    assert all(f["passed"] for f in findings), [f for f in findings if not f["passed"]]
    # Two load levels are two points: a table's rows, not a chart (by users is drawn from three levels on).
    # The wait profile over each case's seconds is drawn (stacked, as ASH views draw it).
    assert {p.stem for p in (run / "charts" / "oltp").glob("*.png")} == {"throughput_over_time", "waits_u1-r1", "waits_u2-r1"}
    assert {"scaling", "latency", "series", "load", "settings"} <= {p.stem for p in (run / "tables" / "oltp").glob("*.parquet")}
    html = (run / "report.html").read_text()
    assert "Throughput and New-Order latency by load level" in html and "shared_buffers" in html
    # compare reads the same profiles: a run against its copy is still limited by the same, each share moved 0 points
    # (compare refuses a run on both sides).
    copy = run.with_name(run.name + "-copy")
    shutil.copytree(run, copy, ignore=shutil.ignore_patterns("work", "raw"))
    compared = refbench("compare", str(run), str(copy), "--json")
    assert compared.code == 0, compared.stderr
    changes = compared.json()["waits"]
    assert {c["case"] for c in changes} == {"u1", "u2"}  # named without the repeat number, as a figure is
    assert all(c["limit_A"] == c["limit_B"] and all(s["points"] == 0 for s in c["shares"]) for c in changes)
    assert any(" still limited by " in line for line in compared.json()["wait_lines"])
    assert "What limits it: how the wait profile changed" in Path(compared.json()["html"]).read_text()


@pytest.mark.slow
def test_a_tampered_database_fails_the_consistency_check(tmp_path, refbench, loaded_postgres, data_dir):
    server = loaded_postgres()
    server.start()
    try:
        dsn = server.database("refbench")
        with connect(dsn, autocommit=True) as conn:
            assert all(v == 0 for _, v in consistency.check(transactions_at(dsn), conn).values())
            conn.execute("UPDATE tpcc.district SET d_ytd = d_ytd + 1 WHERE d_w_id = 1 AND d_id = 3")
            conn.execute("DELETE FROM tpcc.new_order WHERE no_w_id = 1 AND no_d_id = 5 AND no_o_id = 2500")
            broken = consistency.check(transactions_at(dsn), conn)
        assert broken[1][1] == 1 and broken[3][1] == 1 and broken[9][1] == 1
    finally:
        server.stop()
    result = refbench("oltp", *TINY, "--users", "1", "--data-dir", str(data_dir), "--runs-dir", "runs")
    assert result.code == 1, result.stderr
    assert "FAILED" in result.stderr and "consistency condition 1" in result.stderr
    findings = {f["check"].split(":")[0]: f for f in json.loads((tmp_path / result.last_line / "findings" / "oltp.json").read_text())}
    assert not findings["consistency condition 1"]["passed"] and not findings["consistency condition 3"]["passed"]
    assert findings["consistency condition 2"]["passed"]


@pytest.mark.slow
def test_an_existing_schema_of_another_size_needs_rebuild(tmp_path, refbench, loaded_postgres, data_dir):
    loaded_postgres()  # one warehouse, loaded in data_dir: the run measures on it and keeps it
    first = refbench("oltp", *TINY, "--users", "1", "--data-dir", str(data_dir), "--runs-dir", "runs", "--keep-work")
    assert first.code == 0, first.stderr
    second = refbench("oltp", "--warehouses", "2", "--users", "1", "--data-dir", str(data_dir), "--runs-dir", "runs")
    assert second.code == 2
    assert "pass --rebuild" in second.stderr and len(second.stderr.strip().splitlines()) >= 1
    assert not _server_running(data_dir)


def test_unreachable_dsn_is_one_sentence_and_writes_nothing(tmp_path, refbench):
    result = refbench("oltp", "--dsn", "host=127.0.0.1 port=1 user=nobody password=secret dbname=x", "--runs-dir", "runs")
    assert result.code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "cannot connect to PostgreSQL" in lines[0] and "secret" not in lines[0]
    assert not (tmp_path / "runs").exists()


def test_dsn_without_create_privilege_is_refused(tmp_path, refbench, data_dir):
    server = ManagedPostgres(data_dir, {})
    server.start()
    try:
        with connect(server.dsn, autocommit=True) as conn:
            conn.execute("CREATE ROLE weak LOGIN")
            conn.execute("CREATE DATABASE locked")
            conn.execute("REVOKE ALL ON DATABASE locked FROM PUBLIC")
            conn.execute("GRANT CONNECT ON DATABASE locked TO weak")
        dsn = f"host={server.socket_dir} port={server.port} user=weak dbname=locked"
        result = refbench("oltp", "--dsn", dsn, "--runs-dir", "runs")
    finally:
        server.stop()
    assert result.code == 2
    assert "may not create schemas" in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "runs").exists()


def test_data_dir_the_postgres_user_cannot_reach_is_one_sentence(tmp_path, refbench):
    if os.geteuid() != 0:
        pytest.skip("only root runs the server as another user")
    result = refbench("oltp", "--data-dir", str(tmp_path / "closed" / "pgdata"), "--runs-dir", "runs")
    assert result.code == 2 and "cannot reach" in result.stderr


def test_transaction_inputs_follow_the_specification():
    rng = TpccRandom(7)
    assert last_name(0) == "BARBARBAR" and last_name(371) == "PRICALLYOUGHT"

    def values(params):
        return [None if p is None else [int(x) for x in p.decode().strip("{}").split(",")] if p.startswith(b"{")
                else p.decode() for p in params]

    remote_lines = lines = 0
    for _ in range(3000):
        w, d, c, items, supply, qty = values(INPUTS["new_order"](rng, 2, [1, 3, 4]))
        assert w == "2" and 1 <= int(d) <= 10 and 1 <= int(c) <= 3000
        assert 5 <= len(items) == len(supply) == len(qty) <= 15 and all(1 <= q <= 10 for q in qty)
        assert all(1 <= i <= 100001 for i in items) and set(supply) <= {1, 2, 3, 4}
        assert items.count(100001) <= 1 and (100001 not in items or items[-1] == 100001)
        assert len(set(items)) == len(items)
        assert list(zip(supply, items))[:-1] == sorted(zip(supply, items))[:-1]  # the lock order
        remote_lines += sum(s != 2 for s in supply)
        lines += len(items)
    assert 0.005 <= remote_lines / lines <= 0.015  # 1% of order lines are remote (2.4.1.5)
    rollbacks = sum(values(INPUTS["new_order"](rng, 1, []))[3][-1] == 100001 for _ in range(20000))
    assert 140 <= rollbacks <= 260  # 1% of 20,000
    payments = [values(INPUTS["payment"](rng, 1, [2])) for _ in range(5000)]
    assert 2800 <= sum(p[5] is not None for p in payments) <= 3200  # 60% by last name
    assert 600 <= sum(p[2] == "2" for p in payments) <= 900  # 15% through a remote warehouse
    assert all((p[4] is None) != (p[5] is None) and 1 <= float(p[6]) <= 5000 for p in payments)
    assert all(1 <= rng.nurand(8191, 1, 100000) <= 100000 for _ in range(1000))
    assert 10 <= min(int(values(INPUTS["stock_level"](rng, 1, []))[2]) for _ in range(500))
    assert max(int(values(INPUTS["stock_level"](rng, 1, []))[2]) for _ in range(500)) <= 20


@pytest.mark.slow
def test_interrupted_run_stops_the_server_and_resumes(tmp_path, refbench, loaded_postgres, data_dir, process_tree):
    from conftest import wait_for

    loaded_postgres()  # one warehouse, loaded in data_dir: what is interrupted is the measurement
    tree = process_tree("oltp", "--warehouses", "1", "--rampup-s", "1", "--duration-s", "3", "--users", "1,2",
                        "--data-dir", str(data_dir), "--runs-dir", "runs", linger_s=5)
    wait_for(lambda: list((tmp_path / "runs").glob("*/records/oltp/u1-r1.json")), 300, "the first case's record", 0.2)
    time.sleep(1.5)  # into the second case's measurement
    tree.signal(signal.SIGTERM)
    ended = tree.finish()
    assert ended["code"] == 130, ended["stderr"]
    assert "refbench resume" in ended["stderr"]
    assert ended["survivors"] == []  # no server, no virtual user left behind
    assert not _server_running(data_dir)
    run = Path(tmp_path / ended["stdout"].strip().splitlines()[-1])
    assert [p.stem for p in (run / "records" / "oltp").glob("[!.]*.json")] == ["u1-r1"]
    resumed = refbench("resume", str(run))
    assert resumed.code == 0, resumed.stderr
    assert sorted(p.stem for p in (run / "records" / "oltp").glob("[!.]*.json")) == ["u1-r1", "u2-r1"]
    assert not _server_running(data_dir)


def test_a_missing_postgresql_server_is_one_clear_sentence(monkeypatch):
    from refbench.engines import postgres
    from refbench.errors import UserError

    monkeypatch.setattr(postgres, "postgres_binary", lambda name: None)
    with pytest.raises(UserError, match=r"PostgreSQL server is not installed \(initdb not found\).*apt-get install postgresql.*--dsn"):
        postgres.require_server_binaries()


@pytest.mark.slow
def test_default_data_dir_moves_when_the_run_directory_is_closed_to_postgres(tmp_path, refbench):
    if os.geteuid() != 0:
        pytest.skip("only root runs the server as another user")
    # pytest's tmp_path is closed to other users, like a checkout in /root.
    result = refbench("oltp", *TINY, "--users", "1", "--runs-dir", "runs")
    assert result.code == 0, result.stderr
    assert "/var/tmp/refbench/" in result.stderr
    run = tmp_path / result.last_line
    from refbench.runner import scratch_dir
    from refbench.runstore import Run

    assert f"{scratch_dir(Run(run))}/oltp/pgdata" in result.stderr
    assert not scratch_dir(Run(run)).exists()  # a complete run's work data goes, there too


@pytest.fixture
def small_reachable_fs(reachable_dir):
    """Mounts a tmpfs of the test's own, of a given size, that the postgres account can reach."""
    if os.geteuid() != 0:
        pytest.skip("mounting a small file system needs root")

    def mount(size: str) -> Path:
        subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=755", "tmpfs", str(reachable_dir)], check=True)
        return reachable_dir

    yield mount
    ManagedPostgres(reachable_dir / "pgdata", {}).stop_stale()
    subprocess.run(["umount", "-l", str(reachable_dir)], check=False)


def test_too_little_space_for_the_load_is_refused_before_anything_is_written(tmp_path, refbench, small_reachable_fs):
    base = small_reachable_fs("72m")
    result = refbench("oltp", *TINY, "--users", "1", "--data-dir", str(base / "pgdata"), "--runs-dir", "runs")
    assert result.code == 2, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and "not enough free space in" in result.stderr
    assert str(base / "pgdata") in result.stderr and "1 warehouse(s)" in result.stderr
    assert not (tmp_path / "runs").exists() and not (base / "pgdata").exists()


@pytest.mark.slow
def test_a_disk_filling_up_during_the_load_stops_the_server_and_the_run_resumes_once_space_is_freed(
        tmp_path, refbench, process_tree, small_reachable_fs):
    from conftest import wait_for
    from test_exhaustion import fill

    base = small_reachable_fs("1200m")
    tree = process_tree("oltp", *TINY, "--users", "1", "--load-workers", "2", "--data-dir", str(base / "pgdata"),
                        "--runs-dir", "runs")
    # Both loaders: a single process with refbench's command line can be initdb's fork before its exec.
    wait_for(lambda: len(tree.forked_workers()) >= 2, 120, "the loader processes", 0.1)
    filler = fill(base)
    ended = tree.finish()
    assert ended["code"] == 75, ended["stderr"]
    line, = [line for line in ended["stderr"].splitlines() if line.startswith("refbench:")]
    assert "out of disk space" in line and str(base) in line and "refbench resume" in line, line
    assert "Traceback" not in ended["stderr"]
    assert ended["survivors"] == [] and not _server_running(base / "pgdata")

    filler.unlink()
    run = next((tmp_path / "runs").iterdir())
    resumed = refbench("resume", str(run))
    assert resumed.code == 0, resumed.stderr
    assert [p.stem for p in (run / "records" / "oltp").glob("[!.]*.json")] == ["u1-r1"]
    assert not _server_running(base / "pgdata")


def test_think_times_end_with_the_measurement(loaded_postgres):
    """Keying and think times last up to minutes; a run must still end when its measured interval does."""
    import time

    from refbench.suites.oltp import driver

    server = loaded_postgres()
    server.start()
    try:
        dsn = server.database("refbench")
        t0 = time.monotonic()
        result = driver.run(transactions_at(dsn), 1, 2, 0, 2, True, 1)
        assert time.monotonic() - t0 < 15
        assert result.errors == {} and result.measured_s > 1.5
    finally:
        server.stop()


@pytest.mark.slow
def test_a_one_second_window_gives_tpm_no_lower_than_nopm_and_figures_in_range(loaded_postgres):
    """NOPM is the schema's delta, TPM adds the other transactions the driver saw end in its window: in a short window
    the server's commit counters (flushed by PostgreSQL's backends about once a second) once gave 239.5 TPM beside
    5,749 NOPM; they stay in the record as a cross-check. The record's shares are all within their ranges."""
    from refbench.suites import Record, impossible_figures
    from refbench.suites.oltp import driver, figures

    server = loaded_postgres()
    server.start()
    try:
        dsn = server.database("refbench")
        result = driver.run(transactions_at(dsn), 1, 2, 1, 1, False, 1)
    finally:
        server.stop()
    m = figures(result)
    others = sum(sum(outcomes.values()) for outcomes in result.counts.values()) - result.counts["new_order"]["ok"]
    assert m["nopm"] > 0 and others > 0 and m["tpm"] >= m["nopm"]
    assert m["tpm"] == round(m["new_orders_schema_delta"] * 60 / result.measured_s + others * 60 / result.window_s, 1)
    assert m["tpm_server_counters"] >= 0 and m["counters_late_s"] >= 0
    assert impossible_figures(Record(m)) == []


def test_wrong_password_is_one_sentence_and_writes_nothing(tmp_path, refbench, data_dir):
    server = ManagedPostgres(data_dir, {})
    server.start()
    try:
        with connect(server.dsn, autocommit=True) as conn:
            conn.execute("CREATE ROLE bench LOGIN PASSWORD 'right-one'")
            hba = data_dir / "pg_hba.conf"
            hba.write_text("host all bench 127.0.0.1/32 scram-sha-256\n" + hba.read_text())
            conn.execute("SELECT pg_reload_conf()")
        result = refbench("oltp", "--dsn", f"host=127.0.0.1 port={server.port} user=bench password=wrong-one dbname=postgres",
                          "--runs-dir", "runs")
    finally:
        server.stop()
    assert result.code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "password authentication failed" in lines[0] and "wrong-one" not in lines[0], lines
    assert not (tmp_path / "runs").exists()


def test_the_database_cpu_is_counted_for_the_server_under_test_only(data_dir):
    """Another PostgreSQL on the host (a neighbour's run) once made the driver's CPU share negative when one of its
    backends exited: only the server behind the driver's connection counts."""
    from refbench.engines.postgres import ManagedPostgres, connect, postgres_cpu_s
    from refbench.engines.postgres import postmaster_pid as server_pid

    ours, neighbour = ManagedPostgres(data_dir / "ours", {}), ManagedPostgres(data_dir / "neighbour", {})
    ours.start()
    neighbour.start()
    try:
        with connect(ours.dsn, autocommit=True) as conn:
            assert server_pid(conn) == ours.process.pid
            before = postgres_cpu_s(ours.process.pid)
            with connect(neighbour.dsn, autocommit=True) as busy:  # CPU in the neighbour only
                busy.execute("SELECT count(*) FROM generate_series(1, 3000000)")
            assert postgres_cpu_s(ours.process.pid) - before < 0.5
            conn.execute("SELECT count(*) FROM generate_series(1, 3000000)")
            assert postgres_cpu_s(ours.process.pid) > before
    finally:
        neighbour.stop()
        ours.stop()


@pytest.mark.slow
def test_many_virtual_users_run_on_a_few_processes_and_the_figures_hold(data_dir):
    """120 users at 2 warehouses: a handful of driver processes (one per CPU, not one per user), every user's
    connection open on the server, and NOPM, the driver's own count and the consistency conditions still agree."""
    from refbench.suites import Record
    from refbench.suites.oltp import driver, figures, mix_findings

    users = 120
    server = ManagedPostgres(data_dir, {"max_connections": str(users + 20)})
    server.start()
    try:
        dsn = server.database("refbench")
        database.build(transactions_at(dsn), 2, 2, False, lambda *_: None)
        me = os.getpid()
        command = Path(f"/proc/{me}/cmdline").read_bytes()
        seen = {"workers": 0, "backends": 0}
        with connect(dsn, autocommit=True) as watcher:
            def tick(_elapsed_s: float) -> None:
                # The driver's workers are forked: children of this process with its own command line (the server
                # and the watchdog are children with other command lines).
                workers = 0
                for pid in filter(str.isdigit, os.listdir("/proc")):
                    try:
                        ppid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
                        same = Path(f"/proc/{pid}/cmdline").read_bytes() == command
                    except OSError:
                        continue
                    workers += ppid == me and same
                seen["workers"] = max(seen["workers"], workers)
                seen["backends"] = max(seen["backends"], watcher.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() "
                    "AND backend_type = 'client backend'").fetchone()[0])

            # 8 s of ramp-up, the logins spread over its first half: beside a busy neighbour, 120 logins in 1.5 s
            # (a 3-s ramp-up) had not all happened by the end of the run (81 backends seen).
            result = driver.run(transactions_at(dsn), 2, users, 8, 4, False, 1, on_tick=tick)
            after = consistency.check(transactions_at(dsn), watcher)
        m = figures(result)
    finally:
        server.stop()
    assert 1 <= seen["workers"] <= (os.cpu_count() or 1) and m["driver_processes"] == seen["workers"] + 1
    assert seen["backends"] == users + 1  # every user's connection, and the driver's own for the counters
    assert m["nopm"] > 0 and m["errors"] == 0 and m["driver_rss_mb"] > 0
    assert abs(m["new_orders_committed_by_driver"] - m["new_orders_schema_delta"]) <= \
        _driver_count_allowance(m, result.series, users)
    # The mix as the suite checks it; not every type in the window: on a starved machine the window held 81
    # transactions of 120 users, and none of them an Order-Status (1 card in 23).
    mix = [f for f in mix_findings([Record(m)]) if f.check.startswith("mix:")]
    assert mix and all(f.passed for f in mix), mix
    assert all(violations == 0 for _, violations in after.values()), after


def test_a_dsn_server_without_a_connection_for_every_user_is_refused_before_the_run(tmp_path, refbench, data_dir):
    server = ManagedPostgres(data_dir, {"max_connections": "10"})
    server.start()
    try:
        result = refbench("oltp", "--dsn", server.database("tpcc"), *TINY, "--users", "1,12", "--runs-dir", "runs")
    finally:
        server.stop()
    assert result.code == 2, result.stderr
    line, = result.stderr.strip().splitlines()
    assert "free connection(s) (max_connections 10" in line and "12 virtual user(s) need 14" in line, line
    assert not (tmp_path / "runs").exists()


def test_think_times_run_ten_users_per_warehouse():
    from refbench.plan import PlanError, load_plan
    from refbench.suites.oltp import user_counts

    def users(*flags) -> list[int]:
        return user_counts(load_plan(suites=["oltp"], suite_flags={"oltp": dict(flags)}).options["oltp"])

    assert users(("think_times", True), ("warehouses", "3")) == [30]  # the profile's default users give way
    assert users(("think_times", True), ("warehouses", "3"), ("users", "30")) == [30]
    assert users(("warehouses", "3"), ("users", "5")) == [5]  # without think times, any count
    with pytest.raises(PlanError, match=r"10 users per warehouse: 30 for 3 warehouse\(s\), not 5"):
        users(("think_times", True), ("warehouses", "3"), ("users", "5"))
    with pytest.raises(PlanError, match=r"200 warehouses would need 2,000"):
        users(("think_times", True), ("warehouses", "200"))


def test_the_full_profile_sizes_its_warehouses_to_the_free_space():
    from refbench.suites.oltp import AUTO_WAREHOUSES_MAX, auto_warehouses, load_bytes

    for free_gb in (1, 30, 300, 3000, 30000):
        w = auto_warehouses(free_gb * 10**9)
        assert 1 <= w <= AUTO_WAREHOUSES_MAX
        assert w == 1 or 3 * load_bytes(w) <= free_gb * 10**9  # a third of the space holds the load
        if w < AUTO_WAREHOUSES_MAX:
            assert 3 * load_bytes(w + 1) > free_gb * 10**9 - 3 * 64 * 2**20  # and not one more
    assert auto_warehouses(310 * 10**9) >= 1000  # the paper's size where it fits


def _mix_record(users: int, counts: dict[str, int]):
    from refbench.suites import Record

    metrics = {"users": users, "new_order_rollbacks": round(counts["new_order"] / 100)}
    for tx in TX:
        metrics |= {f"{tx}_count": counts[tx], f"{tx}_lat_p90_ms": 10.0}
    return Record(metrics)


def test_a_mix_check_on_a_window_too_short_to_judge_says_so_instead_of_passing():
    """The window's edges may cut a partial 23-card deck per user at each end: with 8 users and 150 transactions, a
    share of 0% would pass Delivery's 4%. Such a check says it cannot judge, and does not pass; on a window long enough
    the same shares are judged."""
    from refbench.suites.oltp import mix_findings

    def shares(total: int, delivery_pct: float) -> dict[str, int]:
        """The deck's shares (Payment 43.5%, Order-Status and Stock-Level 4.35%), Delivery's as given, New-Order the
        rest."""
        counts = {"payment": round(total * 0.435), "order_status": round(total * 0.0435),
                  "stock_level": round(total * 0.0435), "delivery": round(total * delivery_pct / 100)}
        return {"new_order": total - sum(counts.values()), **counts}

    short = {f.check: f for f in mix_findings([_mix_record(8, shares(150, 3.3))])}
    delivery = short["mix: delivery ≥ 4%"]
    assert not delivery.passed and delivery.detail.startswith("too short to judge the mix: "), delivery.detail
    assert "it takes more than 200 transactions to judge" in delivery.detail
    long_low = {f.check: f for f in mix_findings([_mix_record(8, shares(20000, 3.3))])}
    assert not long_low["mix: delivery ≥ 4%"].passed and " of 20000 transactions (deck share" in long_low["mix: delivery ≥ 4%"].detail
    long_ok = {f.check: f for f in mix_findings([_mix_record(8, shares(20000, 4.3))])}
    assert long_ok["mix: delivery ≥ 4%"].passed and long_ok["mix: payment ≥ 43%"].passed
    # Many users on a short window: a partial deck per user and edge at worst, but a random cut moves a count by far
    # less (129 users: ±79 Payments at 4 standard deviations, not ±2,580), so 1,738 transactions are judged.
    from refbench.suites.oltp import deck_edge_allowance

    assert deck_edge_allowance(129, 10) == 79 and deck_edge_allowance(1, 1) == 2
    many = {f.check: f for f in mix_findings([_mix_record(129, shares(1738, 4.35))])}
    assert all(f.passed for f in many.values()), many


@pytest.mark.slow
def test_the_figures_so_far_count_the_measured_new_orders_as_the_driver_does(loaded_postgres):
    """The live line's NOPM and New-Order p99 come from the workers' measured New-Orders as they record them: never
    more than the driver counts at the end, rising, and near it by the window's end."""
    from refbench.suites.oltp import driver

    server = loaded_postgres()
    server.start()
    seen: list = []
    try:
        dsn = server.database("refbench")
        result = driver.run(transactions_at(dsn), 1, 2, 1, 3, False, 1, on_live=seen.append)
    finally:
        server.stop()
    counted = result.counts["new_order"]["ok"]
    assert seen and all(a.new_orders <= b.new_orders for a, b in zip(seen, seen[1:]))
    assert 0.5 * counted <= seen[-1].new_orders <= counted and seen[-1].seconds == pytest.approx(3, abs=0.5)
    assert seen[-1].p99_us and re.fullmatch(r"NOPM [\d,]+, New-Order p99 [\d,.]+ ms so far \(3 s measured\)", seen[-1].said())


def test_a_window_without_a_new_order_ends_with_a_verdict_that_says_so(tmp_path, refbench):
    """With think times a New-Order comes every 30 s or so a user: a 2-s window holds none."""
    result = refbench("oltp", "--warehouses", "1", "--rampup-s", "1", "--duration-s", "2", "--think-times",
                      "--repeats", "1", "--runs-dir", "runs")
    assert result.code == 1 and "internal error" not in result.stderr, result.stderr[-2000:]
    assert "FAILED" in result.stdout and "0 NOPM" in result.stdout, result.stdout
    run = Path(result.stdout.strip().splitlines()[-1])
    nopm = json.loads((tmp_path / run / "verdict.json").read_text())[0]["headlines"][0]
    assert nopm["value"] == 0 and nopm["note"] == "New-Order p99 — (no New-Order in the window)"
    assert (tmp_path / run / "report.html").is_file()
