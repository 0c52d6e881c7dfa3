"""OpenAI Responses API (`/v1/responses`): request validation, input items -> chat
messages, and the response object with its streaming events.

A request becomes the same `GenerationSpec` a chat completion does: `instructions` is a
system message in front, `previous_response_id` puts the stored conversation of that
response (its input and output, without its instructions, as OpenAI does) before this
request's `input`. Output items come from the generation's deltas through
`ResponseBuilder`, which emits the streaming events in the published order
(response.created, response.in_progress, then per item output_item.added,
content_part.added, *.delta..., *.done, content_part.done, output_item.done, and
response.completed / response.incomplete) and builds the final response object, so the
streaming and the non-streaming answers are one code path. Pure logic: the handlers
(app_responses.py) and the store (app_response_store.py) do the I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..core.sampling import SamplingParams
from .errors import invalid
from .generation import Outcome
from .protocol_openai import (content_text, new_id, parse_messages, parse_response_format,
                              parse_sampling, parse_tool_choice, parse_tools,
                              reasoning_effort)
from .request_spec import GenerationSpec
from .response_stream import StreamDelta
from .validation import Fields, require_object, string_list

RESPONSES_FIELDS = {
    "model", "input", "instructions", "tools", "tool_choice", "text", "temperature",
    "top_p", "top_k", "min_p", "seed", "presence_penalty", "frequency_penalty",
    "repetition_penalty", "max_output_tokens", "stream", "store", "previous_response_id",
    "metadata", "parallel_tool_calls", "reasoning", "truncation", "user", "include",
    "service_tier", "background", "stop", "conversation"}

#: request fields the response object echoes back, with their defaults
_ECHOED = {"instructions": None, "tool_choice": "auto", "temperature": None, "top_p": None,
           "max_output_tokens": None, "metadata": {}, "parallel_tool_calls": True,
           "truncation": "disabled", "user": None}


def previous_response_id(body: Any) -> str | None:
    """The `previous_response_id` of a request body (validated), read before parsing so
    the handler can load that conversation first."""
    return Fields(require_object(body)).string("previous_response_id")


def conversation_id(body: Any) -> str | None:
    """The `conversation` of a request body (an id, or {"id": ...}); it and
    `previous_response_id` exclude each other."""
    f = Fields(require_object(body))
    raw = f.raw("conversation")
    if raw is None:
        return None
    if isinstance(raw, dict):
        raw = Fields(raw, "conversation.").string("id", required=True)
    if not isinstance(raw, str):
        raise invalid("conversation must be an id or an object with an id", "conversation")
    if f.raw("previous_response_id") is not None:
        raise invalid("conversation and previous_response_id cannot be used together",
                      "conversation")
    return raw


@dataclass(slots=True)
class ResponsesRequest:
    """A validated /v1/responses request."""

    spec: GenerationSpec
    #: the conversation so far, as chat-request messages without `instructions`: what a
    #: later request chaining on this response continues (its output is appended)
    history: list[dict[str, Any]]
    previous_response_id: str | None
    store: bool
    #: fields of the request the response object repeats
    echo: dict[str, Any] = field(default_factory=dict)


def parse_responses_request(body: Any, defaults: SamplingParams,
                            previous: list[dict[str, Any]] | None) -> ResponsesRequest:
    """Validate `body`; `previous`: the stored history of `previous_response_id`."""
    body = require_object(body)
    for key in body:
        if key not in RESPONSES_FIELDS:
            raise invalid(f"Unrecognized request argument supplied: {key}", key)
    f = Fields(body)
    f.string("model", required=True)
    if f.boolean("background", False):
        raise invalid("background responses are not supported by this server", "background")
    truncation = f.string("truncation", "disabled")
    if truncation not in ("disabled", "auto"):
        raise invalid("truncation must be 'disabled' or 'auto'", "truncation")
    f.obj("metadata")
    f.string("user")
    f.array("include")
    f.string("service_tier")
    history = list(previous or []) + input_messages(f.raw("input"))
    instructions = f.string("instructions")
    messages = ([{"role": "system", "content": instructions}] if instructions else []) + history
    tools = parse_tools(_chat_tools(f.array("tools")))
    stream = f.boolean("stream", False)
    thinking, effort = _thinking(f.obj("reasoning"))
    spec = GenerationSpec(
        model=f.string("model"), sampling=parse_sampling(f, defaults),
        max_tokens=f.integer("max_output_tokens", None, lo=1),
        messages=parse_messages(messages), stop=string_list(f.raw("stop"), "stop"),
        tools=tools, tool_choice=parse_tool_choice(_chat_tool_choice(f.raw("tool_choice")),
                                                   tools),
        parallel_tool_calls=f.boolean("parallel_tool_calls", True), stream=stream,
        enable_thinking=thinking, template_kwargs=effort,
        response_format=parse_response_format(_chat_format(f.obj("text"))))
    echo = {k: body.get(k, d) if body.get(k) is not None else d for k, d in _ECHOED.items()}
    echo["tools"] = body.get("tools") or []
    echo["conversation"] = None
    echo["text"] = {"format": (f.obj("text") or {}).get("format") or {"type": "text"}}
    return ResponsesRequest(spec, history, f.string("previous_response_id"),
                            bool(f.boolean("store", True)), echo)


def _thinking(reasoning: dict | None) -> tuple[bool | None, dict[str, str]]:
    """`reasoning.effort`: thinking on or off, and the template's `reasoning_effort`."""
    if reasoning is None:
        return None, {}
    return reasoning_effort(Fields(reasoning, "reasoning.").string("effort"),
                            "reasoning.effort")


def _chat_tools(tools: list | None) -> list | None:
    """Responses function tools ({type, name, parameters, ...}) in the chat shape."""
    if not tools:
        return None
    out = []
    for i, raw in enumerate(tools):
        t = Fields(require_object(raw, f"tools[{i}]"), f"tools[{i}].")
        kind = t.string("type", required=True)
        if kind != "function":
            raise invalid(f"tools[{i}].type {kind!r} is not supported by this server; only "
                          "function tools are", f"tools[{i}].type")
        fn = {"name": t.string("name", required=True)}
        for key in ("description", "parameters"):
            if t.raw(key) is not None:
                fn[key] = t.raw(key)
        out.append({"type": "function", "function": fn})
    return out


def _chat_tool_choice(raw: Any) -> Any:
    """{"type": "function", "name": n} -> the chat shape; strings pass."""
    if isinstance(raw, dict) and raw.get("type") == "function" and "name" in raw:
        return {"type": "function", "function": {"name": raw["name"]}}
    return raw


def _chat_format(text: dict | None) -> dict | None:
    """`text.format` in chat's `response_format` shape."""
    if text is None or text.get("format") is None:
        return None
    fmt = Fields(require_object(text["format"], "text.format"), "text.format.")
    kind = fmt.string("type", required=True)
    if kind != "json_schema":
        return {"type": kind}
    return {"type": "json_schema",
            "json_schema": {"name": fmt.string("name", required=True),
                            "schema": fmt.obj("schema", {}),
                            "strict": fmt.boolean("strict", False)}}


# --- input items ---------------------------------------------------------------------------

_MESSAGE_ROLES = ("user", "system", "developer", "assistant")


def as_items(raw: Any) -> list[Any]:
    """`input` as a list of items (a string is one user message)."""
    if isinstance(raw, str):
        return [{"type": "message", "role": "user", "content": raw}]
    return list(raw)


def input_messages(raw: Any) -> list[dict[str, Any]]:
    """`input` (a string, or items: messages, function_call, function_call_output,
    reasoning) as chat-request messages; a function call joins the assistant message
    before it, as chat templates expect."""
    if isinstance(raw, str):
        return [{"role": "user", "content": raw}]
    if not isinstance(raw, list) or not raw:
        raise invalid("input must be a string or a non-empty array of items", "input")
    out: list[dict[str, Any]] = []
    for i, item in enumerate(raw):
        param = f"input[{i}]"
        f = Fields(require_object(item, param), f"{param}.")
        kind = f.string("type", "message")
        if kind == "message":
            role = f.string("role", required=True)
            if role not in _MESSAGE_ROLES:
                raise invalid(f"{param}.role {role!r} is not one of {list(_MESSAGE_ROLES)}",
                              f"{param}.role")
            out.append({"role": role, "content": _item_text(f.raw("content"),
                                                            f"{param}.content")})
        elif kind == "function_call":
            call = {"id": f.string("call_id", required=True), "type": "function",
                    "function": {"name": f.string("name", required=True),
                                 "arguments": f.string("arguments", "{}")}}
            if not out or out[-1]["role"] != "assistant":
                out.append({"role": "assistant", "content": None})
            out[-1].setdefault("tool_calls", []).append(call)
        elif kind == "function_call_output":
            output = f.raw("output")
            out.append({"role": "tool", "tool_call_id": f.string("call_id", required=True),
                        "content": output if isinstance(output, str)
                        else _item_text(output, f"{param}.output")})
        elif kind != "reasoning":   # earlier reasoning is not fed back to the model
            raise invalid(f"{param}.type {kind!r} is not supported by this server",
                          f"{param}.type")
    return out


def _item_text(content: Any, param: str) -> str:
    text = content_text(content, param)
    if text is None:
        raise invalid(f"{param} is required", param)
    return text


# --- output: items, events, the response object ---------------------------------------------


@dataclass(slots=True)
class _Item:
    """One output item being built: its wire dict and the text it accumulates."""

    index: int
    body: dict[str, Any]
    text: str = ""


class ResponseBuilder:
    """Turns a generation's deltas into output items and streaming events.

    `start()` / `feed(delta)` / `finish(outcome)` return the events to send (every event
    carries `sequence_number`); `response(...)` is the response object at any point.
    """

    def __init__(self, rid: str, created: int, model: str, req: ResponsesRequest) -> None:
        self.rid = rid
        self.created = created
        self.model = model
        self.req = req
        self.items: list[_Item] = []
        self._open: _Item | None = None           # the reasoning or message item in flight
        self._calls: dict[int, _Item] = {}        # function_call items by call index
        self._pending_space = ""                  # leading whitespace of a message not opened
        self._seq = 0
        self.status = "in_progress"
        self.usage: dict[str, Any] | None = None
        self.incomplete: dict[str, Any] | None = None

    # -- events ---------------------------------------------------------------------------

    def _event(self, kind: str, **fields: Any) -> dict[str, Any]:
        event = {"type": kind, "sequence_number": self._seq, **fields}
        self._seq += 1
        return event

    def start(self) -> list[dict[str, Any]]:
        return [self._event("response.created", response=self.response()),
                self._event("response.in_progress", response=self.response())]

    def feed(self, delta: StreamDelta) -> list[dict[str, Any]]:
        events: list[dict[str, Any]] = []
        if delta.reasoning:
            events += self._text("reasoning", delta.reasoning)
        if delta.content:
            content = self._pending_space + delta.content
            if self._open is None or self._open.body["type"] != "message":
                if not content.strip():      # no message item for whitespace alone (yet)
                    self._pending_space = content
                    content = ""
            if content:
                self._pending_space = ""
                events += self._text("message", content)
        for d in delta.tool_calls:
            events += self._call(d.index, d.name, d.arguments)
        return events

    def finish(self, outcome: Outcome) -> list[dict[str, Any]]:
        """Close the items; the final event is response.completed or .incomplete."""
        events: list[dict[str, Any]] = []
        if not self.items and self._pending_space:
            events += self._text("message", self._pending_space)
        events += self._close_open()
        for item in self._calls.values():
            events += self._close_call(item)
        self._calls = {}
        incomplete = outcome.finish_reason == "length"
        self.status = "incomplete" if incomplete else "completed"
        self.incomplete = {"reason": "max_output_tokens"} if incomplete else None
        self.usage = {"input_tokens": outcome.prompt_tokens,
                      "input_tokens_details": {"cached_tokens": outcome.cached_tokens},
                      "output_tokens": outcome.completion_tokens,
                      "output_tokens_details": {"reasoning_tokens": 0},
                      "total_tokens": outcome.prompt_tokens + outcome.completion_tokens}
        events.append(self._event(f"response.{self.status}", response=self.response()))
        return events

    def failed(self, message: str) -> list[dict[str, Any]]:
        self.status = "failed"
        body = self.response()
        body["error"] = {"code": "server_error", "message": message}
        return [self._event("response.failed", response=body)]

    # -- items ----------------------------------------------------------------------------

    def _text(self, kind: str, text: str) -> list[dict[str, Any]]:
        events: list[dict[str, Any]] = []
        item = self._open
        if item is None or item.body["type"] != kind:
            events += self._close_open()
            item = self._open = self._add(_new_text_item(kind))
            events.append(self._event("response.output_item.added", output_index=item.index,
                                      item=dict(item.body)))
            if kind == "message":
                events.append(self._event("response.content_part.added", item_id=item.body["id"],
                                          output_index=item.index, content_index=0,
                                          part=_text_part(kind, "")))
        item.text += text
        delta = "output_text" if kind == "message" else "reasoning_text"
        extra = {"logprobs": []} if kind == "message" else {}
        events.append(self._event(f"response.{delta}.delta", item_id=item.body["id"],
                                  output_index=item.index, content_index=0, delta=text,
                                  **extra))
        return events

    def _close_open(self) -> list[dict[str, Any]]:
        item, self._open = self._open, None
        if item is None:
            return []
        kind = item.body["type"]
        part = _text_part(kind, item.text)
        item.body.update(content=[part], status="completed")
        base = {"item_id": item.body["id"], "output_index": item.index, "content_index": 0}
        if kind == "message":
            events = [self._event("response.output_text.done", text=item.text, logprobs=[],
                                  **base),
                      self._event("response.content_part.done", part=part, **base)]
        else:
            events = [self._event("response.reasoning_text.done", text=item.text, **base)]
        return events + [self._event("response.output_item.done", output_index=item.index,
                                     item=item.body)]

    def _call(self, index: int, name: str | None, arguments: str) -> list[dict[str, Any]]:
        events: list[dict[str, Any]] = []
        item = self._calls.get(index)
        if item is None:
            events += self._close_open()
            item = self._calls[index] = self._add({
                "type": "function_call", "id": new_id("fc_"), "call_id": new_id("call_"),
                "name": name or "", "arguments": "", "status": "in_progress"})
            events.append(self._event("response.output_item.added", output_index=item.index,
                                      item=dict(item.body)))
        if arguments:
            item.text += arguments
            events.append(self._event("response.function_call_arguments.delta",
                                      item_id=item.body["id"], output_index=item.index,
                                      delta=arguments))
        return events

    def _close_call(self, item: _Item) -> list[dict[str, Any]]:
        item.body.update(arguments=item.text, status="completed")
        return [self._event("response.function_call_arguments.done", item_id=item.body["id"],
                            output_index=item.index, name=item.body["name"],
                            arguments=item.text),
                self._event("response.output_item.done", output_index=item.index,
                            item=item.body)]

    def _add(self, body: dict[str, Any]) -> _Item:
        item = _Item(len(self.items), body)
        self.items.append(item)
        return item

    # -- the response object ----------------------------------------------------------------

    def response(self) -> dict[str, Any]:
        return {"id": self.rid, "object": "response", "created_at": self.created,
                "status": self.status, "model": self.model, "error": None,
                "incomplete_details": self.incomplete,
                "output": self.output_items(),
                "usage": self.usage, "previous_response_id": self.req.previous_response_id,
                "store": self.req.store, "reasoning": {"effort": None, "summary": None},
                **self.req.echo}

    def output_items(self) -> list[dict[str, Any]]:
        return [dict(item.body) for item in self.items]

    def history(self) -> list[dict[str, Any]]:
        """The conversation including this response's output: what a chained request
        continues."""
        reply: dict[str, Any] = {"role": "assistant", "content": ""}
        for item in self.items:
            kind = item.body["type"]
            if kind == "message":
                reply["content"] += item.text
            elif kind == "function_call":
                reply.setdefault("tool_calls", []).append(
                    {"id": item.body["call_id"], "type": "function",
                     "function": {"name": item.body["name"],
                                  "arguments": item.body["arguments"]}})
        return self.req.history + [reply]


def _new_text_item(kind: str) -> dict[str, Any]:
    if kind == "message":
        return {"type": "message", "id": new_id("msg_"), "status": "in_progress",
                "role": "assistant", "content": []}
    return {"type": "reasoning", "id": new_id("rs_"), "summary": [], "content": [],
            "status": "in_progress"}


def _text_part(kind: str, text: str) -> dict[str, Any]:
    if kind == "message":
        return {"type": "output_text", "text": text, "annotations": [], "logprobs": []}
    return {"type": "reasoning_text", "text": text}


def deleted(rid: str) -> dict[str, Any]:
    return {"id": rid, "object": "response", "deleted": True}
