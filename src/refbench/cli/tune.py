"""refbench tune: a suite's settings tried one A/B trial at a time, what is proven faster kept."""

from __future__ import annotations

import os
from typing import Optional

import typer

from refbench.cli.console import RUNS_DIR_HELP, epilog, err, plain, print_json
from refbench.errors import UserError
from refbench.options import PROFILES
from refbench.suites import suite_names

commands = typer.Typer()


@commands.command(short_help="Find the settings that make a suite faster, each change proven by an A/B measurement.",
                  epilog=epilog("refbench tune --suite oltp --budget 10m  # quick profile: a few trials",
                                "refbench tune --suite oltp --profile standard --budget 3h",
                                "refbench tune --suite dss --set 'dss.engines=[\"postgres\"]' --budget 1h",
                                "refbench tune --suite oltp --set oltp.data_dir=/mnt/data/pg --wal-dir /mnt/log --budget 2h",
                                "refbench tune --suite oltp --baseline runs/20261126T120000Z-oltp --apply-host",
                                "refbench tune --suite oltp --baseline runs/20261126T120000Z-oltp --only shared_buffers "
                                "--repeats 3",
                                "refbench tune --suite oltp --baseline runs/20261126T120000Z-oltp --dry-run  # the trials, in order"))
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
    trials: int = typer.Option(0, "--trials", metavar="N", min=0, max=1000,
                               help="At most N trials (0: as many as the budget allows)."),
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
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the trials tune would run, in its order (with "
                                 "--baseline, the order of what limits that run), and change or write nothing."),
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

    if suite not in suite_names():
        raise UserError(f"--suite {suite!r} is not a suite: use one of {', '.join(suite_names())}.")
    if profile is not None and profile not in PROFILES:
        raise UserError(f"--profile {profile!r} is not a profile: use one of {', '.join(PROFILES)}.")
    if apply_host and os.geteuid() != 0:
        raise UserError("--apply-host changes kernel settings, which needs root; run tune without it, or as root.")
    request = tuning.Request(suite, profile or "", tuning.parse_budget(budget), repeats, points, trials, plan_path,
                             list(sets or []) + ([f"{suite}.engine={engine}"] if engine else []), baseline or "",
                             runs_dir, apply_host, allow_server_changes, wal_dir or "",
                             [name.strip() for name in (only or "").split(",") if name.strip()], dry_run=dry_run)
    tuner = tuning.Tuner(request, lambda line: err.print(line, markup=False, highlight=False, soft_wrap=True))
    if dry_run:
        plain("\n".join(tuner.dry_run_lines()))
        return
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
        print_json(journey)
    else:
        for line in tuning.summary_lines(journey):
            plain(line)
    plain(str(tuner.dir))
