"""The real server driven by the official `anthropic` SDK: messages, the streaming event
sequence, tool_use blocks, stop sequences and count_tokens."""

from __future__ import annotations

import anthropic
import pytest

WEATHER_TOOL = {"name": "get_weather", "description": "Current weather",
                "input_schema": {"type": "object",
                                 "properties": {"location": {"type": "string"}}}}
ANSWER = "The capital of France is Paris."


@pytest.fixture(scope="module")
def client(server):
    return anthropic.Anthropic(base_url=server.url, api_key="unused", max_retries=0)


def prompt_len(server, messages, system=None, tools=None):
    msgs = ([{"role": "system", "content": system}] if system else []) + messages
    text = server.tokenizer.chat_template(bool(tools)).render(msgs, tools=tools)
    return len(server.tokenizer.encode(text))


def test_message_non_streaming(client, server):
    messages = [{"role": "user", "content": "What is the capital of France?"}]
    msg = client.messages.create(model="tiny", max_tokens=64, messages=messages,
                                 system="Be brief.")
    assert msg.type == "message" and msg.role == "assistant"
    assert [b.type for b in msg.content] == ["text"] and msg.content[0].text == ANSWER
    assert msg.stop_reason == "end_turn" and msg.stop_sequence is None
    assert msg.usage.input_tokens == prompt_len(server, messages, system="Be brief.")
    assert msg.usage.output_tokens == len(server.tokenizer.encode(ANSWER)) + 1


def test_streaming_event_sequence(client):
    with client.messages.stream(model="tiny", max_tokens=64, messages=[
            {"role": "user", "content": "What is the capital of France?"}]) as stream:
        events = [e.type for e in stream if e.type in (
            "message_start", "content_block_start", "content_block_delta",
            "content_block_stop", "message_delta", "message_stop")]
        final = stream.get_final_message()
    assert events[0] == "message_start" and events[-2:] == ["message_delta", "message_stop"]
    assert events[1] == "content_block_start" and events[-3] == "content_block_stop"
    assert set(events[2:-3]) == {"content_block_delta"}
    assert final.content[0].text == ANSWER and final.stop_reason == "end_turn"


def test_stop_sequence_is_reported(client):
    for stream in (False, True):
        kwargs = dict(model="tiny", max_tokens=64, stop_sequences=["France"],
                      messages=[{"role": "user", "content": "What is the capital of France?"}])
        if stream:
            with client.messages.stream(**kwargs) as s:
                msg = s.get_final_message()
        else:
            msg = client.messages.create(**kwargs)
        assert msg.content[0].text == "The capital of "
        assert msg.stop_reason == "stop_sequence" and msg.stop_sequence == "France"


def test_tool_use_blocks_plain_and_streamed(client):
    kwargs = dict(model="tiny", max_tokens=64, tools=[WEATHER_TOOL],
                  messages=[{"role": "user", "content": "What is the weather in Paris?"}])
    plain = client.messages.create(**kwargs)
    with client.messages.stream(**kwargs) as s:
        deltas = [e.delta.type for e in s if e.type == "content_block_delta"]
        streamed = s.get_final_message()
    for msg in (plain, streamed):
        tool = [b for b in msg.content if b.type == "tool_use"]
        assert len(tool) == 1 and tool[0].name == "get_weather"
        assert tool[0].input == {"location": "Paris"} and tool[0].id.startswith("toolu_")
        assert msg.stop_reason == "tool_use"
    assert "input_json_delta" in deltas


def test_tool_result_round_trip_and_count_tokens(client, server):
    messages = [
        {"role": "user", "content": "What is the weather in Paris?"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1",
                                           "name": "get_weather",
                                           "input": {"location": "Paris"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1",
                                      "content": "15 C, cloudy"}]},
    ]
    count = client.messages.count_tokens(model="tiny", messages=messages, tools=[WEATHER_TOOL])
    template_messages = [
        messages[0],
        {"role": "assistant", "content": "", "tool_calls": [{"id": "toolu_1", "type": "function",
         "function": {"name": "get_weather", "arguments": {"location": "Paris"}}}]},
        {"role": "tool", "tool_call_id": "toolu_1", "content": "15 C, cloudy"},
    ]
    tools = [{"type": "function", "function": {
        "name": "get_weather", "parameters": WEATHER_TOOL["input_schema"],
        "description": "Current weather"}}]
    assert count.input_tokens == prompt_len(server, template_messages, tools=tools)
    msg = client.messages.create(model="tiny", max_tokens=8, messages=messages,
                                 tools=[WEATHER_TOOL])
    assert msg.usage.input_tokens == count.input_tokens


def test_streamed_message_equals_non_streamed(client):
    kwargs = dict(model="tiny", max_tokens=30,
                  messages=[{"role": "user", "content": "Tell me a story."}])
    plain = client.messages.create(**kwargs)
    with client.messages.stream(**kwargs) as s:
        streamed = s.get_final_message()
    assert [b.model_dump() for b in streamed.content] == [b.model_dump() for b in plain.content]
    assert (streamed.stop_reason, streamed.usage.output_tokens) == ("max_tokens", 30)
    assert plain.usage.output_tokens == 30
