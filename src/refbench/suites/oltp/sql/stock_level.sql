-- Stock-Level (TPC-C 2.8), read-only: how many distinct items of the district's last 20 orders are below a threshold.
CREATE OR REPLACE FUNCTION tpcc.stock_level(p_w_id int, p_d_id int, p_threshold int) RETURNS int AS $$
  SELECT count(DISTINCT s_i_id)::int
    FROM tpcc.district d
    JOIN tpcc.order_line ol ON ol.ol_w_id = d.d_w_id AND ol.ol_d_id = d.d_id
                           AND ol.ol_o_id >= d.d_next_o_id - 20 AND ol.ol_o_id < d.d_next_o_id
    JOIN tpcc.stock s ON s.s_w_id = ol.ol_w_id AND s.s_i_id = ol.ol_i_id
   WHERE d.d_w_id = p_w_id AND d.d_id = p_d_id AND s.s_quantity < p_threshold
$$ LANGUAGE sql STABLE;
