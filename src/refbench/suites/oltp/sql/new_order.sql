-- New-Order (TPC-C 2.4): enter an order of 5-15 lines. Items arrive sorted by (supply warehouse, item) so
-- concurrent orders lock stock rows in the same order and cannot deadlock. An unused item id (1% of orders,
-- always the last line) raises an error: the whole transaction rolls back, as the specification requires.
CREATE OR REPLACE FUNCTION tpcc.new_order(p_w_id int, p_d_id int, p_c_id int, p_item_ids int[],
                                          p_supply_w_ids int[], p_quantities int[]) RETURNS numeric AS $$
DECLARE
  v_ol_cnt int := array_length(p_item_ids, 1);
  v_all_local int := CASE WHEN p_supply_w_ids <@ ARRAY[p_w_id] THEN 1 ELSE 0 END;
  v_w_tax numeric; v_d_tax numeric; v_o_id int; v_c_discount numeric;
  v_price numeric; v_dist char(24); v_amount numeric; v_total numeric := 0;
BEGIN
  SELECT w_tax INTO v_w_tax FROM tpcc.warehouse WHERE w_id = p_w_id;
  UPDATE tpcc.district SET d_next_o_id = d_next_o_id + 1 WHERE d_w_id = p_w_id AND d_id = p_d_id
    RETURNING d_tax, d_next_o_id - 1 INTO v_d_tax, v_o_id;
  SELECT c_discount INTO v_c_discount FROM tpcc.customer WHERE c_w_id = p_w_id AND c_d_id = p_d_id AND c_id = p_c_id;
  INSERT INTO tpcc.oorder (o_id, o_d_id, o_w_id, o_c_id, o_entry_d, o_carrier_id, o_ol_cnt, o_all_local)
    VALUES (v_o_id, p_d_id, p_w_id, p_c_id, now(), NULL, v_ol_cnt, v_all_local);
  INSERT INTO tpcc.new_order (no_o_id, no_d_id, no_w_id) VALUES (v_o_id, p_d_id, p_w_id);
  FOR i IN 1..v_ol_cnt LOOP
    SELECT i_price INTO v_price FROM tpcc.item WHERE i_id = p_item_ids[i];
    IF NOT FOUND THEN
      RAISE EXCEPTION 'refbench: unused item % (the 1%% New-Order rollback)', p_item_ids[i] USING ERRCODE = 'RB001';
    END IF;
    UPDATE tpcc.stock
       SET s_quantity = CASE WHEN s_quantity - p_quantities[i] >= 10 THEN s_quantity - p_quantities[i]
                             ELSE s_quantity - p_quantities[i] + 91 END,
           s_ytd = s_ytd + p_quantities[i], s_order_cnt = s_order_cnt + 1,
           s_remote_cnt = s_remote_cnt + CASE WHEN p_supply_w_ids[i] <> p_w_id THEN 1 ELSE 0 END
     WHERE s_i_id = p_item_ids[i] AND s_w_id = p_supply_w_ids[i]
    RETURNING CASE p_d_id WHEN 1 THEN s_dist_01 WHEN 2 THEN s_dist_02 WHEN 3 THEN s_dist_03 WHEN 4 THEN s_dist_04
                          WHEN 5 THEN s_dist_05 WHEN 6 THEN s_dist_06 WHEN 7 THEN s_dist_07 WHEN 8 THEN s_dist_08
                          WHEN 9 THEN s_dist_09 ELSE s_dist_10 END INTO v_dist;
    v_amount := p_quantities[i] * v_price;
    INSERT INTO tpcc.order_line (ol_o_id, ol_d_id, ol_w_id, ol_number, ol_i_id, ol_supply_w_id, ol_delivery_d,
                                 ol_quantity, ol_amount, ol_dist_info)
      VALUES (v_o_id, p_d_id, p_w_id, i, p_item_ids[i], p_supply_w_ids[i], NULL, p_quantities[i], v_amount, v_dist);
    v_total := v_total + v_amount;
  END LOOP;
  RETURN v_total * (1 - v_c_discount) * (1 + v_w_tax + v_d_tax);
END $$ LANGUAGE plpgsql;
