"""Every fixture JSON schema (tests/fixtures/json_schemas, >= 40 real API shapes) through
the real server and the openai SDK on the random-weight model (its unconstrained output is
noise), sampled at temperature 1: every answer is JSON that `jsonschema` accepts.

`max_tokens` is sized per schema: the shortest complete answer plus a small margin. A
random model rarely closes a free string or an array by itself, so most answers reach the
budget's end game, where the mask steers to the shortest way to finish
(atlas.grammar.completion): the test is that they still parse and validate. All schemas
run as one concurrent batch, so the test costs the steps of the longest answer."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import jsonschema
import openai
import pytest

from tests.server.harness import host_model_server
from tests.server.test_structured_output import NO_THINKING, random_model_dir
from tests.unit.grammar_support import load_schema, schema_names

pytestmark = pytest.mark.slow

#: tokens beyond the shortest complete answer's length in bytes
MARGIN = 12


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    model_dir = random_model_dir(tmp_path_factory.mktemp("random-model"))
    srv = host_model_server(model_dir, max_seq_len=512, max_batch_size=len(schema_names()),
                            max_prefill_tokens=1024).start()
    yield srv
    srv.stop()


def shortest_answer_bytes(server, schema) -> int:
    """The shortest JSON the schema accepts, in bytes, from the server's own compiler."""
    grammar = server.ctx.structured.compiler.compile_json_schema(schema, strict=True)
    return grammar.completions.distance(grammar.states.initial)


def assert_every_schema_validates(server, margin: int) -> None:
    """Ask for every fixture schema at once (temperature 1, `max_tokens` the shortest
    answer plus `margin`); each answer must end with "stop" and validate."""
    client = openai.OpenAI(base_url=server.url + "/v1", api_key="k", max_retries=0,
                           timeout=3600)   # the default model: ~1 s per step unloaded
    names = schema_names()
    assert len(names) >= 40

    def ask(i: int, name: str):
        schema = load_schema(name)
        budget = shortest_answer_bytes(server, schema) + margin
        resp = client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": f"Reply with a {name} JSON."}],
            temperature=1.0, seed=100 + i, max_tokens=budget, extra_body=NO_THINKING,
            response_format={"type": "json_schema", "json_schema": {
                "name": name, "schema": schema, "strict": True}})
        return name, schema, budget, resp.choices[0], resp.usage.completion_tokens

    with ThreadPoolExecutor(len(names)) as pool:
        results = list(pool.map(lambda a: ask(*a), enumerate(names)))
    for name, schema, budget, choice, used in results:
        assert choice.finish_reason == "stop", (name, choice)
        assert used <= budget
        jsonschema.validate(json.loads(choice.message.content), schema)


def test_every_schema_validates_on_random_weights(server):
    assert_every_schema_validates(server, MARGIN)
