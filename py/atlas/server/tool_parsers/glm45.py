"""GLM-4.5 format (GLM-4.5, GLM-4.5-Air, GLM-4.6: `glm4_moe`): one block per call, the
function name right after the opener, each argument a key tag followed by a value tag.

    <tool_call>get_weather
    <arg_key>city</arg_key>
    <arg_value>Paris</arg_value>
    <arg_key>days</arg_key>
    <arg_value>3</arg_value>
    </tool_call>
    <tool_call>get_time</tool_call>

The name ends at the first newline or tag (GLM-4.7's template writes no newlines at all, which
reads the same). The template writes a string value as raw text, kept verbatim, and any other
value as JSON, decoded when the tool's schema does not type it "string" (`typed_value`).

Tolerated: a missing `</arg_value>` ends the value at the next `<arg_key>` or at
`</tool_call>`; a `</tool_call>` inside a value that is still open is literal text when the
value's `</arg_value>` follows it; a block the stream ends inside is decoded as far as it
goes; an empty block is dropped; a block whose first word is not a bare name (no call) is
returned as text.
"""

from __future__ import annotations

import json
import re
from typing import Any, Mapping

from ..holdback import find_first
from .base import ToolCall, ToolParser, typed_value

_OPEN, _CLOSE = "<tool_call>", "</tool_call>"
_KEY, _VALUE, _VALUE_CLOSE = "<arg_key>", "<arg_value>", "</arg_value>"
#: the name, then a newline, a tag or the block's end (spaces between are allowed)
_NAME = re.compile(r"\s*([^\s<>{}\"']+)[ \t]*(?=[\n<]|\Z)")
#: a value ends at its close tag, or (close missing) before the next key or at the block's end
_ARGUMENT = re.compile(
    r"<arg_key>([^<]*)</arg_key>\s*<arg_value>(.*?)(</arg_value>|(?=<arg_key>)|\Z)", re.DOTALL)
_VALUE_END = re.compile(r"</arg_value>|<arg_key>")


def _call_end(body: str, final: bool) -> int | None:
    """Where the `</tool_call>` closing the call is; None while that is still undecided.

    One inside a value still open is literal text if the value ends (`</arg_value>` or the
    next `<arg_key>`) after it, and closes a call whose `</arg_value>` is missing if the next
    call opens or the stream ends first."""
    start = 0
    while (close := body.find(_CLOSE, start)) >= 0:
        value = body.rfind(_VALUE, 0, close)
        if value < 0 or _VALUE_END.search(body, value, close):
            return close
        hit = find_first(body, (_VALUE_CLOSE, _KEY, _OPEN), close)
        if hit is None:
            return close if final else None
        if hit[1] == _OPEN:
            return close
        start = hit[0]
    return None


def _arguments(block: str, pos: int, properties: Mapping[str, Any]) -> dict[str, Any]:
    arguments: dict[str, Any] = {}
    for match in _ARGUMENT.finditer(block, pos):
        key, value, closed = match.group(1).strip(), match.group(2), match.group(3)
        if not closed:
            value = value.removesuffix("\n")  # the template's newline before the next tag
        arguments[key] = typed_value(value, properties.get(key))
    return arguments


class Glm45ToolParser(ToolParser):
    start_markers = (_OPEN,)

    def name_of(self, body: str) -> str | None:
        match = _NAME.match(body)
        return match.group(1) if match and match.end() < len(body) else None

    def complete(self, body: str, final: bool) -> tuple[int, list[ToolCall]] | None:
        close = _call_end(body, final)
        if close is None and not final:
            return None
        end = len(body) if close is None else close
        consumed = end if close is None else close + len(_CLOSE)
        block = body[:end]
        if not block.strip():
            return consumed, []  # an empty call
        name = _NAME.match(block)
        if name is None:
            return None  # no call: its text is returned once the stream ends
        properties = self.schemas.get(name.group(1), {}).get("properties", {})
        arguments = _arguments(block, name.end(), properties)
        return consumed, [ToolCall(name.group(1), json.dumps(arguments, ensure_ascii=False))]

    def forced_prefix(self, name: str | None) -> str:
        return _OPEN + (f"{name}\n" if name is not None else "")
