"""Acceptance thresholds: a plan's ``[accept]`` table, evaluated at the end of a run and by ``refbench check``.

    [accept]
    oltp.nopm = ">= 50000"                                # a suite's headline figure
    device.t0-rand-w0-qd32-bs4k.read_lat_p99_us = "<= 2000"   # one case's metric

A figure is a headline's name, as the verdict gives it (``suite.metric``, e.g. oltp.nopm: NOPM at the best load
level, or ``suite.metric.of`` where a suite has several of one metric, e.g. dss.power.duckdb; ``suite.metric`` alone
names such a figure when the run has only one), or ``suite.case.metric`` (that case's record). A threshold whose
figure the run did not measure fails, saying why and naming the figures it did measure; so does, refused, one whose
figure the verdict calls "not rated at this size" (a quick run's dss power under TPC-H's 0.1 s floor, a dw rating of
more than 100 times the data measured): its value is the size's, not the stack's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from refbench.errors import UserError
from refbench.fileio import parse_toml, read_user_file
from refbench.suites import is_figure
from refbench.thresholds import OPERATORS, Threshold, parse

if TYPE_CHECKING:
    from refbench.runstore import Run

EXIT_THRESHOLD_FAILED = 3  # distinct from 1 (a correctness check failed) and 2 (bad input)


def load_file(path: str) -> list[Threshold]:
    """The thresholds of a file's [accept] table: a file holding only that table, or a whole plan (whose other
    tables are not read: the run already says what it measured)."""
    data = parse_toml(read_user_file(path, "the acceptance file"), path)
    if "accept" not in data:
        raise UserError(f"nothing to check: {path} has no [accept] table (write one as [accept] then "
                        f"oltp.nopm = \">= 50000\").")
    return parse(data["accept"], lambda key: f"{path}: [accept] {key}".rstrip())


def evaluate(run: "Run", thresholds: list[Threshold]) -> list[dict[str, Any]]:
    """[{"threshold", "value", "passed", "detail"}] in the plan's order."""
    from refbench.report.verdict import run_verdict

    from refbench.figures import figure_cases, figures

    verdicts = {v.suite: v for v in run_verdict(run)} if thresholds else {}
    repeated = {}
    if thresholds:  # each headline's figure, with its repeats (figures and their cases read once for every threshold)
        found, case_of = figures(run), figure_cases(run)
        repeated = {h.threshold(v.suite): found.get((v.suite, case_of.get((v.suite, h.case), h.case), h.metric))
                    for v in verdicts.values() for h in v.headlines if h.case}
    results = []
    for t in thresholds:
        value, detail = _value(run, verdicts, t.figure)
        if refused := _unrated(verdicts, t.figure):
            results.append({"threshold": str(t), "value": value, "passed": False, "detail": refused})
            continue
        passed = value is not None and OPERATORS[t.op](value, t.limit)
        results.append({"threshold": str(t), "value": value, "passed": passed,
                        "detail": detail + _repeats_interval(repeated.get(t.figure), t)})
    return results


def _unrated(verdicts: dict[str, Any], figure: str) -> str:
    """The refusal of a threshold on a figure the verdict does not rate (its headline's ``unrated``, said as "not
    rated at this size"), named as a headline (dss.power.duckdb, dss.power when it is the only one) or as the case's
    record it comes from (dss.duckdb-power.power); "" for any other figure."""
    suite, *middle, metric = figure.split(".")
    headlines = verdicts[suite].headlines if suite in verdicts else []
    named = {h.threshold(suite): h for h in headlines}
    by_metric = [h for h in headlines if h.metric == metric]
    headline = (named.get(figure) or (by_metric[0] if not middle and len(by_metric) == 1 else None)
                or next((h for h in by_metric if middle and h.case == ".".join(middle)), None))
    if headline is None or not headline.unrated:
        return ""
    return (f"refused: {figure} ({headline.label}) is not rated at this size, so no threshold can judge it: "
            f"{headline.unrated}")


def _repeats_interval(figure: Any, threshold: Threshold) -> str:
    """What the repeats behind a headline figure say of it: their 95% interval (estimate.level), and whether it
    reaches across the limit — a pass or a fail the next run may not repeat. The threshold is judged on the
    verdict's figure all the same."""
    from refbench.estimate import level
    from refbench.formats import fmt

    if figure is None or (found := level(figure.samples)) is None:
        return ""
    _, low, high = found
    across = low < threshold.limit < high
    return (f"; its {len(figure.samples)} repeats: 95% interval {fmt(low)}–{fmt(high)}"
            + (", across the limit: another run may not give the same answer" if across else ""))


def _value(run: "Run", verdicts: dict[str, Any], figure: str) -> tuple[float | None, str]:
    suite, *middle, metric = figure.split(".")
    if suite not in verdicts:
        return None, f"the run measured no {suite} figures (it measured {', '.join(verdicts) or 'none'})"
    named = {h.threshold(suite): h for h in verdicts[suite].headlines}
    if figure in named:
        return named[figure].value, named[figure].label
    if middle:
        case = ".".join(middle)
        record = next((r for r in run.records(suite) if r.case_id == case), None)
        if record is None:
            return None, (f"{figure} is neither a headline of this run ({', '.join(named) or 'none'}) nor a figure of "
                          f"one of its {suite} cases (suite.CASE.METRIC)")
        value = record.metrics.get(metric)
        if not is_figure(value):
            return None, f"{suite} case {case} has no figure {metric}"
        return value, f"{suite} case {case}"
    matches = [h for h in verdicts[suite].headlines if h.metric == metric]
    if len(matches) == 1:
        return matches[0].value, matches[0].label
    if matches:
        return None, (f"{len(matches)} {suite} headline figures are {metric}: name one of "
                      f"{', '.join(h.threshold(suite) for h in matches)}")
    return None, (f"{figure} is not a {suite} headline figure (those are: {', '.join(named) or 'none'}); a case's "
                  f"figure is {suite}.CASE.METRIC")


def failed(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in results if not r["passed"]]
