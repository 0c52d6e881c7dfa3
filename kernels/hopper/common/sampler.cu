// The GPU sampler: penalties, then filtered sampling with the penalty-count update, the
// logprobs and a captured step's host copy of the ids in its finishing blocks: two launches
// (grammar masks add theirs). Everything a step varies lives in device buffers (SampleRow per
// batch row, per-slot counts and prompt masks), so the launches can be captured in the decode
// graph.
//
// Semantics (the numpy reference atlas.runtime.reference.sampler is the specification):
// * penalties, for rows with slot >= 0: repetition p over prompt + generated tokens
//   (logit > 0 ? logit / p : logit * p), then presence/frequency over generated tokens
//   (logit -= presence * (count > 0) + frequency * count), then the slot's additive
//   logit biases (OpenAI's logit_bias strictly between -100 and 100): logit += bias.
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
//   logits (4 passes of 8 bits) instead of a sort.
//
// How sample_f32 is fast: a row is split into chunks of kChunk logits, one block each. Every
// block publishes its chunk's argmax; a sampling (non-greedy) block also publishes its chunk's
// candidates: every token whose key is >= a cutoff chosen so that at most kCand qualify
// (two radix passes over the chunk, in registers). The last block of the row to arrive
// (arrive_last) finishes alone. Let H be the largest cutoff: every token with key >= H is a
// candidate, so any threshold search whose answer is >= H is exact over the candidates alone,
// and once the kept floor is >= H the draw is too. Only when an answer falls below H (a
// huge top_k, a flat nucleus, no filter at all) does the finisher read the whole row, and
// then only for the step that needs it, with batched loads, skipping every chunk whose
// published maximum already rules all its tokens out (no mass, below the floor, or unable
// to beat the row max's Gumbel score): on peaked real logits that is most of the row.
// The result is a pure function of the row: candidate order (set by block arrival and smem
// atomics) never matters, since every consumer is an integer sum or a total-order argmax.
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
  uint32_t num_bias;  // logit biases of the slot (bias_ids / bias_vals row `slot`)
};
static_assert(sizeof(SampleRow) == 48, "SampleRow must match SAMPLE_ROW");

constexpr int kThreads = 512;                      // sample_f32 block size
constexpr int kVec = 2;                            // float4 loads per thread per chunk
constexpr uint32_t kChunk = 4u * kVec * kThreads;  // 4096 logits per block
constexpr uint32_t kCand = 64;                     // candidates a chunk may publish
constexpr uint32_t kMaxChunks = 128;               // vocab <= 524288
constexpr uint32_t kPool = 4096;                   // candidates of a row, gathered in smem
constexpr int kBins = 256;
constexpr float kMassScale = 2147483648.f;  // 2^31: exp(z) <= 1 maps into 32 bits
// Gumbel noise -log(-log(u)) with u in [2^-24, 1 - 2^-24] lies in [-2.82, 16.64]; a token
// with z + kGumbelSpan below the best score so far cannot win.
constexpr float kGumbelSpan = 19.5f;

// One chunk's published state (mirrored by atlas.runtime.ops.sampling.SAMPLE_CHUNK_BYTES).
struct ChunkScratch {
  float value;      // chunk argmax
  int32_t index;
  uint32_t cutoff;  // every non-NaN token of the chunk with key >= cutoff is a candidate
  uint32_t count;   // candidates published
  uint32_t key[kCand];
  int32_t token[kCand];
};
static_assert(sizeof(ChunkScratch) == 528, "ChunkScratch must match SAMPLE_CHUNK_BYTES");

// Order-preserving map of an f32 to u32 (larger float -> larger key; -0 < +0). Only a NaN
// maps to 0 (0xffffffff), and every NaN is sent there: key 0 means "not a candidate".
__device__ __forceinline__ uint32_t order_key(float x) {
  const uint32_t u = __float_as_uint(x);
  if (isnan(x)) return 0u;
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

__device__ __forceinline__ float key_value(uint32_t key) {
  return __uint_as_float((key & 0x80000000u) ? (key & 0x7fffffffu) : ~key);
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

// hist[bin] += w, for the lanes of the warp with bin < kBins (all lanes call it together).
// Lanes hitting the same bin add once through their group leader: logits cluster in a few
// bins, and unaggregated shared atomics there serialize.
__device__ __forceinline__ void hist_add(unsigned long long* hist, uint32_t bin, uint32_t w) {
  const unsigned active = __ballot_sync(0xffffffffu, bin < kBins);
  if (bin < kBins) {
    const unsigned peers = __match_any_sync(active, bin);
    const uint32_t lo = __reduce_add_sync(peers, w & 0xffffu);  // 32 * 2^31 overflows u32
    const uint32_t hi = __reduce_add_sync(peers, w >> 16);
    if ((threadIdx.x & 31) == __ffs(peers) - 1)
      atomicAdd(&hist[bin], (static_cast<unsigned long long>(hi) << 16) + lo);
  }
}

struct BinHit {
  int bin;                   // < 0: the whole histogram weighs less than the target
  unsigned long long above;  // weight of the bins above `bin`
};

// Warp 0 only: the largest bin b with weight(bins >= b) >= target, walking from bin 255 down.
// Lane l owns bins 255-8l .. 248-8l, so a prefix sum over lanes walks the histogram.
__device__ __forceinline__ BinHit find_bin(const unsigned long long* hist,
                                           unsigned long long target) {
  const int lane = threadIdx.x & 31;
  unsigned long long own = 0;
#pragma unroll
  for (int j = 0; j < 8; ++j) own += hist[kBins - 1 - 8 * lane - j];
  unsigned long long incl = own;
#pragma unroll
  for (int off = 1; off < 32; off <<= 1) {
    const unsigned long long o = __shfl_up_sync(0xffffffffu, incl, off);
    if (lane >= off) incl += o;
  }
  const unsigned reached = __ballot_sync(0xffffffffu, incl >= target);
  if (reached == 0) return {-1, 0ull};
  const int src = __ffs(reached) - 1;
  int bin = kBins - 1 - 8 * lane;
  unsigned long long acc = incl - own;
  if (lane == src) {
    for (int j = 0; j < 8; ++j, --bin) {
      if (acc + hist[bin] >= target) break;
      acc += hist[bin];
    }
  }
  return {__shfl_sync(0xffffffffu, bin, src), __shfl_sync(0xffffffffu, acc, src)};
}

// ---- key sources the finisher searches: the whole row, or the published candidates ------

// Every token of the row. visit(f) calls f(key, token) for each, all lanes together. Chunks
// marked in `skip` are not read: their tokens are passed as NaN (key 0), which every consumer
// ignores. The finisher marks the chunks whose maximum already rules all of them out.
struct RowKeys {
  const float* row;
  uint32_t n;
  const uint8_t* skip;  // shared: per chunk

  template <class F>
  __device__ __forceinline__ void visit(F&& f) const {
    constexpr int kU = 4;  // batched loads in flight per thread
    const uint32_t t = threadIdx.x, step = blockDim.x;
    if ((n & 3u) == 0 && (reinterpret_cast<uintptr_t>(row) & 15u) == 0) {
      const float4* row4 = reinterpret_cast<const float4*>(row);
      const uint32_t n4 = n / 4;
      for (uint32_t q0 = 0; q0 < n4; q0 += kU * step) {
        float4 v[kU];
#pragma unroll
        for (int u = 0; u < kU; ++u) {
          const uint32_t q = q0 + u * step + t;
          v[u] = q < n4 && !skip[4 * q / kChunk]
                     ? row4[q]
                     : make_float4(atlas::absent(), atlas::absent(), atlas::absent(),
                                   atlas::absent());
        }
#pragma unroll
        for (int u = 0; u < kU; ++u) {
          const uint32_t i = 4 * (q0 + u * step + t);
          f(order_key(v[u].x), i);
          f(order_key(v[u].y), i + 1);
          f(order_key(v[u].z), i + 2);
          f(order_key(v[u].w), i + 3);
        }
      }
    } else {
      for (uint32_t i0 = 0; i0 < n; i0 += 4 * kU * step) {
        float v[4 * kU];
#pragma unroll
        for (int u = 0; u < 4 * kU; ++u) {
          const uint32_t i = i0 + u * step + t;
          v[u] = i < n && !skip[i / kChunk] ? row[i] : atlas::absent();
        }
#pragma unroll
        for (int u = 0; u < 4 * kU; ++u) f(order_key(v[u]), i0 + u * step + t);
      }
    }
  }
};

// The candidates of the row, gathered from every chunk into shared memory.
struct CandKeys {
  const uint32_t* key;
  const uint32_t* token;
  uint32_t n;

  template <class F>
  __device__ __forceinline__ void visit(F&& f) const {
    for (uint32_t s0 = 0; s0 < n; s0 += blockDim.x) {
      const uint32_t s = s0 + threadIdx.x;
      f(s < n ? key[s] : 0u, s < n ? token[s] : 0u);
    }
  }
};

struct Scratch {
  unsigned long long hist[kBins];
  unsigned long long sum[kThreads / 32];
  BinHit hit;
};

// Radix select: the largest key t >= floor with weight(keys >= t) >= need, counting only
// keys >= floor (key 0, NaN, never counts); weight is 1 per entry, or its mass when `by_mass`.
// Returns false when the total weight falls short of `need` (need >= 1).
template <class Src>
__device__ bool radix_select(const Src& src, uint32_t floor, bool by_mass, uint64_t need,
                             float max_logit, float temperature, Scratch& sh, uint32_t& out) {
  floor = max(floor, 1u);
  uint32_t prefix = 0, mask = 0;
  for (int shift = 24; shift >= 0; shift -= 8) {
    for (int b = threadIdx.x; b < kBins; b += blockDim.x) sh.hist[b] = 0ull;
    __syncthreads();
    src.visit([&](uint32_t key, uint32_t) {
      uint32_t bin = kBins, w = 0;
      if (key >= floor && (key & mask) == prefix) {
        w = by_mass ? mass_of(key_value(key), max_logit, temperature) : 1u;
        if (w != 0) bin = (key >> shift) & (kBins - 1);
      }
      hist_add(sh.hist, bin, w);
    });
    __syncthreads();
    if (threadIdx.x < 32) {
      const BinHit hit = find_bin(sh.hist, need);
      if (threadIdx.x == 0) sh.hit = hit;
    }
    __syncthreads();
    const BinHit hit = sh.hit;
    __syncthreads();  // sh.hit and sh.hist are rewritten by the next pass
    if (hit.bin < 0) return false;
    prefix |= static_cast<uint32_t>(hit.bin) << shift;
    mask |= static_cast<uint32_t>(kBins - 1) << shift;
    need -= hit.above;
  }
  out = prefix;
  return true;
}

// Total mass of the keys >= floor (every thread gets it).
template <class Src>
__device__ uint64_t mass_total(const Src& src, uint32_t floor, float max_logit,
                               float temperature, Scratch& sh) {
  floor = max(floor, 1u);
  unsigned long long own = 0;
  src.visit([&](uint32_t key, uint32_t) {
    if (key >= floor) own += mass_of(key_value(key), max_logit, temperature);
  });
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) own += __shfl_xor_sync(0xffffffffu, own, off);
  __syncthreads();
  if ((threadIdx.x & 31) == 0) sh.sum[threadIdx.x >> 5] = own;
  __syncthreads();
  unsigned long long total = 0;
  for (int w = 0; w < static_cast<int>(blockDim.x >> 5); ++w) total += sh.sum[w];
  return total;
}

// This thread's best z + gumbel over the kept keys (>= floor, z >= z_min), starting from the
// row max's score, which every filter keeps and which bounds the winner's score from below.
template <class Src>
__device__ atlas::ArgBest draw(const Src& src, uint32_t floor, float z_min, float max_logit,
                               float temperature, uint64_t base, atlas::ArgBest start) {
  floor = max(floor, 1u);
  atlas::ArgBest best = start;
  src.visit([&](uint32_t key, uint32_t token) {
    if (key < floor) return;
    const float z = (key_value(key) - max_logit) / temperature;
    if (z < z_min || z + kGumbelSpan < start.value) return;
    atlas::arg_update(best, z + gumbel(base, token), static_cast<int>(token));
  });
  return best;
}

// Phase 1 of a sampling row: publish the chunk's tokens with key >= a cutoff that at most
// `cap` of them reach (cutoff 0: the whole chunk fits). Two radix passes fix the cutoff to
// 16 bits of key (sign, exponent and 7 mantissa bits), fine enough for any real logits.
__device__ void publish_candidates(const float (&x)[4 * kVec], uint32_t begin, uint32_t cap,
                                   ChunkScratch& mine, Scratch& sh, uint32_t* s_count) {
  uint32_t keys[4 * kVec];
#pragma unroll
  for (int e = 0; e < 4 * kVec; ++e) keys[e] = order_key(x[e]);
  uint32_t cutoff = 0;
  unsigned long long target = cap + 1;  // the first 16-bit bin at which more than cap qualify
  for (int shift = 24; shift >= 16; shift -= 8) {
    for (int b = threadIdx.x; b < kBins; b += blockDim.x) sh.hist[b] = 0ull;
    __syncthreads();
#pragma unroll
    for (int e = 0; e < 4 * kVec; ++e) {
      const uint32_t k = keys[e];
      const bool in = k != 0 && (shift == 24 || (k >> 24) == (cutoff >> 24));
      hist_add(sh.hist, in ? (k >> shift) & (kBins - 1) : kBins, 1u);
    }
    __syncthreads();
    if (threadIdx.x < 32) {
      const BinHit hit = find_bin(sh.hist, target);
      if (threadIdx.x == 0) sh.hit = hit;
    }
    __syncthreads();
    const BinHit hit = sh.hit;
    __syncthreads();
    // At shift 24 a miss means at most cap valid tokens: publish them all (cutoff 0). At
    // shift 16 the target lies inside the bin found at 24, so it is always reached.
    if (hit.bin < 0) break;
    cutoff |= static_cast<uint32_t>(hit.bin) << shift;
    target -= hit.above;
    // The tokens strictly above the bin where the count first exceeds cap are at most cap.
    // (No valid key reaches 16-bit bin 0xffff: +inf is 0xff800000.)
    if (shift == 16) cutoff += 1u << 16;
  }
  if (threadIdx.x == 0) *s_count = 0;
  __syncthreads();
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int e = 0; e < 4 * kVec; ++e) {
    const bool take = keys[e] != 0 && keys[e] >= cutoff;
    const unsigned takers = __ballot_sync(0xffffffffu, take);
    uint32_t base = 0;
    if (lane == 0 && takers) base = atomicAdd(s_count, static_cast<uint32_t>(__popc(takers)));
    base = __shfl_sync(0xffffffffu, base, 0);
    if (take) {
      const uint32_t slot = base + __popc(takers & ((1u << lane) - 1u));
      mine.key[slot] = keys[e];
      mine.token[slot] = static_cast<int32_t>(atlas::chunk_index(begin, e / 4, e % 4));
    }
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    mine.cutoff = cutoff;
    mine.count = *s_count;
  }
}

// The row's drawn token: out[r]; one more use of it in its penalty slot's counts (rows with
// a slot; `counts` null: none), which the next step's penalties read (the count launch that
// followed the sampler until session 53); and, in a captured step that publishes its ids
// (`host_ids` non-null: mapped page-locked memory of 2 x pitch words), host_ids[parity[0] *
// pitch + r] (step_io.cu's publish launch until then). Thread 0 of the row's finishing block.
__device__ __forceinline__ void emit_token(uint32_t r, int32_t tok,
                                           const SampleRow* __restrict__ row_params,
                                           int32_t* __restrict__ out,
                                           int32_t* __restrict__ counts, uint32_t vocab,
                                           int32_t* __restrict__ host_ids,
                                           const int32_t* __restrict__ parity, uint32_t pitch) {
  out[r] = tok;
  // read here rather than kept from the entry's row record: held that long, it spilled
  const int32_t slot = row_params[r].slot;
  if (counts != nullptr && slot >= 0 && tok >= 0 && static_cast<uint32_t>(tok) < vocab)
    atomicAdd(counts + static_cast<size_t>(slot) * vocab + tok, 1);
  if (host_ids != nullptr) host_ids[static_cast<size_t>(parity[0]) * pitch + r] = tok;
}

// The row's best (value desc, index asc; NaNs ignored) by the whole block.
__device__ atlas::ArgBest row_best(const float* __restrict__ row, uint32_t vocab,
                                   atlas::ArgBest* arg_scratch) {
  atlas::ArgBest best = atlas::arg_none();
  for (uint32_t t = threadIdx.x; t < vocab; t += blockDim.x) {
    atlas::arg_update(best, row[t], static_cast<int>(t));
  }
  return atlas::block_argmax(best, arg_scratch);
}

// The logprobs of one row (logprobs_f32's contract below) by the whole block: tok is the row's
// token (read by thread 0), wanted >= 0 its top-n, the outputs the row's own. `top` is the
// row's best as row_best reports it: it is the max of the log-sum-exp and rank 0 of the top-n,
// so a caller that already reduced the row (sample_f32's finisher) saves two passes over it.
__device__ void row_logprobs(const float* __restrict__ row, atlas::ArgBest top, int32_t tok,
                             int32_t wanted, uint32_t vocab, uint32_t max_top,
                             float* __restrict__ out_logprob, int32_t* __restrict__ top_ids,
                             float* __restrict__ top_logprobs, atlas::ArgBest* arg_scratch,
                             float* sum_scratch) {
  const float m = top.value;
  float s = 0.f;
  if (m > -INFINITY) {
    for (uint32_t t = threadIdx.x; t < vocab; t += blockDim.x) {
      const float x = row[t];
      if (!isnan(x)) s += expf(x - m);
    }
  }
  s = atlas::block_sum(s, sum_scratch);
  const float lse = m > -INFINITY ? m + logf(s) : -INFINITY;
  if (threadIdx.x == 0) {
    const bool ok = tok >= 0 && static_cast<uint32_t>(tok) < vocab && !isnan(row[tok]);
    *out_logprob = !ok || lse == -INFINITY ? -INFINITY : row[tok] - lse;
  }

  const uint32_t count = min(static_cast<uint32_t>(wanted), min(max_top, vocab));
  atlas::ArgBest prev = {INFINITY, -1};
  for (uint32_t k = 0; k < count; ++k) {
    atlas::ArgBest b = top;  // rank 0: the best after {inf, -1} is the row's best
    if (k > 0) {
      b = atlas::arg_none();
      for (uint32_t t = threadIdx.x; t < vocab; t += blockDim.x) {
        const float x = row[t];
        if (x < prev.value || (x == prev.value && static_cast<int>(t) > prev.index)) {
          atlas::arg_update(b, x, static_cast<int>(t));
        }
      }
      b = atlas::block_argmax(b, arg_scratch);
    }
    if (threadIdx.x == 0) {
      const bool found = b.index != atlas::kNoIndex;
      top_ids[k] = found ? b.index : -1;
      top_logprobs[k] = found && lse > -INFINITY ? b.value - lse : -INFINITY;
    }
    prev = b;
  }
}

}  // namespace

// Launch: grid = (spans, rows) with spans <= ceil(vocab / 1024) (ops/sampling.py:
// penalty_blocks), block = 256; block x covers the 1024-token spans x, x + spans, ...: each
// thread 4 tokens of each. A decode graph runs it every step whether or not a row has a
// penalty, so a large batch keeps the grid to ~1k blocks (a row's blocks exit at once
// without one): one block per span made 9,536 blocks at 64 rows of a 151,936-token
// vocabulary, 12.2 us of block launches for nothing (H200 profile, 2026-12-01).
// Logit biases: bias_ids i32 / bias_vals f32 [slots, max_bias], the first num_bias entries
// of row `slot` (distinct ids). After its penalties each block adds the biases of the tokens
// in the spans it owns (the same spans), so a token's penalty and bias come from one block,
// in that order, and no two threads touch one logit.
extern "C" __global__ void __launch_bounds__(256)
apply_penalties_f32(float* __restrict__ logits, const SampleRow* __restrict__ row_params,
                    const int32_t* __restrict__ counts, const uint8_t* __restrict__ prompt_mask,
                    const int32_t* __restrict__ bias_ids, const float* __restrict__ bias_vals,
                    uint32_t rows, uint32_t vocab, uint32_t max_bias) {
  const uint32_t r = blockIdx.y;
  if (r >= rows) return;
  atlas::pdl_enter();
  const SampleRow p = row_params[r];
  const float rep = p.repetition > 0.f ? p.repetition : 1.f;
  const bool penalize = rep != 1.f || p.presence != 0.f || p.frequency != 0.f;
  const uint32_t num_bias = min(p.num_bias, max_bias);
  if (p.slot < 0 || (!penalize && num_bias == 0)) return;
  float* row = logits + static_cast<size_t>(r) * vocab;
  if (penalize) {
    const int32_t* cnt = counts + static_cast<size_t>(p.slot) * vocab;
    const uint8_t* seen = prompt_mask + static_cast<size_t>(p.slot) * vocab;
    for (uint32_t span = blockIdx.x * 1024u; span < vocab; span += gridDim.x * 1024u) {
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const uint32_t v = span + j * 256u + threadIdx.x;
        if (v >= vocab) break;
        const int32_t c = cnt[v];
        float x = row[v];
        if (c > 0 || seen[v]) x = x > 0.f ? x / rep : x * rep;
        x -= p.presence * (c > 0 ? 1.f : 0.f) + p.frequency * static_cast<float>(c);
        row[v] = x;
      }
    }
  }
  if (num_bias == 0) return;  // uniform over the block: the barrier below is safe
  __syncthreads();  // this block's penalized logits are visible to all its threads
  const int32_t* ids = bias_ids + static_cast<size_t>(p.slot) * max_bias;
  const float* vals = bias_vals + static_cast<size_t>(p.slot) * max_bias;
  for (uint32_t i = threadIdx.x; i < num_bias; i += blockDim.x) {
    const uint32_t v = static_cast<uint32_t>(ids[i]);
    if (v < vocab && (v / 1024u) % gridDim.x == blockIdx.x) row[v] += vals[i];
  }
}

// Launch: grid = (ceil(vocab / 4096), rows), block = 512.
// scratch: ChunkScratch [rows, ceil(vocab / 4096)]; counters: u32 [rows], zero before the
// launch and left zero after it. Each row's token goes out through emit_token: counts i32
// [slots, vocab] or null, host_ids / parity / pitch (null host_ids: no host copy); then,
// with top_n non-null, the row's logprobs as logprobs_f32 reports them for that token
// (rows with top_n[r] >= 0; out_logprob f32 [rows], top_ids / top_logprobs [rows, max_top]).
extern "C" __global__ void __launch_bounds__(kThreads, 2)
sample_f32(const float* __restrict__ logits, const SampleRow* __restrict__ row_params,
           int32_t* __restrict__ out, ChunkScratch* __restrict__ scratch,
           unsigned* __restrict__ counters, uint32_t rows, uint32_t vocab,
           int32_t* __restrict__ counts, int32_t* __restrict__ host_ids,
           const int32_t* __restrict__ parity, uint32_t pitch, const int32_t* __restrict__ top_n,
           float* __restrict__ out_logprob, int32_t* __restrict__ top_ids,
           float* __restrict__ top_logprobs, uint32_t max_top) {
  const uint32_t r = blockIdx.y, nchunks = (vocab + kChunk - 1) / kChunk;
  if (r >= rows || blockIdx.x >= nchunks || nchunks > kMaxChunks) return;
  // Each chunk's share of the pool (the pool is the finisher's shared-memory copy).
  const uint32_t cap = min(kCand, kPool / nchunks);
  __shared__ Scratch sh;
  __shared__ atlas::ArgBest arg_scratch[32];
  __shared__ float sum_scratch[32];
  __shared__ uint32_t s_key[kPool], s_token[kPool];
  __shared__ uint32_t s_offset[kMaxChunks + 1];
  __shared__ float s_chunk_max[kMaxChunks];
  __shared__ uint8_t s_skip[kMaxChunks];
  __shared__ uint32_t s_published, s_horizon;
  __shared__ int s_last;
  __shared__ atlas::ArgBest s_top;
  atlas::pdl_enter();
  const SampleRow p = row_params[r];
  const bool greedy = p.temperature <= 0.f;
  const float* row = logits + static_cast<size_t>(r) * vocab;
  ChunkScratch* chunks = scratch + static_cast<size_t>(r) * nchunks;

  // ---- phase 1, every block: this chunk's argmax and (sampling rows) candidates ----------
  const uint32_t begin = blockIdx.x * kChunk;
  float x[4 * kVec];
  atlas::load_chunk<kVec>(row, vocab, begin, x);
  const atlas::ArgBest local =
      atlas::block_argmax(atlas::thread_argmax<kVec>(x, begin), arg_scratch);
  ChunkScratch& mine = chunks[blockIdx.x];
  if (!greedy) publish_candidates(x, begin, cap, mine, sh, &s_published);
  if (threadIdx.x == 0) {
    mine.value = local.value;
    mine.index = local.index;
  }
  if (!atlas::arrive_last(counters + r, nchunks, &s_last)) return;

  // ---- phase 2, the row's last block: reduce, gather candidates, filter and draw ---------
  // The row's token out (emit_token), then its logprobs where it asks (block-uniform; the
  // ask read here, its trip under the reduction's rather than after the draw)
  const int32_t wanted = top_n != nullptr ? top_n[r] : -1;
  // The row's best from the chunks' (each its chunk's best in the same order, NaNs ignored):
  // what row_best would find, so the logprobs take it instead of a pass of their own
  atlas::ArgBest top = atlas::arg_none();
  for (uint32_t c = threadIdx.x; c < nchunks; c += blockDim.x) {
    s_chunk_max[c] = __ldcg(&chunks[c].value);
    top = atlas::arg_merge(top, {s_chunk_max[c], __ldcg(&chunks[c].index)});
  }
  top = atlas::block_argmax(top, arg_scratch);  // its barriers publish s_chunk_max
  if (threadIdx.x == 0) s_top = top;  // for the sampled rows' logprobs (the barriers below)
  const auto finish = [&](int32_t tok, atlas::ArgBest row_top) {
    if (threadIdx.x == 0)
      emit_token(r, tok, row_params, out, counts, vocab, host_ids, parity, pitch);
    if (wanted >= 0)
      row_logprobs(row, row_top, tok, wanted, vocab, max_top, out_logprob + r,
                   top_ids + static_cast<size_t>(r) * max_top,
                   top_logprobs + static_cast<size_t>(r) * max_top, arg_scratch, sum_scratch);
  };
  if (greedy || !(top.value > -INFINITY)) {  // greedy, or nothing finite
    finish(top.index == atlas::kNoIndex ? 0 : top.index, top);
    return;
  }
  if (threadIdx.x == 0) {  // at most 128 chunks: a serial prefix sum is cheapest
    uint32_t off = 0, horizon = 0;
    for (uint32_t c = 0; c < nchunks; ++c) {
      s_offset[c] = off;
      off += __ldcg(&chunks[c].count);
      horizon = max(horizon, __ldcg(&chunks[c].cutoff));
    }
    s_offset[nchunks] = off;
    s_horizon = horizon;
  }
  __syncthreads();
  for (uint32_t c = threadIdx.x >> 5; c < nchunks; c += blockDim.x >> 5) {
    const uint32_t off = s_offset[c], n = s_offset[c + 1] - off;
    for (uint32_t j = threadIdx.x & 31; j < n; j += 32) {
      s_key[off + j] = __ldcg(&chunks[c].key[j]);
      s_token[off + j] = static_cast<uint32_t>(__ldcg(&chunks[c].token[j]));
    }
  }
  __syncthreads();
  const float m = top.value, T = p.temperature;
  const uint32_t horizon = s_horizon;
  const CandKeys cands{s_key, s_token, s_offset[nchunks]};
  const RowKeys full{row, vocab, s_skip};
  // Before a whole-row pass: skip the chunks whose maximum v already rules out every token
  // (x <= v gives z(x) <= z(v): the subtraction and division round monotonically).
  auto skip_chunks = [&](auto&& dead) {
    __syncthreads();  // the previous pass may still read s_skip
    for (uint32_t c = threadIdx.x; c < nchunks; c += blockDim.x) s_skip[c] = dead(s_chunk_max[c]);
    __syncthreads();
  };
  uint32_t keep = 0;  // keys >= keep survive top-k / top-p
  uint32_t t;
  if (p.top_k > 0 && static_cast<uint32_t>(p.top_k) < vocab) {
    const uint64_t k = static_cast<uint64_t>(p.top_k);
    const bool found = radix_select(cands, 0, false, k, m, T, sh, t);
    if (found ? t >= horizon : horizon == 0) {
      keep = found ? t : 0;  // exact: or every chunk published all, and fewer than k exist
    } else {
      skip_chunks([](float) { return false; });
      keep = radix_select(full, 0, false, k, m, T, sh, t) ? t : 0;
    }
  }
  if (p.top_p < 1.f) {
    const uint32_t floor = keep;
    const auto massless = [&](float v) {
      return order_key(v) < floor || mass_of(v, m, T) == 0u;
    };
    uint64_t total;
    if (keep >= horizon) {
      total = mass_total(cands, keep, m, T, sh);
    } else {
      skip_chunks(massless);
      total = mass_total(full, keep, m, T, sh);
    }
    const double want = ceil(static_cast<double>(p.top_p) * static_cast<double>(total));
    const uint64_t need = want < 1.0 ? 1ull : static_cast<uint64_t>(want);
    if (radix_select(cands, keep, true, need, m, T, sh, t) && t >= horizon) {
      keep = t;
    } else {
      skip_chunks(massless);
      if (radix_select(full, keep, true, need, m, T, sh, t)) keep = t;
    }
  }
  const float z_min = p.min_p > 0.f ? logf(p.min_p) : -INFINITY;
  const uint64_t base = stream_base((static_cast<uint64_t>(p.seed_hi) << 32) | p.seed_lo, p.step);
  const atlas::ArgBest start = {gumbel(base, static_cast<uint32_t>(top.index)), top.index};
  atlas::ArgBest best;
  if (keep >= horizon) {
    best = draw(cands, keep, z_min, m, T, base, start);
  } else {
    skip_chunks([&](float v) {
      const float z = (v - m) / T;
      return order_key(v) < keep || z < z_min || z + kGumbelSpan < start.value;
    });
    best = draw(full, keep, z_min, m, T, base, start);
  }
  best = atlas::block_argmax(best, arg_scratch);
  finish(best.index, s_top);  // (held in registers across the draw, it spilled)
}

// Grammar masks (structured output): logits[r, t] = -inf where bit t of mask row
// mask_rows[r] of `bitmask` is 0. bitmask is u32 [mask rows, words], bit t % 32 of word
// t / 32, 1 = allowed; tokens at or past 32 * words count as disallowed; rows with
// mask_rows[r] < 0 are left alone. Launched before the penalties, so a masked token stays
// -inf through them and sample_f32 never keeps it. Block (x, r) covers tokens
// [x kBitmaskSpan, (x + 1) kBitmaskSpan) of row r, one thread per logit a pass: a warp's
// 32 threads share one mask word (a broadcast load) and write 32 contiguous logits. The
// decode graph runs it every step whether or not a row has a mask, so an unmasked row must
// cost next to nothing: one mask_rows read per block, 19 blocks a row at a 151,936-token
// vocabulary (one block per 256 logits took 76 us at 64 rows on the H200, 2026-12-01).
// Launch (ops/sampling.py): grid (ceil(vocab / kBitmaskSpan), rows), 256 threads.
constexpr uint32_t kBitmaskSpan = 8192;  // ops/sampling.py BITMASK_SPAN

extern "C" __global__ void __launch_bounds__(256)
apply_token_bitmask_f32(float* __restrict__ logits, const uint32_t* __restrict__ bitmask,
                        const int32_t* __restrict__ mask_rows, uint32_t rows, uint32_t vocab,
                        uint32_t words) {
  atlas::pdl_enter();
  const uint32_t r = blockIdx.y;
  if (r >= rows) return;
  const int32_t m = mask_rows[r];
  if (m < 0) return;
  const uint32_t end = min(vocab, (blockIdx.x + 1) * kBitmaskSpan);
  for (uint32_t t = blockIdx.x * kBitmaskSpan + threadIdx.x; t < end; t += blockDim.x) {
    const uint32_t word = t >> 5;
    const uint32_t bits = word < words ? bitmask[static_cast<size_t>(m) * words + word] : 0u;
    if (!((bits >> (t & 31u)) & 1u)) logits[static_cast<size_t>(r) * vocab + t] = -INFINITY;
  }
}

// Log-probabilities (logprobs / top_logprobs) of the tokens of rows that are not sampled
// (prompt logprobs); sample_f32's finishing blocks report its rows' the same way, from the
// logits it sampled from (penalized and grammar-masked in place; temperature is not applied,
// as here). For
// rows with top_n[r] >= 0: lse = log(sum(exp(logits))) over non-NaN logits,
// out_logprob[r] = logits[r, tokens[r]] - lse (-inf for a NaN logit or a bad id), and the
// min(top_n[r], max_top, vocab) largest logits (ties: lower index first; NaN never) go to
// top_ids[r, k] / top_logprobs[r, k]
// (max_top columns per row; -1 / -inf once no token is left). Columns past the count are
// not written. A row with no finite logit reports -inf throughout. One block per row: a
// max pass (whose best is rank 0), a sum-of-exp pass, then one block argmax per later rank,
// each taking the best token strictly after the previous rank's in the (value desc, index
// asc) total order.
constexpr int kLogprobThreads = 512;

extern "C" __global__ void __launch_bounds__(kLogprobThreads)
logprobs_f32(const float* __restrict__ logits, const int32_t* __restrict__ tokens,
             const int32_t* __restrict__ top_n, float* __restrict__ out_logprob,
             int32_t* __restrict__ top_ids, float* __restrict__ top_logprobs, uint32_t rows,
             uint32_t vocab, uint32_t max_top) {
  __shared__ atlas::ArgBest arg_scratch[32];
  __shared__ float sum_scratch[32];
  atlas::pdl_enter();
  const uint32_t r = blockIdx.x;
  if (r >= rows) return;
  const int32_t wanted = top_n[r];
  if (wanted < 0) return;
  const float* row = logits + static_cast<size_t>(r) * vocab;
  row_logprobs(row, row_best(row, vocab, arg_scratch), tokens[r], wanted, vocab, max_top,
               out_logprob + r, top_ids + static_cast<size_t>(r) * max_top,
               top_logprobs + static_cast<size_t>(r) * max_top, arg_scratch, sum_scratch);
}
