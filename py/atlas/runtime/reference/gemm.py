"""Reference for the tensor-core GEMM kernels: the same specification as the GEMV.

Every variant (mma.sync 128x128 and skinny 64x32, wgmma 128x256 fed by cp.async or TMA, the
decode wgmma GEMM with or without its cluster split of K) computes y = x @ w.T with
float32 accumulation and one rounding at the output (to bf16; for gemm_bf16_f32_unrounded to
float32, as the GEMV's twin); tiling changes only the summation order.
The decode GEMM's gated entries (gate_up ending with its activation) are specified as what
they replace: the product into a scratch [gate | up] row, then silu_mul_bf16 (the SwiGLU
entries) or gelu_tanh_mul_bf16 (the GeGLU ones, Gemma 3) (`gated_bf16`).
"""

from __future__ import annotations

from ..gpu import Dim3
from ..kernel_abi import (GEMM, GEMM_F32OUT, GEMM_F32_UNROUNDED, GEMM_SKINNY,
                          GEMM_SKINNY_F32OUT, GEMM_SM90, GEMM_SM90_F32OUT, GEMM_SM90_TMA,
                          GEMM_SM90_TMA_CLUSTER2, GEMM_SM90_TMA_CLUSTER2_F32OUT,
                          GEMM_SM90_TMA_F32OUT)
from ..kernel_abi import (GEMM_DECODE_SM90, GEMM_DECODE_SM90_F32OUT,
                          GEMM_DECODE_SM90_F32OUT_SPLIT2, GEMM_DECODE_SM90_F32OUT_SPLIT4,
                          GEMM_DECODE_SM90_F32OUT_SPLIT8, GEMM_DECODE_SM90_SPLIT2,
                          GEMM_DECODE_SM90_SPLIT4, GEMM_DECODE_SM90_SPLIT8,
                          GEMM_DECODE_SM90_SWIGLU, GEMM_DECODE_SM90_SWIGLU_SPLIT2,
                          GEMM_DECODE_SM90_SWIGLU_SPLIT4, GEMM_DECODE_SM90_SWIGLU_SPLIT8,
                          GEMV_MMA, GEMV_MMA_F32OUT)
from ..kernel_abi import (GEMM_DECODE_TMA, GEMM_DECODE_TMA_F32OUT,
                          GEMM_DECODE_TMA_F32OUT_SPLIT2, GEMM_DECODE_TMA_F32OUT_SPLIT3,
                          GEMM_DECODE_TMA_F32OUT_SPLIT4, GEMM_DECODE_TMA_F32OUT_SPLIT5,
                          GEMM_DECODE_TMA_F32OUT_SPLIT6, GEMM_DECODE_TMA_F32OUT_SPLIT7,
                          GEMM_DECODE_TMA_F32OUT_SPLIT8, GEMM_DECODE_TMA_SPLIT2,
                          GEMM_DECODE_TMA_SPLIT3, GEMM_DECODE_TMA_SPLIT4, GEMM_DECODE_TMA_SPLIT5,
                          GEMM_DECODE_TMA_SPLIT6, GEMM_DECODE_TMA_SPLIT7, GEMM_DECODE_TMA_SPLIT8,
                          GEMM_DECODE_TMA_SWIGLU, GEMM_DECODE_TMA_SWIGLU_SPLIT2,
                          GEMM_DECODE_TMA_SWIGLU_SPLIT3, GEMM_DECODE_TMA_SWIGLU_SPLIT4,
                          GEMM_DECODE_TMA_SWIGLU_SPLIT5, GEMM_DECODE_TMA_SWIGLU_SPLIT6,
                          GEMM_DECODE_TMA_SWIGLU_SPLIT7, GEMM_DECODE_TMA_SWIGLU_SPLIT8)
from ..kernel_abi import (GEMM_DECODE_TMA_F32OUT_PERSISTENT,
                          GEMM_DECODE_TMA_F32OUT_PERSISTENT_SPLIT2, GEMM_DECODE_TMA_PERSISTENT,
                          GEMM_DECODE_TMA_PERSISTENT_SPLIT2, GEMM_DECODE_TMA_SWIGLU_PERSISTENT,
                          GEMM_DECODE_TMA_SWIGLU_PERSISTENT_SPLIT2)
from ..kernel_abi import (GEMM_DECODE_SM90_GEGLU, GEMM_DECODE_SM90_GEGLU_SPLIT2,
                          GEMM_DECODE_SM90_GEGLU_SPLIT4, GEMM_DECODE_SM90_GEGLU_SPLIT8,
                          GEMM_DECODE_TMA_GEGLU, GEMM_DECODE_TMA_GEGLU_PERSISTENT,
                          GEMM_DECODE_TMA_GEGLU_PERSISTENT_SPLIT2, GEMM_DECODE_TMA_GEGLU_SPLIT2,
                          GEMM_DECODE_TMA_GEGLU_SPLIT3, GEMM_DECODE_TMA_GEGLU_SPLIT4,
                          GEMM_DECODE_TMA_GEGLU_SPLIT5, GEMM_DECODE_TMA_GEGLU_SPLIT6,
                          GEMM_DECODE_TMA_GEGLU_SPLIT7, GEMM_DECODE_TMA_GEGLU_SPLIT8)
from ..kernel_abi import GEMM_SM90_TMA_GEGLU, GEMM_SM90_TMA_SWIGLU
from ..kernel_abi import (GEMM_DECODE_TMA_F32OUT_STREAMK, GEMM_DECODE_TMA_GEGLU_STREAMK,
                          GEMM_DECODE_TMA_STREAMK, GEMM_DECODE_TMA_SWIGLU_STREAMK)
from . import HostMemory, ReferenceFn, WithScratch, reference
from .gemv import linear_bf16, linear_f32_unrounded
from .silu_mul import gelu_tanh_mul_bf16, silu_mul_bf16


def gated_bf16(mem: HostMemory, grid: Dim3, block: Dim3, x: int, w: int, act: int, m: int,
               n: int, k: int, activation: ReferenceFn = silu_mul_bf16) -> None:
    """act [m, n / 2] = `activation` (the silu_mul_bf16 or gelu_tanh_mul_bf16 reference) of
    the bf16 product x @ w.T = [gate | up] [m, n]."""
    chained = WithScratch(mem, m * n * 2)
    linear_bf16(chained, x, w, WithScratch.ADDRESS, m, n, k, out_f32=False)
    activation(chained, grid, block, WithScratch.ADDRESS, act, m, n // 2)


@reference(GEMM)
@reference(GEMM_SKINNY)
@reference(GEMM_SM90)
@reference(GEMV_MMA)
def gemm_bf16(mem: HostMemory, grid: Dim3, block: Dim3, a: int, w: int, c: int, m: int,
              n: int, k: int) -> None:
    linear_bf16(mem, a, w, c, m, n, k, out_f32=False)


@reference(GEMM_F32OUT)
@reference(GEMM_SKINNY_F32OUT)
@reference(GEMM_SM90_F32OUT)
@reference(GEMV_MMA_F32OUT)
def gemm_bf16_f32(mem: HostMemory, grid: Dim3, block: Dim3, a: int, w: int, c: int, m: int,
                  n: int, k: int) -> None:
    linear_bf16(mem, a, w, c, m, n, k, out_f32=True)


@reference(GEMM_F32_UNROUNDED)
def gemm_bf16_f32_unrounded(mem: HostMemory, grid: Dim3, block: Dim3, a: int, w: int, c: int,
                            m: int, n: int, k: int) -> None:
    linear_f32_unrounded(mem, a, w, c, m, n, k)


# The TMA prefill GEMM: gemm_sm90's products; its tensor maps only say how the kernel reads
# a and w, which the reference reads through their pointers.
@reference(GEMM_SM90_TMA)
@reference(GEMM_SM90_TMA_CLUSTER2)
def gemm_tma_bf16(mem: HostMemory, grid: Dim3, block: Dim3, a: int, w: int, c: int, m: int,
                  n: int, k: int, amap: bytes, wmap: bytes) -> None:
    linear_bf16(mem, a, w, c, m, n, k, out_f32=False)


@reference(GEMM_SM90_TMA_SWIGLU)
def gemm_tma_swiglu_bf16(mem: HostMemory, grid: Dim3, block: Dim3, a: int, w: int, act: int,
                         m: int, n: int, k: int, amap: bytes, wmap: bytes) -> None:
    gated_bf16(mem, grid, block, a, w, act, m, n, k)


@reference(GEMM_SM90_TMA_GEGLU)
def gemm_tma_geglu_bf16(mem: HostMemory, grid: Dim3, block: Dim3, a: int, w: int, act: int,
                        m: int, n: int, k: int, amap: bytes, wmap: bytes) -> None:
    gated_bf16(mem, grid, block, a, w, act, m, n, k, gelu_tanh_mul_bf16)


@reference(GEMM_SM90_TMA_F32OUT)
@reference(GEMM_SM90_TMA_CLUSTER2_F32OUT)
def gemm_tma_bf16_f32(mem: HostMemory, grid: Dim3, block: Dim3, a: int, w: int, c: int, m: int,
                      n: int, k: int, amap: bytes, wmap: bytes) -> None:
    linear_bf16(mem, a, w, c, m, n, k, out_f32=True)


# The decode GEMM's l2_tiles (an L2 prefetch hint) changes no value.
@reference(GEMM_DECODE_SM90)
@reference(GEMM_DECODE_SM90_SPLIT2)
@reference(GEMM_DECODE_SM90_SPLIT4)
@reference(GEMM_DECODE_SM90_SPLIT8)
def gemm_decode_bf16(mem: HostMemory, grid: Dim3, block: Dim3, x: int, w: int, y: int, m: int,
                     n: int, k: int, l2_tiles: int) -> None:
    linear_bf16(mem, x, w, y, m, n, k, out_f32=False)


@reference(GEMM_DECODE_SM90_F32OUT)
@reference(GEMM_DECODE_SM90_F32OUT_SPLIT2)
@reference(GEMM_DECODE_SM90_F32OUT_SPLIT4)
@reference(GEMM_DECODE_SM90_F32OUT_SPLIT8)
def gemm_decode_bf16_f32(mem: HostMemory, grid: Dim3, block: Dim3, x: int, w: int, y: int,
                         m: int, n: int, k: int, l2_tiles: int) -> None:
    linear_bf16(mem, x, w, y, m, n, k, out_f32=True)


@reference(GEMM_DECODE_SM90_SWIGLU)
@reference(GEMM_DECODE_SM90_SWIGLU_SPLIT2)
@reference(GEMM_DECODE_SM90_SWIGLU_SPLIT4)
@reference(GEMM_DECODE_SM90_SWIGLU_SPLIT8)
def gemm_decode_swiglu_bf16(mem: HostMemory, grid: Dim3, block: Dim3, x: int, w: int, act: int,
                            m: int, n: int, k: int, l2_tiles: int) -> None:
    gated_bf16(mem, grid, block, x, w, act, m, n, k)


@reference(GEMM_DECODE_SM90_GEGLU)
@reference(GEMM_DECODE_SM90_GEGLU_SPLIT2)
@reference(GEMM_DECODE_SM90_GEGLU_SPLIT4)
@reference(GEMM_DECODE_SM90_GEGLU_SPLIT8)
def gemm_decode_geglu_bf16(mem: HostMemory, grid: Dim3, block: Dim3, x: int, w: int, act: int,
                           m: int, n: int, k: int, l2_tiles: int) -> None:
    gated_bf16(mem, grid, block, x, w, act, m, n, k, gelu_tanh_mul_bf16)


# The TMA decode GEMM: the same products; its tensor maps only say how the kernel reads x
# and w, which the reference reads through their pointers. The persistent entries differ only
# in which block computes a tile (the same sums in the same order): the same references.
@reference(GEMM_DECODE_TMA)
@reference(GEMM_DECODE_TMA_PERSISTENT)
@reference(GEMM_DECODE_TMA_PERSISTENT_SPLIT2)
@reference(GEMM_DECODE_TMA_SPLIT2)
@reference(GEMM_DECODE_TMA_SPLIT3)
@reference(GEMM_DECODE_TMA_SPLIT4)
@reference(GEMM_DECODE_TMA_SPLIT5)
@reference(GEMM_DECODE_TMA_SPLIT6)
@reference(GEMM_DECODE_TMA_SPLIT7)
@reference(GEMM_DECODE_TMA_SPLIT8)
def gemm_decode_tma_bf16(mem: HostMemory, grid: Dim3, block: Dim3, x: int, w: int, y: int,
                         m: int, n: int, k: int, wmap: bytes, xmap: bytes) -> None:
    linear_bf16(mem, x, w, y, m, n, k, out_f32=False)


@reference(GEMM_DECODE_TMA_F32OUT)
@reference(GEMM_DECODE_TMA_F32OUT_PERSISTENT)
@reference(GEMM_DECODE_TMA_F32OUT_PERSISTENT_SPLIT2)
@reference(GEMM_DECODE_TMA_F32OUT_SPLIT2)
@reference(GEMM_DECODE_TMA_F32OUT_SPLIT3)
@reference(GEMM_DECODE_TMA_F32OUT_SPLIT4)
@reference(GEMM_DECODE_TMA_F32OUT_SPLIT5)
@reference(GEMM_DECODE_TMA_F32OUT_SPLIT6)
@reference(GEMM_DECODE_TMA_F32OUT_SPLIT7)
@reference(GEMM_DECODE_TMA_F32OUT_SPLIT8)
def gemm_decode_tma_bf16_f32(mem: HostMemory, grid: Dim3, block: Dim3, x: int, w: int, y: int,
                             m: int, n: int, k: int, wmap: bytes, xmap: bytes) -> None:
    linear_bf16(mem, x, w, y, m, n, k, out_f32=True)


@reference(GEMM_DECODE_TMA_SWIGLU)
@reference(GEMM_DECODE_TMA_SWIGLU_PERSISTENT)
@reference(GEMM_DECODE_TMA_SWIGLU_PERSISTENT_SPLIT2)
@reference(GEMM_DECODE_TMA_SWIGLU_SPLIT2)
@reference(GEMM_DECODE_TMA_SWIGLU_SPLIT3)
@reference(GEMM_DECODE_TMA_SWIGLU_SPLIT4)
@reference(GEMM_DECODE_TMA_SWIGLU_SPLIT5)
@reference(GEMM_DECODE_TMA_SWIGLU_SPLIT6)
@reference(GEMM_DECODE_TMA_SWIGLU_SPLIT7)
@reference(GEMM_DECODE_TMA_SWIGLU_SPLIT8)
def gemm_decode_tma_swiglu_bf16(mem: HostMemory, grid: Dim3, block: Dim3, x: int, w: int,
                                act: int, m: int, n: int, k: int, wmap: bytes,
                                xmap: bytes) -> None:
    gated_bf16(mem, grid, block, x, w, act, m, n, k)


@reference(GEMM_DECODE_TMA_GEGLU)
@reference(GEMM_DECODE_TMA_GEGLU_PERSISTENT)
@reference(GEMM_DECODE_TMA_GEGLU_PERSISTENT_SPLIT2)
@reference(GEMM_DECODE_TMA_GEGLU_SPLIT2)
@reference(GEMM_DECODE_TMA_GEGLU_SPLIT3)
@reference(GEMM_DECODE_TMA_GEGLU_SPLIT4)
@reference(GEMM_DECODE_TMA_GEGLU_SPLIT5)
@reference(GEMM_DECODE_TMA_GEGLU_SPLIT6)
@reference(GEMM_DECODE_TMA_GEGLU_SPLIT7)
@reference(GEMM_DECODE_TMA_GEGLU_SPLIT8)
def gemm_decode_tma_geglu_bf16(mem: HostMemory, grid: Dim3, block: Dim3, x: int, w: int,
                               act: int, m: int, n: int, k: int, wmap: bytes,
                               xmap: bytes) -> None:
    gated_bf16(mem, grid, block, x, w, act, m, n, k, gelu_tanh_mul_bf16)


# Stream-K: the same products summed in another order (the owner's k-tiles, then the later
# blocks' partials); its work and flags are scratch the reference leaves alone (flags stay 0).
@reference(GEMM_DECODE_TMA_STREAMK)
def gemm_decode_tma_streamk_bf16(mem: HostMemory, grid: Dim3, block: Dim3, x: int, w: int,
                                 y: int, m: int, n: int, k: int, wmap: bytes, xmap: bytes,
                                 work: int, flags: int) -> None:
    linear_bf16(mem, x, w, y, m, n, k, out_f32=False)


@reference(GEMM_DECODE_TMA_F32OUT_STREAMK)
def gemm_decode_tma_streamk_bf16_f32(mem: HostMemory, grid: Dim3, block: Dim3, x: int, w: int,
                                     y: int, m: int, n: int, k: int, wmap: bytes, xmap: bytes,
                                     work: int, flags: int) -> None:
    linear_bf16(mem, x, w, y, m, n, k, out_f32=True)


@reference(GEMM_DECODE_TMA_SWIGLU_STREAMK)
def gemm_decode_tma_streamk_swiglu_bf16(mem: HostMemory, grid: Dim3, block: Dim3, x: int,
                                        w: int, act: int, m: int, n: int, k: int, wmap: bytes,
                                        xmap: bytes, work: int, flags: int) -> None:
    gated_bf16(mem, grid, block, x, w, act, m, n, k)


@reference(GEMM_DECODE_TMA_GEGLU_STREAMK)
def gemm_decode_tma_streamk_geglu_bf16(mem: HostMemory, grid: Dim3, block: Dim3, x: int,
                                       w: int, act: int, m: int, n: int, k: int, wmap: bytes,
                                       xmap: bytes, work: int, flags: int) -> None:
    gated_bf16(mem, grid, block, x, w, act, m, n, k, gelu_tanh_mul_bf16)
