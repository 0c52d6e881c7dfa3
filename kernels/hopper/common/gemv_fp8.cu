// Decode GEMV over FP8 E4M3 weights: y[m, n] = sum_k x[m, k] * q[n, k] * s(n, k), 1 <= m <= 8,
// with the weights dequantized in registers (never expanded in memory).
//
// One kernel serves every FP8 scale layout through the scale's index map
//   s(n, k) = scale[(n >> row_shift) * row_stride + (k >> col_shift) * col_stride]
// 128x128 blocks (Qwen3 FP8 releases): row_shift = col_shift = 7, row_stride = ceil(k / 128),
// col_stride = 1; per output channel: row_shift = 0, row_stride = 1, col_stride = 0; per
// tensor: both strides 0. A 16-byte weight chunk holds 16 values, all under one scale (column
// blocks are at least 16 wide), so each chunk's dot product is scaled once.
//
// E4M3 -> f32 without conversion instructions: the 7 magnitude bits go to f32 bits 26..20
// and the sign to bit 31, which is the E4M3 value times 2^-120 exactly (E4M3 subnormals become
// f32 subnormals, exact since no kernel here flushes them); 2^120 is folded into the scale.
// Three integer ops a value, no pressure on the conversion units.
// Launch (ops/matmul_quant.py): grid = ceil(n / 4), block = min(256, roundup32(k / 16)).
// Preconditions: k % 16 == 0, x (or gate_up) and w 16-byte aligned, 16 <= 2^col_shift.
#include "gemv_core.cuh"

namespace {

using namespace atlas::gemv;

__device__ __forceinline__ void e4m3x4_scaled_down(uint32_t w, float* f) {
  f[0] = __uint_as_float(((w << 20) & 0x07f00000u) | ((w << 24) & 0x80000000u));
  f[1] = __uint_as_float(((w << 12) & 0x07f00000u) | ((w << 16) & 0x80000000u));
  f[2] = __uint_as_float(((w << 4) & 0x07f00000u) | ((w << 8) & 0x80000000u));
  f[3] = __uint_as_float(((w >> 4) & 0x07f00000u) | (w & 0x80000000u));
}

struct Fp8W {  // w [n, k] E4M3 bytes, 16 values a chunk, one scale a chunk
  static constexpr int kSub = 2;
  static constexpr int kGroups = 1;
  static constexpr bool kScaled = true;
  const float* scales;
  uint32_t row_shift, row_stride, col_shift, col_stride;
  __device__ __forceinline__ void widen(const uint4& v, int, float (&wf)[16]) const {
    e4m3x4_scaled_down(v.x, wf);
    e4m3x4_scaled_down(v.y, wf + 4);
    e4m3x4_scaled_down(v.z, wf + 8);
    e4m3x4_scaled_down(v.w, wf + 12);
  }
  __device__ __forceinline__ float scale(int row, int c) const {
    const uint32_t col = static_cast<uint32_t>(c) << 4;
    return __ldg(scales + (static_cast<uint32_t>(row) >> row_shift) * row_stride +
                 (col >> col_shift) * col_stride) * 0x1p120f;
  }
  __device__ __forceinline__ void chunk_scales(int row, int c, float (&s)[1]) const {
    s[0] = scale(row, c);
  }
};

__shared__ float partial_sums[kMaxThreads / 32][kMaxAcc];  // [warp][m * 4 + r]

}  // namespace

#define ATLAS_FP8_ARGS                                                                   \
  const float *scale, __nv_bfloat16 *y, uint32_t m, uint32_t n, uint32_t k,              \
      uint32_t row_shift, uint32_t row_stride, uint32_t col_shift, uint32_t col_stride
#define ATLAS_FP8_FMT (Fp8W{scale, row_shift, row_stride, col_shift, col_stride})

extern "C" __global__ void __launch_bounds__(kMaxThreads)
    gemv_fp8_bf16(const __nv_bfloat16* x, const uint8_t* w, ATLAS_FP8_ARGS) {
  gemv_any_m<false>(plain_x(x, k), ATLAS_FP8_FMT, w, y, m, n, k, partial_sums);
}

// m == 1 only: the single-row instantiation alone keeps registers low (more blocks per SM).
extern "C" __global__ void __launch_bounds__(kMaxThreads)
    gemv_fp8_bf16_single(const __nv_bfloat16* x, const uint8_t* w, ATLAS_FP8_ARGS) {
  if (m != 1) __trap();
  gemv_rows<1, false>(plain_x(x, k), ATLAS_FP8_FMT, w, y, n, k, partial_sums);
}

// The MLP down projection with SwiGLU fused into the x load (gate_up [m, 2k] = [gate | up]).
extern "C" __global__ void __launch_bounds__(kMaxThreads, 1)
    gemv_silu_fp8_bf16(const __nv_bfloat16* gate_up, const uint8_t* w, ATLAS_FP8_ARGS) {
  gemv_any_m<false>(swiglu_x(gate_up, k), ATLAS_FP8_FMT, w, y, m, n, k, partial_sums);
}

extern "C" __global__ void __launch_bounds__(kMaxThreads, 1)
    gemv_silu_fp8_bf16_single(const __nv_bfloat16* gate_up, const uint8_t* w, ATLAS_FP8_ARGS) {
  if (m != 1) __trap();
  gemv_rows<1, false>(swiglu_x(gate_up, k), ATLAS_FP8_FMT, w, y, n, k, partial_sums);
}

// Dequantize to bf16 (w_out[n, k] = bf16(q * s)) for row counts the GEMV does not take: the
// prefill GEMM then runs on the bf16 copy in a scratch buffer. One thread per 16 values.
extern "C" __global__ void __launch_bounds__(256)
    dequant_fp8_bf16(const uint8_t* w, const float* scale, __nv_bfloat16* w_out, uint32_t n,
                     uint32_t k, uint32_t row_shift, uint32_t row_stride, uint32_t col_shift,
                     uint32_t col_stride) {
  atlas::pdl_enter();
  const uint32_t kc = k >> 4;
  const size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= static_cast<size_t>(n) * kc) return;
  const int row = static_cast<int>(i / kc), c = static_cast<int>(i % kc);
  const Fp8W fmt{scale, row_shift, row_stride, col_shift, col_stride};
  float wf[16];
  fmt.widen(__ldg(reinterpret_cast<const uint4*>(w) + i), 0, wf);
  const float s = fmt.scale(row, c);
#pragma unroll
  for (int e = 0; e < 16; ++e) wf[e] *= s;
  uint4* out = reinterpret_cast<uint4*>(w_out) + 2 * i;
  out[0] = atlas::pack_bf16x8(*reinterpret_cast<float(*)[8]>(wf));
  out[1] = atlas::pack_bf16x8(*reinterpret_cast<float(*)[8]>(wf + 8));
}
