"""The 22 decision-support queries (TPC-H 2.17.3 clause 2.4), their substitution parameters, and the stream
orders (Appendix A). One SQL text serves both engines: DuckDB and PostgreSQL share every construct used here.

Stream 0 uses the validation parameters, whose answers are known (../reference answers at SF1); every other
stream draws its parameters at random from the specification's ranges, seeded, so a run can be repeated.
"""

from __future__ import annotations

import random
from datetime import date

QUERIES: dict[int, str] = {
    1: """
select l_returnflag, l_linestatus, sum(l_quantity) as sum_qty, sum(l_extendedprice) as sum_base_price,
       sum(l_extendedprice * (1 - l_discount)) as sum_disc_price,
       sum(l_extendedprice * (1 - l_discount) * (1 + l_tax)) as sum_charge, avg(l_quantity) as avg_qty,
       avg(l_extendedprice) as avg_price, avg(l_discount) as avg_disc, count(*) as count_order
from lineitem
where l_shipdate <= date '1998-12-01' - interval '{delta}' day
group by l_returnflag, l_linestatus
order by l_returnflag, l_linestatus""",
    2: """
select s_acctbal, s_name, n_name, p_partkey, p_mfgr, s_address, s_phone, s_comment
from part, supplier, partsupp, nation, region
where p_partkey = ps_partkey and s_suppkey = ps_suppkey and p_size = {size} and p_type like '%{type}'
  and s_nationkey = n_nationkey and n_regionkey = r_regionkey and r_name = '{region}'
  and ps_supplycost = (select min(ps_supplycost) from partsupp, supplier, nation, region
                       where p_partkey = ps_partkey and s_suppkey = ps_suppkey and s_nationkey = n_nationkey
                         and n_regionkey = r_regionkey and r_name = '{region}')
order by s_acctbal desc, n_name, s_name, p_partkey
limit 100""",
    3: """
select l_orderkey, sum(l_extendedprice * (1 - l_discount)) as revenue, o_orderdate, o_shippriority
from customer, orders, lineitem
where c_mktsegment = '{segment}' and c_custkey = o_custkey and l_orderkey = o_orderkey
  and o_orderdate < date '{date}' and l_shipdate > date '{date}'
group by l_orderkey, o_orderdate, o_shippriority
order by revenue desc, o_orderdate
limit 10""",
    4: """
select o_orderpriority, count(*) as order_count
from orders
where o_orderdate >= date '{date}' and o_orderdate < date '{date}' + interval '3' month
  and exists (select * from lineitem where l_orderkey = o_orderkey and l_commitdate < l_receiptdate)
group by o_orderpriority
order by o_orderpriority""",
    5: """
select n_name, sum(l_extendedprice * (1 - l_discount)) as revenue
from customer, orders, lineitem, supplier, nation, region
where c_custkey = o_custkey and l_orderkey = o_orderkey and l_suppkey = s_suppkey and c_nationkey = s_nationkey
  and s_nationkey = n_nationkey and n_regionkey = r_regionkey and r_name = '{region}'
  and o_orderdate >= date '{date}' and o_orderdate < date '{date}' + interval '1' year
group by n_name
order by revenue desc""",
    6: """
select sum(l_extendedprice * l_discount) as revenue
from lineitem
where l_shipdate >= date '{date}' and l_shipdate < date '{date}' + interval '1' year
  and l_discount between {discount} - 0.01 and {discount} + 0.01 and l_quantity < {quantity}""",
    7: """
select supp_nation, cust_nation, l_year, sum(volume) as revenue
from (select n1.n_name as supp_nation, n2.n_name as cust_nation, extract(year from l_shipdate) as l_year,
             l_extendedprice * (1 - l_discount) as volume
      from supplier, lineitem, orders, customer, nation n1, nation n2
      where s_suppkey = l_suppkey and o_orderkey = l_orderkey and c_custkey = o_custkey
        and s_nationkey = n1.n_nationkey and c_nationkey = n2.n_nationkey
        and ((n1.n_name = '{nation1}' and n2.n_name = '{nation2}') or (n1.n_name = '{nation2}' and n2.n_name = '{nation1}'))
        and l_shipdate between date '1995-01-01' and date '1996-12-31') as shipping
group by supp_nation, cust_nation, l_year
order by supp_nation, cust_nation, l_year""",
    8: """
select o_year, sum(case when nation = '{nation}' then volume else 0 end) / sum(volume) as mkt_share
from (select extract(year from o_orderdate) as o_year, l_extendedprice * (1 - l_discount) as volume,
             n2.n_name as nation
      from part, supplier, lineitem, orders, customer, nation n1, nation n2, region
      where p_partkey = l_partkey and s_suppkey = l_suppkey and l_orderkey = o_orderkey and o_custkey = c_custkey
        and c_nationkey = n1.n_nationkey and n1.n_regionkey = r_regionkey and r_name = '{region}'
        and s_nationkey = n2.n_nationkey and o_orderdate between date '1995-01-01' and date '1996-12-31'
        and p_type = '{type}') as all_nations
group by o_year
order by o_year""",
    9: """
select nation, o_year, sum(amount) as sum_profit
from (select n_name as nation, extract(year from o_orderdate) as o_year,
             l_extendedprice * (1 - l_discount) - ps_supplycost * l_quantity as amount
      from part, supplier, lineitem, partsupp, orders, nation
      where s_suppkey = l_suppkey and ps_suppkey = l_suppkey and ps_partkey = l_partkey and p_partkey = l_partkey
        and o_orderkey = l_orderkey and s_nationkey = n_nationkey and p_name like '%{color}%') as profit
group by nation, o_year
order by nation, o_year desc""",
    10: """
select c_custkey, c_name, sum(l_extendedprice * (1 - l_discount)) as revenue, c_acctbal, n_name, c_address,
       c_phone, c_comment
from customer, orders, lineitem, nation
where c_custkey = o_custkey and l_orderkey = o_orderkey and o_orderdate >= date '{date}'
  and o_orderdate < date '{date}' + interval '3' month and l_returnflag = 'R' and c_nationkey = n_nationkey
group by c_custkey, c_name, c_acctbal, c_phone, n_name, c_address, c_comment
order by revenue desc
limit 20""",
    11: """
select ps_partkey, sum(ps_supplycost * ps_availqty) as value
from partsupp, supplier, nation
where ps_suppkey = s_suppkey and s_nationkey = n_nationkey and n_name = '{nation}'
group by ps_partkey
having sum(ps_supplycost * ps_availqty) > (select sum(ps_supplycost * ps_availqty) * {fraction}
                                           from partsupp, supplier, nation
                                           where ps_suppkey = s_suppkey and s_nationkey = n_nationkey
                                             and n_name = '{nation}')
order by value desc""",
    12: """
select l_shipmode,
       sum(case when o_orderpriority = '1-URGENT' or o_orderpriority = '2-HIGH' then 1 else 0 end) as high_line_count,
       sum(case when o_orderpriority <> '1-URGENT' and o_orderpriority <> '2-HIGH' then 1 else 0 end) as low_line_count
from orders, lineitem
where o_orderkey = l_orderkey and l_shipmode in ('{shipmode1}', '{shipmode2}') and l_commitdate < l_receiptdate
  and l_shipdate < l_commitdate and l_receiptdate >= date '{date}' and l_receiptdate < date '{date}' + interval '1' year
group by l_shipmode
order by l_shipmode""",
    13: """
select c_count, count(*) as custdist
from (select c_custkey, count(o_orderkey) as c_count
      from customer left outer join orders on c_custkey = o_custkey and o_comment not like '%{word1}%{word2}%'
      group by c_custkey) as c_orders
group by c_count
order by custdist desc, c_count desc""",
    14: """
select 100.00 * sum(case when p_type like 'PROMO%' then l_extendedprice * (1 - l_discount) else 0 end)
       / sum(l_extendedprice * (1 - l_discount)) as promo_revenue
from lineitem, part
where l_partkey = p_partkey and l_shipdate >= date '{date}' and l_shipdate < date '{date}' + interval '1' month""",
    15: """
with revenue0 as (
  select l_suppkey as supplier_no, sum(l_extendedprice * (1 - l_discount)) as total_revenue
  from lineitem
  where l_shipdate >= date '{date}' and l_shipdate < date '{date}' + interval '3' month
  group by l_suppkey)
select s_suppkey, s_name, s_address, s_phone, total_revenue
from supplier, revenue0
where s_suppkey = supplier_no and total_revenue = (select max(total_revenue) from revenue0)
order by s_suppkey""",
    16: """
select p_brand, p_type, p_size, count(distinct ps_suppkey) as supplier_cnt
from partsupp, part
where p_partkey = ps_partkey and p_brand <> '{brand}' and p_type not like '{type}%' and p_size in ({sizes})
  and ps_suppkey not in (select s_suppkey from supplier where s_comment like '%Customer%Complaints%')
group by p_brand, p_type, p_size
order by supplier_cnt desc, p_brand, p_type, p_size""",
    17: """
select sum(l_extendedprice) / 7.0 as avg_yearly
from lineitem, part
where p_partkey = l_partkey and p_brand = '{brand}' and p_container = '{container}'
  and l_quantity < (select 0.2 * avg(l_quantity) from lineitem where l_partkey = p_partkey)""",
    18: """
select c_name, c_custkey, o_orderkey, o_orderdate, o_totalprice, sum(l_quantity) as sum_qty
from customer, orders, lineitem
where o_orderkey in (select l_orderkey from lineitem group by l_orderkey having sum(l_quantity) > {quantity})
  and c_custkey = o_custkey and o_orderkey = l_orderkey
group by c_name, c_custkey, o_orderkey, o_orderdate, o_totalprice
order by o_totalprice desc, o_orderdate
limit 100""",
    19: """
select sum(l_extendedprice * (1 - l_discount)) as revenue
from lineitem, part
where (p_partkey = l_partkey and p_brand = '{brand1}' and p_container in ('SM CASE', 'SM BOX', 'SM PACK', 'SM PKG')
       and l_quantity >= {quantity1} and l_quantity <= {quantity1} + 10 and p_size between 1 and 5
       and l_shipmode in ('AIR', 'AIR REG') and l_shipinstruct = 'DELIVER IN PERSON')
   or (p_partkey = l_partkey and p_brand = '{brand2}' and p_container in ('MED BAG', 'MED BOX', 'MED PKG', 'MED PACK')
       and l_quantity >= {quantity2} and l_quantity <= {quantity2} + 10 and p_size between 1 and 10
       and l_shipmode in ('AIR', 'AIR REG') and l_shipinstruct = 'DELIVER IN PERSON')
   or (p_partkey = l_partkey and p_brand = '{brand3}' and p_container in ('LG CASE', 'LG BOX', 'LG PACK', 'LG PKG')
       and l_quantity >= {quantity3} and l_quantity <= {quantity3} + 10 and p_size between 1 and 15
       and l_shipmode in ('AIR', 'AIR REG') and l_shipinstruct = 'DELIVER IN PERSON')""",
    20: """
select s_name, s_address
from supplier, nation
where s_suppkey in (select ps_suppkey from partsupp
                    where ps_partkey in (select p_partkey from part where p_name like '{color}%')
                      and ps_availqty > (select 0.5 * sum(l_quantity) from lineitem
                                         where l_partkey = ps_partkey and l_suppkey = ps_suppkey
                                           and l_shipdate >= date '{date}'
                                           and l_shipdate < date '{date}' + interval '1' year))
  and s_nationkey = n_nationkey and n_name = '{nation}'
order by s_name""",
    21: """
select s_name, count(*) as numwait
from supplier, lineitem l1, orders, nation
where s_suppkey = l1.l_suppkey and o_orderkey = l1.l_orderkey and o_orderstatus = 'F'
  and l1.l_receiptdate > l1.l_commitdate
  and exists (select * from lineitem l2 where l2.l_orderkey = l1.l_orderkey and l2.l_suppkey <> l1.l_suppkey)
  and not exists (select * from lineitem l3 where l3.l_orderkey = l1.l_orderkey and l3.l_suppkey <> l1.l_suppkey
                    and l3.l_receiptdate > l3.l_commitdate)
  and s_nationkey = n_nationkey and n_name = '{nation}'
group by s_name
order by numwait desc, s_name
limit 100""",
    22: """
select cntrycode, count(*) as numcust, sum(c_acctbal) as totacctbal
from (select substring(c_phone from 1 for 2) as cntrycode, c_acctbal
      from customer
      where substring(c_phone from 1 for 2) in ({codes})
        and c_acctbal > (select avg(c_acctbal) from customer
                         where c_acctbal > 0.00 and substring(c_phone from 1 for 2) in ({codes}))
        and not exists (select * from orders where o_custkey = c_custkey)) as custsale
group by cntrycode
order by cntrycode""",
}

# Appendix A: row s is the order in which stream s runs the queries.
STREAM_ORDERS = [
    [14, 2, 9, 20, 6, 17, 18, 8, 21, 13, 3, 22, 16, 4, 11, 15, 1, 10, 19, 5, 7, 12],
    [21, 3, 18, 5, 11, 7, 6, 20, 17, 12, 16, 15, 13, 10, 2, 8, 14, 19, 9, 22, 1, 4],
    [6, 17, 14, 16, 19, 10, 9, 2, 15, 8, 5, 22, 12, 7, 13, 18, 1, 4, 20, 3, 11, 21],
    [8, 5, 4, 6, 17, 7, 1, 18, 22, 14, 9, 10, 15, 11, 20, 2, 21, 19, 13, 16, 12, 3],
    [5, 21, 14, 19, 15, 17, 12, 6, 4, 9, 8, 16, 11, 2, 10, 18, 1, 13, 7, 22, 3, 20],
    [21, 15, 4, 6, 7, 16, 19, 18, 14, 22, 11, 13, 3, 1, 2, 5, 8, 20, 12, 17, 10, 9],
    [10, 3, 15, 13, 6, 8, 9, 7, 4, 11, 22, 18, 12, 1, 5, 16, 2, 14, 19, 20, 17, 21],
    [18, 8, 20, 21, 2, 4, 22, 17, 1, 11, 9, 19, 3, 13, 5, 7, 10, 16, 6, 14, 15, 12],
    [19, 1, 15, 17, 5, 8, 9, 12, 14, 7, 4, 3, 20, 16, 6, 22, 10, 13, 2, 21, 18, 11],
    [8, 13, 2, 20, 17, 3, 6, 21, 18, 11, 19, 10, 15, 4, 22, 1, 7, 12, 9, 14, 5, 16],
    [6, 15, 18, 17, 12, 1, 7, 2, 22, 13, 21, 10, 14, 9, 3, 16, 20, 19, 11, 4, 8, 5],
    [15, 14, 18, 17, 10, 20, 16, 11, 1, 8, 4, 22, 5, 12, 3, 9, 21, 2, 13, 6, 19, 7],
    [1, 7, 16, 17, 18, 22, 12, 6, 8, 9, 11, 4, 2, 5, 20, 21, 13, 10, 19, 3, 14, 15],
    [21, 17, 7, 3, 1, 10, 12, 22, 9, 16, 6, 11, 2, 4, 5, 14, 8, 20, 13, 18, 15, 19],
    [2, 9, 5, 4, 18, 1, 20, 15, 16, 17, 7, 21, 13, 14, 19, 8, 22, 11, 10, 3, 12, 6],
    [16, 9, 17, 8, 14, 11, 10, 12, 6, 21, 7, 3, 15, 5, 22, 20, 1, 13, 19, 2, 4, 18],
    [1, 3, 6, 5, 2, 16, 14, 22, 17, 20, 4, 9, 10, 11, 15, 8, 12, 19, 18, 13, 7, 21],
    [3, 16, 5, 11, 21, 9, 2, 15, 10, 18, 17, 7, 8, 19, 14, 13, 1, 4, 22, 20, 6, 12],
    [14, 4, 13, 5, 21, 11, 8, 6, 3, 17, 2, 20, 1, 19, 10, 9, 12, 18, 15, 7, 22, 16],
    [4, 12, 22, 14, 5, 15, 16, 2, 8, 10, 17, 9, 21, 7, 3, 6, 13, 18, 11, 20, 19, 1],
    [16, 15, 14, 13, 4, 22, 18, 19, 7, 1, 12, 17, 5, 10, 20, 3, 9, 21, 11, 2, 6, 8],
]

# Table 11: the specification's minimum number of throughput streams by scale factor.
MIN_STREAMS = [(1, 2), (10, 3), (30, 4), (100, 5), (300, 6), (1000, 7), (3000, 8), (10000, 9), (30000, 10), (100000, 11)]

# The data generator's word lists the random parameters draw from (TPC-H 4.2.2.13 and 4.2.3).
NATIONS = {  # name: region
    "ALGERIA": "AFRICA", "ARGENTINA": "AMERICA", "BRAZIL": "AMERICA", "CANADA": "AMERICA", "EGYPT": "MIDDLE EAST",
    "ETHIOPIA": "AFRICA", "FRANCE": "EUROPE", "GERMANY": "EUROPE", "INDIA": "ASIA", "INDONESIA": "ASIA",
    "IRAN": "MIDDLE EAST", "IRAQ": "MIDDLE EAST", "JAPAN": "ASIA", "JORDAN": "MIDDLE EAST", "KENYA": "AFRICA",
    "MOROCCO": "AFRICA", "MOZAMBIQUE": "AFRICA", "PERU": "AMERICA", "CHINA": "ASIA", "ROMANIA": "EUROPE",
    "SAUDI ARABIA": "MIDDLE EAST", "VIETNAM": "ASIA", "RUSSIA": "EUROPE", "UNITED KINGDOM": "EUROPE",
    "UNITED STATES": "AMERICA",
}
REGIONS = ["AFRICA", "AMERICA", "ASIA", "EUROPE", "MIDDLE EAST"]
SEGMENTS = ["AUTOMOBILE", "BUILDING", "FURNITURE", "HOUSEHOLD", "MACHINERY"]
TYPE_SYLLABLES = [["STANDARD", "SMALL", "MEDIUM", "LARGE", "ECONOMY", "PROMO"],
                  ["ANODIZED", "BURNISHED", "PLATED", "POLISHED", "BRUSHED"],
                  ["TIN", "NICKEL", "BRASS", "STEEL", "COPPER"]]
CONTAINER_SYLLABLES = [["SM", "LG", "MED", "JUMBO", "WRAP"], ["CASE", "BOX", "BAG", "JAR", "PKG", "PACK", "CAN", "DRUM"]]
SHIPMODES = ["REG AIR", "AIR", "RAIL", "SHIP", "TRUCK", "MAIL", "FOB"]
COLORS = (
    "almond antique aquamarine azure beige bisque black blanched blue blush brown burlywood burnished chartreuse "
    "chiffon chocolate coral cornflower cornsilk cream cyan dark deep dim dodger drab firebrick floral forest "
    "frosted gainsboro ghost goldenrod green grey honeydew hot indian ivory khaki lace lavender lawn lemon light "
    "lime linen magenta maroon medium metallic midnight mint misty moccasin navajo navy olive orange orchid pale "
    "papaya peach peru pink plum powder puff purple red rose rosy royal saddle salmon sandy seashell sienna sky "
    "slate smoke snow spring steel tan thistle tomato turquoise violet wheat white yellow").split()
Q13_WORDS = [["special", "pending", "unusual", "express"], ["packages", "requests", "accounts", "deposits"]]


def min_streams(scale_factor: float) -> int:
    """The specification's minimum number of throughput streams for a scale factor (SF below 1: as SF1)."""
    streams = MIN_STREAMS[0][1]
    for sf, s in MIN_STREAMS:
        if scale_factor >= sf:
            streams = s
    return streams


def stream_order(stream: int) -> list[int]:
    return STREAM_ORDERS[stream % len(STREAM_ORDERS)]


def validation_parameters(scale_factor: float) -> dict[int, dict[str, str]]:
    """Stream 0's parameters (2.4.x.4): the ones the reference answers were computed with."""
    return {
        1: {"delta": "90"}, 2: {"size": "15", "type": "BRASS", "region": "EUROPE"},
        3: {"segment": "BUILDING", "date": "1995-03-15"}, 4: {"date": "1993-07-01"},
        5: {"region": "ASIA", "date": "1994-01-01"}, 6: {"date": "1994-01-01", "discount": "0.06", "quantity": "24"},
        7: {"nation1": "FRANCE", "nation2": "GERMANY"},
        8: {"nation": "BRAZIL", "region": "AMERICA", "type": "ECONOMY ANODIZED STEEL"}, 9: {"color": "green"},
        10: {"date": "1993-10-01"}, 11: {"nation": "GERMANY", "fraction": _fraction(scale_factor)},
        12: {"shipmode1": "MAIL", "shipmode2": "SHIP", "date": "1994-01-01"},
        13: {"word1": "special", "word2": "requests"}, 14: {"date": "1995-09-01"}, 15: {"date": "1996-01-01"},
        16: {"brand": "Brand#45", "type": "MEDIUM POLISHED", "sizes": "49, 14, 23, 45, 19, 3, 36, 9"},
        17: {"brand": "Brand#23", "container": "MED BOX"}, 18: {"quantity": "300"},
        19: {"brand1": "Brand#12", "brand2": "Brand#23", "brand3": "Brand#34", "quantity1": "1", "quantity2": "10",
             "quantity3": "20"},
        20: {"color": "forest", "date": "1994-01-01", "nation": "CANADA"}, 21: {"nation": "SAUDI ARABIA"},
        22: {"codes": "'13', '31', '23', '29', '30', '18', '17'"},
    }


def _fraction(scale_factor: float) -> str:
    return repr(0.0001 / scale_factor)


def random_parameters(scale_factor: float, rng: random.Random) -> dict[int, dict[str, str]]:
    """Parameters for a stream other than 0, drawn from the ranges of 2.4.x.3."""

    def month(first: tuple[int, int], last: tuple[int, int]) -> str:
        months = (last[0] - first[0]) * 12 + last[1] - first[1]
        y, m = divmod(first[0] * 12 + first[1] - 1 + rng.randint(0, months), 12)
        return date(y, m + 1, 1).isoformat()

    def year_start(low: int = 1993, high: int = 1997) -> str:
        return f"{rng.randint(low, high)}-01-01"

    def brand() -> str:
        return f"Brand#{rng.randint(1, 5)}{rng.randint(1, 5)}"

    nation = rng.choice(list(NATIONS))
    n1, n2 = rng.sample(list(NATIONS), 2)
    m1, m2 = rng.sample(SHIPMODES, 2)
    return {
        1: {"delta": str(rng.randint(60, 120))},
        2: {"size": str(rng.randint(1, 50)), "type": rng.choice(TYPE_SYLLABLES[2]), "region": rng.choice(REGIONS)},
        3: {"segment": rng.choice(SEGMENTS), "date": f"1995-03-{rng.randint(1, 31):02d}"},
        4: {"date": month((1993, 1), (1997, 10))},
        5: {"region": rng.choice(REGIONS), "date": year_start()},
        6: {"date": year_start(), "discount": f"0.0{rng.randint(2, 9)}", "quantity": str(rng.randint(24, 25))},
        7: {"nation1": n1, "nation2": n2},
        8: {"nation": nation, "region": NATIONS[nation], "type": " ".join(rng.choice(s) for s in TYPE_SYLLABLES)},
        9: {"color": rng.choice(COLORS)},
        10: {"date": month((1993, 2), (1995, 1))},
        11: {"nation": rng.choice(list(NATIONS)), "fraction": _fraction(scale_factor)},
        12: {"shipmode1": m1, "shipmode2": m2, "date": year_start()},
        13: {"word1": rng.choice(Q13_WORDS[0]), "word2": rng.choice(Q13_WORDS[1])},
        14: {"date": month((1993, 1), (1997, 12))},
        15: {"date": month((1993, 1), (1997, 10))},
        16: {"brand": brand(), "type": " ".join(rng.choice(s) for s in TYPE_SYLLABLES[:2]),
             "sizes": ", ".join(map(str, rng.sample(range(1, 51), 8)))},
        17: {"brand": brand(), "container": " ".join(rng.choice(s) for s in CONTAINER_SYLLABLES)},
        18: {"quantity": str(rng.randint(312, 315))},
        19: {"brand1": brand(), "brand2": brand(), "brand3": brand(), "quantity1": str(rng.randint(1, 10)),
             "quantity2": str(rng.randint(10, 20)), "quantity3": str(rng.randint(20, 30))},
        20: {"color": rng.choice(COLORS), "date": year_start(), "nation": rng.choice(list(NATIONS))},
        21: {"nation": rng.choice(list(NATIONS))},
        22: {"codes": ", ".join(f"'{c}'" for c in rng.sample(range(10, 35), 7))},
    }


def stream_queries(stream: int, scale_factor: float, seed: int = 1) -> list[tuple[int, str]]:
    """The (query number, SQL) pairs of one stream, in its order."""
    params = (validation_parameters(scale_factor) if stream == 0
              else random_parameters(scale_factor, random.Random(seed * 1000 + stream)))
    return [(q, QUERIES[q].format(**params[q]).strip()) for q in stream_order(stream)]
