// Decode GEMV over NVFP4 weights: y[m, n] = sum_k x[m, k] * e2m1(q[n, k]) * e4m3(s[n, k / 16])
// * g[n], 1 <= m <= 8, dequantized in registers (weights never expanded in memory).
//
// Layout (ModelOpt / compressed-tensors NVFP4): q packed two E2M1 codes a byte [n, k / 2],
// element 2i in the low nibble; s one E4M3 scale per 16 values [n, k / 16]; g a float32 per
// output row (the checkpoint's per-tensor global scale repeated over the tensor's rows, so
// fused q|k|v or gate|up parts keep their own). A 16-byte chunk holds 32 values: two scale
// groups, kGroups = 2 in gemv_core.cuh.
//
// E2M1 -> f32 without a conversion instruction (Hopper has none): the f32 bit patterns of
// the eight magnitudes {0, .5, 1, 1.5, 2, 3, 4, 6} are zero below their top two bytes, so two
// PRMT byte lookups (8-entry tables in immediates) give the bf16 halves of four values, a
// third PRMT spreads their signs to byte msbs, and two more pack bf16 pairs; widening a
// pair is a shift and a mask. About three integer ops a value, every value exact, no
// subnormals and no folded power of two. The E4M3 group scale uses gemv_fp8's bit move
// (value * 2^-120, exact even for E4M3 subnormals since no flag flushes them), times 2^120
// (exact), times g[row] (one f32 rounding).
// Launch (ops/matmul_quant.py): grid = ceil(n / 4), block = min(256, roundup32(k / 32)).
// Preconditions: k % 32 == 0, x (or gate_up) and q 16-byte aligned, s 2-byte aligned.
#include "gemv_core.cuh"

namespace {

using namespace atlas::gemv;

// byte m of {kHi47:kHi03} / {kLo47:kLo03} = byte 3 / byte 2 of the f32 of E2M1 magnitude m
constexpr uint32_t kHi03 = 0x3F3F3F00u, kHi47 = 0x40404040u;
constexpr uint32_t kLo03 = 0xC0800000u, kLo47 = 0xC0804000u;

__device__ __forceinline__ uint32_t prmt(uint32_t a, uint32_t b, uint32_t sel) {
  uint32_t d;
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(sel));
  return d;
}

// Four E2M1 codes (bits 0..15 of q, element j in bits 4j..4j+3) -> f32.
__device__ __forceinline__ void e2m1x4_to_f32(uint32_t q, float* f) {
  const uint32_t idx = q & 0x7777u;                 // magnitudes; selector bit 3 clear
  const uint32_t hi = prmt(kHi03, kHi47, idx);      // byte j: f32 byte 3 of |value j|
  const uint32_t lo = prmt(kLo03, kLo47, idx);      // byte j: f32 byte 2 of |value j|
  const uint32_t sg = prmt(q << 4, q, 0xD9C8u);     // byte j: 0xFF if value j < 0 (sign replicate)
  const uint32_t hs = hi | (sg & 0x80808080u);
  const uint32_t p01 = prmt(lo, hs, 0x5140u);       // bf16 pair (value 0 low, value 1 high)
  const uint32_t p23 = prmt(lo, hs, 0x7362u);
  f[0] = __uint_as_float(p01 << 16);
  f[1] = __uint_as_float(p01 & 0xFFFF0000u);
  f[2] = __uint_as_float(p23 << 16);
  f[3] = __uint_as_float(p23 & 0xFFFF0000u);
}

__device__ __forceinline__ float e4m3_to_f32(uint32_t b) {  // b: one E4M3 code in bits 0..7
  return __uint_as_float(((b & 0x7fu) << 20) | ((b & 0x80u) << 24)) * 0x1p120f;
}

struct Nvfp4W {  // q [n, k / 2] packed E2M1, 32 values a chunk, two 16-value scale groups
  static constexpr int kSub = 4;
  static constexpr int kGroups = 2;
  static constexpr bool kScaled = true;
  const uint16_t* scale_pairs;  // s viewed as [n, k / 32] pairs of E4M3 codes
  const float* row_scale;       // g [n]
  uint32_t pairs_per_row;       // k / 32
  // scale group g (values 16 g .. 16 g + 15) of a chunk
  __device__ __forceinline__ void widen(const uint4& v, int g, float (&wf)[16]) const {
    const uint32_t lo = g == 0 ? v.x : v.z, hi = g == 0 ? v.y : v.w;
    e2m1x4_to_f32(lo, wf);
    e2m1x4_to_f32(lo >> 16, wf + 4);
    e2m1x4_to_f32(hi, wf + 8);
    e2m1x4_to_f32(hi >> 16, wf + 12);
  }
  __device__ __forceinline__ void chunk_scales(int row, int c, float (&s)[2]) const {
    const uint32_t pair = __ldg(scale_pairs + static_cast<size_t>(row) * pairs_per_row + c);
    const float g = __ldg(row_scale + row);
    s[0] = e4m3_to_f32(pair & 0xffu) * g;
    s[1] = e4m3_to_f32(pair >> 8) * g;
  }
};

__device__ __forceinline__ Nvfp4W nvfp4_fmt(const uint8_t* scale, const float* row_scale,
                                            uint32_t k) {
  return {reinterpret_cast<const uint16_t*>(scale), row_scale, k >> 5};
}

__shared__ float partial_sums[kMaxThreads / 32][kMaxAcc];  // [warp][m * 4 + r]

}  // namespace

#define ATLAS_NVFP4_ARGS \
  const uint8_t *scale, const float *row_scale, __nv_bfloat16 *y, uint32_t m, uint32_t n, uint32_t k

extern "C" __global__ void __launch_bounds__(kMaxThreads)
    gemv_nvfp4_bf16(const __nv_bfloat16* x, const uint8_t* w, ATLAS_NVFP4_ARGS) {
  gemv_any_m<false>(plain_x(x, k), nvfp4_fmt(scale, row_scale, k), w, y, m, n, k, partial_sums);
}

// m == 1 only: the single-row instantiation alone keeps registers low (more blocks per SM).
extern "C" __global__ void __launch_bounds__(kMaxThreads)
    gemv_nvfp4_bf16_single(const __nv_bfloat16* x, const uint8_t* w, ATLAS_NVFP4_ARGS) {
  if (m != 1) __trap();
  gemv_rows<1, false>(plain_x(x, k), nvfp4_fmt(scale, row_scale, k), w, y, n, k, partial_sums);
}

// The MLP down projection with SwiGLU fused into the x load (gate_up [m, 2k] = [gate | up]).
extern "C" __global__ void __launch_bounds__(kMaxThreads, 1)
    gemv_silu_nvfp4_bf16(const __nv_bfloat16* gate_up, const uint8_t* w, ATLAS_NVFP4_ARGS) {
  gemv_any_m<false>(swiglu_x(gate_up, k), nvfp4_fmt(scale, row_scale, k), w, y, m, n, k,
                    partial_sums);
}

extern "C" __global__ void __launch_bounds__(kMaxThreads, 1)
    gemv_silu_nvfp4_bf16_single(const __nv_bfloat16* gate_up, const uint8_t* w,
                                ATLAS_NVFP4_ARGS) {
  if (m != 1) __trap();
  gemv_rows<1, false>(swiglu_x(gate_up, k), nvfp4_fmt(scale, row_scale, k), w, y, n, k,
                      partial_sums);
}

// Dequantize to bf16 (w_out[n, k] = bf16(e2m1 * f32(e4m3 * g))) for row counts the GEMV
// does not take: the prefill GEMM then runs on the bf16 copy. One thread per 32 values.
extern "C" __global__ void __launch_bounds__(256)
    dequant_nvfp4_bf16(const uint8_t* w, const uint8_t* scale, const float* row_scale,
                       __nv_bfloat16* w_out, uint32_t n, uint32_t k) {
  atlas::pdl_enter();
  const uint32_t kc = k >> 5;
  const size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= static_cast<size_t>(n) * kc) return;
  const int row = static_cast<int>(i / kc), c = static_cast<int>(i % kc);
  const Nvfp4W fmt = nvfp4_fmt(scale, row_scale, k);
  const uint4 v = __ldg(reinterpret_cast<const uint4*>(w) + i);
  float s[2];
  fmt.chunk_scales(row, c, s);
  uint4* out = reinterpret_cast<uint4*>(w_out) + 4 * i;
#pragma unroll
  for (int g = 0; g < 2; ++g) {
    float wf[16];
    fmt.widen(v, g, wf);
#pragma unroll
    for (int e = 0; e < 16; ++e) wf[e] *= s[g];
    out[2 * g] = atlas::pack_bf16x8(*reinterpret_cast<float(*)[8]>(wf));
    out[2 * g + 1] = atlas::pack_bf16x8(*reinterpret_cast<float(*)[8]>(wf + 8));
  }
}
