// SwiGLU activation: gate_up is [rows, 2*inter] = [gate | up], out is [rows, inter],
//   out = bf16(bf16(silu(gate)) * up), silu(g) = g / (1 + exp(-g)) in f32,
// i.e. transformers' `act_fn(gate_proj(x)) * up_proj(x)` with its bf16 op boundaries; and
// GeGLU (gelu_tanh_mul_bf16: Gemma's gelu_pytorch_tanh in place of silu, the same rows).
//
// Launch: grid = (rows, ceil(inter / 8 / blockDim.x)), block = 32..256 threads; inter % 8 == 0.
// Each thread handles one 16-byte vector of gate and the matching vector of up.
#include "atlas_common.cuh"
#include "bf16_vec.cuh"

namespace {

// kEarly: silu_mul_early_bf16, which lets the down projection after it launch before its own
// wait (atlas_common.cuh pdl_enter_early; ops/early_trigger.py routes batched steps to it).
// kGelu: gelu_tanh_mul_bf16 (bf16_vec.cuh geglu_tanh_bf16x8) instead of the SwiGLU.
template <bool kEarly, bool kGelu = false>
__device__ __forceinline__ void silu_mul(const __nv_bfloat16* __restrict__ gate_up,
                                         __nv_bfloat16* __restrict__ out, uint32_t rows,
                                         uint32_t inter) {
  const uint32_t row = blockIdx.x;
  const uint32_t vec = blockIdx.y * blockDim.x + threadIdx.x;
  if (row >= rows || vec >= inter / atlas::kBf16PerVec) return;
  atlas::pdl_enter_early<kEarly>();
  const __nv_bfloat16* gate = gate_up + static_cast<size_t>(row) * 2 * inter;
  const uint4 g = reinterpret_cast<const uint4*>(gate)[vec];
  const uint4 u = reinterpret_cast<const uint4*>(gate + inter)[vec];
  reinterpret_cast<uint4*>(out + static_cast<size_t>(row) * inter)[vec] =
      kGelu ? atlas::geglu_tanh_bf16x8(g, u) : atlas::swiglu_bf16x8(g, u);
}

}  // namespace

extern "C" __global__ void __launch_bounds__(256)
silu_mul_bf16(const __nv_bfloat16* __restrict__ gate_up, __nv_bfloat16* __restrict__ out,
              uint32_t rows, uint32_t inter) {
  silu_mul<false>(gate_up, out, rows, inter);
}

extern "C" __global__ void __launch_bounds__(256)
gelu_tanh_mul_bf16(const __nv_bfloat16* __restrict__ gate_up, __nv_bfloat16* __restrict__ out,
                   uint32_t rows, uint32_t inter) {
  silu_mul<false, true>(gate_up, out, rows, inter);
}

extern "C" __global__ void __launch_bounds__(256)
silu_mul_early_bf16(const __nv_bfloat16* __restrict__ gate_up, __nv_bfloat16* __restrict__ out,
                    uint32_t rows, uint32_t inter) {
  silu_mul<true>(gate_up, out, rows, inter);
}
