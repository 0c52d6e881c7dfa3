// Split-K decode attention on tensor cores for batched and long-context decode: the same
// contract as attention.cu's decode_attn_bf16 (grid (num_splits, hkv, num_seqs), the same
// split rule, the same part_o / part_ml partials merged by decode_attn_combine_bf16; with a
// sliding window, window > 0, the query at kv_len - 1 sees the last n = min(kv_len, window)
// keys, split as a history of n keys starting at key kv_len - n), built
// to stream K/V at copy bandwidth: histories of thousands of keys per split (the long
// contexts) and the many short splits of a large batch, where the CUDA-core kernel's register
// double buffer and per-iteration block-table reads leave too few bytes in flight.
//
// A block owns one split of one kv head of one sequence and serves every q head of the group
// (G = hq / hkv <= 16) as the rows of one mma.m16n8k16 A tile (rows past G are zero), so the
// split's K/V rows are read from HBM exactly once whatever G is, and the arithmetic costs no
// CUDA-core time. K/V stream through a kStages-deep cp.async ring of kBKV-key tiles in
// dynamic shared memory (gathered row by row through the block table, 16-byte copies, rows
// past the split zero-filled and never read from the cache); the block-table entries a thread
// needs for a tile are loaded one iteration before its copies are issued, so the table's
// latency never sits between two tiles. Each of the 4 warps takes 16 keys of every tile:
// S = Q K^T (ldmatrix from the swizzled K tile, two accumulators per key slice so the
// k-steps form two dependent chains of D / 32 mmas, not one of D / 16), masked to the split,
// online softmax in f32 log2 units, O += P V with P as one bf16 per probability
// (FlashAttention's and SDPA's rounding; the row sum comes from the f32 values, so a partial
// moves by at most 2^-9 max|v|, which the check cases allow: cases/attention_long.py)
// accumulated on the tensor cores, V through transposed ldmatrix. Session 4 held the f32
// partials to the f32 reference with P in three bf16 parts and each tile summed apart: 3x
// the PV tensor work and ~100 more instructions per warp and tile for accuracy the bf16
// output cannot carry.
// The warps' (m, l, o) merge through shared memory (the ring, reused) into the split's
// normalized partial, written exactly as decode_attn_bf16 writes it; a launch of ONE split
// (num_splits == 1: large batches, ops/attention_long.py long_launch_splits) writes the
// normalized bf16 output instead and no combine runs after it; a launch of more given the
// split counters merges its partials in its last block (SplitMerge; the gated entries: in
// all of them, a share each, SpreadMerge), no combine either.
//
// Head dims: 64 and 128 keep Q as A fragments in registers (two blocks per SM: 48 / 96 KiB
// rings); 256 (Qwen3.5's gated attention) keeps Q in a swizzled [16][256] shared tile read
// by ldmatrix per k-step (its o accumulators alone are 128 registers a thread), one block
// per SM (a 192 KiB ring + 8 KiB of Q: 128 KiB of K/V in flight, as two D-128 blocks).
// proj_dim <= D is a head's length in the projections (ops/attention.py padded_head_dim:
// Phi-3-mini's 96 at D 128): out rows are [hq * proj_dim], a head's first proj_dim elements
// (the partials stay [.., D]); the rope entries read qkv rows of proj_dim-long heads, rotated
// whole over a cos/sin row of proj_dim, into Q and k / v rows zero past them (the padding
// adds nothing to q . k). proj_dim == D: no padding.
// sinks (bf16 [hq], gpt-oss's attention sinks; null: none): where a launch writes out (one
// split, or SplitMerge) head h's denominator also sums e^(sinks[h] - m) against the max m of
// its scores; the partials stay the plain ones (the combine adds the sink when it merges).
//
// Launch (ops/attention.py decode_attention, routed by ops/attention_long.py): grid
// (num_splits, hkv, num_seqs), 128 threads, dynamic shared memory
// ops/attention_long.py long_smem_bytes(D). Preconditions: head_dim 64, 128 or 256,
// hq / hkv <= 16, q 16-byte aligned.
#include <cuda/atomic>

#include "atlas_common.cuh"
#include "attention_tile.cuh"
#include "mma_util.cuh"
#include "phase_trace.cuh"
#include "rope_core.cuh"

namespace {

constexpr int kThreads = 128;  // ops/attention_long.py LONG_THREADS
constexpr int kWarps = kThreads / 32;
constexpr int kBKV = 64;         // keys per tile, 16 per warp (attention_long.py LONG_TILE_KEYS)
constexpr int kStages = 3;       // ring depth: two tiles in flight while one is computed
constexpr int kMaxGroup = 16;    // q heads per kv head: the rows of one mma A tile
constexpr int kMinKeysPerSplit = 32;  // attention.cu's split rule (ops/attention.py)
constexpr int kSmemPerSm = 228 * 1024;  // H100/H200 shared memory per SM
constexpr float kLn2 = 0.6931471805599453f;
constexpr float kLog2e = 1.4426950408889634f;

// The q/k norm, RoPE and K/V append of qk_norm_rope_kv_bf16 done by the attention blocks
// (decode_attn_long_rope_wait_bf16 and _staged_bf16, batched decode of one token per
// sequence): the pointers of ops/rope.py's launch. Unused (null) by the plain entry points.
struct LongRope {
  const __nv_bfloat16* qkv;  // [seqs, (hq + 2 hkv) D]: q heads, k heads, v heads
  __nv_bfloat16* k_cache;
  __nv_bfloat16* v_cache;
  const __nv_bfloat16* q_norm_w;  // null: no q/k norm
  const __nv_bfloat16* k_norm_w;
  const float* cos_sin;  // [positions, D]: cos of the D / 2 frequencies, then sin
  const int* positions;
  const int* slots;  // < 0: a padding row (appends nothing, attends the cache as it is)
  float eps;
  // The gated entries' layout (kGated; the others take the classic one: q heads proj_dim
  // apart, the whole head rotating, plain weights): q heads q_pitch elements apart, each
  // followed by its output gate (Qwen3.5 / Qwen3-Next: 2 D), the first rotary_dim elements of
  // a head rotating (cos_sin [positions, rotary_dim]), (1 + w) norm weights where offset
  int q_pitch = 0;
  int rotary_dim = 0;
  bool offset = false;
};

// The warps' merge scratch after the loop, f32: o [kWarps][kMaxGroup][kMergePitch], m and l
// [kWarps][kMaxGroup]
template <int D>
constexpr int kMergeFloats = kWarps * kMaxGroup * atlas::kMergePitch<D> + 2 * kWarps * kMaxGroup;

template <int D, bool kRope = false>
struct LongTile {
  static constexpr int kChunks = D / 8;                        // 16-byte chunks per row
  static constexpr int kTileElems = kBKV * D;                  // one K or V tile, bf16
  static constexpr int kStageElems = 2 * kTileElems;
  static constexpr int kRowsPerThread = kBKV * kChunks / kThreads;  // rows a thread copies
  static constexpr int kRingBytes = kStages * kStageElems * 2;
  // Q as a [kMaxGroup][D] bf16 tile after the ring, rows kQPitch apart (16 bytes of padding:
  // the 8 rows an ldmatrix matrix reads fall in 8 different bank groups), at D 256 and
  // where the block norms and rotates q itself; else in registers
  static constexpr bool kQShared = D > 128 || kRope;
  static constexpr int kQPitch = D + 8;
  static constexpr int kQBytes = kQShared ? kMaxGroup * kQPitch * 2 : 0;
  // the rope variants' stage after the Q tile: the step's k and v rows, then the q and k
  // norm weights (bf16) and the position's cos/sin row (f32), which only the staged entry
  // fills (ops/attention_long.py long_smem_bytes: one launch size for both)
  static constexpr int kStageBytes = kRope ? 4 * D * 2 + D * 4 : 0;
  static constexpr int kBlocksPerSm = D > 128 ? 1 : 2;  // attention_long.py long_blocks_per_sm
  static_assert(kMergeFloats<D> * 4 <= kRingBytes, "the merge reuses the ring");
  static_assert(kBlocksPerSm * (kRingBytes + kQBytes + kStageBytes + 1024) <= kSmemPerSm,
                "the blocks of an SM fit in its shared memory");
  static_assert(kBKV * kChunks % kThreads == 0, "copies divide evenly over the threads");
  static_assert(kThreads % kChunks == 0, "a thread copies the same chunk of each of its rows");
};

// One (head, 4 elements) item's splits first, first + stride, ... < active merged into a
// running (top, total, acc): split s weighs w_s = l_s e^(m_s - top) against the running max
// `top`, kBatch splits' (m, l) and o requested together (one L2 trip per kBatch of them;
// other blocks wrote them: read through L2, never a stale L1 line). Where first < active the
// item has a split, so its top is finite.
struct SplitSum {
  float top = -INFINITY, total = 0.f;
  float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
};

template <int D>
__device__ __forceinline__ void accumulate_splits(const float2* ml, const float* o, int first,
                                                  int stride, int active, SplitSum& a) {
  constexpr int kBatch = 16;
  for (int s0 = first; s0 < active; s0 += kBatch * stride) {
    float2 e[kBatch];
    float4 v[kBatch];
#pragma unroll
    for (int j = 0; j < kBatch; ++j) {
      const int s = s0 + j * stride;
      const bool ok = s < active;  // an active split's m is finite
      e[j] = ok ? __ldcg(ml + s) : make_float2(-INFINITY, 0.f);
      v[j] = ok ? __ldcg(reinterpret_cast<const float4*>(o + static_cast<size_t>(s) * D))
                : make_float4(0.f, 0.f, 0.f, 0.f);
    }
    float mx = a.top;
#pragma unroll
    for (int j = 0; j < kBatch; ++j) mx = fmaxf(mx, e[j].x);
    const float rescale = expf(a.top - mx);  // 0 on the first batch (top = -inf, acc = 0)
    a.total *= rescale;
    a.acc.x *= rescale;
    a.acc.y *= rescale;
    a.acc.z *= rescale;
    a.acc.w *= rescale;
#pragma unroll
    for (int j = 0; j < kBatch; ++j) {
      const float w = e[j].y * expf(e[j].x - mx);  // past active: 0 x e^-inf
      a.total += w;
      a.acc.x = fmaf(w, v[j].x, a.acc.x);
      a.acc.y = fmaf(w, v[j].y, a.acc.y);
      a.acc.z = fmaf(w, v[j].z, a.acc.z);
      a.acc.w = fmaf(w, v[j].w, a.acc.w);
    }
    a.top = mx;
  }
}

// The merged item of the group's head r written: out[d .. d + 3] = acc / total (the head's
// sink, sinks[r] where `sinks` is non-null, joins the denominator), times the head's sigmoid
// output gate `gv` (four bf16) where kGate (bf16_vec.cuh sigmoid_gated: sigmoid_gate_mul's
// bits). total >= 1: an item merges at least one active split.
template <bool kGate>
__device__ __forceinline__ void write_merged(const SplitSum& a, const __nv_bfloat16* sinks,
                                             int r, uint2 gv, __nv_bfloat16* out) {
  float total = a.total;
  if (sinks != nullptr) total += expf(__bfloat162float(sinks[r]) - a.top);
  float res[4] = {a.acc.x / total, a.acc.y / total, a.acc.z / total, a.acc.w / total};
  if constexpr (kGate) {
    float g[4];
    atlas::unpack_bf16x2(gv.x, g[0], g[1]);
    atlas::unpack_bf16x2(gv.y, g[2], g[3]);
#pragma unroll
    for (int e = 0; e < 4; ++e) res[e] = atlas::sigmoid_gated(atlas::round_bf16(res[e]), g[e]);
  }
  *reinterpret_cast<uint2*>(out) =
      make_uint2(atlas::pack_bf16x2(res[0], res[1]), atlas::pack_bf16x2(res[2], res[3]));
}

// SplitMerge: a launch of several splits given `counters` (u32, zero before the launch, one
// per (sequence, kv head)) merges its partials itself instead of a combine launch after it
// (ATLAS_DECODE_ATTN_LONG_MERGE=0: the combine). Each active split, after writing its
// partials, takes a ticket; the block drawing the last of `active` (every other split has
// written) resets the counter for the next launch (a graph replays it as is) and writes the
// group's normalized output: each thread one (head, 4 elements) item at a time,
// accumulate_splits over every split (session 18: a warp per head first reduced M and
// sum_s w_s, a second trip before the o loads). The ticket is one acq_rel
// read-modify-write at device scope: it releases this block's partial stores (ordered
// before thread 0 by the barrier) and acquires those of every earlier ticket holder,
// passed to the block's threads by the barrier after it.
// `row_of(r)` is the output row (sequence row x hq + q head) of the group's head r < `group`:
// the caller's own callable, so each decode_attn_long instantiation gets its own merge and
// `is_last` (an int first row shares them across the entries of one D and changes their code).
// Only a head's first proj_dim elements are merged and written (out rows proj_dim apart);
// the group's attention sinks (`sinks`, its first head's; null: none) join each head's
// merged denominator.
template <int D, typename RowOf>
__device__ __forceinline__ void merge_splits_if_last(const float* part_o, const float* part_ml,
                                                     unsigned* counter, __nv_bfloat16* out,
                                                     RowOf row_of, int group, int num_splits,
                                                     int active, int proj_dim,
                                                     const __nv_bfloat16* sinks) {
  __shared__ int is_last;
  __syncthreads();  // the block's partial stores precede the ticket; the ring is free
  if (threadIdx.x == 0) {
    cuda::atomic_ref<unsigned, cuda::thread_scope_device> ticket(*counter);
    const bool last = ticket.fetch_add(1u, cuda::memory_order_acq_rel) ==
                      static_cast<unsigned>(active - 1);
    if (last) ticket.store(0u, cuda::memory_order_relaxed);
    is_last = last;
  }
  __syncthreads();
  if (!is_last) return;
  constexpr int kQuads = D / 4;
  for (int idx = threadIdx.x; idx < group * kQuads; idx += kThreads) {
    const int r = idx / kQuads, d = (idx % kQuads) * 4;
    if (d >= proj_dim) continue;  // the head's padding: never read by o_proj
    const size_t row = row_of(r);
    SplitSum a;
    accumulate_splits<D>(reinterpret_cast<const float2*>(part_ml) + row * num_splits,
                         part_o + row * num_splits * D + d, 0, 1, active, a);
    write_merged<false>(a, sinks, r, make_uint2(0u, 0u), out + row * proj_dim + d);
  }
}

// SpreadMerge (the gated entries, batch 1): every active split of a (sequence, kv head) merges a
// share of the group's items, not the last one all of them (gpu164: Qwen3.5-35B-A3B's 8 heads x 256
// x 9 splits by one block took 5.0 us alone and 9.6 under o_proj's weight stream, ~1.2 us a round
// of a thread's loads; gpu165, H100: the median block's tail 4.2 us alone, 7.0 in the graph, the
// step even with the four launches where it was 0.6% slower). The early D-64 / 128 entries, whose
// last block merges one or two items a thread, measured slower with it (gpu165, GPU ms a step:
// Qwen3-30B-A3B 2.921 / 2.923 last block vs 3.006 / 3.013 spread, Qwen3-8B 5.244 vs 5.327): the
// arrival's round trips cost more than the share saves. `pair` is the (sequence, kv head)'s two u32
// counters, zero before the launch: thread 0 of each block, after the block's partial stores
// (ordered before it by the barrier), arrives on the first (a release add) and polls it until all
// `active` have (then an acquire fence). Every active block of the launch must be resident at once:
// ops/attention_long.py decode_attention_long_rope_gated caps its grid at one block an SM, and the
// dependents launch only once every block has triggered. Block `rank` then merges items [rank x
// per, ...) of the group's group x D / 4 (head, 4 elements), `lanes` consecutive threads an item
// (the most, at most 16 and `active`, that keep the share one round of the block's threads), lane j
// taking splits j, j + lanes, ... (one L2 trip up to 16 x lanes splits), the lanes' sums merged by
// shuffles. Departures count on the second counter, the reply awaited only after the merge; the
// last to depart (every block has seen every arrival by then) zeroes both for the next launch (a
// graph replays it as is). Each head's output is multiplied by its sigmoid output gate as it is
// written (head r's gate at gate + r * gate_pitch); the gated entries' heads have no sinks. `tr`
// stamps the arrival.
template <int D, typename RowOf, class Tr>
__device__ __forceinline__ void merge_splits_spread(const float* part_o, const float* part_ml,
                                                    unsigned* pair, __nv_bfloat16* out,
                                                    RowOf row_of, int group, int num_splits,
                                                    int active, int rank, int proj_dim,
                                                    const __nv_bfloat16* gate, int gate_pitch,
                                                    const Tr& tr) {
  cuda::atomic_ref<unsigned, cuda::thread_scope_device> arrived(pair[0]), departed(pair[1]);
  __syncthreads();  // the block's partial stores precede its arrival; the ring is free
  if (threadIdx.x == 0) {
    arrived.fetch_add(1u, cuda::memory_order_release);
    while (arrived.load(cuda::memory_order_relaxed) != static_cast<unsigned>(active)) {
    }
    cuda::atomic_thread_fence(cuda::memory_order_acquire, cuda::thread_scope_device);
  }
  __syncthreads();
  tr.mark(kTraceArrived);
  unsigned before = 0;  // thread 0: the departures ahead of its own
  if (threadIdx.x == 0) before = departed.fetch_add(1u, cuda::memory_order_release);
  constexpr int kQuads = D / 4;
  const int items = group * kQuads, per = (items + active - 1) / active;
  const int lo = rank * per, hi = min(items, lo + per);
  int lanes = 1;
  while (lanes < 16 && 2 * lanes <= active && 2 * lanes * per <= kThreads) lanes *= 2;
  const int j = threadIdx.x % lanes;
  for (int base = lo; base < hi; base += kThreads / lanes) {  // block-uniform: the shuffles
    const int idx = base + threadIdx.x / lanes;
    const int r = idx / kQuads, d = (idx % kQuads) * 4;
    const bool live = idx < hi && d < proj_dim;  // past proj_dim: the padding o_proj skips
    const size_t row = live ? row_of(r) : 0;
    // the head's gate requested with the partials (one L2 trip, not one after them)
    const uint2 gv = live && j == 0 ? *reinterpret_cast<const uint2*>(
                                          gate + static_cast<size_t>(r) * gate_pitch + d)
                                    : make_uint2(0u, 0u);
    SplitSum a;
    accumulate_splits<D>(reinterpret_cast<const float2*>(part_ml) + row * num_splits,
                         part_o + row * num_splits * D + d, live ? j : active, lanes, active,
                         a);
    // a live item's lanes each hold >= 1 split (lanes <= active): finite tops
    for (int off = 1; off < lanes; off *= 2) {
      const float top = __shfl_xor_sync(~0u, a.top, off);
      const float total = __shfl_xor_sync(~0u, a.total, off);
      const float4 acc = make_float4(
          __shfl_xor_sync(~0u, a.acc.x, off), __shfl_xor_sync(~0u, a.acc.y, off),
          __shfl_xor_sync(~0u, a.acc.z, off), __shfl_xor_sync(~0u, a.acc.w, off));
      const float mx = fmaxf(a.top, top), mine = expf(a.top - mx), theirs = expf(top - mx);
      a.total = a.total * mine + total * theirs;
      a.acc.x = a.acc.x * mine + acc.x * theirs;
      a.acc.y = a.acc.y * mine + acc.y * theirs;
      a.acc.z = a.acc.z * mine + acc.z * theirs;
      a.acc.w = a.acc.w * mine + acc.w * theirs;
      a.top = mx;
    }
    if (live && j == 0) write_merged<true>(a, nullptr, r, gv, out + row * proj_dim + d);
  }
  if (threadIdx.x == 0 && before == static_cast<unsigned>(active - 1)) {
    cuda::atomic_thread_fence(cuda::memory_order_acquire, cuda::thread_scope_device);
    arrived.store(0u, cuda::memory_order_relaxed);
    departed.store(0u, cuda::memory_order_relaxed);
  }
}

// q: [seqs, hq, D] (plain entry points; the rope variants read rope.qkv instead).
// kRope: the rope-fused entries, which wait for the qkv projection on entry. Without kStaged
// (decode_attn_long_rope_wait_bf16) each warp norms and rotates its rows straight from global
// memory after the tiles are requested, a chain of dependent trips: kv_len, then the row's
// slot and position (the copies wait for the slot: the step's key is never copied), then a
// q row, then (the warp that also takes the k row) a second one, with at most two tiles in
// flight meanwhile. kStaged (decode_attn_long_rope_staged_bf16, ATLAS_DECODE_ATTN_LONG_STAGED
// =1; RopeStaged): the same arithmetic on the same values, with the prologue's reads in two
// trips. (Session 9's entry that read everything but the qkv rows before the PDL wait lost to
// the waiting one in the batch-64 step, gpu22: 9.829 vs 9.511 ms, and was removed in session
// 12.)
template <int D, bool kRope = false, bool kStaged = false, bool kLateTrigger = false,
          bool kEarly = false, class Tr = NoTrace, bool kGated = false>
__device__ __forceinline__ void decode_attn_long(
    const __nv_bfloat16* __restrict__ q, const __nv_bfloat16* __restrict__ k_cache,
    const __nv_bfloat16* __restrict__ v_cache, const int* __restrict__ block_tables,
    const int* __restrict__ kv_lens, float* __restrict__ part_o, float* __restrict__ part_ml,
    unsigned* __restrict__ counters, __nv_bfloat16* __restrict__ out, int hq, int hkv,
    int block_size, int max_blocks,
    int num_splits, float scale, int window, int proj_dim,
    const __nv_bfloat16* __restrict__ sinks, __nv_bfloat16* smem,
    const LongRope& rope = LongRope{}, unsigned long long* trace = nullptr) {
  static_assert(kRope || !kStaged, "the staged prologue is the rope entry's");
  static_assert(kStaged || !kEarly, "the early prologue is the staged entry's");
  static_assert(kStaged || !kGated, "the gated layout is the staged prologue's");
  using T = LongTile<D, kRope>;
  const Tr tr = entry_trace<Tr>(trace);  // phase_trace.cuh: the traced twin only
  const int split = blockIdx.x, kvh = blockIdx.y, b = blockIdx.z;
  const int kv_len = kv_lens[b];
  // rope: the split holding the step's key (kv_len - 1) of a row with a slot computes that
  // key's k and v, appends them to the cache and substitutes them for the cache row (never
  // copied: `skip`); a padding row (slot < 0) attends the cache as it is. kStaged: requested
  // with kv_len (one trip)
  int slot = -1, position = 0;
  if constexpr (kStaged) {
    slot = rope.slots[b];
    position = rope.positions[b];
  }
  const int group = hq / hkv, h0 = kvh * group;
  // the output row (sequence row x hq + q head) of tile row i
  auto out_row = [&](int i) -> size_t {
    return static_cast<size_t>(b) * hq + h0 + i;
  };
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int* table = block_tables + static_cast<size_t>(b) * max_blocks;
  const int table_keys = max_blocks * block_size;

  // This thread copies chunk `ch` of tile rows row0 + j * (kThreads / kChunks), j < R; the
  // block-table entries of those rows from key `base` on (any key the tables reach: an
  // entry past the split is never used, see issue)
  constexpr int R = T::kRowsPerThread;
  const int ch = tid % T::kChunks, row0 = tid / T::kChunks;
  constexpr int kRowStep = kThreads / T::kChunks;
  const atlas::PageMap pages(block_size);
  auto lookup_at = [&](int base, int (&page)[R]) {
#pragma unroll
    for (int j = 0; j < R; ++j) {
      const int p = base + row0 + j * kRowStep;
      const int* entry = table + pages.page(p);
      page[j] = p < table_keys ? *entry : 0;
    }
  };
  // A one-split launch (large batches) starts at key 0 whatever kv_len is (with a window:
  // while kv_len <= window): its first tile's entries are requested together with kv_len
  // (one memory trip less before the first copy). So does an early launch merging its
  // splits, guessing one tile a split (right up to kBKV x num_splits keys: 1,920 on batch
  // 1's 30-split grid). Both are checked against the real first key once kv_len is in.
  int page[R];
  int guess = -1;  // the first key whose entries were requested with kv_len
  if constexpr (kEarly) {
    guess = num_splits == 1 ? 0 : counters != nullptr ? split * kBKV : -1;
    if (guess >= 0) lookup_at(guess, page);
  } else if (num_splits == 1) {
    lookup_at(0, page);
  }

  // A sliding window (window > 0) sees the last n = min(kv_len, window) keys, from lo on:
  // the splits cut those n keys as they would a history of n keys (the combine re-derives
  // its active splits from n too).
  const int n = window > 0 ? min(kv_len, window) : kv_len, lo = kv_len - n;
  // Early (merging its splits itself): whole tiles a split (ops/attention_long.py
  // early_split_rule), so no block copies a half-empty tile and the last block merges half
  // as many partials at short contexts; the combine's rule otherwise (it re-derives it)
  const int per = (n + num_splits - 1) / num_splits;
  const int chunk = kEarly && counters != nullptr ? max((per + kBKV - 1) / kBKV * kBKV, kBKV)
                                                  : max(per, kMinKeysPerSplit);
  const int begin = lo + split * chunk, end = min(begin + chunk, kv_len);
  const int active = (n + chunk - 1) / chunk;  // the splits with keys: the tickets
  tr.mark(kTraceKvLen, active);
  tr.note(kTraceKeyedWord, begin < kv_len ? 1u : 0u);
  if (begin >= kv_len) {
    // An inactive split: no merge reads its partials. Without a combine (one split, or
    // SplitMerge) a sequence without keys gets zeros (what the combine writes for it) from
    // its first split.
    if (num_splits == 1 || (counters != nullptr && split == 0)) {
      if constexpr (kEarly) atlas::pdl_wait();  // nothing is written before the wait
      for (int idx = tid; idx < group * D; idx += kThreads)
        if (idx % D < proj_dim) out[out_row(idx / D) * proj_dim + idx % D] = __float2bfloat16_rn(0.f);
    }
    tr.mark(kTraceEnd);
    return;
  }
  const int n_tiles = (end - begin + kBKV - 1) / kBKV;
  const int g = lane >> 2, c = lane & 3;
  if constexpr (kRope && !kStaged) {
    slot = rope.slots[b];
    position = rope.positions[b];
  }
  const bool sub = kRope && slot >= 0 && kv_len - 1 < end;  // kv_len - 1 >= begin: active
  const int skip = sub ? kv_len - 1 : -1;

  auto lookup = [&](int tile, int (&page)[R]) { lookup_at(begin + tile * kBKV, page); };
  const uint64_t stream = atlas::l2_stream_policy();  // K/V's L2 policy
  auto issue = [&](int tile, const int (&page)[R]) {
    __nv_bfloat16* sk = smem + (tile % kStages) * T::kStageElems;
    __nv_bfloat16* sv = sk + T::kTileElems;
#pragma unroll
    for (int j = 0; j < R; ++j) {
      const int r = row0 + j * kRowStep, p = begin + tile * kBKV + r;
      const bool ok = p < end;
      const size_t row =
          (static_cast<size_t>(page[j]) * hkv + kvh) * block_size + pages.row(p);
      const size_t off = ok ? row * D + ch * 8 : 0;
      const int dst = atlas::swizzle_offset<T::kChunks>(r, ch);
      if (p == skip) continue;  // the substituted key: no copy may land on it
      atlas::cp_async_16_stream(sk + dst, k_cache + off, ok, stream);
      atlas::cp_async_16_stream(sv + dst, v_cache + off, ok, stream);
    }
  };

  // Q as a [kMaxGroup][kQPitch] tile after the ring (kQShared), then the rope variant's
  // stage: the step's k and v rows
  __nv_bfloat16* sq = smem + T::kRingBytes / 2;
  __nv_bfloat16* stage_k = sq + kMaxGroup * T::kQPitch;
  __nv_bfloat16* stage_v = stage_k + D;
  __nv_bfloat16* stage_qw = stage_v + D;  // kStaged: the q and k norm weights (bf16), then
  __nv_bfloat16* stage_kw = stage_qw + D;  // the position's cos/sin row (f32)
  float* stage_cs = reinterpret_cast<float*>(stage_kw + D);

  // RopeStaged: the group's q rows, the step's k and v rows (where this split substitutes
  // that key), the norm weights and the position's cos/sin row requested together, into
  // registers here and into Q and the stage after the first tiles are requested
  constexpr int kRowLoads = ((kMaxGroup + 2) * T::kChunks + kThreads - 1) / kThreads;
  const int staged_rows = group + (sub ? 2 : 0);  // q heads, then k and v
  uint4 raw[kStaged ? kRowLoads : 1];
  uint4 consts = make_uint4(0u, 0u, 0u, 0u);
  // kGated: q heads q_pitch apart (each followed by its gate), then the k and v heads
  const __nv_bfloat16* qkv_row =
      kGated ? rope.qkv + static_cast<size_t>(b) * (static_cast<size_t>(hq) * rope.q_pitch +
                                                    2 * hkv * proj_dim)
             : nullptr;
  // kGated: the group's first head's output gate (head r's at gate_row + r * q_pitch)
  const __nv_bfloat16* gate_row =
      kGated ? qkv_row + static_cast<size_t>(h0) * rope.q_pitch + proj_dim : nullptr;
  // (a padded head's chunks past its proj_dim elements read as zeros)
  auto load_rows = [&] {
    const __nv_bfloat16* row = rope.qkv + static_cast<size_t>(b) * (hq + 2 * hkv) * proj_dim;
#pragma unroll
    for (int i = 0; i < kRowLoads; ++i) {
      const int idx = tid + i * kThreads, r = idx / T::kChunks, ch = idx % T::kChunks;
      const bool ok = idx < staged_rows * T::kChunks && ch * 8 < proj_dim;
      if constexpr (kGated) {
        const size_t at = r < group ? static_cast<size_t>(h0 + r) * rope.q_pitch
                                    : static_cast<size_t>(hq) * rope.q_pitch +
                                          static_cast<size_t>(r == group ? kvh : hkv + kvh) *
                                              proj_dim;
        raw[i] = ok ? __ldcg(reinterpret_cast<const uint4*>(qkv_row + at) + ch)
                    : make_uint4(0u, 0u, 0u, 0u);
      } else {
        const int head = r < group ? h0 + r : r == group ? hq + kvh : hq + hkv + kvh;
        raw[i] = ok ? __ldcg(reinterpret_cast<const uint4*>(row + static_cast<size_t>(head) *
                                                                      proj_dim) + ch)
                    : make_uint4(0u, 0u, 0u, 0u);
      }
    }
  };
  // the cos/sin row's floats: the rotating elements of a head
  const int rot = kGated ? rope.rotary_dim : proj_dim;
  // Early: before the wait, so plain loads (ptxas sinks the read-only path's below it)
  auto load_const = [&](const uint4* p) { return kEarly ? atlas::ld_prefetch(p) : __ldg(p); };
  if constexpr (kStaged) {
    if constexpr (!kEarly) load_rows();
    // threads [0, 2 kChunks): q then k norm weight chunks (proj_dim elements each); the
    // next proj_dim / 4: the cos/sin row (proj_dim floats)
    if (tid < 2 * T::kChunks) {
      if (rope.q_norm_w != nullptr && tid % T::kChunks * 8 < proj_dim)  // normed: both (below)
        consts = load_const(tid < T::kChunks
                                ? reinterpret_cast<const uint4*>(rope.q_norm_w) + tid
                                : reinterpret_cast<const uint4*>(rope.k_norm_w) + tid -
                                      T::kChunks);
    } else if (tid < 2 * T::kChunks + rot / 4) {
      consts = load_const(reinterpret_cast<const uint4*>(
                              rope.cos_sin + static_cast<size_t>(position) * rot) +
                          tid - 2 * T::kChunks);
    }
  }

  // Prologue: tiles 0..kStages-2 in flight (commit group i = tile i), the next tile's table
  // entries requested.
#pragma unroll
  for (int t = 0; t < kStages - 1; ++t) {
    if (t < n_tiles) {
      if (t > 0 || (kEarly ? guess != begin : num_splits != 1 || begin != 0)) lookup(t, page);
      issue(t, page);
    }
    atlas::cp_async_commit();
  }
  if (kStages - 1 < n_tiles) lookup(kStages - 1, page);
  // RopeEarly: everything above (kv_len, the slot and position, the table, the first tiles,
  // the constants) was requested under the qkv projection; its rows follow the wait
  tr.mark(kTracePrologue);
  if constexpr (kEarly) {
    atlas::pdl_wait();
    tr.mark(kTraceWaited);
    if constexpr (!kLateTrigger) atlas::pdl_launch_dependents();
    load_rows();
  }

  // Q as A fragments (rows = the group's heads, zero past G): a0 [g][2c..] a1 [g+8][2c..]
  // a2 [g][2c+8..] a3 [g+8][2c+8..] of each 16-column k-step. D <= 128: in registers,
  // straight from global memory; D 256 and rope: a shared tile after the ring (visible to
  // every warp after the loop's first barrier), one ldmatrix per k-step.
  constexpr int kQRegSteps = T::kQShared ? 1 : D / 16;
  uint32_t qf[kQRegSteps][4];
  if constexpr (kStaged) {
    // RopeStaged: the rows into Q and the stage (rows past G zero), then each warp norms and
    // rotates its rows in place (the same rope_core.cuh calls on the same values as below:
    // the same bits), reading only shared memory
#pragma unroll
    for (int i = 0; i < kRowLoads; ++i) {
      const int idx = tid + i * kThreads, r = idx / T::kChunks, col = (idx % T::kChunks) * 8;
      if (idx >= staged_rows * T::kChunks) break;
      __nv_bfloat16* dst = r < group ? sq + r * T::kQPitch : r == group ? stage_k : stage_v;
      *reinterpret_cast<uint4*>(dst + col) = raw[i];
    }
    for (int idx = group * T::kChunks + tid; idx < kMaxGroup * T::kChunks; idx += kThreads)
      *reinterpret_cast<uint4*>(sq + (idx / T::kChunks) * T::kQPitch + (idx % T::kChunks) * 8) =
          make_uint4(0u, 0u, 0u, 0u);
    if (tid < 2 * T::kChunks)
      reinterpret_cast<uint4*>(stage_qw)[tid] = consts;
    else if (tid < 2 * T::kChunks + rot / 4)
      reinterpret_cast<uint4*>(stage_cs)[tid - 2 * T::kChunks] = consts;
    __syncthreads();
    const bool normed = rope.q_norm_w != nullptr;
    for (int it = warp; it < group + (sub ? 1 : 0); it += kWarps) {  // warp-uniform
      const bool is_k = it == group;
      __nv_bfloat16* x = is_k ? stage_k : sq + it * T::kQPitch;
      // kGated: rope_kv.cu's partial form (the pass-through elements, (1 + w) weights)
      const auto w = atlas::rope::load_norm_w<kGated>(is_k ? stage_kw : stage_qw, normed,
                                                      proj_dim, rot, lane);
      atlas::rope::norm_rope_row<kGated>(x, x, w, normed, kGated && rope.offset, stage_cs,
                                         proj_dim, rot, rope.eps, lane);
    }
    __syncthreads();  // Q and the stage are complete
    tr.mark(kTraceQReady);
  } else if constexpr (kRope) {
    // rope_core.cuh (qk_norm_rope_kv's bits): one warp per q head of the group into its Q
    // row (rows past G zero), then the split holding the step's key norms and rotates k and
    // copies v into the stage; a padded head's elements past proj_dim zero
    const int P = proj_dim;
    const size_t pitch = static_cast<size_t>(hq + 2 * hkv) * P;
    const __nv_bfloat16* row = rope.qkv + static_cast<size_t>(b) * pitch;
    const float* cosv = rope.cos_sin + static_cast<size_t>(position) * P;
    const bool normed = rope.q_norm_w != nullptr;
    const __nv_bfloat16 zero = __float2bfloat16_rn(0.f);
    for (int it = warp; it < kMaxGroup + (sub ? 1 : 0); it += kWarps) {  // warp-uniform
      if (it < group) {
        const auto w = atlas::rope::load_norm_w<false>(rope.q_norm_w, normed, P, P, lane);
        atlas::rope::norm_rope_row<false>(row + static_cast<size_t>(h0 + it) * P,
                                          sq + it * T::kQPitch, w, normed, false, cosv, P, P,
                                          rope.eps, lane);
        for (int i = P + lane; i < D; i += 32) sq[it * T::kQPitch + i] = zero;
      } else if (it < kMaxGroup) {
        for (int i = lane; i < D; i += 32) sq[it * T::kQPitch + i] = zero;
      } else {
        const auto w = atlas::rope::load_norm_w<false>(rope.k_norm_w, normed, P, P, lane);
        atlas::rope::norm_rope_row<false>(row + static_cast<size_t>(hq + kvh) * P, stage_k, w,
                                          normed, false, cosv, P, P, rope.eps, lane);
        for (int i = P + lane; i < D; i += 32) stage_k[i] = zero;
        const uint4* v_src = reinterpret_cast<const uint4*>(row + static_cast<size_t>(hq + hkv + kvh) * P);
        for (int i = lane; i < T::kChunks; i += 32)
          reinterpret_cast<uint4*>(stage_v)[i] = i * 8 < P ? v_src[i] : make_uint4(0u, 0u, 0u, 0u);
      }
    }
    __syncthreads();  // the stage is complete
  } else if constexpr (T::kQShared) {
    const __nv_bfloat16* q_rows = q + (static_cast<size_t>(b) * hq + h0) * D;
    for (int idx = tid; idx < kMaxGroup * T::kChunks; idx += kThreads) {
      const int row = idx / T::kChunks, qc = idx % T::kChunks;
      const uint4 v = row < group
                          ? __ldg(reinterpret_cast<const uint4*>(q_rows + row * D) + qc)
                          : make_uint4(0u, 0u, 0u, 0u);
      *reinterpret_cast<uint4*>(sq + row * T::kQPitch + qc * 8) = v;
    }
  } else {
    const __nv_bfloat16* q_rows = q + (static_cast<size_t>(b) * hq + h0) * D;
    const uint32_t* q0 = reinterpret_cast<const uint32_t*>(q_rows);
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk)
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int row = g + 8 * (i & 1), col = 16 * kk + 2 * c + 8 * (i >> 1);
        qf[kk][i] = row < group ? __ldg(q0 + (row * D + col) / 2) : 0u;
      }
  }
  if (sub) {  // the step's k and v appended to the cache at the row's slot
    const size_t at = ((static_cast<size_t>(slot / block_size) * hkv + kvh) * block_size +
                       slot % block_size) * D;
    for (int i = tid; i < T::kChunks; i += kThreads) {
      reinterpret_cast<uint4*>(rope.k_cache + at)[i] = reinterpret_cast<const uint4*>(stage_k)[i];
      reinterpret_cast<uint4*>(rope.v_cache + at)[i] = reinterpret_cast<const uint4*>(stage_v)[i];
    }
  }

  const float scale_log2 = scale * atlas::kAttnLog2e;
  const int last[2] = {end - 1, end - 1};  // both rows see every key of the split
  float o[D / 8][4];
#pragma unroll
  for (int j = 0; j < D / 8; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) o[j][e] = 0.f;
  float m_run[2] = {-INFINITY, -INFINITY}, l_run[2] = {0.f, 0.f};

  for (int t = 0; t < n_tiles; ++t) {
    atlas::cp_async_wait<kStages - 2>();  // tile t landed (this thread's copies)
    __syncthreads();  // ... every thread's; and every warp is done with tile t - 1's slot
    if (t == 0) tr.mark(kTraceLoaded);
    // LateTrigger: the next kernel (o_proj, whose blocks request their weights before their
    // wait) may launch once every block's K/V reads are done, not while they queue behind it
    if constexpr (kLateTrigger && !kGated)
      if (t == n_tiles - 1) atlas::pdl_launch_dependents();
    if (t + kStages - 1 < n_tiles) {
      issue(t + kStages - 1, page);
      if (t + kStages < n_tiles) lookup(t + kStages, page);
    }
    atlas::cp_async_commit();
    __nv_bfloat16* sk = smem + (t % kStages) * T::kStageElems;
    __nv_bfloat16* sv = sk + T::kTileElems;
    if (sub && t == (kv_len - 1 - begin) / kBKV) {  // block-uniform: the step's key's tile
      const int r = kv_len - 1 - begin - t * kBKV;
      for (int i = tid; i < 2 * T::kChunks; i += kThreads) {
        const int c = i % T::kChunks;
        const __nv_bfloat16* from = (i < T::kChunks ? stage_k : stage_v) + c * 8;
        __nv_bfloat16* to = (i < T::kChunks ? sk : sv) + atlas::swizzle_offset<T::kChunks>(r, c);
        *reinterpret_cast<uint4*>(to) = *reinterpret_cast<const uint4*>(from);
      }
      __syncthreads();
    }

    // S = Q K^T for this warp's 16 keys (two 8-key n-tiles), even and odd k-steps in
    // separate accumulators (two dependent mma chains per n-tile), summed at the end.
    float s2[2][2][4];
#pragma unroll
    for (int par = 0; par < 2; ++par)
#pragma unroll
      for (int j = 0; j < 2; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) s2[par][j][e] = 0.f;
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      // matrices: (keys 0-7, d lo), (keys 0-7, d hi), (keys 8-15, d lo), (keys 8-15, d hi)
      const int r = warp * 16 + (lane & 7) + ((lane >> 4) << 3);
      uint32_t kb[4];
      atlas::ldmatrix_x4(kb, sk + atlas::swizzle_offset<T::kChunks>(r, 2 * kk + ((lane >> 3) & 1)));
      uint32_t a[4];
      if constexpr (T::kQShared) {
        // matrices: (rows 0-7, d lo), (rows 8-15, d lo), (rows 0-7, d hi), (rows 8-15, d hi)
        atlas::ldmatrix_x4(a, sq + (lane & 15) * T::kQPitch + (2 * kk + (lane >> 4)) * 8);
      } else {
#pragma unroll
        for (int i = 0; i < 4; ++i) a[i] = qf[kk][i];
      }
      atlas::mma_bf16_16816(s2[kk & 1][0], a, kb[0], kb[1]);
      atlas::mma_bf16_16816(s2[kk & 1][1], a, kb[2], kb[3]);
    }
    float s[2][4];
#pragma unroll
    for (int j = 0; j < 2; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) s[j][e] = s2[0][j][e] + s2[1][j][e];

    // Mask keys past the split; online softmax per row (attention_tile.cuh).
    float corr[2];
    atlas::online_softmax_tile(s, begin + t * kBKV + warp * 16 + 2 * c, last, scale_log2,
                               m_run, l_run, corr);
#pragma unroll
    for (int j = 0; j < D / 8; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) o[j][e] *= corr[e >> 1];

    // O += P V over the warp's 16 keys: the two S n-tiles form one bf16 A fragment
    // (attention_tile.cuh pv_slice_mma), accumulated in o on the tensor cores.
    uint32_t pf[1][4];
    atlas::prob_fragments<1>(s, 0, pf);
    atlas::pv_slice_mma<D, 1, false>(o, pf, sv, warp * 16, lane);
    if (t == 0) tr.mark(kTraceRound1, o[0][0]);
  }
  tr.mark(kTraceKeysDone, o[0][0]);
  atlas::cp_async_wait<0>();  // only empty groups remain; none may outlive the ring
  __syncthreads();            // every warp is done with the ring before the merge reuses it

  // Merge the warps: their (m, l, o) into shared memory (rows past G skipped; rows
  // kMergePitch apart: attention_tile.cuh), then each element as the weighted sum over the
  // warps. (Computing each row's weights once, by G threads behind one more barrier, made
  // the kernel faster alone and the batch-1 step slower: gpu110.)
  constexpr int kPitch = atlas::kMergePitch<D>;
  float* so = reinterpret_cast<float*>(smem);          // [kWarps][kMaxGroup][kPitch]
  float* sm = so + kWarps * kMaxGroup * kPitch;        // [kWarps][kMaxGroup]
  float* sl = sm + kWarps * kMaxGroup;                 // [kWarps][kMaxGroup]
  atlas::stash_mma_partials<D, kPitch>(o, m_run, l_run, group, so, sm, sl);
  __syncthreads();
  for (int idx = tid; idx < group * D; idx += kThreads) {
    const int row = idx / D, d = idx % D;
    float mx = -INFINITY;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) mx = fmaxf(mx, sm[w * kMaxGroup + row]);
    const float ref = mx == -INFINITY ? 0.f : mx;
    float total = 0.f, acc = 0.f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) {
      const float wt = exp2f(sm[w * kMaxGroup + row] - ref);
      total += sl[w * kMaxGroup + row] * wt;
      acc += so[(w * kMaxGroup + row) * kPitch + d] * wt;
    }
    // an active split has >= 1 key: total >= 1
    if (num_splits == 1) {  // the whole answer: no combine follows a one-split launch
      if (sinks != nullptr)  // the head's sink, in the log2 units of the scores' max
        total += exp2f(fmaf(__bfloat162float(sinks[h0 + row]), kLog2e, -ref));
      float v = acc / total;
      if constexpr (kGated)  // its output gate (as merge_splits_spread gates it)
        v = atlas::sigmoid_gated(atlas::round_bf16(v),
                                 __bfloat162float(gate_row[static_cast<size_t>(row) *
                                                               rope.q_pitch + d]));
      if (d < proj_dim) out[out_row(row) * proj_dim + d] = __float2bfloat16_rn(v);
      continue;
    }
    const size_t part_row = out_row(row) * num_splits + split;
    part_o[part_row * D + d] = acc / total;
    if (d == 0) {
      part_ml[part_row * 2] = mx * kLn2;
      part_ml[part_row * 2 + 1] = total;
    }
  }
  tr.mark(kTraceBlockMerged);
  // The late gated entries trigger here, past the block's merge and partial stores: at the
  // last tile (as the others) o_proj's 16.8 MB of weights (Qwen3.5-35B-A3B) flooded DRAM under
  // those stores, 2.6 -> 7.1 us of each block (gpu160's graph-mode trace); from here they
  // stream under the split merge only
  if constexpr (kLateTrigger && kGated) atlas::pdl_launch_dependents();
  if (num_splits > 1 && counters != nullptr) {
    if constexpr (kGated)
      merge_splits_spread<D>(part_o, part_ml, counters + 2 * (static_cast<size_t>(b) * hkv + kvh),
                             out, out_row, group, num_splits, active, split, proj_dim, gate_row,
                             rope.q_pitch, tr);
    else
      merge_splits_if_last<D>(part_o, part_ml, counters + static_cast<size_t>(b) * hkv + kvh, out,
                              out_row, group, num_splits, active, proj_dim,
                              sinks != nullptr ? sinks + h0 : nullptr);
  }
  tr.mark(kTraceMerged);
  tr.mark(kTraceEnd);
}

}  // namespace

// Two blocks per SM at D = 128 (96 KiB rings): 2 x 2 tiles x 32 KiB of K/V in flight per SM.
extern "C" __global__ void __launch_bounds__(kThreads, 2)
    decode_attn_long_bf16(const __nv_bfloat16* q, const __nv_bfloat16* k_cache,
                          const __nv_bfloat16* v_cache, const int* block_tables,
                          const int* kv_lens, float* part_o, float* part_ml,
                          unsigned* counters, __nv_bfloat16* out, uint32_t num_seqs,
                          uint32_t hq, uint32_t hkv, uint32_t head_dim, uint32_t block_size,
                          uint32_t max_blocks, uint32_t num_splits, float scale,
                          uint32_t window, uint32_t proj_dim, const __nv_bfloat16* sinks) {
  extern __shared__ __align__(128) __nv_bfloat16 long_smem[];
  atlas::pdl_enter();  // q, kv_lens, the tables and the cache come from earlier work
  const int ns = static_cast<int>(num_splits), w = static_cast<int>(window);
  const int pd = static_cast<int>(proj_dim);
  if (head_dim == 128)
    decode_attn_long<128>(q, k_cache, v_cache, block_tables, kv_lens, part_o, part_ml,
                          counters, out, hq, hkv, block_size, max_blocks, ns, scale, w, pd,
                          sinks, long_smem);
  else if (head_dim == 64)
    decode_attn_long<64>(q, k_cache, v_cache, block_tables, kv_lens, part_o, part_ml,
                         counters, out, hq, hkv, block_size, max_blocks, ns, scale, w, pd,
                         sinks, long_smem);
  else
    __trap();  // ops/attention_long.py long_kernel_for
}

// D = 256 (Qwen3.5's gated attention): one block per SM (a 192 KiB ring, 2 tiles x 64 KiB in
// flight), Q in shared memory; its own entry so the D-128 kernel keeps its register budget.
extern "C" __global__ void __launch_bounds__(kThreads, 1)
    decode_attn_long_d256_bf16(const __nv_bfloat16* q, const __nv_bfloat16* k_cache,
                               const __nv_bfloat16* v_cache, const int* block_tables,
                               const int* kv_lens, float* part_o, float* part_ml,
                               unsigned* counters, __nv_bfloat16* out, uint32_t num_seqs,
                               uint32_t hq, uint32_t hkv, uint32_t head_dim,
                               uint32_t block_size, uint32_t max_blocks, uint32_t num_splits,
                               float scale, uint32_t window, uint32_t proj_dim,
                               const __nv_bfloat16* sinks) {
  extern __shared__ __align__(128) __nv_bfloat16 long_smem[];
  atlas::pdl_enter();  // q, kv_lens, the tables and the cache come from earlier work
  if (head_dim != 256) __trap();  // ops/attention_long.py long_kernel_for
  decode_attn_long<256>(q, k_cache, v_cache, block_tables, kv_lens, part_o, part_ml, counters,
                        out, hq, hkv, block_size, max_blocks, static_cast<int>(num_splits),
                        scale, static_cast<int>(window), static_cast<int>(proj_dim), sinks,
                        long_smem);
}

// The rope-fused entries' body (after the entry's wait, or with kEarly its own): kStaged
// selects the prologue, kLateTrigger where the block lets the next kernel launch
// (LateTrigger), kEarly where it waits (RopeEarly); kOnlyD (0: both) the one head dim
// compiled in (the _d128 / _d64 entries). kExact: heads of D elements and no
// sinks as constants (the _exact entries, ops/attention_long.py exact_heads): the batch-1
// latency chain runs this code once per layer on every SM, and the runtime proj_dim and
// sinks grew the early entry's SASS from 8,640 to 9,136 instructions (gpu124: the rope
// phase 1.16 -> 1.61 us); the caller's proj_dim and sinks must be D and null.
template <bool kStaged, bool kLateTrigger = false, bool kEarly = false, class Tr = NoTrace,
          bool kExact = false, int kOnlyD = 0, bool kGated = false>
__device__ __forceinline__ void decode_attn_long_rope_entry(
    const __nv_bfloat16* qkv, __nv_bfloat16* k_cache, __nv_bfloat16* v_cache,
    const __nv_bfloat16* q_norm_w, const __nv_bfloat16* k_norm_w, const float* cos_sin,
    const int* positions, const int* slots, const int* block_tables, const int* kv_lens,
    float* part_o, float* part_ml, unsigned* counters, __nv_bfloat16* out, uint32_t hq,
    uint32_t hkv, uint32_t head_dim, uint32_t block_size, uint32_t max_blocks,
    uint32_t num_splits, float scale, float eps, uint32_t window, uint32_t proj_dim,
    const __nv_bfloat16* sinks, __nv_bfloat16* smem,
    unsigned long long* trace = nullptr, uint32_t q_pitch = 0, uint32_t rotary_dim = 0,
    bool norm_offset = false) {
  const LongRope rope{qkv,       k_cache,   v_cache, q_norm_w,
                      k_norm_w,  cos_sin,   positions, slots,
                      eps,       static_cast<int>(q_pitch), static_cast<int>(rotary_dim),
                      norm_offset};
  const int ns = static_cast<int>(num_splits), w = static_cast<int>(window);
  const int pd = static_cast<int>(proj_dim);
  if (kExact && (proj_dim != head_dim || sinks != nullptr))
    __trap();  // ops/attention_long.py exact_heads
  if ((kOnlyD == 0 || kOnlyD == 128) && head_dim == 128)
    decode_attn_long<128, true, kStaged, kLateTrigger, kEarly, Tr>(
        nullptr, k_cache, v_cache, block_tables, kv_lens, part_o, part_ml, counters, out, hq,
        hkv, block_size, max_blocks, ns, scale, w, kExact ? 128 : pd, kExact ? nullptr : sinks,
        smem, rope, trace);
  else if ((kOnlyD == 0 || kOnlyD == 64) && head_dim == 64)
    decode_attn_long<64, true, kStaged, kLateTrigger, kEarly, Tr>(
        nullptr, k_cache, v_cache, block_tables, kv_lens, part_o, part_ml, counters, out, hq,
        hkv, block_size, max_blocks, ns, scale, w, kExact ? 64 : pd, kExact ? nullptr : sinks,
        smem, rope, trace);
  else if (kOnlyD == 256 && head_dim == 256)  // the gated entries' own dim (one block an SM)
    decode_attn_long<256, true, kStaged, kLateTrigger, kEarly, Tr, kGated>(
        nullptr, k_cache, v_cache, block_tables, kv_lens, part_o, part_ml, counters, out, hq,
        hkv, block_size, max_blocks, ns, scale, w, kExact ? 256 : pd, kExact ? nullptr : sinks,
        smem, rope, trace);
  else
    __trap();  // ops/attention_long.py LONG_ROPE_HEAD_DIMS
}

// Batched decode of one token per sequence with the q/k norm, RoPE and K/V append of
// qk_norm_rope_kv_bf16 done by the blocks (D 64 / 128, the classic qkv layout: full rotation,
// plain or no norm weights; ops/attention.py decode_attention_rope): waits for the qkv
// projection on entry, no reads before it, and norms and rotates each row from global memory.
extern "C" __global__ void __launch_bounds__(kThreads, 2)
    decode_attn_long_rope_wait_bf16(const __nv_bfloat16* qkv, __nv_bfloat16* k_cache,
                                    __nv_bfloat16* v_cache, const __nv_bfloat16* q_norm_w,
                                    const __nv_bfloat16* k_norm_w, const float* cos_sin,
                                    const int* positions, const int* slots,
                                    const int* block_tables, const int* kv_lens,
                                    float* part_o, float* part_ml, unsigned* counters,
                                    __nv_bfloat16* out, uint32_t num_seqs, uint32_t hq,
                                    uint32_t hkv, uint32_t head_dim, uint32_t block_size,
                                    uint32_t max_blocks, uint32_t num_splits, float scale,
                                    float eps, uint32_t window, uint32_t proj_dim,
                                    const __nv_bfloat16* sinks) {
  extern __shared__ __align__(128) __nv_bfloat16 long_smem[];
  atlas::pdl_enter();
  decode_attn_long_rope_entry<false>(qkv, k_cache, v_cache, q_norm_w, k_norm_w, cos_sin,
                                     positions, slots, block_tables, kv_lens, part_o, part_ml,
                                     counters, out, hq, hkv, head_dim, block_size, max_blocks,
                                     num_splits, scale, eps, window, proj_dim, sinks, long_smem);
}

// RopeStaged (ATLAS_DECODE_ATTN_LONG_STAGED=1): decode_attn_long_rope_wait_bf16 with the
// prologue's reads in two trips after the same wait on entry: kv_len, the row's slot and
// position (and a one-split launch's first table entries) in the first; the first tiles, the
// group's q rows and the step's k and v rows, the norm weights and the position's cos/sin row
// in the second (16-byte loads into registers, then into Q and the stage); the norms and
// rotations then read only shared memory. The outputs are the waiting entry's bits (the same
// rope_core.cuh arithmetic on the same values, the same loop).
extern "C" __global__ void __launch_bounds__(kThreads, 2)
    decode_attn_long_rope_staged_bf16(const __nv_bfloat16* qkv, __nv_bfloat16* k_cache,
                                      __nv_bfloat16* v_cache, const __nv_bfloat16* q_norm_w,
                                      const __nv_bfloat16* k_norm_w, const float* cos_sin,
                                      const int* positions, const int* slots,
                                      const int* block_tables, const int* kv_lens,
                                      float* part_o, float* part_ml, unsigned* counters,
                                      __nv_bfloat16* out, uint32_t num_seqs, uint32_t hq,
                                      uint32_t hkv, uint32_t head_dim, uint32_t block_size,
                                      uint32_t max_blocks, uint32_t num_splits, float scale,
                                      float eps, uint32_t window, uint32_t proj_dim,
                                      const __nv_bfloat16* sinks) {
  extern __shared__ __align__(128) __nv_bfloat16 long_smem[];
  atlas::pdl_enter();
  decode_attn_long_rope_entry<true>(qkv, k_cache, v_cache, q_norm_w, k_norm_w, cos_sin,
                                    positions, slots, block_tables, kv_lens, part_o, part_ml,
                                    counters, out, hq, hkv, head_dim, block_size, max_blocks,
                                    num_splits, scale, eps, window, proj_dim, sinks, long_smem);
}

// The staged entry's twins for heads of D elements without sinks holding one head dim's code
// (kExact, kOnlyD; opt-in ATLAS_DECODE_ATTN_LONG_BATCHED_ONE_DIM=1, ops/attention_long.py
// long_rope_kernel_for): batch 1's early twins of this kind ran 8% faster a Qwen3-0.6B step
// (gpu129, 5,216 SASS instructions against 8,648); a batch of a few sequences runs a block or
// two a SM too. The same outputs; proj_dim must be head_dim, sinks null.
extern "C" __global__ void __launch_bounds__(kThreads, 2)
    decode_attn_long_rope_staged_exact_d128_bf16(
        const __nv_bfloat16* qkv, __nv_bfloat16* k_cache, __nv_bfloat16* v_cache,
        const __nv_bfloat16* q_norm_w, const __nv_bfloat16* k_norm_w, const float* cos_sin,
        const int* positions, const int* slots, const int* block_tables, const int* kv_lens,
        float* part_o, float* part_ml, unsigned* counters, __nv_bfloat16* out,
        uint32_t num_seqs, uint32_t hq, uint32_t hkv, uint32_t head_dim, uint32_t block_size,
        uint32_t max_blocks, uint32_t num_splits, float scale, float eps, uint32_t window,
        uint32_t proj_dim, const __nv_bfloat16* sinks) {
  extern __shared__ __align__(128) __nv_bfloat16 long_smem[];
  atlas::pdl_enter();
  decode_attn_long_rope_entry<true, false, false, NoTrace, true, 128>(
      qkv, k_cache, v_cache, q_norm_w, k_norm_w, cos_sin, positions, slots, block_tables,
      kv_lens, part_o, part_ml, counters, out, hq, hkv, head_dim, block_size, max_blocks,
      num_splits, scale, eps, window, proj_dim, sinks, long_smem);
}

extern "C" __global__ void __launch_bounds__(kThreads, 2)
    decode_attn_long_rope_staged_exact_d64_bf16(
        const __nv_bfloat16* qkv, __nv_bfloat16* k_cache, __nv_bfloat16* v_cache,
        const __nv_bfloat16* q_norm_w, const __nv_bfloat16* k_norm_w, const float* cos_sin,
        const int* positions, const int* slots, const int* block_tables, const int* kv_lens,
        float* part_o, float* part_ml, unsigned* counters, __nv_bfloat16* out,
        uint32_t num_seqs, uint32_t hq, uint32_t hkv, uint32_t head_dim, uint32_t block_size,
        uint32_t max_blocks, uint32_t num_splits, float scale, float eps, uint32_t window,
        uint32_t proj_dim, const __nv_bfloat16* sinks) {
  extern __shared__ __align__(128) __nv_bfloat16 long_smem[];
  atlas::pdl_enter();
  decode_attn_long_rope_entry<true, false, false, NoTrace, true, 64>(
      qkv, k_cache, v_cache, q_norm_w, k_norm_w, cos_sin, positions, slots, block_tables,
      kv_lens, part_o, part_ml, counters, out, hq, hkv, head_dim, block_size, max_blocks,
      num_splits, scale, eps, window, proj_dim, sinks, long_smem);
}

// LateTrigger (ATLAS_DECODE_ATTN_LONG_LATE_TRIGGER=1): decode_attn_long_rope_staged_bf16 that
// lets the next kernel launch only once its K/V tiles have landed (an inactive split, which
// exits early, counts as triggered) instead of on entry: the o_proj GEMV's blocks request all
// of their weights before their wait, and at batch 1 that flood (16.8 MB on Qwen3-30B-A3B)
// otherwise lands while this kernel's K/V and L2 trips are in flight. The same outputs.
extern "C" __global__ void __launch_bounds__(kThreads, 2)
    decode_attn_long_rope_late_bf16(const __nv_bfloat16* qkv, __nv_bfloat16* k_cache,
                                    __nv_bfloat16* v_cache, const __nv_bfloat16* q_norm_w,
                                    const __nv_bfloat16* k_norm_w, const float* cos_sin,
                                    const int* positions, const int* slots,
                                    const int* block_tables, const int* kv_lens,
                                    float* part_o, float* part_ml, unsigned* counters,
                                    __nv_bfloat16* out, uint32_t num_seqs, uint32_t hq,
                                    uint32_t hkv, uint32_t head_dim, uint32_t block_size,
                                    uint32_t max_blocks, uint32_t num_splits, float scale,
                                    float eps, uint32_t window, uint32_t proj_dim,
                                    const __nv_bfloat16* sinks) {
  extern __shared__ __align__(128) __nv_bfloat16 long_smem[];
  atlas::pdl_wait();  // the trigger follows the K/V tiles (decode_attn_long kLateTrigger)
  decode_attn_long_rope_entry<true, true>(qkv, k_cache, v_cache, q_norm_w, k_norm_w, cos_sin,
                                          positions, slots, block_tables, kv_lens, part_o,
                                          part_ml, counters, out, hq, hkv, head_dim,
                                          block_size, max_blocks, num_splits, scale, eps,
                                          window, proj_dim, sinks, long_smem);
}

// RopeEarly (one sequence, ATLAS_DECODE_ATTN_LONG_EARLY; ops/attention_long.py
// long_rope_kernel_for): the staged entry with everything but the qkv rows read before the
// PDL wait: kv_len, the row's slot and position, the block-table entries, the ring's first
// tiles (cp.async) and the norm weights and cos/sin row, so after the wait only the rows (L2
// hits: the projection just wrote them) stand between the block and its keys. Sound for the
// reason decode_attn.cuh's RopedQ gives: every kernel lets its dependents launch only after
// its own wait, so while this block runs before its wait only the kernel launched just
// before it may still run, and the model launches this right after the layer's qkv
// projection (model.py _attention_after_qkv, decode steps), which writes only the qkv rows;
// the step inputs come from copies ahead of the step, and every cached row copied here was
// written by an earlier step's launch of this layer, except the step's own key, which is
// never copied (it is substituted from the rows). Nothing is written before the wait. With
// SplitMerge its splits are whole 64-key tiles (early_split_rule). _late: the trigger of
// decode_attn_long_rope_late_bf16 (after the K/V tiles landed).
extern "C" __global__ void __launch_bounds__(kThreads, 2)
    decode_attn_long_rope_early_bf16(const __nv_bfloat16* qkv, __nv_bfloat16* k_cache,
                                     __nv_bfloat16* v_cache, const __nv_bfloat16* q_norm_w,
                                     const __nv_bfloat16* k_norm_w, const float* cos_sin,
                                     const int* positions, const int* slots,
                                     const int* block_tables, const int* kv_lens,
                                     float* part_o, float* part_ml, unsigned* counters,
                                     __nv_bfloat16* out, uint32_t num_seqs, uint32_t hq,
                                     uint32_t hkv, uint32_t head_dim, uint32_t block_size,
                                     uint32_t max_blocks, uint32_t num_splits, float scale,
                                     float eps, uint32_t window, uint32_t proj_dim,
                                     const __nv_bfloat16* sinks) {
  extern __shared__ __align__(128) __nv_bfloat16 long_smem[];
  decode_attn_long_rope_entry<true, false, true>(
      qkv, k_cache, v_cache, q_norm_w, k_norm_w, cos_sin, positions, slots, block_tables,
      kv_lens, part_o, part_ml, counters, out, hq, hkv, head_dim, block_size, max_blocks,
      num_splits, scale, eps, window, proj_dim, sinks, long_smem);
}

extern "C" __global__ void __launch_bounds__(kThreads, 2)
    decode_attn_long_rope_early_late_bf16(const __nv_bfloat16* qkv, __nv_bfloat16* k_cache,
                                          __nv_bfloat16* v_cache,
                                          const __nv_bfloat16* q_norm_w,
                                          const __nv_bfloat16* k_norm_w, const float* cos_sin,
                                          const int* positions, const int* slots,
                                          const int* block_tables, const int* kv_lens,
                                          float* part_o, float* part_ml, unsigned* counters,
                                          __nv_bfloat16* out, uint32_t num_seqs, uint32_t hq,
                                          uint32_t hkv, uint32_t head_dim, uint32_t block_size,
                                          uint32_t max_blocks, uint32_t num_splits,
                                          float scale, float eps, uint32_t window,
                                          uint32_t proj_dim, const __nv_bfloat16* sinks) {
  extern __shared__ __align__(128) __nv_bfloat16 long_smem[];
  decode_attn_long_rope_entry<true, true, true>(
      qkv, k_cache, v_cache, q_norm_w, k_norm_w, cos_sin, positions, slots, block_tables,
      kv_lens, part_o, part_ml, counters, out, hq, hkv, head_dim, block_size, max_blocks,
      num_splits, scale, eps, window, proj_dim, sinks, long_smem);
}

// The early entries' twins for heads of D elements without sinks (kExact: every model but
// padded heads and gpt-oss; ops/attention_long.py long_rope_kernel_for): the same outputs
// from the code these entries had before proj_dim and sinks. _d128 / _d64: one head dim's
// code only (kOnlyD; the both-dims entries hold 8,648 instructions, one dim's ~5,200).
extern "C" __global__ void __launch_bounds__(kThreads, 2)
    decode_attn_long_rope_early_exact_bf16(
        const __nv_bfloat16* qkv, __nv_bfloat16* k_cache, __nv_bfloat16* v_cache,
        const __nv_bfloat16* q_norm_w, const __nv_bfloat16* k_norm_w, const float* cos_sin,
        const int* positions, const int* slots, const int* block_tables, const int* kv_lens,
        float* part_o, float* part_ml, unsigned* counters, __nv_bfloat16* out,
        uint32_t num_seqs, uint32_t hq, uint32_t hkv, uint32_t head_dim, uint32_t block_size,
        uint32_t max_blocks, uint32_t num_splits, float scale, float eps, uint32_t window,
        uint32_t proj_dim, const __nv_bfloat16* sinks) {
  extern __shared__ __align__(128) __nv_bfloat16 long_smem[];
  decode_attn_long_rope_entry<true, false, true, NoTrace, true>(
      qkv, k_cache, v_cache, q_norm_w, k_norm_w, cos_sin, positions, slots, block_tables,
      kv_lens, part_o, part_ml, counters, out, hq, hkv, head_dim, block_size, max_blocks,
      num_splits, scale, eps, window, proj_dim, sinks, long_smem);
}

extern "C" __global__ void __launch_bounds__(kThreads, 2)
    decode_attn_long_rope_early_late_exact_bf16(
        const __nv_bfloat16* qkv, __nv_bfloat16* k_cache, __nv_bfloat16* v_cache,
        const __nv_bfloat16* q_norm_w, const __nv_bfloat16* k_norm_w, const float* cos_sin,
        const int* positions, const int* slots, const int* block_tables, const int* kv_lens,
        float* part_o, float* part_ml, unsigned* counters, __nv_bfloat16* out,
        uint32_t num_seqs, uint32_t hq, uint32_t hkv, uint32_t head_dim, uint32_t block_size,
        uint32_t max_blocks, uint32_t num_splits, float scale, float eps, uint32_t window,
        uint32_t proj_dim, const __nv_bfloat16* sinks) {
  extern __shared__ __align__(128) __nv_bfloat16 long_smem[];
  decode_attn_long_rope_entry<true, true, true, NoTrace, true>(
      qkv, k_cache, v_cache, q_norm_w, k_norm_w, cos_sin, positions, slots, block_tables,
      kv_lens, part_o, part_ml, counters, out, hq, hkv, head_dim, block_size, max_blocks,
      num_splits, scale, eps, window, proj_dim, sinks, long_smem);
}

extern "C" __global__ void __launch_bounds__(kThreads, 2)
    decode_attn_long_rope_early_exact_d128_bf16(
        const __nv_bfloat16* qkv, __nv_bfloat16* k_cache, __nv_bfloat16* v_cache,
        const __nv_bfloat16* q_norm_w, const __nv_bfloat16* k_norm_w, const float* cos_sin,
        const int* positions, const int* slots, const int* block_tables, const int* kv_lens,
        float* part_o, float* part_ml, unsigned* counters, __nv_bfloat16* out,
        uint32_t num_seqs, uint32_t hq, uint32_t hkv, uint32_t head_dim, uint32_t block_size,
        uint32_t max_blocks, uint32_t num_splits, float scale, float eps, uint32_t window,
        uint32_t proj_dim, const __nv_bfloat16* sinks) {
  extern __shared__ __align__(128) __nv_bfloat16 long_smem[];
  decode_attn_long_rope_entry<true, false, true, NoTrace, true, 128>(
      qkv, k_cache, v_cache, q_norm_w, k_norm_w, cos_sin, positions, slots, block_tables,
      kv_lens, part_o, part_ml, counters, out, hq, hkv, head_dim, block_size, max_blocks,
      num_splits, scale, eps, window, proj_dim, sinks, long_smem);
}

extern "C" __global__ void __launch_bounds__(kThreads, 2)
    decode_attn_long_rope_early_late_exact_d128_bf16(
        const __nv_bfloat16* qkv, __nv_bfloat16* k_cache, __nv_bfloat16* v_cache,
        const __nv_bfloat16* q_norm_w, const __nv_bfloat16* k_norm_w, const float* cos_sin,
        const int* positions, const int* slots, const int* block_tables, const int* kv_lens,
        float* part_o, float* part_ml, unsigned* counters, __nv_bfloat16* out,
        uint32_t num_seqs, uint32_t hq, uint32_t hkv, uint32_t head_dim, uint32_t block_size,
        uint32_t max_blocks, uint32_t num_splits, float scale, float eps, uint32_t window,
        uint32_t proj_dim, const __nv_bfloat16* sinks) {
  extern __shared__ __align__(128) __nv_bfloat16 long_smem[];
  decode_attn_long_rope_entry<true, true, true, NoTrace, true, 128>(
      qkv, k_cache, v_cache, q_norm_w, k_norm_w, cos_sin, positions, slots, block_tables,
      kv_lens, part_o, part_ml, counters, out, hq, hkv, head_dim, block_size, max_blocks,
      num_splits, scale, eps, window, proj_dim, sinks, long_smem);
}

extern "C" __global__ void __launch_bounds__(kThreads, 2)
    decode_attn_long_rope_early_exact_d64_bf16(
        const __nv_bfloat16* qkv, __nv_bfloat16* k_cache, __nv_bfloat16* v_cache,
        const __nv_bfloat16* q_norm_w, const __nv_bfloat16* k_norm_w, const float* cos_sin,
        const int* positions, const int* slots, const int* block_tables, const int* kv_lens,
        float* part_o, float* part_ml, unsigned* counters, __nv_bfloat16* out,
        uint32_t num_seqs, uint32_t hq, uint32_t hkv, uint32_t head_dim, uint32_t block_size,
        uint32_t max_blocks, uint32_t num_splits, float scale, float eps, uint32_t window,
        uint32_t proj_dim, const __nv_bfloat16* sinks) {
  extern __shared__ __align__(128) __nv_bfloat16 long_smem[];
  decode_attn_long_rope_entry<true, false, true, NoTrace, true, 64>(
      qkv, k_cache, v_cache, q_norm_w, k_norm_w, cos_sin, positions, slots, block_tables,
      kv_lens, part_o, part_ml, counters, out, hq, hkv, head_dim, block_size, max_blocks,
      num_splits, scale, eps, window, proj_dim, sinks, long_smem);
}

extern "C" __global__ void __launch_bounds__(kThreads, 2)
    decode_attn_long_rope_early_late_exact_d64_bf16(
        const __nv_bfloat16* qkv, __nv_bfloat16* k_cache, __nv_bfloat16* v_cache,
        const __nv_bfloat16* q_norm_w, const __nv_bfloat16* k_norm_w, const float* cos_sin,
        const int* positions, const int* slots, const int* block_tables, const int* kv_lens,
        float* part_o, float* part_ml, unsigned* counters, __nv_bfloat16* out,
        uint32_t num_seqs, uint32_t hq, uint32_t hkv, uint32_t head_dim, uint32_t block_size,
        uint32_t max_blocks, uint32_t num_splits, float scale, float eps, uint32_t window,
        uint32_t proj_dim, const __nv_bfloat16* sinks) {
  extern __shared__ __align__(128) __nv_bfloat16 long_smem[];
  decode_attn_long_rope_entry<true, true, true, NoTrace, true, 64>(
      qkv, k_cache, v_cache, q_norm_w, k_norm_w, cos_sin, positions, slots, block_tables,
      kv_lens, part_o, part_ml, counters, out, hq, hkv, head_dim, block_size, max_blocks,
      num_splits, scale, eps, window, proj_dim, sinks, long_smem);
}

// The general early entries compiled for one head dim (padded heads, sinks; kOnlyD,
// ATLAS_DECODE_ATTN_LONG_ONE_DIM): the same outputs.
extern "C" __global__ void __launch_bounds__(kThreads, 2)
    decode_attn_long_rope_early_d128_bf16(
        const __nv_bfloat16* qkv, __nv_bfloat16* k_cache, __nv_bfloat16* v_cache,
        const __nv_bfloat16* q_norm_w, const __nv_bfloat16* k_norm_w, const float* cos_sin,
        const int* positions, const int* slots, const int* block_tables, const int* kv_lens,
        float* part_o, float* part_ml, unsigned* counters, __nv_bfloat16* out,
        uint32_t num_seqs, uint32_t hq, uint32_t hkv, uint32_t head_dim, uint32_t block_size,
        uint32_t max_blocks, uint32_t num_splits, float scale, float eps, uint32_t window,
        uint32_t proj_dim, const __nv_bfloat16* sinks) {
  extern __shared__ __align__(128) __nv_bfloat16 long_smem[];
  decode_attn_long_rope_entry<true, false, true, NoTrace, false, 128>(
      qkv, k_cache, v_cache, q_norm_w, k_norm_w, cos_sin, positions, slots, block_tables,
      kv_lens, part_o, part_ml, counters, out, hq, hkv, head_dim, block_size, max_blocks,
      num_splits, scale, eps, window, proj_dim, sinks, long_smem);
}

extern "C" __global__ void __launch_bounds__(kThreads, 2)
    decode_attn_long_rope_early_late_d128_bf16(
        const __nv_bfloat16* qkv, __nv_bfloat16* k_cache, __nv_bfloat16* v_cache,
        const __nv_bfloat16* q_norm_w, const __nv_bfloat16* k_norm_w, const float* cos_sin,
        const int* positions, const int* slots, const int* block_tables, const int* kv_lens,
        float* part_o, float* part_ml, unsigned* counters, __nv_bfloat16* out,
        uint32_t num_seqs, uint32_t hq, uint32_t hkv, uint32_t head_dim, uint32_t block_size,
        uint32_t max_blocks, uint32_t num_splits, float scale, float eps, uint32_t window,
        uint32_t proj_dim, const __nv_bfloat16* sinks) {
  extern __shared__ __align__(128) __nv_bfloat16 long_smem[];
  decode_attn_long_rope_entry<true, true, true, NoTrace, false, 128>(
      qkv, k_cache, v_cache, q_norm_w, k_norm_w, cos_sin, positions, slots, block_tables,
      kv_lens, part_o, part_ml, counters, out, hq, hkv, head_dim, block_size, max_blocks,
      num_splits, scale, eps, window, proj_dim, sinks, long_smem);
}

extern "C" __global__ void __launch_bounds__(kThreads, 2)
    decode_attn_long_rope_early_d64_bf16(
        const __nv_bfloat16* qkv, __nv_bfloat16* k_cache, __nv_bfloat16* v_cache,
        const __nv_bfloat16* q_norm_w, const __nv_bfloat16* k_norm_w, const float* cos_sin,
        const int* positions, const int* slots, const int* block_tables, const int* kv_lens,
        float* part_o, float* part_ml, unsigned* counters, __nv_bfloat16* out,
        uint32_t num_seqs, uint32_t hq, uint32_t hkv, uint32_t head_dim, uint32_t block_size,
        uint32_t max_blocks, uint32_t num_splits, float scale, float eps, uint32_t window,
        uint32_t proj_dim, const __nv_bfloat16* sinks) {
  extern __shared__ __align__(128) __nv_bfloat16 long_smem[];
  decode_attn_long_rope_entry<true, false, true, NoTrace, false, 64>(
      qkv, k_cache, v_cache, q_norm_w, k_norm_w, cos_sin, positions, slots, block_tables,
      kv_lens, part_o, part_ml, counters, out, hq, hkv, head_dim, block_size, max_blocks,
      num_splits, scale, eps, window, proj_dim, sinks, long_smem);
}

extern "C" __global__ void __launch_bounds__(kThreads, 2)
    decode_attn_long_rope_early_late_d64_bf16(
        const __nv_bfloat16* qkv, __nv_bfloat16* k_cache, __nv_bfloat16* v_cache,
        const __nv_bfloat16* q_norm_w, const __nv_bfloat16* k_norm_w, const float* cos_sin,
        const int* positions, const int* slots, const int* block_tables, const int* kv_lens,
        float* part_o, float* part_ml, unsigned* counters, __nv_bfloat16* out,
        uint32_t num_seqs, uint32_t hq, uint32_t hkv, uint32_t head_dim, uint32_t block_size,
        uint32_t max_blocks, uint32_t num_splits, float scale, float eps, uint32_t window,
        uint32_t proj_dim, const __nv_bfloat16* sinks) {
  extern __shared__ __align__(128) __nv_bfloat16 long_smem[];
  decode_attn_long_rope_entry<true, true, true, NoTrace, false, 64>(
      qkv, k_cache, v_cache, q_norm_w, k_norm_w, cos_sin, positions, slots, block_tables,
      kv_lens, part_o, part_ml, counters, out, hq, hkv, head_dim, block_size, max_blocks,
      num_splits, scale, eps, window, proj_dim, sinks, long_smem);
}

// The early exact D-128 entry's phase-traced twin (tools/gpu/trace_decode_attn.py --long;
// heads of 128 elements, no sinks): thread 0 of every block stamps phase_trace.cuh's phases into u64 trace[block][kTraceWords] (block = (z
// * gridDim.y + y) * gridDim.x + x; zero the buffer first). Loaded: the first tile landed (in
// the loop, after the wait); QReady: the rows normed and rotated; Merged: past the split
// merge's ticket (the last block: past the merge too). The same outputs.
extern "C" __global__ void __launch_bounds__(kThreads, 2)
    decode_attn_long_rope_early_trace_bf16(
        const __nv_bfloat16* qkv, __nv_bfloat16* k_cache, __nv_bfloat16* v_cache,
        const __nv_bfloat16* q_norm_w, const __nv_bfloat16* k_norm_w, const float* cos_sin,
        const int* positions, const int* slots, const int* block_tables, const int* kv_lens,
        float* part_o, float* part_ml, unsigned* counters, __nv_bfloat16* out,
        uint32_t num_seqs, uint32_t hq, uint32_t hkv, uint32_t head_dim, uint32_t block_size,
        uint32_t max_blocks, uint32_t num_splits, float scale, float eps, uint32_t window,
        uint32_t proj_dim, const __nv_bfloat16* sinks, unsigned long long* trace) {
  extern __shared__ __align__(128) __nv_bfloat16 long_smem[];
  decode_attn_long_rope_entry<true, false, true, PhaseTrace, true, 128>(
      qkv, k_cache, v_cache, q_norm_w, k_norm_w, cos_sin, positions, slots, block_tables,
      kv_lens, part_o, part_ml, counters, out, hq, hkv, head_dim, block_size, max_blocks,
      num_splits, scale, eps, window, proj_dim, sinks, long_smem, trace);
}

// The late-trigger early exact D-128 entry's phase-traced twin (what batch 1 runs before an
// o_proj of attention_long.py LATE_TRIGGER_MIN_O_BYTES and more: Qwen3-30B-A3B, Qwen3-8B):
// the stamps of decode_attn_long_rope_early_trace_bf16. The same outputs.
extern "C" __global__ void __launch_bounds__(kThreads, 2)
    decode_attn_long_rope_early_late_trace_bf16(
        const __nv_bfloat16* qkv, __nv_bfloat16* k_cache, __nv_bfloat16* v_cache,
        const __nv_bfloat16* q_norm_w, const __nv_bfloat16* k_norm_w, const float* cos_sin,
        const int* positions, const int* slots, const int* block_tables, const int* kv_lens,
        float* part_o, float* part_ml, unsigned* counters, __nv_bfloat16* out,
        uint32_t num_seqs, uint32_t hq, uint32_t hkv, uint32_t head_dim, uint32_t block_size,
        uint32_t max_blocks, uint32_t num_splits, float scale, float eps, uint32_t window,
        uint32_t proj_dim, const __nv_bfloat16* sinks, unsigned long long* trace) {
  extern __shared__ __align__(128) __nv_bfloat16 long_smem[];
  decode_attn_long_rope_entry<true, true, true, PhaseTrace, true, 128>(
      qkv, k_cache, v_cache, q_norm_w, k_norm_w, cos_sin, positions, slots, block_tables,
      kv_lens, part_o, part_ml, counters, out, hq, hkv, head_dim, block_size, max_blocks,
      num_splits, scale, eps, window, proj_dim, sinks, long_smem, trace);
}

// The staged entry's phase-traced twin (batches: trace_decode_attn.py --long's batch-64 row): the
// stamps of decode_attn_long_rope_early_trace_bf16, taken after the entry's wait (its `start`
// is the wait's return; no `waited` stamp). The same outputs.
extern "C" __global__ void __launch_bounds__(kThreads, 2)
    decode_attn_long_rope_staged_trace_bf16(
        const __nv_bfloat16* qkv, __nv_bfloat16* k_cache, __nv_bfloat16* v_cache,
        const __nv_bfloat16* q_norm_w, const __nv_bfloat16* k_norm_w, const float* cos_sin,
        const int* positions, const int* slots, const int* block_tables, const int* kv_lens,
        float* part_o, float* part_ml, unsigned* counters, __nv_bfloat16* out,
        uint32_t num_seqs, uint32_t hq, uint32_t hkv, uint32_t head_dim, uint32_t block_size,
        uint32_t max_blocks, uint32_t num_splits, float scale, float eps, uint32_t window,
        uint32_t proj_dim, const __nv_bfloat16* sinks, unsigned long long* trace) {
  extern __shared__ __align__(128) __nv_bfloat16 long_smem[];
  atlas::pdl_enter();
  decode_attn_long_rope_entry<true, false, false, PhaseTrace>(
      qkv, k_cache, v_cache, q_norm_w, k_norm_w, cos_sin, positions, slots, block_tables,
      kv_lens, part_o, part_ml, counters, out, hq, hkv, head_dim, block_size, max_blocks,
      num_splits, scale, eps, window, proj_dim, sinks, long_smem, trace);
}


// The D-256 entry's phase-traced twin (Qwen3.5's gated attention; trace_decode_attn.py
// --long): the stamps of decode_attn_long_rope_staged_trace_bf16, taken after the entry's
// wait (its `start` is the wait's return); no `waited` or `q_ready` stamp (Q is read from
// the q buffer with the first tiles). The same outputs.
extern "C" __global__ void __launch_bounds__(kThreads, 1)
    decode_attn_long_d256_trace_bf16(const __nv_bfloat16* q, const __nv_bfloat16* k_cache,
                                     const __nv_bfloat16* v_cache, const int* block_tables,
                                     const int* kv_lens, float* part_o, float* part_ml,
                                     unsigned* counters, __nv_bfloat16* out, uint32_t num_seqs,
                                     uint32_t hq, uint32_t hkv, uint32_t head_dim,
                                     uint32_t block_size, uint32_t max_blocks,
                                     uint32_t num_splits, float scale, uint32_t window,
                                     uint32_t proj_dim, const __nv_bfloat16* sinks,
                                     unsigned long long* trace) {
  extern __shared__ __align__(128) __nv_bfloat16 long_smem[];
  atlas::pdl_enter();
  if (head_dim != 256) __trap();  // ops/attention_long.py long_kernel_for
  decode_attn_long<256, false, false, false, false, PhaseTrace>(
      q, k_cache, v_cache, block_tables, kv_lens, part_o, part_ml, counters, out, hq, hkv,
      block_size, max_blocks, static_cast<int>(num_splits), scale, static_cast<int>(window),
      static_cast<int>(proj_dim), sinks, long_smem, LongRope{}, trace);
}

// Batch 1 of gated full attention (Qwen3.5, Qwen3-Next; ops/attention_long.py
// decode_attention_long_rope_gated): qk_norm_rope_kv_partial_bf16's work (q heads q_pitch apart,
// each followed by its output gate; the first rotary_dim elements of a head rotating; (1 + w)
// norm weights where norm_offset) done by the early exact prologue at D 256, the splits merged
// by all of them, a share each (SpreadMerge), and each head's output multiplied by its
// sigmoid gate as it is written (sigmoid_gate_mul_bf16's bits): one launch where the step ran
// the rope kernel, attention, the combine and the gate. One block an SM (D 256's ring), heads of D elements, no sinks.
extern "C" __global__ void __launch_bounds__(kThreads, 1)
    decode_attn_long_rope_early_gated_d256_bf16(
        const __nv_bfloat16* qkv, __nv_bfloat16* k_cache, __nv_bfloat16* v_cache,
        const __nv_bfloat16* q_norm_w, const __nv_bfloat16* k_norm_w, const float* cos_sin,
        const int* positions, const int* slots, const int* block_tables, const int* kv_lens,
        float* part_o, float* part_ml, unsigned* counters, __nv_bfloat16* out,
        uint32_t num_seqs, uint32_t hq, uint32_t hkv, uint32_t head_dim, uint32_t block_size,
        uint32_t max_blocks, uint32_t num_splits, float scale, float eps, uint32_t window,
        uint32_t proj_dim, const __nv_bfloat16* sinks, uint32_t q_pitch, uint32_t rotary_dim,
        uint32_t norm_offset) {
  extern __shared__ __align__(128) __nv_bfloat16 long_smem[];
  decode_attn_long_rope_entry<true, false, true, NoTrace, true, 256, true>(
      qkv, k_cache, v_cache, q_norm_w, k_norm_w, cos_sin, positions, slots, block_tables,
      kv_lens, part_o, part_ml, counters, out, hq, hkv, head_dim, block_size, max_blocks,
      num_splits, scale, eps, window, proj_dim, sinks, long_smem, nullptr, q_pitch, rotary_dim,
      norm_offset != 0);
}

// Its late-trigger twin (LateTrigger: the o_proj after it launches once the K/V tiles landed).
extern "C" __global__ void __launch_bounds__(kThreads, 1)
    decode_attn_long_rope_early_late_gated_d256_bf16(
        const __nv_bfloat16* qkv, __nv_bfloat16* k_cache, __nv_bfloat16* v_cache,
        const __nv_bfloat16* q_norm_w, const __nv_bfloat16* k_norm_w, const float* cos_sin,
        const int* positions, const int* slots, const int* block_tables, const int* kv_lens,
        float* part_o, float* part_ml, unsigned* counters, __nv_bfloat16* out,
        uint32_t num_seqs, uint32_t hq, uint32_t hkv, uint32_t head_dim, uint32_t block_size,
        uint32_t max_blocks, uint32_t num_splits, float scale, float eps, uint32_t window,
        uint32_t proj_dim, const __nv_bfloat16* sinks, uint32_t q_pitch, uint32_t rotary_dim,
        uint32_t norm_offset) {
  extern __shared__ __align__(128) __nv_bfloat16 long_smem[];
  decode_attn_long_rope_entry<true, true, true, NoTrace, true, 256, true>(
      qkv, k_cache, v_cache, q_norm_w, k_norm_w, cos_sin, positions, slots, block_tables,
      kv_lens, part_o, part_ml, counters, out, hq, hkv, head_dim, block_size, max_blocks,
      num_splits, scale, eps, window, proj_dim, sinks, long_smem, nullptr, q_pitch, rotary_dim,
      norm_offset != 0);
}

// The late gated entry's phase-traced twin (tools/gpu/trace_decode_attn.py --long --gated):
// decode_attn_long_rope_early_trace_bf16's stamps. The same outputs.
extern "C" __global__ void __launch_bounds__(kThreads, 1)
    decode_attn_long_rope_early_late_gated_trace_d256_bf16(
        const __nv_bfloat16* qkv, __nv_bfloat16* k_cache, __nv_bfloat16* v_cache,
        const __nv_bfloat16* q_norm_w, const __nv_bfloat16* k_norm_w, const float* cos_sin,
        const int* positions, const int* slots, const int* block_tables, const int* kv_lens,
        float* part_o, float* part_ml, unsigned* counters, __nv_bfloat16* out,
        uint32_t num_seqs, uint32_t hq, uint32_t hkv, uint32_t head_dim, uint32_t block_size,
        uint32_t max_blocks, uint32_t num_splits, float scale, float eps, uint32_t window,
        uint32_t proj_dim, const __nv_bfloat16* sinks, uint32_t q_pitch, uint32_t rotary_dim,
        uint32_t norm_offset, unsigned long long* trace) {
  extern __shared__ __align__(128) __nv_bfloat16 long_smem[];
  decode_attn_long_rope_entry<true, true, true, PhaseTrace, true, 256, true>(
      qkv, k_cache, v_cache, q_norm_w, k_norm_w, cos_sin, positions, slots, block_tables,
      kv_lens, part_o, part_ml, counters, out, hq, hkv, head_dim, block_size, max_blocks,
      num_splits, scale, eps, window, proj_dim, sinks, long_smem, trace, q_pitch, rotary_dim,
      norm_offset != 0);
}
