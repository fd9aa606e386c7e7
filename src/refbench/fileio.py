"""Writing files so that a crash (even kill -9) leaves either the old content or the new, never half."""

from __future__ import annotations

import json
import os
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
