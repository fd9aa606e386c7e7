"""The verdict's long form, as `refbench why` prints it: per suite every headline with its note, the engines side by
side, the checks, what limited each headline and what to try next for each engine, with its command.

Read from verdict.json's entries, as the terminal's verdict is (refbench.report.brief), folded to ``width`` columns,
and each clause said once: the rule the figures follow once for the run (in the title); a clause several headlines'
limits share once, with the headlines it holds for; the evidence once, on the bottleneck's lines (a next step says
only what to try); a caveat several engines' steps share once; an engines table without the headline figures the
lines above it give.
"""

from __future__ import annotations

import re
from typing import Any

from rich.console import Console
from rich.table import Table as RichTable

from refbench.formats import fmt
from refbench.report.advice import IN_MEMORY
from refbench.report.brief import (SUITE_COLUMN, figure_with_rule, figures_rule, in_margin, note_of, step_rows,
                                   suite_name, title_lines, _wrapped)

INDENT = "  "  # a clause that belongs to the line above it
ALL_REPEATS = re.compile(r"^in (all \d+|both) repeats, ")  # refbench.report.verdict: each repeat named the same limit


def why_lines(verdicts: list[dict[str, Any]], run_name: str, width: int) -> list[str]:
    """Every line of `refbench why` at ``width`` columns."""
    common, rule = figures_rule(verdicts)
    lines = title_lines("why", run_name, rule, width)
    text = width - SUITE_COLUMN
    steps_said: set[str] = set()
    for v in verdicts:
        rows: list[str] = []
        for said in headline_items(v["headlines"], common) or ["no headline figures"]:
            rows += _wrapped(said, text)
        rows += engines_lines(v, text)
        rows += _wrapped(f"correctness: {v['correctness']}", text)
        for said in limits_once(v):
            rows += [INDENT + row for row in _wrapped(said[len(INDENT):], text - len(INDENT))] \
                if said.startswith(INDENT) else _wrapped(said, text)
        if v.get("disturbed"):
            rows += _wrapped(f"disturbed: {v['disturbed']}", text)
        if v.get("durability"):
            rows += _wrapped(f"durability traded for speed: {v['durability']} (a crash may lose commits or corrupt "
                             "the data: the figures rate a stack that does not keep them)", text)
        margin = [suite_name(v)]
        for said, command in next_steps(v, steps_said):
            beside, below = step_rows(f"next: {said}", command, width)
            rows += beside
            if below:  # a command wider than the column: at the left edge, after the rows before it
                lines += in_margin(margin, rows) + below
                rows, margin = [], []
        lines += in_margin(margin, rows)
    return lines


def headline_items(headlines: list[dict[str, Any]], common: int | None) -> list[str]:
    """Each headline with its figure and note ("peak IOPS, random read, 4 KiB, QD 16: 80,600 IOPS (73,700–82,500);
    read p99 1,548 µs"), a note the headlines before it share said once, after the last of them ("all 3: 2
    streams"); those not rated at this size for one reason in one line, each engine's measured value in it."""
    out: list[str] = []
    unrated: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    rated = [h for h in headlines if not h.get("unrated")]
    for h in headlines:
        if h.get("unrated"):
            label = h["label"].replace(f"{h['of']}: ", "") if h.get("of") else h["label"]
            unrated.setdefault((label, h["unrated"], h["unit"]), []).append(h)
    for i, h in enumerate(rated):
        note = note_of(h)
        if i + 1 < len(rated) and note_of(rated[i + 1]) == note:
            note = ""  # the next one's too: said with the last of them
        elif (shared := _shared_before(rated, i)) > 1:
            note = f"{'both' if shared == 2 else f'all {shared}'}: {note}"
        out.append(f"{h['label']}: {figure_with_rule(h, common)}" + (f"; {note}" if note else ""))
    for (label, reason, unit), group in unrated.items():
        values = [fmt(h["value"]) for h in group]
        measured = ", ".join(f"{h['of']} {value}" if h.get("of") else value for h, value in zip(group, values))
        # A reason that names the value already ("would rate 0.91 TB") is not followed by it again.
        tail = "" if len(group) == 1 and values[0] in reason else f"; measured {measured} {unit}".rstrip()
        out.append(f"{label}: not rated at this size ({reason}{tail})")
    return out


def _shared_before(rated: list[dict[str, Any]], i: int) -> int:
    """How many headlines up to the i-th one in a row have its note."""
    n = 1
    while i - n >= 0 and note_of(rated[i - n]) == note_of(rated[i]):
        n += 1
    return n


def engines_lines(v: dict[str, Any], width: int) -> list[str]:
    """The engines run, side by side: without the columns that repeat a headline figure of each engine or that are
    empty for all; a row per engine when that fits ``width``, else a column per engine, else each engine's lines."""
    engines = v.get("engines") or []
    if len(engines) < 2:
        return []
    figures = {(h.get("of"), h["value"]) for h in v["headlines"]}
    notes = {h.get("of"): " ".join(note_of(x) for x in v["headlines"] if x.get("of") == h.get("of"))
             for h in v["headlines"]}

    def said_above(row: dict[str, Any], column: str) -> bool:  # or nothing to say
        value = row.get(column)
        return value is None or (row["engine"], value) in figures or f"{fmt(value)} {column}" in notes.get(row["engine"], "")

    # Each engine's checks, when none failed, are the correctness line's.
    columns = [c for c in engines[0] if c == "engine" or not (
        all(said_above(row, c) for row in engines) or (c == "checks" and not v.get("checks_failed")))]
    by_row = RichTable(box=None, pad_edge=False, header_style="bold")
    for column in columns:
        by_row.add_column(column, justify="left" if column == "engine" else "right")
    for row in engines:
        by_row.add_row(*(_cell(row.get(c)) for c in columns))
    if (said := _rendered(by_row, width)) is not None:
        return said
    by_engine = RichTable(box=None, pad_edge=False, header_style="bold")
    by_engine.add_column("engine")
    for row in engines:
        by_engine.add_column(str(row["engine"]), justify="right")
    for column in columns[1:]:
        by_engine.add_row(column, *(_cell(row.get(column)) for row in engines))
    if (said := _rendered(by_engine, width)) is not None:
        return said
    return [line for row in engines
            for line in _wrapped(f"{row['engine']}: " + ", ".join(f"{c} {_cell(row.get(c))}" for c in columns[1:]), width)]


def _cell(value: Any) -> str:
    return "—" if value is None else fmt(value)


def _rendered(table: RichTable, width: int) -> list[str] | None:
    """The table's lines when it fits ``width`` whole, no cell cut or folded; else None."""
    console = Console(width=10_000, color_system=None, highlight=False)
    with console.capture() as captured:
        console.print(table)
    lines = [line.rstrip() for line in captured.get().splitlines()]
    return lines if max(map(len, lines), default=0) <= width else None


def limits_once(v: dict[str, Any]) -> list[str]:
    """What limited the suite's headlines: one line when one limit is named; else a line per headline with what it
    alone was limited by, then each clause several share, once, with the headlines it holds for ("all 3: host: …")."""
    labels = sorted({h["label"] for h in v["headlines"]}, key=len, reverse=True)
    text = v["bottleneck"]
    pieces = re.split(rf"(?:^|; )at ({'|'.join(map(re.escape, labels))}): ", text) if labels and text.startswith("at ") \
        else [text]
    if len(pieces) < 3:
        return [f"bottleneck: {text}"]
    entries = [(label, clauses(limit)) for label, limit in zip(pieces[1::2], pieces[2::2])]
    # "in all 3 repeats, " before each headline's limit: said once, before them.
    leads = {found.group(0) if (found := ALL_REPEATS.match(said[0])) else "" for _, said in entries}
    lead = leads.pop() if len(leads) == 1 else ""
    entries = [(label, [said[0].removeprefix(lead), *said[1:]]) for label, said in entries]
    holders: dict[str, list[str]] = {}
    for label, said in entries:
        for clause in said:
            holders.setdefault(clause, []).append(label)
    shared: dict[tuple[str, ...], list[str]] = {}
    for clause, held_by in holders.items():
        if len(held_by) > 1:
            shared.setdefault(tuple(held_by), []).append(clause)
    out = [f"bottleneck, {lead.removesuffix(', ')}:" if lead else "bottleneck:"]
    out += [f"{INDENT}{label}: {'; '.join(own)}" for label, said in entries
            if (own := [c for c in said if holders[c] == [label]])]
    out += [f"{INDENT}{f'all {len(held_by)}' if len(held_by) == len(entries) else ' and '.join(held_by)}: "
            f"{'; '.join(said)}" for held_by, said in shared.items()]
    return out


def next_steps(v: dict[str, Any], said: set[str]) -> list[tuple[str, str]]:
    """Each engine's next step, (its words, its command): what to try, without the evidence its sentence opens with
    (the bottleneck's lines have it; refbench.report.advice), and without what ``said`` holds (the run's steps so
    far): a caveat or a setting's reason an earlier step gave."""
    out = []
    for advice in v.get("advice") or []:
        who = f"{advice['engine']}: " if advice.get("engine") else ""
        body = advice["sentence"].removeprefix(who)
        kept = []
        for clause in clauses(body)[1:] or [body]:
            # A caveat's reason (not rated at this size, measured from memory) is the headline's or the bottleneck's.
            clause = IN_MEMORY + clause.split(f", so {IN_MEMORY}", 1)[1] if f", so {IN_MEMORY}" in clause else clause
            what, since, why = clause.partition(", since ")
            if why or clause not in said:  # what to try is said each time; its reason, as a caveat, once
                kept.append(what + (since + why if why not in said else ""))
            said.update((clause, why))
        out.append((who + "; ".join(kept), advice.get("command") or ""))
    return out


def clauses(text: str) -> list[str]:
    """``text`` split at each "; " outside parentheses."""
    out, depth, start = [], 0, 0
    for i, char in enumerate(text):
        depth += (char == "(") - (char == ")")
        if depth == 0 and text.startswith("; ", i):
            out.append(text[start:i])
            start = i + 2
    return out + [text[start:]]
