"""Passwords never leave memory: connection strings are shown and stored with the password masked, and the values
a run needs again (``refbench resume`` connects with the plan's DSN) are split off into a file only the owner reads.

Imports nothing of refbench, so the run store and the engines can both use it."""

from __future__ import annotations

import bisect
import re
from typing import Any

MASK = "***"

# A URI's user:password@host. The password runs to the LAST '@' that a host follows (an '@' written unescaped belongs
# to the password, as urlsplit and so parse_dsn read it), and may hold ':', '/', '?', '#', quotes and spaces written
# raw, since a broken DSN is repeated in messages too: when unsure, more is masked, never less. It ends with its line.
# What follows a host: a port, a path, a query, the end, or the quote or space that ends a DSN quoted in a message;
# "'bob'@'h'" (a MySQL account in a server's message) has no host after its '@'. Two patterns instead of one greedy
# regex, so that a line of many URIs without an '@' costs one pass, not one per URI.
_USER = re.compile(r"://[^:/?#@\s'\"]*:")
_HOST_AT = re.compile(r"@(?=[^\s/?#@'\"]+(?:[/?#\s'\"]|$)|[/?#]|$)", re.MULTILINE)
# ?password=… in a URI's query: up to the next parameter.
_QUERY = re.compile(r"([?&]password=)[^&#\s]*", re.IGNORECASE)
# libpq's keyword form: password=secret, password = 'a b', 'it\'s' (backslash escapes, quoted or not). A doubled quote
# ('it''s', SQL's way) and a quote never closed are masked to the end too: libpq refuses both, and its message quotes
# the rest.
_KEYWORD = re.compile(r"(?<![?&])(password\s*=\s*)('(?:[^'\\]|\\.|'')*(?:'|\\?$)|(?:\\.|[^\s\\])+)", re.IGNORECASE)


def _userinfo_spans(text: str) -> list[tuple[int, int]]:
    """Where the passwords of the URIs in ``text`` are: from after user: to the last '@' on its line a host follows."""
    host_ats = [m.start() for m in _HOST_AT.finditer(text)]
    spans: list[tuple[int, int]] = []
    for m in _USER.finditer(text):
        start = m.end()
        if spans and start < spans[-1][1]:
            continue  # in the password just found
        line_end = text.find("\n", start) % (len(text) + 1)  # -1 (no newline): the end of the text
        last = bisect.bisect_left(host_ats, line_end) - 1
        if last >= 0 and host_ats[last] >= start:
            spans.append((start, host_ats[last]))
    return spans


def _spans(text: str) -> list[tuple[int, int]]:
    """Where the passwords in ``text`` are, each (start, end), overlaps merged."""
    found = sorted(_userinfo_spans(text) + [(m.end(1), m.end()) for m in _QUERY.finditer(text)] +
                   [(m.start(2), m.end(2)) for m in _KEYWORD.finditer(text)])
    merged: list[tuple[int, int]] = []
    for start, end in found:
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        elif end > start:
            merged.append((start, end))
    return merged


def redact(text: str) -> str:
    """``text`` with every password it carries replaced by ***."""
    shown, last = [], 0
    for start, end in _spans(text):
        shown += [text[last:start], MASK]
        last = end
    return "".join(shown) + text[last:]


def redact_quoted(message: str, dsn: str) -> str:
    """A parser's ``message`` about ``dsn`` with what it quotes masked, unless the DSN shows it with its passwords
    masked: libpq's "missing '=' after "…"" quotes the part of a DSN it stopped at, urlsplit's "'…' does not appear
    to be an IPv4 or IPv6 address" what it took for a host, and either may be a piece of the password. A password may
    hold quotes itself, so a quotation runs from the first quote to the last of the same kind."""
    visible = redact(dsn)
    if visible == dsn:
        return message
    return re.sub(r"""(["'])(.*)\1""", lambda m: m[0] if m[2] in visible else f"{m[1]}{MASK}{m[1]}", message,
                  flags=re.DOTALL)


def split_secrets(data: Any) -> tuple[Any, list[tuple[list[str | int], str]]]:
    """(``data`` with every string redacted, [(where, original)] for each string that changed): the first is safe to
    write anywhere, the second goes to an owner-only file and back in with ``merge_secrets``."""
    secrets: list[tuple[list[str | int], str]] = []

    def walk(value: Any, where: list[str | int]) -> Any:
        if isinstance(value, str):
            masked = redact(value)
            if masked != value:
                secrets.append((where, value))
            return masked
        if isinstance(value, dict):
            return {k: walk(v, [*where, k]) for k, v in value.items()}
        if isinstance(value, list):
            return [walk(v, [*where, i]) for i, v in enumerate(value)]
        return value

    return walk(data, []), secrets


def merge_secrets(data: Any, secrets: list[tuple[list[str | int], str]]) -> Any:
    """``data`` with the originals of ``split_secrets`` put back (in place; returned for convenience)."""
    for where, original in secrets:
        if not where:
            return original
        parent = data
        try:
            for key in where[:-1]:
                parent = parent[key]
            parent[where[-1]] = original
        except (KeyError, IndexError, TypeError):
            continue  # the masked value is gone: nothing to restore
    return data
