"""The streaming tool-call parser shared by every wire format.

A model writes tool calls into its text between format-specific markers. The parser passes
ordinary text through, holds back anything that might be the start of a marker, and turns
each call into an OpenAI-style delta: first the function name (as soon as it is known),
then the arguments once the call is complete. Formats differ only in their markers and in
how one call body is recognised as complete and decoded; subclasses supply those.

Tolerated malformations (the book's list): a literal end marker inside a JSON string, a
missing `</parameter>`, empty `{}` calls (dropped), and markdown fences wrapped around calls.
"""

from __future__ import annotations

import abc
import json
import re
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from ..holdback import find_first, partial_marker_len

_FENCE_OPEN = re.compile(r"```[\w-]*\s*$")
_FENCE_PARTIAL = re.compile(r"`{1,3}[\w-]*\s*$")   # may still grow into a fence opener
_FENCE_CLOSE = "```"


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One complete call: the function name and its arguments as a JSON object text."""

    name: str
    arguments: str


@dataclass(slots=True)
class ToolCallDelta:
    """A piece of the index-th call of this response: its name once, argument text after."""

    index: int
    name: str | None = None
    arguments: str = ""


@dataclass(slots=True)
class ToolParseResult:
    content: str = ""
    calls: list[ToolCallDelta] = field(default_factory=list)
    #: the chain of thought, from a format that carries its own (`OutputParser.splits_reasoning`)
    reasoning: str = ""

    def extend(self, other: "ToolParseResult") -> None:
        self.content += other.content
        self.calls.extend(other.calls)
        self.reasoning += other.reasoning


ToolSchemas = Mapping[str, Mapping[str, Any]]
"""Function name -> its JSON-schema `parameters` (used to type XML parameter values)."""


class OutputParser(abc.ABC):
    """The response stream's last stage: feed the model's answer text, receive content and
    tool-call deltas (and reasoning, from a format that carries its own). One per response."""

    #: special tokens whose text the format's markers are: the detokenizer keeps exactly
    #: these as text (it drops every other special token unless the request keeps them all)
    special_markers: tuple[str, ...] = ()
    #: the format separates the chain of thought itself (ToolParseResult.reasoning), so no
    #: `<think>` split runs before it; it runs on every chat response then, tools or not, and
    #: its constructor also takes `use_tools`, `emit_reasoning` and `verbatim_answer`
    splits_reasoning = False

    def __init__(self, schemas: ToolSchemas | None = None, max_calls: int | None = None) -> None:
        """`max_calls` 1 is OpenAI's parallel_tool_calls=false: later calls are parsed (so
        their text never leaks into the content) but dropped."""
        self.schemas: ToolSchemas = schemas or {}
        self.max_calls = max_calls
        self.calls: list[ToolCall] = []

    @abc.abstractmethod
    def feed(self, text: str) -> ToolParseResult:
        """The next piece of the answer's text; what of it is safe to pass on."""

    @abc.abstractmethod
    def flush(self) -> ToolParseResult:
        """The stream ended: everything still held back, the open call completed."""

    @abc.abstractmethod
    def forced_prefix(self, name: str | None) -> str:
        """Assistant text that commits the model to a call (of `name`, if given)."""

    @property
    def _full(self) -> bool:
        return self.max_calls is not None and len(self.calls) >= self.max_calls


class ToolParser(OutputParser):
    """Feed model text; receive content and tool-call deltas. One instance per response."""

    start_markers: tuple[str, ...] = ()
    #: a format whose call may also open the answer without a marker (Llama 3's JSON):
    #: the answer's first non-space text starting with this is a call body
    leading_call: str | None = None

    def __init__(self, schemas: ToolSchemas | None = None, max_calls: int | None = None) -> None:
        super().__init__(schemas, max_calls)
        self._pending = ""
        self._body: str | None = None      # not None while inside a call
        self._named = False                # the current call's name was already streamed
        self._streamed_name = ""
        self._after_call = False           # strip whitespace and a closing fence
        self._at_start = self.leading_call is not None  # no answer text seen yet
        self._opener = ""                  # the marker that opened the current call

    # --- what a format defines -------------------------------------------------------------

    def body_start(self, marker: str) -> str:
        """The call body's initial text when `marker` opens a call: none, unless the marker
        is itself part of the body (a format overrides this then)."""
        return ""

    @abc.abstractmethod
    def complete(self, body: str, final: bool) -> tuple[int, list[ToolCall]] | None:
        """If `body` holds complete call(s), return (chars consumed, calls); else None.

        With `final` the stream has ended: decode what is there, as leniently as the format
        allows; None then means the body is not a call at all and is returned as text.
        """

    @abc.abstractmethod
    def name_of(self, body: str) -> str | None:
        """The function name, as soon as the partial body reveals it."""

    def forced_prefix(self, name: str | None) -> str:
        """Assistant text that commits the model to a call (of `name`, if given)."""
        return self.start_markers[0]

    # --- the shared stream machine -------------------------------------------------------

    def feed(self, text: str) -> ToolParseResult:
        self._pending += text
        return self._drain(final=False)

    def flush(self) -> ToolParseResult:
        out = self._drain(final=True)
        if self._body is not None:
            body, self._body = self._body + self._pending, None
            self._pending = ""
            self._finish_call(body, final=True, out=out)
        else:
            out.content += self._pending
            self._pending = ""
        return out

    def _drain(self, final: bool) -> ToolParseResult:
        out = ToolParseResult()
        while True:
            if self._body is None:
                if not self._scan_text(out, final):
                    return out
            else:
                self._body += self._pending
                self._pending = ""
                if not self._named and not self._full:
                    name = self.name_of(self._body)
                    if name:
                        out.calls.append(ToolCallDelta(len(self.calls), name=name))
                        self._named = True
                        self._streamed_name = name
                result = self.complete(self._body, final=False)
                if result is None:
                    return out
                consumed, calls = result
                self._pending = self._body[consumed:]
                self._body = None
                self._emit_calls(calls, out)
                self._after_call = True

    def _scan_text(self, out: ToolParseResult, final: bool) -> bool:
        """Move text to `out` up to the next call; True when a call was entered."""
        if self._at_start:
            stripped = self._pending.lstrip()
            if not stripped:
                return False  # only whitespace so far: the answer has not begun
            self._at_start = False
            if self.leading_call is not None and stripped.startswith(self.leading_call):
                self._pending, self._body, self._opener = stripped, "", ""
                self._named = False
                return True
        if self._after_call:
            stripped = self._pending.lstrip()
            if stripped.startswith(_FENCE_CLOSE):
                stripped = stripped[len(_FENCE_CLOSE):].lstrip()
            elif not final and (not stripped or _FENCE_CLOSE.startswith(stripped)):
                return False
            self._pending = stripped
            if not stripped:
                return False
            self._after_call = False
        hit = find_first(self._pending, self.start_markers)
        if hit is not None:
            index, marker = hit
            before = _strip_open_fence(self._pending[:index])
            out.content += before
            self._body = self.body_start(marker)
            self._opener = marker
            self._named = False
            self._pending = self._pending[index + len(marker):]
            return True
        if final:
            return False
        keep = partial_marker_len(self._pending, self.start_markers)
        cut = len(self._pending) - keep
        fence = _FENCE_PARTIAL.search(self._pending, 0, cut)
        if fence is not None:
            cut = fence.start()  # a trailing fence opener may wrap a call: hold it
        out.content += self._pending[:cut]
        self._pending = self._pending[cut:]
        return False

    def _finish_call(self, body: str, final: bool, out: ToolParseResult) -> None:
        result = self.complete(body, final=final)
        if result is not None:
            self._emit_calls(result[1], out)
        elif self._named:
            # the name is already on the wire: close the call with empty arguments
            self._emit_calls([ToolCall(self._streamed_name, "{}")], out)
        else:
            out.content += self._opener + body

    def _emit_calls(self, calls: Sequence[ToolCall], out: ToolParseResult) -> None:
        for call in calls:
            if self._full:
                break
            index = len(self.calls)
            if self._named:
                self._named = False
            else:
                out.calls.append(ToolCallDelta(index, name=call.name))
            out.calls.append(ToolCallDelta(index, arguments=call.arguments))
            self.calls.append(call)
        self._named = False


def _strip_open_fence(text: str) -> str:
    """Drop a markdown fence opener (and its language tag) directly before a call."""
    match = _FENCE_OPEN.search(text)
    if match is not None and match.end() == len(text):
        return text[:match.start()].rstrip(" \t")
    return text


def typed_value(value: str, schema: Mapping[str, Any] | None) -> Any:
    """An XML-format parameter's text as its JSON-schema type asks: kept as text for
    "string", else decoded as JSON when it parses (numbers, booleans, arrays, objects)."""
    if (schema or {}).get("type") == "string":
        return value
    try:
        return json.loads(value)
    except ValueError:
        return value


def xml_arguments(body: str, pos: int, param: re.Pattern[str], param_end: re.Pattern[str],
                  properties: Mapping[str, Any]) -> dict[str, Any]:
    """The arguments of an XML-format call: each `param` tag from `pos` on (group 1 its name,
    quotes allowed) holds the text up to `</parameter>` or, when that is missing, to where
    `param_end` matches first (the next parameter, the call's end); one newline is trimmed
    at each end and the value typed by its schema (`typed_value`)."""
    arguments: dict[str, Any] = {}
    while (tag := param.search(body, pos)) is not None:
        end = param_end.search(body, tag.end())
        stop = end.start() if end else len(body)
        value = body[tag.end():stop].removeprefix("\n").removesuffix("\n")
        key = tag.group(1).strip().strip("\"'")
        arguments[key] = typed_value(value, properties.get(key))
        pos = end.end() if end is not None and end.group(0) == "</parameter>" else stop
    return arguments


_JSON_NAME = re.compile(r'"name"\s*:\s*"((?:[^"\\]|\\.)+)"')


def json_call_name(body: str) -> str | None:
    """The `"name"` string of a JSON call body, as soon as the body holds it whole."""
    match = _JSON_NAME.search(body)
    return json.loads(f'"{match.group(1)}"') if match else None


def dump_arguments(arguments: Any) -> str:
    """Arguments as the JSON object text OpenAI clients parse (a string is decoded first)."""
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            return json.dumps({"input": arguments}, ensure_ascii=False)
    if arguments is None:
        arguments = {}
    return json.dumps(arguments, ensure_ascii=False)
