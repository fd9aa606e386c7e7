"""Checking query answers, as strictly as the data allows.

Against the TPC-H reference answers (SF 1), exactly the specification's rules (2.1.3.5): singleton values and counts
exact, sums within 100, averages and ratios within 1% after rounding to 1/100. Those rules are loose for small values
(Q18's quantities near 300 pass 31% off, Q1's avg_disc 0.05 passes at 0.0525), but the reference answers are printed
to 2 decimals, so nothing stricter is sound there.

Between engines on the same data the answers are kept at full precision and compared with a tolerance fitted to each
engine's arithmetic (``engine_rule``): strings, counts, keys and singleton values exactly; sums, averages and ratios
within a relative ``RELATIVE`` plus half a unit in the last decimal place of a rounded decimal result.

Column kinds (the reference set's colprecision.txt): str, cnt (COUNT), int (a key), num (a singleton number), sum,
avg, rat (a ratio or percentage).
"""

from __future__ import annotations

from datetime import date, datetime
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation
from importlib.resources import files
from typing import Any

TOLERANCES = ("str", "cnt", "int", "num", "sum", "avg", "rat")
# Measured on the same SF 0.01 and SF 0.1 data, streams 0-3 (88 queries), against PostgreSQL's exact numeric
# results: DuckDB (averages and divisions in binary floating point) is off by at most 1.7e-16 relative, sums exact;
# MariaDB's sums are exact, and its divisions are decimals rounded to 4 more digits than the dividend
# (div_precision_increment): Q1's avg_disc 0.049828 against 0.0498275399…, 9.2e-6 relative, within half a unit of its
# last digit. 1e-9 leaves a floating-point sum room for any order of addition over billions of rows, and is still
# five million times smaller than the 5% error this check is there to catch.
RELATIVE_TEXT = "1e-9"
RELATIVE = Decimal(RELATIVE_TEXT)
REFERENCE_RULES = {"str": "TPC-H 2.1.3.5: singleton exact", "int": "TPC-H 2.1.3.5: singleton exact",
                   "num": "TPC-H 2.1.3.5: singleton exact", "cnt": "TPC-H 2.1.3.5: count exact",
                   "sum": "TPC-H 2.1.3.5: sum within 100",
                   "avg": "TPC-H 2.1.3.5: average within 1% after rounding to 1/100",
                   "rat": "TPC-H 2.1.3.5: ratio within 1% after rounding to 1/100"}
ENGINE_RULES = {"str": "between engines: exact", "int": "between engines: exact", "num": "between engines: exact",
                "cnt": "between engines: exact", "sum": f"between engines: relative {RELATIVE_TEXT}",
                "avg": f"between engines: relative {RELATIVE_TEXT} and half the last decimal place",
                "rat": f"between engines: relative {RELATIVE_TEXT} and half the last decimal place"}
# Each query's ORDER BY as output columns (1-based). SQL leaves the order of rows tied on these open, and two correct
# engines differ there: at SF 10, Q11 lists thousands of parts, some with equal values. Tied rows compare as a set.
ORDER_BY = {1: (1, 2), 2: (1, 3, 2, 4), 3: (2, 3), 4: (1,), 5: (2,), 7: (1, 2, 3), 8: (1,), 9: (1, 2), 10: (3,),
            11: (2,), 12: (1,), 13: (2, 1), 15: (1,), 16: (4, 1, 2, 3), 18: (5, 4), 20: (1,), 21: (2, 1), 22: (1,)}
# Queries with a LIMIT: it may cut a tie at the last rows differently, so there only the ORDER BY columns must agree.
LIMITED = {2, 3, 10, 18, 21}
EXACT = ("str", "cnt", "int", "num")


# Answer sets kept with refbench, by scale factor: the TPC-H reference answers at SF 1 (2 decimals, checked by the
# specification's rules), and stream 0's answers at the quick profile's SF 0.01 at full precision
# (answers_sf0.01/README.md), which a run of one engine alone is checked against by the rules between engines.
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


def as_text(value: Any) -> str:
    """A value at the precision the engine gave it: a decimal with all its digits (its last place says how it was
    rounded), a binary float with the 17 significant digits that identify it, NULL as empty."""
    if isinstance(value, (date, datetime)):
        return value.strftime("%Y-%m-%d")
    if isinstance(value, Decimal):
        return format(value, "f")
    if isinstance(value, float):
        return format(value, ".16e")
    return "" if value is None else str(value).strip()


def as_expected(rows: list[tuple]) -> list[list[str]]:
    """One engine's rows in text form at full precision, to keep, and to check another engine against."""
    return [[as_text(v) for v in row] for row in rows]


def compare(query: int, rows: list[tuple], expected: list[list[str]], between_engines: bool = False) -> str | None:
    """None when ``rows`` match ``expected``; otherwise the first difference, in words, with the rule it broke.
    ``expected`` is the TPC-H reference answer (the specification's rules) or, with ``between_engines``, another
    engine's answer to the same query on the same data (``engine_rule``)."""
    kinds = column_kinds(query)
    close, rules = (engine_rule, ENGINE_RULES) if between_engines else (reference_rule, REFERENCE_RULES)
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
                if not close(kinds[j], as_text(got[j]), want[j]):
                    tied = f" (one of rows {start + 1}-{end}, tied on the ORDER BY)" if end - start > 1 else ""
                    return (f"row {i}{tied}, column {j + 1} ({kinds[j]}): {as_text(got[j])!r}, expected {want[j]!r} "
                            f"({rules[kinds[j]]})")
    return None


def _tied_runs(rows: list[list[str]], keys: list[int]) -> list[tuple[int, int]]:
    """[start, end) of each run of consecutive rows equal on the ORDER BY columns (each row its own run without)."""
    runs, start = [], 0
    for i in range(1, len(rows) + 1):
        if i == len(rows) or not keys or [rows[i][k] for k in keys] != [rows[start][k] for k in keys]:
            runs.append((start, i))
            start = i
    return runs


def _number(text: str) -> Decimal | None:
    try:
        number = Decimal(text)
    except InvalidOperation:
        return None
    return number if number.is_finite() else None


def _exact(got: str, want: str) -> bool:
    """Equal as text, or as numbers (1995 and 1995.0, a numeric year and an integer one)."""
    if got == want:
        return True
    a, b = _number(got), _number(want)
    return a is not None and b is not None and a == b


def reference_rule(kind: str, got: str, want: str) -> bool:
    """TPC-H 2.1.3.5, word for word: singletons and counts exact; SUM within 100; AVG and ratios r within 1% of the
    reference v when rounded to the nearest 1/100 (0.99·v ≤ round(r, 2) ≤ 1.01·v)."""
    if kind not in ("sum", "avg", "rat"):
        return _exact(got, want)
    a, b = _number(got), _number(want)
    if a is None or b is None:
        return got == want
    if kind == "sum":
        return abs(a - b) <= 100
    return abs(a.quantize(Decimal("0.01"), ROUND_HALF_UP) - b) <= abs(b) / 100


def engine_rule(kind: str, got: str, want: str) -> bool:
    """Two engines' answers to the same query on the same data: exact for strings, counts, keys and singleton values
    (stored exactly by every engine); sums, averages and ratios within RELATIVE of the larger, plus, for averages and
    ratios, half a unit in the last place of each decimal result (an engine rounds a division to its result's scale).
    A float is written with 17 significant digits (as_text), so its last place is below RELATIVE."""
    if kind not in ("sum", "avg", "rat"):
        return _exact(got, want)
    a, b = _number(got), _number(want)
    if a is None or b is None:
        return got == want
    allowed = RELATIVE * max(abs(a), abs(b))
    if kind != "sum":
        allowed += sum(Decimal(1).scaleb(n.as_tuple().exponent) / 2 for n in (a, b))
    return abs(a - b) <= allowed
