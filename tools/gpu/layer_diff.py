#!/usr/bin/env python3
"""Where two backends part: the residual stream of one prefill, sublayer by sublayer.

A model whose kernels each match their references can still disagree with transformers end
to end (the 8-layer Qwen3-30B-A3B config: cosine 0.9966 on the device, 0.99986 on the host
backend, same checkpoint and prompt). This tool runs the golden prompt's prefill on one
backend and saves, at every residual add (the boundary between sublayers), the sublayer's
output (`delta`, before it is added) and the residual stream it is added to; `--compare`
then prints, sublayer by sublayer, how far the two backends' deltas and residuals are apart.
Layer 0's attention sees the same embedding rows on both backends, so its delta error is the
kernels' own disagreement; a sublayer whose delta error jumps far above its neighbours' is the
culprit.

    python3 tools/gpu/layer_diff.py capture --model CKPT --backend cuda --out cuda.npz
    ATLAS_HOST_MEMORY_GIB=64 python3 tools/gpu/layer_diff.py capture --model CKPT \\
        --backend host --out host.npz
    python3 tools/gpu/layer_diff.py compare host.npz cuda.npz
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "py"))

from atlas.core.numerics import bf16_bits_to_f32  # noqa: E402
from atlas.runtime.ops import norm  # noqa: E402


def capture(model: Path, backend: str, tokens: int) -> dict[str, np.ndarray]:
    """Prefill the golden prompt on `backend`, keeping delta/resid at every residual add."""
    from atlas.core.sampling import GREEDY
    from atlas.model.batch import PenaltyHistory, SeqChunk
    from atlas.model.load import load_runner
    from atlas.runtime.kv_cache import BlockAllocator

    ids = [int(x) for x in np.load(model / "golden.npz")["input_ids"].reshape(-1)]
    if tokens:
        ids = ids[:tokens]
    runner = load_runner(model, backend=backend, max_seq_len=len(ids) + 16, max_batch_size=1,
                         max_prefill_tokens=len(ids), gpu_memory_utilization=0.5,
                         fast_load=True, progress=None, use_graphs=False)
    saved: dict[str, np.ndarray] = {}
    original = norm.add_rmsnorm

    def hooked(kc: Any, stream: Any, residual: int, delta: int, w: int, out: int, rows: int,
               dim: int, eps: float, offset: bool = False) -> None:
        kc.backend.synchronize(stream)
        n = len(saved) // 2
        for name, ptr in (("delta", delta), ("resid", residual)):
            bits = kc.backend.download(ptr, np.uint16, (rows, dim))
            saved[f"{n:03d}_{name}"] = bf16_bits_to_f32(bits)
        original(kc, stream, residual, delta, w, out, rows, dim, eps, offset)

    norm.add_rmsnorm = hooked  # type: ignore[assignment]
    try:
        pool = BlockAllocator(runner.num_kv_blocks)
        blocks = pool.allocate(-(-len(ids) // runner.block_size))
        runner.execute([SeqChunk(0, ids, 0, blocks, GREEDY, history=PenaltyHistory(ids))])
    finally:
        norm.add_rmsnorm = original  # type: ignore[assignment]
    return saved


def _rel(a: np.ndarray, b: np.ndarray) -> tuple[float, float]:
    """(max |a-b| / max |a|, 1 - cosine) over the whole tensor."""
    a64, b64 = a.astype(np.float64).ravel(), b.astype(np.float64).ravel()
    cos = float(a64 @ b64 / max(np.linalg.norm(a64) * np.linalg.norm(b64), 1e-300))
    return float(np.abs(a64 - b64).max() / max(np.abs(a64).max(), 1e-30)), 1.0 - cos


def compare(a_path: Path, b_path: Path) -> None:
    a, b = np.load(a_path), np.load(b_path)
    keys = sorted(k for k in a.files if k.endswith("_delta"))
    print(f"{'layer':>5} {'add':>3} {'kind':>5} {'delta max/max':>14} {'delta 1-cos':>12} "
          f"{'resid max/max':>14} {'resid 1-cos':>12}")
    for k in keys:
        n = int(k[:3])
        # add n of model.forward: even n adds layer n/2's attention (or linear attention),
        # odd n the MLP of layer (n-1)/2
        kind, layer = ("attn" if n % 2 == 0 else "mlp"), n // 2
        dm, dc = _rel(a[k], b[k])
        rk = k.replace("_delta", "_resid")
        rm, rc = _rel(a[rk], b[rk])
        print(f"{layer:>5} {n:>3} {kind:>5} {dm:14.3e} {dc:12.3e} {rm:14.3e} {rc:12.3e}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("capture")
    c.add_argument("--model", type=Path, required=True, help="checkpoint with golden.npz")
    c.add_argument("--backend", default="cuda")
    c.add_argument("--tokens", type=int, default=0, help="prompt length (0: the golden's)")
    c.add_argument("--out", type=Path, required=True)
    d = sub.add_parser("compare")
    d.add_argument("a", type=Path)
    d.add_argument("b", type=Path)
    args = ap.parse_args(argv)
    if args.cmd == "capture":
        np.savez(args.out, **capture(args.model, args.backend, args.tokens))
        print(f"layer_diff: wrote {args.out}")
    else:
        compare(args.a, args.b)
    return 0


if __name__ == "__main__":
    sys.exit(main())
