"""Self-contained HTML: inline CSS, charts inline as SVG with CSS hover values, no scripts, opens offline and prints to A4."""

from __future__ import annotations

import html
import re
from typing import TYPE_CHECKING, Any, Iterable

from refbench.formats import fmt

if TYPE_CHECKING:
    from refbench.report.charts import Rendered

# Printed (A4, 703 px between the margins): nothing may be wider than the page, for Chromium shrinks a wider page
# whole to fit it (a stacked wide table's row of unbreakable cells once printed everything at 2/3: notes at 4.7 pt),
# so a stacked row breaks between its cells; the verdict is stacked, a suite to a block, and breaks no word.
CSS = """
*{box-sizing:border-box}
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0;color:#1d2430;background:#f6f7f9;line-height:1.4}
main{max-width:1180px;margin:0 auto;padding:16px 32px 64px;background:#fff;box-shadow:0 0 12px #0001}
h1{margin:0 0 2px;font-size:24px} h2{margin-top:32px;border-bottom:2px solid #2c5d8f;padding-bottom:4px;color:#1b3b5c}
h3{margin-top:22px;color:#24476b} .sub{color:#5b6675;margin:0 0 8px;font-size:14px}
p,li{overflow-wrap:anywhere} td{overflow-wrap:break-word}
.scroll{overflow-x:auto;max-width:100%;margin:8px 0 16px;
 background:linear-gradient(to right,#fff 40%,#fff0) left/28px 100% no-repeat local,
  linear-gradient(to left,#fff 40%,#fff0) right/28px 100% no-repeat local,
  radial-gradient(farthest-side at 0 50%,#0005,#0000) left/14px 100% no-repeat scroll,
  radial-gradient(farthest-side at 100% 50%,#0005,#0000) right/14px 100% no-repeat scroll}
table{border-collapse:collapse;font-size:13px} th,td{border:1px solid #d7dce3;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#2c5d8f14;overflow-wrap:normal} td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
.ok,.pass,.passed{color:#1a7f37;font-weight:600} .change,.FAIL,.failed{color:#b42318;font-weight:600} .unknown{color:#8a6d00}
.banner{padding:8px 12px;border-radius:6px;margin:8px 0;font-weight:600}
.banner.pass{background:#e6f4ea;color:#1a7f37} .banner.failed{background:#fde8e7;color:#b42318} .banner.none{background:#f1f3f5;color:#5b6675}
.note{color:#5b6675;font-size:12px}
.grid{display:grid;grid-template-columns:repeat(auto-fill,minmax(min(520px,100%),1fr));gap:12px}
.overview{display:grid;grid-template-columns:repeat(auto-fit,minmax(min(460px,100%),1fr));gap:4px 20px;align-items:start}
.overview>div>p:first-child{margin-top:4px}
figure{margin:6px 0;border:1px solid #e3e7ec} figure svg{display:block;width:100%;height:auto}
.pt circle{fill:transparent;stroke:none;pointer-events:all} .pt text{visibility:hidden;font:10px system-ui,sans-serif;
 text-anchor:middle;fill:#111;paint-order:stroke;stroke:#fff;stroke-width:3px;pointer-events:none}
.pt:hover circle{fill:#1b3b5c55} .pt:hover text{visibility:visible}
.summary table.verdict td:first-child{font-weight:600} .summary{margin-bottom:8px}
table.verdict{width:100%} table.verdict td:nth-child(2){width:46%} table.verdict b{white-space:nowrap}
.hostline{font-size:13px;color:#3a4553;margin:4px 0}
nav.toc{font-size:14px;background:#f8f9fb;border:1px solid #e3e7ec;padding:6px 12px;margin:12px 0}
nav.toc ol{margin:4px 0;padding-left:22px;columns:2 300px} nav.toc li{margin:2px 0}
details{margin:8px 0} summary{cursor:pointer;color:#24476b} pre{background:#f4f6f8;padding:8px;overflow:auto;font-size:12px}
details.detail>summary{font-weight:600;padding:4px 0}
.kv td:first-child{font-weight:600;background:#2c5d8f0a;width:220px}
@media (max-width:700px){main{padding:10px 12px 40px} h1{font-size:20px} table{font-size:12px}
 .kv td:first-child{width:auto}}
@media (max-width:700px),print and (max-width:900px){
 table.verdict thead{display:none} table.verdict,table.verdict tbody,table.verdict tr,table.verdict td{display:block;width:auto!important}
 table.verdict tr{border-top:2px solid #2c5d8f;margin-bottom:6px} table.verdict td{border:none;padding:2px 4px}
 table.verdict td[data-label]::before{content:attr(data-label) ": ";font-weight:600;color:#5b6675}}
@page{size:A4;margin:14mm 12mm}
@media print{body{background:#fff;font-size:10pt} main{max-width:none;padding:0;box-shadow:none} nav.toc{display:none}
 .scroll{overflow:visible;background:none} table{font-size:8pt;max-width:100%} td.num{white-space:normal}
 td,th{overflow-wrap:anywhere} table.verdict{font-size:9.5pt} .note{font-size:7pt}
 table.verdict td,table.verdict th{word-break:normal;overflow-wrap:break-word;hyphens:manual}
 thead{display:table-header-group} tr,figure,.banner{break-inside:avoid} h2,h3{break-after:avoid}
 h2{margin-top:16px;font-size:15pt} .grid{display:block} .pt text{display:none}
 .overview{grid-template-columns:1fr 1fr} .overview figure{max-width:100%}
 table.wide thead{display:none} table.wide,table.wide tbody,table.wide tr{display:block}
 table.wide tr{border-top:1px solid #c8ced6;padding:2px 0;break-inside:avoid} table.wide td{display:inline;border:none;padding:0} table.wide td.num{white-space:nowrap}
 table.wide td::before{content:attr(data-label) ": ";color:#5b6675} table.wide td:not(:last-child)::after{content:" · ";white-space:normal}}
"""


def esc(value: Any) -> str:
    return html.escape(str(value))


# Column names in files are snake_case with the unit last (read_mb_s); headers say the unit as people write it.
UNIT_NAMES = {"mb_s": "MB/s", "iops": "IOPS", "tpm": "TPM", "nopm": "NOPM"}
UNIT_SUFFIXES = (("_mb_s", "MB/s"), ("_iops", "IOPS"), ("_per_s", "per s"), ("_pct", "%"), ("_us", "µs"), ("_ms", "ms"), ("_s", "s"),
                 ("_gib", "GiB"), ("_mib", "MiB"), ("_kib", "KiB"), ("_kb", "KiB"), ("_gb", "GB"), ("_mb", "MB"),
                 ("_tb", "TB"), ("_bytes", "bytes"))


def header(column: str) -> str:
    """``read_lat_p99_us`` → ``read lat p99 (µs)``; names already written for people are kept."""
    if not re.fullmatch(r"[a-z][a-z0-9_]*", column):
        return column
    if column in UNIT_NAMES:
        return UNIT_NAMES[column]
    for suffix, unit in UNIT_SUFFIXES:
        if column.endswith(suffix) and len(column) > len(suffix):
            return f"{column[:-len(suffix)].replace('_', ' ')} ({unit})"
    return column.replace("_", " ")


def scroll(inner: str) -> str:
    """A wide table scrolls inside its own box instead of widening the page."""
    return f'<div class="scroll">{inner}</div>'


PRINTED_COLUMNS = 8


def table(rows: list[dict[str, Any]], columns: list[str] | None = None, classes: dict[str, str] | None = None,
          max_rows: int = 400) -> str:
    if not rows:
        return '<p class="note">No rows.</p>'
    columns = columns or list(dict.fromkeys(k for r in rows for k in r))
    # A table of many columns is printed stacked, a row to a paragraph ("engine: duckdb · load (s): 0.76 · …"):
    # A4's width holds about eight.
    wide = ' class="wide"' if len(columns) > PRINTED_COLUMNS else ""
    out = [f'<div class="scroll"><table{wide}><thead><tr>',
           *(f"<th>{esc(header(c))}</th>" for c in columns), "</tr></thead><tbody>"]
    for row in rows[:max_rows]:
        out.append("<tr>")
        for c in columns:
            v = row.get(c)
            cls = "num" if isinstance(v, (int, float)) and not isinstance(v, bool) else ""
            if classes and c in classes and v is not None:
                cls = classes[c].format(value=v)
            out.append(f'<td class="{esc(cls)}" data-label="{esc(header(c))}">{esc(fmt(v))}</td>')
        out.append("</tr>")
    out.append("</tbody></table></div>")
    if len(rows) > max_rows:
        out.append(f'<p class="note">{len(rows) - max_rows} more rows in the Parquet/CSV file.</p>')
    return "".join(out)


def key_values(pairs: Iterable[tuple[str, Any]]) -> str:
    return scroll('<table class="kv">' + "".join(f"<tr><td>{esc(k)}</td><td>{esc(fmt(v))}</td></tr>" for k, v in pairs)
                  + "</table>")


_SVG_PROLOGUE = re.compile(r"\A.*?(?=<svg)", re.S)


def chart(rendered: Rendered, title: str) -> str:
    """The chart's SVG inline, scaled to its box, with the hover layer on top; the PNG and SVG files stay beside."""
    svg = _SVG_PROLOGUE.sub("", rendered.svg.read_text(), count=1)
    svg = re.sub(r'<svg([^>]*?) width="[^"]*" height="[^"]*"', rf'<svg\1 role="img" aria-label="{esc(title)}"', svg, count=1)
    svg = svg.replace("</svg>", f'<g class="hover">{rendered.hover}</g></svg>') if rendered.hover else svg
    return f"<figure>{svg}</figure>"


def banner(passed: int, failed: int) -> str:
    if failed:
        return f'<div class="banner failed">Correctness: {failed} check(s) FAILED, {passed} passed — figures from this run are not trustworthy.</div>'
    if passed:
        return f'<div class="banner pass">Correctness: all {passed} checks passed.</div>'
    return '<div class="banner none">Correctness: no suite with correctness checks ran.</div>'


def page(title: str, body: str) -> str:
    return (f'<!doctype html><html lang="en"><head><meta charset="utf-8">'
            f'<meta name="viewport" content="width=device-width, initial-scale=1"><title>{esc(title)}</title>'
            f"<style>{CSS}</style></head><body><main>{body}</main></body></html>\n")
