"""Runs one command and tells which of its descendants outlive it, without looking at any other process.

The harness makes itself a child subreaper (prctl PR_SET_CHILD_SUBREAPER), so every process the command starts
— also one that daemonizes, like pg_ctl's postmaster, or one orphaned by a kill -9 — stays its descendant
instead of going to init. When the command has exited, it waits up to --linger-s for the descendants to go,
reports on stdout as JSON the exit status, how long the last of them took to go and what was still alive
at the deadline; then it kills those (so a failing test leaves nothing running) and exits.

    python process_tree.py --linger-s 15 --stdout out.txt --stderr err.txt -- refbench oltp …

Its first stdout line is {"pid": N}, the command's pid, for the test to signal.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

PR_SET_CHILD_SUBREAPER = 36


def descendants(root: int) -> dict[int, str]:
    """pid -> command line of every live (not zombie) descendant of ``root``."""
    children: dict[int, list[int]] = {}
    states: dict[int, str] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # The command name may hold spaces and parentheses: the fields start after the last ')'.
        state, ppid = stat[stat.rindex(")") + 2:].split()[:2]
        children.setdefault(int(ppid), []).append(int(entry.name))
        states[int(entry.name)] = state
    found: dict[int, str] = {}
    todo = list(children.get(root, []))
    while todo:
        pid = todo.pop()
        todo += children.get(pid, [])
        if states.get(pid) == "Z":
            continue
        try:
            found[pid] = (Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
                          or f"[{Path(f'/proc/{pid}/comm').read_text().strip()}]")
        except OSError:
            continue
    return found


def reap() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--linger-s", type=float, default=10.0)
    parser.add_argument("--stdout", required=True)
    parser.add_argument("--stderr", required=True)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if ctypes.CDLL(None).prctl(PR_SET_CHILD_SUBREAPER, 1) != 0:
        sys.exit("process_tree: cannot become a child subreaper")
    me = os.getpid()
    with open(args.stdout, "wb") as out, open(args.stderr, "wb") as err:
        child = subprocess.Popen(command, stdout=out, stderr=err, stdin=subprocess.DEVNULL)
    print(json.dumps({"pid": child.pid}), flush=True)
    code = child.wait()
    ended = time.monotonic()
    deadline = ended + args.linger_s
    alive = descendants(me)
    while alive and time.monotonic() < deadline:
        time.sleep(0.1)
        reap()
        alive = descendants(me)
    gone_after_s = round(time.monotonic() - ended, 2)
    for pid in alive:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    for _ in range(50):
        reap()
        if not descendants(me):
            break
        time.sleep(0.1)
    print(json.dumps({"code": code, "gone_after_s": None if alive else gone_after_s,
                      "survivors": [f"{pid} {cmd}" for pid, cmd in sorted(alive.items())]}), flush=True)


if __name__ == "__main__":
    main()
