// The sigmoid output gate of gated full attention (Qwen3.5, Qwen3-Next), in transformers'
// bf16 ops: out[t, h*D + d] = bf16(x[t, h*D + d] * bf16(sigmoid(gate[t*gate_pitch + h*head_pitch + d]))).
// The gate of head h follows its query in the q projection, so `gate` points at the first
// gate element of the qkv row and heads are head_pitch (2 * D) apart.
//
// Launch: grid (ceil(heads * D / blockDim.x), tokens), one element per thread (ops/gating.py).
// out may alias x: each element is read and written by the same thread.
#include "atlas_common.cuh"
#include "bf16_vec.cuh"

namespace {

// kEarly: sigmoid_gate_mul_early_bf16, which lets the o_proj after it launch before its own
// wait (atlas_common.cuh pdl_enter_early; ops/early_trigger.py routes batched steps to it).
template <bool kEarly>
__device__ __forceinline__ void sigmoid_gate_mul(const __nv_bfloat16* x,
                                                 const __nv_bfloat16* __restrict__ gate,
                                                 __nv_bfloat16* out, uint32_t tokens,
                                                 uint32_t heads, uint32_t head_dim,
                                                 uint32_t gate_pitch, uint32_t head_pitch) {
  atlas::pdl_enter_early<kEarly>();  // x and gate come from the kernels before this one
  const uint32_t t = blockIdx.y;
  const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= tokens || i >= heads * head_dim) return;
  const uint32_t h = i / head_dim, d = i % head_dim;
  const float g = atlas::bf16_to_f32(gate[static_cast<size_t>(t) * gate_pitch +
                                          static_cast<size_t>(h) * head_pitch + d]);
  const size_t at = static_cast<size_t>(t) * heads * head_dim + i;
  out[at] = atlas::f32_to_bf16(atlas::sigmoid_gated(atlas::bf16_to_f32(x[at]), g));
}

}  // namespace

extern "C" __global__ void __launch_bounds__(256)
sigmoid_gate_mul_bf16(const __nv_bfloat16* x, const __nv_bfloat16* __restrict__ gate,
                      __nv_bfloat16* out, uint32_t tokens, uint32_t heads, uint32_t head_dim,
                      uint32_t gate_pitch, uint32_t head_pitch) {
  sigmoid_gate_mul<false>(x, gate, out, tokens, heads, head_dim, gate_pitch, head_pitch);
}

extern "C" __global__ void __launch_bounds__(256)
sigmoid_gate_mul_early_bf16(const __nv_bfloat16* x, const __nv_bfloat16* __restrict__ gate,
                            __nv_bfloat16* out, uint32_t tokens, uint32_t heads,
                            uint32_t head_dim, uint32_t gate_pitch, uint32_t head_pitch) {
  sigmoid_gate_mul<true>(x, gate, out, tokens, heads, head_dim, gate_pitch, head_pitch);
}
