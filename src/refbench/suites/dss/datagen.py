"""TPC-H data from tpchgen-cli (PyPI, Rust): its data matches the reference answers, DuckDB's built-in
generator's does not. One CSV file per table, reused when a complete set of the same scale factor is there."""

from __future__ import annotations

import functools
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from refbench.engines import Dataset
from refbench.errors import UserError
from refbench.fileio import atomic_write_text

TABLES = ["region", "nation", "part", "supplier", "partsupp", "customer", "orders", "lineitem"]
# The tables as the engines load them, with the suite's SQL (sql/schema.sql, indexes.sql, keys.sql).
TPCH = Dataset("tpch", "TPC-H", tuple(TABLES), "refbench.suites.dss")
MARKER = "refbench-tpch.json"


# The tpchgen-cli major version the command line below and the kept answer sets (made_with) are of; pyproject pins it.
# 1.1 and 2.0 have no `csv` command, 3.0 no --overwrite.
GENERATOR_MAJOR = 4
PIN = f"tpchgen-cli>={GENERATOR_MAJOR}.0,<{GENERATOR_MAJOR + 1}"


def tpchgen() -> str:
    """The tpchgen-cli installed with refbench (next to this Python), or one on PATH, of the version refbench drives
    and keeps answers for; another is refused in one sentence, before any data is generated or loaded."""
    beside = Path(sys.executable).parent / "tpchgen-cli"
    path = str(beside) if beside.exists() else shutil.which("tpchgen-cli")
    if not path:
        raise UserError("tpchgen-cli is not installed; install refbench's dependencies with 'make setup' "
                        f"(or pip install '{PIN}').")
    version = generator_version(path)
    if not version.startswith(f"{GENERATOR_MAJOR}."):
        raise UserError(f"{path} is tpchgen-cli {version}; refbench drives {GENERATOR_MAJOR}.x, the version its "
                        f"kept answers were computed on: install it with 'make setup' (or pip install '{PIN}').")
    return path


@functools.cache
def generator_version(path: str) -> str:
    """tpchgen-cli's version as it says it ("4.0.0"), or what it said instead."""
    try:
        said = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise UserError(f"{path} --version did not answer ({exc}).") from None
    return said.removeprefix("tpchgen-cli").strip() or "of no version it would say"


def generated(directory: Path, scale_factor: float) -> dict[str, Any] | None:
    """What an earlier complete generation of this scale factor in ``directory`` recorded, or None."""
    try:
        info = json.loads((directory / MARKER).read_text())
    except (OSError, ValueError):
        return None
    if info.get("scale_factor") != scale_factor or not all((directory / f"{t}.csv").exists() for t in TABLES) or \
            not str(info.get("generator", "")).startswith(f"tpchgen-cli {GENERATOR_MAJOR}."):
        return None
    return info


def generate(directory: Path, scale_factor: float) -> dict[str, Any]:
    """Generates the eight tables at ``scale_factor`` into ``directory`` unless they are there already."""
    if (info := generated(directory, scale_factor)) is not None:
        return {**info, "reused": True}
    try:
        directory.mkdir(parents=True, exist_ok=True)
        (directory / MARKER).unlink(missing_ok=True)
    except OSError as exc:
        raise UserError(f"cannot create the TPC-H data directory {directory}: {exc.strerror}.") from None
    t0 = time.monotonic()
    path = tpchgen()
    result = subprocess.run([path, "csv", "-s", _sf_text(scale_factor), "--output-dir", str(directory), "--overwrite"],
                            capture_output=True, text=True)
    if result.returncode != 0:
        # The first line is the error; clap ends with "For more information, try '--help'."
        detail = ([line for line in result.stderr.splitlines() if line.strip()] or [f"exit status {result.returncode}"])[0]
        raise UserError(f"tpchgen-cli could not generate scale factor {scale_factor:g} in {directory}: {detail.strip()}")
    info = {"scale_factor": scale_factor, "generator": f"tpchgen-cli {generator_version(path)}",
            "generate_s": round(time.monotonic() - t0, 2),
            "bytes": {t: (directory / f"{t}.csv").stat().st_size for t in TABLES}}
    atomic_write_text(directory / MARKER, json.dumps(info))  # last: its presence says the set is complete
    return {**info, "reused": False}


def _sf_text(scale_factor: float) -> str:
    return f"{scale_factor:g}"
