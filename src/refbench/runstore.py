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
      tags.json                 the run's tags ({"firmware": "2.1"}): set by --tag, changed by 'refbench tag'
      work.json                 the places outside work/ the suites wrote to (targets, data_dir options): what
                                removing the run's work data removes (what it created, by device and inode, each
                                entry sealed with secrets/work.key), and what it must leave to others
      run.lock                  while a process runs the run (flock); gone when it ends
"""

from __future__ import annotations

import dataclasses
import fcntl
import functools
import hmac
import json
import os
import re
import secrets
import types
import typing
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterator, TypedDict, TypeVar

from refbench import removal
from refbench.errors import UserError
from refbench.fileio import (NotRegular, atomic_write_json, is_regular, odd_file, open_own_file, open_regular, read_private,
                             read_regular, remove_temp_files, skipped, writable_directory, write_private)
from refbench.options import TAG, Plan
from refbench.redaction import merge_secrets, redact, split_secrets
from refbench.records import (Finding, Record, RecordExtra, VerdictEntry, figure_problem, impossible_figures,
                              json_kind, shape_problem)

RUN_FORMAT = "refbench-run/1"
SET_ASIDE_SUFFIX = ".corrupt"


class CorruptRunFile(UserError):
    """A run file that cannot be read back. Every file of a run is written atomically (temp file + rename), so
    this is a file someone edited or a disk that lost or changed data: named with the line at fault."""

    def __init__(self, run_path: Path, path: Path, problem: str, line: int | None = None):
        self.path = path
        self.where = str(path.relative_to(run_path)) + (f" line {line}" if line else "")
        if path.parent.parent.name == "records" or path.parent.name == "findings":
            again = "measures that case again" if path.parent.parent.name == "records" else "checks that suite again"
            advice = f"'refbench resume {run_path}' sets it aside (as {path.name}{SET_ASIDE_SUFFIX}) and {again}"
        elif path.name == "verdict.json":
            advice = f"'refbench report {run_path}' writes it again"
        else:
            advice = "the run's plan and status are lost with it: restore the file from a backup or delete the run"
        super().__init__(f"{path} {problem}; {advice}.")


class DamagedRecord(CorruptRunFile):
    """A record whose JSON reads, with a figure in it that cannot be one (1e308, Infinity, a list)."""

    def __init__(self, run_path: Path, path: Path, problem: str):
        super().__init__(run_path, path, f"is damaged: {problem}")
        self.where = f"{self.where}: {problem}"


class RunMeta(TypedDict, total=False):
    """What run.json holds (Run.create writes it with the runner's run_metadata, Run.update changes it)."""

    format: str
    name: str
    status: str
    started_utc: str
    ended_utc: str | None
    plan: dict[str, Any]
    host: str
    inventory: dict[str, Any]
    audit: list[dict[str, Any]]
    tools: dict[str, Any]
    argv: list[str]
    error: str
    cluster: dict[str, Any]
    node: str


def _written_as_declared(data: Any, declared: Any, what: str) -> None:
    """A writer's own check: what it writes is declared, field by field (records.py, RunMeta), so that its readers
    check every field of it."""
    if problem := shape_problem(data, declared, what, strict=True):
        raise ValueError(f"refbench wrote a {what} that is not as declared: {problem}")


def utc_now() -> datetime:
    return datetime.now(timezone.utc)


def iso(ts: datetime) -> str:
    return ts.strftime("%Y-%m-%dT%H:%M:%SZ")

T = TypeVar("T")


class Run:
    def __init__(self, path: Path):
        self.path = Path(path)
        self._lock_fd: int | None = None
        self._claimed: set[str] = set()
        # Each record and findings file as last read, with the (inode, size, mtime) it had: the report, verdict,
        # compare, acceptance and catalog of one Run read a file once, and again only once it changed.
        self._read_files: dict[Path, tuple[tuple[int, int, int], Any]] = {}

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
        if plan.tags:
            run.set_tags(parse_tags(plan.tags))
        run._write_meta({"format": RUN_FORMAT, "name": plan.name, "status": "running", "started_utc": iso(started),
                         "ended_utc": None, "plan": shown, **meta})
        return run

    @classmethod
    def find(cls, ref: str, runs_dir: str | Path = "runs") -> "Run":
        """A run by path, by directory name in ``runs_dir``, or by a unique part of its name."""
        candidates = [Path(ref), Path(runs_dir) / ref]
        for path in candidates:
            try:
                if is_regular(path / "run.json"):
                    return cls(path)
            except (OSError, ValueError):  # a name too long for the file system, or with a NUL: not a run
                continue
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
        meta = self._read(self.run_file)
        if not isinstance(meta, dict):
            problem = f"holds {json_kind(meta)}, not a JSON object"
        elif meta.get("format") != RUN_FORMAT:
            problem = f"has the format {meta.get('format')!r}, not {RUN_FORMAT!r}: not a refbench run (of this version)"
        elif not isinstance(meta.get("name"), str) or not isinstance(meta.get("status", ""), str):
            problem = "has no run name or status"
        else:
            problem = _shape_problem(meta.get("plan"), Plan, "plan")
            if not problem and (field := shape_problem(meta, RunMeta, "run")):
                raise DamagedRecord(self.path, self.run_file, field)
        if problem:
            raise CorruptRunFile(self.path, self.run_file, problem)
        return meta

    def _read(self, path: Path) -> Any:
        """A run file's JSON; a file that is not JSON ends with a CorruptRunFile naming it and the line at fault."""
        try:
            text = read_regular(path).decode()
        except UnicodeDecodeError:
            raise CorruptRunFile(self.path, path, "is not text (not UTF-8)") from None
        except OSError as exc:
            raise CorruptRunFile(self.path, path, f"cannot be read ({exc.strerror})") from None
        if not text.strip():
            raise CorruptRunFile(self.path, path, "is empty")
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            problem = f"is not valid JSON at line {exc.lineno} column {exc.colno} ({exc.msg})"
            raise CorruptRunFile(self.path, path, problem, exc.lineno) from None
        except RecursionError:  # arrays or objects nested thousands deep: no file refbench writes
            raise CorruptRunFile(self.path, path, "nests JSON arrays or objects too deeply to be one refbench "
                                 "wrote") from None

    def span(self) -> tuple[float, float] | None:
        """(started, ended) in seconds since the epoch; None for a run still going or whose times are not read."""
        from datetime import datetime

        try:
            meta = self.meta
            return tuple(datetime.fromisoformat(str(meta.get(k)).replace("Z", "+00:00")).timestamp()
                         for k in ("started_utc", "ended_utc"))  # type: ignore[return-value]
        except ValueError:
            return None

    def update(self, **fields: Any) -> None:
        self._write_meta({**self.meta, **fields})

    def _write_meta(self, meta: dict[str, Any]) -> None:
        _written_as_declared(meta, RunMeta, "run.json")
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
        path = self.path / "run.lock"
        while True:
            fd = open_own_file(path, os.O_RDWR | os.O_CREAT)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                raise UserError(f"run {self.path} is in use by another refbench process.") from None
            # The holder before us removes the file as it unlocks: a lock on the file it removed guards nothing.
            try:
                if os.stat(path).st_ino == os.fstat(fd).st_ino:
                    break
            except FileNotFoundError:
                pass
            os.close(fd)
        try:
            os.ftruncate(fd, 0)
            os.write(fd, str(os.getpid()).encode())
        except OSError as exc:
            os.close(fd)
            raise OSError(exc.errno, exc.strerror, str(path)) from None
        self._lock_fd = fd

    def unlock(self) -> None:
        """Releases the lock and removes its file: a run at rest has none (a killed run's stays, unlocked)."""
        if self._lock_fd is not None:
            (self.path / "run.lock").unlink(missing_ok=True)
            os.close(self._lock_fd)
            self._lock_fd = None

    @property
    def held_here(self) -> bool:
        """This process holds the run's lock: it is measuring the run, or writing its final report."""
        return self._lock_fd is not None

    def in_use(self) -> bool:
        """Whether a process (this one included) runs the run now."""
        return self._locked_by_other()

    def _locked_by_other(self) -> bool:
        if self._lock_fd is not None:
            return True
        try:
            fd = open_regular(self.path / "run.lock")
        except FileNotFoundError:
            return False
        except NotRegular as odd:
            odd_file(self.path / "run.lock", f"is {odd.kind}, not a lock refbench made: the run is taken as held by "
                     "no process")
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

    # ---- work data outside the run directory ---------------------------------------------------

    @property
    def work_file(self) -> Path:
        return self.path / "work.json"

    def work_places(self) -> list[dict[str, Any]]:
        """The places outside the run directory its suites claimed (claim_work): {path, suite, created}, and for a
        place the run created, what identifies it and the directory it is in ({parent, found}: device, inode, owner),
        sealed (work_sealed)."""
        if not self.work_file.exists():
            return []
        places = self._read(self.work_file)
        if not isinstance(places, list) or not all(isinstance(p, dict) and isinstance(p.get("path"), str)
                                                   and isinstance(p.get("created"), bool) for p in places):
            raise CorruptRunFile(self.path, self.work_file, "is not a list of places with path and created")
        return places

    def claim_work(self, paths: list[Path], suite: str) -> None:
        """Notes ``paths`` as the run's work data before a suite writes them (and so before a kill could leave them
        unnoted): a path that does not exist yet the run creates (its topmost missing directory, that is, which is
        made here, so that what identifies it is known from its first instant), and removes with its work data; one
        that exists (an earlier run's data, reused) is only marked as in use. Paths are noted without symbolic links,
        so that removal can walk down to them following none."""
        new = [Path(os.path.abspath(path)) for path in paths if os.path.abspath(path) not in self._claimed]
        if not new:  # SuiteContext.work_dir claims on every use
            return
        places = self.work_places()
        known = {p["path"] for p in places}
        before = len(places)
        for path in new:
            self._claimed.add(str(path))
            top = path
            while not top.parent.exists() and top.parent != top:
                top = top.parent
            top = Path(os.path.realpath(top.parent)) / top.name
            if str(top) in known:
                continue
            known.add(str(top))
            place: dict[str, Any] = {"path": str(top), "suite": suite, "created": not os.path.lexists(top)}
            if place["created"]:
                made = removal.make_directory(top) if top != Path(os.path.realpath(path)) else None
                place |= made or {"parent": removal.parent_identity(top), "found": None}
            places.append(self._seal(place))
        if len(places) > before:
            atomic_write_json(self.work_file, places)

    def note_work_found(self, owners: set[int], drop_absent: bool = False) -> None:
        """Records what identifies each place the run created as it is now, while the run holds it: a place a suite
        made itself (a file, a generated directory) or made anew is known by its device and inode from then on, and
        anything put in its stead afterwards is not removed. Only a place still in the directory recorded, reached
        with no link, and owned by one of ``owners`` (the run's and its servers' accounts) is taken. ``drop_absent``
        (a suite has ended): a place it claimed but never made is no longer noted, so that nothing put there later is
        taken for the run's."""
        places, changed = self.work_places(), False
        for place in list(places):
            if not place["created"] or not self.work_sealed(place):
                continue
            try:
                opened = removal.open_place(Path(place["path"]), parent=place.get("parent"), owners=owners)
            except (OSError, removal.Kept):
                continue
            if opened is None:
                if drop_absent and place.get("found") is None:
                    places.remove(place)
                    self._claimed.clear()  # claimed again, it is noted again
                    changed = True
                continue
            with opened:
                found = removal.identity(opened.stat)
            if found != place.get("found"):
                place.update(self._seal({**place, "found": found}))
                changed = True
        if changed:
            atomic_write_json(self.work_file, places)

    def _work_key(self, create: bool) -> bytes | None:
        """The run's sealing key. One its maker (the run directory's owner) did not write seals nothing."""
        key = read_private(self.secret_path("work.key"))
        try:
            if key is not None and self.secret_path("work.key").stat().st_uid != self.path.stat().st_uid:
                return None
        except OSError:
            return None
        if key is None and create:
            key = secrets.token_hex(32)
            write_private(self.secret_path("work.key"), key)
        return key.encode() if key else None

    def _seal(self, place: dict[str, Any], key: bytes | None = None) -> dict[str, Any]:
        """The place with a seal over everything it records, made with the run's private key: an edited path or
        identity in work.json no longer matches it."""
        unsealed = {k: v for k, v in place.items() if k != "seal"}
        key = key or self._work_key(create=True)
        return {**unsealed, "seal": hmac.new(key, json.dumps(unsealed, sort_keys=True).encode(), "sha256").hexdigest()}

    def work_sealed(self, place: dict[str, Any]) -> bool:
        key = self._work_key(create=False)
        return key is not None and isinstance(place.get("seal"), str) and \
            hmac.compare_digest(self._seal(place, key)["seal"], place["seal"])

    def forget_work(self, paths: set[str]) -> None:
        """Drops places from work.json once removed (or once another run created them anew): a later run may create
        the same path, and this run must not remove that."""
        places = self.work_places()
        if any(p["path"] in paths for p in places):
            atomic_write_json(self.work_file, [p for p in places if p["path"] not in paths])
        self._claimed.clear()

    # ---- records -------------------------------------------------------------------------------

    def record_path(self, suite: str, case_id: str) -> Path:
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._=+-]*", case_id):
            raise ValueError(f"case id {case_id!r} is not path-safe")
        return self.path / "records" / suite / f"{case_id}.json"

    def has_record(self, suite: str, case_id: str) -> bool:
        return self.record_path(suite, case_id).is_file()

    def write_record(self, record: Record, own_extra: Any = None) -> None:
        """``own_extra``: the TypedDict of the keys of ``extra`` its suite alone writes and reads (a suite's
        ``extra_fields``); every other key is one of RecordExtra's."""
        if impossible := impossible_figures(record):
            raise ValueError(f"{record.suite} {record.case_id}: figures that cannot be: {'; '.join(impossible)}")
        shared = {k: v for k, v in record.extra.items() if not own_extra or k not in _type_hints(own_extra)}
        _written_as_declared(shared, RecordExtra, "record's extra")
        if own_extra:
            _written_as_declared({k: v for k, v in record.extra.items() if k not in shared}, own_extra, "record's extra")
        atomic_write_json(self.record_path(record.suite, record.case_id), dataclasses.asdict(record))

    def _record_files(self, suite: str | None = None) -> list[Path]:
        # Not the .tmp-* files of a write a kill -9 cut short (pathlib's * matches dot files): resume removes them.
        base = self.path / "records"
        return _regular_files((base / suite).glob("[!.]*.json") if suite else base.glob("*/[!.]*.json"))

    def records(self, suite: str | None = None) -> list[Record]:
        """The finished cases; a corrupt record file ends with a CorruptRunFile naming it."""
        return sorted((self._record(f) for f in self._record_files(suite)), key=lambda r: (r.suite, r.started_epoch_s))

    def _record(self, path: Path) -> Record:
        return self._read_once(path, self._parse_record)

    def _parse_record(self, path: Path) -> Record:
        data = self._read(path)
        if problem := _shape_problem(data, Record, "record"):
            raise CorruptRunFile(self.path, path, problem)
        if problem := next(filter(None, (figure_problem(k, v) for k, v in data["metrics"].items())), None) or \
                shape_problem(data.get("extra", {}), RecordExtra, "extra"):
            raise DamagedRecord(self.path, path, problem)
        fields = {f.name for f in dataclasses.fields(Record)}
        return Record(**{k: v for k, v in data.items() if k in fields})

    def _read_once(self, path: Path, parse: Callable[[Path], T]) -> T:
        try:
            st = path.stat()
        except FileNotFoundError:
            return parse(path)  # says what is missing, as it would have
        seen = (st.st_ino, st.st_size, st.st_mtime_ns)
        if (known := self._read_files.get(path)) is not None and known[0] == seen:
            return known[1]
        value = parse(path)
        self._read_files[path] = (seen, value)
        return value

    def set_aside_corrupt_files(self) -> list[CorruptRunFile]:
        """Renames every corrupt record and findings file to NAME.json.corrupt, so that resume measures (or checks)
        again what it held instead of trusting or losing it; returns what it set aside."""
        found = []
        for path in self._record_files() + self._findings_files():
            try:
                self._record(path) if path.parent.name != "findings" else self._findings(path)
            except CorruptRunFile as corrupt:
                path.rename(path.with_name(path.name + SET_ASIDE_SUFFIX))
                found.append(corrupt)
        return found

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

    @property
    def verdict_path(self) -> Path:
        return self.path / "verdict.json"

    @property
    def accept_path(self) -> Path:
        return self.path / "accept.json"

    def write_json(self, path: Path, data: Any) -> None:
        atomic_write_json(path, data)

    def read_json(self, path: Path) -> Any:
        """A run file written by write_json, or None when there is none (or something else than a file, which is
        said); a corrupt one ends with CorruptRunFile."""
        if not os.path.lexists(path):
            return None
        if not is_regular(path):
            skipped(path)
            return None
        if path == self.verdict_path:  # checked as declared, whichever way it is asked for
            return self._read_once(path, self._parse_verdicts)
        return self._read(path)

    def verdicts(self) -> list[VerdictEntry]:
        """verdict.json: each suite's verdict; [] when the run has none yet. One of another shape is a DamagedRecord
        naming the field."""
        return self.read_json(self.verdict_path) or []

    def _parse_verdicts(self, path: Path) -> list[VerdictEntry]:
        data = self._read(path)
        if problem := shape_problem(data, list[VerdictEntry], "verdict"):
            raise DamagedRecord(self.path, path, problem)
        return data

    def write_verdicts(self, verdicts: list[dict[str, Any]]) -> None:
        _written_as_declared(verdicts, list[VerdictEntry], "verdict")
        atomic_write_json(self.verdict_path, verdicts)

    @property
    def tags_path(self) -> Path:
        return self.path / "tags.json"

    def tags(self) -> dict[str, str]:
        data = self.read_json(self.tags_path) or {}
        if not isinstance(data, dict) or not all(isinstance(v, str) and TAG.fullmatch(f"{k}={v}") for k, v in data.items()):
            raise CorruptRunFile(self.path, self.tags_path, "is not an object of tag names and text values")
        return data

    def set_tags(self, changes: dict[str, str]) -> dict[str, str]:
        """Adds or changes tags; an empty value removes the tag."""
        tags = {k: v for k, v in {**self.tags(), **changes}.items() if v}
        self.write_json(self.tags_path, tags)
        return tags

    def write_findings(self, suite: str, findings: list[Finding]) -> None:
        atomic_write_json(self.path / "findings" / f"{suite}.json", [dataclasses.asdict(f) for f in findings])

    def _findings_files(self) -> list[Path]:
        return _regular_files((self.path / "findings").glob("[!.]*.json"))

    def findings(self) -> dict[str, list[Finding]]:
        """Each suite's correctness verdicts; a corrupt findings file ends with a CorruptRunFile naming it."""
        return {path.stem: self._findings(path) for path in self._findings_files()}

    def _findings(self, path: Path) -> list[Finding]:
        return list(self._read_once(path, self._parse_findings))

    def _parse_findings(self, path: Path) -> list[Finding]:
        data = self._read(path)
        if not isinstance(data, list):
            raise CorruptRunFile(self.path, path, f"holds {json_kind(data)}, not a list of checks")
        for item in data:
            if problem := _shape_problem(item, Finding, "check"):
                raise CorruptRunFile(self.path, path, problem)
        return [Finding(**item) for item in data]

    def check_readable(self) -> None:
        """Reads every file a report needs, so that a corrupt one ends the command before anything is written."""
        self.meta
        self.records()
        self.findings()


def parse_tags(words: list[str]) -> dict[str, str]:
    """["firmware=2.1", "array=raid10"] -> {"firmware": "2.1", "array": "raid10"}."""
    tags = {}
    for word in words:
        if not (m := TAG.fullmatch(word)):
            raise UserError(f"tag {word!r} must be NAME=VALUE: a name of letters, digits, '.', '_' or '-', and a "
                            "value of at most 200 characters on one line (an empty value removes the tag).")
        tags[m.group(1)] = m.group(2)
    return tags


def _regular_files(paths: Iterator[Path]) -> list[Path]:
    """The regular files among ``paths``, sorted; each other thing (a FIFO, a link) is said once and skipped."""
    found = []
    for path in paths:
        if is_regular(path):
            found.append(path)
        else:
            skipped(path)
    return sorted(found)


def list_runs(runs_dir: str | Path) -> list[Run]:
    base = Path(runs_dir)
    try:
        if not base.is_dir():
            return []
        runs = []
        for p in base.iterdir():
            if is_regular(p / "run.json"):
                runs.append(Run(p))
            elif os.path.lexists(p / "run.json"):
                skipped(p / "run.json", what="not listed")
    except (OSError, ValueError) as exc:
        raise UserError(f"cannot read the runs directory {base}: {getattr(exc, 'strerror', None) or exc}.") from None
    return sorted(runs, key=lambda r: r.path.name)


# Resolving a dataclass's annotations compiles each of them again: once per class, not once per record file.
_type_hints = functools.cache(typing.get_type_hints)


def _shape_problem(data: Any, cls: type, what: str) -> str | None:
    """What keeps ``data`` (parsed JSON) from being a ``cls``: not an object, a required field missing, or a
    field of the wrong JSON type. None when it fits."""
    if not isinstance(data, dict):
        return f"holds {json_kind(data)} where a {what} (a JSON object) belongs"
    hints = _type_hints(cls)
    for f in dataclasses.fields(cls):
        if f.name not in data:
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                return f"has a {what} without '{f.name}'"
            continue
        expected = hints[f.name]
        origin = typing.get_origin(expected)
        if expected is Any:
            continue
        if origin is not None and origin not in (typing.Union, types.UnionType):
            expected = origin
        value = data[f.name]
        if expected is float:
            expected = (int, float)
        if isinstance(value, bool) and expected is not bool:
            fits = False
        else:
            fits = isinstance(value, expected)
        if not fits:
            return f"has a {what} whose '{f.name}' is {json_kind(value)}"
    return None
