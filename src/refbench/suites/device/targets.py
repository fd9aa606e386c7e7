"""What a TARGET is, and whether refbench may write to it.

A target is the storage under test. A device-suite target is a file, a directory (a test file inside it), or a
block device; the other suites take directories to keep their data in. Every target is checked before a run
directory exists:

- A path that does not exist is refused: refbench creates no target, so a mistyped path or a file system that is
  not mounted is never measured in place of the storage under test (whatever holds the path's parent).
- A path on a mount point that fstab names but that is not mounted is refused: refbench would write to, and rate,
  the file system underneath.
- A path refbench may not write to is refused.
- Writing to a block device destroys its data: refused without --destroy-data, and always refused when the device,
  or anything stacked on it (partitions, device-mapper, md RAID, loop devices, recursively), is mounted, swap or
  otherwise in use, and when it holds a file system, RAID/LVM member or partition table signature. Nothing
  overrides these refusals: erasing a signature is a separate, deliberate step (wipefs -a), not a flag of a
  benchmark.
"""

from __future__ import annotations

import errno
import os
import re
import stat
import subprocess
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, NoReturn

from refbench.errors import UserError
from refbench.options import Plan, PlanError

TEST_FILE_PREFIX = "refbench-device"
FREE_SPACE_MARGIN = 64 * 2**20
DEFAULT_FILE_SIZE = {"quick": 256 * 2**20, "standard": 4 * 2**30, "full": 32 * 2**30}
FSTAB_ENV = "REFBENCH_FSTAB"  # another fstab to read instead of /etc/fstab (tests)
CREATED_MARK = "user.refbench.created"  # on the test files refbench creates, so a resumed run knows them as its own
SYS_BLOCK = Path("/sys/class/block")


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
    description: str = ""  # what the target really is, e.g. "new file /x on vda"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def resolve(spec: str, index: int, options: dict[str, Any], profile: str) -> Target:
    """Checks one device-suite target and decides how to use it. Reads only; raises UserError when unsafe."""
    path = Path(spec)
    label = f"t{index}"
    wanted = options["size"] or None
    if path.is_block_device():
        return _block_target(spec, label, options, wanted)
    refuse_unmounted(path, spec)
    shown = path.absolute()
    if path.is_dir():
        _require_writable(path, spec)
        file = path / f"{TEST_FILE_PREFIX}-{label}.dat"
        size = wanted or DEFAULT_FILE_SIZE[profile]
        _check_free_space(file, size)
        return Target(label, spec, str(file), "file", size, str(path), device_of(path), True,
                      f"directory {shown} {on_what(path)}, test file {file.name} in it")
    if not path.exists():
        missing(spec)
    if not path.is_file():
        raise UserError(f"target {spec} is neither a regular file, a directory nor a block device.")
    if not os.access(path, os.W_OK):
        raise UserError(f"target {spec} is not writable by this user.")
    current = path.stat().st_size
    made_by_us = created_by_refbench(path)  # the test file of an interrupted run, named itself
    if current and not (made_by_us or path.name.startswith(TEST_FILE_PREFIX)) and not options["destroy_data"]:
        raise UserError(f"target {spec} is an existing file with data that the tests would overwrite; "
                        "pass --destroy-data to allow it, or name a directory (refbench makes its test file in it).")
    size = wanted or current or DEFAULT_FILE_SIZE[profile]
    _check_free_space(path, max(0, size - current))
    return Target(label, spec, str(path), "file", size, None, device_of(path), made_by_us,
                  f"test file {shown} {on_what(path)} (created by refbench)" if made_by_us
                  else f"existing file {shown} {on_what(path)}")


def missing(spec: str) -> NoReturn:
    """Refuses a target that does not exist, in one sentence that says what to name instead."""
    if Path(os.path.realpath(Path(spec).parent)).parts[1:2] in (("dev",), ("proc",), ("sys",)):
        raise UserError(f"target {spec} does not exist: there is no such device.")
    raise UserError(f"target {spec} does not exist; refbench creates no target (a mistyped or unmounted path would "
                    "measure whatever disk holds its parent): mount the storage under test and name a directory on it.")


def mark_created(fd: int) -> None:
    try:
        os.setxattr(fd, CREATED_MARK, b"1")
    except OSError:
        pass  # a file system without user extended attributes: a resumed run then asks for --destroy-data


def created_by_refbench(path: Path) -> bool:
    try:
        os.getxattr(path, CREATED_MARK)
        return True
    except OSError:
        return False


def directory_target(spec: str) -> str:
    """Checks a target a suite keeps its data in (oltp, dss, dw, analytics): an existing directory this user may
    write in. Returns what it is, e.g. "existing directory /x on vda"; raises UserError otherwise."""
    path = Path(spec)
    if path.is_block_device():
        raise UserError(f"target {spec} is a block device, but this suite keeps its data in a directory; mount a file "
                        "system and name a directory on it (only the device suite writes to block devices).")
    refuse_unmounted(path, spec)
    shown = path.absolute()
    if path.is_dir():
        _require_writable(path, spec)
        return f"existing directory {shown} {on_what(path)}"
    if path.exists():
        raise UserError(f"target {spec} is not a directory; this suite keeps its data in a directory.")
    missing(spec)


def note_directory_targets(ctx) -> None:
    """Says on the terminal, and keeps for the suite's records (and so the report), what its directory targets are."""
    if ctx.plan.targets:
        ctx.state["target_description"] = "; ".join(f"{t}: {directory_target(t)}" for t in ctx.plan.targets)
        ctx.log(f"target{'s' if len(ctx.plan.targets) > 1 else ''} {ctx.state['target_description']}")


def check_one_directory_target(plan: Plan, suite: str, same_as: str) -> None:
    """Checks the target of a suite whose data goes in one directory (oltp, dss, dw): at most one, usable, and not
    given together with ``same_as``, the option that places the same data."""
    if not plan.targets:
        return
    if len(plan.targets) > 1:
        raise PlanError(f"[{suite}] takes one target directory, not {len(plan.targets)} ({', '.join(plan.targets)}).")
    if plan.options[suite][same_as]:
        raise PlanError(f"[{suite}] the target {plan.targets[0]} and {same_as} ({plan.options[suite][same_as]}) both say "
                        f"where the data goes; give one of them (--{same_as.replace('_', '-')} or the target).")
    directory_target(plan.targets[0])



# The system account a managed server runs as when refbench is root.
SERVER_ACCOUNTS = {"postgres": "postgres", "mariadb": "mysql"}


def require_server_reach(directory: Path, named: str, engine: str = "postgres") -> None:
    """Refuses a place for a managed server's data directory that its account cannot reach: as root, refbench
    runs the server as another account (postgres, mysql), and a directory on the way closed to other users would
    fail initdb or mariadb-install-db once the run has started."""
    from refbench.engines import get_engine

    server = get_engine(engine)
    if not server.reaches(directory):
        raise UserError(f"{named} {directory} is not writable by the managed {server.title}: the "
                        f"{SERVER_ACCOUNTS[engine]} system user that runs it cannot reach it (a directory on the way is "
                        "closed to other users; chmod o+x it, or choose another).")


# ---- mounts ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Mount:
    number: tuple[int, int]  # major, minor of what is mounted
    point: str
    fstype: str
    source: str


def _unescape(field: str) -> str:
    """fstab and /proc mount tables write a space as \\040 (and tab, newline, backslash likewise)."""
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def mounts() -> list[Mount]:
    found = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        before, _, after = line.partition(" - ")
        fields, tail = before.split(), after.split()
        if len(fields) < 5 or len(tail) < 2:
            continue
        major, minor = fields[2].split(":")
        found.append(Mount((int(major), int(minor)), _unescape(fields[4]), tail[0], _unescape(tail[1])))
    return found


def fstab_path() -> Path:
    return Path(os.environ.get(FSTAB_ENV) or "/etc/fstab")


def fstab_mount_points() -> list[str]:
    """The directories fstab mounts file systems on (swap and 'none' entries left out)."""
    try:
        text = fstab_path().read_text()
    except OSError:
        return []
    points = []
    for line in text.splitlines():
        fields = line.split("#", 1)[0].split()
        if len(fields) >= 3 and fields[1].startswith("/") and fields[2] != "swap":
            points.append(os.path.realpath(_unescape(fields[1])))
    return points


def refuse_unmounted(path: Path, spec: str) -> None:
    """Refuses a path on a mount point that fstab names but that is not mounted: writing there would fill, and rate,
    the file system underneath (typically the root disk)."""
    real = os.path.realpath(path)
    inside = [p for p in fstab_mount_points() if p == "/" or real == p or real.startswith(p + "/")]
    if not inside:
        return
    deepest = max(inside, key=len)
    if deepest not in {m.point for m in mounts()}:
        raise UserError(f"target {spec} is not mounted: {fstab_path()} names {deepest} as a mount point but nothing is "
                        "mounted there, so refbench would write to the file system underneath; mount it first.")


def _require_writable(directory: Path, spec: str) -> None:
    if not os.access(directory, os.W_OK | os.X_OK):
        what = "is" if Path(spec) == directory else f"is in {directory}, which is"
        raise UserError(f"target {spec} {what} not writable by this user.")


def on_what(path: Path) -> str:
    """Where a path's data lands: "on vda", or "on tmpfs (no block device)"."""
    existing = Path(os.path.realpath(path))
    while not existing.exists():
        existing = existing.parent
    device = device_of(existing)
    if device:
        return f"on {device}"
    inside = [m for m in mounts() if m.point == "/" or str(existing) == m.point or str(existing).startswith(m.point + "/")]
    return f"on {max(inside, key=lambda m: len(m.point)).fstype} (no block device)" if inside else "on no block device"


# ---- block devices ----------------------------------------------------------------------------------------

def _block_target(spec: str, label: str, options: dict[str, Any], wanted: int | None) -> Target:
    dev = os.path.realpath(spec)
    name = kernel_name(os.stat(dev).st_rdev)
    if name is None:
        raise UserError(f"target {spec} is a block device the kernel does not list in /sys/class/block; refusing to write to it.")
    for check in (lambda: _in_use(name), lambda: _busy(dev), lambda: _signature(dev, name)):  # in this order, lazily
        if problem := check():
            raise UserError(f"refusing to write to {spec}: {problem}.")
    if not options["destroy_data"]:
        raise UserError(f"writing to block device {spec} destroys the data on it; pass --destroy-data to allow it.")
    size = block_size_bytes(dev)
    if wanted and wanted > size:
        raise UserError(f"--size {wanted} is larger than block device {spec} ({size} bytes).")
    return Target(label, spec, dev, "block", wanted or size, None, name, False,
                  f"block device {dev} ({_display(name)}, {size / 2**30:.2f} GiB, no file system or partition table)")


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
    return name if name and (SYS_BLOCK / name).exists() else None


def _number(name: str) -> tuple[int, int] | None:
    try:
        major, minor = (SYS_BLOCK / name / "dev").read_text().split(":")
        return int(major), int(minor)
    except (OSError, ValueError):
        return None


def _names(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir()) if directory.is_dir() else []


def _partitions(name: str) -> list[str]:
    base = SYS_BLOCK / name
    return sorted(p.name for p in base.iterdir() if (p / "partition").exists()) if base.is_dir() else []


def _loop_backing_device(name: str) -> str | None:
    """The block device a loop device reads and writes (None when it is backed by a file, or not a loop device)."""
    try:
        backing = (SYS_BLOCK / name / "loop" / "backing_file").read_text().strip()
        st = os.stat(backing)
    except OSError:
        return None
    return kernel_name(st.st_rdev) if stat.S_ISBLK(st.st_mode) else None


def _loops_over(name: str) -> list[str]:
    return [loop for loop in _names(SYS_BLOCK) if loop.startswith("loop") and _loop_backing_device(loop) == name]


def _above(name: str) -> dict[str, str]:
    """Everything stacked on a device, recursively: its partitions, device-mapper and md devices holding it, loop
    devices backed by it. Maps each to the device it sits on."""
    found: dict[str, str] = {}
    todo = [name]
    while todo:
        current = todo.pop()
        for upper in _partitions(current) + _names(SYS_BLOCK / current / "holders") + _loops_over(current):
            if upper != name and upper not in found:
                found[upper] = current
                todo.append(upper)
    return found


def _loops_beneath(name: str) -> list[str]:
    """The devices a loop device writes through to (a loop over a loop over a disk: both). Device-mapper and md claim
    their members, so nothing else can use those; a loop device does not."""
    chain, current = [], _loop_backing_device(name)
    while current and current != name and current not in chain:
        chain.append(current)
        current = _loop_backing_device(current)
    return chain


def _display(name: str) -> str:
    base = SYS_BLOCK / name
    if (base / "dm" / "name").exists():
        return f"{name} (device-mapper {(base / 'dm' / 'name').read_text().strip()})"
    if (base / "md").is_dir():
        return f"{name} (md RAID)"
    if (base / "partition").exists():
        return f"{name} (partition)"
    if (base / "loop").is_dir():
        return f"{name} (loop device)"
    return name


def _chain(name: str, upper: str, parents: dict[str, str]) -> str:
    steps = [upper]
    while parents.get(steps[-1], name) != name:
        steps.append(parents[steps[-1]])
    return " on ".join(_display(s) for s in steps)


def _in_use(name: str) -> str | None:
    """Whether the device, anything stacked on it, or anything sharing the blocks a loop device writes through to is
    mounted or swap; or whether anything but partitions is stacked on it at all: writing underneath corrupts it."""
    mounted: dict[tuple[int, int], str] = {}
    for m in mounts():
        mounted.setdefault(m.number, m.point)  # the first: a bind mount or a namespace's view comes later
    swaps = _swap_numbers()

    def use(device: str) -> str | None:
        number = _number(device)
        return f"mounted at {mounted[number]}" if number in mounted else "in use as swap" if number in swaps else None

    if how := use(name):
        return f"it is {how}"
    above = _above(name)
    for device in above:
        if how := use(device):
            return f"it backs {_chain(name, device, above)}, which is {how}"
    ours = {name, *above}
    for lower in _loops_beneath(name):
        for device in [lower, *_above(lower)]:
            if device not in ours and (how := use(device)):
                return f"it is a loop device over {_display(lower)}, and {_display(device)} is {how}"
    stacked = [d for d in above if d not in _partitions(name)]
    if stacked:
        return (f"it backs {', '.join(_display(d) for d in stacked)}; remove {'that' if len(stacked) == 1 else 'those'} "
                "first (losetup -d, dmsetup remove, mdadm --stop)")
    return None


def _swap_numbers() -> set[tuple[int, int]]:
    numbers = set()
    try:
        lines = Path("/proc/swaps").read_text().splitlines()[1:]
    except OSError:
        return numbers
    for line in lines:
        try:
            st = os.stat(_unescape(line.split()[0]))
        except (OSError, IndexError):
            continue
        if stat.S_ISBLK(st.st_mode):
            numbers.add((os.major(st.st_rdev), os.minor(st.st_rdev)))
    return numbers


def _busy(dev: str) -> str | None:
    """The kernel's own answer: an exclusive open fails while a file system, swap, device-mapper or md holds the
    device, whatever sysfs showed."""
    try:
        fd = os.open(dev, os.O_RDONLY | os.O_EXCL)
    except OSError as exc:
        if exc.errno == errno.EBUSY:
            return "the kernel reports it in use (a file system, swap, device-mapper or RAID holds it)"
        raise UserError(f"cannot open block device {dev}: {exc.strerror}.") from None
    os.close(fd)
    return None


def _signature(dev: str, name: str) -> str | None:
    wipe = f"if its data is no longer needed, erase the signatures with 'wipefs -a {dev}' and run again"
    partitions = _partitions(name)
    if partitions:
        return f"it has partitions ({', '.join(partitions)}); {wipe}"
    try:
        probe = subprocess.run(["blkid", "-p", "-o", "export", dev], capture_output=True, text=True, timeout=30)
    except FileNotFoundError:
        raise UserError("blkid is not installed (Debian package util-linux); refbench needs it to check a block device is unused.") from None
    fields = dict(line.split("=", 1) for line in probe.stdout.splitlines() if "=" in line)
    if fields.get("PTTYPE"):
        return f"it holds a {fields['PTTYPE']} partition table; {wipe}"
    if fields.get("TYPE"):
        usage = fields.get("USAGE", "filesystem")
        kind = {"raid": "RAID/LVM member signature", "filesystem": "file system", "crypto": "encrypted volume"}.get(usage, usage)
        return f"it holds a {fields['TYPE']} {kind}; {wipe}"
    if probe.returncode not in (0, 2):  # 2: nothing found
        raise UserError(f"blkid could not probe {dev} ({probe.stderr.strip() or f'exit status {probe.returncode}'}); "
                        "refusing to write to a device refbench cannot check.")
    return None


def _check_free_space(file: Path, needed: int) -> None:
    require_free_space(file.parent if not file.is_dir() else file, needed, f"a {needed / 1e9:.2f} GB test file")


def free_bytes(directory: Path) -> int:
    """The space free for an unprivileged writer in ``directory``'s file system, before ``directory`` exists (its
    nearest existing parent is on the same file system, or names the one it will be mounted on)."""
    existing = Path(directory).absolute()
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    st = os.statvfs(existing)
    return st.f_bavail * st.f_frsize


def require_free_space(directory: Path, needed: int, what: str) -> None:
    """Refuses, before anything is written, a run whose data would not fit where it goes (see free_bytes)."""
    if needed <= 0:
        return
    free = free_bytes(directory)
    if free < needed + FREE_SPACE_MARGIN:
        # GB throughout, as the sizes in ``what`` are: one unit system to a sentence.
        raise UserError(f"not enough free space in {directory} for {what}: {free / 1e9:.2f} GB free "
                        f"(refbench keeps {FREE_SPACE_MARGIN / 1e9:.2f} GB spare).")