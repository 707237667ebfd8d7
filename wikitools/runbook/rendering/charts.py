"""Static SVG charts drawn from run records: lines against a swept variable (with the min–max
band of repeated samples), the throughput/interactivity trade-off, and grid heat maps.

The SVG is inline in the page, so colours come from the site's CSS (classes `wiki-s0`…,
`currentColor` for axes and text) and follow the light and dark palettes. Output is
byte-deterministic: fixed formats, no ids from counters shared between charts, no dates."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from html import escape

from wikitools.runbook.rendering.templates import environment

WIDTH = 320
HEIGHT = 220
# plot area inside the viewBox
LEFT, RIGHT, TOP, BOTTOM = 48, 12, 28, 40
SERIES_MAX = 6  # distinct series classes in the stylesheet


@dataclass(frozen=True, slots=True)
class XY:
    x: float
    y: float
    low: float | None = None  # min of repeated samples
    high: float | None = None  # max of repeated samples
    label: str = ""  # shown next to the marker (e.g. the concurrency), may be empty
    noisy: bool = False


@dataclass(frozen=True, slots=True)
class Series:
    name: str
    points: tuple[XY, ...]


@dataclass(frozen=True, slots=True)
class Chart:
    title: str
    x_label: str
    y_label: str
    series: tuple[Series, ...]
    x_ticks: tuple[str, ...] = ()  # categorical x: one label per distinct x position
    log_x: bool = False
    extra_css: tuple[str, ...] = field(default=())
    # Warnings drawn inside the image under the legend, so that a copied or shared chart
    # still says what is wrong with it (a stale run, unequal run counts).
    notes: tuple[str, ...] = ()


NOTE_CHARS = 56  # characters per note line at font-size 10 in the 320-unit-wide chart


def wrap(text: str, width: int = NOTE_CHARS) -> list[str]:
    lines: list[str] = []
    for word in text.split():
        if lines and len(lines[-1]) + 1 + len(word) <= width:
            lines[-1] += " " + word
        else:
            lines.append(word)
    return lines


def _num(value: float) -> str:
    """A coordinate with at most one decimal, no trailing zeros."""
    text = f"{value:.1f}"
    return text[:-2] if text.endswith(".0") else text


def _value(value: float) -> str:
    """A measured value in a tooltip: three significant digits at least, thousands grouped."""
    return f"{value:,.1f}" if abs(value) >= 10 else f"{value:,.2f}"


def tick_label(value: float) -> str:
    """Axis numbers: 12k, 1.5k, 850, 2.5, 0.25."""
    a = abs(value)
    if a >= 10_000:
        return f"{value / 1000:,.0f}k"
    if a >= 1000:
        text = f"{value / 1000:.1f}"
        return (text[:-2] if text.endswith(".0") else text) + "k"
    if a >= 10 or value == 0:
        return f"{value:,.0f}"
    if a >= 1:
        return f"{value:.1f}".rstrip("0").rstrip(".")
    return f"{value:.2f}".rstrip("0").rstrip(".")


def nice_ticks(high: float, count: int = 4) -> list[float]:
    """0 and evenly spaced round numbers up to at least `high`."""
    if high <= 0:
        return [0.0, 1.0]
    raw = high / count
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    n = math.ceil(high / step - 1e-9)
    return [round(i * step, 10) for i in range(n + 1)]


class _Scale:
    def __init__(self, lo: float, hi: float, a: float, b: float, log: bool = False) -> None:
        self.log = log
        self.lo = math.log(lo) if log else lo
        self.hi = math.log(hi) if log else hi
        self.a, self.b = a, b

    def __call__(self, v: float) -> float:
        v = math.log(v) if self.log else v
        if self.hi == self.lo:
            return (self.a + self.b) / 2
        return self.a + (v - self.lo) / (self.hi - self.lo) * (self.b - self.a)




def _x_positions(chart: Chart) -> tuple[_Scale, list[tuple[float, str]]]:
    left, right = LEFT, WIDTH - RIGHT
    xs = sorted({p.x for s in chart.series for p in s.points})
    if chart.x_ticks:  # categorical: x is the index of the label
        n = len(chart.x_ticks)
        scale = _Scale(-0.5, n - 0.5, left, right)
        return scale, [(scale(i), t) for i, t in enumerate(chart.x_ticks)]
    if not xs:
        xs = [0.0, 1.0]
    log = chart.log_x and xs[0] > 0 and len(xs) > 1
    lo, hi = xs[0], xs[-1]
    if not log:
        ticks = nice_ticks(hi)
        lo, hi = 0.0, ticks[-1]
        pad = 0.0
        scale = _Scale(lo - pad, hi + pad, left + 6, right - 6)
        return scale, [(scale(t), tick_label(t)) for t in ticks]
    scale = _Scale(lo, hi, left + 10, right - 10, log=True)
    return scale, [(scale(x), tick_label(x)) for x in xs]


def render_chart(chart: Chart) -> str:
    """The chart as one `<svg>` element on a single line group (no blank lines, so Markdown
    keeps it as one raw HTML block)."""
    xscale, xticks = _x_positions(chart)
    values = [v for s in chart.series for p in s.points for v in (p.y, p.high) if v is not None]
    yticks = nice_ticks(max(values) if values else 1.0)
    yscale = _Scale(0.0, yticks[-1], HEIGHT - BOTTOM, TOP)
    series = []
    for i, s in enumerate(chart.series):
        pts = sorted(s.points, key=lambda p: p.x)
        coords = [(xscale(p.x), yscale(p.y)) for p in pts]
        series.append({
            "cls": f"wiki-s{i % SERIES_MAX}",
            "name": s.name,
            "path": " ".join(f"{_num(x)},{_num(y)}" for x, y in coords),
            "marks": [
                {
                    "x": _num(x), "y": _num(y), "label": p.label, "noisy": p.noisy,
                    "title": (f"{s.name}, " if len(chart.series) > 1 else "")
                    + (f"{p.label}: " if p.label else "") + _value(p.y)
                    + (f" (runs: {_value(p.low)} to {_value(p.high)})"
                       if p.low is not None and p.high is not None and p.high > p.low else ""),
                    "bar": (_num(yscale(p.low)), _num(yscale(p.high)))
                    if p.low is not None and p.high is not None and p.high > p.low else None,
                }
                for p, (x, y) in zip(pts, coords, strict=True)
            ],
        })
    legend = []
    height = HEIGHT
    if len(series) > 1:  # one row per series: names of any length stay whole
        for i, drawn in enumerate(series):
            legend.append({"cls": drawn["cls"], "name": drawn["name"], "x": LEFT,
                           "y": HEIGHT + 6 + 14 * i})
        height += 14 * len(series) + 2
    notes = []
    for line in (ln for note in chart.notes for ln in wrap(note)):
        notes.append({"x": 8, "y": height + 8, "text": line})
        height += 13
    if notes:
        height += 4
    svg = environment().get_template("chart.svg.j2").render(
        width=WIDTH, height=height, left=LEFT, right=WIDTH - RIGHT, top=TOP,
        bottom=HEIGHT - BOTTOM,
        title=chart.title, x_label=chart.x_label, y_label=chart.y_label,
        xticks=[(_num(x), t) for x, t in xticks],
        yticks=[(_num(yscale(t)), tick_label(t)) for t in yticks],
        series=series, legend=legend, notes=notes,
    )
    return _one_line(svg)


_TEXT = re.compile(r">([^<]+)<")
_INLINE = re.compile(r"\b[A-Z](?=[A-Z0-9]+\b)|[_*`\\\[\]]")


def _one_line(svg: str) -> str:
    """The SVG on one line. Inside tabs and admonitions Markdown treats raw HTML as inline
    text, so in text nodes the first letter of an acronym and Markdown punctuation become
    character references: no abbreviation tooltip or emphasis can land inside the SVG."""
    text = "".join(line.strip() for line in svg.splitlines())
    return _TEXT.sub(lambda m: ">" + _INLINE.sub(lambda c: f"&#{ord(c.group())};",
                                                 m.group(1)) + "<", text)


@dataclass(frozen=True, slots=True)
class Heat:
    """A heat map: rows × columns of values (None where not measured)."""

    title: str
    row_label: str
    col_label: str
    rows: tuple[str, ...]
    cols: tuple[str, ...]
    values: tuple[tuple[float | None, ...], ...]
    unit: str = ""


def render_heat(heat: Heat) -> str:
    cell_w = max(44, min(72, (WIDTH - LEFT - RIGHT) // max(1, len(heat.cols))))
    cell_h = 28
    width = LEFT + 16 + cell_w * len(heat.cols) + RIGHT
    height = TOP + 16 + cell_h * len(heat.rows) + 30
    nums = [v for row in heat.values for v in row if v is not None]
    lo, hi = (min(nums), max(nums)) if nums else (0.0, 1.0)
    cells = []
    for r, row in enumerate(heat.values):
        for c, v in enumerate(row):
            level = 0 if v is None or hi == lo else round((v - lo) / (hi - lo) * 4)
            cells.append({
                "x": LEFT + 16 + c * cell_w, "y": TOP + 16 + r * cell_h,
                "cls": "wiki-heat-na" if v is None else f"wiki-heat{level}",
                "text": "–" if v is None else tick_label(v),
                "title": f"{heat.row_label}={heat.rows[r]}, {heat.col_label}={heat.cols[c]}: "
                + ("not measured" if v is None else f"{v:,.1f}{heat.unit}"),
            })
    svg = environment().get_template("heat.svg.j2").render(
        width=width, height=height, left=LEFT + 16, top=TOP + 16, cell_w=cell_w, cell_h=cell_h,
        title=heat.title, row_label=heat.row_label, col_label=heat.col_label,
        rows=list(heat.rows), cols=list(heat.cols), cells=cells,
    )
    return _one_line(svg)


def figure(svgs: Sequence[str], caption: str = "") -> str:
    """Charts side by side (stacked on a phone) in one raw HTML block."""
    body = "".join(f'<div class="wiki-chart">{s}</div>' for s in svgs)
    cap = f'<p class="wiki-chart-caption">{escape(caption)}</p>' if caption else ""
    return f'<div class="wiki-charts" markdown="0">{body}{cap}</div>'


__all__ = ["XY", "Chart", "Heat", "Series", "figure", "nice_ticks", "render_chart",
           "render_heat", "tick_label", "wrap"]
