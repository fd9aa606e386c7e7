-- The row store's keys and the indexes a DBA would create for these queries: every primary key, an index on
-- every foreign key the joins follow, and the dates the queries filter on. Without lineitem's (l_partkey,
-- l_suppkey) index, Q17 and Q20 run for hours on PostgreSQL.
ALTER TABLE region ADD PRIMARY KEY (r_regionkey);
ALTER TABLE nation ADD PRIMARY KEY (n_nationkey);
ALTER TABLE part ADD PRIMARY KEY (p_partkey);
ALTER TABLE supplier ADD PRIMARY KEY (s_suppkey);
ALTER TABLE partsupp ADD PRIMARY KEY (ps_partkey, ps_suppkey);
ALTER TABLE customer ADD PRIMARY KEY (c_custkey);
ALTER TABLE orders ADD PRIMARY KEY (o_orderkey);
ALTER TABLE lineitem ADD PRIMARY KEY (l_orderkey, l_linenumber);
CREATE INDEX ON nation (n_regionkey);
CREATE INDEX ON supplier (s_nationkey);
CREATE INDEX ON partsupp (ps_suppkey);
CREATE INDEX ON customer (c_nationkey);
CREATE INDEX ON orders (o_custkey);
CREATE INDEX ON orders (o_orderdate);
CREATE INDEX ON lineitem (l_partkey, l_suppkey);
CREATE INDEX ON lineitem (l_suppkey);
CREATE INDEX ON lineitem (l_shipdate);
