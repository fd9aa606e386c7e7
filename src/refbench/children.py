"""Child processes that must not outlive the process that started them (an analytics job, a cluster node's
refbench): pass ``preexec_fn=die_with_parent`` to subprocess.Popen. The kernel then kills the child when its parent
dies, even by kill -9, which no cleanup code of the parent could do."""

from __future__ import annotations

import ctypes
import signal

PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
