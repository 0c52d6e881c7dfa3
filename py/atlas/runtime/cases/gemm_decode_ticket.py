"""Check cases for the TMA decode GEMM's ticket entry points (module gemm_decode_tma, sm_90a):
split-K over independent blocks that meet through the split workspace, the last block of a
tile summing the partials in rank order (gemm_decode_tile.cuh store_tile_ticket). Each case
launches the ticket kernel twice into two outputs -- the second launch finds the counters the
first left, so equal bits say it reset them -- and, for the splits the cluster entry points
have (2, 4, 8), the cluster kernel at the same split: same bits (both sum 0 + p0 + p1 + ... in
rank order). Every output against the float64 oracle. The shapes cover splits 2..8 with uneven
k ranges and ranks without k-tiles, m = 1, 17, 64, 256, n past the last tile, one and two
warpgroups, f32 logits and the SwiGLU epilogue. Marked `graph`: the device check also replays
them from a CUDA graph (the counters must come back to zero for the replay to match).
"""

from __future__ import annotations

import numpy as np

from ...core.dtype import DType
from ...core.numerics import f32_to_bf16_bits
from ..gpu import H200_FACTS, DevicePtr, GpuBackend, Stream
from ..kernel_check import KernelCase, OutputSpec, kernel_cases
from ..ops import KernelCache, matmul_decode
from ..ops.routes import DECODE_GEMM_SPLITS
from .gemv import TENSOR_CORE_K_TOL, linear_oracle, random_bf16, swiglu_oracle

#: the second ticket launch's output, and the cluster kernel's, beside the first's
AGAIN, CLUSTER = "_again", "_cluster"

#: (m, n, k, out_f32, split, wide, swiglu); split None: the ticket rule's (H200 SM count)
GEMM_DECODE_TICKET_SHAPES = [
    (64, 520, 4096, False, 4, True, False),    # two warpgroups, n past the last tile, = cluster
    (17, 200, 1040, True, 2, False, False),    # N 32, f32 logits, 17 k-tiles, = cluster
    (1, 96, 2048, False, 3, False, False),     # one row, 32 k-tiles over 3: 10 / 11 / 11
    (256, 130, 1024, False, 5, True, False),   # the largest batch, split 5, 2 rows past 128
    (64, 400, 3072, False, 6, True, True),     # SwiGLU (inter 200), split 6
    (33, 192, 4096, False, 2, False, True),    # SwiGLU, split 2, = cluster
    (9, 136, 520, False, 8, False, False),     # split 8 over 9 k-tiles, = cluster
    (100, 64, 64, False, 6, True, False),      # one k-tile: five of six ranks own none
    (128, 1024, 1024, True, 7, True, False),   # N 128, f32, split 7
    (64, 640, 4096, False, None, True, False),  # the rule's split (5 tiles: 8)
]


def gemm_decode_ticket_case(rng: np.random.Generator, m: int, n: int, k: int, f32: bool,
                            split: int | None, wide: bool, swiglu: bool) -> KernelCase:
    """y (act with `swiglu`, n = 2 I) through the ticket kernel twice, and where the split
    has a cluster entry point through the cluster kernel: the oracle for each, and the
    same bits."""
    scale = (4.0 if swiglu else 1.0) * k ** -0.5  # SwiGLU gates reach the SiLU's curve
    inputs = {"x": random_bf16(rng, (m, k)), "w": random_bf16(rng, (n, k), scale)}
    groups = matmul_decode.decode_groups(m, wide, tma=True)
    if split is None:
        split = matmul_decode.ticket_split(m, n, k, H200_FACTS.sm_count, groups=groups)
    name = "act" if swiglu else "y"
    spec = OutputSpec(DType.FP32 if f32 else DType.BF16, (m, n // 2 if swiglu else n),
                      bf16_valued=f32)
    outs = [name, name + AGAIN] + ([name + CLUSTER] if split in DECODE_GEMM_SPLITS else [])
    # one cache (one split workspace) per backend: the graph check runs the case twice, the
    # second time inside a capture, where a workspace may not be allocated
    held: list[tuple[GpuBackend, KernelCache]] = []

    def run(backend: GpuBackend, stream: Stream, p: dict[str, DevicePtr]) -> None:
        if not held or held[0][0] is not backend:
            held[:] = [(backend, KernelCache(backend))]
        kc = held[0][1]
        for out in outs:
            matmul_decode.decode_gemm(kc, stream, p["x"], p["w"], p[out], m, n, k, f32,
                                      split=split, wide=groups == 2, swiglu=swiglu, tma=True,
                                      ticket=out != name + CLUSTER)

    def oracle(x: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        y = linear_oracle(x)["y"]
        if swiglu:
            y = swiglu_oracle(f32_to_bf16_bits(y.astype(np.float32)))
        return {out: y for out in outs}

    kind = f"swiglu m{m} i{n // 2}" if swiglu else f"m{m} n{n}"
    return KernelCase(f"gemm_decode_tma ticket{split} {'wide ' if wide else ''}{kind} k{k}"
                      f"{' f32' if f32 else ''}",
                      "gemm_decode_tma", inputs, {out: spec for out in outs}, run, oracle,
                      reference_abs_tol=TENSOR_CORE_K_TOL * k, graph=True,
                      same_bits=tuple((name, out) for out in outs[1:]))


@kernel_cases("gemm_decode_tma")
def gemm_decode_ticket_cases(rng: np.random.Generator) -> list[KernelCase]:
    return [gemm_decode_ticket_case(rng, *shape) for shape in GEMM_DECODE_TICKET_SHAPES]
