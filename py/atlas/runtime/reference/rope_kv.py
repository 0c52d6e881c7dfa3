"""Reference for qk_norm_rope_kv_bf16 (kernels/*/common/rope_kv.cu).

Per token t with qkv row [q (hq*D) | k (hkv*D) | v (hkv*D)]:
* if q_norm_w != 0: q and k heads get RMSNorm over D with the two bf16 roundings of
  reference.rmsnorm (Qwen3's q_norm/k_norm);
* rotary embedding in transformers' op order, `x * cos + rotate_half(x) * sin` in bf16, with
  cos/sin rounded to bf16 first; rotate_half(x) = [-x2, x1], so for i < D/2:
      out[i]       = bf16(bf16(x1 * c) - bf16(x2 * s))
      out[i + D/2] = bf16(bf16(x2 * c) + bf16(x1 * s))
* q goes to q_out [T, hq, D]; rotated k and v go to the paged caches
  [num_blocks, hkv, block_size, D] at slot (block = slot // block_size,
  offset = slot % block_size); a negative slot writes nothing.
* qk_norm_rope_kv_partial_bf16: q heads q_pitch apart in the row, the first rotary_dim
  elements rotating (pairs (i, i + rotary_dim / 2)), the rest passing through, (1 + w) norm
  weights with norm_offset; heads of proj_dim <= D elements in the row (k and v proj_dim
  apart), normed over those, their q_out and cache rows zero past them (a padded head).
"""

from __future__ import annotations

import numpy as np

from ...core.numerics import bf16_bits_to_f32, f32_to_bf16_bits, round_bf16
from ..gpu import Dim3
from ..kernel_abi import QK_NORM_ROPE_KV, QK_NORM_ROPE_KV_PARTIAL
from . import HostMemory, reference
from .rmsnorm import rms_norm_bf16, rms_norm_offset_bf16


def rotate_bf16(x: np.ndarray, cos: np.ndarray, sin: np.ndarray) -> np.ndarray:
    """Rotate float32 heads x [..., D] by bf16-rounded cos/sin [..., D/2]; bf16 bits."""
    half = x.shape[-1] // 2
    c, s = round_bf16(cos), round_bf16(sin)
    x1, x2 = x[..., :half], x[..., half:]
    first = round_bf16(x1 * c) - round_bf16(x2 * s)
    second = round_bf16(x2 * c) + round_bf16(x1 * s)
    return f32_to_bf16_bits(np.concatenate([first, second], axis=-1))


@reference(QK_NORM_ROPE_KV)
def qk_norm_rope_kv_bf16(mem: HostMemory, grid: Dim3, block: Dim3, qkv: int, q_out: int,
                         k_cache: int, v_cache: int, q_norm_w: int, k_norm_w: int, cos_sin: int,
                         positions: int, slots: int, tokens: int, hq: int, hkv: int,
                         head_dim: int, block_size: int, eps: float) -> None:
    qk_norm_rope_kv_partial_bf16(mem, grid, block, qkv, q_out, k_cache, v_cache, q_norm_w,
                                 k_norm_w, cos_sin, positions, slots, tokens, hq, hkv, head_dim,
                                 head_dim, head_dim, 0, block_size, eps, head_dim)


@reference(QK_NORM_ROPE_KV_PARTIAL)
def qk_norm_rope_kv_partial_bf16(mem: HostMemory, grid: Dim3, block: Dim3, qkv: int, q_out: int,
                                 k_cache: int, v_cache: int, q_norm_w: int, k_norm_w: int,
                                 cos_sin: int, positions: int, slots: int, tokens: int, hq: int,
                                 hkv: int, head_dim: int, q_pitch: int, rotary_dim: int,
                                 norm_offset: int, block_size: int, eps: float,
                                 proj_dim: int) -> None:
    t, d, rot, p = tokens, head_dim, rotary_dim, proj_dim
    width = hq * q_pitch + 2 * hkv * p
    x = bf16_bits_to_f32(mem.view(qkv, np.uint16, t * width)).reshape(t, width)
    q = x[:, :hq * q_pitch].reshape(t, hq, q_pitch)[:, :, :p]
    k = x[:, hq * q_pitch:hq * q_pitch + hkv * p].reshape(t, hkv, p)
    v = x[:, hq * q_pitch + hkv * p:].reshape(t, hkv, p)
    if q_norm_w:
        norm = rms_norm_offset_bf16 if norm_offset else rms_norm_bf16
        q_w = bf16_bits_to_f32(mem.view(q_norm_w, np.uint16, p))
        k_w = bf16_bits_to_f32(mem.view(k_norm_w, np.uint16, p))
        q = bf16_bits_to_f32(norm(q, q_w, eps))
        k = bf16_bits_to_f32(norm(k, k_w, eps))
    pos = mem.view(positions, np.int32, t).astype(np.int64)
    table = mem.view(cos_sin, np.float32, (int(pos.max()) + 1) * rot).reshape(-1, rot)
    cos, sin = table[pos, None, :rot // 2], table[pos, None, rot // 2:]

    def rotate(h: np.ndarray, c: np.ndarray, s: np.ndarray) -> np.ndarray:
        """Rotate the first rotary_dim elements; the rest pass through (partial rotary),
        then zeros up to D (a padded head)."""
        return pad(np.concatenate([rotate_bf16(h[..., :rot], c, s),
                                   f32_to_bf16_bits(h[..., rot:])], axis=-1))

    def pad(bits: np.ndarray) -> np.ndarray:
        """bf16 rows of proj_dim elements as rows of D: zeros (bits 0) past them."""
        return np.concatenate([bits, np.zeros(bits.shape[:-1] + (d - p,), np.uint16)], axis=-1)

    mem.view(q_out, np.uint16, t * hq * d)[:] = rotate(q, cos, sin).reshape(-1)
    slot = mem.view(slots, np.int32, t).astype(np.int64)
    live = slot >= 0
    if not live.any():
        return
    blk, off = slot[live] // block_size, slot[live] % block_size
    pool = (int(blk.max()) + 1) * hkv * block_size * d
    kc = mem.view(k_cache, np.uint16, pool).reshape(-1, hkv, block_size, d)
    vc = mem.view(v_cache, np.uint16, pool).reshape(-1, hkv, block_size, d)
    kc[blk, :, off] = rotate(k[live], cos[live], sin[live])
    vc[blk, :, off] = pad(f32_to_bf16_bits(v[live]))
