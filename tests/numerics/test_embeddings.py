"""Embedding requests on the CPU reference backend: the prompt's last-token final-norm hidden
state, checked against transformers through the LM head (the fixture's golden logits at the
last prompt position are that hidden state times the LM head), batched with generating
sequences and across prefill chunks."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from atlas.core.numerics import bf16_bits_to_f32
from atlas.core.sampling import GREEDY
from atlas.engine.llm_engine import LLMEngine
from atlas.engine.request import EngineRequest
from atlas.model.load import load_runner
from atlas.runtime.weights import WeightStore

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "tiny-qwen3"


def lm_head() -> np.ndarray:
    """float64 [vocab, hidden] (bf16 values) of the LM head."""
    return bf16_bits_to_f32(WeightStore(FIXTURE).read("lm_head.weight")).astype(np.float64)


def test_embedding_is_the_hidden_state_transformers_reads_logits_from():
    golden = np.load(FIXTURE / "golden.npz")
    ids = [int(t) for t in golden["input_ids"]]
    runner = load_runner(FIXTURE, backend="host", max_seq_len=64, max_batch_size=3,
                         max_prefill_tokens=8)
    engine = LLMEngine(runner, max_prefill_tokens=8)
    out = engine.generate([EngineRequest([5, 9, 200], GREEDY, 12),
                           EngineRequest(ids, GREEDY, 1, embed=True),
                           EngineRequest(ids[:10], GREEDY, 1, embed=True)])
    vec = out[1].embedding
    assert vec is not None and vec.shape == (lm_head().shape[1],)
    logits = lm_head() @ vec.astype(np.float64)
    want = golden["logits"][-1].astype(np.float64)
    cosine = logits @ want / (np.linalg.norm(logits) * np.linalg.norm(want))
    assert cosine >= 0.9999 and np.abs(logits - want).max() < 0.1, cosine
    # a shorter prompt pools its own last token (transformers' logits at position 9)
    short = lm_head() @ out[2].embedding.astype(np.float64)
    want_short = golden["logits"][9].astype(np.float64)
    assert np.abs(short - want_short).max() < 0.1
    assert out[0].embedding is None and len(out[0].token_ids) == 12
    # a one-token prompt alone is a decode-shaped step (its graph's LM head reads the normed
    # rows in place, no gather): its pooled row is position 0's
    (one,) = engine.generate([EngineRequest(ids[:1], GREEDY, 1, embed=True)])
    first = lm_head() @ one.embedding.astype(np.float64)
    assert np.abs(first - golden["logits"][0].astype(np.float64)).max() < 0.1
    blocks = engine.core.scheduler.blocks
    assert blocks.num_available == blocks.num_blocks
