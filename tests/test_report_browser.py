"""The report as a person sees it: headless Chromium (Debian's chromium package, driven by Playwright) opens a real
run's report on a wide screen (1400 × 900), on a phone-sized one (400 × 800) and prints it to A4."""

from __future__ import annotations

import functools
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
    pdf = PdfReader(BytesIO(page.pdf(format="A4", print_background=True)))
    box = pdf.pages[0].mediabox
    assert float(box.width) == pytest.approx(595.3, abs=1.5) and float(box.height) == pytest.approx(841.9, abs=1.5)  # A4, pt
    return [_squeezed(p.extract_text()) for p in pdf.pages]


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
