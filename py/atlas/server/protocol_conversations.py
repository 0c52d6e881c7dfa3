"""OpenAI Conversations API (`/v1/conversations` and its items): validation and shapes.

A conversation is an object (id, created_at, metadata) and an ordered list of items in the
Responses API's item shapes (messages, function calls and their outputs, reasoning), each
with an id. A response created with `conversation` reads the items as its history and
appends its input and output items afterwards. Pure: the store is app_response_store.py's.
"""

from __future__ import annotations

import time
from typing import Any

from .errors import invalid
from .protocol_openai import new_id
from .protocol_responses import input_messages
from .validation import Fields, require_object

#: items one request may add (OpenAI's limit)
MAX_ITEMS_PER_REQUEST = 20
_ID_PREFIX = {"message": "msg_", "function_call": "fc_", "function_call_output": "fco_",
              "reasoning": "rs_"}


def conversation_object(cid: str, metadata: dict[str, Any]) -> dict[str, Any]:
    return {"id": cid, "object": "conversation", "created_at": int(time.time()),
            "metadata": metadata}


def _metadata(f: Fields) -> dict[str, Any]:
    metadata = f.obj("metadata", {})
    if len(metadata) > 16 or not all(isinstance(v, str) for v in metadata.values()):
        raise invalid("metadata holds at most 16 string values", "metadata")
    return metadata


def parse_create(body: Any) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """POST /v1/conversations: (the new conversation object, its first items)."""
    f = Fields(require_object(body or {}))
    conversation = conversation_object(new_id("conv_"), _metadata(f))
    return conversation, stored_items(f.array("items", []), "items")


def parse_update(body: Any) -> dict[str, Any]:
    """POST /v1/conversations/{id}: the new metadata."""
    f = Fields(require_object(body))
    if f.raw("metadata") is None:
        raise invalid("metadata is required", "metadata")
    return _metadata(f)


def parse_new_items(body: Any) -> list[dict[str, Any]]:
    """POST /v1/conversations/{id}/items: the items to append."""
    f = Fields(require_object(body))
    items = stored_items(f.array("items", required=True), "items")
    if not items:
        raise invalid("items must not be empty", "items")
    return items


def stored_items(raw: list, param: str) -> list[dict[str, Any]]:
    """Items as a conversation keeps them: validated (they must convert to messages),
    with ids, messages' content as typed parts."""
    if len(raw) > MAX_ITEMS_PER_REQUEST:
        raise invalid(f"at most {MAX_ITEMS_PER_REQUEST} items per request", param)
    if raw:
        input_messages(raw)   # the 400s for bad items
    return [_stored(require_object(item, f"{param}[{i}]")) for i, item in enumerate(raw)]


def _stored(item: dict[str, Any]) -> dict[str, Any]:
    out = {"type": "message", **item}
    out.setdefault("id", new_id(_ID_PREFIX.get(out["type"], "item_")))
    if out["type"] == "message":
        part = "output_text" if out.get("role") == "assistant" else "input_text"
        if isinstance(out.get("content"), str):
            out["content"] = [{"type": part, "text": out["content"]}]
        out.setdefault("status", "completed")
    return out


def item_list(items: list[dict[str, Any]], *, order: str = "desc", limit: int = 20,
              after: str | None = None) -> dict[str, Any]:
    """A page of items (`order` asc / desc, at most `limit`, after the item `after`)."""
    if order not in ("asc", "desc"):
        raise invalid("order must be 'asc' or 'desc'", "order")
    if not 1 <= limit <= 100:
        raise invalid("limit must be in [1, 100]", "limit")
    ordered = items if order == "asc" else items[::-1]
    if after is not None:
        ids = [item["id"] for item in ordered]
        if after not in ids:
            raise invalid(f"no item {after!r} in this conversation", "after")
        ordered = ordered[ids.index(after) + 1:]
    page = ordered[:limit]
    return {"object": "list", "data": page,
            "first_id": page[0]["id"] if page else None,
            "last_id": page[-1]["id"] if page else None,
            "has_more": len(ordered) > limit}


def deleted(cid: str) -> dict[str, Any]:
    return {"id": cid, "object": "conversation.deleted", "deleted": True}
