"""Throughput, shaped like the public H200 serving contests: random prompts of
`input_tokens` ordinary tokens, `max_tokens` out, `requests_per_level` requests at each
concurrency, warm-up requests discarded first.

Each level's throughput is (prompt + completion tokens) / the level's wall time. The score,
`weighted_total_tok_s`, is the weighted mean of the levels' throughputs,
sum(w_i * tok_s_i) / sum(w_i), so it stays in tok/s while leaning on high concurrency.

The prompts come from one generator seeded with `seed`, so within a run no level repeats
another's prompts, but two runs with the same seed send the same prompts in the same order:
against one server, a second run's levels hit the prefix cache the first one filled (the
H200's c64 once read 13,586 tok/s that way against 11,242 on fresh prompts, 2026-12-03).
Levels measured in separate runs take a seed each (`--param seed=N`).
"""

from __future__ import annotations

import math
import random
from typing import Any, Mapping

from .context import BenchContext
from .errors import BenchError
from .prompts import prompt_source
from .results import LevelStats, SuiteOutcome
from .workload import Workload


def weighted_score(throughputs: list[float], weights: list[int]) -> float:
    return math.fsum(w * t for w, t in zip(weights, throughputs)) / sum(weights)


async def run(ctx: BenchContext, p: Mapping[str, Any]) -> SuiteOutcome:
    concurrencies, weights = list(p["concurrencies"]), list(p["weights"])
    if len(weights) != len(concurrencies):
        raise BenchError(f"throughput: {len(weights)} weights for {len(concurrencies)} "
                         f"concurrency levels; give one weight per level")
    ctx.check_fits(p["input_tokens"], p["max_tokens"], "throughput")
    rng = random.Random(p["seed"])
    source = await prompt_source(ctx.client, p["prompt_mode"], rng)

    def bodies(count: int) -> list[dict[str, Any]]:
        return [{"prompt": source.prompt(rng, p["input_tokens"]),
                 "max_tokens": p["max_tokens"], "temperature": p["temperature"]}
                for _ in range(count)]

    if p["warmup_requests"]:
        await ctx.closed_loop("warm-up", "completion", bodies(p["warmup_requests"]),
                              p["warmup_requests"])
    levels: list[LevelStats] = []
    measured = []
    for conc in concurrencies:
        results = await ctx.closed_loop(f"c{conc}", "completion",
                                        bodies(p["requests_per_level"]), conc)
        levels.append(LevelStats.of(f"c{conc}", conc, p["input_tokens"], results))
        measured += results
    metrics: dict[str, float] = {}
    for level in levels:
        metrics.update(level.metrics())
    totals = [lv.aggregate_total_tok_s for lv in levels]
    metrics["weighted_total_tok_s"] = weighted_score(totals, weights)
    metrics["peak_total_tok_s"] = max(totals)
    return SuiteOutcome(metrics, tuple(measured), tuple(levels),
                        {"prompt_mode": source.mode, "weights": weights})


WORKLOAD = Workload("throughput", frozenset(
    {"input_tokens", "max_tokens", "requests_per_level", "concurrencies", "weights",
     "warmup_requests", "temperature", "prompt_mode", "seed"}), run)
