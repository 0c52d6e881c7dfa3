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
// the eight magnitudes {0, .5, 1, 1.5, 2, 3, 4, 6} are zero below their top two bytes, so
// PRMT byte lookups give exact bf16 pairs (quant_decode.cuh e2m1x8_to_bf16x2, with the
// unscaled table) and widening a pair is a shift and a mask. About 2.5 integer ops a value,
// every value exact. The E4M3 group scale is e4m3_to_f32 (exact, subnormals included)
// times g[row] (one f32 rounding).
// Launch (ops/matmul_quant.py): grid = ceil(n / 4), block = min(256, roundup32(k / 32)).
// Preconditions: k % 32 == 0, x (or gate_up) and q 16-byte aligned, s 2-byte aligned.
#include "gemv_core.cuh"
#include "gemv_h2.cuh"
#include "quant_decode.cuh"

// The batch-1 h2 GEMV decodes E2M1 through the E4M3 convert (quant_decode.cuh): 9 integer
// instructions and 4 converts per 8 codes, all but two (IMAD.SHL) on the half-rate ALU pipe,
// which a batch-1 NVFP4 GEMV at copy bandwidth keeps ~90% busy. gpu80 (2026-12-04, Qwen3-8B
// NVFP4 batch 1 x 512, GPU ms a step) put the convert ahead of the byte table (13 integer
// instructions): 2.545 / 2.542 vs 2.574 / 2.577. Its pairs come in the split order (v0, v2)
// (v4, v6) (v1, v3) (v5, v7) (e2m1x8_to_f16x2_split), x's pairs built to match, which drops
// the two interleaving PRMTs of x's own order; -D ATLAS_NVFP4_H2_SPLIT=0 builds the own-order
// decode (e2m1x8_to_f16x2_cvt), its A/B.
#ifndef ATLAS_NVFP4_H2_SPLIT
#define ATLAS_NVFP4_H2_SPLIT 1
#endif

namespace {

using namespace atlas::gemv;
using atlas::quant::E2m1Lut;
using atlas::quant::e4m3_to_f32;

struct Nvfp4W {  // q [n, k / 2] packed E2M1, 32 values a chunk, two 16-value scale groups
  static constexpr int kSub = 4;
  static constexpr int kGroups = 2;
  static constexpr bool kScaled = true;
  const uint16_t* scale_pairs;  // s viewed as [n, k / 32] pairs of E4M3 codes
  const float* row_scale;       // g [n]
  uint32_t pairs_per_row;       // k / 32
  E2m1Lut lut;                  // the unscaled E2M1 magnitudes (scale 1)
  // scale group g (values 16 g .. 16 g + 15) of a chunk: exact bf16 pairs, widened
  __device__ __forceinline__ void widen(const uint4& v, int g, float (&wf)[16]) const {
#pragma unroll
    for (int w = 0; w < 2; ++w) {
      uint32_t p[4];
      atlas::quant::e2m1x8_to_bf16x2(w == 0 ? (g == 0 ? v.x : v.z) : (g == 0 ? v.y : v.w), lut,
                                     p);
#pragma unroll
      for (int i = 0; i < 4; ++i) atlas::unpack_bf16x2(p[i], wf[8 * w + 2 * i], wf[8 * w + 2 * i + 1]);
    }
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
  return {reinterpret_cast<const uint16_t*>(scale), row_scale, k >> 5,
          E2m1Lut::scaled(0x3F803F80u)};  // bf16 pair (1, 1)
}

__shared__ float partial_sums[kMaxThreads / 32][kMaxAcc];  // [warp][m * 4 + r]

// ---- batch 1 on packed half-precision FMAs (the `_h2` entry points, gemv_h2.cuh) -------
// Why: the f32 route above spends ~5 issue slots a weight (byte-table bf16 decode, widening,
// one FFMA a value) and the tensor-core twin (gemv_quant_direct.cu) ~3 with its MMA chains;
// both streamed NVFP4 at 35-50% of copy. The issue budget at copy bandwidth (gemv_h2.cuh):
// 7.8 lane-instructions a byte, 3.9 per NVFP4 weight (0.5 byte + 1/16 of a scale byte:
// 3.5), everything included. Here per 32-weight chunk and row: 4 x 11 decode (quant_decode.cuh
// e2m1x8_to_f16x2_split: exact f16 pairs), 16 HFMA2 (two products each), per 16-value group
// 2 widenings + 1 FADD + 1 FFMA by the group scale, 3 for the scale pair, and the x pairs'
// f16 conversion (3 per pair) shared by the block's 4 or 8 rows: ~80, 2.5 a weight, ~65% of
// the issue budget at copy bandwidth, but the binding share is the ALU pipe's (half rate:
// 64 lanes a cycle an SM), ~1.2 ALU instructions a weight with the split decode.
// Numerics (gemv_h2.cuh): the E2M1 values times 2^-6 (kE2m1HalfScale, multiplied back with
// the row's global scale) are exact f16 and so are their products with x (2 x 8 significant
// bits); only the group sums round (11 significant bits, ~2^-12 relative per rounding, well
// under a bf16 output ulp). Range guard at 2^16: with the 2^-6 table a lane's 8 products sum
// below 0.75 max|x| < 65,504 for every |x| < 2^16 (bf16's largest below is 65,280), so only x
// at or above 2^16 overflows, in its f16 conversion; with e > 0 only x below 2^-22 of the
// thread's largest (|x| 2^-e < 2^-7: f16-subnormal products, absolute error 2^(e-25)) lose
// bits.
struct Nvfp4H2 {  // q [n, k / 2] packed E2M1, 32 values a chunk, two 16-value scale groups
  static constexpr int kVals = 32;
  static constexpr int kGroups = 2;
  static constexpr int kGuardExp = 16;
  static constexpr int kPairs = 4;  // f16 pairs a word of 8 codes
  static constexpr bool kSplitPairs = ATLAS_NVFP4_H2_SPLIT;  // decode's (and x's) pair order
  using Scales = uint32_t;          // the chunk's two E4M3 group scale codes
  using Row = const uint16_t*;      // the row's scale pairs
  const uint16_t* scale_pairs;      // s viewed as [n, k / 32] pairs of E4M3 codes
  const float* row_scale;           // g [n]
  __device__ __forceinline__ Row row(int r, int kc) const {
    return scale_pairs + static_cast<size_t>(r) * kc;
  }
  template <bool kPreWait>
  __device__ __forceinline__ Scales load(Row p, int c) const {
    if constexpr (kPreWait)
      return *reinterpret_cast<const volatile uint16_t*>(p + c);
    else
      return __ldg(p + c);
  }
  __device__ __forceinline__ void scales(Scales pair, float (&s)[2]) const {
    atlas::quant::e4m3x2_to_f32(pair, s[0], s[1]);
  }
  __device__ __forceinline__ void decode(uint32_t q, uint32_t (&p)[kPairs]) const {
#if ATLAS_NVFP4_H2_SPLIT
    atlas::quant::e2m1x8_to_f16x2_split(q, p);
#else
    atlas::quant::e2m1x8_to_f16x2_cvt(q, p);
#endif
  }
  __device__ __forceinline__ float out_scale(int r) const {  // read before the PDL wait
    return *reinterpret_cast<const volatile float*>(row_scale + r) *
           atlas::quant::kE2m1HalfScale;
  }
};

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

// m == 1 on packed half-precision FMAs (gemv_h2.cuh, Nvfp4H2; ops/matmul_nvfp4.uses_h2,
// ATLAS_QUANT_NVFP4_H2): y bf16, y f32 (a quantized LM head's logits: the bf16-rounded sums
// widened), and the fused [gate | up] weight's product ending with its SwiGLU (y = act
// [1, n / 2], two features a block). Launch: grid ceil(n / 4) (SwiGLU ceil(n / 4) too: two
// features of n / 2), block ops/matmul_h2.h2_threads (ceil(k / 64) rounded to warps, up to
// 256); k % 32 == 0, x and w 16-byte aligned, scale 2-byte aligned; SwiGLU: n even.
// Launch bounds: 85 registers or fewer on sm_90a (80 used, no spills: twelve 2-warp blocks
// an SM at k = 4,096; Nsight Compute names registers as the occupancy limit, but a 64-register
// bound spills 104 bytes and measured 3.079 ms a step against 2.545, gpu80); sm_121 (gb10)
// spills under 85 (44+ bytes): 128 there.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 1000
constexpr int kH2BlocksPerSm = 2;
#else
constexpr int kH2BlocksPerSm = 3;
#endif
#define ATLAS_NVFP4_H2_ENTRY(name, out, rows)                                              \
  extern "C" __global__ void __launch_bounds__(kMaxThreads, kH2BlocksPerSm)                 \
      name(const __nv_bfloat16* x, const uint8_t* w, const uint8_t* scale,                 \
           const float* row_scale, void* y, uint32_t m, uint32_t n, uint32_t k) {           \
    if (m != 1) __trap();                                                                   \
    gemv_h2<Nvfp4H2, H2Out::out, rows>(                                                     \
        x, w, Nvfp4H2{reinterpret_cast<const uint16_t*>(scale), row_scale}, y,              \
        static_cast<int>(n), static_cast<int>(k), partial_sums);                            \
  }
ATLAS_NVFP4_H2_ENTRY(gemv_nvfp4_h2_bf16, kBf16, 4)
ATLAS_NVFP4_H2_ENTRY(gemv_nvfp4_h2_f32, kF32, 4)
ATLAS_NVFP4_H2_ENTRY(gemv_nvfp4_h2_swiglu_bf16, kSwiglu, 4)
// The same products in 8-row blocks (ops/matmul_nvfp4.H2_ROWS, ATLAS_QUANT_H2_ROWS): one
// chunk of each row a thread (k / 32 threads up to 256), so each x chunk's f16 conversion and
// range check serve 8 rows instead of 4 (about 0.5 of the ~3 issue slots a weight are x's at
// 4 rows); grid ceil(n / 8) (SwiGLU: 4 features a block).
ATLAS_NVFP4_H2_ENTRY(gemv_nvfp4_h2x8_bf16, kBf16, 8)
ATLAS_NVFP4_H2_ENTRY(gemv_nvfp4_h2x8_f32, kF32, 8)
ATLAS_NVFP4_H2_ENTRY(gemv_nvfp4_h2x8_swiglu_bf16, kSwiglu, 8)

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
