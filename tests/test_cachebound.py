"""The cache bound of the database suites (host.cachebound, suites.storage): where the memory cgroup is found, the
managed PostgreSQL inside its own cgroup, the fallback without one, an OOM at the bound, and the verdict's rule."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import wait_for

from refbench.engines.postgres import ManagedPostgres, connect
from refbench.host import cachebound
from refbench.host.cachebound import Bound, CgroupHome, ServerCgroup, find_home
from refbench.runner import diagnose
from refbench.suites import Record, storage

HOME, WHY = find_home()
needs_cgroup = pytest.mark.skipif(os.geteuid() != 0 or HOME is None, reason=f"needs root and a memory cgroup ({WHY})")


def _fake_proc(tmp_path: Path, cgroup: str, mountinfo: list[str]) -> Path:
    proc = tmp_path / "proc-self"
    proc.mkdir()
    (proc / "cgroup").write_text(cgroup)
    (proc / "mountinfo").write_text("\n".join(mountinfo) + "\n")
    return proc


def _cgroup_dir(path: Path, controllers: str = "") -> Path:
    path.mkdir(parents=True)
    (path / "cgroup.procs").write_text("")
    (path / "cgroup.controllers").write_text(controllers)
    return path


def test_the_memory_cgroup_is_found_in_v1_and_v2_layouts_and_refused_without_the_controller(tmp_path):
    v1 = tmp_path / "v1"
    own = _cgroup_dir(v1 / "process_api" / "abc")
    proc = _fake_proc(tmp_path, "9:name=systemd:/\n4:memory:/process_api/abc\n0::/\n", [
        f"30 25 0:27 / {tmp_path / 'cpu'} rw,relatime - cgroup cgroup rw,cpu",
        f"31 25 0:28 / {v1} rw,relatime - cgroup cgroup rw,memory",
        f"32 25 0:29 / {tmp_path / 'unified'} rw,relatime - cgroup2 cgroup2 rw"])
    assert find_home(proc) == (CgroupHome(1, own), "")

    # A container sees its own subtree of the v2 hierarchy, mounted at the mount point.
    v2 = tmp_path / "v2"
    own2 = _cgroup_dir(v2 / "job", "cpu memory io")
    (tmp_path / "p2").mkdir()
    proc2 = _fake_proc(tmp_path / "p2", "0::/docker/c1/job\n", [f"40 25 0:30 /docker/c1 {v2} rw - cgroup2 cgroup2 rw"])
    assert find_home(proc2) == (CgroupHome(2, own2), "")

    (own2 / "cgroup.controllers").write_text("cpu io")  # memory not delegated: the fallback, with the reason
    home, why = find_home(proc2)
    assert home is None and "no memory cgroup" in why


def test_without_a_cgroup_the_bound_falls_back_to_periodic_eviction_and_says_why(tmp_path, monkeypatch):
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    data = tmp_path / "base"
    data.mkdir()
    (data / "16384").write_bytes(b"x" * 65536)
    bound = Bound(64 * 10**6, data, evict_s=0.05)
    bound.create()
    assert bound.cgroup is None and "posix_fadvise" in bound.method and "not run as root" in bound.method
    threads = {t.name for t in __import__("threading").enumerate()}
    with bound.applied():
        assert "page-cache eviction" in {t.name for t in __import__("threading").enumerate()} - threads
    assert "page-cache eviction" not in {t.name for t in __import__("threading").enumerate()}


@needs_cgroup
def test_the_managed_server_runs_in_its_own_cgroup_bounded_only_while_measuring(data_dir):
    server = ManagedPostgres(data_dir, {"shared_buffers": "16MB"}, cache_bytes=32 * 10**6)
    server.start()
    group = server.bound.cgroup
    try:
        assert group is not None and group.path.parent == HOME.path
        members = set(group.path.joinpath("cgroup.procs").read_text().split())
        # The postmaster and everything it forked are inside: it joined before exec.
        assert str(server.process.pid) in members and len(members) >= 4
        with connect(server.database("postgres"), autocommit=True) as conn:
            backend = str(conn.execute("SELECT pg_backend_pid()").fetchone()[0])
        assert group.limit_bytes is None
        with server.bound.applied():
            own = group.own_bytes()
            assert group.limit_bytes is not None and group.limit_bytes >= own
            assert group.page_cache_bytes() <= 32 * 10**6 + 4 * 2**20  # the allowance, give or take a tick's growth
        assert group.limit_bytes is None  # loading and checking are not bounded
        assert backend  # a backend was forked inside the cgroup and served the query
    finally:
        server.stop()
    assert not group.path.exists()


@needs_cgroup
def test_after_a_kill_9_the_watchdog_stops_the_server_and_removes_its_cgroup(data_dir):
    script = ("import sys, time; from pathlib import Path; from refbench.engines.postgres import ManagedPostgres; "
              "s = ManagedPostgres(Path(sys.argv[1]), {'shared_buffers': '16MB'}, cache_bytes=32 * 10**6); s.start(); "
              "print(s.bound.cgroup.path, s.process.pid, flush=True); time.sleep(600)")
    owner = subprocess.Popen([sys.executable, "-c", script, str(data_dir)], stdout=subprocess.PIPE, text=True)
    try:
        path, pid = owner.stdout.readline().split()
        assert Path(path).is_dir() and pid in Path(path, "cgroup.procs").read_text().split()
    finally:
        owner.kill()
        owner.wait()
    wait_for(lambda: not Path(path).exists(), 30, "the watchdog to remove the server's cgroup")
    assert _ended(pid)


def _ended(pid: str) -> bool:
    """Gone, or a zombie its new parent has yet to reap."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] in "ZX"
    except OSError:
        return True


@needs_cgroup
def test_leftover_cgroups_of_a_killed_refbench_are_swept_and_live_ones_kept():
    dead = HOME.path / f"{cachebound.PREFIX}999999999-1"
    alive = HOME.path / f"{cachebound.PREFIX}1-1"  # pid 1 runs
    for path in (dead, alive):
        path.mkdir()
    try:
        cachebound.sweep(HOME)
        assert not dead.exists() and alive.exists()
    finally:
        for path in (dead, alive):
            if path.exists():
                path.rmdir()


@needs_cgroup
def test_an_oom_kill_at_the_bound_is_one_sentence_that_says_resume(tmp_path):
    group = ServerCgroup(HOME)
    group.create()
    try:
        group.set_limit(40 * 10**6)
        hog = subprocess.run([sys.executable, "-c", "x = bytearray(400_000_000); x[::4096] = b'y' * len(x[::4096])"],
                             preexec_fn=group.join, capture_output=True)
        assert hog.returncode == -signal.SIGKILL
        assert group.read_oom_kills() >= 1
    finally:
        group.remove()

    class Run:  # what diagnose reads of a run
        path = tmp_path / "runs" / "r1"
        plan = type("Plan", (), {"work_dir": "", "targets": [], "options": {}})()

    message = str(diagnose(RuntimeError("server closed the connection unexpectedly"), Run()))
    assert message.startswith("the run stopped: out of memory (the kernel killed") and "raise cache_mb" in message
    assert message.endswith(f"refbench resume {Run.path}") and "\n" not in message
    cachebound._CREATED.remove(group)  # this test's OOM must not explain another test's failure


def _record(engine: str, read_mb: float, seconds: float, hit: int, missed: int, bound=True) -> Record:
    return Record({}, extra={"storage": {
        "engine": engine, "interval_s": seconds, "device": "vdz", "server_read_mb": read_mb,
        "server_read_mb_s": None if read_mb is None else read_mb / seconds, "server_write_mb_s": 0.0,
        "blocks_hit": hit, "blocks_read": missed, "requested_mb": (hit + missed) * 8192 / 1e6,
        "device_read_mb_s": 500.0, "bound": {"bound_mb": 64} if bound else None}})


def test_the_verdict_follows_the_servers_own_reads_not_the_devices():
    # The device read 500 MB/s in every case (a neighbour): only the server's own reads decide.
    assert storage.verdicts([_record("postgres", 300, 15, 2_000_000, 200_000)]) == [
        "storage exercised: 20.0 MB/s read from vdz, hit ratio 90.9%"]
    memory = storage.verdicts([_record("postgres", 6, 15, 1_500_000, 25_000, bound=False)])
    assert memory[0].startswith("measured from memory: this figure does not rate the storage") and "no cache bound" in memory[0]
    # Enough MB/s, but a sliver of what the engine asked for: memory.
    assert storage.verdicts([_record("postgres", 30, 10, 50_000_000, 10)])[0].startswith("measured from memory")
    both = storage.verdicts([_record("postgres", 300, 15, 10, 10), _record("duckdb", 0, 15, 0, 0)])
    assert both[0].startswith("postgres: storage exercised") and both[1].startswith("duckdb: measured from memory")
    assert storage.verdicts([_record("postgres", None, 15, 10, 10)])[0].startswith("storage not proven")


def test_a_bound_that_cannot_work_is_refused_before_anything_is_written(tmp_path, refbench):
    small = refbench("oltp", "--cache-mb", "10", "--runs-dir", "runs")
    assert small.code != 0 and "cache_mb 10 leaves the server too little page cache" in small.stderr
    big = refbench("oltp", "--cache-mb", str(10**6), "--runs-dir", "runs")  # a terabyte: within the option's bound
    assert big.code != 0 and "bounds nothing" in big.stderr and "this host's" in big.stderr
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())
    assert storage.server_memory(storage.AUTO, 1000 * 10**6, {"shared_buffers": "16MB"}).cache_mb == int(250 - 16 * 2**20 / 1e6)
    assert storage.server_memory(0, 10**12, {}) is None
    host_mb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 1e6
    huge = storage.server_memory(storage.AUTO, 10**15, {"shared_buffers": "16MB"})  # data far beyond memory
    assert huge.bound_mb <= host_mb / 2 + 1


@pytest.mark.slow
def test_two_warehouses_read_from_storage_with_a_small_bound_and_from_memory_without(tmp_path, refbench, data_dir):
    """On one loaded database (about 190 MB, nearly five times the 40 MB bound): unbounded just after the load, then
    bounded."""
    short = ["--warehouses", "2", "--users", "4", "--rampup-s", "1", "--duration-s", "4", "--data-dir", str(data_dir),
             "--runs-dir", "runs", "--keep-work"]
    free = refbench("oltp", *short, "--cache-mb", "0")
    assert free.code == 0, free.stderr
    bounded = refbench("oltp", *short, "--cache-mb", "32", "--shared-buffers", "8MB")
    assert bounded.code == 0, bounded.stderr
    seen = {}
    for name, result in (("free", free), ("bounded", bounded)):
        run = tmp_path / result.last_line
        seen[name] = json.loads((run / "records" / "oltp" / "u4-r1.json").read_text())["extra"]["storage"]
        seen[name]["html"] = (run / "report.html").read_text()
        seen[name]["terminal"] = " ".join((result.stdout + result.stderr).split())
    assert "no cache bound (cache_mb = 0)" in seen["free"]["terminal"]
    assert "oltp: measured from memory: this figure does not rate the storage" in seen["free"]["terminal"]
    assert "measured from memory: this figure does not rate the storage" in seen["free"]["html"]
    b = seen["bounded"]
    assert b["server_read_mb"] > 0 and 0 < b["hit_ratio_pct"] < 100 and b["data_per_bound"] >= 4
    assert b["page_cache_end_mb"] <= 40 or "posix_fadvise" in b["bound"]["method"]
    assert "oltp: storage exercised:" in b["terminal"] and "storage exercised:" in b["html"]
    assert f"read from {b['device']}" in b["terminal"]
