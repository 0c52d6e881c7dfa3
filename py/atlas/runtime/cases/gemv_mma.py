"""Check cases for the batched decode GEMV on tensor cores (module gemv_mma, hopper only).

Shapes chosen to catch fragment-layout bugs: every count of 8-row B tiles with a partial last
one (m = 9, 17, 33, 57) and full ones (16, 24, 64); N = 16 * odd (the block's second 16-row
tile partly or wholly past n) and N not a multiple of 16; K shorter than the eight warps'
k-steps, K ending inside a 32-wide k-step (k % 32 != 0), and the Qwen3 K values (1024 to
12288) with small N slices of the real projections, f32 out as the LM head. The last five
take the wide variant (64 weight rows per block, chosen only for n > 4224, so their inputs
are kept to K <= 3072 to keep drawing them fast): one to three A tiles past n in the last
block, a partial k-step, warps without k-steps, several laps of the 3-stage ring.
"""

from __future__ import annotations

import numpy as np

from ..kernel_check import KernelCase, kernel_cases
from ..ops import matmul_batched
from .gemv import linear_case

#: (m, n, k, out_f32)
GEMV_MMA_SHAPES = [
    (9, 48, 64, False),        # two k-steps: six of the eight warps own none
    (16, 80, 4096, False),     # Qwen3-8B hidden, n = 16 * 5
    (17, 208, 200, True),      # k = 25 chunks: the last k-step is a quarter full
    (33, 528, 4096, True),     # LM head slice (f32 logits), n = 16 * 33
    (64, 336, 4096, False),    # the largest batch, n = 16 * 21
    (64, 112, 12288, False),   # Qwen3-8B down_proj K
    (24, 1040, 1024, False),   # Qwen3-0.6B hidden, n = 16 * 65
    (40, 144, 3072, False),    # Qwen3-0.6B down_proj K
    (57, 33, 2048, True),      # n not a multiple of 16, Qwen3-0.6B o_proj K
    (1, 176, 512, False),      # one row: a single B tile, seven rows re-reading row 0
    (8, 16, 16, False),        # smallest: one k-step, half its chunks past k
    # wide blocks (matmul_batched.rows_per_block == 64)
    (20, 4300, 200, False),    # three B tiles, the last k-step a quarter full, n % 64 = 12
    (33, 4250, 1024, True),    # f32 logits, one row in the last B tile, n % 64 = 26
    (40, 4233, 64, False),     # two k-steps: six of the eight warps own none, n % 64 = 9
    (48, 4240, 1024, False),   # n % 64 = 16: the last block's tiles 1..3 wholly past n
    (64, 4300, 3072, False),   # the largest batch; 12 k-steps per warp: 4 laps of its ring
]


def gemv_mma_case(rng: np.random.Generator, m: int, n: int, k: int, f32: bool) -> KernelCase:
    """One y = x @ w.T case through matmul_batched.batched_gemv."""
    return linear_case(rng, f"gemv_mma m{m} n{n} k{k}{' f32' if f32 else ''}", "gemv_mma", m, n,
                       k, f32, matmul_batched.batched_gemv, tensor_core=True)


@kernel_cases("gemv_mma")
def gemv_mma_cases(rng: np.random.Generator) -> list[KernelCase]:
    return [gemv_mma_case(rng, *shape) for shape in GEMV_MMA_SHAPES]
