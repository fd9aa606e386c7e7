"""Reading /proc and /sys under a root that may be a fake tree (tests) or a VM/container where files are
missing or unreadable: every reader answers None instead of raising."""

from __future__ import annotations

from pathlib import Path

UNKNOWN = "unknown"


class SysRoot:
    def __init__(self, root: str | Path = "/"):
        self.root = Path(root)

    @property
    def is_live(self) -> bool:
        """True when reading the real machine (so statvfs and running tools describe the same host)."""
        return self.root.resolve() == Path("/")

    def path(self, relative: str) -> Path:
        return self.root / relative.lstrip("/")

    def read(self, relative: str) -> str | None:
        try:
            return self.path(relative).read_text(errors="replace").strip()
        except (OSError, ValueError):
            return None

    def read_int(self, relative: str) -> int | None:
        text = self.read(relative)
        try:
            return int(text.split()[0]) if text else None
        except ValueError:
            return None

    def listdir(self, relative: str) -> list[str]:
        try:
            return sorted(p.name for p in self.path(relative).iterdir())
        except OSError:
            return []


def bracketed(text: str | None) -> str | None:
    """The selected value of a sysfs choice list such as 'always [madvise] never'."""
    if not text:
        return None
    for word in text.split():
        if word.startswith("[") and word.endswith("]"):
            return word[1:-1]
    return text.split()[0] if len(text.split()) == 1 else None
