// The decode GEMV's machinery, shared by every weight format: y[m, n] = sum_k x[m, k] *
// w[n, k] for 1 <= m <= 8 rows of x, w streamed from HBM exactly once.
//
// A block owns kRowsPerBlock weight rows (consecutive ones unless the output policy maps
// them otherwise, below) and spreads K over its threads, one
// 16-byte weight chunk per thread per row, kUnroll chunks per row in flight before the
// first use (atlas::ld_stream: weights are never re-read). x is small and
// re-read by every block through L1/L2. Each thread keeps M x kRowsPerBlock f32
// accumulators; the block reduces them deterministically (warp reduce-scatter, then a
// fixed-order sum over warps in shared memory), and the output is rounded once.
//
// A weight format (policy `W`) says how many 8-value x chunks one 16-byte weight chunk
// covers (kSub: 1 for bf16, 2 for FP8, 4 for NVFP4), how to widen a chunk to f32 and, if
// kScaled, the scales of a (row, chunk): the chunk splits into kGroups equal scale groups
// (1, or 2 for NVFP4's 16-value groups) and each group's dot product is multiplied by its
// scale before accumulation.
// An x policy (`XLoad`) loads 8 values of row m at x chunk c (plain, or SwiGLU computed on
// the fly from gate_up; `raw` gives them packed); its `prepare()` runs once per block after
// the PDL wait, before the first x load.
// An output policy (`Out`) stores the block's reduced sums: `StoreY` writes y;
// `StoreSwiglu` ends a fused [gate | up] product with its SwiGLU. It also says which
// weight rows the block owns (`Out::row(r, n)`, the weight row of block row r): 4 consecutive
// rows, or StoreSwiglu's two gate rows and their two up rows. A row's sum
// does not depend on which block row holds it (every thread's FMA chain is the same, and
// the warp and block reductions combine the same lanes and warps in the same order for
// every value: floating-point addition commutes), so a remapped row gets the bits the
// plain mapping would give it.
#pragma once

#include "atlas_common.cuh"
#include "bf16_vec.cuh"

namespace atlas::gemv {

constexpr int kRowsPerBlock = 4;  // ops/matmul.py GEMV_ROWS_PER_BLOCK
constexpr int kMaxThreads = 256;  // ops/matmul.py GEMV_MAX_THREADS
constexpr int kMaxAcc = 8 * kRowsPerBlock;
constexpr int kUnroll = 2;  // chunks per row each thread has in flight per iteration

__host__ __device__ constexpr int pow2_at_least(int v) { return v <= 1 ? 1 : 2 * pow2_at_least((v + 1) / 2); }
__host__ __device__ constexpr int log2_exact(int v) { return v <= 1 ? 0 : 1 + log2_exact(v / 2); }

// One halving stage of warp_reduce_scatter: lanes with `kOffset` set keep values
// [kHalf, 2 kHalf) and send [0, kHalf) to their partner, which keeps the other half; the
// kept half moves to a[0, kHalf). Recurses with compile-time indices (no local memory).
template <int kHalf, int kOffset, int V>
__device__ __forceinline__ void reduce_scatter_stage(float (&a)[V], int lane) {
  if constexpr (kHalf >= 1) {
    const bool upper = (lane & kOffset) != 0;
#pragma unroll
    for (int i = 0; i < kHalf; ++i) {
      const float send = upper ? a[i] : a[i + kHalf];
      const float keep = upper ? a[i + kHalf] : a[i];
      a[i] = keep + __shfl_xor_sync(0xffffffffu, send, kOffset);
    }
    reduce_scatter_stage<kHalf / 2, kOffset / 2>(a, lane);
  }
}

// Sum V values over the warp in V - 1 + (5 - log2 V) shuffles instead of 5 V. Lane l ends
// with the warp total of value l >> (5 - log2 V).
template <int V>
__device__ __forceinline__ float warp_reduce_scatter(float (&a)[V], int lane) {
  static_assert(V >= 1 && V <= 32 && (V & (V - 1)) == 0, "V must be a power of two <= 32");
  reduce_scatter_stage<V / 2, 16>(a, lane);
  float v = a[0];
#pragma unroll
  for (int offset = 16 / V; offset >= 1; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

// ---- x load policies: chunk c (8 bf16) of row m of the GEMV's input, widened to f32 ----
struct PlainX {  // x [m, k] bf16
  const uint4* x;
  int kc;  // 16-byte chunks per row
  __device__ __forceinline__ void prepare() const {}
  __device__ __forceinline__ uint4 raw(int m, int c) const {
    return __ldg(x + static_cast<size_t>(m) * kc + c);
  }
  __device__ __forceinline__ void load(int m, int c, float (&xf)[8]) const {
    atlas::unpack_bf16x8(raw(m, c), xf);
  }
};

struct SwigluX {  // x = bf16(bf16(silu(gate)) * up), gate_up [m, 2k] = [gate | up] bf16
  const uint4* gate_up;
  int kc;
  __device__ __forceinline__ void prepare() const {}
  __device__ __forceinline__ uint4 raw(int m, int c) const {
    const uint4* gate = gate_up + static_cast<size_t>(m) * 2 * kc;
    return atlas::swiglu_bf16x8(__ldg(gate + c), __ldg(gate + kc + c));
  }
  __device__ __forceinline__ void load(int m, int c, float (&xf)[8]) const {
    atlas::unpack_bf16x8(raw(m, c), xf);
  }
};

__device__ __forceinline__ PlainX plain_x(const __nv_bfloat16* x, uint32_t k) {
  return {reinterpret_cast<const uint4*>(x), static_cast<int>(k >> 3)};
}

__device__ __forceinline__ SwigluX swiglu_x(const __nv_bfloat16* gate_up, uint32_t k) {
  return {reinterpret_cast<const uint4*>(gate_up), static_cast<int>(k >> 3)};
}

// ---- weight formats ---------------------------------------------------------------------
struct Bf16W {  // w [n, k] bf16: 8 values a chunk, no scale
  static constexpr int kSub = 1;
  static constexpr int kGroups = 1;
  static constexpr bool kScaled = false;
  __device__ __forceinline__ void widen(const uint4& v, int, float (&wf)[8]) const {
    atlas::unpack_bf16x8(v, wf);
  }
  __device__ __forceinline__ void chunk_scales(int, int, float (&s)[1]) const { s[0] = 1.f; }
};

// ---- output policies: what the block does with its reduced sums --------------------------
// Both take R, the rows a block (kRowsPerBlock here; gemv_h2.cuh's 8-row blocks R = 8).
// `finish` is called by every lane of warp 0 (an output policy may shuffle); lane t < M x R
// holds the sum of output (m, Out::row(r, n)), t = m * R + r.

// The plain mapping: block b owns weight rows R b .. R b + R - 1; rows past n re-read row
// n - 1 (never stored).
template <int R = kRowsPerBlock>
struct StoreY {
  static constexpr int kRows = R;
  __device__ __forceinline__ static int row(int r, int n) {
    return min(static_cast<int>(blockIdx.x) * R + r, n - 1);
  }
  template <int M, bool kF32Out>
  __device__ __forceinline__ void finish(void* y, float sum, int t, int row0, int n) const {
    if (t >= M * R) return;
    const int m = t / R, row = row0 + t % R;
    if (row >= n) return;
    const size_t at = static_cast<size_t>(m) * n + row;
    if (kF32Out)  // logits: the bf16-rounded value, widened (transformers' bf16 LM head)
      static_cast<float*>(y)[at] = atlas::round_bf16(sum);
    else
      static_cast<__nv_bfloat16*>(y)[at] = atlas::f32_to_bf16(sum);
  }
};

// StoreY's rows with the float32 sums stored as they are, not bf16-rounded: the router of a
// model whose gate transformers keeps in float32 (GLM-4.5; gemv_bf16_f32_unrounded).
template <int R = kRowsPerBlock>
struct StoreF32Unrounded : StoreY<R> {
  template <int M, bool kF32Out>
  __device__ __forceinline__ void finish(void* y, float sum, int t, int row0, int n) const {
    static_assert(kF32Out, "float32 sums are stored as float32");
    if (t >= M * R) return;
    const int m = t / R, row = row0 + t % R;
    if (row < n) static_cast<float*>(y)[static_cast<size_t>(m) * n + row] = sum;
  }
};

// StoreY's rows, one x row, plus a bf16 bias [n] added to the bf16-rounded sums and rounded
// again: bit for bit the plain GEMV followed by bias_add_bf16 (Qwen2-family q/k/v biases at
// batch 1, gemv_bias_bf16_single). Built at the block's start, where warp 0's lanes t < R
// request their row's bias (a weight: before the PDL wait, under the previous kernel's tail),
// so the epilogue adds a register, not a memory trip.
template <int R = kRowsPerBlock>
struct StoreBias : StoreY<R> {
  float b = 0.f;
  __device__ __forceinline__ StoreBias(const __nv_bfloat16* __restrict__ bias, int n) {
    const int t = static_cast<int>(threadIdx.x), row = static_cast<int>(blockIdx.x) * R + t;
    if (t < R && row < n) {  // the row's 16-byte vector, then its element (no local memory)
      const uint4 v = atlas::ld_prefetch(reinterpret_cast<const uint4*>(bias) + row / 8);
      const int e = row % 8;
      const uint32_t word = e < 2 ? v.x : e < 4 ? v.y : e < 6 ? v.z : v.w;
      b = __uint_as_float((e & 1 ? word >> 16 : word & 0xffffu) << 16);
    }
  }
  template <int M, bool kF32Out>
  __device__ __forceinline__ void finish(void* y, float sum, int t, int row0, int n) const {
    static_assert(M == 1 && !kF32Out, "the bias epilogue is single-row bf16");
    const int row = row0 + t;
    if (t < R && row < n)
      static_cast<__nv_bfloat16*>(y)[row] = atlas::f32_to_bf16(atlas::round_bf16(sum) + b);
  }
};

// A fused [gate | up] weight [n, k] (n = 2 I) ending with its SwiGLU, one x row: block b owns
// the gate rows of its F = R / 2 features F b .. F b + F - 1 (block rows 0 .. F - 1) and
// their up rows I + F b .. (rows F .. R - 1), and writes act[F b + t] = bf16(swiglu(
// bf16(gate), bf16(up))), t < F: the plain GEMV's bf16 outputs (the same sums, see above)
// through silu_mul_bf16's arithmetic (atlas::swiglu_f32), so act is bit for bit the GEMV
// followed by silu_mul. Grid ceil(I / F) = ceil(n / R); n even. Features of the last block
// past I re-read feature I - 1's rows and are not stored. kGelu: the tanh-GELU GLU
// (gelu_tanh_mul_bf16's arithmetic, atlas::geglu_tanh_f32: Gemma 3) instead of the SwiGLU.
template <int R = kRowsPerBlock, bool kGelu = false>
struct StoreSwiglu {
  static constexpr int kRows = R;
  static constexpr int kFeatures = R / 2;
  static_assert(R % 2 == 0, "a block's rows are (gate, up) pairs");
  __device__ __forceinline__ static int row(int r, int n) {
    const int inter = n >> 1;
    const int j = min(static_cast<int>(blockIdx.x) * kFeatures + r % kFeatures, inter - 1);
    return r < kFeatures ? j : inter + j;
  }
  template <int M, bool kF32Out>
  __device__ __forceinline__ void finish(void* act, float sum, int t, int, int n) const {
    static_assert(M == 1 && !kF32Out, "the SwiGLU epilogue is single-row bf16");
    const float up = __shfl_down_sync(0xffffffffu, sum, kFeatures);  // lanes < F: gate
    const int j = static_cast<int>(blockIdx.x) * kFeatures + t;
    if (t < kFeatures && j < (n >> 1))
      static_cast<__nv_bfloat16*>(act)[j] = atlas::f32_to_bf16(
          kGelu ? atlas::geglu_tanh_f32(atlas::round_bf16(sum), atlas::round_bf16(up))
                : atlas::swiglu_f32(atlas::round_bf16(sum), atlas::round_bf16(up)));
  }
};

// kUnroll chunks of each of the block's rows, starting at chunk c0 (zeros past the row end).
// kPreWait: the tile requested before the PDL wait, through atlas::ld_prefetch (ptxas sinks
// ld.global.nc, ld_stream's load, below griddepcontrol.wait).
// (U chunks of R rows: gemv_h2.cuh's 8-row blocks take U = 1.)
template <bool kPreWait = false, int U = kUnroll, int R = kRowsPerBlock>
__device__ __forceinline__ void load_weight_tile(uint4 (&wv)[U][R], const uint4* const (&wrow)[R],
                                                 int c0, int kc) {
  const uint64_t stream = atlas::l2_stream_policy();  // the weights' L2 policy
#pragma unroll
  for (int u = 0; u < U; ++u) {
    const int c = c0 + u * static_cast<int>(blockDim.x);
#pragma unroll
    for (int r = 0; r < R; ++r)
      wv[u][r] = c >= kc     ? make_uint4(0u, 0u, 0u, 0u)
                                    : atlas::ld_weight<kPreWait>(wrow[r] + c, stream);
  }
}

template <int M, bool kF32Out, class XLoad, class W, class Out = StoreY<>>
__device__ __forceinline__ void gemv_rows(XLoad xload, W fmt, const void* __restrict__ w,
                                          void* __restrict__ y, int n, int k,
                                          float (*partial)[kMaxAcc], Out out = Out{}) {
  constexpr int R = Out::kRows;  // the block's weight rows (4; 8 for the `_x8` entries)
  constexpr int V = pow2_at_least(M) * R;  // accumulator (m, r) at m * R + r
  static_assert(V <= kMaxAcc, "a block's sums must fit the partial-sum rows");
  constexpr int kVals = 8 * W::kSub;                   // weight values per 16-byte chunk
  constexpr int kSubPerGroup = W::kSub / W::kGroups;   // x chunks under one scale
  static_assert(W::kSub % W::kGroups == 0, "scale groups must split a chunk evenly");
  const int kc = k >> log2_exact(kVals);
  const int row0 = blockIdx.x * R;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const uint4* wrow[R];
#pragma unroll
  for (int r = 0; r < R; ++r)  // the output policy's rows (clamped; never stored)
    wrow[r] = reinterpret_cast<const uint4*>(w) + static_cast<size_t>(Out::row(r, n)) * kc;

  float acc[V];
#pragma unroll
  for (int i = 0; i < V; ++i) acc[i] = 0.f;

  // The first tile of weights is requested before waiting on the previous kernel (weights
  // are never written by a kernel), so its DRAM round trip overlaps that kernel's tail.
  uint4 wv[kUnroll][R];
  load_weight_tile<true, kUnroll, R>(wv, wrow, threadIdx.x, kc);
  atlas::pdl_enter();
  xload.prepare();
  for (int c0 = threadIdx.x; c0 < kc; c0 += kUnroll * blockDim.x) {
    if (c0 != static_cast<int>(threadIdx.x)) load_weight_tile<false, kUnroll, R>(wv, wrow, c0, kc);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int c = c0 + u * blockDim.x;
      if (c >= kc) break;
      // One scale group's values widened at a time (all of the chunk when kGroups == 1),
      // used by every x row before the next group's: bounds the f32 weights in registers.
      float wf[R][kVals / W::kGroups];
      float sc[R][W::kGroups];
#pragma unroll
      for (int r = 0; r < R; ++r) {
        fmt.widen(wv[u][r], 0, wf[r]);
        fmt.chunk_scales(Out::row(r, n), c, sc[r]);
      }
#pragma unroll
      for (int g = 0; g < W::kGroups; ++g) {
        if (g > 0) {
#pragma unroll
          for (int r = 0; r < R; ++r) fmt.widen(wv[u][r], g, wf[r]);
        }
#pragma unroll
        for (int m = 0; m < M; ++m) {
          float dot[R];
#pragma unroll
          for (int r = 0; r < R; ++r)
            dot[r] = W::kScaled ? 0.f : acc[m * R + r];
#pragma unroll
          for (int jj = 0; jj < kSubPerGroup; ++jj) {
            const int j = g * kSubPerGroup + jj;
            float xf[8];
            xload.load(m, c * W::kSub + j, xf);
#pragma unroll
            for (int r = 0; r < R; ++r)
#pragma unroll
              for (int e = 0; e < 8; ++e) dot[r] = fmaf(xf[e], wf[r][8 * jj + e], dot[r]);
          }
#pragma unroll
          for (int r = 0; r < R; ++r)
            acc[m * R + r] =
                W::kScaled ? fmaf(dot[r], sc[r][g], acc[m * R + r]) : dot[r];
        }
      }
    }
  }

  const float v = warp_reduce_scatter<V>(acc, lane);
  constexpr int kLanesPerValue = 32 / V;
  if ((lane & (kLanesPerValue - 1)) == 0) partial[warp][lane >> log2_exact(kLanesPerValue)] = v;
  __syncthreads();
  const int t = threadIdx.x;
  if (t < 32) {  // warp 0 finishes: M x R <= 32 sums
    float sum = 0.f;
    if (t < M * R)
      for (int i = 0; i < (blockDim.x >> 5); ++i) sum += partial[i][t];
    out.template finish<M, kF32Out>(y, sum, t, row0, n);
  }
}

// One instantiation per row count, chosen at run time (the batch size of the step).
template <bool kF32Out, class XLoad, class W, class Out = StoreY<>>
__device__ __forceinline__ void gemv_any_m(XLoad xload, W fmt, const void* w, void* y,
                                           uint32_t m, uint32_t n, uint32_t k,
                                           float (*partial)[kMaxAcc], Out out = Out{}) {
  switch (m) {
    case 1: gemv_rows<1, kF32Out>(xload, fmt, w, y, n, k, partial, out); break;
    case 2: gemv_rows<2, kF32Out>(xload, fmt, w, y, n, k, partial, out); break;
    case 3: gemv_rows<3, kF32Out>(xload, fmt, w, y, n, k, partial, out); break;
    case 4: gemv_rows<4, kF32Out>(xload, fmt, w, y, n, k, partial, out); break;
    case 5: gemv_rows<5, kF32Out>(xload, fmt, w, y, n, k, partial, out); break;
    case 6: gemv_rows<6, kF32Out>(xload, fmt, w, y, n, k, partial, out); break;
    case 7: gemv_rows<7, kF32Out>(xload, fmt, w, y, n, k, partial, out); break;
    case 8: gemv_rows<8, kF32Out>(xload, fmt, w, y, n, k, partial, out); break;
    default: __trap();  // ops/matmul.py routes m > 8 to the GEMM
  }
}

}  // namespace atlas::gemv
