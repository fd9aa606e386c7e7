"""The nineteen tests of the mixed analytics workload and what each needs: its kind (computation, memory or
I/O, as the mixed-analytics paper counts them: 10, 2 and 7), the engine that does the work and why, the SAS step it stands
for, which of the three locations it reads and writes, and whether it runs threaded.

Tests live in computation_tests.py, memory_tests.py and io_tests.py; each is one function that takes a
JobContext, does its work with a real engine and returns its own correctness checks.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

KINDS = ("computation", "memory", "io")
LOCATIONS = ("DATA", "WORK", "UTIL")


@dataclass
class JobContext:
    """What one job gets: the three locations (WORK and UTIL are the job's own subdirectories, as SAS gives each
    session its own WORK library), the input scale, and its resources."""

    data: Path
    work: Path
    util: Path
    rows: int
    threads: int
    memory_mb: int
    seed: int
    fsync: bool
    checks: list[dict[str, Any]] = field(default_factory=list)

    def check(self, name: str, passed: bool, detail: str = "") -> None:
        self.checks.append({"check": name, "passed": bool(passed), "detail": detail})

    def written(self, *paths: Path) -> None:
        """Outputs are flushed to storage when the job ends, so a run smaller than memory still writes to the
        devices under test (the mixed-analytics paper's outputs outgrow its hosts' memory and reach storage anyway)."""
        if not self.fsync:
            return
        for path in paths:
            fd = os.open(path, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)

    def duckdb(self, database: str = ":memory:"):
        import duckdb

        return duckdb.connect(database, config={
            "threads": self.threads, "memory_limit": f"{self.memory_mb}MB", "temp_directory": str(self.util),
            "preserve_insertion_order": False})


@dataclass(frozen=True)
class AnalyticsTest:
    name: str
    kind: str
    engine: str
    models: str  # the SAS step or procedure it stands for
    why: str  # why this engine
    reads: tuple[str, ...]
    writes: tuple[str, ...]
    threaded: bool
    inputs: tuple[str, ...]  # the DATA files it reads, dropped from the page cache as the job starts
    run: Callable[[JobContext], None]


TESTS: dict[str, AnalyticsTest] = {}
# Listed here as well as registered, so that naming the tests does not import the engines (a job's CPU time
# should be its test's, not numpy's import).
TEST_NAMES = (
    "sort_copy", "summary_by_group", "join_tables", "frequency_tables", "linear_regression", "logistic_regression",
    "percentiles", "correlation_matrix", "kmeans_clustering", "rank_and_running_totals",  # computation
    "in_memory_table", "hash_lookup",  # memory
    "data_step_pass", "copy_to_work", "append_tables", "export_csv", "import_csv", "subset_where", "random_reads",  # I/O
)


def analytics_test(kind: str, engine: str, models: str, why: str, reads: tuple[str, ...] = ("DATA",),
                   writes: tuple[str, ...] = (), threaded: bool = False, inputs: tuple[str, ...] = ()):
    assert kind in KINDS and set(reads + writes) <= set(LOCATIONS)

    def register(run: Callable[[JobContext], None]) -> Callable[[JobContext], None]:
        TESTS[run.__name__] = AnalyticsTest(run.__name__, kind, engine, models, why, reads, writes, threaded, inputs, run)
        return run

    return register
