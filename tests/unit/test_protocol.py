"""Request validation for both APIs: what is accepted, how it maps to a GenerationSpec,
and what is refused."""

from __future__ import annotations

import pytest

from atlas.server.errors import ApiError
from atlas.server.protocol_anthropic import parse_count_tokens_request, parse_messages_request
from atlas.server.protocol_openai import parse_chat_request, parse_completion_request

CHAT = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
TOOL = {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}


def bad(fn, body, param=None, contains=""):
    with pytest.raises(ApiError) as info:
        fn(body)
    assert info.value.status == 400
    if param is not None:
        assert info.value.param == param
    assert contains in info.value.message
    return info.value


def test_chat_sampling_and_limits_map_to_the_spec():
    spec = parse_chat_request({**CHAT, "temperature": 0, "top_p": 0.5, "top_k": -1,
                               "min_p": 0.1, "seed": 7, "max_completion_tokens": 9,
                               "max_tokens": 100, "stop": "END", "stream": True,
                               "stream_options": {"include_usage": True},
                               "presence_penalty": 0.5, "frequency_penalty": -0.5,
                               "repetition_penalty": 1.1})
    s = spec.sampling
    assert (s.temperature, s.top_p, s.top_k, s.min_p, s.seed) == (0.0, 0.5, 0, 0.1, 7)
    assert (s.presence_penalty, s.frequency_penalty, s.repetition_penalty) == (0.5, -0.5, 1.1)
    assert spec.max_tokens == 9 and spec.stop == ["END"] and spec.include_usage


def test_chat_content_parts_roles_and_history_tool_calls():
    spec = parse_chat_request({**CHAT, "messages": [
        {"role": "developer", "content": [{"type": "text", "text": "be "},
                                          {"type": "text", "text": "brief"}]},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function",
             "function": {"name": "f", "arguments": '{"a": 1}'}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "ok"}]})
    system, assistant, tool = spec.messages
    assert system == {"role": "system", "content": "be brief"}
    assert assistant["tool_calls"][0]["function"] == {"name": "f", "arguments": {"a": 1}}
    assert tool == {"role": "tool", "content": "ok", "tool_call_id": "c1"}


def test_tool_choice_forms():
    assert parse_chat_request({**CHAT, "tools": [TOOL]}).tool_choice.mode == "auto"
    assert parse_chat_request({**CHAT, "tools": [TOOL], "tool_choice": "required"}
                              ).tool_choice.forces_call
    named = parse_chat_request({**CHAT, "tools": [TOOL], "tool_choice": {
        "type": "function", "function": {"name": "f"}}}).tool_choice
    assert (named.mode, named.name) == ("named", "f")
    bad(parse_chat_request, {**CHAT, "tools": [TOOL], "tool_choice": {
        "type": "function", "function": {"name": "g"}}}, "tool_choice.function.name")
    bad(parse_chat_request, {**CHAT, "tool_choice": "required"}, "tool_choice")
    bad(parse_chat_request, {**CHAT, "tools": [TOOL], "tool_choice": "sometimes"}, "tool_choice")


@pytest.mark.parametrize("body,param", [
    ({**CHAT, "unknown": 1}, "unknown"),
    ({**CHAT, "n": 0}, "n"),
    ({**CHAT, "top_logprobs": 2}, "top_logprobs"),
    ({**CHAT, "temperature": True}, "temperature"),
    ({**CHAT, "seed": 1.5}, "seed"),
    ({**CHAT, "messages": []}, "messages"),
    ({**CHAT, "messages": [{"role": "user"}]}, "messages[0].content"),
    ({**CHAT, "messages": [{"role": "user", "content": [{"type": "image_url"}]}]},
     "messages[0].content[0].type"),
    ({**CHAT, "response_format": {"type": "xml"}}, "response_format.type"),
    ({**CHAT, "response_format": {"type": "json_schema", "json_schema": {"schema": {}}}},
     "response_format.json_schema.name"),
    ({**CHAT, "response_format": {"type": "json_schema",
                                  "json_schema": {"name": "x", "schema": [1]}}},
     "response_format.json_schema.schema"),
    ({**CHAT, "stream_options": {"include_usage": True}}, "stream_options"),
    ({**CHAT, "tools": [{"type": "function", "function": {"name": "bad name"}}]},
     "tools[0].function.name"),
    ({"messages": CHAT["messages"]}, "model"),
])
def test_chat_rejections(body, param):
    bad(parse_chat_request, body, param)


def test_reasoning_effort_and_template_kwargs_control_thinking():
    assert parse_chat_request({**CHAT, "reasoning_effort": "none"}).enable_thinking is False
    spec = parse_chat_request({**CHAT, "chat_template_kwargs": {"enable_thinking": True,
                                                                "custom": 1}})
    assert spec.enable_thinking is True and spec.template_kwargs == {"custom": 1}


def test_completion_prompt_forms():
    assert parse_completion_request({"model": "m", "prompt": "x"}).max_tokens == 16
    assert parse_completion_request({"model": "m", "prompt": [1, 2, 3]}).prompt == [1, 2, 3]
    assert parse_completion_request({"model": "m", "prompt": ["only"]}).prompt == "only"
    batch = parse_completion_request({"model": "m", "prompt": ["a", [4, 5], "b"]})
    assert (batch.prompt, batch.more_prompts) == ("a", [[4, 5], "b"])
    assert parse_completion_request({"model": "m", "prompt": "x", "echo": True}).echo
    echo = parse_completion_request({"model": "m", "prompt": "x", "echo": True, "logprobs": 1,
                                     "max_tokens": 0})
    assert (echo.max_tokens, echo.prompt_top_n) == (0, 1)
    both = parse_completion_request({"model": "m", "prompt": "x", "echo": True, "logprobs": 1,
                                     "prompt_logprobs": 3})
    assert (both.prompt_logprobs, both.prompt_top_n) == (3, 3)
    assert parse_completion_request({"model": "m", "prompt": "x", "logprobs": 1}
                                    ).prompt_top_n is None
    bad(parse_completion_request, {"model": "m", "prompt": "x", "max_tokens": 0}, "max_tokens")
    bad(parse_completion_request, {"model": "m", "prompt": "x", "prompt_logprobs": 1,
                                   "stream": True}, "prompt_logprobs")
    bad(parse_completion_request, {"model": "m", "prompt": ["a", 5]}, "prompt")
    bad(parse_completion_request, {"model": "m", "prompt": ["a"] * 65}, "prompt")
    bad(parse_completion_request, {"model": "m"}, "prompt")


MSG = {"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]}


def test_anthropic_blocks_map_to_template_messages():
    spec = parse_messages_request({**MSG, "system": [{"type": "text", "text": "sys"}],
                                   "stop_sequences": ["X"], "top_k": 5,
                                   "thinking": {"type": "enabled", "budget_tokens": 64},
                                   "tools": [{"name": "f", "input_schema": {"type": "object"}}],
                                   "tool_choice": {"type": "any"}, "messages": [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "hmm", "signature": "s"},
            {"type": "text", "text": "calling"},
            {"type": "tool_use", "id": "t1", "name": "f", "input": {"a": 1}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "t1",
             "content": [{"type": "text", "text": "42"}]},
            {"type": "text", "text": "thanks"}]}]})
    assert spec.messages == [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": "calling", "tool_calls": [
            {"id": "t1", "type": "function", "function": {"name": "f", "arguments": {"a": 1}}}]},
        {"role": "tool", "tool_call_id": "t1", "content": "42"},
        {"role": "user", "content": "thanks"}]
    assert spec.stop == ["X"] and spec.sampling.top_k == 5
    assert spec.tool_choice.mode == "required" and spec.thinking_budget == 64
    assert spec.enable_thinking is True


@pytest.mark.parametrize("body,param", [
    ({**MSG, "n": 1}, "n"),
    ({k: v for k, v in MSG.items() if k != "max_tokens"}, "max_tokens"),
    ({**MSG, "temperature": 1.5}, "temperature"),
    ({**MSG, "messages": [{"role": "system", "content": "x"}]}, "messages.0.role"),
    ({**MSG, "messages": [{"role": "user", "content": [{"type": "image"}]}]},
     "messages.0.content.0.type"),
    ({**MSG, "tools": [{"name": "f", "input_schema": {}}],
      "tool_choice": {"type": "tool", "name": "g"}}, "tool_choice.name"),
    ({**MSG, "thinking": {"type": "maybe"}}, "thinking.type"),
])
def test_anthropic_rejections(body, param):
    bad(parse_messages_request, body, param)


def test_count_tokens_rejects_generation_fields():
    bad(parse_count_tokens_request, MSG, "max_tokens", "Extra inputs are not permitted")
    spec = parse_count_tokens_request({k: v for k, v in MSG.items() if k != "max_tokens"})
    assert spec.messages == [{"role": "user", "content": "hi"}]


def test_anthropic_nested_annotations_are_accepted():
    cache = {"type": "ephemeral"}
    spec = parse_messages_request({**MSG, "system": [{"type": "text", "text": "s",
                                                      "cache_control": cache}],
                                   "tools": [{"name": "f", "input_schema": {},
                                              "cache_control": cache}],
                                   "messages": [{"role": "user", "content": [
                                       {"type": "text", "text": "q", "cache_control": cache}]}]})
    assert spec.messages == [{"role": "system", "content": "s"}, {"role": "user", "content": "q"}]


def test_model_preset_fills_only_the_fields_a_request_leaves_out():
    from atlas.core.sampling import SamplingParams
    preset = SamplingParams(temperature=0.6, top_p=0.95, top_k=20, min_p=0.05)
    s = parse_chat_request({**CHAT, "temperature": 0.1}, preset).sampling
    assert (s.temperature, s.top_p, s.top_k, s.min_p) == (0.1, 0.95, 20, 0.05)
    a = parse_messages_request({**MSG, "top_k": 3}, preset).sampling
    assert (a.temperature, a.top_p, a.top_k, a.min_p) == (0.6, 0.95, 3, 0.05)
    assert parse_completion_request({"model": "m", "prompt": "x"}, preset).sampling == preset


def test_model_default_sampling_reads_the_matching_model_toml(skip_built_kernels, monkeypatch):
    from atlas.server.app_assets import model_default_sampling
    monkeypatch.setenv("ATLAS_KERNELS_DIR", str(skip_built_kernels))
    qwen = model_default_sampling({"model_type": "qwen3", "hidden_size": 4096}, "host")
    assert qwen is not None and (qwen.temperature, qwen.top_k) == (0.6, 20)
    smol = model_default_sampling({"model_type": "llama", "hidden_size": 576}, "host")
    assert smol is not None and (smol.temperature, smol.top_p) == (0.0, 1.0)  # its own: greedy
    assert model_default_sampling({"model_type": "unknown-family"}, "host") is None
