"""A stored sweep as an SVG chart, drawn by hand: tok/s (top) and TTFT (bottom) against
concurrency, one line per input length and statistic.

Concurrency is on a log2 axis (sweeps double it); y axes start at zero so a chart never
exaggerates a difference. Missing values (NaN stored as null) leave a gap, not a zero.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence
from xml.sax.saxutils import escape

from .errors import BenchError

WIDTH, PANEL_HEIGHT = 840, 300
LEFT, RIGHT, TOP, BOTTOM = 80, 250, 50, 50
COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#17becf")


@dataclass(frozen=True)
class Series:
    name: str
    points: tuple[tuple[int, float | None], ...]  # (concurrency, value)
    dashed: bool = False


def nice_ceiling(value: float) -> float:
    """The smallest of 1, 2, 5 x 10^k at or above `value` (1 for nothing positive)."""
    if not value > 0:
        return 1.0
    power = 10.0 ** math.floor(math.log10(value))
    return next(m * power for m in (1, 2, 5, 10) if m * power >= value * (1 - 1e-12))


def _series(levels: Sequence[Mapping[str, Any]]) -> tuple[list[Series], list[Series]]:
    lengths = sorted({lv.get("input_tokens") for lv in levels}, key=lambda v: (v is None, v))
    rates: list[Series] = []
    ttfts: list[Series] = []
    for length in lengths:
        rows = sorted((lv for lv in levels if lv.get("input_tokens") == length),
                      key=lambda lv: lv["concurrency"])
        tag = f" (isl {length})" if len(lengths) > 1 and length is not None else ""
        rates.append(Series(f"output tok/s{tag}", tuple(
            (lv["concurrency"], lv.get("aggregate_output_tok_s")) for lv in rows)))
        rates.append(Series(f"prompt+output tok/s{tag}", tuple(
            (lv["concurrency"], lv.get("aggregate_total_tok_s")) for lv in rows), True))
        ttfts.append(Series(f"TTFT p50{tag}", tuple(
            (lv["concurrency"], (lv.get("ttft_ms") or {}).get("p50")) for lv in rows)))
        ttfts.append(Series(f"TTFT p99{tag}", tuple(
            (lv["concurrency"], (lv.get("ttft_ms") or {}).get("p99")) for lv in rows), True))
    return rates, ttfts


def sweep_svg(run: Mapping[str, Any]) -> str:
    """The chart of a stored run that has concurrency levels; BenchError for one without."""
    levels = run.get("levels") or []
    if not levels:
        raise BenchError(f"run {run.get('run_id')} ({run.get('suite')}) has no concurrency "
                         f"levels to plot; plot a concurrency-sweep or throughput run")
    concurrencies = sorted({int(lv["concurrency"]) for lv in levels})
    rates, ttfts = _series(levels)
    height = TOP + 2 * PANEL_HEIGHT + BOTTOM
    title = (f"{run.get('suite')} — {run.get('target', {}).get('model')} — {run.get('run_id')}"
             f" ({run.get('created_at')})")
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
             f'viewBox="0 0 {WIDTH} {height}" font-family="sans-serif" font-size="12">',
             f'<rect width="{WIDTH}" height="{height}" fill="white"/>',
             f'<text x="{WIDTH / 2}" y="22" text-anchor="middle" font-size="14">'
             f'{escape(title)}</text>']
    parts += _panel(rates, "tokens / s", concurrencies, TOP)
    parts += _panel(ttfts, "TTFT (ms)", concurrencies, TOP + PANEL_HEIGHT)
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def _panel(series: Sequence[Series], y_label: str, concurrencies: Sequence[int],
           top: float) -> list[str]:
    x0, x1 = LEFT, WIDTH - RIGHT
    y0, y1 = top + PANEL_HEIGHT - BOTTOM, top + 10  # y0 is the bottom of the plot area
    values = [v for s in series for _, v in s.points if v is not None and math.isfinite(v)]
    y_max = nice_ceiling(max(values, default=0.0))
    lo, hi = math.log2(min(concurrencies)), math.log2(max(concurrencies))

    def x_of(conc: int) -> float:
        return (x0 + x1) / 2 if hi == lo else x0 + (math.log2(conc) - lo) / (hi - lo) * (x1 - x0)

    def y_of(value: float) -> float:
        return y0 - value / y_max * (y0 - y1)

    out = [f'<line x1="{x0}" y1="{y0}" x2="{x1}" y2="{y0}" stroke="black"/>',
           f'<line x1="{x0}" y1="{y0}" x2="{x0}" y2="{y1}" stroke="black"/>',
           f'<text x="{(x0 + x1) / 2}" y="{y0 + 35}" text-anchor="middle">concurrency</text>',
           f'<text x="20" y="{(y0 + y1) / 2}" text-anchor="middle" '
           f'transform="rotate(-90 20 {(y0 + y1) / 2})">{escape(y_label)}</text>']
    for conc in concurrencies:
        x = x_of(conc)
        out.append(f'<line x1="{x:.1f}" y1="{y0}" x2="{x:.1f}" y2="{y0 + 5}" stroke="black"/>')
        out.append(f'<text x="{x:.1f}" y="{y0 + 18}" text-anchor="middle">{conc}</text>')
    for i in range(6):
        value = y_max * i / 5
        y = y_of(value)
        out.append(f'<line x1="{x0 - 5}" y1="{y:.1f}" x2="{x1}" y2="{y:.1f}" '
                   f'stroke="#dddddd"/>')
        out.append(f'<text x="{x0 - 8}" y="{y + 4:.1f}" text-anchor="end">{value:g}</text>')
    for index, s in enumerate(series):
        color = COLORS[index % len(COLORS)]
        dash = ' stroke-dasharray="6 4"' if s.dashed else ""
        for stretch in _runs(s.points):
            coords = " ".join(f"{x_of(c):.1f},{y_of(v):.1f}" for c, v in stretch)
            out.append(f'<polyline points="{coords}" fill="none" stroke="{color}" '
                       f'stroke-width="2"{dash}/>')
            out += [f'<circle cx="{x_of(c):.1f}" cy="{y_of(v):.1f}" r="3" fill="{color}"/>'
                    for c, v in stretch]
        ly = y1 + 14 + 18 * index
        out.append(f'<line x1="{x1 + 15}" y1="{ly - 4}" x2="{x1 + 40}" y2="{ly - 4}" '
                   f'stroke="{color}" stroke-width="2"{dash}/>')
        out.append(f'<text x="{x1 + 45}" y="{ly}">{escape(s.name)}</text>')
    return out


def _runs(points: Sequence[tuple[int, float | None]]) -> list[list[tuple[int, float]]]:
    """Consecutive stretches of finite values: a missing value breaks the line."""
    runs: list[list[tuple[int, float]]] = [[]]
    for conc, value in points:
        if value is None or not math.isfinite(value):
            runs.append([])
        else:
            runs[-1].append((conc, value))
    return [r for r in runs if r]
