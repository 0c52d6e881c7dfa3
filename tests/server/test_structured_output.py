"""Structured output over real HTTP with the official SDKs, on a random-weight model whose
unconstrained output is noise (tests/fixtures/tiny-qwen3's weights behind a tokenizer
trained in the test), sampled at temperature 1 on the host backend: every JSON answer
validates against its schema, forced tool calls always parse, Pydantic `parse` works, and
schemas the grammar engine refuses are 400s. (A grammar dead end, impossible on a
byte-level vocabulary, is covered in tests/unit/test_engine_grammar.py.)"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import anthropic
import jsonschema
import openai
import pydantic
import pytest

from tests.server.fakes import build_tiny_model_dir
from tests.server.harness import host_model_server
from tests.unit.grammar_support import load_schema

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "tiny-qwen3"
NO_THINKING = {"chat_template_kwargs": {"enable_thinking": False}}
# bounded strings: a random model ends a free string only by chance
WEATHER = {"type": "object", "properties": {
    "location": {"type": "string", "maxLength": 12},
    "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
    "required": ["location", "unit"], "additionalProperties": False}
SHELL = {"type": "object", "properties": {
    "command": {"type": "string", "maxLength": 16},
    "timeout_s": {"type": "integer", "minimum": 1, "maximum": 600}},
    "required": ["command"], "additionalProperties": False}
TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": WEATHER}},
         {"type": "function", "function": {"name": "run_shell", "parameters": SHELL}}]


def random_model_dir(path: Path) -> Path:
    """The fixture's random weights (512 logit rows) behind a 480-token BPE tokenizer
    with a ChatML template; a longer context for prompts that carry tool schemas."""
    build_tiny_model_dir(path, tokenizer_vocab=480)
    config = json.loads((FIXTURE / "config.json").read_text())
    config["max_position_embeddings"] = 2048
    (path / "config.json").write_text(json.dumps(config))
    shutil.copy(FIXTURE / "model.safetensors", path / "model.safetensors")
    return path


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    model_dir = random_model_dir(tmp_path_factory.mktemp("random-model"))
    srv = host_model_server(model_dir, max_seq_len=2048, max_batch_size=4,
                            max_prefill_tokens=512).start()
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def client(server):
    return openai.OpenAI(base_url=server.url + "/v1", api_key="k", max_retries=0)


def ask(client, seed: int, max_tokens: int = 300, extra: dict | None = None, **kw):
    """A chat request, thinking off, with `extra` body fields (vLLM's extensions)."""
    return client.chat.completions.create(
        model="tiny", messages=[{"role": "user", "content": "Give me data."}],
        temperature=1.0, seed=seed, max_tokens=max_tokens,
        extra_body={**NO_THINKING, **(extra or {})}, **kw)


@pytest.mark.parametrize("name", ["sentiment", "geo_point", "shape_anyof"])
def test_json_schema_outputs_of_random_weights_validate(client, name):
    schema = load_schema(name)
    for seed in (11,):
        resp = ask(client, seed, response_format={
            "type": "json_schema", "json_schema": {"name": name, "schema": schema,
                                                   "strict": True}})
        choice = resp.choices[0]
        assert choice.finish_reason == "stop", choice
        jsonschema.validate(json.loads(choice.message.content), schema)


def test_unconstrained_random_weights_are_not_json(client):
    resp = ask(client, 0, max_tokens=40)
    with pytest.raises(ValueError):
        json.loads(resp.choices[0].message.content)


def test_json_object_is_an_object(client):
    resp = ask(client, 5, response_format={"type": "json_object"})
    assert isinstance(json.loads(resp.choices[0].message.content), dict)


class Weather(pydantic.BaseModel):
    city: str
    celsius: int
    sunny: bool


def test_sdk_parse_with_a_pydantic_model(client):
    resp = client.chat.completions.parse(
        model="tiny", messages=[{"role": "user", "content": "Weather?"}], temperature=1.0,
        seed=3, max_tokens=200, response_format=Weather, extra_body=NO_THINKING)
    parsed = resp.choices[0].message.parsed
    assert isinstance(parsed, Weather)


def test_beta_chat_parse_with_a_pydantic_model(client):
    resp = client.beta.chat.completions.parse(
        model="tiny", messages=[{"role": "user", "content": "Weather?"}], temperature=1.0,
        seed=8, max_tokens=200, response_format=Weather, extra_body=NO_THINKING)
    assert isinstance(resp.choices[0].message.parsed, Weather)


def test_responses_parse_with_a_pydantic_model(client):
    resp = client.responses.parse(model="tiny", input="Weather?", text_format=Weather,
                                  temperature=1.0, max_output_tokens=200,
                                  reasoning={"effort": "none"})
    assert resp.status == "completed"
    assert isinstance(resp.output_parsed, Weather)
    assert Weather.model_validate_json(resp.output_text) == resp.output_parsed


def test_responses_json_schema_streams_valid_json(client):
    schema = load_schema("weather_call")
    events = list(client.responses.create(
        model="tiny", input="Weather call.", temperature=1.0, max_output_tokens=200,
        stream=True, reasoning={"effort": "none"},
        text={"format": {"type": "json_schema", "name": "weather_call", "schema": schema,
                         "strict": True}}))
    assert events[-1].type == "response.completed"
    text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    jsonschema.validate(json.loads(text), schema)


@pytest.mark.parametrize("seed", range(2))
def test_tool_choice_required_always_parses(client, seed):
    resp = ask(client, seed, tools=TOOLS, tool_choice="required", parallel_tool_calls=False)
    choice = resp.choices[0]
    assert choice.finish_reason == "tool_calls", choice
    for call in choice.message.tool_calls:
        tool = next(t for t in TOOLS if t["function"]["name"] == call.function.name)
        jsonschema.validate(json.loads(call.function.arguments),
                            tool["function"]["parameters"])


def test_named_tool_choice_calls_that_tool(client):
    resp = ask(client, 7, tools=TOOLS,
               tool_choice={"type": "function", "function": {"name": "run_shell"}})
    calls = resp.choices[0].message.tool_calls
    assert [c.function.name for c in calls] == ["run_shell"]
    jsonschema.validate(json.loads(calls[0].function.arguments), SHELL)


def test_anthropic_tool_choice_any_and_tool(server):
    client = anthropic.Anthropic(base_url=server.url, api_key="k", max_retries=0)
    tools = [{"name": t["function"]["name"], "input_schema": t["function"]["parameters"]}
             for t in TOOLS]
    one = {"disable_parallel_tool_use": True}
    for choice, expect in (({"type": "any", **one}, None),
                           ({"type": "tool", "name": "get_weather", **one}, "get_weather")):
        msg = client.messages.create(
            model="tiny", max_tokens=300, tools=tools, tool_choice=choice,
            messages=[{"role": "user", "content": "Go."}], thinking={"type": "disabled"},
            extra_body={"temperature": 1.0})   # this SDK version no longer sends it
        uses = [b for b in msg.content if b.type == "tool_use"]
        assert msg.stop_reason == "tool_use" and uses, msg
        assert expect is None or {u.name for u in uses} == {expect}
        for use in uses:
            tool = next(t for t in tools if t["name"] == use.name)
            jsonschema.validate(use.input, tool["input_schema"])


def test_vllm_guided_choice_regex_grammar_and_json(client):
    """vLLM's guided-decoding fields on the same engine: a random model's output is exactly
    one of the choices, matches the regex whole, follows the EBNF, or validates."""
    import re

    choices = ["positive", "negative", "neutral"]
    for seed in (1, 2, 3):
        resp = ask(client, seed, max_tokens=20, extra={"guided_choice": choices})
        assert resp.choices[0].message.content in choices
    pattern = r"[A-Z][a-z]{2,5}-[0-9]{3}"
    resp = ask(client, 4, max_tokens=20, extra={"structured_outputs": {"regex": pattern}})
    assert re.fullmatch(pattern, resp.choices[0].message.content)
    ebnf = 'root ::= "(" digit ("+" digit)* ")"\ndigit ::= [0-9]'
    text = client.completions.create(model="tiny", prompt="Sum:", max_tokens=12, temperature=1,
                                     seed=5, extra_body={"guided_grammar": ebnf}).choices[0].text
    assert re.fullmatch(r"\([0-9](\+[0-9])*\)", text), text
    resp = ask(client, 6, extra={"guided_json": WEATHER})
    jsonschema.validate(json.loads(resp.choices[0].message.content), WEATHER)


def test_two_output_constraints_are_a_400(client):
    with pytest.raises(openai.BadRequestError) as err:
        ask(client, 0, response_format={"type": "json_object"}, extra={"guided_regex": "a+"})
    assert "one output constraint" in err.value.body["message"]


def test_a_schema_the_engine_cannot_enforce_is_a_400(client):
    with pytest.raises(openai.BadRequestError) as err:
        ask(client, 0, response_format={"type": "json_schema", "json_schema": {
            "name": "x", "schema": {"type": "object", "not": {"required": ["a"]}}}})
    assert err.value.body["param"] == "response_format"

