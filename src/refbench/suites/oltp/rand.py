"""TPC-C random inputs (TPC-C 5.11 clause 2.1.6 and 4.3.2): NURand, last names, strings."""

from __future__ import annotations

import random
import string

SYLLABLES = ["BAR", "OUGHT", "ABLE", "PRI", "PRES", "ESE", "ANTI", "CALLY", "ATION", "EING"]
ALNUM = string.ascii_letters + string.digits
POOL_SIZE = 8192


class TpccRandom(random.Random):
    def __init__(self, seed: int | None = None, c_last: int = 157, c_id: int = 259, ol_i_id: int = 7911):
        super().__init__(seed)
        # The run-time C constants; the load used others, and 4.3.2.3's rules on C_LAST differences hold for these.
        self.c = {255: c_last, 1023: c_id, 8191: ol_i_id}
        self._pool = "".join(self.choice(ALNUM) for _ in range(POOL_SIZE))

    def randint(self, a: int, b: int) -> int:
        # random.Random.randint is four Python calls deep and the load and the driver call it millions of times;
        # one C call to random() is uniform enough for ranges this small (bias below 2**-30).
        return a + int(self.random() * (b - a + 1))

    def nurand(self, a: int, x: int, y: int) -> int:
        return (((self.randint(0, a) | self.randint(x, y)) + self.c[a]) % (y - x + 1)) + x

    def astring(self, low: int, high: int) -> str:
        # A slice of a random pool: the load calls this about 1.6 million times per warehouse, so one C-level
        # random() per choice, as in randint, not randrange's Python layers.
        rnd = self.random
        n = low + int(rnd() * (high - low + 1))
        start = int(rnd() * (POOL_SIZE - n))
        return self._pool[start:start + n]

    def nstring(self, low: int, high: int) -> str:
        n = self.randint(low, high)
        return "%0*d" % (n, int(self.random() * 10**n))

    def data(self, low: int, high: int) -> str:
        """I_DATA / S_DATA: 10% contain ORIGINAL at a random place."""
        text = self.astring(low, high)
        if self.random() < 0.1:
            at = self.randint(0, len(text) - 8)
            text = text[:at] + "ORIGINAL" + text[at + 8:]
        return text

    def zip(self) -> str:
        return self.nstring(4, 4) + "11111"

    def customer_id(self) -> int:
        return self.nurand(1023, 1, 3000)

    def item_id(self) -> int:
        return self.nurand(8191, 1, 100000)

    def run_last_name(self) -> str:
        return last_name(self.nurand(255, 0, 999))


def last_name(number: int) -> str:
    return SYLLABLES[number // 100] + SYLLABLES[(number // 10) % 10] + SYLLABLES[number % 10]
