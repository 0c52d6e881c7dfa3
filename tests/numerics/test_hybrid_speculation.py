"""Speculative decoding on hybrid models (host backend): rejected drafts must leave no
trace in the recurrent state, and a verification must compute what plain decode does.

A verification runs each Gated-DeltaNet layer's decode step over the K + 1 tokens one by
one, leaving the state after each in a slot of its own; the sequence keeps the slot of its
accepted prefix. The oracle at 50% acceptance rejects in most steps, at every draft index,
so keeping a rejected token's state (or losing an accepted one's) changes the next tokens:
outputs must equal plain decoding token for token. Beyond the tokens, the state a
verification leaves must be the plain decode steps' bit for bit (what makes an oracle
drafting the plain greedy output accepted as often as it asks on the GPU too).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from atlas.core.sampling import GREEDY, SamplingParams
from atlas.engine.llm_engine import LLMEngine
from atlas.engine.request import EngineRequest
from atlas.engine.speculative import NgramDrafter, OracleDrafter, Speculator
from atlas.model.batch import PenaltyHistory, SeqChunk
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


def _prefill(runner, seq_id, prompt, table):
    return runner.execute([SeqChunk(seq_id, prompt, 0, table, GREEDY,
                                    history=PenaltyHistory(prompt))])[0]


def test_a_verification_leaves_the_plain_decode_state_bit_for_bit(hybrid):
    """Plain: prefill, then four decode steps (t1 .. t4 fed), the state after each kept.
    Speculating: the same prefill, then one verification of t1 + three drafts, all right
    (the state after t4) or wrong from the second (the state after t2)."""
    _verify_against_plain(hybrid)


def test_without_graphs_a_verification_is_decode_shaped_too():
    """A runner that captures no graphs verifies eagerly with the same decode-shaped step."""
    eager = load_runner(FIXTURES / "tiny-qwen3_5", backend="host", max_seq_len=96,
                        max_batch_size=2, max_prefill_tokens=64, num_draft_tokens=3,
                        use_graphs=False)
    assert not eager.verify_graphs
    _verify_against_plain(eager)


def _verify_against_plain(hybrid):
    prompt = PROMPTS[0]
    t1 = _prefill(hybrid, 1, prompt, [0, 1, 2])
    fed, states = [t1], []
    for i in range(4):
        fed.append(hybrid.execute([SeqChunk(1, [fed[-1]], len(prompt) + i, [0, 1, 2],
                                            GREEDY)])[0])
        states.append(hybrid.read_recurrent_state(1))
    hybrid.release(1)
    for seq_id, drafts, kept in ((2, fed[1:4], 4), (3, [fed[1], fed[2] + 1, fed[3]], 2)):
        assert _prefill(hybrid, seq_id, prompt, [3, 4, 5]) == t1
        got = hybrid.execute([SeqChunk(seq_id, [t1] + drafts, len(prompt), [3, 4, 5], GREEDY,
                                       num_draft=3)])[0]
        assert got[:kept] == tuple(fed[1:kept + 1])
        np.testing.assert_array_equal(hybrid.read_recurrent_state(seq_id), states[kept - 1])
        hybrid.release(seq_id)
