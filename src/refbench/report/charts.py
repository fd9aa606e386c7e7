"""Renders Chart descriptions to PNG and SVG with matplotlib (no display needed)."""

from __future__ import annotations

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
from matplotlib.ticker import FuncFormatter, LogFormatter, MaxNLocator  # noqa: E402

# SVG text stays text (selectable, smaller) instead of one path per glyph: a third less time per chart.
matplotlib.rcParams["svg.fonttype"] = "none"

from refbench.suites import Chart  # noqa: E402

PARALLEL_FROM = 4  # charts; fewer are not worth starting worker processes for
HOVER_POINTS = 120  # per series: every point of a sweep, every n-th of a long telemetry series (the file stays small)
SVG_PT_PER_INCH = 72  # matplotlib's SVG user units are points, whatever the figure's dpi


@dataclass
class Rendered:
    """A chart's files and its hover layer: SVG elements, one per data point, placed in the SVG file's coordinates."""

    png: Path
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
    directory.mkdir(parents=True, exist_ok=True)
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork")) as pool:
        return list(pool.map(render_figure, charts, [directory] * len(charts)))


def render_figure(chart: Chart, directory: Path) -> Rendered:
    """Writes <name>.png and <name>.svg into ``directory`` (plain files, for slides) and returns them with the hover
    layer the report lays over the inline SVG."""
    directory.mkdir(parents=True, exist_ok=True)
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
        for label, points in chart.series.items():
            xs = [categories.index(x) if categorical else x for x, _ in points]
            (line,) = ax.plot(xs, [y for _, y in points], marker="o" if len(points) <= HOVER_POINTS else None,
                              markersize=3, linewidth=1.5, label=str(label))
            if label in chart.ranges:
                ax.vlines(*zip(*chart.ranges[label]), color=line.get_color(), alpha=0.45, linewidth=2)
            step = -(-len(points) // HOVER_POINTS)
            tips = chart.tips.get(label) or [_tip(chart, label, x, y) for x, y in points]
            hover += [(px, y, tip) for px, (x, y), tip in list(zip(xs, points, tips))[::step] if y is not None]
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
    fig.savefig(png)
    fig.savefig(svg)
    layer = _hover_layer(fig, ax, hover)
    return Rendered(png, svg, layer)


def _category_ticks(ax, categories: list) -> None:
    """Many or long category names are turned and right-aligned to their tick, so that neighbours do not overlap."""
    labels = [str(c) for c in categories]
    turn = len(labels) > 6 or sum(map(len, labels)) > 60
    ax.set_xticks(range(len(labels)), labels, rotation=45 if turn else 0, ha="right" if turn else "center",
                  rotation_mode="anchor" if turn else "default")


def _tip(chart: Chart, label, x, y) -> str:
    """What hovering a point shows: its series, value and unit, and where on the x axis it is."""
    from refbench.report.html import fmt  # html imports this module for the inline charts

    unit = _unit(chart.ylabel)
    where = f"{chart.xlabel} {fmt(x)}" if chart.xlabel and len(chart.xlabel) <= 24 else fmt(x)
    value = f"{fmt(y)} {unit}".strip()
    return f"{label}: {value} at {where}" if len(chart.series) > 1 else f"{value} at {where}"


def _unit(axis_label: str) -> str:
    """The unit of an axis label: the last parenthesis ("p99 latency (µs)" → "µs"), or a short label as it is."""
    if axis_label.endswith(")") and "(" in axis_label:
        return axis_label[axis_label.rindex("(") + 1:-1]
    return axis_label if len(axis_label) <= 24 else ""


def _hover_layer(fig, ax, points: list[tuple[float, float, str]]) -> str:
    """One invisible target per data point with its value as a tooltip that CSS shows on hover (no script).
    Display coordinates are pixels at the figure's dpi with the origin at the bottom; the SVG's are points from the top."""
    scale = SVG_PT_PER_INCH / fig.dpi
    width, height = fig.get_size_inches() * SVG_PT_PER_INCH
    out = []
    for x, y, text in points:
        dx, dy = ax.transData.transform((x, y))
        if not (0 <= dx * scale <= width and 0 <= dy * scale <= height):
            continue  # off the axes (a zero on a log axis)
        cx, cy = dx * scale, height - dy * scale
        tip_w = 6.4 * len(text)  # a digit's width in the 10 px tooltip font: tips are mostly digits (a run name, a value)
        tx = min(max(cx, tip_w / 2 + 2), width - tip_w / 2 - 2)
        ty = cy - 9 if cy > 24 else cy + 18
        out.append(f'<g class="pt"><circle cx="{cx:.1f}" cy="{cy:.1f}" r="6"/>'
                   f'<text x="{tx:.1f}" y="{ty:.1f}">{escape(text)}</text></g>')
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

