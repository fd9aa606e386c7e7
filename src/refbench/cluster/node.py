"""What runs on a worker: one node's share of a cluster step. It creates an ordinary run directory on its own
host, says it is ready, waits until every node of the step is, then runs the plan there with ``refbench resume``
in a child process (a clean process, as on a single host; it dies with the worker), and sends the run
directory back, without the bulky work data."""

from __future__ import annotations

import fcntl
import io
import os
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

from refbench.children import die_with_parent


NODE_DIR_PREFIX = "refbench-node-"


def scratch_root() -> Path:
    return Path("/var/tmp") if Path("/var/tmp").is_dir() else Path(tempfile.gettempdir())


def remove_stale_node_dirs(root: Path) -> list[Path]:
    """Node directories whose worker died (kill -9 runs no cleanup): their lock is no longer held."""
    removed = []
    for path in root.glob(f"{NODE_DIR_PREFIX}*"):
        try:
            fd = os.open(path / "node.lock", os.O_RDONLY)
        except OSError:
            continue  # not ours, or just being created
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            continue  # a node that is running
        finally:
            os.close(fd)
        shutil.rmtree(path, ignore_errors=True)
        removed.append(path)
    return removed


def own_paths(plan: dict[str, Any], node: str) -> dict[str, Any]:
    """The plan as one node runs it: every directory it names gets a subdirectory for the node, so nodes on shared
    storage do not overwrite each other's data (the same directory on every host is common with shared storage)."""
    plan = {**plan, "options": {suite: dict(options) for suite, options in plan["options"].items()}}
    if plan.get("work_dir"):
        plan["work_dir"] = str(Path(plan["work_dir"]) / node)
    for options in plan["options"].values():
        for key, value in options.items():
            if key.endswith("_dir") and isinstance(value, str) and value:
                options[key] = str(Path(value) / node)
    targets = []
    for target in plan.get("targets", []):
        if Path(target).is_dir():  # files and block devices are used as named: one per host
            (Path(target) / node).mkdir(exist_ok=True)
            target = str(Path(target) / node)
        targets.append(target)
    plan["targets"] = targets
    return plan


def run_node(plan: dict[str, Any], node: str, key: str, start_timeout_s: float) -> dict[str, Any]:
    from distributed import Event, Queue

    from refbench.plan import Plan
    from refbench.runner import run_metadata
    from refbench.runstore import Run

    remove_stale_node_dirs(scratch_root())
    base = Path(tempfile.mkdtemp(prefix=NODE_DIR_PREFIX, dir=scratch_root()))
    lock = os.open(base / "node.lock", os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.flock(lock, fcntl.LOCK_EX)  # held while this node runs; released by the kernel if the worker dies
    try:
        plan = Plan.from_dict({**own_paths(plan, node), "runs_dir": str(base / "runs"), "name": node, "scheduler": "",
                               "hosts": []})
        run = Run.create(plan, {**run_metadata(), "argv": ["refbench", "run", "(node of a cluster run)"], "node": node})
        Queue(f"{key}-ready").put(node)
        go, stop = Event(f"{key}-go"), Event(f"{key}-stop")
        waited = time.monotonic()
        while not go.wait(timeout=1):
            if stop.is_set() or time.monotonic() - waited > start_timeout_s:
                return {"node": node, "host": socket.gethostname(), "code": None,
                        "error": "stopped before the start" if stop.is_set() else
                                 f"the other nodes were not ready within {start_timeout_s:g} s"}
        started = time.time()
        log = base / "node.log"
        with open(log, "wb") as out:
            child = subprocess.Popen([sys.executable, "-m", "refbench", "resume", str(run.path)], stdin=subprocess.DEVNULL,
                                     stdout=out, stderr=subprocess.STDOUT, preexec_fn=die_with_parent)
            while child.poll() is None:
                if stop.is_set():  # the coordinator was interrupted
                    child.send_signal(signal.SIGINT)
                    child.wait()
                    break
                time.sleep(0.2)
        lines = [line for line in log.read_text(errors="replace").splitlines() if line.strip()]
        archive = io.BytesIO()
        with tarfile.open(fileobj=archive, mode="w:gz") as tar:
            tar.add(run.path, arcname=".", filter=lambda info: None if info.name.startswith(("./work", "./secrets")) else info)
            tar.add(log, arcname="node.log")
        return {"node": node, "host": socket.gethostname(), "code": child.returncode, "started_epoch_s": started,
                "ended_epoch_s": time.time(), "archive": archive.getvalue(),
                "error": "" if child.returncode in (0, 1) else (lines[-1] if lines else f"exit status {child.returncode}")}
    finally:
        shutil.rmtree(base, ignore_errors=True)
        os.close(lock)
