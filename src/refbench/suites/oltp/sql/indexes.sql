-- Keys and the two secondary indexes the transactions need (customer by last name, a customer's last order).
ALTER TABLE tpcc.warehouse ADD PRIMARY KEY (w_id);
ALTER TABLE tpcc.district ADD PRIMARY KEY (d_w_id, d_id);
ALTER TABLE tpcc.customer ADD PRIMARY KEY (c_w_id, c_d_id, c_id);
CREATE INDEX customer_by_name ON tpcc.customer (c_w_id, c_d_id, c_last, c_first);
ALTER TABLE tpcc.oorder ADD PRIMARY KEY (o_w_id, o_d_id, o_id);
CREATE INDEX oorder_by_customer ON tpcc.oorder (o_w_id, o_d_id, o_c_id, o_id);
ALTER TABLE tpcc.new_order ADD PRIMARY KEY (no_w_id, no_d_id, no_o_id);
ALTER TABLE tpcc.order_line ADD PRIMARY KEY (ol_w_id, ol_d_id, ol_o_id, ol_number);
ALTER TABLE tpcc.item ADD PRIMARY KEY (i_id);
ALTER TABLE tpcc.stock ADD PRIMARY KEY (s_w_id, s_i_id);
