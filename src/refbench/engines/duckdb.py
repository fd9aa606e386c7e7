"""DuckDB as refbench's column store: an in-process database in one file (placed on the storage under test),
loaded from the generated CSV files. "Cold" means the database closed and opened again: its buffer cache starts
empty, and the OS page cache is dropped separately by the caller."""

from __future__ import annotations

from pathlib import Path


class DuckDb:
    def __init__(self, path: Path, memory_limit: str | None = None):
        self.path = Path(path)
        self.settings = {"memory_limit": memory_limit} if memory_limit else {}
        self.conn = None

    def open(self) -> "DuckDb":
        import duckdb

        self.close()
        self.conn = duckdb.connect(str(self.path), config={k: str(v) for k, v in self.settings.items()})
        return self

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None

    def restart(self) -> None:
        self.open()

    def execute(self, sql: str) -> list[tuple]:
        return self.conn.execute(sql).fetchall()

    def load_csv(self, table: str, csv: Path) -> int:
        self.conn.execute(f"COPY {table} FROM '{csv}' (FORMAT csv, HEADER true)")
        return self.conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]

    def version(self) -> str:
        return self.conn.execute("SELECT version()").fetchone()[0]
