"""The refbench command line: one Typer app, plus one command per suite with the same shape."""

from __future__ import annotations

import inspect
import json
import os
import re
import signal
import sys
import traceback
from pathlib import Path
from typing import Any, Optional

import typer
from rich.console import Console
from typer.core import TyperArgument, TyperOption
from rich.markup import escape
from rich.table import Table as RichTable

from refbench import __version__, accept, runner, timings
from refbench.errors import UserError
from refbench.exhaustion import explain
from refbench.fileio import atomic_write_text
from refbench.plan import TOP_LEVEL, load_plan
from refbench.runstore import SET_ASIDE_SUFFIX, Run, list_runs
from refbench.suites import get_suite, suite_names

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
    if not _cut(table, console.width):
        console.print(table)
        return
    if table.title:
        console.print(table.title, style="bold")
    for line in _stacked(table):
        console.print(line, highlight=False)


def _cut(table: RichTable, width: int) -> bool:
    """Whether rich would elide a cell to fit the table in ``width`` columns."""
    trial = Console(width=max(width, 20), color_system=None)
    with trial.capture() as rendered:
        trial.print(table)
    cells = "".join(str(cell) for column in table.columns for cell in column.cells)
    return rendered.get().count("…") > cells.count("…")


def _stacked(table: RichTable) -> list[str]:
    """The table's rows one after the other, each cell as "column: value" (a value of several lines going on under
    its first), a blank line between rows."""
    headers = [str(c.header) if table.show_header else "" for c in table.columns]
    columns = [list(c.cells) for c in table.columns]
    lines = []
    for row in range(table.row_count):
        for header, cells in zip(headers, columns):
            cell = cells[row]
            text = "\n".join(_stacked(cell)).rstrip() if isinstance(cell, RichTable) else str(cell)
            if text.strip():
                indent = "\n" + " " * (len(header) + 2 if header else 0)
                lines.append(f"{header}: " * bool(header) + text.replace("\n", indent))
        lines.append("")
    return lines


def _examples(*examples: str) -> str:
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


# Click's own help layout (rich_markup_mode=None): Rich's option table cuts long flag names short at 80 columns
# ("--no-reload-each-…"), where click puts a long flag on a line of its own and its help below it.
app = typer.Typer(
    add_completion=False, no_args_is_help=True, rich_markup_mode=None, pretty_exceptions_enable=False,
    help="Validate and rate a server + storage stack for database and analytics workloads.\n\n"
    "Every command that measures ends with its verdict (headline figures, checks and bottleneck per suite) and "
    "the run directory as the last line, which 'refbench report', 'compare' and 'check' take.\n\n"
    "Exit status: 0 all passed; 1 a correctness check failed; 2 bad input; 3 an acceptance threshold failed; "
    "70 internal error; 75 a resource ran out; 130 interrupted.",
    epilog=_examples("refbench host", "refbench run --plan lab.toml --dry-run  # what it would run, how long, what space",
                     "refbench run --plan lab.toml", "refbench compare RUN_A RUN_B",
                     "refbench oltp --help  # add --debug to any command for a traceback"),
)

RUNS_DIR_HELP = "Directory holding run directories."
# run and the suite commands leave their defaults to the plan, so the help says what it is.
REPEATS_HELP = ("Measure each headline case (peak point, best load level, each engine's streams) N times, round "
                "after round, so that compare can test a change (default: 3 at every profile).")
PLAN_RUNS_DIR_HELP = f"Directory holding run directories (default: {TOP_LEVEL['runs_dir'].default})."
RUN_JSON_HELP = "Print the verdict as one line of JSON instead of a table (the run directory stays the last line)."
QUIET_HELP = ("No progress bars and no live figures (a case's figures so far: on a terminal under the bars, else one "
              "line every 5 s on stderr, as pgbench -P 5); the verdict is printed as always.")
KEEP_WORK_HELP = "Keep the generated data and databases when the run completes (default: removed)."
TAG_HELP = "Tag the run, e.g. --tag firmware=2.1 (repeatable); 'refbench runs --tag' and 'history' filter by tags."
DRY_RUN_HELP = ("Check the plan as a run would, then print every option with its value and where it came from, the "
                "cases, the estimated time and the space each directory needs; write nothing.")
def _version(value: bool) -> None:
    if value:
        print(f"refbench {__version__}")
        raise typer.Exit()


@app.callback()
def _root(version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version.")) -> None:
    pass


def _start_and_execute(plan_kwargs: dict[str, Any], as_json: bool = False, dry_run: bool = False,
                       quiet: bool = False) -> None:
    plan = load_plan(**plan_kwargs)
    if plan.hosts:
        from refbench.cluster.coordinator import preflight

        preflight(plan)
    if dry_run:
        _dry_run(plan)
        return
    from refbench.tune.leftovers import remove_data_of_dead_tunes

    remove_data_of_dead_tunes(Path(plan.runs_dir) / "tune", lambda line: err.print(line, soft_wrap=True))
    run = runner.start(plan, sys.argv, err)
    _execute(run, as_json, quiet)


def _dry_run(plan) -> None:
    from refbench.dryrun import DoesNotFit, dry_run

    try:
        lines = dry_run(plan)
    except DoesNotFit as exc:
        print("\n".join(exc.lines), flush=True)
        raise
    print("\n".join(lines))


def _execute(run: Run, as_json: bool = False, quiet: bool = False) -> None:
    try:
        if run.plan.hosts:
            from refbench.cluster.coordinator import execute as execute_on_cluster

            passed = execute_on_cluster(run, err)
        else:
            passed = runner.execute(run, err, quiet)
    except KeyboardInterrupt:
        done = ("the nodes were told to stop; steps measured by every node are kept" if run.plan.hosts
                else f"{len(run.records())} case(s) recorded")
        err.print(f"[yellow]interrupted[/yellow]: {done}. Continue with: refbench resume {run.path} (or remove its "
                  f"work data with: refbench clean {run.path})")
        print(run.path, flush=True)
        raise typer.Exit(130)
    err.print(f"report: {run.report_path}")
    thresholds = run.read_json(run.accept_path) or []
    if as_json:
        print(json.dumps({"run": str(run.path), "correctness_passed": passed, "verdict": run.read_json(run.verdict_path) or [],
                          "accept": thresholds}), flush=True)
    else:
        _print_verdict(run, thresholds)
    if not passed:
        err.print("[bold red]correctness checks FAILED[/bold red]: see the report's Correctness sections.")
    print(run.path, flush=True)
    if not passed:
        raise typer.Exit(1)
    if accept.failed(thresholds):
        raise typer.Exit(accept.EXIT_THRESHOLD_FAILED)


def _print_verdict(run: Run, thresholds: list[dict[str, Any]]) -> None:
    """The answer the run was for, after its progress: headline figures, correctness and bottleneck per suite."""
    from refbench.formats import fmt

    verdicts = run.read_json(run.verdict_path) or []
    if verdicts:
        table = RichTable(box=None, show_header=False, title=f"verdict — {run.path.name}", title_justify="left",
                          title_style="bold", pad_edge=False)
        table.add_column("suite", style="bold", no_wrap=True)
        table.add_column("figures")
        for v in verdicts:
            for i, h in enumerate(v["headlines"] or [None]):
                text = "no headline figures" if h is None else (
                    f"{escape(h['label'])}: not rated at this size ({escape(h['unrated'])}; measured {fmt(h['value'])} "
                    f"{escape(h['unit'])})" if h.get("unrated") else
                    f"{escape(h['label'])}: [bold]{fmt(h['value'])} {escape(h['unit'])}".rstrip() + "[/bold]"
                    + (f" ({escape(h['note'])})" if h["note"] else ""))
                table.add_row((f"{v['suite']} ({v['scope']})" if v.get("scope") else v["suite"]) if i == 0 else "", text)
            if len(v.get("engines") or []) > 1:  # the engines run, side by side
                compared = RichTable(box=None, pad_edge=False, header_style="bold")
                for column in v["engines"][0]:
                    compared.add_column(escape(column), justify="left" if column == "engine" else "right")
                for row in v["engines"]:
                    compared.add_row(*(escape("—" if value is None else fmt(value)) for value in row.values()))
                # Too wide beside the suite's name (the dw table's nine columns at 120): stacked, not cut.
                table.add_row("", "\n".join(_stacked(compared)).rstrip() if out.is_terminal and _cut(compared, out.width - 11)
                              else compared)
            style = "red" if v["checks_failed"] else "green" if v["checks_passed"] else "yellow"
            table.add_row("", f"correctness: [{style}]{escape(v['correctness'])}[/{style}]")
            table.add_row("", f"bottleneck: {escape(v['bottleneck'])}")
            if v.get("disturbed"):
                table.add_row("", f"[yellow]disturbed: {escape(v['disturbed'])}[/yellow]")
            for advice in v.get("advice") or []:
                table.add_row("", f"[bold]next[/bold]: {escape(advice['text'])}")
        if out.is_terminal:
            print_table(table)
        else:  # a pipe or a file gets whole lines, without padding to the table's width
            wide = Console(highlight=False, width=1000)
            with wide.capture() as captured:
                wide.print(table)
            print("\n".join(line.rstrip() for line in captured.get().splitlines()))
    _print_thresholds(thresholds)


def _print_thresholds(results: list[dict[str, Any]]) -> None:
    from refbench.formats import fmt

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


def _tls_options():
    return (typer.Option(None, "--tls-ca-file", help="TLS: CA certificate that signed the cluster's certificates (PEM)."),
            typer.Option(None, "--tls-cert", help="TLS: this end's certificate (PEM)."),
            typer.Option(None, "--tls-key", help="TLS: this end's private key (PEM)."))


@app.command(short_help="Run a plan's suites into a new run directory, then the report.", epilog=_examples(
    "refbench run  # host inventory + audit, then the report",
    "refbench run --plan lab.toml --dry-run  # options and their origin, cases, time, space",
    "refbench run --plan lab.toml --hosts 1,2,4 --scheduler tcp://10.0.0.1:8786  # a scaling series",
    "refbench run --plan lab.toml --name lab-a", "refbench run --suite device /mnt/nvme0 --profile standard"))
def run(
    targets: Optional[list[str]] = typer.Argument(None, metavar="TARGET", help="Files, directories or block devices for "
                                                  "the run's suites; what each suite does with them: refbench SUITE --help."),
    plan: Optional[Path] = typer.Option(None, "--plan", help="TOML plan file."),
    suite: Optional[list[str]] = typer.Option(None, "--suite", metavar="SUITE",
                                              help="Suite to run (repeatable); overrides the plan's list."),
    profile: Optional[str] = typer.Option(None, "--profile", metavar="PROFILE", help=timings.profile_help()),
    runs_dir: Optional[str] = typer.Option(None, "--runs-dir", help=PLAN_RUNS_DIR_HELP),
    name: Optional[str] = typer.Option(None, "--name", help="Run name, part of the run directory (default: run)."),
    set_: Optional[list[str]] = typer.Option(None, "--set", metavar="SUITE.KEY=VALUE",
                                             help="Override a suite option (repeatable)."),
    keep_work: Optional[bool] = typer.Option(None, "--keep-work/--no-keep-work", help=KEEP_WORK_HELP),
    tag: Optional[list[str]] = typer.Option(None, "--tag", metavar="NAME=VALUE", help=TAG_HELP),
    repeats: Optional[int] = typer.Option(None, "--repeats", metavar="N", help=REPEATS_HELP),
    dry_run: bool = typer.Option(False, "--dry-run", help=DRY_RUN_HELP),
    hosts: Optional[str] = typer.Option(None, "--hosts", metavar="N[,N…]", help="Run on this many nodes at once; "
                                        "several counts make a scaling series (1,2,4)."),
    scheduler: Optional[str] = typer.Option(None, "--scheduler", help="Dask scheduler address (tcp:// or tls://); "
                                            "without it, --hosts starts a local cluster on loopback."),
    tls_ca_file: Optional[str] = _tls_options()[0], tls_cert: Optional[str] = _tls_options()[1],
    tls_key: Optional[str] = _tls_options()[2],
    as_json: bool = typer.Option(False, "--json", help=RUN_JSON_HELP),
    quiet: bool = typer.Option(False, "--quiet", "-q", help=QUIET_HELP),
) -> None:
    """Run a plan: its suites in order, into a new run directory, then write the report. With --hosts, on that
    many nodes of a Dask cluster at once, each measuring its own host."""
    _start_and_execute({
        "path": plan, "flags": {"profile": profile, "runs_dir": runs_dir, "name": name, "targets": targets or None,
                                "keep_work": keep_work, "tags": tag or None, "repeats": repeats, "hosts": _counts(hosts),
                                "scheduler": scheduler, "tls_ca_file": tls_ca_file,
                                "tls_cert": tls_cert, "tls_key": tls_key},
        "sets": set_, "suites": suite or None,
    }, as_json, dry_run, quiet)


def _counts(text: str | None) -> list[int] | None:
    return None if text is None else TOP_LEVEL["hosts"].parse_flag(text, "--hosts")


@app.command(short_help="Start a Dask scheduler for refbench workers.",
             epilog=_examples("refbench scheduler  # loopback only: 127.0.0.1:8786",
                              "refbench scheduler --host 10.0.0.1 --tls-ca-file ca.pem --tls-cert sched.pem --tls-key sched.key"))
def scheduler(
    host: str = typer.Option("127.0.0.1", "--host", help="Address to listen on (loopback by default)."),
    port: int = typer.Option(8786, "--port", help="Port to listen on (0: any free port)."),
    tls_ca_file: Optional[str] = _tls_options()[0], tls_cert: Optional[str] = _tls_options()[1],
    tls_key: Optional[str] = _tls_options()[2],
) -> None:
    """Start a Dask scheduler for refbench workers; prints its address."""
    from refbench.cluster.service import serve_scheduler

    serve_scheduler(host, port, tls_ca_file or "", tls_cert or "", tls_key or "", err)


@app.command(short_help="Start a Dask worker that runs plans on this host.",
             epilog=_examples("refbench worker --scheduler tcp://127.0.0.1:8786",
                              "refbench worker --scheduler tls://10.0.0.1:8786 --tls-ca-file ca.pem --tls-cert db1.pem --tls-key db1.key"))
def worker(
    scheduler: str = typer.Option(..., "--scheduler", help="The scheduler's address (tcp:// or tls://)."),
    name: Optional[str] = typer.Option(None, "--name", help="This node's name in the results (default: the host name)."),
    tls_ca_file: Optional[str] = _tls_options()[0], tls_cert: Optional[str] = _tls_options()[1],
    tls_key: Optional[str] = _tls_options()[2],
) -> None:
    """Start a Dask worker that runs refbench plans on this host for a cluster run."""
    from refbench.cluster.service import serve_worker

    serve_worker(scheduler, name, tls_ca_file or "", tls_cert or "", tls_key or "", err)


@app.command(short_help="Continue an interrupted run.", epilog=_examples("refbench resume runs/20261122T070000Z-lab-a"))
def resume(
    run_ref: str = typer.Argument(..., metavar="RUN", help="Run directory, or a unique part of its name."),
    runs_dir: str = typer.Option("runs", "--runs-dir", help=RUNS_DIR_HELP),
    quiet: bool = typer.Option(False, "--quiet", "-q", help=QUIET_HELP),
) -> None:
    """Continue an interrupted run: recorded cases are skipped, the rest are measured. A cluster run keeps the
    steps every node finished and measures the others again, all nodes of a step together."""
    found = Run.find(run_ref, runs_dir)
    status = found.status()
    if status == "running":
        raise UserError(f"run {found.path} is in use by another refbench process.")
    # A corrupt record or findings file was edited or damaged after its atomic write: neither trusted nor deleted,
    # it is kept beside as NAME.corrupt, and what it held is measured (or checked) again.
    set_aside = found.set_aside_corrupt_files()
    for corrupt in set_aside:
        err.print(f"[yellow]set aside[/yellow] {escape(str(corrupt.path))} as {escape(corrupt.path.name)}{SET_ASIDE_SUFFIX}: "
                  f"{escape(corrupt.where)} could not be read, so this resume measures (or checks) it again.", soft_wrap=True)
    if status == "complete" and not set_aside:
        err.print(f"{found.path} is already complete; nothing to resume.")
        print(found.path)
        return
    _require_current_options(found)
    err.print(f"resuming {found.path}: {len(found.records())} case(s) already recorded")
    _execute(found, quiet=quiet)


def _require_current_options(found: Run) -> None:
    """A run started by an older refbench lacks the options added since, and guessing them would change what the
    run measures halfway through."""
    for name, saved in found.plan.options.items():
        if name in suite_names():
            if missing := sorted(set(get_suite(name).options) - set(saved)):
                raise UserError(f"run {found.path} was started by an older refbench whose {name} options lack "
                                f"{', '.join(missing)}: resume it with that version, or start a new run.")


@app.command(short_help="Remove the work data a kept or interrupted run left.",
             epilog=_examples("refbench clean runs/20261122T070000Z-lab-a  # a kept or interrupted run",
                              "refbench clean --all-work --runs-dir /data/refbench-runs  # every run not running"))
def clean(
    run_ref: Optional[str] = typer.Argument(None, metavar="RUN", help="Run directory, or a unique part of its name."),
    all_work: bool = typer.Option(False, "--all-work", help="Every run in the runs directory that is not running."),
    runs_dir: str = typer.Option("runs", "--runs-dir", help=RUNS_DIR_HELP),
) -> None:
    """Remove the work data a kept or interrupted run left: generated data, database directories and test files,
    in its targets too (never a target itself, nor anything refbench did not create). Its records and report stay;
    a run in use by another process is refused."""
    if (run_ref is None) == (not all_work):
        raise UserError("name a RUN or give --all-work (not both).")
    runs = list_runs(runs_dir) if all_work else [Run.find(run_ref or "", runs_dir)]
    removed = runner.clean(runs, err, each=all_work)
    tunes = []
    if all_work:  # and what tunes killed with their watchdog left: their loaded database and its copy
        from refbench.tune.leftovers import remove_data_of_dead_tunes

        tunes = remove_data_of_dead_tunes(Path(runs_dir) / "tune", lambda line: err.print(line, soft_wrap=True))
    where = f"{len(runs)} run(s) in {runs_dir}" if all_work else str(runs[0].path)
    err.print(f"work data removed: {sum(size for _, size in removed) / 1e6:,.1f} MB from {where}" if removed
              else f"no work data left by {where}" + (f" (the data of {len({p.parent for p in tunes})} killed tune(s) removed)" if tunes else ""),
              soft_wrap=True)


RUNS_TABLE_LIMIT = 50  # a screenful or two; 1,000 runs as a table take Rich 0.7 s to lay out


def _run_filters():
    return (typer.Option(None, "--suite", metavar="SUITE", help="Only runs that include this suite."),
            typer.Option(None, "--host", metavar="HOST", help="Only runs made on this host."),
            typer.Option(None, "--tag", metavar="NAME=VALUE", help="Only runs with this tag (repeatable: all of them)."),
            typer.Option(None, "--since", metavar="WHEN", help="Only runs started since: 2026-11-01, 2026-11-01T08:00 "
                         "(UTC), 7d or 12h ago."))


def _tag_filter(tags: list[str] | None) -> dict[str, str]:
    from refbench.runstore import parse_tags

    return parse_tags(tags or [])


def _tags_text(tags: dict[str, str]) -> str:
    return " ".join(f"{k}={v}" for k, v in tags.items())


def _warn(sentence: str) -> None:
    err.print(f"refbench: warning: {sentence}", markup=False, highlight=False, soft_wrap=True)


def _headline_text(h: dict[str, Any]) -> str:
    from refbench.catalog.history import series_name
    from refbench.formats import fmt

    if h.get("unrated"):
        return f"{h['suite']} {series_name(h['label'])}: not rated at this size"
    return f"{h['suite']} {series_name(h['label'])}: {fmt(h['value'])} {h['unit']}".rstrip()


@app.command("runs", short_help="List the runs with their headline figures, filtered by suite, host, tag or date.",
             epilog=_examples("refbench runs --runs-dir /data/refbench-runs", "refbench runs --suite oltp --since 30d",
                              "refbench runs --tag firmware=2.1 --host db1 --json"))
def list_runs_cmd(
    runs_dir: str = typer.Option("runs", "--runs-dir", help=RUNS_DIR_HELP),
    suite: Optional[str] = _run_filters()[0], host: Optional[str] = _run_filters()[1],
    tag: Optional[list[str]] = _run_filters()[2], since: Optional[str] = _run_filters()[3],
    limit: Optional[int] = typer.Option(None, "--limit", min=0, metavar="N", help="Only the N newest; 0 lists all "
                                        f"(the table shows the {RUNS_TABLE_LIMIT} newest unless told, --json all)."),
    as_json: bool = typer.Option(False, "--json", help="Machine-readable output."),
) -> None:
    """List the runs, newest first, with their status, tags and headline figures. The list comes from the runs
    catalog (catalog.sqlite in the runs directory), brought up to date from the run directories first; a run
    that cannot be read is listed as corrupt with one warning."""
    from refbench.catalog import read_catalog, since_utc
    from refbench.catalog.history import lead_headlines

    shown = limit if limit is not None else 0 if as_json else RUNS_TABLE_LIMIT
    listed = read_catalog(runs_dir, lambda catalog: catalog.runs(suite, host, _tag_filter(tag), since_utc(since),
                                                                 shown + 1 if shown else None), _warn)
    more = shown and len(listed) > shown
    listed = listed[:shown] if more else listed
    for r in listed:
        if r["problem"]:  # the other runs are still listed
            _warn(r["problem"])
    if as_json:
        print(json.dumps(listed, indent=2))
        return
    if not listed:
        err.print(f"no runs in {runs_dir}" + (" match" if suite or host or tag or since else ""))
        return
    table = RichTable()
    table.add_column("run", no_wrap=True)
    for column in ("status", "profile", "host", "tags", "lead figure per suite", "records", "started (UTC)"):
        table.add_column(column)
    for r in listed:
        style = {"complete": "green", "interrupted": "yellow", "failed": "red"}.get(r["status"], "")
        if r["status"].startswith("corrupt"):
            style = "bold red"
        # One headline a suite keeps a run to a few lines; --json has them all.
        figures = "\n".join(map(_headline_text, lead_headlines(r["headlines"]))) or ", ".join(r["suites"]) or "(host only)"
        table.add_row(r["run"], f"[{style}]{r['status']}[/{style}]" if style else r["status"], r["profile"] or "",
                      r["host"] or "", escape(_tags_text(r["tags"])), escape(figures),
                      str(r["records"] if r["records"] is not None else ""), r["started_utc"] or "")
    print_table(table)
    if more:
        err.print(f"showing the {shown} newest runs; --limit 0 lists them all")


@app.command(short_help="Set or change a run's tags.",
             epilog=_examples("refbench tag runs/20261122T070000Z-lab-a firmware=2.1 array=raid10",
                              "refbench tag lab-a array=  # an empty value removes the tag"))
def tag(
    run_ref: str = typer.Argument(..., metavar="RUN", help="Run directory, or a unique part of its name."),
    tags: list[str] = typer.Argument(..., metavar="NAME=VALUE", help="Tags to set; NAME= removes one."),
    runs_dir: str = typer.Option("runs", "--runs-dir", help=RUNS_DIR_HELP),
) -> None:
    """Set, change or remove a run's tags (kept in its tags.json; 'refbench runs --tag' and history filter by them)."""
    from refbench.runstore import parse_tags

    found = Run.find(run_ref, runs_dir)
    found.meta  # a corrupt run.json ends the command before tags.json is written
    changes = parse_tags(tags)
    now = found.set_tags(changes)
    err.print(f"tags of {found.path.name}: " + (_tags_text(now) or "(none)"),
              markup=False, soft_wrap=True)


@app.command(short_help="A figure across runs: values, spread and a trend chart.",
             epilog=_examples("refbench history oltp.nopm", "refbench history dss.power --tag array=raid10 --since 90d",
                              "refbench history device.t0-rand-w0-qd32-bs4k.iops --json"))
def history(
    figure: str = typer.Argument(..., metavar="FIGURE", help="SUITE.METRIC, a headline figure (oltp.nopm, dss.power, "
                                 "device.iops), or SUITE.CASE.METRIC, one case's figure."),
    runs_dir: str = typer.Option("runs", "--runs-dir", help=RUNS_DIR_HELP),
    host: Optional[str] = _run_filters()[1], tag: Optional[list[str]] = _run_filters()[2],
    since: Optional[str] = _run_filters()[3],
    chart_dir: Optional[Path] = typer.Option(None, "--out", metavar="DIR", help="Where to write the trend chart "
                                             "(PNG and SVG; default: RUNS_DIR/history)."),
    as_json: bool = typer.Option(False, "--json", help="Machine-readable output."),
) -> None:
    """A figure's values over the runs that have it, oldest first, with each run's spread (the lowest and highest
    of the repeats behind the value), a trend chart of them, and the newest run judged against the runs before it
    (each run one replicate; compare's estimator)."""
    from refbench.catalog import read_catalog, since_utc
    from refbench.catalog.history import history as figure_history, latest_change, spread_text, trend_chart
    from refbench.report.charts import render_figure
    from refbench.formats import fmt

    points = read_catalog(runs_dir, lambda catalog: figure_history(catalog, figure, host, _tag_filter(tag),
                                                                   since_utc(since)), _warn)
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", figure)
    where = chart_dir or Path(runs_dir) / "history"
    try:
        rendered = render_figure(trend_chart(figure, points, f"history-{safe}"), where)
    except OSError as exc:
        raise UserError(f"cannot write the trend chart to {where}: {exc.strerror or exc} (choose another place with "
                        "--out).") from None
    changes = latest_change(points)
    if as_json:
        print(json.dumps({"figure": figure, "chart": str(rendered.svg), "points": points, "latest": changes}, indent=2))
        return
    table = RichTable("run", "started (UTC)", "host", "tags", "series", "value", "spread (repeats: low–high over n)",
                      title=f"{figure} over {len({p['run'] for p in points})} runs", title_justify="left")
    for p in points:
        table.add_row(p["run"], p["started_utc"] or "", p["host"] or "", escape(_tags_text(p["tags"])),
                      escape(p["series"]), f"{fmt(p['value'])} {escape(p['unit'])}".rstrip(), spread_text(p))
    print_table(table)
    for change in changes:
        out.print(escape(change["line"]), overflow="fold")
    err.print(f"trend chart: {rendered.svg} (and .png)")


@app.command(short_help="Write a run's tables, charts and report.html again.",
             epilog=_examples("refbench report runs/20261122T070000Z-lab-a && xdg-open runs/*/report.html"))
def report(
    run_ref: str = typer.Argument(..., metavar="RUN", help="Run directory, or a unique part of its name."),
    runs_dir: str = typer.Option("runs", "--runs-dir", help=RUNS_DIR_HELP),
) -> None:
    """Write (again) a run's tables, charts and self-contained report.html."""
    from refbench.report import build_report

    found = Run.find(run_ref, runs_dir)
    found.check_readable()  # a corrupt file ends the command here, before any table or chart is rewritten
    if found.plan.hosts:
        from refbench.cluster.summary import build_cluster_report

        build_cluster_report(found)
        path = found.report_path
    else:
        path = build_report(found, err)
    err.print(f"report: {path}")
    print(found.path)


@app.command(epilog=_examples("refbench check runs/20261122T070000Z-lab-a  # the run's own [accept]",
                              "refbench check runs/20261122T070000Z-lab-a --accept accept.toml  # only an [accept] table"))
def check(
    run_ref: str = typer.Argument(..., metavar="RUN", help="Run directory, or a unique part of its name."),
    accept_file: Optional[Path] = typer.Option(None, "--accept", "--plan", metavar="FILE", help="A file with an "
                                               "[accept] table (alone, or in a plan) to evaluate (default: the "
                                               "thresholds the run was started with)."),
    runs_dir: str = typer.Option("runs", "--runs-dir", metavar="PATH", help=RUNS_DIR_HELP),
    as_json: bool = typer.Option(False, "--json", help="Machine-readable output."),
) -> None:
    """Evaluate acceptance thresholds against a finished run. Exit status 3 when one fails, 0 when all pass."""
    found = Run.find(run_ref, runs_dir)
    found.check_readable()
    if accept_file is not None:
        thresholds = accept.load_file(str(accept_file))
    elif found.plan.accept:
        thresholds = accept.parse(found.plan.accept, str)
    else:
        raise UserError(f"nothing to check: run {found.path} was started without thresholds (give a file with an "
                        "[accept] table: --accept FILE).")
    results = accept.evaluate(found, thresholds)
    if as_json:
        print(json.dumps({"run": str(found.path), "accept": results}, indent=2))
    else:
        _print_thresholds(results)
    if accept.failed(results):
        raise typer.Exit(accept.EXIT_THRESHOLD_FAILED)


@app.command(short_help="Compare runs: headline figures and significant changes.",
             epilog="Examples:\n\n  refbench compare runs/…-sas-ssd runs/…-nvme\n\n"
                    "  refbench compare BASE NEW1 NEW2 --metric iops\n\n"
                    "  refbench compare BASE NEW --format markdown  # a table to paste in a ticket\n\n"
                    "  refbench compare BASE NEW --all --format csv > diff.csv  # a row per figure\n\n"
                    "  refbench compare BASE NEW --all --json > diff.json")
def compare(
    runs: list[str] = typer.Argument(..., metavar="RUN", show_default=False,
                                     help="Two or more runs: the baseline first, then the runs compared with it; "
                                     "RUN,RUN,… is one side of several runs of one configuration."),
    runs_dir: str = typer.Option("runs", "--runs-dir", metavar="PATH", help=RUNS_DIR_HELP),
    metric: Optional[str] = typer.Option(None, "--metric", metavar="TEXT",
                                         help="Only figures whose name contains TEXT."),
    everything: bool = typer.Option(False, "--all", help="Every figure the runs share, not only headlines and "
                                    "significant changes."),
    html_out: Optional[Path] = typer.Option(None, "--out", metavar="PATH", help="HTML file to write (default: "
                                            "next to the last run, named after the runs and the selection)."),
    as_json: bool = typer.Option(False, "--json", help="Machine-readable output (the same as --format json)."),
    output_format: Optional[str] = typer.Option(None, "--format", metavar="FORMAT", show_default=False,
                                                help="text (the default: for a terminal), markdown (the answers and "
                                                "a table of the headline figures, for a ticket), csv (a row per "
                                                "figure and compared run, the numbers and units in columns, for a "
                                                "spreadsheet) or json (as --json)."),
) -> None:
    """Compare runs with the first: the answer first, then what changed beyond the noise.

    Per suite a line that counts, then each headline figure as B / A with its 95% confidence interval, the
    measurements a side and the answer (faster, slower, no change, same, or cannot tell and what would tell), then
    one line overall; the other figures that changed follow (--all: every figure).

    Runs and repeats are the replicates, never the seconds of one run: a side given as RUN,RUN,… is several runs
    of one configuration, each a replicate. B / A is tested on the logarithms (SciPy's t-test: Student's pooled
    at equal sizes, as pyperf; Welch's otherwise); a figure measured once a side (or equal in every repeat) is
    tested against this host's measured run-to-run spread of it (earlier repeats in the runs catalog), and
    without one it is "cannot tell" (measure the spread once with --repeats 3). The headline figures are one
    family (Bonferroni), the other figures another (Benjamini-Hochberg); each interval shown is
    the one its answer used.
    """
    from rich import box
    from rich.table import Column

    from refbench.report.compare import (FORMATS, answer_lines, answers, by_figure, change_words, csv_text,
                                         default_html_path, letters, markdown, overall, public, selected,
                                         shared_figures, units, wait_changes, wait_lines, write_html)

    chosen = (output_format or "").strip().lower() or ("json" if as_json else "text")
    if chosen not in FORMATS:
        raise UserError(f"--format {output_format!r} is not a format: use {', '.join(FORMATS[:-1])} or {FORMATS[-1]}.")
    if as_json and chosen != "json":
        raise UserError(f"--json and --format {chosen} ask for two outputs: give one of them.")
    if len(runs) < 2:
        raise UserError("compare needs at least two runs: the baseline, then the runs compared with it.")
    sides = [[Run.find(r, runs_dir) for r in side.split(",") if r] for side in runs]
    if not all(sides):
        raise UserError("a side of the comparison names no run (RUN or RUN,RUN,…).")
    for run in (run for side in sides for run in side):
        run.check_readable()
    found = [side[0] for side in sides]
    shared = shared_figures(found, metric, sides)
    rows = selected(shared, everything)
    path = html_out or default_html_path(found, metric, everything)
    write_html(found, shared, path, everything, metric)
    significant = any(r["significant"] for r in shared)
    found_answers = answers(shared)
    changes = wait_changes(found)
    if chosen in ("markdown", "csv"):
        names = [",".join(r.path.name for r in side) for side in sides]
        known = units(found)
        sys.stdout.write(markdown(names, found_answers, rows, known, wait_lines(changes, found_answers), everything)
                         if chosen == "markdown" else csv_text(names, rows, known))
        err.print(f"comparison: {path}")
        return
    if chosen == "json":
        print(json.dumps({"a": str(found[0].path), "runs": [str(r.path) for r in found], "html": str(path),
                          "significant": significant, "answers": found_answers, "lines": answer_lines(found_answers),
                          "waits": changes, "wait_lines": wait_lines(changes, found_answers),
                          "figures": public(rows), "overall": overall(rows) if everything else []}, indent=2))
        return
    names = letters(found)
    out.print("   ".join(f"{n} = {','.join(r.path.name for r in side)}" for n, side in zip(names, sides)))
    if not shared:
        out.print(f"the runs share no figures{' with ' + repr(metric) + ' in the name' if metric else ''}.")
    for line in answer_lines(found_answers) + wait_lines(changes, found_answers):
        out.print(escape(line), overflow="fold")
    # Below the answers: the other figures that changed (every figure with --all), one line per figure.
    listed = by_figure(rows if everything else [r for r in rows if not r["headline"]])
    if listed:
        from refbench.formats import fmt

        # One column names the figure, so that at 80 columns a long name wraps at its spaces, not the numbers.
        table = RichTable(Column("suite case figure", ratio=1), "A", *(c for n in names[1:] for c in (n, f"{n} vs A")),
                          box=box.SIMPLE_HEAD)
        after_headlines = False
        for (suite, case, m), per_run in listed.items():
            first = next(iter(per_run.values()))
            if not first["headline"] and not after_headlines:
                after_headlines = True
                if table.row_count:  # a rule between the headline figures and the other changes
                    table.add_section()
            cells = [f"{suite} {case} {m}", fmt(first["A"])]
            for n in names[1:]:
                r = per_run.get(n)
                words = change_words(r) if r else "—"
                style = "" if not r or not r["significant"] else "green" if "faster" in words else "red" if "slower" in words else "yellow"
                cells += [fmt(r["B"]) if r else "—", f"[{style}]{escape(words)}[/{style}]" if style else words]
            table.add_row(*cells)
        print_table(table)
        if everything and (summary := overall(rows)):
            table = RichTable("run", "suite", "group", "figure", "cases", "geometric mean against A", title="Overall",
                              title_justify="left", box=box.SIMPLE_HEAD)
            for r in summary:
                table.add_row(r["vs"], r["suite"], r["group"], r["metric"], str(r["cases"]), r["against A"])
            print_table(table)
    err.print(f"comparison: {path}")


@app.command(short_help="Serve the runs, trends, comparisons and live progress as a local web dashboard.",
             epilog=_examples("refbench serve  # then open http://127.0.0.1:8765/",
                              "refbench serve --runs-dir /data/refbench-runs --port 9000",
                              "refbench serve --host 0.0.0.0  # reachable from elsewhere: prints a URL with a token"))
def serve(
    runs_dir: str = typer.Option("runs", "--runs-dir", metavar="PATH", help=RUNS_DIR_HELP),
    host: str = typer.Option("127.0.0.1", "--host", metavar="ADDRESS", help="Address to listen on. Any address "
                             "but a loopback one (127.0.0.1, ::1, localhost) requires the token printed at start."),
    port: int = typer.Option(8765, "--port", metavar="N", help="Port to listen on (0: any free port).", min=0, max=65535),
) -> None:
    """Serve the runs list, each run's report, figure trends, N-way comparisons and the progress of running runs
    as web pages, from the runs catalog and the run directories; nothing is loaded from the network."""
    from refbench.web import serve as serve_dashboard

    serve_dashboard(runs_dir, host, port, err)


@app.command(short_help="Inventory the host and audit its tuning.",
             epilog=_examples("refbench host", "refbench host --json > host.json",
                              "refbench host --tuned-profile /etc/tuned/refbench-performance/tuned.conf"))
def host(
    as_json: bool = typer.Option(False, "--json", help="Machine-readable output."),
    tuned_profile: Optional[Path] = typer.Option(None, "--tuned-profile", help="Write a tuned profile (like the mixed analytics paper's) to PATH."),
    sysroot: Path = typer.Option(Path("/"), "--sysroot", hidden=True, help="Read /proc and /sys under this root (tests)."),
) -> None:
    """Inventory the host and audit its tuning against what the reference papers set (the mixed analytics paper's
    tuned profile)."""
    from refbench.host import inventory, tuning
    from refbench.host.sysfs import SysRoot

    root = SysRoot(sysroot)
    inv = inventory.collect(root)
    checks = tuning.audit(root, inv)
    if tuned_profile is not None:
        try:
            atomic_write_text(tuned_profile, tuning.tuned_profile())
        except OSError as exc:
            raise UserError(f"cannot write the tuned profile to {tuned_profile}: {exc.strerror}.") from None
        err.print(f"tuned profile written to {tuned_profile}")
    if as_json:
        print(json.dumps({"inventory": inv, "audit": [c.to_dict() for c in checks]}, indent=2))
        return
    _print_host(inv, checks)


@app.command(short_help="Find the settings that make a suite faster, each change proven by an A/B measurement.",
             epilog=_examples("refbench tune --suite oltp --budget 10m  # quick profile: a few trials",
                              "refbench tune --suite oltp --profile standard --budget 3h",
                              "refbench tune --suite dss --set 'dss.engines=[\"postgres\"]' --budget 1h",
                              "refbench tune --suite oltp --set oltp.data_dir=/mnt/data/pg --wal-dir /mnt/log --budget 2h",
                              "refbench tune --suite oltp --baseline runs/20261126T120000Z-oltp --apply-host",
                              "refbench tune --suite oltp --baseline runs/20261126T120000Z-oltp --only shared_buffers "
                              "--repeats 3"))
def tune(
    suite: str = typer.Option(..., "--suite", metavar="SUITE", help="The suite to tune for: oltp, dss, dw, analytics or device."),
    budget: str = typer.Option("30m", "--budget", metavar="TIME", help="How long the whole tune may take, the baseline "
                               "included (2h, 90m, 600s); one too small for the baseline and one trial is refused with the "
                               "smallest that would; a trial starts only when it and the final confirmation fit in what is left."),
    profile: Optional[str] = typer.Option(None, "--profile", metavar="PROFILE", help="The suite's profile: quick, standard "
                                          "or full (default: the baseline's, else quick)."),
    plan_path: Optional[str] = typer.Option(None, "--plan", metavar="PATH", help="TOML plan with the suite's options."),
    sets: Optional[list[str]] = typer.Option(None, "--set", metavar="SUITE.KEY=VALUE", help="Override an option, as in a plan (repeatable)."),
    engine: Optional[str] = typer.Option(None, "--engine", metavar="ENGINE", help="oltp: postgres or mariadb (same as --set oltp.engine=…)."),
    baseline: Optional[str] = typer.Option(None, "--baseline", metavar="RUN", help="Start from this finished run's "
                                           "bottleneck instead of running the suite first."),
    repeats: int = typer.Option(3, "--repeats", metavar="N", min=2, max=20, help="Runs on each side of every A/B trial."),
    points: int = typer.Option(2, "--points", metavar="N", min=1, max=20, help="Values tried per numeric setting (Optuna's TPE)."),
    trials: int = typer.Option(0, "--trials", metavar="N", min=0, help="At most N trials (0: as many as the budget allows)."),
    only: Optional[str] = typer.Option(None, "--only", metavar="NAME[,NAME…]", help="Try only these settings, by the "
                                       "names the journey gives them (shared_buffers,max_wal_size; wal_dir; "
                                       "vm.dirty_ratio…), in the order of what limits the baseline."),
    apply_host: bool = typer.Option(False, "--apply-host", help="Also try host settings (dirty ratios, I/O scheduler, "
                                    "read-ahead, transparent huge pages, CPU governor): root only; each one is put back "
                                    "after its runs, and by the next refbench start if tune is killed."),
    allow_server_changes: bool = typer.Option(False, "--allow-server-changes", help="With a dsn (your own server): "
                                              "try its settings that need no restart (ALTER SYSTEM and a reload; "
                                              "MariaDB: SET GLOBAL), each put back after its runs."),
    wal_dir: Optional[str] = typer.Option(None, "--wal-dir", metavar="DIR", help="oltp: also try the WAL "
                                          "(MariaDB: the redo log) in this existing directory, on another device than "
                                          "the data."),
    runs_dir: str = typer.Option("runs", "--runs-dir", metavar="PATH", help=RUNS_DIR_HELP + " The tune goes in "
                                 "RUNS_DIR/tune/STAMP-SUITE/."),
    as_json: bool = typer.Option(False, "--json", help="Print the journey as JSON."),
) -> None:
    """Tune a suite's stack: run it (or read --baseline), name what limits it (the wait profile, the host's
    telemetry), try the engine settings (and with --apply-host the host settings) that address that first, each
    as an A/B trial of runs in A B B A order judged like 'refbench compare' (each run a replicate, a t-test on
    the logarithms), keep what is significantly better (and say which trials an adjustment for every trial tried
    would not keep), confirm the kept set against the baseline with fresh runs on two independently loaded
    databases, and write the tuned profile:
    a plan fragment (tuned-plan.toml), a shell script and a tuned profile for host settings, and report.html.
    Engine settings are changed only on servers refbench manages."""
    from refbench.tune import tuner as tuning
    from refbench.plan import PROFILES

    if suite not in suite_names():
        raise UserError(f"--suite {suite!r} is not a suite: use one of {', '.join(suite_names())}.")
    if profile is not None and profile not in PROFILES:
        raise UserError(f"--profile {profile!r} is not a profile: use one of {', '.join(PROFILES)}.")
    if apply_host and os.geteuid() != 0:
        raise UserError("--apply-host changes kernel settings, which needs root; run tune without it, or as root.")
    request = tuning.Request(suite, profile or "", tuning.parse_budget(budget), repeats, points, trials, plan_path,
                             list(sets or []) + ([f"{suite}.engine={engine}"] if engine else []), baseline or "",
                             runs_dir, apply_host, allow_server_changes, wal_dir or "",
                             [name.strip() for name in (only or "").split(",") if name.strip()])
    tuner = tuning.Tuner(request, lambda line: err.print(line, markup=False, highlight=False, soft_wrap=True))
    try:
        journey = tuner.tune()
    finally:
        if said := tuner.host.restore():
            err.print("host settings put back: " + "; ".join(said), markup=False, highlight=False)
        tuner.host.release()
        if tuner.server is not None and (said := tuner.server.restore()):
            err.print("server settings put back: " + "; ".join(said), markup=False, highlight=False)
    from refbench.tune.profile import write_outputs

    write_outputs(tuner.dir, journey)
    if as_json:
        print(json.dumps(journey, indent=2))
    else:
        for line in tuning.summary_lines(journey):
            print(line)
    print(tuner.dir)


def _print_host(inv: dict[str, Any], checks: list) -> None:
    from refbench.formats import fmt

    cpu, mem, system, numa = inv["cpu"], inv["memory"], inv["system"], inv["numa"]
    facts = RichTable(show_header=False, title="Host inventory", title_justify="left")
    for k, v in [
        ("host", inv.get("hostname")), ("system", " ".join(filter(None, [system["vendor"], system["product"]])) or None),
        ("virtualization", system["virtualization"]), ("distribution", system["distribution"]), ("kernel", system["kernel"]),
        ("CPU", cpu["model"]), ("sockets / cores / threads", f"{fmt(cpu['sockets'])} / {fmt(cpu['cores'])} / {fmt(cpu['threads'])}"),
        ("memory", f"{fmt(mem['total_gib'])} GiB (swap {fmt(mem['swap_total_gib'])} GiB)"), ("NUMA nodes", numa["nodes"]),
        *((t, v or "not found") for t, v in inv["tools"].items()),
    ]:
        facts.add_row(k, "unknown" if v is None else str(v))
    print_table(facts)
    devices = RichTable("device", "model", "size", "rot", "sector L/P B", "scheduler", "nr_req", "read-ahead",
                        title="Block devices", title_justify="left")
    for d in inv["block_devices"]:
        size = f"{d['size_bytes'] / 1e9:,.1f} GB" if d["size_bytes"] else "unknown"
        devices.add_row(d["name"], d["model"] or "unknown", size, fmt(d["rotational"]),
                        f"{fmt(d['logical_sector_bytes'])}/{fmt(d['physical_sector_bytes'])}", d["scheduler"] or "unknown",
                        fmt(d["nr_requests"]), f"{fmt(d['read_ahead_kb'])} KiB")
    print_table(devices)
    mounts = RichTable("device", "mount point", "fs", "size", "free", title="File systems", title_justify="left")
    for m in inv["mounts"]:  # capacity in GB, as the block devices' sizes and the space checks say it
        mounts.add_row(m["device"], m["mountpoint"], m["fstype"],
                       *(f"{m[k] * 2**30 / 1e9:,.1f} GB" if m.get(k) is not None else "unknown" for k in ("size_gib", "free_gib")))
    print_table(mounts)
    audit = RichTable("setting", "current", "recommended", "status", title="Tuning audit", title_justify="left")
    for c in checks:
        style = {"ok": "green", "change": "red", "unknown": "yellow"}[c.status]
        audit.add_row(c.setting, c.current, c.recommended, f"[{style}]{c.status}[/{style}]")
    print_table(audit)
    for c in (c for c in checks if c.status == "change"):
        out.print(f"[bold]{c.setting}[/bold]: {c.why}. Fix:")
        out.print(f"  [cyan]{escape(c.fix)}[/cyan]", soft_wrap=True)  # whole, for copying: the terminal wraps it
    out.print("[dim]unknown = this host does not expose the setting (common in VMs and containers). "
              "--tuned-profile FILE writes the recommended values as a tuned profile.[/dim]")


# ---- one command per suite, all the same shape -----------------------------------------------------

def _add_suite_command(name: str) -> None:
    """``refbench NAME [TARGET…] --profile --plan --runs-dir --name --set`` plus one flag per suite option.
    The signature is built from the suite's option schema, so plan keys and flags never drift apart."""
    suite = get_suite(name)
    kw = inspect.Parameter.KEYWORD_ONLY
    params = [
        inspect.Parameter("targets", kw, annotation=Optional[list[str]],
                          default=typer.Argument(None, metavar="TARGET", help=getattr(suite, "targets_help", "") or "This suite takes no targets.")),
        inspect.Parameter("profile", kw, annotation=Optional[str],
                          default=typer.Option(None, "--profile", metavar="PROFILE", help=_profile_help(suite))),
        inspect.Parameter("plan_path", kw, annotation=Optional[Path], default=typer.Option(None, "--plan", help="TOML plan file.")),
        inspect.Parameter("runs_dir", kw, annotation=Optional[str], default=typer.Option(None, "--runs-dir", help=PLAN_RUNS_DIR_HELP)),
        inspect.Parameter("run_name", kw, annotation=Optional[str], default=typer.Option(None, "--name", help=f"Run name (default: {name}).")),
        inspect.Parameter("sets", kw, annotation=Optional[list[str]],
                          default=typer.Option(None, "--set", metavar=f"{name.upper()}.KEY=VALUE",
                                               help="Override an option, as in a plan (repeatable).")),
        inspect.Parameter("keep_work", kw, annotation=Optional[bool],
                          default=typer.Option(None, "--keep-work/--no-keep-work", help=KEEP_WORK_HELP)),
        inspect.Parameter("tags", kw, annotation=Optional[list[str]],
                          default=typer.Option(None, "--tag", metavar="NAME=VALUE", help=TAG_HELP)),
        inspect.Parameter("repeats", kw, annotation=Optional[int],
                          default=typer.Option(None, "--repeats", metavar="N", help=REPEATS_HELP)),
        inspect.Parameter("dry_run", kw, annotation=bool, default=typer.Option(False, "--dry-run", help=DRY_RUN_HELP)),
        inspect.Parameter("as_json", kw, annotation=bool, default=typer.Option(False, "--json", help=RUN_JSON_HELP)),
        inspect.Parameter("quiet", kw, annotation=bool, default=typer.Option(False, "--quiet", "-q", help=QUIET_HELP)),
    ]
    for key, option in suite.options.items():
        flag = key.replace("_", "-")
        # An empty text default means "not set"; the help says what happens then.
        text = option.help if option.default == "" else f"{option.help} ({_defaults(key, option)})"
        if option.kind is bool:
            default = typer.Option(None, f"--{flag}/--no-{flag}", help=text)
            params.append(inspect.Parameter(f"opt_{key}", kw, annotation=Optional[bool], default=default))
        else:
            metavar = "A,B,…" if option.kind is list else {int: "N", float: "NUMBER"}.get(option.kind, "TEXT")
            default = typer.Option(None, f"--{flag}", metavar=metavar, help=text)
            params.append(inspect.Parameter(f"opt_{key}", kw, annotation=Optional[str], default=default))

    def command(**kwargs: Any) -> None:
        suite_options = {k[4:]: v for k, v in kwargs.items() if k.startswith("opt_")}
        _start_and_execute({
            "path": kwargs["plan_path"], "sets": kwargs["sets"], "suites": [name], "defaults": {"name": name},
            "flags": {"profile": kwargs["profile"], "runs_dir": kwargs["runs_dir"], "name": kwargs["run_name"],
                      "targets": kwargs["targets"] or None, "keep_work": kwargs["keep_work"], "tags": kwargs["tags"] or None,
                      "repeats": kwargs["repeats"]},
            "suite_flags": {name: suite_options},
        }, kwargs["as_json"], kwargs["dry_run"], kwargs["quiet"])

    command.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    command.__doc__ = suite.summary
    examples = getattr(suite, "examples", None) or [f"refbench {name} --profile quick --name {name}-lab-a"]
    # The list of commands shows what the suite does and its paper: the summary up to its first ':' or ' ('.
    short = re.split(r":| \(", suite.summary, maxsplit=1)[0].rstrip(".") + "."
    app.command(name=name, short_help=short, epilog=_examples(*examples, f"refbench {name} --profile standard --dry-run  # time and space first"))(command)


def _profile_help(suite) -> str:
    return timings.suite_profile_help(suite.name)


def _defaults(key: str, option) -> str:
    """An option's default as the help shows it, per profile when it has one for each: "quick 4 · standard 16"."""
    from refbench.dryrun import shown_value
    from refbench.plan import PROFILES

    if option.per_profile:
        return " · ".join(f"{profile} {shown_value(option.default[profile], key)}".replace(",", ", ") for profile in PROFILES)
    return f"default: {shown_value(option.default, key)}".replace(",", ", ")


class _Argument(TyperArgument):
    """An argument shown by its metavar alone: Typer adds the Python type (TARGET… <list[str]>)."""

    def display_type_rich(self, ctx: Any) -> None:
        return None


# Plain type names for every command's options, new ones included: Typer shows the Python type (<str>, <list[str]>).
PLAIN_TYPES = {"int": "N", "float": "NUMBER", "Path": "PATH", "str": "TEXT", "list[str]": "TEXT", "list[int]": "N",
               "list[Path]": "PATH"}


def _plain_types(group: Any) -> None:
    for command in group.commands.values():
        for param in command.params:
            if isinstance(param, TyperArgument):
                param.__class__ = _Argument
            elif isinstance(param, TyperOption) and not param.is_flag and param.metavar is None:
                param.metavar = PLAIN_TYPES.get(param.bare_type(), "VALUE")


def _interrupt(signum: int, frame: Any) -> None:
    """The first Ctrl-C or kill (SIGTERM) stops the run cleanly: servers stopped, the run resumable. Another one
    while that cleanup runs would cut it short, so it only says what is happening."""
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, _interrupted_again)
    raise KeyboardInterrupt


def _interrupted_again(signum: int, frame: Any) -> None:
    print("refbench: still stopping what the run started (servers, workers); kill -9 leaves that to its watchdog.",
          file=sys.stderr)


def _restore_host_settings() -> None:
    """Host and server settings a tune changed and could not put back (it, and for the host its watchdog, were
    killed) go back now; what this user cannot put back or read is said, and the command goes on."""
    from refbench.tune import host, server

    for line in host.left_by_a_killed_tune() + server.left_by_a_killed_tune():
        print(f"refbench: {line}", file=sys.stderr)


def main(argv: list[str] | None = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in args or bool(os.environ.get("REFBENCH_DEBUG"))
    args = [a for a in args if a != "--debug"]
    # What a run writes for people (report, tables, charts, raw output) and the directories holding it are readable
    # by others whatever the umask (077 made the report 0600); what must stay private sets its own mode (secrets/
    # 0700, the managed server's socket and data directories). Write permission stays as the umask says.
    os.umask(os.umask(0) & ~0o055)
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, _interrupt)
    try:
        _restore_host_settings()
        registered = {c.name or c.callback.__name__.replace("_", "-") for c in app.registered_commands}
        # A suite's command is built from its options, which imports the suite (0.2 s for all five): a command that
        # is not a suite's (runs, history…) goes without them.
        if not (args and args[0] in registered):
            for name in suite_names():
                if name not in registered:  # main() may run again in one process (tests call it in-process)
                    _add_suite_command(name)
        command = typer.main.get_command(app)
        _plain_types(command)
        code = command.main(args=args, prog_name="refbench", standalone_mode=False)
    except typer.Exit as exc:
        code = exc.exit_code
    except (typer.Abort, KeyboardInterrupt):
        print("refbench: interrupted.", file=sys.stderr)
        code = 130
    except UserError as exc:
        if debug:
            traceback.print_exc()
        print(f"refbench: {exc}", file=sys.stderr)
        code = exc.exit_code
    except typer.TyperException as exc:  # usage errors: unknown option, bad choice, missing argument
        ctx = getattr(exc, "ctx", None)
        where = ctx.command_path if ctx is not None else "refbench"
        print(f"refbench: {exc.format_message().rstrip('.')} (see '{where} --help').", file=sys.stderr)
        code = getattr(exc, "exit_code", 2)
    except Exception as exc:  # a bug: one line unless --debug; or a resource that ran out outside a run
        if debug:
            raise
        if explained := explain(exc):
            print(f"refbench: {explained}", file=sys.stderr)
            sys.exit(explained.exit_code)
        print(f"refbench: internal error: {type(exc).__name__}: {exc} (run again with --debug for the traceback).",
              file=sys.stderr)
        code = 70
    sys.exit(code if isinstance(code, int) else 0)
