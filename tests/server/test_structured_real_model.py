"""Structured output from the real default model (SmolLM2-135M-Instruct) on the host
backend, over HTTP with the openai SDK, sampled at temperature 1: the answer to every
fixture schema validates. Slow (the model runs on the CPU at about a second per step), so
all schemas run as one concurrent batch with `max_tokens` sized per schema (the shortest
complete answer plus a margin); tests/server/test_structured_all_schemas.py does the same
on random weights."""

from __future__ import annotations

import pytest

from tests.server.harness import default_model_server
from tests.server.test_structured_all_schemas import assert_every_schema_validates
from tests.unit.grammar_support import schema_names

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def server():
    n = len(schema_names())
    srv = default_model_server(max_seq_len=512, max_batch_size=n,
                               max_prefill_tokens=4096).start()
    yield srv
    srv.stop()


def test_default_model_answers_every_schema(server):
    assert_every_schema_validates(server, margin=8)
