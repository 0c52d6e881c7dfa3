// Projection bias: x[r, c] = bf16(f32(x[r, c]) + f32(bias[c])) in place over x [rows, n],
// the q/k/v biases of Qwen2-family attention added to the qkv projection's bf16 output (one
// launch whatever the projection's route or weight format; transformers rounds the biased
// product once, so this is within one bf16 rounding of it: docs/kernels.md).
//
// Launch: grid = (rows, ceil(n / 8 / blockDim.x)), block = 32..256 threads; n % 8 == 0.
// Each thread adds one 16-byte vector. The bias (a weight: no kernel writes it) is read
// before the PDL wait, under the projection's tail.
#include "atlas_common.cuh"
#include "bf16_vec.cuh"

extern "C" __global__ void __launch_bounds__(256)
bias_add_bf16(__nv_bfloat16* __restrict__ x, const __nv_bfloat16* __restrict__ bias,
              uint32_t rows, uint32_t n) {
  const uint32_t row = blockIdx.x;
  const uint32_t vec = blockIdx.y * blockDim.x + threadIdx.x;
  if (row >= rows || vec >= n / atlas::kBf16PerVec) return;
  float b[8];
  atlas::unpack_bf16x8(atlas::ld_prefetch(reinterpret_cast<const uint4*>(bias) + vec), b);
  atlas::pdl_enter();
  uint4* p = reinterpret_cast<uint4*>(x + static_cast<size_t>(row) * n) + vec;
  float v[8];
  atlas::unpack_bf16x8(*p, v);
#pragma unroll
  for (int i = 0; i < 8; ++i) v[i] += b[i];
  *p = atlas::pack_bf16x8(v);
}
