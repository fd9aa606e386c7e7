"""The workload's permanent inputs in DATA, generated once at a scale and reused (as a SAS shop's permanent
data sets are): a sales fact table as Parquet and as a flat CSV file, and a customer dimension.

DuckDB generates them from hashes of the row number, so the same scale always gives the same data, and the
columns carry known structure the tests check their answers against: y is a linear function of x1..x4 plus
standard normal noise, flag follows a logistic model of x1 and x2, every sale's customer exists.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

from refbench.errors import UserError
from refbench.fileio import atomic_write_json

VERSION = 2
FILES = ("sales.parquet", "sales.csv", "customers.parquet")
MARKER = "inputs.json"
# The known models behind the data; the regression tests must find them again.
LINEAR = {"intercept": 3.0, "x1": 2.0, "x2": -1.0, "x3": 0.5, "x4": 0.0}
LOGISTIC = {"intercept": -0.5, "x1": 1.5, "x2": -1.0}
REGIONS, PRODUCTS, STORES = 10, 500, 200


def customers_for(rows: int) -> int:
    return max(1_000, rows // 20)


def _uniform(salt: int) -> str:
    """A uniform (0, 1) value per row from the row number's hash. Each column hashes its own integers
    (i * 64 + salt): DuckDB's two-argument hash(i, salt) shares low bits between salts, which made columns
    depend on each other."""
    return f"((hash(i * 64 + {salt}) % 1000000007) + 0.5) / 1000000007.0"


def _normal(salt: int) -> str:
    return f"sqrt(-2 * ln({_uniform(salt)})) * cos(2 * pi() * {_uniform(salt + 1)})"


def sales_sql(rows: int) -> str:
    x = {k: f"(2 * {_uniform(10 + k)} - 1)" for k in range(1, 5)}
    linear = " + ".join([str(LINEAR["intercept"])] + [f"{LINEAR[f'x{k}']} * x{k}" for k in range(1, 5)])
    logit = f"{LOGISTIC['intercept']} + {LOGISTIC['x1']} * x1 + {LOGISTIC['x2']} * x2"
    return f"""
        SELECT id, customer_id, product_id, store_id, store_id % {REGIONS} AS region, day, quantity, price, discount,
               x1, x2, x3, x4, {linear} + noise AS y, CASE WHEN u_flag < 1 / (1 + exp(-({logit}))) THEN 1 ELSE 0 END AS flag
        FROM (SELECT i AS id,
                     (hash(i * 64 + 1) % {customers_for(rows)})::INTEGER AS customer_id,
                     (hash(i * 64 + 2) % {PRODUCTS})::INTEGER AS product_id,
                     (hash(i * 64 + 3) % {STORES})::INTEGER AS store_id,
                     DATE '2020-01-01' + (hash(i * 64 + 4) % 1461)::INTEGER AS day,
                     (1 + hash(i * 64 + 5) % 20)::INTEGER AS quantity,
                     round(1 + (hash(i * 64 + 6) % 100000) / 100.0, 2) AS price,
                     round((hash(i * 64 + 7) % 30) / 100.0, 2) AS discount,
                     {x[1]} AS x1, {x[2]} AS x2, {x[3]} AS x3, {x[4]} AS x4,
                     {_normal(20)} AS noise, {_uniform(30)} AS u_flag
              FROM range({rows}) t(i))"""


def customers_sql(rows: int) -> str:
    return f"""
        SELECT i::INTEGER AS customer_id,
               ['consumer', 'corporate', 'home office', 'small business', 'public sector'][(1 + hash(i * 64 + 41) % 5)::BIGINT] AS segment,
               'S' || lpad((hash(i * 64 + 42) % 50)::VARCHAR, 2, '0') AS state,
               round(20000 + (hash(i * 64 + 43) % 180000), 0) AS income,
               (18 + hash(i * 64 + 44) % 70)::INTEGER AS age
        FROM range({customers_for(rows)}) t(i)"""


def ensure(data: Path, rows: int, threads: int, log=None) -> dict[str, Any]:
    """Generates the inputs into ``data`` unless a complete set of this scale is there; returns its description."""
    marker = data / MARKER
    wanted = {"version": VERSION, "rows": rows}
    if marker.exists():
        try:
            described = json.loads(marker.read_text())
        except (OSError, ValueError):
            described = {}
        if {k: described.get(k) for k in wanted} == wanted and all((data / f).exists() for f in FILES):
            return {**described, "reused": True}
    import duckdb

    data.mkdir(parents=True, exist_ok=True)
    marker.unlink(missing_ok=True)
    need = rows * 260  # bytes: Parquet + CSV of the sales table, measured at ~250 bytes a row, and a margin
    free = shutil.disk_usage(data).free
    if free < need:
        raise UserError(f"DATA ({data}) has {free / 1e9:.1f} GB free; the inputs for {rows:,} rows need about "
                        f"{need / 1e9:.1f} GB.")
    if log:
        log(f"generating the inputs for {rows:,} rows in {data}")
    started = time.monotonic()
    con = duckdb.connect(config={"threads": threads, "preserve_insertion_order": False})
    con.execute("SET enable_progress_bar = false")
    partial = [data / (name + ".partial") for name in FILES]
    try:
        con.execute(f"CREATE TEMP VIEW sales AS {sales_sql(rows)}")
        con.execute(f"COPY (SELECT * FROM sales ORDER BY id) TO '{partial[0]}' (FORMAT parquet, ROW_GROUP_SIZE 122880)")
        con.execute(f"COPY (SELECT * FROM read_parquet('{partial[0]}')) TO '{partial[1]}' (FORMAT csv, HEADER)")
        con.execute(f"COPY ({customers_sql(rows)}) TO '{partial[2]}' (FORMAT parquet)")
    except (duckdb.Error, OSError) as exc:
        for path in partial:
            path.unlink(missing_ok=True)
        raise UserError(f"could not generate the analytics inputs in {data}: {str(exc).splitlines()[0]}") from exc
    finally:
        con.close()
    for path, name in zip(partial, FILES):
        # Written to the device now: otherwise the kernel writes them back while the jobs run (a job's eviction of
        # its inputs starts it), and the measured DATA location shows writes that are not the workload's.
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        path.rename(data / name)
    described = {**wanted, "customers": customers_for(rows), "files": {f: (data / f).stat().st_size for f in FILES},
                 "generated_s": round(time.monotonic() - started, 2)}
    atomic_write_json(marker, described)
    return {**described, "reused": False}
