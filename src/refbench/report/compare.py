"""Runs side by side: the first run is the baseline (A), every other run is compared with it figure by figure,
and a difference counts only when it stands out of the noise the runs themselves measured (`significance`)."""

from __future__ import annotations

import hashlib
import json
import math
import re
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from refbench.fileio import atomic_write_text
from refbench.report import html as h
from refbench.report import waits
from refbench.report.verdict import headline_keys
from refbench.runstore import Run
from refbench.suites import Record, is_figure


# Throughput-like names (higher is better) are tested first, because "read_mb_s" also ends in "_s".
HIGHER_IS_BETTER = re.compile(r"(_per_(s|min|h)|(^|_)(mb|mib|gb|b)_s|iops|nopm|tpm|qph|throughput|rate|^power$)", re.I)
LOWER_IS_BETTER = re.compile(r"(lat|latency|await|elapsed|duration|_s$|_ms$|_us$|_ns$|_min$)", re.I)
# Durations a run chose rather than achieved (how long a point ran or was measured, when steady state came),
# and CPU seconds over a fixed interval (less is not better when less work was done).
NEUTRAL = re.compile(r"(runtime|measured|cpu_s$|_at_s$|_pct$)", re.I)
SAME_WITHIN = 0.01

# The significance rule, in one place (after pyperf's compare_to, which asks for a t-test and, with --min-speed,
# a minimum change). A figure measured several times on both sides (repeats of a case, or the per-second or
# per-interval samples a record keeps) differs significantly when Welch's two-sided t-test gives p < ALPHA
# and the means differ by at least SAME_WITHIN. A figure measured once on a side cannot be tested: it differs
# when the two values are more than NOISE_FLOOR apart, and the output says it was a single measurement.
# The compare command's help says it in words; tests/test_compare.py holds the two together.
ALPHA = 0.05
NOISE_FLOOR = 0.05
RULE = (f"A change is significant when Welch's t-test (SciPy's, on the logarithms) over the repeats or per-second "
        f"samples (those averaged in batches ten correlation times long) gives p < {ALPHA}, adjusted for the number of figures compared "
        f"(Benjamini–Hochberg), and the means differ by at least {SAME_WITHIN:.0%}; a figure measured once on a side "
        f"counts only beyond this host's noise floor, measured from the repeats it ran (beyond {NOISE_FLOOR:.0%}, assumed, "
        "until there are any).")
# Case parameters that number repeats of the same measurement: records differing only in these are one figure.
REPEAT_PARAMS = ("repeat", "round")


def direction(metric: str) -> int:
    """+1 when a higher value is better, -1 when lower is better, 0 when neither (percentages, counts)."""
    if NEUTRAL.search(metric):
        return 0
    if HIGHER_IS_BETTER.search(metric):
        return 1
    if LOWER_IS_BETTER.search(metric):
        return -1
    return 0


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


# ---- figures and the samples behind them -------------------------------------------------------------------

@dataclass
class Figure:
    value: float
    samples: list[float] = field(default_factory=list)  # two or more measurements of the same figure, or none
    source: str = "1 measurement"


def _series_samples(run: Run, record: Record, metric: str) -> list[float]:
    """The per-second or per-interval measurements a record keeps of one of its figures."""
    kept = record.extra.get("samples", {}).get(metric)  # the plain form: {metric: [values]}
    if kept:
        return [float(v) for v in kept]
    if record.suite == "oltp" and metric in ("nopm", "tpm"):
        # The driver's per-interval rates over the measured window (negative t_s is the ramp-up).
        name = "new_orders_per_min" if metric == "nopm" else "tx_per_min"
        return [float(s[name]) for s in record.extra.get("series", []) if s.get("t_s", 0) >= 0 and s.get("seconds")]
    if record.suite == "device" and record.params.get("kind") == "point" and re.fullmatch(r"(read_|write_)?(iops|mb_s)", metric):
        # fio's per-second IOPS; a point's block size and read/write mix are fixed, so its MB/s and its read or
        # write share move with them: the samples are scaled to the figure.
        return _scaled(_read_json_list(run.raw_dir(record.suite, record.case_id) / "fio-iops-per-second.json"),
                       record.metrics.get(metric))
    if record.suite == "dss" and metric == "throughput":
        # Each stream's elapsed time is a measurement of the same rate (queries per hour go as 1 / time).
        times = [float(v) for k, v in record.metrics.items() if re.fullmatch(r"stream_\d+_s", k) and is_figure(v) and v > 0]
        return _scaled([1 / t for t in times], record.metrics.get(metric))
    return []


def _scaled(samples: list[float], value: Any) -> list[float]:
    if len(samples) < 2 or not is_figure(value) or not (mean := statistics.fmean(samples)):
        return []
    return [s * value / mean for s in samples]


def _read_json_list(path: Path) -> list[float]:
    """A raw file's list of numbers; raw output is kept for people, so one that is missing or damaged only
    leaves the figure without samples (shown as a single measurement)."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return []
    return [float(v) for v in data if is_figure(v)] if isinstance(data, list) else []


def figures(run: Run, groups: dict[tuple[str, str], list[Record]] | None = None) -> dict[tuple[str, str, str], Figure]:
    """(suite, case, metric) -> the figure. Records that differ only in a repeat number are one figure (their
    mean, with the repeats as its samples; the case is named without the repeat). A cluster run's figures are
    its totals across nodes, one case per node count ("u4-r1@2n": the case on 2 nodes), measured once."""
    if run.plan.hosts:
        return _cluster_figures(run)
    out: dict[tuple[str, str, str], Figure] = {}
    for (suite, case), records in (groups or repeat_groups(run)).items():
        for metric in dict.fromkeys(m for r in records for m in r.metrics):
            values = [r.metrics[metric] for r in records if is_figure(r.metrics.get(metric))]
            if not values:
                continue
            if len(values) > 1:
                out[(suite, case, metric)] = Figure(statistics.fmean(values), values, f"{len(values)} repeats")
            else:
                samples = _series_samples(run, records[0], metric)
                out[(suite, case, metric)] = Figure(values[0], samples, f"{len(samples)} samples" if samples else "1 measurement")
    return out


def repeat_groups(run: Run) -> dict[tuple[str, str], list[Record]]:
    """(suite, case) -> the records that differ only in a repeat number, the case named without it ("u4")."""
    groups: dict[tuple[str, str], list[Record]] = {}
    for r in run.records():
        same = json.dumps({k: v for k, v in r.params.items() if k not in REPEAT_PARAMS}, sort_keys=True, default=str)
        groups.setdefault((r.suite, same), []).append(r)
    return {(suite, _case_name(records)): records for (suite, _), records in groups.items()}


def _case_name(records: list[Record]) -> str:
    if len(records) == 1:
        return records[0].case_id
    first = records[0]
    for key in REPEAT_PARAMS:  # "u4-r1" -> "u4"
        if key in first.params:
            stripped = re.sub(rf"[-_.]?{key[0]}{first.params[key]}$", "", first.case_id)
            if stripped != first.case_id:
                return stripped
    return first.case_id


def figure_cases(run: Run, groups: dict[tuple[str, str], list[Record]] | None = None) -> dict[tuple[str, str], str]:
    """(suite, record's case) -> the case its figure is named by: a repeated case's figure carries the name of
    its group ("u4-r1" -> "u4")."""
    return {(r.suite, r.case_id): case for (_, case), records in (groups or repeat_groups(run)).items() for r in records}


def _headline_figures(run: Run) -> dict[tuple[str, str, str], str]:
    """(suite, figure's case, metric) -> the headline's name in a comparison. headline_keys names records; the
    figures name their groups."""
    if run.plan.hosts:  # a cluster run's headlines are its totals, named as its figures are ("u4@2n")
        return {(v["suite"], h["case"], h["metric"]): h["figure"] for v in run.read_json(run.verdict_path) or []
                if v.get("scope", "").startswith("total") for h in v["headlines"]}
    keys = headline_keys(run)
    if not keys:
        return {}
    case_of = figure_cases(run)
    return {(suite, case_of.get((suite, case), case), metric): name for (suite, case, metric), name in keys.items()}


def _cluster_figures(run: Run) -> dict[tuple[str, str, str], Figure]:
    from refbench.cluster.totals import tables

    totals = next(t for t in tables(run) if t.name == "cluster_totals")
    out = {}
    for t in totals.rows:
        if is_figure(value := t["total (sum or mean)"]):
            out[(t["suite"], f"{t['case']}@{t['nodes']}n", t["figure"])] = Figure(value)
    return out


# ---- significance ------------------------------------------------------------------------------------------

BATCHES = 10  # per-second samples are tested as the means of at most this many consecutive batches (_tested)
CONFIDENCE = 0.95  # of the interval given for B / A
RESOLVE = 0.05  # the change a suggested number of repeats should resolve
POWER = 0.8  # with this probability, at ALPHA


@dataclass
class Test:
    """What the samples of two figures say about B / A: Welch's p, the ratio's confidence interval, the spread."""

    p: float
    low: float
    high: float
    log_sd: float | None  # the standard deviation of one measurement's logarithm, pooled over both sides


def _tested(figure: Figure) -> list[float]:
    """The measurements a test may treat as independent. Repeats are; per-second samples are not (one second's
    rate is much like the last), so they are averaged in consecutive batches whose means are nearly independent
    (the method of batch means): at most BATCHES, each at least 10 times the series' correlation time, estimated
    from its lag-1 autocorrelation ρ as (1 + ρ) / (1 − ρ) seconds; at least 3. On the raw seconds, or on too short
    batches, a t-test finds changes that are not there."""
    samples = figure.samples
    if not figure.source.endswith("samples") or len(samples) <= 3:
        return samples
    n = len(samples)
    x = [v - statistics.fmean(samples) for v in samples]
    spread = sum(v * v for v in x)
    rho = min(0.99, max(0.0, sum(p * q for p, q in zip(x, x[1:])) / spread)) if spread else 0.0
    batches = max(3, min(BATCHES, n, int(n / (10 * (1 + rho) / (1 - rho)))))
    return [statistics.fmean(samples[i * n // batches:(i + 1) * n // batches]) for i in range(batches)]


def ratio_test(a: Figure, b: Figure) -> Test:
    """Welch's t-test (SciPy's) of B against A on the logarithms of their measurements, when all are positive: its
    p-value, and the confidence interval of the difference of the mean logarithms as one of B / A. With a zero or a
    negative value, the test is on the values themselves and the interval is the difference's over A's mean."""
    import numpy as np
    from scipy import stats

    xa, xb = np.asarray(_tested(a), dtype=float), np.asarray(_tested(b), dtype=float)
    logs = bool((xa > 0).all() and (xb > 0).all())
    ya, yb = (np.log(xa), np.log(xb)) if logs else (xa, xb)
    if np.ptp(ya) == 0 and np.ptp(yb) == 0:  # constant on both sides: the test has no variance to go by
        ratio = float(xb.mean() / xa.mean()) if xa.mean() else math.nan
        return Test(1.0 if ya.mean() == yb.mean() else 0.0, ratio, ratio, 0.0 if logs else None)
    result = stats.ttest_ind(yb, ya, equal_var=False)
    interval = result.confidence_interval(CONFIDENCE)
    if logs:
        low, high = math.exp(interval.low), math.exp(interval.high)
        log_sd = math.sqrt((ya.var(ddof=1) * (len(ya) - 1) + yb.var(ddof=1) * (len(yb) - 1)) / (len(ya) + len(yb) - 2))
    else:
        low, high, log_sd = 1 + interval.low / xa.mean(), 1 + interval.high / xa.mean(), None
    return Test(float(result.pvalue), low, high, log_sd)


def repeats_to_resolve(log_sd: float, change: float = RESOLVE, most: int = 50) -> int | None:
    """How many repeats on each side Welch's test needs to find a change of ``change`` (5%: a ratio of 1.05) with
    probability POWER at ALPHA, when one measurement's logarithm spreads by ``log_sd``; None beyond ``most``."""
    from scipy import stats

    if log_sd <= 0:
        return 2
    effect = math.log1p(change) / log_sd
    for n in range(2, most + 1):
        df = 2 * n - 2
        critical = stats.t.ppf(1 - ALPHA / 2, df)
        shift = effect * math.sqrt(n / 2)
        if stats.nct.sf(critical, df, shift) + stats.nct.cdf(-critical, df, shift) >= POWER:
            return n
    return None


def _relative_change(a: Figure, b: Figure) -> float:
    return abs(b.value / a.value - 1) if a.value else math.inf


@dataclass(frozen=True)
class NoiseFloor:
    """How far apart two single measurements of one configuration come on this host 95% of the time (a figure
    measured once a side counts as changed beyond it), from the spread of the repeats runs on this host measured;
    assumed NOISE_FLOOR until there are any."""

    change: float
    log_sd: float | None = None  # the spread of one measurement's logarithm, when measured
    source: str = f"assumed {NOISE_FLOOR:.0%}: no repeats measured on this host yet (--repeats 3)"


ASSUMED = NoiseFloor(NOISE_FLOOR)


def noise_floors(runs: list[Run], headlines: list[dict[tuple[str, str, str], str]], most_runs: int = 5,
                 newest: int = 50) -> dict[str, NoiseFloor]:
    """suite -> its noise floor: from the repeats in the compared runs, else in the newest runs of the same host in
    their runs directory that were made with repeats (at most ``most_runs`` of the ``newest``); suites with none:
    assumed. ``headlines``: each compared run's _headline_figures, already made."""
    from refbench.runstore import list_runs

    spread = _repeat_spread(runs, headlines)
    host = runs[0].meta.get("host")
    wanted = {suite for run in runs for suite in run.suites_with_records()}
    compared = {r.path.resolve() for r in runs}
    others = [r for r in reversed(list_runs(runs[0].path.parent)[-newest:]) if r.path.resolve() not in compared]
    used = 0
    for other in others:
        if used >= most_runs or set(spread) >= wanted:
            break
        try:
            if other.meta.get("host") != host or (other.meta.get("plan") or {}).get("repeats", 1) <= 1:
                continue
        except Exception:  # an unreadable run says nothing about the noise
            continue
        used += 1
        for suite, (squares, df) in _repeat_spread([other], [_headline_figures(other)]).items():
            if suite not in spread:
                spread[suite] = (squares, df)
    z = statistics.NormalDist().inv_cdf(1 - ALPHA / 2)
    out = {}
    for suite, (squares, df) in spread.items():
        sd = math.sqrt(squares / df)
        out[suite] = NoiseFloor(max(SAME_WITHIN, math.expm1(z * math.sqrt(2) * sd)), sd,
                                f"measured on this host from {df} repeat(s) of its cases")
    return out


def _repeat_spread(runs: list[Run], headlines_of: list[dict[tuple[str, str, str], str]]) -> dict[str, tuple[float, int]]:
    """suite -> (the sum of squared deviations of the logarithms of repeated measurements from their configuration's
    mean, its degrees of freedom), over the headline figures of the cases measured several times: what the repeats
    were made for (a case's other figures, such as its wall time, may spread far more)."""
    out: dict[str, tuple[float, int]] = {}
    for run, headlines in zip(runs, headlines_of):
        for (suite, case), records in repeat_groups(run).items():
            if len(records) < 2:
                continue
            for metric in records[0].metrics:
                values = [r.metrics.get(metric) for r in records]
                if (suite, case, metric) not in headlines or not all(is_figure(v) and v > 0 for v in values):
                    continue
                logs = [math.log(v) for v in values]
                mean = statistics.fmean(logs)
                squares, df = out.get(suite, (0.0, 0))
                out[suite] = (squares + sum((x - mean) ** 2 for x in logs), df + len(logs) - 1)
    return {suite: v for suite, v in out.items() if v[1] > 0}


def significance(a: Figure, b: Figure, floor: NoiseFloor = ASSUMED) -> tuple[bool, Test | None, str]:
    """(significant, the test or None, how it was decided) — the rule stated in RULE, for one figure on its own
    (shared_figures then adjusts the p-values of all the figures of a comparison together)."""
    if a.value == b.value:
        return False, None, "identical"
    change = _relative_change(a, b)
    if len(a.samples) >= 2 and len(b.samples) >= 2:
        test = ratio_test(a, b)
        return test.p < ALPHA and change >= SAME_WITHIN, test, f"Welch t-test, {a.source} vs {b.source}"
    return change > floor.change, None, f"1 measurement: counts beyond {floor.change:.1%}"


def judgement(row: dict[str, Any]) -> tuple[str, str]:
    """One figure's answer, a word and why: faster, slower or changed when the change is significant (starred when
    measured once a side: beyond the noise floor, untested); "no change" when the interval keeps B / A within
    RESOLVE of 1; "same" for identical values; otherwise "cannot tell", and what would tell."""
    sense = direction(row["metric"])
    once = row["basis"].startswith("1 measurement")
    if row["basis"] == "identical":
        return "same", "identical values"
    if row["significant"]:
        word = "changed" if sense == 0 else "faster" if (row["B"] > row["A"]) == (sense > 0) else "slower"
        return (word + "*", f"measured once a side: beyond the {row['noise_floor']:.1%} noise floor "
                            f"({row['noise_floor_source']}), not tested") if once else (word, "")
    low, high = row.get("ci_low"), row.get("ci_high")
    if low is not None and 1 / (1 + RESOLVE) <= low and high <= 1 + RESOLVE:
        return "no change", f"the {CONFIDENCE:.0%} interval lies within ±{RESOLVE:.0%}"
    why = "1 measurement each" if once else "too spread to resolve a 5% change"
    if (n := row.get("repeats_for_5pct")) is not None:
        return "cannot tell", f"{why}; --repeats {n} resolves a {RESOLVE:.0%} change on this host"
    return "cannot tell", f"{why}; more repeats (--repeats 3 or more) would tell"


# ---- the comparison ----------------------------------------------------------------------------------------

def decide(pairs: list[tuple[Figure, Figure]], floors: list[NoiseFloor] | None = None
           ) -> list[tuple[bool, Test | None, str, float | None]]:
    """(significant, test, basis, adjusted p) for each (A, B) pair of one comparison, each with its noise floor (for
    figures measured once a side). The p-values of the tested pairs are adjusted together (Benjamini–Hochberg,
    SciPy's): two runs of one configuration share dozens of figures, and at p < 0.05 each, one in twenty would
    change by chance."""
    from scipy import stats

    decided = [significance(a, b, floor) for (a, b), floor in zip(pairs, floors or [ASSUMED] * len(pairs))]
    tested = [i for i, (_, test, _) in enumerate(decided) if test is not None]
    out: list[tuple[bool, Test | None, str, float | None]] = [(sig, test, basis, None) for sig, test, basis in decided]
    if tested:
        adjusted = stats.false_discovery_control([decided[i][1].p for i in tested], method="bh")
        for i, p in zip(tested, adjusted):
            out[i] = (bool(p < ALPHA and _relative_change(*pairs[i]) >= SAME_WITHIN), decided[i][1], decided[i][2], float(p))
    return out


def shared_figures(runs: list[Run], metric: str | None = None) -> list[dict[str, Any]]:
    """One row per figure the baseline shares with another run, and per such run, in the baseline's order."""
    base_figures = figures(runs[0])
    headlines_of = [_headline_figures(run) for run in runs]  # each made once: they take a run's whole verdict
    floors = noise_floors(runs, headlines_of)
    headlines = dict(headlines_of[0])  # the baseline's; another run's only for a suite the baseline has none in
    rows = []
    for letter, other, others_headlines in zip(letters(runs)[1:], runs[1:], headlines_of[1:]):
        other_figures = figures(other)
        have = {suite for suite, _, _ in headlines}
        headlines |= {k: name for k, name in others_headlines.items() if k[0] not in have}
        keys = [k for k in base_figures if k in other_figures and not (metric and metric not in k[2])]
        pairs = [(base_figures[k], other_figures[k]) for k in keys]
        floor_of = [floors.get(k[0], ASSUMED) for k in keys]
        for key, (fa, fb), floor, (significant, test, basis, p) in zip(keys, pairs, floor_of, decide(pairs, floor_of)):
            factor, words = verdict(key[2], fa.value, fb.value)
            row = {"suite": key[0], "case": key[1], "metric": key[2], "vs": letter, "run": other.path.name, "A": fa.value,
                   "B": fb.value, "factor": factor, "B vs A": words, "significant": significant,
                   "p": None if p is None else round(p, 4), "basis": basis, "headline": key in headlines,
                   "name": headlines.get(key, f"{key[1]} {key[2]}"), "n": (len(fa.samples) or 1, len(fb.samples) or 1),
                   "ci_low": None if test is None else round(test.low, 4),
                   "ci_high": None if test is None else round(test.high, 4), "repeats_for_5pct": None,
                   "noise_floor": round(floor.change, 4), "noise_floor_source": floor.source}
            spread = test.log_sd if test is not None and "repeats" in basis else floor.log_sd
            if spread and not significant:
                row["repeats_for_5pct"] = repeats_to_resolve(spread)
            row["answer"], row["why"] = judgement(row)
            rows.append(row)
    return rows


def wait_changes(runs: list[Run]) -> list[dict[str, Any]]:
    """How each shared case's wait profile changed from A to each other run (report.waits.profile_changes)."""
    return waits.profile_changes(letters(runs), [repeat_groups(run) for run in runs])


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


def answers(shared: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What a comparison says first, for each run against A: per suite each headline figure (B / A, its confidence
    interval, how many measurements a side, the answer), then the suite's line, then one overall line; the
    suite and overall lines count the other figures rather than list them."""
    out: list[dict[str, Any]] = []
    for letter in dict.fromkeys(r["vs"] for r in shared):
        mine = [r for r in shared if r["vs"] == letter]
        for suite in dict.fromkeys(r["suite"] for r in mine):
            in_suite = [r for r in mine if r["suite"] == suite]
            out.append({"kind": "suite", "vs": letter, "suite": suite, "summary": _tally(in_suite),
                        "noise_floor": in_suite[0]["noise_floor"], "noise_floor_source": in_suite[0]["noise_floor_source"],
                        "noise_floor_measured": in_suite[0]["noise_floor_source"].startswith("measured")})
            out += [{"kind": "headline", "vs": letter, "suite": suite, "figure": r["name"], "case": r["case"],
                     "metric": r["metric"], "ratio": r["B"] / r["A"] if r["A"] else None, "ci_low": r["ci_low"],
                     "ci_high": r["ci_high"], "n": r["n"], "answer": r["answer"], "why": r["why"],
                     "repeats_for_5pct": r["repeats_for_5pct"]} for r in in_suite if r["headline"]]
        quiet = "" if any(r["significant"] for r in mine) else "no significant change; "
        out.append({"kind": "overall", "vs": letter, "suite": "", "summary": quiet + _tally(mine, untested=False)})
    return out


def answer_lines(found: list[dict[str, Any]]) -> list[str]:
    """The answers as plain lines, each within 80 characters for figure names of up to about 37 (the terminal,
    --json): a header, each suite's line with its headline figures indented and aligned, the overall line, then
    what the marks and "cannot tell" mean."""
    headlines = [a for a in found if a["kind"] == "headline"]
    several = len({a["vs"] for a in found}) > 1
    cells = {id(a): (f"{a['ratio']:.2f}×" if a["ratio"] is not None else "—",
                     f"({a['ci_low']:.2f}–{a['ci_high']:.2f})" if a["ci_low"] is not None else "",
                     f"{a['n'][0]} vs {a['n'][1]}") for a in headlines}
    width = [max((len(a["figure"]) for a in headlines), default=0),
             *(max((len(c[i]) for c in cells.values()), default=0) for i in range(3))]
    lines = []
    if headlines:
        lines.append(f"  {'':<{width[0]}}  {'× A' if several else 'B / A':>{width[1]}} {'(95% CI)':<{width[2]}}  "
                     f"{'n':<{width[3]}}  answer")
    for a in found:
        if a["kind"] == "headline":
            ratio, interval, n = cells[id(a)]
            lines.append(f"  {a['figure']:<{width[0]}}  {ratio:>{width[1]}} {interval:<{width[2]}}  {n:<{width[3]}}  {a['answer']}")
        else:
            against = f" ({a['vs']} against A)" if several else ""
            lines.append(f"{a['suite'] or 'overall'}{against}: {a['summary']}")
    return lines + legend(found)


def legend(found: list[dict[str, Any]]) -> list[str]:
    """What the marks and words mean, only those that appear, as many to a line as fit in 80 columns; for
    "cannot tell", what would tell."""
    words = {a["answer"] for a in found if a["kind"] == "headline"}
    terms = []
    if any("*" in a.get("summary", "") for a in found) or any(w.endswith("*") for w in words):
        floors = [a["noise_floor"] for a in found if a["kind"] == "suite" and a["noise_floor_measured"]]
        if not floors:
            terms.append(f"* once a side: beyond {NOISE_FLOOR:.0%} (assumed), untested")
        else:
            low, high = min(floors), max(floors)
            shown = f"{low:.0%}" if f"{low:.0%}" == f"{high:.0%}" else f"{low:.0%}–{high:.0%}"
            terms.append(f"* once a side: beyond this host's noise ({shown}), untested")
    if "no change" in words:
        terms.append(f"no change: within ±{RESOLVE:.0%} ({CONFIDENCE:.0%} CI)")
    unsure = [a for a in found if a["kind"] == "headline" and a["answer"] == "cannot tell"]
    if unsure:
        counts = [a["repeats_for_5pct"] for a in unsure if a["repeats_for_5pct"]]
        terms.append(f"cannot tell: --repeats {max(counts)} resolves {RESOLVE:.0%} here"
                     if counts and len(counts) == len(unsure) else "cannot tell: try --repeats 3")
    lines: list[str] = []
    for term in terms:
        if lines and len(lines[-1]) + 2 + len(term) <= 80:
            lines[-1] += "; " + term
        else:
            lines.append(term)
    return lines


def _tally(rows: list[dict[str, Any]], untested: bool = True) -> str:
    """The headline figures by answer, then how many of the other figures with a better direction changed
    significantly, and how many were measured once a side (beyond the noise floor, untested). Figures that only
    describe a run (percentages, counts) are left to --all."""
    answers: dict[str, int] = {}
    for r in rows:
        if r["headline"]:
            answers[r["answer"]] = answers.get(r["answer"], 0) + 1
    order = ["faster", "faster*", "slower", "slower*", "changed", "changed*", "no change", "same", "cannot tell"]
    parts = [", ".join(f"{answers[word]} {word}" for word in order if word in answers)] if answers else []
    others = [r for r in rows if not r["headline"] and direction(r["metric"]) != 0]
    if others:
        changed = sum(1 for r in others if r["significant"] and r["p"] is not None)
        once = sum(1 for r in others if r["significant"] and r["p"] is None)
        parts.append(f"{changed:,} of {len(others):,} others changed" + (f", {once:,} untested*" if once and untested else ""))
    return "; ".join(parts) or "no figure"


def selected(rows: list[dict[str, Any]], everything: bool) -> list[dict[str, Any]]:
    """What is shown: every row, or the headline figures and the figures with a better direction (throughput,
    latency, time; not the percentages and counts that describe a run) that a test found changed against any of
    the runs, with their rows for all runs, so a figure's line is complete. Figures measured once a side are
    counted (answer_lines), not listed: nothing tested them."""
    if everything:
        return rows
    keep = {(r["suite"], r["case"], r["metric"]) for r in rows
            if r["headline"] or (r["significant"] and direction(r["metric"]) != 0 and r["p"] is not None)}
    return [r for r in rows if (r["suite"], r["case"], r["metric"]) in keep]


def by_figure(rows: list[dict[str, Any]]) -> dict[tuple[str, str, str], dict[str, dict[str, Any]]]:
    """(suite, case, metric) -> compared run's letter -> row: one line per figure across N runs, the headline
    figures first."""
    out: dict[tuple[str, str, str], dict[str, dict[str, Any]]] = {}
    for r in sorted(rows, key=lambda r: not r["headline"]):
        out.setdefault((r["suite"], r["case"], r["metric"]), {})[r["vs"]] = r
    return out


def change_words(row: dict[str, Any]) -> str:
    """The cell people read: the change when it is significant (starred when measured once on a side),
    pyperf's "not significant" otherwise."""
    if not row["significant"]:
        return "same" if row["basis"] == "identical" else "not significant"
    return row["B vs A"] + ("*" if row["basis"].startswith("1 measurement") else "")


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
    return [chr(ord("A") + i % 26) + (str(i // 26 + 1) if i >= 26 else "") for i in range(len(runs))]


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


def write_html(runs: list[Run], shared: list[dict[str, Any]], out: Path, everything: bool, metric: str | None) -> Path:
    atomic_write_text(out, h.page(title(runs), html_body(runs, shared, everything, metric)))
    return out


def title(runs: list[Run]) -> str:
    return "refbench compare " + " vs ".join(r.path.name for r in runs)


def html_body(runs: list[Run], shared: list[dict[str, Any]], everything: bool, metric: str | None) -> str:
    """The comparison as HTML inside a page's <main>: the compare command's file and the dashboard's compare page.
    ``shared`` is every figure the runs share (shared_figures); the answers count them, the table shows a selection."""
    rows = selected(shared, everything)
    names = letters(runs)
    legend = " · ".join(f"{n} = {h.esc(r.path.name)}" for n, r in zip(names, runs))
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
        f"<h1>refbench comparison</h1><p class='sub'>{legend}</p>",
        _answers_html(answers(shared), several=len(runs) > 2),
        _waits_html(wait_changes(runs), several=len(runs) > 2),
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
    for a in found:
        if a["kind"] != "headline":
            rows.append({"run": a["vs"], "figure": f"{a['suite'] or 'overall'}: {a['summary']}", "B / A": None,
                         "95% CI": "", "measurements": "", "answer": ""})
            continue
        rows.append({"run": a["vs"], "figure": f"{a['suite']} {a['figure']}", "B / A": None if a["ratio"] is None else round(a["ratio"], 2),
                     "95% CI": f"{a['ci_low']:.2f}–{a['ci_high']:.2f}" if a["ci_low"] is not None else "",
                     "measurements": f"{a['n'][0]} vs {a['n'][1]}", "answer": a["answer"] + (f" ({a['why']})" if a["why"] else "")})
    columns = (["run"] if several else []) + ["figure", "B / A", "95% CI", "measurements", "answer"]
    notes = "".join(f"<p class='note'>{h.esc(line)}</p>" for line in legend(found))
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
