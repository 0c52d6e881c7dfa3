"""Launch builders for a projection's bias (bias_add.cu): x [rows, n] += bias [n] in place, or
added to a projection's float32 sums with one rounding (`bias_add_f32`)."""

from __future__ import annotations

from ..gpu import DevicePtr, Stream
from ..kernel_abi import BIAS_ADD, BIAS_ADD_F32
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


def bias_add_f32(kc: KernelCache, stream: Stream, x: DevicePtr, bias: DevicePtr,
                 out: DevicePtr, rows: int, n: int) -> None:
    """out [rows, n] (bf16) = bf16(x + bias) for x f32 [rows, n] (a projection's unrounded
    sums: matmul.linear_f32_unrounded) and bias bf16 [n], one rounding (transformers' bf16
    Linear with a bias)."""
    require_multiple("bias_add_f32", "n", n, 8)
    for name, ptr in (("x", x), ("bias", bias), ("out", out)):
        require_aligned("bias_add_f32", name, ptr, 16)
    if not rows:
        return
    grid, threads = row_vector_grid(rows, n, BIAS_ADD_MAX_THREADS)
    kc.get(BIAS_ADD_F32)(stream, grid, threads, 0, x, bias, out, rows, n)
