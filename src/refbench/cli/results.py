"""refbench report, check and compare: a finished run's report written again, its acceptance thresholds
evaluated, runs compared."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Optional

import typer
from rich.markup import escape
from rich.table import Table as RichTable

from refbench import accept
from refbench.cli.console import (RUNS_DIR_HELP, SafeConsole, epilog, err, out, plain, print_json, print_table,
                                  print_thresholds)
from refbench.errors import UserError
from refbench.formats import fmt, visible
from refbench.runstore import Run

commands = typer.Typer()


@commands.command(short_help="Write a run's tables, charts and report.html again.",
                  epilog=epilog("refbench report runs/20261122T070000Z-lab-a && xdg-open runs/*/report.html"))
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
    err.print(f"report: {path}", markup=False)
    plain(str(found.path))


def print_verdict(run: Run, thresholds: list[dict[str, Any]]) -> None:
    """The answer the run was for, after its progress, in one screen: per suite its headline figures, checks, limit
    and next step (refbench.report.brief); `refbench why` prints the evidence."""
    from rich.text import Text

    from refbench.report.brief import brief_lines

    verdicts = run.verdicts()
    if verdicts:
        lines = brief_lines(verdicts, run.path.name, str(run.path), out.width, fold_commands=out.is_terminal)
        if out.is_terminal:
            for line in lines:
                text = Text(visible(line), style="bold" if line is lines[0] else "")
                text.highlight_regex(r"^\d+ FAILED", "bold red")
                text.highlight_regex(r"^\d+ passed", "green")
                out.print(text, soft_wrap=True)
        else:
            plain("\n".join(lines))
    print_thresholds(thresholds)


@commands.command(short_help="Print a run's verdict again, as `refbench run` ended with it.",
                  epilog=epilog("refbench verdict runs/20261122T070000Z-lab-a", "refbench verdict lab-a  # a unique part of its name"))
def verdict(
    run_ref: str = typer.Argument(..., metavar="RUN", help="Run directory, or a unique part of its name."),
    runs_dir: str = typer.Option("runs", "--runs-dir", help=RUNS_DIR_HELP),
) -> None:
    """Per suite its headline figures with the range of their repeats, its checks, what limits it and the next step
    with its command; `refbench why RUN` says why."""
    found = Run.find(run_ref, runs_dir)
    if not found.verdicts():
        raise UserError(f"{found.path} has no verdict yet: refbench report {found.path} writes it.")
    print_verdict(found, found.read_json(found.accept_path) or [])


@commands.command(short_help="Why a run's verdict says what it says: the evidence behind each line.",
                  epilog=epilog("refbench why runs/20261122T070000Z-lab-a  # every suite",
                                "refbench why lab-a oltp  # one suite, the run by a unique part of its name"))
def why(
    run_ref: str = typer.Argument(..., metavar="RUN", help="Run directory, or a unique part of its name."),
    suite: Optional[str] = typer.Argument(None, metavar="SUITE", help="Only this suite."),
    runs_dir: str = typer.Option("runs", "--runs-dir", help=RUNS_DIR_HELP),
) -> None:
    """The verdict's long form: per suite every headline with its notes, the engines side by side, the checks, the
    bottleneck in full (the database's wait shares, the host's CPU and devices, who had the CPU, how many repeats
    agreed), neighbours that disturbed it, and what to try next for each engine with its command; folded to the
    terminal's width (COLUMNS; 80 for a pipe or a file)."""
    from rich.text import Text

    from refbench.cli.console import text_width
    from refbench.report.brief import suite_name
    from refbench.report.why import why_lines

    found = Run.find(run_ref, runs_dir)
    verdicts = [v for v in found.verdicts() if suite in (None, v["suite"])]
    if not verdicts:
        raise UserError(f"{found.path} has no verdict for {suite}." if suite else f"{found.path} has no verdict yet: "
                        f"refbench report {found.path} writes it.")
    lines = why_lines(verdicts, found.path.name, text_width())
    if not out.is_terminal:
        plain("\n".join(lines))
        return
    names = tuple(f"{name} " for name in map(suite_name, verdicts))
    for line in lines:
        text = Text(visible(line), style="bold" if line is lines[0] or f"{line} ".startswith(names) else "")
        text.highlight_regex(r"correctness: all \d+ checks passed", "green")
        text.highlight_regex(r"correctness: .*FAILED", "bold red")
        text.highlight_regex(r"disturbed: .*", "yellow")
        out.print(text, soft_wrap=True)


@commands.command(epilog=epilog("refbench check runs/20261122T070000Z-lab-a  # the run's own [accept]",
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
        print_json({"run": str(found.path), "accept": results})
    else:
        print_thresholds(results)
    if accept.failed(results):
        raise typer.Exit(accept.EXIT_THRESHOLD_FAILED)


@commands.command(short_help="Compare runs: headline figures and significant changes.",
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

    Per suite a line that counts, then each headline figure as B / A with its confidence interval (95% for one
    headline figure, widened by Bonferroni over a suite's several: 97.5% for two; each line says its level), the
    measurements a side and the answer (faster, slower, no change, same, or cannot tell and what would tell), then
    one line overall; the other figures that changed follow (--all: every figure).

    Runs and repeats are the replicates, never the seconds of one run: a side given as RUN,RUN,… is several runs
    of one configuration, each a replicate (compared pair by pair when taken in turn; named twice, counted once).
    B / A is tested on the logarithms (SciPy's t-test: Student's pooled at equal sizes, as pyperf; Welch's
    otherwise); a figure measured once a side (or equal in every repeat) is tested against this host's measured
    run-to-run spread of it (earlier repeats in the runs catalog), and without one it is "cannot tell" (measure the
    spread once with --repeats 3).
    The headline figures are one family (Bonferroni), the other figures another (Benjamini-Hochberg); each
    interval shown is the one its answer used.
    """
    # Comparing does no linear algebra: OpenBLAS's threads, started when SciPy imports numpy, cost 0.2 s of CPU.
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    from rich import box
    from rich.table import Column

    from refbench.report.compare import (FORMATS, answer_lines, answers, by_figure, change_words, csv_text,
                                         default_html_path, host_changed, letters, markdown, overall, public,
                                         selected, shared_figures, side_name, units, wait_changes, wait_lines,
                                         write_html)
    from refbench.report.sides import distinct_sides, durability_lines

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
    sides, said = distinct_sides(sides)
    for sentence in said:
        err.print(sentence, markup=False)
    for run in (run for side in sides for run in side):
        run.check_readable()
    found = [side[0] for side in sides]
    shared = shared_figures(found, metric, sides)
    rows = selected(shared, everything)
    path = html_out or default_html_path(found, metric, everything)
    write_html(sides, shared, path, everything, metric)
    significant = any(r["significant"] for r in shared)
    found_answers = answers(shared)
    changes = wait_changes(sides)
    host_said = host_changed(sides)
    traded = durability_lines(sides)
    if chosen in ("markdown", "csv"):
        names = [side_name(side) for side in sides]
        known = units(found)
        text = (markdown(names, found_answers, rows, known, wait_lines(changes, found_answers), everything,
                         host_said + traded) if chosen == "markdown" else csv_text(names, rows, known))
        sys.stdout.write("\r\n".join(map(visible, text.split("\r\n"))))  # CSV's own line ends kept
        err.print(f"comparison: {path}", markup=False)
        return
    if chosen == "json":
        print_json({"a": str(found[0].path), "runs": [str(r.path) for r in found], "html": str(path),
                          "significant": significant, "answers": found_answers, "lines": answer_lines(found_answers),
                          "waits": changes, "wait_lines": wait_lines(changes, found_answers), "host_changed": host_said,
                          "durability": traded, "figures": public(rows), "overall": overall(rows) if everything else []})
        return
    names = letters(found)
    out.print("   ".join(f"{n} = {side_name(side)}" for n, side in zip(names, sides)), markup=False)
    if not shared:
        out.print(f"the runs share no figures{' with ' + repr(metric) + ' in the name' if metric else ''}.")
    for line in answer_lines(found_answers) + host_said + traded + wait_lines(changes, found_answers):
        out.print(escape(line), overflow="fold")
    # Below the answers: the other figures that changed (every figure with --all), one line per figure.
    listed = by_figure(rows if everything else [r for r in rows if not r["headline"]])
    if listed:
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
    err.print(f"comparison: {path}", markup=False)
