"""Percentiles and distribution summaries of per-request measurements.

Written here rather than borrowed from numpy so the harness's one statistical definition is
visible in a few lines: linear interpolation between the closest ranks (numpy's default
"linear" method), so p50 of an even count is the mean of the two middle values.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable, Sequence


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0 <= q <= 100) of `values`; NaN when there are none."""
    if not 0.0 <= q <= 100.0:
        raise ValueError(f"percentile {q} is outside [0, 100]")
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100.0
    lo = math.floor(rank)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (rank - lo)


@dataclass(frozen=True, slots=True)
class Summary:
    """A distribution reduced to what a latency report quotes."""

    count: int
    mean: float
    p50: float
    p90: float
    p99: float
    min: float
    max: float

    @classmethod
    def of(cls, values: Iterable[float]) -> "Summary":
        xs = [float(v) for v in values]
        if not xs:
            return cls(0, math.nan, math.nan, math.nan, math.nan, math.nan, math.nan)
        return cls(len(xs), math.fsum(xs) / len(xs), percentile(xs, 50), percentile(xs, 90),
                   percentile(xs, 99), min(xs), max(xs))

    def scaled(self, factor: float) -> "Summary":
        """The same distribution in other units (seconds -> milliseconds: 1000)."""
        return Summary(self.count, self.mean * factor, self.p50 * factor, self.p90 * factor,
                       self.p99 * factor, self.min * factor, self.max * factor)

    def as_metrics(self, name: str) -> dict[str, float]:
        """Flat metrics `<name>_mean`, `<name>_p50`, ... for verdicts and the gate; a name
        with a unit suffix keeps it last (`ttft_ms` -> `ttft_p50_ms`)."""
        stem, unit = _split_unit(name)
        return {f"{stem}_{stat}{unit}": getattr(self, stat)
                for stat in ("mean", "p50", "p90", "p99")}


_UNITS = ("_ms", "_tok_s", "_s")


def _split_unit(name: str) -> tuple[str, str]:
    for unit in _UNITS:
        if name.endswith(unit):
            return name[: -len(unit)], unit
    return name, ""
