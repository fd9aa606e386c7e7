"""The TPC-C schema in a database: build (schema, parallel load, keys, procedures), reuse, size, through the engine's
OLTP side (refbench.engines.Transactional), which knows how its server loads, indexes and counts."""

from __future__ import annotations

import time
from typing import Any, Callable

from refbench.engines import Transactional
from refbench.errors import UserError
from refbench.suites.oltp.load import load_all

TABLES = ["warehouse", "district", "customer", "history", "oorder", "new_order", "order_line", "item", "stock"]
LARGEST_FIRST = ["order_line", "stock", "customer", "oorder", "history", "new_order", "item", "district", "warehouse"]
TRANSACTIONS = ["new_order", "payment", "order_status", "delivery", "stock_level"]


def build(side: Transactional, warehouses: int, workers: int, rebuild: bool,
          on_progress: Callable[[str, float], None]) -> dict[str, Any]:
    """Makes the schema hold exactly ``warehouses`` warehouses; returns what the load did and cost."""
    try:
        return _build(side, warehouses, workers, rebuild, on_progress)
    except UserError:
        raise
    except Exception as exc:  # a full disk, a lost connection, a server that stopped: the client library's error
        first = side.failure(exc)
        if first is None:
            raise
        raise UserError(f"building the TPC-C schema failed: {first.rstrip('.')}.") from None


def _build(side: Transactional, warehouses: int, workers: int, rebuild: bool,
           on_progress: Callable[[str, float], None]) -> dict[str, Any]:
    present = side.loaded_warehouses()
    if present == warehouses and not rebuild:
        side.install(TRANSACTIONS)
        return {"reused": True, "warehouses": warehouses, **side.sizes()}
    if present is not None and present != warehouses and not rebuild:
        raise UserError(f"the database already holds a TPC-C schema of {present} warehouse(s), not {warehouses}; "
                        "pass --rebuild to drop and reload it.")
    side.create_schema()
    done = [0]

    def step() -> None:
        done[0] += 1
        on_progress("loading", done[0] / (warehouses + 1))

    rows, load_s = load_all(side, warehouses, workers, step)
    t0 = time.monotonic()
    on_progress("keys, indexes and statistics of", 1.0)
    side.finish_tables(LARGEST_FIRST, workers)
    side.install(TRANSACTIONS)
    side.mark_loaded(warehouses, rows)
    return {"reused": False, "warehouses": warehouses, "rows": rows, "load_s": round(load_s, 2),
            "index_s": round(time.monotonic() - t0, 2), **side.sizes()}
