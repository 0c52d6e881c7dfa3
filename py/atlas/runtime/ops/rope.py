"""Launch builder for q/k RMSNorm + rotary embedding + paged KV append (rope_kv.cu)."""

from __future__ import annotations

from ..gpu import DevicePtr, Stream
from ..kernel_abi import QK_NORM_ROPE_KV, QK_NORM_ROPE_KV_PARTIAL
from . import KernelCache
from ._preconditions import require_aligned

#: rope_kv.cu handles head_dim/2 <= 32 * kMaxPairs rotation pairs per warp
ROPE_MAX_HEAD_DIM = 256
#: warps per block, one head each: a token's heads spread over ceil(heads / 4) blocks, so a
#: batch-1 decode step runs on ~a dozen SMs rather than one (rope_kv.cu kMaxWarps)
ROPE_WARPS = 4


def qk_norm_rope_kv(kc: KernelCache, stream: Stream, qkv: DevicePtr, q_out: DevicePtr,
                    k_cache: DevicePtr, v_cache: DevicePtr, q_norm_w: DevicePtr,
                    k_norm_w: DevicePtr, cos_sin: DevicePtr, positions: DevicePtr,
                    slots: DevicePtr, tokens: int, hq: int, hkv: int, head_dim: int,
                    block_size: int, eps: float, *, q_pitch: int | None = None,
                    rotary_dim: int | None = None, norm_offset: bool = False,
                    proj_dim: int | None = None) -> None:
    """Split qkv [tokens, hq * q_pitch + 2*hkv*proj_dim]: q -> q_out [tokens, hq, head_dim],
    k and v -> the caches.

    q_norm_w == 0 skips the per-head norm (Llama); otherwise both q and k are normed (Qwen3).
    q_pitch (default proj_dim; 2 * proj_dim when each q head is followed by its output gate),
    rotary_dim (default proj_dim: the leading elements that rotate, cos_sin being
    [positions, rotary_dim]), norm_offset ((1 + w) norm weights) and proj_dim (default
    head_dim: a head's elements in the qkv row, the rest of its q_out and cache rows zeros: a
    padded head, ops.attention.padded_head_dim) select the general kernel.
    """
    proj_dim = head_dim if proj_dim is None else proj_dim
    q_pitch = proj_dim if q_pitch is None else q_pitch
    rotary_dim = proj_dim if rotary_dim is None else rotary_dim
    general = (q_pitch, rotary_dim, norm_offset, proj_dim) != (head_dim, head_dim, False,
                                                                head_dim)
    if general and (rotary_dim < 2 or rotary_dim % 2 or rotary_dim > proj_dim
                    or q_pitch < proj_dim or proj_dim % 2 or proj_dim > head_dim):
        raise ValueError(f"qk_norm_rope_kv: rotary_dim={rotary_dim} must be even and <= "
                         f"proj_dim={proj_dim} (even, <= head_dim={head_dim}), q_pitch="
                         f"{q_pitch} >= proj_dim")
    if head_dim < 2 or head_dim % 2 or head_dim > ROPE_MAX_HEAD_DIM:
        raise ValueError(f"qk_norm_rope_kv: head_dim={head_dim} must be even and <= "
                         f"{ROPE_MAX_HEAD_DIM}")
    if hq < 1 or hkv < 1 or block_size < 1:
        raise ValueError(f"qk_norm_rope_kv: need hq, hkv, block_size >= 1, got {hq}, {hkv}, "
                         f"{block_size}")
    if bool(q_norm_w) != bool(k_norm_w):
        raise ValueError("qk_norm_rope_kv: q_norm_w and k_norm_w must both be set or both be 0")
    for name, ptr in (("qkv", qkv), ("q_out", q_out), ("k_cache", k_cache),
                      ("v_cache", v_cache), ("q_norm_w", q_norm_w), ("k_norm_w", k_norm_w)):
        require_aligned("qk_norm_rope_kv", name, ptr, 2)
    for name, ptr in (("cos_sin", cos_sin), ("positions", positions), ("slots", slots)):
        require_aligned("qk_norm_rope_kv", name, ptr, 4)
    if not tokens:
        return
    heads = hq + 2 * hkv
    warps = min(ROPE_WARPS, heads)
    grid = (tokens, -(-heads // warps))
    if general:
        kc.get(QK_NORM_ROPE_KV_PARTIAL)(stream, grid, 32 * warps, 0, qkv, q_out, k_cache,
                                        v_cache, q_norm_w, k_norm_w, cos_sin, positions, slots,
                                        tokens, hq, hkv, head_dim, q_pitch, rotary_dim,
                                        int(norm_offset), block_size, eps, proj_dim)
        return
    kc.get(QK_NORM_ROPE_KV)(stream, grid, 32 * warps, 0, qkv, q_out, k_cache, v_cache,
                            q_norm_w, k_norm_w, cos_sin, positions, slots, tokens, hq, hkv,
                            head_dim, block_size, eps)
