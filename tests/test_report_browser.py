"""The report as a person sees it: headless Chromium (Debian's chromium package, driven by Playwright) opens a real
run's report on a wide screen (1400 × 900), on a phone-sized one (400 × 800) and prints it to A4."""

from __future__ import annotations

import functools
import math
import re
import signal
import subprocess
import unicodedata
from collections import Counter
from io import BytesIO
from pathlib import Path

import pytest
from pypdf import PdfReader

from conftest import cli_env, hovered_tip, refbench_command
from refbench.children import die_with_parent

# A device run small enough for a test: a 64 MiB file, two block sizes, two queue depths, reads and writes.
DEVICE_PLAN = """
[device]
size = 67108864
check_size = 8388608
fs_stress_files = 16
numjobs = 1
block_sizes = [4096, 131072]
iodepths = [1, 16]
patterns = ["random"]
write_shares = [0, 100]
"""


@pytest.fixture(scope="module", params=["sleepy", pytest.param("sleepy+device", marks=pytest.mark.slow)])
def report(request, tmp_path_factory) -> Path:
    """A real run's report.html: the test suite alone (seconds), or with a small real device sweep (about 30 s)."""
    suites = request.param.split("+")
    work = tmp_path_factory.mktemp("browser")
    plan = work / "plan.toml"
    plan.write_text(f'name = "browser"\nprofile = "quick"\nsuites = {suites!r}\n\n[sleepy]\nsleep_s = 0.3\n'.replace("'", '"')
                    + (DEVICE_PLAN if "device" in suites else ""))
    p = subprocess.run(refbench_command("run", "--plan", str(plan), "--runs-dir", "runs"), capture_output=True, text=True,
                       timeout=300, cwd=work, env=cli_env(), preexec_fn=functools.partial(die_with_parent, signal.SIGTERM))
    assert p.returncode == 0, p.stderr
    return work / p.stdout.strip().splitlines()[-1] / "report.html"


def _open(browser, report: Path, width: int, height: int):
    page = browser.new_page(viewport={"width": width, "height": height})
    page.goto(report.as_uri())
    return page


def test_the_first_screen_shows_the_verdict(browser, report):
    page = _open(browser, report, 1400, 900)
    suites = page.locator("table.verdict tbody tr td:first-child").all_inner_texts()
    assert "sleepy" in suites
    for what in ("table.verdict", ".banner", ".hostline"):
        box = page.locator(what).first.bounding_box()
        assert box and box["y"] >= 0 and box["y"] + box["height"] <= 900 and box["x"] + box["width"] <= 1400, (what, box)
    assert page.locator("table.verdict").is_visible()
    assert re.search(r"CPU|busy|not determined|saturated", page.locator("table.verdict").inner_text())  # the bottleneck
    # Then the contents, linking every suite's section.
    for suite in suites:
        assert page.locator(f'nav.toc a[href="#suite-{suite}"]').count() == 1
        assert page.locator(f"section#suite-{suite}").count() == 1


SCREEN = 900  # px, at 1400 wide


def test_the_report_reads_in_a_few_screens_with_its_detail_folded(browser, report):
    page = _open(browser, report, 1400, SCREEN)
    assert page.evaluate("document.scrollingElement.scrollHeight") <= 6 * SCREEN
    suites = page.locator("table.verdict tbody tr td:first-child").all_inner_texts()
    for suite in suites:
        section = page.locator(f"section#suite-{suite}")
        assert section.bounding_box()["height"] <= SCREEN, suite  # a suite's overview is one screen at most
        detail = section.locator("details.detail")
        assert detail.count() == 1 and not detail.evaluate("d => d.open")
        assert not detail.locator("table").first.is_visible()
        checks = section.locator("details.checks")  # every check passed: one line, the checks folded under it
        assert checks.count() == 1 and not checks.evaluate("d => d.open")
        assert checks.bounding_box()["height"] < 40 and re.search(r"\d+ check\(s\) passed", checks.inner_text())
    detail = page.locator("details.detail").first
    detail.locator("> summary").click()
    assert detail.locator("table").first.is_visible()
    # A chart's every line has three points or more: two (QD 1 and QD 16, or two seconds of a short run's host
    # activity) are a table's row, not a chart. A point's label starts with its line's name when there are several.
    points = page.locator("figure").evaluate_all("""fs => fs.map(f => {
        const lines = {};
        for (const t of f.querySelectorAll('.pt text')) {
            const name = (t.textContent.match(/^([^:]*): /) || [null, ''])[1];
            lines[name] = (lines[name] || 0) + 1;
        }
        return Math.min(...Object.values(lines));
    })""")
    assert points and min(points) >= 3, points


def test_a_failed_check_is_shown_open_and_the_passes_folded(browser, refbench, tmp_path):
    result = refbench("sleepy", "--runs-dir", str(tmp_path / "runs"), "--set", "sleepy.sleep_s=0", "--fail-check")
    assert result.code == 1
    page = _open(browser, Path(result.last_line) / "report.html", 1400, SCREEN)
    section = page.locator("section#suite-sleepy")
    failed = section.locator("td.FAIL")
    assert failed.count() == 1 and failed.is_visible()
    assert "the test's own check" in failed.locator("xpath=..").inner_text()
    assert re.search(r"1 of \d+ check\(s\) FAILED", section.inner_text())
    passes = section.locator("details.checks")
    assert not passes.evaluate("d => d.open") and not passes.get_by_text("journal written").is_visible()


# Elements that stick out of the viewport and are not inside a box that scrolls sideways (a wide table's container).
OVERFLOWING = """() => {
  const width = document.documentElement.clientWidth;
  const scrolls = e => { for (let p = e.parentElement; p; p = p.parentElement) {
      const x = getComputedStyle(p).overflowX; if (x === 'auto' || x === 'scroll') return true; } return false; };
  return [...document.querySelectorAll('body *')].filter(e => {
      const r = e.getBoundingClientRect(); return r.width > 0 && (r.right > width + 1 || r.left < -1) && !scrolls(e);
  }).map(e => e.tagName + '.' + e.className + ' ' + (e.textContent || '').slice(0, 40));
}"""


def test_nothing_overflows_a_phone_screen(browser, report):
    page = _open(browser, report, 400, 800)
    page.locator("details").evaluate_all("ds => ds.forEach(d => d.open = true)")  # the per-case detail too
    assert page.evaluate("document.scrollingElement.scrollWidth <= document.scrollingElement.clientWidth")
    assert page.evaluate(OVERFLOWING) == []
    # The wide tables are there, scrolling in their own box: what keeps the page itself narrow.
    assert page.locator(".scroll").evaluate_all("es => es.some(e => e.scrollWidth > e.clientWidth)")
    assert float(page.locator("td").first.evaluate("e => parseFloat(getComputedStyle(e).fontSize)")) >= 12  # readable


def test_hovering_a_chart_point_shows_its_value(browser, report):
    page = _open(browser, report, 1400, 900)
    tip = hovered_tip(page)
    assert re.search(r"\d", tip), tip
    assert not page.locator('[src^="http"], [href^="http"], script[src]').count()  # nothing from the network


def test_prints_to_a4_without_cutting_table_rows(browser, report):
    page = _open(browser, report, 1400, 900)
    page.locator("details").evaluate_all("ds => ds.forEach(d => d.open = true)")  # printed as a reader opened them
    pages = _printed(page)
    assert len(pages) > 1 and "Hostactivityduringtherun" in "".join(pages)
    assert _rows_checked_whole(page, pages) >= 10


A4_WIDTH_PX = 703  # 210 mm less the 2 × 12 mm margins, at 96 px to the inch
CUT_TABLES = """() => { const right = document.querySelector('main').getBoundingClientRect().right;
  return [...document.querySelectorAll('table')].filter(t => t.getBoundingClientRect().right > right + 1)
    .map(t => t.rows[0].innerText.slice(0, 60)); }"""


def test_prints_in_few_pages_with_no_table_cut_and_notes_smaller_than_figures(browser, report):
    page = _open(browser, report, 1400, SCREEN)
    assert len(_printed(page)) <= 12  # printed as it opens, the detail folded
    page.set_viewport_size({"width": A4_WIDTH_PX, "height": 1000})
    page.emulate_media(media="print")
    page.locator("details").evaluate_all("ds => ds.forEach(d => d.open = true)")  # every table, the widest included
    assert page.evaluate(CUT_TABLES) == []
    size = lambda selector: page.locator(selector).first.evaluate("e => parseFloat(getComputedStyle(e).fontSize)")
    assert size(".note") < size("table:not(.verdict) td") < size("table.verdict b")


def test_a_table_too_wide_for_a4_prints_stacked(browser, tmp_path):
    from refbench.report import html as h

    rows = [{f"figure_{c}_mb_s": 1000.0 + i * c for c in range(14)} for i in range(5)]
    path = tmp_path / "wide.html"
    path.write_text(h.page("wide", h.table(rows)))
    page = _open(browser, path, A4_WIDTH_PX, 1000)
    assert page.evaluate(CUT_TABLES) != []  # on a screen this narrow it is wider than the page (and scrolls in its box)
    page.emulate_media(media="print")
    assert page.evaluate(CUT_TABLES) == []
    # Each value is printed after its column's name, the header row hidden: a row reads as one paragraph.
    assert not page.locator("thead").is_visible()
    last = page.locator("tbody tr").nth(1).locator("td").last
    assert last.get_attribute("data-label") == "figure 13 (MB/s)" and last.inner_text() == "1,013"
    assert last.evaluate("e => getComputedStyle(e).display") == "inline"


def test_a_table_cut_at_400_px_shows_a_scroll_cue(browser, report):
    """The cue is a shadow on the side where more columns are: there while the table is cut, gone when scrolled
    to its end (and then on the other side)."""
    from PIL import Image, ImageStat

    page = _open(browser, report, 400, 800)
    page.locator("details").evaluate_all("ds => ds.forEach(d => d.open = true)")
    boxes = page.locator(".scroll:has(table)")
    box = boxes.evaluate_all("es => es.findIndex(e => e.checkVisibility() && e.scrollWidth > e.clientWidth + 20)")
    assert box >= 0
    cut = boxes.nth(box)
    cut.scroll_into_view_if_needed()

    def edges() -> tuple[float, float]:
        image = Image.open(BytesIO(cut.screenshot())).convert("L")
        w, height = image.size
        return tuple(ImageStat.Stat(image.crop((x0, 0, x0 + 5, height))).mean[0] for x0 in (2, w - 7))

    left, right = edges()
    cut.evaluate("e => e.scrollLeft = e.scrollWidth")
    left_end, right_end = edges()
    assert right < right_end - 5 and left_end < left - 5, (left, right, left_end, right_end)


def test_the_print_stylesheet_keeps_long_rows_whole(browser, tmp_path):
    """Rows of several lines each, 120 of them: without the print stylesheet Chromium cuts about one in four."""
    from refbench.report import html as h

    rows = [{"case": f"case {i:03d}", "detail": " ".join(f"word{i}x{j}" for j in range(60)), "value (s)": i / 7}
            for i in range(120)]
    path = tmp_path / "long.html"
    path.write_text(h.page("long rows", h.table(rows)))
    page = _open(browser, path, 1400, 900)
    pages = _printed(page)
    assert len(pages) > 5
    assert _rows_checked_whole(page, pages) >= 120  # every row's detail cell at least


def _printed(page) -> list[str]:
    return [_squeezed(p.extract_text()) for p in _a4(page).pages]


def _a4(page) -> PdfReader:
    pdf = PdfReader(BytesIO(page.pdf(format="A4", print_background=True)))
    box = pdf.pages[0].mediabox
    assert float(box.width) == pytest.approx(595.3, abs=1.5) and float(box.height) == pytest.approx(841.9, abs=1.5)  # A4, pt
    return pdf


def test_the_verdict_prints_every_word_whole_and_notes_at_7_pt(browser, report):
    """Printed on A4 as the report opens, the verdict is stacked (a suite to a block, "Correctness checks: 2 passed")
    and no word of it is broken across lines; the notes print at 7 pt.

    Measured on 2026-11-27, the demo's report (five suites) and this test's run printed by Chromium to A4: before,
    the verdict's narrow columns broke "d/ev/ic/e", "Co/rre/ctn/ess", "6/pa/sse/d" (and "sl/ee/py" here), and the
    whole page printed at 2/3 of its size (a stacked wide table's row of unbreakable cells made it 1,790 px wide and
    Chromium shrank it to fit): notes at 4.67 pt, the verdict at 6.33 pt. Now: notes 7.0 pt, the verdict 9.5 pt, the
    page at its own size."""
    page = _open(browser, report, 1400, SCREEN)
    suites = page.locator("table.verdict tbody tr td:first-child").all_inner_texts()
    printed, runs = _printed_verdict(page)
    for suite in suites:
        assert re.search(rf"(?<!\w){re.escape(suite)}(?!\w)", printed), (suite, printed[:300])
    assert re.search(r"Correctness checks: \d+ passed", printed), printed[:300]
    _notes_print_at_7_pt_or_more(page, runs)


def test_a_verdict_of_every_suite_prints_every_word_whole(browser, tmp_path):
    """The demo's verdict (its sentences, cut short where long) and its dw engines table (printed stacked: the one
    that made the page too wide for A4), printed: every suite's name, and every word of the verdict, whole; the
    notes at 7 pt."""
    from refbench.report import _verdict_table
    from refbench.report import html as h
    from refbench.report.verdict import SuiteVerdict
    from refbench.suites import Headline

    floor = "24 of 24 times under TPC-H's 0.1 s floor; a larger --sf rates it"
    demo = [
        ("device", [("peak IOPS, random 70/30 read/write, 4 KiB, QD 16", 76648.4, "IOPS", "read p99 750 µs", "")], 6,
         "vda (84% busy, queue 17.2); the CPU: refbench 37%, other processes 6%, steal 4%"),
        ("oltp", [("NOPM at the best load level (2 users)", 37188.4, "NOPM", "New-Order p99 4.3 ms", ""),
                  ("TPM at the best load level (2 users)", 86418.4, "TPM", "median of 3 repeats, 78,679–86,447", "")], 22,
         "in all 3 repeats, storage flush latency: 51% of session time waiting (IO:WALSync 32%, LWLock:WALWrite 17%, "
         "IO:WALInitWrite 1%), 0.383 ms per WAL flush on vda (1,295 a second); then CPU 44% (1.75 active sessions on "
         "average, 80 samples); host: neither saturated (CPU 64%, vda 34% busy): the load offered (users, queue depth, "
         "streams) limits it; the CPU: the server 56%, refbench 7%, other processes 1%, steal 2%, the load driver's "
         "share 10%, cache hit ratio 99.9%: measured from memory"),
        ("dss", [("duckdb: power", 360.0, "queries/h × SF", "", floor),
                 ("duckdb: throughput", 3960.0, "queries/h × SF", "median of 3 repeats, 3,960–5,280; 2 streams", "")], 9,
         "at duckdb: power: in all 3 repeats, CPU: 100% of query thread time in operators (scan 32%, aggregate 30%, "
         "join 23%) (0.226 busy threads on average, 30 queries); host: neither saturated (CPU 52%, vda 12% busy)"),
        ("dw", [("rated user data capacity", 0.91, "TB", "", "SF 0.1, 0.1 GB of data, would rate 0.91 TB, more than "
                 "100 times what it measured; rate with --sf 10 or more"),
                ("column store (duckdb): throughput", 19.79, "queries/h/TB", "197,912 queries/h", "")], 8,
         "at row store (postgres): throughput: in all 3 repeats, CPU: 44% of session time running (not waiting); then "
         "storage read latency 38% (3.83 active sessions on average, 48% of them parallel workers, 100 samples)"),
        ("analytics", [("write MB/s per core (DATA+WORK+UTIL)", 271.1, "MB/s per core",
                        "above the guidance (> 150 MB/s per core)", ""),
                       ("CPU/real-time ratio (mean over the jobs)", 0.812, "", "19 of 19 jobs, 1.9 at a time", "")], 6,
         "at write MB/s per core (DATA+WORK+UTIL): in all 3 repeats, neither saturated (CPU 22%, vda 61% busy)"),
    ]
    verdicts = [SuiteVerdict(suite, [Headline(label, value, unit, "case", "metric", note, unrated=unrated)
                                     for label, value, unit, note, unrated in headlines], passed, 0, bottleneck)
                for suite, headlines, passed, bottleneck in demo]
    path = tmp_path / "verdict.html"
    engines = [("postgres", "row store", None, 1.4746, 14746.1, 151.9, 1629.6, 890.7, 94.1, "4 passed"),
               ("duckdb", "column store", None, 19.7912, 197911.8, 2.6, None, None, 90.6, "4 passed")]
    columns = ["engine", "store", "relative throughput %", "measured throughput (queries/h/TB)", "queries/h",
               "measured scan rate physical (MB/s)", "measured scan rate logical (MB/s)",
               "measured I/O throughput (MB/s)", "measured CPU (avg.) %", "checks"]
    path = tmp_path / "verdict.html"
    path.write_text(h.page("verdict", "<h1>refbench report — demo</h1>" + h.banner(51, 0) + _verdict_table([v.to_dict() for v in verdicts], "", None)
                           + "<p><b>dw: the engines compared</b></p>" + h.table([dict(zip(columns, e)) for e in engines])
                           + "<h2>device: the first suite's section</h2>"))
    page = _open(browser, path, 1400, SCREEN)
    printed, runs = _printed_verdict(page)
    for suite, *_ in demo:
        assert re.search(rf"(?<!\w){suite}(?!\w)", printed), (suite, printed)
    assert len(re.findall(r"Correctness checks: \d+ passed", printed)) == len(demo)
    _notes_print_at_7_pt_or_more(page, runs)


def _notes_print_at_7_pt_or_more(page, runs: list[tuple[float, str]]) -> None:
    """The page printed at its own size (Chromium shrinks a page wider than A4 to fit: its notes' 7 pt then print
    at less), and every note at 7 pt or more: as computed in print at A4's width (703 px), times that scale, and as
    the PDF has the verdict's notes."""
    title = page.locator("h1").inner_text()
    scale = next(size for size, text in runs if text.startswith(title[:15])) / 18  # set in 24 px: 18 pt
    assert scale == pytest.approx(1, abs=0.01)
    page.set_viewport_size({"width": A4_WIDTH_PX, "height": 1000})
    page.emulate_media(media="print")
    notes = page.locator(".note").evaluate_all("es => es.filter(e => e.checkVisibility())"
                                               ".map(e => parseFloat(getComputedStyle(e).fontSize))")
    assert notes and min(notes) * 0.75 * scale >= 7 - 0.01, notes  # px to pt
    said = [_normal(t) for t in page.locator(".note").all_inner_texts() if t.strip()]
    in_notes = [(size, text) for size, text in runs if len(text) >= 6 and any(text in note for note in said)]
    assert in_notes and min(size for size, _ in in_notes) >= 7 - 0.01, in_notes


# The first line of what follows an element, as it prints: where the element's own text ends in the PDF's.
FOLLOWING = """t => { const next = [...document.querySelectorAll('main *')].find(e => !t.contains(e)
    && (t.compareDocumentPosition(e) & Node.DOCUMENT_POSITION_FOLLOWING) && e.checkVisibility() && e.innerText.trim());
  return next.innerText.trim().split('\\n')[0]; }"""


def _printed_verdict(page) -> tuple[str, list[tuple[float, str]]]:
    """The page printed on A4 (as Playwright prints it, Chromium's own print path): the verdict table's text as the
    PDF has it, between the correctness banner and what follows the table, and every run of text in the PDF with
    the size it prints at (pt: its font size times the text and page matrices' vertical scale). Asserts that every
    word of the verdict, as the page has it in print, is whole in that text: a word broken across lines is there
    as pieces ("Co", "rre", "ctn", "ess")."""
    runs: list[tuple[float, str]] = []

    def visit(text, cm, tm, font, size):
        if text.strip():
            runs.append((size * math.hypot(tm[2] * cm[0] + tm[3] * cm[2], tm[2] * cm[1] + tm[3] * cm[3]), _normal(text)))

    whole = _normal("\n".join(p.extract_text(visitor_text=visit) for p in _a4(page).pages))
    page.set_viewport_size({"width": A4_WIDTH_PX, "height": 1000})
    page.emulate_media(media="print")
    banner = _normal(page.locator(".banner").last.inner_text())
    after = _normal(page.locator("table.verdict").evaluate(FOLLOWING))[:20]
    start = whole.index(banner) + len(banner)
    printed = whole[start:whole.index(after, start)]
    words = lambda text: Counter(re.findall(r"\w+", _normal(text)))
    broken = words(page.locator("table.verdict").inner_text()) - words(printed)
    assert not broken, f"words of the verdict not whole in its print: {sorted(broken)}; printed: {printed[:400]}"
    page.emulate_media(media="screen")
    return printed, runs


def _normal(text: str) -> str:
    """Text as both the PDF and the page give it: ligatures undone, white space one space."""
    return " ".join(unicodedata.normalize("NFKC", text).split())


def _rows_checked_whole(page, pages: list[str]) -> int:
    """Asserts that a row is whole on one page: every cell of it is on the page of its first cell, its longest (the
    one that wraps over lines, which a page break could split) included. The page is certain when the first cell's
    text is found once in the PDF; a cell is decisive when no other cell has its text (a "pass" is on every page).
    Returns how many cells were decisive."""
    rows = [[_squeezed(c) for c in row] for row in page.locator("table tbody tr").evaluate_all(
        "rs => rs.map(r => [...r.cells].map(c => c.innerText))")]
    cells = Counter(c for row in rows for c in row)
    whole = "".join(pages)
    checked = 0
    for first, *rest in rows:
        if len(first) < 4 or whole.count(first) != 1:
            continue
        on = next(i for i, text in enumerate(pages) if first in text)
        for cell in rest:
            if len(cell) >= 6 and cells[cell] == 1:
                assert cell in pages[on], f"the row {first!r} is cut after page {on + 1}: {cell[:60]!r} is not whole on it"
                checked += 1
    return checked


def _squeezed(text: str) -> str:
    """Text as both the PDF and the page give it: ligatures (the "fi" of "fio") undone, no white space."""
    return re.sub(r"\s+", "", unicodedata.normalize("NFKC", text))


def test_no_sentence_is_said_twice(browser, report):
    """The report as it opens (details folded): every sentence of some length once; the verdict's few words and the
    suite's evidence are different sentences."""
    page = _open(browser, report, 1280, 800)

    def sentences(text: str) -> Counter:
        return Counter(s.strip() for s in re.split(r"(?<=[.;])\s+|\n+", text) if len(s.strip()) >= 40)

    # The contents name each section as its heading does.
    counted = sentences(page.locator("body").inner_text()) - sentences(page.locator("nav.toc").inner_text())
    repeated = sorted(s for s, n in counted.items() if n > 1)
    assert not repeated, repeated
