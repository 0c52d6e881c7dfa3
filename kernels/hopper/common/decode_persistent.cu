// One persistent kernel for the transformer layers of a batch-1 decode step of a dense bf16
// model (Qwen3 / Llama families; ops/decode_persistent.py, opt-in ATLAS_PERSISTENT_DECODE=1).
//
// Why: a small model's step is ~7 launches a layer, each paying launch, PDL wait and a cold
// dependent chain through L2 (Qwen3-0.6B: ~4.5 us a kernel against ~1.5 us of weight bytes).
// Here one block per SM (grid = SM count, __launch_bounds__(kThreads, 1): every block is
// resident) runs every phase of every layer, separated by device-wide barriers:
//   1. every block: normed = RMSNorm(resid) * in_norm into shared memory (hidden is small);
//      qkv = normed @ w_qkv.T, rows split over blocks
//   2. attention items (q head, key split): q/k norm + RoPE of the head (rope_core.cuh, the
//      bits of rope_kv.cu), the split holding the new key computes it (and its group's first
//      q head appends k, v to the paged caches), online softmax over the split's keys; the
//      last split of a head to finish (a ticket) merges the partials into attn
//   3. resid = bf16(resid + bf16(attn @ w_o.T)), rows split over blocks
//   4. every block: normed = RMSNorm(resid) * post_norm; act[j] = bf16(bf16(silu(g_j)) * u_j)
//      of the gate/up row pair j (both rows in one block: no silu_mul pass)
//   5. resid = bf16(resid + bf16(act @ w_down.T))
// Weights never depend on activations, so a block fetches its slice of a weight phase
// (its rows: contiguous bytes) one or two phases AHEAD, across the barriers in between: two
// shared-memory buffers alternate (qkv and gate/up, o and down), and as a phase finishes
// with its buffer one thread bulk-copies (cp.async.bulk, the TMA unit: no registers) the
// phase after next into it; the first two phases are requested before the PDL wait. A
// phase whose slice does not fit its buffer (larger models) streams from global memory
// after an L2 prefetch (cp.async.bulk.prefetch.L2) issued at the same point. The buffer
// sizes come from the launch builder (ops/decode_persistent.py stage_plan): Qwen3-0.6B
// stages every phase (96 + 48 KB a block).
//
// Numerics: the composition of the per-op references (reference/decode_persistent.py): the
// GEMVs accumulate in f32 and round once to bf16, RMSNorm rounds like rmsnorm.cu, attention
// uses decode_split_rule's splits (the `splits` argument) and merges like attention.cu.
//
// Schedule (the `schedule` argument, ATLAS_PERSISTENT_FLAGS): 1 (default) orders the phases
// by per-layer readiness counts instead of device-wide barriers: a block that wrote rows of a
// phase adds one arrival to that phase's count (qkv: one count per head tile of D rows, the
// others one count a layer), and a block waits only for what it reads, only when it has
// something to do: an attention item for its q head's tile (and the group's k and v tiles
// when it holds the step's own key), o_proj for every head merged, gate/up for every o_proj
// block, down for every gate/up block, the next qkv for every down block. Blocks with no rows
// of a phase neither wait nor read its input. Why: gpu17 measured 2.4-3.6 us at each of the
// five barriers a layer (14.5 of 33.6 us); a barrier waits for all 132 blocks, the
// slowest of them included, where an attention item needs the ~4 blocks of its head's rows.
// The counts start at zero each launch: the last block to finish (an exit ticket) zeroes
// them. 0: the device-wide barriers below after every phase (the session-7 schedule).
//
// Barrier: sync's first 8 bytes are a 64-bit arrival count that only ever grows (one
// arrival per block per barrier; it never wraps). A block releases its writes
// (release_fence), adds its arrival without waiting for it (red) and polls the count with
// acquire loads until it reaches its target, the next multiple of the grid size: no
// arrival waits on a round trip, and no reset (a launch's count starts at a multiple of
// the grid, the same every launch on one sync buffer). The split tickets (u32, q head h's
// at word kTicketWord + h) sit in a cache line of their own, zero between phases.
//
// Activations written inside this kernel are read with ld.global.cg (L2, never a stale L1
// line); weights and the KV rows of earlier positions through the streamed read-only path.

#include "atlas_common.cuh"
#include "bf16_vec.cuh"
#include "bulk_copy.cuh"
#include "rope_core.cuh"

namespace {

constexpr int kThreads = 512;
constexpr int kWarps = kThreads / 32;
constexpr int kUnroll = 4;
// polls of a barrier's generation word (each an L2 round trip, ~0.5 us) before it gives up:
// several seconds, where no barrier of a healthy step waits a millisecond
constexpr unsigned kBarrierMaxPolls = 1u << 24;
// sync words: the 64-bit arrival count, then (a cache line on) the split tickets, then (the
// next cache line) the exit ticket, then (a line on) the readiness counts of the counter
// schedule, kTileCounts(hq, hkv) + kEdgeCounts a layer (ops/decode_persistent.sync_words)
constexpr int kTicketWord = 32;
// a layer's counts after its qkv head tiles: heads merged, o_proj / gate_up / down blocks done
enum EdgeCount { kAttnDone, kODone, kGateUpDone, kDownDone, kEdgeCounts };
// The residual rows a block owns (its o_proj and down rows: n = hidden, and no other block
// writes them during a launch) are kept in shared memory too, up to this many, so the
// residual add after those GEMVs reads them there rather than making an L2 round trip on the
// phase's critical path (gpu17: o_proj and down 2.3 and 2.1 us on block 0 for 8 rows from
// staged weights). A block owning more rows (a grid far below the SM count) reads L2.
constexpr int kOwnRows = 64;

// The per-layer device pointer table (u64 [layers, kLayerPtrs]; ops/decode_persistent.py
// LAYER_POINTERS names the same order).
enum LayerPtr {
  kInNorm, kQkvW, kQNorm, kKNorm, kKCache, kVCache, kOW, kPostNorm, kGateUpW, kDownW,
  kLayerPtrs
};

using bf16 = __nv_bfloat16;

struct Step {
  const uint64_t* layers;
  bf16* resid;
  bf16* qkv;
  bf16* attn;
  bf16* act;
  float* part_o;
  float* part_ml;
  unsigned* sync;
  const float* cos_sin;
  int hidden, hq, hkv, D, inter, block_size, splits;
  unsigned prefetch_bytes;
  float scale, eps;
  int pos, slot, kv_len;
  unsigned target;  // thread 0's next barrier target, low 32 bits (grid_barrier)
  unsigned long long* trace;
  const int* table;
  int schedule;     // 1: readiness counts, 0: device-wide barriers (file header)
  unsigned* exit_ticket;
  unsigned* counts;  // layer 0's readiness counts; a layer's are kTiles + kEdgeCounts words on
  int tiles;        // qkv head tiles a layer: hq + 2 hkv
  // this block's part of the counter schedule (set once; in shared memory, not registers):
  // whether it has rows of qkv / of o_proj and down (n = hidden) / of gate/up, and the
  // blocks that have rows of o_proj (= of down) and of gate/up
  bool qkv_rows, h_rows, gu_rows;
  unsigned h_blocks, gu_blocks;
  int layer;  // the layer being run (attention items read it here, not from a register)
  int trace_slots;  // a block's row of the trace: 1 + 10 num_layers
  float* own_resid;  // this block's residual rows (kOwnRows) from own_r0 on, when `own`
  int own_r0;
  bool own;
};

// The release half of a signal: this thread's (and, after a block barrier, the block's)
// writes ordered before what it writes next. fence.acq_rel, not __threadfence's fence.sc:
// in SASS MEMBAR.ALL.GPU instead of MEMBAR.SC.GPU (nvcc 13.0, sm_90a); release is all a
// message needs, and this fence sits on every phase's critical path.
__device__ __forceinline__ void release_fence() {
  asm volatile("fence.acq_rel.gpu;\n" ::: "memory");
}

// An atomic add with acquire and release semantics (a ticket: what the block wrote before
// it is released with it, what the earlier takers released is acquired).
__device__ __forceinline__ unsigned atom_add_acq_rel(unsigned* p, unsigned v) {
  unsigned old;
  asm volatile("atom.acq_rel.gpu.global.add.u32 %0, [%1], %2;\n"
               : "=r"(old) : "l"(p), "r"(v) : "memory");
  return old;
}

__device__ __forceinline__ void st_relaxed(unsigned* p, unsigned v) {
  asm volatile("st.relaxed.gpu.global.u32 [%0], %1;\n" ::"l"(p), "r"(v) : "memory");
}

__device__ __forceinline__ unsigned ld_acquire(const unsigned* p) {
  unsigned v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];\n" : "=r"(v) : "l"(p) : "memory");
  return v;
}

// The arrival count before this launch's first barrier opens, rounded down to a multiple of
// the grid (it holds the blocks already arrived at that barrier, fewer than the grid), low
// 32 bits. The remainder in 32-bit steps (count = hi 2^32 + lo): a 64-bit one is a
// subroutine call, whose registers would spill in the one-function kernel.
__device__ __forceinline__ unsigned first_target(const unsigned* sync) {
  unsigned long long count;  // one 64-bit access: never a torn carry
  asm volatile("ld.acquire.gpu.global.u64 %0, [%1];\n" : "=l"(count) : "l"(sync) : "memory");
  const unsigned lo = static_cast<unsigned>(count), hi = static_cast<unsigned>(count >> 32);
  const unsigned g = gridDim.x, wrap = (0u - g) % g;  // 2^32 mod g
  return lo - ((hi % g) * wrap % g + lo % g) % g;
}

// The device-wide barrier (file header). `target` is thread 0's next target, the low 32
// bits of it: the count's low word (sync[0], little-endian) is polled and compared
// wrap-safe, as the count never runs 2^31 arrivals ahead of a waiting block.
__device__ void grid_barrier(unsigned* sync, unsigned& target) {
  __syncthreads();
  if (threadIdx.x == 0) {
    target += gridDim.x;
    release_fence();  // this block's writes before its arrival
    asm volatile("red.relaxed.gpu.global.add.u64 [%0], 1;\n" ::"l"(sync) : "memory");
    // a barrier that cannot open (a block that never became resident) traps: a launch
    // error instead of a hung device
    unsigned polls = kBarrierMaxPolls;
    while (static_cast<int>(ld_acquire(sync) - target) < 0 && --polls) {
    }
    if (polls == 0) asm volatile("trap;");
  }
  __syncthreads();
}

// Counter schedule (file header). A block's arrival on readiness count `p` once every
// thread's writes of the phase are done: released like a barrier arrival.
// (n consecutive counts: a qkv block's rows may span head tiles.)
__device__ __forceinline__ void arrive(unsigned* p, int n = 1) {
  __syncthreads();
  if (threadIdx.x == 0) {
    release_fence();
    for (int i = 0; i < n; ++i)
      asm volatile("red.relaxed.gpu.global.add.u32 [%0], 1;\n" ::"l"(p + i) : "memory");
  }
}

// Thread 0 polls count `p` (acquire) until `want` blocks arrived, then the block barrier
// passes what it acquired to every thread; a count that never gets there traps.
__device__ __forceinline__ void poll_count(const unsigned* p, unsigned want) {
  unsigned polls = kBarrierMaxPolls;
  while (ld_acquire(p) < want && --polls) {
  }
  if (polls == 0) asm volatile("trap;");
}

__device__ __forceinline__ void wait_count(const unsigned* p, unsigned want) {
  if (threadIdx.x == 0) poll_count(p, want);
  __syncthreads();
}

// Blocks with rows of an n-row phase (block_rows gives ceil(n / grid) a block).
__device__ __forceinline__ unsigned row_blocks(int n) {
  const int per = (n + static_cast<int>(gridDim.x) - 1) / static_cast<int>(gridDim.x);
  return static_cast<unsigned>((n + per - 1) / per);
}

// Blocks with rows of qkv head tile t (rows [t D, (t + 1) D) of n).
__device__ __forceinline__ unsigned tile_blocks(int t, int D, int n) {
  const int per = (n + static_cast<int>(gridDim.x) - 1) / static_cast<int>(gridDim.x);
  return static_cast<unsigned>(((t + 1) * D - 1) / per - (t * D) / per + 1);
}

// Layer `layer`'s readiness count i (a head tile, or st.tiles + an EdgeCount).
__device__ __forceinline__ unsigned* count_of(const Step& st, int layer, int i) {
  return st.counts + static_cast<size_t>(layer) * (st.tiles + kEdgeCounts) + i;
}

// Every block's timeline for tools/gpu/persistent_trace.py (trace != null; row blockIdx.x of
// trace_slots): %globaltimer (ns) at the kernel's start (slot 0), then per layer as each of
// its five phases ends on the block (slot 1 + 10 layer + 2 i) and as the barrier after it
// opens, or the wait for the next phase's input returns (the next slot). Every block's, so
// a wait splits into the slowest producer's lateness and the signal's own latency.
__device__ __forceinline__ void trace_mark(const Step& st, int slot) {
  if (st.trace != nullptr && threadIdx.x == 0) {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;\n" : "=l"(t));
    st.trace[static_cast<size_t>(blockIdx.x) * st.trace_slots + slot] = t;
  }
}

// This block's contiguous rows of an n-row phase.
__device__ __forceinline__ void block_rows(int n, int& r0, int& r1) {
  const int per = (n + static_cast<int>(gridDim.x) - 1) / static_cast<int>(gridDim.x);
  r0 = min(n, static_cast<int>(blockIdx.x) * per);
  r1 = min(n, r0 + per);
}

// Ask L2 for up to `cap` bytes of rows [r0, r1) of a [*, k] bf16 weight (16-byte multiples).
__device__ __forceinline__ void prefetch_rows(const bf16* w, int k, int r0, int r1,
                                              unsigned cap) {
  constexpr unsigned kPiece = 16384;
  const size_t begin = static_cast<size_t>(r0) * k * sizeof(bf16);
  const unsigned total =
      min(cap, static_cast<unsigned>((r1 - r0) * k * sizeof(bf16))) & ~15u;
  const char* base = reinterpret_cast<const char*>(w) + begin;
  for (unsigned off = threadIdx.x * kPiece; off < total; off += kThreads * kPiece) {
    const unsigned bytes = min(kPiece, total - off);
    atlas::prefetch_l2_bulk(base + off, bytes);
  }
}

// The next weight phase's prefetch: rows this block owns of w (and of the up half when
// `pair` is the gate/up weight's intermediate size).
__device__ __forceinline__ void prefetch_phase(const bf16* w, int n, int k, int pair,
                                               unsigned cap) {
  int r0, r1;
  block_rows(n, r0, r1);
  if (r1 <= r0 || cap == 0) return;
  prefetch_rows(w, k, r0, r1, pair ? cap / 2 : cap);
  if (pair) prefetch_rows(w + static_cast<size_t>(pair) * k, k, r0, r1, cap / 2);
}

// A 16-byte weight chunk: streamed from global memory, or plain from shared memory where
// the phase's slice was staged.
template <bool kStaged>
__device__ __forceinline__ uint4 load_w(const uint4* p) {
  if constexpr (kStaged) {
    return *p;
  } else {
    return atlas::ld_stream(p);
  }
}

// A warp's partial dot products of weight row(s) with the shared x over chunks
// start, start + stride, ... (16-byte chunks; kPair: a second row wb too).
template <bool kStaged, bool kPair>
__device__ __forceinline__ void dot_chunks(const uint4* wa, const uint4* wb, const uint4* xs,
                                           int chunks, int start, int stride, float& s0,
                                           float& s1) {
  for (int c = start; c < chunks; c += kUnroll * stride) {
    uint4 a[kUnroll], b[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int i = c + u * stride;
      if (i < chunks) {
        a[u] = load_w<kStaged>(wa + i);
        if constexpr (kPair) b[u] = load_w<kStaged>(wb + i);
      }
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int i = c + u * stride;
      if (i < chunks) {
        const uint4 x = xs[i];
        s0 = atlas::dot8(a[u], x, s0);
        if constexpr (kPair) s1 = atlas::dot8(b[u], x, s1);
      }
    }
  }
}

// Rows r0 .. r0 + nr - 1 of y = x @ w.T (x in shared memory, k elements), w pointing at row
// r0 (in global or, kStaged, shared memory), each finished by epi(row, sum[, sum of the
// paired row `pair` rows further on]). Few rows: several warps split one row's k and their
// partials add in a fixed order (deterministic).
template <bool kStaged, bool kPair, class Epi>
__device__ void gemv_rows(const bf16* w, const bf16* xs, int k, int pair, int r0, int nr,
                          float* red, Epi epi) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, chunks = k / 8;
  const uint4* x4 = reinterpret_cast<const uint4*>(xs);
  if (nr >= kWarps) {
    for (int i = warp; i < nr; i += kWarps) {
      float s0 = 0.f, s1 = 0.f;
      const uint4* wa = reinterpret_cast<const uint4*>(w + static_cast<size_t>(i) * k);
      const uint4* wb = reinterpret_cast<const uint4*>(w + static_cast<size_t>(i + pair) * k);
      dot_chunks<kStaged, kPair>(wa, wb, x4, chunks, lane, 32, s0, s1);
      s0 = atlas::warp_sum(s0);
      if constexpr (kPair) s1 = atlas::warp_sum(s1);
      if (lane == 0) epi(r0 + i, s0, s1);
    }
    return;
  }
  const int ks = kWarps / nr;  // warps per row
  if (warp < nr * ks) {
    const int i = warp / ks, part = warp % ks;
    float s0 = 0.f, s1 = 0.f;
    const uint4* wa = reinterpret_cast<const uint4*>(w + static_cast<size_t>(i) * k);
    const uint4* wb = reinterpret_cast<const uint4*>(w + static_cast<size_t>(i + pair) * k);
    dot_chunks<kStaged, kPair>(wa, wb, x4, chunks, part * 32 + lane, 32 * ks, s0, s1);
    s0 = atlas::warp_sum(s0);
    if constexpr (kPair) s1 = atlas::warp_sum(s1);
    if (lane == 0) {
      red[2 * warp] = s0;
      red[2 * warp + 1] = s1;
    }
  }
  __syncthreads();
  if (static_cast<int>(threadIdx.x) < nr) {
    float s0 = 0.f, s1 = 0.f;
    for (int p = 0; p < ks; ++p) {
      s0 += red[2 * (threadIdx.x * ks + p)];
      s1 += red[2 * (threadIdx.x * ks + p) + 1];
    }
    epi(r0 + static_cast<int>(threadIdx.x), s0, s1);
  }
  __syncthreads();
}

// One weight phase: y rows [0, n) of w [n (+ pair), k]; pair > 0 (gate/up) pairs row r
// with row r + pair.
struct WPhase {
  const bf16* w;
  int n, k, pair;
};

// The two shared-memory weight buffers: a phase whose slice (this block's rows, both
// halves of a pair) fits its buffer is bulk-copied there one or two phases ahead (the
// copy of phase i + 2 is issued as phase i finishes with the buffer); a larger one streams
// from global memory after an L2 prefetch. Phases alternate buffers: qkv and gate/up in 0,
// o and down in 1. Lives in shared memory (set once); `parity` (a register: bit b is the
// mbarrier phase buffer b's next copy completes) is the only state that changes.
struct Ring {
  uint64_t bar[2];
  bf16* buf[2];
  unsigned cap[2];
};

__device__ __forceinline__ unsigned slice_bytes(const WPhase& ph, int nr) {
  return static_cast<unsigned>(nr) * ph.k * sizeof(bf16) * (ph.pair ? 2u : 1u);
}

// Start fetching phase `ph` into buffer b (every thread calls it; the buffer's readers
// must be done with it, hence the block barrier).
__device__ void issue_phase(Ring& ring, int b, const WPhase& ph, unsigned prefetch_cap) {
  int r0, r1;
  block_rows(ph.n, r0, r1);
  const int nr = r1 - r0;
  if (nr <= 0) return;
  const unsigned bytes = slice_bytes(ph, nr);
  if (bytes > ring.cap[b]) {
    prefetch_phase(ph.w, ph.n, ph.k, ph.pair, prefetch_cap);
    return;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    constexpr unsigned kPiece = 32768;
    atlas::bulk::fence_async_shared();
    atlas::bulk::expect_bytes(&ring.bar[b], bytes);
    const unsigned half = ph.pair ? bytes / 2 : bytes;
    for (int h = 0; h < (ph.pair ? 2 : 1); ++h) {
      const char* src = reinterpret_cast<const char*>(
          ph.w + (static_cast<size_t>(r0) + (h ? ph.pair : 0)) * ph.k);
      char* dst = reinterpret_cast<char*>(ring.buf[b]) + h * half;
      for (unsigned off = 0; off < half; off += kPiece)
        atlas::bulk::copy_to_shared(dst + off, src + off, min(kPiece, half - off),
                                    &ring.bar[b]);
    }
  }
}

// Run phase `ph` from buffer b: staged rows wait for their copy, the rest stream.
template <bool kPair, class Epi>
__device__ void run_phase(Ring& ring, unsigned& parity, int b, const WPhase& ph, const bf16* xs,
                          float* red, Epi epi) {
  int r0, r1;
  block_rows(ph.n, r0, r1);
  const int nr = r1 - r0;
  if (nr <= 0) return;
  if (slice_bytes(ph, nr) <= ring.cap[b]) {
    atlas::bulk::wait_parity(&ring.bar[b], (parity >> b) & 1u);
    parity ^= 1u << b;
    gemv_rows<true, kPair>(ring.buf[b], xs, ph.k, nr, r0, nr, red, epi);
  } else {
    gemv_rows<false, kPair>(ph.w + static_cast<size_t>(r0) * ph.k, xs, ph.k, ph.pair, r0, nr,
                            red, epi);
  }
}

// xs = bf16(w * bf16(x * 1 / sqrt(mean(x^2) + eps))) of the residual row (rmsnorm.cu). A
// thread's first weight vector is requested with its residual vector, not after the sum.
__device__ void norm_to_shared(const bf16* resid, const bf16* w, bf16* xs, int hidden, float eps,
                               float* red) {
  const int vecs = hidden / 8;
  const uint4* w4 = reinterpret_cast<const uint4*>(w);
  uint4* x4 = reinterpret_cast<uint4*>(xs);
  const int first = threadIdx.x;
  const uint4 w_first = first < vecs ? __ldg(w4 + first) : make_uint4(0, 0, 0, 0);
  float ss = 0.f;
  for (int c = first; c < vecs; c += kThreads) {
    const uint4 v = __ldcg(reinterpret_cast<const uint4*>(resid) + c);
    x4[c] = v;
    float f[8];
    atlas::unpack_bf16x8(v, f);
#pragma unroll
    for (int e = 0; e < 8; ++e) ss = fmaf(f[e], f[e], ss);
  }
  const float total = atlas::block_sum(ss, red);
  const float inv = 1.f / sqrtf(total / static_cast<float>(hidden) + eps);
  for (int c = first; c < vecs; c += kThreads) {
    float f[8], g[8];
    atlas::unpack_bf16x8(x4[c], f);
    atlas::unpack_bf16x8(c == first ? w_first : __ldg(w4 + c), g);
#pragma unroll
    for (int e = 0; e < 8; ++e) f[e] = g[e] * atlas::round_bf16(f[e] * inv);
    x4[c] = atlas::pack_bf16x8(f);
  }
  __syncthreads();
}

// xs = the n-element activation row at src (written by other blocks: through L2).
__device__ void stage_row(const bf16* src, bf16* xs, int n) {
  const uint4* s4 = reinterpret_cast<const uint4*>(src);
  uint4* x4 = reinterpret_cast<uint4*>(xs);
  for (int c = threadIdx.x; c < n / 8; c += kThreads) x4[c] = __ldcg(s4 + c);
  __syncthreads();
}

// resid[r] = bf16(resid[r] + bf16(y)) for a row r this block owns (kOwnRows).
__device__ __forceinline__ void add_to_resid(const Step& st, int r, float y) {
  float* own = st.own ? st.own_resid + (r - st.own_r0) : nullptr;
  const float h = own != nullptr ? *own : __bfloat162float(__ldcg(st.resid + r));
  const bf16 v = atlas::f32_to_bf16(h + atlas::round_bf16(y));
  if (own != nullptr) *own = __bfloat162float(v);
  st.resid[r] = v;
}

// E consecutive bf16 (E = 2, 4, 8: one 4-, 8- or 16-byte access): a lane's dims of a K or V
// row, kept raw (half the registers of f32) until used.
template <int E>
struct Dims;
template <>
struct Dims<2> { using T = unsigned; };
template <>
struct Dims<4> { using T = uint2; };
template <>
struct Dims<8> { using T = uint4; };

template <int E>
__device__ __forceinline__ void unpack_dims(const typename Dims<E>::T& v, float (&f)[E]) {
  if constexpr (E == 2) {
    atlas::unpack_bf16x2(v, f[0], f[1]);
  } else if constexpr (E == 4) {
    atlas::unpack_bf16x2(v.x, f[0], f[1]);
    atlas::unpack_bf16x2(v.y, f[2], f[3]);
  } else {
    atlas::unpack_bf16x8(v, f);
  }
}

// Block-table entries of an attention split kept in shared memory (read before the item's
// wait or the key loop; the table is no phase's output), so a round of K/V loads is one L2
// trip, not a table trip then a K/V trip: 64 entries cover a split of ~1,000 keys at block
// size 16; a longer split reads the table from global memory.
constexpr int kTableSlots = 64;

// Attention scratch in shared memory (after the x row).
template <int D>
struct AttnSmem {
  bf16 stage[3][D];      // raw q, k, v heads
  bf16 qkn[2][D];        // rotated q, rotated new k
  float q[D];
  float m[kWarps], l[kWarps];
  float acc[kWarps][D];
  int blocks[kTableSlots];  // the split's block-table entries (when they fit)
  int last;
};

// One (q head, split) item of decode attention; see the file header. Counter schedule: the
// item waits for its q head's tile of layer `layer` (and the group's k and v tiles where it
// holds the step's own key), stamps the trace's "barrier after qkv opens" when it is the
// block's first, and the block that writes the head's output adds its arrival to the heads
// merged.
template <int D>
__device__ void attention_item(const Step& st, int h, int s, const uint64_t* lp, AttnSmem<D>& sm) {
  constexpr int E = D / 32;  // dims per lane of q, K and V
  // keys of one warp whose K and V loads overlap: 32 bytes of each row a lane in flight, 16
  // at D 256 (more would spill: the whole kernel is one function at its 128-register bound)
  constexpr int kKeysInFlight = E == 8 ? 1 : 16 / E;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int kv_len = st.kv_len;
  const int chunk = max((kv_len + st.splits - 1) / st.splits, 32);
  const int active = (kv_len + chunk - 1) / chunk;
  if (s >= active) return;
  const int k0 = s * chunk, k1 = min(kv_len, k0 + chunk), newkey = kv_len - 1;
  const bool has_new = k1 == kv_len;
  const int group = st.hq / st.hkv, g = h / group;
  const bf16* qkv = st.qkv;
  const bf16* q_norm = reinterpret_cast<const bf16*>(lp[kQNorm]);
  const bf16* k_norm = reinterpret_cast<const bf16*>(lp[kKNorm]);
  bf16* k_cache = reinterpret_cast<bf16*>(lp[kKCache]);
  bf16* v_cache = reinterpret_cast<bf16*>(lp[kVCache]);
  const float* cosv = st.cos_sin + static_cast<size_t>(st.pos) * D;
  const bool normed = q_norm != nullptr;
  const int tb0 = k0 / st.block_size, tbn = (k1 - 1) / st.block_size - tb0 + 1;
  const bool cached = tbn <= kTableSlots;
  if (cached) {
    for (int i = threadIdx.x; i < tbn; i += kThreads) sm.blocks[i] = __ldg(st.table + tb0 + i);
  }
  if (st.schedule) {
    if (threadIdx.x == 0) {
      const int qkv_n = st.tiles * D;
      const unsigned* c = count_of(st, st.layer, 0);
      poll_count(c + h, tile_blocks(h, D, qkv_n));
      if (has_new) {
        poll_count(c + st.hq + g, tile_blocks(st.hq + g, D, qkv_n));
        poll_count(c + st.hq + st.hkv + g, tile_blocks(st.hq + st.hkv + g, D, qkv_n));
      }
    }
    __syncthreads();
    if (h * st.splits + s == static_cast<int>(blockIdx.x)) trace_mark(st, 2 + 10 * st.layer);
  }
  // the raw head warp w stages: q head h, then the new key's k and v heads of group g
  const int head_off = warp == 0 ? h * D : (st.hq + (warp - 1) * st.hkv + g) * D;
  if (warp < 3 && (warp == 0 || has_new)) {
    // the position's cos/sin row and the norm weights (no phase writes them) are asked of L1
    // with the head, not after it: one L2 trip before the rotation instead of three in a row
    if (warp < 2 && lane < 12) {  // 128-byte lines: cos/sin D floats, the norm D bf16
      const char* line = lane < 8 ? reinterpret_cast<const char*>(cosv) + lane * 128
                                  : reinterpret_cast<const char*>(warp == 0 ? q_norm : k_norm) +
                                        (lane - 8) * 128;
      if ((lane < 8 ? lane * 128 < D * 4 : normed && (lane - 8) * 128 < D * 2))
        asm volatile("prefetch.global.L1 [%0];\n" ::"l"(line));
    }
    for (int i = lane; i < D; i += 32) sm.stage[warp][i] = __ldcg(qkv + head_off + i);
    __syncwarp();
    if (warp < 2) {
      const auto w = atlas::rope::load_norm_w<false>(warp == 0 ? q_norm : k_norm, normed, D, D,
                                                     lane);
      atlas::rope::norm_rope_row<false>(sm.stage[warp], sm.qkn[warp], w, normed, false, cosv, D,
                                        D, st.eps, lane);
    }
    __syncwarp();
    if (warp > 0 && h % group == 0 && st.slot >= 0) {  // the group's first head appends k, v
      const int blk = st.slot / st.block_size, off = st.slot % st.block_size;
      bf16* dst = (warp == 1 ? k_cache : v_cache) +
                  ((static_cast<size_t>(blk) * st.hkv + g) * st.block_size + off) * D;
      const bf16* src = warp == 1 ? sm.qkn[1] : sm.stage[2];
      for (int i = lane; i < D; i += 32) dst[i] = src[i];
    }
  }
  __syncthreads();
  for (int i = threadIdx.x; i < D; i += kThreads) sm.q[i] = __bfloat162float(sm.qkn[0][i]);
  __syncthreads();

  // keys k0 + warp, k0 + warp + kWarps, ...: a warp holds kKeysInFlight of them at once
  // (their K and V slices loaded before any math), lanes own E dims of each
  float q[E], m = -INFINITY, l = 0.f, acc[E];
#pragma unroll
  for (int e = 0; e < E; ++e) {
    q[e] = sm.q[lane * E + e];
    acc[e] = 0.f;
  }
  using Raw = typename Dims<E>::T;
  for (int base = k0 + warp; base < k1; base += kWarps * kKeysInFlight) {
    Raw kr[kKeysInFlight], vr[kKeysInFlight];
#pragma unroll
    for (int u = 0; u < kKeysInFlight; ++u) {
      const int key = base + u * kWarps;
      if (key >= k1) continue;
      if (key == newkey) {  // the step's own key: shared memory (generic loads)
        kr[u] = *reinterpret_cast<const Raw*>(sm.qkn[1] + lane * E);
        vr[u] = *reinterpret_cast<const Raw*>(sm.stage[2] + lane * E);
      } else {  // earlier positions: never written by this kernel, the read-only path
        const int blk = cached ? sm.blocks[key / st.block_size - tb0]
                               : __ldg(st.table + key / st.block_size);
        const int off = key % st.block_size;
        const size_t row = ((static_cast<size_t>(blk) * st.hkv + g) * st.block_size + off) * D;
        kr[u] = __ldg(reinterpret_cast<const Raw*>(k_cache + row + lane * E));
        vr[u] = __ldg(reinterpret_cast<const Raw*>(v_cache + row + lane * E));
      }
    }
#pragma unroll
    for (int u = 0; u < kKeysInFlight; ++u) {
      if (base + u * kWarps >= k1) break;
      float kf[E], vf[E];
      unpack_dims<E>(kr[u], kf);
      unpack_dims<E>(vr[u], vf);
      float dot = 0.f;
#pragma unroll
      for (int e = 0; e < E; ++e) dot = fmaf(q[e], kf[e], dot);
      const float sc = atlas::warp_sum(dot) * st.scale;
      const float mnew = fmaxf(m, sc);
      const float corr = expf(m - mnew), p = expf(sc - mnew);
      l = fmaf(l, corr, p);
#pragma unroll
      for (int e = 0; e < E; ++e) acc[e] = fmaf(acc[e], corr, p * vf[e]);
      m = mnew;
    }
  }
  if (lane == 0) {
    sm.m[warp] = m;
    sm.l[warp] = l;
  }
#pragma unroll
  for (int e = 0; e < E; ++e) sm.acc[warp][lane * E + e] = acc[e];
  __syncthreads();
  float M = -INFINITY;
  for (int w = 0; w < kWarps; ++w) M = fmaxf(M, sm.m[w]);
  float L = 0.f;
  for (int w = 0; w < kWarps; ++w) L += sm.l[w] * expf(sm.m[w] - M);
  for (int d = threadIdx.x; d < D; d += kThreads) {
    float o = 0.f;
    for (int w = 0; w < kWarps; ++w) o += sm.acc[w][d] * expf(sm.m[w] - M);
    o /= L;
    if (active == 1) {
      st.attn[h * D + d] = atlas::f32_to_bf16(o);
    } else {
      st.part_o[(static_cast<size_t>(h) * st.splits + s) * D + d] = o;
    }
  }
  if (active == 1) {
    if (st.schedule) {
      arrive(count_of(st, st.layer, st.tiles + kAttnDone));
    } else {
      __syncthreads();
    }
    return;
  }
  if (threadIdx.x == 0) {
    st.part_ml[(h * st.splits + s) * 2] = M;
    st.part_ml[(h * st.splits + s) * 2 + 1] = L;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    const unsigned ticket = atom_add_acq_rel(st.sync + kTicketWord + h, 1u);
    sm.last = ticket == static_cast<unsigned>(active - 1);
    if (sm.last) st_relaxed(st.sync + kTicketWord + h, 0u);  // released by the next barrier
  }
  __syncthreads();
  if (sm.last) {
    const float* pml = st.part_ml + static_cast<size_t>(h) * st.splits * 2;
    const float* po = st.part_o + static_cast<size_t>(h) * st.splits * D;
    float mx = -INFINITY;
    for (int i = 0; i < active; ++i) mx = fmaxf(mx, __ldcg(pml + 2 * i));
    for (int d = threadIdx.x; d < D; d += kThreads) {
      float num = 0.f, den = 0.f;
      for (int i = 0; i < active; ++i) {
        const float wgt = __ldcg(pml + 2 * i + 1) * expf(__ldcg(pml + 2 * i) - mx);
        num = fmaf(wgt, __ldcg(po + static_cast<size_t>(i) * D + d), num);
        den += wgt;
      }
      st.attn[h * D + d] = atlas::f32_to_bf16(num / den);
    }
    if (st.schedule) arrive(count_of(st, st.layer, st.tiles + kAttnDone));
  }
  __syncthreads();
}

// Ask L2 for the cached K and V rows this block's attention items will read (their cache
// blocks of the item's kv head: block_size rows of D, contiguous), so the DRAM reads overlap
// the phases before the attention. The item split mirrors attention_item; the step's own
// row is not there yet and is not needed. Issued two phases ahead, before the wait for the
// previous layer's gate/up (layer 0's after the PDL wait: the block table may be the
// previous kernel's), by warps 1 and on: each request waits for its block-table entry, and
// thread 0 must be free to poll (at the layer's start, the session-7 place, the table trip
// held up the input norm's block barrier).
// (Not inlined: its loop state would push the inlined kernel past its 128 registers.)
__device__ __noinline__ void prefetch_kv(const Step& st, const uint64_t* lp) {
  const int first = static_cast<int>(threadIdx.x) - 32;
  if (first < 0) return;
  const int kv_len = st.kv_len, D = st.D, bs = st.block_size;
  const int chunk = max((kv_len + st.splits - 1) / st.splits, 32);
  const int active = (kv_len + chunk - 1) / chunk;
  const unsigned seg = static_cast<unsigned>(bs) * D * sizeof(bf16);
  const char* k_cache = reinterpret_cast<const char*>(lp[kKCache]);
  const char* v_cache = reinterpret_cast<const char*>(lp[kVCache]);
  for (int it = blockIdx.x; it < st.hq * st.splits; it += gridDim.x) {
    const int h = it / st.splits, s = it % st.splits;
    if (s >= active) continue;
    const int g = h / (st.hq / st.hkv);
    const int b0 = s * chunk / bs, b1 = (min(kv_len - 1, (s + 1) * chunk) - 1) / bs;
    for (int i = first; i < 2 * (b1 - b0 + 1); i += kThreads - 32) {
      const int blk = __ldg(st.table + b0 + i / 2);
      const char* p = ((i & 1) ? v_cache : k_cache) + (static_cast<size_t>(blk) * st.hkv + g) * seg;
      atlas::prefetch_l2_bulk(p, seg);
    }
  }
}

// sizeof(AttnSmem<D>) of a runtime head_dim
__device__ __forceinline__ unsigned attn_smem_bytes(int D) {
  return D == 64 ? sizeof(AttnSmem<64>) : D == 128 ? sizeof(AttnSmem<128>) : sizeof(AttnSmem<256>);
}

template <int D>
__device__ void attention_phase(const Step& st, const uint64_t* lp, char* smem) {
  auto& sm = *reinterpret_cast<AttnSmem<D>*>(smem);
  const int items = st.hq * st.splits;
  for (int it = blockIdx.x; it < items; it += gridDim.x)
    attention_item<D>(st, it / st.splits, it % st.splits, lp, sm);
}

__device__ __forceinline__ const bf16* ptr_of(const uint64_t* lp, int i) {
  return reinterpret_cast<const bf16*>(lp[i]);
}

__device__ __forceinline__ WPhase layer_phase(const Step& st, const uint64_t* lp, int which) {
  const int qkv_n = (st.hq + 2 * st.hkv) * st.D, q_width = st.hq * st.D;
  switch (which) {
    case kQkvW: return {ptr_of(lp, kQkvW), qkv_n, st.hidden, 0};
    case kOW: return {ptr_of(lp, kOW), st.hidden, q_width, 0};
    case kGateUpW: return {ptr_of(lp, kGateUpW), st.inter, st.hidden, st.inter};
    default: return {ptr_of(lp, kDownW), st.hidden, st.inter, 0};
  }
}

// Ask L2 for a layer's norm weights a phase or two before a norm reads them: the input norm
// and the q/k norms (kInNorm, kQNorm, kKNorm) or the post-attention norm (kPostNorm). A
// step streams every layer's weights through L2 (Qwen3-0.6B: 30 MB a layer, 1.2 GB a step),
// so a norm weight read as the norm starts is a DRAM miss on the phase's critical path, where
// the residual row it is read with is an L2 hit. Block 0's first threads, one vector each
// (every block reads the same lines from L2 after).
__device__ __noinline__ void prefetch_norms(const Step& st, const uint64_t* lp, bool input) {
  if (blockIdx.x != 0 || threadIdx.x >= (input ? 3u : 1u)) return;
  const int which = input ? (threadIdx.x == 0 ? kInNorm : threadIdx.x == 1 ? kQNorm : kKNorm)
                          : kPostNorm;
  const char* p = reinterpret_cast<const char*>(lp[which]);
  const unsigned bytes = (which == kInNorm || which == kPostNorm ? st.hidden : st.D) * 2u;
  if (p != nullptr)
    atlas::prefetch_l2_bulk(p, bytes);
}

// Whether this block owns rows of an n-row phase.
__device__ __forceinline__ bool has_rows(int n) {
  int r0, r1;
  block_rows(n, r0, r1);
  return r1 > r0;
}

// Counter schedule: this block's qkv rows are written; one arrival on each head tile they
// touch.
__device__ __forceinline__ void arrive_tiles(const Step& st, int layer, int qkv_n) {
  int r0, r1;
  block_rows(qkv_n, r0, r1);
  arrive(count_of(st, layer, r0 / st.D), (r1 - 1) / st.D - r0 / st.D + 1);
}

// The layers (file header). Barrier schedule: a device-wide barrier after every phase but
// the last. Counter schedule: a block with rows of a phase waits for the counts of what it
// reads, computes, and adds its arrival; one without skips the phase. Trace slots keep their
// meaning: "the barrier after phase i opens" is where the next phase's wait returned.
__device__ void run_layers(Step& st, int num_layers, bf16* xs, char* attn_smem,
                           float* red, Ring& ring) {
  // the step's scalars are read from shared memory (Step) where used: registers are at the
  // kernel's bound
  unsigned parity = 0;
  for (int layer = 0; layer < num_layers; ++layer) {
    const uint64_t* lp = st.layers + static_cast<size_t>(layer) * kLayerPtrs;
    const bool more = layer + 1 < num_layers;
    if (threadIdx.x == 0) st.layer = layer;  // read after the phase's block barriers
    // 1. input norm + qkv (buffer 0); then buffer 0 takes gate/up
    if (!more) atlas::pdl_launch_dependents();
    if (st.schedule && layer > 0) {
      if (st.qkv_rows) wait_count(count_of(st, layer - 1, st.tiles + kDownDone), st.h_blocks);
      trace_mark(st, 10 * layer);
    }
    if (!st.schedule || st.qkv_rows) {
      norm_to_shared(st.resid, ptr_of(lp, kInNorm), xs, st.hidden, st.eps, red);
      run_phase<false>(ring, parity, 0, layer_phase(st, lp, kQkvW), xs, red,
                       [&](int r, float y, float) { st.qkv[r] = atlas::f32_to_bf16(y); });
      if (st.schedule) arrive_tiles(st, layer, st.tiles * st.D);
    }
    issue_phase(ring, 0, layer_phase(st, lp, kGateUpW), st.prefetch_bytes);
    trace_mark(st, 1 + 10 * layer);
    // counter schedule: a block with no keyed item stamps it here, the first one after its
    // wait (attention_item)
    if (!st.schedule) grid_barrier(st.sync, st.target);
    trace_mark(st, 2 + 10 * layer);
    // 2. attention
    switch (st.D) {
      case 64: attention_phase<64>(st, lp, attn_smem); break;
      case 128: attention_phase<128>(st, lp, attn_smem); break;
      default: attention_phase<256>(st, lp, attn_smem); break;
    }
    trace_mark(st, 3 + 10 * layer);
    if (!st.schedule) {
      grid_barrier(st.sync, st.target);
    } else if (st.h_rows) {
      wait_count(count_of(st, layer, st.tiles + kAttnDone), static_cast<unsigned>(st.hq));
    }
    trace_mark(st, 4 + 10 * layer);
    // 3. o_proj + residual (buffer 1); then buffer 1 takes down
    prefetch_norms(st, lp, false);  // this layer's post norm, read two phases on
    if (!st.schedule || st.h_rows) {
      stage_row(st.attn, xs, st.hq * st.D);
      run_phase<false>(ring, parity, 1, layer_phase(st, lp, kOW), xs, red,
                       [&](int r, float y, float) { add_to_resid(st, r, y); });
      if (st.schedule) arrive(count_of(st, layer, st.tiles + kODone));
    }
    issue_phase(ring, 1, layer_phase(st, lp, kDownW), st.prefetch_bytes);
    trace_mark(st, 5 + 10 * layer);
    if (!st.schedule) {
      grid_barrier(st.sync, st.target);
    } else if (st.gu_rows) {
      wait_count(count_of(st, layer, st.tiles + kODone), st.h_blocks);
    }
    trace_mark(st, 6 + 10 * layer);
    // 4. post norm + gate/up + SwiGLU (buffer 0); then buffer 0 takes the next qkv
    if (!st.schedule || st.gu_rows) {
      norm_to_shared(st.resid, ptr_of(lp, kPostNorm), xs, st.hidden, st.eps, red);
      run_phase<true>(ring, parity, 0, layer_phase(st, lp, kGateUpW), xs, red,
                      [&](int r, float g, float u) {
                        st.act[r] = atlas::f32_to_bf16(
                            atlas::swiglu_f32(atlas::round_bf16(g), atlas::round_bf16(u)));
                      });
      if (st.schedule) arrive(count_of(st, layer, st.tiles + kGateUpDone));
    }
    if (more) {
      issue_phase(ring, 0, layer_phase(st, lp + kLayerPtrs, kQkvW), st.prefetch_bytes);
      // the next layer's K/V rows and norm weights, while this block waits
      prefetch_kv(st, lp + kLayerPtrs);
      prefetch_norms(st, lp + kLayerPtrs, true);
    }
    trace_mark(st, 7 + 10 * layer);
    if (!st.schedule) {
      grid_barrier(st.sync, st.target);
    } else if (st.h_rows) {
      wait_count(count_of(st, layer, st.tiles + kGateUpDone), st.gu_blocks);
    }
    trace_mark(st, 8 + 10 * layer);
    // 5. down + residual (buffer 1); then buffer 1 takes the next o_proj
    if (!st.schedule || st.h_rows) {
      stage_row(st.act, xs, st.inter);
      run_phase<false>(ring, parity, 1, layer_phase(st, lp, kDownW), xs, red,
                       [&](int r, float y, float) { add_to_resid(st, r, y); });
      if (st.schedule) arrive(count_of(st, layer, st.tiles + kDownDone));
    }
    trace_mark(st, 9 + 10 * layer);
    if (more) {
      issue_phase(ring, 1, layer_phase(st, lp + kLayerPtrs, kOW), st.prefetch_bytes);
      if (!st.schedule) grid_barrier(st.sync, st.target);
    }
    if (!st.schedule || !more) trace_mark(st, 10 + 10 * layer);
  }
}

// Counter schedule: the last block to finish (a ticket) zeroes every readiness count and
// the ticket for the next launch. Its ticket's atomic read every other block's, each taken
// after that block's last arrival and poll (acquire and release): no count moves after.
__device__ __noinline__ void reset_counts(const Step& st, int num_layers) {
  __shared__ int last;
  __syncthreads();
  if (threadIdx.x == 0) {
    last = atom_add_acq_rel(st.exit_ticket, 1u) == gridDim.x - 1;
  }
  __syncthreads();
  if (!last) return;
  const int n = num_layers * (st.tiles + kEdgeCounts);
  for (int i = threadIdx.x; i < n; i += kThreads) st.counts[i] = 0u;
  if (threadIdx.x == 0) *st.exit_ticket = 0u;
}

}  // namespace

extern "C" __global__ void __launch_bounds__(kThreads, 1)
decode_persistent_bf16(const uint64_t* __restrict__ layers, bf16* resid, bf16* qkv, bf16* attn,
                       bf16* act, float* part_o, float* part_ml, unsigned* sync,
                       const float* __restrict__ cos_sin, const int* __restrict__ positions,
                       const int* __restrict__ slots, const int* __restrict__ block_tables,
                       const int* __restrict__ kv_lens, uint32_t num_layers, uint32_t hidden,
                       uint32_t hq, uint32_t hkv, uint32_t head_dim, uint32_t inter,
                       uint32_t block_size, uint32_t splits, uint32_t prefetch_bytes,
                       uint32_t stage0, uint32_t stage1, float scale, float eps,
                       unsigned long long* trace, uint32_t schedule) {
  extern __shared__ __align__(128) char smem[];
  __shared__ float red[2 * kWarps];
  __shared__ Ring ring;
  __shared__ float own_resid[kOwnRows];
  // the step's scalars live in shared memory, not in registers across every phase
  __shared__ Step st;
  if (threadIdx.x == 0) {
    st.layers = layers;
    st.resid = resid;
    st.qkv = qkv;
    st.attn = attn;
    st.act = act;
    st.part_o = part_o;
    st.part_ml = part_ml;
    st.sync = sync;
    st.cos_sin = cos_sin;
    st.hidden = static_cast<int>(hidden);
    st.hq = static_cast<int>(hq);
    st.hkv = static_cast<int>(hkv);
    st.D = static_cast<int>(head_dim);
    st.inter = static_cast<int>(inter);
    st.block_size = static_cast<int>(block_size);
    st.splits = static_cast<int>(splits);
    st.prefetch_bytes = prefetch_bytes;
    st.scale = scale;
    st.eps = eps;
    st.table = block_tables;
    st.trace = trace;
    st.trace_slots = 1 + 10 * static_cast<int>(num_layers);
    int r0, r1;
    block_rows(static_cast<int>(hidden), r0, r1);
    st.own_resid = own_resid;
    st.own_r0 = r0;
    st.own = r1 - r0 <= kOwnRows;
    st.schedule = static_cast<int>(schedule);
    st.tiles = static_cast<int>(hq + 2 * hkv);
    // the exit ticket a cache line past the split tickets, the counts a line past it
    st.exit_ticket = sync + (kTicketWord + hq + 31) / 32 * 32;
    st.counts = st.exit_ticket + 32;
    st.qkv_rows = has_rows(st.tiles * st.D);
    st.h_rows = has_rows(st.hidden);  // o_proj and down: both n = hidden
    st.gu_rows = has_rows(st.inter);
    st.h_blocks = row_blocks(st.hidden);
    st.gu_blocks = row_blocks(st.inter);
    atlas::bulk::init_barrier(&ring.bar[0], 1);
    atlas::bulk::init_barrier(&ring.bar[1], 1);
    atlas::bulk::fence_barrier_init();
  }
  __syncthreads();
  // dynamic shared memory: the x row (the widest GEMV input: hidden, hq * D or inter
  // elements), attention's scratch, then the two weight buffers (ops/decode_persistent.py
  // shared_bytes lays out the same)
  const int width = max(max(hidden, hq * head_dim), inter);
  bf16* xs = reinterpret_cast<bf16*>(smem);
  const unsigned x_bytes = ((width * sizeof(bf16) + 127) / 128) * 128;
  char* attn_smem = smem + x_bytes;
  const unsigned attn_bytes = ((attn_smem_bytes(head_dim) + 127) / 128) * 128;
  if (threadIdx.x == 0) {
    ring.buf[0] = reinterpret_cast<bf16*>(attn_smem + attn_bytes);
    ring.buf[1] = reinterpret_cast<bf16*>(attn_smem + attn_bytes + ((stage0 + 127) / 128) * 128);
    ring.cap[0] = stage0;
    ring.cap[1] = stage1;
  }
  __syncthreads();
  // the first layer's qkv and o slices stream in while the previous kernel finishes
  // (weights and the pointer table: no kernel writes them)
  issue_phase(ring, 0, layer_phase(st, layers, kQkvW), prefetch_bytes);
  issue_phase(ring, 1, layer_phase(st, layers, kOW), prefetch_bytes);
  prefetch_norms(st, layers, true);
  prefetch_norms(st, layers, false);
  atlas::pdl_wait();
  if (threadIdx.x == 0) {
    st.pos = __ldg(positions);
    st.slot = __ldg(slots);
    st.kv_len = __ldg(kv_lens);
    // the count before this launch's first barrier completes: a multiple of the grid plus
    // the blocks that already arrived at it (fewer than the grid)
    st.target = first_target(sync);
  }
  __syncthreads();
  if (st.own) {  // the rows as the kernel before this one left them
    int r0, r1;
    block_rows(st.hidden, r0, r1);
    for (int i = threadIdx.x; i < r1 - r0; i += kThreads)
      own_resid[i] = __bfloat162float(__ldcg(resid + r0 + i));
  }
  __syncthreads();
  prefetch_kv(st, layers);
  trace_mark(st, 0);
  run_layers(st, static_cast<int>(num_layers), xs, attn_smem, red, ring);
  if (schedule) reset_counts(st, static_cast<int>(num_layers));
}
