-- The two secondary indexes the transactions need (customer by last name, a customer's last order), built after the
-- load as on PostgreSQL (one sorted build instead of an insert per row). The keys are schema.sql's: InnoDB's rows
-- live in their primary key. An InnoDB secondary index holds the primary key's columns, so customer_by_name yields
-- C_ID and oorder_by_customer O_ID without visiting the rows.
CREATE INDEX customer_by_name ON customer (c_w_id, c_d_id, c_last, c_first);
CREATE INDEX oorder_by_customer ON oorder (o_w_id, o_d_id, o_c_id, o_id);
