"""A figure across runs: `refbench history oltp.nopm`, and the dashboard's trend pages.

A figure is named as in [accept]: SUITE.METRIC is a headline figure of the suite's verdict (oltp.nopm, dss.power),
one value per run and headline (DSS power per engine); SUITE.CASE.METRIC is one case's figure
(device.t0-rand-w0-qd32-bs4k.iops), the mean of its repeats. Each value comes with its spread: the lowest and highest
of the repeats behind it, and how many there were (the seconds of one measurement are not repeats). The newest run
of each series is judged against the runs before it, each run one replicate (`latest_change`, compare's estimator).
"""

from __future__ import annotations

import difflib
import json
import math
import re
from datetime import datetime
from typing import Any

from refbench.catalog import Catalog, run_filters
from refbench.errors import UserError
from refbench.formats import fmt
from refbench.suites import Chart, suite_names


def parse_figure(figure: str) -> tuple[str, str | None, str]:
    """"oltp.nopm" -> ("oltp", None, "nopm"); "device.t0-rand-w0-qd32-bs4k.iops" -> ("device", "t0-…", "iops")."""
    parts = figure.split(".")
    if len(parts) < 2 or not all(parts):
        raise UserError(f"figure {figure!r} must be SUITE.METRIC (a headline, e.g. oltp.nopm) or SUITE.CASE.METRIC "
                        "(one case's figure, e.g. device.t0-rand-w0-qd32-bs4k.iops).")
    if parts[0] not in suite_names():
        raise UserError(f"figure {figure!r} names suite '{parts[0]}', which is not one of {', '.join(suite_names())}.")
    return parts[0], ".".join(parts[1:-1]) or None, parts[-1]


def history(catalog: Catalog, figure: str, host: str | None = None, tags: dict[str, str] | None = None,
            since: str | None = None) -> list[dict[str, Any]]:
    """The figure's values over the matching runs, oldest first: one dict per run and series, with run,
    started_utc, host, tags, series, label, value, unit, low, high, n."""
    suite, case, metric = parse_figure(figure)
    conditions, args = run_filters(None, host, tags, since, table="r")
    extra = f"AND {conditions}" if conditions else ""
    common = "r.run, r.started_utc, r.host, r.tags, x.value, x.low, x.high, x.n"
    if case is None:
        rows = catalog.values(f"SELECT {common}, x.label, x.unit FROM headlines x JOIN runs r USING (run) "
                              f"WHERE x.suite = ? AND x.metric = ? {extra} ORDER BY r.started_utc, r.run, x.rowid",
                              (suite, metric, *args))
    else:
        rows = catalog.values(f"SELECT {common}, ?, '' FROM figures x JOIN runs r USING (run) WHERE x.suite = ? AND "
                              f"x.case_id = ? AND x.metric = ? {extra} ORDER BY r.started_utc, r.run",
                              (figure, suite, case, metric, *args))
    if not rows:
        raise UserError(_nothing_found(catalog, figure, suite, case, metric))
    points = []
    for run, started, run_host, run_tags, value, low, high, n, label, unit in rows:
        points.append({"run": run, "started_utc": started, "host": run_host, "tags": json.loads(run_tags),
                       "series": series_name(label), "label": label, "value": value, "unit": unit, "low": low,
                       "high": high, "n": n, "metric": metric})
    return points


TREND_RUNS = 10  # the runs before the newest that latest_change judges it against


def latest_change(points: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per series, the newest run against the (at most TREND_RUNS) runs before it: B / A with its 95% interval and
    the answer, each earlier run one replicate (their spread is this host's run-to-run spread of the figure)."""
    from refbench.estimate import answer, ratio
    from refbench.figures import direction

    out = []
    for series in dict.fromkeys(p["series"] for p in points):
        mine = [p for p in points if p["series"] == series and p["value"] is not None and p["value"] > 0]
        if len(mine) < 2:
            continue
        before, newest = mine[:-1][-TREND_RUNS:], mine[-1]
        est = ratio([p["value"] for p in before], [newest["value"]], replicate="run")
        word, why = answer(est, direction(newest.get("metric") or ""))
        interval = f" ({est.low:.2f}–{est.high:.2f})" if est.low is not None else ""
        out.append({"series": series, "run": newest["run"], "against": len(before), "ratio": est.ratio,
                    "ci_low": est.low, "ci_high": est.high, "answer": word, "why": why,
                    "line": f"{series}: the newest run {newest['run']} against the {len(before)} before it: "
                            f"{est.ratio:.2f}×{interval}, {word}" + (f" ({why})" if why else "")})
    return out


SPARKLINE_RUNS = 30  # the newest values a figure's sparkline draws


def latest_figures(catalog: Catalog, host: str | None = None, tags: dict[str, str] | None = None,
                   since: str | None = None) -> list[dict[str, Any]]:
    """Every headline figure of the matching runs, one per series (figure, series, unit), with its newest values
    (oldest first, at most SPARKLINE_RUNS), the run of the last, and why that one was not rated if it was not: the History
    page's list."""
    conditions, args = run_filters(None, host, tags, since, table="r")
    rows = catalog.values(f"SELECT x.suite, x.metric, x.label, x.value, x.unit, x.unrated, r.run FROM headlines x JOIN runs r USING (run) "
                          f"{'WHERE ' + conditions if conditions else ''} ORDER BY r.started_utc, r.run, x.rowid", tuple(args))
    found: dict[tuple[str, str], dict[str, Any]] = {}
    for suite, metric, label, value, unit, unrated, run in rows:
        if value is None:
            continue
        figure, series = f"{suite}.{metric}", series_name(label)
        entry = found.setdefault((figure, series), {"figure": figure, "series": series, "unit": unit or "", "values": []})
        entry["values"] = (entry["values"] + [value])[-SPARKLINE_RUNS:]
        entry["run"], entry["unrated"] = run, unrated  # the newest run's: why it could not be rated, if it could not
    return sorted(found.values(), key=lambda f: (f["figure"], f["series"]))


def series_name(label: str) -> str:
    """What stays the same from run to run in a headline's label: "NOPM at the best load level (8 users)" is one
    series with the best load level of another run; "t0: peak IOPS, random read, 4 KiB, QD 32" one with another
    run's best point."""
    return re.sub(r"\s*\([^()]*\)$", "", label.split(",")[0])


def lead_headlines(headlines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each suite's first headline (NOPM, peak IOPS, power…), in the suites' order: what a list of runs shows of
    each (`refbench runs`, the dashboard's runs page)."""
    leads: dict[str, dict[str, Any]] = {}
    for headline in headlines:
        leads.setdefault(headline["suite"], headline)
    return list(leads.values())


def spread_text(point: dict[str, Any]) -> str:
    if point["n"] is None:
        return "measured once"
    return f"{fmt(point['low'])}–{fmt(point['high'])} over {point['n']:,}"


def trend_chart(figure: str, points: list[dict[str, Any]], name: str = "trend") -> Chart:
    """The figure against the runs' start times (minutes, hours or days since the first), a line per series, each run's spread as a
    bar; hovering a point names its run."""
    first = min(_started(p) for p in points)
    span_s = (max(_started(p) for p in points) - first).total_seconds()
    per, unit_name = next((d, w) for limit, d, w in ((7200, 60, "minutes"), (3 * 86400, 3600, "hours"), (math.inf, 86400, "days"))
                          if span_s <= limit)
    series: dict[str, list[tuple[float, float]]] = {}
    ranges: dict[str, list[tuple[float, float, float]]] = {}
    tips: dict[str, list[str]] = {}
    for p in points:
        at = (_started(p) - first).total_seconds() / per
        series.setdefault(p["series"], []).append((at, p["value"]))
        if p["n"] is not None:
            ranges.setdefault(p["series"], []).append((at, p["low"], p["high"]))
        spread = "" if p["n"] is None else f", spread {spread_text(p)}"
        tips.setdefault(p["series"], []).append(f"{p['run']}: {fmt(p['value'])} {p['unit']}".rstrip() + spread)
    unit = next((p["unit"] for p in points if p["unit"]), "")
    return Chart(name, f"{figure} across {len({p['run'] for p in points})} runs",
                 f"{unit_name} since the first run ({first:%Y-%m-%d %H:%M} UTC)", f"{figure} ({unit})" if unit else figure,
                 series, ranges=ranges, tips=tips)


def _started(point: dict[str, Any]) -> datetime:
    return datetime.strptime(point["started_utc"], "%Y-%m-%dT%H:%M:%SZ")


def _nothing_found(catalog: Catalog, figure: str, suite: str, case: str | None, metric: str) -> str:
    """What the catalog does have, so that a typo is one command away from the right name."""
    if case is None:
        known = [f"{suite}.{m}" for (m,) in catalog.values("SELECT DISTINCT metric FROM headlines WHERE suite = ?", (suite,))]
        what = "headline figures"
    else:
        known = [f"{suite}.{c}.{m}" for c, m in catalog.values(
            "SELECT DISTINCT case_id, metric FROM figures WHERE suite = ? AND (case_id = ? OR metric = ?) LIMIT 2000",
            (suite, case, metric))]
        what = "figures"
    if not known:
        return f"no run in {catalog.runs_dir} (with these filters) has {suite} {what}; 'refbench runs' lists them."
    close = difflib.get_close_matches(figure, known, n=3, cutoff=0.5)
    hint = f"did you mean {' or '.join(close)}?" if close else f"its {suite} {what}: {', '.join(sorted(known)[:8])}"
    return f"no run in {catalog.runs_dir} (with these filters) has the figure {figure}; {hint}"
