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
    python3 tools/gpu/layer_diff.py capture --model CKPT --backend transformers --out hf.npz
    (--backend transformers-sdpa: the same weights through SDPA attention, the control: how far
    two correct bf16 implementations that round differently drift apart)
    python3 tools/gpu/layer_diff.py compare host.npz cuda.npz

`transformers` captures the bf16 eager model's residual stream after each layer and its
router logits (`layer_NNN` / `router_NNN` keys); every capture also has those keys, so any two
compare layer by layer; MoE layers add how many tokens' top-k expert sets differ.
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
from atlas.model import moe as moe_model  # noqa: E402
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
    adds = [0]  # residual adds so far (not len(saved): the layer_ keys are in it too)
    original = norm.add_rmsnorm
    original_moe = moe_model.MoeMlp.forward
    routers: list[np.ndarray] = []

    def hooked_moe(self: Any, kc: Any, s: Any, b: Any, t: int, norm: Any = None) -> None:
        original_moe(self, kc, s, b, t, norm=norm)  # the residual add after it goes through
        # `hooked` (the router's own add before it, ATLAS_MOE_ROUTER_NORM=1, does not)
        kc.backend.synchronize(s)
        routers.append(kc.backend.download(self.bufs.logits, np.float32,
                                           (t, self.shape.experts)).copy())

    def hooked(kc: Any, stream: Any, residual: int, delta: int, w: int, out: int, rows: int,
               dim: int, eps: float, offset: bool = False, one_round: bool = False) -> None:
        kc.backend.synchronize(stream)
        n = adds[0]
        adds[0] += 1
        for name, ptr in (("delta", delta), ("resid", residual)):
            bits = kc.backend.download(ptr, np.uint16, (rows, dim))
            saved[f"{n:03d}_{name}"] = bf16_bits_to_f32(bits)
        original(kc, stream, residual, delta, w, out, rows, dim, eps, offset, one_round)
        if n % 2 == 1:  # after the MLP's add: the residual stream leaving layer n // 2
            kc.backend.synchronize(stream)
            bits = kc.backend.download(residual, np.uint16, (rows, dim))
            saved[f"layer_{n // 2:03d}"] = bf16_bits_to_f32(bits)

    norm.add_rmsnorm = hooked  # type: ignore[assignment]
    moe_model.MoeMlp.forward = hooked_moe  # type: ignore[method-assign]
    try:
        pool = BlockAllocator(runner.num_kv_blocks)
        blocks = pool.allocate(-(-len(ids) // runner.block_size))
        runner.execute([SeqChunk(0, ids, 0, blocks, GREEDY, history=PenaltyHistory(ids))])
    finally:
        norm.add_rmsnorm = original  # type: ignore[assignment]
        moe_model.MoeMlp.forward = original_moe  # type: ignore[method-assign]
    saved.update({f"router_{i:03d}": r for i, r in enumerate(routers)})
    return saved


def capture_transformers(model: Path, tokens: int, attn: str = "eager") -> dict[str, np.ndarray]:
    """transformers' bf16 eager forward of the same prompt: the residual stream after each
    decoder layer (hidden_states[1..L]; the last one before the final norm is not exposed,
    so the last layer is left out) and each sparse layer's router logits."""
    import torch
    from transformers import AutoModelForCausalLM

    ids = [int(x) for x in np.load(model / "golden.npz")["input_ids"].reshape(-1)]
    if tokens:
        ids = ids[:tokens]
    device = "cuda" if torch.cuda.is_available() else "cpu"
    hf = AutoModelForCausalLM.from_pretrained(model, dtype=torch.bfloat16,
                                              attn_implementation=attn).to(device).eval()
    with torch.no_grad():
        out = hf(torch.tensor([ids], device=device), output_hidden_states=True,
                 output_router_logits=True)
    saved = {f"layer_{i:03d}": h[0].float().cpu().numpy()
             for i, h in enumerate(out.hidden_states[1:-1])}
    for i, r in enumerate(getattr(out, "router_logits", None) or ()):
        saved[f"router_{i:03d}"] = r.reshape(len(ids), -1).float().cpu().numpy()
    return saved


def _position_spread(a: np.ndarray, b: np.ndarray) -> tuple[float, float, float]:
    """Median, 90th percentile and max over positions (rows) of 1 - cosine(a_row, b_row):
    one prompt's last position is one draw from this distribution."""
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    cos = (a64 * b64).sum(1) / np.maximum(np.linalg.norm(a64, axis=1)
                                          * np.linalg.norm(b64, axis=1), 1e-300)
    d = 1.0 - cos
    return float(np.median(d)), float(np.percentile(d, 90)), float(d.max())


def _topk_sets(logits: np.ndarray, k: int) -> np.ndarray:
    """Each row's k largest indices, ties to the lower index, sorted."""
    order = np.lexsort((np.broadcast_to(np.arange(logits.shape[1]), logits.shape), -logits))
    return np.sort(order[:, :k], axis=1)


def _rel(a: np.ndarray, b: np.ndarray) -> tuple[float, float]:
    """(max |a-b| / max |a|, 1 - cosine) over the whole tensor."""
    a64, b64 = a.astype(np.float64).ravel(), b.astype(np.float64).ravel()
    cos = float(a64 @ b64 / max(np.linalg.norm(a64) * np.linalg.norm(b64), 1e-300))
    return float(np.abs(a64 - b64).max() / max(np.abs(a64).max(), 1e-30)), 1.0 - cos


def compare(a_path: Path, b_path: Path, top_k: int) -> None:
    a, b = np.load(a_path), np.load(b_path)
    print(f"{'layer':>5} {'out max/max':>12} {'out 1-cos':>10} {'pos p50':>9} {'pos p90':>9} "
          f"{'pos max':>9} {'router =bits':>12} {'router 1-cos':>12} {'top-k sets differ':>17}")
    for k in sorted(x for x in a.files if x.startswith("layer_") and x in b.files):
        n = k[6:]
        om, oc = _rel(a[k], b[k])
        p50, p90, pmax = _position_spread(a[k], b[k])
        line = f"{int(n):>5} {om:12.3e} {oc:10.3e} {p50:9.2e} {p90:9.2e} {pmax:9.2e}"
        r = f"router_{n}"
        if r in a.files and r in b.files:
            same = float((a[r] == b[r]).mean())
            rc = _rel(a[r], b[r])[1]
            differ = int((_topk_sets(a[r], top_k) != _topk_sets(b[r], top_k)).any(1).sum())
            line += f" {same:12.4f} {rc:12.3e} {differ:>9} of {a[r].shape[0]}"
        print(line)
    keys = sorted(k for k in a.files if k.endswith("_delta") and k in b.files)
    if keys:
        print()
        print(f"{'layer':>5} {'add':>3} {'kind':>5} {'delta max/max':>14} "
              f"{'delta 1-cos':>12} {'resid max/max':>14} {'resid 1-cos':>12}")
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
    d.add_argument("--top-k", type=int, default=8)
    args = ap.parse_args(argv)
    if args.cmd == "capture":
        if args.backend.startswith("transformers"):  # transformers or transformers-sdpa
            attn = args.backend.partition("-")[2] or "eager"
            saved = capture_transformers(args.model, args.tokens, attn)
        else:
            saved = capture(args.model, args.backend, args.tokens)
        np.savez(args.out, **saved)
        print(f"layer_diff: wrote {args.out}")
    else:
        compare(args.a, args.b, args.top_k)
    return 0


if __name__ == "__main__":
    sys.exit(main())
