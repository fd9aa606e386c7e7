"""Bounding the page cache a managed database server may use, so that a database smaller than the host's memory is
still read from storage, and counting what the server itself read from storage.

Two ways to bound, the first that works on this host:

- its own memory cgroup (refbench runs as root and the memory controller is there: cgroup v2 ``memory.max``, or
  cgroup v1 ``memory.limit_in_bytes``), created under refbench's own cgroup. The kernel charges the server's own
  memory (shared buffers, backends) and the page cache of the files it reads to that cgroup, and reclaims that cache
  when the limit is reached, the way memory pressure does it on a production server. While a case is measured
  (``applied``) the limit follows the server's own memory plus the page-cache allowance, re-read every
  ``FOLLOW_S``: a fixed limit would have to guess what the server's processes need, and every megabyte guessed too
  many is more cache (measured: a limit of 239 MB sized for 32 MB of cache let the cache grow to 172 MB). Memory
  the server itself needs faster than the limit follows is taken from the cache first; only beyond that (no swap
  here) does the kernel kill a server process, and ``last_oom`` says so.
- otherwise posix_fadvise(DONTNEED) over the server's data files every interval (host.pagecache): it empties their
  cache instead of bounding it, and needs neither root nor a cgroup.

The server joins its cgroup in its own process before exec (``join``), so every process it forks is in it from the
start. Between cases nothing is limited: loading the data and checking it are not rated and may need far more
memory than a measurement (the OLTP consistency check holds about 500 MB at 10 warehouses). The cgroup is removed
when the server stops; after a kill -9 the watchdog stops the server and removes it, and the next ``Bound`` of any
refbench sweeps leftovers whose owner is gone.
"""

from __future__ import annotations

import itertools
import os
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

from refbench.host.pagecache import evict, files_under
from refbench.host.telemetry import read_process_io

PREFIX = "refbench-"
REMOVE_TIMEOUT_S = 10.0  # the server's last processes leave the cgroup a moment after it is stopped
LIMIT_TIMEOUT_S = 30.0  # cgroup v1 refuses a limit below what it holds until reclaim, which waits for writeback, frees it
FOLLOW_S = 0.2


@dataclass(frozen=True)
class CgroupHome:
    """refbench's own cgroup in the hierarchy that has the memory controller."""

    version: int  # 1 or 2
    path: Path


def read_cgroups(cgroup_file: Path, mountinfo: Path) -> tuple[dict[str, str], str | None,
                                                              list[tuple[str, Path, str, list[str]]]]:
    """A process's cgroups, as /proc says: its cgroup v1 path per controller and its cgroup v2 path (from
    /proc/PID/cgroup), and the cgroup hierarchies mounted where this process sees them (root, mount point, "cgroup"
    or "cgroup2", mount options; from a mountinfo: a container sees a subtree). OSError when either cannot be read."""
    membership = cgroup_file.read_text().splitlines()
    mounts = mountinfo.read_text().splitlines()
    v1: dict[str, str] = {}
    v2 = None
    for line in membership:
        number, controllers, path = (line.split(":", 2) + ["", ""])[:3]
        if number == "0" and controllers == "":
            v2 = path
        for controller in filter(None, controllers.split(",")):
            v1[controller] = path
    found = []
    for line in mounts:
        left, _, right = line.partition(" - ")
        fields, tail = left.split(), right.split()
        if len(fields) >= 5 and len(tail) >= 3 and tail[0] in ("cgroup", "cgroup2"):
            found.append((fields[3], Path(fields[4]), tail[0], tail[2].split(",")))
    return v1, v2, found


def find_home(proc_self: Path = Path("/proc/self")) -> tuple[CgroupHome | None, str]:
    """Our memory cgroup's directory, or None and why not. Read from /proc/self/cgroup (which cgroup we are in) and
    /proc/self/mountinfo (where that hierarchy is mounted, and which part of it: a container sees a subtree)."""
    try:
        v1, v2_path, mounts = read_cgroups(proc_self / "cgroup", proc_self / "mountinfo")
    except OSError as exc:
        return None, f"cannot read the process's cgroups ({exc.strerror})"
    v1_path = v1.get("memory")
    for root, mount_point, fstype, options in mounts:
        if v1_path is not None and fstype == "cgroup" and "memory" in options:
            if (found := inside_mount(mount_point, root, v1_path)) is not None:
                return CgroupHome(1, found), ""
        if v1_path is None and v2_path is not None and fstype == "cgroup2":
            found = inside_mount(mount_point, root, v2_path)
            if found is not None and "memory" in _words(found / "cgroup.controllers"):
                return CgroupHome(2, found), ""
    return None, "no memory cgroup controller is available to this process"


def inside_mount(mount_point: Path, root: str, path: str) -> Path | None:
    """The directory of cgroup ``path`` under a mount of the hierarchy's ``root``, if it is visible there."""
    root, path = root.rstrip("/"), path.rstrip("/")
    if path != root and not path.startswith(root + "/"):
        return None
    found = mount_point / path[len(root):].lstrip("/")
    return found if (found / "cgroup.procs").exists() else None


def _words(path: Path) -> list[str]:
    try:
        return path.read_text().split()
    except OSError:
        return []


def _number(path: Path, key: str | None = None) -> int | None:
    """A cgroup file's number, or the value of ``key`` in a file of "key value" lines."""
    try:
        text = path.read_text()
    except OSError:
        return None
    if key is None:
        return int(text.split()[0])
    for line in text.splitlines():
        name, _, value = line.partition(" ")
        if name == key:
            return int(value)
    return None


class ServerCgroup:
    """One cgroup with a memory limit, under refbench's own."""

    _numbers = itertools.count(1)

    def __init__(self, home: CgroupHome):
        self.home = home
        self.limit_bytes: int | None = None  # as last set; None when unlimited
        self.path = home.path / f"{PREFIX}{os.getpid()}-{next(self._numbers)}"
        self.oom_kills = 0  # as last read: kept after the cgroup is gone, for the message that explains a failure
        self._procs = str(self.path / "cgroup.procs").encode()

    def create(self) -> None:
        """The cgroup, without a limit yet (``limit``)."""
        sweep(self.home)
        self.path.mkdir()
        try:
            if self.home.version == 2:
                self._enable_memory_controller()
                _write_if_there(self.path / "memory.swap.max", "0")  # a bound in RAM, as on a host without swap
        except OSError:
            self.path.rmdir()
            raise
        _CREATED.append(self)

    def set_limit(self, limit_bytes: int | None, wait_s: float = 0.0) -> bool:
        """Sets the limit (the kernel first reclaims the cache above it) or lifts it (None). cgroup v1 refuses a limit
        below what the cgroup holds when reclaim cannot free enough at once (dirty pages wait for writeback): retried
        for ``wait_s``; returns whether it was set."""
        if self.home.version == 2:
            (self.path / "memory.max").write_text(str(limit_bytes) if limit_bytes else "max")
            self.limit_bytes = limit_bytes
            return True
        files = [f for f in (self.path / "memory.limit_in_bytes", self.path / "memory.memsw.limit_in_bytes") if f.exists()]
        lower = limit_bytes is not None and (self.limit_bytes is None or limit_bytes < self.limit_bytes)
        # memory+swap may not be below memory: lowered after it, raised before it.
        value, deadline = str(limit_bytes or -1), time.monotonic() + wait_s
        for f in files if lower else reversed(files):
            while True:
                try:
                    f.write_text(value)
                    break
                except OSError:
                    if time.monotonic() >= deadline:
                        return False
                    time.sleep(0.2)
        self.limit_bytes = limit_bytes
        return True

    def join(self) -> None:
        """Moves the calling process into the cgroup: run in the server's process before exec (a preexec_fn)."""
        fd = os.open(self._procs, os.O_WRONLY)
        try:
            os.write(fd, str(os.getpid()).encode())
        finally:
            os.close(fd)

    def own_bytes(self) -> int | None:
        """What the cgroup holds besides the page cache: the server's processes and its shared memory."""
        usage = _number(self.path / ("memory.current" if self.home.version == 2 else "memory.usage_in_bytes"))
        cache = self.page_cache_bytes()
        return None if usage is None or cache is None else max(0, usage - cache)

    def read_oom_kills(self) -> int:
        name, key = ("memory.events", "oom_kill") if self.home.version == 2 else ("memory.oom_control", "oom_kill")
        value = _number(self.path / name, key)
        if value is not None:
            self.oom_kills = value
        return self.oom_kills

    def page_cache_bytes(self) -> int | None:
        """Page cache of regular files charged to the cgroup now (not shared memory, which sits on the anon lists)."""
        prefix = "total_" if self.home.version == 1 else ""
        active = _number(self.path / "memory.stat", f"{prefix}active_file")
        inactive = _number(self.path / "memory.stat", f"{prefix}inactive_file")
        return None if active is None or inactive is None else active + inactive

    def remove(self) -> None:
        self.read_oom_kills()
        deadline = time.monotonic() + REMOVE_TIMEOUT_S
        while True:
            try:
                self.path.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError:
                if time.monotonic() > deadline:
                    return  # still busy: a later sweep removes it
                time.sleep(0.05)


def _write_if_there(path: Path, value: str) -> None:
    if path.exists():
        try:
            path.write_text(value)
        except OSError:
            pass  # swap accounting off in this kernel: nothing to bound


def sweep(home: CgroupHome) -> None:
    """Removes empty cgroups left by a refbench that was killed (their owner's pid no longer runs). One that still
    holds a process is busy and stays: rmdir refuses it."""
    for path in home.path.glob(f"{PREFIX}*-*"):
        owner = path.name[len(PREFIX):].split("-")[0]
        if owner.isdigit() and int(owner) != os.getpid() and not Path(f"/proc/{owner}").exists():
            try:
                path.rmdir()
            except OSError:
                pass


_CREATED: list[ServerCgroup] = []


def last_oom() -> str | None:
    """Why the last server this process bounded failed, when the kernel killed one of its processes at the limit."""
    for group in reversed(_CREATED):
        if group.read_oom_kills():
            return (f"the kernel killed {group.oom_kills} process{'es' if group.oom_kills > 1 else ''} of the managed "
                    "server at its memory limit; raise cache_mb")
    return None


class PeriodicEviction:
    """posix_fadvise(DONTNEED) over a set of files every ``interval_s`` seconds, in a thread, while it runs."""

    def __init__(self, files: Callable[[], list[Path]], interval_s: float):
        self.files, self.interval_s = files, interval_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> "PeriodicEviction":
        evict(self.files())
        self._thread = threading.Thread(target=self._loop, daemon=True, name="page-cache eviction")
        self._thread.start()
        return self

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            evict(self.files())

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None


EVICT_S = 1.0  # the fallback's interval: at most about a second of reads can come from the cache it empties


class Bound:
    """The page-cache bound of one managed server: a cgroup when this host allows one, else periodic eviction of
    the files under ``data_root``. Use: ``create()`` before the server starts, ``join`` in its process before exec,
    ``with applied():`` around each measurement, ``close()`` once the server has stopped."""

    def __init__(self, cache_bytes: int, data_root: Path, evict_s: float = EVICT_S):
        self.cache_bytes, self.data_root, self.evict_s = cache_bytes, data_root, evict_s
        self.cgroup: ServerCgroup | None = None
        home, why = find_home() if os.geteuid() == 0 else (None, "refbench does not run as root")
        if home is not None:
            self.cgroup = ServerCgroup(home)
        self.why_not_cgroup = why

    def create(self) -> None:
        if self.cgroup is None:
            return
        try:
            self.cgroup.create()
        except OSError as exc:
            self.why_not_cgroup = f"creating the cgroup {self.cgroup.path} failed ({exc.strerror})"
            self.cgroup = None

    @property
    def method(self) -> str:
        if self.cgroup is not None:
            name = "memory.max" if self.cgroup.home.version == 2 else "memory.limit_in_bytes"
            return (f"cgroup v{self.cgroup.home.version} {name} = the server's own memory + {self.cache_bytes / 1e6:,.0f} MB "
                    f"of page cache, followed every {FOLLOW_S:g} s ({self.cgroup.path})")
        return (f"posix_fadvise(DONTNEED) over the data files every {self.evict_s:g} s, since {self.why_not_cgroup} "
                "(the cache is emptied, not bounded)")

    def join(self) -> None:
        if self.cgroup is not None:
            self.cgroup.join()

    @contextmanager
    def applied(self) -> Iterator[None]:
        if self.cgroup is None:
            eviction = PeriodicEviction(lambda: files_under([self.data_root]), self.evict_s).start()
            try:
                yield
            finally:
                eviction.stop()
            return
        # A cached page stays charged to the cgroup that first read it: the data the load or an unbounded run left
        # in the page cache would be read by the bounded server free of charge. Dropped first, it is charged anew.
        evict(files_under([self.data_root]))
        stop = threading.Event()
        if not self._follow(LIMIT_TIMEOUT_S):
            self.cgroup.set_limit(None)
            raise MemoryError(f"the managed server's page cache could not be brought down to {self.cache_bytes / 1e6:,.0f} "
                              f"MB within {LIMIT_TIMEOUT_S:g} s; raise cache_mb")
        follower = threading.Thread(target=self._keep_following, args=(stop,), daemon=True, name="cache bound")
        follower.start()
        try:
            yield
        finally:
            stop.set()
            follower.join()
            self.cgroup.set_limit(None)

    def _keep_following(self, stop: threading.Event) -> None:
        while not stop.wait(FOLLOW_S):
            self._follow(0)

    def _follow(self, wait_s: float) -> bool:
        """The limit = the server's own memory now + the page-cache allowance, capped at the host's memory."""
        own = self.cgroup.own_bytes()
        if own is None:
            return False
        host = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        return self.cgroup.set_limit(min(own + self.cache_bytes, host), wait_s)

    def close(self) -> None:
        if self.cgroup is not None:
            self.cgroup.remove()


def process_tree_io(pid: int) -> dict[str, int]:
    """read_bytes and write_bytes of a process and its live descendants. Linux adds a child's counts into its
    parent's when the parent reaps it, so the server's exited backends are in the postmaster's figures. Empty when
    the process is gone."""
    total = read_process_io(pid)
    if not total:
        return {}
    out = {"read_bytes": total.get("read_bytes", 0), "write_bytes": total.get("write_bytes", 0)}
    for child in children(pid):
        for key, value in process_tree_io(child).items():
            out[key] += value
    return out


def children(pid: int) -> list[int]:
    """The live children of a process, from each of its threads' /proc children list. A process or thread may end
    at any instant between two reads: what is gone by then has no children."""
    try:
        threads = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return []
    pids: list[int] = []
    for thread in threads:
        try:
            pids += [int(p) for p in Path(f"/proc/{pid}/task/{thread}/children").read_text().split()]
        except (OSError, ValueError):
            pass
    return pids
