"""The device suite on real fio: a quick run on a small file, the checks, safety on loop devices, resume."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from conftest import wait_for
from refbench.engines.fio import FioError
from refbench.host.telemetry import read_process_io
from refbench.suites.device import checks
from refbench.suites.device.targets import Target

SMALL = ["--size", "64m", "--check-size", "8m", "--fs-stress-files", "16", "--numjobs", "1"]


def _records(run: Path) -> dict[str, dict]:
    return {p.stem: json.loads(p.read_text()) for p in (run / "records" / "device").glob("[!.]*.json")}


@pytest.mark.slow
def test_quick_profile_on_a_small_file_gives_six_tables_and_no_two_point_charts(tmp_path, refbench):
    (tmp_path / "target").mkdir()
    result = refbench("device", str(tmp_path / "target"), "--runs-dir", "runs", *SMALL)
    assert result.code == 0, result.stderr
    run = tmp_path / result.last_line
    tables = {p.stem for p in (run / "tables" / "device").glob("*.parquet")}
    modes = {f"t0_{p}_w{w}" for p in ("rand", "seq") for w in (0, 30, 100)}
    assert modes <= tables and {"points", "checks", "preconditioning"} <= tables
    for mode in modes:
        assert (run / "tables" / "device" / f"{mode}.csv").is_file()
    # Two queue depths and two block sizes: every line would have two points, which the tables show instead.
    assert not list((run / "charts" / "device").glob("*.png"))

    records = _records(run)
    points = [r for r in records.values() if r["params"]["kind"] == "point"]
    assert len(points) == 6 * 2 * 2
    for r in points:
        m = r["metrics"]
        assert "error" not in m, m
        assert m["iops"] > 0 and m["mb_s"] > 0
        assert abs(m["mb_s"] - m["iops"] * r["params"]["bs"] / 1e6) / m["mb_s"] < 0.01  # IOPS × block size = MB/s
        if r["params"]["write_pct"] < 100:
            assert 0 < m["read_lat_mean_us"] and m["read_lat_p50_us"] <= m["read_lat_p99_us"] <= m["read_lat_p999_us"]
        if r["params"]["write_pct"] > 0:
            assert m["write_iops"] > 0 and m["write_lat_p99_us"] > 0
        # fio's own count of what it wrote is the run's; the device's writes beyond it are others' (never unknown).
        fio = json.loads((run / "raw" / "device" / r["case_id"] / "fio.json").read_text())
        assert r["extra"]["own_written_bytes"] == int(fio["jobs"][0]["write"]["io_bytes"])
        assert r["telemetry"]["machine"]["others_write_mb_s"] is not None
        assert isinstance(m["steady_state_reached"], bool)
        assert (run / "raw" / "device" / r["case_id"] / "fio.json").is_file()
        assert m["device_busy_pct"] is None or 0 <= m["device_busy_pct"] <= 100
    findings = json.loads((run / "findings" / "device.json").read_text())
    assert {f["check"] for f in findings} >= {"t0 probe", "t0 verify", "t0 dd", "t0 fs-stress", "t0 accounting"}
    assert all(f["passed"] for f in findings), findings
    assert not (tmp_path / "target" / "refbench-device-t0.dat").exists()  # the test file is removed at the end
    html = (run / "report.html").read_text()
    assert "random 70/30 read/write: IOPS and MB/s by block size and queue depth" in html and "t0 accounting" in html


def _file_target(path: Path, size: int) -> Target:
    return Target("t0", str(path), str(path), "file", size, None, None, True)


@pytest.mark.live
def test_verify_passes_on_healthy_data_and_fails_when_corrupted_underneath(tmp_path):
    path = tmp_path / "data.bin"
    path.write_bytes(b"\0" * (4 << 20))
    target = _file_target(path, 4 << 20)
    assert checks.verify(target, 4 << 20, tmp_path / "raw").passed
    checks.verify_write(target, 4 << 20, tmp_path / "raw2")
    with open(path, "r+b") as f:  # flip bytes in the third 64 KiB block behind fio's back
        f.seek(3 * 65536 + 100)
        f.write(b"corrupted")
    with pytest.raises(FioError, match="verify"):
        checks.verify_read(target, 4 << 20, tmp_path / "raw3")


def test_dd_and_fs_stress_checks_pass_on_a_healthy_directory(tmp_path):
    path = tmp_path / "dd.bin"
    result = checks.dd_write_read(_file_target(path, 8 << 20), 8 << 20)
    assert result.passed and result.metrics["region_bytes"] == 8 << 20
    stress = checks.fs_stress(tmp_path, 20)
    assert stress.passed and stress.metrics["files"] == 20
    assert not (tmp_path / "refbench-fs-stress").exists()


@pytest.mark.live
def test_a_neighbour_reading_the_same_device_makes_accounting_inconclusive_not_failed(tmp_path, monkeypatch):
    from refbench.suites.device.targets import device_of
    device = device_of(tmp_path)
    if device is None:
        pytest.skip("tmp_path has no block device underneath")
    data, other = tmp_path / "data.bin", tmp_path / "neighbour.bin"
    for path in (data, other):
        subprocess.run(["fio", "--name=fill", f"--filename={path}", "--size=32m", "--rw=write", "--bs=1m",
                        "--direct=1", "--output=/dev/null"], check=True)
    real_run_fio = checks.run_fio

    def fio_beside_a_neighbour(job, raw_dir):
        # A burst from a neighbour (another process tree, as another test's or user's would be): it reads its own
        # file from the same device with O_DIRECT exactly while the check's fio runs, and is gone before anything
        # sampled afterwards could see it.
        neighbour = int(subprocess.run(
            ["sh", "-c", f"fio --name=neighbour --filename={other} --size=32m --rw=read --bs=1m --direct=1 "
                         "--time_based --runtime=60 --thread --output=/dev/null </dev/null >/dev/null 2>&1 & echo $!"],
            capture_output=True, text=True, check=True).stdout)
        try:
            # Reading before the check's fio starts, however slowly a loaded machine starts it (a fixed half second
            # was not always enough: the check's fio then ran alone and counted clean).
            wait_for(lambda: read_process_io(neighbour).get("read_bytes", 0) >= 2 << 20, 60, "the neighbour to read")
            return real_run_fio(job, raw_dir)
        finally:
            os.kill(neighbour, signal.SIGKILL)
            wait_for(lambda: not Path(f"/proc/{neighbour}").exists(), 10, "the neighbour to be reaped")

    monkeypatch.setattr(checks, "run_fio", fio_beside_a_neighbour)
    target = Target("t0", str(data), str(data), "file", 32 << 20, None, device, False)
    result = checks.accounting(target, 32 << 20, tmp_path / "raw")
    assert result.passed, result.detail
    assert "inconclusive, not failed" in result.detail, result.detail
    assert result.metrics["kernel_read_bytes"] > 1.05 * result.metrics["fio_read_bytes"], result.metrics
    assert abs(result.metrics["fio_task_read_bytes"] - result.metrics["fio_read_bytes"]) <= 0.05 * (32 << 20)


def _one_line_refusal(result, *parts):
    assert result.code == 2, (result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    for part in parts:
        assert part in lines[0], lines[0]


def test_existing_file_with_data_is_not_overwritten_without_destroy_data(tmp_path, refbench):
    precious = tmp_path / "precious.db"
    precious.write_bytes(b"important" * 1000)
    before = precious.read_bytes()
    _one_line_refusal(refbench("device", str(precious), "--runs-dir", "runs"), "--destroy-data", "precious.db")
    assert precious.read_bytes() == before
    assert not (tmp_path / "runs").exists()


def test_not_enough_free_space_is_refused_before_writing(tmp_path, refbench):
    _one_line_refusal(refbench("device", str(tmp_path), "--size", "900t", "--runs-dir", "runs"), "not enough free space")
    assert not list(tmp_path.glob("refbench-device*")) and not (tmp_path / "runs").exists()


def test_a_missing_device_is_not_created_as_a_file(tmp_path, refbench):
    _one_line_refusal(refbench("device", "/dev/refbench-no-such-disk", "--runs-dir", "runs"), "no such device")
    assert not Path("/dev/refbench-no-such-disk").exists()


def test_there_is_no_force_to_override_a_refusal(tmp_path, refbench):
    result = refbench("device", str(tmp_path), "--destroy-data", "--force", "--runs-dir", "runs")
    assert result.code == 2 and "No such option: --force" in result.stderr


# ---- block devices, on loop devices ------------------------------------------------------------------

needs_loop = pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("losetup"), reason="loop devices need root and losetup")


@pytest.fixture
def loop_device(tmp_path):
    backing = tmp_path / "loop.img"
    with open(backing, "wb") as f:
        f.write(os.urandom(1 << 20) * 48)  # 48 MiB of recognisable content
    dev = subprocess.run(["losetup", "--find", "--show", str(backing)], capture_output=True, text=True, check=True).stdout.strip()
    yield dev, backing
    subprocess.run(["umount", dev], capture_output=True)
    subprocess.run(["losetup", "-d", dev], capture_output=True)


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@needs_loop
def test_block_device_without_destroy_data_is_refused_and_unchanged(loop_device, refbench):
    dev, backing = loop_device
    before = _digest(backing)
    _one_line_refusal(refbench("device", dev, "--runs-dir", "runs"), "destroys the data", "--destroy-data")
    assert _digest(backing) == before


@needs_loop
def test_block_device_with_a_file_system_is_refused_even_with_destroy_data(loop_device, refbench):
    dev, backing = loop_device
    subprocess.run(["mkfs.ext4", "-q", "-F", dev], check=True)
    before = _digest(backing)
    _one_line_refusal(refbench("device", dev, "--destroy-data", "--runs-dir", "runs"), "ext4", "file system", "wipefs -a")
    assert _digest(backing) == before


@needs_loop
def test_mounted_block_device_is_refused_even_with_destroy_data(loop_device, refbench, tmp_path):
    dev, backing = loop_device
    # Initialised at once, not by the kernel in the background after mounting: the image then changes only if written.
    subprocess.run(["mkfs.ext4", "-q", "-F", "-E", "lazy_itable_init=0,lazy_journal_init=0", dev], check=True)
    mountpoint = tmp_path / "mnt"
    mountpoint.mkdir()
    subprocess.run(["mount", dev, str(mountpoint)], check=True)
    try:
        subprocess.run(["sync"], check=True)
        before = _digest(backing)
        _one_line_refusal(refbench("device", dev, "--destroy-data", "--runs-dir", "runs"), "mounted at", str(mountpoint))
        subprocess.run(["sync"], check=True)
        assert _digest(backing) == before
    finally:
        subprocess.run(["umount", str(mountpoint)], check=True)


@needs_loop
def test_swap_device_is_refused_even_with_destroy_data(loop_device, refbench):
    dev, backing = loop_device
    subprocess.run(["mkswap", dev], check=True, capture_output=True)
    if subprocess.run(["swapon", dev], capture_output=True).returncode != 0:
        pytest.skip("swapon is not permitted here")
    try:
        # Only the swap header page: the kernel may swap pages out into the rest of the area meanwhile, but never
        # writes its first page, which any write by refbench (the test file's first blocks) would overwrite.
        before = backing.read_bytes()[:4096]
        _one_line_refusal(refbench("device", dev, "--destroy-data", "--runs-dir", "runs"), "in use as swap")
        assert backing.read_bytes()[:4096] == before
    finally:
        subprocess.run(["swapoff", dev], check=True)


@needs_loop
def test_device_larger_region_than_the_device_is_refused(loop_device, refbench):
    dev, backing = loop_device
    before = _digest(backing)
    _one_line_refusal(refbench("device", dev, "--destroy-data", "--runs-dir", "runs", "--size", "1t"), "larger than")
    assert _digest(backing) == before


@needs_loop
@pytest.mark.live
def test_blank_block_device_with_destroy_data_is_measured(loop_device, refbench, tmp_path):
    dev, backing = loop_device
    before = _digest(backing)
    result = refbench("device", dev, "--destroy-data", "--runs-dir", "runs", "--check-size", "8m",
                      "--block-sizes", "4k", "--iodepths", "4", "--patterns", "random", "--write-shares", "0,100",
                      "--no-precondition")
    assert result.code == 0, result.stderr
    records = _records(tmp_path / result.last_line)
    assert records["t0-rand-w100-qd4-bs4k"]["metrics"]["write_iops"] > 0
    assert records["t0-check-accounting"]["metrics"]["passed"], records["t0-check-accounting"]
    assert "t0-check-fs-stress" not in records  # only directory targets get the file-system test
    assert _digest(backing) != before  # it really wrote to the device
    assert backing.stat().st_size == 48 << 20


# ---- resume -----------------------------------------------------------------------------------------

@pytest.mark.slow
def test_a_sweep_killed_while_fio_runs_leaves_no_fio_and_resumes_at_the_unfinished_point(tmp_path, refbench, process_tree):
    runs = tmp_path / "runs"
    # Points of a fixed 12 s, so that a fio left behind by the kill would still be running after the 5 s allowed.
    tree = process_tree("device", str(tmp_path), "--runs-dir", str(runs), *SMALL, "--no-checks", "--iodepths", "1",
                        "--block-sizes", "4k,64k", "--write-shares", "0", "--patterns", "random",
                        "--precondition-random-s", "1", "--min-runtime-s", "12", "--max-runtime-s", "12",
                        "--no-stop-at-steady-state", linger_s=5)
    wait_for(lambda: list(runs.glob("*/records/device/t0-rand-w0-qd1-bs4k.json")), 120, "the first sweep point")
    wait_for(lambda: any(cmd.split()[0].endswith("/fio") for cmd in tree.children().values()), 30, "fio's second point")
    time.sleep(1)
    tree.signal(signal.SIGKILL)
    assert tree.finish()["survivors"] == []  # fio's job processes went with refbench
    # the first 12 s point showed its figures so far, a line every 5 s as stderr is a file
    assert re.search(r"device: .*: [\d,]+ IOPS, [\d,.]+ MB/s in the last second \(\d+ s\)", tree.err.read_text())
    run = next(runs.glob("*-device"))
    before = {k: v["started_utc"] for k, v in _records(run).items()}
    assert set(before) == {"t0-precondition-seq", "t0-precondition-rand", "t0-rand-w0-qd1-bs4k"}

    resumed = refbench("resume", str(run))
    assert resumed.code == 0, resumed.stderr
    after = _records(run)
    assert set(after) == set(before) | {"t0-rand-w0-qd1-bs64k"}
    for case_id, started in before.items():
        assert after[case_id]["started_utc"] == started  # recorded before the kill: not measured again
    assert not list(tmp_path.glob("refbench-device*"))


@pytest.mark.slow
def test_two_device_runs_compare_point_by_point(tmp_path, refbench):
    point = ["--size", "32m", "--no-checks", "--no-precondition", "--block-sizes", "4k", "--iodepths", "2",
             "--patterns", "random", "--write-shares", "0", "--runs-dir", "runs"]
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    a = refbench("device", str(tmp_path / "a"), "--name", "config-a", *point)
    b = refbench("device", str(tmp_path / "b"), "--name", "config-b", *point)
    assert a.code == 0 and b.code == 0, a.stderr + b.stderr
    result = refbench("compare", a.last_line, b.last_line, "--json", "--all")
    assert result.code == 0, result.stderr
    figures = {f["metric"]: f for f in result.json()["figures"] if f["case"] == "t0-rand-w0-qd2-bs4k"}
    assert figures["iops"]["factor"] > 0 and figures["iops"]["B vs A"].endswith(("faster", "slower", "same"))
    assert figures["read_lat_p99_us"]["B vs A"].endswith(("faster", "slower", "same"))
    assert figures["runtime_s"]["B vs A"].endswith("× A")  # how long a point ran is not better or worse


@pytest.mark.live
def test_two_targets_in_one_run_are_shown_side_by_side(tmp_path, refbench):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    result = refbench("device", str(tmp_path / "a"), str(tmp_path / "b"), "--size", "32m", "--no-checks", "--no-precondition",
                      "--block-sizes", "4k,16k,64k", "--iodepths", "2", "--patterns", "random", "--write-shares", "0", "--runs-dir", "runs")
    assert result.code == 0, result.stderr
    run = tmp_path / result.last_line
    assert {"t0_rand_w0", "t1_rand_w0"} <= {p.stem for p in (run / "tables" / "device").glob("*.parquet")}
    assert (run / "charts" / "device" / "targets_rand-w0_iops.png").is_file()
    assert "Targets side by side" in (run / "report.html").read_text()
