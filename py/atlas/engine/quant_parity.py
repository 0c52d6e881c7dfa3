"""Numerical parity of a quantized checkpoint against its dequantized twin.

Both checkpoints hold the same weights (`atlas.runtime.dequantize.dequantize_checkpoint`
writes bf16(codes x scales)); the engine runs one with the quantized kernels (GEMV in
registers for decode rows, dequantize + GEMM for prefill) and the other with the bf16 ones.
A prompt long enough for the dequantize + GEMM route runs the same bf16 weights on both
sides (the reference is rounded as the kernels round): its logits must match to
PREFILL_MIN_COSINE. Decode steps run the quantized GEMV, which multiplies by the f32 weight
the reference rounds to bf16: a one-ulp-scale difference per weight. On the tiny random
fixtures a random one-ulp bf16 perturbation of every weight alone costs cosine
0.9997-0.9999 over a few steps (measured), so decode steps pass at DECODE_MIN_COSINE; a
wrong scale, nibble or group gives cosines far below (bf16 vs NVFP4 weights: ~0.95).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from ..core.sampling import GREEDY
from ..model.batch import PenaltyHistory, SeqChunk

#: GEMM-route steps: identical bf16 weights on both sides
PREFILL_MIN_COSINE = 0.99999
#: GEMV steps: f32 weights against their bf16 rounding (see the module doc)
DECODE_MIN_COSINE = 0.9995


def step_logits(model_dir: Path, prompt: list[int], decode: list[int], backend: str,
                **runner_kwargs: Any) -> list[np.ndarray]:
    """f64 logits after prefilling `prompt` and after each fed token of `decode`."""
    from ..model.load import load_runner

    total = len(prompt) + len(decode)
    kwargs: dict[str, Any] = dict(max_seq_len=max(64, total + 16), max_batch_size=1,
                                  max_prefill_tokens=max(16, len(prompt)))
    kwargs.update(runner_kwargs)
    runner = load_runner(model_dir, backend=backend, **kwargs)
    blocks = list(range(-(-total // runner.block_size)))
    out = []
    runner.execute([SeqChunk(0, prompt, 0, blocks, GREEDY, history=PenaltyHistory(prompt))])
    out.append(runner.read_logits(1)[0].astype(np.float64))
    for i, tok in enumerate(decode):
        runner.execute([SeqChunk(0, [tok], len(prompt) + i, blocks, GREEDY, rng_position=i + 1)])
        out.append(runner.read_logits(1)[0].astype(np.float64))
    runner.release(0)
    return out


def _cosine(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def compare_quantized(quantized: Path, reference: Path, prompt: list[int], decode: list[int],
                      backend: str, **runner_kwargs: Any) -> dict[str, Any]:
    """Per-step cosines and argmax agreement of `quantized` against `reference`; `prompt`
    should be long enough for the GEMM route (> 64 rows; see matmul_quant.gemv_passes)."""
    got = step_logits(quantized, prompt, decode, backend, **runner_kwargs)
    want = step_logits(reference, prompt, decode, backend, **runner_kwargs)
    cosines = [_cosine(g, w) for g, w in zip(got, want)]
    argmax = [int(g.argmax()) == int(w.argmax()) for g, w in zip(got, want)]
    return {"model": Path(quantized).name, "reference": Path(reference).name,
            "cosines": cosines, "prefill_cosine": cosines[0],
            "decode_min_cosine": min(cosines[1:], default=1.0), "argmax_match": argmax,
            "max_abs_err": max(float(np.abs(g - w).max()) for g, w in zip(got, want)),
            # argmax agreement is reported, not required: random-weight logits have near-ties
            "passed": (cosines[0] >= PREFILL_MIN_COSINE
                       and min(cosines[1:], default=1.0) >= DECODE_MIN_COSINE)}
