"""Output never stops a measurement: a closed, full or broken stderr or stdout neither crashes nor blocks a run. What
cannot be written is dropped, the run measures and records everything, and the exit status says how the run went."""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
from pathlib import Path

import pytest

from conftest import cli_env, refbench_command

RUN = ("sleepy", "--set", "sleepy.sleep_s=0.2", "--set", "sleepy.cases=3", "--runs-dir", "runs")


def _recorded(tmp_path: Path) -> None:
    """The run finished and kept every case."""
    run, = (tmp_path / "runs").glob("*-sleepy")
    assert json.loads((run / "run.json").read_text())["status"] == "complete"
    assert len(list((run / "records" / "sleepy").glob("*.json"))) >= 3


def _run(tmp_path: Path, stdout, stderr, shell: str = "") -> int:
    command = refbench_command(*RUN)
    if shell:
        command = ["sh", "-c", f'exec "$@" {shell}', "sh", *command]
    return subprocess.run(command, cwd=tmp_path, env=cli_env(), stdin=subprocess.DEVNULL, stdout=stdout, stderr=stderr,
                          timeout=120).returncode


def test_a_closed_stderr_without_columns_is_no_crash(tmp_path):
    assert _run(tmp_path, subprocess.DEVNULL, None, shell="2>&-") == 0
    _recorded(tmp_path)


def test_a_stderr_pipe_nobody_reads_holds_no_measurement(tmp_path):
    read, write = os.pipe()
    try:
        fcntl.fcntl(write, fcntl.F_SETFL, fcntl.fcntl(write, fcntl.F_GETFL) | os.O_NONBLOCK)
        with pytest.raises(BlockingIOError):  # full before the run writes its first line
            while True:
                os.write(write, b"x" * 4096)
        fcntl.fcntl(write, fcntl.F_SETFL, fcntl.fcntl(write, fcntl.F_GETFL) & ~os.O_NONBLOCK)
        assert _run(tmp_path, subprocess.DEVNULL, write) == 0  # within the timeout: it did not wait for a reader
    finally:
        os.close(read)
        os.close(write)
    _recorded(tmp_path)


@pytest.mark.parametrize("stream", ["stdout", "stderr"])
def test_a_stream_whose_reader_is_gone_is_no_crash(tmp_path, stream):
    read, write = os.pipe()
    os.close(read)  # every write to it fails with EPIPE
    try:
        code = _run(tmp_path, write if stream == "stdout" else subprocess.DEVNULL,
                    write if stream == "stderr" else subprocess.DEVNULL)
    finally:
        os.close(write)
    assert code == 0
    _recorded(tmp_path)
