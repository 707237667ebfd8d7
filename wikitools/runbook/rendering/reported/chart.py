"""A line chart of a data region's table as a standalone SVG file (shown through an image link,
so it carries its own colours and a white ground: no site stylesheet reaches it). Categorical x,
one line per series, gaps where a cell is empty. Byte-deterministic."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from wikitools.runbook.rendering.charts import nice_ticks, tick_label
from wikitools.runbook.rendering.templates import environment

WIDTH, HEIGHT = 560, 320
LEFT, RIGHT, TOP, BOTTOM = 64, 16, 40, 56
LEGEND_ROW = 16
# Okabe–Ito colours: told apart with the common colour-vision deficiencies.
COLOURS = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000",
           "#999999")


@dataclass(frozen=True, slots=True)
class LineChart:
    title: str
    x_label: str
    x_ticks: Sequence[str]
    series: Sequence[tuple[str, Sequence[float | None]]]
    y_label: str = ""


def _n(v: float) -> str:
    text = f"{v:.1f}"
    return text[:-2] if text.endswith(".0") else text


def render_svg(chart: LineChart) -> str:
    legend_h = LEGEND_ROW * len(chart.series)
    height = HEIGHT + legend_h
    bottom = height - BOTTOM - legend_h
    values = [v for _, vs in chart.series for v in vs if v is not None]
    ticks = nice_ticks(max(values, default=1.0))
    top_value = ticks[-1] or 1.0
    n = max(len(chart.x_ticks), 1)
    step = (WIDTH - LEFT - RIGHT) / n

    def x(i: int) -> str:
        return _n(LEFT + step * (i + 0.5))

    def y(v: float) -> str:
        return _n(bottom - (bottom - TOP) * v / top_value)

    lines = []
    for k, (name, vs) in enumerate(chart.series):
        runs: list[list[str]] = [[]]
        points = []
        for i, v in enumerate(vs):
            if v is None:
                runs.append([])
                continue
            runs[-1].append(f"{x(i)},{y(v)}")
            points.append((x(i), y(v), tick_label(v)))
        lines.append({
            "name": name, "colour": COLOURS[k % len(COLOURS)],
            "paths": [" ".join(r) for r in runs if r], "points": points,
            "legend_y": _n(bottom + 40 + LEGEND_ROW * k),
        })
    return environment().get_template("reported_chart.svg.j2").render(
        chart=chart, width=WIDTH, height=height, left=LEFT, right=WIDTH - RIGHT, top=TOP,
        bottom=_n(bottom), lines=lines,
        y_ticks=[(y(t), tick_label(t)) for t in ticks],
        x_ticks=[(x(i), t) for i, t in enumerate(chart.x_ticks)],
        mid_x=_n((LEFT + WIDTH - RIGHT) / 2), mid_y=_n((TOP + bottom) / 2),
    )
