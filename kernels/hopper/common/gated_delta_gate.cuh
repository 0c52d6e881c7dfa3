// The per-token gate terms of the gated delta rule, shared by its chunked and recurrent
// kernels (gated_delta.cu) and the fused decode kernel (gdn_decode.cu).
#pragma once

#include "atlas_common.cuh"

namespace atlas {

// q and k are L2-normalized as x * rsqrt(sum(x^2) + kL2Eps) (transformers' l2norm).
constexpr float kDeltaL2Eps = 1e-6f;

struct GateTerms {
  float beta, decay_log;
};

// beta and g from a token's b and a of one value head (transformers' bf16 sigmoid, f32
// softplus with torch's threshold 20).
__device__ __forceinline__ GateTerms gate_terms_of(__nv_bfloat16 b_raw, __nv_bfloat16 a_raw,
                                                   float a_log, float dt_bias) {
  const float b = bf16_to_f32(b_raw);
  const float x = bf16_to_f32(a_raw) + dt_bias;
  const float softplus = x > 20.f ? x : log1pf(expf(x));
  return {round_bf16(1.f / (1.f + expf(-b))), -expf(a_log) * softplus};
}

// beta and g of token row t, value head h: b at ba[t * ba_pitch + h], a at + hv.
__device__ __forceinline__ GateTerms gate_terms(const __nv_bfloat16* ba, uint32_t ba_pitch,
                                                int t, int h, int hv, float a_log, float dt_bias) {
  const __nv_bfloat16* r = ba + static_cast<size_t>(t) * ba_pitch;
  return gate_terms_of(r[h], r[hv + h], a_log, dt_bias);
}

}  // namespace atlas
