"""Prompt logprobs on the CUDA backend (tests/numerics/test_prompt_logprobs.py is the host
run): two batched tiny-qwen3 requests whose prompts span several capped chunks score every
prompt token within the fixture's transformers tolerance, and within it of the CUDA engine's
own plain steps (the scoring rows go through the prefill GEMM and the logprobs kernel at
offset rows; the plain steps through the decode GEMV). Marked `gpu`."""

from __future__ import annotations

import numpy as np
import pytest

from atlas.core.sampling import GREEDY
from atlas.engine.llm_engine import LLMEngine
from atlas.engine.parity import prefill_then_force
from atlas.engine.request import EngineRequest
from atlas.model.load import load_runner
from tests.numerics.test_prompt_logprobs import (FIXTURE, GOLDEN, GOLDEN_ATOL, IDS, check,
                                                  log_softmax)

pytestmark = pytest.mark.gpu


def test_cuda_prompt_logprobs_match_transformers_and_plain_steps() -> None:
    runner = load_runner(FIXTURE, backend="cuda", max_seq_len=64, max_batch_size=3,
                         max_prefill_tokens=8)
    own = log_softmax(np.stack(list(prefill_then_force(runner, IDS[:1], IDS[1:-1]))))
    engine = LLMEngine(runner, max_prefill_tokens=8)
    short = IDS[:15]
    out = engine.generate([EngineRequest(IDS, GREEDY, 3, prompt_logprobs=4),
                           EngineRequest(short, GREEDY, 5, prompt_logprobs=0)])
    check(out[0].prompt_logprobs, IDS, 4, log_softmax(GOLDEN["logits"]), GOLDEN_ATOL)
    check(out[0].prompt_logprobs, IDS, 4, own, GOLDEN_ATOL)
    check(out[1].prompt_logprobs, short, 0, own, GOLDEN_ATOL)
    plain = engine.generate([EngineRequest(IDS, GREEDY, 3), EngineRequest(short, GREEDY, 5)])
    assert [o.token_ids for o in out] == [o.token_ids for o in plain]
