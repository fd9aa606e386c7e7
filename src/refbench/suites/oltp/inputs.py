"""What a virtual user asks of each transaction (TPC-C 2.4.1, 2.5.1, 2.6.1, 2.7.1, 2.8.1), built directly as the
text parameters of the prepared calls. Making these inputs is most of the driver's own CPU, and the driver's CPU
is CPU the database under test does not get: one C-level random() per choice, bytes straight from the numbers.
"""

from __future__ import annotations

from typing import Callable

from refbench.suites.oltp.rand import TpccRandom

UNUSED_ITEM = 100_001
QUANTITY = [str(q).encode() for q in range(1, 11)]
Params = list[bytes | None]


def _ints(values) -> bytes:
    """A PostgreSQL int[] literal."""
    return b"{" + b",".join(b"%d" % v for v in values) + b"}"


def _order(rng: TpccRandom, w: int, others: list[int]) -> tuple[int, list[tuple[int, int]], bytes, bytes, list[bytes]]:
    """New-Order's choices: the line count, the (supply warehouse, item) lines, district, customer and quantities."""
    rnd, c = rng.random, rng.c[8191]
    count = 5 + int(rnd() * 11)
    items: set[int] = set()
    while len(items) < count:  # distinct items, so each line updates its own stock row
        items.add(((int(rnd() * 8192) | (1 + int(rnd() * 100_000))) + c) % 100_000 + 1)  # NURand(8191, 1, 100000)
    # 1% of lines come from another warehouse; sorted by (supply warehouse, item) so that concurrent orders lock
    # stock rows in one order and cannot deadlock.
    if others:
        lines = sorted((others[int(rnd() * len(others))] if rnd() < 0.01 else w, item) for item in items)
    else:
        lines = [(w, item) for item in sorted(items)]
    if rnd() < 0.01:  # 1% roll back: the last line names an unused item (2.4.1.4)
        lines[-1] = (lines[-1][0], UNUSED_ITEM)
    return count, lines, b"%d" % (1 + int(rnd() * 10)), b"%d" % rng.customer_id(), [QUANTITY[int(rnd() * 10)] for _ in range(count)]


def new_order(rng: TpccRandom, w: int, others: list[int]) -> Params:
    """The lines as three int[] (items, supply warehouses, quantities): PostgreSQL's function."""
    count, lines, d, c, quantities = _order(rng, w, others)
    return [b"%d" % w, d, c, _ints(item for _, item in lines), _ints(supply for supply, _ in lines),
            b"{" + b",".join(quantities) + b"}"]


def new_order_json(rng: TpccRandom, w: int, others: list[int]) -> Params:
    """The lines as one JSON array of [supply warehouse, item, quantity]: MariaDB's procedure (JSON_TABLE)."""
    count, lines, d, c, quantities = _order(rng, w, others)
    return [b"%d" % w, d, c, b"[" + b",".join([b"[%d,%d,%s]" % (supply, item, q)
                                               for (supply, item), q in zip(lines, quantities)]) + b"]"]


def payment(rng: TpccRandom, w: int, others: list[int]) -> Params:
    rnd = rng.random
    d = 1 + int(rnd() * 10)
    # 15% pay through another warehouse's district (2.5.1.2); 60% name the customer by last name.
    c_w, c_d = (others[int(rnd() * len(others))], 1 + int(rnd() * 10)) if others and rnd() < 0.15 else (w, d)
    by_name = rnd() < 0.6
    return [b"%d" % w, b"%d" % d, b"%d" % c_w, b"%d" % c_d, None if by_name else b"%d" % rng.customer_id(),
            rng.run_last_name().encode() if by_name else None, b"%.2f" % (1 + rnd() * 4999)]


def order_status(rng: TpccRandom, w: int, others: list[int]) -> Params:
    d = 1 + int(rng.random() * 10)
    by_name = rng.random() < 0.6
    return [b"%d" % w, b"%d" % d, None if by_name else b"%d" % rng.customer_id(),
            rng.run_last_name().encode() if by_name else None]


def delivery(rng: TpccRandom, w: int, others: list[int]) -> Params:
    return [b"%d" % w, b"%d" % (1 + int(rng.random() * 10))]  # the carrier


def stock_level(rng: TpccRandom, w: int, others: list[int]) -> Params:
    return [b"%d" % w, b"%d" % (1 + int(rng.random() * 10)), b"%d" % (10 + int(rng.random() * 11))]  # the threshold


INPUTS: dict[str, Callable[[TpccRandom, int, list[int]], Params]] = {
    "new_order": new_order, "payment": payment, "order_status": order_status, "delivery": delivery,
    "stock_level": stock_level,
}


def inputs_for(new_order_lines: str) -> dict[str, Callable[[TpccRandom, int, list[int]], Params]]:
    """The inputs for an engine that takes New-Order's lines as ``new_order_lines`` ("arrays" or "json"): the same
    random choices in the same order either way."""
    return INPUTS if new_order_lines == "arrays" else {**INPUTS, "new_order": new_order_json}
