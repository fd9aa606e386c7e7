"""Checking query answers within the specification's tolerance (TPC-H 2.1.3.5): against the reference answer set
at SF1, and between the two engines at any scale.

Column kinds (the reference set's colprecision.txt): str and dates compare as text; cnt and int exactly; num
after rounding to 0.01; sum within 100; avg and rat within 1% after rounding to 0.01.

"Within 100" is the specification's rule for SUM results against its SF 1 answers, where the sums are money in the
millions. Four "sum" columns are not money: Q12's two line counts (SUMs of 1s) and the quantities of Q1 and Q18.
Between two engines, at SF 0.01, Q12's counts are 61 and 86 and Q18's quantities about 300, so "within 100"
would let almost anything through: there the counts compare exactly and the quantities within a relative
QUANTITY_TOLERANCE (``engine_kinds``). The reference check keeps the specification's kinds.
"""

from __future__ import annotations

import decimal
from datetime import date, datetime
from importlib.resources import files
from typing import Any

TOLERANCES = ("str", "cnt", "int", "num", "sum", "avg", "rat", "qty")
# query -> {column (1-based): kind} for the "sum" columns that are not money
NOT_MONEY_SUMS = {1: {3: "qty"}, 12: {2: "cnt", 3: "cnt"}, 18: {6: "qty"}}
# Sums of quantities are exact in decimal arithmetic; this only leaves room for an engine that adds in binary floating
# point (a part per million), not for a wrong row (one unit of quantity is 0.3% of a Q18 sum at SF 0.01).
QUANTITY_TOLERANCE = 1e-6
# Each query's ORDER BY as output columns (1-based). SQL leaves the order of rows tied on these open, and two correct
# engines differ there: at SF 10, Q11 lists thousands of parts, some with equal values. Tied rows compare as a set.
ORDER_BY = {1: (1, 2), 2: (1, 3, 2, 4), 3: (2, 3), 4: (1,), 5: (2,), 7: (1, 2, 3), 8: (1,), 9: (1, 2), 10: (3,),
            11: (2,), 12: (1,), 13: (2, 1), 15: (1,), 16: (4, 1, 2, 3), 18: (5, 4), 20: (1,), 21: (2, 1), 22: (1,)}
# Queries with a LIMIT: it may cut a tie at the last rows differently, so there only the ORDER BY columns must agree.
LIMITED = {2, 3, 10, 18, 21}
EXACT = ("str", "cnt", "int")


# Answer sets kept with refbench, by scale factor: the TPC-H reference answers at SF 1, and stream 0's answers at the
# quick profile's SF 0.01 (answers_sf0.01/README.md), which a run of one engine alone is checked against.
ANSWER_SETS = {1.0: "answers_sf1", 0.01: "answers_sf0.01"}


def reference_answer(query: int, sf: float = 1.0) -> list[list[str]]:
    """The rows of the answer of a query (stream 0's parameters) at scale factor ``sf`` (one of ANSWER_SETS), as text."""
    text = files("refbench.suites.dss").joinpath(ANSWER_SETS[sf], f"q{query}.out").read_text()
    # The TPC-H set ends its files with blank lines; in refbench's own every line is a row, and a blank one is a row of
    # one NULL (Q17's average over no rows at SF 0.01).
    lines = [line for line in text.splitlines()[1:] if line.strip() or sf != 1.0]
    return [[cell.strip() for cell in line.split("|")] for line in lines]


def column_kinds(query: int) -> list[str]:
    lines = files("refbench.suites.dss").joinpath("answers_sf1", "colprecision.txt").read_text().splitlines()
    return lines[query - 1].split()


def engine_kinds(query: int) -> list[str]:
    """The kinds two engines' answers are compared by, at any scale: the reference set's, with the sums that are
    not money made exact (counts) or relative (quantities)."""
    kinds = column_kinds(query)
    for column, kind in NOT_MONEY_SUMS.get(query, {}).items():
        kinds[column - 1] = kind
    return kinds


def as_text(value: Any) -> str:
    if isinstance(value, (date, datetime)):
        return value.strftime("%Y-%m-%d")
    if isinstance(value, (float, decimal.Decimal)):
        return f"{value:.2f}"
    return "" if value is None else str(value).strip()


def compare(query: int, rows: list[tuple], expected: list[list[str]], kinds: list[str] | None = None) -> str | None:
    """None when ``rows`` match ``expected`` within tolerance; otherwise the first difference, in words."""
    kinds = kinds or column_kinds(query)
    if len(rows) != len(expected):
        return f"{len(rows)} rows, expected {len(expected)}"
    for i, (got, want) in enumerate(zip(rows, expected), start=1):
        if len(got) != len(want):
            return f"row {i} has {len(got)} columns, expected {len(want)}"
    keys = [c - 1 for c in ORDER_BY.get(query, ())]
    for start, end in _tied_runs(expected, keys):
        got_rows, want_rows, columns = rows[start:end], expected[start:end], range(len(kinds))
        if end - start > 1:
            if end == len(expected) and query in LIMITED:
                columns = keys
            exact_first = [j for j in columns if kinds[j] in EXACT] + [j for j in columns if kinds[j] not in EXACT]
            got_rows = sorted(got_rows, key=lambda r: [as_text(r[j]) for j in exact_first])
            want_rows = sorted(want_rows, key=lambda r: [r[j] for j in exact_first])
        for i, (got, want) in enumerate(zip(got_rows, want_rows), start=start + 1):
            for j in columns:
                if not _close(kinds[j], got[j], want[j]):
                    tied = f" (one of rows {start + 1}-{end}, tied on the ORDER BY)" if end - start > 1 else ""
                    return f"row {i}{tied}, column {j + 1} ({kinds[j]}): {as_text(got[j])!r}, expected {want[j]!r}"
    return None


def _tied_runs(rows: list[list[str]], keys: list[int]) -> list[tuple[int, int]]:
    """[start, end) of each run of consecutive rows equal on the ORDER BY columns (each row its own run without)."""
    runs, start = [], 0
    for i in range(1, len(rows) + 1):
        if i == len(rows) or not keys or [rows[i][k] for k in keys] != [rows[start][k] for k in keys]:
            runs.append((start, i))
            start = i
    return runs


def _close(kind: str, value: Any, reference: str) -> bool:
    if kind == "str" or as_text(value) == reference:  # text, or equal as written (also both empty: NULL)
        return as_text(value) == reference
    try:
        got, want = float(value), float(reference)
    except (TypeError, ValueError):
        return False
    if kind in ("cnt", "int"):
        return got == want
    if kind == "num":
        return abs(round(got, 2) - round(want, 2)) <= 0.01 + 1e-9
    if kind == "sum":
        return abs(got - want) <= 100
    if kind == "qty":
        return abs(got - want) <= QUANTITY_TOLERANCE * abs(want)
    return abs(round(got, 2) - round(want, 2)) <= 0.01 * abs(round(want, 2)) + 1e-9  # avg, rat


def as_expected(rows: list[tuple]) -> list[list[str]]:
    """One engine's rows in the reference set's text form, to check the other engine against."""
    return [[as_text(v) for v in row] for row in rows]
