"""Writing files so that a crash (even kill -9) leaves either the old content or the new, never half; and reading the
files a user hands refbench so that a hostile one costs one sentence."""

from __future__ import annotations

import errno
import hashlib
import json
import os
import secrets
import stat
from contextlib import contextmanager
from pathlib import Path
from typing import Any, BinaryIO, Callable, Iterator

from refbench.errors import UserError


# mkstemp makes files 0600, and a umask of 077 would make an ordinary write 0600 too; results (records, tables,
# charts, the report) are for handing on, so they are readable by everyone whatever the umask. Secrets are written
# by write_private instead, 0600 in a 0700 directory.
SHARED_MODE = 0o644


@contextmanager
def atomic_writer(path: Path, mode: int = SHARED_MODE) -> Iterator[BinaryIO]:
    """A file to write in pieces (a table of a day's samples need not fit in memory) that appears at ``path``
    only once the ``with`` block ends without an error. Its directory is reached as open_directory reaches it, and
    the file takes its place by rename: whatever was at ``path`` (a link, a FIFO) is replaced, never written through."""
    path = Path(path)
    dir_fd = open_directory(path.parent, create=True)
    try:
        odd = _odd_kind(path.name, dir_fd)
        tmp = f".tmp-{secrets.token_hex(8)}{path.suffix}"
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=dir_fd)
        except OSError as exc:  # named by the file it was for, not the temporary name
            raise OSError(exc.errno, exc.strerror, str(path)) from None
        try:
            os.fchmod(fd, mode)
            _own_as_directory(fd, dir_fd)
            with os.fdopen(fd, "wb") as f:
                yield f
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path.name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        except BaseException as exc:
            try:
                os.unlink(tmp, dir_fd=dir_fd)
            except OSError:
                pass
            if isinstance(exc, OSError) and exc.filename is None:  # a failed write names no file: name the one it was for
                raise OSError(exc.errno, exc.strerror, str(path)) from exc
            raise
        if odd:
            odd_file(path, f"was {odd}, not a file refbench wrote: replaced")
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def atomic_write_bytes(path: Path, data: bytes, mode: int = SHARED_MODE) -> None:
    with atomic_writer(path, mode) as f:
        f.write(data)


def atomic_write_text(path: Path, text: str, mode: int = SHARED_MODE) -> None:
    atomic_write_bytes(path, text.encode(), mode)


def write_private(path: Path, text: str) -> None:
    """Writes ``text`` to ``path`` atomically, readable by its owner only (0600, in a 0700 directory it creates)."""
    path = Path(path)
    make_directories(path.parent, mode=0o700)
    atomic_write_bytes(path, text.encode(), mode=0o600)


def read_private(path: Path) -> str | None:
    """What ``write_private`` wrote, or None if there is no such file or it is not ours to read (another user's run:
    its report and listing still work, with the passwords masked); something else than a file is said and skipped."""
    try:
        return read_regular(path).decode()
    except (FileNotFoundError, PermissionError):
        return None
    except NotRegular as odd:
        skipped(path, odd.kind)
        return None


def atomic_write_json(path: Path, obj: Any) -> None:
    atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=False, default=_json_default) + "\n")


def _json_default(value: Any) -> Any:
    if isinstance(value, Path):
        return str(value)
    if hasattr(value, "item"):  # numpy scalars
        return value.item()
    raise TypeError(f"cannot store {type(value).__name__} in JSON")


def read_json(path: Path) -> Any:
    return json.loads(read_regular(path))


def remove_temp_files(directory: Path) -> int:
    """Removes the leftovers of writes that a crash interrupted; returns how many there were. Links are not
    followed (rglob follows none)."""
    removed = 0
    if directory.is_dir():
        for leftover in directory.rglob(".tmp-*"):
            leftover.unlink(missing_ok=True)
            removed += 1
    return removed


def make_directories(path: Path, mode: int = 0o755) -> Path:
    """``path`` and the directories above it that are missing (made with ``mode``), as open_directory reaches them."""
    os.close(open_directory(path, create=True, mode=mode))
    return path


def writable_directory(path: Path, what: str) -> None:
    """Creates ``path`` if needed; a directory that cannot be made or written ends the run with one sentence."""

    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(f"cannot create {what} {path}: {exc.strerror}.") from None
    if not os.access(path, os.W_OK):
        raise UserError(f"{what} {path} is not writable.")


# ---- directories another user may change -------------------------------------------------------------------------
# Root reports, resumes and cleans runs that other users made, in directories they own: a link one of them put there
# (tables -> a directory only root may write) would have root write where that user chose. So every directory refbench
# writes in is reached component by component, each opened relative to the one before without following a link; a
# link is followed only where no other user could have made or changed it.

LINK_HOPS = 40  # as the kernel's own limit


class LinkRefused(OSError, UserError):
    """A directory on the way to a file refbench writes is a link another user could have made or changed: one
    sentence, and nothing written through it."""

    def __init__(self, link: Path, st: os.stat_result):
        super().__init__(errno.ELOOP, f"{link} is a link that another user could have made (its owner is uid "
                         f"{st.st_uid}), and refbench writes through no such link: make it a directory.", str(link))

    def __str__(self) -> str:
        return self.strerror


def changeable_by_others(directory: Path) -> bool:
    """Whether a user other than root and this one may change ``directory`` (see _changeable_by_others)."""
    try:
        return _changeable_by_others(os.stat(directory))
    except OSError:
        return False


def _changeable_by_others(st: os.stat_result) -> bool:
    """Whether a user other than root and this one may change the directory. A group's write counts for root (whose
    writes are what a link could misdirect), not for a user in a group of their own (a home directory of 0775)."""
    group = bool(st.st_mode & 0o020) and (os.geteuid() == 0 and st.st_gid != 0)
    return st.st_uid not in (0, os.geteuid()) or bool(st.st_mode & 0o002) or group


def _trusted_link(directory: os.stat_result, link: os.stat_result) -> bool:
    """A link only root and this user could have put there: in a directory no one else may write, or in a sticky
    one (/tmp) owned by root or this user."""
    if not _changeable_by_others(directory):
        return True
    return bool(directory.st_mode & stat.S_ISVTX) and directory.st_uid in (0, os.geteuid()) \
        and link.st_uid in (0, os.geteuid())


def open_directory(path: Path, create: bool = False, mode: int = 0o755) -> int:
    """A descriptor of the directory ``path``, reached from / one name at a time without following a link that
    another user could have made (LinkRefused); ``create``: missing directories are made, owned as the directory
    they are made in is (_own_as_directory)."""
    names = list(Path(os.path.abspath(path)).parts[1:])
    fd = os.open("/", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    walked, hops = Path("/"), 0
    try:
        while names:
            name = names.pop(0)
            try:
                next_fd = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), str(walked / name)) from None
                try:
                    os.mkdir(name, mode, dir_fd=fd)
                except FileExistsError:  # made meanwhile by another process: opened as it is, below
                    pass
                except OSError as exc:
                    raise OSError(exc.errno, exc.strerror, str(walked / name)) from None
                else:
                    made = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
                    _own_as_directory(made, fd)
                    os.close(made)
                names.insert(0, name)
                continue
            except OSError as exc:
                if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
                    raise
                st = os.lstat(name, dir_fd=fd)
                if not stat.S_ISLNK(st.st_mode):
                    raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), str(walked / name)) from None
                if not _trusted_link(os.fstat(fd), st):
                    raise LinkRefused(walked / name, st) from None
                hops += 1
                if hops > LINK_HOPS:
                    raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), str(walked / name)) from None
                target = Path(os.readlink(name, dir_fd=fd))
                names[:0] = list(target.parts[1:] if target.is_absolute() else target.parts)
                if target.is_absolute():
                    os.close(fd)
                    fd = os.open("/", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
                    walked = Path("/")
                continue
            os.close(fd)
            fd, walked = next_fd, walked / name
        return fd
    except BaseException:
        os.close(fd)
        raise


def _own_as_directory(fd: int, dir_fd: int) -> None:
    """Root writing in another user's directory (a run it reports or resumes) leaves what it made that user's, as
    the run's other files are."""
    if os.geteuid() == 0:
        st = os.fstat(dir_fd)
        if st.st_uid != 0:
            os.fchown(fd, st.st_uid, st.st_gid)


# ---- files refbench reads back (records, verdicts, locks, tables) ---------------------------------------------------
# A FIFO where a record belongs would hold every reader until someone writes to it; a link would read (or, for a lock,
# truncate) what another file holds. Only a regular file is read; anything else is one warning naming it.

_ODD_FILES: list[Callable[[str], None]] = []
_SAID: set[str] = set()


def on_odd_file(say: Callable[[str], None]) -> None:
    """Where odd_file's sentences go (the command's warnings); until set, nowhere."""
    _ODD_FILES[:] = [say]
    _SAID.clear()


def odd_file(path: Path, what: str) -> None:
    """Says once per command that ``path`` ``what`` ("is a FIFO, not a file: skipped")."""
    sentence = f"{path} {what}"
    if sentence not in _SAID:
        _SAID.add(sentence)
        for say in _ODD_FILES:
            say(sentence)


def skipped(path: Path, kind: str | None = None, what: str = "skipped") -> None:
    """Says once that ``path`` is not a regular file (``kind``: which, else read from it) and so ``what``."""
    if kind is None:
        try:
            kind = file_kind(os.lstat(path).st_mode)
        except OSError:
            kind = "not readable"
    odd_file(Path(path), f"is {kind}, not a file refbench wrote: {what}")


def file_kind(mode: int) -> str:
    return "a directory" if stat.S_ISDIR(mode) else "a FIFO" if stat.S_ISFIFO(mode) else \
        "a socket" if stat.S_ISSOCK(mode) else "a link" if stat.S_ISLNK(mode) else \
        "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "not a regular file"


def _odd_kind(name: str, dir_fd: int) -> str | None:
    """What is at ``name`` when it is there and not a regular file (a link, a FIFO…), else None."""
    try:
        st = os.lstat(name, dir_fd=dir_fd)
    except FileNotFoundError:
        return None
    return None if stat.S_ISREG(st.st_mode) else file_kind(st.st_mode)


class NotRegular(OSError):
    """A file refbench reads back that is a link, FIFO, socket, device or directory: ``kind`` says which."""

    def __init__(self, path: Path, kind: str):
        super().__init__(errno.EINVAL, f"is {kind}, not a file", str(path))
        self.kind = kind


def open_regular(path: Path, flags: int = os.O_RDONLY, mode: int = 0o644) -> int:
    """A descriptor of ``path`` when it is a regular file, opened without following a link or blocking on a FIFO;
    NotRegular otherwise (FileNotFoundError when there is nothing). A file opened to write (a lock) is opened in its
    directory as open_directory reaches it, and made (O_CREAT) owned as that directory is."""
    path = Path(path)
    writes = flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT)
    dir_fd = open_directory(path.parent) if writes else None
    name = path.name if writes else str(path)
    try:
        made = False
        try:
            try:
                exclusive = os.O_EXCL if flags & os.O_CREAT else 0
                fd = os.open(name, flags | exclusive | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, mode, dir_fd=dir_fd)
                made = bool(exclusive)
            except FileExistsError:
                fd = os.open(name, (flags & ~os.O_CREAT) | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dir_fd)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise NotRegular(path, "a link") from None
            if exc.errno in (errno.ENXIO, errno.EISDIR):  # a socket; a directory opened for writing
                raise NotRegular(path, file_kind(os.lstat(name, dir_fd=dir_fd).st_mode)) from None
            raise OSError(exc.errno, exc.strerror, str(path)) from None
        if made and dir_fd is not None:
            _own_as_directory(fd, dir_fd)
    finally:
        if dir_fd is not None:
            os.close(dir_fd)
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or (writes and st.st_nlink > 1):
        os.close(fd)
        raise NotRegular(path, file_kind(st.st_mode) if not stat.S_ISREG(st.st_mode) else "a hard link of another file")
    if flags & os.O_NONBLOCK == 0:
        os.set_blocking(fd, True)
    return fd


def open_own_file(path: Path, flags: int) -> int:
    """open_regular, for a file refbench keeps open to write (a lock, the telemetry): something else in its place (a
    link, a FIFO) no refbench made, and it is replaced, which is said."""
    while True:
        try:
            return open_regular(path, flags)
        except NotRegular as odd:
            odd_file(path, f"was {odd.kind}, not a file refbench made: replaced")
            path.unlink(missing_ok=True)


def read_regular(path: Path) -> bytes:
    """The bytes of the regular file ``path`` (see open_regular)."""
    with os.fdopen(open_regular(path), "rb") as f:
        return f.read()


def digest(path: Path) -> str:
    """The SHA-256 of the regular file ``path``'s content, hex: what a data file's marker records when it is written
    and compares before the file is used again (a changed digit, a cut line, bytes a disk returned wrong)."""
    with os.fdopen(open_regular(path), "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def is_regular(path: Path) -> bool:
    """Whether ``path`` is a regular file, itself and not through a link."""
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except (OSError, ValueError):
        return False


# ---- files a user hands refbench (plans, acceptance files) -----------------------------------------------------------

# A plan or an acceptance file is a page of text: anything near this size is not one, and parsing it would only cost.
USER_FILE_LIMIT = 1 << 20
# TOML nests tables and arrays, and Python's TOML reader recurses for each level (a few thousand levels end in
# RecursionError) and takes time quadratic in a dotted key's parts (200,000 took minutes and gigabytes). No plan comes
# near these: the reader is not handed a file that goes past them.
TOML_MAX_NESTING = 32
TOML_MAX_DOTS_PER_LINE = 64


def read_user_file(path: str | Path, what: str, limit: int = USER_FILE_LIMIT) -> str:
    """The text of a file a user named (``what``: how to call it in a sentence): a regular file of at most ``limit``
    bytes, in UTF-8. A FIFO, a device (/dev/zero), a directory, a larger file or another encoding is one sentence
    (UserError), read no further; opening never blocks."""

    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise UserError(f"{what} {path} does not exist.") from None
    except OSError as exc:
        raise UserError(f"{what} {path} cannot be read: {exc.strerror}.") from None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        kind = "a directory" if stat.S_ISDIR(st.st_mode) else "a FIFO" if stat.S_ISFIFO(st.st_mode) else \
            "a device" if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode) else "not a regular file"
        raise UserError(f"{what} {path} is {kind}, not a file: give a regular file.")
    with os.fdopen(fd, "rb") as f:
        try:
            data = f.read(limit + 1)
        except OSError as exc:
            raise UserError(f"{what} {path} cannot be read: {exc.strerror}.") from None
    if len(data) > limit:
        raise UserError(f"{what} {path} is larger than {limit // 1024:,} KiB: not a file refbench reads.")
    try:
        return data.decode()
    except UnicodeDecodeError:
        raise UserError(f"{what} {path} is not text (not UTF-8).") from None


def toml_shape_problem(text: str) -> str | None:
    """Where a TOML text nests deeper than TOML_MAX_NESTING tables and arrays, or a line holds more than
    TOML_MAX_DOTS_PER_LINE dots (a key of that many parts), outside strings and comments: "line N: …"; else None.
    Read in one pass, without recursion."""
    depth, dots, line, i, n = 0, 0, 1, 0, len(text)
    while i < n:
        c = text[i]
        if c == "\n":
            line, dots = line + 1, 0
        elif c == "#":
            while i < n and text[i] != "\n":
                i += 1
            continue
        elif c in "\"'":
            quote = text[i:i + 3] if text[i:i + 3] in ('"""', "'''") else c
            i += len(quote)
            while i < n and not text.startswith(quote, i):
                if text[i] == "\\" and quote[0] == '"':
                    i += 1
                elif text[i] == "\n":
                    line += 1
                i += 1
            i += len(quote)
            continue
        elif c in "[{":
            depth += 1
            if depth > TOML_MAX_NESTING:
                return f"line {line}: tables and arrays nested more than {TOML_MAX_NESTING} deep"
        elif c in "]}":
            depth = max(0, depth - 1)
        elif c == ".":
            dots += 1
            if dots > TOML_MAX_DOTS_PER_LINE:
                return f"line {line}: more than {TOML_MAX_DOTS_PER_LINE} dots (a key of that many parts)"
        i += 1
    return None


def parse_toml(text: str, label: str) -> dict[str, Any]:
    """A TOML text a user gave (``label``: the file's name in messages), read as tomllib reads it once its shape is
    bounded (toml_shape_problem). A text that is not TOML, or too deeply made, is one sentence (UserError) naming the
    line."""
    import re
    import tomllib


    if problem := toml_shape_problem(text):
        raise UserError(f"{label}: not a file refbench reads: {problem}.")
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        message = str(exc)
        m = re.search(r"\s*\(at line (\d+), column (\d+)\)", message)
        if m:
            message = message[: m.start()] + message[m.end():]
            raise UserError(f"{label}:{m.group(1)}:{m.group(2)}: not valid TOML: {message.rstrip('.')}.") from None
        raise UserError(f"{label}: not valid TOML: {message.rstrip('.')}.") from None
    except RecursionError:  # the shape check keeps this out of reach; should tomllib recurse more, still one sentence
        raise UserError(f"{label}: not a file refbench reads: nested too deeply.") from None


# ---- state refbench keeps between commands (tune's journals and lock) ----------------------------------------------
# Root acts on these (it puts host and server settings back from them): one another user could write, or point
# somewhere else with a link, would have root write what that user chose. They are used only when refbench's own
# user wrote them; anything else is left alone, with a warning.

STATE_FILE_LIMIT = 1 << 20  # a journal is a few lines


class Untrusted(Exception):
    """A state file (or its directory) refbench will not act on; the message says why, after its path."""


def _owned_and_closed(st: os.stat_result, owners: tuple[int, ...], what: str) -> None:
    if st.st_uid not in owners:
        raise Untrusted(f"{what} is owned by uid {st.st_uid}, not by this user (uid {os.geteuid()})")
    if st.st_mode & 0o022:
        raise Untrusted(f"{what} may be written by others (mode {stat.S_IMODE(st.st_mode):o})")


def trusted_state_directory(directory: Path, owners: tuple[int, ...] | None = None) -> None:
    """Raises Untrusted unless ``directory`` is this user's (or ``owners``'), written by no one else, and reached
    through no link: each directory above it a real directory of root's or this user's, written by no one else
    unless sticky (/tmp)."""
    directory = Path(os.path.abspath(directory))
    for above in reversed(directory.parents):
        st = os.lstat(above)
        if stat.S_ISLNK(st.st_mode):
            raise Untrusted(f"{above} on the way to it is a link")
        if st.st_uid not in (0, os.geteuid()) or (st.st_mode & 0o022 and not st.st_mode & stat.S_ISVTX):
            raise Untrusted(f"{above} on the way to it may be changed by another user")
    st = os.lstat(directory)
    if not stat.S_ISDIR(st.st_mode):
        raise Untrusted(f"its directory {directory} is {'a link' if stat.S_ISLNK(st.st_mode) else 'not a directory'}")
    _owned_and_closed(st, owners or (os.geteuid(),), f"its directory {directory}")


def open_state_file(path: Path, flags: int = os.O_RDONLY, owners: tuple[int, ...] | None = None) -> int:
    """A descriptor of the state file ``path``, opened without following a link or blocking (a FIFO), once it is
    known to be a regular file of ``owners`` (this user) in a trusted directory; FileNotFoundError when there is
    none, Untrusted when it is not refbench's own."""
    trusted_state_directory(path.parent, owners)
    try:
        fd = os.open(path, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o644)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise Untrusted("it is a link") from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise Untrusted("it is not a regular file")
        _owned_and_closed(st, owners or (os.geteuid(),), "it")
        return fd
    except BaseException:
        os.close(fd)
        raise


def read_state_file(path: Path, owners: tuple[int, ...] | None = None) -> str:
    """The text of the state file ``path`` (see open_state_file), at most STATE_FILE_LIMIT bytes."""
    with os.fdopen(open_state_file(path, owners=owners), "rb") as f:
        data = f.read(STATE_FILE_LIMIT + 1)
    if len(data) > STATE_FILE_LIMIT:
        raise Untrusted(f"it is larger than {STATE_FILE_LIMIT // 1024:,} KiB")
    return data.decode(errors="replace")
