"""A managed server that stalls or dies in an OLTP window (issue 61): the test stops (SIGSTOP) or kills the run's own
server, found through its data directory's pid file, never by name. A stall is marked and decides no figure; a window
the server does not answer ends ANSWER_BOUND_S past its length; a server that died is its own sentence and exit
status, with `refbench resume` offered."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import time
from pathlib import Path
from typing import Callable

import pytest

from conftest import wait_for
from test_least_privilege import _children, _postmaster
from refbench.engines import ANSWER_BOUND_S
from refbench.errors import ServerGone
from refbench.suites.oltp.driver import STOP_GRACE_S, TX

RAMPUP_S, DURATION_S = 2, 8
OLTP = ["oltp", "--warehouses", "1", "--rampup-s", str(RAMPUP_S), "--duration-s", str(DURATION_S), "--repeats", "1"]
# What a case may take beyond its ramp-up, window and bound: the workers' grace after the stop, their tallies, the
# probe, on a machine other tests share.
SLACK_S = STOP_GRACE_S + 15


def _postgres(data_dir: Path) -> list[int]:
    """The run's postmaster (its data directory's postmaster.pid, once ready) and its backends; [] before."""
    found = _postmaster(data_dir)
    return [found[0], *_children(found[0])] if found else []


def _mariadbd(data_dir: Path) -> list[int]:
    try:
        return [int((data_dir / "mariadbd.pid").read_text().split()[0])]
    except (OSError, ValueError, IndexError):
        return []


def _signal(pids: list[int], signum: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, signum)
        except ProcessLookupError:
            pass


def _measuring(tree, title: str = "2 users") -> None:
    """Until the case titled so is in its window: its figures so far are printed from the window's start on."""
    wait_for(lambda: f"oltp: {title}: NOPM" in tree.err.read_text(), 300, f"the {title} case's window", 0.1)


def _kept_stopped(tree, server: Callable[[], list[int]]) -> tuple[dict, list[int]]:
    """Stops the server once its case is in the window and keeps it stopped until refbench has ended (refbench continues
    it only to shut it down); continued at the end whatever happened. How the command ended, and what was stopped."""
    stopped: list[int] = []
    try:
        _measuring(tree)
        stopped = server()
        _signal(stopped, signal.SIGSTOP)
        return tree.finish(), stopped
    finally:
        _signal(stopped, signal.SIGCONT)


def _record(run: Path, case: str) -> dict:
    return json.loads((run / "records" / "oltp" / f"{case}.json").read_text())


def _held_to_the_end(record: dict) -> None:
    """The calls in flight when the server stopped had taken the rest of the window by its end: the max latency counts
    them (a second less, for the stall's start and the window's end said in whole seconds)."""
    into_s = int(re.search(r"from (\d+) s into", record["extra"]["stalled"])[1])
    longest_ms = max(record["metrics"][f"{tx}_lat_max_ms"] or 0 for tx in TX)
    assert longest_ms >= 1000 * (DURATION_S - into_s - 1), (record["extra"]["stalled"], longest_ms)


@pytest.mark.slow
def test_a_server_stopped_in_the_window_ends_it_at_its_bound_and_the_stalled_case_decides_no_headline(
        tmp_path, refbench, process_tree, data_dir):
    tree = process_tree(*OLTP, "--users", "1,2", "--data-dir", str(data_dir), "--runs-dir", "runs", linger_s=30)
    wait_for(lambda: list((tmp_path / "runs").glob("*/records/oltp/u1-r1.json")), 300, "the first case", 0.1)
    ended, stopped = _kept_stopped(tree, lambda: _postgres(data_dir))
    assert len(stopped) > 3
    assert ended["code"] == ServerGone.exit_code, ended["stderr"]
    line, = [line for line in ended["stderr"].splitlines() if line.startswith("refbench:")]
    run = next((tmp_path / "runs").iterdir())
    assert "the managed PostgreSQL stopped answering while u2-r1 was measured: the server made no progress for" in line
    assert f"refbench ended {ANSWER_BOUND_S:g} s past its " in line and f"refbench resume runs/{run.name}" in line, line
    assert ended["survivors"] == [], ended["survivors"]  # no backend left stopped

    stalled = _record(run, "u2-r1")
    assert re.fullmatch(rf"the server made no progress for \d+ s, from -?\d+ s (into|before) the {DURATION_S}-s window, "
                        rf"which refbench ended {ANSWER_BOUND_S:g} s past its (start|end)", stalled["extra"]["stalled"])
    assert stalled["extra"]["disturbed"] == f"stalled: {stalled['extra']['stalled']}"
    assert stalled["elapsed_s"] <= RAMPUP_S + DURATION_S + ANSWER_BOUND_S + SLACK_S, stalled["elapsed_s"]
    if "past its end" in stalled["extra"]["stalled"]:
        _held_to_the_end(stalled)

    resumed = refbench("resume", str(run))
    assert resumed.code == 0, resumed.stderr
    # However high the stalled case's figures, the headline comes from the case that did not stall.
    for name in ("nopm", "tpm"):
        stalled["metrics"][name] = 100 * _record(run, "u1-r1")["metrics"][name]
    (run / "records" / "oltp" / "u2-r1.json").write_text(json.dumps(stalled))
    assert refbench("report", str(run)).code == 0
    verdict, = json.loads((run / "verdict.json").read_text())
    assert {h["case"] for h in verdict["headlines"]} == {"u1-r1"}, verdict["headlines"]
    copy = run.with_name(run.name + "-copy")  # compare refuses one run on both sides
    shutil.copytree(run, copy, ignore=shutil.ignore_patterns("work", "raw"))
    compared = refbench("compare", str(run), str(copy), "--all", "--json")
    nopm = {f["case"]: f for f in compared.json()["figures"] if f["metric"] == "nopm"}
    assert nopm["u2"]["answer"] == "not compared" and "stalled: the server made no progress" in nopm["u2"]["why"]
    assert nopm["u1"]["answer"] != "not compared"


@pytest.mark.slow
def test_a_server_stopped_for_20_s_inside_the_bound_is_marked_and_its_held_calls_count(tmp_path, process_tree, data_dir):
    tree = process_tree(*OLTP, "--users", "2", "--data-dir", str(data_dir), "--runs-dir", "runs")
    stopped: list[int] = []
    try:
        _measuring(tree)
        time.sleep(1)
        stopped = _postgres(data_dir)
        _signal(stopped, signal.SIGSTOP)
        at = time.monotonic()
        time.sleep(20)
    finally:
        _signal(stopped, signal.SIGCONT)
    held_s = time.monotonic() - at
    ended = tree.finish()
    assert ended["code"] == 0, ended["stderr"]
    run = next((tmp_path / "runs").iterdir())
    record = _record(run, "u2-r1")
    said = record["extra"]["stalled"]
    seconds = int(re.match(r"the server made no progress for (\d+) s, from (\d+) s into the 8-s window$", said)[1])
    assert 15 <= seconds <= held_s + 2, said
    assert record["extra"]["disturbed"] == f"stalled: {said}"
    _held_to_the_end(record)
    verdict, = json.loads((run / "verdict.json").read_text())
    assert verdict["disturbed"].startswith("stalled: the server made no progress for"), verdict


@pytest.mark.slow
def test_a_server_killed_in_the_window_is_its_own_sentence_and_exit_status_and_the_run_resumes(
        tmp_path, refbench, process_tree, data_dir):
    tree = process_tree(*OLTP, "--users", "2", "--data-dir", str(data_dir), "--runs-dir", "runs")
    _measuring(tree)
    _signal(_postgres(data_dir), signal.SIGKILL)
    ended = tree.finish()
    assert ended["code"] == ServerGone.exit_code, ended["stderr"]
    line, = [line for line in ended["stderr"].splitlines() if line.startswith("refbench:")]
    run = next((tmp_path / "runs").iterdir())
    assert line.startswith("refbench: the managed PostgreSQL ended while the run used it (killed by SIGKILL; its log: ")
    assert line.endswith(f"continue with: refbench resume runs/{run.name}"), line
    assert "Traceback" not in ended["stderr"] and ended["survivors"] == []
    resumed = refbench("resume", str(run))
    assert resumed.code == 0, resumed.stderr
    assert "stalled" not in _record(run, "u2-r1")["extra"]


@pytest.mark.slow
@pytest.mark.skipif(not shutil.which("mariadbd") and not os.path.exists("/usr/sbin/mariadbd"),
                    reason="MariaDB is not installed")
def test_a_mariadb_stopped_in_the_window_ends_it_at_its_bound(tmp_path, process_tree, reachable_dir):
    data = reachable_dir / "mariadb"
    tree = process_tree(*OLTP, "--engine", "mariadb", "--users", "2", "--data-dir", str(data), "--runs-dir", "runs",
                        linger_s=30)
    ended, stopped = _kept_stopped(tree, lambda: _mariadbd(data))
    assert stopped and ended["code"] == ServerGone.exit_code, ended["stderr"]
    line, = [line for line in ended["stderr"].splitlines() if line.startswith("refbench:")]
    assert "the managed MariaDB stopped answering while u2-r1 was measured" in line and "refbench resume" in line, line
    assert ended["survivors"] == []
    record = _record(next((tmp_path / "runs").iterdir()), "u2-r1")
    assert f"which refbench ended {ANSWER_BOUND_S:g} s past its" in record["extra"]["stalled"]
    assert record["elapsed_s"] <= RAMPUP_S + DURATION_S + ANSWER_BOUND_S + SLACK_S, record["elapsed_s"]


@pytest.mark.slow
@pytest.mark.timeout(180)  # a query that waits for ever fails here, its server continued and stopped
@pytest.mark.parametrize("engine", ["postgres", "mariadb"])
def test_a_query_the_stopped_server_holds_past_its_timeout_ends_as_a_stopped_server(engine, reachable_dir):
    """DSS's query streams: the query timeout is the server's to keep, and a stopped server keeps none."""
    if engine == "mariadb" and not shutil.which("mariadbd") and not os.path.exists("/usr/sbin/mariadbd"):
        pytest.skip("MariaDB is not installed")
    from refbench.engines.mariadb import ManagedMariaDB, MariaDbSession
    from refbench.engines.postgres import ManagedPostgres, PostgresSession

    if engine == "postgres":
        server = ManagedPostgres(reachable_dir / "pgdata", {})
    else:
        server = ManagedMariaDB(reachable_dir / "mariadb", {"innodb_buffer_pool_size": "32M"})
    server.start()
    stopped: list[int] = []
    try:
        session = (PostgresSession if engine == "postgres" else MariaDbSession)(server.dsn)
        assert session.run("SELECT 1", timeout_s=0.5)[0] == [(1,)]
        stopped = _postgres(server.data_dir) if engine == "postgres" else [server.process.pid]
        _signal(stopped, signal.SIGSTOP)
        t0 = time.monotonic()
        with pytest.raises(ServerGone) as gone:
            session.run("SELECT 2", timeout_s=0.5)
        waited_s = time.monotonic() - t0
        _signal(stopped, signal.SIGCONT)
        session.close()
    finally:
        _signal(stopped, signal.SIGCONT)
        server.stop()
    title = "PostgreSQL" if engine == "postgres" else "MariaDB"
    assert str(gone.value) == (f"the {title} server did not answer a query within its 0.5 s timeout and "
                               f"{ANSWER_BOUND_S:g} s more: it stopped answering")
    assert ANSWER_BOUND_S <= waited_s <= ANSWER_BOUND_S + 10, waited_s


def test_a_stalled_repeat_is_left_out_of_its_headline_median_and_range():
    from refbench.report.verdict import _with_repeats
    from refbench.suites import Headline, Record
    from refbench.suites.repeats import one_per_configuration

    stall = {"stalled": "the server made no progress for 20 s, from 2 s into the 8-s window"}
    repeats = [Record({"nopm": nopm}, extra=extra, case_id=f"u2-r{k}", params={"users": 2, "repeat": k})
               for k, (nopm, extra) in enumerate([(10.0, stall), (1.0, {}), (2.0, {})], 1)]
    chosen, = one_per_configuration(repeats)
    assert chosen.metrics["nopm"] == 1.0 and chosen.extra["repeats"]["stalled"] == ["u2-r1"]  # the lower of two
    headline = _with_repeats(Headline("NOPM", 1.0, "NOPM", chosen.case_id, "nopm"), [chosen], repeats)
    assert (headline.low, headline.high, headline.repeats) == (1.0, 2.0, 2) and headline.note == "1 stalled repeat(s) left out"
