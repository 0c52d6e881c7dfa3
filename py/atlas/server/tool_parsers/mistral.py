"""Mistral format: `[TOOL_CALLS]` followed by a JSON list of calls, or (v11 tokenizers)
`[TOOL_CALLS]name[ARGS]{...}` once per call."""

from __future__ import annotations

import json

from .base import ToolCall, ToolParser, dump_arguments, json_call_name

_MARKER, _ARGS = "[TOOL_CALLS]", "[ARGS]"
_DECODER = json.JSONDecoder()


class MistralToolParser(ToolParser):
    start_markers = (_MARKER,)
    #: control tokens in Mistral's tokenizers (special: their text is kept for this stage)
    special_markers = (_MARKER, _ARGS)

    def name_of(self, body: str) -> str | None:
        if _ARGS in body:
            return body.split(_ARGS, 1)[0].strip() or None
        return json_call_name(body)

    def complete(self, body: str, final: bool) -> tuple[int, list[ToolCall]] | None:
        if _ARGS in body:
            name, _, rest = body.partition(_ARGS)
            lead = len(rest) - len(rest.lstrip())
            try:
                arguments, end = _DECODER.raw_decode(rest, lead)
            except ValueError:
                return None
            return len(name) + len(_ARGS) + end, [ToolCall(name.strip(), dump_arguments(arguments))]
        lead = len(body) - len(body.lstrip())
        if not body.strip() or body.lstrip()[0] not in "[{":
            return None
        try:
            value, end = _DECODER.raw_decode(body, lead)
        except ValueError:
            return None
        items = value if isinstance(value, list) else [value]
        calls = []
        for item in items:
            if not isinstance(item, dict):
                return None
            if item and isinstance(item.get("name"), str):
                calls.append(ToolCall(item["name"], dump_arguments(item.get("arguments", {}))))
        return end, calls

    def forced_prefix(self, name: str | None) -> str:
        return _MARKER if name is None else f"{_MARKER}{name}{_ARGS}"
