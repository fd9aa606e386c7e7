"""The twelve TPC-C consistency conditions on a real managed PostgreSQL: one warehouse loaded by the suite's own
loader, then run by its own driver (so Deliveries and Payments happened); each corruption changes ONE row inside a
transaction that is rolled back, and exactly the conditions it breaks must fail."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from refbench.engines.postgres import ManagedPostgres, connect
from refbench.suites.oltp import consistency, driver, transactions_at

pytestmark = pytest.mark.slow  # a load and a short run: about 40 s on two cores

ALL = set(range(1, 13))
# Orders below this one were delivered at load; from it on, Delivery or nobody delivered them.
FIRST_UNDELIVERED_AT_LOAD = 2101


@pytest.fixture(scope="module")
def server(tpcc_template):
    """One server for the module, on a copy of the one-warehouse template, in a directory the postgres system user
    can reach (tmp_path is closed to it)."""
    base = Path(tempfile.mkdtemp(prefix="refbench-test-consistency-"))
    base.chmod(0o755)
    subprocess.run(["cp", "-a", str(tpcc_template), str(base / "pgdata")], check=True)
    pg = ManagedPostgres(base / "pgdata", {})
    pg.start()
    try:
        yield pg
    finally:
        pg.stop()
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="module")
def databases(server):
    """(a copy of the database as loaded, the database after two virtual users ran the mix for 5 s)."""
    run_dsn = server.database("refbench")
    with connect(server.dsn, autocommit=True) as conn:
        conn.execute("CREATE DATABASE loaded TEMPLATE refbench")
    result = driver.run(transactions_at(run_dsn), 1, 2, 1, 5, False, 1)
    assert result.counts["delivery"]["ok"] > 0 and result.counts["payment"]["ok"] > 0
    with connect(run_dsn, autocommit=True) as conn:
        undelivered_from = conn.execute("SELECT min(m) FROM (SELECT min(no_o_id) m FROM tpcc.new_order GROUP BY no_d_id) x").fetchone()[0]
    assert undelivered_from > FIRST_UNDELIVERED_AT_LOAD  # every district had orders delivered during the run
    return server.database("loaded"), run_dsn


def violations(dsn: str, corruption: str = "", at_load: bool = False) -> dict[int, int]:
    """The conditions that fail (condition -> violating units) after ``corruption``, which is rolled back."""
    with connect(dsn) as conn:
        if corruption:
            assert conn.execute(corruption).rowcount == 1  # one row changed, no more
        result = consistency.check(transactions_at(dsn), conn, at_load)
        conn.rollback()
    assert set(result) == ALL
    return {n: count for n, (_, count) in result.items() if count}


def test_a_loaded_database_and_a_run_database_satisfy_all_twelve(databases):
    loaded, run = databases
    assert violations(loaded, at_load=True) == {}
    assert violations(loaded) == {}
    assert violations(run) == {}
    # Condition 11 as written holds at load only: after the run every district has delivered orders.
    assert violations(run, at_load=True) == {11: 10}


# A delivered order the driver's Delivery delivered (its lines have amounts), a load-time delivered order (its lines
# are 0.00), and two undelivered ones, all of district 1..10 as named.
DELIVERED_IN_RUN = ("(SELECT min(no_o_id) - 1 FROM tpcc.new_order WHERE no_w_id = 1 AND no_d_id = {d})")
UNDELIVERED = "(SELECT min(no_o_id) + {k} FROM tpcc.new_order WHERE no_w_id = 1 AND no_d_id = {d})"
A_PAYMENT = "(SELECT ctid FROM tpcc.history WHERE h_data = 'refbench payment' LIMIT 1)"

CORRUPTIONS = {
    # condition 1 compares W_YTD and D_YTD, each of which a second condition compares with the history (8, 9)
    "a district's D_YTD one cent off": (
        "UPDATE tpcc.district SET d_ytd = d_ytd + 0.01 WHERE d_w_id = 1 AND d_id = 1", {1: 1, 9: 1}),
    "a district's next order id skips one": (
        "UPDATE tpcc.district SET d_next_o_id = d_next_o_id + 1 WHERE d_w_id = 1 AND d_id = 2", {2: 1}),
    # a NEW_ORDER row is also the order's "undelivered" mark (5) and part of the district's count (11)
    "a NEW_ORDER row lost from the middle": (
        f"DELETE FROM tpcc.new_order WHERE no_w_id = 1 AND no_d_id = 3 AND no_o_id = {UNDELIVERED.format(k=3, d=3)}",
        {3: 1, 5: 1, 11: 1}),
    # the district's line count is the sum of its orders' (6)
    "an order's O_OL_CNT one too high": (
        f"UPDATE tpcc.oorder SET o_ol_cnt = o_ol_cnt + 1 WHERE o_w_id = 1 AND o_d_id = 4 AND o_id = {UNDELIVERED.format(k=0, d=4)}",
        {4: 1, 6: 1}),
    "a delivered order still marked new": (
        f"INSERT INTO tpcc.new_order (no_o_id, no_d_id, no_w_id) SELECT {DELIVERED_IN_RUN.format(d=5)}, 5, 1", {5: 1}),
    # its lines are delivered, the order is not: both sides of 5 and 7
    "a delivered order without a carrier": (
        f"UPDATE tpcc.oorder SET o_carrier_id = NULL WHERE o_w_id = 1 AND o_d_id = 5 AND o_id = {DELIVERED_IN_RUN.format(d=5)}",
        {5: 1, 7: 1}),
    "an order line moved to another order of the district": (
        f"UPDATE tpcc.order_line SET ol_o_id = {UNDELIVERED.format(k=2, d=6)}, ol_number = 100 "
        f"WHERE ol_w_id = 1 AND ol_d_id = 6 AND ol_number = 1 AND ol_o_id = {UNDELIVERED.format(k=1, d=6)}", {6: 2}),
    # a line of a load-time delivered order costs 0.00, so no balance moves
    "a delivered line without a delivery date": (
        "UPDATE tpcc.order_line SET ol_delivery_d = NULL WHERE ol_w_id = 1 AND ol_d_id = 7 AND ol_o_id = 1 AND ol_number = 1",
        {7: 1}),
    # a delivered amount is in both customer conditions
    "a delivered order line's amount one cent off": (
        f"UPDATE tpcc.order_line SET ol_amount = ol_amount + 0.01 WHERE ol_w_id = 1 AND ol_d_id = 7 AND ol_number = 1 "
        f"AND ol_o_id = {DELIVERED_IN_RUN.format(d=7)}", {10: 1, 12: 1}),
    "the warehouse's W_YTD one cent off": (
        "UPDATE tpcc.warehouse SET w_ytd = w_ytd + 0.01 WHERE w_id = 1", {1: 1, 8: 1}),
    "a payment booked to another district of the warehouse": (
        f"UPDATE tpcc.history SET h_d_id = h_d_id % 10 + 1 WHERE ctid = {A_PAYMENT}", {9: 2}),
    "a payment booked to another customer": (
        f"UPDATE tpcc.history SET h_c_id = h_c_id % 3000 + 1 WHERE ctid = {A_PAYMENT}", {10: 2}),
    "a customer's C_BALANCE one cent off": (
        "UPDATE tpcc.customer SET c_balance = c_balance + 0.01 WHERE c_w_id = 1 AND c_d_id = 8 AND c_id = 42", {10: 1, 12: 1}),
    # a delivered order without lines: every other condition still balances
    "a phantom delivered order": (
        "INSERT INTO tpcc.oorder (o_id, o_d_id, o_w_id, o_c_id, o_entry_d, o_carrier_id, o_ol_cnt, o_all_local) "
        "VALUES (0, 9, 1, 1, now(), 1, 0, 1)", {11: 1}),
    "a customer's C_YTD_PAYMENT one cent off": (
        "UPDATE tpcc.customer SET c_ytd_payment = c_ytd_payment + 0.01 WHERE c_w_id = 1 AND c_d_id = 10 AND c_id = 7", {12: 1}),
}


# Every nullable column a condition reads -> (the row it is set NULL in, the conditions that must then fail). The rows
# exist on any database the suite loaded, run or not, on PostgreSQL and MariaDB alike (test_mariadb_oltp.py uses this
# table too). Order 1 was delivered at load, its lines for 0.00: a sum that skipped a NULL there would still balance.
NULL_READS = {
    ("warehouse", "w_ytd"): ("w_id = 1", {1, 8}),
    ("district", "d_ytd"): ("d_w_id = 1 AND d_id = 1", {1, 9}),
    ("district", "d_next_o_id"): ("d_w_id = 1 AND d_id = 2", {2}),
    ("oorder", "o_c_id"): ("o_w_id = 1 AND o_d_id = 3 AND o_id = 1", {10, 12}),
    ("oorder", "o_ol_cnt"): ("o_w_id = 1 AND o_d_id = 4 AND o_id = 1", {4, 6}),
    ("oorder", "o_carrier_id"): ("o_w_id = 1 AND o_d_id = 5 AND o_id = 1", {5, 7}),
    ("order_line", "ol_delivery_d"): ("ol_w_id = 1 AND ol_d_id = 6 AND ol_o_id = 1 AND ol_number = 1", {7}),
    ("order_line", "ol_amount"): ("ol_w_id = 1 AND ol_d_id = 7 AND ol_o_id = 1 AND ol_number = 1", {10, 12}),
    ("history", "h_amount"): ("h_c_w_id = 1 AND h_c_d_id = 9 AND h_c_id = 100", {8, 9, 10}),
    ("history", "h_w_id"): ("h_c_w_id = 1 AND h_c_d_id = 9 AND h_c_id = 101", {8, 9}),
    ("history", "h_d_id"): ("h_c_w_id = 1 AND h_c_d_id = 9 AND h_c_id = 102", {9}),
    ("history", "h_c_w_id"): ("h_c_w_id = 1 AND h_c_d_id = 9 AND h_c_id = 103", {10}),
    ("history", "h_c_d_id"): ("h_c_w_id = 1 AND h_c_d_id = 9 AND h_c_id = 104", {10}),
    ("history", "h_c_id"): ("h_c_w_id = 1 AND h_c_d_id = 9 AND h_c_id = 105", {10}),
    ("customer", "c_balance"): ("c_w_id = 1 AND c_d_id = 8 AND c_id = 42", {10, 12}),
    ("customer", "c_ytd_payment"): ("c_w_id = 1 AND c_d_id = 10 AND c_id = 7", {12}),
}


@pytest.mark.parametrize("table, column", NULL_READS)
def test_a_null_where_a_condition_reads_a_value_fails_that_condition(databases, table, column):
    where, expected = NULL_READS[table, column]
    corruption = (f"UPDATE tpcc.{table} SET {column} = NULL "
                  f"WHERE ctid = (SELECT ctid FROM tpcc.{table} WHERE {where} AND {column} IS NOT NULL LIMIT 1)")
    for dsn in databases:
        assert set(violations(dsn, corruption)) == expected


@pytest.mark.parametrize("name", CORRUPTIONS)
def test_one_corrupt_row_fails_exactly_the_conditions_it_breaks(databases, name):
    corruption, expected = CORRUPTIONS[name]
    assert violations(databases[1], corruption) == expected


def test_every_condition_has_a_corruption_that_fails_it():
    assert set().union(*(expected for _, expected in CORRUPTIONS.values())) == ALL


def test_condition_11_as_loaded_catches_a_phantom_order(databases):
    phantom, expected = CORRUPTIONS["a phantom delivered order"]
    assert violations(databases[0], phantom, at_load=True) == expected


def test_a_payment_to_an_unknown_name_moves_no_total(databases):
    """The Payment function used to add to W_YTD and D_YTD before it found no customer of that name, and wrote no
    HISTORY row: conditions 8 and 9 broke."""
    assert violations(databases[1], "SELECT tpcc.payment(1, 1, 1, 1, NULL, 'NOBODY', 100.00)") == {}
