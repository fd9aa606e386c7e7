"""Runs side by side: the first run is the baseline (A), every other run is compared with it figure by figure,
and a difference counts only when it stands out of the run-to-run noise measured on this host (`estimate`: runs
and repeats are the replicates)."""

from __future__ import annotations

import hashlib
import json
import math
import re
from pathlib import Path
from typing import Any

from refbench import estimate as E
from refbench.fileio import atomic_write_text
from refbench.formats import spreadsheet_text
from refbench.report import html as h
from refbench.report import waits
from refbench.report.verdict import headline_keys
from refbench.figures import Figure, configuration, direction, figure_cases, repeat_groups, side_figures
from refbench.runstore import Run


SAME_WITHIN = 0.01



def verdict(metric: str, a: float, b: float) -> tuple[float | None, str]:
    """(B relative to A, words). The factor is how many times better (or worse) B is than A."""
    if a == 0 or b == 0:
        return None, "—"
    sense = direction(metric)
    ratio = b / a
    if sense == 0:
        return ratio, f"{ratio:.2f}× A"
    better = ratio if sense > 0 else 1 / ratio
    if abs(better - 1) < SAME_WITHIN:
        return better, "same"
    return better, f"{better:.2f}× faster" if better > 1 else f"{1 / better:.2f}× slower"


def _headline_figures(run: Run) -> dict[tuple[str, str, str], tuple[str, str]]:
    """(suite, figure's case, metric) -> the headline's name in a comparison and its role (headline_keys).
    headline_keys names records; the figures name their groups."""
    if run.plan.hosts:  # a cluster run's headlines are its totals, named as its figures are ("u4@2n")
        return {(v["suite"], h["case"], h["metric"]): (h["figure"], f"{h['figure']}@{v['suite']}")
                for v in run.read_json(run.verdict_path) or [] if v.get("scope", "").startswith("total")
                for h in v["headlines"]}
    keys = headline_keys(run)
    if not keys:
        return {}
    case_of = figure_cases(run)
    return {(suite, case_of.get((suite, case), case), metric): named for (suite, case, metric), named in keys.items()}


def across_cases(base: dict[tuple[str, str, str], tuple[str, str]], other: dict[tuple[str, str, str], tuple[str, str]],
                 base_figures: dict, other_figures: dict
                 ) -> dict[tuple[str, str, str], tuple[tuple[str, str, str], tuple[str, str, str], str]]:
    """The headlines of one role that came from different cases in the two runs (the best load level was 1 user in
    A and 4 in B): (suite, "u1 → u4", metric) -> (A's figure key, B's, the name), so that the runs' best is compared
    with their best even where neither measured the other's case."""
    theirs = {role: key for key, (_, role) in other.items()}
    out = {}
    for key, (name, role) in base.items():
        mine = theirs.get(role)
        if mine is None or mine == key or key not in base_figures or mine not in other_figures:
            continue
        out[(key[0], f"{key[1]} → {mine[1]}", key[2])] = (key, mine, f"{name} → {mine[1]}")
    return out


# ---- the answers -------------------------------------------------------------------------------------------

RULE = ("Runs and repeats are the replicates, never the seconds of one run. B / A is tested on the logarithms of "
        "the replicates (SciPy's t-test: Student's pooled at equal sizes, Welch's otherwise); a figure measured once on "
        "a side (or equal in every repeat) is tested against this host's "
        "measured run-to-run spread of it (from earlier repeats in the catalog), and without one it is 'cannot tell'. "
        "The headline figures of a comparison are one family (Bonferroni), the other figures another "
        "(Benjamini–Hochberg, with false-coverage intervals): every interval shown is the one the answer used, so an "
        f"interval excluding 1 is a change and one including it is not. 'no change': the interval lies within "
        f"±{E.RESOLVE:.0%}.")


def host_spreads(runs: list[Run], keys: list[tuple[str, str, str]]) -> dict[tuple[str, str, str], dict[str, E.Spread]]:
    """(suite, case, metric) -> this host's measured spreads of the figure (Catalog.spreads): from run to run
    among runs of the compared configurations, and of repeats within runs. None found: nothing."""
    from refbench.catalog import read_catalog

    if not keys:
        return {}
    host, profile = runs[0].meta.get("host"), runs[0].plan.profile
    configurations = {configuration(run.meta["plan"]) for run in runs}
    try:
        return read_catalog(runs[0].path.parent, lambda c: c.spreads(host, profile, keys, configurations),
                            lambda _: None, loaded=runs)
    except Exception:  # the catalog is a cache: without it, no spread is known
        return {}


def estimate_change(a: Figure, b: Figure, spreads: dict[str, E.Spread]) -> E.Estimate:
    """B against A from the best replicates there are. Several runs a side: the runs. One run a side: the run is
    still the replicate when this host has measured how far runs of this configuration spread (the difference of
    the two runs' means against it); the run's own repeats are tested too, and the wider of the two intervals is
    kept (repeats within a run share its load and server, and may agree more closely than runs do). A figure
    measured once a side: against the run-to-run spread, else the repeats' spread, else nothing. Several runs a
    side taken in turn are compared pair by pair. What more of would tell is what the kept interval came from."""
    runs = spreads.get("runs")
    if a.source.endswith("runs") and b.source.endswith("runs"):
        if (pairs := taken_in_turn(a, b)) and (in_turn := E.paired(pairs)):
            return in_turn
        return E.ratio(a.samples, b.samples, spread=runs, replicate="run")  # the spread judges only sides each all equal
    between = E.ratio([a.value], [b.value], spread=runs, replicate="run") if runs else None
    if len(a.samples) >= 2 and len(b.samples) >= 2:
        within = E.ratio(a.samples, b.samples, spread=spreads.get("repeats"),
                         replicate="run" if "runs" in (a.source + b.source) else "repeat")
        if between is None or (within.se or 0) >= (between.se or 0):
            return within
        return between
    return between or E.ratio(a.samples or [a.value], b.samples or [b.value], spread=spreads.get("repeats"),
                              replicate="run" if "runs" in (a.source + b.source) else "repeat")


def taken_in_turn(a: Figure, b: Figure) -> list[tuple[float, float]] | None:
    """(A, B) for each two runs taken in turn — by time, every two runs one of each side (A, B, A, B; A, B, B, A) —
    or None when the sides' runs were not."""
    if not (len(a.samples) == len(a.started) == len(b.samples) == len(b.started) >= 2):
        return None
    order = sorted([(at, "A", v) for at, v in zip(a.started, a.samples)] + [(at, "B", v) for at, v in zip(b.started, b.samples)])
    pairs = []
    for first, second in zip(order[::2], order[1::2]):
        if first[1] == second[1]:
            return None
        pairs.append((first[2], second[2]) if first[1] == "A" else (second[2], first[2]))
    return pairs


def shared_figures(runs: list[Run], metric: str | None = None, sides: list[list[Run]] | None = None) -> list[dict[str, Any]]:
    """One row per figure the baseline shares with another run, and per such run, in the baseline's order.
    ``sides``: each compared side's runs, when a side is several runs of one configuration (``runs`` then names
    each side by its first run)."""
    sides = sides or [[run] for run in runs]
    base_figures = side_figures(sides[0])
    headlines_of = [_headline_figures(run) for run in runs]  # each made once: they take a run's whole verdict
    headlines = dict(headlines_of[0])  # the baseline's; another run's only for a suite the baseline has none in
    rows = []
    for letter, other, side, others_headlines in zip(letters(runs)[1:], runs[1:], sides[1:], headlines_of[1:]):
        other_figures = side_figures(side)
        apart = measured_apart(sides[0], side, letter)
        have = {suite for suite, _, _ in headlines}
        headlines |= {k: name for k, name in others_headlines.items() if k[0] not in have}
        crossed = across_cases(headlines_of[0], others_headlines, base_figures, other_figures)
        base_figures_here = {**base_figures, **{k: base_figures[mine] for k, (mine, _, _) in crossed.items()}}
        other_figures_here = {**other_figures, **{k: other_figures[theirs] for k, (_, theirs, _) in crossed.items()}}
        keys = [k for k in base_figures_here if k in other_figures_here and not (metric and metric not in k[2])]
        names = {k: name for k, (name, _) in headlines.items()} | {k: name for k, (_, _, name) in crossed.items()}
        spreads = host_spreads([*sides[0], *side], keys)
        raw = {k: estimate_change(base_figures_here[k], other_figures_here[k], spreads.get(k, {})) for k in keys}
        judged = dict(zip(heads := [k for k in keys if k in names],
                          E.bonferroni([raw[k] for k in heads], "headline figures")))
        judged |= dict(zip(rest := [k for k in keys if k not in names],
                           E.false_discovery([raw[k] for k in rest], "other figures")))
        for family in {e.family for e in judged.values()}:  # the repeats a figure would need, all at once
            E.resolve_ahead([e.log_sd for e in judged.values() if e.family == family and e.log_sd and not e.significant],
                            family=family)
        for key in keys:
            fa, fb, est = base_figures_here[key], other_figures_here[key], judged[key]
            factor, words = verdict(key[2], fa.value, fb.value)
            identical = fa.value == fb.value and not (fa.samples or fb.samples)
            answer, why = ("same", "identical values") if identical else E.answer(est, direction(key[2]))
            if disturbance := _disturbance(fa, fb, letter):
                answer, why = "not compared", f"disturbed: {disturbance}"
            row = {"suite": key[0], "case": key[1], "metric": key[2], "vs": letter, "run": other.path.name, "A": fa.value,
                   "B": fb.value, "factor": factor, "B vs A": words,
                   "significant": est.significant and answer != "not compared",
                   "p": None if est.p_adjusted is None else round(est.p_adjusted, 4), "basis": est.basis,
                   "headline": key in names, "name": names.get(key, f"{key[1]} {key[2]}"), "n": est.n,
                   "ci_low": None if est.low is None else round(est.low, 4),
                   "ci_high": None if est.high is None else round(est.high, 4),
                   "interval": est.interval_words(), "answer": answer, "why": why, "estimate": est,
                   "left_out": "" if disturbance else
                   "; ".join(f"{side}: {f.left_out}" for side, f in (("A", fa), (letter, fb)) if f.left_out),
                   "apart": apart,
                   "repeats_for_5pct": E.repeats_to_resolve(est.log_sd, family=est.family)
                   if est.log_sd and not est.significant else None, "replicate": est.replicate}
            rows.append(row)
    return rows


APART_S = 600  # sides measured further apart than this (or several runs a side, not in turn) are said to be


def measured_apart(a: list[Run], b: list[Run], letter: str) -> str:
    """When two sides were measured apart, in words ("B measured 44 min after A: …"); "" when their runs were
    taken in turn or close together. A host drifts (its caches, its neighbours, the hypervisor's other guests), and
    a change between sides measured apart is the drift's as much as the configuration's."""
    def span(side: list[Run]) -> tuple[float, float] | None:
        times = [r.span() for r in side]
        if any(t is None for t in times):
            return None
        return min(t[0] for t in times), max(t[1] for t in times)

    sa, sb = span(a), span(b)
    if sa is None or sb is None or (sa[0] < sb[1] and sb[0] < sa[1]):  # unknown, or interleaved
        return ""
    gap = sb[0] - sa[1] if sb[0] >= sa[1] else sa[0] - sb[1]
    if gap <= APART_S and len(a) == 1 and len(b) == 1:
        return ""
    when = f"{gap / 60:.0f} min {'after' if sb[0] >= sa[1] else 'before'} A"
    return (f"{letter} measured {when}, not in turn with it: a change may be this host's drift; runs of each "
            f"side taken in turn (A, {letter}, A, {letter}) tell them apart")


def host_changed(sides: list[list[Run]]) -> list[str]:
    """One sentence per side whose canaries (refbench.host.canary: a fixed probe before and after each case) differ
    from A's beyond A's own spread ("the host changed between A and B: fsync 0.26 → 0.85 ms"): what no process
    counter sees, such as another VM on shared storage or a busy hypervisor. None when they agree or a side has no
    canary (runs from before it)."""
    from refbench.host import canary

    def probes(side: list[Run]) -> list[dict[str, Any]]:
        return [p for run in side for r in run.records() for p in (r.extra.get("canary") or {}).values()]

    base, out = probes(sides[0]), []
    for letter, side in zip(letters_of(len(sides))[1:], sides[1:]):
        if base and (mine := probes(side)) and (changed := canary.moved(base, mine)):
            out.append(f"the host changed between A and {letter}: {changed} (the canary before and after each case)")
    return out


def _disturbance(a: Figure, b: Figure, letter: str) -> str:
    """Which side's neighbours disturbed a figure, and how; "" when neither: a change between disturbed
    measurements is the neighbours' as much as the stack's, so compare does not call one. ``letter``: b's side."""
    return "; ".join(f"{side}: {f.disturbed}" for side, f in (("A", a), (letter, b)) if f.disturbed)


def wait_changes(sides: list[list[Run]]) -> list[dict[str, Any]]:
    """How each shared case's wait profile changed from A to each other side (report.waits.profile_changes); a
    side of several runs has each case's records of all its runs."""
    merged: list[dict[tuple[str, str], list]] = []
    for side in sides:
        groups: dict[tuple[str, str], list] = {}
        for run in side:
            for key, records in repeat_groups(run).items():
                groups.setdefault(key, []).extend(records)
        merged.append(groups)
    return waits.profile_changes(letters_of(len(sides)), merged)


def wait_lines(changes: list[dict[str, Any]], found: list[dict[str, Any]]) -> list[str]:
    """For the terminal, below the answers: the change in what limits the cases the headline figures name (every
    case when no headline names one), each run against A."""
    named = {(a["vs"], a["suite"], a["case"]) for a in found if a["kind"] == "headline"}
    shown = [c for c in changes if (c["vs"], c["suite"], c["case"]) in named] or changes
    several = len({c["vs"] for c in changes}) > 1
    if not shown:
        return []
    return ["what limits it (share of session time, A → " + ("each run" if several else "B") + "):"] + [
        f"  {c['vs'] + ': ' if several else ''}{waits.change_line(c)}" for c in shown]


def effect(rows: list[dict[str, Any]], family: float = 1, adjustment: str = "") -> dict[str, Any]:
    """The overall effect of some headline figures (pyperf's "Geometric mean"): how many times better B is than A,
    over the figures with a better direction, its interval at the family's confidence, and the answer in words."""
    by_case: dict[tuple[str, str], list[E.Estimate]] = {}
    if rows and all(r["answer"] == "not compared" for r in rows):
        return {"ratio": None, "ci_low": None, "ci_high": None, "p": None, "cases": 0, "interval": "", "basis": "",
                "significant": False, "answer": f"not compared: {rows[0]['why']}"}
    for r in rows:
        if direction(r["metric"]) != 0 and r["answer"] != "not compared":
            by_case.setdefault((r["suite"], r["case"]), []).append(r["estimate"].oriented(direction(r["metric"])))
    # The figures of one case move together (NOPM and TPM count the same transactions): one case, one figure.
    oriented = [E.together(estimates) for estimates in by_case.values()]
    est = E.geometric_mean(oriented)
    if family > 1:
        est = est.adjusted(family, adjustment)
    result = {"ratio": est.ratio, "ci_low": est.low, "ci_high": est.high, "p": est.p_adjusted, "cases": len(oriented),
              "interval": est.interval_words(), "basis": est.basis}
    if est.ratio is None:
        return result | {"answer": "no figure with a better direction", "significant": False}
    if rows and all(r["answer"] == "same" for r in rows):
        return result | {"answer": "no change: identical values", "significant": False}
    shown = f"{est.ratio:.2f}×" + (f" ({est.low:.2f}–{est.high:.2f})" if est.low is not None else "")
    if est.significant:  # the interval turned as the words are: "1.38× slower (1.03–1.85)", not B / A's (0.54–0.97)
        if est.ratio > 1:
            words = f"{est.ratio:.2f}× faster" + (f" ({est.low:.2f}–{est.high:.2f})" if est.low is not None else "")
        else:
            words = f"{1 / est.ratio:.2f}× slower" + (f" ({1 / est.high:.2f}–{1 / est.low:.2f})"
                                                      if est.low is not None and est.low > 0 else "")
        return result | {"answer": words, "significant": True}
    if est.p is None:
        return result | {"answer": "cannot tell: no headline figure was measured more than once a side, and this host "
                                   "has no measured spread of them; measure it once with --repeats 3", "significant": False}
    need = [r["repeats_for_5pct"] for r in rows if r["repeats_for_5pct"]]
    replicate = _replicate(rows)
    within = est.low is not None and 1 / (1 + E.RESOLVE) <= est.low and est.high <= 1 + E.RESOLVE
    tail = "" if within else (f"; cannot tell a {E.RESOLVE:.0%} change: {E.more(replicate, max(need))} would" if need
                              else f"; cannot tell a {E.RESOLVE:.0%} change: more {replicate}s would")
    return result | {"answer": f"no significant change, {shown}{tail}", "significant": False}


def answers(shared: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What a comparison says first, for each run against A: one overall line (the geometric mean of every
    headline figure's ratio, oriented so that above 1 is better), then per suite its own such line with a count of
    the answers and of the other figures, and its headline figures (B / A, the interval the answer used, the
    replicates a side, the answer). The overall and suite effects are one family (Bonferroni)."""
    out: list[dict[str, Any]] = []
    for letter in dict.fromkeys(r["vs"] for r in shared):
        mine = [r for r in shared if r["vs"] == letter]
        suites = list(dict.fromkeys(r["suite"] for r in mine))
        heads = [r for r in mine if r["headline"]]
        with_heads = [suite for suite in suites if any(r["suite"] == suite for r in heads)]
        family = len(with_heads) + (len(with_heads) > 1)
        adjustment = f"Bonferroni over {family} effects"
        if len(with_heads) > 1 or not with_heads:
            out.append({"kind": "overall", "vs": letter, "suite": "", **effect(heads, family, adjustment),
                        "summary": _tally(mine)})
        for suite in suites:
            in_suite = [r for r in mine if r["suite"] == suite]
            mine_heads = [r for r in in_suite if r["headline"]]
            out.append({"kind": "suite", "vs": letter, "suite": suite, **effect(mine_heads, family, adjustment),
                        "summary": _tally(in_suite)})
            out += [{"kind": "headline", "vs": letter, "suite": suite, "figure": r["name"], "case": r["case"],
                     "metric": r["metric"], "ratio": r["B"] / r["A"] if r["A"] else None, "ci_low": r["ci_low"],
                     "ci_high": r["ci_high"], "interval": r["interval"], "n": r["n"], "answer": r["answer"],
                     "why": r["why"], "basis": r["basis"], "repeats_for_5pct": r["repeats_for_5pct"],
                     "replicate": r["replicate"],
                     "left_out": r["left_out"], "apart": r["apart"]} for r in mine_heads]
    return out


def _ratio_text(value: float) -> str:
    """A ratio in at most six characters: 0.27, 13.1, 5027, ∞."""
    if value == math.inf:
        return "∞"
    return f"{value:.2f}" if value < 10 else f"{value:.1f}" if value < 100 else f"{value:.0f}"


def answer_lines(found: list[dict[str, Any]], columns: int = 80) -> list[str]:
    """The answers as plain lines within ``columns`` (the terminal, --json): the overall line first, then each
    suite's line with its headline figures indented and aligned — a figure's name on a line of its own when the
    row would not fit — then what the intervals and answers mean."""
    headlines = [a for a in found if a["kind"] == "headline"]
    several = len({a["vs"] for a in found}) > 1
    cells = {id(a): (f"{_ratio_text(a['ratio'])}×" if a["ratio"] is not None else "—",
                     f"({_ratio_text(a['ci_low'])}–{_ratio_text(a['ci_high'])})" if a["ci_low"] is not None else "",
                     f"{a['n'][0]} vs {a['n'][1]}") for a in headlines}
    width = [max((len(a["figure"]) for a in headlines), default=0),
             *(max((len(c[i]) for c in cells.values()), default=0) for i in range(3))]
    answer_width = max((len(a["answer"]) for a in headlines), default=0)
    numbers = width[1] + 1 + width[2] + 2 + width[3] + 2 + answer_width
    apart = 2 + width[0] + 2 + numbers > columns  # the name above its numbers
    lead = 6 if apart else 2 + width[0] + 2
    lines = []
    header = ""
    if headlines:
        level = headlines[0]["interval"].split(":")[0].replace(" CI", "")
        header = (f"{'':<{lead}}{'× A' if several else 'B / A':>{width[1]}} {'(' + level + ')':<{width[2]}}  "
                  f"{'n':<{width[3]}}  answer")
    for a in found:
        against = f" ({a['vs']} against A)" if several else ""
        if a["kind"] == "headline":
            ratio, interval, n = cells[id(a)]
            row = f"{ratio:>{width[1]}} {interval:<{width[2]}}  {n:<{width[3]}}  {a['answer']}"
            lines += [f"  {a['figure']}", f"{'':<{lead}}{row}"] if apart else [f"  {a['figure']:<{width[0]}}  {row}"]
        elif a["kind"] == "overall":
            lines.append(f"overall{against}: {a['answer']}")
        else:
            lines.append(f"{a['suite']}{against}: {a['answer']}; {a['summary']}")
            if header and any(h["suite"] == a["suite"] and h["vs"] == a["vs"] for h in headlines):
                lines.append(header)
    return lines + legend(found)


def legend(found: list[dict[str, Any]]) -> list[str]:
    """What the intervals and words mean, only those that appear, as many to a line as fit in 80 columns; for
    "cannot tell", what would tell."""
    headlines = [a for a in found if a["kind"] == "headline"]
    words = {a["answer"] for a in headlines}
    terms = [f"intervals: {w}" for w in dict.fromkeys(a["interval"] for a in found if ":" in a.get("interval", ""))]
    spreads = list(dict.fromkeys(a["basis"].split("against ")[1] for a in headlines if "this host's spread" in a["basis"]))
    terms += [f"1 a side: tested against {s}" for s in spreads]
    if "no change" in words:
        terms.append(f"no change: the interval lies within ±{E.RESOLVE:.0%}")
    said = " ".join(a["answer"] for a in found if a["kind"] != "headline")  # a suite's line may have said why
    terms += [f"not compared: {why}" for why in dict.fromkeys(a["why"] for a in headlines if a["answer"] == "not compared")
              if why not in said]
    terms += list(dict.fromkeys(a[key] for key in ("left_out", "apart") for a in headlines if a.get(key)))
    unsure = [a for a in headlines if a["answer"] == "cannot tell"]
    if unsure:
        counts = [a["repeats_for_5pct"] for a in unsure if a["repeats_for_5pct"]]
        unmeasured = sum(1 for a in unsure if "no measured spread" in a["basis"])
        replicate = _replicate(unsure)
        if counts:
            terms.append(f"cannot tell: {E.more(replicate, max(counts))} would resolve {E.RESOLVE:.0%} here"
                         + ("" if len(counts) == len(unsure) else f" for {len(counts)} of {len(unsure)}"))
        if len(unsure) - len(counts) - unmeasured > 0:
            terms.append(f"{len(unsure) - len(counts) - unmeasured} spread too far to resolve {E.RESOLVE:.0%} "
                         f"in {E.MOST_REPEATS} {replicate}s a side")
        if unmeasured:
            terms.append(f"{unmeasured} with no measured spread: measure it once with --repeats 3")
    lines: list[str] = []
    for term in terms:
        if lines and len(lines[-1]) + 2 + len(term) <= 80:
            lines[-1] += "; " + term
        else:
            lines.append(term)
    return lines


def _replicate(rows: list[dict[str, Any]]) -> str:
    """"run" when the spread behind any of these answers is from run to run (more repeats of one run would not
    resolve it), else "repeat"."""
    return "run" if any(r.get("replicate") == "run" for r in rows) else "repeat"


def _tally(rows: list[dict[str, Any]]) -> str:
    """The headline figures by answer, then how many of the other figures with a better direction changed
    significantly. Figures that only describe a run (percentages, counts) are left to --all."""
    answers: dict[str, int] = {}
    for r in rows:
        if r["headline"]:
            answers[r["answer"]] = answers.get(r["answer"], 0) + 1
    order = ["faster", "slower", "changed", "no change", "same", "cannot tell", "not compared"]
    parts = [", ".join(f"{answers[word]} {word}" for word in order if word in answers)] if answers else []
    others = [r for r in rows if not r["headline"] and direction(r["metric"]) != 0]
    if others:
        changed = sum(1 for r in others if r["significant"])
        parts.append(f"{changed:,} of {len(others):,} others changed")
    return "; ".join(parts) or "no figure"


def selected(rows: list[dict[str, Any]], everything: bool) -> list[dict[str, Any]]:
    """What is shown: every row, or the headline figures and the figures with a better direction (throughput,
    latency, time; not the percentages and counts that describe a run) that a test found changed against any of
    the runs, with their rows for all runs, so a figure's line is complete."""
    if everything:
        return rows
    keep = {(r["suite"], r["case"], r["metric"]) for r in rows
            if r["headline"] or (r["significant"] and direction(r["metric"]) != 0)}
    return [r for r in rows if (r["suite"], r["case"], r["metric"]) in keep]


def public(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows as JSON can hold them (without the estimate object behind each)."""
    return [{k: v for k, v in r.items() if k != "estimate"} for r in rows]


def by_figure(rows: list[dict[str, Any]]) -> dict[tuple[str, str, str], dict[str, dict[str, Any]]]:
    """(suite, case, metric) -> compared run's letter -> row: one line per figure across N runs, the headline
    figures first."""
    out: dict[tuple[str, str, str], dict[str, dict[str, Any]]] = {}
    for r in sorted(rows, key=lambda r: not r["headline"]):
        out.setdefault((r["suite"], r["case"], r["metric"]), {})[r["vs"]] = r
    return out


def change_words(row: dict[str, Any]) -> str:
    """The cell people read: the change, and pyperf's "not significant" when it is not."""
    if row["significant"]:
        return row["B vs A"]
    return "same" if row["answer"] == "same" else f"{row['B vs A']}, not significant"


def overall(rows: list[dict[str, Any]], minimum_cases: int = 3) -> list[dict[str, Any]]:
    """The paper's overall ratio: for each figure with a better direction, the geometric mean of its factors over
    the cases of one group (the first part of the case id: an engine, a target), e.g. cold_s over 22 queries."""
    groups: dict[tuple[str, str, str, str], list[float]] = {}
    for r in rows:
        if r["factor"] is not None and direction(r["metric"]) != 0:
            groups.setdefault((r["vs"], r["suite"], r["case"].split("-")[0], r["metric"]), []).append(r["factor"])
    out = []
    for (vs, suite, group, metric), factors in sorted(groups.items()):
        if len(factors) >= minimum_cases:
            mean = math.exp(sum(math.log(f) for f in factors) / len(factors))
            words = "same" if abs(mean - 1) < SAME_WITHIN else f"{mean:.2f}× faster" if mean > 1 else f"{1 / mean:.2f}× slower"
            out.append({"vs": vs, "suite": suite, "group": group, "metric": metric, "cases": len(factors),
                        "geometric mean factor": round(mean, 3), "against A": words})
    return out


def letters(runs: list[Run]) -> list[str]:
    """A, B, C … Z, then A2 …: short names for the table's columns."""
    return letters_of(len(runs))


def configuration_rows(runs: list[Run]) -> list[dict[str, Any]]:
    """The host and plan facts that tell the configurations apart."""

    def facts(run: Run) -> dict[str, Any]:
        meta = run.meta
        inv = meta.get("inventory", {})
        cpu, mem, system = inv.get("cpu", {}), inv.get("memory", {}), inv.get("system", {})
        return {
            "run": run.path.name, "host": meta.get("host"), "CPU": cpu.get("model"),
            "cores / threads": f"{cpu.get('cores')} / {cpu.get('threads')}", "memory GiB": mem.get("total_gib"),
            "kernel": system.get("kernel"), "profile": meta["plan"].get("profile"),
            "targets": ", ".join(meta["plan"].get("targets", [])) or "—",
            "tags": ", ".join(f"{k}={v}" for k, v in sorted(run.tags().items())) or "—",
            **{f"{k} version": v for k, v in (meta.get("tools") or {}).items()},
            **{f"{engine} version (measured)": v for engine, v in engine_versions(run).items()},
        }

    all_facts = [facts(r) for r in runs]
    names = letters(runs)
    return [{"fact": k, **{n: f.get(k) for n, f in zip(names, all_facts)},
             "differs": "yes" if len({json.dumps(f.get(k), default=str) for f in all_facts}) > 1 else ""}
            for k in dict.fromkeys(k for f in all_facts for k in f)]


def engine_versions(run: Run) -> dict[str, str]:
    """Each database engine's version as the run's records found it on the server they measured (a DSN's server
    may not be this host's installed one)."""
    versions: dict[str, str] = {}
    for record in run.records():
        settings = (record.extra.get("load") or {}).get("settings") or record.extra.get("settings") or {}
        version = settings.get("server_version") or settings.get("version")
        if version:
            engine = record.params.get("engine") or ("postgres" if "server_version" in settings else record.suite)
            versions.setdefault(str(engine), str(version))
    return dict(sorted(versions.items()))


def default_html_path(runs: list[Run], metric: str | None, everything: bool) -> Path:
    """Next to the last run, named after every run and the selection, so that no two compares share a file."""
    name = "compare-" + "-vs-".join(r.path.name for r in runs)
    if metric:
        name += "-metric-" + re.sub(r"[^A-Za-z0-9_.]+", "_", metric)
    if everything:
        name += "-all"
    if len(name) > 200:  # file names stop at 255 bytes: keep the start, and a hash of the whole
        name = name[:180] + "-" + hashlib.sha1(name.encode()).hexdigest()[:12]
    return runs[-1].path.parent / f"{name}.html"


def write_html(sides: list[list[Run]], shared: list[dict[str, Any]], out: Path, everything: bool, metric: str | None) -> Path:
    atomic_write_text(out, h.page(title(sides), html_body(sides, shared, everything, metric)))
    return out


def side_name(side: list[Run]) -> str:
    """A side as the command line names it: RUN, or RUN,RUN,… for several runs of one configuration."""
    return ",".join(r.path.name for r in side)


def title(sides: list[list[Run]]) -> str:
    return "refbench compare " + " vs ".join(side_name(side) for side in sides)


def html_body(sides: list[list[Run]], shared: list[dict[str, Any]], everything: bool, metric: str | None, chart: str = "") -> str:
    """The comparison as HTML inside a page's <main>: the compare command's file and the dashboard's compare page.
    ``shared`` is every figure the sides share (shared_figures); the answers count them, the table shows a selection.
    ``chart``: the answers drawn (the dashboard's dot plot), put above them."""
    runs = [side[0] for side in sides]
    rows = selected(shared, everything)
    names = letters(runs)
    legend = " · ".join(f"{n} = {h.esc(side_name(side))}" for n, side in zip(names, sides))
    figure_rows = []
    for (suite, case, m), per_run in by_figure(rows).items():
        first = next(iter(per_run.values()))
        line: dict[str, Any] = {"suite": suite, "case": case, "metric": m, "headline": "yes" if first["headline"] else "",
                                "A": first["A"]}
        for n in names[1:]:
            if (r := per_run.get(n)) is not None:
                line[n], line[f"{n} vs A"] = r["B"], change_words(r)
                line[f"{n} basis"] = r["basis"] + (f", p = {r['p']:.2g}" if r["p"] is not None else "")
        figure_rows.append(line)
    shown = "every figure the runs share" if everything else "the headline figures and the figures that changed significantly"
    significant = any(r["significant"] for r in rows)
    body = [
        f"<h1>refbench comparison</h1><p class='sub'>{legend}</p>", chart,
        _answers_html(answers(shared), several=len(runs) > 2),
        "".join(f"<p class='banner'>{h.esc(line)}</p>" for line in host_changed(sides)),
        _waits_html(wait_changes(sides), several=len(runs) > 2),
        f"<p class='note'>{h.esc(RULE)} “faster” means better in the figure's own sense: higher throughput or "
        "lower latency/time; the factor is how many times better the run is than A. Figures without a better "
        "direction (percentages) show the ratio to A.</p>",
        "<h2>Configurations</h2>", h.table(configuration_rows(runs)),
        *(["<h2>Overall</h2><p class='note'>Geometric mean of each figure's factor over the cases of a group "
           "(an engine's 22 queries, a target's sweep points).</p>", h.table(overall(rows))] if everything and overall(rows) else []),
        f"<h2>Figures ({len(figure_rows)}: {h.esc(shown)}{', metric contains ' + h.esc(repr(metric)) if metric else ''})</h2>",
        "" if significant else "<p class='banner none'>no significant change</p>",
        h.table(figure_rows, max_rows=5000) if figure_rows else "<p class='note'>No figure to show.</p>",
    ]
    return "".join(body)


def _answers_html(found: list[dict[str, Any]], several: bool) -> str:
    """The answers as the page's first table: per suite its line, then its headline figures."""
    rows = []
    said = ""
    for a in found:
        interval = f"{a['ci_low']:.2f}–{a['ci_high']:.2f}" if a["ci_low"] is not None else ""
        if a["kind"] != "headline":
            said = a["answer"]
            rows.append({"run": a["vs"], "figure": a["suite"] or "overall",
                         "B / A": None if a["ratio"] is None else round(a["ratio"], 2), "interval": interval,
                         "replicates": "", "answer": a["answer"] + (f"; {a['summary']}" if a["kind"] == "suite" else "")})
            continue
        rows.append({"run": a["vs"], "figure": f"{a['suite']} {a['figure']}", "B / A": None if a["ratio"] is None else round(a["ratio"], 2),
                     "interval": interval, "replicates": f"{a['n'][0]} vs {a['n'][1]}",
                     "answer": a["answer"] + (f" ({a['why']})" if a["why"] and a["why"] not in said else "")})
    columns = (["run"] if several else []) + ["figure", "B / A", "interval", "replicates", "answer"]
    notes = "".join(f"<p class='note'>{h.esc(line)}</p>" for line in legend(found))
    notes += "<p class='note'>The overall and suite lines: the geometric mean of the headline figures' ratios, " \
             "oriented so that above 1 is better. Intervals are 95% unless a note above says how they were adjusted.</p>"
    return "<h2>Answers</h2>" + h.table(rows, columns) + notes


def _waits_html(changes: list[dict[str, Any]], several: bool) -> str:
    """What limits each case on each side, and how each wait's share of session time moved."""
    if not changes:
        return ""
    lines = "".join(f"<li>{h.esc((c['vs'] + ': ' if several else '') + waits.change_line(c, most=5))}</li>" for c in changes)
    return ("<h2>What limits it: how the wait profile changed</h2><ul>" + lines + "</ul>"
            + "<details><summary>Every wait's share, A against " + ("each run" if several else "B") + "</summary>"
            + h.table(waits.change_rows(changes, several), max_rows=5000) + "</details>"
            + "<p class='note'>Shares of the sampled session time by what the wait means for the stack, the repeats' "
              "mean where a case was repeated; change in percentage points. The figures wait_*_pct carry the same "
              "shares into the tested figures (--all).</p>")


# ---- the answers drawn, and written for a ticket or a spreadsheet ------------------------------------------

FORMATS = ("text", "markdown", "csv", "json")  # refbench compare --format

def headline_words(a: dict[str, Any]) -> str:
    """A headline answer in a few words: "1.59× faster (1.17–2.16)", the factor and its interval turned the way
    of the answer (a latency halved is 2× faster); otherwise the answer and B / A with its interval."""
    ratio, low, high = a["ratio"], a["ci_low"], a["ci_high"]
    if ratio is None or ratio <= 0:
        return a["answer"]
    interval = f" ({_ratio_text(low)}–{_ratio_text(high)})" if low is not None and high is not None else ""
    if a["answer"] in ("faster", "slower"):
        flip = lambda v: None if v is None or v <= 0 else 1 / v  # noqa: E731
        better, low, high = (ratio, low, high) if (direction(a["metric"]) or 1) > 0 else (1 / ratio, flip(high), flip(low))
        if better < 1:  # slower: how many times slower, and the interval of that
            better, low, high = 1 / better, flip(high), flip(low)
        shown = f" ({_ratio_text(low)}–{_ratio_text(high)})" if low is not None and high is not None else ""
        return f"{_ratio_text(better)}× {a['answer']}{shown}"
    return f"{a['answer']}: {_ratio_text(ratio)}×{interval}"


def headline_tone(a: dict[str, Any]) -> str:
    return {"faster": "better", "slower": "worse", "changed": "changed"}.get(a["answer"], "")


def ratio_rows(found: list[dict[str, Any]]) -> list[Any]:
    """The headline answers as the rows of a dot plot (charts.Ratio), named as the answers table names them."""
    from refbench.report.charts import Ratio

    heads = [a for a in found if a["kind"] == "headline"]
    several = len({a["vs"] for a in heads}) > 1
    return [Ratio(f"{a['vs'] + ': ' if several else ''}{a['suite']} {a['figure']}", a["ratio"], a["ci_low"], a["ci_high"],
                  headline_words(a), headline_tone(a)) for a in heads if a["ratio"] is not None]


def units(runs: list[Run]) -> dict[tuple[str, str], str]:
    """(suite, metric) -> its unit as the runs' verdicts name their headline figures' ("ops/s")."""
    out: dict[tuple[str, str], str] = {}
    for run in runs:
        for v in run.read_json(run.verdict_path) or []:
            for head in v.get("headlines", []) if isinstance(v, dict) else []:
                if isinstance(head, dict) and head.get("unit") and head.get("metric"):
                    out.setdefault((v.get("suite", ""), head["metric"]), str(head["unit"]))
    return out


def unit_of(known: dict[tuple[str, str], str], suite: str, metric: str) -> str:
    """A figure's unit: its headline's, else the one its name ends with (read_mb_s: MB/s), else none."""
    if (suite, metric) in known:
        return known[(suite, metric)]
    if metric in h.UNIT_NAMES:
        return h.UNIT_NAMES[metric]
    return next((unit for suffix, unit in h.UNIT_SUFFIXES if metric.endswith(suffix) and len(metric) > len(suffix)), "")


def _cell(text: Any) -> str:
    """A markdown table's cell: its bars escaped, on one line."""
    return " ".join(str(text).split()).replace("|", "\\|")


def _code(text: Any) -> str:
    """A name (a run's directory) as a markdown code span on one line, whatever backticks it holds (CommonMark: a fence
    longer than any run of them inside, and a space inside it when the name begins or ends with one)."""
    text = " ".join(str(text).split())
    fence = "`" * (max(map(len, re.findall(r"`+", text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def markdown(names: list[str], found: list[dict[str, Any]], rows: list[dict[str, Any]], known: dict[tuple[str, str], str],
             changes_said: list[str], everything: bool, host_said: list[str] = ()) -> str:
    """The comparison for a ticket: which run is which, the overall and suite answers, a table of the headline
    figures (A, B, B / A with its interval, the replicates, the answer), what the intervals mean, what limits it,
    and a table of the other figures that changed (every figure with ``everything``). ``rows``: the figures shown
    (selected); ``names``: each side's runs, A first; ``host_said``: what else may explain a change (where the host
    changed between the sides, the durability a side traded: report.sides)."""
    several = len(names) > 2
    out = ["**refbench compare**: " + " · ".join(f"{letter} = {_code(name)}" for letter, name in zip(letters_of(len(names)), names)),
           ""]
    for a in found:
        if a["kind"] == "headline":
            continue
        against = f" ({a['vs']} against A)" if several else ""
        what = "overall" if a["kind"] == "overall" else a["suite"]
        out.append(f"- **{_cell(what)}**{against}: {_cell(a['answer'])}" + (f"; {_cell(a['summary'])}" if a["kind"] == "suite" else ""))
    heads = [a for a in found if a["kind"] == "headline"]
    by_key = {(r["vs"], r["suite"], r["case"], r["metric"]): r for r in rows}
    if heads:
        level = heads[0]["interval"].split(":")[0]
        out += ["", "| " + ("run | " if several else "") + f"figure | A | B | B / A ({level}) | n | answer |",
                "|" + (":--|" if several else "") + ":--|--:|--:|:--|:--|:--|"]
        for a in heads:
            shared = by_key.get((a["vs"], a["suite"], a["case"], a["metric"]), {})
            unit = unit_of(known, a["suite"], a["metric"])
            value = lambda v: "—" if v is None else f"{h.fmt(v)} {unit}".strip()  # noqa: E731
            ratio = "—" if a["ratio"] is None else f"{_ratio_text(a['ratio'])}×" + (
                f" ({_ratio_text(a['ci_low'])}–{_ratio_text(a['ci_high'])})" if a["ci_low"] is not None else "")
            cells = ([a["vs"]] if several else []) + [f"{a['suite']} {a['figure']}", value(shared.get("A")),
                                                      value(shared.get("B")), ratio, f"{a['n'][0]} vs {a['n'][1]}",
                                                      a["answer"] + (f" ({a['why']})" if a["why"] else "")]
            out.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    said = legend(found)
    if said:
        out += ["", "_" + _cell("; ".join(said)).replace("_", "\\_") + "_"]
    out += [f"\n**{_cell(line)}**" for line in host_said]
    if changes_said:
        out += ["", f"**{_cell(changes_said[0].rstrip(':'))}**", ""] + [f"- {_cell(line)}" for line in changes_said[1:]]
    listed = by_figure(rows if everything else [r for r in rows if not r["headline"]])
    if listed:
        others = letters_of(len(names))[1:]
        out += ["", f"**{'Every figure the runs share' if everything else 'Other figures that changed'}**", "",
                "| figure | A | " + " | ".join(f"{n} | {n} vs A" for n in others) + " |",
                "|:--|--:|" + "--:|:--|" * len(others)]
        for (suite, case, metric), per_run in listed.items():
            first = next(iter(per_run.values()))
            unit = unit_of(known, suite, metric)
            cells = [f"{suite} {case} {metric}", f"{h.fmt(first['A'])} {unit}".strip()]
            for n in others:
                r = per_run.get(n)
                cells += [f"{h.fmt(r['B'])} {unit}".strip() if r else "—", change_words(r) if r else "—"]
            out.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    return "\n".join(out) + "\n"


CSV_COLUMNS = ("vs", "a_run", "b_run", "suite", "case", "metric", "figure", "headline", "unit", "a", "b", "ratio_b_a",
               "ci_low", "ci_high", "interval", "n_a", "n_b", "p", "significant", "answer", "why", "b_vs_a", "basis")


def csv_text(names: list[str], rows: list[dict[str, Any]], known: dict[tuple[str, str], str]) -> str:
    """One row per figure and compared run, every number in a column of its own and the unit in another (a
    spreadsheet's long format): ``rows`` as --json's figures. ``names``: each side's runs, A first."""
    import csv
    import io

    by_letter = dict(zip(letters_of(len(names)), names))
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(CSV_COLUMNS)
    for r in rows:
        writer.writerow(map(spreadsheet_text, [r["vs"], names[0], by_letter.get(r["vs"], r["run"]), r["suite"], r["case"], r["metric"], r["name"],
                         "yes" if r["headline"] else "", unit_of(known, r["suite"], r["metric"]), r["A"], r["B"],
                         r["B"] / r["A"] if r["A"] else "", _blank(r["ci_low"]), _blank(r["ci_high"]), r["interval"],
                         r["n"][0], r["n"][1], _blank(r["p"]), "yes" if r["significant"] else "", r["answer"], r["why"],
                         r["B vs A"], r["basis"]]))
    return out.getvalue()


def _blank(value: Any) -> Any:
    return "" if value is None else value


def letters_of(count: int) -> list[str]:
    """letters() for a count of runs."""
    return [chr(ord("A") + i % 26) + (str(i // 26 + 1) if i >= 26 else "") for i in range(count)]
