"""What a device-suite TARGET is, and whether refbench may write to it.

A target is a file (created at --size), a directory (a test file inside it), or a block device. Writing to a
block device destroys its data, so refbench refuses unless --destroy-data is given, and refuses always when
the device or one of its partitions is mounted or used as swap. A device holding a file system, partition
table, or RAID/LVM signature (or used by device-mapper/md) is refused unless --force is given too.
"""

from __future__ import annotations

import os
import stat
import subprocess
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from refbench.errors import UserError

TEST_FILE_PREFIX = "refbench-device"
FREE_SPACE_MARGIN = 64 * 2**20
DEFAULT_FILE_SIZE = {"quick": 256 * 2**20, "standard": 4 * 2**30, "full": 32 * 2**30}


@dataclass
class Target:
    label: str  # t0, t1, … — stable across runs, so compare can match targets of two configurations
    spec: str  # as the user gave it
    path: str  # the file or block device fio opens
    kind: str  # file | block
    size_bytes: int
    directory: str | None  # for directory targets: where the file-system stress test writes
    device: str | None  # kernel name of the block device underneath (telemetry, accounting)
    create: bool  # refbench creates (and at the end removes) this file

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def resolve(spec: str, index: int, options: dict[str, Any], profile: str) -> Target:
    """Checks one target and decides how to use it. Reads only; raises UserError when unsafe."""
    path = Path(spec)
    label = f"t{index}"
    wanted = options["size"] or None
    if path.is_block_device():
        return _block_target(spec, label, options, wanted)
    if path.is_dir():
        file = path / f"{TEST_FILE_PREFIX}-{label}.dat"
        size = wanted or DEFAULT_FILE_SIZE[profile]
        _check_free_space(file, size)
        return Target(label, spec, str(file), "file", size, str(path), device_of(path), True)
    if path.exists():
        if not path.is_file():
            raise UserError(f"target {spec} is neither a regular file, a directory nor a block device.")
        current = path.stat().st_size
        ours = path.name.startswith(TEST_FILE_PREFIX)
        if current and not ours and not options["destroy_data"]:
            raise UserError(f"target {spec} is an existing file with data that the tests would overwrite; "
                            "pass --destroy-data to allow it, or name a new file or a directory.")
        size = wanted or current or DEFAULT_FILE_SIZE[profile]
        _check_free_space(path, max(0, size - current))
        return Target(label, spec, str(path), "file", size, None, device_of(path), False)
    if not path.parent.is_dir():
        raise UserError(f"target {spec} does not exist, and neither does its directory {path.parent}.")
    if Path(os.path.realpath(path.parent)).parts[1:2] in (("dev",), ("proc",), ("sys",)):
        raise UserError(f"target {spec} does not exist: there is no such device (refbench creates test files, never device nodes).")
    size = wanted or DEFAULT_FILE_SIZE[profile]
    _check_free_space(path, size)
    return Target(label, spec, str(path), "file", size, None, device_of(path.parent), True)


def _block_target(spec: str, label: str, options: dict[str, Any], wanted: int | None) -> Target:
    dev = os.path.realpath(spec)
    name = kernel_name(os.stat(dev).st_rdev)
    if not options["destroy_data"]:
        raise UserError(f"writing to block device {spec} destroys the data on it; pass --destroy-data to allow it.")
    for problem in (_mounted(dev), _swap(dev)):
        if problem:
            raise UserError(f"refusing to write to {spec}: {problem}.")
    if not options["force"]:
        problem = _in_use_or_signed(dev, name)
        if problem:
            raise UserError(f"refusing to write to {spec}: {problem}; pass --force with --destroy-data to overwrite it anyway.")
    size = block_size_bytes(dev)
    if wanted and wanted > size:
        raise UserError(f"--size {wanted} is larger than block device {spec} ({size} bytes).")
    return Target(label, spec, dev, "block", wanted or size, None, name, False)


def block_size_bytes(dev: str) -> int:
    fd = os.open(dev, os.O_RDONLY)
    try:
        return os.lseek(fd, 0, os.SEEK_END)
    finally:
        os.close(fd)


def kernel_name(rdev: int) -> str | None:
    """sda, nvme0n1p2, loop0… for a device number, via /sys/dev/block."""
    link = Path(f"/sys/dev/block/{os.major(rdev)}:{os.minor(rdev)}")
    try:
        return Path(os.path.realpath(link)).name
    except OSError:
        return None


def device_of(path: Path) -> str | None:
    """The block device a file or directory lives on (None for tmpfs, overlay and the like)."""
    try:
        st_dev = os.stat(path).st_dev
    except OSError:
        return None
    name = kernel_name(st_dev)
    return name if name and Path(f"/sys/class/block/{name}").exists() else None


def _related_devices(dev: str) -> set[int]:
    """The device numbers of a whole device and all its partitions."""
    rdev = os.stat(dev).st_rdev
    numbers = {rdev}
    name = kernel_name(rdev)
    if name:
        base = Path(f"/sys/class/block/{name}")
        for child in base.iterdir() if base.is_dir() else []:
            dev_file = child / "dev"
            if (child / "partition").exists() and dev_file.exists():
                major, minor = dev_file.read_text().strip().split(":")
                numbers.add(os.makedev(int(major), int(minor)))
    return numbers


def _mounted(dev: str) -> str | None:
    related = _related_devices(dev)
    for line in Path("/proc/self/mounts").read_text().splitlines():
        source, mountpoint = line.split()[:2]
        if source.startswith("/dev/"):
            try:
                if os.stat(source).st_rdev in related:
                    return f"it (or a partition of it) is mounted at {mountpoint}"
            except OSError:
                continue
    return None


def _swap(dev: str) -> str | None:
    related = _related_devices(dev)
    try:
        lines = Path("/proc/swaps").read_text().splitlines()[1:]
    except OSError:
        return None
    for line in lines:
        source = line.split()[0]
        try:
            if stat.S_ISBLK(os.stat(source).st_mode) and os.stat(source).st_rdev in related:
                return "it (or a partition of it) is in use as swap"
        except OSError:
            continue
    return None


def _in_use_or_signed(dev: str, name: str | None) -> str | None:
    if name:
        base = Path(f"/sys/class/block/{name}")
        holders = sorted(p.name for p in (base / "holders").iterdir()) if (base / "holders").is_dir() else []
        if holders:
            return f"it is used by {', '.join(holders)} (device-mapper, LVM or RAID)"
        partitions = sorted(p.name for p in base.iterdir() if (p / "partition").exists()) if base.is_dir() else []
        if partitions:
            return f"it has partitions ({', '.join(partitions)})"
    try:
        probe = subprocess.run(["blkid", "-p", "-o", "export", dev], capture_output=True, text=True, timeout=30)
    except FileNotFoundError:
        raise UserError("blkid is not installed (Debian package util-linux); refbench needs it to check a block device is unused.") from None
    fields = dict(line.split("=", 1) for line in probe.stdout.splitlines() if "=" in line)
    if fields.get("PTTYPE"):
        return f"it holds a {fields['PTTYPE']} partition table"
    if fields.get("TYPE"):
        usage = fields.get("USAGE", "filesystem")
        kind = {"raid": "RAID/LVM member signature", "filesystem": "file system", "crypto": "encrypted volume"}.get(usage, usage)
        return f"it holds a {fields['TYPE']} {kind}"
    return None


def _check_free_space(file: Path, needed: int) -> None:
    if needed <= 0:
        return
    directory = file.parent if not file.is_dir() else file
    st = os.statvfs(directory)
    free = st.f_bavail * st.f_frsize
    if free < needed + FREE_SPACE_MARGIN:
        raise UserError(f"not enough free space in {directory} for a {needed / 2**30:.2f} GiB test file: "
                        f"{free / 2**30:.2f} GiB free (refbench keeps {FREE_SPACE_MARGIN // 2**20} MiB spare).")
