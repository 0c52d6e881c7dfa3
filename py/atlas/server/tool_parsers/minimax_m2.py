"""MiniMax-M2 XML format: one block holding one or more calls.

    <minimax:tool_call>
    <invoke name="get_weather">
    <parameter name="city">Paris</parameter>
    <parameter name="days">3</parameter>
    </invoke>
    <invoke name="get_time">
    ...
    </invoke>
    </minimax:tool_call>

Names may be quoted or bare. Values are text, typed by the tool's JSON schema like the
Qwen3-Coder format's (`typed_value`). A missing `</parameter>` ends at the next parameter or
at `</invoke>`; a missing `</invoke>` at the next `<invoke`; a block the stream ends inside
is decoded as far as it goes.
"""

from __future__ import annotations

import json
import re

from .base import ToolCall, ToolParser, xml_arguments

_OPEN, _CLOSE = "<minimax:tool_call>", "</minimax:tool_call>"
_INVOKE = re.compile(r"""<invoke name=["']?([^"'>\n]+)["']?>""")
_INVOKE_END = re.compile(r"</invoke>|<invoke name=")
_PARAM = re.compile(r"""<parameter name=(["']?[^"'>\n]+["']?)>""")
_PARAM_END = re.compile(r"</parameter>|<parameter name=|</invoke>")


class MiniMaxM2ToolParser(ToolParser):
    start_markers = (_OPEN,)

    def name_of(self, body: str) -> str | None:
        match = _INVOKE.search(body)
        return match.group(1).strip() if match else None

    def complete(self, body: str, final: bool) -> tuple[int, list[ToolCall]] | None:
        close = body.find(_CLOSE)
        if close < 0 and not final:
            return None
        end = close if close >= 0 else len(body)
        calls = self._decode_block(body[:end])
        consumed = end + len(_CLOSE) if close >= 0 else end
        if not calls and close < 0 and body.strip():
            return None  # the stream ended in text that is no call: returned as text
        return consumed, calls

    def _decode_block(self, block: str) -> list[ToolCall]:
        calls = []
        for invoke in _INVOKE.finditer(block):
            name = invoke.group(1).strip()
            end = _INVOKE_END.search(block, invoke.end())
            body = block[:end.start() if end else len(block)]
            properties = self.schemas.get(name, {}).get("properties", {})
            arguments = xml_arguments(body, invoke.end(), _PARAM, _PARAM_END, properties)
            calls.append(ToolCall(name, json.dumps(arguments, ensure_ascii=False)))
        return calls

    def forced_prefix(self, name: str | None) -> str:
        return _OPEN + "\n" + (f'<invoke name="{name}">\n' if name is not None else "")
