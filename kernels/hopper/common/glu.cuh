// The gated activation a fused [gate | up] GEMM may end with, shared by the decode GEMMs'
// gated entries (gemm_decode_tile.cuh) and the prefill TMA GEMM's (gemm_sm90_tma.cu): one
// definition, so every fused epilogue writes the bits of the unfused pair (the GEMM's bf16
// gate_up, then silu_mul_bf16 or gelu_tanh_mul_bf16).
#pragma once

#include "bf16_vec.cuh"

namespace atlas {

// The activation a [gate | up] product ends with (the *_swiglu_* / *_geglu_* entries), or
// kNone for a plain product (ops/matmul_decode.py Glu: the same values).
enum class Glu { kNone, kSwiglu, kGeglu };

// One output of a gated epilogue: the activation of the summed gate g and up u, each rounded to
// bf16 first as the unfused GEMM stores gate_up, through the unfused activation kernel's own
// arithmetic (silu_mul_bf16: swiglu_f32; gelu_tanh_mul_bf16: geglu_tanh_f32), so the bits are
// that pair's; the caller rounds the product to bf16.
template <Glu kGlu>
__device__ __forceinline__ float glu_f32(float g, float u) {
  static_assert(kGlu != Glu::kNone, "a plain product has no activation");
  if constexpr (kGlu == Glu::kGeglu)
    return geglu_tanh_f32(round_bf16(g), round_bf16(u));
  else
    return swiglu_f32(round_bf16(g), round_bf16(u));
}

}  // namespace atlas
