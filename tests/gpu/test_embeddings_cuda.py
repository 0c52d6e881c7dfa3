"""Embedding requests on the CUDA backend (tests/numerics/test_embeddings.py is the host run):
the pooled hidden state of tiny-qwen3's golden prompt, times the LM head, gives transformers'
last-position logits. Marked `gpu`."""

from __future__ import annotations

import numpy as np
import pytest

from atlas.core.sampling import GREEDY
from atlas.engine.llm_engine import LLMEngine
from atlas.engine.request import EngineRequest
from atlas.model.load import load_runner
from tests.numerics.test_embeddings import FIXTURE, lm_head

pytestmark = pytest.mark.gpu


def test_cuda_embedding_matches_transformers_through_thelm_head() -> None:
    golden = np.load(FIXTURE / "golden.npz")
    ids = [int(t) for t in golden["input_ids"]]
    runner = load_runner(FIXTURE, backend="cuda", max_seq_len=64, max_batch_size=3,
                         max_prefill_tokens=8)
    out = LLMEngine(runner, max_prefill_tokens=8).generate(
        [EngineRequest([5, 9, 200], GREEDY, 12), EngineRequest(ids, GREEDY, 1, embed=True)])
    logits = lm_head() @ out[1].embedding.astype(np.float64)
    want = golden["logits"][-1].astype(np.float64)
    assert np.abs(logits - want).max() < 0.1
    assert logits @ want / (np.linalg.norm(logits) * np.linalg.norm(want)) >= 0.9999
