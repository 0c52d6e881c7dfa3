// The split-K decode attention template (attention.cu says what the kernels compute):
// attention.cu instantiates the engine's entry points, attention_twins.cu the twins it does not
// launch by default (phase-traced: TracePhase), a module of their own.
#pragma once

#include <type_traits>

#include "atlas_common.cuh"
#include "bf16_vec.cuh"
#include "decode_merge.cuh"
#include "phase_trace.cuh"
#include "rope_core.cuh"

namespace coop = cooperative_groups;

namespace {

constexpr int kThreads = 128;  // ops/attention.py ATTN_THREADS
constexpr int kWarps = kThreads / 32;
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

// ---- decode -------------------------------------------------------------------------------
constexpr int kDecodeHeadsPerPass = 4;  // q heads whose q/o live in registers at once
constexpr int kDecodeMaxDim = 256;
constexpr int kDecodeUnroll = 4;        // keys per key group in flight per iteration
// The shortest split (ops/attention.py DECODE_MIN_KEYS_PER_SPLIT): one iteration of the
// D = 128 loop (8 key groups x kDecodeUnroll), so a short context is one K/V round trip per
// block instead of num_splits blocks of a few keys each and num_splits partials to merge.
constexpr int kMinKeysPerSplit = 32;

// The clustered kernels (decode_attn_cluster_bf16, decode_attn_rope_cluster_bf16; ops/
// attention.py launches them for grids of kClusterSplits splits or more, the latency-bound
// small batches): kClusterSplits consecutive splits of one (sequence, head slice) form a
// thread-block cluster that merges its blocks' partials through distributed shared memory
// (decode_cluster_merge), so a context within one cluster's splits writes no partial to
// global memory and takes no ticket. Their shortest split is kClusterMinKeys keys (two load
// rounds at D = 128), so one cluster covers 512 keys; a longer context's clusters each write
// one partial and the last to finish merges those (the ticket path with clusters for splits).
constexpr int kClusterSplits = 8;    // ops/attention.py DECODE_CLUSTER_SPLITS (portable size)
constexpr int kClusterMinKeys = 64;  // ops/attention.py DECODE_CLUSTER_MIN_KEYS

// Keys per split for a live kv_len: ceil(kv_len / num_splits), at least min_keys.
// Depends on (kv_len, num_splits) only, so a sequence's result does not depend on its batch.
__device__ __forceinline__ int decode_chunk(int kv_len, int num_splits, int min_keys) {
  return max((kv_len + num_splits - 1) / num_splits, min_keys);
}

// Splits that hold keys: ceil(kv_len / chunk) (<= num_splits); the rest write nothing.
__device__ __forceinline__ int decode_active_splits(int kv_len, int num_splits,
                                                    int min_keys = kMinKeysPerSplit) {
  const int chunk = decode_chunk(kv_len, num_splits, min_keys);
  return (kv_len + chunk - 1) / chunk;
}

// The q heads a decode block serves: a kv head's group is cut into slices of up to
// kDecodeHeadsPerPass heads, one slice per block (grid y = hkv x slices), so a group of 8 or
// 16 heads runs as 2 or 4 blocks side by side (each reading the split's K/V; the second read
// mostly hits L2) instead of serial passes of one block.
// Also the block's split, and its slice's slot on the grid (hkv x slices of them: the split
// ticket's counter). kSplitMajor false: the split is blockIdx.x and the slot blockIdx.y, as
// launched. kSplitMajor (the clustered kernels' A/B, ATLAS_DECODE_ATTN_SPLIT_MAJOR=1): cluster
// L of the grid (x fastest, the order the GPU starts clusters in) takes slot L % gridDim.y and
// the splits of cluster L / gridDim.y, so every slot's first cluster (all the work up to 512
// keys) starts among the first gridDim.y clusters, not behind other slots' clusters of idle
// splits: a batch-1 grid is 320-512 blocks, more than the 264 two-blocks-per-SM slots.
struct HeadSlice {
  int kvh;    // the kv head
  int index;  // this slice within the kv head's group (0: the one that appends new K/V)
  int h0;     // first q head (global index)
  int count;  // q heads, 1..kDecodeHeadsPerPass
  int slot;   // kvh x slices + index: 0..gridDim.y - 1
  int split;  // 0..gridDim.x - 1

  // The block's cluster's place in the grid's start order (kSplitMajor only).
  __device__ __forceinline__ static int cluster_order() {
    return static_cast<int>(blockIdx.y * (gridDim.x / kClusterSplits) +
                            blockIdx.x / kClusterSplits);
  }

  template <bool kSplitMajor>
  __device__ __forceinline__ static int block_split() {
    if constexpr (kSplitMajor)
      return cluster_order() / static_cast<int>(gridDim.y) * kClusterSplits +
             static_cast<int>(blockIdx.x % kClusterSplits);
    return static_cast<int>(blockIdx.x);
  }

  template <bool kSplitMajor>
  __device__ __forceinline__ static HeadSlice of_block(int hq, int hkv) {
    const int group = hq / hkv;
    const int slices = (group + kDecodeHeadsPerPass - 1) / kDecodeHeadsPerPass;
    const int slot = kSplitMajor ? cluster_order() % static_cast<int>(gridDim.y)
                                 : static_cast<int>(blockIdx.y);
    const int split = block_split<kSplitMajor>();
    const int kvh = slot / slices, index = slot % slices;
    const int first = index * kDecodeHeadsPerPass;
    return {kvh, index, kvh * group + first, min(kDecodeHeadsPerPass, group - first), slot,
            split};
  }
};

using atlas::DecodeScratch;  // per-warp partials, merged by the whole block (decode_merge.cuh)
static_assert(kWarps == atlas::kMergeWarps && kDecodeHeadsPerPass == atlas::kMergeHeads &&
              kDecodeMaxDim == atlas::kMergeMaxDim, "DecodeScratch's shape");

// One iteration's K and V rows: kDecodeUnroll keys of this lane's key group, 16 bytes each.
struct DecodeKv {
  uint4 k[kDecodeUnroll], v[kDecodeUnroll];
};

// The cache block ids of one iteration's keys (the block-table entries).
struct DecodeBlocks {
  int id[kDecodeUnroll];
};

// Key groups of a decode block (D / 8 lanes per key) and this thread's group.
template <int D>
__host__ __device__ constexpr int decode_key_groups() { return kWarps * (32 / (D / 8)); }

template <int D>
__device__ __forceinline__ int decode_key_group() {
  return (threadIdx.x >> 5) * (32 / (D / 8)) + (threadIdx.x & 31) / (D / 8);
}

// Key p's cache block index (p / block_size) and offset in it (p % block_size), p >= 0. A
// runtime division is ~20 dependent instructions, and a round does 12 of them (the table
// entries' indices, the K/V rows' and the prefetch's offsets), ~40% of a batch-64 round's
// instructions (gpu16: ~1.8 us a round, instruction-latency-bound); the engine's block
// sizes are powers of two (kv_cache DEFAULT_BLOCK_SIZE), which take a shift and a mask
// (a launch-uniform branch), others the division.
__device__ __forceinline__ int key_block(int p, int block_size) {
  return (block_size & (block_size - 1)) == 0 ? p >> (__ffs(block_size) - 1) : p / block_size;
}

__device__ __forceinline__ int key_offset(int p, int block_size) {
  return (block_size & (block_size - 1)) == 0 ? p & (block_size - 1) : p % block_size;
}

// Block-table entries of this lane's keys base + u * key_groups + grp (u < kDecodeUnroll);
// keys at or past `limit` get 0 (never dereferenced: the K/V loads stop at the split's end).
// The table, kv_lens and the K/V rows are read with ld.global.cg (coherent, L2 only): ptxas
// keeps those where they are, so decode_attn_rope_bf16 can issue them before its PDL wait
// (it sinks every ld.global.nc below griddepcontrol.wait), and no stale L1 line is ever hit.
template <int D>
__device__ __forceinline__ DecodeBlocks lookup_blocks(const int* __restrict__ table, int base,
                                                      int limit, int grp, int block_size) {
  DecodeBlocks blocks;
#pragma unroll
  for (int u = 0; u < kDecodeUnroll; ++u) {
    const int p = base + u * decode_key_groups<D>() + grp;
    blocks.id[u] = p < limit ? __ldcg(table + key_block(p, block_size)) : 0;
  }
  return blocks;
}

// Issue the K and V loads of the same keys below end.
template <int D>
__device__ __forceinline__ DecodeKv load_kv_rows(
    const __nv_bfloat16* __restrict__ k_cache, const __nv_bfloat16* __restrict__ v_cache,
    const DecodeBlocks& blocks, int base, int end, int grp, int sub, int hkv, int kvh,
    int block_size) {
  DecodeKv kv;
#pragma unroll
  for (int u = 0; u < kDecodeUnroll; ++u) {
    const int p = base + u * decode_key_groups<D>() + grp;
    const bool ok = p < end;
    const size_t row = (static_cast<size_t>(blocks.id[u]) * hkv + kvh) * block_size +
                       key_offset(p, block_size);
    const size_t off = ok ? row * D + sub * 8 : 0;
    kv.k[u] = ok ? __ldcg(reinterpret_cast<const uint4*>(k_cache + off)) : make_uint4(0u, 0u, 0u, 0u);
    kv.v[u] = ok ? __ldcg(reinterpret_cast<const uint4*>(v_cache + off)) : make_uint4(0u, 0u, 0u, 0u);
  }
  return kv;
}

// Request the same rows into L2 without waiting for them (prefetch.global.L2, which ptxas
// leaves above griddepcontrol.wait): a split's later rounds, before the PDL wait, so the
// loop's loads of them after it are L2 hits instead of DRAM trips.
template <int D>
__device__ __forceinline__ void prefetch_kv_rows(
    const __nv_bfloat16* k_cache, const __nv_bfloat16* v_cache, const DecodeBlocks& blocks,
    int base, int end, int grp, int sub, int hkv, int kvh, int block_size) {
#pragma unroll
  for (int u = 0; u < kDecodeUnroll; ++u) {
    const int p = base + u * decode_key_groups<D>() + grp;
    if (p >= end) continue;
    const size_t row = (static_cast<size_t>(blocks.id[u]) * hkv + kvh) * block_size +
                       key_offset(p, block_size);
    asm volatile("prefetch.global.L2 [%0];" :: "l"(k_cache + row * D + sub * 8));
    asm volatile("prefetch.global.L2 [%0];" :: "l"(v_cache + row * D + sub * 8));
  }
}

// The block-table entries of the rounds after the one being computed: round[j] addresses
// round i + 1 + j while round i computes. kAhead = 1: the next round's only, whose K/V the
// loop loads into registers (one round trip in flight a block: 16 KB at D = 128, 32 KB an SM
// at 2 blocks, below the ~40 KB the H200 needs at full bandwidth, so a long split ran at
// ~46% of copy at batch 64). kAhead = kDecodeAheadRounds: also rounds i + 2 .. i + kAhead,
// and round i + kAhead's K/V requested into L2 (prefetch.global.L2: no registers), so the
// register loads of a long split hit L2 and 3 rounds (~48 KB a block) are in flight.
constexpr int kDecodeAheadRounds = 3;  // the default kernels' kAhead (the A/B: *_ahead1_bf16)

template <int kAhead>
struct TableAhead {
  DecodeBlocks round[kAhead];

  // Look up rounds begin + kStep .. begin + kAhead kStep.
  template <int D>
  __device__ __forceinline__ void lookup(const int* table, int begin, int end, int grp,
                                         int block_size) {
    constexpr int kStep = decode_key_groups<D>() * kDecodeUnroll;
#pragma unroll
    for (int j = 0; j < kAhead; ++j)
      round[j] = lookup_blocks<D>(table, begin + (j + 1) * kStep, end, grp, block_size);
  }

  // At round `base`: drop round base + kStep's entries (just used) and look up round
  // base + (kAhead + 1) kStep's.
  template <int D>
  __device__ __forceinline__ void advance(const int* table, int base, int end, int grp,
                                          int block_size) {
    constexpr int kStep = decode_key_groups<D>() * kDecodeUnroll;
#pragma unroll
    for (int j = 0; j + 1 < kAhead; ++j) round[j] = round[j + 1];
    round[kAhead - 1] = lookup_blocks<D>(table, base + (kAhead + 1) * kStep, end, grp,
                                         block_size);
  }
};

// ---- where a decode pass gets q, and the step's new key -----------------------------------
// CachedQ (decode_attn_bf16): q [seqs, hq, D] and the cache row of every key, this step's
// included, were written by the rope kernel before this one, so the kernel waits first.
struct CachedQ {
  const __nv_bfloat16* q;
  static constexpr bool kNewKey = false;
  static constexpr bool kReadsBeforeWait = false;
  __device__ __forceinline__ void early() {}
  __device__ __forceinline__ void bind(int, int, int, const int*, int) {}
  __device__ __forceinline__ void stage_constants() const {}
  template <int D>
  __device__ __forceinline__ void prepare(const HeadSlice&) const {}
  __device__ __forceinline__ uint4 load_q(int b, int h, int hq, int d, int sub,
                                          const HeadSlice&) const {
    return __ldg(reinterpret_cast<const uint4*>(q + (static_cast<size_t>(b) * hq + h) * d) + sub);
  }
};

// The most keys of one sequence a rope-fused launch appends (ops/attention.py
// DECODE_ROPE_MAX_STEP_KEYS): its row's own and those of up to 7 rows before it (a
// verification step of up to 7 drafts).
constexpr int kMaxStepKeys = 8;

// decode_attn_rope_bf16's shared memory: the slice's q rows, the keys it substitutes (k and
// v of key kv_len - 1 - j at j), and what the block reads before its PDL wait for the norm
// and rotation (the position's cos/sin row, the q and k norm weights)
struct RopeStage {
  __nv_bfloat16 q[kDecodeHeadsPerPass * kDecodeMaxDim];
  __nv_bfloat16 k[kMaxStepKeys * kDecodeMaxDim], v[kMaxStepKeys * kDecodeMaxDim];
  float cos_sin[kDecodeMaxDim];
  __nv_bfloat16 q_norm_w[kDecodeMaxDim], k_norm_w[kDecodeMaxDim];
};

// RopedQ (decode_attn_rope_bf16): the block computes what qk_norm_rope_kv_bf16 would have
// written (rope_core.cuh, the same bits): its slice's q heads from the qkv row into shared
// memory, and in the split that holds the step's own key (kv_len - 1, the last active
// split) also k and v, which it substitutes for that key's cache row (and, in the group's
// first slice, appends to the cache), so no block depends on another block's cache write.
// A padding row (slot < 0) writes no cache row and, like the unfused kernels, attends over
// the cache as it is. The same holds for the keys earlier rows of the launch append to this
// row's history (a verification step: the K + 1 rows of one sequence consecutive, in
// position order): where row b - j (j < kMaxStepKeys) writes the cache row of this row's key
// kv_len - 1 - j (its slot is that key's), the block computes that key from row b - j's
// qkv row too (rotated at position kv_len - 1 - j) and substitutes it; row b - j's own
// blocks append it. Row b then computes bit for bit what a plain decode step at its
// position computes over the cache those steps leave.
//
// PDL (kReadsBeforeWait): before griddepcontrol.wait the block reads kv_len, the row's
// position and slot, its block-table entries, its first round of K/V rows (and requests the
// rest of its shortest split's rounds into L2), the cos/sin row and the norm weights
// (stage_constants): everything but the qkv rows. Those are no weights, but the only kernel
// that may still be running then is the one launched just before this (every kernel waits
// before it lets its dependents start), and the model launches this right after the
// layer's qkv projection (model.py _attention_after_qkv: decode and verification steps;
// prefill, mixed and quantized-cache steps take the unfused kernels), which writes only the
// qkv rows. The step inputs come from copies ahead of the step, cos_sin from the load, and
// every cached row this reads was written by an earlier step's launch of this layer, except
// the keys this launch appends, which the block substitutes from the qkv rows (a padding
// row writes none, so its cached row is as stable as the rest). So the chain kv_len ->
// table -> K/V rows overlaps the projection, and only the qkv rows (L2 hits) follow the
// wait. A caller launching this right after a kernel that writes any of those (two launches
// of consecutive positions back to back, say) must put another launch or a synchronization
// between them.
// Nothing is written before the wait. kEarly false (decode_attn_rope_wait_bf16, the A/B of
// all this: ops/routes ATLAS_DECODE_ATTN_LATENCY=0): the entry waits first, as every other.
template <bool kEarly>
struct RopedQ {
  const __nv_bfloat16* qkv;  // [seqs, (hq + 2 hkv) D]
  __nv_bfloat16* k_cache;
  __nv_bfloat16* v_cache;
  const __nv_bfloat16* q_norm_w;  // null: no q/k norm
  const __nv_bfloat16* k_norm_w;
  const float* cos_sin;
  const int* positions;
  const int* slots;
  RopeStage* stage;
  int hq, hkv, d, block_size;
  float eps;
  unsigned subs = 0;  // bit j: this split substitutes key last - j
  int last = -1;      // kv_len - 1
  int position = 0, slot = -1;  // the row's (early)
  static constexpr bool kNewKey = true;
  static constexpr bool kReadsBeforeWait = kEarly;

  __device__ __forceinline__ void early() {
    position = __ldcg(positions + blockIdx.z);
    slot = __ldcg(slots + blockIdx.z);
  }

  // The position's cos/sin row (d floats: full rotation) and the q and k norm weights into
  // shared memory, for every thread's use after the barrier this ends with.
  __device__ __forceinline__ void stage_constants() const {
    const float4* cs = reinterpret_cast<const float4*>(cos_sin + static_cast<size_t>(position) * d);
    for (int c = threadIdx.x; c < d / 4; c += kThreads)
      reinterpret_cast<float4*>(stage->cos_sin)[c] = __ldcg(cs + c);
    if (q_norm_w != nullptr) {
      for (int c = threadIdx.x; c < d / 8; c += kThreads) {
        reinterpret_cast<uint4*>(stage->q_norm_w)[c] = __ldcg(reinterpret_cast<const uint4*>(q_norm_w) + c);
        reinterpret_cast<uint4*>(stage->k_norm_w)[c] = __ldcg(reinterpret_cast<const uint4*>(k_norm_w) + c);
      }
    }
    __syncthreads();
  }

  // Which of the split's keys [begin, end) this launch appends: the row's own (unless a
  // padding row) and key last - j where row b - j's slot is that key's cache row.
  __device__ __forceinline__ void bind(int kv_len, int begin, int end, const int* table,
                                       int block_size_) {
    const int b = static_cast<int>(blockIdx.z);
    last = kv_len - 1;
    subs = slot >= 0 && last >= begin && last < end ? 1u : 0u;
#pragma unroll
    for (int j = 1; j < kMaxStepKeys; ++j) {
      const int p = last - j;
      if (j > b || p < begin || p >= end) continue;
      const int s = __ldcg(slots + b - j);
      const int at = __ldcg(table + key_block(p, block_size_)) * block_size_ +
                     key_offset(p, block_size_);
      if (s >= 0 && s == at) subs |= 1u << j;
    }
  }

  // Key j's bit index among the set bits of subs: the n-th set bit.
  __device__ __forceinline__ int nth_key(int n) const {
    unsigned rest = subs;
    for (; n > 0; --n) rest &= rest - 1;
    return __ffs(rest) - 1;
  }

  // 16-byte chunk i of the raw qkv row segments prepare works on, and where it goes: the
  // slice's q heads (segments r < group, into stage->q), then k and v of each key the split
  // substitutes (into stage->k / stage->v). False past the last chunk.
  template <int D>
  __device__ __forceinline__ bool segment_chunk(int i, int total, const HeadSlice& hs,
                                                const uint4*& src, uint4*& dst) const {
    if (i >= total) return false;
    constexpr int chunks = D / 8;
    const int r = i / chunks, group = hs.count;
    const size_t pitch = static_cast<size_t>(hq + 2 * hkv) * D;
    const __nv_bfloat16* row = qkv + static_cast<size_t>(blockIdx.z) * pitch;
    const __nv_bfloat16* from;
    __nv_bfloat16* to;
    if (r < group) {
      from = row + static_cast<size_t>(hs.h0 + r) * D;
      to = stage->q + r * D;
    } else {
      const int j = nth_key((r - group) >> 1), is_v = (r - group) & 1;
      from = row - j * pitch + static_cast<size_t>(hq + is_v * hkv + hs.kvh) * D;  // row b - j
      to = (is_v ? stage->v : stage->k) + j * D;
    }
    src = reinterpret_cast<const uint4*>(from) + i % chunks;
    dst = reinterpret_cast<uint4*>(to) + i % chunks;
    return true;
  }

  // The slice's q heads and k of each key the split substitutes, normed and rotated in
  // place in shared memory (v as it is), after one round trip that copies every segment
  // (all loads of a thread in flight before its first store); then the append of the row's
  // own key (first slice only). Every thread of the block calls it once, before its first q
  // load.
  template <int D>
  __device__ __forceinline__ void prepare(const HeadSlice& hs) const {
    constexpr int kLoads = (kDecodeHeadsPerPass + 2 * kMaxStepKeys) * (kDecodeMaxDim / 8) /
                           kThreads;  // 16-byte chunks per thread, at most
    const int kvh = hs.kvh, group = hs.count;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const bool normed = q_norm_w != nullptr;
    const int keys = __popc(subs), total = (group + 2 * keys) * (D / 8);
    uint4 raw[kLoads];
    const uint4* src;
    uint4* dst;
#pragma unroll
    for (int u = 0; u < kLoads; ++u)
      if (segment_chunk<D>(threadIdx.x + u * kThreads, total, hs, src, dst)) raw[u] = __ldcg(src);
#pragma unroll
    for (int u = 0; u < kLoads; ++u)
      if (segment_chunk<D>(threadIdx.x + u * kThreads, total, hs, src, dst)) *dst = raw[u];
    __syncthreads();
    for (int it = warp; it < group + keys; it += kWarps) {  // warp-uniform
      if (it < group) {
        const auto w = atlas::rope::load_norm_w<false>(stage->q_norm_w, normed, d, d, lane);
        __nv_bfloat16* x = stage->q + it * d;
        atlas::rope::norm_rope_row<false>(x, x, w, normed, false, stage->cos_sin, d, d, eps,
                                          lane);
        continue;
      }
      const int j = nth_key(it - group);
      // key last - j rotates at its own position (the row's own: the staged row)
      const float* cosv = j == 0 ? stage->cos_sin : cos_sin + static_cast<size_t>(last - j) * d;
      const auto w = atlas::rope::load_norm_w<false>(stage->k_norm_w, normed, d, d, lane);
      __nv_bfloat16* x = stage->k + j * d;
      atlas::rope::norm_rope_row<false>(x, x, w, normed, false, cosv, d, d, eps, lane);
    }
    __syncthreads();
    if ((subs & 1u) && hs.index == 0) {
      const size_t at = ((static_cast<size_t>(slot / block_size) * hkv + kvh) * block_size +
                         slot % block_size) * d;
      for (int c = threadIdx.x; c < d / 8; c += kThreads) {
        reinterpret_cast<uint4*>(k_cache + at)[c] = reinterpret_cast<const uint4*>(stage->k)[c];
        reinterpret_cast<uint4*>(v_cache + at)[c] = reinterpret_cast<const uint4*>(stage->v)[c];
      }
    }
  }

  __device__ __forceinline__ uint4 load_q(int, int h, int, int, int sub,
                                          const HeadSlice& hs) const {
    return reinterpret_cast<const uint4*>(stage->q + (h - hs.h0) * d)[sub];
  }
  // Key p's 16 bytes at lane chunk `sub`: from shared memory where this launch appends it.
  __device__ __forceinline__ void substitute(int p, int sub, uint4& k, uint4& v) const {
    const int j = last - p;
    if (j >= 0 && j < kMaxStepKeys && ((subs >> j) & 1u)) {
      k = reinterpret_cast<const uint4*>(stage->k + j * d)[sub];
      v = reinterpret_cast<const uint4*>(stage->v + j * d)[sub];
    }
  }
};

// The rounds of the clustered kernels' shortest split (kClusterMinKeys keys) a push-merge
// kernel loads into registers before its PDL wait (decode_attn: all of them at D <= 128, so
// after the wait a split of that length computes from registers with no memory trip; at
// D = 256 its 4 rounds would need 128 registers of K/V, so it keeps the loop).
template <int D>
__host__ __device__ constexpr int decode_whole_rounds() {
  return kClusterMinKeys / (decode_key_groups<D>() * kDecodeUnroll) <= 2
             ? kClusterMinKeys / (decode_key_groups<D>() * kDecodeUnroll) : 1;
}

// One round: the scores of this lane's kDecodeUnroll keys base + u * key groups + grp (the
// keys at or past `end` masked) for the G heads, and the online-softmax update of (m, l, o)
// with their values (log2 units, unnormalized o). The keys this launch appends come from
// shared memory (Q::substitute). Uniform over the warp: the shuffles are safe.
template <int D, int G, class Q>
__device__ __forceinline__ void attend_round(const Q& qs, DecodeKv cur, int base, int end,
                                             int grp, int sub, const float (&qf)[G][8],
                                             float (&m)[G], float (&l)[G], float (&o)[G][8]) {
  constexpr int kLanesPerKey = D / 8;
  constexpr int kKeyGroups = decode_key_groups<D>();
  if constexpr (Q::kNewKey) {  // keys this launch appends: from shared memory
#pragma unroll
    for (int u = 0; u < kDecodeUnroll; ++u)
      qs.substitute(base + u * kKeyGroups + grp, sub, cur.k[u], cur.v[u]);
  }
  float s[kDecodeUnroll][G];
#pragma unroll
  for (int u = 0; u < kDecodeUnroll; ++u) {
    const bool ok = base + u * kKeyGroups + grp < end;
    float kf[8];
    atlas::unpack_bf16x8(cur.k[u], kf);
#pragma unroll
    for (int g = 0; g < G; ++g) {
      float d = 0.f;
#pragma unroll
      for (int i = 0; i < 8; ++i) d = fmaf(qf[g][i], kf[i], d);
#pragma unroll
      for (int off = kLanesPerKey / 2; off >= 1; off >>= 1) d += __shfl_xor_sync(0xffffffffu, d, off);
      s[u][g] = ok ? d : -INFINITY;
    }
  }
  float vf[kDecodeUnroll][8];
#pragma unroll
  for (int u = 0; u < kDecodeUnroll; ++u) atlas::unpack_bf16x8(cur.v[u], vf[u]);
#pragma unroll
  for (int g = 0; g < G; ++g) {
    float mx = m[g];
#pragma unroll
    for (int u = 0; u < kDecodeUnroll; ++u) mx = fmaxf(mx, s[u][g]);
    const float ref = mx == -INFINITY ? 0.f : mx;
    const float corr = exp2f(m[g] - ref);
    l[g] *= corr;
#pragma unroll
    for (int i = 0; i < 8; ++i) o[g][i] *= corr;
#pragma unroll
    for (int u = 0; u < kDecodeUnroll; ++u) {
      const float p = exp2f(s[u][g] - ref);
      l[g] += p;
#pragma unroll
      for (int i = 0; i < 8; ++i) o[g][i] = fmaf(p, vf[u][i], o[g][i]);
    }
    m[g] = mx;
  }
}

// What a push-merge block's warps send (decode_merge.cuh PushPart): the bytes its peers'
// mbarriers count from each of its warps, and its own local arrivals a warp (the lanes
// whose slice is the block's own: E / 8 of them, and one for the (m, l)).
template <int D>
__host__ __device__ constexpr unsigned push_warp_bytes(int heads) {
  return static_cast<unsigned>(heads * (4 * D / atlas::kPushRanks + 8));
}
template <int D>
__host__ __device__ constexpr unsigned push_warp_arrivals() {
  return D / atlas::kPushRanks / 8 + 1;
}

// A push-merge block's send: its warps' partials (key groups merged by shuffles), each lane
// of the first key group its 8 elements of every head to the rank that merges them, lanes
// 0..kPushRanks-1 the (m, l) of every head to rank = lane; what goes to the block itself
// is stored and arrived on (push_warp_arrivals). The caller has passed the cluster barrier
// every block arrives on once its PushPart expects what it is sent.
template <int D, int G>
__device__ __forceinline__ void push_warp_partials(float (&m)[G], float (&l)[G], float (&o)[G][8],
                                                   atlas::PushPart* mine, unsigned rank) {
  constexpr int kLanesPerKey = D / 8;
  constexpr int E = D / atlas::kPushRanks;  // elements of a head a rank merges
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, sub = lane % kLanesPerKey;
  const int p = static_cast<int>(rank) * atlas::kMergeWarps + warp;
  atlas::merge_key_groups<G, kLanesPerKey>(m, l, o);
  if (lane < kLanesPerKey) {
    const unsigned to = static_cast<unsigned>(sub * 8 / E);
    const int e0 = sub * 8 % E;
    if (to == rank) {
#pragma unroll
      for (int g = 0; g < G; ++g) {
        float4* dst = reinterpret_cast<float4*>(&mine->o[p][g][e0]);
        dst[0] = make_float4(o[g][0], o[g][1], o[g][2], o[g][3]);
        dst[1] = make_float4(o[g][4], o[g][5], o[g][6], o[g][7]);
      }
      atlas::push_arrive(*mine);
    } else {
      const unsigned bar = atlas::map_rank(atlas::shared_addr(&mine->bar), to);
#pragma unroll
      for (int g = 0; g < G; ++g) {
        const unsigned dst = atlas::map_rank(atlas::shared_addr(&mine->o[p][g][e0]), to);
        atlas::push_v4(dst, bar, o[g][0], o[g][1], o[g][2], o[g][3]);
        atlas::push_v4(dst + 16, bar, o[g][4], o[g][5], o[g][6], o[g][7]);
      }
    }
  }
  if (lane < atlas::kPushRanks) {
    const unsigned to = static_cast<unsigned>(lane);
    if (to == rank) {
#pragma unroll
      for (int g = 0; g < G; ++g) mine->ml[p][g] = make_float2(m[g], l[g]);
      atlas::push_arrive(*mine);
    } else {
      const unsigned bar = atlas::map_rank(atlas::shared_addr(&mine->bar), to);
#pragma unroll
      for (int g = 0; g < G; ++g)
        atlas::push_v2(atlas::map_rank(atlas::shared_addr(&mine->ml[p][g]), to), bar, m[g],
                       l[g]);
    }
  }
}

// The split's keys [begin, end) for the G = hs.count q heads of the block's slice (K/V
// read once for all of them). `kv` holds the split's first kPre rounds of K/V rows; where
// they cover the split (`whole`: a push-merge kernel's shortest splits, decode_whole_rounds)
// the pass computes them with no further load. Otherwise the next iteration's K/V rows are
// loaded before this one's are used (a register double buffer), the block-table entries of
// the kAhead after it with them and, for kAhead > 1, the K/V of the last of those requested
// into L2 (TableAhead), so a long split keeps one register round trip and kAhead L2 ones in
// flight while it computes; `ahead` holds the next rounds' block-table entries (the caller
// issues them, before the PDL wait where it may, and requests rounds 1 .. kAhead - 1 into
// L2). The block's result: out (`direct`, the only active split), its part of the cluster
// merge (Part: ClusterPart, merged by decode_cluster_merge; PushPart, whose warps send their
// partials without merging the block: decode_push_merge), or a split partial.
template <int D, int G, bool kCluster, int kAhead, int kPre, class Part, class Q, class T>
__device__ __forceinline__ void decode_attn_pass(const HeadSlice& hs, int begin, int end,
    const DecodeKv (&kv)[kPre], bool whole, TableAhead<kAhead> ahead, const Q& qs,
    const __nv_bfloat16* __restrict__ k_cache, const __nv_bfloat16* __restrict__ v_cache,
    const int* __restrict__ table, float* __restrict__ part_o, float* __restrict__ part_ml,
    __nv_bfloat16* __restrict__ out, bool direct, int hq, int hkv, int block_size,
    int num_splits, float scale, DecodeScratch& red, Part* mine, const T& tr) {
  constexpr int kLanesPerKey = D / 8;
  constexpr int kKeyGroups = decode_key_groups<D>();
  constexpr int kStep = kKeyGroups * kDecodeUnroll;
  constexpr bool kPush = std::is_same_v<Part, atlas::PushPart>;
  const int split = hs.split, kvh = hs.kvh, b = blockIdx.z, h0 = hs.h0;
  const int tid = threadIdx.x, lane = tid & 31;
  const int sub = lane % kLanesPerKey;  // this lane's 8 elements of head_dim
  const int grp = decode_key_group<D>();

  qs.template prepare<D>(hs);
  float qf[G][8];
  const float scale_log2 = scale * kLog2e;
#pragma unroll
  for (int g = 0; g < G; ++g) {
    const uint4 raw = qs.load_q(b, h0 + g, hq, D, sub, hs);
    atlas::unpack_bf16x8(raw, qf[g]);
#pragma unroll
    for (int i = 0; i < 8; ++i) qf[g][i] *= scale_log2;
  }
  tr.mark(kTraceQReady, qf[0][0]);
  float m[G], l[G], o[G][8];
#pragma unroll
  for (int g = 0; g < G; ++g) {
    m[g] = -INFINITY;
    l[g] = 0.f;
#pragma unroll
    for (int i = 0; i < 8; ++i) o[g][i] = 0.f;
  }

  if (whole) {  // block-uniform
#pragma unroll
    for (int r = 0; r < kPre; ++r) {
      attend_round<D, G>(qs, kv[r], begin + r * kStep, end, grp, sub, qf, m, l, o);
      if (r == 0) tr.mark(kTraceRound1, l[0]);
    }
  } else {
    DecodeKv cur = kv[0];
    for (int base = begin; base < end; base += kStep) {  // uniform trip count
      const DecodeKv next = load_kv_rows<D>(k_cache, v_cache, ahead.round[0], base + kStep, end,
                                            grp, sub, hkv, kvh, block_size);
      if constexpr (kAhead > 1)
        prefetch_kv_rows<D>(k_cache, v_cache, ahead.round[kAhead - 1], base + kAhead * kStep,
                            end, grp, sub, hkv, kvh, block_size);
      ahead.template advance<D>(table, base, end, grp, block_size);
      attend_round<D, G>(qs, cur, base, end, grp, sub, qf, m, l, o);
      if (base == begin) tr.mark(kTraceRound1, l[0]);
      cur = next;
    }
  }
  tr.mark(kTraceKeysDone, l[0]);

  if constexpr (kPush) {
    if (!direct) {  // the cluster's blocks merge what the warps send (decode_push_merge)
      atlas::cluster_wait();  // every peer's PushPart expects its bytes
      push_warp_partials<D, G>(m, l, o, mine, static_cast<unsigned>(split % kClusterSplits));
      tr.mark(kTraceBlockMerged);
      return;
    }
  }
  // Merge the key groups of each warp (lanes with the same `sub`), then the warps.
  atlas::stash_warp_partials<G, kLanesPerKey>(m, l, o, red);
  __syncthreads();
  for (int idx = tid; idx < G * D; idx += kThreads) {
    const int g = idx / D, d = idx % D;
    float mx, total;
    const float o_d = atlas::merge_warp_partials(red, g, d, mx, total);
    if (direct) {  // the only active split: this is the result
      out[(static_cast<size_t>(b) * hq + h0 + g) * D + d] = atlas::f32_to_bf16(o_d);
      continue;
    }
    if constexpr (kCluster && !kPush) {  // for the cluster's merge
      mine->o[g][d] = o_d;
      if (d == 0) {
        mine->m[g] = mx;
        mine->l[g] = total;
      }
      continue;
    }
    const size_t row = (static_cast<size_t>(b) * hq + h0 + g) * num_splits + split;
    part_o[row * D + d] = o_d;
    if (d == 0) {
      part_ml[row * 2] = mx * kLn2;
      part_ml[row * 2 + 1] = total;
    }
  }
  __syncthreads();  // `red` is reused by the merge's ticket barrier's followers
  tr.mark(kTraceBlockMerged);
}

// ---- split merge (the last block of a row's splits) ------------------------------------
// Merges the active splits of `count` q heads from `h0` into out: thread t takes 4
// consecutive elements of one head (4 heads at D = 128 are one pass of 128 threads) and
// accumulates w_s o_s in split order with a running max m (w_s = l_s e^(m_s - m), earlier
// terms rescaled when m grows), in one pass: a split's loads (float2 m/l, float4 o) depend on
// nothing before them (16 splits in flight), so a merge costs about one L2 round trip. Other
// blocks of this kernel wrote the partials: they are read from L2 (__ldcg), never from a
// stale L1 line. Only a head's first proj_dim elements are merged and written, out rows
// proj_dim apart (the combine of a padded head; the decode kernels' own merge passes D).
// `sinks` (bf16 [hq], the combine's attention sinks; null: none): head h's sink joins the
// merged denominator, total += e^(sinks[h] - m).
template <int D>
__device__ __forceinline__ void decode_merge_rows(const float* part_o, const float* part_ml,
                                                  __nv_bfloat16* out, int hq, int h0, int count,
                                                  int num_splits, int active, int proj_dim,
                                                  const __nv_bfloat16* sinks = nullptr) {
  constexpr int kQuads = D / 4;
  for (int idx = threadIdx.x; idx < count * kQuads; idx += kThreads) {
    const size_t row = static_cast<size_t>(blockIdx.z) * hq + h0 + idx / kQuads;
    const int d = (idx % kQuads) * 4;
    if (d >= proj_dim) continue;  // the head's padding: never read by o_proj
    const float2* ml = reinterpret_cast<const float2*>(part_ml) + row * num_splits;
    const float* o = part_o + row * num_splits * D + d;
    float top = -INFINITY, total = 0.f, acc[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll 16
    for (int s = 0; s < active; ++s) {
      const float2 e = __ldcg(ml + s);
      const float4 v = __ldcg(reinterpret_cast<const float4*>(o + static_cast<size_t>(s) * D));
      const float mx = fmaxf(top, e.x);  // an active split's max score is finite
      const float rescale = expf(top - mx), w = e.y * expf(e.x - mx);
      top = mx;
      total = fmaf(total, rescale, w);
      acc[0] = fmaf(w, v.x, acc[0] * rescale);
      acc[1] = fmaf(w, v.y, acc[1] * rescale);
      acc[2] = fmaf(w, v.z, acc[2] * rescale);
      acc[3] = fmaf(w, v.w, acc[3] * rescale);
    }
    // every active split has a key, so total >= 1; no active split (no keys): zeros
    if (active == 0) total = INFINITY;
    else if (sinks != nullptr) total += expf(__bfloat162float(sinks[h0 + idx / kQuads]) - top);
    *reinterpret_cast<uint2*>(out + row * proj_dim + d) =
        make_uint2(atlas::pack_bf16x2(acc[0] / total, acc[1] / total),
                   atlas::pack_bf16x2(acc[2] / total, acc[3] / total));
  }
}

// A split ticket: one acq_rel read-modify-write at gpu scope. It releases the block's
// partial writes (ordered before thread 0's ticket by the barrier before it) and, for the
// block that draws the last ticket, acquires every earlier ticket holder's (their releases
// precede it in the counter's read-modify-write chain); the barrier after it passes that on
// to the block's other threads. One memory trip, where a fence, a relaxed atomic and a second
// fence took three.
__device__ __forceinline__ unsigned split_ticket(unsigned* counter) {
  unsigned old;
  asm volatile("atom.acq_rel.gpu.global.add.u32 %0, [%1], 1;" : "=r"(old) : "l"(counter)
               : "memory");
  return old;
}

// After this block wrote its partials: take a ticket for the (seq, head slice); the block
// that draws the last of `tickets` (every other writer has finished writing) merges the
// slice's `partials` rows into out and resets the counter. Without clusters every active
// split writes one partial and takes one ticket; with them every block of an active
// cluster writes a slice of its cluster's partial and takes a ticket.
template <int D>
__device__ __forceinline__ void decode_merge_if_last(const float* part_o, const float* part_ml,
                                                     unsigned* counters, __nv_bfloat16* out,
                                                     int hq, const HeadSlice& hs,
                                                     int num_splits, int tickets,
                                                     int partials) {
  __shared__ int is_last;
  __syncthreads();
  if (threadIdx.x == 0) {
    unsigned* counter = counters + static_cast<size_t>(blockIdx.z) * gridDim.y + hs.slot;
    const bool last = split_ticket(counter) == static_cast<unsigned>(tickets - 1);
    if (last) *counter = 0u;  // every writer has its ticket: ready for the next launch
    is_last = last;
  }
  __syncthreads();
  if (is_last)
    decode_merge_rows<D>(part_o, part_ml, out, hq, hs.h0, hs.count, num_splits, partials, D);
}

// Element d of head row `row` merged over a cluster c (top: the max score in log2 units,
// total: the weights' sum, acc: the weighted sum of o): the output where one cluster holds
// the keys, else the cluster's partial (normalized o; m in natural-log units, l).
template <int D>
__device__ __forceinline__ void store_cluster_element(__nv_bfloat16* out, float* part_o,
                                                      float* part_ml, size_t row, int c, int d,
                                                      int num_splits, int clusters, float top,
                                                      float total, float acc) {
  if (clusters == 1) {
    out[row * D + d] = atlas::f32_to_bf16(acc / total);
    return;
  }
  const size_t at = row * num_splits + c;
  part_o[at * D + d] = acc / total;
  if (d == 0) {
    part_ml[at * 2] = top * kLn2;
    part_ml[at * 2 + 1] = total;
  }
}

// The merge of a clustered launch (active > 1 splits), called by every block of a cluster
// that holds keys: after a cluster barrier past every block's ClusterPart, each of the
// kClusterSplits blocks merges 1/kClusterSplits of the slice's count x D elements over the
// cluster's keyed blocks (one distributed-shared-memory round trip). A context within one
// cluster (active <= kClusterSplits) writes out directly; a longer one writes the cluster's
// partial (partial index = cluster index) and the ticket path merges the clusters' partials.
// A block's shared memory must outlive its peers' reads: every block arrives on a second
// cluster barrier once it has stored what it read (so its reads are complete), and waits on
// it before it exits. That arrive is relaxed: the release of the first (a gpu-scope fence in
// SASS) would wait for the stores' acknowledgements, and it orders nothing a peer reads.
template <int D>
__device__ __forceinline__ void decode_cluster_merge(const atlas::ClusterPart* mine,
                                                     const HeadSlice& hs, int active,
                                                     int num_splits, float* part_o,
                                                     float* part_ml, unsigned* counters,
                                                     __nv_bfloat16* out, int hq) {
  const coop::cluster_group cluster = coop::this_cluster();
  const int c = hs.split / kClusterSplits;
  const int rank = hs.split % kClusterSplits;  // = the block's rank in its cluster
  const int keyed = min(kClusterSplits, active - c * kClusterSplits);
  const int clusters = (active + kClusterSplits - 1) / kClusterSplits;
  const int per = hs.count * D / kClusterSplits;  // D is a multiple of kClusterSplits
  const int e = rank * per + static_cast<int>(threadIdx.x);
  const int g = e / D, d = e % D;
  cluster.sync();  // release/acquire: every keyed block's ClusterPart is written
  float top = 0.f, total = 1.f, acc = 0.f;
  if (static_cast<int>(threadIdx.x) < per)
    atlas::merge_cluster_element<kClusterSplits>(cluster, mine, keyed, g, d, top, total, acc);
  if (static_cast<int>(threadIdx.x) < per) {
    store_cluster_element<D>(out, part_o, part_ml,
                             static_cast<size_t>(blockIdx.z) * hq + hs.h0 + g, c, d, num_splits,
                             clusters, top, total, acc);
  }
  atlas::cluster_arrive_relaxed();  // this block is done with its peers' shared memory
  if (clusters > 1)
    decode_merge_if_last<D>(part_o, part_ml, counters, out, hq, hs, num_splits,
                            clusters * kClusterSplits, clusters);
  atlas::cluster_wait();  // and its peers with this block's
}

// The push merge of a clustered launch (active > 1 splits; decode_merge.cuh PushPart), called
// by every block of an active cluster once its warps have sent (keyed blocks; the others
// pass the cluster barrier the senders wait on, which every block arrived on before its
// PDL wait): the block waits until its mbarrier has counted the bytes of the cluster's
// keyed blocks' 4 partials each, then merges its rank's E = D / kPushRanks elements of each
// head over them (weights 2^(m_p - top), which a partial without keys, m = -inf, l = 0,
// gets as 0) and, as decode_cluster_merge, writes out (one cluster) or the cluster's
// partial and takes the ticket path. No block reads a peer's shared memory, and every byte
// sent to a block has landed before it reads them, so a block exits when it is done.
template <int D>
__device__ __forceinline__ void decode_push_merge(const atlas::PushPart* mine,
                                                  const HeadSlice& hs, int active, bool sent,
                                                  int num_splits, float* part_o,
                                                  float* part_ml, unsigned* counters,
                                                  __nv_bfloat16* out, int hq) {
  constexpr int E = D / atlas::kPushRanks;
  const int c = hs.split / kClusterSplits;
  const int rank = hs.split % kClusterSplits;
  const int parts = min(kClusterSplits, active - c * kClusterSplits) * atlas::kMergeWarps;
  const int clusters = (active + kClusterSplits - 1) / kClusterSplits;
  if (!sent) atlas::cluster_wait();  // the arrive's pair (the senders wait on it)
  atlas::push_wait(*mine);
  for (int idx = threadIdx.x; idx < hs.count * E; idx += kThreads) {
    const int g = idx / E, d = rank * E + idx % E;
    float top = -INFINITY;
    for (int p = 0; p < parts; ++p) top = fmaxf(top, mine->ml[p][g].x);  // a keyed part: finite
    float total = 0.f, acc = 0.f;
#pragma unroll 4
    for (int p = 0; p < parts; ++p) {
      const float2 ml = mine->ml[p][g];
      const float w = exp2f(ml.x - top);
      total = fmaf(ml.y, w, total);
      acc = fmaf(mine->o[p][g][idx % E], w, acc);
    }
    store_cluster_element<D>(out, part_o, part_ml,
                             static_cast<size_t>(blockIdx.z) * hq + hs.h0 + g, c, d, num_splits,
                             clusters, top, total, acc);
  }
  if (clusters > 1)
    decode_merge_if_last<D>(part_o, part_ml, counters, out, hq, hs, num_splits,
                            clusters * kClusterSplits, clusters);
}

// This block's split of sequence blockIdx.z for the q heads of its slice (HeadSlice: at
// most kDecodeHeadsPerPass, which keeps registers at the 4-head level for every group).
// A Q with kReadsBeforeWait reads everything up to the first K/V round before the PDL wait
// (RopedQ says why that is sound) and waits here; the other entry points wait on entry.
// A block with nothing to do exits before its wait (decode_block_needed): it wrote nothing,
// and the block of split 0, which always waits, keeps the next kernel from starting before
// the previous one has completed. kCluster: the clustered kernels (kClusterSplits), whose
// blocks of an active cluster all take part in its merge, keys or not (a block past the
// keys loads nothing: every load is bounded by `end`). Part: how they merge (ClusterPart:
// decode_cluster_merge; PushPart: decode_push_merge, whose mbarrier is set up and cluster
// barrier arrived on before the PDL wait, and whose shortest splits' K/V is all loaded
// into registers before it: decode_whole_rounds).
template <int D, bool kCluster, int kAhead, bool kSplitMajor, class Q, class T, class Part>
__device__ __forceinline__ void decode_attn(
    Q qs, const __nv_bfloat16* k_cache, const __nv_bfloat16* v_cache,
    const int* block_tables, const int* kv_lens, float* part_o, float* part_ml,
    unsigned* counters, __nv_bfloat16* out, int hq, int hkv, int block_size, int max_blocks,
    int num_splits, float scale, DecodeScratch& red, Part* mine, const T& tr) {
  constexpr int kStep = decode_key_groups<D>() * kDecodeUnroll;
  constexpr int kMinKeys = kCluster ? kClusterMinKeys : kMinKeysPerSplit;
  constexpr bool kPush = std::is_same_v<Part, atlas::PushPart>;
  static_assert(!kPush || (kCluster && kClusterSplits == atlas::kPushRanks), "push: clusters");
  constexpr int kPre = kPush ? decode_whole_rounds<D>() : 1;  // K/V rounds loaded pre-wait
  const int grp = decode_key_group<D>();
  const int split = HeadSlice::block_split<kSplitMajor>();
  const int* table = block_tables + static_cast<size_t>(blockIdx.z) * max_blocks;
  // The first iteration's table entries are requested together with kv_len, guessing the
  // minimum chunk (right for every context up to num_splits * kMinKeys keys, the
  // latency-bound ones); a longer context's splits start elsewhere and look them up again.
  const int guess = split * kMinKeys;
  DecodeBlocks first = lookup_blocks<D>(table, guess, max_blocks * block_size, grp, block_size);
  // and a push-merge kernel's second round's (kPre: its only other one where `whole`, which
  // implies the minimum chunk, so the guess holds), so both rounds' K/V loads go out one
  // trip after kv_len
  DecodeBlocks second = first;
  if constexpr (kPre > 1)
    second = lookup_blocks<D>(table, guess + kStep, max_blocks * block_size, grp, block_size);
  const int kv_len = __ldcg(kv_lens + blockIdx.z);
  qs.early();
  const HeadSlice hs = HeadSlice::of_block<kSplitMajor>(hq, hkv);
  if (kv_len == 0) {  // no keys: zeros, from the first split's block
    if (split == 0) {
      if constexpr (Q::kReadsBeforeWait) atlas::pdl_enter();
      for (int idx = threadIdx.x; idx < hs.count * D; idx += kThreads)
        out[(static_cast<size_t>(blockIdx.z) * hq + hs.h0) * D + idx] = atlas::f32_to_bf16(0.f);
    }
    tr.mark(kTraceEnd, kv_len);
    return;
  }
  const int chunk = decode_chunk(kv_len, num_splits, kMinKeys);
  const int active = (kv_len + chunk - 1) / chunk;
  // Which blocks stay (uniform over a cluster wherever a cluster merges): the active
  // splits; with clusters, every block of a cluster holding an active split, unless only
  // split 0 is active (it writes out itself and no cluster merges).
  const bool needed = !kCluster || active == 1
                          ? split < active
                          : split - split % kClusterSplits < active;
  tr.mark(kTraceKvLen, active);
  if (!needed) {
    tr.mark(kTraceEnd);
    return;
  }
  const int begin = split * chunk;
  const int end = min(begin + chunk, kv_len);  // below begin past the keys: nothing loads
  tr.note(kTraceKeyedWord, begin < kv_len ? 1u : 0u);
  if constexpr (kPush) {
    if (active > 1) {  // the cluster merges: this block's PushPart expects what it is sent
      const int keyed = min(kClusterSplits, active - split / kClusterSplits * kClusterSplits);
      const bool self = begin < kv_len;  // = split % kClusterSplits < keyed
      if (threadIdx.x == 0)
        atlas::push_expect(*mine, self ? atlas::kMergeWarps * push_warp_arrivals<D>() : 0u,
                           (keyed - (self ? 1 : 0)) * atlas::kMergeWarps *
                               push_warp_bytes<D>(hs.count));
      atlas::cluster_arrive_relaxed();  // after the init's fence: peers may send once past it
    }
  }
  if (begin != guess) first = lookup_blocks<D>(table, begin, end, grp, block_size);
  qs.bind(kv_len, begin, end, table, block_size);
  const int sub = (threadIdx.x & 31) % (D / 8);
  // the split's first kPre rounds of K/V rows (all of a shortest split's where `whole`)
  const bool whole = kPush && end - begin <= kPre * kStep;
  DecodeKv kv[kPre];
  kv[0] = load_kv_rows<D>(k_cache, v_cache, first, begin, end, grp, sub, hkv, hs.kvh,
                          block_size);
  static_assert(kPre <= 2, "kv[1] is the second round's");
  if constexpr (kPre > 1) {
    kv[1] = whole ? load_kv_rows<D>(k_cache, v_cache, second, begin + kStep, end, grp, sub,
                                    hkv, hs.kvh, block_size)
                  : kv[0];
  }
  // the block-table entries run ahead of the K/V rows they address, so a round waits on
  // one memory trip (K/V), not two (the table, then K/V); a `whole` split has no later round
  TableAhead<kAhead> ahead{};
  if (!whole) {
    ahead.template lookup<D>(table, begin, end, grp, block_size);
    // the rest of the shortest split's rounds (its only ones at short contexts: 4 at
    // D = 256 on the clustered kernels) and the rounds the loop's prefetch starts after
    // (TableAhead) into L2, so the loop waits on L2, not DRAM, from round 2 on
#pragma unroll
    for (int j = 0; j < max(kAhead - 1, 1); ++j)
      prefetch_kv_rows<D>(k_cache, v_cache, ahead.round[j], begin + (j + 1) * kStep, end, grp,
                          sub, hkv, hs.kvh, block_size);
#pragma unroll 1
    for (int r = 2; r < kMinKeys / kStep; ++r) {
      const DecodeBlocks later = lookup_blocks<D>(table, begin + r * kStep, end, grp,
                                                  block_size);
      prefetch_kv_rows<D>(k_cache, v_cache, later, begin + r * kStep, end, grp, sub, hkv,
                          hs.kvh, block_size);
    }
  }
  qs.stage_constants();
  tr.mark(kTracePrologue);
  tr.mark(kTraceLoaded, static_cast<int>(kv[0].k[0].x ^ kv[0].v[kDecodeUnroll - 1].w ^
                                         kv[kPre - 1].v[kDecodeUnroll - 1].w));
  if constexpr (Q::kReadsBeforeWait) {
    atlas::pdl_enter();  // the qkv row is the projection's
    tr.mark(kTraceWaited);
  }

  if (begin < kv_len) {  // block-uniform
#define ATLAS_DECODE_PASS(G)                                                                 \
  case G:                                                                                    \
    decode_attn_pass<D, G, kCluster, kAhead, kPre>(hs, begin, end, kv, whole, ahead, qs,    \
                                                   k_cache, v_cache, table, part_o, part_ml, \
                                                   out, active == 1, hq, hkv, block_size,    \
                                                   num_splits, scale, red, mine, tr);        \
    break;
    switch (hs.count) {
      ATLAS_DECODE_PASS(1)
      ATLAS_DECODE_PASS(2)
      ATLAS_DECODE_PASS(3)
      ATLAS_DECODE_PASS(4)
    }
#undef ATLAS_DECODE_PASS
  }
  if (active == 1) {
    tr.mark(kTraceEnd);
    return;
  }
  if constexpr (kPush)
    decode_push_merge<D>(mine, hs, active, begin < kv_len, num_splits, part_o, part_ml,
                         counters, out, hq);
  else if constexpr (kCluster)
    decode_cluster_merge<D>(mine, hs, active, num_splits, part_o, part_ml, counters, out, hq);
  else
    decode_merge_if_last<D>(part_o, part_ml, counters, out, hq, hs, num_splits, active, active);
  tr.mark(kTraceMerged);
  tr.mark(kTraceEnd);
}

}  // namespace

// Two blocks per SM, as model.step_inputs.decode_splits sizes the grid (2 blocks per SM of
// work): the double-buffered K/V rows and the early block-table reads need ~210 registers
// (a 168 cap for 3 blocks spills), and 2 blocks x 128 lanes x 8 loads of 16 bytes in
// flight (32 KB per SM) cover the H200's bandwidth-latency product (~30 KB per SM).
namespace {

template <bool kCluster, int kAhead, bool kSplitMajor, class Q, class T, class Part>
__device__ __forceinline__ void decode_attn_any_dim(
    const Q& qs, const __nv_bfloat16* k_cache, const __nv_bfloat16* v_cache,
    const int* block_tables, const int* kv_lens, float* part_o, float* part_ml,
    unsigned* counters, __nv_bfloat16* out, uint32_t hq, uint32_t hkv, uint32_t head_dim,
    uint32_t block_size, uint32_t max_blocks, uint32_t num_splits, float scale,
    DecodeScratch& red, Part* mine, const T& tr) {
  const int ns = static_cast<int>(num_splits);
  if (head_dim == 128)
    decode_attn<128, kCluster, kAhead, kSplitMajor>(qs, k_cache, v_cache, block_tables, kv_lens,
                                                    part_o, part_ml, counters, out, hq, hkv,
                                                    block_size, max_blocks, ns, scale, red, mine,
                                                    tr);
  else if (head_dim == 256)
    decode_attn<256, kCluster, kAhead, kSplitMajor>(qs, k_cache, v_cache, block_tables, kv_lens,
                                                    part_o, part_ml, counters, out, hq, hkv,
                                                    block_size, max_blocks, ns, scale, red, mine,
                                                    tr);
  else if (head_dim == 64)
    decode_attn<64, kCluster, kAhead, kSplitMajor>(qs, k_cache, v_cache, block_tables, kv_lens,
                                                   part_o, part_ml, counters, out, hq, hkv,
                                                   block_size, max_blocks, ns, scale, red, mine,
                                                   tr);
  else
    __trap();  // ops/attention.py HEAD_DIMS
}

// The unclustered kernels' cluster-merge memory: none.
constexpr atlas::ClusterPart* kNoCluster = nullptr;

// The merge memory of an entry point's `mine` (Part): a push kernel's PushScratch holds the
// block merge's scratch and its PushPart; the others keep DecodeScratch apart (the pull
// merge uses both at once) and pass their ClusterPart (or none) on.
template <class Part>
__device__ __forceinline__ DecodeScratch& block_scratch(Part* mine) {
  if constexpr (std::is_same_v<Part, atlas::PushScratch>) {
    return mine->red;
  } else {
    __shared__ DecodeScratch red;
    return red;
  }
}

template <class Part>
__device__ __forceinline__ auto cluster_part(Part* mine) {
  if constexpr (std::is_same_v<Part, atlas::PushScratch>)
    return &mine->push;
  else
    return mine;
}

// decode_attn_bf16 and its clustered twin: q from memory, so the wait comes first.
// Part: the cluster merge's shared memory (atlas::ClusterPart or atlas::PushPart: decode_attn
// says which merge each means; a null ClusterPart for the unclustered kernels).
template <bool kCluster, int kAhead, class T, bool kSplitMajor = false,
          class Part = atlas::ClusterPart>
__device__ __forceinline__ void decode_attn_cached(
    const __nv_bfloat16* q, const __nv_bfloat16* k_cache, const __nv_bfloat16* v_cache,
    const int* block_tables, const int* kv_lens, float* part_o, float* part_ml,
    unsigned* counters, __nv_bfloat16* out, uint32_t hq, uint32_t hkv, uint32_t head_dim,
    uint32_t block_size, uint32_t max_blocks, uint32_t num_splits, float scale,
    Part* mine, unsigned long long* trace = nullptr) {
  const T tr = entry_trace<T>(trace);
  atlas::pdl_enter();  // q, kv_lens, the tables and the cache come from earlier work
  tr.mark(kTraceWaited);
  decode_attn_any_dim<kCluster, kAhead, kSplitMajor>(
      CachedQ{q}, k_cache, v_cache, block_tables, kv_lens, part_o, part_ml, counters, out, hq,
      hkv, head_dim, block_size, max_blocks, num_splits, scale, block_scratch(mine),
      cluster_part(mine), tr);
}

// decode_attn_rope_bf16 and its clustered twin: no wait on entry (kEarly), decode_attn reads
// what RopedQ lists before it waits for the qkv row; decode_attn_rope_wait_bf16 waits first.
template <bool kCluster, bool kEarly, int kAhead, class T, bool kSplitMajor = false,
          class Part = atlas::ClusterPart>
__device__ __forceinline__ void decode_attn_roped(
    const __nv_bfloat16* qkv, __nv_bfloat16* k_cache, __nv_bfloat16* v_cache,
    const __nv_bfloat16* q_norm_w, const __nv_bfloat16* k_norm_w, const float* cos_sin,
    const int* positions, const int* slots, const int* block_tables, const int* kv_lens,
    float* part_o, float* part_ml, unsigned* counters, __nv_bfloat16* out, uint32_t hq,
    uint32_t hkv, uint32_t head_dim, uint32_t block_size, uint32_t max_blocks,
    uint32_t num_splits, float scale, float eps, Part* mine,
    unsigned long long* trace = nullptr) {
  __shared__ __align__(16) RopeStage stage;
  const T tr = entry_trace<T>(trace);
  if constexpr (!kEarly) {
    atlas::pdl_enter();  // everything comes from earlier work
    tr.mark(kTraceWaited);
  }
  const RopedQ<kEarly> qs{qkv, k_cache, v_cache, q_norm_w, k_norm_w, cos_sin, positions,
                          slots, &stage, static_cast<int>(hq), static_cast<int>(hkv),
                          static_cast<int>(head_dim), static_cast<int>(block_size), eps};
  decode_attn_any_dim<kCluster, kAhead, kSplitMajor>(
      qs, k_cache, v_cache, block_tables, kv_lens, part_o, part_ml, counters, out, hq, hkv,
      head_dim, block_size, max_blocks, num_splits, scale, block_scratch(mine),
      cluster_part(mine), tr);
}

}  // namespace
