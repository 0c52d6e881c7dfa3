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
// moe_down_sum_bf16: grid (ceil(hidden / rows), tokens), 256 threads, rows = rows_per_block
//   (ops/moe.py down_rows), taken in passes of rpp = 16 / slots rows (at least 1). A pass of
//   block (bx, t) owns rpp output rows of token t for all its slots: its rpp * slots items
//   (row r, slot j) go 2 per warp, so neighbouring warps stream different experts' rows,
//   with every chunk of a step batch in flight (the leaf's whole row) before the first is
//   used. Item (r, j) leaves act[t][j] . w_down[e_j][n] in shared memory; then thread r sums
//   its row in slot order, acc += topk_weights[t][j] * bf16(y_j) in float32, out = bf16(acc)
//   (bit-reproducible, no atomics). Python sizes the passes so the grid is about one wave.
//   History (H200, 2026-12-01): one warp per row of all k experts (256 blocks at batch 1):
//   1.4-1.7 TB/s; one short pass per block (1,024 blocks at batch 1, 8,192 at batch 8):
//   latency-bound at batch 8 and for Qwen3.5-35B-A3B's 1-row passes (a decode regression).
// moe_down_add_rmsnorm[_offset]_bf16: the same sum s, added into the residual stream,
//   residual = bf16(residual + bf16(s)), then the next layer's RMSNorm into `normed`
//   (add_rmsnorm's numerics): the last block of each token to finish (a ticket from
//   atomicInc on counters[t], which wraps back to zero for the next launch or graph replay)
//   reads the token's updated residual row from L2 and normalizes it. This replaces the
//   add_rmsnorm launch after a decode MoE block.
// An id outside [0, experts) gives act = 0 and is skipped in the sum.
//
// Where the leaf defines ATLAS_MOE_EXPERTS (an MoE leaf) with ATLAS_HIDDEN, ATLAS_MOE_INTER
// and ATLAS_MOE_TOPK, launches with exactly those shapes run an instantiation with them as
// compile-time constants (fully unrolled chunk loops); other shapes take the general one.
// Preconditions (ops/moe.py): hidden, inter multiples of 16; x, act, weights, residual,
// norm weight and normed 16-byte aligned.
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

// The shared expert of a block (Qwen2-MoE / Qwen3-Next style), as `shared_slots` more slots
// after the top_k routed ones: slot top_k + c is chunk c of the shared expert's intermediate
// columns [c inter, (c + 1) inter) (past shared_inter: zero act). w_gate_up [2 shared_inter,
// hidden] (gate rows, then up rows), w_down [hidden, shared_inter].
struct SharedExpert {
  const __nv_bfloat16* w_gate_up;
  const __nv_bfloat16* w_down;
  int slots, inter;
};

// kHidden: 0 = run-time hidden.
template <int kHidden>
__device__ __forceinline__ void gate_up_row(const __nv_bfloat16* __restrict__ x,
                                            const __nv_bfloat16* __restrict__ w,
                                            const int32_t* __restrict__ topk_ids,
                                            __nv_bfloat16* __restrict__ act, uint32_t top_k,
                                            uint32_t hidden_arg, uint32_t inter,
                                            uint32_t experts, const SharedExpert& sh) {
  const int hidden = kHidden > 0 ? kHidden : static_cast<int>(hidden_arg);
  const int lane = threadIdx.x & 31;
  const int row = blockIdx.x * kWarps + (threadIdx.x >> 5);
  const int slots = static_cast<int>(top_k) + sh.slots;
  const int pair = blockIdx.y, token = pair / slots, j = pair - token * slots;
  if (row >= static_cast<int>(inter)) return;
  __nv_bfloat16* dst = act + static_cast<size_t>(pair) * inter + row;
  const int kc = hidden / 8;
  const uint4* wg;
  size_t up_rows;  // distance from a gate row to its up row, in rows
  if (j < static_cast<int>(top_k)) {
    const int e = topk_ids[pair];
    if (!valid_expert(e, experts)) {
      if (lane == 0) *dst = atlas::f32_to_bf16(0.f);
      return;
    }
    wg = reinterpret_cast<const uint4*>(w + (static_cast<size_t>(e) * 2 * inter + row) * hidden);
    up_rows = inter;
  } else {
    const int col = (j - static_cast<int>(top_k)) * static_cast<int>(inter) + row;
    if (col >= sh.inter) {
      if (lane == 0) *dst = atlas::f32_to_bf16(0.f);
      return;
    }
    wg = reinterpret_cast<const uint4*>(sh.w_gate_up + static_cast<size_t>(col) * hidden);
    up_rows = sh.inter;
  }
  const uint4* xv = reinterpret_cast<const uint4*>(x + static_cast<size_t>(token) * hidden);
  const uint4* wu = wg + up_rows * kc;
  float g = 0.f, u = 0.f;
  // every chunk of a step batch in flight before the first is used (the leaf's whole row);
  // past the row a lane re-reads its last chunk and skips the product
  constexpr int kSteps = kHidden > 0 ? (kHidden / 8 + 31) / 32 : 4;
  for (int c0 = lane; c0 < kc; c0 += 32 * kSteps) {
    uint4 a[kSteps], b[kSteps], xc[kSteps];
#pragma unroll
    for (int st = 0; st < kSteps; ++st) {
      const int c = min(c0 + 32 * st, kc - 1);
      a[st] = atlas::ld_stream(wg + c);
      b[st] = atlas::ld_stream(wu + c);
      xc[st] = __ldg(xv + c);
    }
#pragma unroll
    for (int st = 0; st < kSteps; ++st) {
      if (c0 + 32 * st < kc) {
        g = dot8(a[st], xc[st], g);
        u = dot8(b[st], xc[st], u);
      }
    }
  }
  g = atlas::round_bf16(atlas::warp_sum(g));
  u = atlas::round_bf16(atlas::warp_sum(u));
  if (lane == 0) *dst = atlas::f32_to_bf16(atlas::round_bf16(g / (1.f + expf(-g))) * u);
}

// Down projection work items: item i of a block is (row r = i / top_k, slot j = i % top_k),
// so the top_k experts of one output row sit in neighbouring warps. A warp takes kItemsPerWarp
// items at a time and streams their weight rows together (all loads of a pass are issued
// before the first is used); the block's items pass by pass.
constexpr int kItemsPerWarp = 2;
constexpr int kItemsPerPass = kItemsPerWarp * kWarps;
// items of one block: top_k * rows_per_block <= max(kItemsPerPass, top_k) (ops/moe.py)
constexpr int kMaxBlockItems = 32;

struct DownArgs {
  const __nv_bfloat16* act;      // [tokens, top_k, inter]
  const __nv_bfloat16* w;        // [experts, hidden, inter]
  const int32_t* topk_ids;       // [tokens, slots] (slots = top_k + shared slots)
  const float* topk_weights;     // [tokens, slots]
  __nv_bfloat16* out;            // [tokens, hidden]: the weighted sum (delta), or the residual
  const __nv_bfloat16* norm_w;   // finish only: RMSNorm weight [hidden]
  __nv_bfloat16* normed;         // finish only: [tokens, hidden]
  uint32_t* counters;            // finish only: [tokens], zero between launches
  SharedExpert shared;           // slots past top_k: the shared expert's chunks (w_down)
  int tokens, top_k, hidden, inter, experts, rows;
  float eps;
};

// The last block of a token to finish normalizes that token's residual row (which every block
// of the token has updated in place) into `normed`: the add_rmsnorm kernel's numerics, the
// sum of squares in a different order. The ticket counter wraps to zero for the next launch.
template <bool kOffset>
__device__ __forceinline__ void finish_norm(const DownArgs& a, int token) {
  __shared__ bool last;
  __shared__ float scratch[kWarps];
  __threadfence();  // this block's residual writes, before its ticket
  __syncthreads();
  if (threadIdx.x == 0)
    last = atomicInc(a.counters + token, gridDim.x - 1) == gridDim.x - 1;
  __syncthreads();
  if (!last) return;
  __threadfence();  // every other block's writes, before they are read (L2: __ldcg)
  const int nvec = a.hidden / atlas::kBf16PerVec;
  const uint4* rv = reinterpret_cast<const uint4*>(a.out + static_cast<size_t>(token) * a.hidden);
  float sumsq = 0.f;
  for (int v = threadIdx.x; v < nvec; v += blockDim.x) {
    float x[8];
    atlas::unpack_bf16x8(__ldcg(rv + v), x);
#pragma unroll
    for (int e = 0; e < 8; ++e) sumsq = fmaf(x[e], x[e], sumsq);
  }
  const float total = atlas::block_sum(sumsq, scratch);
  const float inv_rms = rsqrtf(total / static_cast<float>(a.hidden) + a.eps);
  const uint4* wv = reinterpret_cast<const uint4*>(a.norm_w);
  uint4* ov = reinterpret_cast<uint4*>(a.normed + static_cast<size_t>(token) * a.hidden);
  for (int v = threadIdx.x; v < nvec; v += blockDim.x) {
    float x[8], wf[8], y[8];
    atlas::unpack_bf16x8(__ldcg(rv + v), x);
    atlas::unpack_bf16x8(__ldg(wv + v), wf);
#pragma unroll
    for (int e = 0; e < 8; ++e)
      y[e] = kOffset ? (x[e] * inv_rms) * (1.f + wf[e]) : wf[e] * atlas::round_bf16(x[e] * inv_rms);
    ov[v] = atlas::pack_bf16x8(y);
  }
}

// Steps of 32 chunks a lane loads for all its items before it uses the first (general path):
// a load next to its use would cost the warp one DRAM round trip per step.
constexpr int kDownSteps = 2;

// One pass: the block's items (row r, slot j) for rows row0 .. row0 + rpp - 1, their float32
// down products left in ys[r * slots + j]. kInter: 0 = run-time inter.
template <int kInter>
__device__ __forceinline__ void down_pass(const DownArgs& a, const int32_t* ids,
                                          const uint4* act, int slots, int top_k, int rpp,
                                          int row0, float* ys) {
  const int inter = kInter > 0 ? kInter : a.inter;
  const int items = slots * rpp, kc = inter / 8;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const uint4* w = reinterpret_cast<const uint4*>(a.w);
  for (int base = 0; base < items; base += kItemsPerPass) {
    const uint4* wp[kItemsPerWarp];
    const uint4* xp[kItemsPerWarp];
    int last[kItemsPerWarp];  // the item's last weight chunk (a shared chunk may be partial)
    bool live[kItemsPerWarp];
    float d[kItemsPerWarp];
#pragma unroll
    for (int m = 0; m < kItemsPerWarp; ++m) {
      const int i = base + warp + kWarps * m, r = i / slots, j = i - r * slots;
      const int row = row0 + r;
      const bool in = i < items && row < a.hidden;
      last[m] = kc - 1;
      if (in && j >= top_k) {  // shared chunk c: columns [c inter, ...) of the shared row
        const int c = j - top_k, sh_kc = a.shared.inter / 8;
        live[m] = true;
        wp[m] = reinterpret_cast<const uint4*>(a.shared.w_down) +
                static_cast<size_t>(row) * sh_kc + c * kc;
        last[m] = min(kc, sh_kc - c * kc) - 1;
      } else {
        // a dead item (past the rows, or an expert id outside [0, experts)) streams expert
        // 0's row 0 (an L2 hit after the first) so the loads need no branch; it is dropped
        const int e = in ? ids[j] : -1;
        live[m] = valid_expert(e, a.experts);
        wp[m] = w + (static_cast<size_t>(live[m] ? e : 0) * a.hidden + (live[m] ? row : 0)) * kc;
      }
      xp[m] = act + static_cast<size_t>(live[m] ? j : 0) * kc;
      d[m] = 0.f;
    }
    // every chunk of a step batch in flight at once; past an item's last chunk (a partial
    // shared chunk, or past inter) a lane re-reads its last chunk and the product is skipped
    constexpr int kSteps = kInter > 0 ? (kInter / 8 + 31) / 32 : kDownSteps;
    for (int c0 = lane; c0 < kc; c0 += 32 * kSteps) {
      uint4 wc[kSteps][kItemsPerWarp], xc[kSteps][kItemsPerWarp];
#pragma unroll
      for (int st = 0; st < kSteps; ++st)
#pragma unroll
        for (int m = 0; m < kItemsPerWarp; ++m) {
          const int c = min(c0 + 32 * st, kc - 1);
          wc[st][m] = atlas::ld_stream(wp[m] + min(c, last[m]));
          xc[st][m] = __ldg(xp[m] + c);
        }
#pragma unroll
      for (int st = 0; st < kSteps; ++st)
#pragma unroll
        for (int m = 0; m < kItemsPerWarp; ++m)
          if (c0 + 32 * st < kc) d[m] = dot8(wc[st][m], xc[st][m], d[m]);
    }
#pragma unroll
    for (int m = 0; m < kItemsPerWarp; ++m) {
      const int i = base + warp + kWarps * m;
      const float y = atlas::warp_sum(d[m]);
      if (lane == 0 && i < items) ys[i] = live[m] ? y : 0.f;
    }
  }
}

// kInter, kTopK, kRpp: 0 = run-time values (a leaf instantiation has no shared slots). The
// block owns a.rows output rows of one token, in passes of rpp rows (rpp * slots items, at
// most one pass of kItemsPerPass unless slots exceed it): fewer, longer blocks amortize the
// per-block work (ids, the activation rows through L1, the barriers, the finishing ticket).
// kFinish: add the sum into the residual (a.out) and normalize (finish_norm) instead of
// writing it to a.out.
template <int kInter, int kTopK, int kRpp, bool kFinish, bool kOffset>
__device__ __forceinline__ void down_block(const DownArgs& a) {
  const int top_k = kTopK > 0 ? kTopK : a.top_k;
  const int n_shared = kTopK > 0 ? 0 : a.shared.slots, slots = top_k + n_shared;
  const int rpp = kRpp > 0 ? kRpp : max(1, kItemsPerPass / slots);
  const int inter = kInter > 0 ? kInter : a.inter, kc = inter / 8;
  const int token = blockIdx.y;
  const int32_t* ids = a.topk_ids + static_cast<size_t>(token) * slots;
  const float* weights = a.topk_weights + static_cast<size_t>(token) * slots;
  const uint4* act = reinterpret_cast<const uint4*>(a.act) + static_cast<size_t>(token) * slots * kc;
  __shared__ float ys[kMaxBlockItems];  // float32 down product of each item of a pass

  for (int g = 0; g < a.rows; g += rpp) {
    const int row0 = blockIdx.x * a.rows + g;
    down_pass<kInter>(a, ids, act, slots, top_k, rpp, row0, ys);
    __syncthreads();
    const int r = threadIdx.x, row = row0 + r;
    if (r < rpp && row < a.hidden) {
      // the routed slots' weighted sum in slot order, each expert's product rounded to bf16
      const float* y = ys + r * slots;
      float acc = 0.f;
      for (int j = 0; j < top_k; ++j)
        if (valid_expert(ids[j], a.experts)) acc = fmaf(weights[j], atlas::round_bf16(y[j]), acc);
      if (n_shared > 0) {  // transformers' routed + bf16(gate * shared), each op in bf16
        float shared = 0.f;
        for (int c = 0; c < n_shared; ++c) shared += y[top_k + c];
        acc = atlas::round_bf16(acc) +
              atlas::round_bf16(weights[top_k] * atlas::round_bf16(shared));
      }
      __nv_bfloat16* dst = a.out + static_cast<size_t>(token) * a.hidden + row;
      *dst = atlas::f32_to_bf16(kFinish ? atlas::bf16_to_f32(*dst) + atlas::round_bf16(acc) : acc);
    }
    __syncthreads();  // ys is the next pass's
  }
  if constexpr (kFinish) finish_norm<kOffset>(a, token);
}

__device__ __forceinline__ DownArgs down_args(
    const __nv_bfloat16* act, const __nv_bfloat16* w, const int32_t* topk_ids,
    const float* topk_weights, __nv_bfloat16* out, const __nv_bfloat16* norm_w,
    __nv_bfloat16* normed, uint32_t* counters, uint32_t tokens, uint32_t top_k, uint32_t hidden,
    uint32_t inter, uint32_t experts, uint32_t rows, const __nv_bfloat16* shared_down,
    uint32_t shared_slots, uint32_t shared_inter, float eps) {
  return DownArgs{act, w, topk_ids, topk_weights, out, norm_w, normed, counters,
                  SharedExpert{nullptr, shared_down, static_cast<int>(shared_slots),
                               static_cast<int>(shared_inter)},
                  static_cast<int>(tokens), static_cast<int>(top_k), static_cast<int>(hidden),
                  static_cast<int>(inter), static_cast<int>(experts), static_cast<int>(rows), eps};
}

template <bool kFinish, bool kOffset>
__device__ __forceinline__ void down_dispatch(const DownArgs& a) {
  atlas::pdl_enter();
  if (static_cast<int>(blockIdx.y) >= a.tokens) return;
  constexpr int kLeafRpp =  // rows per pass without shared slots (ops/moe.py down_rows)
      kLeafTopK > 0 && kLeafTopK < kItemsPerPass ? kItemsPerPass / kLeafTopK : 1;
  if (kLeaf && a.hidden == kLeafHidden && a.inter == kLeafInter && a.top_k == kLeafTopK &&
      a.shared.slots == 0)
    down_block<kLeafInter, kLeafTopK, kLeafRpp, kFinish, kOffset>(a);
  else
    down_block<0, 0, 0, kFinish, kOffset>(a);
}

}  // namespace

// At least 2 blocks per SM (at most 128 registers): the leaf's fully unrolled loads took 126
// without the bound, one more register away from halving the occupancy. No spills on sm_90a
// or sm_121 (the IEEE division in silu has a slow-path call that once made ptxas spill under
// a tighter cap).
extern "C" __global__ void __launch_bounds__(kThreads, 2)
    moe_gate_up_silu_bf16(const __nv_bfloat16* x, const __nv_bfloat16* w_gate_up,
                          const int32_t* topk_ids, __nv_bfloat16* act, uint32_t tokens,
                          uint32_t top_k, uint32_t hidden, uint32_t inter, uint32_t experts,
                          const __nv_bfloat16* shared_gate_up, uint32_t shared_slots,
                          uint32_t shared_inter) {
  atlas::pdl_enter();
  if (blockIdx.y >= tokens * (top_k + shared_slots)) return;
  const SharedExpert sh{shared_gate_up, nullptr, static_cast<int>(shared_slots),
                        static_cast<int>(shared_inter)};
  if (kLeaf && hidden == kLeafHidden && inter == kLeafInter && top_k == kLeafTopK)
    gate_up_row<kLeafHidden>(x, w_gate_up, topk_ids, act, top_k, hidden, inter, experts, sh);
  else
    gate_up_row<0>(x, w_gate_up, topk_ids, act, top_k, hidden, inter, experts, sh);
}

extern "C" __global__ void __launch_bounds__(kThreads, 4)
    moe_down_sum_bf16(const __nv_bfloat16* act, const __nv_bfloat16* w_down,
                      const int32_t* topk_ids, const float* topk_weights, __nv_bfloat16* out,
                      uint32_t tokens, uint32_t top_k, uint32_t hidden, uint32_t inter,
                      uint32_t experts, uint32_t rows_per_block, const __nv_bfloat16* shared_down,
                      uint32_t shared_slots, uint32_t shared_inter) {
  down_dispatch<false, false>(down_args(act, w_down, topk_ids, topk_weights, out, nullptr,
                                        nullptr, nullptr, tokens, top_k, hidden, inter, experts,
                                        rows_per_block, shared_down, shared_slots, shared_inter,
                                        0.f));
}

// The same sum added into the residual stream, then the next RMSNorm (see the header).
extern "C" __global__ void __launch_bounds__(kThreads, 4)
    moe_down_add_rmsnorm_bf16(const __nv_bfloat16* act, const __nv_bfloat16* w_down,
                              const int32_t* topk_ids, const float* topk_weights,
                              __nv_bfloat16* residual, const __nv_bfloat16* w,
                              __nv_bfloat16* normed, uint32_t* counters, uint32_t tokens,
                              uint32_t top_k, uint32_t hidden, uint32_t inter, uint32_t experts,
                              uint32_t rows_per_block, const __nv_bfloat16* shared_down,
                              uint32_t shared_slots, uint32_t shared_inter, float eps) {
  down_dispatch<true, false>(down_args(act, w_down, topk_ids, topk_weights, residual, w, normed,
                                       counters, tokens, top_k, hidden, inter, experts,
                                       rows_per_block, shared_down, shared_slots, shared_inter,
                                       eps));
}

extern "C" __global__ void __launch_bounds__(kThreads, 4)
    moe_down_add_rmsnorm_offset_bf16(const __nv_bfloat16* act, const __nv_bfloat16* w_down,
                                     const int32_t* topk_ids, const float* topk_weights,
                                     __nv_bfloat16* residual, const __nv_bfloat16* w,
                                     __nv_bfloat16* normed, uint32_t* counters, uint32_t tokens,
                                     uint32_t top_k, uint32_t hidden, uint32_t inter,
                                     uint32_t experts, uint32_t rows_per_block,
                                     const __nv_bfloat16* shared_down, uint32_t shared_slots,
                                     uint32_t shared_inter, float eps) {
  down_dispatch<true, true>(down_args(act, w_down, topk_ids, topk_weights, residual, w, normed,
                                      counters, tokens, top_k, hidden, inter, experts,
                                      rows_per_block, shared_down, shared_slots, shared_inter,
                                      eps));
}
