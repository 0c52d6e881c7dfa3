"""gpt-oss's harmony format end to end: the real server (`--tool-call-parser harmony`) around
the scripted executor, a tokenizer whose harmony control tokens are special tokens, and the
official SDKs: analysis as reasoning / thinking blocks, final as content, commentary calls as
tool calls, streamed and not; `reasoning_effort` reaches the chat template."""

from __future__ import annotations

import json

import anthropic
import openai
import pytest

from atlas.server.context import ServerOptions
from tests.server.conftest import make_executor
from tests.server.harmony_model import build_harmony_model_dir
from tests.server.harness import ServerThread
from tests.server.test_openai_sdk import WEATHER_TOOL

ANSWER = ("<|channel|>analysis<|message|>France is in Europe.<|end|>"
          "<|start|>assistant<|channel|>final<|message|>Paris.<|return|>")
TOOL_CALL = ("<|channel|>analysis<|message|>Need the weather.<|end|><|start|>assistant"
             "<|channel|>commentary<|message|>Checking.<|end|><|start|>assistant"
             "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>"
             '{"location": "Paris"}<|call|>')
HIGH = "<|channel|>final<|message|>Thought hard.<|return|>"
CAPITAL = [{"role": "user", "content": "What is the capital of France?"}]
WEATHER = [{"role": "user", "content": "What is the weather in Paris?"}]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    from atlas.server.app_assets import load_assets
    model_dir = build_harmony_model_dir(tmp_path_factory.mktemp("harmony-model"))
    tok = load_assets(model_dir, behavior_lookup=lambda c: {}).tokenizer
    executor = make_executor(tok, scripts=[
        (tok.encode("Reasoning: high"), tok.encode(HIGH)),   # the template got the effort
        (tok.encode(" weather"), tok.encode(TOOL_CALL)),
        (tok.encode(" capital"), tok.encode(ANSWER)),
    ])
    executor.eos_id = tok.token_id("<|return|>")
    srv = ServerThread(model_dir, executor,
                       options=ServerOptions(model_name="tiny", tool_parser="harmony")).start()
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def oai(server):
    return openai.OpenAI(base_url=server.url + "/v1", api_key="k", max_retries=0)


def joined(chunks, field: str) -> str:
    """One text field of a streamed choice's deltas, joined."""
    deltas = [c.choices[0].delta for c in chunks if c.choices]
    return "".join(getattr(d, field, None) or d.model_extra.get(field) or "" for d in deltas)


@pytest.mark.parametrize("stream", [False, True])
def test_openai_reasoning_and_content(oai, stream):
    resp = oai.chat.completions.create(model="tiny", messages=CAPITAL, max_tokens=64,
                                       stream=stream)
    if stream:
        chunks = list(resp)
        got = joined(chunks, "reasoning_content"), joined(chunks, "content")
        finish = chunks[-1].choices[0].finish_reason
    else:
        message = resp.choices[0].message
        got = message.model_extra["reasoning_content"], message.content
        finish = resp.choices[0].finish_reason
    assert got == ("France is in Europe.", "Paris.") and finish == "stop"


def test_openai_tool_call_plain_and_streamed(oai):
    kwargs = dict(model="tiny", messages=WEATHER, tools=[WEATHER_TOOL], max_tokens=96)
    resp = oai.chat.completions.create(**kwargs)
    choice = resp.choices[0]
    (call,) = choice.message.tool_calls
    assert (call.function.name, json.loads(call.function.arguments)) == (
        "get_weather", {"location": "Paris"})
    assert choice.finish_reason == "tool_calls" and choice.message.content == "Checking."
    assert choice.message.model_extra["reasoning_content"] == "Need the weather."
    chunks = [c for c in oai.chat.completions.create(**kwargs, stream=True) if c.choices]
    deltas = [d for c in chunks for d in c.choices[0].delta.tool_calls or ()]
    assert deltas[0].function.name == "get_weather" and deltas[0].id.startswith("call_")
    assert json.loads("".join(d.function.arguments or "" for d in deltas)) == {
        "location": "Paris"}
    assert chunks[-1].choices[0].finish_reason == "tool_calls"


def test_tool_choice_none_keeps_the_channels(oai):
    resp = oai.chat.completions.create(model="tiny", messages=CAPITAL, tools=[WEATHER_TOOL],
                                       tool_choice="none", max_tokens=64)
    assert resp.choices[0].message.content == "Paris."


def test_reasoning_effort_reaches_the_template(oai, server):
    resp = oai.chat.completions.create(model="tiny", messages=CAPITAL, max_tokens=64,
                                       reasoning_effort="high")
    assert resp.choices[0].message.content == "Thought hard."
    text = server.tokenizer.chat_template(False).render(CAPITAL,
                                                        extra={"reasoning_effort": "high"})
    assert resp.usage.prompt_tokens == len(server.tokenizer.encode(text))
    with pytest.raises(openai.BadRequestError, match="reasoning_effort"):
        oai.chat.completions.create(model="tiny", messages=CAPITAL, max_tokens=8,
                                    reasoning_effort="extreme")


def test_thinking_disabled_drops_the_analysis(oai):
    resp = oai.chat.completions.create(model="tiny", messages=CAPITAL, max_tokens=64,
                                       reasoning_effort="none")
    assert resp.choices[0].message.content == "Paris."
    assert "reasoning_content" not in resp.choices[0].message.model_extra


def test_anthropic_thinking_text_and_tool_use(server):
    client = anthropic.Anthropic(base_url=server.url, api_key="k", max_retries=0)
    msg = client.messages.create(model="tiny", max_tokens=64, messages=CAPITAL)
    assert [b.type for b in msg.content] == ["thinking", "text"]
    assert (msg.content[0].thinking, msg.content[1].text) == ("France is in Europe.", "Paris.")
    tool = {"name": "get_weather", "description": "Current weather",
            "input_schema": WEATHER_TOOL["function"]["parameters"]}
    with client.messages.stream(model="tiny", max_tokens=96, messages=WEATHER,
                                tools=[tool]) as stream:
        final = stream.get_final_message()
    assert [b.type for b in final.content] == ["thinking", "text", "tool_use"]
    assert final.content[2].input == {"location": "Paris"} and final.stop_reason == "tool_use"


def test_raw_completions_keep_todays_decoding(server):
    client = openai.OpenAI(base_url=server.url + "/v1", api_key="k", max_retries=0)
    resp = client.completions.create(model="tiny", prompt="What is the capital of France?",
                                     max_tokens=64)
    assert resp.choices[0].text == "analysisFrance is in Europe.assistantfinalParis."


def test_responses_api_items(oai):
    resp = oai.responses.create(model="tiny", input="What is the capital of France?",
                                max_output_tokens=64, reasoning={"effort": "high"})
    assert resp.output_text == "Thought hard."   # the effort reached the template
    resp = oai.responses.create(model="tiny", input="What is the weather in Paris?",
                                max_output_tokens=96, tools=[{
                                    "type": "function", "name": "get_weather",
                                    "parameters": WEATHER_TOOL["function"]["parameters"]}])
    assert [item.type for item in resp.output] == ["reasoning", "message", "function_call"]
    call = resp.output[2]
    assert (call.name, json.loads(call.arguments)) == ("get_weather", {"location": "Paris"})
