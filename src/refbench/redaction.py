"""Passwords never leave memory: connection strings are shown and stored with the password masked, and the values
a run needs again (``refbench resume`` connects with the plan's DSN) are split off into a file only the owner reads.

Imports nothing of refbench, so the run store and the engines can both use it."""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path
from typing import Any

MASK = "***"

# libpq keyword form (password=secret, password = 'a b') and URIs (postgresql://user:secret@host, ?password=secret).
_KEYWORD = re.compile(r"(password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)", re.IGNORECASE)
_USERINFO = re.compile(r"(://[^:/@\s]*:)[^@\s]+@")


def redact(text: str) -> str:
    """``text`` with every password it carries replaced by ***."""
    return _KEYWORD.sub(rf"\g<1>{MASK}", _USERINFO.sub(rf"\g<1>{MASK}@", text))


def split_secrets(data: Any) -> tuple[Any, list[tuple[list[str | int], str]]]:
    """(``data`` with every string redacted, [(where, original)] for each string that changed): the first is safe to
    write anywhere, the second goes to an owner-only file and back in with ``merge_secrets``."""
    secrets: list[tuple[list[str | int], str]] = []

    def walk(value: Any, where: list[str | int]) -> Any:
        if isinstance(value, str):
            masked = redact(value)
            if masked != value:
                secrets.append((where, value))
            return masked
        if isinstance(value, dict):
            return {k: walk(v, [*where, k]) for k, v in value.items()}
        if isinstance(value, list):
            return [walk(v, [*where, i]) for i, v in enumerate(value)]
        return value

    return walk(data, []), secrets


def merge_secrets(data: Any, secrets: list[tuple[list[str | int], str]]) -> Any:
    """``data`` with the originals of ``split_secrets`` put back (in place; returned for convenience)."""
    for where, original in secrets:
        if not where:
            return original
        parent = data
        try:
            for key in where[:-1]:
                parent = parent[key]
            parent[where[-1]] = original
        except (KeyError, IndexError, TypeError):
            continue  # the masked value is gone: nothing to restore
    return data


def write_private(path: Path, text: str) -> None:
    """Writes ``text`` to ``path`` atomically, readable by its owner only (0600, in a 0700 directory it creates)."""
    path = Path(path)
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")  # mkstemp: 0600 whatever the umask
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def read_private(path: Path) -> str | None:
    """What ``write_private`` wrote, or None if there is no such file or it is not ours to read (another user's run:
    its report and listing still work, with the passwords masked)."""
    try:
        return Path(path).read_text()
    except (FileNotFoundError, PermissionError):
        return None
