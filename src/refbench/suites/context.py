"""What a suite gets from the runner: its options, places to write, telemetry, progress (``ctx`` in every suite)."""

from __future__ import annotations

import hashlib
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Iterator

from rich.console import Console
from rich.markup import escape

from refbench.fileio import make_directories
from refbench.host.telemetry import Telemetry
from refbench.options import Plan
from refbench.progress import RunProgress
from refbench.records import Case
from refbench.runstore import Run


@dataclass
class SuiteContext:
    """What a suite gets from the runner: its options, places to write, telemetry, progress."""

    run: Run
    plan: Plan
    suite: str
    options: dict[str, Any]
    console: Console
    progress: RunProgress | None = None
    state: dict[str, Any] = field(default_factory=dict)  # the suite's own objects between calls

    @property
    def work_dir(self) -> Path:
        base = Path(self.plan.work_dir) if self.plan.work_dir else self.run.path / "work"
        path = base / self.suite
        self.claim(path)
        return make_directories(path)

    def claim(self, *paths: Path) -> None:
        """Call before writing ``paths`` outside the run directory (in a target, a *_dir option's place): what this
        creates there is removed with the run's work data, and nothing else there is (see Run.claim_work)."""
        own = (self.run.path.absolute() / "work", scratch_dir(self.run))  # removed whole: nothing to note in them
        self.run.claim_work([p for p in paths if not any(o == Path(p).absolute() or o in Path(p).absolute().parents
                                                         for o in own)], self.suite)

    @property
    def scratch_dir(self) -> Path:
        """Where the suite's bulky data goes when the server's account cannot reach the work directory."""
        return scratch_dir(self.run) / self.suite

    @cached_property
    def telemetry(self) -> Telemetry:
        # One reader for the suite's cases: each record's window is looked for from where the previous one ended.
        return Telemetry(self.run.telemetry_path)

    def raw_dir(self, case: Case | str) -> Path:
        """Where raw tool output of a case (or of a named preparation step) goes."""
        return make_directories(self.run.raw_dir(self.suite, case.id if isinstance(case, Case) else case))

    def log(self, message: str) -> None:
        # Folded to the terminal's width; the message as it is, never read as markup (it may hold a run's name).
        self.console.print(f"[dim]{escape(self.suite)}:[/dim] {escape(message)}", soft_wrap=False)

    def live(self, figures: str) -> None:
        """The measuring case's figures so far ("NOPM 12,345, New-Order p99 4.1 ms so far"): call as often as they
        change; the runner shows them live, or prints one line every few seconds when stderr is not a terminal."""
        if self.progress is not None:
            self.progress.show_live(f"{self.suite}: {figures}")

    @contextmanager
    def task(self, description: str, total: float | None = None) -> Iterator["Task"]:
        """A progress bar for long work inside prepare/measure; ``advance`` it as work completes."""
        if self.progress is None:
            yield Task(None, None)
            return
        task_id = self.progress.add_task(f"{self.suite}: {description}", total=total)
        try:
            yield Task(self.progress, task_id)
        finally:
            self.progress.remove_task(task_id)


@dataclass
class Task:
    progress: RunProgress | None
    task_id: Any

    def advance(self, amount: float = 1) -> None:
        if self.progress is not None:
            self.progress.advance(self.task_id, amount)

    def update(self, completed: float | None = None, description: str | None = None) -> None:
        if self.progress is not None:
            self.progress.update(self.task_id, completed=completed, description=description)


SCRATCH_ROOT = Path("/var/tmp/refbench")


def scratch_dir(run: Run) -> Path:
    """Two runs of the same name started in the same second from different runs directories (two users, two
    checkouts) must not share it: the run directory's own path tells them apart."""
    return SCRATCH_ROOT / f"{run.path.name}-{hashlib.sha1(str(run.path.resolve()).encode()).hexdigest()[:8]}"
