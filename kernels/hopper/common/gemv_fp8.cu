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
//
// The `_cvt` entry point (batch 1: ops/matmul_quant.uses_core_single, ATLAS_QUANT_FP8_CORE)
// decodes with the hardware convert instead: cvt.rn.f16x2.e4m3x2 turns two codes into an
// exact f16 pair (one F2FP), each half widens exactly to f32 (HADD2.F32, FMA pipe): 1.5
// instructions a value, none on the half-rate integer pipe. Why: at copy bandwidth an SM
// receives ~16 weight bytes a cycle (4,267 GB/s / 132 SMs / 1.98 GHz) and issues 128
// thread-instructions; the integer decode's ~3 integer ops a value need 48 of the integer
// pipe's 64 lanes a cycle (75% busy before any address or FMA work), so this GEMV streamed at
// ~38% of copy. With the convert a 16-byte chunk costs 8 F2FP + 16 HADD2.F32 + 16 FFMA + the
// load, the scale FMA and x amortized over the block's 4 rows: ~48 instructions, 3 a byte,
// ~38% of issue at copy bandwidth, 26% of the FMA pipe, 8 converts a cycle. That is the bf16
// GEMV's mould (gemv_core.cuh: ~1,500 blocks of 4 rows on qkv, weights requested before the
// PDL wait, 16-byte loads coalesced along K) at an instruction budget the bf16 GEMV (8 values
// a chunk, 2 unpack + 1 FFMA each) also spends per byte, which streams at ~85% of copy.
// The products are exact either way (E4M3 values are f16 normals); the convert also keeps
// them out of the f32 subnormals the 2^-120 decode can produce for tiny x.
// Launch (ops/matmul_quant.py): grid = ceil(n / 4), block = min(256, roundup32(k / 16));
// the `_cvt` entry point min(256, roundup32(k / 32)) (two chunks a row per thread: gemv_core's
// kUnroll, all of them used, and 4-warp blocks: more of them resident per SM).
// Preconditions: k % 16 == 0, x (or gate_up) and w 16-byte aligned, 16 <= 2^col_shift.
#include <cuda_fp16.h>

#include "gemv_core.cuh"

namespace {

using namespace atlas::gemv;

__device__ __forceinline__ void e4m3x4_scaled_down(uint32_t w, float* f) {
  f[0] = __uint_as_float(((w << 20) & 0x07f00000u) | ((w << 24) & 0x80000000u));
  f[1] = __uint_as_float(((w << 12) & 0x07f00000u) | ((w << 16) & 0x80000000u));
  f[2] = __uint_as_float(((w << 4) & 0x07f00000u) | ((w << 8) & 0x80000000u));
  f[3] = __uint_as_float(((w >> 4) & 0x07f00000u) | (w & 0x80000000u));
}

// Four E4M3 codes -> their exact f32 values: two hardware converts to f16 pairs, widened.
__device__ __forceinline__ void e4m3x4_cvt(uint32_t w, float* f) {
  uint32_t lo, hi;
  asm("{\n .reg .b16 a, b;\n mov.b32 {a, b}, %2;\n cvt.rn.f16x2.e4m3x2 %0, a;\n"
      " cvt.rn.f16x2.e4m3x2 %1, b;\n}"
      : "=r"(lo), "=r"(hi) : "r"(w));
  const __half2 l = *reinterpret_cast<const __half2*>(&lo);
  const __half2 h = *reinterpret_cast<const __half2*>(&hi);
  f[0] = __low2float(l);
  f[1] = __high2float(l);
  f[2] = __low2float(h);
  f[3] = __high2float(h);
}

// w [n, k] E4M3 bytes, 16 values a chunk, one scale a chunk; kCvt: decoded by the hardware
// convert (exact values) instead of the integer moves (values times 2^-120, the factor
// folded into the scale)
template <bool kCvt>
struct Fp8W {
  static constexpr int kSub = 2;
  static constexpr int kGroups = 1;
  static constexpr bool kScaled = true;
  const float* scales;
  uint32_t row_shift, row_stride, col_shift, col_stride;
  __device__ __forceinline__ void widen(const uint4& v, int, float (&wf)[16]) const {
    const uint32_t words[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      if constexpr (kCvt)
        e4m3x4_cvt(words[i], wf + 4 * i);
      else
        e4m3x4_scaled_down(words[i], wf + 4 * i);
    }
  }
  __device__ __forceinline__ float scale(int row, int c) const {
    const uint32_t col = static_cast<uint32_t>(c) << 4;
    return __ldg(scales + (static_cast<uint32_t>(row) >> row_shift) * row_stride +
                 (col >> col_shift) * col_stride) * (kCvt ? 1.f : 0x1p120f);
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
#define ATLAS_FP8_FMT (Fp8W<false>{scale, row_shift, row_stride, col_shift, col_stride})
#define ATLAS_FP8_CVT_FMT (Fp8W<true>{scale, row_shift, row_stride, col_shift, col_stride})

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

// m == 1 on the hardware E4M3 convert (see the top of this file): the batch-1 route of
// ops/matmul_quant.uses_core_single. Launch bounds: 64 registers or fewer on sm_90a, so eight
// 4-warp blocks (k <= 4096: 32 warps, 128 KiB of weights in flight) or four 8-warp ones fit
// an SM; sm_121 (gb10) spills under 64 (92 bytes): 80 there, three 8-warp blocks.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 1000
constexpr int kCvtBlocksPerSm = 3;
#else
constexpr int kCvtBlocksPerSm = 4;
#endif
extern "C" __global__ void __launch_bounds__(kMaxThreads, kCvtBlocksPerSm)
    gemv_fp8_cvt_bf16_single(const __nv_bfloat16* x, const uint8_t* w, ATLAS_FP8_ARGS) {
  if (m != 1) __trap();
  gemv_rows<1, false>(plain_x(x, k), ATLAS_FP8_CVT_FMT, w, y, n, k, partial_sums);
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
  const Fp8W<false> fmt{scale, row_shift, row_stride, col_shift, col_stride};
  float wf[16];
  fmt.widen(__ldg(reinterpret_cast<const uint4*>(w) + i), 0, wf);
  const float s = fmt.scale(row, c);
#pragma unroll
  for (int e = 0; e < 16; ++e) wf[e] *= s;
  uint4* out = reinterpret_cast<uint4*>(w_out) + 2 * i;
  out[0] = atlas::pack_bf16x8(*reinterpret_cast<float(*)[8]>(wf));
  out[1] = atlas::pack_bf16x8(*reinterpret_cast<float(*)[8]>(wf + 8));
}
