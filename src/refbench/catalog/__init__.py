"""The runs catalog: an SQLite file in the runs directory, built from the run directories and kept up to date
incrementally. The run directories stay the source of truth: delete the catalog and the next command rebuilds it.

SQLite rather than DuckDB: a run being indexed while `refbench serve` reads the catalog is two processes on one
file, which SQLite's WAL mode allows (readers never wait for the writer) and DuckDB does not (one process holds a
database file for writing). The catalog's queries are small lookups and filters, where SQLite is at home.

A run is indexed again when its fingerprint changes: the name, size and modification time of every JSON file the
catalog reads from it (run.json, verdict.json, tags.json, records, findings), or when a run marked running has lost
its lock (killed). A run directory that cannot be read is listed as corrupt, with the sentence that says why,
and without figures; the others are indexed.

The catalog is a cache, so no SQLite error from it may hide a run: a damaged file (a bad page anywhere, not only a
bad header) is made again from the run directories in its place, and one that cannot be written (locked, read-only,
immutable, a full disk) gives way to a catalog made elsewhere (in memory for a command, in `refbench serve`'s own
file for a server); either is said once (`read_catalog`, `rebuilt`).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sqlite3
import threading
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, TypeVar

from refbench.errors import UserError
from refbench.fileio import changeable_by_others
from refbench.estimate import Spread, log_spread, pooled
from refbench.figures import configuration, figure_cases, figures, repeat_groups
from refbench.options import TAG
from refbench.runstore import CorruptRunFile, DamagedRecord, Run, list_runs
from refbench.suites import DamagedFigure, check_figures, suite_figures

CATALOG_FILE = "catalog.sqlite"
MEMORY = ":memory:"
# A writer holds the catalog for one run's transaction (0.02 s); waiting longer than this means something else
# holds it, and the run directories answer instead.
BUSY_TIMEOUT_S = 5.0
# Each tag filter is one more condition in one SQL expression: SQLite refuses an expression deeper than 1,000, and
# no one compares runs on more than a few tags at once.
MAX_TAG_FILTERS = 20
# What SQLite says of a file whose pages or header are not a database's: made again from the run directories.
DAMAGED = (sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB)
SCHEMA_VERSION = 6  # 6: a case measured once is named without its repeat number, as a repeated one is
# A figure's spread is the lowest and highest of the repeats behind it, how many there were, and the standard
# deviation of their logarithms (this host's run-to-run spread, which compare tests a figure measured once a side
# against); NULL when it was measured once. The seconds of one measurement are not repeats. "disturbed": what
# neighbours took while it was measured (refbench.host.contention), NULL when nothing: such a figure gives no spread.
SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    run TEXT PRIMARY KEY, fingerprint TEXT NOT NULL, name TEXT, status TEXT, problem TEXT,
    profile TEXT, host TEXT, started_utc TEXT, ended_utc TEXT, suites TEXT, tags TEXT, records INTEGER, plan TEXT);
CREATE TABLE IF NOT EXISTS headlines (
    run TEXT NOT NULL, suite TEXT NOT NULL, label TEXT, value REAL, unit TEXT, case_id TEXT, metric TEXT, note TEXT,
    low REAL, high REAL, n INTEGER, unrated TEXT);
CREATE TABLE IF NOT EXISTS figures (
    run TEXT NOT NULL, suite TEXT NOT NULL, case_id TEXT NOT NULL, metric TEXT NOT NULL, value REAL,
    low REAL, high REAL, n INTEGER, log_sd REAL, disturbed TEXT);
CREATE INDEX IF NOT EXISTS headlines_run ON headlines (run);
CREATE INDEX IF NOT EXISTS headlines_metric ON headlines (suite, metric);
CREATE INDEX IF NOT EXISTS figures_run ON figures (run);
CREATE INDEX IF NOT EXISTS figures_metric ON figures (suite, case_id, metric);
CREATE INDEX IF NOT EXISTS figures_suite_metric ON figures (suite, metric);
"""
RUN_COLUMNS = ("run", "name", "status", "problem", "profile", "host", "started_utc", "ended_utc", "suites",
               "tags", "records")
HEADLINE_COLUMNS = ("suite", "label", "value", "unit", "case", "metric", "note", "low", "high", "n", "unrated")


class Catalog:
    def __init__(self, runs_dir: str | Path, database: Path | str | None = None):
        """``database``: where to keep the catalog instead of the runs directory (a file of refbench serve's own, or
        MEMORY). Any SQLite error is the caller's: `read_catalog` and `rebuilt` turn it into a catalog made again
        from the run directories."""
        self.runs_dir = Path(runs_dir)
        self.path = database or self.runs_dir / CATALOG_FILE
        if database is None and changeable_by_others(self.runs_dir):
            # SQLite opens its file, journal and WAL following links: in a directory another user may change, one of
            # them could point where that user chose, and this user's writes would go there.
            raise sqlite3.OperationalError(f"{self.runs_dir} may be changed by another user, and refbench keeps no "
                                           "database there")
        # A file this user may not write is opened read-only by SQLite itself: read as it is while nothing needs
        # indexing, and an error ("attempt to write a readonly database") the moment something does.
        self.db = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_S)
        try:
            self.db.execute("PRAGMA journal_mode=WAL")
            # A commit is not fsynced: what a crash loses, the next update indexes again from the run directories.
            self.db.execute("PRAGMA synchronous=NORMAL")
            if self.db.execute("PRAGMA user_version").fetchone()[0] != SCHEMA_VERSION:
                # An older layout is rebuilt from the run directories, which hold everything.
                for table in ("runs", "headlines", "figures"):
                    self.db.execute(f"DROP TABLE IF EXISTS {table}")
                self.db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            self.db.executescript(SCHEMA)
        except BaseException:
            self.db.close()
            raise

    def __enter__(self) -> "Catalog":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        self.db.close()

    def update(self, warn: Callable[[str], None] = lambda message: None, loaded: Sequence[Run] = ()) -> int:
        """Indexes the runs that are new or changed and forgets the ones whose directories are gone; returns how
        many were indexed. ``warn`` hears one sentence per run that could not be read; ``loaded``: runs the caller
        has read already, indexed from what they hold rather than read again."""
        reuse = {run.path.resolve(): run for run in loaded}
        known = {run: (fingerprint, status) for run, fingerprint, status in
                 self.db.execute("SELECT run, fingerprint, status FROM runs")}
        present = set()
        indexed = 0
        for run in list_runs(self.runs_dir):
            run = reuse.get(run.path.resolve(), run)
            present.add(run.path.name)
            fingerprint = _fingerprint(run.path)
            before, status = known.get(run.path.name, (None, None))
            # A run killed while running changes no file: its free lock is what says it was interrupted.
            if before != fingerprint or (status == "running" and not run.in_use()):
                self.index(run, fingerprint, warn)
                indexed += 1
        with self.db:
            for gone in set(known) - present:
                self._forget(gone)
        return indexed

    def index(self, run: Run, fingerprint: str | None = None, warn: Callable[[str], None] = lambda message: None) -> None:
        fingerprint = fingerprint or _fingerprint(run.path)
        try:
            row, headlines, figures = _read_run(run)
        except (CorruptRunFile, DamagedFigure, OSError, ValueError, KeyError, TypeError) as exc:
            where = getattr(exc, "where", "its files")
            warn(f"{run.path}: {exc}" if isinstance(exc, DamagedFigure) else str(exc))
            status = f"{'damaged' if isinstance(exc, (DamagedRecord, DamagedFigure)) else 'corrupt'}: {where}"
            row, headlines, figures = {"status": status, "problem": str(exc), "suites": "[]", "tags": "{}"}, [], []
        with self.db:
            self._forget(run.path.name)
            self.db.execute("INSERT INTO runs (run, fingerprint, name, status, problem, profile, host, started_utc, "
                            "ended_utc, suites, tags, records, plan) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)", (
                                run.path.name, fingerprint, row.get("name"), row["status"],
                                row.get("problem"), row.get("profile"), row.get("host"), row.get("started_utc"),
                                row.get("ended_utc"), row["suites"], row["tags"], row.get("records"), row.get("plan")))
            self.db.executemany("INSERT INTO headlines VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                                [(run.path.name, *h) for h in headlines])
            self.db.executemany("INSERT INTO figures VALUES (?,?,?,?,?,?,?,?,?,?)", [(run.path.name, *f) for f in figures])

    def _forget(self, run: str) -> None:
        for table in ("runs", "headlines", "figures"):
            self.db.execute(f"DELETE FROM {table} WHERE run = ?", (run,))

    def runs(self, suite: str | None = None, host: str | None = None, tags: dict[str, str] | None = None,
             since: str | None = None, limit: int | None = None) -> list[dict[str, Any]]:
        """The runs, newest first, with their headline figures; filtered by suite, host, tags and start date."""
        conditions, args = run_filters(suite, host, tags, since)
        where = f"WHERE {conditions}" if conditions else ""
        query = f"SELECT {', '.join(RUN_COLUMNS)} FROM runs {where} ORDER BY started_utc DESC, run DESC"
        if limit:
            query += f" LIMIT {int(limit)}"
        out = [self._run_dict(row) for row in self.db.execute(query, args)]
        by_run = {r["run"]: r for r in out}
        for r in out:
            r["headlines"] = []
        if by_run:
            rows = self.db.execute(
                f"SELECT run, {', '.join(c if c != 'case' else 'case_id' for c in HEADLINE_COLUMNS)} FROM headlines "
                f"WHERE run IN (SELECT run FROM runs {where}) ORDER BY rowid", args)
            for run, *values in rows:
                if run in by_run:
                    by_run[run]["headlines"].append(dict(zip(HEADLINE_COLUMNS, values)))
        return out

    def _run_dict(self, row: tuple[Any, ...]) -> dict[str, Any]:
        item = dict(zip(RUN_COLUMNS, row))
        item["suites"], item["tags"] = json.loads(item["suites"]), json.loads(item["tags"])
        item["path"] = str(self.runs_dir / item["run"])  # the directory's own place, even when it was copied or moved
        return item

    def spreads(self, host: str | None, profile: str | None, keys: list[tuple[str, str, str]],
                configurations: set[str], newest: int = 20) -> dict[tuple[str, str, str], dict[str, Spread]]:
        """(suite, case, metric) -> this host's measured spreads of the figure, from its newest ``newest`` runs of
        ``profile``: "runs", the spread of the figure from run to run among runs of one of ``configurations`` (a
        run's value is the mean of its repeats; at least two runs of a configuration); "repeats", the spread of
        the repeats of the same case within runs, else of the same figure of the suite's other cases (a like
        configuration)."""
        out: dict[tuple[str, str, str], dict[str, Spread]] = {}
        query = ("SELECT x.case_id, x.value, x.log_sd, x.n, r.run, r.plan, r.started_utc FROM figures x JOIN runs r USING (run) "
                 # A run its neighbours disturbed spreads by their load, not by this host's own noise.
                 "WHERE r.host IS ? AND r.profile IS ? AND x.suite = ? AND x.metric = ? AND x.disturbed IS NULL "
                 "ORDER BY r.started_utc DESC, r.run DESC")
        plans: dict[str, str] = {}
        # One query per figure name, its rows grouped by case: a comparison asks for every figure of two runs.
        by_case: dict[tuple[str, str], dict[str, list[tuple[Any, ...]]]] = {}
        repeated_of: dict[tuple[str, str], list[tuple[Any, ...]]] = {}
        for suite, metric in dict.fromkeys((suite, metric) for suite, _, metric in keys):
            found = list(self.db.execute(query, (host, profile, suite, metric)))
            recent = set(list(dict.fromkeys(row[4] for row in found))[:newest])
            cases = by_case[(suite, metric)] = {}
            for row in found:
                if row[4] in recent:
                    cases.setdefault(row[0], []).append(row)
            repeated_of[(suite, metric)] = [row for row in found if row[4] in recent and row[3] and row[3] > 1
                                            and row[2] is not None]
        for suite, case, metric in keys:
            mine = by_case[(suite, metric)].get(case, [])
            spreads = {}
            by_configuration: dict[str, list[float]] = {}
            dates: dict[str, list[str]] = {}
            for _, value, _, _, run, plan, started in mine:
                if value and value > 0:
                    if run not in plans:
                        plans[run] = configuration(json.loads(plan or "{}"))
                    if plans[run] in configurations:
                        by_configuration.setdefault(plans[run], []).append(value)
                        dates.setdefault(plans[run], []).append(started or "")
            groups = [s for values in by_configuration.values() if (s := log_spread(values)) is not None]
            if (spread := pooled(groups)) is not None and spread[1] >= 2 and spread[0] > 0:
                runs = sum(d + 1 for _, d in groups)
                when = sorted(d for c, values in by_configuration.items() if len(values) > 1 for d in dates[c] if d)
                spreads["runs"] = Spread(spread[0], spread[1], f"{runs} runs of {'this configuration' if len(groups) == 1 else 'these configurations'} on this host"
                                         + (f", {_span(when[0], when[-1])}" if when else ""))
            repeated = repeated_of[(suite, metric)]
            same = [row for row in mine if row[3] and row[3] > 1 and row[2] is not None]
            chosen, like = (same, "") if same else (repeated, f" of other {suite} cases")
            runs_used = list(dict.fromkeys(row[4] for row in chosen))[:5]
            parts = [(sd, n - 1) for _, _, sd, n, run, _, _ in chosen if run in runs_used]
            if (spread := pooled(parts)) is not None and spread[0] > 0:
                repeats = sum(d + 1 for _, d in parts)
                spreads["repeats"] = Spread(spread[0], spread[1], f"{repeats} repeats{like} in {len(runs_used)} "
                                            f"run{'s' if len(runs_used) > 1 else ''} on this host")
            if spreads:
                out[(suite, case, metric)] = spreads
        return out

    def values(self, sql: str, args: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        """Rows of a query over the catalog's tables (history.py's two kinds of figure)."""
        return list(self.db.execute(sql, args))


def _span(first: str, last: str) -> str:
    """Two ISO UTC times as a span a reader takes in: "2026-11-29 17:36–18:20 UTC", a date only where it differs."""
    a, b = first[:16].replace("T", " "), last[:16].replace("T", " ")
    if a == b:
        return f"{a} UTC"
    return f"{a}–{b[11:] if a[:10] == b[:10] else b} UTC"


def index_run(run: Run, console: Any) -> None:
    """Adds a finished run to its runs directory's catalog. The run is complete without it (the next catalog
    update indexes it), so a catalog that cannot be written is a warning, not a failed run."""
    try:
        with Catalog(run.path.parent) as catalog:
            catalog.index(run, warn=lambda message: console.print(f"warning: {message}", markup=False, soft_wrap=True))
    except (sqlite3.Error, OSError) as exc:
        console.print(f"warning: the runs catalog {run.path.parent / CATALOG_FILE} was not updated ({exc}); "
                      "'refbench runs' updates it.", markup=False, soft_wrap=True)


T = TypeVar("T")


def read_catalog(runs_dir: str | Path, read: Callable[[Catalog], T], say: Callable[[str], None],
                 loaded: Sequence[Run] = ()) -> T:
    """``read(catalog)`` over the runs directory's catalog brought up to date. When SQLite fails anywhere in that
    (damaged pages, locked, read-only, immutable, disk full), over a catalog made again from the run directories,
    which ``say`` is told in one sentence. ``loaded``: as Catalog.update's."""
    runs_dir = Path(runs_dir)
    if not runs_dir.is_dir():  # no runs yet: nothing to catalogue, nothing to say
        with Catalog(runs_dir, MEMORY) as catalog:
            return read(catalog)
    try:
        with Catalog(runs_dir) as catalog:
            catalog.update(loaded=loaded)
            return read(catalog)
    except sqlite3.Error as exc:
        catalog, sentence = rebuilt(runs_dir, runs_dir / CATALOG_FILE, exc)
    say(sentence)
    with catalog:
        return read(catalog)


def rebuilt(runs_dir: Path, failed: Path, problem: sqlite3.Error, fallback: Path | str = MEMORY,
            warn: Callable[[str], None] = lambda message: None) -> tuple[Catalog, str]:
    """A catalog made afresh from the run directories after ``problem`` came from the catalog file ``failed``, and
    the sentence that says what happened: a damaged file is made again in its place; one that cannot be (or that
    failed for another reason: locked, read-only, disk full) is left as it is for a catalog at ``fallback``."""
    if (getattr(problem, "sqlite_errorcode", 0) & 0xFF) in DAMAGED:
        try:
            return _made_afresh(runs_dir, failed, warn), (f"the runs catalog {failed} was damaged ({problem}) and "
                                                          "has been rebuilt from the run directories.")
        except (sqlite3.Error, OSError) as exc:
            problem = exc
    return _made_afresh(runs_dir, fallback, warn), (f"the runs catalog {failed} could not be used ({problem}): the "
                                                    "runs were read from their directories instead.")


def _made_afresh(runs_dir: Path, database: Path | str, warn: Callable[[str], None]) -> Catalog:
    """A catalog at ``database`` made from the run directories. A file is built beside it and renamed over it, so
    that a command or page reading it meanwhile sees the old catalog or the whole new one, never a part."""
    if database == MEMORY:
        return _brought_up_to_date(Catalog(runs_dir, MEMORY), warn)
    building = Path(f"{database}.building-{os.getpid()}-{threading.get_ident()}")
    for left in Path(database).parent.glob(f"{Path(database).name}.building-*"):
        builder = re.fullmatch(r".*\.building-(\d+)-\d+", left.name)
        if builder and not _alive(int(builder.group(1))):  # a rebuild killed halfway
            _remove_database(left)
    try:
        # The last connection folds its WAL into the file as it closes: the file alone is the catalog.
        _brought_up_to_date(Catalog(runs_dir, building), warn).close()
    except BaseException:
        _remove_database(building)
        raise
    # The old file's WAL before the rename: a connection opened between the two would apply it to the new file.
    # The old file itself is replaced, never removed, so that no one opens an empty catalog in the meantime.
    _remove_database(Path(database), keep_file=True)
    os.replace(building, database)
    return Catalog(runs_dir, database)


def _brought_up_to_date(catalog: Catalog, warn: Callable[[str], None]) -> Catalog:
    try:
        catalog.update(warn)
    except BaseException:
        catalog.close()
        raise
    return catalog


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's
        pass
    return True


def _remove_database(path: Path, keep_file: bool = False) -> None:
    for leftover in ([] if keep_file else [path]) + [Path(f"{path}-wal"), Path(f"{path}-shm")]:
        leftover.unlink(missing_ok=True)


def run_filters(suite: str | None, host: str | None, tags: dict[str, str] | None, since: str | None,
             table: str = "runs") -> tuple[str, list[Any]]:
    """The conditions on the runs table (joined by AND, "" for none) and their arguments."""
    where, args = [], []
    if suite:
        where.append(f"EXISTS (SELECT 1 FROM json_each({table}.suites) WHERE value = ?)")
        args.append(suite)
    if host:
        where.append(f"{table}.host = ?")
        args.append(host)
    if len(tags or {}) > MAX_TAG_FILTERS:
        raise UserError(f"{len(tags or {}):,} tag filters are more than the {MAX_TAG_FILTERS} one query takes.")
    for name, value in (tags or {}).items():
        if not TAG.fullmatch(f"{name}={value}"):  # the name goes into a JSON path
            raise UserError(f"tag filter {name}={value} is not NAME=VALUE (letters, digits, '.', '_' or '-' in NAME).")
        where.append(f"json_extract({table}.tags, ?) = ?")
        args += [f'$."{name}"', value]
    if since:
        where.append(f"{table}.started_utc >= ?")
        args.append(since)
    return " AND ".join(where), args


def _read_run(run: Run) -> tuple[dict[str, Any], list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """A run's catalog row, its headline figures and every figure of its records, each with its spread."""

    meta = run.meta
    plan = meta["plan"]
    groups = repeat_groups(run)  # reads every record, so a corrupt one ends here
    for name in run.suites_with_records():  # and a figure its suite computes with that is no number
        check_figures(run.records(name), suite_figures(name))
    found = figures(run, groups)
    run.findings()
    row = {"name": meta.get("name"), "status": run.status(), "profile": plan.get("profile"), "host": meta.get("host"),
           "started_utc": meta.get("started_utc"), "ended_utc": meta.get("ended_utc"),
           "suites": json.dumps(plan.get("suites", [])), "tags": json.dumps(run.tags()),
           "records": sum(map(len, groups.values())), "plan": json.dumps(plan)}
    rows = [(suite, case, metric, f.value, *_spread(f.samples), f.disturbed or None)
            for (suite, case, metric), f in found.items()]
    case_of = figure_cases(run, groups) if not plan.get("hosts") else {}
    headlines = []
    indexed: set[str] = set()
    for v in run.verdicts():
        # A cluster run's figures are its totals on the most nodes (its verdict's first entry per suite), not each node's.
        if v["suite"] in indexed or not v.get("scope", "total").startswith("total"):
            continue
        indexed.add(v["suite"])
        for h in v["headlines"]:
            # The verdict's own range, as every other surface says it; an older verdict.json, whose headlines do
            # not say their repeats: the range of the figure's repeats.
            figure = found.get((v["suite"], case_of.get((v["suite"], h["case"]), h["case"]), h["metric"]))
            spread = (h.get("low"), h.get("high"), h["repeats"] or None) if "repeats" in h else \
                _spread(figure.samples if figure else [])[:3]
            headlines.append((v["suite"], h["label"], h["value"], h["unit"], h["case"], h["metric"], h.get("note", ""),
                              *spread, h.get("unrated") or ""))
    return row, headlines, rows


def _spread(samples: list[float]) -> tuple[float | None, float | None, int | None, float | None]:
    """(lowest, highest, how many, sd of the logarithms) of a figure's repeats; None each when measured once."""
    if len(samples) < 2:
        return None, None, None, None
    return min(samples), max(samples), len(samples), (log_spread(samples) or (None,))[0]


def _fingerprint(run_path: Path) -> str:
    """Name, size and modification time of every file the catalog reads from a run: a file edited in place changes
    its own time, not its directory's."""
    stamps = []
    for directory in (run_path, run_path / "findings", *sorted((run_path / "records").glob("*/"))):
        try:
            with os.scandir(directory) as entries:
                for entry in entries:
                    if entry.name.endswith(".json") and entry.is_file():
                        st = entry.stat()
                        stamps.append(f"{directory.name}/{entry.name}:{st.st_size}:{st.st_mtime_ns}")
        except FileNotFoundError:
            continue
    return hashlib.sha1("\n".join(sorted(stamps)).encode()).hexdigest()


def since_utc(text: str | None) -> str | None:
    """A --since filter as the catalog compares it (ISO 8601 UTC): a date, a date and time, or Nd / Nh ago."""
    if text is None:
        return None
    if m := re.fullmatch(r"(\d+)([dh])", text.strip()):
        try:
            ago = timedelta(days=int(m.group(1))) if m.group(2) == "d" else timedelta(hours=int(m.group(1)))
            return (datetime.now(timezone.utc) - ago).strftime("%Y-%m-%dT%H:%M:%SZ")
        except OverflowError:
            raise UserError(f"since {text!r} reaches back before the year 1.") from None
    for form in ("%Y-%m-%d", "%Y-%m-%dT%H:%M", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%dT%H:%M:%SZ"):
        try:
            return datetime.strptime(text.strip(), form).strftime("%Y-%m-%dT%H:%M:%SZ")
        except ValueError:
            continue
    raise UserError(f"since {text!r} must be a date (2026-11-01), a UTC date and time (2026-11-01T08:00) or an age "
                    "(7d, 12h).")
