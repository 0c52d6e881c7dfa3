"""Check cases for the register-fed quantized decode GEMV (gemv_quant_direct.cu): both
formats at every batch size 1..8, the three FP8 scale layouts, the Qwen3-8B projections and
other published widths (hidden 2,048 / 5,120 / 8,192), ragged N (a last block with rows past
n), K splitting unevenly over the 8 warps (a warp with no steps, step counts not a multiple
of the 4-step load batch) and the down projection (silu_mul, then this GEMV)."""

from __future__ import annotations

import numpy as np

from ..kernel_check import KernelCase, kernel_cases
from .gemv_fp8 import fp8_linear_case
from .gemv_nvfp4 import nvfp4_linear_case

#: (layout, m, n, k)
FP8_DIRECT_SHAPES = [("block", 1, 6144, 4096), ("block", 1, 4096, 4096),
                     ("block", 1, 24576, 4096), ("block", 1, 4096, 12288),
                     ("block", 1, 2560, 2048), ("block", 2, 8192, 8192),
                     ("block", 3, 1001, 5120), ("channel", 4, 259, 2048),
                     ("tensor", 5, 33, 64), ("block", 6, 130, 1344),
                     ("channel", 7, 300, 448), ("block", 8, 515, 1536)]
#: (m, n, k, parts)
NVFP4_DIRECT_SHAPES = [(1, 6144, 4096, 3), (1, 4096, 4096, 1), (1, 24576, 4096, 2),
                       (1, 4096, 12288, 1), (1, 2560, 2048, 1), (2, 8192, 8192, 1),
                       (3, 1001, 5120, 3), (4, 259, 2048, 2), (5, 33, 128, 1),
                       (6, 130, 1408, 2), (7, 300, 384, 1), (8, 515, 1536, 3)]


@kernel_cases("gemv_quant_direct")
def gemv_quant_direct_cases(rng: np.random.Generator) -> list[KernelCase]:
    cases = [fp8_linear_case(rng, *shape, direct=True) for shape in FP8_DIRECT_SHAPES]
    cases += [nvfp4_linear_case(rng, m, n, k, parts=parts, direct=True)
              for m, n, k, parts in NVFP4_DIRECT_SHAPES]
    cases += [fp8_linear_case(rng, "block", 1, 4096, 12288, silu=True, direct=True),
              nvfp4_linear_case(rng, 4, 512, 3072, silu=True, direct=True)]
    return cases
