// The expert epilogue of gpt-oss (ops/moe.py ExpertEpilogue; kernel_abi.py
// MOE_GATE_UP_EPILOGUE, MOE_DOWN_SUM_BIAS and the grouped GEMMs' _EPILOGUE / _BIAS twins):
// per-expert biases added to the bf16 gate/up and down products, each sum rounded to bf16
// (transformers adds them after its grouped product), and the clamped GLU in transformers'
// bf16 steps. The plain entries are the same templates without it (their code unchanged); a
// twin given an empty epilogue (null bias, glu_limit 0) computes the plain entry's values. The
// GLU's expf, like the SwiGLU's, is within an ulp of the reference's float32 exponential.
#pragma once

#include "atlas_common.cuh"
#include "bf16_vec.cuh"

namespace atlas::moe {

// The epilogue's launch arguments: `bias` bf16 [experts, 2 inter] (gate/up: an expert's gate
// entries, then its up entries) or [experts, hidden] (down), null: none; the clamped GLU
// where limit > 0 (alpha its sigmoid gain), else the plain SwiGLU.
struct Epilogue {
  const __nv_bfloat16* bias;
  float alpha;
  float limit;

  __device__ __forceinline__ bool active() const { return bias != nullptr || limit > 0.f; }
};

// gpt-oss's GLU of bf16-valued g and u: g = min(g, limit), u = clamp(u, -limit, limit),
// act = bf16(u + 1) * bf16(g * bf16(sigmoid(bf16(alpha g)))), rounded to bf16 by the caller
__device__ __forceinline__ float clamped_glu(float g, float u, float alpha, float limit) {
  g = atlas::round_bf16(fminf(g, limit));
  u = atlas::round_bf16(fminf(fmaxf(u, -limit), limit));
  const float t = atlas::round_bf16(g * alpha);
  const float sig = atlas::round_bf16(1.f / (1.f + expf(-t)));
  return atlas::round_bf16(u + 1.f) * atlas::round_bf16(g * sig);
}

// Column i of expert e's act from its bf16-rounded gate and up sums g and u (inter columns an
// expert): the bias (bias + e * 2 inter) added in bf16, then the GLU the epilogue names.
__device__ __forceinline__ float epilogue_act(float g, float u, const Epilogue& epi, int e, int i,
                                              int inter) {
  if (epi.bias != nullptr) {
    const __nv_bfloat16* b = epi.bias + static_cast<size_t>(e) * 2 * inter;
    g = atlas::round_bf16(g + __bfloat162float(b[i]));
    u = atlas::round_bf16(u + __bfloat162float(b[inter + i]));
  }
  return epi.limit > 0.f ? clamped_glu(g, u, epi.alpha, epi.limit) : atlas::swiglu_f32(g, u);
}

// An expert's bf16-rounded down sum y of output row n plus its bias (bias + e * hidden), in
// bf16; y itself without one.
__device__ __forceinline__ float epilogue_down(float y, const __nv_bfloat16* bias, int e, int n,
                                               int hidden) {
  if (bias == nullptr) return y;
  return atlas::round_bf16(y + __bfloat162float(bias[static_cast<size_t>(e) * hidden + n]));
}

}  // namespace atlas::moe
