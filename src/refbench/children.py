"""Child processes that must not outlive the process that started them (an analytics job, a cluster node's
refbench, fio, a loader): pass ``preexec_fn=die_with_parent`` to subprocess.Popen, or call ``forked_worker`` first
thing in a forked worker. The kernel then kills the child when its parent
dies, even by kill -9, which no cleanup code of the parent could do."""

from __future__ import annotations

import ctypes
import signal

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
