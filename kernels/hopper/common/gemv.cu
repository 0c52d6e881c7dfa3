// Decode GEMV: y[m, n] = sum_k x[m, k] * w[n, k] for 1 <= m <= 8 rows of x.
//
// x comes from a load policy: `PlainX` reads it, `SwigluX` computes it on the fly from the
// MLP's gate_up [m, 2k] = [gate | up] as silu_mul_bf16 would (atlas::swiglu_bf16x8, the same
// bf16 roundings), so the down projection needs no separate activation kernel or buffer.
// Every block recomputes the activation of the whole row (k / 8 chunks per thread at most a
// few dozen expf): cheap next to the launch it saves.
//
// Memory-bound: every weight byte is streamed from HBM exactly once. A block owns
// kRowsPerBlock consecutive weight rows and spreads K over its threads, one 16-byte chunk
// (8 bf16) per thread per row, kUnroll chunks per row in flight before the first use
// (ld.global.nc with L1::no_allocate: weights are never re-read). x is small and re-read
// by every block through L1/L2. Each thread keeps M x kRowsPerBlock f32 accumulators; the
// block reduces them deterministically (warp reduce-scatter, then a fixed-order sum over
// warps in shared memory), and the output is rounded once.
// Launch (ops/matmul.py): grid = ceil(n / 4), block = min(256, roundup32(k / 8)) threads.
// Preconditions: k % 8 == 0, x (or gate_up) and w 16-byte aligned.
#include "atlas_common.cuh"
#include "bf16_vec.cuh"

namespace {

constexpr int kRowsPerBlock = 4;  // ops/matmul.py GEMV_ROWS_PER_BLOCK
constexpr int kMaxThreads = 256;  // ops/matmul.py GEMV_MAX_THREADS
constexpr int kMaxAcc = 8 * kRowsPerBlock;

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

constexpr int kUnroll = 2;  // chunks per row each thread has in flight per iteration

// x load policies: chunk c (8 bf16) of row m of the GEMV's input, widened to f32.
struct PlainX {  // x [m, k] bf16
  const uint4* x;
  int kc;  // 16-byte chunks per row
  __device__ __forceinline__ void load(int m, int c, float (&xf)[8]) const {
    atlas::unpack_bf16x8(__ldg(x + static_cast<size_t>(m) * kc + c), xf);
  }
};

struct SwigluX {  // x = bf16(bf16(silu(gate)) * up), gate_up [m, 2k] = [gate | up] bf16
  const uint4* gate_up;
  int kc;
  __device__ __forceinline__ void load(int m, int c, float (&xf)[8]) const {
    const uint4* gate = gate_up + static_cast<size_t>(m) * 2 * kc;
    atlas::unpack_bf16x8(atlas::swiglu_bf16x8(__ldg(gate + c), __ldg(gate + kc + c)), xf);
  }
};

// kUnroll chunks of each of the block's rows, starting at chunk c0 (zeros past the row end).
__device__ __forceinline__ void load_weight_tile(uint4 (&wv)[kUnroll][kRowsPerBlock],
                                                 const uint4* const (&wrow)[kRowsPerBlock],
                                                 int c0, int kc) {
#pragma unroll
  for (int u = 0; u < kUnroll; ++u) {
    const int c = c0 + u * static_cast<int>(blockDim.x);
#pragma unroll
    for (int r = 0; r < kRowsPerBlock; ++r)
      wv[u][r] = c < kc ? atlas::ld_stream(wrow[r] + c) : make_uint4(0u, 0u, 0u, 0u);
  }
}

template <int M, bool kF32Out, class XLoad>
__device__ __forceinline__ void gemv_rows(XLoad xload, const __nv_bfloat16* __restrict__ w,
                                          void* __restrict__ y, int n, int k,
                                          float (*partial)[kMaxAcc]) {
  constexpr int V = pow2_at_least(M) * kRowsPerBlock;  // accumulator (m, r) at m * 4 + r
  const int kc = k >> 3;
  const int row0 = blockIdx.x * kRowsPerBlock;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const uint4* wrow[kRowsPerBlock];
#pragma unroll
  for (int r = 0; r < kRowsPerBlock; ++r)  // rows past n re-read row n-1; never stored
    wrow[r] = reinterpret_cast<const uint4*>(w) + static_cast<size_t>(min(row0 + r, n - 1)) * kc;

  float acc[V];
#pragma unroll
  for (int i = 0; i < V; ++i) acc[i] = 0.f;

  // The first tile of weights is requested before waiting on the previous kernel (weights
  // are never written by a kernel), so its DRAM round trip overlaps that kernel's tail.
  uint4 wv[kUnroll][kRowsPerBlock];
  load_weight_tile(wv, wrow, threadIdx.x, kc);
  atlas::pdl_enter();
  for (int c0 = threadIdx.x; c0 < kc; c0 += kUnroll * blockDim.x) {
    if (c0 != static_cast<int>(threadIdx.x)) load_weight_tile(wv, wrow, c0, kc);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int c = c0 + u * blockDim.x;
      if (c >= kc) break;
      float wf[kRowsPerBlock][8];
#pragma unroll
      for (int r = 0; r < kRowsPerBlock; ++r) atlas::unpack_bf16x8(wv[u][r], wf[r]);
#pragma unroll
      for (int m = 0; m < M; ++m) {
        float xf[8];
        xload.load(m, c, xf);
#pragma unroll
        for (int r = 0; r < kRowsPerBlock; ++r)
#pragma unroll
          for (int e = 0; e < 8; ++e) acc[m * kRowsPerBlock + r] = fmaf(xf[e], wf[r][e], acc[m * kRowsPerBlock + r]);
      }
    }
  }

  const float v = warp_reduce_scatter<V>(acc, lane);
  constexpr int kLanesPerValue = 32 / V;
  if ((lane & (kLanesPerValue - 1)) == 0) partial[warp][lane >> log2_exact(kLanesPerValue)] = v;
  __syncthreads();
  const int t = threadIdx.x;
  if (t < M * kRowsPerBlock) {
    const int m = t / kRowsPerBlock, row = row0 + t % kRowsPerBlock;
    float sum = 0.f;
    for (int i = 0; i < (blockDim.x >> 5); ++i) sum += partial[i][t];
    if (row < n) {
      const size_t at = static_cast<size_t>(m) * n + row;
      if (kF32Out)  // logits: the bf16-rounded value, widened (transformers' bf16 LM head)
        static_cast<float*>(y)[at] = atlas::round_bf16(sum);
      else
        static_cast<__nv_bfloat16*>(y)[at] = atlas::f32_to_bf16(sum);
    }
  }
}

__shared__ float partial_sums[kMaxThreads / 32][kMaxAcc];  // [warp][m * 4 + r]

template <bool kF32Out, class XLoad>
__device__ __forceinline__ void gemv(XLoad xload, const __nv_bfloat16* w, void* y, uint32_t m,
                                     uint32_t n, uint32_t k) {
  float(*partial)[kMaxAcc] = partial_sums;
  switch (m) {
    case 1: gemv_rows<1, kF32Out>(xload, w, y, n, k, partial); break;
    case 2: gemv_rows<2, kF32Out>(xload, w, y, n, k, partial); break;
    case 3: gemv_rows<3, kF32Out>(xload, w, y, n, k, partial); break;
    case 4: gemv_rows<4, kF32Out>(xload, w, y, n, k, partial); break;
    case 5: gemv_rows<5, kF32Out>(xload, w, y, n, k, partial); break;
    case 6: gemv_rows<6, kF32Out>(xload, w, y, n, k, partial); break;
    case 7: gemv_rows<7, kF32Out>(xload, w, y, n, k, partial); break;
    case 8: gemv_rows<8, kF32Out>(xload, w, y, n, k, partial); break;
    default: __trap();  // ops/matmul.py routes m > 8 to the GEMM
  }
}

__device__ __forceinline__ PlainX plain_x(const __nv_bfloat16* x, uint32_t k) {
  return {reinterpret_cast<const uint4*>(x), static_cast<int>(k >> 3)};
}

__device__ __forceinline__ SwigluX swiglu_x(const __nv_bfloat16* gate_up, uint32_t k) {
  return {reinterpret_cast<const uint4*>(gate_up), static_cast<int>(k >> 3)};
}

}  // namespace

extern "C" __global__ void __launch_bounds__(kMaxThreads)
    gemv_bf16(const __nv_bfloat16* x, const __nv_bfloat16* w, __nv_bfloat16* y, uint32_t m,
              uint32_t n, uint32_t k) {
  gemv<false>(plain_x(x, k), w, y, m, n, k);
}

extern "C" __global__ void __launch_bounds__(kMaxThreads)
    gemv_bf16_f32(const __nv_bfloat16* x, const __nv_bfloat16* w, float* y, uint32_t m,
                  uint32_t n, uint32_t k) {
  gemv<true>(plain_x(x, k), w, y, m, n, k);
}

// m == 1 only (ops/matmul.py picks it for batch-1 decode): without the 8-row instantiation
// the kernel needs about a third of the registers, so more blocks stream weights per SM.
extern "C" __global__ void __launch_bounds__(kMaxThreads)
    gemv_bf16_single(const __nv_bfloat16* x, const __nv_bfloat16* w, __nv_bfloat16* y,
                     uint32_t m, uint32_t n, uint32_t k) {
  if (m != 1) __trap();
  gemv_rows<1, false>(plain_x(x, k), w, y, n, k, partial_sums);
}

extern "C" __global__ void __launch_bounds__(kMaxThreads)
    gemv_bf16_f32_single(const __nv_bfloat16* x, const __nv_bfloat16* w, float* y, uint32_t m,
                         uint32_t n, uint32_t k) {
  if (m != 1) __trap();
  gemv_rows<1, true>(plain_x(x, k), w, y, n, k, partial_sums);
}

// The MLP down projection with its activation fused: y = swiglu(gate_up) @ w.T, where
// gate_up is [m, 2k] = [gate | up] and k is the intermediate size (w is [n, k]).
// Minimum 1 block per SM: the IEEE division in silu has a slow-path subroutine call, and
// without this bound ptxas caps registers (64 / 128) around it and spills on sm_90a.
extern "C" __global__ void __launch_bounds__(kMaxThreads, 1)
    gemv_silu_bf16(const __nv_bfloat16* gate_up, const __nv_bfloat16* w, __nv_bfloat16* y,
                   uint32_t m, uint32_t n, uint32_t k) {
  gemv<false>(swiglu_x(gate_up, k), w, y, m, n, k);
}

extern "C" __global__ void __launch_bounds__(kMaxThreads, 1)
    gemv_silu_bf16_single(const __nv_bfloat16* gate_up, const __nv_bfloat16* w,
                          __nv_bfloat16* y, uint32_t m, uint32_t n, uint32_t k) {
  if (m != 1) __trap();
  gemv_rows<1, false>(swiglu_x(gate_up, k), w, y, n, k, partial_sums);
}
