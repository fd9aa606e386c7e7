-- Order-Status (TPC-C 2.6), read-only, as one stored procedure: a customer's balance, last order and its lines, read
-- in one read-only transaction so that they come from one snapshot. The customer is chosen as Payment chooses it
-- (the middle one by first name when named by last name). Returns one row: the number of lines of the customer's last
-- order (0 when nobody in the district has that name), as PostgreSQL's function returns it.
CREATE OR REPLACE PROCEDURE order_status(p_w_id int, p_d_id int, p_c_id int, p_c_last varchar(16))
status: BEGIN
  DECLARE v_c_id int DEFAULT p_c_id;
  DECLARE v_count, v_middle, v_o_id, v_lines int;
  DECLARE v_balance decimal(12,2);
  DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN ROLLBACK; RESIGNAL; END;
  IF p_c_last IS NOT NULL THEN
    SELECT count(*) INTO v_count FROM customer WHERE c_w_id = p_w_id AND c_d_id = p_d_id AND c_last = p_c_last;
    IF v_count = 0 THEN
      SELECT 0 AS line_count;
      LEAVE status;
    END IF;
    SET v_middle = (v_count - 1) DIV 2;
    SELECT c_id INTO v_c_id FROM customer WHERE c_w_id = p_w_id AND c_d_id = p_d_id AND c_last = p_c_last
     ORDER BY c_first LIMIT v_middle, 1;
  END IF;
  START TRANSACTION READ ONLY;
  SELECT c_balance INTO v_balance FROM customer WHERE c_w_id = p_w_id AND c_d_id = p_d_id AND c_id = v_c_id;
  -- max(), not ORDER BY … LIMIT 1: a customer without orders gives NULL and no "no data" warning
  SELECT max(o_id) INTO v_o_id FROM oorder WHERE o_w_id = p_w_id AND o_d_id = p_d_id AND o_c_id = v_c_id;
  SELECT count(*) INTO v_lines FROM (
    SELECT ol_i_id, ol_supply_w_id, ol_quantity, ol_amount, ol_delivery_d FROM order_line
     WHERE ol_w_id = p_w_id AND ol_d_id = p_d_id AND ol_o_id = v_o_id) order_lines;
  COMMIT;
  SELECT v_lines AS line_count;
END
