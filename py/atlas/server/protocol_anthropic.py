"""Anthropic Messages request validation and response shapes.

The Messages API rejects unknown top-level fields ("Extra inputs are not permitted"), so we
do too. Inside messages, blocks and tools we read the fields we use and ignore the rest, so
clients' annotations (`cache_control` from Claude Code, for one) never fail a request.
Anthropic content blocks are mapped onto the OpenAI-shaped message list the chat templates
expect: `tool_use` blocks become assistant `tool_calls`, `tool_result` blocks
become `tool` messages, thinking blocks from earlier turns are dropped.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from ..core.sampling import SamplingParams
from .errors import invalid
from .protocol_openai import parse_tools
from .request_spec import GenerationSpec, ToolChoice
from .validation import Fields, require_object, string_list

MESSAGES_FIELDS = {"model", "messages", "max_tokens", "system", "temperature", "top_p", "top_k",
                   "stop_sequences", "stream", "tools", "tool_choice", "metadata", "thinking",
                   "service_tier"}
COUNT_TOKENS_FIELDS = {"model", "messages", "system", "tools", "tool_choice", "thinking"}

STOP_REASONS = {"stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use",
                "stop_sequence": "stop_sequence"}


def _reject_unknown(body: dict, allowed: set[str]) -> None:
    for key in body:
        if key not in allowed:
            raise invalid(f"{key}: Extra inputs are not permitted", key)


def _text_of(content: Any, param: str) -> str:
    """A tool_result's or system prompt's content: a string or text blocks."""
    if isinstance(content, str):
        return content
    if content is None:
        return ""
    if not isinstance(content, list):
        raise invalid(f"{param} must be a string or an array of content blocks", param)
    texts = []
    for i, block in enumerate(content):
        b = Fields(require_object(block, f"{param}.{i}"), f"{param}.{i}.")
        if b.string("type", required=True) != "text":
            raise invalid(f"{param}.{i}: only text blocks are supported here", f"{param}.{i}")
        texts.append(b.string("text", required=True))
    return "".join(texts)


def _message(raw: Any, i: int) -> list[dict[str, Any]]:
    param = f"messages.{i}"
    m = Fields(require_object(raw, param), f"{param}.")
    role = m.string("role", required=True)
    if role not in ("user", "assistant"):
        raise invalid(f"{param}.role must be 'user' or 'assistant'", f"{param}.role")
    content = m.raw("content")
    if isinstance(content, str):
        return [{"role": role, "content": content}]
    if not isinstance(content, list):
        raise invalid(f"{param}.content must be a string or an array of content blocks",
                      f"{param}.content")
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    results: list[dict[str, Any]] = []
    for j, block in enumerate(content):
        bp = f"{param}.content.{j}"
        b = Fields(require_object(block, bp), f"{bp}.")
        kind = b.string("type", required=True)
        if kind == "text":
            texts.append(b.string("text", required=True))
        elif kind == "tool_use" and role == "assistant":
            tool_input = b.obj("input", {})
            calls.append({"id": b.string("id", required=True), "type": "function",
                          "function": {"name": b.string("name", required=True),
                                       "arguments": tool_input}})
        elif kind == "tool_result" and role == "user":
            results.append({"role": "tool", "tool_call_id": b.string("tool_use_id", required=True),
                            "content": _text_of(b.raw("content"), f"{bp}.content")})
        elif kind in ("thinking", "redacted_thinking") and role == "assistant":
            continue
        else:
            raise invalid(f"{bp}: content block type {kind!r} is not supported in a {role} "
                          "message by this server", f"{bp}.type")
    out: list[dict[str, Any]] = list(results)
    if calls:
        out.append({"role": "assistant", "content": "".join(texts), "tool_calls": calls})
    elif texts or not results:
        out.append({"role": role, "content": "".join(texts)})
    return out


def _messages(body: Fields) -> list[dict[str, Any]]:
    raw = body.array("messages", required=True)
    if not raw:
        raise invalid("messages: at least one message is required", "messages")
    messages: list[dict[str, Any]] = []
    system = body.raw("system")
    if system is not None:
        messages.append({"role": "system", "content": _text_of(system, "system")})
    for i, m in enumerate(raw):
        messages.extend(_message(m, i))
    return messages


def _tools(body: Fields) -> list[dict[str, Any]] | None:
    raw = body.array("tools")
    if not raw:
        return None
    converted = []
    for i, tool in enumerate(raw):
        t = Fields(require_object(tool, f"tools.{i}"), f"tools.{i}.")
        kind = t.string("type")
        if kind not in (None, "custom"):
            raise invalid(f"tools.{i}: server tool type {kind!r} is not supported", f"tools.{i}")
        function = {"name": t.string("name", required=True),
                    "parameters": t.obj("input_schema", required=True)}
        if (description := t.string("description")) is not None:
            function["description"] = description
        converted.append({"type": "function", "function": function})
    return parse_tools(converted)


def _tool_choice(body: Fields, tools: list[dict[str, Any]] | None) -> tuple[ToolChoice, bool]:
    raw = body.obj("tool_choice")
    if raw is None:
        return ToolChoice("auto"), True
    c = Fields(raw, "tool_choice.")
    kind = c.string("type", required=True)
    parallel = not c.boolean("disable_parallel_tool_use", False)
    names = [t["function"]["name"] for t in tools or ()]
    if kind == "auto":
        return ToolChoice("auto"), parallel
    if kind == "none":
        return ToolChoice("none"), parallel
    if kind == "any":
        if not names:
            raise invalid("tool_choice 'any' needs tools", "tool_choice")
        return ToolChoice("required"), parallel
    if kind == "tool":
        name = c.string("name", required=True)
        if name not in names:
            raise invalid(f"tool_choice names tool {name!r}, which is not in tools",
                          "tool_choice.name")
        return ToolChoice("named", name), parallel
    raise invalid(f"tool_choice.type {kind!r} must be auto, any, tool or none", "tool_choice.type")


def _thinking(body: Fields) -> tuple[bool | None, int | None]:
    raw = body.obj("thinking")
    if raw is None:
        return None, None
    t = Fields(raw, "thinking.")
    kind = t.string("type", required=True)
    if kind == "disabled":
        return False, None
    if kind == "enabled":
        return True, t.integer("budget_tokens", None, lo=1)
    raise invalid("thinking.type must be 'enabled' or 'disabled'", "thinking.type")


def parse_messages_request(body: Any, defaults: SamplingParams = SamplingParams()
                           ) -> GenerationSpec:
    """`defaults`: the model's sampling preset, for every field the request leaves out."""
    body = require_object(body)
    _reject_unknown(body, MESSAGES_FIELDS)
    f = Fields(body)
    f.string("model", required=True)
    f.obj("metadata")
    f.string("service_tier")
    sampling = replace(defaults,
                       temperature=f.number("temperature", defaults.temperature, lo=0.0, hi=1.0),
                       top_p=f.number("top_p", defaults.top_p, lo=0.0, hi=1.0, lo_open=True),
                       top_k=f.integer("top_k", defaults.top_k, lo=0))
    tools = _tools(f)
    choice, parallel = _tool_choice(f, tools)
    enable_thinking, budget = _thinking(f)
    messages = _messages(f)
    return GenerationSpec(
        model=f.string("model"), sampling=sampling,
        max_tokens=f.integer("max_tokens", required=True, lo=1), messages=messages,
        stop=string_list(f.raw("stop_sequences"), "stop_sequences", max_items=64),
        tools=tools, tool_choice=choice, parallel_tool_calls=parallel,
        stream=f.boolean("stream", False), enable_thinking=enable_thinking,
        thinking_budget=budget, continue_final_message=_prefilled(messages))


def _prefilled(messages: list[dict[str, Any]]) -> bool:
    """A conversation ending in an assistant turn with text (and no tool calls) prefills the
    answer: the model continues that text, and the response holds only the continuation. As
    Anthropic's API does, trailing whitespace there is a 400 (a tokenizer would end the
    prefill inside a word boundary the model never saw)."""
    last = messages[-1]
    if last["role"] != "assistant" or last.get("tool_calls") or not last["content"]:
        return False
    if last["content"] != last["content"].rstrip():
        raise invalid("final assistant content cannot end with trailing whitespace",
                      "messages")
    return True


def parse_count_tokens_request(body: Any) -> GenerationSpec:
    body = require_object(body)
    _reject_unknown(body, COUNT_TOKENS_FIELDS)
    f = Fields(body)
    tools = _tools(f)
    choice, _ = _tool_choice(f, tools)
    enable_thinking, _ = _thinking(f)
    messages = _messages(f)
    return GenerationSpec(model=f.string("model", required=True), sampling=SamplingParams(),
                          max_tokens=None, messages=messages, tools=tools,
                          tool_choice=choice, enable_thinking=enable_thinking,
                          continue_final_message=_prefilled(messages))


def tool_use_block(call_id: str, name: str, arguments: str) -> dict[str, Any]:
    try:
        tool_input = json.loads(arguments)
    except ValueError:
        tool_input = {}
    return {"type": "tool_use", "id": call_id, "name": name,
            "input": tool_input if isinstance(tool_input, dict) else {"value": tool_input}}


def message_response(*, mid: str, model: str, content: list[dict[str, Any]],
                     stop_reason: str | None, stop_sequence: str | None, input_tokens: int,
                     output_tokens: int) -> dict[str, Any]:
    return {"id": mid, "type": "message", "role": "assistant", "model": model,
            "content": content, "stop_reason": stop_reason, "stop_sequence": stop_sequence,
            "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens}}
