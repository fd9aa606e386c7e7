"""The twelve TPC-C consistency conditions (3.3.2), checked on the loaded database before the run and again after it.

All twelve are read by ONE statement (sql/consistency.sql; MariaDB's dialect in sql/mariadb/ is a short script in
one snapshot), so they see one snapshot: every refbench transaction keeps all of them true, so the check is valid even
while transactions commit. The statement reads each of the seven tables once, in
sequence (HISTORY aggregated by warehouse, district and customer in one pass), so its cost grows with the rows:
at 1 warehouse, after a short run, it reads 7,500 pages (60 MB), each once.

Condition 11 (count(ORDER) − count(NEW_ORDER) = 2100 per district) describes the initial population; each
Delivery moves one order per district out of NEW_ORDER, so on a database that has run it no longer holds. It is
checked as written on a freshly loaded database (``at_load``), and otherwise in the form that holds at any time:
a Delivery always takes a district's oldest undelivered order, so the delivered orders are exactly those below
min(NO_O_ID), and count(ORDER) − count(NEW_ORDER) = min(NO_O_ID) − 1 (2100 at load; D_NEXT_O_ID − 1 when every
order of the district is delivered).

Money is numeric with two decimals throughout the schema (OL_AMOUNT and H_AMOUNT numeric(6,2), balances and
year-to-date totals numeric(12,2)) and payments arrive as two-decimal text, so the sums are exact and are
compared exactly: a cent off is a violation. So is a NULL where a condition reads a value (a balance, an amount, a
key that ties a payment or an order to its customer): each comparison and sum in the SQL treats it as one.
"""

from __future__ import annotations

from typing import Any

# condition -> (what it says, what a violation is counted in)
CONDITIONS: dict[int, tuple[str, str]] = {
    1: ("W_YTD = sum(D_YTD)", "warehouses"),
    2: ("D_NEXT_O_ID - 1 = max(O_ID) = max(NO_O_ID)", "districts"),
    3: ("max(NO_O_ID) - min(NO_O_ID) + 1 = count(NEW_ORDER) per district", "districts"),
    4: ("sum(O_OL_CNT) = count(ORDER_LINE) per district", "districts"),
    5: ("O_CARRIER_ID is null exactly when the order has a NEW_ORDER row", "orders"),
    6: ("O_OL_CNT = the order's number of ORDER_LINE rows", "orders"),
    7: ("OL_DELIVERY_D is null exactly when the order's O_CARRIER_ID is null", "orders"),
    8: ("W_YTD = sum(H_AMOUNT) per warehouse", "warehouses"),
    9: ("D_YTD = sum(H_AMOUNT) per district", "districts"),
    10: ("C_BALANCE = sum(delivered OL_AMOUNT) - sum(H_AMOUNT) per customer", "customers"),
    11: ("count(ORDER) - count(NEW_ORDER) = 2100 per district at load; after deliveries = min(NO_O_ID) - 1",
         "districts"),
    12: ("C_BALANCE + C_YTD_PAYMENT = sum(delivered OL_AMOUNT) per customer", "customers"),
}

ORDERS_DELIVERED_AT_LOAD = 2100


def check(side: Any, conn: Any, at_load: bool = False) -> dict[int, tuple[str, int]]:
    """condition -> (description, number of warehouses/districts/orders/customers violating it); 0 = holds.
    ``side`` is the engine's refbench.engines.Transactional, whose dialect of sql/consistency.sql runs on ``conn``.
    ``at_load``: the database is freshly loaded and has run nothing, so condition 11 is checked as written."""
    counts = side.script(conn, side.dataset.sql(side.name, "consistency"),
                         {"at_load": at_load, "delivered_at_load": ORDERS_DELIVERED_AT_LOAD})
    return {n: (CONDITIONS[n][0], int(count)) for n, count in zip(CONDITIONS, counts)}
