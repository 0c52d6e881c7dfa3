"""Anthropic routes: /v1/messages (streaming events and not) and /v1/messages/count_tokens.

Streaming follows Anthropic's event sequence: message_start, then per content block
content_block_start / content_block_delta* / content_block_stop (thinking, text and
tool_use blocks in the order the model wrote them), message_delta carrying stop_reason,
stop_sequence and output usage, and message_stop.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from . import protocol_anthropic as proto
from .app import (CTX, api_route, authorize, begin_generation, finishing,
                  json_response, open_sse, read_json, send_sse)
from .errors import engine_failure
from .generation import Generation, render_prompt
from .protocol_openai import new_id


def _tool_id() -> str:
    return new_id("toolu_")


@api_route("anthropic")
async def messages(request: web.Request) -> web.StreamResponse:
    ctx, key, spec, gen = await begin_generation(request, proto.parse_messages_request)
    mid = new_id("msg_")
    with finishing(ctx, key, "anthropic", gen):
        if spec.stream:
            return await _stream(request, gen, mid)
        reasoning, text = "", ""
        async for delta in gen.deltas():
            reasoning += delta.reasoning
            text += delta.content
        outcome = gen.outcome
        if outcome.finish_reason == "error":
            raise engine_failure(outcome.error)
        content: list[dict[str, Any]] = []
        if reasoning:
            content.append({"type": "thinking", "thinking": reasoning, "signature": ""})
        if text.strip() or (text and not outcome.tool_calls):
            content.append({"type": "text", "text": text})
        content.extend(proto.tool_use_block(_tool_id(), c.name, c.arguments)
                       for c in outcome.tool_calls)
        return json_response(proto.message_response(
            mid=mid, model=spec.model, content=content,
            stop_reason=proto.STOP_REASONS[outcome.finish_reason],
            stop_sequence=outcome.stop_sequence, input_tokens=outcome.prompt_tokens,
            output_tokens=outcome.completion_tokens))


class _Blocks:
    """The open content block of a streamed message and the index of the next one."""

    def __init__(self, resp: web.StreamResponse) -> None:
        self.resp = resp
        self.kind: str | None = None
        self.index = -1

    async def open(self, kind: str, block: dict[str, Any]) -> None:
        await self.close()
        self.kind, self.index = kind, self.index + 1
        await send_sse(self.resp, {"type": "content_block_start", "index": self.index,
                                   "content_block": block}, "content_block_start")

    async def delta(self, delta: dict[str, Any]) -> None:
        await send_sse(self.resp, {"type": "content_block_delta", "index": self.index,
                                   "delta": delta}, "content_block_delta")

    async def close(self) -> None:
        if self.kind is None:
            return
        if self.kind == "thinking":
            await self.delta({"type": "signature_delta", "signature": ""})
        await send_sse(self.resp, {"type": "content_block_stop", "index": self.index},
                       "content_block_stop")
        self.kind = None


async def _stream(request: web.Request, gen: Generation, mid: str) -> web.StreamResponse:
    resp = await open_sse(request)
    outcome = gen.outcome
    start = proto.message_response(mid=mid, model=gen.spec.model, content=[], stop_reason=None,
                                   stop_sequence=None, input_tokens=outcome.prompt_tokens,
                                   output_tokens=0)
    await send_sse(resp, {"type": "message_start", "message": start}, "message_start")
    blocks = _Blocks(resp)
    blank = ""   # whitespace that opens a text block only if text follows (as non-streaming)
    async for delta in gen.deltas():
        if delta.reasoning:
            if blocks.kind != "thinking":
                await blocks.open("thinking", {"type": "thinking", "thinking": "",
                                               "signature": ""})
            await blocks.delta({"type": "thinking_delta", "thinking": delta.reasoning})
        if delta.content:
            if blocks.kind != "text" and not delta.content.strip():
                blank += delta.content
            else:
                if blocks.kind != "text":
                    await blocks.open("text", {"type": "text", "text": ""})
                await blocks.delta({"type": "text_delta", "text": blank + delta.content})
                blank = ""
        for call in delta.tool_calls:
            if call.name is not None:
                blank = ""
                await blocks.open("tool_use", {"type": "tool_use", "id": _tool_id(),
                                               "name": call.name, "input": {}})
            if call.arguments:
                await blocks.delta({"type": "input_json_delta", "partial_json": call.arguments})
    if blank and not outcome.tool_calls:
        await blocks.open("text", {"type": "text", "text": ""})
        await blocks.delta({"type": "text_delta", "text": blank})
    await blocks.close()
    if outcome.finish_reason == "error":
        await send_sse(resp, engine_failure(outcome.error).anthropic_body(), "error")
    else:
        await send_sse(resp, {"type": "message_delta",
                              "delta": {"stop_reason": proto.STOP_REASONS[outcome.finish_reason],
                                        "stop_sequence": outcome.stop_sequence},
                              "usage": {"output_tokens": outcome.completion_tokens}},
                       "message_delta")
        await send_sse(resp, {"type": "message_stop"}, "message_stop")
    await resp.write_eof()
    return resp


@api_route("anthropic")
async def count_tokens(request: web.Request) -> web.Response:
    ctx = request.app[CTX]
    authorize(request, ctx)
    spec = proto.parse_count_tokens_request(await read_json(request, ctx))
    return json_response({"input_tokens": len(render_prompt(spec, ctx).ids)})
