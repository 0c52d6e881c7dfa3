"""Thresholds a suite file may set (`[verdict]`: metric = { min = x } / { max = y }) and the
verdict of a finished run against them."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from .errors import BenchError

PASS, FAIL, NO_VERDICT = "pass", "fail", "none"


@dataclass(frozen=True, slots=True)
class Threshold:
    metric: str
    minimum: float | None = None
    maximum: float | None = None

    def failure(self, measured: float) -> str | None:
        """Why `measured` misses this threshold, or None when it holds. NaN never holds."""
        if math.isnan(measured):
            return f"{self.metric} was not measurable (NaN)"
        if self.minimum is not None and measured < self.minimum:
            return f"{self.metric} {measured:g} < min {self.minimum:g}"
        if self.maximum is not None and measured > self.maximum:
            return f"{self.metric} {measured:g} > max {self.maximum:g}"
        return None

    def describe(self) -> str:
        parts = [f">= {self.minimum:g}" if self.minimum is not None else "",
                 f"<= {self.maximum:g}" if self.maximum is not None else ""]
        return f"{self.metric} " + " and ".join(p for p in parts if p)


@dataclass(frozen=True, slots=True)
class Verdict:
    status: str  # PASS, FAIL, or NO_VERDICT when the suite sets no thresholds
    failures: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        return {"status": self.status, "failures": list(self.failures)}


def judge(thresholds: Sequence[Threshold], metrics: Mapping[str, float]) -> Verdict:
    """The run's verdict. A threshold on a metric the run did not report is a broken suite
    definition (or parameters that changed which metrics exist), not a failed model."""
    if not thresholds:
        return Verdict(NO_VERDICT)
    missing = [t.metric for t in thresholds if t.metric not in metrics]
    if missing:
        raise BenchError(f"the suite's [verdict] names {', '.join(missing)}, which this run "
                         f"did not report (it reported: {', '.join(sorted(metrics))})")
    failures = tuple(f for t in thresholds if (f := t.failure(float(metrics[t.metric]))))
    return Verdict(FAIL if failures else PASS, failures)
