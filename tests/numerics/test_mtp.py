"""MTP speculative decoding on the tiny hybrid fixture with an MTP head (host backend).

tests/fixtures/tiny-qwen3_5-mtp is tiny-qwen3_5 plus random `mtp.*` tensors, with the
head's logits at the golden prompt's last position computed by transformers' own modules
(tools/make_fixtures.py `mtp_reference`): the head's numerics are checked against that.
The runner runs the head after every step and the engine's
MtpDrafter proposes what it drafted. Whatever the (random) head drafts, verification keeps
the output exactly the plain one; the head must also draft from every sequence, through
chunked prefill (a chunk that does not sample carries its last hidden row to the next).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from atlas.core.sampling import GREEDY, SamplingParams
from atlas.engine.llm_engine import LLMEngine
from atlas.engine.request import EngineRequest
from atlas.engine.speculative import MtpDrafter, Speculator
from atlas.model.load import StartupError, load_runner

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
PROMPTS = [[(37 * i + 11) % 512 for i in range(20)], [5, 9, 200, 17, 5, 9, 200, 17],
           [44, 45, 46]]


@pytest.fixture(scope="module")
def runner():
    return load_runner(FIXTURES / "tiny-qwen3_5-mtp", backend="host", max_seq_len=96,
                       max_batch_size=3, max_prefill_tokens=64, num_draft_tokens=3, mtp=True)


def generate(runner, reqs, speculator=None, chunk=64):
    engine = LLMEngine(runner, max_prefill_tokens=chunk, speculator=speculator)
    out = [c.token_ids for c in engine.generate(reqs)]
    blocks = engine.core.scheduler.blocks
    assert blocks.num_available == blocks.num_blocks
    return out


@pytest.mark.parametrize("sampling", [GREEDY, SamplingParams(temperature=1.0, seed=5)])
def test_mtp_speculation_changes_no_token(runner, sampling):
    reqs = [EngineRequest(p, sampling, 12) for p in PROMPTS]
    plain = generate(runner, reqs)
    asked: dict[int, list[int]] = {}   # per sequence, how many drafts the head had

    def source(seq_id: int) -> list[int]:
        drafts = runner.mtp_drafts(seq_id)
        asked.setdefault(seq_id, []).append(len(drafts))
        return drafts

    spec = Speculator(MtpDrafter(source), 3)
    assert generate(runner, reqs, spec, chunk=8) == plain   # 20 tokens: 3 prefill chunks
    # whenever a sequence could draft, the head had drafted K = 3 after its last step
    # (through chunked prefill too); how many of them a step took is the step budget's
    # and the sequence's room's choice
    assert len(asked) == len(reqs) and all(n == [3] * len(n) for n in asked.values())
    assert spec.drafted > 0
    assert not runner.mtp.drafts and not runner.mtp.carried   # released with the sequences


def test_mtp_head_matches_the_transformers_reference():
    """One prefill step of the golden prompt samples transformers' first greedy token, and
    the MTP pass after it drafts from the head's logits at the last position: compared
    with the reference computed from transformers' hidden states and layer modules."""
    golden = dict(np.load(FIXTURES / "tiny-qwen3_5-mtp" / "golden.npz"))
    one = load_runner(FIXTURES / "tiny-qwen3_5-mtp", backend="host", max_seq_len=64,
                      max_batch_size=1, max_prefill_tokens=64, num_draft_tokens=1, mtp=True)
    prompt = golden["input_ids"].tolist()
    out = LLMEngine(one, max_prefill_tokens=64).generate([EngineRequest(prompt, GREEDY, 1)])
    assert out[0].token_ids == [int(golden["greedy"][0])]
    got, want = one.read_logits(1)[0], golden["mtp_logits"]
    cosine = float(got @ want / (np.linalg.norm(got) * np.linalg.norm(want)))
    assert cosine > 0.999, cosine
    assert np.abs(got - want).max() < 0.1 * np.abs(want).max()
    top2 = np.sort(want)[-2:]
    if top2[1] - top2[0] > 0.05:   # no near-tie: the draft is the reference's argmax
        assert int(got.argmax()) == int(want.argmax())


def test_mtp_needs_a_head_in_config_and_checkpoint():
    with pytest.raises(StartupError, match="mtp_num_hidden_layers"):
        load_runner(FIXTURES / "tiny-qwen3_5", backend="host", max_seq_len=64,
                    max_batch_size=1, max_prefill_tokens=64, num_draft_tokens=2, mtp=True)
