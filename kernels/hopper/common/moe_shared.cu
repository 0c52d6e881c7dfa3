// The shared expert of a Qwen2-MoE-style block, gated and added to the routed experts' sum:
//   out[t, :] = bf16(routed[t, :] + bf16(bf16(sigmoid(gate[t * gate_stride])) * shared[t, :]))
// i.e. transformers' `expert_output + F.sigmoid(shared_expert_gate(x)) * shared_expert(x)`
// with its bf16 op boundaries. gate holds the gate logit as the f32-output GEMV/GEMM writes
// it (the bf16-rounded product widened to f32); gate_stride lets the gate's weight matrix be
// padded to the GEMM's multiple-of-16 columns. A null gate is an ungated shared expert
// (GLM-4.5's `hidden_states + shared_experts(x)`): scale 1, out = bf16(routed + shared). out
// may alias routed (each element is read once, by the thread that writes it).
//
// Launch: grid = (tokens, ceil(hidden / 8 / blockDim.x)), block = 32..256; hidden % 8 == 0.
#include "atlas_common.cuh"
#include "bf16_vec.cuh"

extern "C" __global__ void __launch_bounds__(256)
moe_shared_add_bf16(const __nv_bfloat16* routed, const __nv_bfloat16* __restrict__ shared,
                    const float* __restrict__ gate, __nv_bfloat16* out, uint32_t tokens,
                    uint32_t hidden, uint32_t gate_stride) {
  const uint32_t t = blockIdx.x;
  const uint32_t vec = blockIdx.y * blockDim.x + threadIdx.x;
  if (t >= tokens || vec >= hidden / atlas::kBf16PerVec) return;
  atlas::pdl_enter();
  const float scale =
      gate == nullptr
          ? 1.f
          : atlas::round_bf16(1.f / (1.f + expf(-gate[static_cast<size_t>(t) * gate_stride])));
  const size_t row = static_cast<size_t>(t) * hidden;
  float r[8], s[8];
  atlas::unpack_bf16x8(reinterpret_cast<const uint4*>(routed + row)[vec], r);
  atlas::unpack_bf16x8(reinterpret_cast<const uint4*>(shared + row)[vec], s);
#pragma unroll
  for (int e = 0; e < 8; ++e) r[e] += atlas::round_bf16(scale * s[e]);
  reinterpret_cast<uint4*>(out + row)[vec] = atlas::pack_bf16x8(r);
}
