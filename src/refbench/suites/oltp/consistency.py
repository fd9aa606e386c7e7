"""TPC-C consistency conditions (3.3.2), checked before and after a run. Conditions 1-4 are the required
ones; 8 and 9 (year-to-date totals against the history) are one aggregate each, so they are checked too."""

from __future__ import annotations

CONDITIONS: dict[int, tuple[str, str]] = {
    1: ("W_YTD = sum(D_YTD)",
        "SELECT count(*) FROM tpcc.warehouse w JOIN (SELECT d_w_id, sum(d_ytd) s FROM tpcc.district GROUP BY d_w_id) d "
        "ON d.d_w_id = w.w_id WHERE w.w_ytd <> d.s"),
    2: ("D_NEXT_O_ID - 1 = max(O_ID) = max(NO_O_ID)",
        "SELECT count(*) FROM tpcc.district d "
        "LEFT JOIN (SELECT o_w_id, o_d_id, max(o_id) m FROM tpcc.oorder GROUP BY 1, 2) o ON o.o_w_id = d.d_w_id AND o.o_d_id = d.d_id "
        "LEFT JOIN (SELECT no_w_id, no_d_id, max(no_o_id) m FROM tpcc.new_order GROUP BY 1, 2) n ON n.no_w_id = d.d_w_id AND n.no_d_id = d.d_id "
        "WHERE d.d_next_o_id - 1 <> o.m OR (n.m IS NOT NULL AND n.m <> o.m)"),
    3: ("max(NO_O_ID) - min(NO_O_ID) + 1 = count(NEW_ORDER) per district",
        "SELECT count(*) FROM (SELECT max(no_o_id) - min(no_o_id) + 1 AS span, count(*) AS n FROM tpcc.new_order "
        "GROUP BY no_w_id, no_d_id) x WHERE span <> n"),
    4: ("sum(O_OL_CNT) = count(ORDER_LINE) per district",
        "SELECT count(*) FROM (SELECT o_w_id, o_d_id, sum(o_ol_cnt) s FROM tpcc.oorder GROUP BY 1, 2) o "
        "FULL JOIN (SELECT ol_w_id, ol_d_id, count(*) c FROM tpcc.order_line GROUP BY 1, 2) l "
        "ON l.ol_w_id = o.o_w_id AND l.ol_d_id = o.o_d_id WHERE o.s IS DISTINCT FROM l.c"),
    8: ("W_YTD = sum(H_AMOUNT) per warehouse",
        "SELECT count(*) FROM tpcc.warehouse w LEFT JOIN (SELECT h_w_id, sum(h_amount) s FROM tpcc.history GROUP BY 1) h "
        "ON h.h_w_id = w.w_id WHERE w.w_ytd IS DISTINCT FROM h.s"),
    9: ("D_YTD = sum(H_AMOUNT) per district",
        "SELECT count(*) FROM tpcc.district d LEFT JOIN (SELECT h_w_id, h_d_id, sum(h_amount) s FROM tpcc.history GROUP BY 1, 2) h "
        "ON h.h_w_id = d.d_w_id AND h.h_d_id = d.d_id WHERE d.d_ytd IS DISTINCT FROM h.s"),
}


def check(conn) -> dict[int, tuple[str, int]]:
    """condition -> (description, number of warehouses/districts violating it); 0 violations = holds."""
    return {n: (text, int(conn.execute(query).fetchone()[0])) for n, (text, query) in CONDITIONS.items()}
