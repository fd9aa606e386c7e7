-- Payment (TPC-C 2.5): a customer pays; warehouse, district and customer year-to-date totals move together.
-- The customer is chosen by id, or by last name (the middle one of those sorted by first name).
CREATE OR REPLACE FUNCTION tpcc.payment(p_w_id int, p_d_id int, p_c_w_id int, p_c_d_id int, p_c_id int,
                                        p_c_last text, p_amount numeric) RETURNS int AS $$
DECLARE
  v_c_id int := p_c_id; v_credit char(2); v_count int;
BEGIN
  UPDATE tpcc.warehouse SET w_ytd = w_ytd + p_amount WHERE w_id = p_w_id;
  UPDATE tpcc.district SET d_ytd = d_ytd + p_amount WHERE d_w_id = p_w_id AND d_id = p_d_id;
  IF p_c_last IS NOT NULL THEN
    SELECT count(*) INTO v_count FROM tpcc.customer WHERE c_w_id = p_c_w_id AND c_d_id = p_c_d_id AND c_last = p_c_last;
    SELECT c_id INTO v_c_id FROM tpcc.customer WHERE c_w_id = p_c_w_id AND c_d_id = p_c_d_id AND c_last = p_c_last
      ORDER BY c_first OFFSET GREATEST((v_count - 1) / 2, 0) LIMIT 1;
    IF NOT FOUND THEN
      RETURN 0;  -- no customer of that name in this district: nothing to pay
    END IF;
  END IF;
  UPDATE tpcc.customer
     SET c_balance = c_balance - p_amount, c_ytd_payment = c_ytd_payment + p_amount, c_payment_cnt = c_payment_cnt + 1
   WHERE c_w_id = p_c_w_id AND c_d_id = p_c_d_id AND c_id = v_c_id
  RETURNING c_credit INTO v_credit;
  IF v_credit = 'BC' THEN
    UPDATE tpcc.customer
       SET c_data = left(format('%s %s %s %s %s %s | ', v_c_id, p_c_d_id, p_c_w_id, p_d_id, p_w_id, p_amount) || c_data, 500)
     WHERE c_w_id = p_c_w_id AND c_d_id = p_c_d_id AND c_id = v_c_id;
  END IF;
  INSERT INTO tpcc.history (h_c_id, h_c_d_id, h_c_w_id, h_d_id, h_w_id, h_date, h_amount, h_data)
    VALUES (v_c_id, p_c_d_id, p_c_w_id, p_d_id, p_w_id, now(), p_amount, 'refbench payment');
  RETURN v_c_id;
END $$ LANGUAGE plpgsql;
