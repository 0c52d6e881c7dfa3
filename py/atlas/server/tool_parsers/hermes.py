"""Hermes format: `<tool_call>{"name": ..., "arguments": {...}}</tool_call>` (Qwen2.5/3, SmolLM)."""

from __future__ import annotations

import json

from .base import ToolCall, ToolParser, dump_arguments, json_call_name

_OPEN, _CLOSE = "<tool_call>", "</tool_call>"


def _decode_call(text: str) -> list[ToolCall] | None:
    """Calls in one body (an object, or a list of objects); [] for an empty `{}`."""
    text = text.strip()
    if text.startswith("```"):
        text = text.split("\n", 1)[1] if "\n" in text else ""
    text = text.removesuffix("```").strip()
    if not text:
        return []
    try:
        value = json.loads(text)
    except ValueError:
        return None
    items = value if isinstance(value, list) else [value]
    calls = []
    for item in items:
        if not isinstance(item, dict):
            return None
        if not item:
            continue
        name = item.get("name")
        if not isinstance(name, str) or not name:
            return None
        arguments = item.get("arguments", item.get("parameters", {}))
        calls.append(ToolCall(name, dump_arguments(arguments)))
    return calls


class HermesToolParser(ToolParser):
    start_markers = (_OPEN,)

    def name_of(self, body: str) -> str | None:
        return json_call_name(body)

    def complete(self, body: str, final: bool) -> tuple[int, list[ToolCall]] | None:
        # an end marker inside a JSON string is literal text: try each one until the body
        # before it decodes
        start = 0
        while (index := body.find(_CLOSE, start)) >= 0:
            calls = _decode_call(body[:index])
            if calls is not None:
                return index + len(_CLOSE), calls
            start = index + 1
        if final:
            calls = _decode_call(body)
            if calls is not None:
                return len(body), calls
        return None

    def forced_prefix(self, name: str | None) -> str:
        if name is None:
            return _OPEN + "\n"
        return _OPEN + "\n" + '{"name": ' + json.dumps(name) + ', "arguments": '
