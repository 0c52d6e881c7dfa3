"""Concurrency sweep: for each input length, N streams kept busy for `rounds` requests each,
N over `concurrencies`. Reveals the scheduler and the KV allocator under load.

The gate's two numbers come from the top concurrency (every input length pooled):
`aggregate_output_tok_s`, completion tokens over those levels' wall time, and `ttft_p99_ms`,
the tail TTFT of their requests. Every level's own metrics are reported too (`c8.isl512.*`).
"""

from __future__ import annotations

import random
from typing import Any, Mapping

from .context import BenchContext
from .prompts import prompt_source
from .results import LevelStats, SuiteOutcome, request_metrics
from .workload import Workload


async def run(ctx: BenchContext, p: Mapping[str, Any]) -> SuiteOutcome:
    rng = random.Random(p["seed"])
    source = await prompt_source(ctx.client, p["prompt_mode"], rng)
    for isl in p["isls"]:
        ctx.check_fits(isl, p["osl"], f"input length {isl}")
    levels: list[LevelStats] = []
    measured = []
    top = max(p["concurrencies"])
    at_top = []
    for isl in p["isls"]:
        for conc in p["concurrencies"]:
            bodies = [{"prompt": source.prompt(rng, isl), "max_tokens": p["osl"],
                       "temperature": p["temperature"]} for _ in range(p["rounds"] * conc)]
            label = f"c{conc}.isl{isl}"
            results = await ctx.closed_loop(label, "completion", bodies, conc)
            levels.append(LevelStats.of(label, conc, isl, results))
            measured += results
            if conc == top:
                at_top += results
    metrics: dict[str, float] = {}
    for level in levels:
        metrics.update(level.metrics())
    top_levels = [lv for lv in levels if lv.concurrency == top]
    top_wall = sum(lv.wall_s for lv in top_levels)
    metrics["aggregate_output_tok_s"] = sum(lv.completion_tokens for lv in top_levels) / top_wall
    metrics["ttft_p99_ms"] = request_metrics(at_top)["ttft_p99_ms"]
    metrics["top_concurrency"] = float(top)
    return SuiteOutcome(metrics, tuple(measured), tuple(levels), {"prompt_mode": source.mode})


WORKLOAD = Workload("concurrency-sweep", frozenset(
    {"concurrencies", "isls", "osl", "rounds", "temperature", "prompt_mode", "seed"}), run)
