"""Llama 3.x JSON format: an answer that begins with `{` (or follows `<|python_tag|>`) is
`{"name": ..., "parameters": {...}}`, several calls separated by `;` (the Llama 3.1-3.3
chat templates' custom-tool convention; "arguments" is read too)."""

from __future__ import annotations

import json

from .base import ToolCall, ToolParser, dump_arguments, json_call_name

_TAG = "<|python_tag|>"
_DECODER = json.JSONDecoder()


def _skip_space(text: str, pos: int) -> int:
    while pos < len(text) and text[pos].isspace():
        pos += 1
    return pos


class Llama3JsonToolParser(ToolParser):
    start_markers = (_TAG,)
    leading_call = "{"

    def name_of(self, body: str) -> str | None:
        return json_call_name(body)

    def complete(self, body: str, final: bool) -> tuple[int, list[ToolCall]] | None:
        """The calls once the last object is closed and no `;` follows it (known only when
        other text comes after it, or the stream has ended)."""
        calls: list[ToolCall] = []
        pos = _skip_space(body, 0)
        while True:
            try:
                value, end = _DECODER.raw_decode(body, pos)
            except ValueError:
                return None
            if not isinstance(value, dict) or not isinstance(value.get("name"), str):
                return None
            arguments = value.get("parameters", value.get("arguments", {}))
            calls.append(ToolCall(value["name"], dump_arguments(arguments)))
            after = _skip_space(body, end)
            if after < len(body) and body[after] == ";":
                pos = _skip_space(body, after + 1)
                if pos == len(body):
                    return (after + 1, calls) if final else None
                continue
            if after == len(body) and not final:
                return None  # a `;` and another call may still come
            return end, calls

    def forced_prefix(self, name: str | None) -> str:
        return '{"name": "' if name is None else '{"name": ' + json.dumps(name) + ', "parameters": '
