#!/usr/bin/env python3
"""Check every MoE layer of one real prefill against the numpy references, layer by layer.

The 8-layer Qwen3-30B-A3B parity run is ~15x further from transformers' float32 forward than
transformers' own bf16 runs, while the host backend (which runs every kernel through its
reference) is as close as transformers on layer-reduced configs up to hidden 2048 and 512
tokens, and every MoE check case passes on the H200. So the defect is a device kernel on a
shape/routing the check cases do not reach. This tool finds it with the real data: it runs
the golden prompt's prefill on the device with a hook after each sparse layer's MLP, reads
that layer's input (normed), router logits, top-k ids/weights and output (delta) back, and
recomputes each stage from the device's own input of that stage:

* router logits vs bf16(x @ W_router^T) (f64 products rounded as the contract says);
* top-k ids vs the reference's selection from the device's logits (a mismatch is a bug
  unless the logits tie), weights vs the reference's;
* expert output vs the reference experts applied with the device's ids and weights.

Each layer prints the largest error of each stage in units of the largest |value|, and the
worst row; a stage whose error is far above bf16 rounding (2^-8 relative) is the culprit.

    python3 tools/gpu/moe_layer_check.py --model /data/qwen3-30b-a3b-8l [--tokens 512]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "py"))

from atlas.core.numerics import bf16_bits_to_f32  # noqa: E402
from atlas.model import moe as moe_model  # noqa: E402
from atlas.runtime.reference import moe as ref  # noqa: E402


def _bf16(backend: Any, ptr: int, shape: tuple[int, ...]) -> np.ndarray:
    return bf16_bits_to_f32(backend.download(ptr, np.uint16, shape)).astype(np.float64)


def _rel(got: np.ndarray, want: np.ndarray) -> tuple[float, int]:
    """(max |got - want| / max |want|, the row holding it)."""
    err = np.abs(got - want)
    row = int(np.unravel_index(int(err.argmax()), err.shape)[0]) if err.size else 0
    return float(err.max() / max(np.abs(want).max(), 1e-30)), row


def reference_experts(x: np.ndarray, ids: np.ndarray, weights: np.ndarray, w_gu: np.ndarray,
                      w_down: np.ndarray, inter: int) -> np.ndarray:
    """out [tokens, hidden] of the references' expert math (bf16 weights as uint16 bits),
    widening one expert at a time (a whole layer widened to f64 is ~10 GB)."""
    tokens, top_k = ids.shape
    flat = ids.reshape(-1)
    xs = np.repeat(x, top_k, axis=0)
    y = np.zeros((flat.size, w_down.shape[1]))
    for e in np.unique(flat[(flat >= 0) & (flat < len(w_gu))]):
        rows = np.nonzero(flat == e)[0]
        gu = bf16_bits_to_f32(w_gu[e]).astype(np.float64)
        act = ref.swiglu_rows(xs[rows], gu)
        y[rows] = ref._bf16(act @ bf16_bits_to_f32(w_down[e]).astype(np.float64).T)
    out_bits = ref.weighted_sum(y.reshape(tokens, top_k, -1), ids, weights, len(w_gu))
    return bf16_bits_to_f32(out_bits).astype(np.float64)


def check_layer(mlp: "moe_model.MoeMlp", backend: Any, normed: int, delta: int, t: int
                ) -> dict[str, Any]:
    sh, bf = mlp.shape, mlp.bufs
    e, k, h, i = sh.experts, sh.top_k, sh.hidden, sh.inter
    x = _bf16(backend, normed, (t, h))
    logits = backend.download(bf.logits, np.float32, (t, e))
    ids = backend.download(bf.topk_ids, np.int32, (t, k))
    weights = backend.download(bf.topk_weights, np.float32, (t, k))
    out = _bf16(backend, delta, (t, h))
    w_router = _bf16(backend, mlp.router, (e, h))
    w_gu = backend.download(mlp.gate_up, np.uint16, (e, 2 * i, h))
    w_down = backend.download(mlp.down, np.uint16, (e, h, i))

    want_logits = ref._bf16(x @ w_router.T)
    want_ids, want_w = ref.topk_softmax(logits, k, mlp.routing.renormalize, mlp.routing.scale)
    id_rows = np.nonzero((np.sort(ids, 1) != np.sort(want_ids, 1)).any(axis=1))[0]
    want_out = reference_experts(x, ids, weights, w_gu, w_down, i)
    logit_err, logit_row = _rel(logits.astype(np.float64), want_logits)
    weight_err, weight_row = _rel(weights.astype(np.float64), want_w.astype(np.float64))
    out_err, out_row = _rel(out, want_out)
    return {"tokens": t, "router_logits_rel_err": logit_err, "router_logits_worst_row": logit_row,
            "topk_id_mismatch_rows": id_rows[:16].tolist(), "topk_id_mismatch_count": len(id_rows),
            "topk_weights_rel_err": weight_err, "topk_weights_worst_row": weight_row,
            "experts_out_rel_err": out_err, "experts_out_worst_row": out_row,
            "experts_out_rows_over_2pct": int((np.abs(out - want_out).max(axis=1)
                                               > 0.02 * np.abs(want_out).max()).sum())}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", type=Path, required=True, help="checkpoint with golden.npz")
    ap.add_argument("--backend", default="cuda")
    ap.add_argument("--tokens", type=int, default=0, help="prompt length (0: the golden's)")
    ap.add_argument("--out", type=Path)
    a = ap.parse_args(argv)

    from atlas.core.sampling import GREEDY
    from atlas.model.batch import PenaltyHistory, SeqChunk
    from atlas.model.load import load_runner
    from atlas.runtime.kv_cache import BlockAllocator

    ids = [int(x) for x in np.load(a.model / "golden.npz")["input_ids"].reshape(-1)]
    if a.tokens:
        ids = ids[:a.tokens]
    runner = load_runner(a.model, backend=a.backend, max_seq_len=len(ids) + 16,
                         max_batch_size=1, max_prefill_tokens=len(ids),
                         gpu_memory_utilization=0.5, fast_load=True, progress=None,
                         use_graphs=False)
    results: list[dict[str, Any]] = []
    original = moe_model.MoeMlp.forward

    def hooked(self: "moe_model.MoeMlp", kc: Any, s: Any, b: Any, t: int,
               norm: Any = None) -> None:
        original(self, kc, s, b, t, norm=norm)  # the check reads normed, delta
        kc.backend.synchronize(s)
        r = check_layer(self, kc.backend, b.normed, b.delta, t)
        r["layer"] = len(results)
        results.append(r)
        print(json.dumps(r), flush=True)

    moe_model.MoeMlp.forward = hooked  # type: ignore[method-assign]
    try:  # the class is patched for this prefill only (callers in-process keep theirs)
        pool = BlockAllocator(runner.num_kv_blocks)
        blocks = pool.allocate(-(-len(ids) // runner.block_size))
        runner.execute([SeqChunk(0, ids, 0, blocks, GREEDY, history=PenaltyHistory(ids))])
    finally:
        moe_model.MoeMlp.forward = original  # type: ignore[method-assign]
    if a.out:
        a.out.write_text(json.dumps(results, indent=1) + "\n")
    worst = max(r["experts_out_rel_err"] for r in results)
    print(f"moe_layer_check: {len(results)} sparse layers, worst expert-output error "
          f"{worst:.4f} of max|out|, id mismatches "
          f"{sum(r['topk_id_mismatch_count'] for r in results)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
