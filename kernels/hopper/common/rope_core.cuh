// The per-head q/k RMSNorm + rotary embedding of rope_kv.cu, shared with the decode
// attention kernel that applies it itself (attention.cu decode_attn_rope_bf16), so both
// produce the same bits. One warp per head; numerics and layout: rope_kv.cu's header.
#pragma once

#include "atlas_common.cuh"

namespace atlas::rope {

constexpr int kMaxPairs = 4;  // rotation pairs per lane: D/2 <= 32 * kMaxPairs
constexpr int kMaxPass = 8;   // pass-through elements per lane: D - rotary_dim <= 256

__device__ __forceinline__ float bf(const __nv_bfloat16* p, int i) {
  return __bfloat162float(p[i]);
}

// A lane's norm weights: pairs (i, i + rot/2) for i = lane + 32 j, and the pass-through
// elements rot + lane + 32 j (kPartial only).
template <bool kPartial>
struct HeadNormW {
  float w1[kMaxPairs], w2[kMaxPairs], wp[kPartial ? kMaxPass : 1];
};

// Weights of a normed head (zeros when !ok: the head is not normed or does not exist).
template <bool kPartial>
__device__ __forceinline__ HeadNormW<kPartial> load_norm_w(const __nv_bfloat16* norm_w, bool ok,
                                                           int D, int rot, int lane) {
  HeadNormW<kPartial> w;
  const int half = rot / 2;
#pragma unroll
  for (int j = 0; j < kMaxPairs; ++j) {
    const int i = lane + 32 * j;
    w.w1[j] = ok && i < half ? bf(norm_w, i) : 0.f;
    w.w2[j] = ok && i < half ? bf(norm_w, i + half) : 0.f;
  }
  if constexpr (kPartial) {
#pragma unroll
    for (int j = 0; j < kMaxPass; ++j) {
      const int e = rot + lane + 32 * j;
      w.wp[j] = ok && e < D ? bf(norm_w, e) : 0.f;
    }
  }
  return w;
}

// dst = rope(norm(src)) for one head of D elements (norm only when `normed`); cosv points at
// the position's row of cos_sin (rot floats: cos of the rot/2 frequencies, then sin).
// Called by the whole warp. Dst: a pointer, or anything indexed like one (attention_verify.cu
// writes q rows straight into a swizzled tensor-core tile).
template <bool kPartial, class Dst = __nv_bfloat16*>
__device__ __forceinline__ void norm_rope_row(const __nv_bfloat16* src, Dst dst,
                                              const HeadNormW<kPartial>& w, bool normed,
                                              bool offset, const float* cosv, int D, int rot,
                                              float eps, int lane) {
  const int half = rot / 2;
  const float* sinv = cosv + half;
  float x1[kMaxPairs], x2[kMaxPairs], xp[kPartial ? kMaxPass : 1];
  float sumsq = 0.f;
#pragma unroll
  for (int j = 0; j < kMaxPairs; ++j) {
    const int i = lane + 32 * j;
    x1[j] = i < half ? bf(src, i) : 0.f;
    x2[j] = i < half ? bf(src, i + half) : 0.f;
    sumsq = fmaf(x1[j], x1[j], fmaf(x2[j], x2[j], sumsq));
  }
  if constexpr (kPartial) {
#pragma unroll
    for (int j = 0; j < kMaxPass; ++j) {
      const int e = rot + lane + 32 * j;
      xp[j] = e < D ? bf(src, e) : 0.f;
      sumsq = fmaf(xp[j], xp[j], sumsq);
    }
  }
  if (normed) {
    const float inv_rms = rsqrtf(atlas::warp_sum(sumsq) / static_cast<float>(D) + eps);
    if (kPartial && offset) {
#pragma unroll
      for (int j = 0; j < kMaxPairs; ++j) {
        x1[j] = atlas::round_bf16((x1[j] * inv_rms) * (1.f + w.w1[j]));
        x2[j] = atlas::round_bf16((x2[j] * inv_rms) * (1.f + w.w2[j]));
      }
      if constexpr (kPartial) {
#pragma unroll
        for (int j = 0; j < kMaxPass; ++j) xp[j] = atlas::round_bf16((xp[j] * inv_rms) * (1.f + w.wp[j]));
      }
    } else {
#pragma unroll
      for (int j = 0; j < kMaxPairs; ++j) {
        x1[j] = atlas::round_bf16(w.w1[j] * atlas::round_bf16(x1[j] * inv_rms));
        x2[j] = atlas::round_bf16(w.w2[j] * atlas::round_bf16(x2[j] * inv_rms));
      }
      if constexpr (kPartial) {
#pragma unroll
        for (int j = 0; j < kMaxPass; ++j) xp[j] = atlas::round_bf16(w.wp[j] * atlas::round_bf16(xp[j] * inv_rms));
      }
    }
  }
#pragma unroll
  for (int j = 0; j < kMaxPairs; ++j) {
    const int i = lane + 32 * j;
    if (i < half) {
      const float c = atlas::round_bf16(cosv[i]), s = atlas::round_bf16(sinv[i]);
      const float p1c = atlas::round_bf16(x1[j] * c), p2s = atlas::round_bf16(x2[j] * s);
      const float p2c = atlas::round_bf16(x2[j] * c), p1s = atlas::round_bf16(x1[j] * s);
      dst[i] = atlas::f32_to_bf16(p1c - p2s);
      dst[i + half] = atlas::f32_to_bf16(p2c + p1s);
    }
  }
  if constexpr (kPartial) {
#pragma unroll
    for (int j = 0; j < kMaxPass; ++j) {
      const int e = rot + lane + 32 * j;
      if (e < D) dst[e] = atlas::f32_to_bf16(xp[j]);
    }
  }
}

}  // namespace atlas::rope
