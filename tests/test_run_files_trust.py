"""Root acting on another user's run directory writes only where it means to, and one odd file stops nothing: every
directory refbench writes in is reached through no link that user could have made (one sentence instead, nothing
written through it), a file in a file's place is replaced, never written through, and a FIFO where a record, a verdict
or a lock belongs is one warning naming it while every listing, report and page goes on."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import cli_env, refbench_command
from test_dashboard import Server, _get, _sleepy_runs
from test_least_privilege import other_user  # noqa: F401 (a fixture)

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="what root does with another user's run needs root")
HANG_S = 30  # a command that waits on a FIFO waits for ever: past this it is stuck


def _command(work: Path, *args: str) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(refbench_command(*args), cwd=work, env=cli_env(), capture_output=True, text=True,
                              timeout=HANG_S)
    except subprocess.TimeoutExpired:
        pytest.fail(f"refbench {' '.join(args)} was still waiting after {HANG_S} s")


def _chown_tree(path: Path, user) -> None:
    for place in [path, *path.rglob("*")]:
        os.chown(place, user.pw_uid, user.pw_gid, follow_symlinks=False)


def _roots_own(tmp_path: Path) -> tuple[Path, Path]:
    """A file and a directory only root may read or write."""
    closed = tmp_path / "roots"
    closed.mkdir(mode=0o700)
    secret, directory = closed / "secret.txt", closed / "only-root"
    secret.write_text("root's\n")
    secret.chmod(0o600)
    directory.mkdir(mode=0o700)
    return secret, directory


@pytest.fixture(scope="module")
def made_runs(tmp_path_factory) -> Path:
    """Two finished runs of the test suite, made once: each test copies them."""
    work = tmp_path_factory.mktemp("made")
    _sleepy_runs(work, ("u1",), ("u2",))
    (work / "runs" / "catalog.sqlite").unlink()
    return work / "runs"


def _runs(made_runs: Path, tmp_path: Path, user=None) -> tuple[Path, list[Path]]:
    """A copy of the made runs in tmp_path (the runs directory and everything in it ``user``'s, when given)."""
    tmp_path.chmod(0o755)
    runs = tmp_path / "runs"
    shutil.copytree(made_runs, runs, symlinks=True)
    if user is not None:
        _chown_tree(runs, user)
    return runs, sorted(p for p in runs.iterdir() if p.is_dir())


def test_root_writes_through_no_link_in_another_users_run(made_runs, tmp_path, other_user):
    runs, (run, _) = _runs(made_runs, tmp_path, other_user)
    secret, only_root = _roots_own(tmp_path)
    for name in ("tables", "charts"):
        shutil.rmtree(run / name)
        (run / name).symlink_to(only_root)
    (run / "run.lock").symlink_to(secret)
    meta = json.loads((run / "run.json").read_text())
    (run / "run.json").write_text(json.dumps({**meta, "status": "running"}))  # killed: what resume continues
    _chown_tree(run, other_user)

    for name in ("catalog.sqlite", "catalog.sqlite-wal", "catalog.sqlite-shm"):  # SQLite would follow these
        (runs / name).symlink_to(secret)
        os.chown(runs / name, other_user.pw_uid, other_user.pw_gid, follow_symlinks=False)
    done = _command(tmp_path, "runs", "--runs-dir", str(runs))
    assert done.returncode == 0 and run.name in done.stdout, done.stderr
    assert secret.read_text() == "root's\n"

    done = _command(tmp_path, "report", str(run))
    assert done.returncode == 2, done.stderr
    assert f"refbench: {run}/tables is a link that another user could have made (its owner is uid " \
           f"{other_user.pw_uid}), and refbench writes through no such link: make it a directory." in done.stderr
    assert "internal error" not in done.stderr and not list(only_root.iterdir())

    for args in (("clean", str(run)), ("clean", "--all-work", "--runs-dir", str(runs)), ("resume", str(run))):
        done = _command(tmp_path, *args)
        assert f"refbench: warning: {run}/run.lock was a link, not a file refbench made: replaced" in done.stderr, \
            (args, done.stderr)
        assert secret.read_text() == "root's\n" and secret.stat().st_uid == 0, args
        (run / "run.lock").unlink(missing_ok=True)
        (run / "run.lock").symlink_to(secret)
    assert not list(only_root.iterdir())
    (run / "run.lock").unlink()

    # With its directories real, root's report is written, and what root made there is the run owner's.
    for name in ("tables", "charts"):
        (run / name).unlink()
        (run / name).mkdir()
        os.chown(run / name, other_user.pw_uid, other_user.pw_gid)
    (run / "secrets").mkdir(exist_ok=True)
    os.chown(run / "secrets", other_user.pw_uid, other_user.pw_gid)
    shutil.rmtree(run / "charts")
    done = _command(tmp_path, "report", str(run))
    assert done.returncode == 0, done.stderr
    made = [p for p in [*run.rglob("*")] if p.lstat().st_uid != other_user.pw_uid]
    assert not made, f"root left files of its own in the user's run: {made}"
    assert (run / "charts").is_dir() and list((run / "charts").rglob("*.svg"))


def test_a_fifo_as_a_record_verdict_or_lock_stops_no_listing_report_or_page(made_runs, tmp_path):
    runs, (odd, other) = _runs(made_runs, tmp_path)
    record = sorted((odd / "records" / "sleepy").glob("*.json"))[-1]
    for path in (record, odd / "verdict.json", odd / "run.lock", odd / "telemetry" / "samples.jsonl"):
        path.unlink(missing_ok=True)
        os.mkfifo(path)
    figure = "sleepy.ops_per_s"
    for args in (("runs", "--runs-dir", str(runs)), ("history", figure, "--runs-dir", str(runs)),
                 ("verdict", str(odd)), ("why", str(odd)), ("report", str(odd)), ("compare", str(odd), str(other)),
                 ("clean", "--all-work", "--runs-dir", str(runs))):
        for catalog in runs.glob("catalog.sqlite*"):  # each command reads the run directories, not what one before kept
            catalog.unlink()
        done = _command(tmp_path, *args)
        if args[0] in ("verdict", "why"):  # the run's verdict is the FIFO: it has none, which is one sentence
            assert done.returncode == 2 and f"refbench: {odd} has no verdict yet: refbench report {odd} writes it." \
                in done.stderr, (args, done.stderr)
        else:
            assert done.returncode == 0, (args, done.stderr)
        assert "internal error" not in done.stderr, (args, done.stderr)
        warned = [line for line in done.stderr.splitlines() if line.startswith("refbench: warning: ")]
        assert any(str(odd) in line and "FIFO" in line for line in warned), (args, done.stderr)
        # The run is listed with the rest of it: one odd file is one warning, not a lost run.
        if args[0] == "runs":
            assert odd.name in done.stdout and other.name in done.stdout, done.stdout
        for path in (record, odd / "verdict.json", odd / "run.lock"):  # put back where a command replaced it
            if not path.exists() or not path.is_fifo():
                path.unlink(missing_ok=True)
                os.mkfifo(path)
    for catalog in runs.glob("catalog.sqlite*"):
        catalog.unlink()
    server = Server(tmp_path)
    try:
        status, page = _get(server.base + (f"?token={server.token}" if server.token else ""))
        assert status == 200 and odd.name in page and other.name in page
    finally:
        server.stop()
