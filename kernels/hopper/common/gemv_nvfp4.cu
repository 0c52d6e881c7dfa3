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
#include "quant_decode.cuh"

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

// ---- batch 1 on packed half-precision FMAs (the `_h2` entry points) ---------------------
// Why: the f32 route above spends ~5 issue slots a weight (byte-table bf16 decode, widening,
// one FFMA a value) and the tensor-core twin (gemv_quant_direct.cu) ~3 with its MMA chains;
// both streamed NVFP4 at 35-50% of copy. The issue budget at copy bandwidth: 132 SMs x 4
// schedulers x 1.98 GHz = 1.05e12 warp-instructions/s = 3.3e13 lane-instructions/s against
// 4.26e12 bytes/s: 7.8 a byte, 3.9 per NVFP4 weight (0.5 byte + 1/16 of a scale byte: 3.5),
// everything included. Here per 32-weight chunk and row: 4 x 13 decode (quant_decode.cuh
// e2m1x8_to_f16x2: exact f16 pairs in x's pair order), 16 HFMA2 (two products each), per
// 16-value group 2 widenings + 1 FADD + 1 FFMA by the group scale, 3 for the scale pair,
// and the x pairs' f16 conversion (3 per pair) shared by the block's 4 rows: ~88, 2.75 a
// weight, ~70% of the issue budget at copy bandwidth (the bf16 GEMV's mould otherwise:
// weights requested before the PDL wait, 16-byte streaming loads, many small blocks).
// Summation order: within a 16-value group, a half2 accumulator takes the products of
// pairs (v0, v1) .. (v14, v15) in order (lane 0 the even values, lane 1 the odd ones), each
// HFMA2 rounding to f16; the two lanes are widened and added in f32, times the group's
// E4M3 scale (exact f32) added to the row's f32 sum, groups in K order within a thread;
// threads and warps are reduced as gemv_core.cuh does; the row's global scale times
// kE2m1HalfScale multiplies the total, rounded once. f16 products and sums carry 11
// significant bits (~2^-12 relative per rounding, well under a bf16 output ulp).
// Range guard (any finite bf16 x): f16 holds |x| < 65,504 where bf16 goes to 3.4e38, and
// "massive activations" (thousands and more in the down projection's input of Qwen2/3-class
// models) must not turn a token to inf. With the 2^-6 table a lane's 8 products sum below
// 0.75 max|x| < 65,504 for every |x| < 2^16 (bf16's largest below is 65,280), so only x at
// or above 2^16 overflows, in its f16 conversion. Each chunk's 32 x take a max |x| (15
// packed bf16 max-abs and 4 ops: ~0.15 issue slots a weight, shared by the 4 rows); a
// chunk with |x| >= 2^16 raises the thread's exponent e (from 0) to the one putting that
// max in [2^15, 2^16), rescaling the thread's f32 sums by 2^-(rise) (exact), and while
// e > 0 the thread's x are multiplied by 2^-e (exact) before the f16 conversion; its sums
// are multiplied by 2^e (exact) before the block reduction. e = 0 for |x| < 2^16: the
// bits are the unguarded kernel's. With e > 0 only x below 2^-22 of the thread's largest
// (|x| 2^-e < 2^-7: f16-subnormal products, absolute error 2^(e-25)) lose bits.
enum class H2Out { kBf16, kF32, kSwiglu };

// Weight row of block row r: rows 4 b + r, or (SwiGLU) gate rows of features 2 b, 2 b + 1
// for r = 0, 1 and their up rows for r = 2, 3; clamped (never stored past the end).
template <H2Out kOut>
__device__ __forceinline__ int h2_row(int r, int n) {
  if constexpr (kOut == H2Out::kSwiglu) {
    const int inter = n >> 1, j = min(static_cast<int>(blockIdx.x) * 2 + (r & 1), inter - 1);
    return r < 2 ? j : inter + j;
  }
  return min(static_cast<int>(blockIdx.x) * kRowsPerBlock + r, n - 1);
}

// bf16 pair (x0 low, x1 high) times `down` (kScaled; a power of two) -> f16 pair, exact
// for |x down| in f16's normal range
template <bool kScaled>
__device__ __forceinline__ uint32_t bf16x2_to_f16x2(uint32_t b, float down) {
  float x0 = __uint_as_float(b << 16), x1 = __uint_as_float(b & 0xffff0000u);
  if constexpr (kScaled) x0 *= down, x1 *= down;
  const __half2 h = __floats2half2_rn(x0, x1);
  return *reinterpret_cast<const uint32_t*>(&h);
}

// A chunk's 32 x (bf16) -> f16 pairs (x0, x1) .. (x30, x31), times `down` when kScaled
template <bool kScaled>
__device__ __forceinline__ void h2_x_pairs(const uint4 (&xb)[4], float down,
                                           uint32_t (&xh)[16]) {
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j)
      xh[4 * i + j] = bf16x2_to_f16x2<kScaled>(atlas::quant::word(xb[i], j), down);
}

// bf16 bits of 2^16: the smallest |x| whose f16 conversion could overflow (the range guard)
constexpr uint32_t kH2BigX = 0x4780u;

// The largest |x| bits (bf16, sign clear) of a chunk's 32 x: a tree of packed max-abs
// (NaN dropped where the other operand is a number: a NaN x still poisons its sums)
__device__ __forceinline__ uint32_t h2_max_abs_bits(const uint4 (&xb)[4]) {
  uint32_t m[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    uint32_t a, b;
    asm("max.xorsign.abs.bf16x2 %0, %1, %2;" : "=r"(a) : "r"(xb[i].x), "r"(xb[i].y));
    asm("max.xorsign.abs.bf16x2 %0, %1, %2;" : "=r"(b) : "r"(xb[i].z), "r"(xb[i].w));
    asm("max.xorsign.abs.bf16x2 %0, %1, %2;" : "=r"(m[i]) : "r"(a), "r"(b));
  }
  asm("max.xorsign.abs.bf16x2 %0, %1, %2;" : "=r"(m[0]) : "r"(m[0]), "r"(m[1]));
  asm("max.xorsign.abs.bf16x2 %0, %1, %2;" : "=r"(m[2]) : "r"(m[2]), "r"(m[3]));
  asm("max.xorsign.abs.bf16x2 %0, %1, %2;" : "=r"(m[0]) : "r"(m[0]), "r"(m[2]));
  return max(m[0] & 0x7fffu, (m[0] >> 16) & 0x7fffu);
}

// The range guard's rise (cold): the exponent putting a chunk max |x| >= 2^16 (bits `top`)
// in [2^15, 2^16), taken when above the thread's `e`, whose f32 sums follow it down
template <int R>
__device__ __forceinline__ void h2_raise(uint32_t top, int& e, float (&acc)[R]) {
  const int need = static_cast<int>(top >> 7) - 142;  // bf16 exponent field - 127 - 15
  if (need <= e) return;
  const float f = __uint_as_float(static_cast<uint32_t>(127 + e - need) << 23);
#pragma unroll
  for (int r = 0; r < R; ++r) acc[r] *= f;
  e = need;
}

// A group scale pair (E4M3 codes of chunk c's two groups) of a row: a plain (volatile) load
// before the PDL wait (ptxas sinks read-only-path loads below it), __ldg after.
template <bool kPreWait>
__device__ __forceinline__ uint32_t h2_scale_pair(const uint16_t* p) {
  if constexpr (kPreWait)
    return *reinterpret_cast<const volatile uint16_t*>(p);
  else
    return __ldg(p);
}

// The group scale pairs of kUnroll chunks of each row from chunk c0 (zero past the row end).
template <bool kPreWait>
__device__ __forceinline__ void h2_load_scales(uint32_t (&sv)[kUnroll][kRowsPerBlock],
                                               const uint16_t* const (&srow)[kRowsPerBlock],
                                               int c0, int kc) {
#pragma unroll
  for (int u = 0; u < kUnroll; ++u) {
    const int c = c0 + u * static_cast<int>(blockDim.x);
#pragma unroll
    for (int r = 0; r < kRowsPerBlock; ++r)
      sv[u][r] = c >= kc ? 0u : h2_scale_pair<kPreWait>(srow[r] + c);
  }
}

template <H2Out kOut>
__device__ __forceinline__ void gemv_nvfp4_h2(const __nv_bfloat16* __restrict__ x,
                                              const uint8_t* __restrict__ w,
                                              const uint8_t* __restrict__ scale,
                                              const float* __restrict__ row_scale,
                                              void* __restrict__ y, int n, int k) {
  const int kc = k >> 5;  // 32-value chunks a row
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const uint4* wrow[kRowsPerBlock];
  const uint16_t* srow[kRowsPerBlock];
#pragma unroll
  for (int r = 0; r < kRowsPerBlock; ++r) {
    const size_t row = static_cast<size_t>(h2_row<kOut>(r, n));
    wrow[r] = reinterpret_cast<const uint4*>(w) + row * kc;
    srow[r] = reinterpret_cast<const uint16_t*>(scale) + row * kc;
  }
  // weights and scales are memory no kernel writes: the first tile (and the finishing
  // threads' row scales) are requested before the wait
  uint4 wv[kUnroll][kRowsPerBlock];
  uint32_t sv[kUnroll][kRowsPerBlock];
  load_weight_tile<true>(wv, wrow, threadIdx.x, kc);
  h2_load_scales<true>(sv, srow, threadIdx.x, kc);
  const int t = threadIdx.x;
  const float out_scale =
      t < kRowsPerBlock
          ? *reinterpret_cast<const volatile float*>(row_scale + h2_row<kOut>(t, n)) *
                atlas::quant::kE2m1HalfScale
          : 0.f;
  atlas::pdl_enter();

  float acc[kRowsPerBlock];
#pragma unroll
  for (int r = 0; r < kRowsPerBlock; ++r) acc[r] = 0.f;
  int e = 0;  // the range guard's exponent: x scaled by 2^-e, sums short of 2^e
  const uint32_t lut_lo = atlas::quant::kE2m1HalfLo, lut_hi = atlas::quant::kE2m1HalfHi;
  const uint4* xv = reinterpret_cast<const uint4*>(x);
  for (int c0 = threadIdx.x; c0 < kc; c0 += kUnroll * blockDim.x) {
    if (c0 != static_cast<int>(threadIdx.x)) {
      load_weight_tile(wv, wrow, c0, kc);
      h2_load_scales<false>(sv, srow, c0, kc);
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int c = c0 + u * blockDim.x;
      if (c >= kc) break;
      uint4 xb[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) xb[i] = __ldg(xv + 4 * c + i);
      const uint32_t top = h2_max_abs_bits(xb);
      if (top >= kH2BigX) h2_raise(top, e, acc);
      uint32_t xh[16];  // f16 pairs (x0, x1) .. (x30, x31) of the chunk
      if (e == 0)
        h2_x_pairs<false>(xb, 1.f, xh);
      else
        h2_x_pairs<true>(xb, __uint_as_float(static_cast<uint32_t>(127 - e) << 23), xh);
#pragma unroll
      for (int r = 0; r < kRowsPerBlock; ++r) {
        float s[2];
        atlas::quant::e4m3x2_to_f32(sv[u][r], s[0], s[1]);
#pragma unroll
        for (int g = 0; g < 2; ++g) {
          __half2 h = __float2half2_rn(0.f);
#pragma unroll
          for (int ww = 0; ww < 2; ++ww) {
            uint32_t p[4];
            atlas::quant::e2m1x8_to_f16x2(atlas::quant::word(wv[u][r], 2 * g + ww), lut_lo, lut_hi, p);
#pragma unroll
            for (int i = 0; i < 4; ++i)
              h = __hfma2(*reinterpret_cast<const __half2*>(&p[i]),
                          *reinterpret_cast<const __half2*>(&xh[8 * g + 4 * ww + i]), h);
          }
          acc[r] = fmaf(__low2float(h) + __high2float(h), s[g], acc[r]);
        }
      }
    }
  }

  if (e != 0) {  // the range guard's 2^e, exact
    const float f = __uint_as_float(static_cast<uint32_t>(127 + e) << 23);
#pragma unroll
    for (int r = 0; r < kRowsPerBlock; ++r) acc[r] *= f;
  }
  // as gemv_core.cuh gemv_rows: lane l of each warp ends with the warp's sum of row l >> 3
  const float v = warp_reduce_scatter<kRowsPerBlock>(acc, lane);
  if ((lane & 7) == 0) partial_sums[warp][lane >> 3] = v;
  __syncthreads();
  if (t >= 32) return;
  float sum = 0.f;
  if (t < kRowsPerBlock)
    for (int i = 0; i < static_cast<int>(blockDim.x >> 5); ++i) sum += partial_sums[i][t];
  sum *= out_scale;
  if constexpr (kOut == H2Out::kSwiglu) {  // lanes 0, 1: gate of features 2 b + t; 2, 3: up
    const float up = __shfl_down_sync(0xffffffffu, sum, 2);
    const int inter = n >> 1, j = static_cast<int>(blockIdx.x) * 2 + t;
    if (t < 2 && j < inter)
      static_cast<__nv_bfloat16*>(y)[j] = atlas::f32_to_bf16(
          atlas::swiglu_f32(atlas::round_bf16(sum), atlas::round_bf16(up)));
  } else {
    const int row = static_cast<int>(blockIdx.x) * kRowsPerBlock + t;
    if (t >= kRowsPerBlock || row >= n) return;
    if constexpr (kOut == H2Out::kF32)  // logits: the bf16-rounded value, widened
      static_cast<float*>(y)[row] = atlas::round_bf16(sum);
    else
      static_cast<__nv_bfloat16*>(y)[row] = atlas::f32_to_bf16(sum);
  }
}

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

// m == 1 on packed half-precision FMAs (see gemv_nvfp4_h2; ops/matmul_nvfp4.uses_h2,
// ATLAS_QUANT_NVFP4_H2): y bf16, y f32 (a quantized LM head's logits: the bf16-rounded sums
// widened), and the fused [gate | up] weight's product ending with its SwiGLU (y = act
// [1, n / 2], two features a block). Launch: grid ceil(n / 4) (SwiGLU ceil(n / 4) too: two
// features of n / 2), block min(256, roundup32(ceil(k / 64))); k % 32 == 0, x and w
// 16-byte aligned, scale 2-byte aligned; SwiGLU: n even.
// Launch bounds: 85 registers or fewer on sm_90a (80 used, no spills: twelve 2-warp blocks
// an SM at k = 4,096); sm_121 (gb10) spills under 85 (44+ bytes): 128 there.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 1000
constexpr int kH2BlocksPerSm = 2;
#else
constexpr int kH2BlocksPerSm = 3;
#endif
#define ATLAS_NVFP4_H2_ENTRY(name, out)                                                    \
  extern "C" __global__ void __launch_bounds__(kMaxThreads, kH2BlocksPerSm)                 \
      name(const __nv_bfloat16* x, const uint8_t* w, const uint8_t* scale,                 \
           const float* row_scale, void* y, uint32_t m, uint32_t n, uint32_t k) {           \
    if (m != 1) __trap();                                                                   \
    gemv_nvfp4_h2<H2Out::out>(x, w, scale, row_scale, y, static_cast<int>(n),               \
                              static_cast<int>(k));                                         \
  }
ATLAS_NVFP4_H2_ENTRY(gemv_nvfp4_h2_bf16, kBf16)
ATLAS_NVFP4_H2_ENTRY(gemv_nvfp4_h2_f32, kF32)
ATLAS_NVFP4_H2_ENTRY(gemv_nvfp4_h2_swiglu_bf16, kSwiglu)

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
