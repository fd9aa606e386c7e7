"""What a tune leaves in its directory while it runs — the loaded database every oltp trial run starts from a copy
of, the second one the confirmation loads beside it, and a run's copy of either — and how it goes when the tune and
its watchdog were killed together: the tune holds its directory's lock while it lives, so whoever finds the lock free
knows the tune is over."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path
from typing import Callable

from refbench.removal import remove_quietly

DATA_COPIED = "oltp-data"  # the one loaded database each oltp run starts from a copy of
DATA_SECOND = f"{DATA_COPIED}-2"  # the confirmation's second, independent load
DATA_LOADS = (DATA_COPIED, DATA_SECOND)
DATA_COPY = f"{DATA_COPIED}-run"  # a copy of one of them, while a run uses it
# What of a tune's directory is its data (the managed servers keep their log beside their data directory: NAME.log).
DATA_LEFT = tuple(f"{name}{end}" for name in (*DATA_LOADS, DATA_COPY) for end in ("", ".log"))
ALIVE_LOCK = "tune.lock"  # held (flock) by the tune process while it runs


def hold_alive_lock(directory: Path) -> int:
    """Takes the tune directory's lock for as long as this process lives: whoever finds it free knows the tune ended,
    however it ended (a kill -9 of tune and its watchdog too)."""
    fd = os.open(directory / ALIVE_LOCK, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    os.pwrite(fd, str(os.getpid()).encode(), 0)
    return fd


def remove_data_of_dead_tunes(tunes: Path, say: Callable[[str], None]) -> list[Path]:
    """Removes the loaded databases and their copy that a tune killed with its watchdog left in its directory (a tune
    that still runs holds its lock); its journey, runs and log stay. Returns what it removed."""
    removed = []
    try:
        found = sorted(p for p in tunes.iterdir() if p.is_dir() and not p.is_symlink())
    except OSError:
        return []
    for directory in found:
        left = [directory / name for name in DATA_LEFT if os.path.lexists(directory / name)]
        if not left:
            continue
        try:
            fd = os.open(directory / ALIVE_LOCK, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            continue  # no lock to tell whether it runs (an older refbench's tune): left alone
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            continue  # it runs
        finally:
            os.close(fd)
        maker = directory.stat().st_uid  # root cleaning another user's tune removes only what that user could
        for path in left:
            remove_quietly(path, maker if os.geteuid() == 0 and maker != 0 else None)
            if not os.path.lexists(path):
                removed.append(path)
                say(f"removed {path}, the data of a tune that was killed")
    return removed
