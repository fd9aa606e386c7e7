"""The two memory tests: whole tables held and worked on in memory — the memory-bandwidth side of the
workload."""

from __future__ import annotations

import numpy as np

from refbench.suites.analytics.catalog import JobContext, analytics_test

SALES, CUSTOMERS = "sales.parquet", "customers.parquet"


@analytics_test("memory", "numpy", "DATA step with the whole table in memory (SASFILE)",
                "PyArrow reads the table into memory and NumPy makes passes over the arrays: pure memory bandwidth",
                inputs=(SALES,))
def in_memory_table(ctx: JobContext) -> None:
    """Loads the sales table into memory, then passes over it: sums, a sort of each numeric column, distinct counts."""
    import pyarrow.parquet as pq

    table = pq.read_table(ctx.data / SALES)
    columns = {name: table[name].to_numpy() for name in ("quantity", "price", "discount", "x1", "y", "customer_id")}
    amount = columns["price"] * columns["quantity"] * (1 - columns["discount"])
    sorted_columns = {name: np.sort(values) for name, values in columns.items()}
    distinct_customers = len(np.unique(columns["customer_id"]))
    in_order = all(bool(np.all(v[1:] >= v[:-1])) for v in sorted_columns.values())
    # The same figures from an engine that reads the file itself.
    expected_quantity, expected_customers = ctx.duckdb().execute(
        f"SELECT sum(quantity), count(DISTINCT customer_id) FROM read_parquet('{ctx.data / SALES}')").fetchone()
    ctx.check("the table is all in memory", table.num_rows == ctx.rows, f"{table.num_rows:,} rows, {table.nbytes / 1e6:.0f} MB")
    ctx.check("sums agree with DuckDB's", int(columns["quantity"].sum()) == expected_quantity and amount.sum() > 0,
              f"quantity {int(columns['quantity'].sum()):,}")
    ctx.check("distinct counts agree with DuckDB's", distinct_customers == expected_customers, f"{distinct_customers:,} customers")
    ctx.check("sorted columns are in order", in_order)


@analytics_test("memory", "polars", "DATA step hash object lookup",
                "Polars: an in-memory hash join of the whole table against a lookup table, threaded",
                threaded=True, inputs=(SALES, CUSTOMERS))
def hash_lookup(ctx: JobContext) -> None:
    """Holds the customer table as an in-memory hash and looks every sale up in it, then sums by segment."""
    import polars as pl

    customers = pl.read_parquet(ctx.data / CUSTOMERS)
    sales = pl.read_parquet(ctx.data / SALES, columns=["customer_id", "price", "quantity"])
    looked_up = sales.join(customers, on="customer_id", how="left")
    by_segment = looked_up.group_by("segment").agg(n=pl.len(), amount=(pl.col("price") * pl.col("quantity")).sum())
    missing = looked_up["segment"].null_count()
    ctx.check("every sale found its customer", missing == 0 and looked_up.height == ctx.rows,
              f"{looked_up.height - missing:,} of {ctx.rows:,}")
    ctx.check("the five segments", by_segment.height == 5 and by_segment["n"].sum() == ctx.rows, f"{by_segment.height} segments")
