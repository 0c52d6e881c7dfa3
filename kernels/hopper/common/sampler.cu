// The GPU sampler: penalties, filtered sampling and penalty-count update, one launch each.
// Everything a step varies lives in device buffers (SampleRow per batch row, per-slot counts
// and prompt masks), so the three launches can be captured in the decode graph.
//
// Semantics (the numpy reference atlas.runtime.reference.sampler is the specification):
// * penalties, for rows with slot >= 0: repetition p over prompt + generated tokens
//   (logit > 0 ? logit / p : logit * p), then presence/frequency over generated tokens
//   (logit -= presence * (count > 0) + frequency * count).
// * sampling: temperature <= 0 is argmax (lowest index wins ties, NaN ignored; no division).
//   Otherwise z = (logit - max) / T and the kept set is every non-NaN token with
//     logit >= t_k (the top_k-th largest logit: ties kept),
//     logit >= t_p (the largest threshold whose kept probability mass, within the top-k set,
//                   reaches top_p of that set's mass: the nucleus, ties kept), and
//     z >= log(min_p)  (p >= min_p * p_max).
//   The token is argmax over the kept set of z + Gumbel(seed, step, token): an exact draw from
//   the renormalized softmax that depends only on the row's own inputs, never on the batch.
//   Probability mass for the nucleus is 2^31 * exp(z) truncated to an integer, so the
//   threshold search sums integers: deterministic and order-independent.
// * thresholds are found by radix select over the order-preserving 32-bit image of the f32
//   logits (4 passes of 8 bits over the row) instead of a sort.
#include <math.h>

#include "argmax_reduce.cuh"

namespace {

// Mirrors atlas.runtime.kernel_abi.SAMPLE_ROW (48 bytes).
struct SampleRow {
  int32_t slot;       // penalty-state slot; < 0: no penalties, no counting
  int32_t top_k;      // <= 0: off
  uint32_t seed_lo;
  uint32_t seed_hi;
  uint32_t step;      // tokens generated so far: the RNG counter
  float temperature;  // <= 0: greedy
  float top_p;        // >= 1: off
  float min_p;        // <= 0: off
  float repetition;   // 1: off
  float presence;
  float frequency;
  uint32_t pad;
};
static_assert(sizeof(SampleRow) == 48, "SampleRow must match SAMPLE_ROW");

constexpr int kThreads = 1024;  // sample_f32 block size (one block per row)
constexpr int kBins = 256;
constexpr float kMassScale = 2147483648.f;  // 2^31: exp(z) <= 1 maps into 32 bits
// Gumbel noise -log(-log(u)) with u in [2^-24, 1 - 2^-24] lies in [-2.82, 16.64]; a token
// with z + kGumbelSpan below the best score so far cannot win.
constexpr float kGumbelSpan = 19.5f;

// Order-preserving map of an f32 to u32 (larger float -> larger key; -0 < +0).
__device__ __forceinline__ uint32_t order_key(float x) {
  const uint32_t u = __float_as_uint(x);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

__device__ __forceinline__ uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Counter-based RNG: one independent 64-bit draw per (seed, step, token).
__device__ __forceinline__ uint64_t stream_base(uint64_t seed, uint32_t step) {
  return mix64(seed ^ (static_cast<uint64_t>(step) * 0xD1B54A32D192ED03ull));
}

__device__ __forceinline__ float gumbel(uint64_t base, uint32_t token) {
  const uint64_t r = mix64(base + (static_cast<uint64_t>(token) + 1ull) * 0x9E3779B97F4A7C15ull);
  const float u = (static_cast<float>(r >> 41) + 0.5f) * 1.1920928955078125e-07f;  // 2^-23
  return -logf(-logf(u));
}

// trunc(2^31 * exp(z)); zero below z = -22 (2^31 * e^-22 < 0.6), which skips most expf calls.
__device__ __forceinline__ uint32_t mass_of(float x, float max_logit, float temperature) {
  const float z = (x - max_logit) / temperature;
  return z < -22.f ? 0u : static_cast<uint32_t>(__float2uint_rz(expf(z) * kMassScale));
}

// Radix select: the largest key t with weight(keys >= t) >= need, counting only non-NaN
// entries with key >= floor; weight is 1 per entry, or its mass when `by_mass`. When
// `need_frac` > 0 the target is ceil(need_frac * total weight). Returns `floor` when the
// target exceeds the total (nothing to cut).
__device__ uint32_t radix_select(const float* __restrict__ row, uint32_t n, uint32_t floor,
                                 bool by_mass, uint64_t need, double need_frac,
                                 float max_logit, float temperature) {
  __shared__ unsigned long long hist[kBins];
  __shared__ uint32_t s_prefix;
  __shared__ unsigned long long s_need;
  __shared__ int s_found;
  const int lane = threadIdx.x & 31;
  uint32_t prefix = 0, mask = 0;
  for (int shift = 24; shift >= 0; shift -= 8) {
    for (int b = threadIdx.x; b < kBins; b += blockDim.x) hist[b] = 0ull;
    __syncthreads();
    for (uint32_t i0 = 0; i0 < n; i0 += blockDim.x) {
      const uint32_t i = i0 + threadIdx.x;
      uint32_t bin = kBins;  // kBins: contributes nothing
      uint32_t w = 0;
      if (i < n) {
        const float x = row[i];
        const uint32_t key = order_key(x);
        if (!isnan(x) && key >= floor && (key & mask) == prefix) {
          w = by_mass ? mass_of(x, max_logit, temperature) : 1u;
          if (w != 0) bin = (key >> shift) & (kBins - 1);
        }
      }
      // Lanes hitting the same bin add once through their group leader: logits cluster in
      // a few high-byte bins, and unaggregated shared atomics there would serialize.
      const unsigned active = __ballot_sync(0xffffffffu, bin < kBins);
      if (bin < kBins) {
        const unsigned peers = __match_any_sync(active, bin);
        const uint32_t lo = __reduce_add_sync(peers, w & 0xffffu);
        const uint32_t hi = __reduce_add_sync(peers, w >> 16);
        if (lane == __ffs(peers) - 1)
          atomicAdd(&hist[bin], (static_cast<unsigned long long>(hi) << 16) + lo);
      }
    }
    __syncthreads();
    if (threadIdx.x < 32) {
      // Lane l owns bins 255-8l .. 248-8l (descending), so a prefix sum over lanes walks
      // the histogram from the largest keys down.
      unsigned long long own = 0;
#pragma unroll
      for (int j = 0; j < 8; ++j) own += hist[kBins - 1 - 8 * lane - j];
      unsigned long long incl = own;
#pragma unroll
      for (int off = 1; off < 32; off <<= 1) {
        const unsigned long long o = __shfl_up_sync(0xffffffffu, incl, off);
        if (lane >= off) incl += o;
      }
      unsigned long long target = need;
      if (shift == 24 && need_frac > 0.0) {
        const unsigned long long total = __shfl_sync(0xffffffffu, incl, 31);
        target = static_cast<unsigned long long>(ceil(need_frac * static_cast<double>(total)));
      }
      if (target == 0) target = 1;  // the largest key always qualifies
      const unsigned reached = __ballot_sync(0xffffffffu, incl >= target);
      if (reached == 0) {
        if (lane == 0) s_found = 0;
      } else if (lane == __ffs(reached) - 1) {
        unsigned long long acc = incl - own;
        int bin = kBins - 1 - 8 * lane;
        for (int j = 0; j < 8; ++j, --bin) {
          if (acc + hist[bin] >= target) break;
          acc += hist[bin];
        }
        s_found = 1;
        s_prefix = prefix | (static_cast<uint32_t>(bin) << shift);
        s_need = target - acc;
      }
    }
    __syncthreads();
    if (!s_found) return floor;
    prefix = s_prefix;
    need = s_need;
    mask |= static_cast<uint32_t>(kBins - 1) << shift;
    __syncthreads();  // s_* are rewritten by the next pass
  }
  return prefix;
}

}  // namespace

// Launch: grid = (ceil(vocab / 1024), rows), block = 256; each thread handles 4 tokens.
extern "C" __global__ void __launch_bounds__(256)
apply_penalties_f32(float* __restrict__ logits, const SampleRow* __restrict__ row_params,
                    const int32_t* __restrict__ counts, const uint8_t* __restrict__ prompt_mask,
                    uint32_t rows, uint32_t vocab) {
  const uint32_t r = blockIdx.y;
  if (r >= rows) return;
  const SampleRow p = row_params[r];
  const float rep = p.repetition > 0.f ? p.repetition : 1.f;
  if (p.slot < 0 || (rep == 1.f && p.presence == 0.f && p.frequency == 0.f)) return;
  const int32_t* cnt = counts + static_cast<size_t>(p.slot) * vocab;
  const uint8_t* seen = prompt_mask + static_cast<size_t>(p.slot) * vocab;
  float* row = logits + static_cast<size_t>(r) * vocab;
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const uint32_t v = blockIdx.x * 1024u + j * 256u + threadIdx.x;
    if (v >= vocab) break;
    const int32_t c = cnt[v];
    float x = row[v];
    if (c > 0 || seen[v]) x = x > 0.f ? x / rep : x * rep;
    x -= p.presence * (c > 0 ? 1.f : 0.f) + p.frequency * static_cast<float>(c);
    row[v] = x;
  }
}

// Launch: grid = rows, block = 1024.
extern "C" __global__ void __launch_bounds__(kThreads)
sample_f32(const float* __restrict__ logits, const SampleRow* __restrict__ row_params,
           int32_t* __restrict__ out, uint32_t rows, uint32_t vocab) {
  const uint32_t r = blockIdx.x;
  if (r >= rows) return;
  __shared__ atlas::ArgBest scratch[32];
  const SampleRow p = row_params[r];
  const float* row = logits + static_cast<size_t>(r) * vocab;
  const atlas::ArgBest top = atlas::row_argmax(row, vocab, scratch);
  if (p.temperature <= 0.f || !(top.value > -INFINITY)) {  // greedy, or nothing finite
    if (threadIdx.x == 0) out[r] = top.index == atlas::kNoIndex ? 0 : top.index;
    return;
  }
  const float m = top.value, T = p.temperature;
  uint32_t keep = 0;  // keys >= keep survive top-k / top-p
  if (p.top_k > 0 && static_cast<uint32_t>(p.top_k) < vocab)
    keep = radix_select(row, vocab, keep, false, static_cast<uint64_t>(p.top_k), 0.0, m, T);
  if (p.top_p < 1.f)
    keep = radix_select(row, vocab, keep, true, 0, static_cast<double>(p.top_p), m, T);
  const float z_min = p.min_p > 0.f ? logf(p.min_p) : -INFINITY;
  const uint64_t base = stream_base((static_cast<uint64_t>(p.seed_hi) << 32) | p.seed_lo, p.step);
  // The max token always survives every filter; its score bounds the winner's from below.
  const float floor_score = gumbel(base, static_cast<uint32_t>(top.index));
  atlas::ArgBest best = {floor_score, top.index};
  for (uint32_t i = threadIdx.x; i < vocab; i += blockDim.x) {
    const float x = row[i];
    if (isnan(x) || order_key(x) < keep) continue;
    const float z = (x - m) / T;
    if (z < z_min || z + kGumbelSpan < floor_score) continue;
    atlas::arg_update(best, z + gumbel(base, i), static_cast<int>(i));
  }
  best = atlas::block_argmax(best, scratch);
  if (threadIdx.x == 0) out[r] = best.index;
}

// Launch: grid = ceil(rows / 128), block = 128.
extern "C" __global__ void __launch_bounds__(128)
count_tokens_i32(const int32_t* __restrict__ tokens, const SampleRow* __restrict__ row_params,
                 int32_t* __restrict__ counts, uint32_t rows, uint32_t vocab) {
  const uint32_t r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  const int32_t slot = row_params[r].slot, tok = tokens[r];
  if (slot < 0 || tok < 0 || static_cast<uint32_t>(tok) >= vocab) return;
  atomicAdd(counts + static_cast<size_t>(slot) * vocab + tok, 1);
}
