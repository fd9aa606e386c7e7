"""The runs catalog: an SQLite file in the runs directory, built from the run directories and kept up to date
incrementally. The run directories stay the source of truth: delete the catalog and the next command rebuilds it.

SQLite rather than DuckDB: a run being indexed while `refbench serve` reads the catalog is two processes on one
file, which SQLite's WAL mode allows (readers never wait for the writer) and DuckDB does not (one process holds a
database file for writing). The catalog's queries are small lookups and filters, where SQLite is at home.

A run is indexed again when its fingerprint changes: the modification times of run.json, verdict.json, tags.json and
its records directory. A run directory that cannot be read is skipped with one warning; the others are indexed.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

from refbench.runstore import CorruptRunFile, Run, list_runs

CATALOG_FILE = "catalog.sqlite"
SCHEMA_VERSION = 1
SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    run TEXT PRIMARY KEY, path TEXT NOT NULL, fingerprint TEXT NOT NULL, name TEXT, status TEXT, profile TEXT,
    host TEXT, started_utc TEXT, ended_utc TEXT, suites TEXT, tags TEXT, plan TEXT);
CREATE TABLE IF NOT EXISTS headlines (
    run TEXT NOT NULL, suite TEXT NOT NULL, label TEXT, value REAL, unit TEXT, case_id TEXT, metric TEXT);
CREATE TABLE IF NOT EXISTS figures (
    run TEXT NOT NULL, suite TEXT NOT NULL, case_id TEXT NOT NULL, metric TEXT NOT NULL, value REAL);
CREATE INDEX IF NOT EXISTS headlines_run ON headlines (run);
CREATE INDEX IF NOT EXISTS figures_run ON figures (run);
CREATE INDEX IF NOT EXISTS figures_metric ON figures (suite, metric);
"""
TAGS_FILE = "tags.json"


class Catalog:
    def __init__(self, runs_dir: str | Path):
        self.runs_dir = Path(runs_dir)
        self.path = self.runs_dir / CATALOG_FILE
        self.db = sqlite3.connect(self.path, timeout=30)
        self.db.execute("PRAGMA journal_mode=WAL")
        if self.db.execute("PRAGMA user_version").fetchone()[0] != SCHEMA_VERSION:
            # An older layout is rebuilt from the run directories, which hold everything.
            for table in ("runs", "headlines", "figures"):
                self.db.execute(f"DROP TABLE IF EXISTS {table}")
            self.db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        self.db.executescript(SCHEMA)

    def close(self) -> None:
        self.db.close()

    def update(self, warn: Callable[[str], None] = lambda message: None) -> int:
        """Indexes the runs that are new or changed and forgets the ones whose directories are gone; returns how
        many were indexed."""
        known = dict(self.db.execute("SELECT run, fingerprint FROM runs"))
        present = set()
        indexed = 0
        for run in list_runs(self.runs_dir):
            present.add(run.path.name)
            fingerprint = _fingerprint(run.path)
            if known.get(run.path.name) == fingerprint:
                continue
            try:
                self._index(run, fingerprint)
                indexed += 1
            except (CorruptRunFile, OSError, ValueError, KeyError, TypeError) as exc:
                warn(f"catalog: skipped {run.path.name}: {exc}")
                with self.db:  # what it held before is no longer what the directory says
                    self._forget(run.path.name)
        with self.db:
            for gone in set(known) - present:
                self._forget(gone)
        return indexed

    def _index(self, run: Run, fingerprint: str) -> None:
        meta = run.meta
        plan = meta["plan"]
        verdicts = run.read_json(run.verdict_path) or []
        tags = read_tags(run.path)
        rows = [(run.path.name, r.suite, r.case_id, metric, float(value)) for r in run.records()
                for metric, value in r.metrics.items() if isinstance(value, (int, float)) and not isinstance(value, bool)]
        with self.db:
            self._forget(run.path.name)
            self.db.execute("INSERT INTO runs VALUES (?,?,?,?,?,?,?,?,?,?,?,?)", (
                run.path.name, str(run.path), fingerprint, meta.get("name"), run.status(), plan.get("profile"),
                meta.get("host"), meta.get("started_utc"), meta.get("ended_utc"), json.dumps(plan.get("suites", [])),
                json.dumps(tags), json.dumps(plan)))
            self.db.executemany("INSERT INTO headlines VALUES (?,?,?,?,?,?,?)", [
                (run.path.name, v["suite"], h["label"], h["value"], h["unit"], h["case"], h["metric"])
                for v in verdicts for h in v["headlines"]])
            self.db.executemany("INSERT INTO figures VALUES (?,?,?,?,?)", rows)

    def _forget(self, run: str) -> None:
        for table in ("runs", "headlines", "figures"):
            self.db.execute(f"DELETE FROM {table} WHERE run = ?", (run,))

    def runs(self, suite: str | None = None, host: str | None = None, tags: dict[str, str] | None = None,
             since: str | None = None) -> list[dict[str, Any]]:
        """The runs, newest first, with their headline figures; filtered by suite, host, tags and start date."""
        query, args = "SELECT run, path, name, status, profile, host, started_utc, ended_utc, suites, tags FROM runs", []
        where = []
        if host:
            where.append("host = ?")
            args.append(host)
        if since:
            where.append("started_utc >= ?")
            args.append(since)
        if where:
            query += " WHERE " + " AND ".join(where)
        out = []
        for row in self.db.execute(query + " ORDER BY started_utc DESC, run DESC", args):
            item = dict(zip(("run", "path", "name", "status", "profile", "host", "started_utc", "ended_utc"), row[:8]))
            item["suites"], item["tags"] = json.loads(row[8]), json.loads(row[9])
            if suite and suite not in item["suites"]:
                continue
            if tags and any(item["tags"].get(k) != v for k, v in tags.items()):
                continue
            item["headlines"] = [dict(zip(("suite", "label", "value", "unit", "case", "metric"), h)) for h in self.db.execute(
                "SELECT suite, label, value, unit, case_id, metric FROM headlines WHERE run = ?", (item["run"],))]
            out.append(item)
        return out


def read_tags(run_path: Path) -> dict[str, str]:
    path = run_path / TAGS_FILE
    if not path.exists():
        return {}
    data = json.loads(path.read_text())
    if not isinstance(data, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in data.items()):
        raise ValueError(f"{path} is not an object of tag names and values")
    return data


def _fingerprint(run_path: Path) -> str:
    stamps = []
    for name in ("run.json", "verdict.json", TAGS_FILE, "records"):
        try:
            stamps.append(str((run_path / name).stat().st_mtime_ns))
        except FileNotFoundError:
            stamps.append("-")
    records = run_path / "records"
    if records.is_dir():  # a record added to an existing suite changes that suite's directory, not records/
        stamps += [str(p.stat().st_mtime_ns) for p in sorted(records.iterdir()) if p.is_dir()]
    return ":".join(stamps)
