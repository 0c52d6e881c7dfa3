"""The server on HostBackend with the real default model (SmolLM2-135M-Instruct): greedy
answers equal the offline engine loop's, usage equals the tokenizer's counts, concurrent
streams equal their solo runs, and logit_bias steers the draws. Slow (the model loads on
the CPU), so few and short."""

from __future__ import annotations

import asyncio

import openai
import pytest

from atlas.core.sampling import GREEDY
from tests.server.harness import default_model_server
from tests.server.test_concurrency import stream_chat

pytestmark = pytest.mark.slow

QUESTIONS = ["What is the capital of France?", "Name a color."]
MAX_TOKENS = 8


@pytest.fixture(scope="module")
def real():
    srv = default_model_server(max_seq_len=512, max_batch_size=4, max_prefill_tokens=256)
    srv.expected = engine_answers(srv)   # before the server's engine thread owns the runner
    srv.start()
    yield srv
    srv.stop()


def engine_answers(srv) -> list[list[int]]:
    """The reference: each question alone through the offline engine loop."""
    from atlas.engine.llm_engine import LLMEngine
    from atlas.engine.request import EngineRequest
    engine = LLMEngine(srv.executor, max_prefill_tokens=256)
    answers = []
    for q in QUESTIONS:
        (res,) = engine.generate([EngineRequest(prompt_ids(srv, q), GREEDY, MAX_TOKENS,
                                                srv.tokenizer.eos_token_ids)])
        answers.append(res.token_ids)
    return answers


def prompt_ids(srv, question):
    text = srv.tokenizer.chat_template(False).render([{"role": "user", "content": question}])
    return srv.tokenizer.encode(text)


def test_greedy_answers_equal_the_engine_loop_and_usage_counts(real):
    client = openai.OpenAI(base_url=real.url + "/v1", api_key="k", max_retries=0)
    for q, ids in zip(QUESTIONS, real.expected):
        resp = client.chat.completions.create(
            model="smollm2", messages=[{"role": "user", "content": q}], max_tokens=MAX_TOKENS,
            temperature=0)
        visible = [t for t in ids if t not in real.tokenizer.eos_token_ids]
        assert resp.choices[0].message.content == real.tokenizer.decode(visible)
        assert resp.usage.prompt_tokens == len(prompt_ids(real, q))
        assert resp.usage.completion_tokens == len(ids)
        if "France" in q:
            assert "Paris" in resp.choices[0].message.content


def test_logit_bias_steers_greedy_answers_through_the_sdk(real):
    """A strong additive bias (below the 100 that would make it an exclusive selection) puts
    a token the model would not say into the greedy answer; a small one is accepted; the
    same request without it answers as before; out of range is a 400."""
    client = openai.OpenAI(base_url=real.url + "/v1", api_key="k", max_retries=0)
    (banana,) = real.tokenizer.encode(" banana")
    question = [{"role": "user", "content": QUESTIONS[0]}]

    def ask(**kw):
        return client.chat.completions.create(model="smollm2", messages=question,
                                              max_tokens=MAX_TOKENS, temperature=0, **kw)

    plain = ask().choices[0].message.content
    assert "banana" not in plain
    assert "banana" in ask(logit_bias={str(banana): 40}).choices[0].message.content
    assert ask(logit_bias={str(banana): 2.5}).choices[0].message.content
    assert ask().choices[0].message.content == plain  # the slot's biases left with it
    legacy = client.completions.create(model="smollm2", prompt="My favourite fruit is",
                                       max_tokens=3, temperature=0,
                                       logit_bias={str(banana): 40})
    assert legacy.choices[0].text.startswith(" banana")
    with pytest.raises(openai.BadRequestError, match="logit_bias"):
        ask(logit_bias={str(banana): 150})


#: 16 different prompts for the concurrency test (4 run at once; the rest queue and join
#: the running batch as others finish)
MANY = [f"Write one short sentence about the number {i}." for i in range(14)] + QUESTIONS


def test_concurrent_streams_equal_solo_runs(real):
    async def main():
        import aiohttp
        # the CPU model is slow on a shared CI machine: 16 queued streams may outlast
        # aiohttp's default 5-minute total timeout without anything being wrong
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=1800)) as session:
            solo = [await stream_chat(session, real.url, q, MAX_TOKENS) for q in MANY]
            together = await asyncio.gather(*(stream_chat(session, real.url, q, MAX_TOKENS)
                                              for q in MANY))
        return solo, together

    solo, together = asyncio.run(main())
    assert len(set(map(str, solo))) > 8  # the prompts really differ
    assert together == solo


def test_kernel_targets_name_the_ptx_set_in_use(real):
    """GET /v1/atlas/targets reports the set the model was loaded with, as built (the
    closure hash baked into the artifact, which benchmark records cite)."""
    import json
    import urllib.request

    from atlas.kernels.registry import load_registry

    with urllib.request.urlopen(real.url + "/v1/atlas/targets") as resp:
        targets = json.loads(resp.read())["targets"]
    assert [t["target"] for t in targets] == ["hopper/common/bf16"]
    built = load_registry().select_model_dir("hopper", "smollm2-135m", "bf16")[0]
    assert targets[0]["closure_hash"] == built.closure_hash
    assert targets[0]["arch"] == built.arch and targets[0]["flags"] == list(built.flags)
