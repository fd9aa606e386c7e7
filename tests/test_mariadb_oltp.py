"""The oltp suite's MariaDB dialect (suites/oltp/sql/mariadb) on a real managed MariaDB at 2 warehouses: the oltp
loader's own rows fit its schema, each of the five stored procedures does what its TPC-C transaction says (checked
against the tables around it), remote lines and payments reach the other warehouse, the unused item rolls back all of
a New-Order, the consistency check finds a violation when there is one, and the conditions hold after a few hundred
mixed calls from four connections, two per warehouse.

The database is built by the suite's own database.build through the engine's OLTP side (MariaDbTransactional):
load.py's row generators, LOAD DATA LOCAL INFILE, the indexes, the procedures. The last tests run the whole suite,
`refbench oltp --engine mariadb`, and its bad inputs."""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
import threading
from collections import Counter
from decimal import Decimal
from importlib.resources import files
from pathlib import Path

import pytest

from refbench.engines.mariadb import ManagedMariaDB, MariaDbTransactional, connect
from refbench.suites.oltp import TPCC, consistency, database
from refbench.suites.oltp.driver import DECK
from refbench.suites.oltp.inputs import UNUSED_ITEM, inputs_for
from refbench.suites.oltp.rand import TpccRandom
from test_consistency import NULL_READS
from test_oltp import _driver_count_allowance

pytestmark = pytest.mark.skipif(not shutil.which("mariadbd") and not os.path.exists("/usr/sbin/mariadbd"),
                                reason="mariadb-server is not installed (make setup installs it)")

ARITY = {"new_order": 4, "payment": 7, "order_status": 4, "delivery": 2, "stock_level": 3}
UNUSED_ITEM_ERROR = 1644  # SIGNAL SQLSTATE '45000', new_order.sql's rollback


def _sql(name: str) -> str:
    return files("refbench.suites.oltp").joinpath("sql", "mariadb", f"{name}.sql").read_text()


def _execute(conn, statement: str, params=None) -> list[tuple]:
    """The rows of ``statement``'s first result; the rest (a CALL's closing status) drained."""
    cursor = conn.cursor()
    cursor.execute(statement, params)
    rows = list(cursor.fetchall()) if cursor.description else []
    while cursor.nextset():
        pass
    cursor.close()
    return rows


def _call(conn, procedure: str, *args) -> tuple:
    """One CALL, the transaction's one round trip; its one-row result."""
    rows = _execute(conn, f"CALL {procedure}({', '.join(['%s'] * len(args))})", args)
    assert len(rows) == 1, rows
    return rows[0]


def _lines(items: list[int], supply_w_ids: list[int], quantities: list[int]) -> str:
    """New-Order's lines as new_order.sql takes them: a JSON array of [supply warehouse, item, quantity]."""
    return json.dumps([list(line) for line in zip(supply_w_ids, items, quantities)])


def _one(conn, statement: str, params=None):
    rows = _execute(conn, statement, params)
    return rows[0] if len(rows[0]) > 1 else rows[0][0]


def _violations(conn, at_load: bool = False) -> dict[int, int]:
    """The suite's check (consistency.sql through the engine); the conditions that do not hold, with their counts."""
    found = consistency.check(MariaDbTransactional("", TPCC, None), conn, at_load)
    assert _one(conn, "SELECT @@in_transaction") == 0
    return {n: count for n, (_, count) in found.items() if count}


@pytest.fixture(scope="module")
def tpcc():
    """A managed MariaDB (durable defaults) holding 2 loaded warehouses with its indexes and the five procedures, built
    by the suite's database.build; yields (DSN, rows loaded, the server)."""
    base = Path(tempfile.mkdtemp(prefix="refbench-test-mariadb-oltp-"))
    base.chmod(0o755)  # the mysql system user must reach the data directory
    server = ManagedMariaDB(base / "data", {"innodb_buffer_pool_size": "256M"})
    try:
        server.start()
        dsn = server.database("tpcc")
        info = database.build(MariaDbTransactional(dsn, TPCC, None), 2, 2, False, lambda what, done: None)
        yield dsn, info["rows"], server
    finally:
        server.stop()
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def conn(tpcc):
    """A connection as the driver would use it: autocommit on, each procedure runs its own transaction."""
    with connect(tpcc[0], autocommit=True) as conn:
        yield conn


def test_the_loaders_rows_fit_the_schema_and_the_fresh_database_is_consistent(tpcc, conn):
    rows = tpcc[1]
    counts = {t: _one(conn, f"SELECT count(*) FROM {t}")
              for t in ["warehouse", "district", "customer", "history", "oorder", "new_order", "order_line", "item", "stock"]}
    assert counts == {"warehouse": 2, "district": 20, "customer": 60_000, "history": 60_000, "oorder": 60_000,
                      "new_order": 18_000, "order_line": _one(conn, "SELECT sum(o_ol_cnt) FROM oorder"),
                      "item": 100_000, "stock": 200_000}
    assert sum(counts.values()) == rows
    # values that went through LOAD DATA intact: NULL carriers of undelivered orders, each warehouse's load time, money
    assert _one(conn, "SELECT count(*) FROM oorder WHERE o_carrier_id IS NULL") == 18_000
    assert _execute(conn, "SELECT c_w_id, count(DISTINCT c_since), min(c_since) = (SELECT min(h_date) FROM history "
                          "WHERE h_w_id = c_w_id) FROM customer GROUP BY c_w_id") == [(1, 1, 1), (2, 1, 1)]
    assert _one(conn, "SELECT min(c_balance), max(c_balance), (SELECT sum(h_amount) FROM history) FROM customer") == \
        (Decimal("-10.00"), Decimal("-10.00"), Decimal("10.00") * 60_000)
    assert _violations(conn, at_load=True) == {}


def test_the_consistency_check_finds_a_violation(conn):
    """The check can fail: a district's D_YTD one cent off breaks conditions 1 and 9; an undelivered order missing a
    line breaks 4 and 6. Each is committed (the check reads committed rows only), checked, and undone."""
    _execute(conn, "UPDATE district SET d_ytd = d_ytd + 0.01 WHERE d_w_id = 1 AND d_id = 3")
    try:
        assert _violations(conn) == {1: 1, 9: 1}
    finally:
        _execute(conn, "UPDATE district SET d_ytd = d_ytd - 0.01 WHERE d_w_id = 1 AND d_id = 3")
    where = " FROM order_line WHERE ol_w_id = 1 AND ol_d_id = 4 AND ol_o_id = 2999 AND ol_number = 1"
    line = _execute(conn, "SELECT *" + where)
    _execute(conn, "DELETE" + where)
    try:
        assert _violations(conn) == {4: 1, 6: 1}
    finally:
        _execute(conn, "INSERT INTO order_line VALUES (" + ", ".join(["%s"] * len(line[0])) + ")", line[0])
    assert _violations(conn) == {}


@pytest.mark.parametrize("table, column", NULL_READS)
def test_a_null_where_a_condition_reads_a_value_fails_that_condition(conn, table, column):
    """test_consistency.py's NULLs, one at a time. HISTORY has no key, so the row is named by all its other values;
    the NULL is committed (the check reads committed rows only), checked, and put back."""
    where, expected = NULL_READS[table, column]
    cursor = conn.cursor()
    cursor.execute(f"SELECT * FROM {table} WHERE {where} AND {column} IS NOT NULL LIMIT 1")
    row = dict(zip((d[0] for d in cursor.description), cursor.fetchone()))
    cursor.close()
    others = [name for name in row if name != column]
    same_row = " AND ".join(f"{name} <=> %s" for name in others)
    assert _update(conn, f"UPDATE {table} SET {column} = NULL WHERE {same_row} AND {column} = %s LIMIT 1",
                   [row[name] for name in others] + [row[column]]) == 1
    try:
        assert set(_violations(conn)) == expected
    finally:
        assert _update(conn, f"UPDATE {table} SET {column} = %s WHERE {same_row} AND {column} IS NULL LIMIT 1",
                       [row[column]] + [row[name] for name in others]) == 1


def _update(conn, statement: str, params: list) -> int:
    cursor = conn.cursor()
    try:
        return cursor.execute(statement, params)
    finally:
        cursor.close()


def _order(conn, d: int, o: int):
    return (_execute(conn, "SELECT o_c_id, o_carrier_id, o_ol_cnt, o_all_local FROM oorder "
                           "WHERE o_w_id = 1 AND o_d_id = %s AND o_id = %s", (d, o)),
            _execute(conn, "SELECT count(*) FROM new_order WHERE no_w_id = 1 AND no_d_id = %s AND no_o_id = %s", (d, o)),
            _execute(conn, "SELECT ol_number, ol_i_id, ol_supply_w_id, ol_delivery_d, ol_quantity, ol_amount, ol_dist_info "
                           "FROM order_line WHERE ol_w_id = 1 AND ol_d_id = %s AND ol_o_id = %s ORDER BY ol_number", (d, o)))


def _stock(conn, items: list[int]):
    return _execute(conn, "SELECT s_i_id, s_quantity, s_ytd, s_order_cnt, s_remote_cnt, s_dist_05, i_price "
                          "FROM stock JOIN item ON i_id = s_i_id WHERE s_w_id = 1 AND s_i_id IN %s ORDER BY s_i_id",
                    (items,))


def test_new_order_enters_the_order_with_its_lines_and_takes_the_stock(conn):
    items, quantities = [17, 2_000, 65_432, 99_999, 100_000], [1, 10, 3, 7, 5]
    o_id = _one(conn, "SELECT d_next_o_id FROM district WHERE d_w_id = 1 AND d_id = 5")
    before = _stock(conn, items)
    w_tax, d_tax, discount = _one(conn, "SELECT w_tax, d_tax, c_discount FROM warehouse, district, customer WHERE w_id = 1 "
                                        "AND d_w_id = 1 AND d_id = 5 AND c_w_id = 1 AND c_d_id = 5 AND c_id = 42")
    (total,) = _call(conn, "new_order", 1, 5, 42, _lines(items, [1] * 5, quantities))
    assert _one(conn, "SELECT d_next_o_id FROM district WHERE d_w_id = 1 AND d_id = 5") == o_id + 1
    header, new_order, lines = _order(conn, 5, o_id)
    assert header == [(42, None, 5, 1)] and new_order == [(1,)]
    after = _stock(conn, items)
    expected_lines = []
    for n, (item, quantity, old, new) in enumerate(zip(items, quantities, before, after), start=1):
        _, quantity_before, ytd, order_cnt, remote_cnt, dist, price = old
        # 2.4.2.2: the quantity drops, or is topped up by 91 when it would fall below 10
        left = quantity_before - quantity
        assert new[1:5] == (left if left >= 10 else left + 91, ytd + quantity, order_cnt + 1, remote_cnt)
        expected_lines.append((n, item, 1, None, quantity, quantity * price, dist))  # district 5's S_DIST_05
    assert lines == expected_lines
    amount = sum(line[5] for line in lines)
    assert total == amount * (1 - discount) * (1 + w_tax + d_tax)


def test_remote_lines_and_payments_reach_the_other_warehouse(conn):
    o_id = _one(conn, "SELECT d_next_o_id FROM district WHERE d_w_id = 1 AND d_id = 2")
    counters = ("SELECT s_w_id, s_i_id, s_ytd, s_order_cnt, s_remote_cnt FROM stock WHERE s_i_id IN (10, 20) "
                "ORDER BY s_w_id, s_i_id")
    before = _execute(conn, counters)
    # sorted by (supply warehouse, item), as inputs.py sends them
    _call(conn, "new_order", 1, 2, 9, _lines([10, 10, 20], [1, 2, 2], [2, 3, 4]))
    header, _, lines = _order(conn, 2, o_id)
    assert header == [(9, None, 3, 0)]  # O_ALL_LOCAL 0
    assert [(line[1], line[2], line[4]) for line in lines] == [(10, 1, 2), (10, 2, 3), (20, 2, 4)]
    moved = {(w, i): (ytd + q, count + 1, remote + (w == 2)) for (w, i, q) in [(1, 10, 2), (2, 10, 3), (2, 20, 4)]
             for (sw, si, ytd, count, remote) in before if (sw, si) == (w, i)}
    assert _execute(conn, counters) == [(w, i, *moved.get((w, i), (ytd, count, remote)))
                                        for w, i, ytd, count, remote in before]

    # a customer of warehouse 2 pays through warehouse 1's district 4 (2.5.1.2)
    w_ytd, d_ytd, history = _totals(conn, 4)
    balance = _one(conn, "SELECT c_balance FROM customer WHERE c_w_id = 2 AND c_d_id = 6 AND c_id = 33")
    assert _call(conn, "payment", 1, 4, 2, 6, 33, None, "50.00") == (33,)
    assert _totals(conn, 4) == (w_ytd + 50, d_ytd + 50, history + 1)
    assert _one(conn, "SELECT c_balance FROM customer WHERE c_w_id = 2 AND c_d_id = 6 AND c_id = 33") == balance - 50
    assert _execute(conn, "SELECT h_c_id, h_c_d_id, h_c_w_id, h_d_id, h_w_id FROM history ORDER BY h_date DESC "
                          "LIMIT 1") == [(33, 6, 2, 4, 1)]


def test_new_orders_stock_statements_walk_the_lines_in_their_order(conn):
    """The deadlock avoidance: new_order.sql's stock UPDATE and its lines' INSERT … SELECT read the JSON lines first and
    find each stock row by its key, so stock rows are locked in the lines' (warehouse, item) order. EXPLAIN of the
    file's own two statements, its variables given values."""
    text = _sql("new_order")
    values = {"p_lines": "'[[1,5,1],[1,9,2],[2,3,1]]'", "p_w_id": "1", "p_d_id": "1", "v_o_id": "1"}
    for pattern in (r"UPDATE JSON_TABLE\(p_lines.*?;", r"INSERT INTO order_line .*?;"):
        statement = re.search(pattern, text, re.DOTALL).group(0).rstrip(";")
        statement = re.sub(r"\b(p_lines|p_w_id|p_d_id|v_o_id)\b", lambda m: values[m.group(1)], statement)
        plan = [(row[2], row[3], row[5]) for row in _execute(conn, "EXPLAIN " + statement)]
        assert plan == [("l", "ALL", None), ("item", "eq_ref", "PRIMARY"), ("stock", "eq_ref", "PRIMARY")], plan


def test_the_unused_item_rolls_back_the_whole_new_order(conn):
    import MySQLdb

    items = [3, 4, UNUSED_ITEM]
    state = lambda: (_one(conn, "SELECT d_next_o_id FROM district WHERE d_w_id = 1 AND d_id = 6"),  # noqa: E731
                     _one(conn, "SELECT count(*), max(o_id) FROM oorder"), _one(conn, "SELECT count(*) FROM new_order"),
                     _one(conn, "SELECT count(*) FROM order_line"), _stock(conn, items))
    before = state()
    with pytest.raises(MySQLdb.OperationalError) as error:
        _call(conn, "new_order", 1, 6, 7, _lines(items, [1, 1, 1], [5, 5, 5]))
    assert error.value.args == (UNUSED_ITEM_ERROR, f"refbench: unused item {UNUSED_ITEM} (the 1% New-Order rollback)")
    assert state() == before
    assert _one(conn, "SELECT @@in_transaction") == 0  # nothing left open for the connection's next CALL


def _customer(conn, d: int, c: int):
    return _one(conn, "SELECT c_balance, c_ytd_payment, c_payment_cnt, c_credit, c_data FROM customer "
                      "WHERE c_w_id = 1 AND c_d_id = %s AND c_id = %s", (d, c))


def _totals(conn, d: int):
    return _one(conn, "SELECT w_ytd, d_ytd, (SELECT count(*) FROM history) FROM warehouse, district "
                      "WHERE w_id = 1 AND d_w_id = 1 AND d_id = %s", (d,))


def test_payment_moves_the_balances_and_chooses_the_middle_customer_by_last_name(conn):
    # by id, a bad-credit customer: C_DATA takes the payment's details in front
    c_id = _one(conn, "SELECT min(c_id) FROM customer WHERE c_w_id = 1 AND c_d_id = 2 AND c_credit = 'BC'")
    balance, ytd_payment, payments, _, data = _customer(conn, 2, c_id)
    w_ytd, d_ytd, history = _totals(conn, 2)
    assert _call(conn, "payment", 1, 2, 1, 2, c_id, None, "1234.56") == (c_id,)
    assert _customer(conn, 2, c_id) == (balance - Decimal("1234.56"), ytd_payment + Decimal("1234.56"), payments + 1,
                                        "BC", f"{c_id} 2 1 2 1 1234.56 | {data}"[:500])
    assert _totals(conn, 2) == (w_ytd + Decimal("1234.56"), d_ytd + Decimal("1234.56"), history + 1)
    assert _execute(conn, "SELECT h_c_id, h_c_d_id, h_c_w_id, h_d_id, h_w_id, h_amount FROM history "
                          "ORDER BY h_date DESC LIMIT 1") == [(c_id, 2, 1, 2, 1, Decimal("1234.56"))]

    # by last name: of the n customers with the name, the ((n + 1) / 2)-th by first name (2.5.2.2), for even and odd n
    names = _execute(conn, "SELECT c_last, count(*) FROM customer WHERE c_w_id = 1 AND c_d_id = 8 GROUP BY c_last "
                           "HAVING count(*) IN (2, 3, 4, 5) ORDER BY count(*), c_last")
    assert {n for _, n in names} >= {2, 3}
    for last, n in {n: (last, n) for last, n in names}.values():
        firsts = sorted(_execute(conn, "SELECT c_first, c_id FROM customer WHERE c_w_id = 1 AND c_d_id = 8 "
                                       "AND c_last = %s", (last,)))
        middle = firsts[(n + 1) // 2 - 1][1]
        balance = _customer(conn, 8, middle)[0]
        assert _call(conn, "payment", 1, 8, 1, 8, None, last, "10.00") == (middle,)
        assert _customer(conn, 8, middle)[0] == balance - 10

    # a name nobody in the district has pays nothing and moves no total
    before = _totals(conn, 8)
    assert _call(conn, "payment", 1, 8, 1, 8, None, "NOBODYHASTHIS", "10.00") == (0,)
    assert _totals(conn, 8) == before


def test_order_status_reads_the_last_order_of_the_customer(conn):
    # district 9's customer 100 orders now, so its last order is known, by id and by (a unique) last name
    _call(conn, "new_order", 1, 9, 100, _lines([5, 6, 7], [1, 1, 1], [1, 1, 1]))
    assert _call(conn, "order_status", 1, 9, 100, None) == (3,)
    last, n = _one(conn, "SELECT c_last, (SELECT count(*) FROM customer c2 WHERE c2.c_w_id = 1 AND c2.c_d_id = 9 "
                         "AND c2.c_last = c.c_last) FROM customer c WHERE c_w_id = 1 AND c_d_id = 9 AND c_id = 100")
    if n == 1:
        assert _call(conn, "order_status", 1, 9, None, last) == (3,)
    o_id, lines = _one(conn, "SELECT o_id, o_ol_cnt FROM oorder WHERE o_w_id = 1 AND o_d_id = 9 AND o_c_id = 200 "
                             "ORDER BY o_id DESC LIMIT 1")
    assert _call(conn, "order_status", 1, 9, 200, None) == (lines,)
    assert _call(conn, "order_status", 1, 9, None, "NOBODYHASTHIS") == (0,)


def test_delivery_delivers_the_oldest_new_order_of_each_district(conn):
    oldest = dict(_execute(conn, "SELECT no_d_id, min(no_o_id) FROM new_order WHERE no_w_id = 1 GROUP BY no_d_id"))
    assert len(oldest) == 10
    orders = {d: _one(conn, "SELECT o_c_id, (SELECT sum(ol_amount) FROM order_line WHERE ol_w_id = 1 AND ol_d_id = %s "
                            "AND ol_o_id = %s) FROM oorder WHERE o_w_id = 1 AND o_d_id = %s AND o_id = %s", (d, o, d, o))
              for d, o in oldest.items()}
    customers = {d: _one(conn, "SELECT c_balance, c_delivery_cnt FROM customer WHERE c_w_id = 1 AND c_d_id = %s AND "
                               "c_id = %s", (d, c)) for d, (c, _) in orders.items()}
    assert _call(conn, "delivery", 1, 7) == (10,)
    for d, o in oldest.items():
        header, new_order, lines = _order(conn, d, o)
        assert header[0][1] == 7 and new_order == [(0,)] and all(line[3] is not None for line in lines)
        c_id, amount = orders[d]
        balance, deliveries = customers[d]
        assert _one(conn, "SELECT c_balance, c_delivery_cnt FROM customer WHERE c_w_id = 1 AND c_d_id = %s AND "
                          "c_id = %s", (d, c_id)) == (balance + amount, deliveries + 1)
    assert dict(_execute(conn, "SELECT no_d_id, min(no_o_id) FROM new_order WHERE no_w_id = 1 GROUP BY no_d_id")) == \
        {d: o + 1 for d, o in oldest.items()}


def test_stock_level_counts_the_distinct_low_stock_items_of_the_last_20_orders(conn):
    recent = ("SELECT count(DISTINCT ol_i_id) FROM order_line, district WHERE d_w_id = 1 AND d_id = 3 AND ol_w_id = 1 "
              "AND ol_d_id = 3 AND ol_o_id BETWEEN d_next_o_id - 20 AND d_next_o_id - 1")
    items = _one(conn, recent)
    assert items >= 20 * 5 // 2  # 20 orders of 5-15 lines each, hardly any item twice
    low = _one(conn, recent.replace("FROM order_line, district", "FROM order_line, district, stock")
               + " AND s_w_id = 1 AND s_i_id = ol_i_id AND s_quantity < 55")
    assert 0 < low < items
    assert _call(conn, "stock_level", 1, 3, 55) == (low,)
    assert _call(conn, "stock_level", 1, 3, 101) == (items,)  # every quantity is 10-100
    assert _call(conn, "stock_level", 1, 3, 10) == (0,)


def _arguments(transaction: str, params: list) -> list:
    """inputs.py's parameters for MariaDB (New-Order's lines one JSON array) as text."""
    return [p.decode() if p is not None else None for p in params]


def test_the_conditions_hold_after_a_few_hundred_mixed_calls_from_four_connections(tpcc):
    """The driver's deck (10 New-Order, 10 Payment, 1 each of the others) with inputs.py's inputs, remote lines and
    payments included, 6 decks on each of four connections at once, two per warehouse: every call commits, or is the
    unused item's rollback (no deadlock, no lock wait timeout); D_NEXT_O_ID moves by exactly the committed New-Orders;
    the twelve conditions hold."""
    outcomes: list[str] = []  # list.append is atomic under the GIL; a shared counter's += is not
    failures: list[BaseException] = []

    def user(seed: int, w: int) -> None:
        import MySQLdb

        rng = TpccRandom(seed)
        try:
            with connect(tpcc[0], autocommit=True) as conn:
                for _ in range(6):
                    deck = DECK[:]
                    rng.shuffle(deck)
                    for transaction in deck:
                        args = _arguments(transaction, inputs_for("json")[transaction](rng, w, [3 - w]))
                        assert len(args) == ARITY[transaction]
                        try:
                            _call(conn, transaction, *args)
                            outcome = transaction
                        except MySQLdb.OperationalError as exc:
                            if exc.args[0] != UNUSED_ITEM_ERROR:
                                raise
                            outcome = "rolled back"
                        outcomes.append(outcome)
        except BaseException as exc:
            failures.append(exc)

    with connect(tpcc[0], autocommit=True) as conn:
        next_o_id = _one(conn, "SELECT sum(d_next_o_id) FROM district")
        users = [threading.Thread(target=user, args=(seed, 1 + seed % 2)) for seed in range(4)]
        for thread in users:
            thread.start()
        for thread in users:
            thread.join()
        assert not failures, failures
        counts = Counter(outcomes)
        assert len(outcomes) == 4 * 6 * len(DECK)
        assert counts["payment"] == 4 * 6 * 10 and counts["delivery"] == 24
        assert counts["new_order"] + counts["rolled back"] == 4 * 6 * 10
        assert _one(conn, "SELECT sum(d_next_o_id) FROM district") == next_o_id + counts["new_order"]
        assert _violations(conn) == {}


# ---- the suite on MariaDB: `refbench oltp --engine mariadb` and its bad inputs -----------------------------------


@pytest.mark.slow
def test_refbench_oltp_on_a_managed_mariadb_passes_its_checks(refbench, tmp_path):
    """The quick profile's shape on a managed MariaDB, with more users than the workers have CPUs' share, so that a
    worker drives several users through the non-blocking calls (select/epoll over _mysql's sockets): the consistency
    conditions hold before and after, the mix and the rollbacks are as specified, NOPM and TPM come from the server's
    counters, and the report states the durable settings."""
    users = 2 * (os.cpu_count() or 1) + 1
    result = refbench("oltp", "--engine", "mariadb", "--users", str(users), "--rampup-s", "2", "--duration-s", "5",
                      "--runs-dir", str(tmp_path / "runs"), "--json")
    assert result.code == 0, result.stderr
    run = next((tmp_path / "runs").iterdir())
    record = json.loads((run / "records" / "oltp" / f"u{users}-r1.json").read_text())
    m = record["metrics"]
    assert m["errors"] == 0 and m["users"] == users and m["driver_processes"] - 1 < users  # users share workers
    assert m["nopm"] > 0 and m["tpm"] > m["nopm"] and m["new_orders_schema_delta"] > 0
    # NOPM comes from Σ D_NEXT_O_ID, which the driver's own count of committed New-Orders must match closely: the
    # window's edges cut a few transactions either way, and more when the counters were read late (beside other work
    # make test's did: 840 against 856 for 5 users).
    assert abs(m["new_orders_schema_delta"] - m["new_orders_committed_by_driver"]) <= \
        max(2 * users, _driver_count_allowance(m, record["extra"]["series"], users))
    assert m["new_order_lat_p99_ms"] > 0 and m["db_cpu_s"] > 0 and 0 < m["driver_cpu_share_pct"] < 100
    settings = record["extra"]["settings"]
    assert settings["engine"] == "MariaDB" and settings["innodb_flush_log_at_trx_commit"] == "1"
    assert settings["innodb_doublewrite"] == "ON" and settings["innodb_buffer_pool_size"] == str(128 * 2**20)
    assert settings["thread_handling"] == "pool-of-threads"  # oltp's default mariadb_settings
    assert "stored procedures" in record["method"] and "Com_commit" in record["method"]
    findings = json.loads((run / "findings" / "oltp.json").read_text())
    names = [f["check"] for f in findings]
    assert sum(n.startswith("consistency condition") for n in names) == 12 and any(n.startswith("mix:") for n in names)
    assert all(f["passed"] for f in findings), [f for f in findings if not f["passed"]]


def _in_process(tmp_path: Path, *args: str):
    from test_bad_input import run_in_process

    return run_in_process(tmp_path, "oltp", *args, "--runs-dir", str(tmp_path / "runs"))


def _refused(result, says: str) -> str:
    """One sentence, a non-zero exit, and no run directory."""
    assert result.code != 0 and says in result.stderr, result.stderr
    sentence = result.stderr.strip().removeprefix("refbench: ")
    assert sentence.count(". ") == 0 and sentence.endswith(".") and "Traceback" not in result.stderr
    return sentence


@pytest.mark.parametrize("args, says", [
    (["--engine", "oracle"], "engine must be postgres or mariadb, not 'oracle'"),
    (["--engine", "postgres", "--dsn", "mysql://bench@127.0.0.1/tpcc"], "contradicts the dsn, which is a MariaDB DSN"),
    (["--dsn", "mysql://bench@127.0.0.1:1/tpcc"], "cannot connect to MariaDB at 'mysql://bench@127.0.0.1:1/tpcc'"),
    (["--dsn", "mysql://bench@127.0.0.1:99999/tpcc"], "is not a number from 1 to 65535"),
    (["--engine", "mariadb", "--mariadb-settings", "innodb_log_file_size=lots"], "is refused by MariaDB"),
    (["--engine", "mariadb", "--mariadb-settings", "datadir=/tmp"], "which refbench sets itself"),
])
@pytest.mark.live
def test_bad_engine_choices_are_one_sentence_and_write_nothing(tmp_path, args, says):
    _refused(_in_process(tmp_path, *args), says)
    assert not (tmp_path / "runs").exists()


def test_a_user_without_the_privileges_or_the_password_is_refused_before_the_run(tpcc, tmp_path):
    """A server user that may read but not create procedures, and a wrong password: one sentence each, nothing
    written. The sentences are the engine's (engines.mariadb.check_server and connect)."""
    server = tpcc[2]
    with connect(server.dsn, autocommit=True) as admin:
        for host in ("localhost", "127.0.0.1"):
            _execute(admin, f"CREATE OR REPLACE USER 'reader'@'{host}' IDENTIFIED BY 'pw'")
            _execute(admin, f"GRANT SELECT, INSERT, UPDATE, DELETE ON tpcc.* TO 'reader'@'{host}'")
    try:
        sentence = _refused(_in_process(tmp_path, "--dsn", f"mysql://reader:pw@127.0.0.1:{server.port}/tpcc"),
                            "lacks the privileges")
        assert "CREATE ROUTINE" in sentence and "'pw'" not in sentence
        sentence = _refused(_in_process(tmp_path, "--dsn", f"mysql://reader:wrong@127.0.0.1:{server.port}/tpcc"),
                            "cannot connect to MariaDB")
        assert "wrong" not in sentence and "Access denied" in sentence
        assert not (tmp_path / "runs").exists()
    finally:
        with connect(server.dsn, autocommit=True) as admin:
            for host in ("localhost", "127.0.0.1"):
                _execute(admin, f"DROP USER IF EXISTS 'reader'@'{host}'")
