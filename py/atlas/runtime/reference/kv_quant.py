"""Reference for the FP8 KV cache writer (kernels/*/common/kv_quant.cu).

Specification (stage = bf16 [2 (K, V), hkv, stage_rows, head_dim], scales f32 [2, hkv]):
* kv_fp8_calibrate: for each (K or V, head) whose scale is 0, amax = max |x| over the first
  n = min(tokens, calib_tokens) tokens whose slot is >= 0; scale = float32(amax) / 448, or 1
  when amax is 0. A scale already > 0 is left alone (checkpoint scales, or an earlier
  calibration: once set, fixed).
* kv_fp8_append: code = E4M3(x * float32(1 / scale)) rounded to nearest even with saturation
  to +-448 (PTX cvt.rn.satfinite; `numerics.f32_to_fp8_e4m3`), written to
  pool[slot // block_size, h, slot % block_size, :]; a negative slot writes nothing; a scale
  of 0 writes code 0.
"""

from __future__ import annotations

import numpy as np

from ...core.numerics import bf16_bits_to_f32, f32_to_fp8_e4m3
from ..gpu import Dim3
from ..kernel_abi import KV_FP8_APPEND, KV_FP8_CALIBRATE
from . import HostMemory, reference

E4M3_MAX = np.float32(448.0)


def _stage(mem: HostMemory, stage: int, stage_rows: int, hkv: int, head_dim: int,
           tokens: int) -> np.ndarray:
    """float32 [2, hkv, tokens, head_dim] of the staged rows."""
    bits = mem.view(stage, np.uint16, 2 * hkv * stage_rows * head_dim).reshape(
        2, hkv, stage_rows, head_dim)
    return bf16_bits_to_f32(bits[:, :, :tokens])


@reference(KV_FP8_CALIBRATE)
def kv_fp8_calibrate(mem: HostMemory, grid: Dim3, block: Dim3, stage: int, stage_rows: int,
                     slots: int, scales: int, tokens: int, calib_tokens: int, hkv: int,
                     head_dim: int) -> None:
    s = mem.view(scales, np.float32, 2 * hkv).reshape(2, hkv)
    n = min(tokens, calib_tokens)
    live = mem.view(slots, np.int32, tokens)[:n] >= 0
    x = np.abs(_stage(mem, stage, stage_rows, hkv, head_dim, tokens)[:, :, :n][:, :, live])
    amax = x.max(axis=(2, 3)) if x.size else np.zeros((2, hkv), dtype=np.float32)
    fresh = np.where(amax > 0, amax.astype(np.float32) / E4M3_MAX, np.float32(1.0))
    s[:] = np.where(s > 0, s, fresh)


@reference(KV_FP8_APPEND)
def kv_fp8_append(mem: HostMemory, grid: Dim3, block: Dim3, stage: int, stage_rows: int,
                  slots: int, scales: int, k_cache: int, v_cache: int, tokens: int, hkv: int,
                  head_dim: int, block_size: int) -> None:
    s = mem.view(scales, np.float32, 2 * hkv).reshape(2, hkv)
    inv = np.where(s > 0, np.float32(1.0) / np.where(s > 0, s, 1), 0).astype(np.float32)
    slot = mem.view(slots, np.int32, tokens).astype(np.int64)
    live = slot >= 0
    if not live.any():
        return
    x = _stage(mem, stage, stage_rows, hkv, head_dim, tokens)[:, :, live]   # [2, hkv, n, D]
    codes = f32_to_fp8_e4m3(x * inv[:, :, None, None])
    blk, off = slot[live] // block_size, slot[live] % block_size
    pool = (int(blk.max()) + 1) * hkv * block_size * head_dim
    for which, cache in enumerate((k_cache, v_cache)):
        c = mem.view(cache, np.uint8, pool).reshape(-1, hkv, block_size, head_dim)
        c[blk, :, off] = codes[which].transpose(1, 0, 2)
