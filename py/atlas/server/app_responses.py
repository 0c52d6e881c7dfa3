"""OpenAI Responses routes: POST /v1/responses (streaming and not), GET and DELETE
/v1/responses/{id}. The request shapes and events are protocol_responses.py's; the
store (SQLite) is app_response_store.py's, called from worker threads."""

from __future__ import annotations

import asyncio
import time

from aiohttp import web

from . import protocol_conversations as conv
from . import protocol_responses as proto
from .app import (CTX, api_route, authorize, finishing, json_response, open_sse, read_json,
                  send_sse, start_generation)
from .app_response_store import SqliteResponseStore, StoredResponse
from .context import ServerContext
from .errors import ApiError, ErrorKind, engine_failure, invalid
from .protocol_openai import now_s


def _store(ctx: ServerContext) -> SqliteResponseStore:
    assert ctx.responses is not None, "build_app opens the response store"
    return ctx.responses


async def _stored(ctx: ServerContext, rid: str) -> StoredResponse | None:
    return await asyncio.to_thread(_store(ctx).get, rid)


@api_route("openai")
async def create(request: web.Request) -> web.StreamResponse:
    ctx = request.app[CTX]
    started = time.monotonic()
    key = authorize(request, ctx)
    body = await read_json(request, ctx)
    previous_id = proto.previous_response_id(body)
    cid = proto.conversation_id(body)
    previous = None
    if previous_id is not None:
        stored = await _stored(ctx, previous_id)
        if stored is None:
            raise invalid(f"previous response {previous_id!r} not found (never stored, "
                          "expired or deleted)", "previous_response_id")
        previous = stored.history
    if cid is not None:
        items = await conversation_items(ctx, cid)
        previous = proto.input_messages(items) if items else None
    req = proto.parse_responses_request(body, ctx.options.default_sampling, previous)
    new_items = (conv.stored_items(proto.as_items(body["input"]), "input")
                 if cid is not None else [])
    if cid is not None:
        req.echo["conversation"] = {"id": cid}
    gen = start_generation(req.spec, ctx, key, started)
    out = proto.ResponseBuilder(proto.new_id("resp_"), now_s(), req.spec.model, req)
    with finishing(ctx, key, "openai", gen):
        resp = await open_sse(request) if req.spec.stream else None

        async def send(events: list[dict]) -> None:
            if resp is not None:
                for event in events:
                    await send_sse(resp, event, event=event["type"])

        await send(out.start())
        async for delta in gen.deltas():
            await send(out.feed(delta))
        outcome = gen.outcome
        if outcome.finish_reason == "error":
            if resp is None:
                raise engine_failure(outcome.error)
            await send(out.failed(engine_failure(outcome.error).message))
        else:
            done = out.finish(outcome)
            if req.store:
                await asyncio.to_thread(_store(ctx).put, out.rid,
                                        StoredResponse(out.response(), out.history()))
            if cid is not None:
                added = new_items + conv.stored_items(out.output_items(), "output")
                await asyncio.to_thread(_store(ctx).update_conversation, cid,
                                        lambda rec: (rec[0], rec[1] + added))
            await send(done)
        if resp is None:
            return json_response(out.response())
        await resp.write_eof()
        return resp


async def conversation_items(ctx: ServerContext, cid: str) -> list[dict]:
    """The items of conversation `cid`; 404 when there is none."""
    record = await asyncio.to_thread(_store(ctx).get_conversation, cid)
    if record is None:
        raise ApiError(ErrorKind.NOT_FOUND, f"no conversation {cid!r}", param="conversation",
                       code="not_found")
    return record[1]


@api_route("openai")
async def retrieve(request: web.Request) -> web.Response:
    ctx = request.app[CTX]
    authorize(request, ctx)
    rid = request.match_info["response_id"]
    stored = await _stored(ctx, rid)
    if stored is None:
        raise ApiError(ErrorKind.NOT_FOUND, f"no stored response {rid!r}",
                       param="response_id", code="not_found")
    return json_response(stored.response)


@api_route("openai")
async def delete(request: web.Request) -> web.Response:
    ctx = request.app[CTX]
    authorize(request, ctx)
    rid = request.match_info["response_id"]
    if not await asyncio.to_thread(_store(ctx).delete, rid):
        raise ApiError(ErrorKind.NOT_FOUND, f"no stored response {rid!r}",
                       param="response_id", code="not_found")
    return json_response(proto.deleted(rid))
