// The per-vector arithmetic of the residual add + RMSNorm in transformers' numerics (rmsnorm.cu
// and the router's NormIn, moe_router.cu): r = bf16(x + delta); the sum of r^2 in f32, element
// by element in order; out = bf16(w * bf16(r * inv_rms)), or with zero-centred weights
// (Qwen3.5 / Qwen3-Next) bf16((r * inv_rms) * (1 + w)), one rounding, or (gpt-oss's
// GptOssRMSNorm: the weight times the float32 normalized row) bf16(w * (r * inv_rms)), one
// rounding. One 16-byte vector (8 bf16) a call, so both kernels sum a thread's vectors in the
// same order.
#pragma once

#include "atlas_common.cuh"
#include "bf16_vec.cuh"

namespace atlas::rmsnorm {

// bf16(x + d) of 8 packed values
__device__ __forceinline__ uint4 add_bf16x8(const uint4& x, const uint4& d) {
  float v[8], dd[8];
  atlas::unpack_bf16x8(x, v);
  atlas::unpack_bf16x8(d, dd);
#pragma unroll
  for (int e = 0; e < 8; ++e) v[e] += dd[e];
  return atlas::pack_bf16x8(v);
}

// acc plus the squares of 8 packed values, in order
__device__ __forceinline__ float sumsq_bf16x8(const uint4& r, float acc) {
  float v[8];
  atlas::unpack_bf16x8(r, v);
#pragma unroll
  for (int e = 0; e < 8; ++e) acc = fmaf(v[e], v[e], acc);
  return acc;
}

// the normalized values of 8 packed r with their weights w
__device__ __forceinline__ uint4 scale_bf16x8(const uint4& r, const uint4& w, float inv_rms,
                                              bool offset) {
  float wf[8], v[8], y[8];
  atlas::unpack_bf16x8(w, wf);
  atlas::unpack_bf16x8(r, v);
#pragma unroll
  for (int e = 0; e < 8; ++e)
    y[e] = offset ? (v[e] * inv_rms) * (1.f + wf[e]) : wf[e] * atlas::round_bf16(v[e] * inv_rms);
  return atlas::pack_bf16x8(y);
}

// The same with the weight applied to the float32 normalized values, one rounding (gpt-oss)
__device__ __forceinline__ uint4 scale_one_round_bf16x8(const uint4& r, const uint4& w,
                                                        float inv_rms) {
  float wf[8], v[8], y[8];
  atlas::unpack_bf16x8(w, wf);
  atlas::unpack_bf16x8(r, v);
#pragma unroll
  for (int e = 0; e < 8; ++e) y[e] = wf[e] * (v[e] * inv_rms);
  return atlas::pack_bf16x8(y);
}

}  // namespace atlas::rmsnorm
