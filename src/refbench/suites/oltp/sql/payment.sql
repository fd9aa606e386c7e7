-- Payment (TPC-C 2.5): a customer pays; warehouse, district and customer year-to-date totals move together.
-- The customer is chosen by id, or by last name (the middle one of those sorted by first name, 2.5.2.2).
-- A bad-credit customer's C_DATA takes the payment in the same UPDATE, not a second one.
CREATE OR REPLACE FUNCTION tpcc.payment(p_w_id int, p_d_id int, p_c_w_id int, p_c_d_id int, p_c_id int,
                                        p_c_last text, p_amount numeric) RETURNS int AS $$
DECLARE
  v_c_id int := p_c_id; v_ids int[];
BEGIN
  -- The customer first: a name nobody has pays nothing, and must not move W_YTD and D_YTD either (that would
  -- break consistency conditions 8 and 9: year-to-date totals without a HISTORY row).
  IF p_c_last IS NOT NULL THEN
    SELECT array_agg(c_id ORDER BY c_first) INTO v_ids
      FROM tpcc.customer WHERE c_w_id = p_c_w_id AND c_d_id = p_c_d_id AND c_last = p_c_last;
    v_c_id := v_ids[(cardinality(v_ids) + 1) / 2];
    IF v_c_id IS NULL THEN
      RETURN 0;  -- no customer of that name in this district: nothing to pay
    END IF;
  END IF;
  UPDATE tpcc.warehouse SET w_ytd = w_ytd + p_amount WHERE w_id = p_w_id;
  UPDATE tpcc.district SET d_ytd = d_ytd + p_amount WHERE d_w_id = p_w_id AND d_id = p_d_id;
  UPDATE tpcc.customer
     SET c_balance = c_balance - p_amount, c_ytd_payment = c_ytd_payment + p_amount, c_payment_cnt = c_payment_cnt + 1,
         c_data = CASE WHEN c_credit = 'BC'
                       THEN left(format('%s %s %s %s %s %s | ', v_c_id, p_c_d_id, p_c_w_id, p_d_id, p_w_id, p_amount) || c_data, 500)
                       ELSE c_data END
   WHERE c_w_id = p_c_w_id AND c_d_id = p_c_d_id AND c_id = v_c_id;
  INSERT INTO tpcc.history (h_c_id, h_c_d_id, h_c_w_id, h_d_id, h_w_id, h_date, h_amount, h_data)
    VALUES (v_c_id, p_c_d_id, p_c_w_id, p_d_id, p_w_id, now(), p_amount, 'refbench payment');
  RETURN v_c_id;
END $$ LANGUAGE plpgsql;
