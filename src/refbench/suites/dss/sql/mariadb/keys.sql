-- The primary keys, added while the tables are empty, before the load (MariaDB's load runs this right after
-- schema.sql): InnoDB clusters a table on its key, and the generator writes each table in key order, so the load
-- appends to the clustered index. Added after the load instead, each key rebuilt its table (at SF 1 lineitem's
-- 6 million rows once more).
ALTER TABLE region ADD PRIMARY KEY (r_regionkey);
ALTER TABLE nation ADD PRIMARY KEY (n_nationkey);
ALTER TABLE part ADD PRIMARY KEY (p_partkey);
ALTER TABLE supplier ADD PRIMARY KEY (s_suppkey);
ALTER TABLE partsupp ADD PRIMARY KEY (ps_partkey, ps_suppkey);
ALTER TABLE customer ADD PRIMARY KEY (c_custkey);
ALTER TABLE orders ADD PRIMARY KEY (o_orderkey);
ALTER TABLE lineitem ADD PRIMARY KEY (l_orderkey, l_linenumber);
