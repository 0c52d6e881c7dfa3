// The split-K decode kernels' in-block merge of online-softmax partials (attention.cu's bf16
// decode and attention_kvq.cu's quantized one): a block of 4 warps, each lane holding
// (m, l, o[8]) per q head of the pass for the keys of its key group, in log2 units (m is
// the max score, l the sum of 2^(s - m), o the unnormalized sum of p v over the lane's 8
// elements of head_dim). Key groups of a warp are the lanes with the same `sub` (lane %
// lanes_per_key); they merge by shuffles, then the warps through shared memory.
//
// The clustered decode kernels merge the blocks' partials of a thread-block cluster through
// distributed shared memory instead: the pull merge (ClusterPart, merge_cluster_element: each
// block merges its warps, a cluster barrier, each block reads its peers' parts) or the push
// merge (PushPart: every warp sends its slices to the blocks that merge them, one level).
#pragma once

#include <cooperative_groups.h>

#include "atlas_common.cuh"

namespace atlas {

constexpr int kMergeWarps = 4;       // warps of a decode block (128 threads)
constexpr int kMergeHeads = 4;       // q heads of one pass
constexpr int kMergeMaxDim = 256;    // the largest head_dim

struct DecodeScratch {  // per-warp partials, merged by the whole block
  float o[kMergeWarps][kMergeHeads][kMergeMaxDim];
  float m[kMergeWarps][kMergeHeads];
  float l[kMergeWarps][kMergeHeads];
};

// Merge the key groups of each warp into every lane (a butterfly over the lanes that differ
// in their key group). A key group that saw no key has m = -inf, l = 0 and contributes
// nothing.
template <int G, int kLanesPerKey>
__device__ __forceinline__ void merge_key_groups(float (&m)[G], float (&l)[G], float (&o)[G][8]) {
#pragma unroll
  for (int off = kLanesPerKey; off < 32; off <<= 1) {
#pragma unroll
    for (int g = 0; g < G; ++g) {
      const float m_o = __shfl_xor_sync(0xffffffffu, m[g], off);
      const float l_o = __shfl_xor_sync(0xffffffffu, l[g], off);
      const float mx = fmaxf(m[g], m_o);
      const float ref = mx == -INFINITY ? 0.f : mx;
      const float c_self = exp2f(m[g] - ref), c_other = exp2f(m_o - ref);
      l[g] = l[g] * c_self + l_o * c_other;
#pragma unroll
      for (int i = 0; i < 8; ++i) {
        const float o_o = __shfl_xor_sync(0xffffffffu, o[g][i], off);
        o[g][i] = o[g][i] * c_self + o_o * c_other;
      }
      m[g] = mx;
    }
  }
}

// merge_key_groups, then let the first key group store the warp's partials in `red`.
template <int G, int kLanesPerKey>
__device__ __forceinline__ void stash_warp_partials(float (&m)[G], float (&l)[G],
                                                    float (&o)[G][8], DecodeScratch& red) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, sub = lane % kLanesPerKey;
  merge_key_groups<G, kLanesPerKey>(m, l, o);
  if (lane < kLanesPerKey) {
#pragma unroll
    for (int g = 0; g < G; ++g) {
#pragma unroll
      for (int i = 0; i < 8; ++i) red.o[warp][g][sub * 8 + i] = o[g][i];
      if (lane == 0) {
        red.m[warp][g] = m[g];
        red.l[warp][g] = l[g];
      }
    }
  }
}

// After a barrier past every warp's stash: the block's merged partial of head g, element d,
// normalized by its l (an active split has a key: l >= 1); mx (log2 units) and total (l)
// are set for the caller's part_ml.
__device__ __forceinline__ float merge_warp_partials(const DecodeScratch& red, int g, int d,
                                                     float& mx, float& total) {
  mx = -INFINITY;
#pragma unroll
  for (int w = 0; w < kMergeWarps; ++w) mx = fmaxf(mx, red.m[w][g]);
  const float ref = mx == -INFINITY ? 0.f : mx;
  float acc = 0.f;
  total = 0.f;
#pragma unroll
  for (int w = 0; w < kMergeWarps; ++w) {
    const float c = exp2f(red.m[w][g] - ref);
    total += red.l[w][g] * c;
    acc += red.o[w][g][d] * c;
  }
  return acc / total;
}

// A block's merged partial in its shared memory, for its cluster peers to read: per q head
// of the pass, o normalized by l, m (log2 units) and l, as merge_warp_partials returns them.
struct ClusterPart {
  float o[kMergeHeads][kMergeMaxDim];
  float m[kMergeHeads];
  float l[kMergeHeads];
};

// After a cluster barrier past every keyed block's ClusterPart: element d of head g merged
// over ranks 0..keyed-1 (the cluster's blocks that hold keys, keyed >= 1), in rank order,
// with weights l_r 2^(m_r - top); all 3 x kRanks loads are issued before the first is used
// (one distributed-shared-memory round trip). Returns the unnormalized sum in acc, the
// weights' sum in total and the max score in top (log2 units).
template <int kRanks>
__device__ __forceinline__ void merge_cluster_element(const cooperative_groups::cluster_group& cluster,
                                                      const ClusterPart* mine, int keyed, int g,
                                                      int d, float& top, float& total,
                                                      float& acc) {
  float pm[kRanks], pl[kRanks], po[kRanks];
#pragma unroll
  for (int r = 0; r < kRanks; ++r) {
    pm[r] = -INFINITY;
    pl[r] = 0.f;
    po[r] = 0.f;
    if (r < keyed) {
      const ClusterPart* p = cluster.map_shared_rank(mine, r);
      pm[r] = p->m[g];
      pl[r] = p->l[g];
      po[r] = p->o[g][d];
    }
  }
  top = -INFINITY;
#pragma unroll
  for (int r = 0; r < kRanks; ++r) top = fmaxf(top, pm[r]);  // rank 0 has keys: finite
  total = 0.f;
  acc = 0.f;
#pragma unroll
  for (int r = 0; r < kRanks; ++r) {
    const float w = pl[r] * exp2f(pm[r] - top);  // 0 for a rank without keys
    total += w;
    acc = fmaf(w, po[r], acc);
  }
}

// ---- the push merge (the batch-1 latency chain: decode_attn.cuh decode_push_merge) -------
// One level instead of warp -> block -> cluster: every warp of the cluster's keyed blocks
// sends its partial (after the shuffle merge of its key groups) straight to the blocks that
// merge it, rank r taking elements [r E, (r + 1) E) of each head (E = D / kPushRanks):
// st.async into a peer's PushPart, counted in bytes on its mbarrier; what a block keeps for
// itself it stores and counts with an mbarrier arrive (st.async is for peers). So the chain
// after the keys is one distributed-shared-memory trip and the receiver's merge: no block
// barrier, no release fence (the cluster barrier's, a gpu-scope MEMBAR in SASS), and no
// second cluster barrier keeping a block's shared memory alive for its peers' reads (nobody
// reads a peer's shared memory; a block exits once its own mbarrier has counted everything
// sent to it, so no write into it is still in flight).
constexpr int kPushRanks = 8;                                // blocks of a cluster
constexpr int kPushParts = kPushRanks * kMergeWarps;         // partials: one per warp
constexpr int kPushSlice = kMergeMaxDim / kPushRanks;        // the most elements E of a head

struct alignas(16) PushPart {
  float o[kPushParts][kMergeHeads][kPushSlice];              // unnormalized sum of p v
  float2 ml[kPushParts][kMergeHeads];                        // (m log2 units, l) per partial
  unsigned long long bar;                                    // mbarrier: what was received
};

// A push-merge kernel's block merge scratch and PushPart in one: a block merges its warps
// itself only when it is the only active split (no push), so it never uses both.
union PushScratch {
  DecodeScratch red;
  PushPart push;
};

__device__ __forceinline__ unsigned shared_addr(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

// Before any peer may send (thread 0): the barrier expecting `arrivals` local arrivals
// besides this one and `bytes` from peers (this arrive: the phase completes once both have
// come, whichever first; bytes arriving before it only take the count below zero
// meanwhile), and the init made visible to the cluster (the cluster barrier's arrive
// follows it).
__device__ __forceinline__ void push_expect(PushPart& part, unsigned arrivals, unsigned bytes) {
  const unsigned bar = shared_addr(&part.bar);
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(bar), "r"(arrivals + 1)
               : "memory");
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(bar), "r"(bytes)
               : "memory");
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}

// A local arrival (release: this thread's stores into the PushPart before it are seen by
// whoever waits on the phase).
__device__ __forceinline__ void push_arrive(PushPart& part) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" :: "r"(shared_addr(&part.bar))
               : "memory");
}

// Send 16 bytes to `dst` (a shared::cluster address in block `bar`'s) counted on that
// block's mbarrier (`bar`, shared::cluster too).
__device__ __forceinline__ void push_v4(unsigned dst, unsigned bar, float a, float b, float c,
                                        float d) {
  asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.f32 [%0], "
               "{%1, %2, %3, %4}, [%5];"
               :: "r"(dst), "f"(a), "f"(b), "f"(c), "f"(d), "r"(bar) : "memory");
}

__device__ __forceinline__ void push_v2(unsigned dst, unsigned bar, float a, float b) {
  asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v2.f32 [%0], "
               "{%1, %2}, [%3];"
               :: "r"(dst), "f"(a), "f"(b), "r"(bar) : "memory");
}

// Wait until every byte sent to this block has landed (phase 0 of its mbarrier); acquire at
// cluster scope: the senders' data is visible to the thread after this.
__device__ __forceinline__ void push_wait(const PushPart& part) {
  const unsigned bar = shared_addr(&part.bar);
  unsigned done = 0;
  while (!done) {
    asm volatile("{\n.reg .pred p;\n"
                 "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [%1], 0;\n"
                 "selp.u32 %0, 1, 0, p;\n}"
                 : "=r"(done) : "r"(bar) : "memory");
  }
}

}  // namespace atlas
