from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

TESTS = Path(__file__).parent
TEST_SUITES = "sleepy=suite_for_tests:SleepySuite"


def cli_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env["REFBENCH_SUITES"] = TEST_SUITES
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(TESTS), env.get("PYTHONPATH", "")]))
    env.pop("REFBENCH_DEBUG", None)
    env.update(extra)
    return env


@dataclass
class Result:
    code: int
    stdout: str
    stderr: str

    @property
    def last_line(self) -> str:
        return self.stdout.strip().splitlines()[-1]

    def json(self):
        return json.loads(self.stdout)


def refbench_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "refbench", *args]


@pytest.fixture
def refbench(tmp_path):
    """Runs the real CLI in a subprocess, in tmp_path, with the test suite registered."""

    def run(*args: str, timeout: float = 180, cwd: Path | None = None) -> Result:
        p = subprocess.run(refbench_command(*args), capture_output=True, text=True, timeout=timeout,
                           cwd=cwd or tmp_path, env=cli_env())
        return Result(p.returncode, p.stdout, p.stderr)

    return run
