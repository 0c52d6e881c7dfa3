// 16-byte bf16 vectors: eight bf16 values moved as one uint4 and widened to f32 for math.
// Shared by the elementwise kernels and the GEMV; loads stay 128-bit and coalesced.
#pragma once

#include "atlas_common.cuh"

namespace atlas {

constexpr int kBf16PerVec = 8;

// Widening bf16 -> f32 is exact: the bf16 bits are the high half of the f32 bits.
__device__ __forceinline__ void unpack_bf16x2(uint32_t w, float& lo, float& hi) {
  lo = __uint_as_float(w << 16);
  hi = __uint_as_float(w & 0xffff0000u);
}

__device__ __forceinline__ uint32_t pack_bf16x2(float lo, float hi) {
  return static_cast<uint32_t>(__bfloat16_as_ushort(__float2bfloat16_rn(lo))) |
         (static_cast<uint32_t>(__bfloat16_as_ushort(__float2bfloat16_rn(hi))) << 16);
}

__device__ __forceinline__ void unpack_bf16x8(const uint4& v, float (&f)[8]) {
  unpack_bf16x2(v.x, f[0], f[1]);
  unpack_bf16x2(v.y, f[2], f[3]);
  unpack_bf16x2(v.z, f[4], f[5]);
  unpack_bf16x2(v.w, f[6], f[7]);
}

// acc + the sum over the 8 elements of two 16-byte bf16 vectors' products (in order).
__device__ __forceinline__ float dot8(const uint4& a, const uint4& b, float acc) {
  float af[8], bf[8];
  unpack_bf16x8(a, af);
  unpack_bf16x8(b, bf);
#pragma unroll
  for (int e = 0; e < 8; ++e) acc = fmaf(af[e], bf[e], acc);
  return acc;
}

// Round each float to bf16 (nearest even) and pack eight of them into one uint4.
__device__ __forceinline__ uint4 pack_bf16x8(const float (&f)[8]) {
  return make_uint4(pack_bf16x2(f[0], f[1]), pack_bf16x2(f[2], f[3]), pack_bf16x2(f[4], f[5]),
                    pack_bf16x2(f[6], f[7]));
}

// Each of eight bf16 values times `scale` in f32, rounded to bf16 once (nearest even): the
// embedding lookup's scale (Gemma's embed * bf16(sqrt(hidden))), embedding.cu and rmsnorm.cu's
// embed_rmsnorm alike.
__device__ __forceinline__ uint4 scale_bf16x8(uint4 v, float scale) {
  __nv_bfloat162* h = reinterpret_cast<__nv_bfloat162*>(&v);
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    const float2 f = __bfloat1622float2(h[e]);
    h[e] = __floats2bfloat162_rn(f.x * scale, f.y * scale);
  }
  return v;
}

// SwiGLU of eight (gate, up) pairs with transformers' bf16 op boundaries:
// bf16(silu(g)) * u for bf16 values g, u, silu(g) = g / (1 + exp(-g)) in f32; the caller
// rounds the product to bf16. The one definition behind silu_mul_bf16, the down-projection
// GEMV that fuses it and the quantized gate_up GEMV that ends with it, so all round alike.
__device__ __forceinline__ float swiglu_f32(float g, float u) {
  return round_bf16(g / (1.f + expf(-g))) * u;
}

// Gated attention's output gate (Qwen3.5, Qwen3-Next) with transformers' bf16 op boundaries:
// x * bf16(sigmoid(g)) for bf16 values x, g (the sigmoid's IEEE division in f32); the caller
// rounds the product to bf16. The one definition behind sigmoid_gate_mul_bf16, the o_proj
// GEMV that gates its x load (gemv.cu AttnGateX) and the gated decode attention that gates as
// it writes (attention_long.cu kGated), so all three round alike.
__device__ __forceinline__ float sigmoid_gated(float x, float g) {
  return x * round_bf16(1.f / (1.f + expf(-g)));
}

// Eight (gate, up) pairs through a gated activation `Act` (swiglu_f32, geglu_tanh_f32).
template <float (*Act)(float, float)>
__device__ __forceinline__ uint4 glu_bf16x8(const uint4& gate, const uint4& up) {
  float g[8], u[8], y[8];
  unpack_bf16x8(gate, g);
  unpack_bf16x8(up, u);
#pragma unroll
  for (int e = 0; e < 8; ++e) y[e] = Act(g[e], u[e]);
  return pack_bf16x8(y);
}

__device__ __forceinline__ uint4 swiglu_bf16x8(const uint4& gate, const uint4& up) {
  return glu_bf16x8<swiglu_f32>(gate, up);
}

// GeGLU (Gemma's gelu_pytorch_tanh) with the same op boundaries: bf16(gelu(g)) * u, gelu(g) =
// 0.5 g (1 + tanh(sqrt(2 / pi) (g + 0.044715 g^3))) in f32, as PyTorch's tanh GELU computes
// it for a bf16 tensor; the caller rounds the product to bf16.
__device__ __forceinline__ float geglu_tanh_f32(float g, float u) {
  const float inner = 0.7978845608028654f * (g + 0.044715f * g * g * g);
  return round_bf16(0.5f * g * (1.f + tanhf(inner))) * u;
}

__device__ __forceinline__ uint4 geglu_tanh_bf16x8(const uint4& gate, const uint4& up) {
  return glu_bf16x8<geglu_tanh_f32>(gate, up);
}

}  // namespace atlas
