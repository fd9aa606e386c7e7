"""Targets are the storage under test, checked before a run directory exists: paths (missing, unwritable by refbench
or by the postgres account that runs the managed server, on an unmounted fstab mount point), what each suite puts in
them and removes at the end, and raw block devices on real loop devices (mounted, signed, partitioned, or backing
something mounted through loop, device-mapper or md; the last two also on a sysfs tree laid out as the kernel lays one
out, for kernels without those drivers)."""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from conftest import cli_env, refbench_command
from refbench.errors import UserError
from refbench.plan import load_plan
from refbench.suites.analytics import AnalyticsSuite
from refbench.suites.device import targets as targets_module
from refbench.suites.device.targets import FSTAB_ENV, resolve

DEVICE_OPTIONS = {"size": 0, "destroy_data": False}
ONE_POINT = ["--size", "32m", "--no-checks", "--no-precondition", "--block-sizes", "4k", "--iodepths", "1",
             "--patterns", "random", "--write-shares", "0"]


def _refused(result, *parts: str) -> str:
    """One sentence, exit 2, and no run directory."""
    assert result.code == 2, (result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    for part in parts:
        assert part in lines[0], lines[0]
    return lines[0]


def _resolve(dev: str, destroy_data: bool = True):
    return resolve(dev, 0, DEVICE_OPTIONS | {"destroy_data": destroy_data}, "quick")


# ---- paths -----------------------------------------------------------------------------------------------

@pytest.mark.live
def test_a_directory_gets_a_test_file_that_is_removed_at_the_end_and_the_directory_stays(tmp_path, refbench):
    target = tmp_path / "store"
    target.mkdir()
    (target / "mine.txt").write_text("the user's")
    result = refbench("device", str(target), "--runs-dir", "runs", *ONE_POINT)
    assert result.code == 0, result.stderr
    run = tmp_path / result.last_line
    device = resolve(str(target), 0, DEVICE_OPTIONS, "quick").device
    said = f"directory {target} on {device}" if device else f"directory {target} on "
    assert said in " ".join(result.stderr.split())  # the terminal says what the target is, not just the name typed
    assert said in (run / "report.html").read_text()  # and so does the report
    assert [p.name for p in target.iterdir()] == ["mine.txt"]  # refbench's test file is gone, the user's file stays


@pytest.mark.live
def test_a_killed_run_leaves_its_test_file_and_lock_and_resume_measures_the_rest_and_removes_both(tmp_path, refbench):
    target, runs = tmp_path / "store", tmp_path / "runs"
    target.mkdir()
    args = ["device", str(target), "--runs-dir", str(runs), *ONE_POINT, "--precondition", "--block-sizes", "4k,64k"]
    proc = subprocess.Popen(refbench_command(*args), cwd=tmp_path, env=cli_env(), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 120
        while not list(runs.glob("*/records/device/*.json")) and time.time() < deadline:
            time.sleep(0.1)
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    test_file = target / f"{targets_module.TEST_FILE_PREFIX}-t0.dat"
    assert test_file.exists()  # the file refbench created, with data in it now
    run = next(runs.glob("*-device"))
    assert (run / "run.lock").exists()  # kill -9 runs no cleanup; the kernel released the lock itself
    resumed = refbench("resume", str(run))
    assert resumed.code == 0, resumed.stderr  # the stale lock file does not block it
    assert len(list((run / "records" / "device").glob("[!.]*.json"))) == 4
    assert list(target.iterdir()) == [] and not (run / "run.lock").exists()


@pytest.mark.parametrize("suite", ["device", "oltp", "dss", "dw", "analytics"])
def test_a_target_that_does_not_exist_is_refused_and_not_created(tmp_path, refbench, suite):
    for target in (tmp_path / "nvme0", tmp_path / "missing" / "nvme0"):  # whether or not its parent exists
        _refused(refbench(suite, str(target), "--runs-dir", "runs"), f"target {target} does not exist")
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # no run directory, no target


@pytest.mark.skipif(os.geteuid() != 0, reason="only root runs the managed server as another user")
@pytest.mark.parametrize("suite", ["oltp", "dss", "dw"])
def test_a_target_closed_to_the_postgres_account_is_refused_before_the_server_is_made(tmp_path, refbench, suite):
    target = tmp_path / "db"  # pytest's tmp_path is closed to other users
    target.mkdir()
    _refused(refbench(suite, str(target), "--runs-dir", "runs"), f"target {target} is not writable by the managed "
             "PostgreSQL", "postgres system user")
    assert not (tmp_path / "runs").exists() and list(target.iterdir()) == []


@pytest.mark.parametrize("suite", ["device", "oltp", "dss", "dw", "analytics"])
def test_a_target_on_an_fstab_mount_point_that_is_not_mounted_is_refused(tmp_path, suite):
    mountpoint = tmp_path / "mnt" / "nvme0"
    mountpoint.mkdir(parents=True)  # the empty directory an unmounted file system leaves
    fstab = tmp_path / "fstab"
    fstab.write_text(f"# a comment\nUUID=1234 / ext4 defaults 0 1\n/dev/nvme0n1 {mountpoint} ext4 defaults 0 2\n"
                     "/dev/vdb none swap sw 0 0\n")
    for target in (mountpoint, mountpoint / "sub"):
        result = _run(tmp_path, suite, str(target), "--runs-dir", "runs", env={FSTAB_ENV: str(fstab)})
        _refused(result, "not mounted", str(mountpoint), str(fstab))
    assert not (tmp_path / "runs").exists() and not (mountpoint / "sub").exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a file system needs root")
def test_a_target_on_an_fstab_mount_point_that_is_mounted_is_accepted(tmp_path):
    mountpoint = tmp_path / "mnt"
    mountpoint.mkdir()
    fstab = tmp_path / "fstab"
    fstab.write_text(f"tmpfs {mountpoint} tmpfs defaults 0 0\n")
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=128m", "tmpfs", str(mountpoint)], check=True)
    try:
        os.environ[FSTAB_ENV] = str(fstab)
        target = resolve(str(mountpoint), 0, DEVICE_OPTIONS | {"size": 1 << 20}, "quick")
        assert target.description == f"directory {mountpoint} on tmpfs (no block device), test file refbench-device-t0.dat in it"
    finally:
        os.environ.pop(FSTAB_ENV, None)
        subprocess.run(["umount", str(mountpoint)], check=True)


@pytest.mark.skipif(os.geteuid() != 0, reason="switching to another user needs root")
@pytest.mark.parametrize("suite", ["device", "oltp", "analytics"])
def test_a_directory_this_user_cannot_write_is_refused(tmp_path, suite):
    # pytest's tmp_path is closed to other users, so the directory is made where 'nobody' can see it.
    base = Path(tempfile.mkdtemp(prefix="refbench-test-unwritable-"))
    try:
        base.chmod(0o755)
        closed = base / "roots-only"
        closed.mkdir(mode=0o755)
        _refused(_run(tmp_path, suite, str(closed), "--runs-dir", "runs", real_user="nobody"), "not writable", str(closed))
        assert not (tmp_path / "runs").exists() and list(closed.iterdir()) == []
    finally:
        shutil.rmtree(base, ignore_errors=True)


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a file system needs root")
def test_a_read_only_file_system_is_refused_even_for_root(tmp_path, refbench):
    mountpoint = tmp_path / "ro"
    mountpoint.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=16m", "tmpfs", str(mountpoint)], check=True)
    try:
        _refused(refbench("device", str(mountpoint), "--runs-dir", "runs"), "not writable")
        _refused(refbench("dss", str(mountpoint), "--runs-dir", "runs"), "not writable")
    finally:
        subprocess.run(["umount", str(mountpoint)], check=True)
    assert not (tmp_path / "runs").exists()


# ---- what each suite does with its targets ----------------------------------------------------------------

def test_a_suite_without_targets_refuses_them(tmp_path, refbench):
    _refused(refbench("sleepy", str(tmp_path), "--runs-dir", "runs"), "sleepy takes no targets")
    _refused(refbench("run", str(tmp_path), "--runs-dir", "runs"), "no suite to use them")
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("suite", ["oltp", "dss", "dw"])
def test_a_target_and_data_dir_conflict(tmp_path, refbench, suite):
    _refused(refbench(suite, str(tmp_path), "--data-dir", str(tmp_path / "elsewhere"), "--runs-dir", "runs"),
             "data_dir", "give one of them")
    _refused(refbench(suite, str(tmp_path / "a"), str(tmp_path / "b"), "--runs-dir", "runs"), "one target directory")
    assert not (tmp_path / "runs").exists()


def _store(tmp_path: Path) -> Path:
    """A target directory the postgres system user can reach (pytest's tmp_path is closed to it), holding a file of
    the user's that refbench must leave alone."""
    base = Path(tempfile.mkdtemp(prefix="refbench-test-target-", dir="/var/tmp"))
    base.chmod(0o755)
    (base / "mine.txt").write_text("the user's")
    (tmp_path / "store").symlink_to(base)  # removed with tmp_path by the fixture below
    return base


@pytest.fixture
def store(tmp_path):
    from refbench.engines.postgres import ManagedPostgres

    base = _store(tmp_path)
    yield base
    for pgdata in ("oltp-pgdata", "pgdata"):  # a server a failing test left running
        ManagedPostgres(base / pgdata, {}).stop_stale()
    shutil.rmtree(base, ignore_errors=True)


def _terminal(result) -> str:
    return " ".join(result.stderr.split())


@pytest.mark.live
def test_oltp_puts_its_database_in_the_target_and_removes_it_at_the_end(tmp_path, refbench, store):
    result = refbench("oltp", str(store), "--warehouses", "1", "--rampup-s", "1", "--duration-s", "2", "--users", "1",
                      "--runs-dir", "runs")
    assert result.code == 0, result.stderr
    said = f"existing directory {store} on "
    assert said in _terminal(result) and said in (tmp_path / result.last_line / "report.html").read_text()
    assert f"managed PostgreSQL in {store / 'oltp-pgdata'}" in _terminal(result)
    assert f"removed {store / 'oltp-pgdata'} (" in _terminal(result)
    assert [p.name for p in store.iterdir()] == ["mine.txt"]


@pytest.mark.live
def test_dss_puts_data_and_databases_in_the_target_and_clean_removes_what_a_kept_run_left(tmp_path, refbench, store):
    result = refbench("dss", str(store), "--engines", "duckdb,postgres", "--modes", "power", "--sf", "0.01",
                      "--keep-work", "--runs-dir", "runs")
    assert result.code == 0, result.stderr
    run = tmp_path / result.last_line
    assert f"existing directory {store} on " in (run / "report.html").read_text()
    made = {"tpch-sf0.01", "tpch-sf0.01.duckdb", "tpch-sf0.01-loads.json", "pgdata", "pgdata.log"}
    assert {p.name for p in store.iterdir()} == made | {"mine.txt"}
    assert (store / "pgdata" / "PG_VERSION").is_file() and not (store / "pgdata" / "postmaster.pid").exists()

    cleaned = refbench("clean", run.name, "--runs-dir", "runs")
    assert cleaned.code == 0, cleaned.stderr
    lines = cleaned.stderr.strip().splitlines()
    assert {line.split(" (")[0] for line in lines[:-1]} == {f"removed {store / name}" for name in made} | {
        f"removed runs/{run.name}/work"}
    assert all(line.endswith(" MB)") for line in lines[:-1])
    assert lines[-1].startswith("work data removed: ") and lines[-1].endswith(f" MB from runs/{run.name}")
    assert [p.name for p in store.iterdir()] == ["mine.txt"]  # the target and the user's file stay
    assert (run / "report.html").is_file() and list((run / "records" / "dss").glob("*.json"))  # so do the results
    again = refbench("clean", "--all-work", "--runs-dir", "runs")
    assert again.code == 0 and again.stderr.strip() == "no work data left by 1 run(s) in runs", again.stderr


@pytest.mark.live
def test_dw_puts_its_data_in_the_target_and_removes_it_at_the_end(tmp_path, refbench, store):
    result = refbench("dw", str(store), "--engines", "duckdb", "--sf", "0.01", "--sessions", "1", "--duration-s", "1",
                      "--runs-dir", "runs")
    # One engine at SF 0.01 has no answers to check against, so the run fails its answer check (exit 1), but it ran.
    assert result.code in (0, 1) and "Traceback" not in result.stderr, result.stderr
    assert f"data: {store / 'tpch-sf0.01'} (generated" in _terminal(result)
    assert f"removed {store / 'tpch-sf0.01.duckdb'} (" in _terminal(result)
    assert [p.name for p in store.iterdir()] == ["mine.txt"]


@pytest.mark.live
def test_analytics_with_one_target_keeps_data_work_and_util_in_it_until_the_end(tmp_path, refbench, store):
    result = refbench("analytics", str(store), "--tests", "sort_copy", "--jobs", "1", "--concurrency", "1",
                      "--no-iotest", "--rows", "10000", "--runs-dir", "runs")
    assert result.code == 0, result.stderr
    assert f"generating the inputs for 10,000 rows in {store / 'data'}" in _terminal(result)
    for name in ("data", "work", "util"):
        assert f"removed {store / name} (" in _terminal(result)
    assert f"existing directory {store} on " in (tmp_path / result.last_line / "report.html").read_text()
    assert [p.name for p in store.iterdir()] == ["mine.txt"]


def test_oltp_refuses_a_target_with_a_dsn(tmp_path, refbench):
    _refused(refbench("oltp", str(tmp_path), "--dsn", "host=/nonexistent dbname=x", "--runs-dir", "runs"),
             "dsn and the target")


def test_analytics_puts_its_three_locations_in_one_target_or_one_in_each_of_three(tmp_path):
    def cases(*targets: str, **options: str) -> list[str]:
        plan = load_plan(flags={"targets": list(targets)}, suites=["analytics"],
                         suite_flags={"analytics": options})
        return [c.id for c in AnalyticsSuite().cases(plan)]

    for name in ("one", "data", "work", "util"):
        (tmp_path / name).mkdir()
    assert cases(str(tmp_path / "one")) == ["workload", "iotest-data-work-util"]  # one storage: one throughput test
    three = [str(tmp_path / n) for n in ("data", "work", "util")]
    assert cases(*three) == ["workload", "iotest-data", "iotest-work", "iotest-util"]
    with pytest.raises(UserError, match="one target directory .* or three"):
        cases(*three[:2])
    with pytest.raises(UserError, match="util_dir both say"):
        cases(str(tmp_path), util_dir=str(tmp_path / "u"))


# ---- block devices on loop devices ---------------------------------------------------------------------------

needs_loop = pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("losetup"), reason="loop devices need root and losetup")


class Stack:
    """Loop devices, device-mapper devices, md arrays and mounts a test builds in its tmp_path, torn down in reverse."""

    def __init__(self, tmp_path: Path):
        self.tmp_path = tmp_path
        self.undo: list[list[str]] = []

    def _do(self, argv: list[str], undo: list[str] | None = None) -> str:
        out = subprocess.run(argv, check=True, capture_output=True, text=True).stdout.strip()
        if undo is not None:
            self.undo.append(undo)
        return out

    def image(self, mib: int = 48) -> Path:
        image = self.tmp_path / f"image-{len(self.undo)}-{mib}.img"
        with open(image, "wb") as f:
            f.truncate(mib << 20)
        return image

    def loop(self, backing: str | Path | None = None, partscan: bool = False) -> str:
        """A loop device over ``backing`` (an image or a device node; default: a new blank image)."""
        backing = backing or self.image()
        dev = self._do(["losetup", "--find", "--show", *(["--partscan"] if partscan else []), str(backing)])
        self.undo.append(["losetup", "-d", dev])
        return dev

    def mount(self, dev: str) -> Path:
        self._do(["mkfs.ext4", "-q", "-F", dev])
        mountpoint = self.tmp_path / f"mnt-{len(self.undo)}"
        mountpoint.mkdir()
        self._do(["mount", dev, str(mountpoint)], ["umount", str(mountpoint)])
        return mountpoint

    def dm_linear(self, dev: str) -> str:
        name = f"refbench-test-{os.getpid()}-{len(self.undo)}"
        sectors = int(self._do(["blockdev", "--getsz", dev]))
        self._do(["dmsetup", "create", name, "--table", f"0 {sectors} linear {dev} 0"], ["dmsetup", "remove", name])
        return f"/dev/mapper/{name}"

    def teardown(self) -> None:
        for argv in reversed(self.undo):
            subprocess.run(argv, capture_output=True)


@pytest.fixture
def stack(tmp_path):
    built = Stack(tmp_path)
    try:
        yield built
    finally:
        built.teardown()


@needs_loop
def test_a_blank_loop_device_needs_destroy_data_and_is_then_accepted(stack):
    dev = stack.loop()
    with pytest.raises(UserError, match="destroys the data on it; pass --destroy-data"):
        _resolve(dev, destroy_data=False)
    target = _resolve(dev)
    assert target.kind == "block" and target.size_bytes == 48 << 20
    assert target.description.startswith(f"block device {dev} ({Path(dev).name} (loop device), 0.05 GiB")


@needs_loop
def test_a_mounted_loop_device_is_refused(stack):
    dev = stack.loop()
    mountpoint = stack.mount(dev)
    with pytest.raises(UserError, match=f"it is mounted at {mountpoint}"):
        _resolve(dev)


@needs_loop
def test_an_unmounted_file_system_signature_is_refused_with_the_way_to_erase_it(stack, refbench):
    dev = stack.loop()
    subprocess.run(["mkfs.ext4", "-q", "-F", dev], check=True)
    _refused(refbench("device", dev, "--destroy-data", "--runs-dir", "runs"), "ext4 file system", f"wipefs -a {dev}")
    subprocess.run(["wipefs", "-q", "-a", dev], check=True)
    assert _resolve(dev).kind == "block"  # once the user erased it, the device is blank


@needs_loop
@pytest.mark.skipif(not shutil.which("sfdisk"), reason="sfdisk is not installed (Debian package fdisk; make setup installs it)")
def test_a_partition_table_is_refused_with_or_without_its_partitions_showing(stack):
    image = stack.image()
    subprocess.run(["sfdisk", "-q", str(image)], input="label: gpt\n,16MiB\n,\n", text=True, check=True, capture_output=True)
    dev = stack.loop(image)  # the kernel does not look for partitions on it: only the table's signature shows
    with pytest.raises(UserError, match="gpt partition table; if its data is no longer needed"):
        _resolve(dev)
    dev = stack.loop(image, partscan=True)  # the same image, with its partitions shown
    name = Path(dev).name
    if not Path(f"/sys/class/block/{name}p2").exists():  # a kernel built without partition-table parsers
        subprocess.run(["partx", "-a", dev], check=True, capture_output=True)
    with pytest.raises(UserError, match=f"it has partitions \\({name}p1, {name}p2\\)"):
        _resolve(dev)
    mountpoint = stack.mount(f"{dev}p2")
    with pytest.raises(UserError, match=f"it backs {name}p2 \\(partition\\), which is mounted at {mountpoint}"):
        _resolve(dev)


@needs_loop
def test_loop_over_loop_the_lower_device_is_refused_while_the_upper_one_is_mounted_or_set_up(stack):
    lower = stack.loop()
    upper = stack.loop(backing=lower)
    mountpoint = stack.mount(upper)
    with pytest.raises(UserError, match=f"it backs {Path(upper).name} \\(loop device\\), which is mounted at {mountpoint}"):
        _resolve(lower)
    subprocess.run(["umount", str(mountpoint)], check=True)
    subprocess.run(["wipefs", "-q", "-a", upper], check=True)
    with pytest.raises(UserError, match=f"it backs {Path(upper).name} \\(loop device\\); remove that first"):
        _resolve(lower)  # blank and unmounted, but still in use underneath another device


@needs_loop
def test_a_loop_device_over_a_mounted_device_is_refused(stack):
    lower = stack.loop()
    mountpoint = stack.mount(lower)
    upper = stack.loop(backing=lower)
    with pytest.raises(UserError, match=f"loop device over {Path(lower).name} \\(loop device\\), and "
                                        f"{Path(lower).name} \\(loop device\\) is mounted at {mountpoint}"):
        _resolve(upper)


def _device_mapper_missing() -> str | None:
    if os.geteuid() != 0 or not shutil.which("losetup"):
        return "loop devices need root and losetup"
    if not shutil.which("dmsetup"):
        return "dmsetup is not installed"
    if subprocess.run(["dmsetup", "version"], capture_output=True).returncode != 0:
        return "this kernel has no device-mapper driver (dmsetup version fails)"
    return None


@pytest.mark.skipif(bool(_device_mapper_missing()), reason=_device_mapper_missing() or "")
def test_a_loop_device_under_a_mounted_device_mapper_device_is_refused(stack):
    lower = stack.loop()
    mapped = stack.dm_linear(lower)
    mountpoint = stack.mount(mapped)
    with pytest.raises(UserError, match=f"which is mounted at {mountpoint}"):
        _resolve(lower)


def _md_missing() -> str | None:
    if os.geteuid() != 0 or not shutil.which("losetup"):
        return "loop devices need root and losetup"
    if not Path("/proc/mdstat").exists():
        return "this kernel has no md driver (/proc/mdstat is missing)"
    if not shutil.which("mdadm"):
        return "mdadm is not installed"
    return None


@pytest.mark.skipif(bool(_md_missing()), reason=_md_missing() or "")
def test_a_loop_device_in_a_mounted_md_array_is_refused(stack):
    members = [stack.loop(), stack.loop()]
    md = f"/dev/md/refbench-test-{os.getpid()}"
    stack._do(["mdadm", "--create", md, "--run", "--level=1", "--raid-devices=2", "--metadata=1.2", *members],
              ["mdadm", "--stop", md])
    mountpoint = stack.mount(md)
    with pytest.raises(UserError, match=f"which is mounted at {mountpoint}"):
        _resolve(members[0])


class FakeSysfs:
    """/sys/class/block as the kernel lays it out with device-mapper and md, for the kernels here that have neither
    (the two tests above skip): the stacking walk that refuses a disk under a mounted device is the same code."""

    def __init__(self, root: Path, monkeypatch):
        self.root, self.mounted, self.next_minor = root, [], 0
        monkeypatch.setattr(targets_module, "SYS_BLOCK", root)
        monkeypatch.setattr(targets_module, "mounts", lambda: list(self.mounted))
        monkeypatch.setattr(targets_module, "_swap_numbers", set)

    def device(self, name: str, on: list[str] = (), partition_of: str | None = None, **kind: str) -> str:
        base = (self.root / partition_of / name) if partition_of else self.root / name
        base.mkdir(parents=True)
        self.next_minor += 1
        (base / "dev").write_text(f"250:{self.next_minor}\n")
        (base / "holders").mkdir()
        if partition_of:
            (base / "partition").write_text("1\n")
            (self.root / name).symlink_to(base)
        if "dm_name" in kind:
            (base / "dm").mkdir()
            (base / "dm" / "name").write_text(kind["dm_name"] + "\n")
        if kind.get("md"):
            (base / "md").mkdir()
        for lower in on:
            (self.root / lower / "holders" / name).mkdir()
        return name

    def mount(self, name: str, point: str) -> None:
        major, minor = (self.root / name / "dev").read_text().split(":")
        self.mounted.append(targets_module.Mount((int(major), int(minor)), point, "ext4", f"/dev/{name}"))


def test_a_disk_under_a_mounted_device_mapper_or_md_device_is_refused_by_the_stacking_walk(tmp_path, monkeypatch):
    sysfs = FakeSysfs(tmp_path / "block", monkeypatch)
    sysfs.device("sdx")
    sysfs.device("sdx1", partition_of="sdx")
    sysfs.device("dm-0", on=["sdx1"], dm_name="vg-data")
    sysfs.mount("dm-0", "/srv")
    assert targets_module._in_use("sdx") == (
        "it backs dm-0 (device-mapper vg-data) on sdx1 (partition), which is mounted at /srv")

    sysfs.device("sdy")
    sysfs.device("sdz")
    sysfs.device("md0", on=["sdy", "sdz"], md="1")
    assert targets_module._in_use("sdz") == "it backs md0 (md RAID); remove that first (losetup -d, dmsetup remove, mdadm --stop)"
    sysfs.mount("md0", "/data")
    assert targets_module._in_use("sdy") == "it backs md0 (md RAID), which is mounted at /data"

    sysfs.device("sdw")
    sysfs.device("sdw1", partition_of="sdw")
    assert targets_module._in_use("sdw") is None  # partitions alone are the signature check's business


def _run(cwd: Path, *args: str, env: dict[str, str] | None = None, real_user: str | None = None):
    """The CLI in a subprocess. With ``real_user``, its real uid is that user's: access(2), which refbench asks
    whether it may write, answers for the real uid. The effective uid stays root, because the interpreter may live
    where other users cannot reach (pyenv under /root)."""
    from conftest import Result

    switch = None
    if real_user is not None:
        uid = pwd.getpwnam(real_user).pw_uid

        def switch() -> None:
            os.setresuid(uid, 0, 0)

    p = subprocess.run(refbench_command(*args), capture_output=True, text=True, timeout=120, cwd=cwd,
                       env=cli_env(**(env or {})), preexec_fn=switch)
    return Result(p.returncode, p.stdout, p.stderr)
