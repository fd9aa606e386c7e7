"""The mixed analytics workload: its tests, launcher and figures, on real engines at a small scale."""

from __future__ import annotations

import csv
import json
import os
import shutil
import signal
import subprocess
import time
from collections import Counter
from pathlib import Path

import pytest

from conftest import cli_env, refbench_command
from process_tree import descendants
from refbench.host.telemetry import Telemetry
from refbench.suites.analytics import all_tests
from refbench.suites.analytics.launcher import schedule


def _rows(path: Path) -> list[dict[str, str]]:
    with open(path) as f:
        return list(csv.DictReader(f))


def _workload(run: Path) -> dict:
    return json.loads((run / "records" / "analytics" / "workload.json").read_text())


def test_nineteen_tests_ten_two_seven_and_replicas_cycle_through_them():
    tests = all_tests()
    assert Counter(t.kind for t in tests.values()) == {"computation": 10, "memory": 2, "io": 7}
    assert {t.engine for t in tests.values()} >= {"duckdb", "polars", "numpy"}
    jobs = schedule(list(tests.values()), 77)  # the mixed-analytics paper's 77 launches
    launches = Counter(j.test.name for j in jobs)
    assert set(launches) == set(tests) and set(launches.values()) == {4, 5}
    assert len({j.id for j in jobs}) == 77


@pytest.fixture
def three_file_systems(tmp_path):
    """DATA, WORK and UTIL each on its own ext4 file system (loop devices), so their I/O can be told apart."""
    if os.geteuid() != 0 or not shutil.which("losetup"):
        pytest.skip("loop devices need root and losetup")
    mounted = {}
    try:
        for name, mib in (("data", 1024), ("work", 2048), ("util", 1024)):
            image = Path("/var/tmp") / f"refbench-test-{os.getpid()}-{name}.img"
            with open(image, "wb") as f:
                f.truncate(mib << 20)
            dev = subprocess.run(["losetup", "--find", "--show", str(image)], capture_output=True, text=True,
                                 check=True).stdout.strip()
            mounted[name] = (dev, image, tmp_path / name)
            subprocess.run(["mkfs.ext4", "-q", "-F", dev], check=True)
            (tmp_path / name).mkdir()
            subprocess.run(["mount", dev, str(tmp_path / name)], check=True)
        yield {name: (Path(dev).name, mountpoint) for name, (dev, _, mountpoint) in mounted.items()}
    finally:
        for dev, image, mountpoint in mounted.values():
            subprocess.run(["umount", str(mountpoint)], capture_output=True)
            subprocess.run(["losetup", "-d", dev], capture_output=True)
            image.unlink(missing_ok=True)


@pytest.mark.slow
def test_a_quick_run_measures_every_job_and_each_location_gets_its_io(three_file_systems, refbench, tmp_path):
    (data_dev, data), (work_dev, work), (util_dev, util) = (three_file_systems[n] for n in ("data", "work", "util"))
    result = refbench("analytics", "--data-dir", str(data), "--work-dir", str(work), "--util-dir", str(util),
                      "--iotest-file-mib", "32", "--rows", "1000000", "--runs-dir", "runs", timeout=800)
    assert result.code == 0, result.stderr + result.stdout
    run = tmp_path / result.last_line
    record = _workload(run)
    jobs = record["extra"]["jobs"]
    assert {j["test"] for j in jobs} == set(all_tests()) and all(j["status"] == "ok" for j in jobs)
    for j in jobs:  # the kernel's accounting of every job
        assert j["real_s"] > 0 and j["user_cpu_s"] > 0 and j["system_cpu_s"] >= 0 and j["max_rss_mb"] > 0
        assert j["checks"] and all(c["passed"] for c in j["checks"])
    assert sum(j["read_mb"] for j in jobs) > 100 and sum(j["written_mb"] for j in jobs) > 100

    # The per-node table adds up to the per-job rows.
    node, = _rows(run / "tables" / "analytics" / "nodes.csv")
    rows = _rows(run / "tables" / "analytics" / "jobs.csv")
    assert int(node["jobs"]) == len(rows) == 19
    for column, field in (("elapsed run time (min, workload aggregate)", "real_s"),
                          ("user CPU time (min, workload aggregate)", "user_cpu_s"),
                          ("system CPU time (min, workload aggregate)", "system_cpu_s")):
        assert float(node[column]) == pytest.approx(sum(float(r[field]) for r in rows) / 60, abs=0.01)
    assert float(node["mean CPU/real-time ratio"]) == pytest.approx(
        sum(float(r["cpu_real_ratio"]) for r in rows) / len(rows), abs=0.01)

    # DATA is read, not written; WORK is written; UTIL holds the sort's spill; nothing is left in WORK or UTIL.
    t0, t1 = record["extra"]["interval_epoch_s"]
    # Only the seconds wholly inside the jobs' interval: on a loaded machine one sample can span several seconds, and
    # one that began while the inputs were written (about 300 MB of CSV, fsynced just before) would count them too.
    samples = [s for s in Telemetry(run / "telemetry" / "samples.jsonl").between(t0, t1) if s["t"] - s["dt"] >= t0]

    def moved(device: str, key: str) -> float:
        return sum(s["disks"].get(device, {}).get(key, 0) * s["dt"] for s in samples)

    assert moved(data_dev, "read_mb_s") > 100 and moved(data_dev, "write_mb_s") < 0.05 * moved(data_dev, "read_mb_s")
    assert moved(work_dev, "write_mb_s") > 100
    locations = record["extra"]["locations"]
    assert locations["UTIL"]["device"] == util_dev and locations["UTIL"]["peak_space_mb"] > 0
    assert locations["WORK"]["peak_space_mb"] > locations["UTIL"]["peak_space_mb"]
    for location in (work, util):
        assert [p.name for p in location.iterdir()] == ["lost+found"]
    assert [p.name for p in data.iterdir()] == ["lost+found"]  # the inputs it generated went with the work data

    # The storage throughput test on each of the three, per core against the guidance.
    tests = _rows(run / "tables" / "analytics" / "iotest.csv")
    assert {t["locations"] for t in tests} == {"DATA", "WORK", "UTIL"}
    for t in tests:
        writers = int(t["writers"])
        assert float(t["write MB/s per core"]) == pytest.approx(float(t["write MB/s"]) / writers, abs=0.1)
        assert "guidance" in t["write"] and "guidance" in t["read"]
        assert "smaller than memory" in t["warning"]  # 32 MiB files cannot defeat the page cache by size
        assert float(t["read from device %"]) > 50  # but were dropped from it before the read-back
    assert (run / "charts" / "analytics" / "throughput.png").stat().st_size > 10_000
    assert "Tables 1 and 2" in (run / "report.html").read_text()


def _job_pids(refbench_pid: int, test: str) -> list[int]:
    """The analytics jobs of one test kind that this test's refbench started (a neighbour's are not looked at)."""
    return [pid for pid, cmdline in descendants(refbench_pid).items()
            if "refbench.suites.analytics.job" in cmdline and f'"test": "{test}"' in cmdline]


@pytest.mark.slow
def test_a_job_that_dies_is_reported_failed_and_the_others_finish(tmp_path):
    process = subprocess.Popen(
        refbench_command("analytics", "--tests", "correlation_matrix,random_reads", "--jobs", "4", "--concurrency", "2",
                         "--rows", "200000", "--no-iotest", "--runs-dir", "runs"),
        cwd=tmp_path, env=cli_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while not (pids := _job_pids(process.pid, "correlation_matrix")):
            assert time.monotonic() < deadline and process.poll() is None, "no correlation_matrix job started"
            time.sleep(0.05)
        os.kill(pids[0], signal.SIGKILL)
        out, err = process.communicate(timeout=240)
    finally:
        process.kill()
    assert process.returncode == 1, err
    run = tmp_path / out.strip().splitlines()[-1]
    jobs = _workload(run)["extra"]["jobs"]
    failed = [j for j in jobs if j["status"] != "ok"]
    assert len(jobs) == 4 and len(failed) == 1
    assert failed[0]["test"] == "correlation_matrix" and failed[0]["error"] == "killed by signal 9 (SIGKILL)"
    assert failed[0]["real_s"] > 0  # measured even though it died
    findings = json.loads((run / "findings" / "analytics.json").read_text())
    assert [f["passed"] for f in findings if f["check"] == "every job completed"] == [False]
    assert "killed by signal 9" in (run / "report.html").read_text()


@pytest.mark.slow
def test_cpu_real_time_ratio_near_thread_count_when_cpu_bound_and_below_one_when_io_bound(refbench, tmp_path):
    result = refbench("analytics", "--tests", "correlation_matrix,random_reads", "--jobs", "2", "--concurrency", "1",
                      "--threads", "2", "--rows", "1000000", "--no-iotest", "--runs-dir", "runs", timeout=300)
    assert result.code == 0, result.stderr
    ratio = {j["test"]: j["cpu_real_ratio"] for j in _workload(tmp_path / result.last_line)["extra"]["jobs"]}
    # Two threads of matrix algebra use up to two CPUs; a job waiting on storage uses less than one. Neighbours on the
    # machine (another run, another test) lower both, so the CPU-bound job is compared with the I/O-bound one.
    assert ratio["random_reads"] < ratio["correlation_matrix"] <= 2.3
    assert ratio["random_reads"] < 0.9


def test_bad_locations_and_tests_end_in_one_sentence(refbench, tmp_path):
    (tmp_path / "a-file").write_text("")
    result = refbench("analytics", "--work-dir", str(tmp_path / "a-file" / "work"), "--runs-dir", "runs")
    assert result.code != 0 and "the WORK location" in result.stderr and "Traceback" not in result.stderr
    result = refbench("analytics", "--tests", "sort_copy,no_such_test", "--runs-dir", "runs")
    assert result.code != 0 and "no_such_test" in result.stderr and "Traceback" not in result.stderr


@pytest.mark.live
def test_the_workload_and_the_throughput_test_are_repeated_as_headline_cases(refbench, tmp_path):
    result = refbench("analytics", "--tests", "correlation_matrix", "--jobs", "1", "--concurrency", "1", "--rows",
                      "10000", "--iotest-file-mib", "8", "--repeats", "2", "--runs-dir", "runs", timeout=300)
    assert result.code == 0, result.stderr
    run = tmp_path / result.last_line
    made = sorted(p.stem for p in (run / "records" / "analytics").glob("*.json"))
    assert made == ["iotest-data-work-util", "iotest-data-work-util-r2", "workload", "workload-r2"], made
    repeated = json.loads((run / "records" / "analytics" / "workload-r2.json").read_text())
    assert repeated["metrics"]["jobs"] == 1 and repeated["params"]["repeat"] == 2  # a workload, not a throughput test
