"""One fixed chat prompt, one request at a time: the single-stream numbers (`short`,
`long-output`). `output_tok_s` is the median per-stream decode rate, the figure the
decode-floor gate bounds."""

from __future__ import annotations

import math
from typing import Any, Mapping

from .context import BenchContext
from .errors import BenchError
from .results import SuiteOutcome, request_metrics
from .workload import Workload


async def run(ctx: BenchContext, p: Mapping[str, Any]) -> SuiteOutcome:
    body = {"messages": [{"role": "user", "content": p["prompt"]}],
            "max_tokens": p["max_tokens"], "temperature": p["temperature"]}
    if p["warmup_requests"]:
        await ctx.sequential("warm-up", "chat", [body] * p["warmup_requests"])
    results = await ctx.sequential("requests", "chat", [body] * p["requests"])
    metrics = request_metrics(results)
    if math.isnan(metrics["decode_p50_tok_s"]):
        raise BenchError("no request generated two tokens, so there is no decode rate to "
                         "report; raise max_tokens or check the server's stop settings")
    metrics["output_tok_s"] = metrics["decode_p50_tok_s"]
    return SuiteOutcome(metrics, tuple(results))


WORKLOAD = Workload("fixed-prompt", frozenset(
    {"prompt", "max_tokens", "temperature", "requests", "warmup_requests"}), run)
