-- Payment (TPC-C 2.5) as one stored procedure that starts and commits its own transaction (call it with autocommit
-- on): a customer pays; warehouse, district and customer year-to-date totals move together. The customer is chosen
-- by id, or by last name: the middle one of those sorted by first name (2.5.2.2), position (n + 1) / 2 of n counting
-- from 1, as PostgreSQL's v_ids[(cardinality(v_ids) + 1) / 2]; the count and the pick both read the customer_by_name
-- index alone, before the transaction starts (names never change). A bad-credit customer's C_DATA takes the payment
-- in the same UPDATE, not a second one. Rows are locked in the PostgreSQL version's order: warehouse, district,
-- customer. Any error rolls the whole transaction back before it is passed on.
-- Returns one row: the paying customer's id, 0 when nobody in the district has that name.
CREATE OR REPLACE PROCEDURE payment(p_w_id int, p_d_id int, p_c_w_id int, p_c_d_id int, p_c_id int,
                                    p_c_last varchar(16), p_amount decimal(6,2))
pay: BEGIN
  DECLARE v_c_id int DEFAULT p_c_id;
  DECLARE v_count, v_middle int;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN ROLLBACK; RESIGNAL; END;
  IF p_c_last IS NOT NULL THEN
    SELECT count(*) INTO v_count FROM customer WHERE c_w_id = p_c_w_id AND c_d_id = p_c_d_id AND c_last = p_c_last;
    -- The customer first: a name nobody has pays nothing, and must not move W_YTD and D_YTD either (that would
    -- break consistency conditions 8 and 9: year-to-date totals without a HISTORY row).
    IF v_count = 0 THEN
      SELECT 0 AS c_id;
      LEAVE pay;
    END IF;
    SET v_middle = (v_count - 1) DIV 2;  -- (n + 1) / 2 counted from 1 is (n - 1) / 2 counted from 0
    SELECT c_id INTO v_c_id FROM customer WHERE c_w_id = p_c_w_id AND c_d_id = p_c_d_id AND c_last = p_c_last
     ORDER BY c_first LIMIT v_middle, 1;
  END IF;
  START TRANSACTION;
  UPDATE warehouse SET w_ytd = w_ytd + p_amount WHERE w_id = p_w_id;
  UPDATE district SET d_ytd = d_ytd + p_amount WHERE d_w_id = p_w_id AND d_id = p_d_id;
  UPDATE customer
     SET c_balance = c_balance - p_amount, c_ytd_payment = c_ytd_payment + p_amount, c_payment_cnt = c_payment_cnt + 1,
         c_data = IF(c_credit = 'BC',
                     LEFT(CONCAT(CONCAT_WS(' ', v_c_id, p_c_d_id, p_c_w_id, p_d_id, p_w_id, p_amount), ' | ', c_data), 500),
                     c_data)
   WHERE c_w_id = p_c_w_id AND c_d_id = p_c_d_id AND c_id = v_c_id;
  INSERT INTO history (h_c_id, h_c_d_id, h_c_w_id, h_d_id, h_w_id, h_date, h_amount, h_data)
    VALUES (v_c_id, p_c_d_id, p_c_w_id, p_d_id, p_w_id, now(6), p_amount, 'refbench payment');
  COMMIT;
  SELECT v_c_id AS c_id;
END
