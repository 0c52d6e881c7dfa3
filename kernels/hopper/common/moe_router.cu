// MoE router: top-k experts per token from the gate's logits, with softmax or sigmoid scoring.
//
// One warp per token (ops/moe.py ROUTER_TOKENS_PER_BLOCK warps per block). Lane l holds the
// scores of experts l, l + 32, ... in registers (at most kMaxPerLane each: 512 experts). The
// k winners are found in k rounds of a warp arg-max over (key, expert) pairs that prefers the
// larger key and, for equal keys, the lower expert index (torch.topk's order); a winner is
// marked taken in its owner lane's bit mask. Lane r keeps round r's winner, so the ids come
// out best first, and the final weights are one warp sum away.
//
// Softmax: key = the logit (softmax is increasing, so the top-k of the probabilities), weight
// = exp(logit - max) / sum over all experts, in float32. Sigmoid: key = sigmoid(logit) +
// bias[e] (e_score_correction_bias: selection only), weight = sigmoid(logit). Then, with
// `renormalize`, weight / (sum of the k weights + 1e-20), and times `scale`.
//
// Where the leaf defines ATLAS_MOE_EXPERTS and ATLAS_MOE_TOPK, launches with exactly those
// shapes run an instantiation with both as compile-time constants (the per-lane register
// array sized to the experts, the rounds unrolled); other shapes take the general one.
#include <climits>

#include "atlas_common.cuh"

namespace {

constexpr int kMaxPerLane = 16;  // ops/moe.py ROUTER_MAX_EXPERTS / 32
constexpr int kWarpsPerBlock = 4;  // ops/moe.py ROUTER_TOKENS_PER_BLOCK
constexpr float kRenormEps = 1e-20f;

// (key, expert, score) candidate; `a` better than `b`: larger key, then lower expert index.
// NaN keys are never better than anything, so they are never chosen over a real score.
struct Candidate {
  float key;
  int expert;
  float score;
};

__device__ __forceinline__ bool better(const Candidate& a, const Candidate& b) {
  return a.key > b.key || (a.key == b.key && a.expert < b.expert);
}

// Every lane ends with the warp's best candidate (the order is total, so all agree).
__device__ __forceinline__ Candidate warp_best(Candidate c) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) {
    Candidate o;
    o.key = __shfl_xor_sync(0xffffffffu, c.key, offset);
    o.expert = __shfl_xor_sync(0xffffffffu, c.expert, offset);
    o.score = __shfl_xor_sync(0xffffffffu, c.score, offset);
    if (better(o, c)) c = o;
  }
  return c;
}

// kPerLane: register slots per lane (experts <= 32 kPerLane); kTopK: 0 = run-time top_k.
template <int kPerLane, int kTopK, bool kSigmoid>
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
    const float x = live ? logits[e] : 0.f;
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

  Candidate mine{-INFINITY, INT_MAX, 0.f};
#pragma unroll(kTopK > 0 ? kTopK : 1)
  for (int r = 0; r < top_k; ++r) {
    Candidate best{-INFINITY, INT_MAX, 0.f};
#pragma unroll
    for (int j = 0; j < kPerLane; ++j) {
      const Candidate c{key[j], lane + 32 * j, score[j]};
      if (!((taken >> j) & 1u) && better(c, best)) best = c;
    }
    best = warp_best(best);
    if (best.expert != INT_MAX && (best.expert & 31) == lane) taken |= 1u << (best.expert >> 5);
    if (lane == r) mine = best;
  }

  // probabilities (softmax) or sigmoid scores of the chosen experts, then renormalize
  float w = lane < top_k && mine.expert != INT_MAX ? mine.score / total : 0.f;
  if (renormalize) w = w / (atlas::warp_sum(w) + kRenormEps);
  if (lane < top_k) {
    topk_ids[lane] = mine.expert == INT_MAX ? -1 : mine.expert;
    topk_weights[lane] = w * scale;
  }
}

template <bool kSigmoid>
__device__ __forceinline__ void route(const float* logits, const float* bias, int32_t* topk_ids,
                                      float* topk_weights, uint32_t tokens, uint32_t experts,
                                      uint32_t top_k, uint32_t renormalize, float scale) {
  atlas::pdl_enter();
  const int token = blockIdx.x * kWarpsPerBlock + (threadIdx.x >> 5);
  if (token >= static_cast<int>(tokens)) return;
  logits += static_cast<size_t>(token) * experts;
  topk_ids += static_cast<size_t>(token) * top_k;
  topk_weights += static_cast<size_t>(token) * top_k;
#if defined(ATLAS_MOE_EXPERTS) && defined(ATLAS_MOE_TOPK)
  static_assert(ATLAS_MOE_EXPERTS <= 32 * kMaxPerLane && ATLAS_MOE_TOPK <= 32, "leaf shape");
  if (experts == ATLAS_MOE_EXPERTS && top_k == ATLAS_MOE_TOPK) {
    route_token<(ATLAS_MOE_EXPERTS + 31) / 32, ATLAS_MOE_TOPK, kSigmoid>(
        logits, bias, topk_ids, topk_weights, ATLAS_MOE_EXPERTS, ATLAS_MOE_TOPK,
        renormalize != 0, scale);
    return;
  }
#endif
  route_token<kMaxPerLane, 0, kSigmoid>(logits, bias, topk_ids, topk_weights, experts, top_k,
                                        renormalize != 0, scale);
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
