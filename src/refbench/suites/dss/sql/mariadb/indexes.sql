-- indexes.sql's keys and indexes in MariaDB's dialect: every index needs a name. Without them MariaDB's nested
-- loops did not finish Q9 in 10 minutes (the lead's prototype). The unique ones stay unique indexes (keys.sql says why).
CREATE UNIQUE INDEX region_pkey ON region (r_regionkey);
CREATE UNIQUE INDEX nation_pkey ON nation (n_nationkey);
CREATE UNIQUE INDEX part_pkey ON part (p_partkey);
CREATE UNIQUE INDEX supplier_pkey ON supplier (s_suppkey);
CREATE UNIQUE INDEX partsupp_pkey ON partsupp (ps_partkey, ps_suppkey);
CREATE UNIQUE INDEX customer_pkey ON customer (c_custkey);
CREATE UNIQUE INDEX orders_pkey ON orders (o_orderkey);
CREATE UNIQUE INDEX lineitem_pkey ON lineitem (l_orderkey, l_linenumber);
CREATE INDEX nation_regionkey ON nation (n_regionkey);
CREATE INDEX supplier_nationkey ON supplier (s_nationkey);
CREATE INDEX partsupp_suppkey ON partsupp (ps_suppkey);
CREATE INDEX customer_nationkey ON customer (c_nationkey);
CREATE INDEX orders_custkey ON orders (o_custkey);
CREATE INDEX orders_orderdate ON orders (o_orderdate);
CREATE INDEX lineitem_part_supp ON lineitem (l_partkey, l_suppkey);
CREATE INDEX lineitem_suppkey ON lineitem (l_suppkey);
CREATE INDEX lineitem_shipdate ON lineitem (l_shipdate);
