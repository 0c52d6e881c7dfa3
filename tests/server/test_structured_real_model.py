"""Structured output from the real default model (SmolLM2-135M-Instruct) on the host
backend, over HTTP with the openai SDK, sampled at temperature 1: the JSON answer
validates against its schema. Slow (the model runs on the CPU, ~70 s here), so one;
tests/server/test_structured_output.py covers the rest on a tiny model."""

from __future__ import annotations

import json

import jsonschema
import openai
import pytest

from tests.server.harness import default_model_server
from tests.unit.grammar_support import load_schema

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def client():
    srv = default_model_server(max_seq_len=1024, max_batch_size=2,
                               max_prefill_tokens=512).start()
    yield openai.OpenAI(base_url=srv.url + "/v1", api_key="k", max_retries=0)
    srv.stop()


def test_default_model_json_validates(client):
    name, question = "sentiment", "Classify the sentiment of: 'I love this phone.'"
    schema = load_schema(name)
    resp = client.chat.completions.create(
        model="m", messages=[{"role": "user", "content": question}], temperature=1.0, seed=1,
        max_tokens=60, response_format={"type": "json_schema", "json_schema": {
            "name": name, "schema": schema, "strict": True}})
    choice = resp.choices[0]
    assert choice.finish_reason == "stop", choice
    jsonschema.validate(json.loads(choice.message.content), schema)

