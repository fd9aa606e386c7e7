-- The primary keys, on the unique indexes indexes.sql built (the columns are NOT NULL: no scan, only the catalog).
ALTER TABLE region ADD PRIMARY KEY USING INDEX region_pkey;
ALTER TABLE nation ADD PRIMARY KEY USING INDEX nation_pkey;
ALTER TABLE part ADD PRIMARY KEY USING INDEX part_pkey;
ALTER TABLE supplier ADD PRIMARY KEY USING INDEX supplier_pkey;
ALTER TABLE partsupp ADD PRIMARY KEY USING INDEX partsupp_pkey;
ALTER TABLE customer ADD PRIMARY KEY USING INDEX customer_pkey;
ALTER TABLE orders ADD PRIMARY KEY USING INDEX orders_pkey;
ALTER TABLE lineitem ADD PRIMARY KEY USING INDEX lineitem_pkey;
