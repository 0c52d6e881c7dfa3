"""Speculative decoding must not change a token (host backend, real models).

Verification runs a sequence's last token and its drafts as one multi-token chunk through
the prefill path and samples every position; acceptance keeps drafts while they equal the
samples. Greedy output is therefore the plain output, and so is a seeded sampled one (each
position draws at the RNG position plain decoding would use).
"""

from pathlib import Path

import pytest

from atlas.core.sampling import GREEDY, SamplingParams
from atlas.engine.llm_engine import LLMEngine
from atlas.engine.request import EngineRequest
from atlas.engine.speculative import NgramDrafter, OracleDrafter, Speculator
from atlas.model.load import load_runner

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "tiny-qwen3"


def generate(runner, reqs, speculator=None):
    engine = LLMEngine(runner, max_prefill_tokens=64, speculator=speculator)
    out = [c.token_ids for c in engine.generate(reqs)]
    blocks = engine.core.scheduler.blocks
    assert blocks.num_available == blocks.num_blocks
    return out


@pytest.fixture(scope="module")
def tiny():
    return load_runner(FIXTURE, backend="host", max_seq_len=96, max_batch_size=3,
                       max_prefill_tokens=64, num_draft_tokens=4)


@pytest.mark.parametrize("sampling", [GREEDY, SamplingParams(temperature=1.0, seed=11)])
def test_tiny_oracle_speculation_changes_no_token(tiny, sampling):
    reqs = [EngineRequest(p, sampling, 16) for p in
            ([5, 9, 200, 17, 5, 9, 200, 17], [44, 45, 46], [300, 2, 2, 2, 2, 2, 9])]
    plain = generate(tiny, reqs)
    spec = Speculator(OracleDrafter({tuple(r.prompt_ids): t for r, t in zip(reqs, plain)},
                                    0.7, tiny.vocab_size, seed=5), 3)
    assert generate(tiny, reqs, spec) == plain
    assert 0 < spec.accepted < spec.drafted


def test_tiny_ngram_speculation_changes_no_token(tiny):
    reqs = [EngineRequest([5, 9, 200, 17, 5, 9, 200, 17, 5, 9], GREEDY, 20),
            EngineRequest([44, 45, 46], GREEDY, 20)]   # both outputs fall into loops
    spec = Speculator(NgramDrafter(), 4)
    assert generate(tiny, reqs, spec) == generate(tiny, reqs)
    assert spec.accepted > 0


def test_default_model_ngram_greedy_is_unchanged(default_model_dir):
    from atlas.server.app_assets import load_assets

    tok = load_assets(default_model_dir).tokenizer
    text = tok.chat_template(False).render([{"role": "user", "content": (
        "Repeat this list exactly: red, green, blue, red, green, blue, red, green, blue.")}])
    reqs = [EngineRequest(tok.encode(text), GREEDY, 20)]
    # the verify forward rounds differently from decode steps: these sizes give a greedy
    # run with no exact bf16 tie (max_seq_len=96 meets one at token 3: 18.5 vs 18.5)
    runner = load_runner(default_model_dir, backend="host", max_seq_len=160,
                         max_batch_size=1, max_prefill_tokens=64, num_draft_tokens=3)
    spec = Speculator(NgramDrafter(), 3)
    assert generate(runner, reqs, spec) == generate(runner, reqs)
    assert spec.accepted > 0
