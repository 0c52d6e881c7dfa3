"""Qwen3-Coder XML format.

    <tool_call>
    <function=get_weather>
    <parameter=location>
    Paris
    </parameter>
    </function>
    </tool_call>

Values are text; a parameter whose schema type is not "string" is decoded as JSON when it
parses. A missing `</parameter>` ends at the next parameter or at `</function>`.
"""

from __future__ import annotations

import json
import re
from typing import Any, Mapping

from .base import ToolCall, ToolParser, xml_arguments

_OPEN, _CLOSE = "<tool_call>", "</tool_call>"
_FUNC_OPEN, _FUNC_CLOSE = "<function=", "</function>"
_NAME = re.compile(r"<function=([^>\n]+)>")
_PARAM = re.compile(r"<parameter=([^>\n]+)>")
_PARAM_END = re.compile(r"</parameter>|<parameter=|</function>")


def _decode_function(body: str, schemas: Mapping[str, Mapping[str, Any]]) -> ToolCall | None:
    match = _NAME.search(body)
    if match is None:
        return None
    name = match.group(1).strip()
    properties = schemas.get(name, {}).get("properties", {})
    arguments = xml_arguments(body, match.end(), _PARAM, _PARAM_END, properties)
    return ToolCall(name, json.dumps(arguments, ensure_ascii=False))


class Qwen3CoderToolParser(ToolParser):
    start_markers = (_OPEN, _FUNC_OPEN)

    def body_start(self, marker: str) -> str:
        return _FUNC_OPEN if marker == _FUNC_OPEN else ""

    def name_of(self, body: str) -> str | None:
        match = _NAME.search(body)
        return match.group(1).strip() if match else None

    def complete(self, body: str, final: bool) -> tuple[int, list[ToolCall]] | None:
        func_end = body.find(_FUNC_CLOSE)
        if func_end >= 0:
            call = _decode_function(body[:func_end], self.schemas)
            consumed = func_end + len(_FUNC_CLOSE)
            rest = body[consumed:]
            stripped = rest.lstrip()
            if stripped.startswith(_CLOSE):
                consumed += len(rest) - len(stripped) + len(_CLOSE)
            elif not final and _CLOSE.startswith(stripped):
                return None  # wait to see whether </tool_call> follows
            return consumed, [call] if call else []
        close = body.find(_CLOSE)
        if close >= 0 and _FUNC_OPEN not in body[:close]:
            return close + len(_CLOSE), []  # empty call
        if final or (close >= 0 and _OPEN in body[close:]):
            # no </function>: the call ends at </tool_call> (or the end of the stream)
            end = close if close >= 0 else len(body)
            consumed = end + len(_CLOSE) if close >= 0 else end
            call = _decode_function(body[:end], self.schemas)
            if call is None:
                return (consumed, []) if not body[:end].strip() else None
            return consumed, [call]
        return None

    def forced_prefix(self, name: str | None) -> str:
        return _OPEN + "\n" + (f"{_FUNC_OPEN}{name}>\n" if name is not None else "")
