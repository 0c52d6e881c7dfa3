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
from typing import Any, Iterator

import numpy as np

from ..core.sampling import GREEDY
from ..model.batch import PenaltyHistory, SeqChunk

#: bf16 end-to-end tolerance: cosine of the logit vectors and identical greedy tokens
MIN_COSINE = 0.999


def compare_with_golden(model_dir: Path, golden: dict[str, np.ndarray], backend: str,
                        **runner_kwargs: Any) -> dict[str, Any]:
    from ..model.load import load_runner
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
    margins = np.asarray(golden.get("greedy_margin", np.full(len(want_greedy), np.nan)))
    forced_miss = []
    steps = prefill_then_force(runner, ids, want_greedy[:-1])
    got_last = next(steps)
    for i, logits in enumerate(steps):
        ours = int(logits.argmax())
        if ours != want_greedy[i + 1]:
            forced_miss.append({"step": i + 1, "ours": ours, "want": want_greedy[i + 1],
                                "golden_margin": float(margins[i + 1])})
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
    want = [int(x) for x in golden["greedy"]]
    engines = {"atlas": np.asarray(got_last, np.float64), "transformers_eager": eager}
    prefix = {"atlas_vs_eager": _common_prefix(got_greedy, want)}
    if "sdpa_logits" in golden:  # absent where transformers has no SDPA path (gpt-oss)
        engines["transformers_sdpa"] = golden["sdpa_logits"].reshape(-1)
        sdpa_greedy = [int(x) for x in golden["sdpa_greedy"]]
        prefix["atlas_vs_sdpa"] = _common_prefix(got_greedy, sdpa_greedy)
        prefix["sdpa_vs_eager"] = _common_prefix(sdpa_greedy, want)
    return {
        "cosine_vs_f32": {k: _cos(x, f32) for k, x in engines.items()},
        "max_abs_err_vs_f32": {k: float(np.abs(x.astype(np.float64) - f32).max())
                               for k, x in engines.items()},
        "greedy_identical_prefix": prefix,
    }


def prefill_then_force(runner: Any, ids: list[int], forced: list[int]) -> Iterator[np.ndarray]:
    """float64 logits after prefilling `ids` (its last position), then after each token of
    `forced` fed as one decode step (teacher forcing); sequence 0 is released once the last
    is read."""
    from ..runtime.kv_cache import BlockAllocator

    pool = BlockAllocator(runner.num_kv_blocks)
    blocks = pool.allocate(-(-len(ids) // runner.block_size))
    try:
        runner.execute([SeqChunk(0, ids, 0, blocks, GREEDY, history=PenaltyHistory(ids))])
        yield runner.read_logits(1)[0].astype(np.float64)
        pos = len(ids)
        for i, tok in enumerate(forced):
            if pos + 1 > len(blocks) * runner.block_size:
                blocks += pool.allocate(1)
            runner.execute([SeqChunk(0, [tok], pos, blocks, GREEDY, rng_position=i + 1)])
            pos += 1
            yield runner.read_logits(1)[0].astype(np.float64)
    finally:
        runner.release(0)
        pool.free(blocks)


def _spread(a: np.ndarray, b: np.ndarray) -> dict[str, float]:
    """1 - cosine of a and b row by row (positions): min, 10th percentile, median, 90th
    percentile and max, and the fraction of rows whose argmax agrees."""
    a64, b64 = np.asarray(a, np.float64), np.asarray(b, np.float64)
    cos = (a64 * b64).sum(1) / np.maximum(np.linalg.norm(a64, axis=1)
                                          * np.linalg.norm(b64, axis=1), 1e-300)
    d = 1.0 - cos
    return {"min": float(d.min()), "p10": float(np.percentile(d, 10)),
            "median": float(np.median(d)), "p90": float(np.percentile(d, 90)),
            "max": float(d.max()), "argmax_agree": float((a64.argmax(1) == b64.argmax(1)).mean())}


def tail_distribution(model_dir: Path, golden: dict[str, np.ndarray], backend: str,
                      **runner_kwargs: Any) -> dict[str, Any]:
    """Atlas's logits at the prompt's last P positions (prefill up to the first of them,
    then the rest of the prompt one decode step each), each position vs transformers eager
    and vs float32, beside the same distributions of transformers SDPA and eager: with
    random router weights one position's cosine is a draw from a wide distribution (near-tie
    routing flips), so parity is read against the control's spread, not one number. Needs
    the golden's `eager_tail_logits`, `sdpa_tail_logits`, `f32_tail_logits` [P, vocab]
    (tools/make_fixtures.py reference_controls); {} without them."""
    from ..model.load import load_runner

    if "eager_tail_logits" not in golden:
        return {}
    eager = np.asarray(golden["eager_tail_logits"], np.float64)
    f32 = np.asarray(golden["f32_tail_logits"], np.float64)
    ids = [int(x) for x in np.asarray(golden["input_ids"]).reshape(-1)]
    cut = len(ids) - len(eager) + 1
    kwargs = dict(max_seq_len=len(ids) + 16, max_batch_size=1,
                  max_prefill_tokens=max(cut, 16), gpu_memory_utilization=0.5,
                  fast_load=True, progress=None)
    kwargs.update(runner_kwargs)
    runner = load_runner(model_dir, backend=backend, **kwargs)
    got = np.stack(list(prefill_then_force(runner, ids[:cut], ids[cut:])))
    out: dict[str, Any] = {"positions": len(eager)}
    engines = [("atlas", got), ("transformers_eager", eager)]
    if "sdpa_tail_logits" in golden:
        engines.insert(1, ("transformers_sdpa", golden["sdpa_tail_logits"]))
    for name, x in engines:
        out[name] = {"vs_f32": _spread(x, f32)}
        if name != "transformers_eager":
            out[name]["vs_eager"] = _spread(x, eager)
    return out
