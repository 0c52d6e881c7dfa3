"""Prompt logprobs over real HTTP with the official openai SDK, on the host backend running
tests/fixtures/tiny-qwen3's random weights with small prefill chunks (8 tokens, and 4
logits rows a step): lm-evaluation-harness's loglikelihood request (`echo` + `logprobs`,
token-id prompts in a batch, `max_tokens` 1 or 0) and vLLM's `prompt_logprobs`.

The numbers are checked against transformers' logits at every prompt position (the
fixture's golden), log-softmaxed in float64 here, never against the server's own output.
"""

from __future__ import annotations

import math

import numpy as np
import openai
import pytest

from tests.server.harness import host_model_server
from tests.server.http import request
from tests.server.test_logprobs_and_choices import GOLDEN, NO_THINKING, golden_model_dir

IDS = [int(t) for t in GOLDEN["input_ids"]]
#: our bf16 logits vs transformers' (measured: 0.03; tests/numerics parity allows 0.07)
ATOL = 0.1


def golden_log_softmax() -> np.ndarray:
    """Row p: log p(. | IDS[:p + 1]) from transformers' logits, in float64."""
    x = np.asarray(GOLDEN["logits"], np.float64)
    x = x - x.max(-1, keepdims=True)
    return x - np.log(np.exp(x).sum(-1, keepdims=True))


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    model_dir = golden_model_dir(tmp_path_factory.mktemp("golden-model"))
    srv = host_model_server(model_dir, max_seq_len=128, max_batch_size=4,
                            max_prefill_tokens=8).start()
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def client(server):
    return openai.OpenAI(base_url=server.url + "/v1", api_key="k", max_retries=0)


def check_echoed_prompt(lp, ids: list[int], top_n: int) -> None:
    """The legacy logprobs of an echoed prompt: null first, then each token's logprob under
    the golden, with its top_n best alternatives (the greedy one first)."""
    want = golden_log_softmax()
    assert lp.token_logprobs[0] is None and lp.top_logprobs[0] is None
    for p in range(1, len(ids)):
        assert lp.token_logprobs[p] == pytest.approx(want[p - 1, ids[p]], abs=ATOL), p
        top = lp.top_logprobs[p]   # keyed by text: tokens of one text (bytes of a
        assert 1 <= len(top) <= top_n    # character) share a key
        assert max(top.values()) == pytest.approx(want[p - 1].max(), abs=ATOL), p


def test_lm_eval_loglikelihood_batch(client):
    """lm-eval's local-completions request: two token-id prompts, echo, logprobs=1,
    max_tokens=1, greedy; each choice's arrays hold the prompt's tokens then the one
    generated, and a prompt token that is the greedy one has its top entry's logprob."""
    short = IDS[:17]
    resp = client.completions.create(model="tiny", prompt=[IDS, short], echo=True, logprobs=1,
                                     max_tokens=1, temperature=0.0, seed=1234)
    for choice, ids in zip(resp.choices, (IDS, short)):
        lp = choice.logprobs
        n = len(ids) + 1
        assert len(lp.tokens) == len(lp.token_logprobs) == len(lp.top_logprobs) == n
        check_echoed_prompt(lp, ids, 1)
        offsets = np.cumsum([0] + [len(t) for t in lp.tokens[:-1]]).tolist()
        assert lp.text_offset == offsets
        assert choice.text.startswith("".join(lp.tokens[:len(ids)]))
        want = golden_log_softmax()
        for p in range(1, len(ids)):   # lm-eval's is_greedy: the token's logprob is the top
            if int(np.argmax(want[p - 1])) == ids[p] and np.sort(want[p - 1])[-2] < (
                    want[p - 1].max() - 2 * ATOL):
                assert lp.token_logprobs[p] == max(lp.top_logprobs[p].values())
    # the generated token's entry is what a request without echo reports
    plain = client.completions.create(model="tiny", prompt=IDS, logprobs=1, max_tokens=1,
                                      temperature=0.0)
    assert resp.choices[0].logprobs.token_logprobs[-1] == pytest.approx(
        plain.choices[0].logprobs.token_logprobs[0], abs=1e-6)


def test_echo_with_max_tokens_zero_returns_the_prompt_alone(client):
    resp = client.completions.create(model="tiny", prompt=IDS, echo=True, logprobs=3,
                                     max_tokens=0, temperature=0.0)
    choice = resp.choices[0]
    assert len(choice.logprobs.tokens) == len(IDS)
    check_echoed_prompt(choice.logprobs, IDS, 3)
    assert choice.text == "".join(choice.logprobs.tokens)
    assert choice.finish_reason == "length"
    assert resp.usage.completion_tokens == 0 and resp.usage.prompt_tokens == len(IDS)
    echo_only = client.completions.create(model="tiny", prompt="Hello there", echo=True,
                                          max_tokens=0)
    assert echo_only.choices[0].text == "Hello there" and echo_only.choices[0].logprobs is None


def test_echo_logprobs_stream_as_they_do_whole(client):
    kw = dict(model="tiny", prompt=IDS[:12], echo=True, logprobs=2, max_tokens=4,
              temperature=1.0, seed=3)
    whole = client.completions.create(**kw).choices[0]
    parts = [c.choices[0] for c in client.completions.create(stream=True, **kw)
             if c.choices]
    assert "".join(p.text for p in parts) == whole.text
    streamed = [p.logprobs for p in parts if p.logprobs is not None]
    for key in ("tokens", "token_logprobs", "text_offset"):
        assert [x for s in streamed for x in getattr(s, key)] == getattr(whole.logprobs, key)


def vllm_entries(prompt_logprobs, ids: list[int], top_n: int) -> None:
    """vLLM's prompt_logprobs: null first, then {id: {logprob, rank, decoded_token}} for the
    token and its top_n alternatives (ranks 1..top_n), logprobs under the golden."""
    want = golden_log_softmax()
    assert len(prompt_logprobs) == len(ids) and prompt_logprobs[0] is None
    for p in range(1, len(ids)):
        entry = prompt_logprobs[p]
        own = entry[str(ids[p])]
        assert own["logprob"] == pytest.approx(want[p - 1, ids[p]], abs=ATOL), p
        ranked = sorted((v["rank"], int(k), v["logprob"]) for k, v in entry.items()
                        if v["rank"] is not None)
        assert [r for r, _, _ in ranked][-top_n:] == list(range(1, top_n + 1))
        assert len(entry) in (top_n, top_n + 1)
        for _, token, logprob in ranked:
            assert logprob == pytest.approx(want[p - 1, token], abs=ATOL)
        assert all(isinstance(v["decoded_token"], str) for v in entry.values())


def test_vllm_prompt_logprobs_in_completions_and_chat(client):
    resp = client.completions.create(model="tiny", prompt=IDS, max_tokens=2, temperature=0.0,
                                     n=2, extra_body={"prompt_logprobs": 2})
    for choice in resp.choices:   # every choice carries its prompt's
        vllm_entries(choice.model_extra["prompt_logprobs"], IDS, 2)
        assert choice.logprobs is None
    chat = client.chat.completions.create(
        model="tiny", messages=[{"role": "user", "content": "Say something."}], max_tokens=2,
        extra_body={"prompt_logprobs": 0, **NO_THINKING})
    got = chat.model_extra["prompt_logprobs"]
    assert len(got) == chat.usage.prompt_tokens and got[0] is None
    for entry in got[1:]:
        assert len(entry) == 1
        (value,) = entry.values()
        assert value["logprob"] <= 0.0 and value["rank"] in (None,)
    # without the field, no prompt_logprobs key at all
    plain = client.completions.create(model="tiny", prompt=IDS, max_tokens=1)
    assert "prompt_logprobs" not in (plain.choices[0].model_extra or {})


@pytest.mark.parametrize("path,body,param", [
    ("completions", {"prompt_logprobs": -1}, "prompt_logprobs"),
    ("completions", {"prompt_logprobs": 21}, "prompt_logprobs"),
    ("completions", {"prompt_logprobs": 1.5}, "prompt_logprobs"),
    ("completions", {"prompt_logprobs": "2"}, "prompt_logprobs"),
    ("completions", {"prompt_logprobs": True}, "prompt_logprobs"),
    ("completions", {"prompt_logprobs": 1, "stream": True}, "prompt_logprobs"),
    ("completions", {"echo": True, "logprobs": 21}, "logprobs"),
    ("completions", {"echo": True, "logprobs": -1}, "logprobs"),
    ("completions", {"max_tokens": 0}, "max_tokens"),
    ("completions", {"echo": True, "max_tokens": -1}, "max_tokens"),
    ("chat/completions", {"prompt_logprobs": 99}, "prompt_logprobs"),
    ("chat/completions", {"prompt_logprobs": 1, "stream": True}, "prompt_logprobs"),
])
def test_bad_values_are_400s_naming_the_field(server, client, path, body, param):
    base = ({"messages": [{"role": "user", "content": "hi"}]} if path.startswith("chat")
            else {"prompt": "hi"})
    status, err = request(f"{server.url}/v1/{path}", {"model": "tiny", "max_tokens": 2,
                                                      **base, **body})
    assert status == 400, err
    assert err["error"]["param"] == param
    # and the server keeps serving
    ok = client.completions.create(model="tiny", prompt=IDS[:5], echo=True, logprobs=0,
                                   max_tokens=1)
    assert len(ok.choices[0].logprobs.tokens) == 6
    assert math.isfinite(ok.choices[0].logprobs.token_logprobs[1])
