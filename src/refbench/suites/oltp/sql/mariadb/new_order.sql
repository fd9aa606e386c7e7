-- New-Order (TPC-C 2.4) as one stored procedure, one CALL per transaction (the way HammerDB drives MariaDB): it
-- starts and commits its own transaction, so call it with autocommit on. The order's lines arrive as one JSON array
-- of [supply warehouse, item id, quantity] triples, read with JSON_TABLE; one array of triples rather than three
-- arrays (PostgreSQL's form) joined on their positions cost about a tenth less server CPU per call (6 of 6 alternating
-- rounds, commit dd722c3). The lines are handled as one set, as in the PostgreSQL version: one UPDATE of the stock rows
-- joined to the items, one INSERT of the order lines. The lines arrive sorted by (supply warehouse, item) and the
-- join walks them in that order (STRAIGHT_JOIN: the JSON table drives, each stock row is found by its key), so
-- concurrent orders lock stock rows in the same order and cannot deadlock over them. An unused item id (1% of orders,
-- always the last line) matches no item: fewer lines than ordered are inserted, and SIGNAL raises error 1644
-- (SQLSTATE 45000) with a message starting 'refbench: unused item', which the handler turns into a rollback of the
-- whole transaction, as the specification requires, before passing it on. Any other error (a deadlock; a lock wait
-- timeout, which InnoDB would otherwise roll back as a statement only) rolls the transaction back too: the procedure
-- never leaves one open. O_ALL_LOCAL and the total are read back from the inserted lines in one statement, and the
-- ORDER row is inserted after them, so nothing reads the JSON twice more.
-- Returns one row: the order's total amount (TPC-C 2.4.2.2), as PostgreSQL's function returns it.
CREATE OR REPLACE PROCEDURE new_order(p_w_id int, p_d_id int, p_c_id int, p_lines text)
BEGIN
  DECLARE v_ol_cnt int DEFAULT JSON_LENGTH(p_lines);
  DECLARE v_all_local, v_o_id int;
  DECLARE v_w_tax, v_d_tax, v_c_discount decimal(4,4);
  DECLARE v_total decimal(12,2);
  DECLARE v_message varchar(128);
  DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN ROLLBACK; RESIGNAL; END;
  START TRANSACTION;
  UPDATE district SET d_next_o_id = d_next_o_id + 1 WHERE d_w_id = p_w_id AND d_id = p_d_id;
  SELECT d_tax, d_next_o_id - 1 INTO v_d_tax, v_o_id FROM district WHERE d_w_id = p_w_id AND d_id = p_d_id;
  SELECT w_tax, c_discount INTO v_w_tax, v_c_discount FROM warehouse, customer
   WHERE w_id = p_w_id AND c_w_id = p_w_id AND c_d_id = p_d_id AND c_id = p_c_id;
  UPDATE JSON_TABLE(p_lines, '$[*]' COLUMNS (w int PATH '$[0]', i_id int PATH '$[1]', quantity int PATH '$[2]')) AS l
         STRAIGHT_JOIN item ON item.i_id = l.i_id
         STRAIGHT_JOIN stock ON s_w_id = l.w AND s_i_id = l.i_id
     SET s_quantity = IF(s_quantity - l.quantity >= 10, s_quantity - l.quantity, s_quantity - l.quantity + 91),
         s_ytd = s_ytd + l.quantity, s_order_cnt = s_order_cnt + 1, s_remote_cnt = s_remote_cnt + (l.w <> p_w_id);
  INSERT INTO order_line (ol_o_id, ol_d_id, ol_w_id, ol_number, ol_i_id, ol_supply_w_id, ol_delivery_d, ol_quantity,
                          ol_amount, ol_dist_info)
    SELECT v_o_id, p_d_id, p_w_id, l.number, l.i_id, l.w, NULL, l.quantity, l.quantity * i_price,
           CASE p_d_id WHEN 1 THEN s_dist_01 WHEN 2 THEN s_dist_02 WHEN 3 THEN s_dist_03 WHEN 4 THEN s_dist_04
                       WHEN 5 THEN s_dist_05 WHEN 6 THEN s_dist_06 WHEN 7 THEN s_dist_07 WHEN 8 THEN s_dist_08
                       WHEN 9 THEN s_dist_09 ELSE s_dist_10 END
      FROM JSON_TABLE(p_lines, '$[*]' COLUMNS (number FOR ORDINALITY, w int PATH '$[0]', i_id int PATH '$[1]',
                                                quantity int PATH '$[2]')) AS l
      STRAIGHT_JOIN item ON item.i_id = l.i_id
      STRAIGHT_JOIN stock ON s_w_id = l.w AND s_i_id = l.i_id;
  IF ROW_COUNT() < v_ol_cnt THEN
    SET v_message = CONCAT('refbench: unused item ', JSON_VALUE(p_lines, CONCAT('$[', v_ol_cnt - 1, '][1]')),
                           ' (the 1% New-Order rollback)');
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_message;
  END IF;
  SELECT sum(ol_amount), min(ol_supply_w_id = p_w_id) INTO v_total, v_all_local
    FROM order_line WHERE ol_w_id = p_w_id AND ol_d_id = p_d_id AND ol_o_id = v_o_id;
  INSERT INTO oorder (o_id, o_d_id, o_w_id, o_c_id, o_entry_d, o_carrier_id, o_ol_cnt, o_all_local)
    VALUES (v_o_id, p_d_id, p_w_id, p_c_id, now(6), NULL, v_ol_cnt, v_all_local);
  INSERT INTO new_order (no_o_id, no_d_id, no_w_id) VALUES (v_o_id, p_d_id, p_w_id);
  COMMIT;
  SELECT v_total * (1 - v_c_discount) * (1 + v_w_tax + v_d_tax) AS total;
END
