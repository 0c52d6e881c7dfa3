"""The gates: named benchmark runs whose records a change must not silently outlive.

A gate names the benchmark-harness suite it runs and the metrics it scores (each with the
direction a threshold bounds). Thresholds are not here: they are per
checkpoint, in `kernels/<hw>/<model>/BENCH.toml`, beside the model they describe.

Every gate is either required (an open one fails `atlas gate check`) or excused with a written
reason; a gate that is neither cannot be constructed, so "optional because nobody decided"
does not exist.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from types import MappingProxyType
from typing import Mapping


class Bound(enum.Enum):
    """Which side of its threshold a metric must land on."""

    AT_LEAST = "at_least"  # throughput-like: measured >= threshold
    AT_MOST = "at_most"  # latency-like: measured <= threshold

    def holds(self, measured: float, threshold: float) -> bool:
        if self is Bound.AT_LEAST:
            return measured >= threshold
        return measured <= threshold


@dataclass(frozen=True)
class Gate:
    """One benchmark gate. `metrics` maps each scored metric to its bound; suite parameters
    are the harness's defaults unless a BENCH.toml entry (per checkpoint) or the command line
    overrides them, and the record stores the ones used."""

    name: str
    suite: str
    description: str
    metrics: Mapping[str, Bound]
    required: bool = True
    excuse: str = ""

    def __post_init__(self) -> None:
        if not self.metrics:
            raise ValueError(f"gate {self.name!r} scores no metric")
        if self.required and self.excuse:
            raise ValueError(f"gate {self.name!r} is required; an excuse would be ignored")
        if not self.required and not self.excuse.strip():
            raise ValueError(f"gate {self.name!r} is not required, so it must say why")
        object.__setattr__(self, "metrics", MappingProxyType(dict(self.metrics)))


GATES: tuple[Gate, ...] = (
    Gate(
        name="decode-floor",
        suite="long-output",
        description="single-stream decode speed: median output tok/s at concurrency 1",
        metrics={"output_tok_s": Bound.AT_LEAST},
    ),
    Gate(
        name="concurrency-sweep",
        suite="concurrency-sweep",
        description="aggregate output tok/s and tail TTFT under N parallel streams",
        metrics={"aggregate_output_tok_s": Bound.AT_LEAST, "ttft_p99_ms": Bound.AT_MOST},
    ),
    Gate(
        name="ttft-cold",
        suite="prefix-warmup",
        description="time to first token for a long system prompt the prefix cache has not seen",
        metrics={"ttft_cold_p50_ms": Bound.AT_MOST},
    ),
    Gate(
        name="ttft-warm",
        suite="prefix-warmup",
        description="time to first token when the shared system prompt is already cached",
        metrics={"ttft_warm_p50_ms": Bound.AT_MOST},
    ),
    Gate(
        name="kernel-table",
        suite="kernel-table",
        description="per-kernel micro-benchmarks against the PyTorch equivalents on one GPU",
        metrics={"speedup_min": Bound.AT_LEAST, "speedup_geomean": Bound.AT_LEAST},
        required=False,
        excuse=("the table exists to find kernels that lose to PyTorch and to rank work; "
                "what a kernel change does to serving is already gated end to end by "
                "decode-floor, concurrency-sweep and the TTFT gates, which run the same PTX"),
    ),
)

GATE_NAMES: tuple[str, ...] = tuple(g.name for g in GATES)


def gate_by_name(name: str) -> Gate:
    """The gate called `name`; an unknown name is an error listing the gates that exist."""
    for gate in GATES:
        if gate.name == name:
            return gate
    raise ValueError(f"unknown gate {name!r}; gates: {', '.join(GATE_NAMES)}")
