"""What a run shows while it works, on stderr.

Per suite, a bar of its cases with the time spent and the time left, laid out so that both stay whole at 80 columns
(the description gives way first, with an ellipsis; the clocks never do). The time left is the larger of what the
suite's own estimate (the dry run's) leaves and what the pace of the cases done so far asks for, so it is known from
the first second, not only once cases have finished. While a case measures, the suite reports its figures so far
(`SuiteContext.live`): on a terminal they stand on a line of their own under the bars; when stderr is a file or a
pipe they are printed one line every LIVE_EVERY_S seconds, as pgbench's `-P 5` does. `--quiet` shows neither.
"""

from __future__ import annotations

import time
from typing import Any

from rich.console import Console, Group
from rich.progress import BarColumn, MofNCompleteColumn, Progress, ProgressColumn, Task, TextColumn, TimeElapsedColumn
from rich.table import Column
from rich.text import Text

LIVE_EVERY_S = 5.0  # pgbench's -P 5: one line of figures so far every 5 s when stderr is not a terminal
CLOCK_WIDTH = 7  # H:MM:SS


def clock(seconds: float) -> str:
    seconds = max(0, int(round(seconds)))
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


def time_left(task: Task) -> float | None:
    """Seconds left of a task: the larger of its expected seconds less those spent (``expected_s``, a suite's
    estimate) and the pace of what it has completed; at least a second while it runs. None: nothing to go by."""
    if task.finished:
        return 0.0
    spent = task.elapsed or 0.0
    guesses = []
    if expected := task.fields.get("expected_s"):
        guesses.append(expected - spent)
    if task.total and task.completed:
        guesses.append(spent / task.completed * (task.total - task.completed))
    return max(1.0, *guesses) if guesses else None


class TimeLeftColumn(ProgressColumn):
    """"eta 0:04:10"; blank for work with nothing to go by (a step of unknown length inside a suite)."""

    def __init__(self) -> None:
        super().__init__(table_column=Column(no_wrap=True, min_width=4 + CLOCK_WIDTH))

    def render(self, task: Task) -> Text:
        left = time_left(task)
        return Text("" if left is None else f"eta {clock(left)}", style="progress.remaining")


class RunProgress(Progress):
    """rich's Progress with a case's live figures on a line of their own under the bars."""

    def __init__(self, console: Console, quiet: bool = False):
        columns = (TextColumn("{task.description}", table_column=Column(ratio=1, no_wrap=True, overflow="ellipsis",
                                                                         min_width=10)),
                   BarColumn(bar_width=10), MofNCompleteColumn(table_column=Column(no_wrap=True, min_width=5)),
                   TimeElapsedColumn(table_column=Column(no_wrap=True, min_width=CLOCK_WIDTH)), TimeLeftColumn())
        self.quiet, self.live_text, self.printed_at = quiet, "", 0.0  # before rich's init, which may render
        super().__init__(*columns, console=console, transient=False, expand=console.is_terminal, disable=quiet)

    def get_renderables(self) -> Any:
        table = self.make_tasks_table(self.tasks)
        yield Group(table, Text(self.live_text, style="dim")) if self.live_text else table

    def show_live(self, text: str) -> None:  # rich's Progress keeps its Live display in .live
        """A case's figures so far: shown under the bars on a terminal, printed every LIVE_EVERY_S otherwise."""
        if self.quiet:
            return
        if self.console.is_terminal:
            self.live_text = text
            return
        now = time.monotonic()
        if text and now - self.printed_at >= LIVE_EVERY_S:
            self.printed_at = now
            self.console.print(text, soft_wrap=True, highlight=False, markup=False)

    def new_case(self) -> None:
        """The next case's figures start afresh, their first line LIVE_EVERY_S after it starts."""
        self.live_text, self.printed_at = "", time.monotonic()
