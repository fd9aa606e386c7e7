-- indexes.sql's indexes in MariaDB's dialect: every index needs a name. Without them MariaDB's nested loops did not
-- finish Q9 in 10 minutes (the lead's prototype). The keys come before the load (keys.sql).
CREATE INDEX nation_regionkey ON nation (n_regionkey);
CREATE INDEX supplier_nationkey ON supplier (s_nationkey);
CREATE INDEX partsupp_suppkey ON partsupp (ps_suppkey);
CREATE INDEX customer_nationkey ON customer (c_nationkey);
CREATE INDEX orders_custkey ON orders (o_custkey);
CREATE INDEX orders_orderdate ON orders (o_orderdate);
CREATE INDEX lineitem_part_supp ON lineitem (l_partkey, l_suppkey);
CREATE INDEX lineitem_suppkey ON lineitem (l_suppkey);
CREATE INDEX lineitem_shipdate ON lineitem (l_shipdate);
