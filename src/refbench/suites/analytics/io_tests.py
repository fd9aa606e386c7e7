"""The seven I/O tests: passes over large files, copies, appends, imports, exports, subsets and indexed reads —
the storage side of the workload, moving data between DATA and WORK in 64 KiB buffers as SAS's BUFSIZE=64K
does in the mixed-analytics paper."""

from __future__ import annotations

import os
import random
import zlib
from collections.abc import Iterator

from refbench.host.pagecache import evict
from refbench.suites.analytics.catalog import JobContext, analytics_test

SALES, SALES_CSV, CUSTOMERS = "sales.parquet", "sales.csv", "customers.parquet"
BUFFER = 64 * 1024
PLAIN_WHY = "plain reads and writes in 64 KiB buffers: the I/O itself is the work, no engine in between"
DUCKDB_WHY = "DuckDB: reads and writes CSV and Parquet in parallel, as an analytics engine does on import and export"


def _blocks(path) -> Iterator[memoryview]:
    """The file in 64 KiB reads; each block is valid until the next one is read."""
    buffer = bytearray(BUFFER)
    view = memoryview(buffer)
    with open(path, "rb", buffering=0) as f:
        while n := f.readinto(buffer):
            yield view[:n]


def _copy(source, target) -> tuple[int, int]:
    """Copies in 64 KiB buffers; returns (bytes, crc32 of them)."""
    size = crc = 0
    with open(target, "wb", buffering=0) as dst:
        for block in _blocks(source):
            dst.write(block)
            crc = zlib.crc32(block, crc)
            size += len(block)
    return size, crc


def _crc(path) -> int:
    crc = 0
    for block in _blocks(path):
        crc = zlib.crc32(block, crc)
    return crc


def _lines(path) -> int:
    # A block is the start of the read buffer: count in the buffer itself rather than copy the block to bytes.
    return sum(block.obj.count(b"\n", 0, len(block)) for block in _blocks(path))


@analytics_test("io", "polars", "DATA step pass over a flat file",
                "Polars' streaming engine: reads the CSV, derives columns and writes the result without holding the file",
                writes=("WORK",), threaded=True, inputs=(SALES_CSV,))
def data_step_pass(ctx: JobContext) -> None:
    """Reads the flat file, derives amount, year and a price band, and writes a new data set to WORK."""
    import polars as pl

    out = ctx.work / "sales_step.parquet"
    (pl.scan_csv(ctx.data / SALES_CSV)
     .with_columns(amount=pl.col("price") * pl.col("quantity") * (1 - pl.col("discount")),
                   year=pl.col("day").str.slice(0, 4).cast(pl.Int32),
                   band=pl.when(pl.col("price") < 100).then(pl.lit("low")).when(pl.col("price") < 500)
                   .then(pl.lit("mid")).otherwise(pl.lit("high")))
     .sink_parquet(out))
    ctx.written(out)
    rows = pl.scan_parquet(out).select(pl.len()).collect().item()
    ctx.check("every line became a row", rows == ctx.rows, f"{rows:,} of {ctx.rows:,}")


@analytics_test("io", "python", "PROC COPY from DATA to WORK", PLAIN_WHY, writes=("WORK",),
                inputs=(SALES, SALES_CSV, CUSTOMERS))
def copy_to_work(ctx: JobContext) -> None:
    """Copies the permanent data sets to WORK, then reads the copies back from storage to verify them."""
    copies = []
    for name in (SALES, SALES_CSV, CUSTOMERS):
        size, crc = _copy(ctx.data / name, ctx.work / name)
        copies.append((ctx.work / name, size, crc))
    ctx.written(*(c[0] for c in copies))
    evict([c[0] for c in copies])
    bad = [c[0].name for c in copies if c[0].stat().st_size != c[1] or _crc(c[0]) != c[2]]
    ctx.check("the copies read back equal to the originals", not bad, ", ".join(bad) or f"{sum(c[1] for c in copies) / 1e6:.0f} MB")


@analytics_test("io", "pyarrow", "PROC APPEND",
                "PyArrow's IPC stream: record batches appended to a growing file, as PROC APPEND adds to a base table",
                writes=("WORK",), inputs=(SALES,))
def append_tables(ctx: JobContext) -> None:
    """Builds a base table in WORK by appending the sales table to it in pieces, twice, then reads it back."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    base = ctx.work / "sales_history.arrows"
    source = pq.ParquetFile(ctx.data / SALES)
    appended = 0
    with pa.OSFile(str(base), "wb") as sink, pa.ipc.new_stream(sink, source.schema_arrow) as writer:
        for _ in range(2):
            for batch in source.iter_batches(batch_size=65_536):
                writer.write_batch(batch)
                appended += batch.num_rows
    ctx.written(base)
    evict([base])
    with pa.memory_map(str(base)) as f:
        rows = sum(b.num_rows for b in pa.ipc.open_stream(f))
    ctx.check("the base table holds every appended row", rows == appended == 2 * ctx.rows, f"{rows:,} rows")


@analytics_test("io", "duckdb", "PROC EXPORT to CSV", DUCKDB_WHY, writes=("WORK",), threaded=True, inputs=(SALES,))
def export_csv(ctx: JobContext) -> None:
    """Exports the sales table to a CSV file in WORK."""
    out = ctx.work / "sales_export.csv"
    con = ctx.duckdb()
    con.execute(f"COPY (SELECT * FROM read_parquet('{ctx.data / SALES}')) TO '{out}' (FORMAT csv, HEADER)")
    ctx.written(out)
    evict([out])
    lines = _lines(out)
    ctx.check("one line per row and a header", lines == ctx.rows + 1, f"{lines:,} lines")


@analytics_test("io", "duckdb", "PROC IMPORT of a CSV into a WORK data set", DUCKDB_WHY, writes=("WORK",), threaded=True,
                inputs=(SALES_CSV,))
def import_csv(ctx: JobContext) -> None:
    """Imports the flat file into a table of a database in WORK."""
    database = ctx.work / "imported.duckdb"
    con = ctx.duckdb(str(database))
    con.execute(f"CREATE TABLE sales AS SELECT * FROM read_csv('{ctx.data / SALES_CSV}', header = true)")
    con.execute("CHECKPOINT")
    rows, quantity = con.execute("SELECT count(*), sum(quantity) FROM sales").fetchone()
    expected = con.execute(f"SELECT sum(quantity) FROM read_parquet('{ctx.data / SALES}')").fetchone()[0]
    con.close()
    ctx.written(database)
    ctx.check("every line imported", rows == ctx.rows, f"{rows:,} of {ctx.rows:,}")
    ctx.check("the CSV and the Parquet copy agree", quantity == expected, f"sum(quantity) {quantity:,} vs {expected:,}")


@analytics_test("io", "duckdb", "WHERE subset to a new data set", DUCKDB_WHY, writes=("WORK",), threaded=True, inputs=(SALES,))
def subset_where(ctx: JobContext) -> None:
    """Scans the sales table for one region's large orders and writes them to WORK."""
    import polars as pl

    out = ctx.work / "subset.parquet"
    con = ctx.duckdb()
    con.execute(f"""COPY (SELECT * FROM read_parquet('{ctx.data / SALES}') WHERE region = 3 AND quantity > 10)
                    TO '{out}' (FORMAT parquet)""")
    ctx.written(out)
    rows = con.execute(f"SELECT count(*) FROM read_parquet('{out}')").fetchone()[0]
    expected = (pl.scan_parquet(ctx.data / SALES).filter((pl.col("region") == 3) & (pl.col("quantity") > 10))
                .select(pl.len()).collect().item())
    ctx.check("the subset has the rows Polars finds too", rows == expected > 0, f"{rows:,} rows")


@analytics_test("io", "python", "indexed reads (random access by key)", PLAIN_WHY, inputs=(SALES_CSV,))
def random_reads(ctx: JobContext) -> None:
    """Reads 64 KiB blocks at random offsets of the flat file: the small random reads of indexed access. Read blocks
    are dropped from the page cache as it goes, as they would fall out of it if the file were larger than memory."""
    path = ctx.data / SALES_CSV
    blocks = path.stat().st_size // BUFFER
    reads = max(1_000, 4 * blocks)
    rng = random.Random(ctx.seed)
    buffer = bytearray(BUFFER)
    short = 0
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)  # no read-ahead: each read is one block
        for i in range(reads):
            if os.preadv(fd, [buffer], rng.randrange(blocks) * BUFFER) != BUFFER:
                short += 1
            if i % 512 == 511:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)
    ctx.check("every read returned a full block", short == 0, f"{reads:,} reads of 64 KiB, {short} short")
