"""Self-contained HTML: inline CSS, charts embedded as data URIs, no scripts, opens offline."""

from __future__ import annotations

import base64
import html
import math
from pathlib import Path
from typing import Any, Iterable

CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0;color:#1d2430;background:#f6f7f9}
main{max-width:1180px;margin:0 auto;padding:24px 32px 64px;background:#fff;box-shadow:0 0 12px #0001}
h1{margin:0 0 4px;font-size:26px} h2{margin-top:36px;border-bottom:2px solid #2c5d8f;padding-bottom:4px;color:#1b3b5c}
h3{margin-top:24px;color:#24476b} .sub{color:#5b6675;margin:0 0 16px}
table{border-collapse:collapse;margin:8px 0 16px;font-size:13px} th,td{border:1px solid #d7dce3;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#eef2f7} td.num{text-align:right;font-variant-numeric:tabular-nums}
.ok,.pass{color:#1a7f37;font-weight:600} .change,.FAIL{color:#b42318;font-weight:600} .unknown{color:#8a6d00}
.banner{padding:10px 14px;border-radius:6px;margin:12px 0;font-weight:600}
.banner.pass{background:#e6f4ea;color:#1a7f37} .banner.failed{background:#fde8e7;color:#b42318} .banner.none{background:#f1f3f5;color:#5b6675}
.note{color:#5b6675;font-size:13px} img{max-width:100%;border:1px solid #e3e7ec;margin:6px 0}
.grid{display:grid;grid-template-columns:repeat(auto-fill,minmax(520px,1fr));gap:12px}
details{margin:8px 0} pre{background:#f4f6f8;padding:8px;overflow:auto;font-size:12px}
.kv td:first-child{font-weight:600;background:#f8f9fb;width:220px}
"""


def esc(value: Any) -> str:
    return html.escape(str(value))


def fmt(value: Any) -> str:
    """Numbers for people: thousands separators, about four significant digits."""
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if math.isnan(value):
            return "—"
        if value == 0:
            return "0"
        if abs(value) >= 1000:
            return f"{value:,.0f}"
        digits = max(0, 3 - int(math.floor(math.log10(abs(value)))))
        return f"{value:,.{min(digits, 6)}f}"
    if isinstance(value, (list, tuple)):
        return ", ".join(fmt(v) for v in value)
    return str(value)


def table(rows: list[dict[str, Any]], columns: list[str] | None = None, classes: dict[str, str] | None = None,
          max_rows: int = 400) -> str:
    if not rows:
        return '<p class="note">No rows.</p>'
    columns = columns or list(dict.fromkeys(k for r in rows for k in r))
    out = ["<table><tr>", *(f"<th>{esc(c)}</th>" for c in columns), "</tr>"]
    for row in rows[:max_rows]:
        out.append("<tr>")
        for c in columns:
            v = row.get(c)
            cls = "num" if isinstance(v, (int, float)) and not isinstance(v, bool) else ""
            if classes and c in classes and v is not None:
                cls = classes[c].format(value=v)
            out.append(f'<td class="{esc(cls)}">{esc(fmt(v))}</td>')
        out.append("</tr>")
    out.append("</table>")
    if len(rows) > max_rows:
        out.append(f'<p class="note">{len(rows) - max_rows} more rows in the Parquet/CSV file.</p>')
    return "".join(out)


def key_values(pairs: Iterable[tuple[str, Any]]) -> str:
    return '<table class="kv">' + "".join(f"<tr><td>{esc(k)}</td><td>{esc(fmt(v))}</td></tr>" for k, v in pairs) + "</table>"


def image(png: Path, alt: str) -> str:
    data = base64.b64encode(png.read_bytes()).decode()
    return f'<img alt="{esc(alt)}" src="data:image/png;base64,{data}">'


def banner(passed: int, failed: int) -> str:
    if failed:
        return f'<div class="banner failed">Correctness: {failed} check(s) FAILED, {passed} passed — figures from this run are not trustworthy.</div>'
    if passed:
        return f'<div class="banner pass">Correctness: all {passed} checks passed.</div>'
    return '<div class="banner none">Correctness: no suite with correctness checks ran.</div>'


def page(title: str, body: str) -> str:
    return (f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{esc(title)}</title>'
            f"<style>{CSS}</style></head><body><main>{body}</main></body></html>\n")
