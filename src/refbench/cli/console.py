"""What every command group prints with: the consoles for stdout and stderr, tables that are never cut, warnings,
acceptance results, the examples in a command's help, and the options several groups take."""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table as RichTable

from refbench import accept
from refbench.formats import fmt


# Piped or captured output gets a wide page instead of Rich's 80 columns, so tables do not wrap.
def _width(stream: Any) -> int | None:
    """The terminal's width; COLUMNS when set (a pipe from an 80-column terminal); 160 for a pipe or a file."""
    columns = os.environ.get("COLUMNS", "")
    return int(columns) if columns.isdigit() and int(columns) > 0 else None if stream.isatty() else 160


err = Console(stderr=True, highlight=False, width=_width(sys.stderr), soft_wrap=True)  # a path whole, for copying
out = Console(highlight=False, width=_width(sys.stdout))


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
    trial = Console(width=max(width, 20), color_system=None)
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
    print(text, flush=flush)


def print_json(data: Any) -> None:
    """--json output: plain JSON on stdout, indented."""
    plain(json.dumps(data, indent=2))


def say(sentence: str) -> None:
    """refbench's own one-line message on stderr ("refbench: interrupted."), plain, before or after any console."""
    print(f"refbench: {sentence}", file=sys.stderr)


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
