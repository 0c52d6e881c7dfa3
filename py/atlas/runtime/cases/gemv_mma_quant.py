"""Check cases for the quantized decode GEMV on tensor cores (gemv_mma_quant.cu): both
formats, every B-tile count (m = 1, 8 on the small entry points; 9..64 on the full ones),
the three FP8 scale layouts, Qwen3-8B projection widths and a non-8B shape (k = 5120,
n = 25600), ragged N (rows past n), K splitting unevenly over the warps (steps not a
multiple of 8, a warp with no steps), and the down projection (silu_mul + the GEMV)."""

from __future__ import annotations

import numpy as np

from ..kernel_check import KernelCase, kernel_cases
from .gemv_fp8 import fp8_linear_case
from .gemv_nvfp4 import nvfp4_linear_case

#: (layout, m, n, k)
FP8_MMA_SHAPES = [("block", 1, 6144, 4096), ("block", 1, 4096, 12288), ("block", 1, 25600, 5120),
                  ("block", 8, 1001, 1024), ("channel", 3, 259, 2048), ("tensor", 5, 33, 64),
                  ("block", 9, 4096, 4096), ("block", 32, 515, 1536), ("channel", 64, 300, 448),
                  ("block", 17, 130, 8192)]
#: (m, n, k, parts)
NVFP4_MMA_SHAPES = [(1, 6144, 4096, 3), (1, 4096, 12288, 1), (1, 25600, 5120, 2),
                    (8, 1001, 1024, 1), (2, 259, 2048, 2), (7, 33, 64, 1), (16, 4096, 4096, 1),
                    (33, 515, 1536, 3), (64, 300, 448, 1), (24, 130, 8192, 2)]


def tensor_core_cases(rng: np.random.Generator, fp8_shapes: list[tuple[str, int, int, int]],
                      nvfp4_shapes: list[tuple[int, int, int, int]], nvfp4_silu_m: int,
                      direct: bool) -> list[KernelCase]:
    """Both formats' linear cases over the shape tables, then a down projection of each
    (silu_mul + the GEMV), forced onto the ring kernel or (`direct`) its register-fed twin."""
    route = {"direct": True} if direct else {"mma": True}
    cases = [fp8_linear_case(rng, *shape, **route) for shape in fp8_shapes]
    cases += [nvfp4_linear_case(rng, m, n, k, parts=parts, **route)
              for m, n, k, parts in nvfp4_shapes]
    cases += [fp8_linear_case(rng, "block", 1, 4096, 12288, silu=True, **route),
              nvfp4_linear_case(rng, nvfp4_silu_m, 512, 3072, silu=True, **route)]
    return cases


@kernel_cases("gemv_mma_quant")
def gemv_mma_quant_cases(rng: np.random.Generator) -> list[KernelCase]:
    # f32 logits (a quantized LM head) past 8 rows: one 64-row pass, and two (m = 70)
    return tensor_core_cases(rng, FP8_MMA_SHAPES, NVFP4_MMA_SHAPES, 12, direct=False) + [
        fp8_linear_case(rng, "block", 9, 1000, 512, mma=True, logits=True),
        fp8_linear_case(rng, "block", 70, 300, 1024, mma=True, logits=True),
        nvfp4_linear_case(rng, 33, 1000, 512, mma=True, logits=True),
        nvfp4_linear_case(rng, 70, 260, 1024, parts=2, mma=True, logits=True)]
