"""What every command group prints with: the consoles for stdout and stderr, tables that are never cut, warnings,
acceptance results, the examples in a command's help, and the options several groups take. Whatever they print shows
its control characters as escapes (visible)."""

from __future__ import annotations

import contextlib
import io
import json
import os
import queue
import stat
import sys
import threading
import time
from typing import Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table as RichTable

from refbench import accept
from refbench.formats import fmt, visible


# Piped or captured output gets a wide page instead of Rich's 80 columns, so tables do not wrap.
def _width(stream: Any) -> int | None:
    """The terminal's width; COLUMNS when set (a pipe from an 80-column terminal); 160 for a pipe, a file or none."""
    columns = os.environ.get("COLUMNS", "")
    return int(columns) if columns.isdigit() and int(columns) > 0 else None if _isatty(stream) else 160


def _isatty(stream: Any) -> bool:
    try:
        return stream is not None and stream.isatty()
    except (OSError, ValueError):  # closed
        return False


class _Output(io.TextIOBase):
    """A standard stream that never stops the run. Its reader gone (EPIPE) or the stream closed, what follows is
    dropped. With ``drop_when_full`` (progress on stderr, to a pipe), a thread writes it: a reader that does not read
    fills the pipe, and the lines that do not fit are dropped instead of holding the measurement."""

    QUEUED = 1000  # lines waiting for a slow reader, beyond which they are dropped

    def __init__(self, stream: Any, drop_when_full: bool):
        super().__init__()
        self.stream, self.broken = stream, False
        self.queue: queue.Queue[str] | None = queue.Queue(self.QUEUED) if drop_when_full else None
        if self.queue is not None:
            self.thread = threading.Thread(target=self._write_queued, name="refbench-stderr", daemon=True)
            self.thread.start()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self.stream, "encoding", None) or "utf-8"

    def isatty(self) -> bool:
        return _isatty(self.stream)

    def fileno(self) -> int:
        return self.stream.fileno()

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        if self.broken:
            return len(text)
        if self.queue is not None:
            with contextlib.suppress(queue.Full):
                self.queue.put_nowait(text)
            return len(text)
        self._write(text)
        return len(text)

    def flush(self) -> None:
        if self.queue is None and not self.broken:
            self._write("")

    def _write(self, text: str) -> None:
        try:
            self.stream.write(text)
            self.stream.flush()
        except (OSError, ValueError):  # EPIPE, EIO, a closed stream
            self.broken = True

    def _write_queued(self) -> None:
        while True:  # a daemon thread: it ends with the process
            text = self.queue.get()
            if not self.broken:
                self._write(text)
            self.queue.task_done()

    def drain(self, timeout_s: float) -> None:
        """Waits up to ``timeout_s`` for the queued lines to reach the reader (a reader that reads gets them all)."""
        if self.queue is None:
            return
        deadline = time.monotonic() + timeout_s
        while self.queue.unfinished_tasks and time.monotonic() < deadline and not self.broken:
            time.sleep(0.01)


def guard_streams() -> None:
    """The real stdout and stderr made so that no state of theirs stops a run: a standard descriptor closed at start
    (`2>&-`) is /dev/null, so that no file refbench opens takes its number; a broken pipe drops what follows; and
    progress to a pipe is dropped when the pipe is full. Streams a caller replaced (tests) are left alone."""
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            null = os.open(os.devnull, os.O_RDWR)
            if null != fd:
                os.dup2(null, fd)
                os.close(null)
    for name in ("stdout", "stderr"):
        stream, real = getattr(sys, name), getattr(sys, f"__{name}__")
        if stream is None or stream is real:
            stream = real if real is not None else open(os.devnull, "w")
            try:
                mode = os.fstat(stream.fileno()).st_mode
                piped = stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)
            except (OSError, ValueError):
                piped = False
            setattr(sys, name, _Output(stream, drop_when_full=name == "stderr" and piped))


def drain() -> None:
    """What progress is still queued for stderr, written within a few seconds before refbench exits."""
    if isinstance(sys.stderr, _Output):
        sys.stderr.drain(5.0)
    if isinstance(sys.stdout, _Output):
        sys.stdout.flush()


def text_width() -> int:
    """The width text is folded to: COLUMNS when set, else the terminal's; 80 for a pipe or a file."""
    columns = os.environ.get("COLUMNS", "")
    return int(columns) if columns.isdigit() and int(columns) > 0 else out.width if _isatty(sys.stdout) else 80


class SafeConsole(Console):
    """A Rich console through which every string, markup or plain, a table's cells and titles among them, is shown
    visible() before it is laid out."""

    def render_str(self, text: str, **kwargs: Any) -> Any:
        return super().render_str(visible(text), **kwargs)


err = SafeConsole(stderr=True, highlight=False, width=_width(sys.stderr), soft_wrap=True)  # a path whole, for copying
out = SafeConsole(highlight=False, width=_width(sys.stdout))


def print_table(table: RichTable, console: Console | None = None) -> None:
    """A table whole when it fits the console's width; else stacked, each row as lines of "column: value", so that
    no number or name is cut ("75,9…") to make it fit."""
    console = console or out
    if not cut(table, console.width):
        console.print(table)
        return
    if table.title:
        console.print(table.title, style="bold")
    for line in stacked(table):
        console.print(line, highlight=False)


def cut(table: RichTable, width: int) -> bool:
    """Whether rich would elide a cell to fit the table in ``width`` columns."""
    trial = SafeConsole(width=max(width, 20), color_system=None)
    with trial.capture() as rendered:
        trial.print(table)
    cells = "".join(str(cell) for column in table.columns for cell in column.cells)
    return rendered.get().count("…") > cells.count("…")


def stacked(table: RichTable) -> list[str]:
    """The table's rows one after the other, each cell as "column: value" (a value of several lines going on under
    its first), a blank line between rows."""
    headers = [str(c.header) if table.show_header else "" for c in table.columns]
    columns = [list(c.cells) for c in table.columns]
    lines = []
    for row in range(table.row_count):
        for header, cells in zip(headers, columns):
            cell = cells[row]
            text = "\n".join(stacked(cell)).rstrip() if isinstance(cell, RichTable) else str(cell)
            if text.strip():
                indent = "\n" + " " * (len(header) + 2 if header else 0)
                lines.append(f"{header}: " * bool(header) + text.replace("\n", indent))
        lines.append("")
    return lines


def plain(text: str, flush: bool = False) -> None:
    """Text on stdout as it is, never wrapped or styled: what scripts read (a run directory, a dry run's lines)."""
    print(visible(text), flush=flush)


def print_json(data: Any) -> None:
    """--json output: plain JSON on stdout, indented."""
    plain(json.dumps(data, indent=2))


def say(sentence: str) -> None:
    """refbench's own one-line message on stderr ("refbench: interrupted."), plain, before or after any console."""
    print(f"refbench: {visible(sentence)}", file=sys.stderr)


def warn(sentence: str) -> None:
    err.print(f"refbench: warning: {sentence}", markup=False, highlight=False, soft_wrap=True)


def print_thresholds(results: list[dict[str, Any]]) -> None:
    if not results:
        return
    failed = accept.failed(results)
    head = (f"[bold red]{len(failed)} of {len(results)} acceptance thresholds FAILED[/bold red]" if failed
            else f"[green]all {len(results)} acceptance thresholds passed[/green]")
    out.print(f"acceptance: {head}")
    for r in results:
        mark = "[green]pass[/green]" if r["passed"] else "[bold red]FAIL[/bold red]"
        value = "not measured" if r["value"] is None else fmt(r["value"])
        out.print(f"  {mark}  {escape(r['threshold'])}  (value {value}: {escape(r['detail'])})", soft_wrap=True)


def epilog(*examples: str) -> str:
    """An epilog of examples as typed, never rewrapped: each "command  # why" becomes the why, then the command,
    folded with backslashes so that no line is wider than 80 columns."""
    blocks = []
    for example in examples:
        command, _, why = example.partition("  #")
        lines = [f"# {why.strip()}"] if why.strip() else []
        line = ""
        for word in command.split(" "):
            if line and len(line) + 1 + len(word) > 72:
                lines.append(line + " \\")
                line = "    " + word
            else:
                line = f"{line} {word}" if line else word
        blocks.append("\b\n" + "\n".join(lines + [line.rstrip()]))
    return "Examples:\n\n" + "\n\n".join(blocks)


RUNS_DIR_HELP = "Directory holding run directories."


def tls_options():
    return (typer.Option(None, "--tls-ca-file", help="TLS: CA certificate that signed the cluster's certificates (PEM)."),
            typer.Option(None, "--tls-cert", help="TLS: this end's certificate (PEM)."),
            typer.Option(None, "--tls-key", help="TLS: this end's private key (PEM)."))
