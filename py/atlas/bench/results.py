"""Reducing request records to numbers: per-run request metrics and per-level aggregates.

Two kinds of throughput, kept apart because they answer different questions:
* per request, `decode_tok_s` is one stream's decode rate (what a reader of that stream
  sees once tokens flow);
* per level, `aggregate_output_tok_s` is every completion token of the level over the
  level's wall time (first send to last stream end), and `aggregate_total_tok_s` counts
  prompt tokens too (what a server sells). Token counts are the server's `usage`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Sequence

from .client import RequestResult
from .stats import Summary


def request_metrics(results: Sequence[RequestResult]) -> dict[str, float]:
    """Flat latency and rate metrics over a set of requests (TTFT, time per output token,
    inter-chunk latency, end-to-end latency in ms; per-stream decode tok/s; the run's
    aggregate tok/s over its wall time)."""
    metrics: dict[str, float] = {"requests": float(len(results))}
    for name, summary in request_summaries(results).items():
        metrics.update(summary.as_metrics(name))
    metrics["prompt_tokens_mean"] = _mean([r.prompt_tokens for r in results])
    metrics["completion_tokens_mean"] = _mean([r.completion_tokens for r in results])
    wall = wall_time_s(results)
    completion = sum(r.completion_tokens for r in results)
    prompt = sum(r.prompt_tokens for r in results)
    metrics["aggregate_output_tok_s"] = completion / wall if wall > 0 else math.nan
    metrics["aggregate_total_tok_s"] = (prompt + completion) / wall if wall > 0 else math.nan
    return metrics


def request_summaries(results: Sequence[RequestResult]) -> dict[str, Summary]:
    return {
        "ttft_ms": Summary.of(r.ttft_s for r in results if r.ttft_s is not None).scaled(1e3),
        "tpot_ms": Summary.of(r.tpot_s for r in results if r.tpot_s is not None).scaled(1e3),
        "itl_ms": Summary.of(g for r in results for g in r.chunk_gaps_s).scaled(1e3),
        "latency_ms": Summary.of(r.latency_s for r in results).scaled(1e3),
        "decode_tok_s": Summary.of(r.decode_tok_s for r in results
                                   if r.decode_tok_s is not None),
    }


def _mean(values: Sequence[float]) -> float:
    return math.fsum(values) / len(values) if values else math.nan


def wall_time_s(results: Sequence[RequestResult]) -> float:
    """From the first request sent to the last stream's end."""
    if not results:
        return math.nan
    return (max(r.sent_s + r.latency_s for r in results) - min(r.sent_s for r in results))


@dataclass(frozen=True, slots=True)
class LevelStats:
    """One load level of a sweep: `concurrency` streams kept busy for `requests` requests,
    all of `input_tokens` prompt tokens (None where the prompt is text)."""

    label: str
    concurrency: int
    input_tokens: int | None
    requests: int
    wall_s: float
    prompt_tokens: int
    completion_tokens: int
    summaries: dict[str, Summary]

    @classmethod
    def of(cls, label: str, concurrency: int, input_tokens: int | None,
           results: Sequence[RequestResult]) -> "LevelStats":
        return cls(label, concurrency, input_tokens, len(results), wall_time_s(results),
                   sum(r.prompt_tokens for r in results),
                   sum(r.completion_tokens for r in results), request_summaries(results))

    @property
    def aggregate_output_tok_s(self) -> float:
        return self.completion_tokens / self.wall_s if self.wall_s > 0 else math.nan

    @property
    def aggregate_total_tok_s(self) -> float:
        tokens = self.prompt_tokens + self.completion_tokens
        return tokens / self.wall_s if self.wall_s > 0 else math.nan

    def metrics(self) -> dict[str, float]:
        """This level's metrics, each name prefixed with the level's label."""
        flat = {"aggregate_output_tok_s": self.aggregate_output_tok_s,
                "aggregate_total_tok_s": self.aggregate_total_tok_s,
                "wall_s": self.wall_s}
        for name, summary in self.summaries.items():
            flat.update(summary.as_metrics(name))
        return {f"{self.label}.{k}": v for k, v in flat.items()}

    def as_dict(self) -> dict[str, Any]:
        return {"label": self.label, "concurrency": self.concurrency,
                "input_tokens": self.input_tokens, "requests": self.requests,
                "wall_s": self.wall_s, "prompt_tokens": self.prompt_tokens,
                "completion_tokens": self.completion_tokens,
                "aggregate_output_tok_s": self.aggregate_output_tok_s,
                "aggregate_total_tok_s": self.aggregate_total_tok_s,
                **{name: {"mean": s.mean, "p50": s.p50, "p90": s.p90, "p99": s.p99}
                   for name, s in self.summaries.items()}}


@dataclass(frozen=True, slots=True)
class SuiteOutcome:
    """What a workload hands back: flat metrics (verdicts and the gate read these), the
    levels of a sweep (tables and plots), every measured request, and facts about how the
    run was made (e.g. whether prompts were token ids or words)."""

    metrics: dict[str, float]
    requests: tuple[RequestResult, ...]
    levels: tuple[LevelStats, ...] = ()
    info: dict[str, Any] | None = None
