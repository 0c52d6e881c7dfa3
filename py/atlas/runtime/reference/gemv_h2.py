"""Emulation of the batch-1 GEMV on packed half-precision FMAs (kernels/hopper/common/
gemv_h2.cuh), shared by its NVFP4 (reference/gemv_nvfp4.py) and FP8 (reference/gemv_fp8.py)
entry points: the f16 roundings of its 16-value group sums and its range guard are computed
as the kernel computes them, the rest in float64 (the kernel's f32 order of the group and
thread sums differs by far less than its f16 roundings), so the host checks see what the
f16 arithmetic does to large and tiny x."""

from __future__ import annotations

from typing import Callable

import numpy as np

from ...core.numerics import bf16_bits_to_f32

#: values a scale group (the kernel's f16 accumulator: two lanes of 8 products)
H2_GROUP = 16
#: rows emulated at a time (bounds the f16 / float64 temporaries)
_ROW_BLOCK = 1024


def h2_guard_exponents(x_bits: np.ndarray, threads: int, chunk: int, guard_exp: int
                       ) -> np.ndarray:
    """The range guard's exponent e [k / chunk] each `chunk`-value chunk of x (bf16 bits
    [k]) is converted under (x times 2^-e to f16, the sums times 2^e): thread c % `threads`
    takes chunks c, c + threads, ... in order, and a chunk whose max |x| (NaN aside) is
    2^guard_exp or more raises its thread's e (from 0, never lowered) to the one putting
    that max in [2^(guard_exp - 1), 2^guard_exp)."""
    mag = (x_bits.reshape(-1, chunk) & 0x7FFF).astype(np.int64)
    top = np.where(mag > 0x7F80, 0, mag).max(axis=1)  # NaN dropped, as the packed max does
    need = np.where(top >= (127 + guard_exp) << 7, (top >> 7) - (126 + guard_exp), 0)
    kc = need.size
    per_thread = np.zeros(-(-kc // threads) * threads, np.int64)
    per_thread[:kc] = need
    return np.maximum.accumulate(per_thread.reshape(-1, threads), axis=0).reshape(-1)[:kc]


#: the kernel's pair order within a group: its own (x0, x1), (x2, x3), ..
NATURAL_PAIRS = np.arange(H2_GROUP)
#: NVFP4's split decode (quant_decode.cuh e2m1x8_to_f16x2_split): per 8 values (v0, v2),
#: (v4, v6), (v1, v3), (v5, v7)
SPLIT_PAIRS = np.array([0, 2, 4, 6, 1, 3, 5, 7, 8, 10, 12, 14, 9, 11, 13, 15])


def h2_emulate(x_bits: np.ndarray, weights: Callable[[slice], np.ndarray],
               group_scales: np.ndarray, out_scale: np.ndarray, threads: int, chunk: int,
               guard_exp: int, guard: bool = True,
               pairs: np.ndarray = NATURAL_PAIRS) -> np.ndarray:
    """float32 [n] of the kernel for one row x (bf16 bits [k]) on `threads` threads a block.

    `weights(rows)`: the float64 [rows, k] f16 values the format decodes (exact f16) for a
    slice of rows (decoded a block of rows at a time); `group_scales` [n, k / 16] float64:
    each 16-value group's f32 scale; `out_scale` [n] float64: the f32 factor of a row's
    total; `chunk`, `guard_exp`: the format's values a chunk and guard threshold 2^guard_exp.
    x times 2^-e (h2_guard_exponents; 0 everywhere without `guard`) rounded to f16; per
    group two f16 lanes each summing its 8 products with one f16 rounding a step (a fused
    multiply-add), the group's values taken as pairs in `pairs` order (lane 0 the first of
    each pair: the even values in K order by default), widened and added in float32,
    times the group's scale and 2^e; the groups summed in float64, times out_scale, rounded
    to float32."""
    k = x_bits.size
    e = (h2_guard_exponents(x_bits, threads, chunk, guard_exp) if guard
         else np.zeros(k // chunk, np.int64))
    xs = bf16_bits_to_f32(x_bits) * np.repeat(np.ldexp(np.float32(1), -e), chunk)
    with np.errstate(over="ignore"):
        x16 = xs.astype(np.float32).astype(np.float16).astype(np.float64)
    x16 = x16.reshape(-1, H2_GROUP)[:, pairs].reshape(-1, 8, 2)
    back = np.repeat(np.ldexp(1.0, e), chunk // H2_GROUP)  # each chunk's 2^e, per group
    n = group_scales.shape[0]
    out = np.empty(n, np.float64)
    for r0 in range(0, n, _ROW_BLOCK):
        rows = slice(r0, r0 + _ROW_BLOCK)
        w = weights(rows)
        w = w.reshape(w.shape[0], -1, H2_GROUP)[:, :, pairs].reshape(w.shape[0], -1, 8, 2)
        h = np.zeros((w.shape[0], w.shape[1], 2), np.float16)
        with np.errstate(over="ignore", invalid="ignore"):
            for i in range(8):
                h = (w[:, :, i, :] * x16[:, i, :] + h).astype(np.float16)
            group = h[..., 0].astype(np.float32) + h[..., 1].astype(np.float32)
            out[rows] = (group.astype(np.float64) * group_scales[rows] * back).sum(axis=1)
    with np.errstate(over="ignore", invalid="ignore"):
        return (out * out_scale).astype(np.float32)
