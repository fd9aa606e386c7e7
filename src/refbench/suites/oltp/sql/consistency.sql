-- The twelve TPC-C consistency conditions (3.3.2), read by ONE statement, so they see one snapshot (see
-- consistency.py): one row of twelve counts of violations in the order of consistency.CONDITIONS (0 = holds).
-- Parameters: at_load (true on a freshly loaded database, where condition 11 is checked as written) and
-- delivered_at_load (2100).
-- A NULL where a condition reads a value is a violation of that condition: each comparison is coalesce(a <> b, true),
-- and each sum that a NULL would silently shrink (sum() skips NULLs) is NULL itself when one of its values is. Where
-- a row is simply missing (a customer who never paid) the sum is 0, told apart by the join's key, not by coalesce.
-- Every row is read: sequential scans and hash aggregates read each table once, where the planner would otherwise
-- walk ORDER_LINE's primary key (three times the pages at 1 warehouse, in random order). The engine runs the
-- statements in one transaction (a savepoint inside the caller's), so the SET LOCALs end with it.
SET LOCAL enable_indexscan = off;
SET LOCAL work_mem = '64MB';
WITH lines AS MATERIALIZED (
  SELECT ol_w_id AS w, ol_d_id AS d, ol_o_id AS o, count(*) AS lines, count(ol_delivery_d) AS delivered_lines,
         CASE WHEN count(ol_amount) FILTER (WHERE ol_delivery_d IS NOT NULL) = count(ol_delivery_d)
              THEN coalesce(sum(ol_amount) FILTER (WHERE ol_delivery_d IS NOT NULL), 0) END AS delivered_amount
    FROM tpcc.order_line GROUP BY 1, 2, 3
), orders AS MATERIALIZED (
  -- every order id that ORDER, NEW_ORDER or ORDER_LINE names, so that a row without its partners is seen too
  SELECT coalesce(o.o_w_id, n.no_w_id, l.w) AS w, coalesce(o.o_d_id, n.no_d_id, l.d) AS d,
         coalesce(o.o_id, n.no_o_id, l.o) AS o, o.o_id IS NOT NULL AS in_order, n.no_o_id IS NOT NULL AS in_new_order,
         o.o_c_id AS c, o.o_carrier_id AS carrier, o.o_ol_cnt AS ol_cnt, coalesce(l.lines, 0) AS lines,
         coalesce(l.delivered_lines, 0) AS delivered_lines,
         CASE WHEN l.o IS NULL THEN 0 ELSE l.delivered_amount END AS delivered_amount
    FROM tpcc.oorder o
    FULL JOIN tpcc.new_order n ON n.no_w_id = o.o_w_id AND n.no_d_id = o.o_d_id AND n.no_o_id = o.o_id
    FULL JOIN lines l ON l.w = coalesce(o.o_w_id, n.no_w_id) AND l.d = coalesce(o.o_d_id, n.no_d_id)
                     AND l.o = coalesce(o.o_id, n.no_o_id)
), order_districts AS (
  SELECT w, d, count(*) FILTER (WHERE in_order) AS orders, max(o) FILTER (WHERE in_order) AS max_o_id,
         count(*) FILTER (WHERE in_new_order) AS new_orders, min(o) FILTER (WHERE in_new_order) AS min_no_o_id,
         max(o) FILTER (WHERE in_new_order) AS max_no_o_id,
         CASE WHEN count(ol_cnt) = count(*) FILTER (WHERE in_order) THEN coalesce(sum(ol_cnt), 0) END AS ol_cnt,
         sum(lines) AS lines, count(*) FILTER (WHERE in_order AND c IS NULL) AS orders_without_customer
    FROM orders GROUP BY w, d
), payments AS MATERIALIZED (
  -- one pass over HISTORY: sums by the paying warehouse, by the paying district and by the customer who paid
  SELECT CASE GROUPING(h_d_id, h_c_id) WHEN 3 THEN 'warehouse' WHEN 1 THEN 'district' ELSE 'customer' END AS per,
         h_w_id, h_d_id, h_c_w_id, h_c_d_id, h_c_id, CASE WHEN count(h_amount) = count(*) THEN sum(h_amount) END AS amount,
         count(*) AS payments
    FROM tpcc.history GROUP BY GROUPING SETS ((h_w_id), (h_w_id, h_d_id), (h_c_w_id, h_c_d_id, h_c_id))
), districts AS MATERIALIZED (
  SELECT t.d_w_id AS w, t.d_id AS d, t.d_ytd, t.d_next_o_id, CASE WHEN p.per IS NULL THEN 0 ELSE p.amount END AS paid,
         od.orders, od.max_o_id, coalesce(od.new_orders, 0) AS new_orders, od.min_no_o_id, od.max_no_o_id,
         CASE WHEN od.w IS NULL THEN 0 ELSE od.ol_cnt END AS ol_cnt, coalesce(od.lines, 0) AS lines,
         coalesce(od.orders_without_customer, 0) AS orders_without_customer
    FROM tpcc.district t
    LEFT JOIN order_districts od ON od.w = t.d_w_id AND od.d = t.d_id
    LEFT JOIN payments p ON p.per = 'district' AND p.h_w_id = t.d_w_id AND p.h_d_id = t.d_id
), customers AS (
  SELECT c.c_balance AS balance, c.c_ytd_payment AS ytd_payment, CASE WHEN o.c IS NULL THEN 0 ELSE o.delivered END AS delivered,
         CASE WHEN p.per IS NULL THEN 0 ELSE p.amount END AS paid
    FROM tpcc.customer c
    LEFT JOIN (SELECT w, d, c, CASE WHEN count(delivered_amount) = count(*) THEN sum(delivered_amount) END AS delivered
                 FROM orders WHERE in_order GROUP BY 1, 2, 3) o
           ON o.w = c.c_w_id AND o.d = c.c_d_id AND o.c = c.c_id
    LEFT JOIN payments p ON p.per = 'customer' AND p.h_c_w_id = c.c_w_id AND p.h_c_d_id = c.c_d_id AND p.h_c_id = c.c_id
), unattributed AS (
  -- an order that names no customer, payments that name no warehouse, district or customer: each one a violation
  -- of the conditions that would have counted it
  SELECT coalesce((SELECT sum(orders_without_customer) FROM districts), 0) AS orders_without_customer,
         coalesce(sum(payments) FILTER (WHERE per = 'warehouse' AND h_w_id IS NULL), 0) AS payments_without_warehouse,
         coalesce(sum(payments) FILTER (WHERE per = 'district' AND (h_w_id IS NULL OR h_d_id IS NULL)), 0)
           AS payments_without_district,
         coalesce(sum(payments) FILTER (WHERE per = 'customer' AND (h_c_w_id IS NULL OR h_c_d_id IS NULL OR h_c_id IS NULL)), 0)
           AS payments_without_customer
    FROM payments
), warehouses AS (
  SELECT wh.w_ytd,
         (SELECT CASE WHEN count(t.d_ytd) = count(*) THEN sum(t.d_ytd) END FROM districts t WHERE t.w = wh.w_id) AS district_ytd,
         CASE WHEN p.per IS NULL THEN 0 ELSE p.amount END AS paid
    FROM tpcc.warehouse wh LEFT JOIN payments p ON p.per = 'warehouse' AND p.h_w_id = wh.w_id
)
SELECT
  (SELECT count(*) FROM warehouses WHERE coalesce(w_ytd <> district_ytd, true)),
  (SELECT count(*) FROM districts WHERE coalesce(max_o_id <> d_next_o_id - 1, true)
                                     OR (max_no_o_id IS NOT NULL AND max_no_o_id <> max_o_id)),
  (SELECT count(*) FROM districts WHERE new_orders > 0 AND max_no_o_id - min_no_o_id + 1 <> new_orders),
  (SELECT count(*) FROM districts WHERE coalesce(ol_cnt <> lines, true)),
  (SELECT count(*) FROM orders WHERE in_new_order <> (in_order AND carrier IS NULL)),
  (SELECT count(*) FROM orders WHERE ol_cnt IS DISTINCT FROM lines AND (in_order OR lines > 0)),
  (SELECT count(*) FROM orders WHERE in_order
                                 AND delivered_lines <> CASE WHEN carrier IS NULL THEN 0 ELSE lines END),
  (SELECT count(*) FROM warehouses WHERE coalesce(w_ytd <> paid, true)) + (SELECT payments_without_warehouse FROM unattributed),
  (SELECT count(*) FROM districts WHERE coalesce(d_ytd <> paid, true)) + (SELECT payments_without_district FROM unattributed),
  (SELECT count(*) FROM customers WHERE coalesce(balance <> delivered - paid, true))
    + (SELECT orders_without_customer + payments_without_customer FROM unattributed),
  (SELECT count(*) FROM districts
    WHERE coalesce(coalesce(orders, 0) - new_orders <> CASE WHEN %(at_load)s THEN %(delivered_at_load)s
                                                            ELSE coalesce(min_no_o_id, d_next_o_id) - 1 END, true)),
  (SELECT count(*) FROM customers WHERE coalesce(balance + ytd_payment <> delivered, true))
    + (SELECT orders_without_customer FROM unattributed);
