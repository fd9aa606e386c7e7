"""The host settings `refbench tune --apply-host` may try, and the journal that puts every one of them back.

Each change is written to the journal (the file's path and its value before) before the setting is touched, and
taken out of it once the value is back. The journal is undone: after each trial run, at the end of the tune, on
Ctrl-C, by refbench's watchdog when tune is killed with SIGKILL, and at the start of any later refbench command when
its owner is gone (the watchdog was killed too). Only /proc/sys and /sys files are written, never a block device or
a file system's data.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from refbench.fileio import atomic_write_text
from refbench.host.sysfs import SysRoot, bracketed
from refbench.host.tuning import CHANGE, audit
from refbench.tune.knobs import Knob


def state_dir() -> Path:
    return Path(os.environ.get("REFBENCH_STATE_DIR") or "/var/lib/refbench")


def sysroot() -> SysRoot:
    """The tree host settings are read and written under: the machine's, or a copy a test made (REFBENCH_SYSROOT)."""
    return SysRoot(os.environ.get("REFBENCH_SYSROOT") or "/")


def journal_path() -> Path:
    return state_dir() / "host-changes.json"


# The host settings tune may offer, by the names host_knobs gives them (a device's own after its name: "I/O scheduler
# (vda)"), for --only to be checked before the baseline runs.
HOST_SETTINGS = ("vm.dirty_background_ratio", "vm.dirty_ratio", "Transparent huge pages", "CPU frequency governor",
                 "I/O scheduler", "Read-ahead")


def host_knobs(suite: str, device: str | None, root: SysRoot | None = None) -> list[Knob]:
    """The host settings worth a trial on this host: those it exposes, at another value than the one tried; named as
    the tuning audit (refbench host) names them, and those it flags first."""
    root = root or sysroot()
    out = []

    def offer(name: str, paths: list[str], choices: list[str], addresses: tuple[str, ...], why: str) -> None:
        assert name.split(" (")[0] in HOST_SETTINGS, name  # the list --only is checked against
        paths = [p for p in paths if root.path(p).exists()]
        current = {setting_value(root, p) for p in paths}
        choices = [c for c in choices if current != {c}]
        if paths and choices and os.access(root.path(paths[0]), os.W_OK):
            out.append(Knob(name, "host", "", addresses, why, tuple(choices), paths=tuple(paths),
                            suites=(suite,)))

    offer("vm.dirty_background_ratio", ["/proc/sys/vm/dirty_background_ratio"], ["5", "10"], ("flush", "write", "device"),
          "background write-back starts when this share of memory is dirty: earlier, and checkpoints and spills "
          "meet a device that is already writing instead of a burst")
    offer("vm.dirty_ratio", ["/proc/sys/vm/dirty_ratio"], ["10", "40"], ("flush", "write", "device"),
          "writers are made to write back themselves past this share of dirty memory (the mixed-analytics paper: 40)")
    offer("Transparent huge pages", ["/sys/kernel/mm/transparent_hugepage/enabled"], ["never"], ("cpu",),
          "compaction and khugepaged stalls show up as latency; databases advise never (the mixed-analytics paper too)")
    governors = [f"/sys/devices/system/cpu/{c}/cpufreq/scaling_governor" for c in root.listdir("/sys/devices/system/cpu")
                 if c.startswith("cpu") and c[3:].isdigit()]
    offer("CPU frequency governor", governors, ["performance"], ("cpu",),
          "a CPU that ramps its clock up on demand adds latency and cuts throughput under a bursty load")
    if device and (disk := _disk(root, device)):
        available = (root.read(f"/sys/block/{disk}/queue/scheduler") or "").replace("[", "").replace("]", "").split()
        offer(f"I/O scheduler ({disk})", [f"/sys/block/{disk}/queue/scheduler"],
              [s for s in ("none", "mq-deadline") if s in available], ("read", "flush", "write", "device"),
              "the kernel's scheduler orders and merges requests; fast devices with their own queues do better without")
        if suite in ("dss", "dw", "analytics", "device"):
            offer(f"Read-ahead ({disk})", [f"/sys/block/{disk}/queue/read_ahead_kb"], ["4096"], ("read", "device"),
                  "scans read sequentially; a large read-ahead keeps the device's queue full (tuned's "
                  "throughput-performance: 4096 KiB)")
    flagged = {c.setting: c for c in audit(root) if c.status == CHANGE}
    return sorted((replace(k, why=f"{k.why}; the tuning audit flags it (now {flagged[k.name].current}, recommended "
                                  f"{flagged[k.name].recommended})") if k.name in flagged else k for k in out),
                  key=lambda k: k.name not in flagged)


def _disk(root: SysRoot, device: str) -> str | None:
    """The whole disk a device (or partition) belongs to, whose queue settings apply to it."""
    if root.path(f"/sys/block/{device}/queue").exists():
        return device
    parent = root.path(f"/sys/class/block/{device}").resolve().parent.name
    return parent if root.path(f"/sys/block/{parent}/queue").exists() else None


def setting_value(root: SysRoot, relative: str) -> str:
    text = root.read(relative) or ""
    return (bracketed(text) if "[" in text else text.strip()) or ""


class HostChanges:
    """The host settings a trial changed, put back by ``restore`` (and by whoever finds the journal later)."""

    def __init__(self, root: SysRoot | None = None, journal: Path | None = None):
        self.root = root or sysroot()
        self.journal = journal or journal_path()
        self._guard = None

    def check_alone(self) -> None:
        """Refuses to start while another refbench's host changes are out: its "before" values would be ours."""
        from refbench.errors import UserError

        try:
            owner = json.loads(self.journal.read_text()).get("owner") or {}
        except (OSError, ValueError, AttributeError):
            return
        if owner.get("pid") != os.getpid() and owner_running(owner):
            raise UserError(f"another refbench tune (pid {owner['pid']}) is changing this host's settings "
                            f"({self.journal}); wait for it to end, or tune without --apply-host.")

    def apply(self, knob: Knob, value: str) -> None:
        self.check_alone()
        entries = _entries(self.journal)
        for relative in knob.paths:
            original = setting_value(self.root, relative)
            if not any(e["path"] == relative for e in entries):  # the first value seen is the one to go back to
                entries.append({"path": relative, "original": original, "setting": knob.name})
            self._write_journal(entries)
            self.root.path(relative).write_text(value)
        if self._guard is None:
            self._guard = _watch(self.journal)

    def restore(self) -> list[str]:
        """Puts every journaled value back; returns "setting: value" for each."""
        said = restore_journal(self.journal, self.root, owner_alive_ok=True)
        if self._guard is not None:
            self._guard.release()
            self._guard = None
        return said

    def _write_journal(self, entries: list[dict[str, Any]]) -> None:
        self.journal.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(self.journal, json.dumps({"owner": owner_identity(), "root": str(self.root.root),
                                                    "changes": entries}, indent=1))


def owner_identity() -> dict[str, int | None]:
    from refbench.children import start_time

    return {"pid": os.getpid(), "start": start_time(os.getpid())}


def owner_running(owner: dict[str, Any]) -> bool:
    """Whether the process a journal's owner_identity() names still runs (its pid not taken by another since)."""
    from refbench.children import start_time

    return bool(owner.get("pid")) and start_time(owner["pid"]) == owner.get("start")


def _entries(journal: Path) -> list[dict[str, Any]]:
    try:
        return list(json.loads(journal.read_text()).get("changes", []))
    except (OSError, ValueError, AttributeError):
        return []


def restore_journal(journal: Path | None = None, root: SysRoot | None = None, owner_alive_ok: bool = False) -> list[str]:
    """Puts back what the journal holds, unless its owner still runs (another tune at work) and ``owner_alive_ok`` is
    not given. Each value is taken out of the journal once written back; the journal goes when it is empty."""
    journal = journal or journal_path()
    try:
        data = json.loads(journal.read_text())
    except FileNotFoundError:
        return []
    except (OSError, ValueError):
        return [f"the host-changes journal {journal} cannot be read; check the settings it named by hand"]
    if not owner_alive_ok and owner_running(data.get("owner") or {}):
        return []
    root = root or SysRoot(data.get("root") or "/")
    entries, said = list(data.get("changes", [])), []
    while entries:
        entry = entries[-1]
        try:
            root.path(entry["path"]).write_text(entry["original"])
            said.append(f"{entry['setting']}: {entry['original']}")
        except OSError as exc:
            said.append(f"{entry['setting']}: could not be put back to {entry['original']} ({exc.strerror})")
        entries.pop()
        if entries:
            atomic_write_text(journal, json.dumps({**data, "changes": entries}, indent=1))
    journal.unlink(missing_ok=True)
    return list(dict.fromkeys(said))


def _watch(journal: Path):
    """The watchdog puts the journal back if tune is killed before it does."""
    from refbench.children import watchdog

    return watchdog().register(command=[sys.executable, "-m", "refbench.tune.host", str(journal)], grace_s=10)


if __name__ == "__main__":  # the watchdog's command: tune is gone
    for line in restore_journal(Path(sys.argv[1])):
        print(f"refbench: host setting put back: {line}", file=sys.stderr)
