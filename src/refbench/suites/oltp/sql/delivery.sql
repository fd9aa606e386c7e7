-- Delivery (TPC-C 2.7): deliver the oldest undelivered order of each of the warehouse's ten districts.
-- A district whose oldest order another Delivery took meanwhile is skipped, which the specification allows.
CREATE OR REPLACE FUNCTION tpcc.delivery(p_w_id int, p_carrier_id int) RETURNS int AS $$
DECLARE
  v_o_id int; v_c_id int; v_total numeric; v_delivered int := 0;
BEGIN
  FOR v_d_id IN 1..10 LOOP
    DELETE FROM tpcc.new_order
     WHERE no_w_id = p_w_id AND no_d_id = v_d_id
       AND no_o_id = (SELECT min(no_o_id) FROM tpcc.new_order WHERE no_w_id = p_w_id AND no_d_id = v_d_id)
    RETURNING no_o_id INTO v_o_id;
    CONTINUE WHEN v_o_id IS NULL;
    UPDATE tpcc.oorder SET o_carrier_id = p_carrier_id WHERE o_w_id = p_w_id AND o_d_id = v_d_id AND o_id = v_o_id
      RETURNING o_c_id INTO v_c_id;
    UPDATE tpcc.order_line SET ol_delivery_d = now() WHERE ol_w_id = p_w_id AND ol_d_id = v_d_id AND ol_o_id = v_o_id;
    SELECT sum(ol_amount) INTO v_total FROM tpcc.order_line WHERE ol_w_id = p_w_id AND ol_d_id = v_d_id AND ol_o_id = v_o_id;
    UPDATE tpcc.customer SET c_balance = c_balance + v_total, c_delivery_cnt = c_delivery_cnt + 1
     WHERE c_w_id = p_w_id AND c_d_id = v_d_id AND c_id = v_c_id;
    v_delivered := v_delivered + 1;
    v_o_id := NULL;
  END LOOP;
  RETURN v_delivered;
END $$ LANGUAGE plpgsql;
