"""Token logprobs and `n` choices over real HTTP with the official openai SDK, on the host
backend running tests/fixtures/tiny-qwen3's random weights.

Logprobs are checked against an independent reference: the fixture's transformers golden
(logits of its prompt, computed by transformers, not by Atlas), log-softmaxed in float64
here. The rest checks what must hold whatever the weights: greedy tokens are their own
top-1, streaming reports what non-streaming does, a choice's text is its tokens' bytes.
"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import numpy as np
import openai
import pytest
from tokenizers import Tokenizer

from tests.server.fakes import build_tiny_model_dir
from tests.server.harness import host_model_server
from tests.server.http import request

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "tiny-qwen3"
GOLDEN = np.load(FIXTURE / "golden.npz")
NO_THINKING = {"chat_template_kwargs": {"enable_thinking": False}}
#: this model's bf16 logits differ from the golden's by up to 0.07 (tests/numerics parity);
#: a log-softmax moves by at most twice that
LOGPROB_ATOL = 0.15


def golden_model_dir(path: Path) -> Path:
    """The fixture's weights behind a trained BPE tokenizer that covers all 512 logit rows,
    with no end-of-sequence id: the golden's own top token (id 0) is ordinary text here."""
    build_tiny_model_dir(path, tokenizer_vocab=600)
    tok = Tokenizer.from_file(str(path / "tokenizer.json"))
    rows = json.loads((FIXTURE / "config.json").read_text())["vocab_size"]
    tok.add_tokens([f"<row{i}>" for i in range(tok.get_vocab_size(), rows)])
    tok.save(str(path / "tokenizer.json"))
    shutil.copy(FIXTURE / "config.json", path / "config.json")
    shutil.copy(FIXTURE / "model.safetensors", path / "model.safetensors")
    (path / "tokenizer_config.json").write_text(json.dumps(
        {**json.loads((path / "tokenizer_config.json").read_text()), "eos_token": None}))
    (path / "generation_config.json").write_text("{}")
    return path


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    model_dir = golden_model_dir(tmp_path_factory.mktemp("golden-model"))
    srv = host_model_server(model_dir, max_seq_len=256, max_batch_size=4,
                            max_prefill_tokens=128).start()
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def client(server):
    return openai.OpenAI(base_url=server.url + "/v1", api_key="k", max_retries=0)


def reference_logprobs() -> np.ndarray:
    """log-softmax of transformers' last-position logits, in float64."""
    logits = np.asarray(GOLDEN["logits"], dtype=np.float64).reshape(
        -1, GOLDEN["logits"].shape[-1])[-1]
    shifted = logits - logits.max()
    return shifted - math.log(np.exp(shifted).sum())


def prompt_ids() -> list[int]:
    return [int(t) for t in np.asarray(GOLDEN["input_ids"]).reshape(-1)]


def test_completion_logprobs_equal_the_reference_log_softmax(client):
    want = reference_logprobs()
    best = np.argsort(-want)[:5]
    resp = client.completions.create(model="tiny", prompt=prompt_ids(), max_tokens=1,
                                     temperature=0.0, logprobs=5)
    lp = resp.choices[0].logprobs
    assert len(lp.tokens) == len(lp.token_logprobs) == len(lp.top_logprobs) == 1
    assert lp.token_logprobs[0] == pytest.approx(want[best[0]], abs=LOGPROB_ATOL)
    top = sorted(lp.top_logprobs[0].values(), reverse=True)
    np.testing.assert_allclose(top, want[best], atol=LOGPROB_ATOL)
    assert lp.text_offset == [0]


def test_completion_logprobs_stream_as_they_do_whole(client):
    kw = dict(model="tiny", prompt=prompt_ids(), max_tokens=6, temperature=1.0, seed=4,
              logprobs=3)
    whole = client.completions.create(**kw).choices[0]
    parts = [c.choices[0] for c in client.completions.create(stream=True, **kw)
             if c.choices and c.choices[0].logprobs is not None]
    streamed = [x for p in parts for x in p.logprobs.token_logprobs]
    assert len(whole.logprobs.token_logprobs) == 6
    np.testing.assert_allclose(streamed, whole.logprobs.token_logprobs, rtol=0, atol=1e-6)
    assert [x for p in parts for x in p.logprobs.tokens] == whole.logprobs.tokens
    assert [x for p in parts for x in p.logprobs.text_offset] == whole.logprobs.text_offset


def chat(client, **kw):
    return client.chat.completions.create(
        model="tiny", messages=[{"role": "user", "content": "Say something."}],
        extra_body=NO_THINKING, **kw)


def test_chat_logprobs_greedy_tokens_are_their_own_top_one(client):
    resp = chat(client, max_tokens=8, temperature=0.0, logprobs=True, top_logprobs=4)
    choice = resp.choices[0]
    entries = choice.logprobs.content
    assert len(entries) == resp.usage.completion_tokens == 8
    text = b""
    for e in entries:
        assert len(e.top_logprobs) == 4
        tops = [t.logprob for t in e.top_logprobs]
        assert tops == sorted(tops, reverse=True)
        assert e.top_logprobs[0].token == e.token
        assert e.logprob == pytest.approx(tops[0], abs=1e-6) and e.logprob <= 0.0
        assert sum(math.exp(t) for t in tops) <= 1.0 + 1e-4
        text += bytes(e.bytes)
    assert text.decode("utf-8", errors="replace") == choice.message.content


def test_chat_logprobs_stream_as_they_do_whole(client):
    kw = dict(max_tokens=6, temperature=1.0, seed=9, logprobs=True, top_logprobs=2)
    whole = chat(client, **kw).choices[0].logprobs.content
    streamed = [e for c in chat(client, stream=True, **kw)
                if c.choices and c.choices[0].logprobs is not None
                for e in c.choices[0].logprobs.content]
    assert [(e.token, e.logprob) for e in streamed] == [(e.token, e.logprob) for e in whole]


def test_chat_without_logprobs_reports_none(client):
    assert chat(client, max_tokens=2).choices[0].logprobs is None


def metric(server, name: str) -> float:
    status, text = request(server.url + "/metrics")
    assert status == 200
    line = next(ln for ln in text.splitlines() if ln.startswith(f"atlas_{name}"))
    return float(line.split()[-1])


def test_n_choices_are_independent_with_one_prompt_in_usage(client, server):
    hits_before = metric(server, "prefix_cache_hits_total")
    kw = dict(max_tokens=10, temperature=1.0, seed=21, logprobs=True)
    resp = chat(client, n=3, **kw)
    texts = [c.message.content for c in resp.choices]
    assert [c.index for c in resp.choices] == [0, 1, 2]
    assert len(set(texts)) == 3, texts
    single = chat(client, **kw)
    assert resp.usage.prompt_tokens == single.usage.prompt_tokens
    counts = [len(c.logprobs.content) for c in resp.choices]
    assert resp.usage.completion_tokens == sum(counts)
    assert texts[0] == single.choices[0].message.content   # choice 0 keeps the seed
    assert [c.message.content for c in chat(client, n=3, **kw).choices] == texts
    # choices 1 and 2 found the prompt's full blocks in the prefix cache
    full_blocks = (resp.usage.prompt_tokens - 1) // 16 * 16
    assert metric(server, "prefix_cache_hits_total") - hits_before >= 2 * full_blocks > 0


def test_n_choices_stream_by_index(client):
    chunks = list(chat(client, n=2, max_tokens=5, temperature=1.0, seed=2, stream=True,
                       stream_options={"include_usage": True}))
    text = {0: "", 1: ""}
    finished = set()
    for c in chunks:
        for ch in c.choices:
            text[ch.index] += ch.delta.content or ""
            if ch.finish_reason:
                finished.add(ch.index)
    assert finished == {0, 1}
    whole = chat(client, n=2, max_tokens=5, temperature=1.0, seed=2)
    assert [text[0], text[1]] == [c.message.content for c in whole.choices]
    assert chunks[-1].usage.completion_tokens == whole.usage.completion_tokens == 10


def test_completions_n_and_best_of(client):
    resp = client.completions.create(model="tiny", prompt="Hello", max_tokens=4, n=2,
                                     best_of=2, temperature=1.0, seed=5)
    assert [c.index for c in resp.choices] == [0, 1]
    assert resp.usage.completion_tokens == 8
    with pytest.raises(openai.BadRequestError) as err:
        client.completions.create(model="tiny", prompt="Hello", max_tokens=4, n=1, best_of=3)
    assert err.value.body["param"] == "best_of"
