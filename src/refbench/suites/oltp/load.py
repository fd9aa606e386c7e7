"""Loading the nine TPC-C tables for W warehouses (TPC-C 4.3.3), one process per warehouse, with the engine's bulk
load (COPY on PostgreSQL, LOAD DATA LOCAL INFILE on MariaDB) of rows generated here in COPY's text format."""

from __future__ import annotations

import multiprocessing
import time
from datetime import datetime
from typing import Callable

from refbench.children import forked_worker
from refbench.engines import Transactional
from refbench.suites.oltp.rand import TpccRandom, last_name

DISTRICTS, CUSTOMERS, ITEMS, ORDERS, NEW_ORDERS_FROM = 10, 3000, 100_000, 3000, 2101


def load_items(side: Transactional, seed: int = 1) -> int:
    rng = TpccRandom(seed)
    with side.loader() as conn:
        return side.copy_rows(conn, "item", "i_id, i_im_id, i_name, i_price, i_data",
                     ((i, rng.randint(1, 10000), rng.astring(14, 24), round(rng.uniform(1, 100), 2), rng.data(26, 50))
                      for i in range(1, ITEMS + 1)))


class _DistPool:
    """S_DIST_01 … S_DIST_10 of a stock row: ten random 24-character strings, cut as one slice out of a pool of
    such strings already separated by tabs (one random choice per row instead of ten); and OL_DIST_INFO, one of
    them."""

    STRINGS = 4096

    def __init__(self, rng: TpccRandom):
        self.text = "\t".join(rng.astring(24, 24) for _ in range(self.STRINGS))

    def pick(self, rnd) -> str:
        start = 25 * int(rnd() * (self.STRINGS - 10))
        return self.text[start:start + 249]

    def pick_one(self, rnd) -> str:
        start = 25 * int(rnd() * self.STRINGS)
        return self.text[start:start + 24]


def load_warehouse(side: Transactional, w: int) -> int:
    """Everything belonging to warehouse ``w``; returns the number of rows."""
    rng = TpccRandom(1000 + w, c_last=208)  # the load's C for C_LAST differs from the run's (4.3.2.3)
    rnd, astring, randint = rng.random, rng.astring, rng.randint
    now = datetime.now().isoformat(sep=" ")
    dists = _DistPool(rng)
    rows = 0
    # One transaction per warehouse: one commit (and log flush) instead of one per table.
    copy_rows, copy_lines = side.copy_rows, side.copy_lines
    with side.loader() as conn:
        rows += copy_rows(conn, "warehouse", "w_id, w_name, w_street_1, w_street_2, w_city, w_state, w_zip, w_tax, w_ytd",
                      iter([(w, rng.astring(6, 10), rng.astring(10, 20), rng.astring(10, 20), rng.astring(10, 20),
                             rng.astring(2, 2), rng.zip(), round(rng.uniform(0, 0.2), 4), 300000)]))
        rows += copy_lines(conn, "stock", "s_i_id, s_w_id, s_quantity, s_dist_01, s_dist_02, s_dist_03, s_dist_04, "
                            "s_dist_05, s_dist_06, s_dist_07, s_dist_08, s_dist_09, s_dist_10, s_ytd, s_order_cnt, "
                            "s_remote_cnt, s_data",
                            ("%d\t%d\t%d\t%s\t0\t0\t0\t%s\n" % (i, w, 10 + int(rnd() * 91), dists.pick(rnd), rng.data(26, 50))
                             for i in range(1, ITEMS + 1)))
        rows += copy_rows(conn, "district", "d_id, d_w_id, d_name, d_street_1, d_street_2, d_city, d_state, d_zip, d_tax, "
                      "d_ytd, d_next_o_id",
                      ((d, w, rng.astring(6, 10), rng.astring(10, 20), rng.astring(10, 20), rng.astring(10, 20),
                        rng.astring(2, 2), rng.zip(), round(rng.uniform(0, 0.2), 4), 30000, ORDERS + 1)
                       for d in range(1, DISTRICTS + 1)))
        for d in range(1, DISTRICTS + 1):
            rows += copy_lines(conn, "customer", "c_id, c_d_id, c_w_id, c_first, c_middle, c_last, c_street_1, "
                                "c_street_2, c_city, c_state, c_zip, c_phone, c_since, c_credit, c_credit_lim, "
                                "c_discount, c_balance, c_ytd_payment, c_payment_cnt, c_delivery_cnt, c_data",
                                ("%d\t%d\t%d\t%s\tOE\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t50000\t%.4f\t-10\t10\t1\t0\t%s\n"
                                 % (c, d, w, astring(8, 16), last_name(c - 1) if c <= 1000 else rng.run_last_name(),
                                    astring(10, 20), astring(10, 20), astring(10, 20), astring(2, 2), rng.zip(),
                                    rng.nstring(16, 16), now, "BC" if rnd() < 0.1 else "GC", rnd() * 0.5,
                                    astring(300, 500))
                                 for c in range(1, CUSTOMERS + 1)))
            rows += copy_lines(conn, "history", "h_c_id, h_c_d_id, h_c_w_id, h_d_id, h_w_id, h_date, h_amount, h_data",
                                ("%d\t%d\t%d\t%d\t%d\t%s\t10\t%s\n" % (c, d, w, d, w, now, astring(12, 24))
                                 for c in range(1, CUSTOMERS + 1)))
            customers = list(range(1, CUSTOMERS + 1))
            rng.shuffle(customers)
            line_counts = [randint(5, 15) for _ in range(ORDERS)]
            rows += copy_lines(conn, "oorder", "o_id, o_d_id, o_w_id, o_c_id, o_entry_d, o_carrier_id, o_ol_cnt, "
                                "o_all_local",
                                ("%d\t%d\t%d\t%d\t%s\t%s\t%d\t1\n"
                                 % (o, d, w, customers[o - 1], now, randint(1, 10) if o < NEW_ORDERS_FROM else "\\N",
                                    line_counts[o - 1])
                                 for o in range(1, ORDERS + 1)))
            rows += copy_lines(conn, "order_line", "ol_o_id, ol_d_id, ol_w_id, ol_number, ol_i_id, ol_supply_w_id, "
                                "ol_delivery_d, ol_quantity, ol_amount, ol_dist_info",
                                ("%d\t%d\t%d\t%d\t%d\t%d\t%s\t5\t%s\t%s\n"
                                 % (o, d, w, n, 1 + int(rnd() * ITEMS), w,
                                    *((now, "0") if o < NEW_ORDERS_FROM else ("\\N", "%.2f" % (0.01 + rnd() * 9999.98))),
                                    dists.pick_one(rnd))
                                 for o in range(1, ORDERS + 1) for n in range(1, line_counts[o - 1] + 1)))
            rows += copy_lines(conn, "new_order", "no_o_id, no_d_id, no_w_id",
                                ("%d\t%d\t%d\n" % (o, d, w) for o in range(NEW_ORDERS_FROM, ORDERS + 1)))
    return rows


def _work(job: tuple[Transactional, str, int]) -> int:
    side, what, w = job
    return load_items(side) if what == "items" else load_warehouse(side, w)


def load_all(side: Transactional, warehouses: int, workers: int, on_done: Callable[[], None] | None = None) -> tuple[int, float]:
    """Loads items and every warehouse in parallel processes; returns (rows, seconds)."""
    t0 = time.monotonic()
    jobs = [(side, "items", 0)] + [(side, "warehouse", w) for w in range(1, warehouses + 1)]
    rows = 0
    with multiprocessing.get_context("fork").Pool(max(1, workers), initializer=forked_worker) as pool:
        for count in pool.imap_unordered(_work, jobs):
            rows += count
            if on_done:
                on_done()
    return rows, time.monotonic() - t0
