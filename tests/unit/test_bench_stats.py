"""The harness's percentile against numpy's (an independent implementation of the same
definition), and the flat metric names the gate and the verdicts read."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from atlas.bench.stats import Summary, percentile


@pytest.mark.parametrize("n", [1, 2, 3, 10, 101, 1000])
def test_percentile_matches_numpy_linear(n):
    rng = random.Random(n)
    values = [rng.expovariate(1.0) for _ in range(n)]
    for q in (0, 1, 25, 50, 90, 99, 99.9, 100):
        assert percentile(values, q) == pytest.approx(float(np.percentile(values, q)),
                                                      rel=1e-12, abs=1e-15)


def test_percentile_edges():
    assert math.isnan(percentile([], 50))
    assert percentile([3.0, 1.0], 50) == 2.0  # mean of the two middle values
    assert percentile([7.0], 99) == 7.0
    with pytest.raises(ValueError):
        percentile([1.0], 101)


def test_summary_and_metric_names():
    s = Summary.of([0.010, 0.020, 0.030, 0.040]).scaled(1000)
    assert (s.count, s.min, s.max) == (4, pytest.approx(10), pytest.approx(40))
    assert s.mean == pytest.approx(25) and s.p50 == pytest.approx(25)
    assert set(s.as_metrics("ttft_ms")) == {"ttft_mean_ms", "ttft_p50_ms", "ttft_p90_ms",
                                            "ttft_p99_ms"}
    assert "decode_p50_tok_s" in Summary.of([1.0]).as_metrics("decode_tok_s")
    assert "rate_p99" in Summary.of([1.0]).as_metrics("rate")
    empty = Summary.of([])
    assert empty.count == 0 and math.isnan(empty.p50)
