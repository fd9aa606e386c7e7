"""TPC-H data from tpchgen-cli (PyPI, Rust): its data matches the reference answers, DuckDB's built-in
generator's does not. One CSV file per table, reused when a complete set of the same scale factor is there."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from refbench.engines import Dataset
from refbench.errors import UserError

TABLES = ["region", "nation", "part", "supplier", "partsupp", "customer", "orders", "lineitem"]
# The tables as the engines load them, with the suite's SQL (sql/schema.sql, indexes.sql, keys.sql).
TPCH = Dataset("tpch", "TPC-H", tuple(TABLES), "refbench.suites.dss")
MARKER = "refbench-tpch.json"


def tpchgen() -> str:
    """The tpchgen-cli installed with refbench (next to this Python), or one on PATH."""
    beside = Path(sys.executable).parent / "tpchgen-cli"
    path = str(beside) if beside.exists() else shutil.which("tpchgen-cli")
    if not path:
        raise UserError("tpchgen-cli is not installed; install refbench's dependencies with 'make setup' "
                        "(or 'pip install tpchgen-cli').")
    return path


def generated(directory: Path, scale_factor: float) -> dict[str, Any] | None:
    """What an earlier complete generation of this scale factor in ``directory`` recorded, or None."""
    try:
        info = json.loads((directory / MARKER).read_text())
    except (OSError, ValueError):
        return None
    if info.get("scale_factor") != scale_factor or not all((directory / f"{t}.csv").exists() for t in TABLES):
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
    result = subprocess.run([tpchgen(), "csv", "-s", _sf_text(scale_factor), "--output-dir", str(directory), "--overwrite"],
                            capture_output=True, text=True)
    if result.returncode != 0:
        detail = (result.stderr.strip().splitlines() or [f"exit status {result.returncode}"])[-1]
        raise UserError(f"tpchgen-cli could not generate scale factor {scale_factor:g} in {directory}: {detail}")
    info = {"scale_factor": scale_factor, "generate_s": round(time.monotonic() - t0, 2),
            "bytes": {t: (directory / f"{t}.csv").stat().st_size for t in TABLES}}
    (directory / MARKER).write_text(json.dumps(info))  # last: its presence says the set is complete
    return {**info, "reused": False}


def _sf_text(scale_factor: float) -> str:
    return f"{scale_factor:g}"
