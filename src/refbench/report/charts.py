"""Renders Chart descriptions to PNG and SVG with matplotlib (no display needed)."""

from __future__ import annotations

import io
import math
import multiprocessing
import os
import textwrap
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from html import escape
from pathlib import Path

import matplotlib
import matplotlib.artist


def _no_setter_docstrings() -> None:
    """matplotlib writes the docstring of every artist class's set() while it imports, a quarter of its import time
    (0.27 s of CPU in each command that writes a report); nothing here reads them. set() itself works without."""
    if hasattr(matplotlib.artist.Artist, "_update_set_signature_and_docstring"):
        matplotlib.artist.Artist._update_set_signature_and_docstring = classmethod(lambda cls: None)


_no_setter_docstrings()

from matplotlib.figure import Figure  # noqa: E402
from matplotlib.ticker import FuncFormatter, LogFormatter, MaxNLocator, NullLocator  # noqa: E402
from matplotlib.transforms import blended_transform_factory  # noqa: E402

# SVG text stays text (selectable, smaller) instead of one path per glyph: a third less time per chart.
matplotlib.rcParams["svg.fonttype"] = "none"

from refbench.fileio import atomic_write_bytes, make_directories  # noqa: E402
from refbench.formats import fmt  # noqa: E402
from refbench.suites import Chart  # noqa: E402

PARALLEL_FROM = 4  # charts; fewer are not worth starting worker processes for
HOVER_POINTS = 120  # per series: every point of a sweep, every n-th of a long telemetry series (the file stays small)
SVG_PT_PER_INCH = 72  # matplotlib's SVG user units are points, whatever the figure's dpi


@dataclass
class Rendered:
    """A chart's files and its hover layer: SVG elements, one per data point, placed in the SVG file's coordinates."""

    png: Path | None  # None: drawn for a page only (the dashboard's), as SVG
    svg: Path
    hover: str


class PlainLogTicks(LogFormatter):
    """Log-axis ticks as 100 and 1,000 rather than the default 10^2 and 10^3: easier to read, and the default's math
    text is parsed again on every draw, which was a fifth of what a chart cost."""

    def _num_to_string(self, x, vmin, vmax):
        return f"{x:,.0f}" if x >= 1 else f"{x:g}"


# Linear axes in the report's number format: 40,000 rather than 40000.
THOUSANDS = FuncFormatter(lambda x, _: f"{x:,.0f}" if abs(x) >= 1000 else f"{x:g}")


def render_all(charts: list[Chart], directory: Path) -> list[Rendered]:
    """Renders charts on every CPU: matplotlib takes a few tenths of a second per figure, and the SSD characterization paper's full
    device sweep alone has 24 of them. The workers are forked, so they start with matplotlib already imported."""
    workers = min(len(charts), os.cpu_count() or 1)
    if len(charts) < PARALLEL_FROM or workers < 2:
        return [render_figure(c, directory) for c in charts]
    make_directories(directory)
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork")) as pool:
        return list(pool.map(render_figure, charts, [directory] * len(charts)))


def render_figure(chart: Chart, directory: Path, links: dict[str, list[str]] | None = None) -> Rendered:
    """Writes <name>.png and <name>.svg into ``directory`` (plain files, for slides) and returns them with the hover
    layer the report lays over the inline SVG. ``links``: series -> a URL per point of a line chart (the dashboard's
    trend: each point's run); every such point is then a link, and its line is named by an id."""
    make_directories(directory)
    # A Figure of its own rather than pyplot's: no global state, and pyplot's import cost more than a chart does.
    fig = Figure(figsize=(8, 4.5), dpi=110)
    ax = fig.subplots()
    categorical = any(isinstance(x, str) for points in chart.series.values() for x, _ in points)
    categories: list = []
    if categorical:
        for points in chart.series.values():
            for x, _ in points:
                if x not in categories:
                    categories.append(x)
    hover: list[tuple[float, float, str]] = []  # (x, y) in data coordinates, and what hovering shows
    if chart.kind == "bar":
        hover = _bars(ax, chart, categories if categorical else sorted({x for p in chart.series.values() for x, _ in p}))
    elif chart.kind == "area":
        hover = _stacked(ax, chart)
    else:
        for i, (label, points) in enumerate(chart.series.items()):
            xs = [categories.index(x) if categorical else x for x, _ in points]
            hrefs = (links or {}).get(label)
            (line,) = ax.plot(xs, [y for _, y in points], marker="o" if len(points) <= HOVER_POINTS or hrefs else None,
                              markersize=3, linewidth=1.5, label=str(label), gid=f"{chart.name}-line-{i}" if hrefs else None)
            if label in chart.ranges:
                ax.vlines(*zip(*chart.ranges[label]), color=line.get_color(), alpha=0.45, linewidth=2)
            step = 1 if hrefs else -(-len(points) // HOVER_POINTS)  # a link to every point
            tips = chart.tips.get(label) or [_tip(chart, label, x, y) for x, y in points]
            hover += [(px, y, tip, *([f'href="{escape(href)}" data-line="{i}"'] if hrefs else []))
                      for px, (x, y), tip, href in list(zip(xs, points, tips, hrefs or [None] * len(points)))[::step]
                      if y is not None]
        if categorical:
            _category_ticks(ax, categories)
    for start, end, name in chart.spans:
        ax.axvspan(start, end, color="#2c5d8f", alpha=0.07, linewidth=0)
        ax.text((start + end) / 2, 0.98, name, transform=ax.get_xaxis_transform(), ha="center", va="top",
                fontsize="small", color="#1b3b5c", clip_on=True)
    if not categorical and chart.kind != "bar" and all(isinstance(x, int) for p in chart.series.values() for x, _ in p):
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # user counts, queue depths: no 1.5 users
    if chart.logx and not categorical:
        ax.set_xscale("log", base=2)
        ax.xaxis.set_major_formatter(PlainLogTicks(base=2))
        ax.xaxis.set_minor_formatter(PlainLogTicks(base=2, labelOnlyBase=False))
    if chart.logy:
        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(PlainLogTicks())
        ax.yaxis.set_minor_formatter(PlainLogTicks(labelOnlyBase=False))
    if not chart.logy:
        ax.yaxis.set_major_formatter(THOUSANDS)
    if not categorical and not chart.logx and chart.kind != "bar":
        ax.xaxis.set_major_formatter(THOUSANDS)
    # Long labels wrap instead of running off the figure: the y-label's room is the plot's height.
    ax.set_title(textwrap.fill(chart.title, 80))
    ax.set_xlabel(chart.xlabel)
    ax.set_ylabel(textwrap.fill(chart.ylabel, 45))
    ax.grid(True, alpha=0.3)
    if len(chart.series) > 1 and chart.spans:  # below the plot: the phase names take the top of it
        ax.legend(fontsize="small", ncol=min(len(chart.series), 4), loc="upper center", bbox_to_anchor=(0.5, -0.16),
                  frameon=False)
    elif len(chart.series) > 1:
        ax.legend(fontsize="small", ncol=2 if len(chart.series) > 6 else 1)
    fig.tight_layout()
    # tight_layout leaves a placeholder layout engine behind, and savefig draws the whole figure once more before
    # each file when there is one: without it, a chart is drawn three times instead of five.
    fig.set_layout_engine(None)
    png, svg = directory / f"{chart.name}.png", directory / f"{chart.name}.svg"
    _save(fig, png)
    _save(fig, svg)
    layer = _hover_layer(fig, ax, hover)
    return Rendered(png, svg, layer)


def _save(fig: Figure, path: Path) -> None:
    """As savefig, written as every file of a run is (atomic_write_bytes: into a directory reached through no other
    user's link, replacing what was there)."""
    out = io.BytesIO()
    fig.savefig(out, format=path.suffix[1:])
    atomic_write_bytes(path, out.getvalue())


def _category_ticks(ax, categories: list) -> None:
    """Many or long category names are turned and right-aligned to their tick, so that neighbours do not overlap."""
    labels = [str(c) for c in categories]
    turn = len(labels) > 6 or sum(map(len, labels)) > 60
    ax.set_xticks(range(len(labels)), labels, rotation=45 if turn else 0, ha="right" if turn else "center",
                  rotation_mode="anchor" if turn else "default")


def _tip(chart: Chart, label, x, y) -> str:
    """What hovering a point shows: its series, value and unit, and where on the x axis it is."""
    unit = _unit(chart.ylabel)
    where = f"{chart.xlabel} {fmt(x)}" if chart.xlabel and len(chart.xlabel) <= 24 else fmt(x)
    value = f"{fmt(y)} {unit}".strip()
    return f"{label}: {value} at {where}" if len(chart.series) > 1 else f"{value} at {where}"


def _unit(axis_label: str) -> str:
    """The unit of an axis label: the last parenthesis ("p99 latency (µs)" → "µs"), or a short label as it is."""
    if axis_label.endswith(")") and "(" in axis_label:
        return axis_label[axis_label.rindex("(") + 1:-1]
    return axis_label if len(axis_label) <= 24 else ""


def _hover_layer(fig, ax, points: list[tuple]) -> str:
    """One invisible target per data point with its value as a tooltip that CSS shows on hover (no script); a point
    given (x, y, text, attributes) is a link, <a attributes>. Display coordinates are pixels at the figure's dpi with
    the origin at the bottom; the SVG's are points from the top."""
    scale = SVG_PT_PER_INCH / fig.dpi
    width, height = fig.get_size_inches() * SVG_PT_PER_INCH
    out = []
    for x, y, text, *link in points:
        dx, dy = ax.transData.transform((x, y))
        if not (0 <= dx * scale <= width and 0 <= dy * scale <= height):
            continue  # off the axes (a zero on a log axis)
        cx, cy = dx * scale, height - dy * scale
        tip_w = 6.4 * len(text)  # a digit's width in the 10 px tooltip font: tips are mostly digits (a run name, a value)
        tx = min(max(cx, tip_w / 2 + 2), width - tip_w / 2 - 2)
        ty = cy - 9 if cy > 24 else cy + 18
        point = (f'<g class="pt"><circle cx="{cx:.1f}" cy="{cy:.1f}" r="6"/>'
                 f'<text x="{tx:.1f}" y="{ty:.1f}">{escape(text)}</text></g>')
        out.append(f"<a {link[0]}>{point}</a>" if link else point)
    return "".join(out)


def _stacked(ax, chart: Chart) -> list[tuple[float, float, str]]:
    """The series stacked over a shared x (ASH's sessions by wait class); hovering shows each band's own value at
    the top of its band."""
    xs = sorted({x for points in chart.series.values() for x, _ in points})
    layers = {label: [dict(points).get(x, 0.0) for x in xs] for label, points in chart.series.items()}
    ax.stackplot(xs, *layers.values(), labels=[str(label) for label in layers], alpha=0.85)
    hover, base = [], [0.0] * len(xs)
    for label, values in layers.items():
        base = [b + v for b, v in zip(base, values)]
        step = -(-len(xs) // HOVER_POINTS)
        hover += [(x, top, _tip(chart, label, x, v)) for x, top, v in list(zip(xs, base, values))[::step] if v]
    return hover


def _bars(ax, chart: Chart, categories: list) -> list[tuple[float, float, str]]:
    n = max(1, len(chart.series))
    width = 0.8 / n
    hover = []
    for i, (label, points) in enumerate(chart.series.items()):
        values = dict(points)
        xs = [j + (i - (n - 1) / 2) * width for j in range(len(categories))]
        ax.bar(xs, [values.get(c, 0) for c in categories], width=width, label=str(label))
        hover += [(x, values[c], _tip(chart, label, c, values[c])) for x, c in zip(xs, categories) if values.get(c) is not None]
    _category_ticks(ax, categories)
    return hover


# ---- ratios with their intervals (compare's headline figures) ----------------------------------------------

@dataclass
class Ratio:
    """One row of a dot plot of ratios: B / A as a dot, its interval as a line, named on the left and said in
    words on the right."""

    label: str
    ratio: float
    low: float | None
    high: float | None
    words: str  # "1.59× faster (1.17–2.16)"
    tone: str = ""  # better | worse | changed | "" (no change, cannot tell): the dot's colour


TONES = {"better": "#1a7f37", "worse": "#b42318", "changed": "#8a6d00", "": "#5b6675"}
# The factors a ratio axis marks (and their inverses): each written exactly, so that a tick's label is its place.
RATIO_TICKS = (1.02, 1.05, 1.1, 1.2, 1.5, 2, 3, 5, 10, 20, 50, 100, 1000, 10_000, 100_000)
RATIO_LABEL_CHARS = 40  # of a row's name on the left; the whole name is in the dot's title


def cut(text: str, chars: int) -> str:
    """``text`` in at most ``chars`` characters, its end marked when cut (a label's room)."""
    return text if len(text) <= chars else text[:chars - 1].rstrip() + "…"


def ratio_text(x: float) -> str:
    """A ratio axis's tick: 1/1,000×, 0.5×, 1×, 1.05×, 20×."""
    return (f"{x:,.0f}×" if x >= 10 else f"{x:.3g}×" if x >= 1 else f"{x:.2g}×" if x >= 0.02 else f"1/{1 / x:,.0f}×")


def _ratio_ticks(limit: float) -> list[float]:
    """1× and two or three factors a side, at least a third of log(limit) apart, each with its inverse (the plot
    between the names and the words is half the chart's width)."""
    apart = math.log(limit) / 3.2
    chosen: list[float] = []
    for f in reversed([f for f in RATIO_TICKS if f <= limit]):
        if math.log(f) >= apart and (not chosen or math.log(chosen[-1]) - math.log(f) >= apart):
            chosen.append(f)
    return sorted({1.0, *chosen, *(1 / f for f in chosen)})


def render_ratios(rows: list[Ratio], title: str, directory: Path, name: str = "ratios") -> Rendered:
    """A dot plot of ratios on a log axis centred on 1× (a vertical line): one row per ratio, top to bottom, its
    interval a line through the dot. Written as SVG only (the dashboard's page shows it); the dots' layer gives each a title
    (its name and words) for hovering and for screen readers. Ratios not above 0 cannot be placed and are left
    out; an interval's end at or below 0, or infinite, is drawn to the axis's edge. The lines and dots carry ids
    (NAME-ci-I, NAME-dot-I), the 1× line NAME-one."""
    make_directories(directory)
    rows = [r for r in rows if r.ratio is not None and 0 < r.ratio < math.inf]
    fig = Figure(figsize=(8, 1.3 + 0.34 * max(len(rows), 1)), dpi=110)
    ax = fig.subplots()
    ends = [v for r in rows for v in (r.ratio, r.low, r.high) if v is not None and 0 < v < math.inf]
    limit = max([1.1, *(max(v, 1 / v) for v in ends)]) ** 1.12  # symmetric: 1× in the middle
    ax.set_xscale("log")
    ax.set_xlim(1 / limit, limit)
    ax.axvline(1, color="#3a4553", linewidth=1, gid=f"{name}-one")
    ys = list(range(len(rows)))[::-1]  # the first row at the top
    for i, (y, r) in enumerate(zip(ys, rows)):
        colour = TONES.get(r.tone, TONES[""])
        if r.low is not None and r.high is not None:
            low, high = max(r.low, 1 / limit), min(max(r.high, r.low), limit)  # 0 or ∞: to the axis's edge
            ax.plot([low, max(high, low)], [y, y], color=colour, linewidth=2.5, solid_capstyle="butt", gid=f"{name}-ci-{i}")
        ax.plot([r.ratio], [y], marker="o", markersize=7, color=colour, linestyle="none", gid=f"{name}-dot-{i}")
    ticks = _ratio_ticks(limit)
    ax.set_xticks(ticks, [ratio_text(t) for t in ticks])
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_ylim(-0.6, len(rows) - 0.4)
    ax.set_yticks([])
    # Each row's name on the left and its answer in words on the right: texts, not tick labels (a tick is four
    # artists, and drawing those was most of what a chart of 30 rows cost).
    beside = blended_transform_factory(ax.transAxes, ax.transData)
    names = [ax.text(-0.02, y, cut(r.label, RATIO_LABEL_CHARS).replace("$", r"\$"), transform=beside, ha="right",
                     va="center") for y, r in zip(ys, rows)]
    words = [ax.text(1.02, y, r.words.replace("$", r"\$"), transform=beside, ha="left", va="center",
                     color=TONES.get(r.tone, TONES[""])) for y, r in zip(ys, rows)]
    for side in ("top", "right", "left"):
        ax.spines[side].set_visible(False)
    ax.grid(True, axis="x", alpha=0.3)
    ax.set_title(textwrap.fill(title, 80))
    ax.set_xlabel("B / A (log scale): the dot, and its interval")
    _ratio_margins(fig, names, words, title_lines=ax.get_title().count("\n") + 1)
    svg = directory / f"{name}.svg"
    _save(fig, svg)
    return Rendered(None, svg, _ratio_layer(fig, ax, rows, ys))


def _ratio_margins(fig, names: list, words: list, title_lines: int) -> None:
    """Room for the names on the left, the words on the right, the title and the x axis, from the widths of those
    texts alone: tight_layout would draw the whole chart once more to find them (half of what the chart cost)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    renderer = FigureCanvasAgg(fig).get_renderer()
    width_px, height_px = fig.get_size_inches() * fig.dpi
    points = fig.dpi / 72

    def widest(labels: list) -> float:
        return max((renderer.get_text_width_height_descent(t.get_text(), t.get_fontproperties(), ismath=False)[0]
                    for t in labels if t.get_text()), default=0.0)

    pad = 12 * points
    line = 1.5 * matplotlib.rcParams["font.size"] * points
    fig.subplots_adjust(left=min(0.6, (widest(names) + pad) / width_px),
                        right=max(0.4, 1 - (widest(words) + pad) / width_px),
                        top=1 - (title_lines * 1.2 * line + pad) / height_px, bottom=(2.4 * line + pad) / height_px)


def _ratio_layer(fig, ax, rows: list[Ratio], ys: list[int]) -> str:
    """A target over each dot with its name and words as its title (shown on hover, read by screen readers), and
    its numbers as data."""
    scale = SVG_PT_PER_INCH / fig.dpi
    height = fig.get_size_inches()[1] * SVG_PT_PER_INCH
    out = []
    for r, y in zip(rows, ys):
        dx, dy = ax.transData.transform((r.ratio, y))
        said = f"{r.label}: {r.words}"
        data = "".join(f' data-{k}="{v!r}"' for k, v in (("ratio", r.ratio), ("low", r.low), ("high", r.high)) if v is not None)
        out.append(f'<g class="ratio" role="img" aria-label="{escape(said)}"{data}><title>{escape(said)}</title>'
                   f'<circle cx="{dx * scale:.1f}" cy="{height - dy * scale:.1f}" r="8" fill="transparent" '
                   'pointer-events="all"/></g>')
    return "".join(out)
