"""The example run every claim about the demo comes from: runs the demo (or takes a finished demo run), keeps its
verdict in docs/example/RUN/ (run.json and verdict.json: what `refbench verdict docs/example/RUN` prints), writes
its facts (time, repeats, space, the report's screens and A4 pages as Chromium shows and prints it) to
docs/example/facts.json and its progress to docs/example/progress.txt, screenshots the report's first screen, and
writes the README's example verdict from it. tests/test_example.py holds the README and the manual to it.

    .venv/bin/python scripts/example_run.py            # a fresh demo, alone on the machine (about 7 min)
    .venv/bin/python scripts/example_run.py runs/X     # a demo run you have
"""

from __future__ import annotations

import io
import json
import re
import shutil
import subprocess
import sys
import textwrap
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "docs" / "example"
README = ROOT / "README.md"
BEGIN, END = "<!-- --8<-- [start:verdict] -->", "<!-- --8<-- [end:verdict] -->"
SCREEN = (1280, 800)  # the screen the report's length is said in


def facts() -> dict:
    return json.loads((EXAMPLE / "facts.json").read_text())


def readme_verdict() -> str:
    """The README's example verdict block: the example run's verdict as an 80-column terminal shows it at the end of
    `make demo` (its run directory in runs/)."""
    from refbench.report.brief import brief_lines

    from refbench.timings import HOST_IN_FULL, duration

    said = facts()
    name = said["run"]
    verdicts = json.loads((EXAMPLE / name / "verdict.json").read_text())
    intro = (f"The example run's verdict (`make demo` alone on {HOST_IN_FULL}, {said['repeats']} repeats, "
             f"{duration(said['wall_s'])}; run {name}, kept in docs/example/ by scripts/example_run.py):")
    after = (f"Its report.html, details folded, as headless Chromium shows and prints it: {said['screens']:g} screens "
             f"at {SCREEN[0]} × {SCREEN[1]}, {said['a4_pages']} A4 pages.")
    return ("\n".join(textwrap.wrap(intro, 118)) + "\n\n```\n" + "\n".join(brief_lines(verdicts, name, f"runs/{name}", 80))
            + "\n```\n\n" + "\n".join(textwrap.wrap(after, 118)))


def rewrite_readme(text: str) -> str:
    start, end = text.index(BEGIN) + len(BEGIN), text.index(END)
    return text[:start] + "\n" + readme_verdict() + "\n" + text[end:]


def report_size(report: Path) -> dict[str, float]:
    """The report's length in screens at 1280×800 and its A4 pages, details folded, as headless Chromium has it; its
    first screen to docs/report-screenshot.png, which the README and the manual show."""
    from playwright.sync_api import sync_playwright
    from pypdf import PdfReader

    chromium = shutil.which("chromium") or "/usr/bin/chromium"
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": SCREEN[0], "height": SCREEN[1]})
        page.goto(report.resolve().as_uri())
        height = page.evaluate("document.scrollingElement.scrollHeight")
        page.screenshot(path=str(ROOT / "docs" / "report-screenshot.png"))
        pdf = page.pdf(format="A4", print_background=True)
        browser.close()
    return {"screens": round(height / SCREEN[1], 1), "a4_pages": len(PdfReader(io.BytesIO(pdf)).pages)}


def main(argv: list[str]) -> int:
    refbench, plan, runs = str(ROOT / ".venv/bin/refbench"), str(ROOT / "plans/quick.toml"), "runs"
    dry = subprocess.run([refbench, "run", "--plan", plan, "--runs-dir", runs, "--dry-run"], stdout=subprocess.PIPE,
                         text=True, check=True, cwd=ROOT).stdout
    space = re.search(r"^  runs: needs ([\d.,]+) GB", dry, re.M).group(1)
    progress = None
    if argv:
        run = Path(argv[0])
    else:  # as `make demo` runs it, in this checkout's runs/
        done = subprocess.run([refbench, "run", "--plan", plan, "--runs-dir", runs], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, check=True, cwd=ROOT)
        run, progress = ROOT / done.stdout.strip().splitlines()[-1], done.stderr
    meta = json.loads((run / "run.json").read_text())
    started, ended = (datetime.fromisoformat(meta[k].replace("Z", "+00:00")) for k in ("started_utc", "ended_utc"))
    for old in EXAMPLE.glob("*/"):  # the example before: one run is kept
        shutil.rmtree(old)
    keep = EXAMPLE / run.name
    keep.mkdir(parents=True)
    for name in ("run.json", "verdict.json"):
        shutil.copy(run / name, keep / name)
    facts = {"run": run.name, "wall_s": round((ended - started).total_seconds()), "repeats": meta["plan"]["repeats"],
             "space_gb": float(space.replace(",", "")), **report_size(run / "report.html")}
    if progress is not None:  # what it printed on stderr (not a terminal): the manual's example of its progress
        (EXAMPLE / "progress.txt").write_text(progress)
    # Each suite's time, as its bar ended: what the table of times gives for the quick profile (src/refbench/timings.py).
    bars = re.findall(r"^(\w+): cases .* (\d+):(\d\d):(\d\d) eta", (EXAMPLE / "progress.txt").read_text(), re.M)
    facts["suite_s"] = {suite: int(h) * 3600 + int(m) * 60 + int(sec) for suite, h, m, sec in bars}
    (EXAMPLE / "facts.json").write_text(json.dumps(facts, indent=2) + "\n")
    README.write_text(rewrite_readme(README.read_text()))
    print(f"docs/example: {run.name}, {facts}; README's verdict rewritten")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
