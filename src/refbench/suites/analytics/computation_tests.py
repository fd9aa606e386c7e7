"""The ten computation tests: sorting, summarizing, joining, counting, modelling — the CPU-heavy part of an
analytics shop's day, most of them fed by reading DATA, some by data they generate themselves."""

from __future__ import annotations

import numpy as np

from refbench.suites.analytics.catalog import JobContext, analytics_test
from refbench.suites.analytics.inputs import LINEAR, LOGISTIC, PRODUCTS, REGIONS

SALES, CUSTOMERS = "sales.parquet", "customers.parquet"
DUCKDB_WHY = "DuckDB: a threaded SQL engine that sorts and aggregates out of core, spilling to its temp directory (UTIL)"
POLARS_WHY = "Polars: threaded data-frame group-bys, the way analysts summarize data outside SQL"
NUMPY_WHY = "NumPy: the matrix algebra (BLAS) statistics procedures are built on"


def _scalar(con, sql: str):
    return con.execute(sql).fetchone()[0]


@analytics_test("computation", "duckdb", "PROC SORT", DUCKDB_WHY, writes=("WORK", "UTIL"), threaded=True, inputs=(SALES,))
def sort_copy(ctx: JobContext) -> None:
    """Sorts the sales table by customer and date into a new WORK data set; the sort spills to UTIL."""
    out = ctx.work / "sales_sorted.parquet"
    con = ctx.duckdb()
    con.execute(f"COPY (SELECT * FROM read_parquet('{ctx.data / SALES}') ORDER BY customer_id, day, id) TO '{out}' (FORMAT parquet)")
    ctx.written(out)
    rows = _scalar(con, f"SELECT count(*) FROM read_parquet('{out}')")
    ctx.check("the sorted copy has every row", rows == ctx.rows, f"{rows:,} of {ctx.rows:,}")
    disorder = _scalar(con, f"""SELECT count(*) FROM (SELECT customer_id, day, id,
        lag(customer_id) OVER w AS c0, lag(day) OVER w AS d0, lag(id) OVER w AS i0
        FROM read_parquet('{out}', file_row_number = true) WINDOW w AS (ORDER BY file_row_number))
        WHERE c0 IS NOT NULL AND (c0, d0, i0) > (customer_id, day, id)""")
    ctx.check("the copy is in key order", disorder == 0, f"{disorder} rows out of order")


@analytics_test("computation", "polars", "PROC SUMMARY / MEANS", POLARS_WHY, writes=("WORK",), threaded=True, inputs=(SALES,))
def summary_by_group(ctx: JobContext) -> None:
    """Count, sum, mean, standard deviation, minimum and maximum by region and product."""
    import polars as pl

    sales = pl.scan_parquet(ctx.data / SALES)
    summary = (sales.with_columns(amount=pl.col("price") * pl.col("quantity") * (1 - pl.col("discount")))
               .group_by("region", "product_id")
               .agg(n=pl.len(), quantity=pl.col("quantity").sum(), amount=pl.col("amount").sum(),
                    mean_price=pl.col("price").mean(), std_price=pl.col("price").std(),
                    min_price=pl.col("price").min(), max_price=pl.col("price").max())
               .collect())
    out = ctx.work / "summary.parquet"
    summary.write_parquet(out)
    ctx.written(out)
    total_quantity = sales.select(pl.col("quantity").sum()).collect().item()
    ctx.check("group counts add up to the rows", summary["n"].sum() == ctx.rows, f"{summary['n'].sum():,}")
    ctx.check("group sums add up to the total", summary["quantity"].sum() == total_quantity,
              f"{summary['quantity'].sum():,} vs {total_quantity:,}")
    ctx.check("every region and product has a group", summary.height == REGIONS * PRODUCTS, f"{summary.height} groups")


@analytics_test("computation", "duckdb", "PROC SQL join", DUCKDB_WHY, writes=("WORK", "UTIL"), threaded=True,
                inputs=(SALES, CUSTOMERS))
def join_tables(ctx: JobContext) -> None:
    """Joins every sale to its customer into a WORK data set, then summarizes it by segment and state."""
    out = ctx.work / "sales_customers.parquet"
    con = ctx.duckdb()
    con.execute(f"""COPY (SELECT s.*, c.segment, c.state, c.income, c.age
                          FROM read_parquet('{ctx.data / SALES}') s JOIN read_parquet('{ctx.data / CUSTOMERS}') c
                          USING (customer_id)) TO '{out}' (FORMAT parquet)""")
    ctx.written(out)
    groups = con.execute(f"""SELECT segment, state, count(*) AS n, sum(price * quantity) AS amount
                             FROM read_parquet('{out}') GROUP BY ALL""").fetchall()
    joined = sum(g[2] for g in groups)
    ctx.check("every sale found its customer", joined == ctx.rows, f"{joined:,} of {ctx.rows:,}")
    ctx.check("segments × states", 0 < len(groups) <= 5 * 50, f"{len(groups)} groups")


@analytics_test("computation", "polars", "PROC FREQ", POLARS_WHY, threaded=True, inputs=(SALES,))
def frequency_tables(ctx: JobContext) -> None:
    """One-way and two-way frequency tables and a chi-square test of independence."""
    import polars as pl

    sales = pl.scan_parquet(ctx.data / SALES)
    one_way = sales.group_by("product_id").agg(n=pl.len()).collect()
    two_way = sales.group_by("region", "quantity").agg(n=pl.len()).collect()
    table = two_way.pivot(on="quantity", index="region", values="n").fill_null(0).drop("region").to_numpy().astype(float)
    expected = table.sum(axis=1, keepdims=True) * table.sum(axis=0, keepdims=True) / table.sum()
    chi_square = float(((table - expected) ** 2 / expected).sum())
    df = (table.shape[0] - 1) * (table.shape[1] - 1)
    ctx.check("frequencies add up to the rows", one_way["n"].sum() == ctx.rows == int(table.sum()), f"{int(table.sum()):,}")
    # Region and quantity are independent by construction: chi-square/df near 1, far from it if counting is wrong.
    ctx.check("region and quantity test as independent", chi_square / df < 3, f"chi-square {chi_square:.1f} on {df} df")


@analytics_test("computation", "numpy", "PROC REG", NUMPY_WHY, threaded=True, inputs=(SALES,))
def linear_regression(ctx: JobContext) -> None:
    """Least squares of y on x1..x4 with their squares and interactions, with bootstrap standard errors; one pass
    over the data in row groups (a Poisson bootstrap), so memory does not grow with the table."""
    import pyarrow.parquet as pq

    replicates = 8
    rng = np.random.default_rng(ctx.seed)
    cross, moment, rows = 0.0, 0.0, 0
    for batch in pq.ParquetFile(ctx.data / SALES).iter_batches(batch_size=250_000, columns=["x1", "x2", "x3", "x4", "y"]):
        x = np.column_stack([batch.column(f"x{k}").to_numpy() for k in range(1, 5)])
        y = batch.column("y").to_numpy()
        design = np.column_stack([np.ones(len(y))] + [x[:, i] for i in range(4)]
                                 + [x[:, i] * x[:, j] for i in range(4) for j in range(i, 4)])
        weights = np.vstack([np.ones(len(y)), rng.poisson(1.0, (replicates, len(y)))])  # row 0: the estimate itself
        cross = cross + np.stack([(design * w[:, None]).T @ design for w in weights])
        moment = moment + (weights * y) @ design
        rows += len(y)
    betas = np.linalg.solve(cross, moment[..., None])[..., 0]
    beta, se = betas[0], np.std(betas[1:], axis=0)
    truth = np.array([LINEAR["intercept"], LINEAR["x1"], LINEAR["x2"], LINEAR["x3"], LINEAR["x4"]] + [0.0] * 10)
    worst = float(np.max(np.abs(beta - truth) / np.maximum(se, 1e-12)))
    ctx.check("every row was read", rows == ctx.rows, f"{rows:,} of {ctx.rows:,}")
    ctx.check("coefficients match the model behind the data", worst < 8, f"largest error {worst:.1f} standard errors")


@analytics_test("computation", "numpy", "PROC LOGISTIC", NUMPY_WHY, threaded=True, inputs=(SALES,))
def logistic_regression(ctx: JobContext) -> None:
    """Maximum likelihood logistic regression of flag on x1 and x2 by iteratively reweighted least squares."""
    import pyarrow.parquet as pq

    table = pq.read_table(ctx.data / SALES, columns=["x1", "x2", "flag"])
    design = np.column_stack([np.ones(table.num_rows), table["x1"].to_numpy(), table["x2"].to_numpy()])
    flag = table["flag"].to_numpy().astype(float)
    beta = np.zeros(3)
    for iteration in range(1, 26):
        p = 1 / (1 + np.exp(-design @ beta))
        w = p * (1 - p)
        step = np.linalg.solve(design.T @ (design * w[:, None]), design.T @ (flag - p))
        beta += step
        if np.max(np.abs(step)) < 1e-8:
            break
    truth = np.array([LOGISTIC["intercept"], LOGISTIC["x1"], LOGISTIC["x2"]])
    ctx.check("Newton iterations converged", np.max(np.abs(step)) < 1e-8, f"{iteration} iterations")
    ctx.check("coefficients match the model behind the data", np.max(np.abs(beta - truth)) < 0.05 + 20 / np.sqrt(len(flag)),
              "estimates " + ", ".join(f"{b:.3f}" for b in beta))


@analytics_test("computation", "duckdb", "PROC UNIVARIATE percentiles", DUCKDB_WHY, writes=("WORK",), threaded=True,
                inputs=(SALES,))
def percentiles(ctx: JobContext) -> None:
    """Percentiles of price and amount by region and product."""
    out = ctx.work / "percentiles.parquet"
    con = ctx.duckdb()
    con.execute(f"""COPY (SELECT region, product_id,
                                 quantile_cont(price, [0.01, 0.05, 0.25, 0.5, 0.75, 0.95, 0.99]) AS price_q,
                                 quantile_cont(price * quantity, [0.5, 0.9]) AS amount_q
                          FROM read_parquet('{ctx.data / SALES}') GROUP BY ALL) TO '{out}' (FORMAT parquet)""")
    ctx.written(out)
    groups, unordered = con.execute(f"""SELECT count(*), count(*) FILTER (WHERE price_q != list_sort(price_q))
                                        FROM read_parquet('{out}')""").fetchone()
    ctx.check("every region and product has percentiles", groups == REGIONS * PRODUCTS, f"{groups} groups")
    ctx.check("percentiles are in order", unordered == 0, f"{unordered} groups out of order")


def _generated_rows(ctx: JobContext) -> int:
    return max(10_000, ctx.rows // 10)


@analytics_test("computation", "numpy", "PROC CORR on generated data", NUMPY_WHY, reads=(), threaded=True)
def correlation_matrix(ctx: JobContext) -> None:
    """A 256-variable correlation matrix of generated data with a known structure, in blocks (pure CPU)."""
    rng = np.random.default_rng(ctx.seed)
    columns, block = 256, min(50_000, _generated_rows(ctx))
    mixing = np.eye(columns)
    mixing[0, 1] = mixing[1, 0] = 0.6  # variables 0 and 1 correlate: 2·0.6 / (1 + 0.36)
    cross, sums, n = np.zeros((columns, columns)), np.zeros(columns), 0
    for _ in range(4 * _generated_rows(ctx) // block):  # four times the generated rows, a block at a time
        x = rng.standard_normal((block, columns)) @ mixing
        cross += x.T @ x
        sums += x.sum(axis=0)
        n += block
    mean = sums / n
    cov = cross / n - np.outer(mean, mean)
    sd = np.sqrt(np.diag(cov))
    corr = cov / np.outer(sd, sd)
    off = corr - np.eye(columns)
    off[0, 1] = off[1, 0] = 0
    ctx.check("the known correlation is found", abs(corr[0, 1] - 1.2 / 1.36) < 0.01, f"r = {corr[0, 1]:.4f} (model {1.2 / 1.36:.4f})")
    ctx.check("the others are near zero", float(np.abs(off).max()) < 8 / np.sqrt(n), f"largest |r| {np.abs(off).max():.4f}")


@analytics_test("computation", "numpy", "PROC FASTCLUS (k-means) on generated data", NUMPY_WHY, reads=(), threaded=True)
def kmeans_clustering(ctx: JobContext) -> None:
    """k-means (Lloyd's algorithm) of generated points around known centers."""
    rng = np.random.default_rng(ctx.seed)
    k, dims = 8, 16
    centers = rng.uniform(-20, 20, (k, dims))
    points = centers[rng.integers(0, k, _generated_rows(ctx))] + rng.standard_normal((_generated_rows(ctx), dims))
    found = points[[rng.integers(len(points))]]
    while len(found) < k:  # k-means++ seeding: each next seed far from the ones chosen, as FASTCLUS picks its seeds
        nearest_sq = np.min(((points[:, None, :] - found[None, :, :]) ** 2).sum(axis=2), axis=1)
        found = np.vstack([found, points[rng.choice(len(points), p=nearest_sq / nearest_sq.sum())]])
    nearest = None
    for iteration in range(1, 101):
        distances = (points ** 2).sum(1)[:, None] - 2 * points @ found.T + (found ** 2).sum(1)[None, :]
        previous, nearest = nearest, distances.argmin(axis=1)
        if previous is not None and np.array_equal(previous, nearest):
            break
        found = np.array([points[nearest == c].mean(axis=0) if np.any(nearest == c) else found[c] for c in range(k)])
    ctx.check("k-means converged", iteration < 100, f"{iteration} iterations")
    missed = sum(np.min(np.linalg.norm(found - c, axis=1)) > 1 for c in centers)
    ctx.check("cluster centers are found", missed == 0, f"{k - missed} of {k} centers within 1 unit")


@analytics_test("computation", "duckdb", "PROC RANK and BY-group running totals", DUCKDB_WHY, writes=("WORK", "UTIL"),
                threaded=True, inputs=(SALES,))
def rank_and_running_totals(ctx: JobContext) -> None:
    """Ranks each customer's sales by amount and keeps a running total per customer by date."""
    out = ctx.work / "ranked.parquet"
    con = ctx.duckdb()
    con.execute(f"""COPY (SELECT customer_id, id, day, price * quantity AS amount,
                                 rank() OVER (PARTITION BY customer_id ORDER BY price * quantity DESC) AS amount_rank,
                                 sum(price * quantity) OVER (PARTITION BY customer_id ORDER BY day, id) AS running_amount
                          FROM read_parquet('{ctx.data / SALES}')) TO '{out}' (FORMAT parquet)""")
    ctx.written(out)
    rows, wrong = con.execute(f"""SELECT sum(n), count(*) FILTER (WHERE abs(last_running - total) > 1e-6 * total OR top != 1)
        FROM (SELECT customer_id, count(*) AS n, max(running_amount) AS last_running, sum(amount) AS total,
                     min(amount_rank) AS top FROM read_parquet('{out}') GROUP BY customer_id)""").fetchone()
    ctx.check("every row is ranked", rows == ctx.rows, f"{rows:,} of {ctx.rows:,}")
    ctx.check("running totals end at each customer's total", wrong == 0, f"{wrong} customers wrong")
