"""A server started with n-gram speculation (and with prefix caching off) answers exactly
what the plain server answers, over HTTP with the official SDK, and reports its counters."""

from __future__ import annotations

import openai
import pytest

from atlas.server.app_serve import EngineLimits
from tests.server.conftest import make_executor
from tests.server.harness import ServerThread
from tests.server.http import request

ECHO = "red green blue red green blue red green blue"
#: the draft policy's table: verification as cheap as a plain step, so every step drafts 4
STEP_COST = {1: [1.0] * 4, 8: [1.0] * 4}


@pytest.fixture(scope="module")
def servers(model_dir):
    from atlas.server.app_assets import load_assets
    tok = load_assets(model_dir, behavior_lookup=lambda c: {}).tokenizer
    script = [(tok.encode(" echo"), tok.encode(" " + ECHO))]   # the answer repeats the prompt
    started = []
    for limits in (EngineLimits(max_num_seqs=8, max_seq_len=512, max_prefill_tokens=64),
                   EngineLimits(max_num_seqs=8, max_seq_len=512, max_prefill_tokens=64,
                                speculative="ngram", num_draft_tokens=4,
                                prefix_caching=False, spec_step_cost=STEP_COST)):
        started.append(ServerThread(model_dir, make_executor(tok, scripts=script),
                                    limits=limits).start())
    yield started
    for srv in started:
        srv.stop()


def ask(srv, content):
    client = openai.OpenAI(base_url=srv.url + "/v1", api_key="unused", max_retries=0)
    resp = client.chat.completions.create(
        model="tiny", max_tokens=24, temperature=0,
        messages=[{"role": "user", "content": content}])
    return resp.choices[0].message.content, resp.usage


def test_ngram_speculation_answers_like_the_plain_server(servers):
    plain, spec = servers
    for content in (f"please echo {ECHO}", "Tell me a story.", f"please echo {ECHO}"):
        want, _ = ask(plain, content)
        got, usage = ask(spec, content)
        assert got == want and usage.prompt_tokens_details.cached_tokens == 0
    _, text = request(spec.url + "/metrics")
    values = {l.split()[0]: float(l.split()[1]) for l in text.splitlines()
              if l.startswith("atlas_spec_")}
    assert values["atlas_spec_accepted_tokens_total"] > 0
    assert values["atlas_spec_draft_tokens_total"] >= values["atlas_spec_accepted_tokens_total"]
    assert 0 < values["atlas_spec_token_acceptance"] <= 1
    assert "atlas_prefix_cache_hits_total" not in text   # caching was off
    speculator = spec.ctx.engine.scheduler.speculator
    assert speculator.verify_steps > 0 and speculator.step_cost == STEP_COST
    assert speculator.drafts_per_sequence(1) == 4
