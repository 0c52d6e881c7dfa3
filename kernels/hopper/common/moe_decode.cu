// MoE expert FFN for decode batches (1..8 tokens): one launch per projection covering every
// (token, selected expert) pair, reading only the selected experts' weights.
//
// Both kernels are GEMV-shaped and bandwidth-bound: a warp owns one output row and streams
// that row of the selected expert's weights (16-byte ld.global.nc chunks, several in flight
// per lane), the activations come through L1/L2 (__ldg), and the warp's partial sums meet in
// a butterfly (atlas::warp_sum), so every result is bit-reproducible. Expert ids are read from
// device memory after the PDL wait (the router wrote them), so nothing is prefetched earlier.
//
// moe_gate_up_silu_bf16: grid (ceil(inter / 8), tokens * top_k), 256 threads. Warp w of
//   block (bx, pair) computes intermediate column i = 8 bx + w of slot `pair` = t * top_k + j:
//   g = bf16(x[t] . w_gate_up[e][i]), u = bf16(x[t] . w_gate_up[e][inter + i]) and
//   act[pair][i] = bf16(bf16(silu(g)) * u), the dense MLP's gate_up GEMV + silu_mul.
// moe_down_sum_bf16: grid (ceil(hidden / 8), tokens), 256 threads. Warp w of block (bx, t)
//   computes out[t][n], n = 8 bx + w: for j = 0..top_k-1 in order,
//   acc += topk_weights[t][j] * bf16(act[t][j] . w_down[e_j][n]) in float32 (two experts'
//   rows are streamed together so twice the loads are in flight); out = bf16(acc).
// An id outside [0, experts) gives act = 0 and is skipped in the sum.
//
// Where the leaf defines ATLAS_MOE_EXPERTS (an MoE leaf) with ATLAS_HIDDEN, ATLAS_MOE_INTER
// and ATLAS_MOE_TOPK, launches with exactly those shapes run an instantiation with them as
// compile-time constants (fully unrolled chunk loops); other shapes take the general one.
// Preconditions (ops/moe.py): hidden, inter multiples of 16; x, act, weights 16-byte aligned.
#include "atlas_common.cuh"
#include "bf16_vec.cuh"

namespace {

constexpr int kWarps = 8;  // ops/moe.py DECODE_ROWS_PER_BLOCK
constexpr int kThreads = 32 * kWarps;

#if defined(ATLAS_MOE_EXPERTS) && defined(ATLAS_HIDDEN) && defined(ATLAS_MOE_INTER) && \
    defined(ATLAS_MOE_TOPK)
constexpr bool kLeaf = true;
constexpr int kLeafHidden = ATLAS_HIDDEN, kLeafInter = ATLAS_MOE_INTER, kLeafTopK = ATLAS_MOE_TOPK;
#else
constexpr bool kLeaf = false;
constexpr int kLeafHidden = 0, kLeafInter = 0, kLeafTopK = 0;
#endif

// sum over the 8 elements of two 16-byte bf16 vectors' products, into acc
__device__ __forceinline__ float dot8(const uint4& a, const uint4& b, float acc) {
  float af[8], bf[8];
  atlas::unpack_bf16x8(a, af);
  atlas::unpack_bf16x8(b, bf);
#pragma unroll
  for (int e = 0; e < 8; ++e) acc = fmaf(af[e], bf[e], acc);
  return acc;
}

__device__ __forceinline__ bool valid_expert(int e, uint32_t experts) {
  return e >= 0 && e < static_cast<int>(experts);
}

// kHidden: 0 = run-time hidden.
template <int kHidden>
__device__ __forceinline__ void gate_up_row(const __nv_bfloat16* __restrict__ x,
                                            const __nv_bfloat16* __restrict__ w,
                                            const int32_t* __restrict__ topk_ids,
                                            __nv_bfloat16* __restrict__ act, uint32_t top_k,
                                            uint32_t hidden_arg, uint32_t inter,
                                            uint32_t experts) {
  const int hidden = kHidden > 0 ? kHidden : static_cast<int>(hidden_arg);
  const int lane = threadIdx.x & 31;
  const int row = blockIdx.x * kWarps + (threadIdx.x >> 5);
  const int pair = blockIdx.y, token = pair / static_cast<int>(top_k);
  if (row >= static_cast<int>(inter)) return;
  __nv_bfloat16* dst = act + static_cast<size_t>(pair) * inter + row;
  const int e = topk_ids[pair];
  if (!valid_expert(e, experts)) {
    if (lane == 0) *dst = atlas::f32_to_bf16(0.f);
    return;
  }
  const int kc = hidden / 8;
  const uint4* xv = reinterpret_cast<const uint4*>(x + static_cast<size_t>(token) * hidden);
  const uint4* wg = reinterpret_cast<const uint4*>(
      w + (static_cast<size_t>(e) * 2 * inter + row) * hidden);
  const uint4* wu = wg + static_cast<size_t>(inter) * kc;
  float g = 0.f, u = 0.f;
#pragma unroll(kHidden > 0 ? 8 : 4)
  for (int c = lane; c < kc; c += 32) {
    const uint4 a = atlas::ld_stream(wg + c), b = atlas::ld_stream(wu + c);
    const uint4 xc = __ldg(xv + c);
    g = dot8(a, xc, g);
    u = dot8(b, xc, u);
  }
  g = atlas::round_bf16(atlas::warp_sum(g));
  u = atlas::round_bf16(atlas::warp_sum(u));
  if (lane == 0) *dst = atlas::f32_to_bf16(atlas::round_bf16(g / (1.f + expf(-g))) * u);
}

// kInter, kTopK: 0 = run-time values.
template <int kInter, int kTopK>
__device__ __forceinline__ void down_row(const __nv_bfloat16* __restrict__ act,
                                         const __nv_bfloat16* __restrict__ w,
                                         const int32_t* __restrict__ topk_ids,
                                         const float* __restrict__ topk_weights,
                                         __nv_bfloat16* __restrict__ out, uint32_t top_k_arg,
                                         uint32_t hidden, uint32_t inter_arg,
                                         uint32_t experts) {
  const int inter = kInter > 0 ? kInter : static_cast<int>(inter_arg);
  const int top_k = kTopK > 0 ? kTopK : static_cast<int>(top_k_arg);
  const int lane = threadIdx.x & 31;
  const int row = blockIdx.x * kWarps + (threadIdx.x >> 5), token = blockIdx.y;
  if (row >= static_cast<int>(hidden)) return;
  const int kc = inter / 8;
  const int32_t* ids = topk_ids + static_cast<size_t>(token) * top_k;
  const float* weights = topk_weights + static_cast<size_t>(token) * top_k;
  const uint4* a0 = reinterpret_cast<const uint4*>(act + static_cast<size_t>(token) * top_k * inter);
  float acc = 0.f;
#pragma unroll
  for (int j = 0; j < top_k; j += 2) {  // experts j and j + 1 streamed together
    const bool has1 = j + 1 < top_k;
    const int e0 = ids[j], e1 = has1 ? ids[j + 1] : -1;
    const bool v0 = valid_expert(e0, experts), v1 = has1 && valid_expert(e1, experts);
    const uint4* x0 = a0 + static_cast<size_t>(j) * kc;
    const uint4* x1 = x0 + kc;
    const uint4* w0 = reinterpret_cast<const uint4*>(w) +
                      (static_cast<size_t>(v0 ? e0 : 0) * hidden + row) * kc;
    const uint4* w1 = reinterpret_cast<const uint4*>(w) +
                      (static_cast<size_t>(v1 ? e1 : 0) * hidden + row) * kc;
    float d0 = 0.f, d1 = 0.f;
#pragma unroll 4
    for (int c = lane; c < kc; c += 32) {
      if (v0) d0 = dot8(atlas::ld_stream(w0 + c), __ldg(x0 + c), d0);
      if (v1) d1 = dot8(atlas::ld_stream(w1 + c), __ldg(x1 + c), d1);
    }
    if (v0) acc = fmaf(weights[j], atlas::round_bf16(atlas::warp_sum(d0)), acc);
    if (v1) acc = fmaf(weights[j + 1], atlas::round_bf16(atlas::warp_sum(d1)), acc);
  }
  if (lane == 0) out[static_cast<size_t>(token) * hidden + row] = atlas::f32_to_bf16(acc);
}

}  // namespace

// Minimum 1 block per SM: the IEEE division in silu has a slow-path subroutine call, around
// which ptxas otherwise caps the registers and spills on sm_121 (as for gemv_silu_bf16).
extern "C" __global__ void __launch_bounds__(kThreads, 1)
    moe_gate_up_silu_bf16(const __nv_bfloat16* x, const __nv_bfloat16* w_gate_up,
                          const int32_t* topk_ids, __nv_bfloat16* act, uint32_t tokens,
                          uint32_t top_k, uint32_t hidden, uint32_t inter, uint32_t experts) {
  atlas::pdl_enter();
  if (blockIdx.y >= tokens * top_k) return;
  if (kLeaf && hidden == kLeafHidden && inter == kLeafInter && top_k == kLeafTopK)
    gate_up_row<kLeafHidden>(x, w_gate_up, topk_ids, act, top_k, hidden, inter, experts);
  else
    gate_up_row<0>(x, w_gate_up, topk_ids, act, top_k, hidden, inter, experts);
}

extern "C" __global__ void __launch_bounds__(kThreads)
    moe_down_sum_bf16(const __nv_bfloat16* act, const __nv_bfloat16* w_down,
                      const int32_t* topk_ids, const float* topk_weights, __nv_bfloat16* out,
                      uint32_t tokens, uint32_t top_k, uint32_t hidden, uint32_t inter,
                      uint32_t experts) {
  atlas::pdl_enter();
  if (blockIdx.y >= tokens) return;
  if (kLeaf && hidden == kLeafHidden && inter == kLeafInter && top_k == kLeafTopK)
    down_row<kLeafInter, kLeafTopK>(act, w_down, topk_ids, topk_weights, out, top_k, hidden,
                                    inter, experts);
  else
    down_row<0, 0>(act, w_down, topk_ids, topk_weights, out, top_k, hidden, inter, experts);
}
