-- The row store's keys and the indexes a DBA would create for these queries: every primary key, an index on
-- every foreign key the joins follow, and the dates the queries filter on. Without lineitem's (l_partkey,
-- l_suppkey) index, Q17 and Q20 run for hours on PostgreSQL. Plain CREATE INDEX only (two builds on one table
-- can run at once; ALTER TABLE would lock the table): keys.sql then makes the unique ones primary keys.
CREATE UNIQUE INDEX region_pkey ON region (r_regionkey);
CREATE UNIQUE INDEX nation_pkey ON nation (n_nationkey);
CREATE UNIQUE INDEX part_pkey ON part (p_partkey);
CREATE UNIQUE INDEX supplier_pkey ON supplier (s_suppkey);
CREATE UNIQUE INDEX partsupp_pkey ON partsupp (ps_partkey, ps_suppkey);
CREATE UNIQUE INDEX customer_pkey ON customer (c_custkey);
CREATE UNIQUE INDEX orders_pkey ON orders (o_orderkey);
CREATE UNIQUE INDEX lineitem_pkey ON lineitem (l_orderkey, l_linenumber);
CREATE INDEX ON nation (n_regionkey);
CREATE INDEX ON supplier (s_nationkey);
CREATE INDEX ON partsupp (ps_suppkey);
CREATE INDEX ON customer (c_nationkey);
CREATE INDEX ON orders (o_custkey);
CREATE INDEX ON orders (o_orderdate);
CREATE INDEX ON lineitem (l_partkey, l_suppkey);
CREATE INDEX ON lineitem (l_suppkey);
CREATE INDEX ON lineitem (l_shipdate);
