"""What a run leaves behind: no run.lock once it ends (complete, failed, interrupted), results readable by everyone,
and work data that `refbench clean` removes from kept or interrupted runs, never a place another run owns or uses.
The suites' own targets are in test_targets.py."""

from __future__ import annotations

import io
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from rich.console import Console

from conftest import cli_env, refbench_command, wait_for
from refbench import removal, runner
from refbench.children import OWNER_RECORD, owned_temp_dir, remove_orphaned_temp_dirs
from refbench.plan import load_plan
from refbench.runstore import Run
from test_least_privilege import _as, other_user  # noqa: F401 (a fixture)

SLEEPY = ["sleepy", "--runs-dir", "runs", "--set", "sleepy.sleep_s=0"]


def _status(run: Path) -> str:
    return json.loads((run / "run.json").read_text())["status"]


def _start_long_run(tmp_path: Path, cases: int = 20) -> tuple[subprocess.Popen, Path]:
    """A sleepy run of cases of 0.3 s, once it has recorded its first case (and so holds its lock)."""
    proc = subprocess.Popen(refbench_command(*SLEEPY, "--set", f"sleepy.cases={cases}", "--set", "sleepy.sleep_s=0.3"),
                            cwd=tmp_path, env=cli_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    record = wait_for(lambda: next((tmp_path / "runs").glob("*-sleepy/records/sleepy/*.json"), None), 60, "a record")
    return proc, record.parents[2]


@pytest.mark.live
def test_results_are_readable_by_everyone_whatever_the_umask(tmp_path):
    made = subprocess.run(refbench_command(*SLEEPY, "--set", "sleepy.cases=3"), cwd=tmp_path, env=cli_env(),
                          capture_output=True, text=True, timeout=120, preexec_fn=lambda: os.umask(0o077))
    assert made.returncode == 0, made.stderr
    run = tmp_path / made.stdout.strip().splitlines()[-1]
    for path in (run / "report.html", run / "tables" / "sleepy" / "per_case.csv", run / "tables" / "sleepy" / "per_case.parquet",
                 run / "charts" / "sleepy" / "ops.svg", run / "run.json", run / "records" / "sleepy" / "case-000.json"):
        assert path.stat().st_mode & 0o777 == 0o644, path
    for directory in (run, run / "tables" / "sleepy", run / "charts"):
        assert directory.stat().st_mode & 0o777 == 0o755, directory


@pytest.mark.live
def test_a_failed_run_keeps_no_lock(tmp_path, refbench):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    (tmp_path / "plan.toml").write_text(f'work_dir = "{blocker}"\n')  # the suite cannot make its work directory
    failed = refbench(*SLEEPY, "--plan", "plan.toml", "--set", "sleepy.cases=1")
    assert failed.code != 0
    run = next((tmp_path / "runs").iterdir())
    assert _status(run) == "failed" and not (run / "run.lock").exists()


@pytest.mark.live
def test_ctrl_c_leaves_no_lock_and_clean_removes_the_work_data_but_not_the_records(tmp_path, refbench):
    proc, run = _start_long_run(tmp_path)
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=60) == 130
    assert _status(run) == "interrupted" and not (run / "run.lock").exists()
    assert (run / "work" / "sleepy" / "journal.log").is_file()  # kept for resume
    records = sorted(p.name for p in (run / "records" / "sleepy").iterdir())

    cleaned = refbench("clean", str(run))
    assert cleaned.code == 0, cleaned.stderr
    assert cleaned.stderr.startswith(f"removed {run}/work (") and "work data removed:" in cleaned.stderr
    assert not (run / "work").exists() and not (run / "run.lock").exists()
    assert sorted(p.name for p in (run / "records" / "sleepy").iterdir()) == records and (run / "run.json").is_file()


@pytest.mark.live
def test_a_kill_9_leaves_a_lock_file_that_blocks_neither_clean_nor_resume(tmp_path, refbench):
    proc, run = _start_long_run(tmp_path, cases=8)
    proc.kill()
    proc.wait()
    assert (run / "run.lock").exists()  # kill -9 runs no cleanup; the kernel released the lock itself
    (run / "records" / "sleepy" / ".tmp-cut.json").write_text('{"suite": "sl')  # a write the kill cut short
    assert refbench("runs", "--runs-dir", "runs", "--json").json()[0]["status"] == "interrupted"
    cleaned = refbench("clean", "--all-work", "--runs-dir", "runs")
    assert cleaned.code == 0 and f"removed runs/{run.name}/work (" in cleaned.stderr, cleaned.stderr
    resumed = refbench("resume", str(run))
    assert resumed.code == 0, resumed.stderr
    assert _status(run) == "complete" and not (run / "run.lock").exists() and not (run / "work").exists()
    assert len(list((run / "records" / "sleepy").glob("*.json"))) == 8


@pytest.mark.live
def test_clean_refuses_a_run_in_use_and_all_work_skips_it(tmp_path, refbench):
    proc, run = _start_long_run(tmp_path)
    try:
        refused = refbench("clean", str(run))
        assert refused.code == 2 and refused.stderr.strip() == f"refbench: run {run} is in use by another refbench process."
        skipped = refbench("clean", "--all-work", "--runs-dir", "runs")
        assert skipped.code == 0 and f"skipped runs/{run.name}: in use by another refbench process" in skipped.stderr
        assert (run / "work" / "sleepy" / "journal.log").is_file()
    finally:
        proc.kill()
        proc.wait()
    assert refbench("clean").code == 2 and refbench("clean", str(run), "--all-work").code == 2  # RUN or --all-work


def test_clean_removes_only_what_the_run_created_and_no_place_a_later_or_running_run_owns(tmp_path):
    """Ownership of places outside the run directory, on runs made in-process: created vs reused, a later run that
    created the same path anew, a running run that uses it."""
    console = Console(quiet=True)
    target = tmp_path / "target"
    target.mkdir()

    def new_run(name: str) -> Run:
        return Run.create(load_plan(flags={"runs_dir": str(tmp_path / "runs"), "name": name}), {})

    first, theirs = new_run("first"), target / "theirs"
    theirs.write_text("not refbench's")
    first.claim_work([target / "db" / "base", theirs], "oltp")  # its topmost missing directory is the run's
    (target / "db" / "base").mkdir(parents=True)
    assert [(Path(p["path"]).name, p["created"]) for p in first.work_places()] == [("db", True), ("theirs", False)]
    assert [place for place, _ in runner.clean([first], console)] == [target / "db"]
    assert sorted(p.name for p in target.iterdir()) == ["theirs"] and first.work_places()[0]["path"] == str(theirs)

    first.claim_work([target / "data"], "dss")
    (target / "data").mkdir()
    second = new_run("second")
    second.claim_work([target / "data"], "dss")  # reuses the first run's data: still the first's to remove
    second.lock()  # running
    assert runner.clean([first], console) == [] and (target / "data").is_dir()
    second.unlock()
    assert [place for place, _ in runner.clean([first], console)] == [target / "data"]

    first.claim_work([target / "log"], "dss")
    (target / "log").write_text("")
    (target / "log").unlink()  # the first run's is gone (removed by hand) ...
    third = new_run("third")
    third.claim_work([target / "log"], "dss")  # ... and a later run made it anew: the later run's
    (target / "log").write_text("")
    assert runner.clean([first], console) == [] and (target / "log").exists()
    assert [place for place, _ in runner.clean([third], console)] == [target / "log"]
    assert sorted(p.name for p in target.iterdir()) == ["theirs"]


# ---- removal that cannot leave the run: another local user swaps what the run made ------------------------------------


def _users_target(base: Path, user) -> Path:
    """A target directory that ``user`` owns, in a directory of theirs (so that they can replace the target itself),
    where root runs refbench: the setting of a shared storage box."""
    home = base / "home"
    target = home / "target"
    target.mkdir(parents=True)
    for path in (home, target):
        os.chown(path, user.pw_uid, user.pw_gid)
    return target


def _victim(base: Path) -> Path:
    """A third directory, holding what another user's run would have there, that refbench must never enter."""
    victim = base / "victim"
    (victim / "tpch-sf0.01").mkdir(parents=True)
    (victim / "tpch-sf0.01" / "lineitem.csv").write_text("not this run's")
    (victim / "tpch-sf0.01.duckdb").write_text("not this run's")
    return victim


def _victim_intact(victim: Path) -> bool:
    return (victim / "tpch-sf0.01" / "lineitem.csv").read_text() == (victim / "tpch-sf0.01.duckdb").read_text() == \
        "not this run's"


def _new_run(tmp_path: Path, name: str = "mine") -> Run:
    return Run.create(load_plan(flags={"runs_dir": str(tmp_path / "runs"), "name": name}), {})


def _clean_saying(run: Run) -> tuple[list[Path], str]:
    said = io.StringIO()
    removed = runner.clean([run], Console(file=said, width=500, soft_wrap=True))
    return [place for place, _ in removed], " ".join(said.getvalue().split())


@pytest.mark.slow
def test_clean_follows_no_link_put_in_place_of_a_target_by_its_owner(tmp_path, refbench, reachable_dir, other_user):
    """The defect an outside tester found: a kept dss run's data in a user's target; the user replaces the target with
    a link to a third directory holding data of the same names; clean must remove nothing there."""
    target, victim = _users_target(reachable_dir, other_user), _victim(reachable_dir)
    made = refbench("dss", str(target), "--engines", "duckdb", "--modes", "power", "--sf", "0.01", "--keep-work",
                    "--runs-dir", "runs")
    assert made.code == 0, made.stderr
    assert (target / "tpch-sf0.01" / "lineitem.csv").is_file() and (target / "tpch-sf0.01.duckdb").is_file()
    moved = target.parent / "moved"
    swapped = _as(other_user, "sh", "-c", f"mv {target} {moved} && ln -s {victim} {target}")
    assert swapped.returncode == 0, swapped.stderr

    cleaned = refbench("clean", made.last_line.split("/")[-1], "--runs-dir", "runs")
    said = " ".join(cleaned.stderr.split())
    assert cleaned.code == 0, cleaned.stderr
    for name in ("tpch-sf0.01", "tpch-sf0.01.duckdb"):
        assert f"kept {target / name}: {target} on the way to it is now a symbolic link, not the directory this run " \
               "saw" in said
    assert _victim_intact(victim)
    assert (moved / "tpch-sf0.01" / "lineitem.csv").is_file()  # no longer where the run made it: kept as well


def test_a_place_swapped_for_a_link_or_a_users_own_directory_and_a_file_swapped_for_a_link_are_kept(
        tmp_path, reachable_dir, other_user):
    target, victim = _users_target(reachable_dir, other_user), _victim(reachable_dir)
    run = _new_run(tmp_path)
    run.claim_work([target / "data" / "part-1", target / "db.duckdb", target / "answers"], "dss")  # data: made here
    (target / "data" / "part-1").write_text("")
    (target / "db.duckdb").write_text("the run's")
    (target / "answers").mkdir()
    run.note_work_found(runner.run_owners(run))
    swapped = _as(other_user, "sh", "-c", f"cd {target} && mv data data-moved && ln -s {victim} data && "
                  f"rm db.duckdb && ln -s {victim}/tpch-sf0.01.duckdb db.duckdb && "
                  f"mv answers answers-moved && mkdir answers && echo theirs > answers/mine")
    assert swapped.returncode == 0, swapped.stderr

    removed, said = _clean_saying(run)
    assert removed == []
    assert f"kept {target / 'data'}: it is now a symbolic link, not the place this run created" in said
    assert f"kept {target / 'db.duckdb'}: it is now a symbolic link, not the place this run created" in said
    assert f"kept {target / 'answers'}: it is now a directory of user {other_user.pw_name}, not the one this run " \
           "created" in said
    assert _victim_intact(victim) and (target / "answers" / "mine").read_text() == "theirs\n"
    assert (target / "data-moved" / "part-1").is_file() and (target / "answers-moved").is_dir()


def test_a_target_replaced_by_another_directory_of_the_same_name_is_not_entered(tmp_path, reachable_dir, other_user):
    target = _users_target(reachable_dir, other_user)
    run = _new_run(tmp_path)
    run.claim_work([target / "data"], "dss")
    (target / "data").mkdir()
    run.note_work_found(runner.run_owners(run))
    swapped = _as(other_user, "sh", "-c", f"mv {target} {target}-moved && mkdir -p {target}/data && echo theirs > "
                  f"{target}/data/mine")
    assert swapped.returncode == 0, swapped.stderr

    removed, said = _clean_saying(run)
    assert removed == [] and (target / "data" / "mine").read_text() == "theirs\n"
    assert f"kept {target / 'data'}: the directory it was in, {target}, is no longer the one this run saw" in said


def test_a_place_another_user_made_before_the_run_did_is_not_taken_for_the_runs(tmp_path, reachable_dir, other_user):
    target = _users_target(reachable_dir, other_user)
    run = _new_run(tmp_path)
    run.claim_work([target / "cache"], "dss")  # not there yet: the run's to create ...
    made = _as(other_user, "sh", "-c", f"mkdir {target}/cache && echo theirs > {target}/cache/mine")  # ... but not
    assert made.returncode == 0, made.stderr
    run.note_work_found(runner.run_owners(run))

    removed, said = _clean_saying(run)
    assert removed == [] and (target / "cache" / "mine").read_text() == "theirs\n"
    assert f"kept {target / 'cache'}: it belongs to user {other_user.pw_name}, not to this run" in said


def test_a_path_edited_in_work_json_is_not_removed_and_what_the_run_made_still_is(tmp_path, reachable_dir):
    victim = _victim(reachable_dir)
    run = _new_run(tmp_path)
    run.claim_work([reachable_dir / "made" / "file"], "dss")
    (reachable_dir / "made" / "file").write_text("")
    places = json.loads(run.work_file.read_text())
    edited = {**places[0], "path": str(victim / "tpch-sf0.01")}  # the seal and identity of a genuine entry
    forged = {"path": str(victim), "suite": "dss", "created": True}
    run.work_file.write_text(json.dumps(places + [edited, forged]))

    removed, said = _clean_saying(run)
    assert removed == [reachable_dir / "made"]
    for path in (victim / "tpch-sf0.01", victim):
        assert f"kept {path}: its entry in {run.work_file} is not the one this run wrote" in said
    assert _victim_intact(victim)


def test_a_jobs_work_directory_is_removed_through_no_link_put_on_the_way_to_it(reachable_dir, other_user):
    """The analytics launcher removes each job's WORK as the job ends, in a location that may be a user's target."""
    target, victim = _users_target(reachable_dir, other_user), _victim(reachable_dir)
    job = target / "work" / "tpch-sf0.01"
    (job / "sort").mkdir(parents=True)
    (job / "sort" / "run-1").write_text("")
    removal.remove_quietly(job)
    assert not job.exists() and (target / "work").is_dir()

    job.mkdir()
    swapped = _as(other_user, "sh", "-c", f"mv {target}/work {target}/work-moved && ln -s {victim} {target}/work")
    assert swapped.returncode == 0, swapped.stderr
    removal.remove_quietly(job)
    assert _victim_intact(victim) and (target / "work-moved" / "tpch-sf0.01").is_dir()


# ---- what a run puts outside its run directory: the temp directory's socket and pipe directories -----------------


@pytest.fixture
def private_tmpdir():
    """A TMPDIR of the test's own, so that it sees no other test's directories: short (a unix socket's path is limited
    to 107 bytes) and open to the server accounts, as /tmp is."""
    path = Path(tempfile.mkdtemp(prefix="rb-tmp-", dir="/tmp"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _left_in(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.glob("refbench-*"))


def test_only_refbench_directories_whose_maker_is_dead_are_removed(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    made = subprocess.run([sys.executable, "-c", "from refbench.children import owned_temp_dir; "
                                                 "print(owned_temp_dir('refbench-load-'))"],
                          capture_output=True, text=True, env=cli_env(TMPDIR=str(tmp_path)), check=True)
    dead = Path(made.stdout.strip())  # its maker has exited
    alive = owned_temp_dir("refbench-pg-")  # this process's
    reused = owned_temp_dir("refbench-mariadb-")  # a live process with this pid, but not the one that made it
    record = json.loads((reused / OWNER_RECORD).read_text())
    (reused / OWNER_RECORD).write_text(json.dumps({**record, "started": record["started"] - 1}))
    elsewhere = tmp_path / "elsewhere"
    shutil.copytree(dead, elsewhere)
    (tmp_path / "refbench-pg-link").symlink_to(elsewhere)  # a symlink is never followed, nor removed
    (tmp_path / "refbench-test-mine").mkdir()  # refbench's prefix, but no owner record: not made by owned_temp_dir
    linked = tmp_path / "refbench-load-linked"
    linked.mkdir()
    os.link(elsewhere / OWNER_RECORD, linked / OWNER_RECORD)  # a record that is also another file

    assert sorted(remove_orphaned_temp_dirs()) == sorted([dead, reused])
    assert _left_in(tmp_path) == sorted([alive.name, "refbench-pg-link", "refbench-test-mine", "refbench-load-linked"])
    assert (elsewhere / OWNER_RECORD).is_file()


@pytest.mark.slow
def test_a_socket_directory_left_by_a_kill_9_of_refbench_and_its_watchdog_goes_at_the_next_run(
        tmp_path, process_tree, reachable_dir, private_tmpdir):
    tree = process_tree("oltp", "--warehouses", "1", "--users", "1", "--rampup-s", "1", "--duration-s", "30",
                        "--data-dir", str(reachable_dir / "pgdata"), "--runs-dir", str(tmp_path / "runs"),
                        env={"TMPDIR": str(private_tmpdir)})
    socket_dir = wait_for(lambda: next(private_tmpdir.glob("refbench-pg-*/.s.PGSQL.*"), None), 120, "the server").parent
    watchdog = next(pid for pid, cmd in tree.children().items() if "-m refbench.children" in cmd)
    os.kill(watchdog, signal.SIGKILL)
    tree.signal(signal.SIGKILL)
    assert tree.finish()["survivors"] == []  # the server went with refbench (the kernel's signal)
    assert socket_dir.is_dir()  # nobody was left to remove it

    later = subprocess.run(refbench_command(*SLEEPY, "--set", "sleepy.cases=1"), cwd=tmp_path, capture_output=True,
                           text=True, timeout=120, env=cli_env(TMPDIR=str(private_tmpdir)))
    assert later.returncode == 0, later.stderr
    assert _left_in(private_tmpdir) == []


@pytest.mark.skipif(not shutil.which("mariadbd") and not os.path.exists("/usr/sbin/mariadbd"),
                    reason="mariadb-server is not installed (make setup installs it)")
@pytest.mark.slow
def test_sigterm_during_a_mariadb_load_leaves_no_directory_in_the_temp_directory(tmp_path, process_tree, private_tmpdir):
    tree = process_tree("oltp", "--engine", "mariadb", "--warehouses", "2", "--load-workers", "2", "--users", "1",
                        "--rampup-s", "1", "--duration-s", "2", "--runs-dir", str(tmp_path / "runs"),
                        env={"TMPDIR": str(private_tmpdir)})
    wait_for(tree.forked_workers, 180, "the loader processes")
    time.sleep(1)
    assert not list((tmp_path / "runs").glob("*/records/oltp/*.json"))  # still loading
    tree.signal(signal.SIGTERM)
    ended = tree.finish()
    assert ended["code"] == 130, ended["stderr"]
    assert ended["survivors"] == []
    assert _left_in(private_tmpdir) == []


# ---- a run's maker cannot aim root's clean at what they could not remove themselves ---------------------------------


def _forged(run: Run, path: Path) -> dict:
    """A work.json entry for ``path`` with its real identity, sealed with the run's own key: what the run's maker can
    write, since the key is theirs."""
    place = {"path": str(path), "suite": "dss", "created": True, "parent": removal.parent_identity(path),
             "found": removal.identity(os.lstat(path))}
    return run._seal(place)


def test_root_cleaning_another_users_run_removes_only_what_that_user_could(tmp_path, reachable_dir, other_user):
    """Another user's run names, in entries sealed with its own key, a directory of root's, one of a third user's
    kind in a directory only root may write, and one of its own: root's clean removes only the last, and says why it
    kept the others."""
    victim = _victim(reachable_dir)
    theirs = reachable_dir / "home" / "theirs"  # the maker's own, in a directory of theirs
    (theirs / "sub").mkdir(parents=True)
    (theirs / "sub" / "file").write_text("")
    in_roots = reachable_dir / "roots" / "owned-by-maker"  # the maker's, in a directory only root may write
    (in_roots / "inner").mkdir(parents=True)
    (in_roots / "inner" / "file").write_text("")
    for path in (reachable_dir / "home", theirs, theirs / "sub", theirs / "sub" / "file", in_roots, in_roots / "inner",
                 in_roots / "inner" / "file"):
        os.chown(path, other_user.pw_uid, other_user.pw_gid)
    run = _new_run(tmp_path)
    run.work_file.write_text(json.dumps([_forged(run, p) for p in (victim / "tpch-sf0.01", theirs, in_roots)]))
    for path in [run.path, *run.path.rglob("*")]:  # the run is the other user's, its key and records included
        os.chown(path, other_user.pw_uid, other_user.pw_gid, follow_symlinks=False)

    removed, said = _clean_saying(run)
    assert _victim_intact(victim)
    assert f"kept {victim / 'tpch-sf0.01'}: it belongs to user root, not to this run" in said
    assert theirs in removed and not theirs.exists()  # the maker could remove it: it goes
    assert in_roots.exists() and not (in_roots / "inner").exists()  # the maker could empty it, not remove it
    assert f"could not remove {in_roots}: {in_roots}: Permission denied" in said


def test_a_work_key_another_user_wrote_seals_nothing(tmp_path, reachable_dir, other_user):
    run = _new_run(tmp_path)
    run.claim_work([reachable_dir / "made"], "dss")
    assert run.work_sealed(run.work_places()[0])
    os.chown(run.secret_path("work.key"), other_user.pw_uid, other_user.pw_gid)
    assert not run.work_sealed(run.work_places()[0])


WATCHED = """
import sys, time
from refbench.children import watchdog
watchdog().register(remove=[sys.argv[1]])
print("registered", flush=True)
time.sleep(600)
"""


def test_the_watchdog_removes_through_no_link_swapped_in_above_what_it_was_given(tmp_path, reachable_dir):
    """A tune registers its database's copy with the watchdog; if someone swaps a directory above it for a link once
    refbench is killed, the watchdog does not follow it into the link's target."""
    victim = _victim(reachable_dir)
    place = reachable_dir / "tune" / "oltp-data-run"
    (place / "base").mkdir(parents=True)
    holder = subprocess.Popen([sys.executable, "-c", WATCHED, str(place)], env=cli_env(), stdout=subprocess.PIPE,
                              text=True)
    try:
        assert holder.stdout.readline().strip() == "registered"
        (reachable_dir / "tune").rename(reachable_dir / "tune-moved")
        (reachable_dir / "tune").symlink_to(victim)
        (victim / "oltp-data-run").mkdir()  # what the link now leads to, of the same name
        holder.kill()
        holder.wait()
        time.sleep(2)  # the watchdog acts as soon as its parent is gone; give it time to do the wrong thing
    finally:
        holder.kill()
        holder.wait()
    assert (victim / "oltp-data-run").is_dir() and _victim_intact(victim)
    assert (reachable_dir / "tune-moved" / "oltp-data-run" / "base").is_dir()  # moved away: not the place given
