"""refbench run, resume and one command per suite: a run's plan is read, measured, and ended with its verdict."""

from __future__ import annotations

import inspect
import json
import re
import sys
from pathlib import Path
from typing import Any, Optional

import typer
from rich.markup import escape

from refbench import accept, runner, timings
from refbench.cli.console import RUNS_DIR_HELP, epilog, err, plain, tls_options
from refbench.cli.results import print_verdict
from refbench.errors import UserError
from refbench.options import PROFILES, TOP_LEVEL
from refbench.plan import load_plan
from refbench.runstore import SET_ASIDE_SUFFIX, Run
from refbench.suites import get_suite, suite_names

commands = typer.Typer()

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
        plain("\n".join(exc.lines), flush=True)
        raise
    plain("\n".join(lines))


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
        err.print(f"[yellow]interrupted[/yellow]: {done}. Continue with: refbench resume {escape(str(run.path))} (or "
                  f"remove its work data with: refbench clean {escape(str(run.path))})")
        plain(str(run.path), flush=True)
        raise typer.Exit(130)
    err.print(f"report: {run.report_path}", markup=False)
    thresholds = run.read_json(run.accept_path) or []
    if as_json:
        plain(json.dumps({"run": str(run.path), "correctness_passed": passed, "verdict": run.verdicts(),
                          "accept": thresholds}), flush=True)
    else:
        print_verdict(run, thresholds)
    if not passed:
        err.print("[bold red]correctness checks FAILED[/bold red]: see the report's Correctness sections.")
    plain(str(run.path), flush=True)
    if not passed:
        raise typer.Exit(1)
    if accept.failed(thresholds):
        raise typer.Exit(accept.EXIT_THRESHOLD_FAILED)


@commands.command(short_help="Run a plan's suites into a new run directory, then the report.", epilog=epilog(
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
    tls_ca_file: Optional[str] = tls_options()[0], tls_cert: Optional[str] = tls_options()[1],
    tls_key: Optional[str] = tls_options()[2],
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


@commands.command(short_help="Continue an interrupted run.", epilog=epilog("refbench resume runs/20261122T070000Z-lab-a"))
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
        err.print(f"{found.path} is already complete; nothing to resume.", markup=False)
        plain(str(found.path))
        return
    _require_current_options(found)
    err.print(f"resuming {found.path}: {len(found.records())} case(s) already recorded", markup=False)
    _execute(found, quiet=quiet)


def _require_current_options(found: Run) -> None:
    """A run started by an older refbench lacks the options added since, and guessing them would change what the
    run measures halfway through."""
    for name, saved in found.plan.options.items():
        if name in suite_names():
            if missing := sorted(set(get_suite(name).options) - set(saved)):
                raise UserError(f"run {found.path} was started by an older refbench whose {name} options lack "
                                f"{', '.join(missing)}: resume it with that version, or start a new run.")


# ---- one command per suite, all the same shape -----------------------------------------------------

def add_suite_command(app: typer.Typer, name: str) -> None:
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
    app.command(name=name, short_help=short, epilog=epilog(*examples, f"refbench {name} --profile standard --dry-run  # time and space first"))(command)


def _profile_help(suite) -> str:
    return timings.suite_profile_help(suite.name)


def _defaults(key: str, option) -> str:
    """An option's default as the help shows it, per profile when it has one for each: "quick 4 · standard 16"."""
    from refbench.dryrun import shown_value

    if option.per_profile:
        return " · ".join(f"{profile} {shown_value(option.default[profile], key)}".replace(",", ", ") for profile in PROFILES)
    return f"default: {shown_value(option.default, key)}".replace(",", ", ")
