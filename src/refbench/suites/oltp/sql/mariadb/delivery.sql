-- Delivery (TPC-C 2.7) as one stored procedure, one transaction: deliver the oldest undelivered order of each of the
-- warehouse's ten districts, district by district, as HammerDB's MariaDB procedure does (MariaDB's UPDATE returns no
-- rows, so PostgreSQL's one statement over the ten districts has no direct equivalent). Each district's oldest
-- NEW_ORDER row is locked before it is read (FOR UPDATE reads the newest committed version): a Delivery that took it
-- meanwhile makes this one wait and then take the next oldest, so orders are always delivered oldest first, which
-- consistency conditions 3 and 11 rely on. (SKIP LOCKED would skip to a younger order instead.) A district with no
-- undelivered order is skipped, as the specification allows. Any error rolls the whole transaction back before it is
-- passed on. Returns one row: the number of districts delivered, as PostgreSQL's function returns it.
CREATE OR REPLACE PROCEDURE delivery(p_w_id int, p_carrier_id int)
BEGIN
  DECLARE v_d_id int DEFAULT 1;
  DECLARE v_delivered int DEFAULT 0;
  DECLARE v_o_id, v_c_id int;
  DECLARE v_amount decimal(12,2);
  DECLARE v_now datetime(6) DEFAULT now(6);
  DECLARE CONTINUE HANDLER FOR NOT FOUND SET v_o_id = NULL;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN ROLLBACK; RESIGNAL; END;
  START TRANSACTION;
  WHILE v_d_id <= 10 DO
    SET v_o_id = NULL;
    SELECT no_o_id INTO v_o_id FROM new_order WHERE no_w_id = p_w_id AND no_d_id = v_d_id
     ORDER BY no_o_id LIMIT 1 FOR UPDATE;
    IF v_o_id IS NOT NULL THEN
      DELETE FROM new_order WHERE no_w_id = p_w_id AND no_d_id = v_d_id AND no_o_id = v_o_id;
      SELECT o_c_id, (SELECT sum(ol_amount) FROM order_line
                       WHERE ol_w_id = p_w_id AND ol_d_id = v_d_id AND ol_o_id = v_o_id)
        INTO v_c_id, v_amount FROM oorder WHERE o_w_id = p_w_id AND o_d_id = v_d_id AND o_id = v_o_id;
      UPDATE oorder SET o_carrier_id = p_carrier_id WHERE o_w_id = p_w_id AND o_d_id = v_d_id AND o_id = v_o_id;
      UPDATE order_line SET ol_delivery_d = v_now WHERE ol_w_id = p_w_id AND ol_d_id = v_d_id AND ol_o_id = v_o_id;
      UPDATE customer SET c_balance = c_balance + v_amount, c_delivery_cnt = c_delivery_cnt + 1
       WHERE c_w_id = p_w_id AND c_d_id = v_d_id AND c_id = v_c_id;
      SET v_delivered = v_delivered + 1;
    END IF;
    SET v_d_id = v_d_id + 1;
  END WHILE;
  COMMIT;
  SELECT v_delivered AS delivered;
END
