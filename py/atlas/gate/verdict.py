"""Scoring one run: a suite's metrics against a checkpoint's BENCH.toml thresholds."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from .bench_toml import BenchEntry
from .gates import Bound, Gate
from .records import Verdict


class MissingMetric(ValueError):
    """The suite did not report a metric the gate scores: the harness broke, not the model."""


@dataclass(frozen=True)
class Judgement:
    verdict: Verdict
    scored: Mapping[str, float]  # the gate's metrics, as measured
    failures: tuple[str, ...]


def judge(gate: Gate, entry: BenchEntry, metrics: Mapping[str, float]) -> Judgement:
    """PASS when every threshold holds, FAIL naming each that does not; UNMEASURED when the
    entry has no thresholds yet. A NaN measurement never holds (every comparison with NaN
    is false, whichever side the bound is on)."""
    missing = [name for name in gate.metrics if name not in metrics]
    if missing:
        raise MissingMetric(f"suite {gate.suite} reported no {', '.join(missing)} "
                            f"(it reported: {', '.join(sorted(metrics)) or 'nothing'})")
    scored = {name: float(metrics[name]) for name in gate.metrics}
    if not entry.measured:
        return Judgement(Verdict.UNMEASURED, scored, ())
    failures = tuple(
        _failure(name, scored[name], threshold, gate.metrics[name])
        for name, threshold in entry.metrics.items()
        if not gate.metrics[name].holds(scored[name], threshold))
    return Judgement(Verdict.FAIL if failures else Verdict.PASS, scored, failures)


def _failure(name: str, measured: float, threshold: float, bound: Bound) -> str:
    wanted = ">=" if bound is Bound.AT_LEAST else "<="
    return f"{name} {measured:g} (needs {wanted} {threshold:g})"
