"""Inline SVG charts: line charts (error along the depth of a network, time against batch) and
horizontal bar charts (phase times with their spread).

Colours are the Okabe-Ito palette, which stays distinguishable with the common colour-vision
deficiencies; every series also has its own marker and dash pattern and is named in text at its
end and in the legend, so nothing depends on colour. Every chart carries a <title> and <desc>
for screen readers, and its numbers are also in a table on the same page."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from shared.report.html import escape

PALETTE = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000")
DASHES = ("", "6 3", "2 3", "8 3 2 3", "1 2", "10 4")
MARKERS = ("circle", "square", "triangle", "diamond", "cross", "circle-open")


@dataclass
class Series:
    name: str
    x: Sequence[float]
    y: Sequence[float | None]  # None: no point (e.g. a tap this port lacks)
    marked: Sequence[int] = field(default_factory=tuple)  # indices to ring (e.g. first divergence)


@dataclass
class Chart:
    title: str
    x_label: str
    y_label: str
    log_y: bool = False
    log_x: bool = False
    x_ticks: Sequence[tuple[float, str]] = ()  # categorical axes: (position, label)
    width: int = 760
    height: int = 380


def _scale(values: Sequence[float], log: bool, lo_px: float, hi_px: float):
    finite = [v for v in values if v is not None and math.isfinite(v) and (v > 0 or not log)]
    if not finite:
        finite = [1.0]
    lo, hi = min(finite), max(finite)
    if log:
        lo, hi = math.log10(lo), math.log10(hi)
        lo, hi = math.floor(lo), math.ceil(hi) if math.ceil(hi) > math.floor(lo) else math.floor(lo) + 1
    elif lo == hi:
        lo, hi = lo - 1, hi + 1

    def to_px(v: float) -> float:
        t = math.log10(v) if log else v
        return lo_px + (t - lo) / (hi - lo) * (hi_px - lo_px)

    return to_px, lo, hi


def _marker(kind: str, x: float, y: float, colour: str) -> str:
    s = 4.5
    if kind == "square":
        return f'<rect x="{x - s:.1f}" y="{y - s:.1f}" width="{2 * s}" height="{2 * s}" fill="{colour}"/>'
    if kind == "triangle":
        pts = f"{x:.1f},{y - s:.1f} {x - s:.1f},{y + s:.1f} {x + s:.1f},{y + s:.1f}"
        return f'<polygon points="{pts}" fill="{colour}"/>'
    if kind == "diamond":
        pts = f"{x:.1f},{y - s:.1f} {x + s:.1f},{y:.1f} {x:.1f},{y + s:.1f} {x - s:.1f},{y:.1f}"
        return f'<polygon points="{pts}" fill="{colour}"/>'
    if kind == "cross":
        return (f'<path d="M{x - s:.1f},{y - s:.1f}L{x + s:.1f},{y + s:.1f}M{x - s:.1f},{y + s:.1f}'
                f'L{x + s:.1f},{y - s:.1f}" stroke="{colour}" stroke-width="2"/>')
    fill = "#fff" if kind == "circle-open" else colour
    return f'<circle cx="{x:.1f}" cy="{y:.1f}" r="{s}" fill="{fill}" stroke="{colour}" stroke-width="1.5"/>'


def line_chart(chart: Chart, series: Sequence[Series]) -> str:
    longest = max((len(text) for _, text in chart.x_ticks), default=6)
    extra = int(4.5 * longest)  # room for the slanted tick labels
    chart = Chart(**{**chart.__dict__, "height": chart.height + extra})
    left, right, top, bottom = 78, 150, 34, 64 + extra
    w, h = chart.width, chart.height
    xs = [x for s in series for x in s.x]
    ys = [y for s in series for y in s.y if y is not None]
    to_x, x_lo, x_hi = _scale(xs, chart.log_x, left, w - right)
    to_y, y_lo, y_hi = _scale(ys, chart.log_y, h - bottom, top)
    out = [_open(chart), _axes(chart, left, right, top, bottom)]
    out += _y_ticks(chart, to_y, y_lo, y_hi, left, w - right)
    out += _x_ticks(chart, to_x, x_lo, x_hi, h - bottom)
    for i, s in enumerate(series):
        colour, dash, marker = PALETTE[i % 8], DASHES[i % 6], MARKERS[i % 6]
        points = [(to_x(x), to_y(y)) for x, y in zip(s.x, s.y, strict=True)
                  if y is not None and math.isfinite(y) and (y > 0 or not chart.log_y)]
        if not points:
            continue
        path = " ".join(f"{'M' if j == 0 else 'L'}{px:.1f},{py:.1f}" for j, (px, py) in enumerate(points))
        out.append(f'<g><title>{escape(s.name)}</title><path d="{path}" fill="none" stroke="{colour}" '
                   f'stroke-width="2" stroke-dasharray="{dash}"/>')
        out += [_marker(marker, px, py, colour) for px, py in points]
        for j in s.marked:
            if j < len(s.y) and s.y[j] is not None:
                px, py = to_x(s.x[j]), to_y(s.y[j])
                out.append(f'<circle cx="{px:.1f}" cy="{py:.1f}" r="9" fill="none" stroke="#000" '
                           f'stroke-width="2"/><text x="{px + 11:.1f}" y="{py - 10:.1f}" '
                           f'font-size="11">first over budget</text>')
        lx, ly = points[-1]
        out.append(f'<text x="{min(lx + 8, w - right + 6):.1f}" y="{ly + 4:.1f}" font-size="12" '
                   f'fill="#1b1b1b">{escape(s.name)}</text></g>')
    out.append(_legend(series, left, h - 12))
    return "".join(out) + "</svg>"


def bar_chart(chart: Chart, labels: Sequence[str], values: Sequence[float],
              spread: Sequence[tuple[float, float]] | None = None) -> str:
    """Horizontal bars (log axis when `chart.log_y`: here the value axis), one per label."""
    left, right, top, bottom = max(120, 7 * max((len(x) for x in labels), default=10) + 16), 40, 34, 70
    row = 22
    h = top + bottom + row * len(labels)
    chart = Chart(**{**chart.__dict__, "height": h, "x_label": chart.y_label, "y_label": ""})
    to_v, v_lo, v_hi = _scale([v for v in values if v] + [lo for lo, _ in spread or []] +
                              [hi for _, hi in spread or []], chart.log_y, left, chart.width - right)
    out = [_open(chart), _axes(chart, left, right, top, bottom)]
    out += _x_ticks(Chart(**{**chart.__dict__, "log_x": chart.log_y, "x_ticks": ()}), to_v, v_lo, v_hi,
                    h - bottom)
    base = left
    for i, (label, value) in enumerate(zip(labels, values, strict=True)):
        y = top + i * row + 3
        out.append(f'<text x="{left - 6}" y="{y + 12}" font-size="12" '
                   f'text-anchor="end">{escape(label)}</text>')
        if not value or (chart.log_y and value <= 0):
            out.append(f'<text x="{left + 4}" y="{y + 12}" font-size="12">n/a</text>')
            continue
        x = to_v(value)
        out.append(f'<rect x="{base}" y="{y}" width="{max(1.0, x - base):.1f}" height="{row - 8}" '
                   f'fill="{PALETTE[0]}"><title>{escape(label)}: {value:.3g}</title></rect>')
        if spread:
            lo, hi = spread[i]
            if lo and hi:
                cy = y + (row - 8) / 2
                out.append(f'<path d="M{to_v(lo):.1f},{cy:.1f}H{to_v(hi):.1f}" stroke="#000" '
                           'stroke-width="1.5"/>')
    return "".join(out) + "</svg>"


def _open(chart: Chart) -> str:
    return (f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {chart.width} {chart.height}" '
            f'role="img" font-family="system-ui, sans-serif"><title>{escape(chart.title)}</title>'
            f"<desc>{escape(chart.y_label)} against {escape(chart.x_label)}</desc>"
            f'<rect width="100%" height="100%" fill="#fff"/>'
            f'<text x="8" y="20" font-size="14" font-weight="600">{escape(chart.title)}</text>')


def _axes(chart: Chart, left: int, right: int, top: int, bottom: int) -> str:
    w, h = chart.width, chart.height
    return (f'<path d="M{left},{top}V{h - bottom}H{w - right}" fill="none" stroke="#333"/>'
            f'<text x="{(left + w - right) / 2:.0f}" y="{h - 30}" font-size="12" '
            f'text-anchor="middle">{escape(chart.x_label)}</text>'
            f'<text transform="translate(16,{(top + h - bottom) / 2:.0f}) rotate(-90)" font-size="12" '
            f'text-anchor="middle">{escape(chart.y_label)}</text>')


def _y_ticks(chart: Chart, to_y, lo: float, hi: float, x0: float, x1: float) -> list[str]:
    values = [10.0**e for e in range(int(lo), int(hi) + 1)] if chart.log_y else _nice(lo, hi)
    return [f'<line x1="{x0}" x2="{x1}" y1="{to_y(v):.1f}" y2="{to_y(v):.1f}" stroke="#e4e4e4"/>'
            f'<text x="{x0 - 6}" y="{to_y(v) + 4:.1f}" font-size="11" text-anchor="end">{v:.3g}</text>'
            for v in values]


def _x_ticks(chart: Chart, to_x, lo: float, hi: float, y0: float) -> list[str]:
    if chart.x_ticks:
        ticks = list(chart.x_ticks)
    else:
        values = [10.0**e for e in range(int(lo), int(hi) + 1)] if chart.log_x else _nice(lo, hi)
        ticks = [(v, f"{v:.3g}") for v in values]
    step = max(1, len(ticks) // 24)  # keep labels legible on long tap lists
    return [f'<text x="{to_x(v):.1f}" y="{y0 + 14}" font-size="10" text-anchor="end" '
            f'transform="rotate(-35 {to_x(v):.1f} {y0 + 14})">{escape(text)}</text>'
            for v, text in ticks[::step]]


def _nice(lo: float, hi: float, count: int = 5) -> list[float]:
    span = hi - lo
    step = 10 ** math.floor(math.log10(span / count)) if span > 0 else 1.0
    for factor in (1, 2, 5, 10):
        if span / (step * factor) <= count:
            step *= factor
            break
    start = math.ceil(lo / step) * step
    return [start + i * step for i in range(int((hi - start) / step) + 1)]


def _legend(series: Sequence[Series], x: float, y: float) -> str:
    parts = []
    for i, s in enumerate(series):
        cx = x + i * 150
        parts.append(f'<line x1="{cx}" x2="{cx + 24}" y1="{y}" y2="{y}" stroke="{PALETTE[i % 8]}" '
                     f'stroke-width="2" stroke-dasharray="{DASHES[i % 6]}"/>'
                     + _marker(MARKERS[i % 6], cx + 12, y, PALETTE[i % 8])
                     + f'<text x="{cx + 30}" y="{y + 4}" font-size="12">{escape(s.name)}</text>')
    return "".join(parts)
