"""The Responses API (/v1/responses) over real HTTP with the official openai SDK, around
the scripted fake model (tests/server/conftest.py: a prompt containing " capital" answers
"The capital of France is Paris.", one containing " weather" calls get_weather), so
chaining is visible: a follow-up whose own input has no trigger answers the script only
when `previous_response_id` brought the earlier turn into the prompt.

Structured `text.format` and `responses.parse` run on a real model in
test_structured_output.py."""

from __future__ import annotations

import json

import openai
import pytest

from atlas.server.context import ServerOptions
from tests.server.conftest import make_executor
from tests.server.harness import ServerThread

ANSWER = "The capital of France is Paris."
WEATHER_TOOL = {"type": "function", "name": "get_weather", "description": "Weather now.",
                "parameters": {"type": "object", "properties": {
                    "location": {"type": "string"}}, "required": ["location"]}}
NO_THINKING = {"reasoning": {"effort": "none"}}


@pytest.fixture(scope="module")
def client(server):
    return openai.OpenAI(base_url=server.url + "/v1", api_key="k", max_retries=0)


def test_create_with_a_string_input(client):
    resp = client.responses.create(model="tiny", input="What is the capital?",
                                   max_output_tokens=40, **NO_THINKING)
    assert resp.object == "response" and resp.id.startswith("resp_")
    assert resp.status == "completed"
    assert resp.output_text == ANSWER
    (item,) = resp.output
    assert item.type == "message" and item.role == "assistant"
    assert resp.usage.input_tokens > 0 and resp.usage.output_tokens > 0
    assert resp.usage.total_tokens == resp.usage.input_tokens + resp.usage.output_tokens


def test_items_and_instructions(client):
    resp = client.responses.create(
        model="tiny", instructions="Answer briefly.", max_output_tokens=40, **NO_THINKING,
        input=[{"role": "user", "content": [{"type": "input_text", "text": "The capital"}]},
               {"type": "message", "role": "assistant", "content": "Which one?"},
               {"role": "user", "content": "of France?"}])
    assert resp.output_text == ANSWER
    assert resp.instructions == "Answer briefly."


def test_max_output_tokens_makes_it_incomplete(client):
    resp = client.responses.create(model="tiny", input="What is the capital?",
                                   max_output_tokens=2, **NO_THINKING)
    assert resp.status == "incomplete"
    assert resp.incomplete_details.reason == "max_output_tokens"
    assert resp.usage.output_tokens == 2


def test_stream_events_come_in_the_published_order(client):
    events = list(client.responses.create(model="tiny", input="What is the capital?",
                                          max_output_tokens=40, stream=True, **NO_THINKING))
    kinds = [e.type for e in events]
    assert [e.sequence_number for e in events] == list(range(len(events)))
    deltas = [k for k in kinds if k == "response.output_text.delta"]
    assert kinds == (["response.created", "response.in_progress",
                      "response.output_item.added", "response.content_part.added"]
                     + deltas + ["response.output_text.done", "response.content_part.done",
                                 "response.output_item.done", "response.completed"])
    assert len(deltas) > 1
    text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    final = events[-1].response
    assert text == final.output_text == ANSWER
    assert events[0].response.status == "in_progress" and final.status == "completed"
    item_ids = {e.item_id for e in events if hasattr(e, "item_id")}
    assert item_ids == {final.output[0].id}
    stored = client.responses.retrieve(final.id)
    assert stored.output_text == ANSWER and stored.usage == final.usage


def test_previous_response_id_chains_the_conversation(client):
    first = client.responses.create(model="tiny", input="What is the capital?",
                                    max_output_tokens=40, **NO_THINKING)
    alone = client.responses.create(model="tiny", input="Say it again.",
                                    max_output_tokens=12, **NO_THINKING)
    assert alone.output_text != ANSWER
    chained = client.responses.create(model="tiny", input="Say it again.",
                                      previous_response_id=first.id, max_output_tokens=40,
                                      **NO_THINKING)
    assert chained.output_text == ANSWER
    assert chained.previous_response_id == first.id
    assert chained.usage.input_tokens > first.usage.input_tokens + first.usage.output_tokens


def test_get_delete_and_store_false(client):
    resp = client.responses.create(model="tiny", input="What is the capital?",
                                   max_output_tokens=40, **NO_THINKING)
    assert client.responses.retrieve(resp.id).output_text == ANSWER
    client.responses.delete(resp.id)
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(resp.id)
    with pytest.raises(openai.NotFoundError):
        client.responses.delete(resp.id)
    with pytest.raises(openai.BadRequestError) as err:
        client.responses.create(model="tiny", input="x", previous_response_id=resp.id)
    assert err.value.body["param"] == "previous_response_id"
    unstored = client.responses.create(model="tiny", input="hi", store=False,
                                       max_output_tokens=3, **NO_THINKING)
    assert unstored.store is False
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(unstored.id)


def test_function_calls_and_their_outputs(client):
    resp = client.responses.create(model="tiny", input="What is the weather in Paris?",
                                   tools=[WEATHER_TOOL], max_output_tokens=60, **NO_THINKING)
    calls = [item for item in resp.output if item.type == "function_call"]
    assert [c.name for c in calls] == ["get_weather"]
    assert json.loads(calls[0].arguments) == {"location": "Paris"}
    assert calls[0].call_id.startswith("call_")
    follow = client.responses.create(
        model="tiny", previous_response_id=resp.id, tools=[WEATHER_TOOL], **NO_THINKING,
        max_output_tokens=8,
        input=[{"type": "function_call_output", "call_id": calls[0].call_id,
                "output": "18 C and sunny"}])
    assert follow.status in ("completed", "incomplete")
    assert follow.usage.input_tokens > resp.usage.input_tokens


def test_function_call_stream_events(client):
    events = list(client.responses.create(model="tiny", input="What is the weather in Paris?",
                                          tools=[WEATHER_TOOL], max_output_tokens=60,
                                          stream=True, **NO_THINKING))
    kinds = [e.type for e in events]
    call_events = [k for k in kinds if "function_call" in k or "output_item" in k]
    assert call_events[0] == "response.output_item.added"
    assert call_events[-2:] == ["response.function_call_arguments.done",
                                "response.output_item.done"]
    assert "response.function_call_arguments.delta" in kinds
    done = next(e for e in events if e.type == "response.function_call_arguments.done")
    assert json.loads(done.arguments) == {"location": "Paris"}
    assert kinds[-1] == "response.completed"


def test_bad_requests_are_400s(client):
    for kw, param in (({"tools": [{"type": "web_search"}]}, "tools[0].type"),
                      ({"input": []}, "input"),
                      ({"input": [{"type": "image_generation_call"}]}, "input[0].type")):
        with pytest.raises(openai.BadRequestError) as err:
            client.responses.create(model="tiny", **{"input": "hi", **kw})
        assert err.value.body["param"] == param


def test_the_store_survives_a_restart(model_dir, tmp_path):
    from atlas.server.app_assets import load_assets
    tok = load_assets(model_dir, behavior_lookup=lambda c: {}).tokenizer
    options = ServerOptions(model_name="tiny", store_path=str(tmp_path / "responses.db"))

    def start() -> ServerThread:
        executor = make_executor(tok, scripts=[(tok.encode(" capital"), tok.encode(ANSWER))])
        return ServerThread(model_dir, executor, options=options).start()

    srv = start()
    first = openai.OpenAI(base_url=srv.url + "/v1", api_key="k", max_retries=0)
    created = first.responses.create(model="tiny", input="What is the capital?",
                                     max_output_tokens=40, **NO_THINKING)
    conv = first.conversations.create(items=[{"role": "user", "content": "Hello"}])
    srv.stop()
    srv = start()
    try:
        again = openai.OpenAI(base_url=srv.url + "/v1", api_key="k", max_retries=0)
        assert again.responses.retrieve(created.id).output_text == ANSWER
        chained = again.responses.create(model="tiny", input="Say it again.",
                                         previous_response_id=created.id,
                                         max_output_tokens=40, **NO_THINKING)
        assert chained.output_text == ANSWER
        (item,) = again.conversations.items.list(conv.id).data
        assert item.content[0].text == "Hello"
    finally:
        srv.stop()


def test_conversations_hold_the_items_of_their_responses(client):
    conv = client.conversations.create(
        items=[{"type": "message", "role": "user", "content": "What is the capital?"}],
        metadata={"topic": "geo"})
    assert conv.id.startswith("conv_") and conv.metadata == {"topic": "geo"}
    assert client.conversations.retrieve(conv.id).id == conv.id
    resp = client.responses.create(model="tiny", input="Say it again.", conversation=conv.id,
                                   max_output_tokens=40, **NO_THINKING)
    assert resp.output_text == ANSWER            # the stored first turn was in the prompt
    items = client.conversations.items.list(conv.id, order="asc").data
    assert [(i.type, i.role) for i in items] == [("message", "user"), ("message", "user"),
                                                 ("message", "assistant")]
    assert items[2].content[0].text == ANSWER and items[2].id == resp.output[0].id
    newest = client.conversations.items.list(conv.id, limit=1)
    assert [i.id for i in newest.data] == [items[2].id] and newest.has_more
    added = client.conversations.items.create(
        conv.id, items=[{"type": "message", "role": "user", "content": "Thanks!"}])
    assert [i.content[0].text for i in added.data] == ["Thanks!"]
    assert client.conversations.items.retrieve(items[1].id, conversation_id=conv.id).id \
        == items[1].id
    client.conversations.items.delete(items[1].id, conversation_id=conv.id)
    assert len(client.conversations.items.list(conv.id).data) == 3
    updated = client.conversations.update(conv.id, metadata={"topic": "capitals"})
    assert updated.metadata == {"topic": "capitals"}
    with pytest.raises(openai.BadRequestError) as err:
        client.responses.create(model="tiny", input="x", conversation=conv.id,
                                previous_response_id=resp.id)
    assert err.value.body["param"] == "conversation"
    client.conversations.delete(conv.id)
    with pytest.raises(openai.NotFoundError):
        client.conversations.retrieve(conv.id)
    with pytest.raises(openai.NotFoundError):
        client.responses.create(model="tiny", input="x", conversation=conv.id)
