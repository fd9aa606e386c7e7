"""Time accounted under contention: the machine's CPU split between the server, the run and its neighbours; a
disturbed measurement named and not compared; a wait profile reconciled with the CPU the server had."""

from __future__ import annotations

import functools
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from conftest import cli_env, refbench_command, wait_for
from process_tree import descendants
from refbench.children import die_with_parent
from refbench.engines.waits import QUEUE, QUOTA, reconcile, shares
from refbench.host.contention import MachineTime, disturbed, interval_ticks
from refbench.host.contention import cpu_ticks as _ticks
from refbench.report.waits import explain
from refbench.suites import Record

BUSY = [sys.executable, "-c", "while True: pass"]


def cpu_ticks(pid: int) -> int:
    return sum(_ticks(pid))
CPU_CGROUPS = Path("/sys/fs/cgroup/cpu")


def _busy(n: int) -> list[subprocess.Popen]:
    return [subprocess.Popen(BUSY, preexec_fn=functools.partial(die_with_parent, signal.SIGKILL)) for _ in range(n)]


def _stop(processes: list[subprocess.Popen]) -> None:
    for p in processes:
        p.kill()
        p.wait()


def test_an_intervals_cpu_splits_into_the_servers_the_runs_own_and_its_neighbours():
    # The "run" is a sleeping process; the "server" and the "neighbour" each spin a CPU.
    run = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    server, neighbour = _busy(2)
    try:
        time.sleep(0.3)
        machine = MachineTime(server_pid=lambda: server.pid, own_pid=run.pid)
        server_outer, neighbour_outer = cpu_ticks(server.pid), cpu_ticks(neighbour.pid)
        machine.start()
        server_inner, neighbour_inner = cpu_ticks(server.pid), cpu_ticks(neighbour.pid)
        time.sleep(1.5)
        server_inner, neighbour_inner = cpu_ticks(server.pid) - server_inner, cpu_ticks(neighbour.pid) - neighbour_inner
        split = machine.stop()
        server_outer, neighbour_outer = cpu_ticks(server.pid) - server_outer, cpu_ticks(neighbour.pid) - neighbour_outer
    finally:
        _stop([server, neighbour, run])
    tick = 1 / os.sysconf("SC_CLK_TCK")
    # The server's CPU is its own ticks over the interval: between what it used inside and around the interval.
    assert server_inner * tick - 2 * tick <= split["server_cpu_s"] <= server_outer * tick + 2 * tick, split
    # The neighbour is not the run's nor the server's: its CPU is among the others'.
    assert split["others_cpu_s"] >= neighbour_inner * tick - 3 * tick, split
    assert split["own_cpu_s"] <= 3 * tick, split  # the run slept
    parts = split["own_pct"] + split["server_pct"] + split["others_pct"] + split["steal_pct"] + split["idle_pct"]
    assert 99 <= parts <= 101, split
    assert "server_runqueue_s" in split and "pressure_pct" in split or not Path("/proc/pressure").exists()
    # An interval shorter than the CPU ticks can split is not split (nor judged).
    short = MachineTime()
    short.start()
    assert "own_cpu_s" not in short.stop()


def test_others_writes_are_the_devices_writes_less_what_the_runs_own_counters_say_it_wrote():
    """Never the run's /proc/PID/io write_bytes: a page dirtied again after its flush is charged whole each time
    (500 commits of 512 bytes charged 1,049 MB against 6.25 MB on the device)."""
    from refbench.host.contention import split

    sectors = lambda read_mb, written_mb: [0, int(read_mb * 1e6 / 512), 0, 0, int(written_mb * 1e6 / 512)]  # noqa: E731
    a = {"t": 0.0, "machine": {}, "server": None, "pressure": {}, "disks": {"vda": sectors(0, 0)}, "read_bytes": 0,
         "own_run_delay": {}, "available_mb": 20_000.0}
    b = {**a, "t": 10.0, "disks": {"vda": sectors(40, 300)}, "read_bytes": int(30e6), "available_mb": 19_000.0}
    counted = split(a, b, "vda", own_written_bytes=60e6)
    assert (counted["device_write_mb_s"], counted["others_write_mb_s"]) == (30.0, 24.0)
    assert (counted["device_read_mb_s"], counted["others_read_mb_s"]) == (4.0, 1.0)
    assert split(a, b, "vda")["others_write_mb_s"] is None  # nothing counted the run's writes: not known
    assert split(a, b, "vda", own_written_bytes=500e6)["others_write_mb_s"] == 0.0  # written back after the interval
    assert counted["memory_available_mb"] == 19_000  # the least of the interval's two readings


def test_disturbed_is_said_from_what_the_neighbours_took_cpu_queued_for_device_reads_writes_and_memory(monkeypatch):
    monkeypatch.delenv("REFBENCH_DISTURBED")
    assert disturbed({"others_pct": 61.0, "steal_pct": 0.0}) == "other processes used 61% of the CPU"
    assert disturbed({"others_pct": 12.0, "steal_pct": 0.5}) is None  # nothing of the run's queued meanwhile
    assert disturbed({"others_pct": 1.0, "steal_pct": 7.3}) == "the hypervisor took 7% of the CPU (steal)"
    said = disturbed({"others_pct": 3.0, "device": "vda", "device_read_mb_s": 100.0, "others_read_mb_s": 80.0})
    assert said == "other processes read 80.0 of 100.0 MB/s from vda"
    # Measured on this VM, quick oltp at 2 users (tests/neighbours.py's neighbours): quiet, then a loop taking 18%
    # of the CPU, which queued the server's threads twice as long and cost 35% of NOPM; then a 4 KiB writer.
    quiet = {"others_pct": 0.0, "steal_pct": 0.0, "server_runqueue_avg": 0.31, "own_runqueue_avg": 0.02,
             "device": "vda", "device_write_mb_s": 29.98, "others_write_mb_s": 22.08, "memory_available_mb": 21_000}
    assert disturbed(quiet) is None
    loop = {**quiet, "others_pct": 18.1, "server_runqueue_avg": 0.58}
    assert disturbed(loop) == "other processes used 18% of the CPU"
    light = {**loop, "others_pct": 12.0}
    assert disturbed(light).endswith("while the run's threads queued for one (0.6 waiting on average)")
    assert disturbed({**light, "server_runqueue_avg": 0.03, "own_runqueue_avg": 0.02}) is None  # it took idle time
    writer = {**quiet, "device_write_mb_s": 61.09, "others_write_mb_s": 57.56}
    assert disturbed(writer) == "other processes wrote 58 of the 61 MB/s written to vda"
    heavy = {**quiet, "device_write_mb_s": 300.0, "others_write_mb_s": 150.0}  # a heavy run's own uncounted writes
    assert disturbed(heavy) is None
    # A cache bound of 1,024 MB over 462 MB of data, beside a process holding all but 251 MB of the memory.
    storage = {"bound": {"cache_mb": 1024, "shared_buffers_mb": 128}, "data_mb": 462.0, "page_cache_end_mb": 327.0}
    assert disturbed({**quiet, "memory_available_mb": 251}, storage) == (
        "other processes left the server 327 MB for its page cache of 1,024 MB (its data 462 MB, 251 MB available)")
    assert disturbed({**quiet, "memory_available_mb": 251}, {**storage, "page_cache_end_mb": 430.0}) is None
    assert disturbed({**quiet, "memory_available_mb": 24_000}, storage) is None  # still warming: room to grow
    monkeypatch.setenv("REFBENCH_DISTURBED", "off")
    assert disturbed({"others_pct": 61.0}) is None


def _profile(events: dict[tuple[str, str], float], active: float) -> dict:
    return {"hz": 10, "samples": 100, "session_samples": int(100 * active), "avg_active_sessions": active,
            **shares(__import__("collections").Counter(events)), "per_second": []}


def test_a_throttled_servers_running_and_flush_time_is_time_waiting_for_cpu():
    # 2 sessions for 10 s sampled 80% in WAL flushes, 20% running; the server had 1 CPU-s of its cgroup's 0.3 CPU,
    # 183 of 196 periods throttled, its threads queued 12 s; each flush took 3.2 ms where the device took 0.13.
    # Running keeps 1 s of 4 (the server's CPU), 3 s were queued; of 16 s in flushes, the 9 s of run delay left
    # were waiting for a CPU, the rest stays a flush.
    waits = _profile({("IO", "WALSync"): 80, ("CPU", "CPU"): 20}, 2.0)
    machine = {"interval_s": 10.0, "server_cpu_s": 1.0, "server_runqueue_s": 12.0, "server_runqueue_avg": 1.2,
               "server_pct": 5.0, "own_pct": 3.0, "others_pct": 1.0,
               "server_throttled": {"periods": 196, "throttled_periods": 183, "throttled_s": 9.1, "quota_cpus": 0.3}}
    io = {"ms_per_flush": 3.2, "flushes_per_s": 500.0}
    reconciled = reconcile(waits, machine, io, {"device_w_await_ms": 0.13})
    by_event = {(e["class"], e["event"]): e["share_pct"] for e in reconciled["events"]}
    assert by_event[("CPU", "CPU")] == pytest.approx(100 * 1 / 20, abs=0.1)
    assert by_event[("IO", "WALSync")] == pytest.approx(100 * (16 - 9) / 20, abs=0.1)
    assert by_event[("CPU wait", QUOTA)] == pytest.approx(100 * (3 + 9) / 20, abs=0.1)
    assert abs(sum(by_event.values()) - 100) < 0.1
    line = explain(reconciled, io, "vda", machine)
    assert line.startswith("waiting for CPU (throttled: a quota of 0.3 CPUs held it back in 183 of 196 periods"), line
    # Samples a RunQueueWatch found queued while the quota held the server back are the quota's time too.
    watched = _profile({("CPU wait", QUEUE): 60, ("IO", "WALSync"): 20, ("CPU", "CPU"): 20}, 2.0)
    said = reconcile(watched, machine, io, {"device_w_await_ms": 0.13})
    assert said["events"][0]["event"] == QUOTA and all(e["event"] != QUEUE for e in said["events"]), said["events"]
    assert explain(said, io, "vda", machine).startswith("waiting for CPU (throttled: a quota of 0.3 CPUs")

    # The same flushes on a quiet CPU (a device throttled below the block layer, whose await does not show it): the
    # flush stays the limit.
    quiet = {**machine, "server_cpu_s": 4.0, "server_runqueue_s": 0.1, "server_throttled": {}}
    assert reconcile(waits, quiet, io, {"device_w_await_ms": 0.13})["events"] == waits["events"]
    assert explain(reconcile(waits, quiet, io, {"device_w_await_ms": 0.13}), io, "vda", quiet).startswith(
        "storage flush latency: 80% of session time waiting")
    # A device throttled above its queue (its await low) beside a neighbour that queues the server's threads a
    # little: the flush time beyond that little is the device's path, and stays a flush.
    beside = reconcile(waits, {**machine, "server_cpu_s": 4.0, "server_runqueue_s": 2.5, "server_throttled": {}}, io,
                       {"device_w_await_ms": 0.13})
    assert beside["events"][0]["event"] == "WALSync" and beside["events"][0]["share_pct"] > 65
    # A slow device under a starved CPU: the flush took what the device took, and stays a flush.
    slow = reconcile(waits, {**machine, "server_throttled": {}}, {"ms_per_flush": 33.0}, {"device_w_await_ms": 30.0})
    assert {(e["class"], e["event"]): e["share_pct"] for e in slow["events"]}[("IO", "WALSync")] == 80


def test_a_throttled_server_whose_device_is_unseen_is_limited_by_its_quota_whatever_its_waits_say():
    """A user's PostgreSQL (--dsn) capped at 0.4 CPU: refbench reads its cgroup and its threads' run delay, but not
    its device's await. Its sessions sampled in WAL flushes were its threads queued behind the quota."""
    from refbench.report.verdict import limit_said, name_bottleneck

    waits = _profile({("IO", "WALSync"): 70, ("CPU", "CPU"): 30}, 2.6)
    machine = {"interval_s": 8.0, "server_cpu_s": 3.2, "server_runqueue_s": 20.6, "server_runqueue_avg": 2.57,
               "server_pct": 20.0, "own_pct": 10.0, "others_pct": 1.0,
               "server_throttled": {"periods": 150, "throttled_periods": 150, "throttled_s": 6.9, "quota_cpus": 0.4}}
    io = {"ms_per_flush": 6.1, "flushes_per_s": 120.0}
    reconciled = reconcile(waits, machine, io, None)  # no device: a server refbench does not manage
    by_event = {(e["class"], e["event"]): e["share_pct"] for e in reconciled["events"]}
    assert reconciled["events"][0]["event"] == QUOTA and by_event[("CPU wait", QUOTA)] > 50, by_event
    assert reconciled["reconciled"]["flush_device_unseen"]
    # Even a profile left as the sessions said it (no run delay to move) is named by the quota that held it.
    record = Record({}, suite="oltp", case_id="u4", params={"engine": "postgres"},
                    extra={"storage": {"waits": waits, "io_latency": io, "machine": machine}})
    window = {"cpu": {"user_pct": 15, "system_pct": 5, "steal_pct": 0}, "disks": {}}
    resource, phrase = name_bottleneck(record, window)
    assert resource == "cpuwait" and phrase.startswith("the server's CPU quota of 0.4 CPUs (throttled in 150 of 150"), phrase
    assert "storage flush latency" in phrase  # what the sessions were seen waiting for, as evidence after it
    assert limit_said(resource, record, window) == "the server's CPU quota, throttled in 150 of 150 periods"
    # The same flushes on a quiet, unthrottled server stay the flush.
    quiet = {**machine, "server_cpu_s": 6.5, "server_runqueue_s": 0.2, "server_runqueue_avg": 0.03, "server_throttled": {}}
    assert reconcile(waits, quiet, io, None)["events"] == waits["events"]
    calm = Record({}, suite="oltp", case_id="u4", extra={"storage": {"waits": waits, "io_latency": io, "machine": quiet}})
    assert name_bottleneck(calm, window)[0] == "flush"


def test_a_session_whose_process_queued_for_a_cpu_since_its_last_sample_is_waiting_for_cpu():
    """Twice as many CPU-bound children of one "server" as there are cores: each is runnable about half the time
    it is not running, whatever wait its session shows; a sleeping child is not; a process that is not the server's
    child is left as its session said."""
    from refbench.engines.waits import RunQueueWatch

    # Each spinner stops when its parent is gone, so that none outlives a killed test.
    spin = ("import os, signal, sys\nparent = os.getpid()\nfor _ in range(int(sys.argv[1])):\n    if os.fork() == 0:\n"
            "        while os.getppid() == parent: pass\n        os._exit(0)\nsignal.pause()")
    cores = len(os.sched_getaffinity(0))
    server = subprocess.Popen([sys.executable, "-c", spin, str(2 * cores)],
                              preexec_fn=functools.partial(die_with_parent, signal.SIGKILL))
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                               preexec_fn=functools.partial(die_with_parent, signal.SIGKILL))
    try:
        wait_for(lambda: len([p for p in descendants(server.pid) if p != server.pid]) >= 2 * cores, 30, "every spinner")
        spinners = [p for p in descendants(server.pid) if p != server.pid]
        watch = RunQueueWatch.for_server(server.pid)
        rows = [("IO", "WALSync", False, pid) for pid in spinners] + [("CPU", "CPU", False, sleeper.pid)]
        watch.classify(rows)
        time.sleep(0.5)
        said = watch.classify(rows)
    finally:
        server.kill()  # its spinners end with it
        sleeper.kill()
        server.wait()
        sleeper.wait()
    queued = [r for r in said[:-1] if r[:2] == ("CPU wait", QUEUE)]
    assert len(queued) >= len(spinners) // 2, said  # each queued about half the time: most pass the line
    assert said[-1] == ("CPU", "CPU", False)  # not the server's child: as its session said
    assert watch.summary()["queued_samples"] == len(queued)
    assert RunQueueWatch.for_server(None) is None and RunQueueWatch.for_server(2 ** 22 + 7) is None


def test_sessions_sampled_running_while_the_server_barely_ran_were_waiting_unseen():
    # 8 sessions sampled running 98% of 15 s (a lock convoy the sampler cannot see), the server used 9.4 CPU-s.
    waits = _profile({("CPU", "CPU"): 98, ("IO", "WALSync"): 2}, 8.0)
    machine = {"interval_s": 15.0, "server_cpu_s": 9.4, "server_runqueue_s": 0.2}
    reconciled = reconcile(waits, machine, {}, {})
    by_event = {(e["class"], e["event"]): e["share_pct"] for e in reconciled["events"]}
    assert by_event[("CPU", "CPU")] < 10 and by_event[("Unseen", "not on a CPU, not queued")] > 85
    assert ("CPU wait", QUEUE) not in by_event  # 0.2 s queued is within what the ticks decide
    assert explain(reconciled, {}, None, machine).startswith("waits the server does not show: ")


def test_a_server_that_does_not_time_its_io_says_so_with_the_setting_that_would():
    waits = _profile({("IO", "WALSync"): 70, ("CPU", "CPU"): 30}, 1.5)
    line = explain(waits, {"ms_per_flush": None, "flushes_per_s": 300.0, "untimed": ["track_wal_io_timing"]}, "vda")
    assert "no time per WAL flush: the server has track_wal_io_timing off" in line and "?" not in line
    assert "ALTER SYSTEM SET track_wal_io_timing = on" in line


@pytest.mark.slow
def test_a_neighbour_taking_the_cpu_marks_the_run_disturbed_and_compare_calls_no_change(tmp_path):
    env = cli_env(REFBENCH_DISTURBED="")
    sleepy = ["sleepy", "--set", "sleepy.sleep_s=1.5", "--set", "sleepy.cases=2", "--runs-dir", "runs"]
    # Half the cores spinning: neighbours with half the machine's CPU, twice the limit.
    neighbours = _busy(max(1, (os.cpu_count() or 2) // 2))
    try:
        runs = []
        for speed in ("1", "2"):
            done = subprocess.run(refbench_command(*sleepy, "--set", f"sleepy.speed={speed}"), cwd=tmp_path, env=env,
                                  capture_output=True, text=True, timeout=300)
            assert done.returncode == 0, done.stderr
            runs.append(tmp_path / done.stdout.strip().splitlines()[-1])
            assert "disturbed: other processes used " in done.stdout, done.stdout
    finally:
        _stop(neighbours)
    record = json.loads((runs[0] / "records" / "sleepy" / "case-001.json").read_text())
    assert record["extra"]["disturbed"].startswith("other processes used ")
    assert record["telemetry"]["machine"]["others_pct"] > 25
    verdict = json.loads((runs[0] / "verdict.json").read_text())[0]
    assert verdict["disturbed"].startswith("other processes used ") and "(case-001)" in verdict["disturbed"]
    compared = subprocess.run(refbench_command("compare", str(runs[0]), str(runs[1])), cwd=tmp_path,
                              env={**env, "COLUMNS": "80"}, capture_output=True, text=True, timeout=300)
    assert compared.returncode == 0, compared.stderr
    assert "sleepy: not compared: disturbed: A: other processes used" in compared.stdout, compared.stdout
    assert compared.stdout.count("disturbed: ") == 1, compared.stdout  # the reasons, said once
    assert len(compared.stdout.splitlines()) <= 25, compared.stdout
    assert "faster" not in compared.stdout.split("what limits it")[0]


def _server_processes(root: int) -> list[int]:
    # The postmaster (".../bin/postgres -D …") and the processes it has forked ("postgres: checkpointer", …).
    return [pid for pid, command in descendants(root).items() if Path(command.split(" ")[0]).name.startswith("postgres")]


@pytest.mark.slow
@pytest.mark.reference  # `make test-reference`: a real oltp run with its server capped
def test_a_cpu_capped_server_is_said_to_wait_for_cpu_not_for_its_storage(tmp_path, reachable_dir):
    if not (CPU_CGROUPS / "cpu.cfs_quota_us").exists():
        pytest.skip("no cgroup v1 cpu controller here to cap the server with")
    group = CPU_CGROUPS / f"refbench-test-{uuid.uuid4().hex[:8]}"
    group.mkdir()
    (group / "cpu.cfs_quota_us").write_text("30000")  # 0.3 CPU in each 100 ms period
    command = refbench_command("oltp", "--warehouses", "1", "--rampup-s", "2", "--duration-s", "8", "--users", "2",
                               "--data-dir", str(reachable_dir / "data"), "--runs-dir", "runs")
    process = subprocess.Popen(command, cwd=tmp_path, env=cli_env(REFBENCH_DISTURBED=""), stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True,
                               preexec_fn=functools.partial(die_with_parent, signal.SIGTERM))
    try:
        # The server capped from the end of the load to the end of the measurement: its processes, and the
        # sessions it forks (a session forked while the others were moved is moved at the next look).
        wait_for(lambda: list(tmp_path.glob("runs/*/work/oltp/load.json")), 300, "the load", every_s=0.2)

        def capped() -> bool:
            for pid in _server_processes(process.pid):
                try:
                    (group / "cgroup.procs").write_text(str(pid))
                except ProcessLookupError:
                    pass
            return bool(list(tmp_path.glob("runs/*/records/oltp/*.json"))) or process.poll() is not None
        wait_for(capped, 300, "the measurement", every_s=0.1)
        stdout, stderr = process.communicate(timeout=600)
    finally:
        process.kill()
        process.wait()
        wait_for(lambda: not (group / "cgroup.procs").read_text().strip(), 30, "the server's end", every_s=0.2)
        group.rmdir()
    assert process.returncode == 0, stderr
    run = tmp_path / stdout.strip().splitlines()[-1]
    line = json.loads((run / "verdict.json").read_text())[0]["bottleneck"]
    machine = json.loads(next(run.glob("records/oltp/*.json")).read_text())["extra"]["storage"]["machine"]
    if line.startswith("waiting for CPU (throttled: a quota of 0.3 CPUs held it back"):
        assert "host: the server's CPU quota" in line  # the host's figures say so too, not "neither saturated"
        assert machine["server_throttled"]["throttled_periods"] > 0 and machine["server_cpu_s"] < 0.35 * machine["interval_s"]
    else:
        # Beside other work the server may never reach its quota: other processes take the CPU first (beside two CPU
        # loops and other tests it had 0.22 CPUs), and the line says so. Its storage is never what it waited for.
        assert line.startswith("waiting for CPU (queued: ") and "host: CPU (" in line, line
        assert machine["server_pct"] / 100 * machine["cores"] < 0.3 and machine["others_pct"] > 50, (line, machine)


def test_a_child_reaped_in_the_interval_counts_only_the_cpu_it_used_in_it():
    # A parent (ticks 100 own, 0 reaped) with a child at 500 ticks; the child ends having used 50 more and is
    # reaped: the parent's reaped ticks grow by the child's whole 550, of which 50 were the interval's.
    before = {1: (100, 0), 2: (500, 0)}
    after = {1: (110, 550)}
    assert interval_ticks(before, after) == 10 + 50
    # A child born and reaped within the interval counts whole, and a new one alive at the end too.
    assert interval_ticks({1: (100, 0)}, {1: (100, 30), 3: (20, 0)}) == 50


@pytest.mark.slow
@pytest.mark.reference  # `make test-reference`: a real PostgreSQL power stream, its plans made parallel
def test_a_power_streams_parallel_workers_are_sampled_with_their_leader(refbench, tmp_path, reachable_dir):
    parallel = ('dss.pg_settings=["work_mem=64MB","parallel_setup_cost=0","parallel_tuple_cost=0",'
                '"min_parallel_table_scan_size=0","max_parallel_workers_per_gather=2"]')
    result = refbench("dss", "--sf", "0.1", "--engines", "postgres", "--modes", "power", "--set", parallel,
                      "--data-dir", str(reachable_dir / "tpch"), "--runs-dir", "runs")
    assert result.code == 0, result.stderr
    run = tmp_path / result.last_line
    record = json.loads(next(run.glob("records/dss/postgres-power*.json")).read_text())
    waits = record["extra"]["storage"]["waits"]
    assert waits["parallel_worker_pct"] > 10, waits  # the workers' samples, beside their leader's
    assert waits["avg_active_sessions"] > 1.1, waits  # one stream, more than one process at work
    bottleneck = json.loads((run / "verdict.json").read_text())[0]["bottleneck"]
    assert "of them parallel workers" in bottleneck and not bottleneck.startswith("its parallel workers"), bottleneck


def test_row_lock_waits_are_named_by_table_and_a_hot_row_is_said():
    from collections import Counter

    from refbench.engines.waits import by_table

    events = Counter({("Lock", "row lock on `db`.`warehouse` row 1"): 40, ("Lock", "row lock on `db`.`district` row 1, 2"): 10,
                      ("Lock", "row lock on `db`.`district` row 1, 3"): 10, ("CPU", "CPU"): 40})
    tables, rows = by_table(events)
    assert tables[("Lock", "row lock on `db`.`district`")] == 20 and rows["`db`.`warehouse` row 1"] == 40
    waits = _profile(tables, 4.0) | {"lock_rows": [{"row": "`db`.`warehouse` row 1", "share_pct": 40.0}]}
    line = explain(waits, {}, None)
    assert line.startswith("row locks: 60% of session time waiting (Lock:row lock on `db`.`warehouse` 40%"), line
    assert "; a hot row: 67% of them on `db`.`warehouse` row 1" in line


@pytest.mark.slow
@pytest.mark.reference  # `make test-reference`: a real MariaDB lock convoy
def test_sixteen_mariadb_users_on_one_warehouse_queue_for_its_row(refbench, tmp_path, reachable_dir):
    # Commits write the log and flush it once a second: the convoy is the subject, not the flush. With a flush at every
    # commit, beside two CPU loops the fsyncs' completions queued behind them (flush 28% of session time), 4 of 16
    # sessions were in the server and 0.3% of session time was on a lock; without it, 30% beside them, 64% alone.
    settings = '["innodb_log_file_size=1G","thread_handling=pool-of-threads","innodb_flush_log_at_trx_commit=2"]'
    result = refbench("oltp", "--engine", "mariadb", "--warehouses", "1", "--users", "16", "--rampup-s", "2",
                      "--duration-s", "8", "--set", f"oltp.mariadb_settings={settings}",
                      "--data-dir", str(reachable_dir / "data"), "--runs-dir", "runs")
    assert result.code == 0, result.stderr
    run = tmp_path / result.last_line
    line = json.loads((run / "verdict.json").read_text())[0]["bottleneck"]
    waits = json.loads(next(run.glob("records/oltp/*.json")).read_text())["extra"]["storage"]["waits"]
    assert waits["classes"].get("CPU", 0) < 90, waits  # a session waiting is not counted running
    # The row-lock waits seen, by table, and the one row most of them queue for, whether or not the lock is first in
    # the line (beside CPU loops CPU comes first: running 40%, locks 30%, runnable 28%).
    assert waits["classes"].get("Lock", 0) > 10, waits
    assert waits["lock_rows"][0]["row"] == "`refbench`.`warehouse` row 1", waits
    assert "row locks" not in line.split("; host:")[0] or "of them on `refbench`.`warehouse` row 1" in line, line


def test_a_users_server_elsewhere_prints_no_question_mark_for_its_devices_reads():
    from refbench.suites.storage import verdicts
    from refbench.suites import Record

    storage = {"engine": "postgres", "interval_s": 10.0, "server_read_mb": None, "device": None,
               "blocks_hit": 990, "blocks_read": 10}
    line, = verdicts([Record(metrics={}, extra={"storage": storage})])
    assert "?" not in line and "its device's reads unknown" in line, line


@pytest.mark.slow
def test_a_users_server_on_this_host_has_its_time_split_out_too(refbench, tmp_path, loaded_postgres):
    # The user's server (refbench did not start it), its database loaded already: a copy of the one-warehouse template.
    server = loaded_postgres({"track_io_timing": "on"})
    server.start()
    try:
        dsn = server.database("refbench")
        result = refbench("oltp", "--dsn", dsn, "--warehouses", "1", "--users", "2", "--rampup-s", "1",
                          "--duration-s", "3", "--runs-dir", "runs")
    finally:
        server.stop()
    assert result.code == 0, result.stderr
    storage = json.loads(next((tmp_path / result.last_line).glob("records/oltp/*.json")).read_text())["extra"]["storage"]
    machine = storage["machine"]
    assert machine["server_cpu_s"] > 0 and "server_runqueue_s" in machine, machine  # found from its connection
    assert storage["server_read_mb"] is None  # its own I/O is still not refbench's to read
    assert "reconciled" in storage["waits"]


def test_the_canary_says_what_moved_beyond_its_own_spread(tmp_path):
    from refbench.host import canary

    probe = canary.probe(tmp_path / "canary")
    assert all(probe[k] is None or probe[k] > 0 for k in canary.FIGURES) and probe["fsync_ms"] is not None, probe
    assert probe["cost_ms"] < 1000, probe  # a hang guard: the probe is milliseconds (docs/neighbours.md)
    quiet = [{"cpu_ms": 0.70, "fsync_ms": 0.26, "read_ms": 0.08}, {"cpu_ms": 0.75, "fsync_ms": 0.30, "read_ms": 0.09},
             {"cpu_ms": 0.72, "fsync_ms": 0.24, "read_ms": 0.08}]
    assert canary.moved(quiet, [{"cpu_ms": 0.74, "fsync_ms": 0.29, "read_ms": 0.09}]) == ""
    shared = [{**p, "fsync_ms": f} for p, f in zip(quiet, (0.85, 0.9, 0.8))]  # another VM writing to the same storage
    assert canary.moved(quiet, shared) == "fsync 0.26 → 0.85 ms"
    assert canary.moved(shared, quiet) == "fsync 0.85 → 0.26 ms"
    # One loud probe among quiet ones is within the spread the side already had.
    assert canary.moved(quiet + [{"cpu_ms": 0.7, "fsync_ms": 0.9, "read_ms": 0.08}], shared[:1] + quiet) == ""


@pytest.mark.live
def test_each_case_keeps_its_canary_and_compare_says_when_the_host_changed(tmp_path, refbench):
    made = []
    for _ in range(2):
        result = refbench("sleepy", "--runs-dir", "runs", "--set", "sleepy.sleep_s=0", "--set", "sleepy.cases=2")
        assert result.code == 0, result.stderr
        made.append(Path(result.last_line) if Path(result.last_line).is_absolute() else tmp_path / result.last_line)
    record = json.loads((made[0] / "records" / "sleepy" / "case-000.json").read_text())
    assert set(record["extra"]["canary"]) == {"before", "after"} and record["extra"]["canary"]["after"]["fsync_ms"] > 0
    for path in (made[1] / "records" / "sleepy").glob("*.json"):  # B's host: its fsyncs five times as slow
        changed = json.loads(path.read_text())
        for probe in changed["extra"]["canary"].values():
            probe["fsync_ms"] = 5 * max(p["fsync_ms"] for r in (made[0] / "records" / "sleepy").glob("*.json")
                                        for p in json.loads(r.read_text())["extra"]["canary"].values()) + 1
        path.write_text(json.dumps(changed))
    compared = refbench("compare", str(made[0]), str(made[1]))
    assert compared.code == 0, compared.stderr
    assert "the host changed between A and B: fsync " in compared.stdout, compared.stdout
    page = Path(compared.stderr.strip().splitlines()[-1].removeprefix("comparison: ")).read_text()
    assert "the host changed between A and B: fsync " in page  # and on the page, and in markdown
    assert "the host changed between A and B" in refbench("compare", str(made[0]), str(made[1]), "--format", "markdown").stdout
    quiet = refbench("compare", str(made[0]), str(made[0]))
    assert "the host changed" not in quiet.stdout
