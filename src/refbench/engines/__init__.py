"""The real engines refbench drives: fio (I/O), PostgreSQL and DuckDB (SQL)."""
