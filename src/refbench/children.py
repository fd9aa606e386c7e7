"""Processes and files that must not outlive refbench, even when it is killed with SIGKILL and runs no cleanup code.

Two mechanisms, for two kinds of children:

- ``die_with_parent`` (a ``preexec_fn``; ``forked_worker`` for a forked worker): the kernel signals the child when the
  thread that started it exits. Right for a child refbench starts from its main thread and that may simply be killed
  (an analytics job, a cluster node's refbench, a loader, a virtual user) or that stops its own children on SIGTERM
  (fio). The kernel clears the setting when the child's credentials change, so it is set after any setuid.
- ``watchdog()``: one small process per refbench process that waits for refbench to end (a pidfd, so a child that
  inherited a descriptor cannot keep it waiting) and then undoes what is still registered with it: stops processes
  (a signal, then stronger ones after a grace period), runs stop commands and removes paths. Right for what needs
  an orderly stop (a database server) or leaves files behind (its socket directory).

    guard = watchdog().register(pid=server.pid, signals=(signal.SIGINT, signal.SIGQUIT, signal.SIGKILL),
                                remove=[socket_dir])
    ...                     # refbench stops the server itself when all goes well, then:
    guard.release()

When refbench exits, normally or not, the watchdog acts on what is still registered and exits too.
"""

from __future__ import annotations

import ctypes
import gc
import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

PR_SET_PDEATHSIG = 1


def die_with_parent(signum: int = signal.SIGKILL) -> None:
    """``signum`` instead of SIGKILL lets a child that has children of its own (fio's jobs) stop them first.
    Call it after any change of user: the kernel clears the setting when a process's credentials change."""
    ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signum)


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
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path, ignore_errors=True)
        else:
            try:
                os.unlink(path)
            except OSError:
                pass
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
