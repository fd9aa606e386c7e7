"""What a run shows while it works, on stderr.

Per suite, a bar of its cases with the time spent and the time left, laid out so that both stay whole at 80 columns
(the description gives way first, with an ellipsis; the clocks never do). The time left is what the suite's own
estimate (the dry run's) leaves, so it is known from the first second and only falls; a suite that runs past its
estimate says so ("late") and from then on goes by the pace of its cases done so far. While a case measures, the
suite reports its figures so far (`SuiteContext.live`): on a terminal they stand under the bars, folded to its
width; when stderr is a file or a pipe they are printed one line every LIVE_EVERY_S seconds, as pgbench's `-P 5`
does, whatever the length of the cases. `--quiet` shows neither.
"""

from __future__ import annotations

import textwrap
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


def time_left(task: Task) -> tuple[float | None, bool]:
    """(seconds left of a task, whether it is past its estimate): its expected seconds (``expected_s``, a suite's
    estimate) less those spent while it is within them; then, or without an estimate, the pace of what it has
    completed; at least a second while it runs. None: nothing to go by."""
    if task.finished:
        return 0.0, False
    spent = task.elapsed or 0.0
    expected = task.fields.get("expected_s")
    if expected and spent < expected:
        return max(1.0, expected - spent), False
    if task.total and task.completed:
        return max(1.0, spent / task.completed * (task.total - task.completed)), bool(expected)
    return (1.0, True) if expected else (None, False)


class TimeLeftColumn(ProgressColumn):
    """"eta 0:04:10"; "late 0:00:40" past the suite's estimate (the pace's guess); blank for work with nothing to go
    by (a step of unknown length inside a suite)."""

    def __init__(self) -> None:
        super().__init__(table_column=Column(no_wrap=True, min_width=5 + CLOCK_WIDTH))

    def render(self, task: Task) -> Text:
        left, late = time_left(task)
        return Text("" if left is None else f"{'late' if late else 'eta'} {clock(left)}", style="progress.remaining")


class RunProgress(Progress):
    """rich's Progress with a case's live figures on a line of their own under the bars."""

    def __init__(self, console: Console, quiet: bool = False):
        columns = (TextColumn("{task.description}", table_column=Column(ratio=1, no_wrap=True, overflow="ellipsis",
                                                                         min_width=10)),
                   BarColumn(bar_width=10), MofNCompleteColumn(table_column=Column(no_wrap=True, min_width=5)),
                   TimeElapsedColumn(table_column=Column(no_wrap=True, min_width=CLOCK_WIDTH)), TimeLeftColumn())
        # Before rich's init, which may render; the first line without a terminal comes LIVE_EVERY_S after the start.
        self.quiet, self.live_text, self.printed_at = quiet, "", time.monotonic()
        super().__init__(*columns, console=console, transient=False, expand=console.is_terminal, disable=quiet)

    def get_renderables(self) -> Any:
        table = self.make_tasks_table(self.tasks)
        if not self.live_text:
            yield table
            return
        # Folded to the terminal's width: a line wider than it would be cut by the live display.
        live = "\n".join(textwrap.wrap(self.live_text, max(20, self.console.width), subsequent_indent="  "))
        yield Group(table, Text(live, style="dim"))

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
        """The next case's figures start afresh (without a terminal, the lines keep their pace across cases: cases
        shorter than LIVE_EVERY_S still show)."""
        self.live_text = ""
