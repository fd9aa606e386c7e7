"""The host settings `refbench tune --apply-host` may try, and the journal that puts every one of them back.

Each change is written to the journal (the file's path and its value before) before the setting is touched, and
taken out of it once the value is back. The journal is undone: after each trial run, at the end of the tune, on
Ctrl-C, by refbench's watchdog when tune is killed with SIGKILL, and at the start of any later refbench command when
its owner is gone (the watchdog was killed too). Only /proc/sys and /sys files are written, never a block device or
a file system's data.

A journal belongs to the process that wrote it (its pid and start time): no other process puts it back while that
one lives, and a tune that may change the host holds the host's lock for its whole life, so two tunes never change
it at once. Every user's refbench reads the journal (it is root's, readable by all) and says, when it cannot put it
back itself, who can.
"""

from __future__ import annotations

import fcntl
import json
import os
import sys
from pathlib import Path
from typing import Any

from refbench.fileio import Untrusted, atomic_write_text, open_state_file, read_state_file, trusted_state_directory
from refbench.engines.knobs import HOST_SETTINGS, host_knobs, setting_value, sysroot  # noqa: F401  (tune's names)
from refbench.host.sysfs import SysRoot
from refbench.tune.knobs import Knob

HOST_STATE_DIR = "/var/lib/refbench"


def state_dir() -> Path:
    """Where tune keeps its journals: REFBENCH_STATE_DIR; else root's /var/lib/refbench, which holds the host's journal
    (only root changes host settings) and root's own; else the user's own state directory (XDG_STATE_HOME,
    ~/.local/state): a user's journals are the user's, and root's never stand in another user's way."""
    if os.environ.get("REFBENCH_STATE_DIR"):
        return Path(os.environ["REFBENCH_STATE_DIR"])
    if os.geteuid() == 0:
        return Path(HOST_STATE_DIR)
    if os.environ.get("XDG_STATE_HOME"):
        return Path(os.environ["XDG_STATE_HOME"]) / "refbench"
    try:
        return Path.home() / ".local" / "state" / "refbench"
    except (RuntimeError, KeyError):  # no home directory known: nothing to find, and a journal cannot be written
        return Path("/nonexistent") / "refbench"


def make_state_dir(path: Path) -> Path:
    """``path`` made if missing, readable by everyone (0755): the host journal in it is read by every user's refbench
    (which says when a killed tune left host settings changed); what is private in it is so by its own mode. Untrusted
    when it is not this user's alone to write (fileio.trusted_state_directory): nothing is written into it then."""
    path.mkdir(mode=0o755, parents=True, exist_ok=True)
    if path.stat().st_uid == os.geteuid() and path.stat().st_mode & 0o755 != 0o755:
        path.chmod(path.stat().st_mode | 0o755)  # made 0700 by an older refbench
    trusted_state_directory(path)
    return path


def journal_path() -> Path:
    """The host's one journal, root's, where every user's refbench looks for it."""
    return Path(os.environ.get("REFBENCH_STATE_DIR") or HOST_STATE_DIR) / "host-changes.json"


def lock_path() -> Path:
    return journal_path().with_name("host-tune.lock")


class HostChanges:
    """The host settings a trial changed, put back by ``restore`` (and by whoever finds the journal later, once this
    process is gone). While it may change them (``claim``) it holds the host's lock: two tunes never change the host
    at once, so neither measures the other's change nor puts back the other's values."""

    def __init__(self, root: SysRoot | None = None, journal: Path | None = None):
        self.root = root or sysroot()
        self.journal = journal or journal_path()
        self._guard = None
        self._lock: int | None = None

    def claim(self) -> None:
        """Takes the host's lock for as long as this process lives (or until ``release``); refuses, in one sentence,
        while another tune holds it or its journal is still out."""
        from refbench.errors import UserError

        try:
            make_state_dir(self.journal.parent)
            fd = open_state_file(self.journal.with_name(lock_path().name), os.O_RDWR | os.O_CREAT)
        except Untrusted as exc:
            raise UserError(f"refbench keeps no host state in {self.journal.parent}: {exc}; set REFBENCH_STATE_DIR "
                            "to a directory of your own.") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
            os.close(fd)
            raise UserError(f"another refbench tune (pid {holder}) is changing this host's settings; wait for it to "
                            "end, or tune without --apply-host.") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        self._lock = fd
        self.check_alone()

    def release(self) -> None:
        if self._lock is not None:
            os.close(self._lock)
            self._lock = None

    def check_alone(self) -> None:
        """Refuses to start while another refbench's host changes are out: its "before" values would be ours."""
        from refbench.errors import UserError

        owner = _journal_owner(self.journal)
        if owner and owner != owner_identity() and owner_running(owner):
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
        """Puts back every value this process journaled; returns "setting: value" for each. Another tune's journal is
        never touched: it is that tune's to put back, or, once it is gone, the next refbench's."""
        said = restore_journal(self.journal, self.root, mine=True)
        if self._guard is not None:
            self._guard.release()
            self._guard = None
        return said

    def _write_journal(self, entries: list[dict[str, Any]]) -> None:
        make_state_dir(self.journal.parent)  # claim() has checked it: a change since is an error
        atomic_write_text(self.journal, json.dumps({"owner": owner_identity(), "root": str(self.root.root),
                                                    "changes": entries}, indent=1))


def owner_identity() -> dict[str, int | None]:
    from refbench.children import start_time

    return {"pid": os.getpid(), "start": start_time(os.getpid())}


def owner_running(owner: dict[str, Any]) -> bool:
    """Whether the process a journal's owner_identity() names still runs (its pid not taken by another since)."""
    from refbench.children import start_time

    return bool(owner.get("pid")) and start_time(owner["pid"]) == owner.get("start")


# The only files a host-changes journal may name: the kernel's settings.
HOST_SETTING_TREES = ("/proc/sys/", "/sys/")


def read_journal(journal: Path, owners: tuple[int, ...] | None = None) -> dict[str, Any]:
    """A journal's {"owner", "changes", …}, written by this user (or ``owners``); FileNotFoundError when there is none,
    Untrusted when it is not one this user wrote, ValueError (or another OSError) when it cannot be read as one."""
    data = json.loads(read_state_file(journal, owners))
    if not isinstance(data, dict) or not isinstance(data.get("owner") or {}, dict) or \
            not isinstance(data.get("changes", []), list) or \
            not all(isinstance(e, dict) and all(isinstance(e.get(k), str) for k in ("path", "original", "setting"))
                    for e in data.get("changes", [])):
        raise ValueError(f"{journal} is not a journal of changes")
    for entry in data.get("changes", []):
        path = "/" + entry["path"].lstrip("/")
        if not path.startswith(HOST_SETTING_TREES) or os.path.normpath(path) != path:
            raise Untrusted(f"it names {entry['path']!r}, not a setting under /proc/sys or /sys")
    return data


def _journal_owner(journal: Path) -> dict[str, Any]:
    try:
        return read_journal(journal).get("owner") or {}
    except (OSError, ValueError, Untrusted):
        return {}


def _entries(journal: Path) -> list[dict[str, Any]]:
    try:
        return list(read_journal(journal).get("changes", []))
    except (OSError, ValueError, Untrusted):
        return []


def not_used(journal: Path, why: Untrusted) -> str:
    return f"warning: {journal} was not used: {why}"


def restore_journal(journal: Path | None = None, root: SysRoot | None = None, mine: bool = False) -> list[str]:
    """Puts back what the journal holds: with ``mine``, only if this process wrote it; else only if the process that
    wrote it is gone (a tune that still runs puts back its own). Each value is taken out of the journal once written
    back; the journal goes when it is empty."""
    journal, root = journal or journal_path(), root or sysroot()
    try:
        data = read_journal(journal)
    except FileNotFoundError:
        return []
    except Untrusted as why:
        return [not_used(journal, why)]
    except (OSError, ValueError):
        return [f"the host-changes journal {journal} cannot be read; check the settings it named by hand"]
    owner = data.get("owner") or {}
    if (owner != owner_identity()) if mine else owner_running(owner):
        return []
    if os.path.abspath(data.get("root") or "/") != os.path.abspath(root.root):
        return [not_used(journal, Untrusted(f"it names the tree {data.get('root')!r}, not {str(root.root)!r}"))]
    entries, said = list(data.get("changes", [])), []
    try:
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
    except OSError as exc:
        said.append(f"the journal {journal} could not be updated ({exc.strerror}); check the settings it names by hand")
    return list(dict.fromkeys(said))


def left_by_a_killed_tune() -> list[str]:
    """What any refbench command does first: puts back the host settings of a tune that was killed with its watchdog
    (its journal's writer is gone), as sentences to print. A user who cannot (not root) is told once; a journal it
    cannot read is skipped with one warning; neither stops the command."""
    journal = journal_path()
    try:
        # Root's journal, read by another user only to say that root can put it back.
        owner = read_journal(journal, owners=(0, os.geteuid())).get("owner") or {}
    except FileNotFoundError:
        return []
    except Untrusted as why:
        return [not_used(journal, why)]
    except (OSError, ValueError) as exc:
        return [f"warning: the host-changes journal {journal} cannot be read "
                f"({getattr(exc, 'strerror', None) or exc}); skipped"]
    if owner_running(owner):
        return []
    if os.geteuid() != 0 and not os.environ.get("REFBENCH_SYSROOT"):
        return [f"warning: a tune that was killed left host settings changed ({journal}); run any refbench command as "
                "root to put them back"]
    return [line if line.startswith("warning: ") else f"a tune that was killed had changed a host setting, now put "
            f"back: {line}" for line in restore_journal(journal)]


def _watch(journal: Path):
    """The watchdog puts the journal back if tune is killed before it does."""
    from refbench.children import watchdog

    return watchdog().register(command=[sys.executable, "-m", "refbench.tune.host", str(journal)], grace_s=10)


if __name__ == "__main__":  # the watchdog's command: tune is gone
    for line in restore_journal(Path(sys.argv[1])):
        print(f"refbench: host setting put back: {line}", file=sys.stderr)
