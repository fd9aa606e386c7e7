"""The one estimator behind every interval, test and answer refbench gives about a change: compare, tune, history
and acceptance all ask it.

The replicate is a run (or a repeat of a case within a run: another measurement from scratch). The seconds of one
run are not replicates: one second's rate is much like the last, and they say nothing about how far the next run
will land. Per-second samples describe one measurement's own stability (steady state) and nothing else.

B against A is judged on the logarithms of the replicates (a ratio's interval is symmetric there): a t-test
when both sides have two or more (Student's pooled test at equal sizes, as pyperf's; Welch's otherwise); when a
side has one, or every replicate of each side is equal, the difference of the means is tested against this host's
measured run-to-run spread of that figure (`Spread`), and without one nothing is tested ("cannot tell", and how to
measure the spread). A family of figures judged together (a comparison's headline figures) is
adjusted by Bonferroni, and so is the interval printed: an interval excludes 1 exactly when the adjusted p is below
ALPHA, so the interval and the answer cannot disagree.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, replace
from typing import Sequence

ALPHA = 0.05
CONFIDENCE = 1 - ALPHA
RESOLVE = 0.05  # the change "no change" rules out, and the one a suggested number of repeats should resolve
POWER = 0.8  # with this probability, at ALPHA
MOST_REPEATS = 50


@dataclass(frozen=True)
class Spread:
    """How far one measurement of a figure spreads from run to run on this host: the standard deviation of its
    logarithm, with its degrees of freedom, and where it was measured."""

    log_sd: float
    df: int
    source: str

    @property
    def percent(self) -> float:
        return math.expm1(self.log_sd) * 100


@dataclass(frozen=True)
class Estimate:
    """What the replicates of two sides say about B / A."""

    ratio: float | None  # B / A: the ratio of the geometric means (of the means when a value is not positive)
    low: float | None  # the interval of B / A at the family's confidence (1 - ALPHA / family)
    high: float | None
    p: float | None  # two-sided, unadjusted; None: nothing to test with
    family: float  # the interval's confidence is 1 - ALPHA / family: the figures judged together
    n: tuple[int, int]
    basis: str  # how it was tested, in words
    log_diff: float | None = None  # mean log B − mean log A, and its standard error and degrees of freedom
    se: float | None = None
    df: float | None = None
    log_sd: float | None = None  # one measurement's spread (of its logarithm), as the test used it
    adjustment: str = ""  # how the family was counted, in words ("Bonferroni over 6 headline figures")
    replicate: str = "repeat"  # what a replicate was ("repeat" of a case in a run, or "run"): what more of would tell

    @property
    def p_adjusted(self) -> float | None:
        return None if self.p is None else min(1.0, self.p * self.family)

    @property
    def significant(self) -> bool:
        return self.p_adjusted is not None and self.p_adjusted < ALPHA

    @property
    def confidence(self) -> float:
        return 1 - ALPHA / self.family

    def interval_words(self) -> str:
        """"95% CI", or "99.2% CI: Bonferroni over 6 headline figures": what the printed interval is."""
        level = f"{self.confidence * 100:.3g}% CI"
        return level if self.family == 1 or not self.adjustment else f"{level}: {self.adjustment}"

    def oriented(self, sense: int) -> "Estimate":
        """The estimate of how many times *better* B is (ratio inverted when lower is better)."""
        if sense >= 0 or self.ratio is None:
            return self
        flip = lambda v: None if v is None or v == 0 else 1 / v  # noqa: E731
        return replace(self, ratio=flip(self.ratio), low=flip(self.high), high=flip(self.low),
                       log_diff=None if self.log_diff is None else -self.log_diff)

    def adjusted(self, family: float, adjustment: str) -> "Estimate":
        """The same estimate judged in a family: its interval widened to 1 - ALPHA / family."""
        family = max(1.0, family)
        if self.p is None or self.se is None or self.log_diff is None or self.df is None or self.se == 0:
            return replace(self, family=family, adjustment=adjustment)
        half = _t_quantile(1 - ALPHA / (2 * family), self.df) * self.se
        return replace(self, family=family, adjustment=adjustment, low=_exp(self.log_diff - half),
                       high=_exp(self.log_diff + half))


def log_spread(values: Sequence[float]) -> tuple[float, int] | None:
    """(sd of the logarithms, degrees of freedom) of two or more positive replicates."""
    if len(values) < 2 or not all(v > 0 for v in values):
        return None
    return math.sqrt(_variance([math.log(v) for v in values])), len(values) - 1


def _variance(values: Sequence[float]) -> float:
    """The sample variance in floats (statistics.variance computes it in exact fractions: 40 times as long, and a
    comparison asks it of every figure)."""
    if min(values) == max(values):  # exactly 0, as the mean of equal values may round
        return 0.0
    mean = math.fsum(values) / len(values)
    return math.fsum((v - mean) ** 2 for v in values) / (len(values) - 1)


def pooled(spreads: Sequence[tuple[float, int]]) -> tuple[float, int] | None:
    """One spread from several (sd, df): the square root of their df-weighted mean variance."""
    df = sum(d for _, d in spreads)
    return (math.sqrt(sum(sd * sd * d for sd, d in spreads) / df), df) if df else None


def ratio(a: Sequence[float], b: Sequence[float], family: float = 1, spread: Spread | None = None,
          replicate: str = "repeat") -> Estimate:
    """B against A from their replicates. ``spread``: this host's measured spread of the figure, used when a side
    has a single replicate (a side with two or more measures its own). ``replicate``: what one was ("repeat" or
    "run"), which is what more of would tell."""
    return replace(_ratio(a, b, family, spread), replicate=replicate)


def paired(pairs: Sequence[tuple[float, float]], family: float = 1) -> Estimate | None:
    """B against A from runs taken in turn, (a, b) one pair each: the paired t-test on the differences of their
    logarithms, so that what drifted between pairs (the host's caches, its neighbours) cancels. None when it cannot
    be taken (fewer than two pairs, a value not positive, or every difference equal)."""
    if len(pairs) < 2 or not all(a > 0 and b > 0 for a, b in pairs):
        return None
    diffs = [math.log(b) - math.log(a) for a, b in pairs]
    n, family = len(diffs), max(1, family)
    sd = math.sqrt(_variance(diffs))
    if sd == 0:
        return None
    diff, se, df = statistics.fmean(diffs), sd / math.sqrt(n), n - 1
    half = _t_quantile(1 - ALPHA / (2 * family), df) * se
    # One measurement's spread as an unpaired test would see it, for the runs more pairs would need.
    return Estimate(_exp(diff), _exp(diff - half), _exp(diff + half), _two_sided_p(diff / se, df), family, (n, n),
                    f"paired t-test on the logarithms, {n} pairs of runs taken in turn", diff, se, float(df),
                    sd / math.sqrt(2), replicate="run")


def _ratio(a: Sequence[float], b: Sequence[float], family: float, spread: Spread | None) -> Estimate:
    a, b = [float(v) for v in a], [float(v) for v in b]
    n = (len(a), len(b))
    family = max(1, family)
    if not a or not b:
        return Estimate(None, None, None, None, family, n, "not measured on both sides")
    mean_a, mean_b = statistics.fmean(a), statistics.fmean(b)
    if not all(v > 0 for v in a + b):  # a zero or a negative value: no ratio of geometric means
        value = mean_b / mean_a if mean_a else None
        if min(n) < 2 or value is None:
            return Estimate(value, None, None, None, family, n, "not tested: a value is not positive")
        test = _t_test(b, a, pooled=False)
        low, high = test.interval(1 - ALPHA / family)
        return Estimate(value, 1 + low / mean_a, 1 + high / mean_a, _p(test.p), family, n,
                        f"Welch's t-test, {n[0]} vs {n[1]} replicates (on the values: one is not positive)")
    la, lb = [math.log(v) for v in a], [math.log(v) for v in b]
    diff = statistics.fmean(lb) - statistics.fmean(la)
    value = _exp(diff)
    if min(n) >= 2:
        va, vb = _variance(la), _variance(lb)
        log_sd = math.sqrt((va * (n[0] - 1) + vb * (n[1] - 1)) / (sum(n) - 2))
        if va == 0 and vb == 0:
            return _constant_sides(value, diff, family, n, spread)
        # Equal sizes: Student's pooled test (pyperf's), robust to unequal spreads when the sizes are equal, with
        # 2n − 2 degrees of freedom; Welch's would have as few as n − 1 when one side happens to spread more, and at
        # three repeats a side that costs power for nothing. Unequal sizes: Welch's.
        pooled_test = n[0] == n[1]
        test = _t_test(lb, la, pooled_test)
        low, high = test.interval(1 - ALPHA / family)
        se = log_sd * math.sqrt(1 / n[0] + 1 / n[1]) if pooled_test else math.sqrt(va / n[0] + vb / n[1])
        name = "Student's pooled t-test" if pooled_test else "Welch's t-test"
        return Estimate(value, _exp(low), _exp(high), _p(test.p), family, n,
                        f"{name} on the logarithms, {n[0]} vs {n[1]} replicates", diff, se, test.df, log_sd)
    if spread is None:
        several = a if n[0] > 1 else b if n[1] > 1 else None
        if several is not None and (own := log_spread(several)) is not None and own[0] > 0:
            spread = Spread(own[0], own[1], f"the spread of the {len(several)} replicates on the other side")
    if spread is None or spread.log_sd <= 0:
        return Estimate(value, None, None, None, family, n,
                        "1 measurement a side, and no measured spread of this figure on this host")
    return _against_spread(value, diff, family, n, spread, f"{n[0]} vs {n[1]},")


def _constant_sides(value: float, diff: float, family: float, n: tuple[int, int], spread: Spread | None) -> Estimate:
    """Every replicate equal on each side. A measured figure does not repeat itself exactly unless its resolution
    hides its spread (TPC-H's times rounded to 0.1 s: a 0.3 s stream against a 0.4 s one is one step of rounding),
    so equal replicates measure no spread: the difference is tested against this host's measured spread where there
    is one, and is otherwise "cannot tell" — unless the sides are equal too."""
    if diff == 0:
        return Estimate(value, value, value, 1.0, family, n, f"{n[0]} vs {n[1]} replicates, all equal", diff, 0.0,
                        math.inf, 0.0)
    words = f"{n[0]} vs {n[1]} replicates, each side's all equal (its resolution may hide their spread)"
    if spread is None or spread.log_sd <= 0:
        return Estimate(value, None, None, None, family, n, f"{words}, and no measured spread of this figure on this host")
    return _against_spread(value, diff, family, n, spread, words + ";")


def _against_spread(value: float, diff: float, family: float, n: tuple[int, int], spread: Spread, words: str) -> Estimate:
    """The difference of the mean logarithms tested against a spread measured elsewhere (earlier repeats)."""
    se = spread.log_sd * math.sqrt(1 / n[0] + 1 / n[1])
    p = _two_sided_p(diff / se, spread.df)
    half = _t_quantile(1 - ALPHA / (2 * family), spread.df) * se
    return Estimate(value, _exp(diff - half), _exp(diff + half), p, family, n,
                    f"{words} against this host's spread of {spread.percent:.1f}% ({spread.source})",
                    diff, se, float(spread.df), spread.log_sd)


def level(values: Sequence[float]) -> tuple[float, float, float] | None:
    """(geometric mean, low, high): the 95% interval of the level that two or more positive replicates measure,
    by the t distribution on their logarithms (as `ratio` tests two sides)."""
    spread = log_spread(values)
    if spread is None:
        return None
    centre = statistics.fmean(math.log(v) for v in values)
    half = _t_quantile(1 - ALPHA / 2, spread[1]) * spread[0] / math.sqrt(len(values))
    return _exp(centre), _exp(centre - half), _exp(centre + half)


def _exp(x: float) -> float:
    """e**x, inf past what a float holds: an interval from one degree of freedom may reach that far."""
    return math.exp(x) if x < 709 else math.inf


def _p(p: float) -> float | None:
    return None if math.isnan(p) else float(p)


# Student's t distribution from scipy.special, not scipy.stats: the same functions underneath, and a third of the
# import (0.7 s of CPU against 1.9 s, paid by every compare).
def _t_quantile(q: float, df: float) -> float:
    from scipy import special

    return float(special.stdtrit(df, q))


def _two_sided_p(t: float, df: float) -> float:
    from scipy import special

    return 2 * float(special.stdtr(df, -abs(t)))


@dataclass(frozen=True)
class _TTest:
    """A two-sample t-test of mean(b) − mean(a): the difference, its standard error and degrees of freedom."""

    diff: float
    se: float
    df: float

    @property
    def p(self) -> float:
        if self.se == 0:  # constant sides: SciPy's t is infinite (p 0), or undefined when the means are equal too
            return math.nan if self.diff == 0 else 0.0
        return _two_sided_p(self.diff / self.se, self.df)

    def interval(self, level: float) -> tuple[float, float]:
        half = _t_quantile(1 - (1 - level) / 2, self.df) * self.se
        return self.diff - half, self.diff + half


def _t_test(b: Sequence[float], a: Sequence[float], pooled: bool) -> _TTest:
    """SciPy's ttest_ind(b, a, equal_var=pooled): Student's pooled test, or Welch's with the Welch–Satterthwaite
    degrees of freedom (1 when both sides are constant, as SciPy has it)."""
    n_b, n_a = len(b), len(a)
    var_b, var_a = _variance(b), _variance(a)
    if pooled:
        df = n_b + n_a - 2
        se = math.sqrt(((n_b - 1) * var_b + (n_a - 1) * var_a) / df * (1 / n_b + 1 / n_a))
    else:
        vb, va = var_b / n_b, var_a / n_a
        shared = vb * vb / (n_b - 1) + va * va / (n_a - 1)
        df = (vb + va) ** 2 / shared if shared else 1.0
        se = math.sqrt(vb + va)
    return _TTest(math.fsum(b) / n_b - math.fsum(a) / n_a, se, float(df))


def together(estimates: Sequence[Estimate]) -> Estimate:
    """Figures measured together (one case's throughput and its transactions): one estimate, their mean log ratio
    with the mean of their standard errors, as if they moved as one (they do: taking them as independent would
    narrow the interval of an effect that was measured once)."""
    if len(estimates) == 1:
        return estimates[0]
    usable = [e for e in estimates if e.log_diff is not None and e.se is not None and e.df]
    if len(usable) < len(estimates):
        return min(estimates, key=lambda e: e.se if e.se is not None else -1.0)  # one that could not be tested
    diff = statistics.fmean(e.log_diff for e in usable)
    se = statistics.fmean(e.se for e in usable)
    first = usable[0]
    return replace(first, ratio=_exp(diff), log_diff=diff, se=se, df=min(e.df for e in usable),
                   low=None, high=None, basis=f"{len(usable)} figures of one case, taken as one")


def geometric_mean(estimates: Sequence[Estimate], family: float = 1) -> Estimate:
    """The overall effect of several figures (pyperf's "Geometric mean"): the mean of their log ratios, its standard
    error from theirs (the figures taken as independent), its degrees of freedom by Welch–Satterthwaite. Figures
    that could not be tested are left out of it, and the basis says how many were used."""
    family = max(1, family)
    usable = [e for e in estimates if e.log_diff is not None and e.se is not None and e.df]
    if not usable:
        values = [e.ratio for e in estimates if e.ratio]
        value = _exp(statistics.fmean(math.log(v) for v in values)) if values and all(v > 0 for v in values) else None
        return Estimate(value, None, None, None, family, (len(estimates), len(estimates)),
                        "no figure could be tested")
    k = len(usable)
    diff = statistics.fmean(e.log_diff for e in usable)
    variance = sum(e.se ** 2 for e in usable)
    se = math.sqrt(variance) / k
    basis = f"geometric mean of {k} figure{'s' if k > 1 else ''}" + (
        f" ({len(estimates) - k} untested left out)" if k < len(estimates) else "")
    if se == 0:
        return Estimate(_exp(diff), _exp(diff), _exp(diff), 1.0 if diff == 0 else 0.0, family, (k, k),
                        basis, diff, 0.0, math.inf)
    df = variance ** 2 / sum(e.se ** 4 / e.df for e in usable if e.se)
    p = _two_sided_p(diff / se, df)
    half = _t_quantile(1 - ALPHA / (2 * family), df) * se
    return Estimate(_exp(diff), _exp(diff - half), _exp(diff + half), p, family, (k, k), basis,
                    diff, se, df)


def bonferroni(estimates: Sequence[Estimate], what: str) -> list[Estimate]:
    """A small family judged together (a comparison's headline figures, a tune's trials): each p times the number
    tested, each interval widened to match."""
    family = sum(1 for e in estimates if e.p is not None)
    if family <= 1:
        return list(estimates)
    return [e.adjusted(family, f"Bonferroni over {family} {what}") for e in estimates]


def false_discovery(estimates: Sequence[Estimate], what: str) -> list[Estimate]:
    """A large family (every other figure of a comparison): Benjamini–Hochberg's selection at ALPHA, and
    Benjamini–Yekutieli's false-coverage intervals to match it: with R of m figures selected, every interval at
    1 − R·ALPHA/m (1 − ALPHA/m when none is), which excludes 1 exactly for the selected ones."""
    tested = [e for e in estimates if e.p is not None]
    m = len(tested)
    if m <= 1:
        return list(estimates)
    ordered = sorted(e.p for e in tested)
    selected = max((k for k, p in enumerate(ordered, 1) if p <= k * ALPHA / m), default=0)
    return [e.adjusted(m / max(1, selected), f"false-coverage over {m} {what} (Benjamini–Hochberg)") for e in estimates]


# (log_sd, change, family, most) -> repeats_to_resolve's answer: a comparison asks it of each figure twice (its
# answer's words, its row), and resolve_ahead answers a whole comparison's in one call of each law.
_RESOLVED: dict[tuple[float, float, float, int], int | None] = {}


def repeats_to_resolve(log_sd: float, change: float = RESOLVE, family: float = 1, most: int = MOST_REPEATS) -> int | None:
    """How many replicates on each side the pooled t-test needs to find a change of ``change`` (5%: a ratio of 1.05) with
    probability POWER at ALPHA (over ``family``), when one measurement's logarithm spreads by ``log_sd``; None
    beyond ``most``."""
    if log_sd <= 0:
        return 2
    key = (log_sd, change, max(1, family), most)
    if key not in _RESOLVED:
        resolve_ahead([log_sd], change, family, most)
    return _RESOLVED[key]


def resolve_ahead(log_sds: Sequence[float], change: float = RESOLVE, family: float = 1, most: int = MOST_REPEATS) -> None:
    """repeats_to_resolve for many spreads at once: a power calculation on the noncentral t distribution, for every
    spread and every n in one call of each law over an array (one call costs what one scalar call does)."""
    import numpy as np
    from scipy import special

    family = max(1, family)
    if len(_RESOLVED) > 100_000:  # a dashboard serving for weeks
        _RESOLVED.clear()
    todo = [sd for sd in dict.fromkeys(log_sds) if sd > 0 and (sd, change, family, most) not in _RESOLVED]
    if not todo:
        return
    alpha = ALPHA / family
    n = np.arange(2, most + 1)
    df = 2 * n - 2
    critical = special.stdtrit(df, 1 - alpha / 2)
    shift = math.log1p(change) / np.array(todo)[:, None] * np.sqrt(n / 2)
    power = 1 - special.nctdtr(df, shift, critical) + special.nctdtr(df, shift, -critical)
    # From a noncentrality of about 8 on, SciPy's noncentral t answers NaN (a 0.14% spread at 2 to 4 repeats); the
    # power there is 0.95 and more, and rises with it: enough.
    power = np.where(np.isnan(power), shift > critical, power)
    for sd, row in zip(todo, power >= POWER):
        enough = np.flatnonzero(row)
        _RESOLVED[(sd, change, family, most)] = int(n[enough[0]]) if enough.size else None


def answer(estimate: Estimate, sense: int) -> tuple[str, str]:
    """(word, why) for one figure: "faster"/"slower" (or "changed", for a figure without a better direction) when
    the interval excludes 1; "no change" when it lies within ±RESOLVE; otherwise "cannot tell", ending with what
    would tell: the repeats a power calculation on the measured spread asks for, or how to measure the spread."""
    if estimate.ratio is None:
        return "—", estimate.basis
    if estimate.p is None and min(estimate.n) >= 2:  # repeated, each side all equal: its resolution hides the spread
        return "cannot tell", f"{estimate.basis}: a longer measurement would show it"
    if estimate.p is None:
        return "cannot tell", f"{estimate.basis}: measure it once with --repeats 3"
    if estimate.significant:
        if sense == 0:
            return "changed", ""
        return ("faster" if (estimate.ratio > 1) == (sense > 0) else "slower"), ""
    if estimate.low is not None and 1 / (1 + RESOLVE) <= estimate.low and estimate.high <= 1 + RESOLVE:
        return "no change", f"the interval lies within ±{RESOLVE:.0%}"
    if estimate.log_sd:
        n = repeats_to_resolve(estimate.log_sd, family=estimate.family)
        spread = f"{estimate.replicate}s spread by {math.expm1(estimate.log_sd):.1%}"
        return "cannot tell", (f"{spread}; {more(estimate.replicate, n)} would resolve a {RESOLVE:.0%} change" if n else
                               f"{spread}; more than {MOST_REPEATS} {estimate.replicate}s a side would be needed "
                               f"for {RESOLVE:.0%}")
    return "cannot tell", f"the replicates agree too little to tell; more {estimate.replicate}s would"


def more(replicate: str, n: int) -> str:
    """What to measure for n replicates a side: repeats within a run where they spread, runs where the runs do
    (more repeats of one run do not narrow how far the next run lands)."""
    return f"--repeats {n}" if replicate == "repeat" else f"{n} runs a side, taken in turn"
