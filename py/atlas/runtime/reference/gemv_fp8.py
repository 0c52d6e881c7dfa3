"""Reference for the FP8-weight GEMV kernels (kernels/hopper/common/gemv_fp8.cu).

`gemv_mma_fp8_bf16[_small]` (gemv_mma_quant.cu, tensor cores, 1..64 rows) and
`gemv_qd_fp8_bf16` (gemv_quant_direct.cu, tensor cores, 1..8 rows) share this
specification; their f32 accumulation is the tensor cores' (cases/gemv_mma_quant.py states
the tolerance). `gemv_fp8_h2_*` (one row, f16 products summed per 16-value chunk, then f32)
is emulated (`h2_product`, reference/gemv_h2.py: its f16 roundings and range guard), so the
host checks see what its f16 arithmetic does to large and tiny x.

Specification: y = bf16(sum_k x[m, k] * e4m3(q[n, k]) * s(n, k)), the exact sum rounded once,
where s is the scale index map of `atlas.core.quant.Fp8ScaleMap`. The CUDA kernel accumulates
in float32 and scales each 16-value chunk's partial sum, agreeing to well under a bf16 ulp.
`dequant_fp8_bf16` is bf16(float32(e4m3(q) * s)): the f32 product rounded, then bf16-rounded,
as the kernel computes it.
"""

from __future__ import annotations

import numpy as np

from ...core.numerics import bf16_bits_to_f32, f32_to_bf16_bits, fp8_e4m3_to_f32
from ...core.quant import Fp8ScaleMap
from .. import kernel_abi
from ..gpu import Dim3, KernelSig
from ..kernel_abi import (DEQUANT_FP8, GEMV_FP8, PDL_FENCE, GEMV_FP8_CVT_F32_SINGLE,
                          GEMV_FP8_CVT_SINGLE, GEMV_FP8_CVT_SWIGLU_SINGLE,
                          GEMV_FP8_CVT_SWIGLU_X8_SINGLE, GEMV_FP8_CVT_X8_SINGLE, GEMV_FP8_H2,
                          GEMV_FP8_H2_F32, GEMV_FP8_H2_SWIGLU, GEMV_FP8_SINGLE,
                          GEMV_MMA_FP8, GEMV_MMA_FP8_F32, GEMV_MMA_FP8_SMALL, GEMV_QD_FP8,
                          GEMV_QD_FP8_F32, GEMV_QD_FP8_N1, GEMV_QD_FP8_N1_F32,
                          GEMV_QD_FP8_N1_SWIGLU, GEMV_QD_FP8_N2, GEMV_QD_FP8_N2_F32,
                          GEMV_QD_FP8_N2_SWIGLU, GEMV_QD_FP8_PIPE, GEMV_QD_FP8_PIPE_F32,
                          GEMV_QD_FP8_PIPE_SWIGLU, GEMV_QD_FP8_SWIGLU, GEMV_QS_FP8,
                          GEMV_QS_FP8_F32, GEMV_QS_FP8_SWIGLU, GEMV_SILU_FP8, GEMV_SILU_FP8_SINGLE)
from . import HostMemory, ReferenceFn, reference
from .gemv_h2 import h2_emulate
from .silu_mul import swiglu_rows


def _scale_map(n: int, k: int, row_shift: int, row_stride: int, col_shift: int,
               col_stride: int) -> tuple[Fp8ScaleMap, int]:
    """The map and the number of scale elements it reads."""
    smap = Fp8ScaleMap(row_shift, row_stride, col_shift, col_stride, ())
    last = ((n - 1) >> row_shift) * row_stride + ((k - 1) >> col_shift) * col_stride
    return smap, last + 1


def _weights_f64(mem: HostMemory, w: int, scale: int, n: int, k: int,
                 shifts: tuple[int, int, int, int]) -> np.ndarray:
    smap, count = _scale_map(n, k, *shifts)
    codes = mem.view(w, np.uint8, n * k).reshape(n, k)
    s = mem.view(scale, np.float32, count)
    return fp8_e4m3_to_f32(codes).astype(np.float64) * smap.expand(s, n, k).astype(np.float64)


def _product_bits(mem: HostMemory, xf: np.ndarray, w: int, scale: int, n: int, k: int,
                  shifts: tuple[int, int, int, int]) -> np.ndarray:
    """bf16 bits [m, n] of x @ dequant(w).T, the exact sum rounded once."""
    return f32_to_bf16_bits((xf @ _weights_f64(mem, w, scale, n, k, shifts).T).astype(np.float32))


def _linear(mem: HostMemory, xf: np.ndarray, w: int, scale: int, y: int, m: int, n: int,
            k: int, shifts: tuple[int, int, int, int]) -> None:
    mem.view(y, np.uint16, m * n)[:] = _product_bits(mem, xf, w, scale, n, k, shifts).reshape(-1)


@reference(GEMV_FP8)
@reference(GEMV_FP8_SINGLE)
@reference(GEMV_FP8_CVT_SINGLE)  # ... decoded by the hardware convert (exact either way)
@reference(GEMV_FP8_CVT_X8_SINGLE)  # ... in 8-row blocks
@reference(GEMV_MMA_FP8)  # gemv_mma_quant.cu: the same product for 1..64 rows
@reference(GEMV_MMA_FP8_SMALL)
@reference(GEMV_QD_FP8)  # gemv_quant_direct.cu: the same product for 1..8 rows
@reference(GEMV_QS_FP8)  # ... staged through shared memory
@reference(GEMV_QD_FP8_N1)  # ... on the narrow pipelined loops
@reference(GEMV_QD_FP8_N2)
@reference(GEMV_QD_FP8_PIPE)  # ... on the other loop
def gemv_fp8_bf16(mem: HostMemory, grid: Dim3, block: Dim3, x: int, w: int, scale: int, y: int,
                  m: int, n: int, k: int, row_shift: int, row_stride: int, col_shift: int,
                  col_stride: int) -> None:
    xf = bf16_bits_to_f32(mem.view(x, np.uint16, m * k)).reshape(m, k).astype(np.float64)
    _linear(mem, xf, w, scale, y, m, n, k, (row_shift, row_stride, col_shift, col_stride))


@reference(GEMV_MMA_FP8_F32)
@reference(GEMV_FP8_CVT_F32_SINGLE)  # gemv_fp8.cu: one row on the convert GEMV
@reference(GEMV_QD_FP8_F32)
@reference(GEMV_QS_FP8_F32)
@reference(GEMV_QD_FP8_N1_F32)
@reference(GEMV_QD_FP8_N2_F32)
@reference(GEMV_QD_FP8_PIPE_F32)
def gemv_fp8_f32(mem: HostMemory, grid: Dim3, block: Dim3, x: int, w: int, scale: int, y: int,
                 m: int, n: int, k: int, row_shift: int, row_stride: int, col_shift: int,
                 col_stride: int) -> None:
    """y f32 [m, n]: the bf16-rounded product widened (a quantized LM head's logits)."""
    xf = bf16_bits_to_f32(mem.view(x, np.uint16, m * k)).reshape(m, k).astype(np.float64)
    bits = _product_bits(mem, xf, w, scale, n, k, (row_shift, row_stride, col_shift, col_stride))
    mem.view(y, np.float32, m * n)[:] = bf16_bits_to_f32(bits).reshape(-1)


@reference(GEMV_QD_FP8_SWIGLU)
@reference(GEMV_FP8_CVT_SWIGLU_SINGLE)  # gemv_fp8.cu: one row on the convert GEMV
@reference(GEMV_FP8_CVT_SWIGLU_X8_SINGLE)  # ... in 8-row blocks
@reference(GEMV_QS_FP8_SWIGLU)
@reference(GEMV_QD_FP8_N1_SWIGLU)
@reference(GEMV_QD_FP8_N2_SWIGLU)
@reference(GEMV_QD_FP8_PIPE_SWIGLU)
def gemv_fp8_swiglu_bf16(mem: HostMemory, grid: Dim3, block: Dim3, x: int, w: int, scale: int,
                         y: int, m: int, n: int, k: int, row_shift: int, row_stride: int,
                         col_shift: int, col_stride: int) -> None:
    """y [m, n / 2] = silu_mul of the [gate | up] product's bf16 output."""
    xf = bf16_bits_to_f32(mem.view(x, np.uint16, m * k)).reshape(m, k).astype(np.float64)
    gate_up = _product_bits(mem, xf, w, scale, n, k, (row_shift, row_stride, col_shift,
                                                      col_stride))
    mem.view(y, np.uint16, m * (n // 2))[:] = swiglu_rows(gate_up, n // 2).reshape(-1)


#: the half-precision-FMA entry points' range guard: |x| from 2^4 on is scaled (gemv_fp8.cu
#: Fp8H2: a lane's 8 products of |v| <= 448 stay below f16's 65,504 for |x| < 16)
H2_GUARD_EXP = 4
#: values a 16-byte chunk of codes (one scale a chunk)
H2_CHUNK = 16


def h2_product(x_bits: np.ndarray, codes: np.ndarray, scale: np.ndarray, smap: Fp8ScaleMap,
               threads: int, guard: bool = True) -> np.ndarray:
    """float32 [n] of gemv_fp8_h2 for one row x (bf16 bits [k]) on `threads` threads a block
    (reference/gemv_h2.h2_emulate): the f16 weights are the E4M3 values, each 16-value
    chunk's scale s(n, 16 c) of the map (flat float32 `scale`), no row factor."""
    n, k = codes.shape
    rows = (np.arange(n, dtype=np.int64) >> smap.row_shift) * smap.row_stride
    cols = ((np.arange(k // H2_CHUNK, dtype=np.int64) * H2_CHUNK) >> smap.col_shift) \
        * smap.col_stride
    chunk_scales = scale.reshape(-1)[rows[:, None] + cols[None, :]].astype(np.float64)

    def weights(r: slice) -> np.ndarray:
        return fp8_e4m3_to_f32(codes[r]).astype(np.float64)

    return h2_emulate(x_bits, weights, chunk_scales, np.ones(n), threads, H2_CHUNK,
                      H2_GUARD_EXP, guard)


def _h2_bits(mem: HostMemory, block: Dim3, x: int, w: int, scale: int, n: int, k: int,
             shifts: tuple[int, int, int, int]) -> np.ndarray:
    """bf16 bits [n] of gemv_fp8_h2's product (h2_product) for the one row at x."""
    smap, count = _scale_map(n, k, *shifts)
    return f32_to_bf16_bits(h2_product(mem.view(x, np.uint16, k),
                                       mem.view(w, np.uint8, n * k).reshape(n, k),
                                       mem.view(scale, np.float32, count), smap, block[0]))


@reference(GEMV_FP8_H2)  # gemv_fp8.cu: one row on packed half-precision FMAs
def gemv_fp8_h2_bf16(mem: HostMemory, grid: Dim3, block: Dim3, x: int, w: int, scale: int,
                     y: int, m: int, n: int, k: int, row_shift: int, row_stride: int,
                     col_shift: int, col_stride: int) -> None:
    shifts = (row_shift, row_stride, col_shift, col_stride)
    mem.view(y, np.uint16, n)[:] = _h2_bits(mem, block, x, w, scale, n, k, shifts)


@reference(GEMV_FP8_H2_F32)
def gemv_fp8_h2_f32(mem: HostMemory, grid: Dim3, block: Dim3, x: int, w: int, scale: int,
                    y: int, m: int, n: int, k: int, row_shift: int, row_stride: int,
                    col_shift: int, col_stride: int) -> None:
    """y f32 [n]: the bf16-rounded product widened (a quantized LM head's logits)."""
    shifts = (row_shift, row_stride, col_shift, col_stride)
    bits = _h2_bits(mem, block, x, w, scale, n, k, shifts)
    mem.view(y, np.float32, n)[:] = bf16_bits_to_f32(bits)


@reference(GEMV_FP8_H2_SWIGLU)
def gemv_fp8_h2_swiglu_bf16(mem: HostMemory, grid: Dim3, block: Dim3, x: int, w: int,
                            scale: int, y: int, m: int, n: int, k: int, row_shift: int,
                            row_stride: int, col_shift: int, col_stride: int) -> None:
    """y [n / 2] = silu_mul of the [gate | up] product's bf16 output."""
    shifts = (row_shift, row_stride, col_shift, col_stride)
    gate_up = _h2_bits(mem, block, x, w, scale, n, k, shifts)
    mem.view(y, np.uint16, n // 2)[:] = swiglu_rows(gate_up[None, :], n // 2).reshape(-1)


@reference(GEMV_SILU_FP8)
@reference(GEMV_SILU_FP8_SINGLE)
def gemv_silu_fp8_bf16(mem: HostMemory, grid: Dim3, block: Dim3, gate_up: int, w: int,
                       scale: int, y: int, m: int, n: int, k: int, row_shift: int,
                       row_stride: int, col_shift: int, col_stride: int) -> None:
    act = swiglu_rows(mem.view(gate_up, np.uint16, m * 2 * k).reshape(m, 2 * k), k)
    xf = bf16_bits_to_f32(act).astype(np.float64)
    _linear(mem, xf, w, scale, y, m, n, k, (row_shift, row_stride, col_shift, col_stride))


@reference(DEQUANT_FP8)
def dequant_fp8_bf16(mem: HostMemory, grid: Dim3, block: Dim3, w: int, scale: int,
                     w_out: int, n: int, k: int, row_shift: int, row_stride: int,
                     col_shift: int, col_stride: int) -> None:
    smap, count = _scale_map(n, k, row_shift, row_stride, col_shift, col_stride)
    codes = mem.view(w, np.uint8, n * k).reshape(n, k)
    prod = fp8_e4m3_to_f32(codes) * smap.expand(mem.view(scale, np.float32, count), n, k)
    mem.view(w_out, np.uint16, n * k)[:] = f32_to_bf16_bits(prod.astype(np.float32)).reshape(-1)


# Only an ordering point on the device (stream order already holds on the host): no values.
@reference(PDL_FENCE)
def pdl_fence(mem: HostMemory, grid: Dim3, block: Dim3) -> None:
    return None


def _without(product: ReferenceFn, trailing: int) -> ReferenceFn:
    """`product` for an entry point that also takes `trailing` parameters last: its codes'
    tensor map (the device reads w through it; the host reads w itself) and, on the traced
    twins, the trace buffer (stamps of device time, which the host has none of)."""

    def run(mem: HostMemory, grid: Dim3, block: Dim3, *values: int) -> None:
        product(mem, grid, block, *values[:-trailing])

    return run


# gemm_decode_fp8.cu (1..8 rows on the FP8 tensor cores, ops/matmul_fp8_wgmma.py): every
# split's plain, logits and SwiGLU entry, and the traced twins of the plain one, compute the
# GEMVs' product (its k-tile partial sums on the tensor cores: cases/gemm_decode_fp8.py
# states the tolerance)
for _sig in [s for s in vars(kernel_abi).values()
             if isinstance(s, KernelSig) and s.module == "gemm_decode_fp8"]:
    _kind = _sig.func.removeprefix("gemm_decode_fp8_").partition("_split")[0]
    _traced = _kind == "trace_bf16"
    reference(_sig)(_without({"bf16": gemv_fp8_bf16, "trace_bf16": gemv_fp8_bf16,
                              "f32": gemv_fp8_f32, "swiglu_bf16": gemv_fp8_swiglu_bf16}[_kind],
                             2 if _traced else 1))
