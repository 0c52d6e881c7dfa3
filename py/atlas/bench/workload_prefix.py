"""Prefix warm-up: TTFT for a long shared system prompt, cold and then warm.

Each round opens with a system prompt no server has seen: it starts with a nonce made for
this run and round, so neither an earlier run nor an earlier round can have cached it. The
round's first request is cold; `warm_requests` more follow with the same system prompt and
different questions, so only the shared prefix can be reused. Requests are sequential:
concurrency would blur what the cache saves.
"""

from __future__ import annotations

import math
import random
import secrets
from typing import Any, Mapping

from .client import RequestResult
from .context import BenchContext
from .prompts import random_words
from .results import SuiteOutcome, request_metrics
from .stats import Summary
from .workload import Workload

QUESTIONS = ("Summarize the notes above in one sentence.",
             "Which word appears most often in the notes?",
             "Name three words from the notes.",
             "Is the word 'water' in the notes?",
             "How would you title these notes?")


def _body(system: str, question: str, p: Mapping[str, Any]) -> dict[str, Any]:
    return {"messages": [{"role": "system", "content": system},
                         {"role": "user", "content": question}],
            "max_tokens": p["max_tokens"], "temperature": p["temperature"]}


def _ttft(results: list[RequestResult]) -> Summary:
    return Summary.of(r.ttft_s for r in results if r.ttft_s is not None).scaled(1e3)


async def run(ctx: BenchContext, p: Mapping[str, Any]) -> SuiteOutcome:
    rng = random.Random(p["seed"])
    nonce = secrets.token_hex(6)
    cold, warm = [], []
    for round_no in range(p["rounds"]):
        system = (f"Session {nonce}-{round_no}. Notes: "
                  + random_words(rng, p["system_prompt_words"]))
        first = _body(system, QUESTIONS[0], p)
        rest = [_body(system, f"{QUESTIONS[(i + 1) % len(QUESTIONS)]} (#{i + 1})", p)
                for i in range(p["warm_requests"])]
        results = await ctx.sequential(f"round {round_no + 1}", "chat", [first, *rest])
        cold.append(results[0])
        warm += results[1:]
    metrics = {**_ttft(cold).as_metrics("ttft_cold_ms"),
               **_ttft(warm).as_metrics("ttft_warm_ms")}
    metrics["prompt_tokens_mean"] = request_metrics(cold)["prompt_tokens_mean"]
    warm_p50 = metrics["ttft_warm_p50_ms"]
    metrics["prefix_speedup"] = (metrics["ttft_cold_p50_ms"] / warm_p50 if warm_p50 > 0
                                 else math.nan)
    return SuiteOutcome(metrics, (*cold, *warm), info={"nonce": nonce})


WORKLOAD = Workload("prefix-warmup", frozenset(
    {"system_prompt_words", "rounds", "warm_requests", "max_tokens", "temperature", "seed"}),
    run)
