"""Reasoning streamed on its own channel (OpenAI `reasoning`, Anthropic thinking blocks),
thinking disabled per request, forced tool calls (required / named), request timeouts."""

from __future__ import annotations

import json

import anthropic
import openai
import pytest

from atlas.server.context import ServerOptions
from tests.server.conftest import make_executor
from tests.server.harness import ServerThread
from tests.server.test_openai_sdk import WEATHER_TOOL

THINK_Q = [{"role": "user", "content": "Please think: where is Paris?"}]


@pytest.fixture(scope="module")
def oai(server):
    return openai.OpenAI(base_url=server.url + "/v1", api_key="k", max_retries=0)


def test_openai_reasoning_separate_from_content(oai):
    resp = oai.chat.completions.create(model="tiny", messages=THINK_Q, max_tokens=40)
    message = resp.choices[0].message
    assert message.content == "Paris."
    assert message.model_extra["reasoning"] == "France is in Europe.\n"
    chunks = list(oai.chat.completions.create(model="tiny", messages=THINK_Q, max_tokens=40,
                                              stream=True))
    reasoning = "".join(c.choices[0].delta.model_extra.get("reasoning") or ""
                        for c in chunks if c.choices)
    content = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert (reasoning, content) == ("France is in Europe.\n", "Paris.")


def test_thinking_disabled_per_request_strips_reasoning(oai, server):
    resp = oai.chat.completions.create(model="tiny", messages=THINK_Q, max_tokens=40,
                                       extra_body={"chat_template_kwargs":
                                                   {"enable_thinking": False}})
    assert resp.choices[0].message.content == "Paris."
    assert "reasoning" not in resp.choices[0].message.model_extra
    # the template's closed-empty think block is part of the prompt
    text = server.tokenizer.chat_template(False).render(THINK_Q, enable_thinking=False)
    assert text.endswith("<think>\n\n</think>\n\n")
    assert resp.usage.prompt_tokens == len(server.tokenizer.encode(text))


def test_anthropic_thinking_block_then_text(server):
    client = anthropic.Anthropic(base_url=server.url, api_key="k", max_retries=0)
    msg = client.messages.create(model="tiny", max_tokens=40, messages=THINK_Q)
    assert [b.type for b in msg.content] == ["thinking", "text"]
    assert msg.content[0].thinking == "France is in Europe.\n" and msg.content[1].text == "Paris."
    with client.messages.stream(model="tiny", max_tokens=40, messages=THINK_Q) as stream:
        kinds = [e.content_block.type for e in stream if e.type == "content_block_start"]
        final = stream.get_final_message()
    assert kinds == ["thinking", "text"] and final.content[1].text == "Paris."


@pytest.mark.parametrize("choice", ["required", {"type": "function",
                                                 "function": {"name": "get_weather"}}])
def test_forced_tool_choice_commits_the_model_to_a_call(oai, choice):
    # the prompt itself does not ask for weather: only the forced prefix makes the call
    resp = oai.chat.completions.create(
        model="tiny", messages=[{"role": "user", "content": "Hello there."}],
        tools=[WEATHER_TOOL], tool_choice=choice, max_tokens=40)
    (call,) = resp.choices[0].message.tool_calls
    assert call.function.name == "get_weather"
    assert json.loads(call.function.arguments) == {"location": "Paris"}
    assert resp.choices[0].finish_reason == "tool_calls"


def test_request_timeout_ends_generation(model_dir):
    from atlas.server.app_assets import load_assets
    tok = load_assets(model_dir, behavior_lookup=lambda c: {}).tokenizer
    srv = ServerThread(model_dir, make_executor(tok, step_delay_s=0.01),
                       options=ServerOptions(model_name="tiny", request_timeout_s=0.2)).start()
    try:
        client = openai.OpenAI(base_url=srv.url + "/v1", api_key="k", max_retries=0)
        resp = client.chat.completions.create(
            model="tiny", messages=[{"role": "user", "content": "Go on forever."}],
            max_tokens=400)
        assert resp.choices[0].finish_reason == "length"
        assert 0 < resp.usage.completion_tokens < 400
    finally:
        srv.stop()


def test_tools_on_a_model_without_a_tool_format_are_refused(model_dir):
    from atlas.server.app_assets import load_assets
    tok = load_assets(model_dir, behavior_lookup=lambda c: {}).tokenizer
    srv = ServerThread(model_dir, make_executor(tok),
                       options=ServerOptions(model_name="tiny", tool_parser=None)).start()
    try:
        client = openai.OpenAI(base_url=srv.url + "/v1", api_key="k", max_retries=0)
        with pytest.raises(openai.BadRequestError, match="tool-call-parser"):
            client.chat.completions.create(
                model="tiny", messages=[{"role": "user", "content": "Hi"}],
                tools=[WEATHER_TOOL], max_tokens=4)
        ok = client.chat.completions.create(   # tool_choice none: tools are not used at all
            model="tiny", messages=[{"role": "user", "content": "Hi"}], tools=[WEATHER_TOOL],
            tool_choice="none", max_tokens=4)
        assert ok.choices[0].finish_reason == "length"
    finally:
        srv.stop()
