"""Check cases for the tensor-core GEMM: masked M, N below a tile, K with a half tile."""

from __future__ import annotations

from functools import partial

import numpy as np

from ..kernel_check import KernelCase, kernel_cases
from ..ops import matmul
from .gemv import linear_case

#: (m, n, k, out_f32, skinny): skinny=None lets the dispatch rule choose
GEMM_SHAPES = [
    (17, 576, 192, False, None),
    (100, 256, 576, False, True),
    (130, 144, 208, False, False),
    (257, 384, 1024, True, False),
    (9, 160, 64, True, True),
    (20, 16, 16, False, False),
    (64, 96, 1536, False, None),
    (200, 48, 80, True, True),
]


@kernel_cases("gemm")
def gemm_cases(rng: np.random.Generator) -> list[KernelCase]:
    cases = []
    for m, n, k, f32, skinny in GEMM_SHAPES:
        tile = {None: "auto", True: "skinny", False: "128x128"}[skinny]
        launch = partial(matmul.gemm, skinny=skinny)
        cases.append(linear_case(rng, f"gemm {tile} m{m} n{n} k{k}{' f32' if f32 else ''}",
                                 "gemm", m, n, k, f32, launch))
    return cases
