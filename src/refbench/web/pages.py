"""The dashboard's pages, in the report's look (refbench.report.html): every value from a run directory escaped, every
number with its unit."""

from __future__ import annotations

import functools
import json
import threading
from datetime import datetime, timezone
from typing import Any
from urllib.parse import quote, urlencode

from refbench.catalog.history import lead_headlines, series_name
from refbench.timings import duration
from refbench.children import owned_temp_directory
from refbench.errors import UserError
from refbench.formats import figure_said
from refbench.report import html as h
from refbench.runstore import Run, utc_now
from refbench.suites import get_suite

# The runs page shows the newest runs first, this many unless asked for all: a page of 1,000 runs with their
# figures is 1 MB of HTML that nobody reads to the end.
PAGE_RUNS = 200
REFRESH_S = 5
LAST_RECORDS = 8  # the progress page's last recorded cases, newest first
FIGURES_SHOWN = 8  # of each of them: the first figures, a suite's main ones
# matplotlib is not thread-safe; the server answers on several threads.
_CHARTS = threading.Lock()


NAV = ('<nav class="top"><b>refbench</b><a href="/">Runs</a><a href="/history">History</a>'
       '<a href="/compare">Compare</a><a href="/tune">Tune</a></nav>')


def page(title: str, body: str, refresh_s: int | None = None) -> str:
    nav = NAV
    head = '<link rel="stylesheet" href="/static/dashboard.css">'
    if refresh_s:
        head += f'<meta http-equiv="refresh" content="{refresh_s}">'
    return h.page(title, nav + body).replace("</head>", head + "</head>", 1)


def framed(report: str, nav: str = NAV) -> str:
    """A page written as a file (a run's or a tune's report) with the dashboard's way back."""
    return report.replace("<main>", '<link rel="stylesheet" href="/static/dashboard.css"><main>' + nav, 1)


def tunes_page(journeys: list[dict[str, Any]]) -> str:
    rows = [{"tune": f'<a href="{link("/tune/" + j["name"])}">{h.esc(j["name"])}</a>', "suite": h.esc(str(j.get("suite", ""))),
             "profile": h.esc(str(j.get("profile", ""))), "trials": len(j.get("steps", [])),
             "answer": h.esc(f"damaged: {j['damaged']}" if "damaged" in j else str(j.get("answer", "running…")))}
            for j in journeys]
    body = "<h1>Tunes</h1>" + (_html_table(rows) if rows else
                               "<p>No tunes in this runs directory yet: <code>refbench tune --suite oltp</code>.</p>")
    return page("refbench tunes", body)


def _html_table(rows: list[dict[str, Any]]) -> str:
    head = "".join(f"<th>{h.esc(k)}</th>" for k in rows[0])
    body = "".join("<tr>" + "".join(f"<td>{v}</td>" for v in r.values()) + "</tr>" for r in rows)
    return f'<div class="scroll"><table class="runs"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>'


def message(title: str, sentence: str) -> str:
    return page(title, f"<h1>{h.esc(title)}</h1><p>{h.esc(sentence)}</p>")


def link(path: str, **params: Any) -> str:
    """A URL with its query, escaped for an attribute; list values repeat the parameter."""
    pairs = [(k, x) for k, v in params.items() for x in (v if isinstance(v, list) else [v]) if x not in (None, "", [])]
    return h.esc(path + ("?" + urlencode(pairs) if pairs else ""))


def figure_name(headline: dict[str, Any]) -> str:
    """How `refbench history` names a headline figure: SUITE.METRIC."""
    return f"{headline['suite']}.{headline['metric']}"


def _filters_form(action: str, values: dict[str, Any], extra: str = "", suite: bool = True) -> str:
    def box(name: str, label: str, hint: str) -> str:
        value = values.get(name) or ""
        value = ", ".join(value) if isinstance(value, list) else value
        return (f'<label>{h.esc(label)}<input name="{name}" value="{h.esc(value)}" placeholder="{h.esc(hint)}"></label>')

    tags = "".join(f'<input type="hidden" name="tag" value="{h.esc(t)}">' for t in values.get("tag", [])[1:])
    return (f'<form class="filters" method="get" action="{action}">{extra}{box("suite", "suite", "oltp") if suite else ""}'
            f'{box("host", "host", "db-1")}<label>tag<input name="tag" value="{h.esc((values.get("tag") or [""])[0])}" '
            f'placeholder="firmware=2.1"></label>{tags}{box("since", "since (UTC)", "2026-11-01 or 30d")}'
            "<button>Show</button></form>")


def no_report(run: str) -> str:
    return page("No report yet", f"<h1>No report yet</h1><p>{h.esc(run)} has no report.html: the run writes it when it "
                f'ends, or <code>refbench report {h.esc(run)}</code> does. <a href="{link("/progress/" + run)}">Its progress</a>.</p>')


def runs_page(runs: list[dict[str, Any]], filters: dict[str, Any], show_all: bool, warnings: list[str]) -> str:
    more = not show_all and len(runs) > PAGE_RUNS
    shown = runs[:PAGE_RUNS] if more else runs
    rows = []
    for r in shown:
        name = r["run"]
        status = r["status"] or "unknown"
        status_cell = (f'<a class="running" href="{link("/progress/" + name)}">running — progress</a>'
                       if status == "running" else f'<span class="{h.esc(status)}">{h.esc(status)}</span>')
        # As `refbench runs` shows them; the report has all.
        figures = "<br>".join(
            f'{h.esc(x["suite"])} {h.esc(series_name(x["label"]))}: <a href="{link("/history", figure=figure_name(x))}">'
            + ('<span class="note">not rated at this size</span></a>' if x.get("unrated") else
               f'<b>{h.esc(figure_said(x["value"], x["unit"], x["low"], x["high"], with_range=False))}</b></a>') for x in lead_headlines(r["headlines"])) or "—"
        tags = "".join(f"<span>{h.esc(k)}={h.esc(v)}</span>" for k, v in sorted(r["tags"].items()))
        rows.append(
            f'<tr><td data-label="compare"><input type="checkbox" name="run" value="{h.esc(name)}" aria-label="compare {h.esc(name)}"></td>'
            f'<td class="nowrap" data-label="run"><a href="{link("/runs/" + name + "/")}">{h.esc(name)}</a></td>'
            f'<td data-label="status">{status_cell}</td><td class="nowrap" data-label="started (UTC)">{h.esc(r["started_utc"] or "—")}</td>'
            f'<td data-label="host">{h.esc(r["host"] or "—")}</td><td data-label="profile">{h.esc(r["profile"] or "—")}</td>'
            f'<td data-label="suites">{h.esc(", ".join(r["suites"]) or "(host only)")}</td><td class="tags" data-label="tags">{tags}</td>'
            f'<td class="figures" data-label="lead figures">{figures}</td></tr>')
    count = (f"the newest {PAGE_RUNS:,} runs — <a href=\"{link('/', **filters, all='1')}\">show all</a>" if more
             else f"{len(runs):,} run{'s' if len(runs) != 1 else ''}")
    body = [
        "<h1>Runs</h1>", f'<p class="sub">{count}, newest first. Tick two or more to compare them; the oldest ticked '
        "is the baseline (A).</p>", _filters_form("/", filters),
        *(f'<p class="note">{h.esc(w)}</p>' for w in warnings),
        '<form method="get" action="/compare"><input type="hidden" name="order" value="oldest">' + h.scroll(
            '<table class="runs"><thead><tr><th>compare</th><th>run</th><th>status</th><th>started (UTC)</th><th>host</th>'
            "<th>profile</th><th>suites</th><th>tags</th><th>lead figure per suite</th></tr></thead><tbody>"
            + "".join(rows) + "</tbody></table>") + "<button>Compare ticked runs</button></form>"
        if rows else '<p class="note">No run matches.</p>',
    ]
    return page("refbench runs", "".join(body))


def history_page(figure: str, filters: dict[str, Any], points: list[dict[str, Any]], figures: list[dict[str, Any]],
                 problem: str | None) -> str:
    """A figure's trend; without one (or with one no run has), every headline figure with its latest value and a
    sparkline of its runs, each a link to its trend."""
    from refbench.catalog.history import spread_text

    suggestions = list(dict.fromkeys(f["figure"] for f in figures))
    options = "".join(f'<option value="{h.esc(s)}">' for s in suggestions)
    form = _filters_form("/history", filters, extra=f'<label>figure<input name="figure" list="figures" value="{h.esc(figure)}" '
                         f'placeholder="oltp.nopm" required></label><datalist id="figures">{options}</datalist>', suite=False)
    body = [f"<h1>History{': ' + h.esc(figure) if figure else ''}</h1>",
            '<p class="sub">A figure over the runs that measured it, oldest first; hover a point for its value.</p>', form]
    if problem:
        body.append(f'<p class="banner none">{h.esc(problem)}</p>')
    if not figure or problem:
        body.append(_figures_index(figures, filters))
    elif points:
        body.append(_trend_svg(figure, json.dumps(points)))
        rows = [{"run": p["run"], "started (UTC)": p["started_utc"], "host": p["host"], "series": p["series"],
                 "value": f"{h.fmt(p['value'])} {p['unit']}".rstrip(), "spread (low–high over n)": spread_text(p),
                 "tags": ", ".join(f"{k}={v}" for k, v in sorted(p["tags"].items()))} for p in points]
        body.append(h.table(rows, max_rows=5000))
    return page(f"refbench history {figure}", "".join(body))


def _figures_index(figures: list[dict[str, Any]], filters: dict[str, Any]) -> str:
    if not figures:
        return '<p class="note">No run with headline figures matches.</p>'
    rows = []
    for f in figures:
        trend = link("/history", figure=f["figure"], host=filters.get("host"), tag=filters.get("tag"), since=filters.get("since"))
        latest = (f'<td data-label="latest"><span class="note">not rated at this size: {h.esc(f["unrated"])}</span></td>'
                  if f["unrated"] else f'<td class="num" data-label="latest"><b>{h.esc(h.fmt(f["values"][-1]))} {h.esc(f["unit"])}</b></td>')
        rows.append(f'<tr><td data-label="figure"><a href="{trend}"><b>{h.esc(f["figure"])}</b></a><br>'
                    f'<span class="note">{h.esc(f["series"])}</span></td>{latest}'
                    f'<td data-label="trend">{sparkline(f["values"], f["figure"])}</td>'
                    f'<td class="num" data-label="runs">{len(f["values"]):,}</td>'
                    f'<td class="nowrap" data-label="latest run"><a href="{link("/runs/" + f["run"] + "/")}">{h.esc(f["run"])}</a></td></tr>')
    return ("<h2>Figures</h2>" + h.scroll('<table class="runs"><thead><tr><th>figure</th><th>latest</th><th>trend</th>'
            "<th>runs</th><th>latest run</th></tr></thead><tbody>" + "".join(rows) + "</tbody></table>"))


SPARK_W, SPARK_H = 120, 26


def sparkline(values: list[float], name: str) -> str:
    """The values as a small line, oldest to newest, drawn to the band between their lowest and highest; the last
    marked."""
    low, high = min(values), max(values)
    span = (high - low) or 1.0
    step = SPARK_W / max(len(values) - 1, 1)
    xy = [(round(i * step, 1), round(SPARK_H - 3 - (v - low) / span * (SPARK_H - 6), 1)) for i, v in enumerate(values)]
    if len(xy) == 1:
        xy = [(0.0, xy[0][1]), (float(SPARK_W), xy[0][1])]
    points = " ".join(f"{x},{y}" for x, y in xy)
    said = f"{name}: {len(values)} run(s), {h.fmt(low)} to {h.fmt(high)}"
    return (f'<svg class="spark" viewBox="-3 0 {SPARK_W + 6} {SPARK_H}" width="{SPARK_W + 6}" height="{SPARK_H}" role="img" '
            f'aria-label="{h.esc(said)}"><title>{h.esc(said)}</title><polyline points="{points}" fill="none" '
            f'stroke="#2c5d8f" stroke-width="1.5"/><circle cx="{xy[-1][0]}" cy="{xy[-1][1]}" r="2.5" fill="#b42318"/></svg>')


@functools.lru_cache(maxsize=32)
def _trend_svg(figure: str, points_json: str) -> str:
    """The trend chart inline with its hover layer, a line per set of tags the runs carry (and per series), each
    point a link to its run's page; drawn again only when the figure's points change (matplotlib takes most of the
    page's time: 0.2–0.5 s for 1,000 runs here)."""
    from refbench.catalog.history import trend_chart
    from refbench.report.charts import render_figure

    points = by_tags(json.loads(points_json))
    chart = trend_chart(figure, points)
    links: dict[str, list[str]] = {}
    for p in points:  # in the order trend_chart puts them on their lines
        links.setdefault(p["series"], []).append("/runs/" + quote(p["run"]) + "/")
    with _CHARTS, owned_temp_directory("refbench-serve-") as scratch:
        return h.chart(render_figure(chart, scratch, links), chart.title)


TAGS_LABEL_CHARS = 48  # of a trend line's name in the legend


def tags_text(tags: dict[str, str]) -> str:
    """A run's tags as a trend line is named by them: "array=raid10, firmware=2.1", or "no tags"."""
    return ", ".join(f"{k}={v}" for k, v in sorted(tags.items())) or "no tags"


def by_tags(points: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The points with each one's series named by its run's tags (and by its series too, when the figure has
    several): runs of different tags are different configurations, a line each. A long name is cut, and names
    that came out alike after cutting are numbered, so that two lines never share one. '$' is kept from
    matplotlib's math."""
    from refbench.report.charts import cut

    several = len({p["series"] for p in points}) > 1
    names: dict[tuple[str, str], str] = {}
    out = []
    for p in points:
        key = (p["series"] if several else "", tags_text(p["tags"]))
        if key not in names:
            name = cut(" · ".join(filter(None, key)), TAGS_LABEL_CHARS).replace("$", r"\$")
            taken = set(names.values())
            names[key] = next(f"{name} ({i})" if i > 1 else name for i in range(1, len(names) + 2)
                              if (f"{name} ({i})" if i > 1 else name) not in taken)
        out.append({**p, "series": names[key]})
    return out


def compare_page(sides: list[list[Run]], everything: bool, metric: str | None) -> str:
    """``sides``: each side's runs, the baseline's first; a side of several runs is several runs of one configuration."""
    from refbench.report.compare import answers, html_body, letters, ratio_rows, shared_figures, side_name, title

    runs = [side[0] for side in sides]
    shared = shared_figures(runs, metric, sides)
    drawn = ratio_rows(answers(shared))
    names = [side_name(side) for side in sides]
    switch = link("/compare", run=names, metric=metric, **({} if everything else {"all": "1"}))
    baselines = " · ".join(f'<a href="{link("/compare", run=[n] + names[:i] + names[i + 1:], metric=metric, all="1" if everything else None)}">'
                           f"{h.esc(n)}</a>" for i, n in enumerate(names) if i)
    reports = " · ".join(f'<a href="{link("/runs/" + run.path.name + "/")}">{letter}: {h.esc(run.path.name)}</a>'
                         for letter, side in zip(letters(runs), sides) for run in side)
    body = (f'<p class="note">The reports: {reports}</p>'
            f'<p class="note"><a href="{switch}">{"Only the headline figures and significant changes" if everything else "Every figure the runs share"}</a>'
            f" · the same comparison as <code>refbench compare</code> · another baseline: {baselines}</p>"
            + html_body(sides, shared, everything, metric, _ratios_svg(json.dumps([vars(r) for r in drawn])) if drawn else ""))
    return page(title(sides), body)


@functools.lru_cache(maxsize=32)
def _ratios_svg(rows_json: str) -> str:
    """The headline figures' B / A as a dot plot with their intervals; drawn again only when they change."""
    from refbench.report.charts import Ratio, render_ratios

    rows = [Ratio(**r) for r in json.loads(rows_json)]
    title = "Headline figures: B / A with the interval each answer used"
    with _CHARTS, owned_temp_directory("refbench-serve-") as scratch:
        # A group, not one image: each dot's title and the names and words beside it are read out.
        return h.chart(render_ratios(rows, title, scratch), title).replace(
            '<figure><svg', '<figure class="ratios"><svg', 1).replace('role="img"', 'role="group"', 1)


def compare_chooser(runs: list[dict[str, Any]]) -> str:
    """/compare with no runs named: pick a baseline and a run to compare with it."""
    if len(runs) < 2:
        return message("Compare", "Comparing needs two runs in the runs directory; there "
                       + ("is one." if runs else "are none."))

    def options(chosen: int) -> str:  # runs come newest first: B the newest, A the one before it
        return "".join(f'<option value="{h.esc(r["run"])}"{" selected" if i == chosen else ""}>{h.esc(r["run"])} · '
                       f'{h.esc(r["host"] or "")} · {h.esc(", ".join(r["suites"]))}</option>' for i, r in enumerate(runs))

    body = ("<h1>Compare</h1><p class='sub'>Pick the baseline (A) and the run to compare with it, or tick several on "
            f'<a href="/">the runs page</a>.</p><form class="filters" method="get" action="/compare">'
            f'<label>baseline (A)<select name="run">{options(1)}</select></label>'
            f'<label>compared with it (B)<select name="run">{options(0)}</select></label>'
            "<button>Compare</button></form>")
    return page("Compare", body)


def report_bar(run: str, others: list[dict[str, Any]]) -> str:
    """What the dashboard puts at the top of a run's own report: the way back, and a comparison with another run."""
    options = "".join(f'<option value="{h.esc(r["run"])}">{h.esc(r["run"])}</option>' for r in others if r["run"] != run)
    compare = (f'<form class="inline" method="get" action="/compare"><input type="hidden" name="order" value="oldest">'
               f'<input type="hidden" name="run" value="{h.esc(run)}"><label>compare with <select name="run">{options}'
               "</select></label><button>Compare</button></form>") if options else ""
    return NAV.replace("</nav>", f'<a href="{link("/progress/" + run)}">Progress</a>{compare}</nav>')


def progress_page(run: Run) -> str:
    """A run's progress: per suite the cases recorded against the cases its plan asks for, the time left at the pace
    of the cases already measured (before the first, the suite's own estimate as the dry run prints it), and the
    last figures recorded."""
    meta = run.meta
    status = run.status()
    plan = run.plan
    records = run.records()
    rows, left_s, unknown = [], 0.0, []
    for name in plan.suites:
        done = [r for r in records if r.suite == name]
        try:
            suite = get_suite(name)
            cases = suite.cases(plan)
        except UserError as exc:
            rows.append({"suite": name, "cases recorded": len(done), "cases planned": None, "left": str(exc)})
            unknown.append(name)
            continue
        # Counted, not matched by case id: a plan sized at the start (warehouses to the free space) may expand
        # to other ids now.
        todo = max(0, len(cases) - len(done))
        if done:
            suite_left = sum(r.elapsed_s for r in done) / len(done) * todo
            how = f"{duration(suite_left)} at {duration(sum(r.elapsed_s for r in done) / len(done))} a case"
        elif (estimate := getattr(suite, "estimate", None)) and cases:
            suite_left = estimate(plan, cases).seconds
            how = f"{duration(suite_left)} (the dry run's estimate)"
        else:
            suite_left, how = 0.0, "not estimated"
            unknown.append(name)
        left_s += suite_left if todo else 0
        rows.append({"suite": name, "cases recorded": len(done), "cases planned": len(cases), "left": how if todo else "done"})
    planned = sum(r["cases planned"] or 0 for r in rows)
    finished = sum(r["cases recorded"] for r in rows)
    started = meta.get("started_utc") or ""
    try:
        elapsed = duration((utc_now() - datetime.strptime(started, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)).total_seconds())
    except ValueError:
        elapsed = "—"
    eta = ("" if status != "running" else
           f" · about {duration(left_s)} left" + (f" ({', '.join(unknown)} not estimated)" if unknown else ""))
    body = [f"<h1>Progress — {h.esc(meta['name'])}</h1>",
            f'<p class="sub">{h.esc(run.path.name)} · status <b class="{h.esc(status)}">{h.esc(status)}</b> · started '
            f"{h.esc(started)} UTC · {h.esc(elapsed)} ago · page read at {h.esc(utc_now().strftime('%H:%M:%S'))} UTC"
            + (f" · refreshes every {REFRESH_S} s" if status == "running" else "") + "</p>",
            f'<p><progress max="{max(planned, 1)}" value="{finished}"></progress> <b>{finished} of {planned} cases</b>'
            f"{h.esc(eta)}</p>", h.table(rows)]
    if status != "running":
        body.append(f'<p class="note">Not running any more ({h.esc(status)}): <a href="{link("/runs/" + run.path.name + "/")}">'
                    "the run's report</a>.</p>")
    last = sorted(records, key=lambda r: r.ended_epoch_s)[-LAST_RECORDS:][::-1]
    body.append("<h2>Last figures recorded</h2>")
    body.append(h.table([{"suite": r.suite, "case": r.case_id, "ended (UTC)": r.ended_utc, "figures": _first_figures(r.metrics)}
                         for r in last]) if last else '<p class="note">No case recorded yet.</p>')
    return page(f"refbench progress {run.path.name}", "".join(body), REFRESH_S if status == "running" else None)


def _first_figures(metrics: dict[str, Any], shown: int = FIGURES_SHOWN) -> str:
    """A record's first figures, as the suite put them first (its main ones): a case of oltp has 60."""
    numbers = [f"{h.header(k)} {h.fmt(v)}" for k, v in metrics.items() if isinstance(v, (int, float)) and not isinstance(v, bool)]
    return ", ".join(numbers[:shown]) + (f" … and {len(numbers) - shown} more in the report" if len(numbers) > shown else "")
