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
// moe_gate_logits_bf16: the fused router's gate GEMV alone (no ticket, no top-k) for batch-1
// MoE blocks whose expert launches route from the logits (moe_decode.cu LogitRouting). The
// top-k code lives in moe_route.cuh, shared with them.
//
// The fused routers' logits are the bf16-rounded products widened (what a bf16 gate Linear
// returns) or, with `unrounded` (a float32 router: GLM-4.5's, which transformers keeps in
// float32), the float32 sums themselves, as gemv_bf16_f32_unrounded writes them; a shared
// expert's gate logit is a bf16 Linear's either way. A null shared gate with shared slots is
// an ungated shared expert (GLM-4.5's): no gate row, its slots weighted 1 (moe_route.cuh
// shared_weight).
#include <cooperative_groups.h>

#include "atlas_common.cuh"
#include "bf16_vec.cuh"
#include "moe_route.cuh"
#include "rmsnorm_core.cuh"

namespace coop = cooperative_groups;

namespace {

constexpr int kWarpsPerBlock = 4;  // ops/moe.py ROUTER_TOKENS_PER_BLOCK
using atlas::moe::route_row;
using atlas::moe::route_slots;

// kLogitBias: the router Linear's bias (logit_bias, bf16 [experts]) joins each float32 logit,
// rounded once to bf16 (moe_topk_softmax_bias_f32, gpt-oss's router)
template <bool kSigmoid, bool kLogitBias = false>
__device__ __forceinline__ void route(const float* logits, const float* bias, int32_t* topk_ids,
                                      float* topk_weights, uint32_t tokens, uint32_t experts,
                                      uint32_t top_k, uint32_t renormalize, float scale,
                                      const __nv_bfloat16* logit_bias = nullptr) {
  atlas::pdl_enter();
  const int token = blockIdx.x * kWarpsPerBlock + (threadIdx.x >> 5);
  if (token >= static_cast<int>(tokens)) return;
  route_row<kSigmoid, false, atlas::moe::kMaxPerLane, true, kLogitBias>(
      logits + static_cast<size_t>(token) * experts, bias,
      topk_ids + static_cast<size_t>(token) * top_k,
      topk_weights + static_cast<size_t>(token) * top_k, experts, top_k, renormalize, scale,
      logit_bias);
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
  const uint64_t stream = atlas::l2_stream_policy();  // the router weights' L2 policy
#pragma unroll
  for (int i = 0; i < kGateBatch; ++i) {
    const uint4* p = wr + min(c0 + 32 * i, kc - 1);
    wv[i] = atlas::ld_weight<kBeforeWait>(p, stream);
  }
}

// store(t, bf16(x[t] . wrow) widened) by lane 0, for every token (the GEMV_F32OUT numerics):
// the row's 16-byte chunks are streamed once for all tokens; `wv` holds the first batch
// (load_gate_batch at chunk `lane`). x comes from shared memory (`xs`, [tokens][hidden],
// staged by the block after the PDL wait) and every token's chunk is read whether or not the
// token exists (token clamped), so no read waits behind a predicate: loads from global memory
// inside the token loop were issued one dependent L2 round trip at a time (2026-12-01: the
// router at 11-17 us per layer at batch 1, 30 us at batch 8). kHidden: 0 = run-time hidden;
// kTokens: the most tokens (1 for a batch-1 launch: one x chunk read and unpacked per weight
// chunk, where the general loop reads and unpacks 8, 7 of them for no token).
// unrounded: the float32 sums are stored as they are (a float32 router's logits).
template <int kHidden, int kTokens, class Store>
__device__ __forceinline__ void gate_row(const uint4* xs, const uint4* wr,
                                         uint4 (&wv)[kGateBatch], const Store& store,
                                         int tokens, int hidden_arg, bool unrounded) {
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
      const float sum = atlas::warp_sum(acc[t]);
      const float v = unrounded ? sum : atlas::round_bf16(sum);
      if (lane == 0) store(t, v);
    }
  }
}

// The logit store of the ticket routers: out[t * stride].
struct GlobalStore {
  float* out;
  int stride;
  __device__ __forceinline__ void operator()(int t, float v) const {
    out[static_cast<size_t>(t) * stride] = v;
  }
};

// gate_row at the leaf's compile-time hidden size where the launch has it, batch 1's
// one-token loop where it is one token. kMaxTokens 1: a launch of one token only (no
// instantiation for more, so none of their registers).
template <int kMaxTokens, class Store>
__device__ __forceinline__ void gate_row_any(const uint4* xs, const uint4* wr,
                                             uint4 (&wv)[kGateBatch], const Store& store,
                                             int tokens, int hidden, bool unrounded) {
#if defined(ATLAS_HIDDEN)
  if (hidden == ATLAS_HIDDEN && (kMaxTokens == 1 || tokens == 1))
    gate_row<ATLAS_HIDDEN, 1>(xs, wr, wv, store, tokens, hidden, unrounded);
  else if (kMaxTokens > 1 && hidden == ATLAS_HIDDEN)
    gate_row<ATLAS_HIDDEN, kMaxTokens>(xs, wr, wv, store, tokens, hidden, unrounded);
  else
#endif
  if (kMaxTokens == 1 || tokens == 1)
    gate_row<0, 1>(xs, wr, wv, store, tokens, hidden, unrounded);
  else
    gate_row<0, kMaxTokens>(xs, wr, wv, store, tokens, hidden, unrounded);
}

// NormIn (moe_add_rmsnorm_gate_topk_*_bf16, the default; ATLAS_MOE_ROUTER_NORM=0: never):
// the model's add_rmsnorm before a decode MoE block done by the router's blocks. Every block
// forms each token's r = bf16(residual + delta) and x = RMSNorm(r) * w (rmsnorm_core.cuh, as
// rmsnorm.cu, and for rows of at most 8 x 256 elements its per-thread and block sum order:
// the same bits) in its shared memory from the residual and delta rows, where it would stage
// `normed`; the block drawing the router's last ticket (every block has read the residual
// before its ticket) writes r back into residual and x into normed, which the expert launches
// read. So the residual add and the norm cost no launch and no dependent trip of their own in
// the latency chain.
struct NormIn {
  __nv_bfloat16* residual;      // [tokens, hidden]: += delta
  const __nv_bfloat16* delta;   // [tokens, hidden]
  const __nv_bfloat16* w;       // [hidden]: the norm weight
  __nv_bfloat16* normed;        // [tokens, hidden]: x
  float eps;
  uint32_t offset;              // zero-centred weight: * (1 + w), one rounding (rmsnorm.cu)
};
constexpr int kNormVecs = 4;    // 16-byte vectors of a row a thread holds: hidden <= 8192

// Token t's r and x into rs and xs (shared, kc 16-byte vectors each) by the whole block;
// nw: this thread's vectors of the norm weight (vector tid + j * blockDim.x).
__device__ __forceinline__ void norm_row_to_shared(const NormIn& n, int t, int kc,
                                                   const uint4 (&nw)[kNormVecs], uint4* xs,
                                                   uint4* rs, float* scratch) {
  const uint4* rv = reinterpret_cast<const uint4*>(n.residual) + static_cast<size_t>(t) * kc;
  const uint4* dv = reinterpret_cast<const uint4*>(n.delta) + static_cast<size_t>(t) * kc;
  uint4 r[kNormVecs], d[kNormVecs];
#pragma unroll
  for (int j = 0; j < kNormVecs; ++j) {  // every load before the first use
    const int i = threadIdx.x + j * blockDim.x;
    if (i < kc) {
      r[j] = __ldcg(rv + i);
      d[j] = __ldcg(dv + i);
    }
  }
  float sumsq = 0.f;
#pragma unroll
  for (int j = 0; j < kNormVecs; ++j) {
    const int i = threadIdx.x + j * blockDim.x;
    if (i < kc) {
      r[j] = atlas::rmsnorm::add_bf16x8(r[j], d[j]);  // bf16(residual + delta)
      rs[i] = r[j];
    }
  }
#pragma unroll
  for (int j = 0; j < kNormVecs; ++j)
    if (threadIdx.x + j * blockDim.x < kc) sumsq = atlas::rmsnorm::sumsq_bf16x8(r[j], sumsq);
  const float inv_rms = rsqrtf(atlas::block_sum(sumsq, scratch) / static_cast<float>(8 * kc) +
                               n.eps);
#pragma unroll
  for (int j = 0; j < kNormVecs; ++j) {
    const int i = threadIdx.x + j * blockDim.x;
    if (i < kc) xs[i] = atlas::rmsnorm::scale_bf16x8(r[j], nw[j], inv_rms, n.offset != 0);
  }
}

// ---- the cluster router (the default at batch 1; ops/moe.py router_uses_cluster) ----------
// The NormIn router at batch 1 as one thread-block cluster of kClusterBlocks blocks (a
// non-portable size: the launch opts in) of blockDim / 32 warps, warp w of block b computing
// expert row b * warps + w. Instead of a ticket (a fence, an atomic and the last block's
// re-read of every logit from L2: three dependent L2 round trips), each warp's lane 0 also
// stores its logit into rank 0's shared memory (distributed shared memory), one cluster
// barrier orders the stores, every block writes its slice of the residual and normed rows,
// and rank 0's warp 0 routes from shared memory. The shared
// expert's gate row (one more row than 16 blocks of 16 warps hold at 256 experts) is rank 0's
// warp 1's second row: requested into L2 before the PDL wait, computed after that warp's
// arrival at the cluster barrier, so it overlaps the barrier and the top-k, and handed to
// warp 0 by a named barrier for the shared slots' weights.
constexpr int kClusterBlocks = 16;     // ops/moe.py ROUTER_CLUSTER_BLOCKS
constexpr int kClusterMaxWarps = 16;   // ops/moe.py ROUTER_CLUSTER_MAX_WARPS (128 registers)
constexpr int kClusterRouteTier = 8;   // route_row's per-lane tier: 256 experts at most
constexpr int kClusterSharedWarp = 1;  // rank 0's warp that computes the shared gate row
constexpr int kClusterLogits = kClusterBlocks * kClusterMaxWarps;

// Rank 0's logits: [experts], then the shared expert's at kClusterLogits.
__device__ __forceinline__ float* cluster_logits() {
  __shared__ float lg[kClusterLogits + 1];
  return lg;
}

// The cluster router's logit store: the global logit (the launch's logits output, as the
// ticket routers write it) and rank 0's shared copy.
struct ClusterStore {
  float* out;
  float* local;
  __device__ __forceinline__ void operator()(int, float v) const {
    *out = v;
    *local = v;
  }
};

// Rank 0's warps 0 and kClusterSharedWarp: the shared gate logit handed from one to the other.
__device__ __forceinline__ void shared_logit_handoff() {
  asm volatile("bar.sync 1, 64;\n" ::: "memory");
}

// The inputs of the fused router.
struct GateArgs {
  const __nv_bfloat16* x;             // [tokens, hidden]
  const __nv_bfloat16* w;             // [experts, hidden]
  const __nv_bfloat16* shared_gate;   // [hidden]: the shared expert's gate row (null: none,
                                      // or an ungated shared expert where shared_slots > 0)
  const float* bias;                  // sigmoid scoring's e_score_correction_bias (or null)
  float* logits;                      // [tokens, experts]
  float* shared_logits;               // [tokens]
  int32_t* topk_ids;                  // [tokens, top_k + shared_slots]
  float* topk_weights;                // [tokens, top_k + shared_slots]
  uint32_t* counter;
  uint32_t tokens, experts, hidden, top_k, shared_slots, renormalize;
  float scale;
  uint32_t unrounded;                 // the experts' logits as float32 sums (not bf16)
};

// Grid ceil((experts + 1 with a shared gate) / kGateWarps) blocks of kGateWarps warps; warp w
// of block b computes the logits of row kGateWarps b + w (row `experts`: the shared expert's
// gate) for every token. The last block to finish (a ticket from atomicInc on *counter, which
// wraps back to zero) routes every token, one warp per token, and fills its shared slots: ids
// experts + c, weights bf16(sigmoid(shared logit)) (transformers' F.sigmoid of the bf16 gate
// output), or 1 with no shared gate (an ungated shared expert: no gate row, no shared logit).
// kRoute false (moe_gate_logits_bf16): the logits only, no ticket; the batch-1 expert kernels
// route from them (ops/moe.py routes_in_experts).
// kNorm (NormIn): x formed by the blocks from `norm`'s residual and delta, written back by
// the last block (a.x unused).
template <bool kSigmoid, bool kRoute = true, bool kNorm = false, bool kCluster = false>
__device__ __forceinline__ void gate_route(const GateArgs& a, const NormIn& norm = NormIn{}) {
  static_assert(kRoute || !kNorm, "the last block writes the norm's outputs");
  static_assert(!kCluster || kRoute, "the cluster router routes");
  const int warps = kCluster ? static_cast<int>(blockDim.x >> 5) : kGateWarps;
  const int e = blockIdx.x * warps + (threadIdx.x >> 5);
  const int tokens = static_cast<int>(a.tokens), hidden = static_cast<int>(a.hidden);
  // the cluster router computes the shared gate row as the second row of rank 0's
  // kClusterSharedWarp (shared_warp), not as a row of its own
  const bool gated = a.shared_slots > 0 && a.shared_gate != nullptr;
  const bool shared_row = !kCluster && gated && e == static_cast<int>(a.experts);
  const bool shared_warp = kCluster && gated && blockIdx.x == 0 &&
                           (threadIdx.x >> 5) == kClusterSharedWarp;
  if (shared_warp && (threadIdx.x & 31) == 0)
    atlas::prefetch_l2_bulk(a.shared_gate, static_cast<uint32_t>(hidden) * 2);
  const bool has_row = e < static_cast<int>(a.experts) || shared_row;
  const uint4* wr = reinterpret_cast<const uint4*>(
      shared_row ? a.shared_gate : a.w + static_cast<size_t>(has_row ? e : 0) * hidden);
  // the gate row is a weight (no kernel writes it): requested before the PDL wait, so its
  // DRAM round trip overlaps the previous kernel
  uint4 wv[kGateBatch];
  if (has_row) load_gate_batch<true>(wr, threadIdx.x & 31, hidden / 8, wv);
  uint4 nw[kNormVecs];  // kNorm: the norm weight, a weight too
  if constexpr (kNorm) {
#pragma unroll
    for (int j = 0; j < kNormVecs; ++j) {
      const int i = threadIdx.x + j * blockDim.x;
      if (i < hidden / 8) nw[j] = atlas::ld_prefetch(reinterpret_cast<const uint4*>(norm.w) + i);
    }
  }
  // The cluster router lets the next kernel (the MoE gate/up, whose shared-expert blocks
  // request their weights before their wait) launch only once the residual and delta rows
  // are in shared memory, so those requests never queue ahead of the rows (as rmsnorm.cu's
  // late entries; gpu182, H200: Qwen3.5-35B-A3B -0.2%, Qwen3-30B-A3B -0.1% a step, both
  // orders, against the trigger with the wait; after the logit stores instead: level / +0.2%)
  if constexpr (kCluster)
    atlas::pdl_wait();
  else
    atlas::pdl_enter();
  // [tokens][hidden / 8] x, then (kNorm) [tokens][hidden / 8] r (ops/moe.py gate_topk_smem)
  extern __shared__ uint4 xs[];
  __shared__ float scratch[32];
  if constexpr (kNorm) {
    for (int t = 0; t < tokens; ++t)
      norm_row_to_shared(norm, t, hidden / 8, nw, xs + t * (hidden / 8),
                         xs + (tokens + t) * (hidden / 8), scratch);
  } else {
    atlas::stage_to_shared<8>(xs, reinterpret_cast<const uint4*>(a.x), tokens * (hidden / 8));
  }
  __syncthreads();
  if constexpr (kCluster) atlas::pdl_launch_dependents();
  if (has_row) {
    float* out = shared_row ? a.shared_logits : a.logits + e;
    const int stride = shared_row ? 1 : static_cast<int>(a.experts);
    // the shared gate is a bf16 Linear: its logit rounded whatever the experts' are
    const bool unrounded = a.unrounded != 0 && !shared_row;
    if constexpr (kCluster) {
      float* lg0 = coop::this_cluster().map_shared_rank(cluster_logits(), 0);
      gate_row_any<1>(xs, wr, wv, ClusterStore{out, lg0 + e}, tokens, hidden, unrounded);
    } else {
      gate_row_any<kGateMaxTokens>(xs, wr, wv, GlobalStore{out, stride}, tokens, hidden,
                                   unrounded);
    }
  }
  if constexpr (!kRoute) return;
  if constexpr (kCluster) {
    float* lg = cluster_logits();
    if (shared_warp) {  // arrive, then the shared gate row (from L2) while the others wait
      asm volatile("barrier.cluster.arrive.release.aligned;\n" ::: "memory");
      const uint4* sr = reinterpret_cast<const uint4*>(a.shared_gate);
      load_gate_batch<false>(sr, threadIdx.x & 31, hidden / 8, wv);
      gate_row_any<1>(xs, sr, wv, ClusterStore{a.shared_logits, lg + kClusterLogits}, tokens,
                      hidden, false);
      shared_logit_handoff();
      asm volatile("barrier.cluster.wait.acquire.aligned;\n" ::: "memory");
    } else {
      // every block's logits are in rank 0's shared memory, every block has read the residual
      coop::this_cluster().sync();
    }
    if constexpr (kNorm) {  // the residual and normed rows out, a slice a block
      uint4* res = reinterpret_cast<uint4*>(norm.residual);
      uint4* out = reinterpret_cast<uint4*>(norm.normed);
      const int n = hidden / 8;
      for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        res[i] = xs[n + i];
        out[i] = xs[i];
      }
    }
    if (blockIdx.x != 0 || threadIdx.x >= 32) return;  // the grid is one cluster: rank 0 routes
    if (kSigmoid)
      route_row<true, false, kClusterRouteTier>(lg, a.bias, a.topk_ids, a.topk_weights,
                                                a.experts, a.top_k, a.renormalize, a.scale);
    else
      route_row<false, false, kClusterRouteTier>(lg, a.bias, a.topk_ids, a.topk_weights,
                                                 a.experts, a.top_k, a.renormalize, a.scale);
    if (a.shared_slots > 0) {
      if (gated) shared_logit_handoff();
      atlas::moe::shared_slots_out(
          atlas::moe::shared_weight<false>(gated ? lg + kClusterLogits : nullptr), a.topk_ids,
          a.topk_weights, a.experts, a.top_k, a.shared_slots);
    }
    return;
  }
  __shared__ bool last;
  __threadfence();  // this block's logits, before its ticket
  __syncthreads();
  if (threadIdx.x == 0) last = atomicInc(a.counter, gridDim.x - 1) == gridDim.x - 1;
  __syncthreads();
  if (!last) return;
  __threadfence();
  if constexpr (kNorm) {  // every block has read the residual: r and x out
    uint4* res = reinterpret_cast<uint4*>(norm.residual);
    uint4* out = reinterpret_cast<uint4*>(norm.normed);
    const int n = tokens * (hidden / 8);
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
      res[i] = xs[n + i];
      out[i] = xs[i];
    }
  }
  const int token = threadIdx.x >> 5;
  if (token >= tokens) return;
  const size_t slots = a.top_k + a.shared_slots;
  // the shared gate tested again, not `gated` kept live to here (that took the NormIn
  // routers from 128 registers to 130)
  const float* shared_logit = a.shared_gate != nullptr ? a.shared_logits + token : nullptr;
  route_slots<true>(a.logits + static_cast<size_t>(token) * a.experts, a.bias, shared_logit,
                    a.topk_ids + token * slots, a.topk_weights + token * slots, a.experts,
                    a.top_k, a.shared_slots, a.renormalize, a.scale, kSigmoid);
}

}  // namespace

extern "C" __global__ void __launch_bounds__(32 * kWarpsPerBlock, 1)
    moe_topk_softmax_f32(const float* logits, int32_t* topk_ids, float* topk_weights,
                         uint32_t tokens, uint32_t experts, uint32_t top_k,
                         uint32_t renormalize, float scale) {
  route<false>(logits, nullptr, topk_ids, topk_weights, tokens, experts, top_k, renormalize,
               scale);
}

// moe_topk_softmax_f32 over the float32 sums of a router Linear with a bias (gpt-oss): the
// keys and the softmax's logits are bf16(logit + logit_bias[e]) (logit_bias bf16 [experts])
extern "C" __global__ void __launch_bounds__(32 * kWarpsPerBlock, 1)
    moe_topk_softmax_bias_f32(const float* logits, int32_t* topk_ids, float* topk_weights,
                              uint32_t tokens, uint32_t experts, uint32_t top_k,
                              uint32_t renormalize, float scale,
                              const __nv_bfloat16* logit_bias) {
  route<false, true>(logits, nullptr, topk_ids, topk_weights, tokens, experts, top_k,
                     renormalize, scale, logit_bias);
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
                               uint32_t renormalize, float scale, uint32_t unrounded) {
  gate_route<false>(GateArgs{x, w_gate, shared_gate, nullptr, logits, shared_logits, topk_ids,
                             topk_weights, counter, tokens, experts, hidden, top_k,
                             shared_slots, renormalize, scale, unrounded});
}

extern "C" __global__ void __launch_bounds__(32 * kGateWarps, 1)
    moe_gate_topk_sigmoid_bf16(const __nv_bfloat16* x, const __nv_bfloat16* w_gate,
                               const __nv_bfloat16* shared_gate, const float* bias,
                               float* logits, float* shared_logits, int32_t* topk_ids,
                               float* topk_weights, uint32_t* counter, uint32_t tokens,
                               uint32_t experts, uint32_t hidden, uint32_t top_k,
                               uint32_t shared_slots, uint32_t renormalize, float scale,
                               uint32_t unrounded) {
  gate_route<true>(GateArgs{x, w_gate, shared_gate, bias, logits, shared_logits, topk_ids,
                            topk_weights, counter, tokens, experts, hidden, top_k, shared_slots,
                            renormalize, scale, unrounded});
}

// NormIn: the two routers above with the model's add_rmsnorm before them done by their blocks
// (residual += delta, normed = RMSNorm(residual) * w, or * (1 + w) where `offset`).
extern "C" __global__ void __launch_bounds__(32 * kGateWarps, 1)
    moe_add_rmsnorm_gate_topk_softmax_bf16(
        __nv_bfloat16* residual, const __nv_bfloat16* delta, const __nv_bfloat16* norm_w,
        __nv_bfloat16* normed, const __nv_bfloat16* w_gate, const __nv_bfloat16* shared_gate,
        float* logits, float* shared_logits, int32_t* topk_ids, float* topk_weights,
        uint32_t* counter, uint32_t tokens, uint32_t experts, uint32_t hidden, uint32_t top_k,
        uint32_t shared_slots, uint32_t renormalize, float scale, uint32_t unrounded, float eps,
        uint32_t offset) {
  gate_route<false, true, true>(
      GateArgs{nullptr, w_gate, shared_gate, nullptr, logits, shared_logits, topk_ids,
               topk_weights, counter, tokens, experts, hidden, top_k, shared_slots,
               renormalize, scale, unrounded},
      NormIn{residual, delta, norm_w, normed, eps, offset});
}

extern "C" __global__ void __launch_bounds__(32 * kGateWarps, 1)
    moe_add_rmsnorm_gate_topk_sigmoid_bf16(
        __nv_bfloat16* residual, const __nv_bfloat16* delta, const __nv_bfloat16* norm_w,
        __nv_bfloat16* normed, const __nv_bfloat16* w_gate, const __nv_bfloat16* shared_gate,
        const float* bias, float* logits, float* shared_logits, int32_t* topk_ids,
        float* topk_weights, uint32_t* counter, uint32_t tokens, uint32_t experts,
        uint32_t hidden, uint32_t top_k, uint32_t shared_slots, uint32_t renormalize,
        float scale, uint32_t unrounded, float eps, uint32_t offset) {
  gate_route<true, true, true>(
      GateArgs{nullptr, w_gate, shared_gate, bias, logits, shared_logits, topk_ids,
               topk_weights, counter, tokens, experts, hidden, top_k, shared_slots,
               renormalize, scale, unrounded},
      NormIn{residual, delta, norm_w, normed, eps, offset});
}

// The two NormIn routers at batch 1 as one cluster (ATLAS_MOE_ROUTER_CLUSTER): no counter;
// grid one cluster of kClusterBlocks blocks of ceil(experts / kClusterBlocks) warps, at least
// 8, at most kClusterMaxWarps (ops/moe.py gate_topk_cluster).
extern "C" __global__ void __cluster_dims__(kClusterBlocks, 1, 1)
    __launch_bounds__(32 * kClusterMaxWarps, 1) moe_add_rmsnorm_gate_topk_cluster_softmax_bf16(
        __nv_bfloat16* residual, const __nv_bfloat16* delta, const __nv_bfloat16* norm_w,
        __nv_bfloat16* normed, const __nv_bfloat16* w_gate, const __nv_bfloat16* shared_gate,
        float* logits, float* shared_logits, int32_t* topk_ids, float* topk_weights,
        uint32_t tokens, uint32_t experts, uint32_t hidden, uint32_t top_k,
        uint32_t shared_slots, uint32_t renormalize, float scale, uint32_t unrounded, float eps,
        uint32_t offset) {
  gate_route<false, true, true, true>(
      GateArgs{nullptr, w_gate, shared_gate, nullptr, logits, shared_logits, topk_ids,
               topk_weights, nullptr, tokens, experts, hidden, top_k, shared_slots,
               renormalize, scale, unrounded},
      NormIn{residual, delta, norm_w, normed, eps, offset});
}

extern "C" __global__ void __cluster_dims__(kClusterBlocks, 1, 1)
    __launch_bounds__(32 * kClusterMaxWarps, 1) moe_add_rmsnorm_gate_topk_cluster_sigmoid_bf16(
        __nv_bfloat16* residual, const __nv_bfloat16* delta, const __nv_bfloat16* norm_w,
        __nv_bfloat16* normed, const __nv_bfloat16* w_gate, const __nv_bfloat16* shared_gate,
        const float* bias, float* logits, float* shared_logits, int32_t* topk_ids,
        float* topk_weights, uint32_t tokens, uint32_t experts, uint32_t hidden,
        uint32_t top_k, uint32_t shared_slots, uint32_t renormalize, float scale,
        uint32_t unrounded, float eps, uint32_t offset) {
  gate_route<true, true, true, true>(
      GateArgs{nullptr, w_gate, shared_gate, bias, logits, shared_logits, topk_ids,
               topk_weights, nullptr, tokens, experts, hidden, top_k, shared_slots,
               renormalize, scale, unrounded},
      NormIn{residual, delta, norm_w, normed, eps, offset});
}

// The gate GEMV alone (gate_route<.., false>): logits f32 [tokens, experts] and the shared
// expert's logit, the same values as the routers above; grid and shared memory as theirs.
extern "C" __global__ void __launch_bounds__(32 * kGateWarps, 1)
    moe_gate_logits_bf16(const __nv_bfloat16* x, const __nv_bfloat16* w_gate,
                         const __nv_bfloat16* shared_gate, float* logits, float* shared_logits,
                         uint32_t tokens, uint32_t experts, uint32_t hidden,
                         uint32_t shared_slots, uint32_t unrounded) {
  gate_route<false, false>(GateArgs{x, w_gate, shared_gate, nullptr, logits, shared_logits,
                                    nullptr, nullptr, nullptr, tokens, experts, hidden, 0,
                                    shared_slots, 0, 1.f, unrounded});
}
