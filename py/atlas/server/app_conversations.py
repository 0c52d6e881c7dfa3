"""OpenAI Conversations routes: /v1/conversations (create, retrieve, update, delete) and
/v1/conversations/{id}/items (add, list, retrieve, delete). Shapes: protocol_conversations
.py; storage: app_response_store.py, called from worker threads. A response joins a
conversation through `conversation` on POST /v1/responses (app_responses.py)."""

from __future__ import annotations

import asyncio

from aiohttp import web

from . import protocol_conversations as conv
from .app import CTX, api_route, authorize, json_response, read_json
from .app_response_store import ConversationRecord, SqliteResponseStore
from .app_responses import conversation_items
from .errors import ApiError, ErrorKind
from .validation import Fields


def _open(request: web.Request) -> tuple[SqliteResponseStore, str]:
    ctx = request.app[CTX]
    authorize(request, ctx)
    assert ctx.responses is not None, "build_app opens the response store"
    return ctx.responses, request.match_info.get("conversation_id", "")


def _missing(what: str) -> ApiError:
    return ApiError(ErrorKind.NOT_FOUND, f"no {what}", code="not_found")


async def _update(store: SqliteResponseStore, cid: str, change) -> ConversationRecord:
    record = await asyncio.to_thread(store.update_conversation, cid, change)
    if record is None:
        raise _missing(f"conversation {cid!r}")
    return record


@api_route("openai")
async def create(request: web.Request) -> web.Response:
    store, _ = _open(request)
    body = await read_json(request, request.app[CTX]) if request.can_read_body else {}
    conversation, items = conv.parse_create(body)
    await asyncio.to_thread(store.put_conversation, conversation["id"], (conversation, items))
    return json_response(conversation)


@api_route("openai")
async def retrieve(request: web.Request) -> web.Response:
    store, cid = _open(request)
    record = await asyncio.to_thread(store.get_conversation, cid)
    if record is None:
        raise _missing(f"conversation {cid!r}")
    return json_response(record[0])


@api_route("openai")
async def update(request: web.Request) -> web.Response:
    store, cid = _open(request)
    metadata = conv.parse_update(await read_json(request, request.app[CTX]))
    record = await _update(store, cid, lambda rec: ({**rec[0], "metadata": metadata}, rec[1]))
    return json_response(record[0])


@api_route("openai")
async def delete(request: web.Request) -> web.Response:
    store, cid = _open(request)
    if not await asyncio.to_thread(store.delete_conversation, cid):
        raise _missing(f"conversation {cid!r}")
    return json_response(conv.deleted(cid))


@api_route("openai")
async def add_items(request: web.Request) -> web.Response:
    store, cid = _open(request)
    items = conv.parse_new_items(await read_json(request, request.app[CTX]))
    await _update(store, cid, lambda rec: (rec[0], rec[1] + items))
    return json_response(conv.item_list(items, order="asc", limit=len(items)))


@api_route("openai")
async def list_items(request: web.Request) -> web.Response:
    _, cid = _open(request)
    q = Fields(dict(request.query))
    limit = q.string("limit", "20")
    if not limit.isdigit():
        raise ApiError(ErrorKind.INVALID_REQUEST, "limit must be an integer", param="limit")
    items = await conversation_items(request.app[CTX], cid)
    return json_response(conv.item_list(items, order=q.string("order", "desc"),
                                        limit=int(limit), after=q.string("after")))


def _item_index(items: list[dict], item_id: str) -> int:
    for i, item in enumerate(items):
        if item["id"] == item_id:
            return i
    raise _missing(f"item {item_id!r} in this conversation")


@api_route("openai")
async def retrieve_item(request: web.Request) -> web.Response:
    _, cid = _open(request)
    items = await conversation_items(request.app[CTX], cid)
    return json_response(items[_item_index(items, request.match_info["item_id"])])


@api_route("openai")
async def delete_item(request: web.Request) -> web.Response:
    store, cid = _open(request)
    item_id = request.match_info["item_id"]

    def drop(rec: ConversationRecord) -> ConversationRecord:
        items = list(rec[1])
        del items[_item_index(items, item_id)]
        return rec[0], items

    return json_response((await _update(store, cid, drop))[0])
