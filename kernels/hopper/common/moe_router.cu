// MoE router: top-k experts per token from the gate's logits, with softmax or sigmoid scoring.
//
// One warp per token (ops/moe.py ROUTER_TOKENS_PER_BLOCK warps per block). Lane l holds the
// scores of experts l, l + 32, ... in registers (at most kMaxPerLane each: 512 experts). The
// k winners are found in k rounds of a warp arg-max over (key, expert) pairs that prefers the
// larger key and, for equal keys, the lower expert index (torch.topk's order; a NaN key ranks
// below every number, as in numpy's argsort); a winner is marked taken in its owner lane's
// bit mask. A round is two redux.sync reductions (the largest key as an order-preserving
// u32, then the lowest expert holding it) and one shuffle of the winner's score. Lane r
// keeps round r's winner, so the ids come out best first, and the final weights are one
// warp sum away.
//
// Softmax: key = the logit (softmax is increasing, so the top-k of the probabilities), weight
// = exp(logit - max) / sum over all experts, in float32. Sigmoid: key = sigmoid(logit) +
// bias[e] (e_score_correction_bias: selection only), weight = sigmoid(logit). Then, with
// `renormalize`, weight / (sum of the k weights + 1e-20), and times `scale`.
//
// Where the leaf defines ATLAS_MOE_EXPERTS and ATLAS_MOE_TOPK, launches with exactly those
// shapes run an instantiation with both as compile-time constants (the per-lane register
// array sized to the experts, the rounds unrolled); other shapes take the general one, its
// per-lane arrays sized by tier (up to 128, 256, 512 experts).
//
// moe_gate_topk_cluster_{softmax,sigmoid}_bf16 (ATLAS_MOE_ROUTER_CLUSTER=1): the fused router
// as ONE cluster of kClusterBlocks blocks, the logits gathered in rank 0's shared memory
// through distributed shared memory and one cluster barrier, instead of global memory, a
// fence, a ticket atomic and an L2 read by the last block (gate_route_cluster says why).
//
// moe_gate_logits_bf16: the fused router's gate GEMV alone (no ticket, no top-k) for batch-1
// MoE blocks whose expert launches route from the logits (moe_decode.cu LogitRouting). The
// top-k code lives in moe_route.cuh, shared with them.
#include <cooperative_groups.h>

#include "atlas_common.cuh"
#include "bf16_vec.cuh"
#include "moe_route.cuh"

namespace {

constexpr int kWarpsPerBlock = 4;  // ops/moe.py ROUTER_TOKENS_PER_BLOCK
using atlas::moe::route_row;
using atlas::moe::route_slots;

template <bool kSigmoid>
__device__ __forceinline__ void route(const float* logits, const float* bias, int32_t* topk_ids,
                                      float* topk_weights, uint32_t tokens, uint32_t experts,
                                      uint32_t top_k, uint32_t renormalize, float scale) {
  atlas::pdl_enter();
  const int token = blockIdx.x * kWarpsPerBlock + (threadIdx.x >> 5);
  if (token >= static_cast<int>(tokens)) return;
  route_row<kSigmoid, false>(logits + static_cast<size_t>(token) * experts, bias,
                             topk_ids + static_cast<size_t>(token) * top_k,
                             topk_weights + static_cast<size_t>(token) * top_k, experts, top_k,
                             renormalize, scale);
}

// ---- the fused decode router: gate GEMV + top-k in one launch ------------------------------
constexpr int kGateWarps = 8;  // ops/moe.py ROUTER_GATE_THREADS / 32
constexpr int kGateMaxTokens = 8;  // ops/moe.py DECODE_MAX_TOKENS

// Weight chunks a lane loads before it uses the first: every load of a batch is issued
// before any result is waited on (a load per iteration next to its use would make the warp
// wait one DRAM round trip per chunk: measured 2026-12-01, the fused router at ~12 us). The
// first batch (the whole row up to hidden 2048) is requested before the PDL wait.
constexpr int kGateBatch = 8;

// Chunks c0 + 32 i of a gate row (past the row: its last chunk again, never used).
// kBeforeWait: the loads precede the PDL wait (atlas::ld_prefetch).
template <bool kBeforeWait>
__device__ __forceinline__ void load_gate_batch(const uint4* wr, int c0, int kc,
                                                uint4 (&wv)[kGateBatch]) {
#pragma unroll
  for (int i = 0; i < kGateBatch; ++i) {
    const uint4* p = wr + min(c0 + 32 * i, kc - 1);
    wv[i] = kBeforeWait ? atlas::ld_prefetch(p) : atlas::ld_stream(p);
  }
}

// out[t * stride] = bf16(x[t] . wrow) widened, for every token (the GEMV_F32OUT numerics):
// the row's 16-byte chunks are streamed once for all tokens; `wv` holds the first batch
// (load_gate_batch at chunk `lane`). x comes from shared memory (`xs`, [tokens][hidden],
// staged by the block after the PDL wait) and every token's chunk is read whether or not the
// token exists (token clamped), so no read waits behind a predicate: loads from global memory
// inside the token loop were issued one dependent L2 round trip at a time (2026-12-01: the
// router at 11-17 us per layer at batch 1, 30 us at batch 8). kHidden: 0 = run-time hidden;
// kTokens: the most tokens (1 for a batch-1 launch: one x chunk read and unpacked per weight
// chunk, where the general loop reads and unpacks 8, 7 of them for no token).
template <int kHidden, int kTokens>
__device__ __forceinline__ void gate_row(const uint4* xs, const uint4* wr,
                                         uint4 (&wv)[kGateBatch], float* out, int stride,
                                         int tokens, int hidden_arg) {
  const int hidden = kHidden > 0 ? kHidden : hidden_arg;
  const int lane = threadIdx.x & 31, kc = hidden / 8;
  float acc[kTokens];
#pragma unroll
  for (int t = 0; t < kTokens; ++t) acc[t] = 0.f;
  for (int c0 = lane; c0 < kc; c0 += 32 * kGateBatch) {
    if (c0 != lane) load_gate_batch<false>(wr, c0, kc, wv);
#pragma unroll
    for (int i = 0; i < kGateBatch; ++i) {
      const int c = c0 + 32 * i;
      if (c >= kc) break;
      float wf[8];
      atlas::unpack_bf16x8(wv[i], wf);
#pragma unroll
      for (int t = 0; t < kTokens; ++t) {
        float xf[8];
        atlas::unpack_bf16x8(xs[min(t, tokens - 1) * kc + c], xf);
        if (t < tokens) {
#pragma unroll
          for (int k = 0; k < 8; ++k) acc[t] = fmaf(wf[k], xf[k], acc[t]);
        }
      }
    }
  }
#pragma unroll
  for (int t = 0; t < kTokens; ++t) {
    if (t < tokens) {
      const float v = atlas::round_bf16(atlas::warp_sum(acc[t]));
      if (lane == 0) out[static_cast<size_t>(t) * stride] = v;
    }
  }
}

// The inputs of the fused router.
struct GateArgs {
  const __nv_bfloat16* x;             // [tokens, hidden]
  const __nv_bfloat16* w;             // [experts, hidden]
  const __nv_bfloat16* shared_gate;   // [hidden]: the shared expert's gate row (or null)
  const float* bias;                  // sigmoid scoring's e_score_correction_bias (or null)
  float* logits;                      // [tokens, experts]
  float* shared_logits;               // [tokens]
  int32_t* topk_ids;                  // [tokens, top_k + shared_slots]
  float* topk_weights;                // [tokens, top_k + shared_slots]
  uint32_t* counter;
  uint32_t tokens, experts, hidden, top_k, shared_slots, renormalize;
  float scale;
};

// Gate row e of the router: expert e's, or the shared expert's gate for e == experts.
__device__ __forceinline__ const uint4* gate_row_ptr(const GateArgs& a, int e) {
  return reinterpret_cast<const uint4*>(e == static_cast<int>(a.experts)
                                            ? a.shared_gate
                                            : a.w + static_cast<size_t>(e) * a.hidden);
}

// Grid ceil((experts + 1 if shared) / kGateWarps) blocks of kGateWarps warps; warp w of block
// b computes the logits of row kGateWarps b + w (row `experts`: the shared expert's gate) for
// every token. The last block to finish (a ticket from atomicInc on *counter, which wraps back
// to zero) routes every token, one warp per token, and fills its shared slots: ids experts +
// c, weights bf16(sigmoid(shared logit)) (transformers' F.sigmoid of the bf16 gate output).
// kRoute false (moe_gate_logits_bf16): the logits only, no ticket; the batch-1 expert kernels
// route from them (ops/moe.py routes_in_experts).
template <bool kSigmoid, bool kRoute = true>
__device__ __forceinline__ void gate_route(const GateArgs& a) {
  const int e = blockIdx.x * kGateWarps + (threadIdx.x >> 5);
  const int tokens = static_cast<int>(a.tokens), hidden = static_cast<int>(a.hidden);
  const bool shared_row = a.shared_slots > 0 && e == static_cast<int>(a.experts);
  const bool has_row = e < static_cast<int>(a.experts) || shared_row;
  const uint4* wr = reinterpret_cast<const uint4*>(
      shared_row ? a.shared_gate : a.w + static_cast<size_t>(has_row ? e : 0) * hidden);
  // the gate row is a weight (no kernel writes it): requested before the PDL wait, so its
  // DRAM round trip overlaps the previous kernel
  uint4 wv[kGateBatch];
  if (has_row) load_gate_batch<true>(wr, threadIdx.x & 31, hidden / 8, wv);
  atlas::pdl_enter();
  extern __shared__ uint4 xs[];  // [tokens][hidden / 8] x (ops/moe.py gate_topk_smem)
  atlas::stage_to_shared<8>(xs, reinterpret_cast<const uint4*>(a.x), tokens * (hidden / 8));
  __syncthreads();
  if (has_row) {
    float* out = shared_row ? a.shared_logits : a.logits + e;
    const int stride = shared_row ? 1 : static_cast<int>(a.experts);
#if defined(ATLAS_HIDDEN)
    if (hidden == ATLAS_HIDDEN && tokens == 1)
      gate_row<ATLAS_HIDDEN, 1>(xs, wr, wv, out, stride, tokens, hidden);
    else if (hidden == ATLAS_HIDDEN)
      gate_row<ATLAS_HIDDEN, kGateMaxTokens>(xs, wr, wv, out, stride, tokens, hidden);
    else
#endif
    if (tokens == 1)
      gate_row<0, 1>(xs, wr, wv, out, stride, tokens, hidden);
    else
      gate_row<0, kGateMaxTokens>(xs, wr, wv, out, stride, tokens, hidden);
  }
  if constexpr (!kRoute) return;
  __shared__ bool last;
  __threadfence();  // this block's logits, before its ticket
  __syncthreads();
  if (threadIdx.x == 0) last = atomicInc(a.counter, gridDim.x - 1) == gridDim.x - 1;
  __syncthreads();
  if (!last) return;
  __threadfence();
  const int token = threadIdx.x >> 5;
  if (token >= tokens) return;
  const size_t slots = a.top_k + a.shared_slots;
  route_slots<true>(a.logits + static_cast<size_t>(token) * a.experts, a.bias,
                    a.shared_logits + token, a.topk_ids + token * slots,
                    a.topk_weights + token * slots, a.experts, a.top_k, a.shared_slots,
                    a.renormalize, a.scale, kSigmoid);
}

// ---- the clustered decode router (ATLAS_MOE_ROUTER_CLUSTER=1) -----------------------------
// gate_route's chain after the slowest gate row is a gpu-scope fence, a ticket atomic, the
// last block's L2 read of the logits and its top-k: three dependent L2 round trips before
// the top-k starts (the 5.5 us router of Qwen3-30B-A3B, gpu24, of which the 0.5 MB GEMV is
// ~1.5). Here the grid is one cluster: every warp writes its rows' logits straight into rank
// 0's shared memory (st through a mapa'd generic address), one cluster barrier (release /
// acquire) publishes them, and rank 0's warps route from shared memory; nothing passes
// through global memory before the ids are written (the logits are copied out after them,
// for the contract). The cluster is the portable size, so its blocks stream more rows each
// than gate_route's grid (16 rows of 4 KB an SM at 128 experts). Before the PDL wait every
// warp requests the first batch of kClusterRowsInFlight rows into registers (256 rows at
// once; three spilled at 128 registers) and asks L2 for its rows past those (the 257th of
// Qwen3.5-35B-A3B, its shared gate), so a third row costs an L2 trip, not a DRAM one.
constexpr int kClusterBlocks = 8;           // ops/moe.py ROUTER_CLUSTER_BLOCKS
constexpr int kClusterWarps = 16;           // ops/moe.py ROUTER_CLUSTER_THREADS / 32
constexpr int kClusterRowsInFlight = 2;
constexpr int kClusterMaxExperts = 32 * atlas::moe::kMaxPerLane;  // ROUTER_MAX_EXPERTS

// rank 0's gathering buffer: every token's logits, then every token's shared-gate logit
struct ClusterLogits {
  float logits[kGateMaxTokens * kClusterMaxExperts];
  float shared[kGateMaxTokens];
};

// One warp's gate rows e (rank-major warp index g, rows g, g + W, ...; W = all warps of the
// cluster): row e's logits of every token into out_logits[t * experts + e] (the shared gate,
// row `experts`: out_shared[t]), through gate_row (the fused router's sums, the same bits).
template <int kHidden, int kTokens>
__device__ __forceinline__ void cluster_rows(const GateArgs& a, const uint4* xs, int g,
                                             uint4 (&wv)[kClusterRowsInFlight][kGateBatch],
                                             float* out_logits, float* out_shared) {
  constexpr int kW = kClusterBlocks * kClusterWarps;
  const int rows = static_cast<int>(a.experts) + (a.shared_slots > 0 ? 1 : 0);
  const int tokens = static_cast<int>(a.tokens), hidden = static_cast<int>(a.hidden);
  for (int base = g; base < rows; base += kClusterRowsInFlight * kW) {
#pragma unroll
    for (int i = 0; i < kClusterRowsInFlight; ++i) {
      const int e = base + i * kW;
      if (e >= rows) break;
      const bool shared_row = e == static_cast<int>(a.experts);
      float* out = shared_row ? out_shared : out_logits + e;
      const int stride = shared_row ? 1 : static_cast<int>(a.experts);
      const uint4* wr = gate_row_ptr(a, e);
      gate_row<kHidden, kTokens>(xs, wr, wv[i], out, stride, tokens, hidden);
      const int next = e + kClusterRowsInFlight * kW;  // this buffer's next row
      if (next < rows) load_gate_batch<false>(gate_row_ptr(a, next), threadIdx.x & 31,
                                              hidden / 8, wv[i]);
    }
  }
}

// Rank 0's routing of one token from its gathered logits (moe_route.cuh route_slots). Not
// inlined (its arguments scalars): its per-lane arrays get registers of their own, not a
// share of the rows' loads in flight (inlined, the entry spilled at 128 registers).
__device__ __noinline__ void route_gathered(const float* logits, const float* bias,
                                            const float* shared_logit, int32_t* ids,
                                            float* weights, uint32_t experts, uint32_t top_k,
                                            uint32_t shared_slots, uint32_t renormalize,
                                            float scale, bool sigmoid) {
  route_slots<false>(logits, bias, shared_logit, ids, weights, experts, top_k, shared_slots,
                     renormalize, scale, sigmoid);
}

template <bool kSigmoid>
__device__ __forceinline__ void gate_route_cluster(const GateArgs& a) {
  namespace coop = cooperative_groups;
  coop::cluster_group cluster = coop::this_cluster();
  const int rank = static_cast<int>(cluster.block_rank());
  const int g = rank * kClusterWarps + (threadIdx.x >> 5), lane = threadIdx.x & 31;
  constexpr int kW = kClusterBlocks * kClusterWarps;
  const int rows = static_cast<int>(a.experts) + (a.shared_slots > 0 ? 1 : 0);
  const int tokens = static_cast<int>(a.tokens), hidden = static_cast<int>(a.hidden);
  __shared__ ClusterLogits gathered;  // rank 0's is the one written
  // the gate rows are weights (no kernel writes them): every buffer's first row requested
  // before the PDL wait
  uint4 wv[kClusterRowsInFlight][kGateBatch];
#pragma unroll
  for (int i = 0; i < kClusterRowsInFlight; ++i)
    if (g + i * kW < rows) load_gate_batch<true>(gate_row_ptr(a, g + i * kW), lane, hidden / 8, wv[i]);
  for (int e = g + kClusterRowsInFlight * kW; e < rows; e += kW) {
    const char* row = reinterpret_cast<const char*>(gate_row_ptr(a, e));
    for (int l = lane; l < (2 * hidden + 127) / 128; l += 32)
      asm volatile("prefetch.global.L2 [%0];\n" ::"l"(row + 128 * l));
  }
  // a block may write a peer's shared memory only once the peer runs: this arrival, waited on
  // just before the first logit is written, says so at no cost on the way
  auto started = cluster.barrier_arrive();
  atlas::pdl_enter();
  extern __shared__ uint4 xs[];  // [tokens][hidden / 8] x (ops/moe.py gate_topk_smem)
  atlas::stage_to_shared<8>(xs, reinterpret_cast<const uint4*>(a.x), tokens * (hidden / 8));
  __syncthreads();
  cluster.barrier_wait(std::move(started));
  float* out_logits = cluster.map_shared_rank(gathered.logits, 0);
  float* out_shared = cluster.map_shared_rank(gathered.shared, 0);
#if defined(ATLAS_HIDDEN)
  if (hidden == ATLAS_HIDDEN && tokens == 1)
    cluster_rows<ATLAS_HIDDEN, 1>(a, xs, g, wv, out_logits, out_shared);
  else if (hidden == ATLAS_HIDDEN)
    cluster_rows<ATLAS_HIDDEN, kGateMaxTokens>(a, xs, g, wv, out_logits, out_shared);
  else
#endif
  if (tokens == 1)
    cluster_rows<0, 1>(a, xs, g, wv, out_logits, out_shared);
  else
    cluster_rows<0, kGateMaxTokens>(a, xs, g, wv, out_logits, out_shared);
  cluster.sync();  // every logit is in rank 0's shared memory (release / acquire)
  if (rank != 0) return;  // no block reads another's shared memory after the barrier
  const int token = threadIdx.x >> 5;
  const size_t slots = a.top_k + a.shared_slots;
  if (token < tokens)
    route_gathered(gathered.logits + static_cast<size_t>(token) * a.experts, a.bias,
                   gathered.shared + token, a.topk_ids + token * slots,
                   a.topk_weights + token * slots, a.experts, a.top_k, a.shared_slots,
                   a.renormalize, a.scale, kSigmoid);
  // the logits for the contract (nothing in the decode step reads them), after the ids
  const int n = tokens * static_cast<int>(a.experts);
  for (int i = threadIdx.x; i < n; i += blockDim.x) a.logits[i] = gathered.logits[i];
  if (a.shared_slots > 0 && static_cast<int>(threadIdx.x) < tokens)
    a.shared_logits[threadIdx.x] = gathered.shared[threadIdx.x];
}

}  // namespace

extern "C" __global__ void __launch_bounds__(32 * kWarpsPerBlock, 1)
    moe_topk_softmax_f32(const float* logits, int32_t* topk_ids, float* topk_weights,
                         uint32_t tokens, uint32_t experts, uint32_t top_k,
                         uint32_t renormalize, float scale) {
  route<false>(logits, nullptr, topk_ids, topk_weights, tokens, experts, top_k, renormalize,
               scale);
}

extern "C" __global__ void __launch_bounds__(32 * kWarpsPerBlock, 1)
    moe_topk_sigmoid_f32(const float* logits, const float* bias, int32_t* topk_ids,
                         float* topk_weights, uint32_t tokens, uint32_t experts,
                         uint32_t top_k, uint32_t renormalize, float scale) {
  route<true>(logits, bias, topk_ids, topk_weights, tokens, experts, top_k, renormalize,
              scale);
}

extern "C" __global__ void __launch_bounds__(32 * kGateWarps, 1)
    moe_gate_topk_softmax_bf16(const __nv_bfloat16* x, const __nv_bfloat16* w_gate,
                               const __nv_bfloat16* shared_gate, float* logits,
                               float* shared_logits, int32_t* topk_ids, float* topk_weights,
                               uint32_t* counter, uint32_t tokens, uint32_t experts,
                               uint32_t hidden, uint32_t top_k, uint32_t shared_slots,
                               uint32_t renormalize, float scale) {
  gate_route<false>(GateArgs{x, w_gate, shared_gate, nullptr, logits, shared_logits, topk_ids,
                             topk_weights, counter, tokens, experts, hidden, top_k,
                             shared_slots, renormalize, scale});
}

extern "C" __global__ void __launch_bounds__(32 * kGateWarps, 1)
    moe_gate_topk_sigmoid_bf16(const __nv_bfloat16* x, const __nv_bfloat16* w_gate,
                               const __nv_bfloat16* shared_gate, const float* bias,
                               float* logits, float* shared_logits, int32_t* topk_ids,
                               float* topk_weights, uint32_t* counter, uint32_t tokens,
                               uint32_t experts, uint32_t hidden, uint32_t top_k,
                               uint32_t shared_slots, uint32_t renormalize, float scale) {
  gate_route<true>(GateArgs{x, w_gate, shared_gate, bias, logits, shared_logits, topk_ids,
                            topk_weights, counter, tokens, experts, hidden, top_k, shared_slots,
                            renormalize, scale});
}

// The gate GEMV alone (gate_route<.., false>): logits f32 [tokens, experts] and the shared
// expert's logit, the same values as the routers above; grid and shared memory as theirs.
extern "C" __global__ void __launch_bounds__(32 * kGateWarps, 1)
    moe_gate_logits_bf16(const __nv_bfloat16* x, const __nv_bfloat16* w_gate,
                         const __nv_bfloat16* shared_gate, float* logits, float* shared_logits,
                         uint32_t tokens, uint32_t experts, uint32_t hidden,
                         uint32_t shared_slots) {
  gate_route<false, false>(GateArgs{x, w_gate, shared_gate, nullptr, logits, shared_logits,
                                    nullptr, nullptr, nullptr, tokens, experts, hidden, 0,
                                    shared_slots, 0, 1.f});
}

// The clustered router (gate_route_cluster): the arguments of moe_gate_topk_*_bf16 (the
// counter unused: no ticket), grid = one cluster of ROUTER_CLUSTER_BLOCKS blocks of
// ROUTER_CLUSTER_THREADS threads, the same dynamic shared memory (x), the same outputs.
extern "C" __global__ void __cluster_dims__(kClusterBlocks, 1, 1)
    __launch_bounds__(32 * kClusterWarps, 1)
    moe_gate_topk_cluster_softmax_bf16(const __nv_bfloat16* x, const __nv_bfloat16* w_gate,
                                       const __nv_bfloat16* shared_gate, float* logits,
                                       float* shared_logits, int32_t* topk_ids,
                                       float* topk_weights, uint32_t* counter, uint32_t tokens,
                                       uint32_t experts, uint32_t hidden, uint32_t top_k,
                                       uint32_t shared_slots, uint32_t renormalize,
                                       float scale) {
  gate_route_cluster<false>(GateArgs{x, w_gate, shared_gate, nullptr, logits, shared_logits,
                                     topk_ids, topk_weights, counter, tokens, experts, hidden,
                                     top_k, shared_slots, renormalize, scale});
}

extern "C" __global__ void __cluster_dims__(kClusterBlocks, 1, 1)
    __launch_bounds__(32 * kClusterWarps, 1)
    moe_gate_topk_cluster_sigmoid_bf16(const __nv_bfloat16* x, const __nv_bfloat16* w_gate,
                                       const __nv_bfloat16* shared_gate, const float* bias,
                                       float* logits, float* shared_logits, int32_t* topk_ids,
                                       float* topk_weights, uint32_t* counter, uint32_t tokens,
                                       uint32_t experts, uint32_t hidden, uint32_t top_k,
                                       uint32_t shared_slots, uint32_t renormalize,
                                       float scale) {
  gate_route_cluster<true>(GateArgs{x, w_gate, shared_gate, bias, logits, shared_logits,
                                    topk_ids, topk_weights, counter, tokens, experts, hidden,
                                    top_k, shared_slots, renormalize, scale});
}
