"""The refresh functions (TPC-H 2.5), derived: RF1 inserts SF·1500 new orders with their line items, RF2 deletes
SF·1500 orders with theirs, each in one transaction. tpchgen-cli writes no update sets, so RF1's orders are
copies of the first SF·1500 orders under new keys, one key range per refresh pair, and RF2 deletes exactly those
again: the data is the same after every pair, so stream 0's answers can still be checked at the end.
"""

from __future__ import annotations

import time
from typing import Callable

KEY_RANGE = 10**10  # far above any order key tpchgen-cli makes (at most 6·10^9 at SF 100,000)

Run = Callable[[str], object]
# Engines that refuse a LIMIT in an IN subquery (MariaDB: error 1235, "doesn't yet support 'LIMIT &
# IN/ALL/ANY/SOME subquery'"): they get the same orders through a derived table around it. The others keep the text
# their figures were measured with.
LIMIT_IN_REFUSED = {"mariadb"}


def orders_per_refresh(sf: float) -> int:
    return max(1, round(sf * 1500))


def rf1_statements(sf: float, pair: int, engine: str) -> list[str]:
    """RF1's two inserts for refresh pair ``pair``, without the transaction around them (the answer checks run them
    in one they roll back, to recompute an answer for the data a refresh made)."""
    offset, n = (pair + 1) * KEY_RANGE, orders_per_refresh(sf)
    first = f"(SELECT o_orderkey FROM orders WHERE o_orderkey < {KEY_RANGE} ORDER BY o_orderkey LIMIT {n})"
    if engine in LIMIT_IN_REFUSED:
        first = f"(SELECT o_orderkey FROM {first} AS first)"
    return [f"INSERT INTO orders SELECT o_orderkey + {offset}, o_custkey, o_orderstatus, o_totalprice, o_orderdate, "
            f"o_orderpriority, o_clerk, o_shippriority, o_comment FROM orders WHERE o_orderkey IN {first}",
            f"INSERT INTO lineitem SELECT l_orderkey + {offset}, l_partkey, l_suppkey, l_linenumber, l_quantity, "
            "l_extendedprice, l_discount, l_tax, l_returnflag, l_linestatus, l_shipdate, l_commitdate, l_receiptdate, "
            f"l_shipinstruct, l_shipmode, l_comment FROM lineitem WHERE l_orderkey IN {first}"]


def rf1(run: Run, sf: float, pair: int, engine: str) -> float:
    t0 = time.perf_counter()
    run("BEGIN")
    for statement in rf1_statements(sf, pair, engine):
        run(statement)
    run("COMMIT")
    return time.perf_counter() - t0


def rf2(run: Run, sf: float, pair: int) -> float:
    low, high = (pair + 1) * KEY_RANGE, (pair + 2) * KEY_RANGE
    t0 = time.perf_counter()
    run("BEGIN")
    run(f"DELETE FROM lineitem WHERE l_orderkey >= {low} AND l_orderkey < {high}")
    run(f"DELETE FROM orders WHERE o_orderkey >= {low} AND o_orderkey < {high}")
    run("COMMIT")
    return time.perf_counter() - t0
