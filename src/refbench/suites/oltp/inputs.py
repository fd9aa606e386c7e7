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


def new_order(rng: TpccRandom, w: int, others: list[int]) -> Params:
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
    return [b"%d" % w, b"%d" % (1 + int(rnd() * 10)), b"%d" % rng.customer_id(),
            _ints(item for _, item in lines), _ints(supply for supply, _ in lines),
            b"{" + b",".join([QUANTITY[int(rnd() * 10)] for _ in range(count)]) + b"}"]


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
