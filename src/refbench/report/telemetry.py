"""The report's host-activity section, read in one streaming pass over the run's telemetry file.

A run samples once a second for as long as it lasts (3,600 lines an hour, 86,400 a day), so nothing here holds
the whole series: the per-second tables are written batch by batch, and each chart keeps a bounded number of
points, the means of ever wider buckets of consecutive seconds.
"""

from __future__ import annotations

import csv
import io
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from refbench.fileio import atomic_writer
from refbench.host.telemetry import CPU_METRICS, DISK_METRICS, Telemetry
from refbench.suites import Chart

CHART_POINTS = 600  # about one point per pixel column of the rendered chart
CHART_MIN_SAMPLES = 3  # one or two seconds are a table's row, not a line
BATCH_ROWS = 1024  # rows held before a write: what the tables cost in memory, whatever the run length
CPU_SERIES = (("user %", "user_pct"), ("system %", "system_pct"), ("iowait %", "iowait_pct"))
CHARTED_DEVICES = 4


class TableWriter:
    """One table as Parquet and CSV, written a batch of rows at a time; both files appear only when complete."""

    def __init__(self, directory: Path, name: str, schema: pa.Schema):
        self.directory, self.name, self.schema = directory, name, schema
        self._stack: ExitStack | None = None  # the files, opened with the first row: an empty table writes none
        self._pending: list[dict[str, Any]] = []
        self.rows = 0

    def write(self, row: dict[str, Any]) -> None:
        self._pending.append(row)
        if len(self._pending) >= BATCH_ROWS:
            self._flush()

    def _flush(self) -> None:
        if not self._pending:
            return
        if self._stack is None:
            self._stack = ExitStack()
            self._parquet = pq.ParquetWriter(self._stack.enter_context(atomic_writer(self.directory / f"{self.name}.parquet")),
                                             self.schema)
            self._csv_file = io.TextIOWrapper(self._stack.enter_context(atomic_writer(self.directory / f"{self.name}.csv")),
                                              encoding="utf-8", newline="")
            self._csv = csv.writer(self._csv_file)
            self._csv.writerow(self.schema.names)
        self._parquet.write_table(pa.Table.from_pylist(self._pending, schema=self.schema))
        self._csv.writerows([row.get(c) for c in self.schema.names] for row in self._pending)
        self.rows += len(self._pending)
        self._pending = []

    def __enter__(self) -> "TableWriter":
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        try:
            if exc_type is None:
                self._flush()
            if self._stack is not None:
                self._parquet.close()
                self._csv_file.flush()
                self._csv_file.detach()  # the atomic writer closes the file itself, after fsync
        except BaseException as failed:
            exc_type, exc, tb = type(failed), failed, failed.__traceback__
            raise
        finally:
            if self._stack is not None:
                self._stack.__exit__(exc_type, exc, tb)  # on an error the atomic writers discard their files


class Downsampler:
    """At most ``limit`` (x, y) points from a series of unknown length, each the mean of a bucket of consecutive
    points; when the buckets run out, neighbours merge in pairs and the bucket doubles."""

    def __init__(self, limit: int = CHART_POINTS):
        self.limit, self.width = limit, 1
        self.buckets: list[list[float]] = []  # [sum of x, sum of y, count]

    def add(self, x: float, y: float) -> None:
        if self.buckets and self.buckets[-1][2] < self.width:
            last = self.buckets[-1]
            last[0] += x
            last[1] += y
            last[2] += 1
            return
        if len(self.buckets) == self.limit:
            self.buckets = [[a[0] + b[0], a[1] + b[1], a[2] + b[2]] if b else a
                            for a, b in zip(self.buckets[::2], self.buckets[1::2] + [None])]
            self.width *= 2
            self.add(x, y)
            return
        self.buckets.append([x, y, 1])

    def points(self) -> list[tuple[float, float]]:
        return [(round(sx / n, 1), round(sy / n, 3)) for sx, sy, n in self.buckets]


def telemetry_charts(path: Path, tables_dir: Path, phases: list[tuple[float, float, str]] = ()) -> list[Chart]:
    """Writes the telemetry_cpu and telemetry_disk tables and returns the charts, from one pass over the file.
    ``phases`` (start and end epoch seconds, name) are shaded on every chart: which suite ran when."""
    cpu_schema = pa.schema([("epoch_s", pa.float64()), *((k, pa.float64()) for k in CPU_METRICS)])
    disk_schema = pa.schema([("epoch_s", pa.float64()), ("device", pa.string()), *((k, pa.float64()) for k in DISK_METRICS)])
    cpu_series = {label: Downsampler() for label, _ in CPU_SERIES}
    disk_series: dict[str, tuple[Downsampler, Downsampler]] = {}
    disk_mb: dict[str, float] = {}
    t0 = None
    with TableWriter(tables_dir, "telemetry_cpu", cpu_schema) as cpu_table, \
            TableWriter(tables_dir, "telemetry_disk", disk_schema) as disk_table:
        for s in Telemetry(path).samples():
            t = s["t"]
            t0 = t if t0 is None else t0
            if "cpu" in s:
                cpu_table.write({"epoch_s": t, **s["cpu"]})
                for label, key in CPU_SERIES:
                    cpu_series[label].add(t - t0, s["cpu"][key])
            for name, d in s["disks"].items():
                disk_table.write({"epoch_s": t, "device": name, **d})
                read, write = disk_series.setdefault(name, (Downsampler(), Downsampler()))
                read.add(t - t0, d["read_mb_s"])
                write.add(t - t0, d["write_mb_s"])
                disk_mb[name] = disk_mb.get(name, 0.0) + d["read_mb_s"] + d["write_mb_s"]
    if cpu_table.rows < CHART_MIN_SAMPLES:
        return []
    width = max([d.width for d in cpu_series.values()] + [r.width for r, _ in disk_series.values()])
    note = f" (means over {width} s)" if width > 1 else ""
    spans = [(start - t0, end - t0, name) for start, end, name in phases]
    charts = [Chart("telemetry_cpu", f"CPU during the run{note}", "seconds since start", "% of all CPUs",
                    {label: d.points() for label, d in cpu_series.items()}, spans=spans)]
    active = [d for d, total in sorted(disk_mb.items(), key=lambda kv: -kv[1])[:CHARTED_DEVICES] if total > 0]
    if active:
        series = {}
        for d in active:
            series[f"{d} read"] = disk_series[d][0].points()
            series[f"{d} write"] = disk_series[d][1].points()
        charts.append(Chart("telemetry_disk", f"Device throughput during the run{note}", "seconds since start", "MB/s", series,
                            spans=spans))
    return charts
