"""Tool calling: one tool with a known schema, and the time until the call is complete.

"Complete" is the chunk carrying finish_reason: only then may a client act on the call
(the arguments may still be streaming until it). A request counts as a correct call when
it finished with `tool_calls` and made exactly one call to the tool whose arguments parse as
a JSON object with the required string `location`. `tool_call_success_rate` is the share of
correct calls (a suite threshold usually requires 1.0); timings cover the correct calls.
"""

from __future__ import annotations

import json
import math
from typing import Any, Mapping

from .client import RequestResult
from .context import BenchContext
from .results import SuiteOutcome, request_metrics
from .stats import Summary
from .workload import Workload

TOOL_NAME = "get_weather"
TOOL = {"type": "function", "function": {
    "name": TOOL_NAME,
    "description": "Get the current weather in a city.",
    "parameters": {"type": "object",
                   "properties": {"location": {"type": "string",
                                               "description": "City name, e.g. Paris"},
                                  "unit": {"type": "string",
                                           "enum": ["celsius", "fahrenheit"]}},
                   "required": ["location"]}}}


def is_correct_call(result: RequestResult) -> bool:
    if result.finish_reason != "tool_calls" or len(result.tool_calls) != 1:
        return False
    call = result.tool_calls[0]
    try:
        args = json.loads(call.arguments)
    except json.JSONDecodeError:
        return False
    return (call.name == TOOL_NAME and isinstance(args, dict)
            and isinstance(args.get("location"), str))


async def run(ctx: BenchContext, p: Mapping[str, Any]) -> SuiteOutcome:
    body = {"messages": [{"role": "user", "content": p["prompt"]}], "tools": [TOOL],
            "tool_choice": "auto", "max_tokens": p["max_tokens"],
            "temperature": p["temperature"]}
    results = await ctx.sequential("requests", "chat", [body] * p["requests"])
    correct = [r for r in results if is_correct_call(r)]
    metrics = request_metrics(results)
    metrics.update(Summary.of(r.finish_s for r in correct if r.finish_s is not None)
                   .scaled(1e3).as_metrics("tool_call_ms"))
    metrics.update(Summary.of(r.first_tool_s for r in correct if r.first_tool_s is not None)
                   .scaled(1e3).as_metrics("tool_call_start_ms"))
    metrics["tool_call_success_rate"] = len(correct) / len(results) if results else math.nan
    info = {"finish_reasons": sorted({str(r.finish_reason) for r in results})}
    return SuiteOutcome(metrics, tuple(results), info=info)


WORKLOAD = Workload("tool-call", frozenset(
    {"prompt", "requests", "max_tokens", "temperature"}), run)
