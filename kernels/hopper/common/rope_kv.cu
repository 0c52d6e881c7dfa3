// Fused attention prologue, one warp per (token, head):
//   q, k  <- optional per-head RMSNorm (Qwen3 q_norm/k_norm), then rotary embedding;
//   q     -> q_out [T, hq, D];  k, v -> the paged caches [num_blocks, hkv, block_size, D].
//
// Numerics follow transformers in bf16:
//   norm:  x = bf16(w * bf16(x * rsqrt(mean(x^2) + eps)))   (mean in f32 over the head)
//   rope:  q_embed = q * cos + rotate_half(q) * sin, each product and the sum rounded to bf16,
//          with cos/sin rounded to bf16 first (HF casts them to the activation dtype). Since
//          rotate_half(x) = [-x2, x1] and bf16(-a) = -bf16(a), for i < D/2:
//            out[i]       = bf16(bf16(x1 * c) - bf16(x2 * s))
//            out[i + D/2] = bf16(bf16(x2 * c) + bf16(x1 * s))
//          with x1 = x[i], x2 = x[i + D/2], c = bf16(cos[pos, i]), s = bf16(sin[pos, i]).
//
// Layout: a qkv row is [q (hq*D) | k (hkv*D) | v (hkv*D)]; cos_sin is f32 [positions, D]
// (cos of the D/2 frequencies, then sin). A negative slot skips the cache writes (padding).
// Launch: grid (tokens, ceil(heads / warps)), block = 32 * warps; warp w of block (t, y)
// handles head y * warps + w of token t's hq + 2*hkv heads (q heads, then k, then v). One head
// per warp spreads a batch-1 decode token over many SMs (Qwen3-8B: 48 heads, 12 blocks of 4
// warps) instead of one block walking all its heads; prefill's tokens x head groups fill the
// GPU the same way. head_dim even and <= 2 * 32 * kMaxPairs (256).
// The norm weights are read before waiting on the previous kernel (PDL): nothing writes them.
//
// qk_norm_rope_kv_partial_bf16 is the general form (Qwen3.5 / Qwen3-Next gated attention):
// q heads sit q_pitch elements apart in the row (each followed by its output gate, which this
// kernel leaves alone), only the first rotary_dim elements of a head rotate (pairs (i,
// i + rotary_dim/2), cos_sin f32 [positions, rotary_dim]) and the rest pass through, and
// norm_offset selects zero-centred weights: x = bf16((x * rsqrt(mean(x^2) + eps)) * (1 + w)).
// Each lane holds up to kMaxPairs rotation pairs and kMaxPass pass-through elements.
// Its proj_dim <= head_dim is a head's length in the qkv row (k and v heads proj_dim apart
// after the q heads): a model whose head dim no attention kernel is built for (Phi-3-mini's
// 96) attends at a padded head_dim (128, ops/attention.py padded_head_dim), its q_out and
// cache rows [head_dim] holding the head's proj_dim elements, then zeros; the norm spans the
// proj_dim elements (the zeros add nothing to the sum of squares). proj_dim == head_dim: no
// padding.
#include "rope_core.cuh"

namespace {

using namespace atlas::rope;

constexpr int kMaxWarps = 4;  // warps (heads) per block: ops/rope.py ROPE_WARPS

// One (token, head) of the fused prologue. kPartial = false is the classic layout
// (q_pitch = rot = D, plain weights) with the pass-through code compiled out.
template <bool kPartial>
__device__ __forceinline__ void rope_head(
    const __nv_bfloat16* __restrict__ qkv, __nv_bfloat16* __restrict__ q_out,
    __nv_bfloat16* __restrict__ k_cache, __nv_bfloat16* __restrict__ v_cache,
    const __nv_bfloat16* __restrict__ q_norm_w, const __nv_bfloat16* __restrict__ k_norm_w,
    const float* __restrict__ cos_sin, const int32_t* __restrict__ positions,
    const int32_t* __restrict__ slots, uint32_t tokens, uint32_t hq, uint32_t hkv,
    uint32_t head_dim, uint32_t q_pitch, uint32_t rotary_dim, bool offset, uint32_t block_size,
    float eps, uint32_t proj_dim) {
  const uint32_t t = blockIdx.x;
  const int lane = threadIdx.x & 31;
  const int h = static_cast<int>(blockIdx.y * (blockDim.x >> 5) + (threadIdx.x >> 5));
  const int D = static_cast<int>(head_dim);
  const int P = kPartial ? static_cast<int>(proj_dim) : D;  // a head's elements in the row
  const int rot = kPartial ? static_cast<int>(rotary_dim) : D;
  const int heads = static_cast<int>(hq + 2 * hkv);
  const bool is_q = h < static_cast<int>(hq);
  const bool is_v = h >= static_cast<int>(hq + hkv);
  const bool normed = q_norm_w != nullptr && !is_v;

  // This lane's norm weights (weights only: safe before the wait).
  const HeadNormW<kPartial> w =
      load_norm_w<kPartial>(is_q ? q_norm_w : k_norm_w, normed && h < heads, P, rot, lane);
  atlas::pdl_enter();  // qkv, positions and slots come from the kernels before this one
  if (t >= tokens || h >= heads) return;  // warp-uniform; no block-wide sync below
  const int32_t slot = slots[t];
  if (!is_q && slot < 0) return;  // padding token: no cache writes
  const size_t row = static_cast<size_t>(t) * (hq * (kPartial ? q_pitch : head_dim) + 2 * hkv * P);
  const __nv_bfloat16* src =
      qkv + row + (is_q ? static_cast<size_t>(h) * (kPartial ? q_pitch : head_dim)
                        : static_cast<size_t>(hq) * (kPartial ? q_pitch : head_dim) +
                              static_cast<size_t>(h - static_cast<int>(hq)) * P);
  const int kh = h - static_cast<int>(is_v ? hq + hkv : hq);
  __nv_bfloat16* dst =
      is_q ? q_out + (static_cast<size_t>(t) * hq + h) * D
           : (is_v ? v_cache : k_cache) +
                 ((static_cast<size_t>(slot / block_size) * hkv + kh) * block_size +
                  slot % block_size) * D;
  if (is_v) {
    for (int i = lane; i < D; i += 32) dst[i] = !kPartial || i < P ? src[i] : __float2bfloat16_rn(0.f);
    return;
  }
  norm_rope_row<kPartial>(src, dst, w, normed, offset,
                          cos_sin + static_cast<size_t>(positions[t]) * rot, P, rot, eps, lane);
  if constexpr (kPartial)  // the padding past the head's proj_dim elements
    for (int i = P + lane; i < D; i += 32) dst[i] = __float2bfloat16_rn(0.f);
}

}  // namespace

extern "C" __global__ void __launch_bounds__(32 * kMaxWarps)
qk_norm_rope_kv_bf16(const __nv_bfloat16* __restrict__ qkv, __nv_bfloat16* __restrict__ q_out,
                     __nv_bfloat16* __restrict__ k_cache, __nv_bfloat16* __restrict__ v_cache,
                     const __nv_bfloat16* __restrict__ q_norm_w,
                     const __nv_bfloat16* __restrict__ k_norm_w, const float* __restrict__ cos_sin,
                     const int32_t* __restrict__ positions, const int32_t* __restrict__ slots,
                     uint32_t tokens, uint32_t hq, uint32_t hkv, uint32_t head_dim,
                     uint32_t block_size, float eps) {
  rope_head<false>(qkv, q_out, k_cache, v_cache, q_norm_w, k_norm_w, cos_sin, positions, slots,
                   tokens, hq, hkv, head_dim, head_dim, head_dim, false, block_size, eps,
                   head_dim);
}

extern "C" __global__ void __launch_bounds__(32 * kMaxWarps)
qk_norm_rope_kv_partial_bf16(const __nv_bfloat16* __restrict__ qkv,
                             __nv_bfloat16* __restrict__ q_out,
                             __nv_bfloat16* __restrict__ k_cache,
                             __nv_bfloat16* __restrict__ v_cache,
                             const __nv_bfloat16* __restrict__ q_norm_w,
                             const __nv_bfloat16* __restrict__ k_norm_w,
                             const float* __restrict__ cos_sin,
                             const int32_t* __restrict__ positions,
                             const int32_t* __restrict__ slots, uint32_t tokens, uint32_t hq,
                             uint32_t hkv, uint32_t head_dim, uint32_t q_pitch,
                             uint32_t rotary_dim, uint32_t norm_offset, uint32_t block_size,
                             float eps, uint32_t proj_dim) {
  rope_head<true>(qkv, q_out, k_cache, v_cache, q_norm_w, k_norm_w, cos_sin, positions, slots,
                  tokens, hq, hkv, head_dim, q_pitch, rotary_dim, norm_offset != 0, block_size,
                  eps, proj_dim);
}
