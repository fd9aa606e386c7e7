"""refbench runs, tag and history: the runs catalog, listed and filtered, a run's tags, a figure's trend across runs."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Optional

import typer
from rich.markup import escape
from rich.table import Table as RichTable

from refbench.cli.console import RUNS_DIR_HELP, epilog, err, out, print_json, print_table, warn
from refbench.errors import UserError
from refbench.formats import figure_said, fmt
from refbench.runstore import Run, parse_tags

commands = typer.Typer()

RUNS_TABLE_LIMIT = 50  # a screenful or two; 1,000 runs as a table take Rich 0.7 s to lay out


def _run_filters():
    return (typer.Option(None, "--suite", metavar="SUITE", help="Only runs that include this suite."),
            typer.Option(None, "--host", metavar="HOST", help="Only runs made on this host."),
            typer.Option(None, "--tag", metavar="NAME=VALUE", help="Only runs with this tag (repeatable: all of them)."),
            typer.Option(None, "--since", metavar="WHEN", help="Only runs started since: 2026-11-01, 2026-11-01T08:00 "
                         "(UTC), 7d or 12h ago."))


def _tag_filter(tags: list[str] | None) -> dict[str, str]:
    return parse_tags(tags or [])


def _tags_text(tags: dict[str, str]) -> str:
    return " ".join(f"{k}={v}" for k, v in tags.items())


def _headline_text(h: dict[str, Any]) -> str:
    from refbench.catalog.history import series_name

    if h.get("unrated"):
        return f"{h['suite']} {series_name(h['label'])}: not rated at this size"
    return f"{h['suite']} {series_name(h['label'])}: {figure_said(h['value'], h['unit'], h['low'], h['high'], with_range=False)}"


@commands.command("runs", short_help="List the runs with their headline figures, filtered by suite, host, tag or date.",
                  epilog=epilog("refbench runs --runs-dir /data/refbench-runs", "refbench runs --suite oltp --since 30d",
                                "refbench runs --tag firmware=2.1 --host db1 --json"))
def list_runs_cmd(
    runs_dir: str = typer.Option("runs", "--runs-dir", help=RUNS_DIR_HELP),
    suite: Optional[str] = _run_filters()[0], host: Optional[str] = _run_filters()[1],
    tag: Optional[list[str]] = _run_filters()[2], since: Optional[str] = _run_filters()[3],
    limit: Optional[int] = typer.Option(None, "--limit", min=0, max=1_000_000, metavar="N",
                                        help="Only the N newest; 0 lists all (the table shows the "
                                        f"{RUNS_TABLE_LIMIT} newest unless told, --json all)."),
    as_json: bool = typer.Option(False, "--json", help="Machine-readable output."),
) -> None:
    """List the runs, newest first, with their status, tags and headline figures. The list comes from the runs
    catalog (catalog.sqlite in the runs directory), brought up to date from the run directories first; a run
    that cannot be read is listed as corrupt with one warning."""
    from refbench.catalog import read_catalog, since_utc
    from refbench.catalog.history import lead_headlines

    shown = limit if limit is not None else 0 if as_json else RUNS_TABLE_LIMIT
    listed = read_catalog(runs_dir, lambda catalog: catalog.runs(suite, host, _tag_filter(tag), since_utc(since),
                                                                 shown + 1 if shown else None), warn)
    more = shown and len(listed) > shown
    listed = listed[:shown] if more else listed
    for r in listed:
        if r["problem"]:  # the other runs are still listed
            warn(r["problem"])
    if as_json:
        print_json(listed)
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
        status = escape(r["status"])
        table.add_row(escape(r["run"]), f"[{style}]{status}[/{style}]" if style else status, escape(r["profile"] or ""),
                      escape(r["host"] or ""), escape(_tags_text(r["tags"])), escape(figures),
                      str(r["records"] if r["records"] is not None else ""), r["started_utc"] or "")
    print_table(table)
    if more:
        err.print(f"showing the {shown} newest runs; --limit 0 lists them all")


@commands.command(short_help="Set or change a run's tags.",
                  epilog=epilog("refbench tag runs/20261122T070000Z-lab-a firmware=2.1 array=raid10",
                                "refbench tag lab-a array=  # an empty value removes the tag"))
def tag(
    run_ref: str = typer.Argument(..., metavar="RUN", help="Run directory, or a unique part of its name."),
    tags: list[str] = typer.Argument(..., metavar="NAME=VALUE", help="Tags to set; NAME= removes one."),
    runs_dir: str = typer.Option("runs", "--runs-dir", help=RUNS_DIR_HELP),
) -> None:
    """Set, change or remove a run's tags (kept in its tags.json; 'refbench runs --tag' and history filter by them)."""
    found = Run.find(run_ref, runs_dir)
    found.meta  # a corrupt run.json ends the command before tags.json is written
    changes = parse_tags(tags)
    now = found.set_tags(changes)
    err.print(f"tags of {found.path.name}: " + (_tags_text(now) or "(none)"),
              markup=False, soft_wrap=True)


@commands.command(short_help="A figure across runs: values, spread and a trend chart.",
                  epilog=epilog("refbench history oltp.nopm", "refbench history dss.power --tag array=raid10 --since 90d",
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

    points = read_catalog(runs_dir, lambda catalog: figure_history(catalog, figure, host, _tag_filter(tag),
                                                                   since_utc(since)), warn)
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", figure)
    where = chart_dir or Path(runs_dir) / "history"
    try:
        rendered = render_figure(trend_chart(figure, points, f"history-{safe}"), where)
    except OSError as exc:
        raise UserError(f"cannot write the trend chart to {where}: {exc.strerror or exc} (choose another place with "
                        "--out).") from None
    changes = latest_change(points)
    if as_json:
        print_json({"figure": figure, "chart": str(rendered.svg), "points": points, "latest": changes})
        return
    table = RichTable("run", "started (UTC)", "host", "tags", "series", "value", "spread (repeats: low–high over n)",
                      title=f"{figure} over {len({p['run'] for p in points})} runs", title_justify="left")
    for p in points:
        table.add_row(escape(p["run"]), p["started_utc"] or "", escape(p["host"] or ""), escape(_tags_text(p["tags"])),
                      escape(p["series"]), f"{fmt(p['value'])} {escape(p['unit'])}".rstrip(), spread_text(p))
    print_table(table)
    for change in changes:
        out.print(escape(change["line"]), overflow="fold")
    err.print(f"trend chart: {rendered.svg} (and .png)")
