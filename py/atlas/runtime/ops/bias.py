"""Launch builder for a projection's bias (bias_add.cu): x [rows, n] += bias [n] in place."""

from __future__ import annotations

from ..gpu import DevicePtr, Stream
from ..kernel_abi import BIAS_ADD
from . import KernelCache
from ._preconditions import require_aligned, require_multiple, row_vector_grid

BIAS_ADD_MAX_THREADS = 256


def bias_add(kc: KernelCache, stream: Stream, x: DevicePtr, bias: DevicePtr, rows: int,
             n: int) -> None:
    """x [rows, n] (bf16) += bias [n] (bf16), each element rounded to bf16 once."""
    require_multiple("bias_add", "n", n, 8)
    require_aligned("bias_add", "x", x, 16)
    require_aligned("bias_add", "bias", bias, 16)
    if not rows:
        return
    grid, threads = row_vector_grid(rows, n, BIAS_ADD_MAX_THREADS)
    kc.get(BIAS_ADD)(stream, grid, threads, 0, x, bias, rows, n)
