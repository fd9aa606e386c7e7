-- Order-Status (TPC-C 2.6), read-only: a customer's balance, last order and its lines.
CREATE OR REPLACE FUNCTION tpcc.order_status(p_w_id int, p_d_id int, p_c_id int, p_c_last text) RETURNS int AS $$
DECLARE
  v_c_id int := p_c_id; v_ids int[]; v_balance numeric; v_o_id int; v_lines int;
BEGIN
  IF p_c_last IS NOT NULL THEN
    SELECT array_agg(c_id ORDER BY c_first) INTO v_ids
      FROM tpcc.customer WHERE c_w_id = p_w_id AND c_d_id = p_d_id AND c_last = p_c_last;
    v_c_id := v_ids[(cardinality(v_ids) + 1) / 2];
    IF v_c_id IS NULL THEN
      RETURN 0;
    END IF;
  END IF;
  SELECT c_balance INTO v_balance FROM tpcc.customer WHERE c_w_id = p_w_id AND c_d_id = p_d_id AND c_id = v_c_id;
  SELECT o_id INTO v_o_id FROM tpcc.oorder WHERE o_w_id = p_w_id AND o_d_id = p_d_id AND o_c_id = v_c_id
    ORDER BY o_id DESC LIMIT 1;
  SELECT count(*) INTO v_lines FROM (
    SELECT ol_i_id, ol_supply_w_id, ol_quantity, ol_amount, ol_delivery_d FROM tpcc.order_line
     WHERE ol_w_id = p_w_id AND ol_d_id = p_d_id AND ol_o_id = v_o_id) lines;
  RETURN v_lines;
END $$ LANGUAGE plpgsql;
