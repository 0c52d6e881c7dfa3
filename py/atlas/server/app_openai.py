"""OpenAI routes: /v1/chat/completions and /v1/completions, streaming and not, with `n`
choices (see choices.py) and token logprobs (see logprobs.py): the generated tokens', an
echoed prompt's, and vLLM's `prompt_logprobs`; /v1/embeddings (see embeddings.py)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass, field, replace
from typing import Any, Callable

from aiohttp import web

from . import protocol_openai as proto
from .app import (CTX, api_route, authorize, begin_generation, finishing, json_response,
                  open_sse, read_json, send_sse, start_generation)
from .choices import Choices
from .context import ServerContext
from .embeddings import embedding_vector, encode_embedding
from .generation import Generation
from .errors import engine_failure
from .logprobs import LogprobFormatter, echoed_prompt
from ..model.batch import TokenLogprobs
from .request_spec import GenerationSpec
from .response_stream import StreamDelta

_FINISH = {"stop_sequence": "stop"}


def _finish_reason(reason: str) -> str:
    return _FINISH.get(reason, reason)


class _CallIds:
    """OpenAI tool-call ids, one per (choice, call index) of a response."""

    def __init__(self) -> None:
        self._ids: dict[tuple[int, int], str] = {}

    def __call__(self, choice: int, index: int) -> str:
        return self._ids.setdefault((choice, index), proto.new_id("call_"))


def _tool_call_chunks(choice: int, delta: StreamDelta, ids: _CallIds) -> list[dict[str, Any]]:
    chunks = []
    for d in delta.tool_calls:
        if d.name is not None:
            chunks.append({"index": d.index, "id": ids(choice, d.index), "type": "function",
                           "function": {"name": d.name, "arguments": d.arguments}})
        else:
            chunks.append({"index": d.index, "function": {"arguments": d.arguments}})
    return chunks


@dataclass(slots=True)
class _Collected:
    """One choice's whole output (non-streaming responses)."""

    content: str = ""
    reasoning: str = ""
    logprobs: list[TokenLogprobs] = field(default_factory=list)


async def _collect(choices: Choices) -> list[_Collected]:
    got = [_Collected() for _ in choices.gens]
    async for index, delta in choices.events():
        if delta is not None:
            got[index].content += delta.content
            got[index].reasoning += delta.reasoning
            got[index].logprobs += delta.logprobs
    for outcome in choices.outcomes:
        if outcome.finish_reason == "error":
            raise engine_failure(outcome.error)
    return got


def _usage(choices: Choices) -> dict[str, Any]:
    return proto.usage(*choices.usage_counts())


async def _send_choice_end(resp: web.StreamResponse, choices: Choices, index: int,
                           final: Callable[[str], dict[str, Any]]) -> None:
    """Choice `index` ended: its final chunk (`final(finish_reason)`), or the error."""
    outcome = choices.gens[index].outcome
    if outcome.finish_reason == "error":
        await send_sse(resp, engine_failure(outcome.error).openai_body())
    else:
        await send_sse(resp, final(_finish_reason(outcome.finish_reason)))


@contextlib.contextmanager
def _finishing_all(ctx: ServerContext, key: str, choices: Choices):
    """`finishing` for every choice: each ends with its own log line and counters."""
    with contextlib.ExitStack() as stack:
        for gen in choices.gens:
            stack.enter_context(finishing(ctx, key, "openai", gen))
        yield


def _prompt_logprobs(spec: GenerationSpec, fmt: LogprobFormatter, choices: Choices,
                     index: int) -> list[Any] | None:
    """vLLM's `prompt_logprobs` of choice `index`'s prompt, when the request asked."""
    if spec.prompt_logprobs is None:
        return None
    ids, logprobs = choices.prompt_logprobs(index)
    return fmt.prompt(ids, logprobs or (), spec.prompt_logprobs)


def _completion_logprobs(spec: GenerationSpec, fmt: LogprobFormatter, choices: Choices,
                         index: int, generated: list[TokenLogprobs], text_offset: int
                         ) -> dict[str, Any] | None:
    """A legacy choice's `logprobs`: its echoed prompt's tokens (with echo), then these
    generated ones."""
    if spec.logprobs is None:
        return None
    entries: list[TokenLogprobs | int] = []
    if spec.echo:
        ids, logprobs = choices.prompt_logprobs(index)
        entries = echoed_prompt(ids, logprobs or (), spec.logprobs)
    return fmt.completion(entries + generated, text_offset)


@api_route("openai")
async def chat_completions(request: web.Request) -> web.StreamResponse:
    ctx, key, spec, gen = await begin_generation(request, proto.parse_chat_request)
    rid, created, model = proto.new_id("chatcmpl-"), proto.now_s(), spec.model
    ids, choices = _CallIds(), Choices(gen, spec.n)
    lp = LogprobFormatter(ctx.tokenizer) if spec.logprobs is not None else None
    with _finishing_all(ctx, key, choices):
        if spec.stream:
            return await _stream_chat(request, choices, rid, created, model, ids, lp)
        out = []
        for i, (got, outcome) in enumerate(zip(await _collect(choices), choices.outcomes)):
            calls = [{"id": ids(i, j), "type": "function",
                      "function": {"name": c.name, "arguments": c.arguments}}
                     for j, c in enumerate(outcome.tool_calls)]
            out.append(proto.chat_choice(
                index=i, content=None if calls and not got.content.strip() else got.content,
                reasoning=got.reasoning, tool_calls=calls,
                finish_reason=_finish_reason(outcome.finish_reason),
                logprobs=lp.chat(got.logprobs) if lp is not None else None))
        return json_response(proto.chat_completion(
            rid=rid, model=model, created=created, choices=out, usage=_usage(choices),
            prompt_logprobs=_prompt_logprobs(spec, LogprobFormatter(ctx.tokenizer), choices,
                                             0)))


async def _stream_chat(request: web.Request, choices: Choices, rid: str, created: int,
                       model: str, ids: _CallIds, lp: LogprobFormatter | None
                       ) -> web.StreamResponse:
    spec = choices.gens[0].spec
    resp = await open_sse(request)

    def chunk(index: int, delta: dict[str, Any], finish: str | None = None,
              logprobs: list[TokenLogprobs] | None = None) -> dict[str, Any]:
        return proto.chat_chunk(rid=rid, model=model, created=created, index=index,
                                delta=delta, finish_reason=finish,
                                logprobs=lp.chat(logprobs) if lp and logprobs else None,
                                with_usage_field=spec.include_usage)

    for i in range(len(choices.gens)):
        await send_sse(resp, chunk(i, {"role": "assistant", "content": ""}))
    async for i, delta in choices.events():
        if delta is None:
            await _send_choice_end(resp, choices, i,
                                   lambda finish: chunk(i, {}, finish))
            continue
        logprobs = delta.logprobs   # sent once, with the first chunk of this step
        if delta.reasoning:
            await send_sse(resp, chunk(i, {"reasoning": delta.reasoning,
                                           "reasoning_content": delta.reasoning}, None,
                                       logprobs))
            logprobs = []
        if delta.content or (logprobs and not delta.tool_calls):
            await send_sse(resp, chunk(i, {"content": delta.content}, None, logprobs))
            logprobs = []
        if delta.tool_calls:
            await send_sse(resp, chunk(i, {"tool_calls": _tool_call_chunks(i, delta, ids)},
                                       None, logprobs))
    if spec.include_usage:
        await send_sse(resp, {"id": rid, "object": "chat.completion.chunk", "created": created,
                              "model": model, "choices": [], "usage": _usage(choices)})
    await resp.write(b"data: [DONE]\n\n")
    await resp.write_eof()
    return resp


@api_route("openai")
async def completions(request: web.Request) -> web.StreamResponse:
    ctx, key, spec, gen = await begin_generation(request, proto.parse_completion_request)
    rid, created, model = proto.new_id("cmpl-"), proto.now_s(), spec.model
    more = [start_generation(replace(spec, prompt=p, more_prompts=[]), ctx, key, gen.started)
            for p in spec.more_prompts]
    choices = Choices(gen, spec.n, more)
    # echo: each choice's text starts with its prompt's
    echoed = [g.prompt.text if spec.echo else "" for g in choices.gens]
    fmt = LogprobFormatter(ctx.tokenizer)
    with _finishing_all(ctx, key, choices):
        if not spec.stream:
            out = [proto.completion_choice(
                index=i, text=echoed[i] + got.content,
                finish_reason=_finish_reason(outcome.finish_reason),
                logprobs=_completion_logprobs(spec, fmt, choices, i, got.logprobs, 0),
                prompt_logprobs=_prompt_logprobs(spec, fmt, choices, i))
                for i, (got, outcome) in enumerate(zip(await _collect(choices),
                                                       choices.outcomes))]
            return json_response(proto.completion(rid=rid, model=model, created=created,
                                                  choices=out, usage=_usage(choices)))
        resp = await open_sse(request)
        offsets = [0] * len(choices.gens)
        lp = fmt if spec.logprobs is not None else None

        async def send(choice: dict[str, Any]) -> None:
            await send_sse(resp, proto.completion(rid=rid, model=model, created=created,
                                                  choices=[choice]))

        async def send_echo(i: int) -> None:
            """Choice i's prompt text, with its tokens' logprobs when it has them."""
            logprobs = None
            if lp is not None and choices.prompt_logprobs(i)[1] is not None:
                logprobs = _completion_logprobs(spec, fmt, choices, i, [], 0)
                assert logprobs is not None
                offsets[i] = sum(len(t) for t in logprobs["tokens"])
            await send(proto.completion_choice(index=i, text=echoed[i], finish_reason=None,
                                               logprobs=logprobs))

        # with logprobs an echo waits for its prompt's logprobs (with the first output)
        echo_pending = set(range(len(echoed))) if spec.echo else set()
        if lp is None:
            for i in sorted(echo_pending):
                await send_echo(i)
            echo_pending.clear()
        async for i, delta in choices.events():
            if i in echo_pending:
                echo_pending.discard(i)
                await send_echo(i)
            if delta is None:
                await _send_choice_end(resp, choices, i, lambda finish: proto.completion(
                    rid=rid, model=model, created=created, choices=[proto.completion_choice(
                        index=i, text="", finish_reason=finish)]))
                continue
            if delta.content or delta.logprobs:
                logprobs = lp.completion(delta.logprobs, offsets[i]) if lp else None
                if logprobs is not None:   # offsets count the tokens' own text
                    offsets[i] += sum(len(t) for t in logprobs["tokens"])
                await send(proto.completion_choice(index=i, text=delta.content,
                                                   finish_reason=None, logprobs=logprobs))
        if spec.include_usage:
            await send_sse(resp, {"id": rid, "object": "text_completion", "created": created,
                                  "model": model, "choices": [], "usage": _usage(choices)})
        await resp.write(b"data: [DONE]\n\n")
        await resp.write_eof()
        return resp


@api_route("openai")
async def embeddings(request: web.Request) -> web.Response:
    """Each input a prompt-only generation reporting its last-token hidden state; all of a
    request's inputs go to the engine at once (batched like any other sequences)."""
    ctx = request.app[CTX]
    started = time.monotonic()
    key = authorize(request, ctx)
    req = proto.parse_embeddings_request(await read_json(request, ctx))
    gens = [start_generation(spec, ctx, key, started) for spec in req.specs]

    async def run(gen: Generation) -> None:
        async for _ in gen.deltas():
            pass

    with contextlib.ExitStack() as stack:
        for gen in gens:
            stack.enter_context(finishing(ctx, key, "openai", gen))
        await asyncio.gather(*(run(gen) for gen in gens))
    vectors = []
    for gen in gens:
        if gen.embedding is None:
            raise engine_failure(gen.outcome.error)
        vectors.append(encode_embedding(embedding_vector(gen.embedding, req.dimensions),
                                        req.encoding_format))
    return json_response(proto.embeddings_response(
        model=req.model, vectors=vectors,
        prompt_tokens=sum(gen.outcome.prompt_tokens for gen in gens)))
