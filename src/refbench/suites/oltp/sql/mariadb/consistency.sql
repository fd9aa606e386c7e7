-- The twelve TPC-C consistency conditions (3.3.2) in MariaDB's dialect: consistency.py's statement, read the same
-- way, giving one row of twelve counts of violations in the order of consistency.CONDITIONS (0 = holds). Run the
-- statements of this file in order on one connection (autocommit on); the SELECT takes two parameters in
-- mysqlclient's pyformat, at_load (1 on a freshly loaded database, where condition 11 is checked as written, else 0)
-- and delivered_at_load (2100).
-- One snapshot, as PostgreSQL's one statement has it: every statement reads in the transaction started WITH
-- CONSISTENT SNAPSHOT (InnoDB's repeatable read). It is not one statement here because MariaDB computes a common
-- table expression again for each reference to it, and the orders (each order id with its ORDER, NEW_ORDER and
-- ORDER_LINE facts) are referenced eight times: at 1 warehouse that read ORDER_LINE 18 times and took 2.9 s. They are
-- made once into a temporary table instead (0.4 s), which a READ ONLY transaction may not create, so the transaction
-- is an ordinary one and is rolled back: it writes nothing else.
-- How the SQL maps, PostgreSQL -> MariaDB (which has none of the left-hand forms):
--   FULL JOIN of ORDER, NEW_ORDER and the lines -> the UNION of their order ids, each table LEFT JOINed to it, so
--     that a row without its partners is still seen
--   agg(x) FILTER (WHERE p) -> agg(CASE WHEN p THEN x END)
--   GROUPING SETS over HISTORY -> GROUP BY warehouse, district WITH ROLLUP (the district and warehouse sums in one
--     pass) and a second pass grouped by customer
--   a IS DISTINCT FROM b -> NOT (a <=> b)
--   GROUPING() (which MariaDB lacks) -> the HISTORY keys coalesced to 0 (no warehouse, district or customer has id 0),
--     so that a NULL marks ROLLUP's totals only, never a payment that names no district
-- NULL is a violation wherever a condition reads a value, as in PostgreSQL's file: coalesce(a <> b, true), and sums
-- that are NULL when one of their values is.
-- Money is DECIMAL with two decimals throughout, so the sums are exact and compared exactly, as on PostgreSQL.
START TRANSACTION WITH CONSISTENT SNAPSHOT;
DROP TEMPORARY TABLE IF EXISTS refbench_orders;
CREATE TEMPORARY TABLE refbench_orders (PRIMARY KEY (w, d, o)) AS
WITH order_lines AS (
  SELECT ol_w_id AS w, ol_d_id AS d, ol_o_id AS o, count(*) AS line_count, count(ol_delivery_d) AS delivered_lines,
         CASE WHEN count(CASE WHEN ol_delivery_d IS NOT NULL THEN ol_amount END) = count(ol_delivery_d)
              THEN coalesce(sum(CASE WHEN ol_delivery_d IS NOT NULL THEN ol_amount END), 0) END AS delivered_amount
    FROM order_line GROUP BY ol_w_id, ol_d_id, ol_o_id
), order_ids AS (
  SELECT o_w_id AS w, o_d_id AS d, o_id AS o FROM oorder
  UNION SELECT no_w_id, no_d_id, no_o_id FROM new_order
  UNION SELECT w, d, o FROM order_lines
)
  SELECT k.w, k.d, k.o, o.o_id IS NOT NULL AS in_order, n.no_o_id IS NOT NULL AS in_new_order, o.o_c_id AS c,
         o.o_carrier_id AS carrier, o.o_ol_cnt AS ol_cnt, coalesce(l.line_count, 0) AS line_count,
         coalesce(l.delivered_lines, 0) AS delivered_lines,
         CASE WHEN l.o IS NULL THEN 0 ELSE l.delivered_amount END AS delivered_amount
    FROM order_ids k
    LEFT JOIN oorder o ON o.o_w_id = k.w AND o.o_d_id = k.d AND o.o_id = k.o
    LEFT JOIN new_order n ON n.no_w_id = k.w AND n.no_d_id = k.d AND n.no_o_id = k.o
    LEFT JOIN order_lines l ON l.w = k.w AND l.d = k.d AND l.o = k.o;
-- An order that names no customer, payments that name no warehouse, district or customer: each one a violation of
-- the conditions that would have counted it. Counted once, into variables: a common table expression would be
-- computed again at each of its four references.
SELECT (SELECT count(*) FROM refbench_orders WHERE in_order AND c IS NULL), coalesce(sum(h_w_id IS NULL), 0),
       coalesce(sum(h_w_id IS NULL OR h_d_id IS NULL), 0), coalesce(sum(h_c_w_id IS NULL OR h_c_d_id IS NULL OR h_c_id IS NULL), 0)
  INTO @orders_without_customer, @payments_without_warehouse, @payments_without_district, @payments_without_customer
  FROM history;
WITH order_districts AS (
  SELECT w, d, count(CASE WHEN in_order THEN 1 END) AS orders, max(CASE WHEN in_order THEN o END) AS max_o_id,
         count(CASE WHEN in_new_order THEN 1 END) AS new_orders, min(CASE WHEN in_new_order THEN o END) AS min_no_o_id,
         max(CASE WHEN in_new_order THEN o END) AS max_no_o_id,
         CASE WHEN count(ol_cnt) = count(CASE WHEN in_order THEN 1 END) THEN coalesce(sum(ol_cnt), 0) END AS ol_cnt,
         sum(line_count) AS line_count
    FROM refbench_orders GROUP BY w, d
), paid_by_district AS (
  -- one pass: a row per (warehouse, district), then per warehouse (district NULL), then the grand total (dropped)
  SELECT coalesce(h_w_id, 0) AS h_w_id, coalesce(h_d_id, 0) AS h_d_id,
         CASE WHEN count(h_amount) = count(*) THEN sum(h_amount) END AS amount
    FROM history GROUP BY 1, 2 WITH ROLLUP
), paid_by_customer AS (
  SELECT coalesce(h_c_w_id, 0) AS h_c_w_id, coalesce(h_c_d_id, 0) AS h_c_d_id, coalesce(h_c_id, 0) AS h_c_id,
         CASE WHEN count(h_amount) = count(*) THEN sum(h_amount) END AS amount
    FROM history GROUP BY 1, 2, 3
), districts AS (
  SELECT t.d_w_id AS w, t.d_id AS d, t.d_ytd, t.d_next_o_id, CASE WHEN p.h_w_id IS NULL THEN 0 ELSE p.amount END AS paid,
         od.orders, od.max_o_id, coalesce(od.new_orders, 0) AS new_orders, od.min_no_o_id, od.max_no_o_id,
         CASE WHEN od.w IS NULL THEN 0 ELSE od.ol_cnt END AS ol_cnt, coalesce(od.line_count, 0) AS line_count
    FROM district t
    LEFT JOIN order_districts od ON od.w = t.d_w_id AND od.d = t.d_id
    LEFT JOIN paid_by_district p ON p.h_w_id = t.d_w_id AND p.h_d_id = t.d_id
), customers AS (
  SELECT c.c_balance AS balance, c.c_ytd_payment AS ytd_payment, CASE WHEN o.c IS NULL THEN 0 ELSE o.delivered END AS delivered,
         CASE WHEN p.h_c_id IS NULL THEN 0 ELSE p.amount END AS paid
    FROM customer c
    LEFT JOIN (SELECT w, d, c, CASE WHEN count(delivered_amount) = count(*) THEN sum(delivered_amount) END AS delivered
                 FROM refbench_orders WHERE in_order GROUP BY w, d, c) o
           ON o.w = c.c_w_id AND o.d = c.c_d_id AND o.c = c.c_id
    LEFT JOIN paid_by_customer p ON p.h_c_w_id = c.c_w_id AND p.h_c_d_id = c.c_d_id AND p.h_c_id = c.c_id
), warehouses AS (
  SELECT wh.w_ytd,
         (SELECT CASE WHEN count(t.d_ytd) = count(*) THEN sum(t.d_ytd) END FROM district t WHERE t.d_w_id = wh.w_id)
           AS district_ytd,
         CASE WHEN p.h_w_id IS NULL THEN 0 ELSE p.amount END AS paid
    FROM warehouse wh LEFT JOIN paid_by_district p ON p.h_w_id = wh.w_id AND p.h_d_id IS NULL
)
SELECT
  (SELECT count(*) FROM warehouses WHERE coalesce(w_ytd <> district_ytd, true)),
  (SELECT count(*) FROM districts WHERE coalesce(max_o_id <> d_next_o_id - 1, true)
                                     OR (max_no_o_id IS NOT NULL AND max_no_o_id <> max_o_id)),
  (SELECT count(*) FROM districts WHERE new_orders > 0 AND max_no_o_id - min_no_o_id + 1 <> new_orders),
  (SELECT count(*) FROM districts WHERE coalesce(ol_cnt <> line_count, true)),
  (SELECT count(*) FROM refbench_orders WHERE in_new_order <> (in_order AND carrier IS NULL)),
  (SELECT count(*) FROM refbench_orders WHERE NOT (ol_cnt <=> line_count) AND (in_order OR line_count > 0)),
  (SELECT count(*) FROM refbench_orders WHERE in_order
                                 AND delivered_lines <> CASE WHEN carrier IS NULL THEN 0 ELSE line_count END),
  (SELECT count(*) FROM warehouses WHERE coalesce(w_ytd <> paid, true)) + @payments_without_warehouse,
  (SELECT count(*) FROM districts WHERE coalesce(d_ytd <> paid, true)) + @payments_without_district,
  (SELECT count(*) FROM customers WHERE coalesce(balance <> delivered - paid, true))
    + @orders_without_customer + @payments_without_customer,
  (SELECT count(*) FROM districts
    WHERE coalesce(coalesce(orders, 0) - new_orders <> CASE WHEN %(at_load)s THEN %(delivered_at_load)s
                                                            ELSE coalesce(min_no_o_id, d_next_o_id) - 1 END, true)),
  (SELECT count(*) FROM customers WHERE coalesce(balance + ytd_payment <> delivered, true))
    + @orders_without_customer;
DROP TEMPORARY TABLE refbench_orders;
ROLLBACK;
