// Gated RMSNorm of Gated-DeltaNet's output (transformers' Qwen3_5RMSNormGated in bf16), per
// (token, head) row x of `dim` with its gate z:
//   out = bf16(bf16(w * bf16(x * rsqrt(mean(x^2) + eps))) * silu(z))     (mean, silu in f32)
// x and out are [tokens, heads * dim]; z's (t, h) row starts at z + t * z_pitch + h * dim
// (z lives in the fused input projection's rows).
//
// Launch: one warp per row, kRowsPerBlock rows a block (ops/gating.py GATED_NORM_ROWS); each
// lane holds dim / 32 <= kMaxPerLane elements (dim a multiple of 32, at most 256).
#include "atlas_common.cuh"

namespace {

constexpr int kRowsPerBlock = 4;
constexpr int kMaxPerLane = 8;

}  // namespace

extern "C" __global__ void __launch_bounds__(32 * kRowsPerBlock)
gated_rmsnorm_bf16(const __nv_bfloat16* __restrict__ x, const __nv_bfloat16* __restrict__ z,
                   uint32_t z_pitch, const __nv_bfloat16* __restrict__ w,
                   __nv_bfloat16* __restrict__ out, uint32_t tokens, uint32_t heads, uint32_t dim,
                   float eps) {
  const int lane = threadIdx.x & 31;
  const int per_lane = static_cast<int>(dim) / 32;
  float wf[kMaxPerLane];
#pragma unroll
  for (int j = 0; j < kMaxPerLane; ++j) wf[j] = j < per_lane ? atlas::bf16_to_f32(w[lane + 32 * j]) : 0.f;
  atlas::pdl_enter();  // x and z come from the kernels before this one
  const uint32_t row = blockIdx.x * kRowsPerBlock + (threadIdx.x >> 5);
  if (row >= tokens * heads) return;  // warp-uniform
  const uint32_t t = row / heads, h = row % heads;
  const __nv_bfloat16* xr = x + static_cast<size_t>(row) * dim;
  const __nv_bfloat16* zr = z + static_cast<size_t>(t) * z_pitch + static_cast<size_t>(h) * dim;
  float v[kMaxPerLane];
  float sumsq = 0.f;
#pragma unroll
  for (int j = 0; j < kMaxPerLane; ++j) {
    v[j] = j < per_lane ? atlas::bf16_to_f32(xr[lane + 32 * j]) : 0.f;
    sumsq = fmaf(v[j], v[j], sumsq);
  }
  const float inv_rms = rsqrtf(atlas::warp_sum(sumsq) / static_cast<float>(dim) + eps);
  __nv_bfloat16* o = out + static_cast<size_t>(row) * dim;
#pragma unroll
  for (int j = 0; j < kMaxPerLane; ++j) {
    if (j < per_lane) {
      const float g = atlas::bf16_to_f32(zr[lane + 32 * j]);
      const float normed = atlas::round_bf16(wf[j] * atlas::round_bf16(v[j] * inv_rms));
      o[lane + 32 * j] = atlas::f32_to_bf16(normed * (g / (1.f + expf(-g))));
    }
  }
}
