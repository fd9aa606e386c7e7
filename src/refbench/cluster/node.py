"""What runs on a worker: one node's share of a cluster step. It creates an ordinary run directory on its own
host, says it is ready, waits until every node of the step is, then runs the plan there with ``refbench resume``
in a child process (a clean process, as on a single host; it dies with the worker), and sends the run
directory back, without the bulky work data."""

from __future__ import annotations

import ctypes
import io
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def run_node(plan: dict[str, Any], node: str, key: str, start_timeout_s: float) -> dict[str, Any]:
    from distributed import Event, Queue

    from refbench.plan import Plan
    from refbench.runner import run_metadata
    from refbench.runstore import Run

    base = Path(tempfile.mkdtemp(prefix="refbench-node-", dir="/var/tmp" if Path("/var/tmp").is_dir() else None))
    try:
        plan = Plan.from_dict({**plan, "runs_dir": str(base / "runs"), "name": node, "scheduler": "", "hosts": []})
        run = Run.create(plan, {**run_metadata(), "argv": ["refbench", "run", "(node of a cluster run)"], "node": node})
        Queue(f"{key}-ready").put(node)
        if not Event(f"{key}-go").wait(timeout=start_timeout_s):
            return {"node": node, "host": socket.gethostname(), "code": None,
                    "error": f"the other nodes were not ready within {start_timeout_s:g} s"}
        started = time.time()
        log = base / "node.log"
        stop = Event(f"{key}-stop")
        with open(log, "wb") as out:
            child = subprocess.Popen([sys.executable, "-m", "refbench", "resume", str(run.path)], stdin=subprocess.DEVNULL,
                                     stdout=out, stderr=subprocess.STDOUT, preexec_fn=_die_with_parent)
            while child.poll() is None:
                if stop.is_set():  # the coordinator was interrupted
                    child.send_signal(signal.SIGINT)
                    child.wait()
                    break
                time.sleep(0.2)
        lines = [line for line in log.read_text(errors="replace").splitlines() if line.strip()]
        archive = io.BytesIO()
        with tarfile.open(fileobj=archive, mode="w:gz") as tar:
            tar.add(run.path, arcname=".", filter=lambda info: None if info.name.startswith("./work") else info)
            tar.add(log, arcname="node.log")
        return {"node": node, "host": socket.gethostname(), "code": child.returncode, "started_epoch_s": started,
                "ended_epoch_s": time.time(), "archive": archive.getvalue(),
                "error": "" if child.returncode in (0, 1) else (lines[-1] if lines else f"exit status {child.returncode}")}
    finally:
        shutil.rmtree(base, ignore_errors=True)
