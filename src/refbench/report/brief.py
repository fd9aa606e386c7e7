"""The verdict in one screen, as the terminal prints it after a run: per suite its headline figures with the range of
their repeats, its checks, what limits it (at most ten words, with the figure that proves it) and one next step with
its command. The evidence (wait shares, who had the CPU, each engine's advice) is the long form `refbench why` prints.

Read from verdict.json's entries. A line is never wider than ``width``; a command that does not fit beside its words
goes on a line of its own, whole, and one wider than the whole line is split between arguments with a shell
continuation (`` \\``), so that it still runs as pasted.
"""

from __future__ import annotations

import re
import shlex
import textwrap
from collections import Counter
from typing import Any

from refbench.formats import figure_said

SUITE_COLUMN = 11  # "analytics" and two spaces
CONTINUED = "  "  # the indent of a command's continuation lines


# A verdict.json written before headlines said their repeats gave the rule in each note: "median of 3 repeats by tpm; …".
NOTE_RULE = re.compile(r"^median of (\d+) repeats(?: by \w+)?(?:; |$)")


def repeats_of(h: dict[str, Any]) -> int | None:
    """How many repeats a headline's value is the median of: 0 when measured once, None when its verdict.json does
    not say (a figure derived from several cases, or a headline written before they said it and measured once)."""
    if h.get("repeats") is not None:
        return h["repeats"] if h.get("case") or h["repeats"] else None
    found = NOTE_RULE.match(h.get("note") or "")
    return int(found.group(1)) if found else None


def note_of(h: dict[str, Any]) -> str:
    """A headline's note, without the rule an older verdict.json said in it."""
    return NOTE_RULE.sub("", h.get("note") or "")


def figures_rule(verdicts: list[dict[str, Any]]) -> tuple[int | None, str]:
    """The rule most headline figures of a run follow, said once for all of them: (its repeats, "figures: median of
    3 repeats (lowest–highest)"); no words when each was measured once. A figure that follows another says so."""
    counts = Counter(n for v in verdicts for h in v["headlines"] if not h.get("unrated")
                     if (n := repeats_of(h)) is not None)
    common = max(counts, key=lambda n: (counts[n], n)) if counts else None
    return common, f"figures: median of {common} repeats (lowest–highest)" if common else ""


def figure_with_rule(h: dict[str, Any], common: int | None) -> str:
    """The figure as every surface says it (formats.figure_said), with its rule when it is not the run's."""
    said = figure_said(h["value"], h["unit"], h.get("low"), h.get("high"))
    n = repeats_of(h)
    if n is None or n == common:
        return said
    alone = figure_said(h["value"], h["unit"], h.get("low"), h.get("high"), with_range=False)
    spread = said[len(alone):].strip(" ()")
    return f"{alone} ({spread + '; ' if spread else ''}{f'median of {n} repeats' if n else 'measured once'})"


def title_lines(kind: str, run_name: str, rule: str, width: int) -> list[str]:
    """"verdict — RUN" and the rule its figures follow, on one line when they fit."""
    title = f"{kind} — {run_name}"
    if not rule:
        return [title]
    return [f"{title} · {rule}"] if len(title) + 3 + len(rule) <= width else [title, *_wrapped(rule, width)]


def figure_items(headlines: list[dict[str, Any]], common: int | None = None) -> list[str]:
    """The headlines in few words: "random read, 4 KiB, QD 16: 80,600 IOPS (73,700–82,500)"; those measured at one
    point together ("2 users: 39,400 NOPM (…), 91,400 TPM (…)"); those not rated at this size in one item per figure
    ("power: not rated at this size (duckdb, mariadb, postgres)"). ``common``: the repeats of the run's rule
    (figures_rule), which a figure says only when its own differ."""
    items: list[tuple[str, list[str]]] = []
    unrated: dict[str, list[str]] = {}
    for h in headlines:
        if h.get("unrated"):
            unrated.setdefault(_context(h, without_of=True), []).append(h.get("of") or "")
            continue
        context, said = _context(h), figure_with_rule(h, common)
        if items and items[-1][0] == context:
            items[-1][1].append(said)
        else:
            items.append((context, [said]))
    out = [f"{context}: {', '.join(said)}" if context else ", ".join(said) for context, said in items]
    out += [f"{context}: not rated at this size" + (f" ({', '.join(o for o in ofs if o)})" if any(ofs) else "")
            for context, ofs in unrated.items()]
    return out


def _context(h: dict[str, Any], without_of: bool = False) -> str:
    """What tells a headline from the suite's others, without its unit: "IOPS, random read, 4 KiB, QD 16" →
    "random read, 4 KiB, QD 16"; "write MB/s per core (DATA+WORK+UTIL)" → "write (DATA+WORK+UTIL)"."""
    unit, of = h.get("unit") or "", h.get("of") or ""
    # The name it is compared by when that says what it measured ("IOPS, random read, 4 KiB, QD 16"), else its label.
    text = h["figure"] if h.get("figure") and unit and unit in h["figure"] else h["label"]
    if without_of and of:
        text = text.replace(f"{of}: ", "")
    if unit:
        text = re.sub(rf"(^|\s){re.escape(unit)}(,\s*|\s|$)", r"\1", text).strip(" ,")
    return re.sub(r"^peak\s+", "", text).replace(": ", " ")


def checks_said(v: dict[str, Any]) -> str:
    """The suite's checks in the suite's column: "22 passed", "2 FAILED"."""
    if v["checks_failed"]:
        return f"{v['checks_failed']} FAILED"
    return f"{v['checks_passed']} passed" if v["checks_passed"] else "no checks"


def brief_lines(verdicts: list[dict[str, Any]], run_name: str, run_path: str, width: int,
                fold_commands: bool = True) -> list[str]:
    """The verdict's lines at ``width`` columns. ``fold_commands``: a terminal's; a pipe or a file takes a command
    wider than ``width`` whole."""
    text = width - SUITE_COLUMN
    common, rule = figures_rule(verdicts)
    lines = title_lines("verdict", run_name, rule, width)
    for v in verdicts:
        rows: list[str] = []
        for item in figure_items(v["headlines"], common) or ["no headline figures"]:
            rows += _wrapped(item, text)
        if v.get("durability"):  # the figures do not rate a stack that keeps its commits
            rows += _wrapped(f"durability traded for speed: {v['durability']}", text)
        if v.get("limit"):
            rows += _wrapped(f"limit: {v['limit']}", text)
        commands: list[str] = []
        if step := v.get("next"):
            more, commands = step_rows(f"next: {step['short']}", step.get("command") or "", width, fold_commands)
            rows += more
        # A suite neighbours disturbed says so under its checks; what disturbed it is said once, below the suites.
        lines += in_margin([suite_name(v), checks_said(v)] + (["disturbed"] if v.get("disturbed") else []), rows)
        lines += commands
    if disturbed := [v["disturbed"] for v in verdicts if v.get("disturbed")]:
        lines += textwrap.wrap(f"disturbed: {disturbed_said(disturbed)}", width, subsequent_indent="  ")
    lines.append(f"why: refbench why {shlex.quote(run_path)}")
    return lines


def disturbed_said(disturbed: list[str]) -> str:
    """The suites' "disturbed" in a line: the first cause and how many of the headline repeats it marked, without the
    cases' ids (`why` and the report name them): "the hypervisor took 6% of the CPU (steal) (t0-seq-w100-qd16-bs128k,
    1 of its 3 repeats)" → "the hypervisor took 6% of the CPU (steal), 1 of 3 repeats"."""
    causes = [re.sub(r" \([^()]*\)$", "", said).split("; ") for said in disturbed]  # without "(cases, k of its n …)"
    counts = [c for said in disturbed for c in re.findall(r"(\d+) of its (\d+) repeats", said)]
    hit, of = (sum(int(c[i]) for c in counts) for i in (0, 1))
    kinds = {re.sub(r"[\d.,]+", "N", cause) for each in causes for cause in each}
    return causes[0][0] + (" and more" if len(kinds) > 1 else "") + (f", {hit} of {of} repeats" if counts else "")


def suite_name(v: dict[str, Any]) -> str:
    return f"{v['suite']} ({v['scope']})" if v.get("scope") else v["suite"]


def in_margin(margin: list[str], rows: list[str]) -> list[str]:
    """The suite's rows beside its margin (its name, its checks…), the margin's words on lines of their own when
    they are too wide for its column."""
    rows = rows + [""] * (len(margin) - len(rows))
    lines = []
    for left, row in zip(margin + [""] * len(rows), rows):
        if len(left) >= SUITE_COLUMN:
            lines.append(left)
            left = ""
        lines.append(f"{left:<{SUITE_COLUMN}}{row}".rstrip())
    return lines


def step_rows(said: str, command: str, width: int, fold_commands: bool = True) -> tuple[list[str], list[str]]:
    """A step and its command: (the rows beside the margin, the lines below them at the left edge). The command
    follows its words when it fits, else it takes a row of its own, whole, else lines of its own (folded)."""
    text = width - SUITE_COLUMN
    if command and len(said) + 2 + len(command) <= text:
        return [f"{said}: {command}"], []
    rows = _wrapped(said + (":" if command else ""), text)
    if command and len(command) <= text:
        return rows + [command], []
    if command:
        return rows, folded(command, width) if fold_commands and len(command) > width else [command]
    return rows, []


def _wrapped(text: str, width: int) -> list[str]:
    return textwrap.wrap(text, width, subsequent_indent="  ", break_on_hyphens=False) or [""]


def folded(command: str, width: int) -> list[str]:
    """A command wider than ``width`` on several lines, split between arguments, each but the last ending in " \\"."""
    lines, line = [], ""
    for word in (shlex.quote(w) for w in shlex.split(command)):  # commands are made with shlex.join
        candidate = f"{line} {word}" if line else word
        if line and len(candidate) + 2 > width:
            lines.append(line + " \\")
            line = CONTINUED + word
        else:
            line = candidate
    return lines + [line]
