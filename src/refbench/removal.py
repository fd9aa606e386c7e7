"""Removal that cannot leave the place it was meant for, even run as root in directories other users can write.

A path is walked down from "/" one component at a time with O_NOFOLLOW, each directory held by a file descriptor,
and what is removed is compared with what the run recorded of it (device, inode, owner) on the opened descriptor
itself: a symbolic link, or a directory renamed in by whoever can write a parent, is never followed nor emptied.
Path-based removal (shutil.rmtree(path)) checks the last component only, and follows every link above it.

A run's records are written by whoever made the run, and so vouch for nothing beyond that user's own rights: root
removing another user's run data does it as that user (remove_as), so that no record can aim root's rights at a
directory its maker could not remove.
"""

from __future__ import annotations

import errno
import json
import os
import pwd
import stat
from pathlib import Path
from typing import Any

NOGROUP = 65534
DIRECTORY_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class Kept(Exception):
    """Why a place is not removed, as the end of one sentence that begins with the place ("kept PATH: ...")."""


def identity(st: os.stat_result) -> dict[str, int]:
    return {"dev": st.st_dev, "ino": st.st_ino, "uid": st.st_uid}


def _same(st: os.stat_result, recorded: dict[str, Any]) -> bool:
    return (st.st_dev, st.st_ino, st.st_uid) == (recorded.get("dev"), recorded.get("ino"), recorded.get("uid"))


def _what(st: os.stat_result) -> str:
    if stat.S_ISLNK(st.st_mode):
        return "a symbolic link"
    return "a directory" if stat.S_ISDIR(st.st_mode) else "a file"


def _user(uid: int) -> str:
    try:
        return f"user {pwd.getpwuid(uid).pw_name}"
    except KeyError:
        return f"uid {uid}"


def open_directory(path: Path) -> int:
    """A descriptor of the directory ``path`` (absolute), reached from "/" without following a symbolic link at any
    component. FileNotFoundError when a component is gone; Kept when one is a link or not a directory."""
    fd = os.open("/", DIRECTORY_FLAGS)
    walked = Path("/")
    try:
        for part in Path(path).parts[1:]:
            try:
                inner = os.open(part, DIRECTORY_FLAGS, dir_fd=fd)
            except OSError as exc:
                if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
                    raise
                raise Kept(f"{walked / part} on the way to it is now {_what(os.lstat(part, dir_fd=fd))}, not the "
                           "directory this run saw") from None
            os.close(fd)
            fd, walked = inner, walked / part
    except BaseException:
        os.close(fd)
        raise
    return fd


class Place:
    """A place opened for removal: its parent's descriptor, its name there, what it is, and (a directory) its own
    descriptor, so that a rename after the checks changes nothing about what is emptied."""

    def __init__(self, parent_fd: int, name: str, st: os.stat_result, fd: int | None):
        self.parent_fd, self.name, self.stat, self.fd = parent_fd, name, st, fd

    def __enter__(self) -> "Place":
        return self

    def __exit__(self, *exc: Any) -> None:
        for fd in (self.fd, self.parent_fd):
            if fd is not None:
                os.close(fd)

    def read_text(self, name: str) -> str | None:
        """A regular file directly in this directory, never through a link; None when there is none."""
        if self.fd is None:
            return None
        try:
            fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=self.fd)
        except OSError:
            return None
        with os.fdopen(fd, errors="replace") as f:
            return f.read(4096) if stat.S_ISREG(os.fstat(fd).st_mode) else None


def open_place(path: Path, *, parent: dict[str, Any] | None = None, recorded: dict[str, Any] | None = None,
               owners: set[int] | None = None, trusted_parent: bool = False) -> Place | None:
    """Opens ``path`` for removal if it is still what the run made: its parent the directory recorded as ``parent``,
    itself the one recorded as ``recorded`` (or, with no record, owned by one of ``owners``), and not a symbolic link.
    ``trusted_parent``: the parent is the one the user named (a run directory), opened as given. None when the place
    is gone; Kept when it is there but no longer the run's."""
    path = Path(path)
    try:
        parent_fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC) if trusted_parent \
            else open_directory(path.absolute().parent)
    except FileNotFoundError:
        return None
    try:
        if parent is not None and not _same(os.fstat(parent_fd), parent):
            raise Kept(f"the directory it was in, {path.parent}, is no longer the one this run saw (it was moved or "
                       "replaced)")
        try:
            st = os.lstat(path.name, dir_fd=parent_fd)
        except FileNotFoundError:
            os.close(parent_fd)
            return None
        if stat.S_ISLNK(st.st_mode):
            raise Kept(f"it is now a symbolic link, not the {'file or directory' if recorded is None else 'place'} "
                       "this run created")
        fd = None
        if stat.S_ISDIR(st.st_mode):
            try:
                fd = os.open(path.name, DIRECTORY_FLAGS, dir_fd=parent_fd)
            except OSError as exc:
                if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
                    raise
                raise Kept("it was replaced while refbench looked at it") from None
            st = os.fstat(fd)
        place = Place(parent_fd, path.name, st, fd)
    except BaseException:
        os.close(parent_fd)
        raise
    if recorded is not None and not _same(st, recorded):
        place.__exit__()
        raise Kept(f"it is now {_what(st)} of {_user(st.st_uid)}, not the one this run created (device "
                   f"{recorded.get('dev')}, inode {recorded.get('ino')})")
    # Whatever a record says: the run's maker writes its records, and can record anyone's directory.
    if owners is not None and st.st_uid not in owners:
        place.__exit__()
        raise Kept(f"it belongs to {_user(st.st_uid)}, not to this run")
    return place


def remove(place: Place, shown: Path) -> tuple[int, str]:
    """Removes an opened place (a directory with everything in it); returns the bytes it held on disk and what
    failed ("" when nothing did). ``shown``: its path, for the messages."""
    errors: list[str] = []
    if place.fd is None:
        size = place.stat.st_blocks * 512
        _try(errors, shown, os.unlink, place.name, dir_fd=place.parent_fd)
        return (0 if errors else size), "; ".join(errors)
    size = _empty(place.fd, shown, errors)
    _try(errors, shown, os.rmdir, place.name, dir_fd=place.parent_fd)
    return size, "; ".join(errors[:3])


def remove_as(place: Place, shown: Path, uid: int | None) -> tuple[int, str]:
    """remove(), with the rights of user ``uid`` alone (None: this process's own): root cleaning another user's run
    removes only what that user could remove, whatever the run's records say — the kernel judges each unlink and rmdir
    against that user's rights, in a child process that has become the user. Returns what remove() does."""
    if uid is None or uid == os.geteuid():
        return remove(place, shown)
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: become the user, remove, say how it went, and end without running anything else
        try:
            os.close(read_end)
            _become(uid)
            result = remove(place, shown)
        except BaseException as exc:  # noqa: BLE001 - whatever happened is said to the parent
            result = (0, f"{shown}: {exc}")
        try:
            os.write(write_end, json.dumps(result).encode())
        finally:
            os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as f:
        said = f.read()
    os.waitpid(pid, 0)
    try:
        size, problem = json.loads(said)
        return int(size), str(problem)
    except (ValueError, TypeError):
        return 0, f"{shown}: the removal as {_user(uid)} ended without a word"


def _become(uid: int) -> None:
    """This process takes user ``uid``'s identity for good: its groups, its group, then the user itself."""
    try:
        account = pwd.getpwuid(uid)
        groups, gid = os.getgrouplist(account.pw_name, account.pw_gid), account.pw_gid
    except KeyError:  # a user without an entry in the user database: no group of its own, nobody's
        groups, gid = [], NOGROUP
    os.setgroups(groups)
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)


def _try(errors: list[str], shown: Path, fn: Any, *args: Any, **kwargs: Any) -> bool:
    try:
        fn(*args, **kwargs)
        return True
    except OSError as exc:
        errors.append(f"{shown}: {exc.strerror or exc}")
        return False


def _empty(fd: int, shown: Path, errors: list[str]) -> int:
    """Removes everything in the directory ``fd`` by descriptor, entering no link; returns the bytes it held."""
    size = 0
    with os.scandir(fd) as entries:
        for entry in list(entries):
            where = shown / entry.name
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue  # gone meanwhile
            if not stat.S_ISDIR(st.st_mode):
                if _try(errors, where, os.unlink, entry.name, dir_fd=fd):
                    size += st.st_blocks * 512
                continue
            try:
                inner = os.open(entry.name, DIRECTORY_FLAGS, dir_fd=fd)
            except OSError as exc:
                errors.append(f"{where}: {exc.strerror or exc}")
                continue
            try:
                size += _empty(inner, where, errors)
            finally:
                os.close(inner)
            _try(errors, where, os.rmdir, entry.name, dir_fd=fd)
    return size


def make_directory(path: Path) -> dict[str, Any] | None:
    """Creates the directory ``path`` (absolute, its parent reached without following links) and returns what
    identifies it and its parent ({"parent", "found"}); None when it cannot (the caller's own mkdir then says why)."""
    try:
        parent_fd = open_directory(path.parent)
    except (OSError, Kept):
        return None
    try:
        os.mkdir(path.name, dir_fd=parent_fd)
        fd = os.open(path.name, DIRECTORY_FLAGS, dir_fd=parent_fd)
        try:
            return {"parent": identity(os.fstat(parent_fd)), "found": identity(os.fstat(fd))}
        finally:
            os.close(fd)
    except OSError:
        return None
    finally:
        os.close(parent_fd)


def parent_identity(path: Path) -> dict[str, int] | None:
    """What identifies the directory ``path`` is in, reached without following links; None when it is not one."""
    try:
        fd = open_directory(path.parent)
    except (OSError, Kept):
        return None
    try:
        return identity(os.fstat(fd))
    finally:
        os.close(fd)


def remove_path(path: Path, as_user: int | None = None, **expected: Any) -> str:
    """open_place (``expected``: its keywords), then remove (remove_as ``as_user``); returns what failed ("" when
    nothing did, or the place was gone). Kept when the place is no longer the run's."""
    place = open_place(path, **expected)
    if place is None:
        return ""
    with place:
        return remove_as(place, path, as_user)[1]


def remove_quietly(path: Path, as_user: int | None = None) -> None:
    """Removes a directory tree refbench made for a moment (a job's WORK, a tune's copy of its database), entering no
    link on the way to it or in it; what it cannot remove stays, as shutil.rmtree(ignore_errors=True) would leave it."""
    try:
        remove_path(Path(path).absolute(), as_user)
    except (OSError, Kept):
        pass
