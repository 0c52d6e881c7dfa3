// The batch-1 decode GEMV on packed half-precision FMAs, shared by the quantized weight
// formats whose values are exact f16 (NVFP4: gemv_nvfp4.cu, FP8 E4M3: gemv_fp8.cu):
// y[n] = sum_k x[k] * w[n, k] for one bf16 row x, w streamed from HBM exactly once.
//
// Why: the f32 GEMVs (gemv_core.cuh) spend one FFMA a weight after a decode and a widening
// to f32; on 4- and 8-bit weights that is more issue slots a byte than the SMs have at copy
// bandwidth (132 SMs x 4 schedulers x 1.98 GHz = 3.3e13 lane-instructions/s against 4.26e12
// bytes/s: 7.8 a byte, everything included), and they streamed at 35-68% of copy. Here a
// weight word decodes straight to f16 pairs (the format's `decode`: NVFP4 by byte-table
// PRMTs, E4M3 by the hardware convert), x is converted to f16 pairs once per chunk (shared
// by the block's R rows), and one HFMA2 takes two products. The bf16 GEMV's mould otherwise:
// R = 4 rows a block and two 16-byte chunks of each row a thread in flight, or R = 8 rows and
// one chunk of each (x's conversion shared by twice the rows), weights requested before the
// PDL wait, many small blocks.
//
// Summation order: a chunk's values split into 16-value scale groups (NVFP4: two, FP8: one);
// within a group a half2 accumulator takes the products of pairs (v0, v1) .. (v14, v15) in
// order (lane 0 the even values, lane 1 the odd ones), each HFMA2 rounding once to f16; the
// two lanes are widened and added in f32, times the group's scale (exact f32) added to the
// row's f32 sum, groups in K order within a thread; threads and warps are reduced as
// gemv_core.cuh does; the format's row scale multiplies the total, rounded once.
// Error: each of a lane's 8 steps rounds once (u = 2^-11 relative; 2^-25 absolute below f16's
// normals, 2^-14), so a lane is off its exact sum by at most 2^-11 (|s1| + .. + |s8|) <=
// 2^-8 sum |products| of the group; random signs make it ~2^-11 of the products' RMS.
//
// Range guard (any finite bf16 x): f16 holds |x| < 65,504 where bf16 goes to 3.4e38, and
// "massive activations" (thousands and more in the down projection's input of Qwen2/3-class
// models) must not turn a token to inf. A format bounds its weights so that a lane's 8
// products sum below 65,504 for every |x| < 2^kGuardExp (NVFP4: 2^16, FP8: 2^4). Each
// chunk's x take a max |x| (packed bf16 max-abs, shared by the 4 rows); a chunk with |x| >=
// 2^kGuardExp raises the thread's exponent e (from 0) to the one putting that max in
// [2^(kGuardExp - 1), 2^kGuardExp), rescaling the thread's f32 sums by 2^-(rise) (exact),
// and while e > 0 the thread's x are multiplied by 2^-e (exact) before the f16 conversion;
// its sums are scaled back by 2^e (exact) only after the row scale: the block adds them at
// its largest exponent E and the total takes out_scale, then 2^E. e = 0 for |x| below the
// threshold: the bits are the unguarded kernel's. With e > 0 only x below 2^-(kGuardExp +
// 13) of the thread's largest (|x| 2^-e < 2^-14: f16 subnormals, absolute error 2^(e-25))
// lose bits.
//
// A format (policy `F`) gives: kVals (values a 16-byte weight chunk), kGroups (16-value
// scale groups a chunk), kGuardExp, kPairs (f16 pairs a 32-bit weight word decodes to),
// kSplitPairs (the pairs' order: h2_x_pairs), a
// `Row` (its per-row scale addressing: row(n_index)), `Scales` (a chunk's scales as loaded:
// load<kPreWait>(row, chunk), zero past the row end) widened by scales(), decode(word) and
// out_scale(row) (the factor of a row's total, read before the PDL wait).
// Launch (ops/matmul_h2.py launch_h2): grid ceil(n / R) (SwiGLU too: R / 2 features of n / 2
// a block), block h2_threads (the fewest warps' threads, up to 256, that keep each pass over
// a row's chunks full); x and w 16-byte aligned; SwiGLU: n even.
#pragma once

#include <cuda_fp16.h>

#include <type_traits>

#include "gemv_core.cuh"
#include "quant_decode.cuh"

namespace atlas::gemv {

enum class H2Out { kBf16, kF32, kSwiglu };

// The rows of an R-row block and the store of its sums: gemv_core.cuh's output policies in
// R-row blocks (StoreSwiglu: R / 2 features a block)
template <H2Out kOut, int R>
using H2Rows = std::conditional_t<kOut == H2Out::kSwiglu, StoreSwiglu<R>, StoreY<R>>;

// Two f32 values times `down` (kScaled; a power of two) -> f16 pair (a low, b high), exact
// for |x down| in f16's normal range
template <bool kScaled>
__device__ __forceinline__ uint32_t f16_pair(float a, float b, float down) {
  if constexpr (kScaled) a *= down, b *= down;
  const __half2 h = __floats2half2_rn(a, b);
  return *reinterpret_cast<const uint32_t*>(&h);
}

// A chunk's x (kQuads x 8 bf16) -> f16 pairs, times `down` when kScaled, in the order the
// format's decode gives its weight pairs: (x0, x1), (x2, x3), .. (kSplit false), or per 8
// values (x0, x2), (x4, x6), (x1, x3), (x5, x7) (kSplit: NVFP4's split decode). Either way
// two widenings and one pack a pair.
template <bool kScaled, bool kSplit, int kQuads>
__device__ __forceinline__ void h2_x_pairs(const uint4 (&xb)[kQuads], float down,
                                           uint32_t (&xh)[4 * kQuads]) {
#pragma unroll
  for (int i = 0; i < kQuads; ++i) {
    float lo[4], hi[4];  // x_{2j}, x_{2j + 1} of the quad's word j
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const uint32_t b = atlas::quant::word(xb[i], j);
      lo[j] = __uint_as_float(b << 16);
      hi[j] = __uint_as_float(b & 0xffff0000u);
    }
#pragma unroll
    for (int j = 0; j < 4; ++j)
      xh[4 * i + j] = !kSplit ? f16_pair<kScaled>(lo[j], hi[j], down)
                      : j < 2 ? f16_pair<kScaled>(lo[2 * j], lo[2 * j + 1], down)
                              : f16_pair<kScaled>(hi[2 * j - 4], hi[2 * j - 3], down);
  }
}

// The largest |x| bits (bf16, sign clear) of a chunk's x: a tree of packed max-abs (NaN
// dropped where the other operand is a number: a NaN x still poisons its sums)
template <int kQuads>
__device__ __forceinline__ uint32_t h2_max_abs_bits(const uint4 (&xb)[kQuads]) {
  static_assert(kQuads >= 1 && (kQuads & (kQuads - 1)) == 0, "a power of two of x quads");
  uint32_t m[kQuads];
#pragma unroll
  for (int i = 0; i < kQuads; ++i) {
    uint32_t a, b;
    asm("max.xorsign.abs.bf16x2 %0, %1, %2;" : "=r"(a) : "r"(xb[i].x), "r"(xb[i].y));
    asm("max.xorsign.abs.bf16x2 %0, %1, %2;" : "=r"(b) : "r"(xb[i].z), "r"(xb[i].w));
    asm("max.xorsign.abs.bf16x2 %0, %1, %2;" : "=r"(m[i]) : "r"(a), "r"(b));
  }
#pragma unroll
  for (int s = 1; s < kQuads; s *= 2)
#pragma unroll
    for (int i = 0; i < kQuads; i += 2 * s)
      asm("max.xorsign.abs.bf16x2 %0, %1, %2;" : "=r"(m[i]) : "r"(m[i]), "r"(m[i + s]));
  return max(m[0] & 0x7fffu, (m[0] >> 16) & 0x7fffu);
}

// bf16 bits of 2^kGuardExp: the smallest |x| the range guard scales
template <int kGuardExp>
constexpr uint32_t kH2BigX = static_cast<uint32_t>(127 + kGuardExp) << 7;

// The range guard's rise (cold): the exponent putting a chunk max |x| >= 2^kGuardExp (bits
// `top`) in [2^(kGuardExp - 1), 2^kGuardExp), taken when above the thread's `e`, whose f32
// sums follow it down
template <int kGuardExp, int R>
__device__ __forceinline__ void h2_raise(uint32_t top, int& e, float (&acc)[R]) {
  const int need = static_cast<int>(top >> 7) - (126 + kGuardExp);  // exponent - (kGuardExp - 1)
  if (need <= e) return;
  const float f = __uint_as_float(static_cast<uint32_t>(127 + e - need) << 23);
#pragma unroll
  for (int r = 0; r < R; ++r) acc[r] *= f;
  e = need;
}

// The scales of kUnroll chunks of each row from chunk c0 (zero past the row end); kPreWait:
// plain (volatile) loads before the PDL wait (ptxas sinks read-only-path loads below it).
template <bool kPreWait, class F, int U, int R>
__device__ __forceinline__ void h2_load_scales(const F& fmt, typename F::Scales (&sv)[U][R],
                                               const typename F::Row (&srow)[R], int c0, int kc) {
#pragma unroll
  for (int u = 0; u < U; ++u) {
    const int c = c0 + u * static_cast<int>(blockDim.x);
#pragma unroll
    for (int r = 0; r < R; ++r)
      sv[u][r] = c >= kc ? typename F::Scales{0} : fmt.template load<kPreWait>(srow[r], c);
  }
}

template <class F, H2Out kOut, int R = kRowsPerBlock>
__device__ __forceinline__ void gemv_h2(const __nv_bfloat16* __restrict__ x,
                                        const uint8_t* __restrict__ w, const F& fmt,
                                        void* __restrict__ y, int n, int k,
                                        float (*partial)[kMaxAcc]) {
  // R rows a block (4 or 8), U chunks of each a thread in flight: 8 weight chunks a thread
  // either way, and an 8-row block converts and range-checks each x chunk once for twice
  // the rows
  static_assert(R == 4 || R == 8, "4 or 8 rows a block");
  constexpr int U = kUnroll * kRowsPerBlock / R;
  using Rows = H2Rows<kOut, R>;
  constexpr int kQuads = F::kVals / 8;                   // 16-byte x loads a chunk
  constexpr int kWordsPerGroup = 4 / F::kGroups;         // weight words a 16-value group
  static_assert(F::kPairs * kWordsPerGroup == 8, "a scale group is 16 values: 8 pairs");
  static_assert(kMaxAcc > R, "a warp's exponent rides in its partial row");
  const int kc = k >> log2_exact(F::kVals);  // chunks a row
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const uint4* wrow[R];
  typename F::Row srow[R];
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const int row = Rows::row(r, n);
    wrow[r] = reinterpret_cast<const uint4*>(w) + static_cast<size_t>(row) * kc;
    srow[r] = fmt.row(row, kc);
  }
  // weights and scales are memory no kernel writes: the first tile (and the finishing
  // threads' row scales) are requested before the wait
  uint4 wv[U][R];
  typename F::Scales sv[U][R];
  load_weight_tile<true>(wv, wrow, threadIdx.x, kc);
  h2_load_scales<true>(fmt, sv, srow, threadIdx.x, kc);
  const int t = threadIdx.x;
  const float out_scale = t < R ? fmt.out_scale(Rows::row(t, n)) : 0.f;
  atlas::pdl_enter();

  float acc[R];
#pragma unroll
  for (int r = 0; r < R; ++r) acc[r] = 0.f;
  int e = 0;  // the range guard's exponent: x scaled by 2^-e, sums short of 2^e
  const uint4* xv = reinterpret_cast<const uint4*>(x);
  for (int c0 = threadIdx.x; c0 < kc; c0 += U * blockDim.x) {
    if (c0 != static_cast<int>(threadIdx.x)) {
      load_weight_tile(wv, wrow, c0, kc);
      h2_load_scales<false>(fmt, sv, srow, c0, kc);
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int c = c0 + u * blockDim.x;
      if (c >= kc) break;
      uint4 xb[kQuads];
#pragma unroll
      for (int i = 0; i < kQuads; ++i) xb[i] = __ldg(xv + kQuads * c + i);
      const uint32_t top = h2_max_abs_bits(xb);
      if (top >= kH2BigX<F::kGuardExp>) h2_raise<F::kGuardExp>(top, e, acc);
      uint32_t xh[4 * kQuads];  // the chunk's f16 pairs in the decode's order
      if (e == 0)
        h2_x_pairs<false, F::kSplitPairs>(xb, 1.f, xh);
      else
        h2_x_pairs<true, F::kSplitPairs>(
            xb, __uint_as_float(static_cast<uint32_t>(127 - e) << 23), xh);
#pragma unroll
      for (int r = 0; r < R; ++r) {
        float s[F::kGroups];
        fmt.scales(sv[u][r], s);
#pragma unroll
        for (int g = 0; g < F::kGroups; ++g) {
          __half2 h = __float2half2_rn(0.f);
#pragma unroll
          for (int ww = 0; ww < kWordsPerGroup; ++ww) {
            uint32_t p[F::kPairs];
            fmt.decode(atlas::quant::word(wv[u][r], kWordsPerGroup * g + ww), p);
#pragma unroll
            for (int i = 0; i < F::kPairs; ++i)
              h = __hfma2(*reinterpret_cast<const __half2*>(&p[i]),
                          *reinterpret_cast<const __half2*>(&xh[8 * g + F::kPairs * ww + i]),
                          h);
          }
          acc[r] = fmaf(__low2float(h) + __high2float(h), s[g], acc[r]);
        }
      }
    }
  }

  // The range guard's 2^e (powers of two: exact while the sums stay f32 normals): a warp adds
  // its sums at its largest e, the block at the largest warp's, E, and the total takes the
  // row scale before 2^E, so a row whose sums times 2^E would pass f32's range before the
  // row scale brings them back (x near bf16's largest values) still comes out finite. With e
  // = 0 everywhere every factor is 1: the unguarded kernel's bits.
  const int ew = __reduce_max_sync(0xffffffffu, e);
  if (e != ew) {
#pragma unroll
    for (int r = 0; r < R; ++r) acc[r] = ldexpf(acc[r], e - ew);
  }
  // as gemv_core.cuh gemv_rows: lane l of each warp ends with the warp's sum of row l / kLanes
  constexpr int kLanes = 32 / R;  // lanes a row's warp sum ends on
  const float v = warp_reduce_scatter<R>(acc, lane);
  if ((lane & (kLanes - 1)) == 0) partial[warp][lane / kLanes] = v;
  if (lane == 0) partial[warp][R] = __int_as_float(ew);  // the warp's exponent
  __syncthreads();
  if (t >= 32) return;
  const int warps = static_cast<int>(blockDim.x >> 5);
  int big = 0;  // E
  for (int i = 0; i < warps; ++i) big = max(big, __float_as_int(partial[i][R]));
  float sum = 0.f;
  if (t < R)
    for (int i = 0; i < warps; ++i) {
      const int ei = __float_as_int(partial[i][R]);
      sum += ei == big ? partial[i][t] : ldexpf(partial[i][t], ei - big);
    }
  sum *= out_scale;
  if (big != 0) sum = ldexpf(sum, big);
  const int row0 = static_cast<int>(blockIdx.x) * R;
  Rows{}.template finish<1, kOut == H2Out::kF32>(y, sum, t, row0, n);
}

}  // namespace atlas::gemv
