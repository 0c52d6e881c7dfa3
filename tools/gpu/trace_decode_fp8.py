#!/usr/bin/env python3
"""Where a launch of the FP8 tensor-core decode GEMM spends its time: its traced twin
(kernels/hopper/common/gemm_decode_fp8.cu gemm_decode_fp8_trace_bf16*, the bf16 product with
each block's %globaltimer stamps, ops.matmul_fp8_wgmma.TRACE_PHASES) on Qwen3-8B's batch-1
FP8 projections at the launch builder's split (or --split), launched right behind another
traced launch of itself (PDL: as a step runs its projections back to back).

Why: the kernel streams at the copy rate on many-wave grids but loses several microseconds a
block on the one-wave projection grids (gpu195-gpu197, docs/quantization.md "Session 56");
this says which phase holds them (x staging after the PDL wait, the first tile's arrival,
the stream, the cluster epilogue) instead of guessing.

Per shape: for each phase the median and the largest over blocks of the time since the
launch's first block start (us), the launch's span, the blocks resident on one SM (most
and fewest), the k-tiles of the busiest SM against the mean, and how long a block's
consumers waited for landed weight slots and its producer for drained ones (the stream
late, or the MMAs). --dry-run: the host
backend (checks the plumbing; no device times)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from check_kernels import load_sources  # noqa: E402

from atlas.core.numerics import f32_to_bf16_bits  # noqa: E402
from atlas.core.quant import Fp8ScaleMap  # noqa: E402
from atlas.runtime.gpu import GpuBackend  # noqa: E402
from atlas.runtime.host import HostBackend  # noqa: E402
from atlas.runtime.ops import KernelCache  # noqa: E402
from atlas.runtime.ops import matmul_fp8_wgmma as fp8  # noqa: E402
from atlas.runtime.ops.matmul_quant import Fp8Weight  # noqa: E402

#: Qwen3-8B's projections at batch 1: (name, n, k); gate_up as its plain product
SHAPES = [("qkv", 6144, 4096), ("o_proj", 4096, 4096), ("down", 4096, 12288),
          ("gate_up", 24576, 4096)]
TINY = [("tiny", 256, 512)]


def trace_lines(name: str, trace: np.ndarray, n: int, k: int, split: int) -> list[str]:
    """The report of one traced launch (trace u64 [blocks, TRACE_WORDS])."""
    start = trace[:, fp8.TRACE_PHASES["start"]].astype(np.int64)
    t0 = int(start.min())
    parts = []
    for phase, word in fp8.TRACE_PHASES.items():
        col = trace[:, word].astype(np.int64)
        if not col.any():
            continue
        rel = (col - t0) / 1e3
        parts.append(f"{phase} {np.median(rel):.2f}/{rel.max():.2f}")
    sm = trace[:, fp8.TRACE_SM_WORD].astype(np.int64)
    per_sm = np.bincount(sm)
    used = per_sm > 0
    # the k-tiles each block streams: its cluster's tiles (persistent: c, c + C, ...) times
    # its share of k
    clusters, tiles = len(trace) // split, -(-n // 64)
    cluster = np.arange(len(trace)) // split
    block_k_tiles = np.maximum(0, -(-(tiles - cluster) // clusters)) * (-(-k // fp8.K_TILE) / split)
    sm_k_tiles = np.bincount(sm, weights=block_k_tiles, minlength=len(per_sm))[used]
    per_sm = per_sm[used]
    span = (int(trace[:, fp8.TRACE_PHASES["end"]].max()) - t0) / 1e3
    return [f"{name} n{n} k{k} split {split}: {len(trace)} blocks in {clusters} clusters for "
            f"{tiles} tiles on {len(per_sm)} SMs (max {per_sm.max()}, min {per_sm.min()} a "
            f"SM; busiest SM {sm_k_tiles.max():.0f} k-tiles vs mean {sm_k_tiles.mean():.1f}); "
            f"span {span:.2f} us",
            "  us since the first start, median/max over blocks: " + "; ".join(parts),
            "  us waited, median/max over blocks: " + "; ".join(
                f"{what} {np.median(trace[:, word]) / 1e3:.2f}/{trace[:, word].max() / 1e3:.2f}"
                for what, word in fp8.TRACE_WAITS.items())]


def open_backend(args: argparse.Namespace) -> tuple[GpuBackend, str]:
    """The CUDA backend on the PTX set of --model (or --ptx-dir); the host backend for
    --dry-run."""
    if args.dry_run:
        return HostBackend(), "host-reference"
    from atlas.kernels.registry import load_registry
    from atlas.runtime.cuda import CudaBackend

    wanted = None
    if args.ptx_dir is None:
        wanted = load_registry().select_model_dir("hopper", args.model, "bf16")[0].target.name
    sources = [s for s in load_sources(args.ptx_dir, "hopper") if wanted in (None, s.name)]
    if not sources:
        raise SystemExit(f"no hopper PTX set for model {args.model}")
    return CudaBackend(modules=sources[0].modules), sources[0].name


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ptx-dir", type=Path, help="PTX set directory (default: the registry's)")
    ap.add_argument("--model", default="qwen3-8b", help="model whose PTX set runs (registry)")
    ap.add_argument("--split", type=int, help="force the cluster split (1..4)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--dry-run", action="store_true", help="CPU: a tiny shape, HostBackend")
    args = ap.parse_args(argv)
    backend, ptx_set = open_backend(args)
    kc = KernelCache(backend)
    stream = backend.create_stream()
    rng = np.random.default_rng(args.seed)
    print(f"backend: {backend.name}  PTX set: {ptx_set}")
    for name, n, k in TINY if args.dry_run else SHAPES:
        split = args.split or fp8.split_for(kc, 1, n, k, "bf16")
        if split not in fp8.fitting_splits(k) or split > 4:
            print(f"{name}: split {split} has no traced entry (1..4 that fit)")
            continue
        codes = rng.integers(0, 256, (n, k), dtype=np.uint8)
        codes[(codes & 0x7F) == 0x7F] ^= 1  # no NaN codes
        smap = Fp8ScaleMap.block(n, k)
        scales = np.full(smap.shape, 1.0 / (100.0 * k ** 0.5), np.float32)
        x = f32_to_bf16_bits(rng.uniform(-1, 1, (1, k)).astype(np.float32))
        bufs = [backend.upload(a) for a in (codes, scales, x)]
        y = backend.alloc(2 * n)
        w = Fp8Weight(bufs[0], bufs[1], n, k, smap)
        blocks = fp8.traced_blocks(kc, w, 1, split)
        traces = [backend.upload(np.zeros((blocks, fp8.TRACE_WORDS), np.uint64))
                  for _ in range(2)]
        fp8.gemm_fp8(kc, stream, bufs[2], w, y, 1, split=split)  # warm-up
        for t in traces:  # the second right behind the first
            fp8.gemm_fp8_traced(kc, stream, bufs[2], w, y, 1, split, t)
        backend.synchronize()
        stamps = backend.download(traces[1], np.uint64, (blocks, fp8.TRACE_WORDS))
        if args.dry_run:
            print(f"{name}: {blocks} blocks launched (the host backend stamps nothing)")
        else:
            print("\n".join(trace_lines(name, stamps, n, k, split)))
        for p in bufs + traces + [y]:
            backend.free(p)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
