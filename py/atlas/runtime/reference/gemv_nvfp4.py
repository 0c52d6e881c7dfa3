"""Reference for the NVFP4-weight GEMV kernels (kernels/hopper/common/gemv_nvfp4.cu).

`gemv_mma_nvfp4_bf16[_small]` (gemv_mma_quant.cu, tensor cores, 1..64 rows) and
`gemv_qd_nvfp4_bf16` (gemv_quant_direct.cu, tensor cores, 1..8 rows) and
`gemv_nvfp4_h2_*` (one row, f16 products summed per 16-value group, then f32) share this
specification; the last is emulated (`h2_product`, reference/gemv_h2.py: its f16 group sums
and range guard, the rest in float64), so the host checks see what its f16 arithmetic does
to large x.

Specification: y = bf16(sum_k x[m, k] * e2m1(q[n, k]) * e4m3(s[n, k / 16]) * g[n]), the exact
sum rounded once (`atlas.core.quant.dequantize_nvfp4`). The CUDA kernel accumulates in
float32, scales each 16-value group's partial sum by f32(e4m3(s) * g), and agrees to well
under a bf16 ulp. `dequant_nvfp4_bf16` is bf16(e2m1 * f32(e4m3(s) * g)), as the kernel
computes it (the product with an E2M1 value is exact in f32 before the bf16 rounding).
"""

from __future__ import annotations

import numpy as np

from ...core.numerics import (bf16_bits_to_f32, e2m1_to_f32, f32_to_bf16_bits,
                              fp8_e4m3_to_f32, unpack_e2m1)
from ...core.quant import NVFP4_GROUP, dequantize_nvfp4
from ..gpu import Dim3
from ..kernel_abi import (DEQUANT_NVFP4, GEMV_MMA_NVFP4, GEMV_MMA_NVFP4_F32, GEMV_MMA_NVFP4_SMALL,
                          GEMV_NVFP4, GEMV_NVFP4_H2, GEMV_NVFP4_H2_F32, GEMV_NVFP4_H2_SWIGLU,
                          GEMV_NVFP4_H2X8, GEMV_NVFP4_H2X8_F32, GEMV_NVFP4_H2X8_SWIGLU,
                          GEMV_NVFP4_SINGLE, GEMV_QD_NVFP4, GEMV_QD_NVFP4_F32,
                          GEMV_QD_NVFP4_LUT, GEMV_QD_NVFP4_LUT_F32, GEMV_QD_NVFP4_LUT_SWIGLU,
                          GEMV_QD_NVFP4_N1, GEMV_QD_NVFP4_N1_F32, GEMV_QD_NVFP4_N1_SWIGLU,
                          GEMV_QD_NVFP4_N2, GEMV_QD_NVFP4_N2_F32, GEMV_QD_NVFP4_N2_SWIGLU,
                          GEMV_QD_NVFP4_SWIGLU, GEMV_QD_NVFP4_TILE, GEMV_QD_NVFP4_TILE_F32,
                          GEMV_QD_NVFP4_TILE_SWIGLU, GEMV_QS_NVFP4, GEMV_QS_NVFP4_F32,
                          GEMV_QS_NVFP4_SWIGLU, GEMV_SILU_NVFP4, GEMV_SILU_NVFP4_SINGLE)
from . import HostMemory, reference
from .gemv_h2 import SPLIT_PAIRS, h2_emulate
from .silu_mul import swiglu_rows


def _operands(mem: HostMemory, w: int, scale: int, row_scale: int, n: int, k: int
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return (mem.view(w, np.uint8, n * k // 2).reshape(n, k // 2),
            mem.view(scale, np.uint8, n * k // NVFP4_GROUP).reshape(n, k // NVFP4_GROUP),
            mem.view(row_scale, np.float32, n))


def _product_bits(mem: HostMemory, xf: np.ndarray, w: int, scale: int, row_scale: int,
                  n: int, k: int) -> np.ndarray:
    """bf16 bits [m, n] of x @ dequant(w).T, the exact sum rounded once."""
    wf = dequantize_nvfp4(*_operands(mem, w, scale, row_scale, n, k))
    return f32_to_bf16_bits((xf @ wf.T).astype(np.float32))


def _linear(mem: HostMemory, xf: np.ndarray, w: int, scale: int, row_scale: int, y: int,
            m: int, n: int, k: int) -> None:
    bits = _product_bits(mem, xf, w, scale, row_scale, n, k)
    mem.view(y, np.uint16, m * n)[:] = bits.reshape(-1)


@reference(GEMV_NVFP4)
@reference(GEMV_NVFP4_SINGLE)
@reference(GEMV_MMA_NVFP4)  # gemv_mma_quant.cu: the same product for 1..64 rows
@reference(GEMV_MMA_NVFP4_SMALL)
@reference(GEMV_QD_NVFP4)  # gemv_quant_direct.cu: the same product for 1..8 rows
@reference(GEMV_QS_NVFP4)  # ... staged through shared memory
@reference(GEMV_QD_NVFP4_N1)  # ... on the narrow pipelined loops
@reference(GEMV_QD_NVFP4_N2)
@reference(GEMV_QD_NVFP4_TILE)  # ... on the other loop
@reference(GEMV_QD_NVFP4_LUT)  # ... on its byte-table decode
def gemv_nvfp4_bf16(mem: HostMemory, grid: Dim3, block: Dim3, x: int, w: int, scale: int,
                    row_scale: int, y: int, m: int, n: int, k: int) -> None:
    xf = bf16_bits_to_f32(mem.view(x, np.uint16, m * k)).reshape(m, k).astype(np.float64)
    _linear(mem, xf, w, scale, row_scale, y, m, n, k)


@reference(GEMV_MMA_NVFP4_F32)
@reference(GEMV_QD_NVFP4_F32)
@reference(GEMV_QS_NVFP4_F32)
@reference(GEMV_QD_NVFP4_N1_F32)
@reference(GEMV_QD_NVFP4_N2_F32)
@reference(GEMV_QD_NVFP4_TILE_F32)
@reference(GEMV_QD_NVFP4_LUT_F32)
def gemv_nvfp4_f32(mem: HostMemory, grid: Dim3, block: Dim3, x: int, w: int, scale: int,
                   row_scale: int, y: int, m: int, n: int, k: int) -> None:
    """y f32 [m, n]: the bf16-rounded product widened (a quantized LM head's logits)."""
    xf = bf16_bits_to_f32(mem.view(x, np.uint16, m * k)).reshape(m, k).astype(np.float64)
    bits = _product_bits(mem, xf, w, scale, row_scale, n, k)
    mem.view(y, np.float32, m * n)[:] = bf16_bits_to_f32(bits).reshape(-1)


@reference(GEMV_QD_NVFP4_SWIGLU)
@reference(GEMV_QS_NVFP4_SWIGLU)
@reference(GEMV_QD_NVFP4_N1_SWIGLU)
@reference(GEMV_QD_NVFP4_N2_SWIGLU)
@reference(GEMV_QD_NVFP4_TILE_SWIGLU)
@reference(GEMV_QD_NVFP4_LUT_SWIGLU)
def gemv_nvfp4_swiglu_bf16(mem: HostMemory, grid: Dim3, block: Dim3, x: int, w: int,
                           scale: int, row_scale: int, y: int, m: int, n: int, k: int) -> None:
    """y [m, n / 2] = silu_mul of the [gate | up] product's bf16 output."""
    xf = bf16_bits_to_f32(mem.view(x, np.uint16, m * k)).reshape(m, k).astype(np.float64)
    gate_up = _product_bits(mem, xf, w, scale, row_scale, n, k)
    mem.view(y, np.uint16, m * (n // 2))[:] = swiglu_rows(gate_up, n // 2).reshape(-1)


#: the NVFP4 entry points' range guard: |x| from 2^16 on is scaled (gemv_nvfp4.cu Nvfp4H2)
H2_GUARD_EXP = 16


def h2_product(x_bits: np.ndarray, packed: np.ndarray, s_codes: np.ndarray,
               row_scale: np.ndarray, threads: int, guard: bool = True) -> np.ndarray:
    """float32 [n] of gemv_nvfp4_h2 for one row x (bf16 bits [k]) on `threads` threads a
    block (reference/gemv_h2.h2_emulate, the split decode's pair order): the f16 weights are
    e2m1 x 2^-6, the group scales the E4M3 ones, the row's factor the float32 g[n] 2^6."""
    def weights(rows: slice) -> np.ndarray:
        return e2m1_to_f32(unpack_e2m1(packed[rows])).astype(np.float64) / 64.0

    g = (row_scale.astype(np.float32) * np.float32(64.0)).astype(np.float64)
    return h2_emulate(x_bits, weights, fp8_e4m3_to_f32(s_codes).astype(np.float64), g,
                      threads, 2 * NVFP4_GROUP, H2_GUARD_EXP, guard, SPLIT_PAIRS)


def _h2_bits(mem: HostMemory, block: Dim3, x: int, w: int, scale: int, row_scale: int,
             n: int, k: int) -> np.ndarray:
    """bf16 bits [n] of gemv_nvfp4_h2's product (h2_product) for the one row at x."""
    return f32_to_bf16_bits(h2_product(mem.view(x, np.uint16, k),
                                       *_operands(mem, w, scale, row_scale, n, k), block[0]))


@reference(GEMV_NVFP4_H2)  # gemv_nvfp4.cu: one row on packed half-precision FMAs
@reference(GEMV_NVFP4_H2X8)  # ... in 8-row blocks: the same products (block[0] threads)
def gemv_nvfp4_h2_bf16(mem: HostMemory, grid: Dim3, block: Dim3, x: int, w: int, scale: int,
                       row_scale: int, y: int, m: int, n: int, k: int) -> None:
    mem.view(y, np.uint16, n)[:] = _h2_bits(mem, block, x, w, scale, row_scale, n, k)


@reference(GEMV_NVFP4_H2_F32)
@reference(GEMV_NVFP4_H2X8_F32)
def gemv_nvfp4_h2_f32(mem: HostMemory, grid: Dim3, block: Dim3, x: int, w: int, scale: int,
                      row_scale: int, y: int, m: int, n: int, k: int) -> None:
    """y f32 [n]: the bf16-rounded product widened (a quantized LM head's logits)."""
    bits = _h2_bits(mem, block, x, w, scale, row_scale, n, k)
    mem.view(y, np.float32, n)[:] = bf16_bits_to_f32(bits)


@reference(GEMV_NVFP4_H2_SWIGLU)
@reference(GEMV_NVFP4_H2X8_SWIGLU)
def gemv_nvfp4_h2_swiglu_bf16(mem: HostMemory, grid: Dim3, block: Dim3, x: int, w: int,
                              scale: int, row_scale: int, y: int, m: int, n: int, k: int
                              ) -> None:
    """y [n / 2] = silu_mul of the [gate | up] product's bf16 output."""
    gate_up = _h2_bits(mem, block, x, w, scale, row_scale, n, k)
    mem.view(y, np.uint16, n // 2)[:] = swiglu_rows(gate_up[None, :], n // 2).reshape(-1)


@reference(GEMV_SILU_NVFP4)
@reference(GEMV_SILU_NVFP4_SINGLE)
def gemv_silu_nvfp4_bf16(mem: HostMemory, grid: Dim3, block: Dim3, gate_up: int, w: int,
                         scale: int, row_scale: int, y: int, m: int, n: int, k: int) -> None:
    act = swiglu_rows(mem.view(gate_up, np.uint16, m * 2 * k).reshape(m, 2 * k), k)
    _linear(mem, bf16_bits_to_f32(act).astype(np.float64), w, scale, row_scale, y, m, n, k)


@reference(DEQUANT_NVFP4)
def dequant_nvfp4_bf16(mem: HostMemory, grid: Dim3, block: Dim3, w: int, scale: int,
                       row_scale: int, w_out: int, n: int, k: int) -> None:
    packed, s_codes, g = _operands(mem, w, scale, row_scale, n, k)
    s = (fp8_e4m3_to_f32(s_codes) * g[:, None]).astype(np.float32)  # f32 product, rounded
    prod = e2m1_to_f32(unpack_e2m1(packed)) * np.repeat(s, NVFP4_GROUP, axis=1)
    mem.view(w_out, np.uint16, n * k)[:] = f32_to_bf16_bits(prod.astype(np.float32)).reshape(-1)
