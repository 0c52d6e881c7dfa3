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

namespace {

// This thread's vector `vec` of row blockIdx.x and its 8 bias values `b`, read before the
// PDL wait; false past the rows or the row's n / 8 vectors (the thread has nothing to do).
__device__ __forceinline__ bool bias_vec(const __nv_bfloat16* __restrict__ bias, uint32_t rows,
                                         uint32_t n, uint32_t& vec, float (&b)[8]) {
  vec = blockIdx.y * blockDim.x + threadIdx.x;
  if (blockIdx.x >= rows || vec >= n / atlas::kBf16PerVec) return false;
  atlas::unpack_bf16x8(atlas::ld_prefetch(reinterpret_cast<const uint4*>(bias) + vec), b);
  atlas::pdl_enter();
  return true;
}

}  // namespace

extern "C" __global__ void __launch_bounds__(256)
bias_add_bf16(__nv_bfloat16* __restrict__ x, const __nv_bfloat16* __restrict__ bias,
              uint32_t rows, uint32_t n) {
  uint32_t vec;
  float b[8];
  if (!bias_vec(bias, rows, n, vec, b)) return;
  uint4* p = reinterpret_cast<uint4*>(x + static_cast<size_t>(blockIdx.x) * n) + vec;
  float v[8];
  atlas::unpack_bf16x8(*p, v);
#pragma unroll
  for (int i = 0; i < 8; ++i) v[i] += b[i];
  *p = atlas::pack_bf16x8(v);
}

// A projection's float32 sums x [rows, n] plus its bf16 bias, rounded once into out [rows, n]
// bf16: transformers' bf16 Linear with a bias (gpt-oss's attention projections; the sums
// come from gemv/gemm_bf16_f32_unrounded). The same launch geometry, one 8-element vector a
// thread (two 16-byte loads of x).
extern "C" __global__ void __launch_bounds__(256)
bias_add_f32_bf16(const float* __restrict__ x, const __nv_bfloat16* __restrict__ bias,
                  __nv_bfloat16* __restrict__ out, uint32_t rows, uint32_t n) {
  uint32_t vec;
  float b[8];
  if (!bias_vec(bias, rows, n, vec, b)) return;
  const size_t at = static_cast<size_t>(blockIdx.x) * n + static_cast<size_t>(vec) * 8;
  const float4 lo = *reinterpret_cast<const float4*>(x + at);
  const float4 hi = *reinterpret_cast<const float4*>(x + at + 4);
  const float v[8] = {lo.x + b[0], lo.y + b[1], lo.z + b[2], lo.w + b[3],
                      hi.x + b[4], hi.y + b[5], hi.z + b[6], hi.w + b[7]};
  *reinterpret_cast<uint4*>(out + at) = atlas::pack_bf16x8(v);
}
