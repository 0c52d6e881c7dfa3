"""Speculative decoding on hybrid models (host backend): rejected drafts must leave no
trace in the recurrent state.

A verification advances each Gated-DeltaNet layer's conv and delta-rule state over all K
drafts; the runner saves the state first and, when a draft is rejected, restores it and
recomputes the accepted tokens. The oracle at 50% acceptance rejects in most steps, at
every draft index, so a rollback that kept a rejected token (or lost an accepted one)
changes the next tokens: outputs must equal plain decoding token for token.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from atlas.core.sampling import GREEDY, SamplingParams
from atlas.engine.llm_engine import LLMEngine
from atlas.engine.request import EngineRequest
from atlas.engine.speculative import NgramDrafter, OracleDrafter, Speculator
from atlas.model.load import load_runner

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
PROMPTS = [[(37 * i + 11) % 512 for i in range(20)], [5, 9, 200, 17, 5, 9, 200, 17],
           [44, 45, 46]]


def generate(runner, reqs, speculator=None):
    engine = LLMEngine(runner, max_prefill_tokens=64, speculator=speculator)
    out = [c.token_ids for c in engine.generate(reqs)]
    blocks = engine.core.scheduler.blocks
    assert blocks.num_available == blocks.num_blocks
    assert runner.state_slot_usage()[0] == 0
    return out


@pytest.fixture(scope="module", params=["tiny-qwen3_5", "tiny-qwen3_5_moe"])
def hybrid(request):
    return load_runner(FIXTURES / request.param, backend="host", max_seq_len=96,
                       max_batch_size=3, max_prefill_tokens=64, num_draft_tokens=3)


@pytest.mark.parametrize("sampling", [GREEDY, SamplingParams(temperature=1.0, seed=7)])
def test_oracle_speculation_on_a_hybrid_changes_no_token(hybrid, sampling):
    reqs = [EngineRequest(p, sampling, 14) for p in PROMPTS]
    plain = generate(hybrid, reqs)
    spec = Speculator(OracleDrafter({tuple(r.prompt_ids): t for r, t in zip(reqs, plain)},
                                    0.5, hybrid.vocab_size, seed=3), 3)
    assert generate(hybrid, reqs, spec) == plain
    assert 0 < spec.accepted < spec.drafted


def test_ngram_speculation_on_a_hybrid_changes_no_token(hybrid):
    reqs = [EngineRequest(PROMPTS[1] * 2, GREEDY, 16)]
    spec = Speculator(NgramDrafter(), 3)
    assert generate(hybrid, reqs, spec) == generate(hybrid, reqs)
    assert spec.drafted > 0
