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
#include "atlas_common.cuh"
#include "bf16_vec.cuh"

namespace {

constexpr int kMaxPerLane = 16;  // ops/moe.py ROUTER_MAX_EXPERTS / 32
constexpr int kWarpsPerBlock = 4;  // ops/moe.py ROUTER_TOKENS_PER_BLOCK
constexpr float kRenormEps = 1e-20f;

// Selection keys as unsigned integers in the same order: a larger float gives a larger key,
// -0 and +0 are equal, and NaN sorts below every number (where numpy's argsort, the
// reference, puts it). One u32 per candidate lets a warp find its best with redux.sync.
__device__ __forceinline__ uint32_t order_key(float k) {
  if (k != k) return 0u;
  if (k == 0.f) return 0x80000000u;
  const uint32_t u = __float_as_uint(k);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

constexpr uint32_t kNoExpert = 0xffffffffu;

// kPerLane: register slots per lane (experts <= 32 kPerLane); kTopK: 0 = run-time top_k.
// kFromL2: the logits were written by other blocks of this launch (the fused router), so they
// are read from L2 (ld.global.cg), never from a possibly stale L1 line.
template <int kPerLane, int kTopK, bool kSigmoid, bool kFromL2 = false>
__device__ __forceinline__ void route_token(const float* __restrict__ logits,
                                            const float* __restrict__ bias,
                                            int32_t* __restrict__ topk_ids,
                                            float* __restrict__ topk_weights, int experts,
                                            int top_k_arg, bool renormalize, float scale) {
  const int top_k = kTopK > 0 ? kTopK : top_k_arg;
  const int lane = threadIdx.x & 31;
  float key[kPerLane], score[kPerLane];
  uint32_t taken = 0;  // bit j: expert lane + 32 j is chosen or does not exist
  float local_max = -INFINITY;
#pragma unroll
  for (int j = 0; j < kPerLane; ++j) {
    const int e = lane + 32 * j;
    const bool live = e < experts;
    const float x = live ? (kFromL2 ? __ldcg(logits + e) : logits[e]) : 0.f;
    if (!live) taken |= 1u << j;
    if (kSigmoid) {
      score[j] = 1.f / (1.f + expf(-x));
      key[j] = score[j] + (bias != nullptr && live ? bias[e] : 0.f);
    } else {
      key[j] = score[j] = x;
      if (live) local_max = fmaxf(local_max, x);
    }
  }
  float total = 1.f;
  if (!kSigmoid) {  // softmax numerators and their sum over every expert
    const float row_max = atlas::warp_max(local_max);
    float sum = 0.f;
#pragma unroll
    for (int j = 0; j < kPerLane; ++j) {
      score[j] = (taken >> j) & 1u ? 0.f : expf(key[j] - row_max);
      sum += score[j];
    }
    total = atlas::warp_sum(sum);
  }

  uint32_t ord[kPerLane];
#pragma unroll
  for (int j = 0; j < kPerLane; ++j) ord[j] = order_key(key[j]);

  // k rounds; each: every lane's best remaining candidate (largest key, then its lower
  // expert), the warp's largest key by one redux.sync and, among the lanes holding it, the
  // lowest expert by another (torch.topk's order), the winner's score by one shuffle. The
  // dependent chain is two reductions and a shuffle a round, not a 5-level butterfly of
  // (key, expert, score) triples.
  uint32_t mine = kNoExpert;
  float mine_score = 0.f;
#pragma unroll(kTopK > 0 ? kTopK : 1)
  for (int r = 0; r < top_k; ++r) {
    uint32_t best_ord = 0u, best = kNoExpert;
    float best_score = 0.f;
#pragma unroll
    for (int j = 0; j < kPerLane; ++j) {
      if (!((taken >> j) & 1u) && (best == kNoExpert || ord[j] > best_ord)) {
        best_ord = ord[j];
        best = lane + 32 * j;
        best_score = score[j];
      }
    }
    const uint32_t top = __reduce_max_sync(0xffffffffu, best != kNoExpert ? best_ord : 0u);
    const uint32_t winner =
        __reduce_min_sync(0xffffffffu, best != kNoExpert && best_ord == top ? best : kNoExpert);
    const float s = __shfl_sync(0xffffffffu, best_score, winner & 31);
    if (winner != kNoExpert && (winner & 31) == static_cast<uint32_t>(lane))
      taken |= 1u << (winner >> 5);
    if (lane == r) {
      mine = winner;
      mine_score = s;
    }
  }

  // probabilities (softmax) or sigmoid scores of the chosen experts, then renormalize
  float w = lane < top_k && mine != kNoExpert ? mine_score / total : 0.f;
  if (renormalize) w = w / (atlas::warp_sum(w) + kRenormEps);
  if (lane < top_k) {
    topk_ids[lane] = mine == kNoExpert ? -1 : static_cast<int32_t>(mine);
    topk_weights[lane] = w * scale;
  }
}

// Route one token (its logits row at `logits`) with the leaf's compile-time shape where the
// launch has it, else the general instantiation.
template <bool kSigmoid, bool kFromL2>
__device__ __forceinline__ void route_row(const float* logits, const float* bias,
                                          int32_t* topk_ids, float* topk_weights,
                                          uint32_t experts, uint32_t top_k, uint32_t renormalize,
                                          float scale) {
#if defined(ATLAS_MOE_EXPERTS) && defined(ATLAS_MOE_TOPK)
  static_assert(ATLAS_MOE_EXPERTS <= 32 * kMaxPerLane && ATLAS_MOE_TOPK <= 32, "leaf shape");
  if (experts == ATLAS_MOE_EXPERTS && top_k == ATLAS_MOE_TOPK) {
    route_token<(ATLAS_MOE_EXPERTS + 31) / 32, ATLAS_MOE_TOPK, kSigmoid, kFromL2>(
        logits, bias, topk_ids, topk_weights, ATLAS_MOE_EXPERTS, ATLAS_MOE_TOPK,
        renormalize != 0, scale);
    return;
  }
#endif
  // the per-lane arrays sized to the expert count's tier (every candidate scan of the k
  // rounds, the softmax and the logit loads cover only slots that can hold an expert)
  if (experts <= 4 * 32)
    route_token<4, 0, kSigmoid, kFromL2>(logits, bias, topk_ids, topk_weights, experts, top_k,
                                         renormalize != 0, scale);
  else if (experts <= 8 * 32)
    route_token<8, 0, kSigmoid, kFromL2>(logits, bias, topk_ids, topk_weights, experts, top_k,
                                         renormalize != 0, scale);
  else
    route_token<kMaxPerLane, 0, kSigmoid, kFromL2>(logits, bias, topk_ids, topk_weights,
                                                   experts, top_k, renormalize != 0, scale);
}

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

// Grid ceil((experts + 1 if shared) / kGateWarps) blocks of kGateWarps warps; warp w of block
// b computes the logits of row kGateWarps b + w (row `experts`: the shared expert's gate) for
// every token. The last block to finish (a ticket from atomicInc on *counter, which wraps back
// to zero) routes every token, one warp per token, and fills its shared slots: ids experts +
// c, weights bf16(sigmoid(shared logit)) (transformers' F.sigmoid of the bf16 gate output).
template <bool kSigmoid>
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
  __shared__ bool last;
  __threadfence();  // this block's logits, before its ticket
  __syncthreads();
  if (threadIdx.x == 0) last = atomicInc(a.counter, gridDim.x - 1) == gridDim.x - 1;
  __syncthreads();
  if (!last) return;
  __threadfence();
  const int token = threadIdx.x >> 5, lane = threadIdx.x & 31;
  if (token >= tokens) return;
  const size_t slots = a.top_k + a.shared_slots;
  int32_t* ids = a.topk_ids + token * slots;
  float* weights = a.topk_weights + token * slots;
  route_row<kSigmoid, true>(a.logits + static_cast<size_t>(token) * a.experts, a.bias, ids,
                            weights, a.experts, a.top_k, a.renormalize, a.scale);
  if (lane < static_cast<int>(a.shared_slots)) {
    const float g = __ldcg(a.shared_logits + token);
    ids[a.top_k + lane] = static_cast<int32_t>(a.experts) + lane;
    weights[a.top_k + lane] = atlas::round_bf16(1.f / (1.f + expf(-g)));
  }
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
