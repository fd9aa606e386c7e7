"""The run directory: one per run, everything a report or comparison needs, written so that nothing is
lost or duplicated when a run is interrupted (Ctrl-C, kill -9, power loss) and resumed.

    runs/<UTC timestamp>-<name>/
      run.json                  plan, inventory, audit, tool versions, start/end, status
      records/<suite>/<case>.json   one per finished case, written via temp file + rename
      findings/<suite>.json     correctness checks
      raw/<suite>/<case>/       raw tool output
      telemetry/samples.jsonl   per-second /proc/diskstats and /proc/stat rates
      tables/*.parquet, *.csv   consolidated tables
      charts/*.png, *.svg       figures
      report.html               self-contained report
      secrets/                  0700: what must not be shown (passwords of the plan's DSNs, managed servers')
"""

from __future__ import annotations

import dataclasses
import fcntl
import json
import os
import re
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterator

from refbench.errors import UserError
from refbench.fileio import atomic_write_json, read_json, remove_temp_files, writable_directory
from refbench.plan import Plan
from refbench.redaction import merge_secrets, read_private, redact, split_secrets, write_private
from refbench.suites import Finding, Record

RUN_FORMAT = "refbench-run/1"


def utc_now() -> datetime:
    return datetime.now(timezone.utc)


def iso(ts: datetime) -> str:
    return ts.strftime("%Y-%m-%dT%H:%M:%SZ")


class Run:
    def __init__(self, path: Path):
        self.path = Path(path)
        self._lock_fd: int | None = None

    # ---- creating and finding runs -------------------------------------------------------------

    @classmethod
    def create(cls, plan: Plan, meta: dict[str, Any]) -> "Run":
        runs_dir = Path(plan.runs_dir)
        writable_directory(runs_dir, "the runs directory")
        started = utc_now()
        base = f"{started.strftime('%Y%m%dT%H%M%SZ')}-{plan.name}"
        for attempt in range(1, 100):
            path = runs_dir / (base if attempt == 1 else f"{base}-{attempt}")
            try:
                path.mkdir()
                break
            except FileExistsError:
                continue
        else:
            raise UserError(f"cannot find a free run directory name for {base} in {runs_dir}.")
        run = cls(path)
        # Passwords are masked in run.json (shared with the report) and kept in secrets/ for resume.
        shown, hidden = split_secrets(plan.to_dict())
        if hidden:
            write_private(run.secret_path("plan.json"), json.dumps(hidden))
        if "argv" in meta:
            meta = {**meta, "argv": [redact(arg) for arg in meta["argv"]]}
        atomic_write_json(
            run.run_file,
            {"format": RUN_FORMAT, "name": plan.name, "status": "running", "started_utc": iso(started),
             "ended_utc": None, "plan": shown, **meta},
        )
        return run

    @classmethod
    def find(cls, ref: str, runs_dir: str | Path = "runs") -> "Run":
        """A run by path, by directory name in ``runs_dir``, or by a unique part of its name."""
        candidates = [Path(ref), Path(runs_dir) / ref]
        for path in candidates:
            if (path / "run.json").is_file():
                return cls(path)
        matches = [r for r in list_runs(runs_dir) if ref in r.path.name]
        if len(matches) == 1:
            return matches[0]
        if len(matches) > 1:
            names = ", ".join(r.path.name for r in matches[:5])
            raise UserError(f"'{ref}' matches {len(matches)} runs in {runs_dir} ({names}); give the full name.")
        raise UserError(f"no run '{ref}' found (looked for a run directory with run.json, and in {runs_dir}).")

    # ---- metadata ------------------------------------------------------------------------------

    @property
    def run_file(self) -> Path:
        return self.path / "run.json"

    @property
    def meta(self) -> dict[str, Any]:
        try:
            meta = read_json(self.run_file)
        except (OSError, ValueError) as exc:
            raise UserError(f"{self.run_file} cannot be read: {exc}.") from None
        if meta.get("format") != RUN_FORMAT:
            raise UserError(f"{self.path} is not a refbench run directory (format {meta.get('format')!r}).")
        return meta

    def update(self, **fields: Any) -> None:
        meta = self.meta
        meta.update(fields)
        atomic_write_json(self.run_file, meta)

    @property
    def plan(self) -> Plan:
        """The plan as it ran, passwords included."""
        hidden = read_private(self.secret_path("plan.json"))
        return Plan.from_dict(merge_secrets(self.meta["plan"], json.loads(hidden) if hidden else []))

    def secret_path(self, name: str) -> Path:
        """A file for what must not be shown: in secrets/, which only the owner can enter (see redaction)."""
        return self.path / "secrets" / name

    @property
    def name(self) -> str:
        return self.meta["name"]

    def status(self) -> str:
        """complete | running | interrupted | failed; a 'running' run whose lock is free was killed."""
        status = self.meta.get("status", "unknown")
        if status == "running" and not self._locked_by_other():
            return "interrupted"
        return status

    # ---- locking -------------------------------------------------------------------------------

    def lock(self) -> None:
        fd = os.open(self.path / "run.lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise UserError(f"run {self.path} is in use by another refbench process.") from None
        os.ftruncate(fd, 0)
        os.write(fd, str(os.getpid()).encode())
        self._lock_fd = fd

    def unlock(self) -> None:
        """Releases the lock and removes its file: a run at rest has none (a killed run's stays, unlocked)."""
        if self._lock_fd is not None:
            (self.path / "run.lock").unlink(missing_ok=True)
            os.close(self._lock_fd)
            self._lock_fd = None

    def _locked_by_other(self) -> bool:
        if self._lock_fd is not None:
            return True
        try:
            fd = os.open(self.path / "run.lock", os.O_RDONLY)
        except FileNotFoundError:
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            return False
        except BlockingIOError:
            return True
        finally:
            os.close(fd)

    @contextmanager
    def running(self) -> Iterator[None]:
        """Holds the lock while the body measures, and leaves the status true: complete, interrupted or failed."""
        self.lock()
        try:
            self.update(status="running", ended_utc=None)
            yield
            self.update(status="complete", ended_utc=iso(utc_now()))
        except KeyboardInterrupt:
            self._mark(status="interrupted")
            raise
        except BaseException as exc:
            self._mark(status="failed", error=redact(str(exc)) or type(exc).__name__)
            raise
        finally:
            self.unlock()

    def _mark(self, **fields: Any) -> None:
        """The status after a failure, if it can be written: on a full disk it cannot, and then the run, left
        'running' with its lock free, reads as interrupted, which is true enough."""
        try:
            self.update(**fields)
        except OSError:
            pass

    def clean_interrupted_writes(self) -> int:
        return remove_temp_files(self.path)

    # ---- records -------------------------------------------------------------------------------

    def record_path(self, suite: str, case_id: str) -> Path:
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._=+-]*", case_id):
            raise ValueError(f"case id {case_id!r} is not path-safe")
        return self.path / "records" / suite / f"{case_id}.json"

    def has_record(self, suite: str, case_id: str) -> bool:
        return self.record_path(suite, case_id).is_file()

    def write_record(self, record: Record) -> None:
        atomic_write_json(self.record_path(record.suite, record.case_id), dataclasses.asdict(record))

    def records(self, suite: str | None = None) -> list[Record]:
        base = self.path / "records"
        files = (base / suite).glob("*.json") if suite else base.glob("*/*.json")
        fields = {f.name for f in dataclasses.fields(Record)}
        records = [Record(**{k: v for k, v in read_json(f).items() if k in fields}) for f in files]
        return sorted(records, key=lambda r: (r.suite, r.started_epoch_s))

    def suites_with_records(self) -> list[str]:
        base = self.path / "records"
        return sorted(p.name for p in base.iterdir() if p.is_dir()) if base.is_dir() else []

    # ---- other artefacts -----------------------------------------------------------------------

    def raw_dir(self, suite: str, case_id: str) -> Path:
        return self.path / "raw" / suite / case_id

    @property
    def telemetry_path(self) -> Path:
        return self.path / "telemetry" / "samples.jsonl"

    @property
    def tables_dir(self) -> Path:
        return self.path / "tables"

    @property
    def charts_dir(self) -> Path:
        return self.path / "charts"

    @property
    def report_path(self) -> Path:
        return self.path / "report.html"

    def write_findings(self, suite: str, findings: list[Finding]) -> None:
        atomic_write_json(self.path / "findings" / f"{suite}.json", [dataclasses.asdict(f) for f in findings])

    def findings(self) -> dict[str, list[Finding]]:
        out = {}
        for path in sorted((self.path / "findings").glob("*.json")):
            out[path.stem] = [Finding(**f) for f in read_json(path)]
        return out


def list_runs(runs_dir: str | Path) -> list[Run]:
    base = Path(runs_dir)
    if not base.is_dir():
        return []
    runs = [Run(p) for p in base.iterdir() if (p / "run.json").is_file()]
    return sorted(runs, key=lambda r: r.path.name)


def iter_summaries(runs_dir: str | Path) -> Iterator[dict[str, Any]]:
    for run in list_runs(runs_dir):
        try:
            meta = run.meta
        except UserError:
            continue
        records = run.records()
        yield {
            "run": run.path.name,
            "path": str(run.path),
            "name": meta["name"],
            "status": run.status(),
            "started_utc": meta.get("started_utc"),
            "ended_utc": meta.get("ended_utc"),
            "profile": meta["plan"].get("profile"),
            "suites": meta["plan"].get("suites", []),
            "records": len(records),
        }
