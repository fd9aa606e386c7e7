"""Root acts only on state it wrote: tune's host-changes journal, its lock and its server journals are put back (by
any refbench command, as root) only when they are regular files of root's, written by no one else, in a directory of
root's reached through no link, and name only /proc/sys and /sys settings of the tree refbench writes. Anything else
is one warning naming the file and why, and the command goes on; nothing it names is written."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from conftest import cli_env, refbench_command
from test_least_privilege import other_user  # noqa: F401 (a fixture)

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="what root does with another user's state needs root")


def _host(tmp_path: Path) -> Path:
    root = tmp_path / "root"
    (root / "proc/sys/vm").mkdir(parents=True)
    (root / "proc/sys/vm/dirty_ratio").write_text("20\n")
    (root / "tmp").mkdir()
    (root / "tmp/victim").write_text("safe\n")
    return root


def _journal(path: Path, root: Path, setting_path: str = "/proc/sys/vm/dirty_ratio") -> None:
    """A journal as a tune killed with its watchdog leaves it (its owner gone), asking for 99 to be written back."""
    path.write_text(json.dumps({"owner": {"pid": 1, "start": -1}, "root": str(root),
                                "changes": [{"path": setting_path, "original": "99", "setting": "vm.dirty_ratio"}]}))


def _any_command(root: Path, state: Path, tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(refbench_command(*(args or ("runs", "--runs-dir", str(tmp_path / "runs")))), cwd=tmp_path,
                          env=cli_env(REFBENCH_SYSROOT=str(root), REFBENCH_STATE_DIR=str(state)), capture_output=True,
                          text=True, timeout=60)


def _warned(done: subprocess.CompletedProcess, journal: Path, why: str) -> None:
    assert done.returncode == 0, done.stderr
    assert f"refbench: warning: {journal} was not used: {why}" in done.stderr.splitlines(), done.stderr


def test_a_journal_in_another_users_directory_or_through_a_link_is_not_acted_on(tmp_path, other_user):
    root = _host(tmp_path)
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    _journal(theirs / "host-changes.json", root)
    for path in (theirs, theirs / "host-changes.json"):
        os.chown(path, other_user.pw_uid, other_user.pw_gid)
    done = _any_command(root, theirs, tmp_path)
    _warned(done, theirs / "host-changes.json",
            f"its directory {theirs} is owned by uid {other_user.pw_uid}, not by this user (uid 0)")
    assert (root / "proc/sys/vm/dirty_ratio").read_text() == "20\n" and (theirs / "host-changes.json").exists()

    mine = tmp_path / "mine"
    mine.mkdir()
    _journal(mine / "host-changes.json", root)
    (tmp_path / "link").symlink_to(mine)
    _warned(_any_command(root, tmp_path / "link", tmp_path), tmp_path / "link" / "host-changes.json",
            f"its directory {tmp_path / 'link'} is a link")
    (mine / "host-changes.json").chmod(0o666)
    _warned(_any_command(root, mine, tmp_path), mine / "host-changes.json", "it may be written by others (mode 666)")
    assert (root / "proc/sys/vm/dirty_ratio").read_text() == "20\n"


def test_a_journal_naming_a_file_outside_proc_sys_and_sys_is_not_acted_on(tmp_path):
    root, state = _host(tmp_path), tmp_path / "state"
    state.mkdir()
    for named in ("/tmp/victim", "/proc/sys/../../tmp/victim"):
        _journal(state / "host-changes.json", root, named)
        _warned(_any_command(root, state, tmp_path), state / "host-changes.json",
                f"it names {named!r}, not a setting under /proc/sys or /sys")
        assert (root / "tmp/victim").read_text() == "safe\n"
    _journal(state / "host-changes.json", tmp_path)  # another tree than the one refbench writes
    _warned(_any_command(root, state, tmp_path), state / "host-changes.json",
            f"it names the tree {str(tmp_path)!r}, not {str(root)!r}")
    _journal(state / "host-changes.json", root)  # its own, as tune wrote it: put back
    done = _any_command(root, state, tmp_path)
    assert "a tune that was killed had changed a host setting, now put back: vm.dirty_ratio: 99" in done.stderr
    assert (root / "proc/sys/vm/dirty_ratio").read_text() == "99" and not (state / "host-changes.json").exists()


def test_fifos_for_journals_hang_no_command_and_another_users_server_journal_is_left_alone(tmp_path, other_user):
    root, state = _host(tmp_path), tmp_path / "state"
    state.mkdir()
    os.mkfifo(state / "host-changes.json")
    os.mkfifo(state / "server-changes-1.json")
    done = _any_command(root, state, tmp_path, "--help")  # a FIFO opened to read waits for a writer: never here
    for fifo in ("host-changes.json", "server-changes-1.json"):
        _warned(done, state / fifo, "it is not a regular file")
    for fifo in ("host-changes.json", "server-changes-1.json"):
        (state / fifo).unlink()
    theirs = state / "server-changes-7.json"
    theirs.write_text(json.dumps({"owner": {"pid": 1, "start": -1}, "engine": "postgres", "dsn": "host=/nonexistent",
                                  "changes": [{"setting": "work_mem", "original": "64kB"}]}))
    theirs.chmod(0o600)
    os.chown(theirs, other_user.pw_uid, other_user.pw_gid)
    _warned(_any_command(root, state, tmp_path), theirs,
            f"it is owned by uid {other_user.pw_uid}, not by this user (uid 0)")
    assert theirs.exists()
