"""OpenAI routes: /v1/chat/completions and /v1/completions, streaming and not."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from . import protocol_openai as proto
from .app import api_route, begin_generation, finishing, json_response, open_sse, send_sse
from .errors import engine_failure
from .generation import Generation
from .response_stream import StreamDelta

_FINISH = {"stop_sequence": "stop"}


def _finish_reason(reason: str) -> str:
    return _FINISH.get(reason, reason)


class _CallIds:
    """OpenAI tool-call ids, one per call index of a response."""

    def __init__(self) -> None:
        self._ids: dict[int, str] = {}

    def __call__(self, index: int) -> str:
        return self._ids.setdefault(index, proto.new_id("call_"))


def _tool_call_chunks(delta: StreamDelta, ids: _CallIds) -> list[dict[str, Any]]:
    chunks = []
    for d in delta.tool_calls:
        if d.name is not None:
            chunks.append({"index": d.index, "id": ids(d.index), "type": "function",
                           "function": {"name": d.name, "arguments": d.arguments}})
        else:
            chunks.append({"index": d.index, "function": {"arguments": d.arguments}})
    return chunks


@api_route("openai")
async def chat_completions(request: web.Request) -> web.StreamResponse:
    ctx, key, spec, gen = await begin_generation(request, proto.parse_chat_request)
    rid, created, model = proto.new_id("chatcmpl-"), proto.now_s(), spec.model
    ids = _CallIds()
    with finishing(ctx, key, "openai", gen):
        if spec.stream:
            return await _stream_chat(request, gen, rid, created, model, ids)
        content, reasoning = "", ""
        async for delta in gen.deltas():
            content += delta.content
            reasoning += delta.reasoning
        outcome = gen.outcome
        if outcome.finish_reason == "error":
            raise engine_failure(outcome.error)
        calls = [{"id": ids(i), "type": "function",
                  "function": {"name": c.name, "arguments": c.arguments}}
                 for i, c in enumerate(outcome.tool_calls)]
        body = proto.chat_completion(
            rid=rid, model=model, created=created,
            content=None if calls and not content.strip() else content, reasoning=reasoning,
            tool_calls=calls, finish_reason=_finish_reason(outcome.finish_reason),
            prompt_tokens=outcome.prompt_tokens, completion_tokens=outcome.completion_tokens,
            cached_tokens=outcome.cached_tokens)
        return json_response(body)


async def _stream_chat(request: web.Request, gen: Generation, rid: str, created: int,
                       model: str, ids: _CallIds) -> web.StreamResponse:
    spec = gen.spec
    resp = await open_sse(request)

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return proto.chat_chunk(rid=rid, model=model, created=created, delta=delta,
                                finish_reason=finish, with_usage_field=spec.include_usage)

    await send_sse(resp, chunk({"role": "assistant", "content": ""}))
    async for delta in gen.deltas():
        if delta.reasoning:
            await send_sse(resp, chunk({"reasoning": delta.reasoning,
                                        "reasoning_content": delta.reasoning}))
        if delta.content:
            await send_sse(resp, chunk({"content": delta.content}))
        if delta.tool_calls:
            await send_sse(resp, chunk({"tool_calls": _tool_call_chunks(delta, ids)}))
    outcome = gen.outcome
    if outcome.finish_reason == "error":
        await send_sse(resp, engine_failure(outcome.error).openai_body())
    else:
        await send_sse(resp, chunk({}, _finish_reason(outcome.finish_reason)))
    if spec.include_usage:
        await send_sse(resp, {"id": rid, "object": "chat.completion.chunk", "created": created,
                              "model": model, "choices": [],
                              "usage": proto.usage(outcome.prompt_tokens,
                                                   outcome.completion_tokens,
                                                   outcome.cached_tokens)})
    await resp.write(b"data: [DONE]\n\n")
    await resp.write_eof()
    return resp


@api_route("openai")
async def completions(request: web.Request) -> web.StreamResponse:
    ctx, key, spec, gen = await begin_generation(request, proto.parse_completion_request)
    rid, created, model = proto.new_id("cmpl-"), proto.now_s(), spec.model
    with finishing(ctx, key, "openai", gen):
        if not spec.stream:
            text = "".join([d.content async for d in gen.deltas()])
            outcome = gen.outcome
            if outcome.finish_reason == "error":
                raise engine_failure(outcome.error)
            return json_response(proto.completion(
                rid=rid, model=model, created=created, text=text,
                finish_reason=_finish_reason(outcome.finish_reason),
                prompt_tokens=outcome.prompt_tokens,
                completion_tokens=outcome.completion_tokens,
                cached_tokens=outcome.cached_tokens))
        resp = await open_sse(request)
        async for delta in gen.deltas():
            if delta.content:
                await send_sse(resp, proto.completion(rid=rid, model=model, created=created,
                                                      text=delta.content, finish_reason=None))
        outcome = gen.outcome
        if outcome.finish_reason == "error":
            await send_sse(resp, engine_failure(outcome.error).openai_body())
        else:
            await send_sse(resp, proto.completion(
                rid=rid, model=model, created=created, text="",
                finish_reason=_finish_reason(outcome.finish_reason)))
        if spec.include_usage:
            await send_sse(resp, {"id": rid, "object": "text_completion", "created": created,
                                  "model": model, "choices": [],
                                  "usage": proto.usage(outcome.prompt_tokens,
                                                       outcome.completion_tokens,
                                                       outcome.cached_tokens)})
        await resp.write(b"data: [DONE]\n\n")
        await resp.write_eof()
        return resp
