"""Runs a plan's suites case by case into a run directory, and resumes an interrupted run.

Each finished case is written atomically before the next starts, so after Ctrl-C or kill -9 ``resume``
skips exactly the recorded cases and measures the rest: none lost, none duplicated.
"""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

from refbench import accept, removal
from refbench.catalog import index_run
from refbench.children import remove_orphaned_temp_dirs
from refbench.engines import last_server_failure
from refbench.errors import ServerGone, UserError
from refbench.engines.managed import ServerDidNotStart
from refbench.exhaustion import ResourceExhausted, explain, resource_of
from refbench.host import canary, inventory, tuning
from refbench.host.cachebound import last_oom
from refbench.host.contention import MachineTime, disturbed
from refbench.host.observe import Unobserved, observing
from refbench.host.telemetry import Sampler
from refbench.options import Plan, PlanError
from refbench.progress import RunProgress
from refbench.runstore import CorruptRunFile, Run, iso, list_runs, utc_now
from refbench.suites import Case, Finding, ServerStalled, Suite, get_suite
from refbench.suites.context import SuiteContext, scratch_dir
from refbench.suites.repeats import repeat_cases, strip_repeat
from refbench.suites.device.targets import SERVER_ACCOUNTS


def run_metadata() -> dict[str, Any]:
    inv = inventory.collect()
    return {
        "host": socket.gethostname(),
        "inventory": inv,
        "audit": [c.to_dict() for c in tuning.audit(inventory=inv)],
        "tools": inv["tools"],
    }


def start(plan: Plan, argv: list[str], console: Console) -> Run:
    expand(plan)
    run = Run.create(plan, {**run_metadata(), "argv": argv})
    console.print(f"run directory: {run.path}", markup=False)
    return run


def expand(plan: Plan) -> dict[str, list[Case]]:
    """Every suite's cases, after every check a run makes before it writes anything (a --dry-run stops here)."""
    _refuse_unused_targets(plan)
    return {name: get_suite(name).cases(plan) for name in plan.suites}


def _refuse_unused_targets(plan: Plan) -> None:
    """Targets a run would ignore are refused: a typo or a wrong suite must not pass as a measurement of them."""
    if not plan.targets:
        return
    if not plan.suites:
        raise PlanError(f"the targets {', '.join(plan.targets)} were given, but the run has no suite to use them "
                        "(name one with --suite or a plan section).")
    for name in plan.suites:
        if not getattr(get_suite(name), "targets_help", ""):
            raise PlanError(f"suite {name} takes no targets, but the run names {', '.join(plan.targets)}; run it "
                            "without them, or separately from the suites that use them.")


def execute(run: Run, console: Console, quiet: bool = False) -> bool:
    """Measures every unrecorded case, checks, writes tables, charts and the report.
    Returns True when every correctness check passed."""
    remove_orphaned_temp_dirs()  # what runs killed together with their watchdog left in the temp directory
    try:
        return _execute(run, console, quiet)
    except ResourceExhausted:
        raise
    except Exception as exc:
        if isinstance(exc, ServerDidNotStart) and (failed := _after_failed_start(exc, run, console)):
            raise failed from None
        if explained := diagnose(exc, run):
            raise explained from None
        raise


def _after_failed_start(exc: ServerDidNotStart, run: Run, console: Console) -> UserError | None:
    """A managed server that did not start: a run that measured nothing yet is removed whole, work data and run
    directory, since starting again is a new run (and a resume would fail the same way with the settings of its plan).
    One that measured keeps its records; resuming it helps only once a resource that ran out is freed (None: diagnose
    says so), otherwise the message does not offer it."""
    said = str(exc).rstrip(".")
    ran_out = resource_of(exc) is not None or last_oom() is not None
    if measured := len(run.records()):
        return None if ran_out else UserError(
            f"{said}; the {measured} case(s) measured before stay in {run.path} (resuming would start the server with "
            "the same settings, so start a new run with them changed).")
    remove_work_data(run, console)
    try:
        problem = removal.remove_path(run.path.absolute(), trusted_parent=True, owners=run_owners(run))
    except removal.Kept as why:
        problem = str(why)
    kind = ResourceExhausted if ran_out else UserError
    if problem:
        return kind(f"{said}; nothing was measured, but its run directory {run.path} could not be removed: {problem}.")
    return kind(f"{said}; nothing was measured, so its run directory {run.path} was removed.")


def diagnose(exc: Exception, run: Run) -> UserError | None:
    """What stopped a run, when it was not refbench: a database server that died (a PANIC, a kill: its clients only
    saw the connection drop) or stopped answering, or a resource that ran out."""
    if oom := last_oom():  # the server's processes only saw a lost connection when the kernel killed one of them
        return explain(MemoryError(oom), run.path, written_places(run.plan))
    if failure := last_server_failure():
        return explain(UserError(failure), run.path, written_places(run.plan)) or ServerGone(
            f"{failure}; once that is fixed, continue with: refbench resume {run.path}")
    if explained := explain(exc, run.path, written_places(run.plan)):
        return explained
    if isinstance(exc, ServerGone):
        return ServerGone(f"{exc}; once the server answers again, continue with: refbench resume {run.path}")
    return None


def _execute(run: Run, console: Console, quiet: bool) -> bool:
    from refbench.report import build_report

    with run.running():
        run.clean_interrupted_writes()
        plan = run.plan
        with Sampler(run.telemetry_path):
            for name in plan.suites:
                _run_suite(run, plan, get_suite(name), console, quiet)
        if plan.accept:
            run.write_json(run.accept_path, accept.evaluate(run, accept.parse(plan.accept, str)))
        # Inside running(): a run killed while its report is written is not complete, and resume writes it. The report
        # writes verdict.json too, from the tables it makes.
        build_report(run, console)
        if not plan.keep_work:
            if removed := remove_work_data(run, console):
                console.print(f"work data removed: {sum(size for _, size in removed) / 1e6:,.1f} MB (keep it with "
                              "--keep-work)")
    index_run(run, console)
    return findings_passed(run.findings())


def written_places(plan: Plan) -> list[Path]:
    """The places a plan writes to besides its run directory: its work directory, targets and suites' *_dir options."""
    places = [Path(plan.work_dir)] if plan.work_dir else []
    return places + [Path(t) for t in plan.targets] + [Path(v) for options in plan.options.values() for k, v in options.items()
                     if k.endswith("_dir") and isinstance(v, str) and v]


def remove_work_data(run: Run, console: Console) -> list[tuple[Path, int]]:
    """Removes what a run wrote besides its results: its work directory, its scratch directory and every place its
    suites created (SuiteContext.claim) — database directories, generated data and test files, in its targets
    too — but never a target itself, nor anything refbench did not create there. A place a running run uses, or
    one a later run created anew after this one's was gone, stays; so does one that is no longer what this run
    created (see removal: walked from "/" with no link followed, matched by device and inode), and one whose entry
    in work.json is not sealed by this run. Says what it removed and what it kept; returns what it removed, with
    the bytes each held on disk."""
    others = [r for r in list_runs(run.path.parent) if r.path.resolve() != run.path.resolve()]
    claims = {other: _places_of(other) for other in others}
    owners = run_owners(run)
    maker = run.path.stat().st_uid
    as_user = maker if os.geteuid() == 0 and maker != 0 else None  # root removes another's only as that user could
    removed, done = [], set()
    # The run directory is the one the user named, so the way to it is theirs to trust; the rest is walked.
    places = [(run.path / "work", "", dict(owners=owners, trusted_parent=True)),
              (scratch_dir(run), "", dict(owners=owners))]
    for p in run.work_places():
        if not p["created"]:
            continue
        if not run.work_sealed(p):
            console.print(f"kept {p['path']}: its entry in {run.work_file} is not the one this run wrote (edited, or "
                          "written by an older refbench), so it cannot vouch for what is there", soft_wrap=True, markup=False)
            continue
        places.append((Path(p["path"]), p["path"], dict(parent=p.get("parent"), recorded=p.get("found"), owners=owners)))
    for path, claimed, expected in places:
        try:
            place = removal.open_place(path, **expected)
        except removal.Kept as why:
            console.print(f"kept {path}: {why}", soft_wrap=True, markup=False)
            continue
        if place is None:
            done.add(claimed)
            continue
        with place:
            if why := _kept_because(path, place, run, claims):
                console.print(f"kept {path}: {why}", soft_wrap=True, markup=False)
                if why.startswith("created again"):
                    done.add(claimed)  # the later run's now: this run must not remove it on another try either
                continue
            size, problem = removal.remove_as(place, path, as_user)
        if problem:
            console.print(f"[yellow]could not remove[/yellow] {escape(f'{path}: {problem}')}", soft_wrap=True)
        else:
            console.print(f"removed {path} ({size / 1e6:,.1f} MB)", soft_wrap=True, markup=False)
            removed.append((path, size))
            done.add(claimed)
    run.forget_work(done - {""})
    return removed


def run_owners(run: Run) -> set[int]:
    """Who may own a place a run created: the account that made the run (which owns its directory), and, for a run
    root made, the accounts its managed servers run as (they own their data directories); another user's servers
    run as that user."""
    owners = {run.path.stat().st_uid}
    if owners != {0}:
        return owners
    for account in SERVER_ACCOUNTS.values():
        try:
            owners.add(pwd.getpwnam(account).pw_uid)
        except KeyError:
            continue
    return owners


def _places_of(run: Run) -> list[dict[str, Any]]:
    try:
        return run.work_places()
    except CorruptRunFile:
        return []


def _overlap(a: Path, b: Path) -> bool:
    return a == b or a in b.parents or b in a.parents


def _kept_because(path: Path, place: removal.Place, run: Run, claims: dict[Run, list[dict[str, Any]]]) -> str:
    """Why a place of ``run`` must stay: another run uses it now, or created it (or something in it) later."""
    for other, places in claims.items():
        for p in places:
            theirs = Path(p["path"])
            if not _overlap(path, theirs):
                continue
            if other.in_use():
                return f"in use by the running run {other.path}"
            if p["created"] and other.path.name > run.path.name:  # run directory names begin with their start time
                if theirs in path.parents:
                    return f"the later run {other.path} created {theirs} in it"
                return f"created again by the later run {other.path} after this run's was gone"
    pid = (place.read_text("postmaster.pid") or "").split("\n", 1)[0].strip()
    if pid.isdigit() and Path(f"/proc/{pid}").exists():
        return f"a PostgreSQL server (pid {pid}) still runs in it; stop it first (pg_ctl -D {path} stop)"
    return ""


def clean(runs: list[Run], console: Console, each: bool = False) -> list[tuple[Path, int]]:
    """``refbench clean``: removes the work data of runs that are kept or were interrupted. A run in use by another
    process is refused (``each``: skipped, and said so). Returns what it removed, as remove_work_data."""
    removed = []
    for found in runs:
        try:
            found.lock()  # and so no resume starts while its data goes
        except UserError:
            if not each:
                raise
            console.print(f"skipped {found.path}: in use by another refbench process", soft_wrap=True, markup=False)
            continue
        try:
            removed += remove_work_data(found, console)
        finally:
            found.unlock()
    return removed


def _run_suite(run: Run, plan: Plan, suite: Suite, console: Console, quiet: bool = False) -> None:
    cases = suite.cases(plan)
    ids = [c.id for c in cases]
    if len(set(ids)) != len(ids):
        raise ValueError(f"suite {suite.name} produced duplicate case ids")
    todo = [c for c in cases if not run.has_record(suite.name, c.id)]
    done = len(cases) - len(todo)
    console.print(f"[bold]{suite.name}[/bold]: {len(cases)} cases" + (f", {done} already recorded" if done else ""))
    estimate = getattr(suite, "estimate", None)
    expected_s = estimate(plan, cases).seconds if estimate else None
    with RunProgress(console, quiet) as progress:
        ctx = SuiteContext(run, plan, suite.name, plan.options.get(suite.name, {}), console, progress)
        # The suite's row from the start, preparation (a load) included: its estimate counts that time too.
        overall = progress.add_task(f"{suite.name}: preparing", total=len(cases), completed=done, expected_s=expected_s)
        try:
            suite.prepare(ctx)
            run.note_work_found(run_owners(run))
            for case in todo:
                progress.update(overall, description=f"{suite.name}: {case.title or case.id}")
                _measure(run, suite, ctx, case)
                progress.advance(overall)
            again = repeat_cases(suite, cases, run.records(suite.name), plan.repeats)
            if again:
                more = [c for c in again if not run.has_record(suite.name, c.id)]
                console.print(f"{suite.name}: {len(again)} repeat(s) of the headline cases "
                              f"({', '.join(dict.fromkeys(strip_repeat(c.id) for c in again))})", soft_wrap=True)
                progress.update(overall, total=len(cases) + len(again), completed=len(cases) + len(again) - len(more))
                # A headline that moved, after the repeats, to a case measured once: that case is repeated too.
                while True:
                    for case in more:
                        progress.update(overall, description=f"{suite.name}: {case.title}")
                        _measure(run, suite, ctx, case)
                        progress.advance(overall)
                    moved = repeat_cases(suite, cases, run.records(suite.name), plan.repeats, after_repeats=True)
                    if not (more := [c for c in moved if not run.has_record(suite.name, c.id)]):
                        break
                    console.print(f"{suite.name}: the headline moved to "
                                  f"{', '.join(dict.fromkeys(strip_repeat(c.id) for c in more))} after the "
                                  f"repeats: {len(more)} repeat(s) of it", soft_wrap=True)
                    total = next(t.total for t in progress.tasks if t.id == overall) or 0
                    progress.update(overall, total=total + len(more))
            progress.update(overall, description=f"{suite.name}: cases")
            findings = suite.check(ctx)
        finally:
            close = getattr(suite, "close", None)
            if close is not None:
                close(ctx)
            run.note_work_found(run_owners(run), drop_absent=True)
    run.write_findings(suite.name, findings)
    failed = [f for f in findings if not f.passed]
    for f in failed:
        console.print(f"[bold red]FAILED[/bold red] {escape(f'{suite.name}: {f.check} — {f.detail}')}")
    if findings and not failed:
        console.print(f"{suite.name}: all {len(findings)} correctness checks passed")


def _measure(run: Run, suite: Suite, ctx: SuiteContext, case: Case) -> None:
    shutil.rmtree(run.raw_dir(suite.name, case.id), ignore_errors=True)  # an interrupted attempt's output
    started = utc_now()
    canary_dir, watched = ctx.work_dir / "canary", observing()
    before = canary.probe(canary_dir) if watched else {}  # what the host gives a fixed probe, before and after the case
    # The whole case; a database suite's probe splits its measured interval with the server's.
    machine = MachineTime() if watched else Unobserved()
    machine.start()
    t0 = time.time()
    if ctx.progress is not None:
        ctx.progress.new_case()
    try:
        record, stalled = suite.measure(ctx, case), None
    except ServerStalled as exc:
        record, stalled = exc.record, exc
    t1 = time.time()
    split = machine.stop(record.extra.get("own_written_bytes"))  # a suite that counts its own writes says so
    record.suite, record.case_id, record.params = suite.name, case.id, dict(case.params)
    if watched:
        after = canary.probe(canary_dir)
        record.extra["canary"] = {"before": before, "after": after}
        earlier = ctx.state.setdefault("canaries", [])
        if len(earlier) >= 2 and (changed := canary.moved(earlier, [before, after])):
            record.extra["host_changed"] = changed
            ctx.log(f"the host changed while {case.id} was measured: {changed}")
        earlier += [before, after]
    record.host = socket.gethostname()
    record.started_utc, record.ended_utc = iso(started), iso(utc_now())
    record.started_epoch_s, record.ended_epoch_s, record.elapsed_s = t0, t1, round(t1 - t0, 6)
    if t1 - t0 >= 2:
        # Most of the last second is enough here; a suite that needs the exact end waits itself.
        ctx.telemetry.wait_for_sample_after(t1, slack_s=1.0)
    window = ctx.telemetry.window(t0, t1)
    record.telemetry = (window.to_dict() if window else {}) | {"machine": split}
    storage = record.extra.get("storage") or {}
    # A stalled server disturbs a measurement as neighbours do: its figures decide no comparison and no tune.
    said = "; ".join(filter(None, [f"stalled: {record.extra['stalled']}" if record.extra.get("stalled") else "",
                                   disturbed(storage.get("machine") or split, storage)]))
    if said:
        record.extra["disturbed"] = said
        ctx.log(f"disturbed while {case.id} was measured: {said}; its figures are kept and marked")
    run.write_record(record, getattr(suite, "extra_fields", None))
    if stalled is not None:
        raise stalled


def findings_passed(findings: dict[str, list[Finding]]) -> bool:
    return all(f.passed for fs in findings.values() for f in fs)
