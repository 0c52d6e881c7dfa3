"""Reference for the quantized KV cache writer (kernels/*/common/kv_quant.cu).

Specification (stage = bf16 [2 (K, V), hkv, stage_rows, head_dim], scales f32 [2, hkv]):
* kv_calibrate: for each (K or V, head) whose scale is 0, amax = max |x| over the first
  n = min(tokens, calib_tokens) tokens whose slot is >= 0; scale = float32(amax) / qmax, or
  1 when amax is 0. A scale already > 0 is left alone (checkpoint scales, or an earlier
  calibration: once set, fixed).
* kv_fp8_append: code = E4M3(x * float32(1 / scale)) rounded to nearest even with saturation
  to +-448 (PTX cvt.rn.satfinite; `numerics.f32_to_fp8_e4m3`), written to
  pool[slot // block_size, h, slot % block_size, :]; a negative slot writes nothing; a scale
  of 0 writes code 0.
* kv_nvfp4_append: per 16-element group x (f32) of a row, with g the head's scale: for
  t in (6, 4), code_t = E4M3(amax / (t * g)) (RNE, saturating), s_t = f32(code_t) * g,
  nibbles e = E2M1(x * (1 / s_t)) (`numerics.f32_to_e2m1`: nearest, ties away from zero;
  all 0 when s_t is 0) and err_t = sum over the 16 elements, in order, of
  (x - e2m1(e) * s_t)^2, every operation one f32 rounding. The group keeps t = 4 when
  err_4 < err_6, else t = 6: its nibbles (element 2i in the low nibble of byte i) go to
  bytes [8 grp, 8 grp + 8) of the row and code_t to byte head_dim / 2 + grp. A scale g of 0
  writes zeros.
"""

from __future__ import annotations

import numpy as np

from ...core.numerics import (bf16_bits_to_f32, e2m1_to_f32, f32_to_e2m1, f32_to_fp8_e4m3,
                              fp8_e4m3_to_f32, pack_e2m1)
from ..gpu import Dim3
from ..kernel_abi import KV_CALIBRATE, KV_FP8_APPEND, KV_NVFP4_APPEND
from . import HostMemory, reference

#: the E2M1 values the NVFP4 append tries mapping a group's amax onto, in order
NVFP4_TARGETS = (np.float32(6.0), np.float32(4.0))


def _stage(mem: HostMemory, stage: int, stage_rows: int, hkv: int, head_dim: int,
           tokens: int) -> np.ndarray:
    """float32 [2, hkv, tokens, head_dim] of the staged rows."""
    bits = mem.view(stage, np.uint16, 2 * hkv * stage_rows * head_dim).reshape(
        2, hkv, stage_rows, head_dim)
    return bf16_bits_to_f32(bits[:, :, :tokens])


def _scales(mem: HostMemory, scales: int, hkv: int) -> np.ndarray:
    return mem.view(scales, np.float32, 2 * hkv).reshape(2, hkv)


@reference(KV_CALIBRATE)
def kv_calibrate(mem: HostMemory, grid: Dim3, block: Dim3, stage: int, stage_rows: int,
                 slots: int, scales: int, tokens: int, calib_tokens: int, hkv: int,
                 head_dim: int, qmax: float) -> None:
    s = _scales(mem, scales, hkv)
    n = min(tokens, calib_tokens)
    live = mem.view(slots, np.int32, tokens)[:n] >= 0
    x = np.abs(_stage(mem, stage, stage_rows, hkv, head_dim, tokens)[:, :, :n][:, :, live])
    amax = x.max(axis=(2, 3)) if x.size else np.zeros((2, hkv), dtype=np.float32)
    fresh = np.where(amax > 0, amax.astype(np.float32) / np.float32(qmax), np.float32(1.0))
    s[:] = np.where(s > 0, s, fresh)


def _write_rows(mem: HostMemory, slots: int, tokens: int, k_cache: int, v_cache: int,
                hkv: int, block_size: int, row_bytes: int, rows: np.ndarray) -> None:
    """rows uint8 [2, hkv, tokens, row_bytes] to the pools at each live slot."""
    slot = mem.view(slots, np.int32, tokens).astype(np.int64)
    live = slot >= 0
    if not live.any():
        return
    blk, off = slot[live] // block_size, slot[live] % block_size
    pool = (int(blk.max()) + 1) * hkv * block_size * row_bytes
    for which, cache in enumerate((k_cache, v_cache)):
        c = mem.view(cache, np.uint8, pool).reshape(-1, hkv, block_size, row_bytes)
        c[blk, :, off] = rows[which][:, live].transpose(1, 0, 2)


@reference(KV_FP8_APPEND)
def kv_fp8_append(mem: HostMemory, grid: Dim3, block: Dim3, stage: int, stage_rows: int,
                  slots: int, scales: int, k_cache: int, v_cache: int, tokens: int, hkv: int,
                  head_dim: int, block_size: int) -> None:
    s = _scales(mem, scales, hkv)
    inv = np.where(s > 0, np.float32(1.0) / np.where(s > 0, s, 1), 0).astype(np.float32)
    x = _stage(mem, stage, stage_rows, hkv, head_dim, tokens)           # [2, hkv, t, D]
    codes = f32_to_fp8_e4m3(x * inv[:, :, None, None])
    _write_rows(mem, slots, tokens, k_cache, v_cache, hkv, block_size, head_dim, codes)


def nvfp4_quantize_rows(x: np.ndarray, g: np.ndarray) -> np.ndarray:
    """Rows x f32 [..., head_dim] at head scales g (broadcast to x[..., :1]) as NVFP4 rows:
    uint8 [..., head_dim / 2 + head_dim / 16] (nibbles, then E4M3 group scales)."""
    groups = x.reshape(x.shape[:-1] + (x.shape[-1] // 16, 16)).astype(np.float32)
    g = np.broadcast_to(np.asarray(g, np.float32)[..., None, None], groups.shape[:-1] + (1,))
    amax = np.abs(groups).max(axis=-1, keepdims=True)
    best = None
    for t in NVFP4_TARGETS:
        with np.errstate(divide="ignore", invalid="ignore"):
            code = f32_to_fp8_e4m3(np.where(g > 0, amax / (t * g), 0).astype(np.float32))
        s = (fp8_e4m3_to_f32(code) * g).astype(np.float32)
        inv = np.where(s > 0, np.float32(1) / np.where(s > 0, s, 1), 0).astype(np.float32)
        nib = np.where(s > 0, f32_to_e2m1(groups * inv), 0).astype(np.uint8)
        d = groups - e2m1_to_f32(nib) * s
        err = np.zeros(amax.shape, np.float32)
        for i in range(16):                          # in order, as the kernel adds
            err = err + d[..., i:i + 1] * d[..., i:i + 1]
        if best is None:
            best = (code, nib, err)
        else:
            take = err < best[2]
            best = (np.where(take, code, best[0]), np.where(take, nib, best[1]),
                    np.where(take, err, best[2]))
    assert best is not None
    code, nib = np.where(g > 0, best[0], 0), np.where(g > 0, best[1], 0)
    lead = x.shape[:-1]
    return np.concatenate([pack_e2m1(nib.reshape(lead + (-1,))),
                           code.reshape(lead + (-1,)).astype(np.uint8)], axis=-1)


@reference(KV_NVFP4_APPEND)
def kv_nvfp4_append(mem: HostMemory, grid: Dim3, block: Dim3, stage: int, stage_rows: int,
                    slots: int, scales: int, k_cache: int, v_cache: int, tokens: int,
                    hkv: int, head_dim: int, block_size: int) -> None:
    s = _scales(mem, scales, hkv)
    x = _stage(mem, stage, stage_rows, hkv, head_dim, tokens)           # [2, hkv, t, D]
    rows = nvfp4_quantize_rows(x, s[:, :, None])
    _write_rows(mem, slots, tokens, k_cache, v_cache, hkv, block_size,
                head_dim // 2 + head_dim // 16, rows)
