-- Stock-Level (TPC-C 2.8), read-only: how many distinct items of the district's last 20 orders are below a threshold.
-- PL/pgSQL, not a SQL function: its plans are cached per connection instead of planned on every call.
CREATE OR REPLACE FUNCTION tpcc.stock_level(p_w_id int, p_d_id int, p_threshold int) RETURNS int AS $$
DECLARE
  v_next_o_id int; v_low int;
BEGIN
  SELECT d_next_o_id INTO v_next_o_id FROM tpcc.district WHERE d_w_id = p_w_id AND d_id = p_d_id;
  SELECT count(DISTINCT s_i_id) INTO v_low
    FROM tpcc.order_line JOIN tpcc.stock ON s_w_id = ol_w_id AND s_i_id = ol_i_id
   WHERE ol_w_id = p_w_id AND ol_d_id = p_d_id AND ol_o_id >= v_next_o_id - 20 AND ol_o_id < v_next_o_id
     AND s_quantity < p_threshold;
  RETURN v_low;
END $$ LANGUAGE plpgsql;
