-- Stock-Level (TPC-C 2.8), read-only, as one stored procedure: how many distinct items of the district's last 20
-- orders have less stock than the threshold, read in one read-only transaction. Returns one row: that count.
CREATE OR REPLACE PROCEDURE stock_level(p_w_id int, p_d_id int, p_threshold int)
BEGIN
  DECLARE v_next_o_id, v_low int;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN ROLLBACK; RESIGNAL; END;
  START TRANSACTION READ ONLY;
  SELECT d_next_o_id INTO v_next_o_id FROM district WHERE d_w_id = p_w_id AND d_id = p_d_id;
  SELECT count(DISTINCT s_i_id) INTO v_low
    FROM order_line JOIN stock ON s_w_id = ol_w_id AND s_i_id = ol_i_id
   WHERE ol_w_id = p_w_id AND ol_d_id = p_d_id AND ol_o_id >= v_next_o_id - 20 AND ol_o_id < v_next_o_id
     AND s_quantity < p_threshold;
  COMMIT;
  SELECT v_low AS low_stock;
END
