// MoE top-k routing of one token by one warp (moe_router.cu's header comment says how), shared
// by the router kernels and the batch-1 expert kernels that route from the logits themselves
// (moe_decode.cu, ops/moe.py routes_in_experts).
#pragma once

#include "atlas_common.cuh"
#include "bf16_vec.cuh"

namespace atlas::moe {

constexpr int kMaxPerLane = 16;  // ops/moe.py ROUTER_MAX_EXPERTS / 32
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
// are read from L2 (ld.global.cg), never from a possibly stale L1 line. kWeights false: the
// ids only (topk_weights unused): no softmax, no scores kept, fewer registers. kLogitBias: a
// router Linear's bias (gpt-oss: `logit_bias` bf16 [experts]) joins each float32 logit as it
// is loaded, rounded once to bf16: the logit the top-k and the softmax see.
template <int kPerLane, int kTopK, bool kSigmoid, bool kFromL2 = false, bool kWeights = true,
          bool kLogitBias = false>
__device__ __forceinline__ void route_token(const float* __restrict__ logits,
                                            const float* __restrict__ bias,
                                            int32_t* __restrict__ topk_ids,
                                            float* __restrict__ topk_weights, int experts,
                                            int top_k_arg, bool renormalize, float scale,
                                            const __nv_bfloat16* logit_bias = nullptr) {
  const int top_k = kTopK > 0 ? kTopK : top_k_arg;
  const int lane = threadIdx.x & 31;
  float key[kPerLane], score[kPerLane];
  uint32_t taken = 0;  // bit j: expert lane + 32 j is chosen or does not exist
  float local_max = -INFINITY;
#pragma unroll
  for (int j = 0; j < kPerLane; ++j) {
    const int e = lane + 32 * j;
    const bool live = e < experts;
    float x = live ? (kFromL2 ? __ldcg(logits + e) : logits[e]) : 0.f;
    if constexpr (kLogitBias)
      if (live) x = atlas::round_bf16(x + __bfloat162float(logit_bias[e]));
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
  if (!kSigmoid && kWeights) {  // softmax numerators and their sum over every expert
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
    const float s = kWeights ? __shfl_sync(0xffffffffu, best_score, winner & 31) : 0.f;
    if (winner != kNoExpert && (winner & 31) == static_cast<uint32_t>(lane))
      taken |= 1u << (winner >> 5);
    if (lane == r) {
      mine = winner;
      mine_score = s;
    }
  }

  if (lane < top_k) topk_ids[lane] = mine == kNoExpert ? -1 : static_cast<int32_t>(mine);
  if constexpr (!kWeights) return;
  // probabilities (softmax) or sigmoid scores of the chosen experts, then renormalize
  float w = lane < top_k && mine != kNoExpert ? mine_score / total : 0.f;
  if (renormalize) w = w / (atlas::warp_sum(w) + kRenormEps);
  if (lane < top_k) topk_weights[lane] = w * scale;
}

// Route one token (its logits row at `logits`) with the leaf's compile-time shape where the
// launch has it, else the general instantiation. kMaxTier: the largest per-lane array
// instantiated (experts <= 32 kMaxTier; the expert kernels' 8: 256 experts within their
// register budgets, ops/moe.py ROUTE_IN_EXPERTS_MAX_EXPERTS).
template <bool kSigmoid, bool kFromL2, int kMaxTier = kMaxPerLane, bool kWeights = true,
          bool kLogitBias = false>
__device__ __forceinline__ void route_row(const float* logits, const float* bias,
                                          int32_t* topk_ids, float* topk_weights,
                                          uint32_t experts, uint32_t top_k, uint32_t renormalize,
                                          float scale,
                                          const __nv_bfloat16* logit_bias = nullptr) {
#if defined(ATLAS_MOE_EXPERTS) && defined(ATLAS_MOE_TOPK)
  static_assert(ATLAS_MOE_EXPERTS <= 32 * kMaxPerLane && ATLAS_MOE_TOPK <= 32, "leaf shape");
  if (experts == ATLAS_MOE_EXPERTS && top_k == ATLAS_MOE_TOPK) {
    route_token<(ATLAS_MOE_EXPERTS + 31) / 32, ATLAS_MOE_TOPK, kSigmoid, kFromL2, kWeights,
                kLogitBias>(logits, bias, topk_ids, topk_weights, ATLAS_MOE_EXPERTS,
                            ATLAS_MOE_TOPK, renormalize != 0, scale, logit_bias);
    return;
  }
#endif
  // the per-lane arrays sized to the expert count's tier (every candidate scan of the k
  // rounds, the softmax and the logit loads cover only slots that can hold an expert)
  if (experts <= 4 * 32)
    route_token<4, 0, kSigmoid, kFromL2, kWeights, kLogitBias>(
        logits, bias, topk_ids, topk_weights, experts, top_k, renormalize != 0, scale,
        logit_bias);
  else if (kMaxTier <= 8 || experts <= 8 * 32)
    route_token<8, 0, kSigmoid, kFromL2, kWeights, kLogitBias>(
        logits, bias, topk_ids, topk_weights, experts, top_k, renormalize != 0, scale,
        logit_bias);
  else
    route_token<kMaxTier, 0, kSigmoid, kFromL2, kWeights, kLogitBias>(
        logits, bias, topk_ids, topk_weights, experts, top_k, renormalize != 0, scale,
        logit_bias);
}

// The weight of a token's shared slots: bf16(sigmoid(g)) of its gate logit g at `logit`
// (transformers' F.sigmoid of the bf16 shared gate output), or 1 where `logit` is null: an
// ungated shared expert (GLM-4.5's), added as it is. The down kernels form bf16(routed) +
// bf16(w * bf16(shared)), at w = 1 bf16(routed) + bf16(shared): moe_shared_add_bf16's
// null-gate value. kFromL2: the logit was written by this launch's other blocks.
template <bool kFromL2>
__device__ __forceinline__ float shared_weight(const float* logit) {
  if (logit == nullptr) return 1.f;
  const float g = kFromL2 ? __ldcg(logit) : *logit;
  return atlas::round_bf16(1.f / (1.f + expf(-g)));
}

// One warp: a token's shared slots (ids experts + c, all of weight `weight`: shared_weight's),
// after its top_k routed ones; lane c writes c.
__device__ __forceinline__ void shared_slots_out(float weight, int32_t* ids, float* weights,
                                                 uint32_t experts, uint32_t top_k,
                                                 uint32_t shared_slots) {
  const int lane = threadIdx.x & 31;
  if (lane < static_cast<int>(shared_slots)) {
    ids[top_k + lane] = static_cast<int32_t>(experts) + lane;
    weights[top_k + lane] = weight;
  }
}

// One warp: the routing of the token whose logits row is `logits` into ids / weights [slots]:
// the top_k routed slots (softmax or, `sigmoid`, sigmoid scoring with `bias`), then the
// shared expert's slots (shared_weight of shared_logit: null for an ungated shared expert,
// weight 1). kFromL2: the logits were
// written by this launch's other blocks (ld.global.cg); else plain (generic) loads, e.g. from
// shared memory.
template <bool kFromL2, int kMaxTier = kMaxPerLane>
__device__ __forceinline__ void route_slots(const float* logits, const float* bias,
                                            const float* shared_logit, int32_t* ids,
                                            float* weights, uint32_t experts, uint32_t top_k,
                                            uint32_t shared_slots, uint32_t renormalize,
                                            float scale, bool sigmoid) {
  if (sigmoid)
    route_row<true, kFromL2, kMaxTier>(logits, bias, ids, weights, experts, top_k, renormalize,
                                       scale);
  else
    route_row<false, kFromL2, kMaxTier>(logits, bias, ids, weights, experts, top_k,
                                        renormalize, scale);
  if (static_cast<int>(threadIdx.x & 31) < static_cast<int>(shared_slots))
    shared_slots_out(shared_weight<kFromL2>(shared_logit), ids, weights, experts, top_k,
                     shared_slots);
}

// One warp: the top_k expert ids alone of the token whose logits row is `logits` (route_row's
// selection, no weights) into ids[0, top_k).
template <bool kFromL2, int kMaxTier = kMaxPerLane>
__device__ __forceinline__ void route_ids(const float* logits, const float* bias, int32_t* ids,
                                          uint32_t experts, uint32_t top_k, bool sigmoid) {
  if (sigmoid)
    route_row<true, kFromL2, kMaxTier, false>(logits, bias, ids, nullptr, experts, top_k, 0, 1.f);
  else
    route_row<false, kFromL2, kMaxTier, false>(logits, bias, ids, nullptr, experts, top_k, 0,
                                               1.f);
}

}  // namespace atlas::moe
