"""Numerical parity of a loaded model against transformers goldens.

A golden holds `input_ids`, transformers' `logits` for them (all positions or the last one),
its greedy continuation `greedy` and the top-2 margin of each greedy step. We prefill the
same ids and compare last-position logits; then (teacher forcing) feed transformers' greedy
tokens one decode step at a time and check that our argmax picks its next token each time,
noting the golden margin wherever we differ (a sub-ulp margin is a near-tie, not a bug);
finally we decode freely through the engine core (`LLMEngine`, the loop every driver shares)
and count identical greedy tokens. The first two parts drive the runner directly: they need
the logits of each step, not a sampled token.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from ..core.sampling import GREEDY
from ..model.batch import PenaltyHistory, SeqChunk

#: bf16 end-to-end tolerance: cosine of the logit vectors and identical greedy tokens
MIN_COSINE = 0.999


def compare_with_golden(model_dir: Path, golden: dict[str, np.ndarray], backend: str,
                        **runner_kwargs: Any) -> dict[str, Any]:
    from ..model.load import load_runner
    from ..runtime.kv_cache import BlockAllocator
    from .llm_engine import LLMEngine
    from .request import EngineRequest

    ids = [int(x) for x in np.asarray(golden["input_ids"]).reshape(-1)]
    want_greedy = [int(x) for x in np.asarray(golden["greedy"]).reshape(-1)]
    want_logits = np.asarray(golden["logits"], dtype=np.float64)
    want_last = want_logits.reshape(-1, want_logits.shape[-1])[-1]
    kwargs = dict(max_seq_len=len(ids) + len(want_greedy) + 16, max_batch_size=1,
                  max_prefill_tokens=max(len(ids), 16), gpu_memory_utilization=0.5,
                  fast_load=True, progress=None)
    kwargs.update(runner_kwargs)
    runner = load_runner(model_dir, backend=backend, **kwargs)
    pool = BlockAllocator(runner.num_kv_blocks)
    blocks = pool.allocate(-(-len(ids) // runner.block_size))
    runner.execute([SeqChunk(0, ids, 0, blocks, GREEDY, history=PenaltyHistory(ids))])
    got_last = runner.read_logits(1)[0].astype(np.float64)
    margins = np.asarray(golden.get("greedy_margin", np.full(len(want_greedy), np.nan)))
    forced_miss = []
    pos = len(ids)
    for i, tok in enumerate(want_greedy[:-1]):
        if pos + 1 > len(blocks) * runner.block_size:
            blocks += pool.allocate(1)
        runner.execute([SeqChunk(0, [tok], pos, blocks, GREEDY, rng_position=i + 1)])
        pos += 1
        ours = int(runner.read_logits(1)[0].argmax())
        if ours != want_greedy[i + 1]:
            forced_miss.append({"step": i + 1, "ours": ours, "want": want_greedy[i + 1],
                                "golden_margin": float(margins[i + 1])})
    runner.release(0)
    pool.free(blocks)
    engine = LLMEngine(runner, max_prefill_tokens=kwargs["max_prefill_tokens"])
    got_greedy = engine.generate([EngineRequest(ids, GREEDY, len(want_greedy))])[0].token_ids
    same = _common_prefix(got_greedy, want_greedy)
    cosine = float(got_last @ want_last / (np.linalg.norm(got_last) * np.linalg.norm(want_last)))
    out = {
        "model": model_dir.name,
        "max_abs_err": float(np.abs(got_last - want_last).max()),
        "cosine": cosine,
        "argmax_match": int(got_last.argmax()) == int(want_last.argmax()),
        "greedy_match": same,
        "greedy_total": len(want_greedy),
        "got_greedy": got_greedy,
        "teacher_forced_match": len(want_greedy) - 1 - len(forced_miss),
        "teacher_forced_total": len(want_greedy) - 1,
        "teacher_forced_misses": forced_miss,
    }
    out.update(reference_distances(golden, got_last, got_greedy))
    out["passed"] = cosine >= MIN_COSINE and same == len(want_greedy)
    return out


def _cos(a: np.ndarray, b: np.ndarray) -> float:
    a, b = np.asarray(a, np.float64).reshape(-1), np.asarray(b, np.float64).reshape(-1)
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def _common_prefix(a: list[int], b: list[int]) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def reference_distances(golden: dict[str, np.ndarray], got_last: np.ndarray,
                        got_greedy: list[int]) -> dict[str, Any]:
    """Where the golden carries transformers-vs-transformers controls (full-size configs,
    tools/make_fixtures.py reference_controls): each bf16 engine's distance from the
    float32 forward, and how long each pair of greedy continuations stays identical."""
    if "f32_logits" not in golden:
        return {}
    f32 = golden["f32_logits"].reshape(-1)
    eager = np.asarray(golden["logits"]).reshape(-1, f32.size)[-1]
    sdpa = golden["sdpa_logits"].reshape(-1)
    want = [int(x) for x in golden["greedy"]]
    sdpa_greedy = [int(x) for x in golden["sdpa_greedy"]]
    return {
        "cosine_vs_f32": {"atlas": _cos(got_last, f32), "transformers_eager": _cos(eager, f32),
                          "transformers_sdpa": _cos(sdpa, f32)},
        "max_abs_err_vs_f32": {
            "atlas": float(np.abs(np.asarray(got_last, np.float64) - f32).max()),
            "transformers_eager": float(np.abs(eager.astype(np.float64) - f32).max()),
            "transformers_sdpa": float(np.abs(sdpa.astype(np.float64) - f32).max())},
        "greedy_identical_prefix": {
            "atlas_vs_eager": _common_prefix(got_greedy, want),
            "atlas_vs_sdpa": _common_prefix(got_greedy, sdpa_greedy),
            "sdpa_vs_eager": _common_prefix(sdpa_greedy, want)},
    }
