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
// The `_cvt` entry point (batch 1 where the `_h2` ones below, on packed half-precision FMAs,
// are switched off: ops/matmul_quant.uses_core_single, ATLAS_QUANT_FP8_CORE)
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
#include "gemv_h2.cuh"

namespace {

using namespace atlas::gemv;
using atlas::quant::e4m3x4_to_f16x2;

__device__ __forceinline__ void e4m3x4_scaled_down(uint32_t w, float* f) {
  f[0] = __uint_as_float(((w << 20) & 0x07f00000u) | ((w << 24) & 0x80000000u));
  f[1] = __uint_as_float(((w << 12) & 0x07f00000u) | ((w << 16) & 0x80000000u));
  f[2] = __uint_as_float(((w << 4) & 0x07f00000u) | ((w << 8) & 0x80000000u));
  f[3] = __uint_as_float(((w >> 4) & 0x07f00000u) | (w & 0x80000000u));
}

// Four E4M3 codes -> their exact f32 values: two hardware converts to f16 pairs, widened.
__device__ __forceinline__ void e4m3x4_cvt(uint32_t w, float* f) {
  uint32_t lo, hi;
  e4m3x4_to_f16x2(w, lo, hi);
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

// ---- batch 1 on packed half-precision FMAs (the `_h2` entry points, gemv_h2.cuh) -------
// Why: the convert route above widens every value to f32 for one FFMA each (1.5 + 1 issue
// slots a value before the x and scale work) and streamed at 52-68% of copy (Qwen3-8B qkv
// 10.42 us for 25.2 MB, gate_up 34.65 us for 100.7 MB: ~3.1 TB/s at best). Here per 16-weight
// chunk and row: 8 converts (cvt.rn.f16x2.e4m3x2: exact f16 pairs (v0, v1) (v2, v3) .., x's
// own pair order), 8 HFMA2 (two products each), 2 widenings + 1 FADD + 1 FFMA by the chunk's
// scale, the scale's load; shared by the block's 4 rows: the x pairs' f16 conversion (3 a
// pair), the max |x| of the range guard and the scale's column index. ~23 a row's chunk, 1.5
// a weight (byte) against the 7.8 a byte the SMs issue at copy bandwidth.
// Numerics (gemv_h2.cuh): E4M3 values (4 significant bits, |v| <= 448, subnormals down to
// 2^-9) are exact f16; each HFMA2 rounds the 12-bit product plus the lane's running sum once,
// so a chunk's two f16 lanes are off their exact sums by at most 2^-11 (|s1| + .. + |s8|)
// each, <= 2^-8 sum_chunk |x_i v_i| for the chunk (random signs: ~2^-11 x sqrt(8 / 3) of its
// products' RMS), plus 2^(e - 25) a step where a running sum or x 2^-e falls below f16's
// normals (|x 2^-e| < 2^-14: x rounded to a multiple of 2^-24, <= 448 x 2^(e - 25) a
// product); the chunk's f32 widening, sum and scale multiply add 2^-24 relative.
// Range guard at 2^4: a lane sums 8 products of |v| <= 448, below 8 x 448 x 16 = 57,344 <
// 65,504 for every |x| < 16 (f16 products overflow only beyond |x| ~146, a lane's sum from
// 18.3); chunks whose x reach 16 raise the thread's exponent (max |x| 2^-e in [8, 16)).
// x under 16 everywhere (RMS-normed inputs mostly are) keeps the unguarded bits; with e > 0
// only x below 2^-17 of the thread's largest lose bits (f16 subnormals).
struct Fp8H2 {  // w [n, k] E4M3 bytes, 16 values a chunk, one scale a chunk (Fp8W's map)
  static constexpr int kVals = 16;
  static constexpr int kGroups = 1;
  static constexpr int kGuardExp = 4;
  static constexpr int kPairs = 2;  // f16 pairs a word of 4 codes
  static constexpr bool kSplitPairs = false;  // (v0, v1), (v2, v3)
  using Scales = float;
  using Row = const float*;         // the row's scales: scale + (row >> row_shift) * row_stride
  const float* scale;
  uint32_t row_shift, row_stride, col_shift, col_stride;
  __device__ __forceinline__ Row row(int r, int) const {
    return scale + (static_cast<uint32_t>(r) >> row_shift) * row_stride;
  }
  template <bool kPreWait>
  __device__ __forceinline__ Scales load(Row p, int c) const {
    const float* at = p + ((static_cast<uint32_t>(c) << 4) >> col_shift) * col_stride;
    if constexpr (kPreWait)
      return *reinterpret_cast<const volatile float*>(at);
    else
      return __ldg(at);
  }
  __device__ __forceinline__ void scales(Scales v, float (&s)[1]) const { s[0] = v; }
  __device__ __forceinline__ void decode(uint32_t q, uint32_t (&p)[kPairs]) const {
    e4m3x4_to_f16x2(q, p[0], p[1]);
  }
  __device__ __forceinline__ float out_scale(int) const { return 1.f; }
};

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

// f32 logits of one row (a quantized LM head, ops/matmul_quant.py QuantLinear.linear): the
// bf16-rounded sums widened, as gemv_bf16_f32_single writes the bf16 LM head's. Why: the
// vocabulary-sized weight otherwise streams on the tensor-core twin (gemv_qd_fp8_f32), whose
// one-row loop reached ~61% of copy on Qwen3-8B's gate_up where this loop streams its down
// projection at ~89%.
extern "C" __global__ void __launch_bounds__(kMaxThreads, kCvtBlocksPerSm)
    gemv_fp8_cvt_f32_single(const __nv_bfloat16* x, const uint8_t* w, ATLAS_FP8_ARGS) {  // y: f32
  if (m != 1) __trap();
  gemv_rows<1, true>(plain_x(x, k), ATLAS_FP8_CVT_FMT, w, y, n, k, partial_sums);
}

// The fused [gate | up] weight's product of one row ending with its SwiGLU on the same loop
// (gemv_core.cuh StoreSwiglu: y = act [1, n / 2], two features a block: the gate rows of
// features 2 b, 2 b + 1 and their up rows), bit for bit the entry above followed by
// silu_mul (ops/matmul_quant.uses_core_swiglu, ATLAS_QUANT_FP8_CORE_SWIGLU). Why: batch 1's
// gate_up otherwise ends with its SwiGLU on the tensor-core twin (gemv_qd_fp8_swiglu), which
// streamed Qwen3-8B's 100.7 MB at ~61% of copy (38.9 us, gpu77) where this loop streams the
// down projection at ~89%. Launch: grid ceil(n / 4), block as the entry above; n even.
extern "C" __global__ void __launch_bounds__(kMaxThreads, kCvtBlocksPerSm)
    gemv_fp8_cvt_swiglu_bf16_single(const __nv_bfloat16* x, const uint8_t* w, ATLAS_FP8_ARGS) {
  if (m != 1) __trap();
  gemv_rows<1, false>(plain_x(x, k), ATLAS_FP8_CVT_FMT, w, y, n, k, partial_sums, StoreSwiglu<>{});
}

// The convert GEMV's bf16 and SwiGLU products in 8-row blocks (ATLAS_GEMV_ROWS=8, as the bf16
// GEMV's `_x8` twins: 32 KiB of codes a block at k 4,096 for one launch, reduction and exit;
// the same bits). 127 registers on sm_90a: two 8-warp or four 4-warp blocks an SM.
extern "C" __global__ void __launch_bounds__(kMaxThreads, 2)
    gemv_fp8_cvt_x8_single(const __nv_bfloat16* x, const uint8_t* w, ATLAS_FP8_ARGS) {
  if (m != 1) __trap();
  gemv_rows<1, false>(plain_x(x, k), ATLAS_FP8_CVT_FMT, w, y, n, k, partial_sums, StoreY<8>{});
}

extern "C" __global__ void __launch_bounds__(kMaxThreads, 2)
    gemv_fp8_cvt_swiglu_x8_single(const __nv_bfloat16* x, const uint8_t* w, ATLAS_FP8_ARGS) {
  if (m != 1) __trap();
  gemv_rows<1, false>(plain_x(x, k), ATLAS_FP8_CVT_FMT, w, y, n, k, partial_sums,
                      StoreSwiglu<8>{});
}

// m == 1 on packed half-precision FMAs (gemv_h2.cuh, Fp8H2; ops/matmul_quant.uses_fp8_h2,
// ATLAS_QUANT_FP8_H2): y bf16, y f32 (a quantized LM head's logits: the bf16-rounded sums
// widened), and the fused [gate | up] weight's product ending with its SwiGLU (y = act
// [1, n / 2], two features a block). Launch: grid ceil(n / 4) (SwiGLU too), block min(256,
// roundup32(ceil(k / 32))); k % 16 == 0, x and w 16-byte aligned; SwiGLU: n even.
// Launch bounds: 64 registers or fewer on sm_90a (no spills: eight 4-warp blocks an SM at
// k = 4,096, as the convert entry point); sm_121 (gb10) 85 (80 used, no spills).
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 1000
constexpr int kFp8H2BlocksPerSm = 3;
#else
constexpr int kFp8H2BlocksPerSm = 4;
#endif
#define ATLAS_FP8_H2_ENTRY(name, out)                                                      \
  extern "C" __global__ void __launch_bounds__(kMaxThreads, kFp8H2BlocksPerSm)              \
      name(const __nv_bfloat16* x, const uint8_t* w, const float* scale, void* y,          \
           uint32_t m, uint32_t n, uint32_t k, uint32_t row_shift, uint32_t row_stride,    \
           uint32_t col_shift, uint32_t col_stride) {                                      \
    if (m != 1) __trap();                                                                  \
    gemv_h2<Fp8H2, H2Out::out>(x, w, Fp8H2{scale, row_shift, row_stride, col_shift,         \
                                            col_stride},                                    \
                               y, static_cast<int>(n), static_cast<int>(k), partial_sums); \
  }
ATLAS_FP8_H2_ENTRY(gemv_fp8_h2_bf16, kBf16)
ATLAS_FP8_H2_ENTRY(gemv_fp8_h2_f32, kF32)
ATLAS_FP8_H2_ENTRY(gemv_fp8_h2_swiglu_bf16, kSwiglu)

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

// Launched between a kernel that writes a weight (the dequantizes below and gemv_nvfp4.cu's,
// into the bf16 scratch) and the GEMM that reads it (ops/matmul_quant.py linear_quant). The
// TMA GEMMs request their first weight tiles before their PDL wait, on the rule that no kernel
// writes weights, and a dequantize lets its dependents launch at its entry: without this launch
// a GEMM block resident during the dequantize's last wave could read scratch rows not yet
// written. This block waits (the dequantize complete, its memory visible) before it lets its
// dependents launch, so the GEMM's blocks start, and prefetch, only after every byte is there.
extern "C" __global__ void __launch_bounds__(32) pdl_fence() { atlas::pdl_enter(); }

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
