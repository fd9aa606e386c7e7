"""Writing files so that a crash (even kill -9) leaves either the old content or the new, never half; and reading the
files a user hands refbench so that a hostile one costs one sentence."""

from __future__ import annotations

import errno
import json
import os
import stat
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Any, BinaryIO, Iterator


# mkstemp makes files 0600, and a umask of 077 would make an ordinary write 0600 too; results (records, tables,
# charts, the report) are for handing on, so they are readable by everyone whatever the umask. Secrets are written
# by redaction.write_private instead, 0600 in a 0700 directory.
SHARED_MODE = 0o644


@contextmanager
def atomic_writer(path: Path, mode: int = SHARED_MODE) -> Iterator[BinaryIO]:
    """A file to write in pieces (a table of a day's samples need not fit in memory) that appears at ``path``
    only once the ``with`` block ends without an error."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=path.suffix)
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as exc:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(exc, OSError) and exc.filename is None:  # a failed write names no file: name the one it was for
            raise OSError(exc.errno, exc.strerror, str(path)) from exc
        raise
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def atomic_write_bytes(path: Path, data: bytes, mode: int = SHARED_MODE) -> None:
    with atomic_writer(path, mode) as f:
        f.write(data)


def atomic_write_text(path: Path, text: str, mode: int = SHARED_MODE) -> None:
    atomic_write_bytes(path, text.encode(), mode)


def atomic_write_json(path: Path, obj: Any) -> None:
    atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=False, default=_json_default) + "\n")


def _json_default(value: Any) -> Any:
    if isinstance(value, Path):
        return str(value)
    if hasattr(value, "item"):  # numpy scalars
        return value.item()
    raise TypeError(f"cannot store {type(value).__name__} in JSON")


def read_json(path: Path) -> Any:
    return json.loads(path.read_text())


def remove_temp_files(directory: Path) -> int:
    """Removes the leftovers of writes that a crash interrupted; returns how many there were."""
    removed = 0
    if directory.is_dir():
        for leftover in directory.rglob(".tmp-*"):
            leftover.unlink(missing_ok=True)
            removed += 1
    return removed


def writable_directory(path: Path, what: str) -> None:
    """Creates ``path`` if needed; a directory that cannot be made or written ends the run with one sentence."""
    from refbench.errors import UserError

    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(f"cannot create {what} {path}: {exc.strerror}.") from None
    if not os.access(path, os.W_OK):
        raise UserError(f"{what} {path} is not writable.")


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
    from refbench.errors import UserError

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

    from refbench.errors import UserError

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
