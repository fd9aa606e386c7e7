"""Renders Chart descriptions to PNG and SVG with matplotlib (no display needed)."""

from __future__ import annotations

import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
# SVG text stays text (selectable, smaller) instead of one path per glyph: a third less time per chart.
matplotlib.rcParams["svg.fonttype"] = "none"
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import LogFormatter, MaxNLocator  # noqa: E402

from refbench.suites import Chart  # noqa: E402

PARALLEL_FROM = 4  # charts; fewer are not worth starting worker processes for


class PlainLogTicks(LogFormatter):
    """Log-axis ticks as 100 and 1,000 rather than the default 10^2 and 10^3: easier to read, and the default's math
    text is parsed again on every draw, which was a fifth of what a chart cost."""

    def _num_to_string(self, x, vmin, vmax):
        return f"{x:,.0f}" if x >= 1 else f"{x:g}"


def render_all(charts: list[Chart], directory: Path) -> list[Path]:
    """Renders charts on every CPU: matplotlib takes a few tenths of a second per figure, and the paper's full
    device sweep alone has 24 of them. The workers are forked, so they start with matplotlib already imported."""
    workers = min(len(charts), os.cpu_count() or 1)
    if len(charts) < PARALLEL_FROM or workers < 2:
        return [render(c, directory) for c in charts]
    directory.mkdir(parents=True, exist_ok=True)
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork")) as pool:
        return list(pool.map(render, charts, [directory] * len(charts)))


def render(chart: Chart, directory: Path) -> Path:
    """Writes <name>.png and <name>.svg into ``directory``; returns the PNG path."""
    directory.mkdir(parents=True, exist_ok=True)
    if chart.kind == "sheet":
        return _sheet(chart, directory)
    fig, ax = plt.subplots(figsize=(8, 4.5), dpi=110)
    categorical = any(isinstance(x, str) for points in chart.series.values() for x, _ in points)
    categories: list = []
    if categorical:
        for points in chart.series.values():
            for x, _ in points:
                if x not in categories:
                    categories.append(x)
    if chart.kind == "bar":
        _bars(ax, chart, categories if categorical else sorted({x for p in chart.series.values() for x, _ in p}))
    else:
        for label, points in chart.series.items():
            xs = [categories.index(x) if categorical else x for x, _ in points]
            ax.plot(xs, [y for _, y in points], marker="o", markersize=3, linewidth=1.5, label=str(label))
        if categorical:
            ax.set_xticks(range(len(categories)), [str(c) for c in categories], rotation=45 if len(categories) > 6 else 0)
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
    ax.set_title(chart.title)
    ax.set_xlabel(chart.xlabel)
    ax.set_ylabel(chart.ylabel)
    ax.grid(True, alpha=0.3)
    if len(chart.series) > 1:
        ax.legend(fontsize="small", ncol=2 if len(chart.series) > 6 else 1)
    fig.tight_layout()
    png = directory / f"{chart.name}.png"
    fig.savefig(png)
    fig.savefig(directory / f"{chart.name}.svg")
    plt.close(fig)
    return png


def _bars(ax, chart: Chart, categories: list) -> None:
    n = max(1, len(chart.series))
    width = 0.8 / n
    for i, (label, points) in enumerate(chart.series.items()):
        values = dict(points)
        xs = [j + (i - (n - 1) / 2) * width for j in range(len(categories))]
        ax.bar(xs, [values.get(c, 0) for c in categories], width=width, label=str(label))
    ax.set_xticks(range(len(categories)), [str(c) for c in categories], rotation=45 if len(categories) > 6 else 0)


def _sheet(chart: Chart, directory: Path) -> Path:
    """A one-page sheet: each series is a titled section of (label, value) lines, like a certification table."""
    lines = sum(len(points) + 2 for points in chart.series.values()) + 2
    fig = plt.figure(figsize=(10, 0.26 * lines + 0.4), dpi=110)
    y = 1.0
    step = 1.0 / lines
    fig.text(0.03, y - step, chart.title, fontsize=13, weight="bold", va="top")
    y -= 2 * step
    for section, points in chart.series.items():
        fig.text(0.03, y - step * 0.2, section, fontsize=10.5, weight="bold", va="top", color="#1f4e79")
        y -= step
        for label, value in points:
            fig.text(0.05, y - step * 0.2, str(label), fontsize=9, va="top")
            fig.text(0.42, y - step * 0.2, f"{value:,}" if isinstance(value, (int, float)) else str(value), fontsize=9,
                     va="top", weight="bold")
            y -= step
        y -= step
    png = directory / f"{chart.name}.png"
    fig.savefig(png)
    fig.savefig(directory / f"{chart.name}.svg")
    plt.close(fig)
    return png
