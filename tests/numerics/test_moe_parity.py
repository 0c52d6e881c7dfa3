"""Mixture-of-experts models end to end on the CPU reference backend.

Tiny random-weight checkpoints made with transformers (tools/make_fixtures.py):
`tiny-qwen3-moe` (16 experts, top-3, renormalized, transformers 5's stacked expert tensors,
one dense layer through mlp_only_layers), `tiny-qwen2-moe` (6 experts, top-2, shared
expert with its sigmoid gate, one tensor per expert, decoder_sparse_step 2) and
`tiny-mixtral` (6 experts, top-2 renormalized, Mixtral's published w1/w3/w2 names) and
`tiny-minimax-m2` (MiniMax-M2: q/k RMSNorms over the whole projection, half of each head
rotating, sigmoid routing of 8 experts top-3 with a score bias: without the bias the logits
fall to cosine 0.989 and 1 of 16 greedy tokens) and `tiny-glm4-moe` (GLM-4.5: q/k/v biases,
per-head q/k norms, half of each head rotating, a dense layer then two sparse ones of 8
experts top-2 under a float32 sigmoid router with a score bias, renormalized and scaled by
2.5, an ungated shared expert; its MTP layer's tensors ignored: `test_glm4_moe_controls`) and
`tiny-gpt-oss` (gpt-oss: q/k/v and o_proj biases, a learned sink per head, sliding and full
layers alternating, YaRN, 8 experts top-4 under a router with a bias, gate/up and down biases,
the clamped SwiGLU: its controls and MXFP4 experts are test_gpt_oss.py's).
Each must
reproduce transformers' logits and its 16 greedy tokens; steps that mix sequences, chunk a
prompt, or cross the decode/grouped expert paths (ops.moe.DECODE_MAX_TOKENS) must not
change any sequence's tokens.
"""

from pathlib import Path

import numpy as np
import pytest

from atlas.core.sampling import GREEDY
from atlas.engine.llm_engine import LLMEngine
from atlas.engine.parity import compare_with_golden
from atlas.engine.request import EngineRequest
from atlas.model.batch import PenaltyHistory, SeqChunk
from atlas.model.load import load_runner
from atlas.runtime.kv_cache import BlockAllocator
from atlas.runtime.ops.moe import DECODE_MAX_TOKENS

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
MOE_FIXTURES = ["tiny-qwen3-moe", "tiny-qwen2-moe", "tiny-mixtral", "tiny-minimax-m2",
                "tiny-glm4-moe", "tiny-gpt-oss"]


@pytest.mark.parametrize("name", MOE_FIXTURES)
def test_moe_fixture_matches_transformers(name):
    golden = dict(np.load(FIXTURES / name / "golden.npz"))
    assert len(golden["input_ids"]) > DECODE_MAX_TOKENS  # the prompt takes the grouped path
    r = compare_with_golden(FIXTURES / name, golden, backend="host")
    assert r["cosine"] >= 0.9999, r
    assert r["argmax_match"], r
    assert r["teacher_forced_match"] == r["teacher_forced_total"], r
    assert r["greedy_match"] == r["greedy_total"] == 16, r


def _runner(name: str, max_batch_size: int = 4, max_prefill_tokens: int = 32):
    return load_runner(FIXTURES / name, backend="host", max_seq_len=64,
                       max_batch_size=max_batch_size, max_prefill_tokens=max_prefill_tokens)


@pytest.mark.parametrize("name", MOE_FIXTURES)
def test_moe_batched_decode_matches_solo_runs(name):
    """Sequences decoded together (routing of several tokens in one step, graph buckets with
    padding rows) give exactly what each gives alone."""
    engine = LLMEngine(_runner(name), max_prefill_tokens=32)
    prompts = [[5, 9, 200, 17], [300, 2, 7, 7, 7, 7, 9], [44], list(range(60, 72))]
    reqs = [EngineRequest(p, GREEDY, 8) for p in prompts]
    together = [r.token_ids for r in engine.generate(reqs)]
    alone = [engine.generate([r])[0].token_ids for r in reqs]
    assert together == alone
    blocks = engine.core.scheduler.blocks
    assert blocks.num_available == blocks.num_blocks   # free or unused prefix-cache blocks


@pytest.mark.parametrize("name", MOE_FIXTURES)
def test_moe_chunked_prefill_equals_one_shot(name):
    """A 37-token prompt in one grouped-path step, or in chunks of 5 (decode kernels) and
    11 (grouped), continues identically."""
    runner = _runner(name, max_batch_size=2, max_prefill_tokens=48)
    req = EngineRequest(list(range(3, 40)), GREEDY, 8)
    one_shot = LLMEngine(runner, max_prefill_tokens=48).generate([req])[0].token_ids
    for chunk in (5, 11):
        assert LLMEngine(runner, max_prefill_tokens=chunk).generate([req])[0].token_ids == one_shot


@pytest.mark.parametrize("name", MOE_FIXTURES)
def test_fused_decode_path_equals_the_separate_launches(name, monkeypatch):
    """The three-launch decode MoE layer (one-launch router, the shared expert as slots)
    gives the same logits, bit for bit on the references, as the separate launches
    (ATLAS_MOE_FUSED_DECODE=0), for a decode batch of three sequences over several steps."""
    prompts = [[5, 9, 200, 17], [300, 2, 7, 7, 7, 7, 9], [44]]

    def decode_logits(fused: str) -> np.ndarray:
        monkeypatch.setenv("ATLAS_MOE_FUSED_DECODE", fused)
        runner = _runner(name)
        pool = BlockAllocator(runner.num_kv_blocks)
        blocks = [pool.allocate(2) for _ in prompts]
        for sid, p in enumerate(prompts):
            runner.execute([SeqChunk(sid, p, 0, blocks[sid], GREEDY,
                                     history=PenaltyHistory(p))])
        steps, pos = [], [len(p) for p in prompts]
        for step in range(4):
            runner.execute([SeqChunk(sid, [11 + 7 * step + sid], pos[sid], blocks[sid], GREEDY,
                                     rng_position=step + 1) for sid in range(len(prompts))])
            steps.append(runner.read_logits(len(prompts)).copy())
            pos = [q + 1 for q in pos]
        return np.stack(steps)

    fused, separate = decode_logits("1"), decode_logits("0")
    assert np.isfinite(fused).all() and fused.std() > 0
    assert np.array_equal(fused, separate)
