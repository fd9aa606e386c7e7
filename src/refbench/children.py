"""Processes and files that must not outlive refbench, even when it is killed with SIGKILL and runs no cleanup code.

Two mechanisms, for two kinds of children:

- ``die_with_parent`` (a ``preexec_fn``; ``forked_worker`` for a forked worker): the kernel signals the child when the
  thread that started it exits. Right for a child refbench starts from its main thread and that may simply be killed
  (an analytics job, a cluster node's refbench, a loader, a virtual user, fio with its jobs as threads) or that stops
  its own children on another signal. The kernel clears the setting when the child's credentials change, so it is set after any setuid.
- ``watchdog()``: one small process per refbench process that waits for refbench to end (a pidfd, so a child that
  inherited a descriptor cannot keep it waiting) and then undoes what is still registered with it: stops processes
  (a signal, then stronger ones after a grace period), runs stop commands and removes paths. Right for what needs
  an orderly stop (a database server) or leaves files behind (its socket directory).

    guard = watchdog().register(pid=server.pid, signals=(signal.SIGINT, signal.SIGQUIT, signal.SIGKILL),
                                remove=[socket_dir])
    ...                     # refbench stops the server itself when all goes well, then:
    guard.release()

When refbench exits, normally or not, the watchdog acts on what is still registered and exits too.

A child started in the instant refbench is killed would escape the kernel's signal: ``die_with_parent`` ends a child
whose parent was already gone when it asked for it. Directories made outside the run directory (``owned_temp_dir``)
carry an owner record, so that ``remove_orphaned_temp_dirs`` removes them at a later start once their owner is dead,
when refbench and its watchdog were killed together.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import json
import os
import select
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator, Sequence

from refbench.removal import remove_quietly

PR_SET_PDEATHSIG = 1
# Looked up once here: a child forked from a process with threads must not dlopen (another thread may have held the
# loader's lock at the fork, and the child would wait for it forever).
_prctl = ctypes.CDLL(None).prctl
_forked_from: int | None = None


def _remember_forking_process() -> None:
    global _forked_from
    _forked_from = os.getpid()


# Runs before os.fork and before a subprocess with a preexec_fn forks, so the child knows which parent it had even if
# that parent is already dead (and the child reparented) by the time it asks.
os.register_at_fork(before=_remember_forking_process)


def die_with_parent(signum: int = signal.SIGKILL) -> None:
    """``signum`` instead of SIGKILL lets a child that has children of its own stop them first.
    Call it after any change of user: the kernel clears the setting when a process's credentials change.

    The kernel sends the signal when the parent dies after this call; a parent killed between the fork and this call
    would leave the child running for good, so the child then ends here."""
    _prctl(PR_SET_PDEATHSIG, signum)
    if _forked_from is not None and os.getppid() != _forked_from:
        os._exit(128 + signum)


def forked_worker() -> None:
    """For processes forked to do part of the runner's work (loaders, virtual users): Ctrl-C reaches the runner,
    which stops them; SIGTERM ends one quietly (the runner's own handler, inherited through fork, would print a
    traceback from every worker); and they die with the runner."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    die_with_parent()
    # The runner's objects, inherited through fork, are left out of the garbage collector's passes: a worker makes
    # garbage at every transaction, and each full pass would walk the whole inherited heap (and copy its pages).
    gc.freeze()


# ---- the watchdog, as refbench sees it -------------------------------------------------------------------------


@dataclass
class Guard:
    """One registration; ``release`` it once refbench has stopped or removed the thing itself."""

    watchdog: "Watchdog"
    number: int

    def release(self) -> None:
        try:
            self.watchdog._send({"op": "release", "id": self.number})
        except OSError:
            pass  # the watchdog is gone (killed on its own): nothing left to release


class Watchdog:
    def __init__(self) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        # Its own session: Ctrl-C in the terminal interrupts refbench, whose own cleanup runs; the watchdog waits.
        self.process = subprocess.Popen([sys.executable, "-m", "refbench.children", str(os.getpid())],
                                        stdin=theirs.fileno(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                        start_new_session=True)
        theirs.close()
        self._channel = ours
        self._owner = os.getpid()
        self._numbers = iter(range(1, 1 << 62))
        self._lock = threading.Lock()

    def register(self, *, pid: int | None = None, process_group: int | None = None,
                 signals: Sequence[int] = (signal.SIGTERM, signal.SIGKILL), grace_s: float = 5.0,
                 command: Sequence[str] | None = None, remove: Iterable[str | Path] = ()) -> Guard:
        """What to do if refbench ends while this is registered, in this order: run ``command`` (given ``grace_s``
        to finish); send ``signals`` one after the other to process ``pid`` and/or process group
        ``process_group``, each after the previous one had ``grace_s`` to end it; remove the ``remove`` paths.
        Registrations are undone newest first, so register a directory before the process that uses it."""
        fds = []
        if pid is not None:
            try:
                fds.append(os.pidfd_open(pid))  # the process itself, whatever pid it had by the time it is stopped
            except ProcessLookupError:
                pass  # already gone and reaped
        with self._lock:
            number = next(self._numbers)
            self._send({"op": "register", "id": number, "pid": pid is not None and bool(fds),
                        "process_group": process_group, "signals": [int(s) for s in signals], "grace_s": grace_s,
                        "command": list(command) if command else None, "remove": [str(p) for p in remove]}, fds)
        for fd in fds:
            os.close(fd)
        return Guard(self, number)

    def _send(self, message: dict, fds: Sequence[int] = ()) -> None:
        data = json.dumps(message).encode()
        if fds:
            socket.send_fds(self._channel, [data], list(fds))
        else:
            self._channel.send(data)


_watchdog: Watchdog | None = None
_watchdog_lock = threading.Lock()


def watchdog() -> Watchdog:
    """This process's watchdog, started on first use (a forked child gets its own)."""
    global _watchdog
    with _watchdog_lock:
        if _watchdog is None or _watchdog._owner != os.getpid() or _watchdog.process.poll() is not None:
            _watchdog = Watchdog()
        return _watchdog


# ---- directories outside the run directory --------------------------------------------------------------------

TEMP_DIR_PREFIX = "refbench-"
OWNER_RECORD = ".refbench-owner"


def start_time(pid: int) -> int | None:
    """The process's start time in clock ticks since boot: with the pid, it names one process, not its successors."""
    try:
        stat_line = Path(f"/proc/{pid}/stat").read_text()
        return int(stat_line[stat_line.rindex(")") + 2:].split()[19])
    except (OSError, ValueError, IndexError):  # no such process (any more)
        return None


def owned_temp_dir(prefix: str, account_uid: int | None = None) -> Path:
    """``tempfile.mkdtemp`` (mode 0700) with a record of the process that made it, for when it cannot live in the run
    directory (a unix socket's path is limited to 107 bytes). ``account_uid``: the account the directory is handed to
    (a server's), which a later removal accepts as its owner too."""
    assert prefix.startswith(TEMP_DIR_PREFIX)
    path = Path(tempfile.mkdtemp(prefix=prefix))
    record = {"pid": os.getpid(), "started": start_time(os.getpid()), "account_uid": account_uid}
    fd = os.open(path / OWNER_RECORD, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    with os.fdopen(fd, "w") as f:
        f.write(json.dumps(record))
    return path


@contextlib.contextmanager
def owned_temp_directory(prefix: str) -> Iterator[Path]:
    """owned_temp_dir for the length of a ``with``: a kill -9 inside it leaves a directory the next run removes."""
    path = owned_temp_dir(prefix)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def _orphaned(parent_fd: int, name: str) -> bool:
    """Whether ``name`` in the directory ``parent_fd`` is a real directory made by owned_temp_dir under this user,
    whose maker is dead. Anything else (a symlink, another user's directory, a record this user did not write or that
    is linked from elsewhere, one that does not parse) is not ours to remove."""
    try:
        directory_fd = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=parent_fd)
    except OSError:
        return False
    try:
        directory = os.fstat(directory_fd)
        record_fd = os.open(OWNER_RECORD, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=directory_fd)
        try:
            record = os.fstat(record_fd)
            if not stat.S_ISREG(record.st_mode) or record.st_uid != os.geteuid() or record.st_nlink != 1:
                return False
            owner = json.loads(os.read(record_fd, 4096))
        finally:
            os.close(record_fd)
        if directory.st_uid not in (os.geteuid(), owner.get("account_uid")):
            return False
        return start_time(int(owner["pid"])) != owner["started"]
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return False
    finally:
        os.close(directory_fd)


def remove_orphaned_temp_dirs(root: Path | None = None) -> list[Path]:
    """Removes the owned_temp_dir directories in ``root`` (the temp directory) whose maker died without removing
    them, as when refbench and its watchdog were killed together; returns them."""
    root = Path(root or tempfile.gettempdir())
    try:
        root_fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return []
    removed = []
    try:
        for name in os.listdir(root_fd):
            if name.startswith(TEMP_DIR_PREFIX) and _orphaned(root_fd, name):
                # dir_fd: relative to the directory checked, and rmtree follows no symlink inside.
                shutil.rmtree(name, dir_fd=root_fd, ignore_errors=True)
                removed.append(root / name)
    finally:
        os.close(root_fd)
    return removed


# ---- the watchdog process ----------------------------------------------------------------------------------------

MAX_MESSAGE = 1 << 16


@dataclass
class _Entry:
    pidfd: int | None
    process_group: int | None
    signals: list[int]
    grace_s: float
    command: list[str] | None
    remove: list[str]


def _gone(entry: _Entry) -> bool:
    if entry.pidfd is not None and select.select([entry.pidfd], [], [], 0)[0] == []:
        return False
    if entry.process_group is not None:
        try:
            os.killpg(entry.process_group, 0)
            return False
        except (ProcessLookupError, PermissionError):
            pass
    return True


def _undo(entry: _Entry) -> None:
    if entry.command:
        try:
            subprocess.run(entry.command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                           timeout=entry.grace_s)
        except (OSError, subprocess.TimeoutExpired):
            pass
    for signum in entry.signals:
        if _gone(entry):
            break
        if entry.pidfd is not None:
            try:
                signal.pidfd_send_signal(entry.pidfd, signum)
            except ProcessLookupError:
                pass
        if entry.process_group is not None:
            try:
                os.killpg(entry.process_group, signum)
            except (ProcessLookupError, PermissionError):
                pass
        deadline = time.monotonic() + entry.grace_s
        while time.monotonic() < deadline and not _gone(entry):
            time.sleep(0.05)
    for path in entry.remove:
        # Walked down from "/" by descriptor, following no link on the way or inside: whoever can write a directory
        # above cannot aim the removal elsewhere by swapping a link in.
        remove_quietly(Path(path))
    if entry.pidfd is not None:
        os.close(entry.pidfd)


def _serve(parent_pid: int) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    channel = socket.socket(fileno=0)
    entries: dict[int, _Entry] = {}

    def receive() -> bool:
        """One message into ``entries``; False at the end of the channel."""
        data, fds, _, _ = socket.recv_fds(channel, MAX_MESSAGE, 4)
        if not data:
            return False
        message = json.loads(data)
        if message["op"] == "register":
            entries[message["id"]] = _Entry(fds[0] if message["pid"] and fds else None, message["process_group"],
                                            message["signals"], message["grace_s"], message["command"], message["remove"])
        elif message["op"] == "release":
            entry = entries.pop(message["id"], None)
            if entry is not None and entry.pidfd is not None:
                os.close(entry.pidfd)
        return True

    # The parent may be gone already (killed while this process started), and its pid even reused: then only its
    # messages are left to act on.
    try:
        parent = os.pidfd_open(parent_pid)
    except ProcessLookupError:
        parent = None
    open_ = parent is not None and os.getppid() == parent_pid
    while open_:
        ready = select.select([parent, channel], [], [])[0]
        if parent in ready:
            break
        open_ = receive()
    channel.setblocking(False)
    try:  # what the parent sent just before it died
        while receive():
            pass
    except BlockingIOError:
        pass
    for number in sorted(entries, reverse=True):
        _undo(entries[number])


if __name__ == "__main__":
    _serve(int(sys.argv[1]))
