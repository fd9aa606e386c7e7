"""Numbers for people, one way everywhere: the report, the terminal, the rating sheet and the dashboard write a figure
the same (63,100; 0.46; 1.38×); text a spreadsheet opens as text, and text a terminal shows rather than obeys."""

from __future__ import annotations

import math
import re
from typing import Any


def fmt(value: Any) -> str:
    """Numbers for people: thousands separators, three significant digits below 1,000 and no trailing zeros (0.46 s,
    not 0.4600 s): a single measurement on a shared host is not known more closely."""
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if math.isnan(value):
            return "—"
        return f"{value:,.0f}" if abs(value) >= 1000 else significant(value, 3)
    if isinstance(value, (list, tuple)):
        return ", ".join(fmt(v) for v in value)
    return str(value)


def significant(value: float, digits: int) -> str:
    """``value`` to ``digits`` significant digits, written out (63,000 and 0.0012, never 6.3e+04)."""
    if value == 0:
        return "0"
    magnitude = math.floor(math.log10(abs(value)))
    decimals = digits - 1 - magnitude
    if decimals <= 0:
        return f"{round(value, decimals):,.0f}"
    text = f"{value:,.{decimals}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def fitted(value: float, spread: float) -> str:
    """A figure to the digit its noise allows: the spread of its repeats (high − low) decides the last digit shown,
    with two to four significant digits (63,100 ± 400 → 63,100; 0.912 ± 0.05 → 0.91)."""
    if not spread or spread <= 0 or not value or isinstance(value, bool):
        return fmt(value)
    digits = math.floor(math.log10(abs(value))) - math.floor(math.log10(spread)) + 1
    return significant(float(value), min(max(digits, 2), 4))


def figure_said(value: float, unit: str = "", low: float | None = None, high: float | None = None,
                with_range: bool = True) -> str:
    """A headline figure as every surface prints it (the terminal's verdict, `refbench why`, the report, `refbench
    runs`, the dashboard): to the digits its repeats' spread allows, then their range: "80,600 IOPS (73,700–82,500)"."""
    spread = high - low if low is not None and high is not None else 0.0
    said = f"{fitted(value, spread)} {unit}".rstrip()
    return said + (f" ({fitted(low, spread)}–{fitted(high, spread)})" if with_range and spread else "")


def spreadsheet_text(value: Any) -> Any:
    """A CSV cell a spreadsheet would run as a formula (text beginning with = + - @, a tab or a carriage return) made
    text with a leading quote, as OWASP advises against CSV injection; numbers are left as they are."""
    return f"'{value}" if isinstance(value, str) and value[:1] in ("=", "+", "-", "@", "\t", "\r") else value


# What a terminal obeys rather than shows: C0 but tab and newline, DEL, C1 (U+009B is a CSI), and the marks that
# reorder or break text (bidirectional overrides and isolates, line and paragraph separators). Run names, tags, hosts
# and the text of a run's files may hold them: a run directory renamed by hand, a tags.json edited.
_OBEYED = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]")


def visible(text: str) -> str:
    """``text`` with each control character as its escape (\\x1b, \\u202e), so that a terminal shows it."""
    return _OBEYED.sub(lambda m: f"\\x{ord(m[0]):02x}" if ord(m[0]) < 0x100 else f"\\u{ord(m[0]):04x}", text)
