"""/v1/embeddings through the official `openai` SDK against the fake model: each input's
vector is its prompt's last hidden state (the fake's function of every prompt token, read back
through the KV blocks) made unit length, in input order, as floats or base64; `dimensions`
keeps the leading values; bad requests are 400s naming the field."""

from __future__ import annotations

import base64

import numpy as np
import openai
import pytest

from tests.server.fakes import FAKE_HIDDEN, fake_embedding


@pytest.fixture(scope="module")
def client(server):
    return openai.OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0)


def expected(server, text: str, dims: int | None = None) -> np.ndarray:
    v = fake_embedding(server.tokenizer.encode(text, add_special_tokens=True))[:dims]
    return v / np.linalg.norm(v)


def test_embeddings_of_a_batch_in_order(client, server):
    texts = ["The quick brown fox", "Paris is cloudy", "def add(a, b):"]
    resp = client.embeddings.create(model="tiny", input=texts, encoding_format="float")
    assert [d.index for d in resp.data] == [0, 1, 2]
    for d, text in zip(resp.data, texts):
        assert len(d.embedding) == FAKE_HIDDEN
        assert np.allclose(d.embedding, expected(server, text), atol=1e-6)
    counts = sum(len(server.tokenizer.encode(t, add_special_tokens=True)) for t in texts)
    assert resp.usage.prompt_tokens == resp.usage.total_tokens == counts


def test_base64_token_ids_and_dimensions(client, server):
    ids = server.tokenizer.encode("Hello there", add_special_tokens=True)
    # the SDK asks for base64 by default and decodes it into floats
    resp = client.embeddings.create(model="tiny", input=[ids])
    assert np.allclose(resp.data[0].embedding, expected(server, "Hello there"), atol=1e-6)
    raw = client.embeddings.with_raw_response.create(
        model="tiny", input="Hello there", encoding_format="base64", dimensions=3).parse()
    got = np.frombuffer(base64.b64decode(raw.data[0].embedding), dtype="<f4")
    assert got.shape == (3,) and np.allclose(got, expected(server, "Hello there", 3), atol=1e-6)


@pytest.mark.parametrize("kwargs,param", [
    (dict(input=[]), "input"),
    (dict(input="x", encoding_format="int8"), "encoding_format"),
    (dict(input="x", dimensions=FAKE_HIDDEN + 1), "dimensions"),
    (dict(input="x", extra_body={"temperature": 0.5}), "temperature"),
])
def test_bad_embedding_requests(client, kwargs, param):
    with pytest.raises(openai.BadRequestError) as err:
        client.embeddings.create(model="tiny", **kwargs)
    assert param in str(err.value)
