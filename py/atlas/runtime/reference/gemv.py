"""Reference for the decode GEMV kernels: y[m, n] = sum_k x[m, k] * w[n, k].

Specification: the exact sum of the bf16 products, rounded once to bf16 at the output. The
f32 variants (logits) store that same bf16-rounded value widened to float32, as a bf16
model's LM head does in transformers, so greedy ties break the same way; the unrounded f32
variant (a float32 router: GLM-4.5's) the sum rounded once to float32.

The reference accumulates in float64 (products of bf16 values are exact; the float64 sum is
within ~1e-13 of exact), so its output does not depend on how rows are batched: a row gives
the same bits whether it runs alone, in a GEMV or in a GEMM. The CUDA kernels accumulate in
float32 in their own order and agree to well under one bf16 ulp, not bit for bit. The same
function specifies the GEMM kernels.

The fused down projection (gemv_silu_*) is specified as what it replaces: silu_mul_bf16's
reference into a scratch buffer, then the GEMV above on that buffer. The batch-1 gate_up
product that ends with its SwiGLU (gemv_swiglu_bf16_single) is specified as its plain twin
into a scratch row [n], then silu_mul_bf16's reference into act [n / 2]: the CUDA kernel
gives the twin's bits (gemv_core.cuh StoreSwiglu). The o_proj GEMV with the attention
output gate on load (gemv_attn_gate_bf16_single) is attn_gate.py's sigmoid_gate_mul into a
scratch row, then the plain GEMV.
"""

from __future__ import annotations

import numpy as np

from ...core.numerics import bf16_bits_to_f32, f32_to_bf16_bits
from ..gpu import Dim3
from ..kernel_abi import (GEMV, GEMV_ATTN_GATE_SINGLE, GEMV_BIAS_SINGLE, GEMV_F32OUT,
                          GEMV_F32_UNROUNDED, GEMV_GEGLU_SINGLE, GEMV_LEAN_SINGLE, GEMV_RING,
                          GEMV_RING_F32OUT,
                          GEMV_RING_SILU, GEMV_SILU, GEMV_SILU_SINGLE, GEMV_SINGLE,
                          GEMV_SINGLE_F32OUT, GEMV_SWIGLU_SINGLE, GEMV_SWIGLU_X8_SINGLE,
                          GEMV_SWIGLU_X8N_SINGLE, GEMV_X8_SINGLE)
from . import HostMemory, WithScratch, reference, widened_f64
from .attn_gate import sigmoid_gate_mul_bf16
from .silu_mul import geglu_tanh_rows, silu_mul_bf16, swiglu_rows


def product_bits(mem: HostMemory, x_bits: np.ndarray, w: int, n: int, k: int) -> np.ndarray:
    """bf16 bits of x @ w.T, x bf16 bits [m, k] (host), w [n, k] bf16 in `mem`; flat."""
    xf = bf16_bits_to_f32(x_bits.reshape(-1, k)).astype(np.float64)
    wf = widened_f64(mem, w, n * k).reshape(n, k)
    return f32_to_bf16_bits((xf @ wf.T).astype(np.float32)).reshape(-1)


def linear_bf16(mem: HostMemory, x: int, w: int, y: int, m: int, n: int, k: int,
                out_f32: bool) -> None:
    """y = x @ w.T with x [m, k], w [n, k] bf16; y [m, n] bf16 or f32."""
    bits = product_bits(mem, mem.view(x, np.uint16, m * k), w, n, k)
    if out_f32:
        mem.view(y, np.float32, m * n)[:] = bf16_bits_to_f32(bits)
    else:
        mem.view(y, np.uint16, m * n)[:] = bits


@reference(GEMV)
@reference(GEMV_SINGLE)
@reference(GEMV_LEAN_SINGLE)
@reference(GEMV_X8_SINGLE)  # 8-row blocks: the same sums
def gemv_bf16(mem: HostMemory, grid: Dim3, block: Dim3, x: int, w: int, y: int, m: int,
              n: int, k: int) -> None:
    linear_bf16(mem, x, w, y, m, n, k, out_f32=False)


@reference(GEMV_BIAS_SINGLE)
def gemv_bias_bf16_single(mem: HostMemory, grid: Dim3, block: Dim3, x: int, w: int, y: int,
                          m: int, n: int, k: int, bias: int) -> None:
    """GEMV_SINGLE's bf16 product, then the bias added in float32 and rounded again."""
    bits = product_bits(mem, mem.view(x, np.uint16, m * k), w, n, k)
    b = bf16_bits_to_f32(mem.view(bias, np.uint16, n))
    mem.view(y, np.uint16, m * n)[:] = f32_to_bf16_bits(
        bf16_bits_to_f32(bits).reshape(m, n) + b).reshape(-1)


@reference(GEMV_F32OUT)
@reference(GEMV_SINGLE_F32OUT)
def gemv_bf16_f32(mem: HostMemory, grid: Dim3, block: Dim3, x: int, w: int, y: int, m: int,
                  n: int, k: int) -> None:
    linear_bf16(mem, x, w, y, m, n, k, out_f32=True)


def linear_f32_unrounded(mem: HostMemory, x: int, w: int, y: int, m: int, n: int, k: int
                         ) -> None:
    """y f32 [m, n] = x @ w.T (bf16 x [m, k], w [n, k]), the sums rounded to float32 only."""
    xf = widened_f64(mem, x, m * k).reshape(m, k)
    wf = widened_f64(mem, w, n * k).reshape(n, k)
    mem.view(y, np.float32, m * n)[:] = (xf @ wf.T).astype(np.float32).reshape(-1)


@reference(GEMV_F32_UNROUNDED)
def gemv_bf16_f32_unrounded(mem: HostMemory, grid: Dim3, block: Dim3, x: int, w: int, y: int,
                            m: int, n: int, k: int) -> None:
    linear_f32_unrounded(mem, x, w, y, m, n, k)


@reference(GEMV_SILU)
@reference(GEMV_SILU_SINGLE)
def gemv_silu_bf16(mem: HostMemory, grid: Dim3, block: Dim3, gate_up: int, w: int, y: int,
                   m: int, n: int, k: int) -> None:
    chained = WithScratch(mem, m * k * 2)
    silu_mul_bf16(chained, grid, block, gate_up, WithScratch.ADDRESS, m, k)
    linear_bf16(chained, WithScratch.ADDRESS, w, y, m, n, k, out_f32=False)


# the ring entry points (gemv_ring.cuh): the same products; `stages` is launch geometry
@reference(GEMV_RING)
def gemv_ring_bf16(mem: HostMemory, grid: Dim3, block: Dim3, x: int, w: int, y: int, m: int,
                   n: int, k: int, stages: int) -> None:
    gemv_bf16(mem, grid, block, x, w, y, m, n, k)


@reference(GEMV_RING_F32OUT)
def gemv_ring_bf16_f32(mem: HostMemory, grid: Dim3, block: Dim3, x: int, w: int, y: int,
                       m: int, n: int, k: int, stages: int) -> None:
    gemv_bf16_f32(mem, grid, block, x, w, y, m, n, k)


@reference(GEMV_RING_SILU)
def gemv_ring_silu_bf16(mem: HostMemory, grid: Dim3, block: Dim3, gate_up: int, w: int,
                        y: int, m: int, n: int, k: int, stages: int) -> None:
    gemv_silu_bf16(mem, grid, block, gate_up, w, y, m, n, k)


def swiglu_product(mem: HostMemory, x_bits: np.ndarray, w: int, act: int, n: int,
                   k: int, rows=swiglu_rows) -> None:
    """act [n / 2] = silu_mul (`rows`: or geglu_tanh_rows) of the bf16 product x @ w.T [n]
    (w a [gate | up] weight)."""
    if n % 2:
        raise ValueError(f"a [gate | up] product needs an even n, got {n}")
    mem.view(act, np.uint16, n // 2)[:] = rows(product_bits(mem, x_bits, w, n, k),
                                               n // 2).reshape(-1)


@reference(GEMV_SWIGLU_SINGLE)
@reference(GEMV_SWIGLU_X8_SINGLE)
@reference(GEMV_SWIGLU_X8N_SINGLE)
def gemv_swiglu_bf16_single(mem: HostMemory, grid: Dim3, block: Dim3, x: int, w: int,
                            act: int, m: int, n: int, k: int) -> None:
    swiglu_product(mem, mem.view(x, np.uint16, k), w, act, n, k)


@reference(GEMV_GEGLU_SINGLE)
def gemv_geglu_bf16_single(mem: HostMemory, grid: Dim3, block: Dim3, x: int, w: int, act: int,
                           m: int, n: int, k: int) -> None:
    swiglu_product(mem, mem.view(x, np.uint16, k), w, act, n, k, geglu_tanh_rows)


def gated_row(mem: HostMemory, x: int, gate: int, k: int, head_dim: int,
              head_pitch: int) -> np.ndarray:
    """bf16 bits [k] of sigmoid_gate_mul_bf16 over one row of k = heads * head_dim."""
    gated = WithScratch(mem, k * 2)
    sigmoid_gate_mul_bf16(gated, (1, 1, 1), (1, 1, 1), x, gate, WithScratch.ADDRESS, 1,
                          k // head_dim, head_dim, 0, head_pitch)
    return gated.view(WithScratch.ADDRESS, np.uint16, k).copy()


@reference(GEMV_ATTN_GATE_SINGLE)
def gemv_attn_gate_bf16_single(mem: HostMemory, grid: Dim3, block: Dim3, x: int, gate: int,
                               w: int, y: int, n: int, k: int, head_dim: int,
                               head_pitch: int) -> None:
    x_bits = gated_row(mem, x, gate, k, head_dim, head_pitch)
    mem.view(y, np.uint16, n)[:] = product_bits(mem, x_bits, w, n, k)

