"""References for the quantized-expert decode kernels (kernels/*/common/moe_decode_quant.cu).

Specification: the bf16 expert kernels' (reference/moe.py: g, u bf16-rounded products,
act = bf16(bf16(silu(g)) * u), y_j = bf16(act_j . down row), out = bf16(sum_j w_j y_j) over
the routed slots, and with a shared expert's slots bf16(that) + bf16(w_s * y_s)) with
every weight the exact dequantized value (`core.quant.dequantize_fp8` /
`dequantize_nvfp4`, float64), so a quantized layer is its dequantized bf16 layer up to the
bf16 rounding of the weights. The kernels accumulate in float32 and scale each 16-value
group once; they agree with this to a few float32 ulps of the sums (check cases'
tolerances). The dequantized experts are cached per weight address on backends that keep
derived forms of constant memory, so a host decode step does not re-decode them.
"""

from __future__ import annotations

import numpy as np

from ...core.numerics import (bf16_bits_to_f32, e2m1_to_f32, f32_to_bf16_bits, fp8_e4m3_to_f32,
                             unpack_e2m1)
from ...core.quant import NVFP4_GROUP, Fp8ScaleMap, dequantize_fp8, dequantize_nvfp4
from ..gpu import Dim3
from ..kernel_abi import (MOE_DEQUANT_NVFP4, MOE_DOWN_SUM_EARLY_FP8, MOE_DOWN_SUM_EARLY_NVFP4,
                          MOE_DOWN_SUM_FP8, MOE_DOWN_SUM_NVFP4, MOE_GATE_UP_SILU_FP8,
                          MOE_GATE_UP_SILU_NVFP4)
from . import HostMemory, reference
from .moe import _act_in, _bf16, expert_act, expert_down, weighted_sum


def _cached(mem: HostMemory, codes: int, nbytes: int, tag: str, make) -> np.ndarray:
    derived = getattr(mem, "derived", None)
    view = mem.view(codes, np.uint8, nbytes)
    return make(view) if derived is None else derived(codes, nbytes, np.uint8, tag, make)


def fp8_experts(mem: HostMemory, w: int, scale: int, rows: int, k: int,
                smap: Fp8ScaleMap) -> np.ndarray:
    """float64 [rows, k] of stacked FP8 expert weights (scales through `smap`)."""
    count = int(np.prod(smap.shape)) if smap.shape else 1
    s = mem.view(scale, np.float32, count)

    def make(view: np.ndarray) -> np.ndarray:
        return dequantize_fp8(view.reshape(rows, k), s, smap)

    return _cached(mem, w, rows * k, f"fp8->f64:{scale}:{smap}", make)


def nvfp4_experts(mem: HostMemory, w: int, scale: int, row_scale: int, rows: int,
                  k: int) -> np.ndarray:
    """float64 [rows, k] of stacked NVFP4 expert weights."""
    s = mem.view(scale, np.uint8, rows * k // NVFP4_GROUP).reshape(rows, k // NVFP4_GROUP)
    g = mem.view(row_scale, np.float32, rows)

    def make(view: np.ndarray) -> np.ndarray:
        return dequantize_nvfp4(view.reshape(rows, k // 2), s, g)

    return _cached(mem, w, rows * k // 2, f"nvfp4->f64:{scale}:{row_scale}", make)


def _map(row_shift: int, row_stride: int, col_shift: int, col_stride: int, rows: int,
         k: int) -> Fp8ScaleMap:
    """The scale map the kernel arguments describe, its shape derived from the strides."""
    scale_rows = ((rows - 1) >> row_shift) + 1 if row_stride else 1
    scale_cols = ((k - 1) >> col_shift) + 1 if col_stride else 1
    count = (scale_rows - 1) * row_stride + (scale_cols - 1) * col_stride + 1
    return Fp8ScaleMap(row_shift, row_stride, col_shift, col_stride, (count,))


def _gate_up(mem: HostMemory, x: int, w_gate_up: np.ndarray, topk_ids: int, act: int,
             tokens: int, slots: int, hidden: int, inter: int) -> None:
    xs = _act_in(mem, x, tokens, hidden)
    ids = mem.view(topk_ids, np.int32, tokens * slots)
    out = expert_act(np.repeat(xs, slots, axis=0), ids, w_gate_up, inter)
    mem.view(act, np.uint16, tokens * slots * inter)[:] = f32_to_bf16_bits(
        out.astype(np.float32)).reshape(-1)


def _down(mem: HostMemory, act: int, w_down: np.ndarray, topk_ids: int, topk_weights: int,
          out: int, tokens: int, slots: int, routed: int, hidden: int, inter: int,
          experts: int) -> None:
    """The routed slots' bf16 weighted sum, then (shared slots) bf16(that) + the sum of
    bf16(weight * y) over the shared slots, rounded: moe_down_sum_bf16's values, into `out`."""
    ids = mem.view(topk_ids, np.int32, tokens * slots).reshape(tokens, slots)
    weights = mem.view(topk_weights, np.float32, tokens * slots).reshape(tokens, slots)
    y = expert_down(_act_in(mem, act, tokens * slots, inter), ids.reshape(-1), w_down
                    ).reshape(tokens, slots, hidden)
    bits = weighted_sum(y[:, :routed], ids[:, :routed], weights[:, :routed], experts)
    if routed < slots:
        valid = (ids[:, routed:] >= 0) & (ids[:, routed:] < experts)
        w = np.where(valid, weights[:, routed:].astype(np.float64), 0.0)
        gated = _bf16(w[:, :, None] * y[:, routed:]).sum(axis=1)
        bits = f32_to_bf16_bits((bf16_bits_to_f32(bits) + gated).astype(np.float32))
    mem.view(out, np.uint16, tokens * hidden)[:] = bits.reshape(-1)


@reference(MOE_GATE_UP_SILU_FP8)
def moe_gate_up_silu_fp8(mem: HostMemory, grid: Dim3, block: Dim3, x: int, w: int, scale: int,
                         topk_ids: int, act: int, tokens: int, slots: int, hidden: int,
                         inter: int, experts: int, row_shift: int, row_stride: int,
                         col_shift: int, col_stride: int) -> None:
    rows = experts * 2 * inter
    wf = fp8_experts(mem, w, scale, rows, hidden,
                     _map(row_shift, row_stride, col_shift, col_stride, rows, hidden))
    _gate_up(mem, x, wf.reshape(experts, 2 * inter, hidden), topk_ids, act, tokens, slots,
             hidden, inter)


@reference(MOE_GATE_UP_SILU_NVFP4)
def moe_gate_up_silu_nvfp4(mem: HostMemory, grid: Dim3, block: Dim3, x: int, w: int,
                           scale: int, row_scale: int, topk_ids: int, act: int, tokens: int,
                           slots: int, hidden: int, inter: int, experts: int) -> None:
    wf = nvfp4_experts(mem, w, scale, row_scale, experts * 2 * inter, hidden)
    _gate_up(mem, x, wf.reshape(experts, 2 * inter, hidden), topk_ids, act, tokens, slots,
             hidden, inter)


@reference(MOE_DOWN_SUM_FP8)
@reference(MOE_DOWN_SUM_EARLY_FP8)  # the routing read / weights requested earlier: same bits
def moe_down_sum_fp8(mem: HostMemory, grid: Dim3, block: Dim3, act: int, w: int, scale: int,
                     topk_ids: int, topk_weights: int, out: int, tokens: int, slots: int,
                     routed: int, hidden: int, inter: int, experts: int, row_shift: int,
                     row_stride: int, col_shift: int, col_stride: int) -> None:
    rows = experts * hidden
    wf = fp8_experts(mem, w, scale, rows, inter,
                     _map(row_shift, row_stride, col_shift, col_stride, rows, inter))
    _down(mem, act, wf.reshape(experts, hidden, inter), topk_ids, topk_weights, out, tokens,
          slots, routed, hidden, inter, experts)


@reference(MOE_DOWN_SUM_NVFP4)
@reference(MOE_DOWN_SUM_EARLY_NVFP4)  # the routing read / weights requested earlier: same bits
def moe_down_sum_nvfp4(mem: HostMemory, grid: Dim3, block: Dim3, act: int, w: int,
                       scale: int, row_scale: int, topk_ids: int, topk_weights: int, out: int,
                       tokens: int, slots: int, routed: int, hidden: int, inter: int,
                       experts: int) -> None:
    wf = nvfp4_experts(mem, w, scale, row_scale, experts * hidden, inter)
    _down(mem, act, wf.reshape(experts, hidden, inter), topk_ids, topk_weights, out, tokens,
          slots, routed, hidden, inter, experts)


@reference(MOE_DEQUANT_NVFP4)
def moe_dequant_nvfp4_bf16(mem: HostMemory, grid: Dim3, block: Dim3, w: int, scale: int,
                           row_scale: int, w_out: int, n: int, k: int) -> None:
    """bf16(e2m1 * f32(e4m3(s) * g)): the f32 group scale first, as the kernel forms it."""
    codes = mem.view(w, np.uint8, n * k // 2).reshape(n, k // 2)
    s = mem.view(scale, np.uint8, n * k // NVFP4_GROUP).reshape(n, k // NVFP4_GROUP)
    g = mem.view(row_scale, np.float32, n)
    s32 = (fp8_e4m3_to_f32(s) * g[:, None]).astype(np.float32)
    wf = e2m1_to_f32(unpack_e2m1(codes)) * np.repeat(s32, NVFP4_GROUP, axis=1)
    mem.view(w_out, np.uint16, n * k)[:] = f32_to_bf16_bits(wf.astype(np.float32)).reshape(-1)
