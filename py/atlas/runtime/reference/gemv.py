"""Reference for the decode GEMV kernels: y[m, n] = sum_k x[m, k] * w[n, k].

Specification: bf16 inputs widened exactly to float32, products accumulated in float32,
one rounding at the output (round-to-nearest-even to bf16, or none for the f32 variant).
The CUDA kernel sums in a different order, so the two agree to float32 accumulation error
(far below one bf16 ulp), not bit for bit. The same function specifies the GEMM kernels.
"""

from __future__ import annotations

import numpy as np

from ...core.numerics import bf16_bits_to_f32, f32_to_bf16_bits
from ..gpu import Dim3
from ..kernel_abi import GEMV, GEMV_F32OUT, GEMV_SINGLE, GEMV_SINGLE_F32OUT
from . import HostMemory, reference


def linear_bf16(mem: HostMemory, x: int, w: int, y: int, m: int, n: int, k: int,
                out_f32: bool) -> None:
    """y = x @ w.T with x [m, k], w [n, k] bf16; y [m, n] bf16 or f32."""
    xf = bf16_bits_to_f32(mem.view(x, np.uint16, m * k)).reshape(m, k)
    wf = bf16_bits_to_f32(mem.view(w, np.uint16, n * k)).reshape(n, k)
    acc = np.matmul(xf, wf.T, dtype=np.float32)
    if out_f32:
        mem.view(y, np.float32, m * n)[:] = acc.reshape(-1)
    else:
        mem.view(y, np.uint16, m * n)[:] = f32_to_bf16_bits(acc).reshape(-1)


@reference(GEMV)
@reference(GEMV_SINGLE)
def gemv_bf16(mem: HostMemory, grid: Dim3, block: Dim3, x: int, w: int, y: int, m: int,
              n: int, k: int) -> None:
    linear_bf16(mem, x, w, y, m, n, k, out_f32=False)


@reference(GEMV_F32OUT)
@reference(GEMV_SINGLE_F32OUT)
def gemv_bf16_f32(mem: HostMemory, grid: Dim3, block: Dim3, x: int, w: int, y: int, m: int,
                  n: int, k: int) -> None:
    linear_bf16(mem, x, w, y, m, n, k, out_f32=True)
