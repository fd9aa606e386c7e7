"""Running out of something — disk space, memory, file descriptors, database connections — in words a user can act
on. A run that stops for one of these is not broken: once the resource is freed, ``refbench resume`` continues it,
so these end with that advice and their own exit status (75, EX_TEMPFAIL: try again later)."""

from __future__ import annotations

import errno
import os
import resource
from pathlib import Path

from refbench.errors import UserError

# Phrases the engines put in their messages (PostgreSQL, DuckDB, the C library), for errors that arrive as text.
_PHRASES = {
    "no space left on device": "disk space", "disk quota exceeded": "disk quota", "could not extend file": "disk space",
    "out of memory": "memory", "cannot allocate memory": "memory", "too many open files": "file descriptors",
    "too many clients already": "database connections", "remaining connection slots are reserved": "database connections",
}
# SQLSTATEs of class 53, insufficient resources.
_SQLSTATES = {"53100": "disk space", "53200": "memory", "53300": "database connections"}


class ResourceExhausted(UserError):
    exit_code = 75


def resource_of(exc: BaseException) -> str | None:
    """Which resource ran out, if that is what ``exc`` (or an exception it was raised from) says."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, MemoryError):
            return "memory"
        if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
            return "disk space"
        if isinstance(exc, OSError) and exc.errno in (errno.EMFILE, errno.ENFILE):
            return "file descriptors"
        if isinstance(exc, OSError) and exc.errno == errno.ENOMEM:
            return "memory"
        if (sqlstate := getattr(exc, "sqlstate", None)) in _SQLSTATES:
            return _SQLSTATES[sqlstate]
        if type(exc).__name__ == "OutOfMemoryException":  # DuckDB
            return "memory"
        text = str(exc).lower()
        for phrase, what in _PHRASES.items():
            if phrase in text:
                return what
        exc = exc.__cause__ or exc.__context__
    return None


def explain(exc: BaseException, run_path: Path | None = None, places: list[Path] = ()) -> UserError | None:
    """The one sentence for a run stopped by ``exc``, or None when no resource ran out. ``places`` are the
    directories the run writes to: when the error does not name the file, the full one among them is named. A file
    system mounted read-only is a resource too (it may be remounted); a file this user may not write is not."""
    if isinstance(exc, OSError) and exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM) and exc.filename:
        if exc.errno == errno.EROFS:
            return ResourceExhausted(f"cannot write {exc.filename}: its file system is read-only; remount it "
                                     "read-write, or give another --runs-dir.")
        return UserError(f"cannot write {exc.filename}: {exc.strerror.lower()}; run as its owner, or give another "
                         "--runs-dir.")
    what = resource_of(exc)
    if what is None:
        return None
    detail = _detail(exc)
    if what == "disk space" and not (isinstance(exc, OSError) and exc.filename):
        full = [f"{p} has {free / 1e6:,.1f} MB free" for p in [run_path, *places]
                if p is not None and (free := _free_bytes(p)) < FULL_BYTES]
        detail += f"; {', '.join(dict.fromkeys(full))}" if full else ""
    hint = {
        "disk space": "free space there",
        "disk quota": "raise the quota or free space there",
        "memory": "lower the scale or the memory settings, or stop what else uses memory",
        "file descriptors": f"raise the limit (ulimit -n, now {resource.getrlimit(resource.RLIMIT_NOFILE)[0]})",
        "database connections": "lower the user count or raise the server's max_connections",
    }[what]
    if run_path is None:
        return ResourceExhausted(f"out of {what} ({detail}); {hint}.")
    return ResourceExhausted(f"the run stopped: out of {what} ({detail}); {hint}, then continue with: "
                             f"refbench resume {run_path}")


FULL_BYTES = 8 * 2**20  # less than this free: the file system that filled up


def _free_bytes(path: Path) -> float:
    while not path.exists() and path != path.parent:
        path = path.parent
    try:
        st = os.statvfs(path)
    except OSError:
        return float("inf")
    return st.f_bavail * st.f_frsize


def _detail(exc: BaseException) -> str:
    if isinstance(exc, OSError):
        return f"{exc.strerror}: {exc.filename}" if exc.filename else exc.strerror
    first_line = next((line for line in str(exc).splitlines() if line.strip()), "")  # engines add advice below
    return " ".join(first_line.split()).rstrip(".") or type(exc).__name__
