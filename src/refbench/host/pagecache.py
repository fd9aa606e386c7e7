"""Keeping chosen files out of the OS page cache, so a run scaled below the host's memory still reads from
storage: posix_fadvise(DONTNEED) drops the clean cached pages of those files only, without root and without
touching anything else on the host."""

from __future__ import annotations

import os
from pathlib import Path


def evict(files: list[Path], write_back: bool = False) -> None:
    """``write_back`` first writes the files' dirty pages, which DONTNEED would otherwise leave in memory."""
    for path in files:
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError:
            continue  # a file its owner just removed
        try:
            if write_back:
                os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def files_under(roots: list[Path]) -> list[Path]:
    files = []
    for root in roots:
        if root.is_file():
            files.append(root)
        elif root.is_dir():
            files += [p for p in root.rglob("*") if p.is_file()]
    return files
