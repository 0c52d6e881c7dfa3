// Split-K decode attention for verification steps on tensor cores: the K + 1 rows a
// speculating sequence feeds (its last token and K drafts, consecutive rows at consecutive
// positions, each attending to its own prefix) read the sequence's K/V ONCE.
//
// decode_attn_bf16 runs such rows as K + 1 separate sequences, so every row's blocks stream
// the whole history again (gpu17: 34.8 us a call at K = 3 vs 16.9 for one row). Here a block
// owns (piece, kv head, split), a piece being up to kMaxStepRows consecutive rows of one
// sequence, and serves every (step row, q head of the group) pair as a row of an mma.m16n8k16
// A tile: row i = step row i / G, head i % G (G = hq / hkv), R = pieces' rows x G <= 64 tile
// rows in one, two or four m16 tiles (Qwen3-8B at K = 3: 4 x 4 = 16 rows, one tile). Each
// row is masked to its own keys, so row j of a piece sees kv_lens[row j] keys as a plain
// decode row would.
//
// Pieces. A row continues the row before it (the same sequence) when its kv_len is one more
// and both rows' block tables name the same block for the earlier row's newest key: that key
// was written in this step by the earlier row, into a block its sequence owns alone (the KV
// cache copies shared blocks before writing), so no other sequence's table names it. A run
// of such rows (found by 32 lanes at once, one load round) is cut into pieces of
// cap = min(kMaxStepRows, 64 / G) rows. Grid z cuts the rows into windows (the model's: a
// sequence's K + 1 rows); a block serves the pieces that start in its window, one after the
// other, and skips the rest of a piece that started before it. gdn_decode.cu groups a
// verification's rows the same way.
//
// Splits. Row j's keys are cut by its own kv_len L_j, the grid's num_splits S and the
// launch's min_chunk C (a multiple of 64) alone: chunk_j = max(ceil(max(ceil(L_j / S), 1) /
// 64) * 64, C) keys (whole 64-key tiles, at least C: a short context's rows then take a few
// splits of several tiles, pipelined through the ring, and merge fewer partials, instead of
// many one-tile splits; ATLAS_DECODE_ATTN_VERIFY_MIN_KEYS), split s covers [s chunk_j,
// min((s + 1) chunk_j, L_j)). A block loads the union of its rows' ranges
// in 64-key tiles at absolute positions (multiples of 64), so a row's arithmetic (which keys
// sit in which lane, the online softmax's order over tiles, its partials) does not depend on
// the other rows of its piece: tiles outside a row's range are fully masked and leave its
// accumulators exactly as they were. With the same tile-row count (R's m-tiles: the warps'
// key slices depend on it) a row computes the same bits in any verification step.
//
// Per block: Q tile and K/V through cp.async (Q in the first commit group, a kStages-deep
// ring of 64-key K and V tiles gathered row by row through the block table, zero-filled past
// the union, table entries read one tile ahead, tile 0's beside the run search's loads),
// 4 warps; with MT m-tiles warp w takes m-tile w % MT and the 16 MT keys at 16 MT (w / MT)
// of every tile, 16 at a time: S = Q K^T
// (ldmatrix), masked to the row's [first, last], online softmax in f32 log2 units
// (attention_tile.cuh), O += P V with P as one bf16 per probability (attention_long.cu's
// rounding: a partial moves by at most 2^-9 max|v|). The warps of an m-tile merge through
// shared memory (the ring, reused). A row whose keys all lie in split 0 (one active split) is
// written to out directly; the others write normalized partials to part_o / part_ml (m in
// log2 units, l) at [row, q head, split] and the last block of the piece's active splits to
// take a ticket merges them per row over that row's own active splits, in split order.
//
// PDL: the run search, the split ranges and tile 0's table entries (kv_lens and the block
// tables only: the host's step upload, which no kernel writes) come before the wait, and tile
// 0's K/V is requested into L2 (prefetch.global.L2, no value read); blocks
// with nothing to do exit there without waiting (the blocks of row 0's split 0 always wait,
// so the next kernel never starts before the one before this has completed).
//
// Launch (ops/attention_verify.py): grid (num_splits, hkv, windows), 128 threads, dynamic
// shared memory VerifyTile<D>::kSmemBytes, min_chunk a positive multiple of 64 (else a trap).
// counters u32 [num_rows, hkv], zero before the launch and left zero. Preconditions:
// head_dim 64, 128 or 256; hq / hkv <= 64; a run of one sequence's rows is at most 32 rows
// (the engine's are K + 1 <= 8) and its rows' block-table rows are equal (the runner gives
// each the sequence's table; the block reads its first's).
//
// decode_attn_verify_rope_bf16 (ATLAS_DECODE_ATTN_VERIFY_ROPE=1) is the same attention with
// qk_norm_rope_kv_bf16 done by the blocks (VerifyRope): after the PDL wait every working block
// norms and rotates the q rows of its piece (its kv head's q heads) into the q buffer and the
// step's keys that fall in its tiles (the run's rows, from the first row of the sequence in
// the step on: consecutive positions kv_len - 1) into the caches at their rows' slots, with
// rope_core.cuh's code (qk_norm_rope_kv's bits); several blocks may write the same q row or
// key, always the same bits. Then a fence and a barrier, and the block reads its Q tile and
// K/V tiles as the plain entry does (cp.async through L2, after its own writes). Every key
// the step appends is written: row j's key lies in row j's last split, whose block is working.
// A padding row (slot < 0) appends nothing and attends the cache as it is.
#include <cooperative_groups.h>

#include "atlas_common.cuh"
#include "attention_tile.cuh"
#include "mma_util.cuh"
#include "rope_core.cuh"

namespace {

constexpr int kThreads = 128;     // ops/attention_verify.py VERIFY_THREADS
constexpr int kWarps = kThreads / 32;
constexpr int kBKV = 64;          // keys per tile (VERIFY_TILE_KEYS)
constexpr int kMaxRows = 64;      // tile rows of a block: four m16 tiles (VERIFY_MAX_ROWS)
constexpr int kMaxStepRows = 8;   // rows of one sequence a block serves (VERIFY_MAX_STEP_ROWS)
constexpr float kNoKey = -INFINITY;

// The q/k norm, RoPE and K/V append of qk_norm_rope_kv_bf16 done by the blocks
// (decode_attn_verify_rope_bf16): ops/rope.py's launch arguments and the q buffer the blocks
// stage their Q rows in. Null qkv: the plain entry point.
struct VerifyRope {
  const __nv_bfloat16* qkv = nullptr;  // [rows, (hq + 2 hkv) D]: q heads, k heads, v heads
  __nv_bfloat16* q = nullptr;          // [rows, hq, D]: the normed, rotated q (also read as Q)
  __nv_bfloat16* k_cache = nullptr;
  __nv_bfloat16* v_cache = nullptr;
  const __nv_bfloat16* q_norm_w = nullptr;  // null: no q/k norm
  const __nv_bfloat16* k_norm_w = nullptr;
  const float* cos_sin = nullptr;  // [positions, D]: cos of the D / 2 frequencies, then sin
  const int* positions = nullptr;
  const int* slots = nullptr;  // < 0: a padding row (appends nothing)
  float eps = 0.f;
};

template <int D>
struct VerifyTile {
  static constexpr int kChunks = D / 8;                        // 16-byte chunks per row
  static constexpr int kStages = D <= 128 ? 3 : 2;             // ring depth
  static constexpr int kTileElems = kBKV * D;                  // one K or V tile, bf16
  static constexpr int kStageElems = 2 * kTileElems;
  static constexpr int kQElems = kMaxRows * D;
  static constexpr int kRowsPerThread = kBKV * kChunks / kThreads;  // tile rows a thread copies
  static constexpr int kRingBytes = kStages * kStageElems * 2;
  // the warps' partials after the loop: o [kWarps][16][D], m and l [kWarps][16], f32
  static constexpr int kMergeBytes = (kWarps * 16 * D + 2 * kWarps * 16) * 4;
  static constexpr int kSmemBytes = kQElems * 2 + kRingBytes;  // VERIFY_SMEM_BYTES
  static_assert(kMergeBytes <= kRingBytes, "the merge reuses the ring");
  static_assert(kSmemBytes <= 227 * 1024, "fits one block's shared memory");
  // two blocks per SM up to D = 128: 228 KiB an SM, 1 KiB reserved a block, and the static
  // arrays (well under 512 B: ptxas -v reports them)
  static_assert(D > 128 || 2 * (kSmemBytes + 1024 + 512) <= 228 * 1024, "two blocks per SM");
  static_assert(kBKV * kChunks % kThreads == 0, "copies divide evenly over the threads");
  static_assert(kThreads % kChunks == 0, "a thread copies the same chunk of each of its rows");
};

// One acq_rel read-modify-write at gpu scope: releases this block's partials (ordered before
// thread 0 by the barrier before it) and, for the last ticket, acquires every earlier one's.
__device__ __forceinline__ unsigned verify_ticket(unsigned* counter) {
  unsigned old;
  asm volatile("atom.acq_rel.gpu.global.add.u32 %0, [%1], 1;" : "=r"(old) : "l"(counter)
               : "memory");
  return old;
}


// Trailing ones of a ballot: how many consecutive lanes from lane 0 said yes.
__device__ __forceinline__ int leading_yes(unsigned mask) {
  return mask == 0xffffffffu ? 32 : __ffs(~mask) - 1;
}

// The tile steps of the clustered entry (cluster_piece). verify_piece inlines the same code
// (written before these): calling them changes its PTX (operand order, a mask constant), so
// it keeps its own until the clustered entry is measured against it.
//
// S = Q K^T for the 16 rows of m-tile mt of the swizzled Q tile and the 16 keys at k0 of a
// K tile: s[j] is the keys' n-tile j (ldmatrix, two mma.m16n8k16 per 16 dims).
template <int D>
__device__ __forceinline__ void tile_scores(const __nv_bfloat16* sq, const __nv_bfloat16* sk,
                                            int mt, int k0, int lane, float (&s)[2][4]) {
  constexpr int CH = D / 8;
#pragma unroll
  for (int j = 0; j < 2; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) s[j][e] = 0.f;
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk) {
    uint32_t qa[4], kb[4];
    atlas::ldmatrix_x4(qa, sq + atlas::swizzle_offset<CH>(mt * 16 + (lane & 15),
                                                          2 * kk + (lane >> 4)));
    // matrices: (keys 0-7, d lo), (keys 0-7, d hi), (keys 8-15, d lo), (keys 8-15, d hi)
    const int kr = k0 + (lane & 7) + ((lane >> 4) << 3);
    atlas::ldmatrix_x4(kb, sk + atlas::swizzle_offset<CH>(kr, 2 * kk + ((lane >> 3) & 1)));
    atlas::mma_bf16_16816(s[0], qa, kb[0], kb[1]);
    atlas::mma_bf16_16816(s[1], qa, kb[2], kb[3]);
  }
}

// Those scores' online softmax (keys key0 + ..., this lane's 2c included, masked outside
// [first, last]: before first here, past last in attention_tile.cuh), o rescaled, and O += P V
// over the V tile's 16 keys at k0 with P as one bf16 per probability. A fully masked key
// leaves the row's m, l and o exactly as they were (corr 1, p 0).
template <int D>
__device__ __forceinline__ void tile_softmax_pv(float (&s)[2][4], int key0, const int (&first)[2],
                                                const int (&last)[2], float scale_log2,
                                                float (&m_run)[2], float (&l_run)[2],
                                                float (&o)[D / 8][4], const __nv_bfloat16* sv,
                                                int k0, int lane) {
#pragma unroll
  for (int j = 0; j < 2; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e)
      if (key0 + 8 * j + (e & 1) < first[e >> 1]) s[j][e] = kNoKey;
  float corr[2];
  atlas::online_softmax_tile(s, key0, last, scale_log2, m_run, l_run, corr);
#pragma unroll
  for (int j = 0; j < D / 8; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) o[j][e] *= corr[e >> 1];
  uint32_t pf[1][4];
  atlas::prob_fragments<1>(s, 0, pf);
  atlas::pv_slice_mma<D, 1, false>(o, pf, sv, k0, lane);
}

// The piece starting at row r0, if r0 starts one (this block's split and kv head). Returns
// the rows from r0 on it accounts for (>= 1): the piece's, or the rest of the piece r0 is in.
template <int D, bool kRope>
__device__ __forceinline__ int verify_piece(
    const __nv_bfloat16* __restrict__ q, const __nv_bfloat16* __restrict__ k_cache,
    const __nv_bfloat16* __restrict__ v_cache, const int* block_tables, const int* kv_lens,
    float* part_o, float* part_ml, unsigned* counters, __nv_bfloat16* out, int r0,
    int num_rows, int hq, int hkv, int block_size, int max_blocks, int num_splits,
    int min_chunk, float scale, __nv_bfloat16* smem, const VerifyRope& rope) {
  using T = VerifyTile<D>;
  constexpr int RT = T::kRowsPerThread;
  constexpr int CH = T::kChunks;
  const int split = blockIdx.x, kvh = blockIdx.y;
  const int group = hq / hkv;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, c = lane & 3;
  const atlas::PageMap pages(block_size);

  __shared__ int s_back, s_fwd, s_last;
  __shared__ int s_lo[kMaxStepRows], s_hi[kMaxStepRows], s_act[kMaxStepRows];
  const int cap = min(kMaxStepRows, kMaxRows / group);
  // every row of a piece is the same sequence, whose rows' tables are equal: r0's is read
  const int* table = block_tables + static_cast<size_t>(r0) * max_blocks;
  const int ch = tid % CH, row0 = tid / CH;
  constexpr int kRowStep = kThreads / CH;
  // Block-table entries of tile `tile` of keys [base, end): this thread's rows (0 past end).
  auto lookup_from = [&](int base, int end, int tile, int (&page)[RT]) {
#pragma unroll
    for (int j = 0; j < RT; ++j) {
      const int p = base + tile * kBKV + row0 + j * kRowStep;
      page[j] = p < end ? table[pages.page(p)] : 0;
    }
  };

  // A split past every split a piece starting at r0 could use (its rows hold len0 + j keys,
  // j < cap) exits after one load, before the run search: most of a short context's grid.
  // (The active count is not monotonic in kv_len: a longer row may take longer chunks.)
  const int len0 = kv_lens[r0];
  const int reach = min(len0 + cap - 1, max_blocks * block_size);  // the piece's keys <= this
  if (split > 0) {
    int most = 0;
    for (int j = 0; j < cap; ++j) {
      const int len = len0 + j, chunk = atlas::verify_row_chunk(len, num_splits, min_chunk);
      most = max(most, (len + chunk - 1) / chunk);
    }
    if (split >= most) return 1;
  }
  // Tile 0's table entries requested now, beside the run search's loads, where r0's own
  // chunking says the split starts (the union starts there unless the piece's rows take
  // different chunk sizes; then they are requested again below).
  const int guess_lo = split * atlas::verify_row_chunk(len0, num_splits, min_chunk);
  int page[RT];
  lookup_from(guess_lo, reach, 0, page);

  // The run around row r0: rows before it in its sequence's run (back), rows after (fwd).
  if (warp == 0) {
    const unsigned back = __ballot_sync(
        0xffffffffu,
        atlas::continues_run(kv_lens, block_tables, r0 - lane, num_rows, max_blocks, pages));
    const unsigned fwd = __ballot_sync(
        0xffffffffu,
        atlas::continues_run(kv_lens, block_tables, r0 + 1 + lane, num_rows, max_blocks,
                             pages));
    if (lane == 0) {
      s_back = leading_yes(back);
      s_fwd = leading_yes(fwd);
    }
  }
  __syncthreads();
  if (s_back % cap != 0) {  // not a piece's first row: the block of that row serves it
    const int start = r0 - s_back % cap;
    return min(start + cap, r0 + s_fwd + 1) - r0;
  }
  const int n = min(cap, s_fwd + 1);  // step rows of this piece
  if (tid < n) {
    const int len = kv_lens[r0 + tid], chunk = atlas::verify_row_chunk(len, num_splits, min_chunk);
    const int lo = split * chunk;
    s_lo[tid] = lo;
    s_hi[tid] = lo < len ? min(lo + chunk, len) : lo;
    s_act[tid] = (len + chunk - 1) / chunk;
  }
  __syncthreads();
  int lo_u = 0x7fffffff, hi_u = 0, splits_used = 0;  // the union of the rows' ranges
  for (int j = 0; j < n; ++j) {
    if (s_lo[j] < s_hi[j]) {
      lo_u = min(lo_u, s_lo[j]);
      hi_u = max(hi_u, s_hi[j]);
    }
    splits_used = max(splits_used, s_act[j]);
  }
  // a split no row has keys in writes nothing (split 0 still writes the zeros of keyless rows)
  if (split > 0 && split >= splits_used) return n;
  const int n_tiles = lo_u < hi_u ? (hi_u - lo_u + kBKV - 1) / kBKV : 0;
  const int rows = n * group;
  const int mt_count = rows <= 16 ? 1 : rows <= 32 ? 2 : 4;

  __nv_bfloat16* sq = smem;
  __nv_bfloat16* ring = smem + T::kQElems;
  auto lookup = [&](int tile, int (&pg)[RT]) { lookup_from(lo_u, hi_u, tile, pg); };
  auto issue = [&](int tile, const int (&page)[RT]) {
    __nv_bfloat16* sk = ring + (tile % T::kStages) * T::kStageElems;
    __nv_bfloat16* sv = sk + T::kTileElems;
#pragma unroll
    for (int j = 0; j < RT; ++j) {
      const int rr = row0 + j * kRowStep, p = lo_u + tile * kBKV + rr;
      const bool ok = p < hi_u;
      const size_t row =
          (static_cast<size_t>(page[j]) * hkv + kvh) * block_size + pages.row(p);
      const size_t off = ok ? row * D + ch * 8 : 0;
      const int dst = atlas::swizzle_offset<CH>(rr, ch);
      atlas::cp_async_16(sk + dst, k_cache + off, ok);
      atlas::cp_async_16(sv + dst, v_cache + off, ok);
    }
  };

  // Everything above read only kv_lens and the block tables, which the host's step upload
  // writes and no kernel does (decode_attn_rope reads them before its wait too), and wrote
  // nothing: the blocks that exited above never wait. Q and the step's new K/V rows come
  // from the kernel before (qk_norm_rope_kv).
  // Tile 0's K/V requested into L2 (prefetch.global.L2: nothing read into registers, and L2
  // is where the kernel before writes the step's new rows: the cp.async.cg copies after the
  // wait read the written values), one request per 128-byte line.
  if (lo_u == guess_lo && (ch & 7) == 0) {
#pragma unroll
    for (int j = 0; j < RT; ++j) {
      const int p = lo_u + row0 + j * kRowStep;
      if (p >= hi_u) continue;
      const size_t row = (static_cast<size_t>(page[j]) * hkv + kvh) * block_size + pages.row(p);
      asm volatile("prefetch.global.L2 [%0];" :: "l"(k_cache + row * D + ch * 8));
      asm volatile("prefetch.global.L2 [%0];" :: "l"(v_cache + row * D + ch * 8));
    }
  }
  if constexpr (kRope) {
    // the norm weights (never written by a kernel) before the wait
    const bool normed = rope.q_norm_w != nullptr;
    const auto wq = atlas::rope::load_norm_w<false>(rope.q_norm_w, normed, D, D, lane);
    const auto wk = atlas::rope::load_norm_w<false>(rope.k_norm_w, normed, D, D, lane);
    atlas::pdl_enter();
    const size_t pitch = static_cast<size_t>(hq + 2 * hkv) * D;
    // the step's keys in this block's tiles: the run's rows from its first in the step
    // (s_back rows before r0) append keys first, first + 1, ... (one each, at kv_len - 1)
    // (none where no row has keys here: lo_u is then past every key, hi_u 0)
    const int run0 = r0 - s_back, first = kv_lens[run0] - 1;
    const int key_lo = lo_u < hi_u ? max(first, lo_u) : hi_u;
    const int key_hi = min(first + s_back + n, hi_u);
    for (int p = key_lo + warp; p < key_hi; p += kWarps) {  // warp-uniform
      const int row = run0 + (p - first), slot = rope.slots[row];
      if (slot < 0) continue;  // padding: the cache as it is
      const size_t at =
          ((static_cast<size_t>(slot / block_size) * hkv + kvh) * block_size + slot % block_size) *
          D;
      const __nv_bfloat16* src = rope.qkv + static_cast<size_t>(row) * pitch;
      atlas::rope::norm_rope_row<false>(src + static_cast<size_t>(hq + kvh) * D,
                                        rope.k_cache + at, wk, normed, false,
                                        rope.cos_sin + static_cast<size_t>(rope.positions[row]) * D,
                                        D, D, rope.eps, lane);
      const uint4* v_src =
          reinterpret_cast<const uint4*>(src + static_cast<size_t>(hq + hkv + kvh) * D);
      for (int i = lane; i < CH; i += 32)
        reinterpret_cast<uint4*>(rope.v_cache + at)[i] = v_src[i];
    }
    // the piece's q rows of this kv head's heads
    for (int i = warp; i < rows; i += kWarps) {  // warp-uniform
      const int row = r0 + i / group, h = kvh * group + i % group;
      atlas::rope::norm_rope_row<false>(
          rope.qkv + static_cast<size_t>(row) * pitch + static_cast<size_t>(h) * D,
          rope.q + (static_cast<size_t>(row) * hq + h) * D, wq, normed, false,
          rope.cos_sin + static_cast<size_t>(rope.positions[row]) * D, D, D, rope.eps, lane);
    }
    // the block's copies below read them from L2 (cp.async.cg): stores performed there first
    __threadfence();
    __syncthreads();
  } else {
    atlas::pdl_enter();
  }
  // Prologue: Q (zero rows past R) with tile 0 in commit group 0, tiles up to kStages - 2
  // in flight, the next tile's table entries requested.
  for (int idx = tid; idx < mt_count * 16 * CH; idx += kThreads) {
    const int i = idx / CH, cq = idx % CH;
    const bool ok = i < rows;
    const size_t src =
        ok ? ((static_cast<size_t>(r0 + i / group) * hq + kvh * group + i % group) * D + cq * 8)
           : 0;
    atlas::cp_async_16(sq + atlas::swizzle_offset<CH>(i, cq), q + src, ok);
  }
  // tile 0's entries: the early request holds them where the union starts at its guess
  // (it covered up to `reach` >= hi_u; entries past hi_u are never used)
  if (lo_u != guess_lo) lookup(0, page);
#pragma unroll
  for (int t = 0; t < T::kStages - 1; ++t) {
    if (t < n_tiles) {
      if (t > 0) lookup(t, page);
      issue(t, page);
    }
    atlas::cp_async_commit();
  }
  if (T::kStages - 1 < n_tiles) lookup(T::kStages - 1, page);

  // This warp's m-tile, its key slice of every tile, and its lane's two rows' key ranges.
  const int mt = warp % mt_count, slice = warp / mt_count;
  int first[2], last[2];
#pragma unroll
  for (int hh = 0; hh < 2; ++hh) {
    const int i = mt * 16 + g + 8 * hh;
    first[hh] = i < rows ? s_lo[i / group] : 0x7fffffff;
    last[hh] = i < rows ? s_hi[i / group] - 1 : -1;
  }

  const float scale_log2 = scale * atlas::kAttnLog2e;
  float o[D / 8][4];
#pragma unroll
  for (int j = 0; j < D / 8; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) o[j][e] = 0.f;
  float m_run[2] = {kNoKey, kNoKey}, l_run[2] = {0.f, 0.f};

  for (int t = 0; t < n_tiles; ++t) {
    atlas::cp_async_wait<T::kStages - 2>();  // tile t (and Q) landed: this thread's copies
    __syncthreads();  // ... every thread's; and every warp is done with tile t - 1's slot
    if (t + T::kStages - 1 < n_tiles) {
      issue(t + T::kStages - 1, page);
      if (t + T::kStages < n_tiles) lookup(t + T::kStages, page);
    }
    atlas::cp_async_commit();
    const __nv_bfloat16* sk = ring + (t % T::kStages) * T::kStageElems;
    const __nv_bfloat16* sv = sk + T::kTileElems;
    for (int sub = 0; sub < mt_count; ++sub) {
      const int k0 = slice * 16 * mt_count + sub * 16;  // the 16 keys, within the tile
      float s[2][4];
#pragma unroll
      for (int j = 0; j < 2; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) s[j][e] = 0.f;
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk) {
        uint32_t qa[4], kb[4];
        atlas::ldmatrix_x4(qa, sq + atlas::swizzle_offset<CH>(mt * 16 + (lane & 15),
                                                              2 * kk + (lane >> 4)));
        // matrices: (keys 0-7, d lo), (keys 0-7, d hi), (keys 8-15, d lo), (keys 8-15, d hi)
        const int kr = k0 + (lane & 7) + ((lane >> 4) << 3);
        atlas::ldmatrix_x4(kb, sk + atlas::swizzle_offset<CH>(kr, 2 * kk + ((lane >> 3) & 1)));
        atlas::mma_bf16_16816(s[0], qa, kb[0], kb[1]);
        atlas::mma_bf16_16816(s[1], qa, kb[2], kb[3]);
      }
      // keys before the row's range (a row whose chunk starts later); the helper masks the
      // keys past it
      const int key0 = lo_u + t * kBKV + k0 + 2 * c;
#pragma unroll
      for (int j = 0; j < 2; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e)
          if (key0 + 8 * j + (e & 1) < first[e >> 1]) s[j][e] = kNoKey;
      float corr[2];
      atlas::online_softmax_tile(s, key0, last, scale_log2, m_run, l_run, corr);
#pragma unroll
      for (int j = 0; j < D / 8; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) o[j][e] *= corr[e >> 1];
      uint32_t pf[1][4];
      atlas::prob_fragments<1>(s, 0, pf);
      atlas::pv_slice_mma<D, 1, false>(o, pf, sv, k0, lane);
    }
  }
  atlas::cp_async_wait<0>();  // only empty groups remain; none may outlive the ring
  __syncthreads();            // every warp is done with the ring before the merge reuses it

  // The warps' partials: lane rows g and g + 8 of the warp's m-tile, columns j * 8 + 2c + e;
  // l summed over the quad first (each lane saw its own key columns).
  float* so = reinterpret_cast<float*>(ring);  // [kWarps][16][D]
  float* sm = so + kWarps * 16 * D;            // [kWarps][16]
  float* sl = sm + kWarps * 16;                // [kWarps][16]
  atlas::stash_mma_partials<D, D>(o, m_run, l_run, 16, so, sm, sl);
  __syncthreads();
  const int slices = kWarps / mt_count;
  for (int idx = tid; idx < rows * D; idx += kThreads) {
    const int i = idx / D, d = idx % D, j = i / group;
    const size_t orow = static_cast<size_t>(r0 + j) * hq + kvh * group + i % group;
    if (s_act[j] == 0) {  // no keys at all: zeros, as a plain decode row
      if (split == 0) out[orow * D + d] = atlas::f32_to_bf16(0.f);
      continue;
    }
    if (s_lo[j] >= s_hi[j]) continue;  // none of this row's keys in this split
    const int m_tile = i / 16, rl = i % 16;
    float mx = kNoKey;
    for (int w = 0; w < slices; ++w) mx = fmaxf(mx, sm[(m_tile + w * mt_count) * 16 + rl]);
    float total = 0.f, acc = 0.f;
    for (int w = 0; w < slices; ++w) {
      const int at = (m_tile + w * mt_count) * 16 + rl;
      const float wt = exp2f(sm[at] - mx);  // mx is finite: the row has a key here
      total += sl[at] * wt;
      acc += so[at * D + d] * wt;
    }
    if (s_act[j] == 1) {
      out[orow * D + d] = atlas::f32_to_bf16(acc / total);
    } else {
      const size_t at = orow * num_splits + split;
      part_o[at * D + d] = acc / total;
      if (d == 0) {
        part_ml[at * 2] = mx;  // log2 units
        part_ml[at * 2 + 1] = total;
      }
    }
  }
  if (splits_used <= 1) return n;

  // The last of the piece's active splits to finish merges the rows that have several.
  __syncthreads();
  if (tid == 0) {
    unsigned* counter = counters + static_cast<size_t>(r0) * hkv + kvh;
    const bool is_last = verify_ticket(counter) == static_cast<unsigned>(splits_used - 1);
    if (is_last) *counter = 0u;  // every writer has its ticket: ready for the next launch
    s_last = is_last;
  }
  __syncthreads();
  if (!s_last) return n;
  // Each row's split weights l_s 2^(m_s - max) once (threads < rows) into the ring (free now:
  // [rows][num_splits] f32 for the weights and as much for the l's, then the sums; at most
  // 32.25 KiB) with their
  // sum; then each thread merges kItems float4 column groups at once over the splits, every
  // load of a round independent of the others (in flight together). L2 reads (__ldcg): the
  // partials come from other blocks of this launch.
  float* sw = reinterpret_cast<float*>(ring);
  float* sl2 = sw + kMaxRows * num_splits;
  float* s_total = sl2 + kMaxRows * num_splits;  // [kMaxRows]
  if (tid < rows && s_act[tid / group] > 1) {
    const int j = tid / group, act = s_act[j];
    const size_t orow = static_cast<size_t>(r0 + j) * hq + kvh * group + tid % group;
    const float2* ml = reinterpret_cast<const float2*>(part_ml) + orow * num_splits;
    float* wrow = sw + tid * num_splits;
    float* lrow = sl2 + tid * num_splits;
    for (int base = 0; base < act; base += 8) {
      float2 v[8];
#pragma unroll
      for (int k = 0; k < 8; ++k)
        v[k] = base + k < act ? __ldcg(ml + base + k) : make_float2(kNoKey, 0.f);
#pragma unroll
      for (int k = 0; k < 8; ++k)
        if (base + k < act) {
          wrow[base + k] = v[k].x;
          lrow[base + k] = v[k].y;
        }
    }
    float mx = kNoKey;
    for (int sp = 0; sp < act; ++sp) mx = fmaxf(mx, wrow[sp]);
    float total = 0.f;
    for (int sp = 0; sp < act; ++sp) {
      const float wt = lrow[sp] * exp2f(wrow[sp] - mx);
      wrow[sp] = wt;
      total += wt;
    }
    s_total[tid] = total;
  }
  __syncthreads();
  constexpr int kGroups = D / 4, kItems = 4;
  const float4 zero4 = make_float4(0.f, 0.f, 0.f, 0.f);
  for (int base = tid; base < rows * kGroups; base += kItems * kThreads) {
    int act[kItems], wi[kItems];
    const float4* po[kItems];
    float4 acc[kItems];
#pragma unroll
    for (int k = 0; k < kItems; ++k) {
      const int idx = base + k * kThreads, i = idx / kGroups, d4 = idx % kGroups;
      const bool valid = idx < rows * kGroups;
      act[k] = valid ? s_act[i / group] : 0;
      if (act[k] <= 1) act[k] = 0;  // written directly (or keyless): nothing to merge
      const size_t orow =
          static_cast<size_t>(r0 + i / group) * hq + kvh * group + i % group;
      po[k] = reinterpret_cast<const float4*>(part_o) + (orow * num_splits) * kGroups + d4;
      wi[k] = i * num_splits;
      acc[k] = zero4;
    }
#pragma unroll 2
    for (int sp = 0; sp < splits_used; ++sp) {
      float4 v[kItems];
#pragma unroll
      for (int k = 0; k < kItems; ++k)
        v[k] = sp < act[k] ? __ldcg(po[k] + static_cast<size_t>(sp) * kGroups) : zero4;
#pragma unroll
      for (int k = 0; k < kItems; ++k)
        if (sp < act[k]) {
          const float w = sw[wi[k] + sp];
          acc[k].x = fmaf(w, v[k].x, acc[k].x);
          acc[k].y = fmaf(w, v[k].y, acc[k].y);
          acc[k].z = fmaf(w, v[k].z, acc[k].z);
          acc[k].w = fmaf(w, v[k].w, acc[k].w);
        }
    }
#pragma unroll
    for (int k = 0; k < kItems; ++k) {
      if (act[k] == 0) continue;
      const int idx = base + k * kThreads, i = idx / kGroups, d4 = idx % kGroups;
      const size_t orow =
          static_cast<size_t>(r0 + i / group) * hq + kvh * group + i % group;
      const float total = s_total[i];
      *reinterpret_cast<uint2*>(out + orow * D + d4 * 4) =
          make_uint2(atlas::pack_bf16x2(acc[k].x / total, acc[k].y / total),
                     atlas::pack_bf16x2(acc[k].z / total, acc[k].w / total));
    }
  }
  return n;
}

// The pieces starting in this block's window of rows (ceil(num_rows / gridDim.z): the launch
// sizes the grid by the step's rows per sequence, so a verification's rows are one window
// and no block exists only to find it starts no piece), one after the other. A piece may run
// past the window's end; the next window's block skips its rest.
template <int D, bool kRope = false>
__device__ __forceinline__ void decode_attn_verify(
    const __nv_bfloat16* q, const __nv_bfloat16* k_cache, const __nv_bfloat16* v_cache,
    const int* block_tables, const int* kv_lens, float* part_o, float* part_ml,
    unsigned* counters, __nv_bfloat16* out, int num_rows, int hq, int hkv, int block_size,
    int max_blocks, int num_splits, int min_chunk, float scale, __nv_bfloat16* smem,
    const VerifyRope& rope = VerifyRope{}) {
  const int window = (num_rows + static_cast<int>(gridDim.z) - 1) / static_cast<int>(gridDim.z);
  const int first = static_cast<int>(blockIdx.z) * window;
  const int stop = min(first + window, num_rows);
  for (int r0 = first; r0 < stop;) {
    __syncthreads();  // the piece before is done with the shared memory
    r0 += verify_piece<D, kRope>(q, k_cache, v_cache, block_tables, kv_lens, part_o, part_ml,
                                 counters, out, r0, num_rows, hq, hkv, block_size, max_blocks,
                                 num_splits, min_chunk, scale, smem, rope);
  }
}

}  // namespace

extern "C" __global__ void __launch_bounds__(kThreads, 1)
    decode_attn_verify_bf16(const __nv_bfloat16* q, const __nv_bfloat16* k_cache,
                            const __nv_bfloat16* v_cache, const int* block_tables,
                            const int* kv_lens, float* part_o, float* part_ml,
                            unsigned* counters, __nv_bfloat16* out, uint32_t num_rows,
                            uint32_t hq, uint32_t hkv, uint32_t head_dim, uint32_t block_size,
                            uint32_t max_blocks, uint32_t num_splits, float scale,
                            uint32_t min_chunk) {
  extern __shared__ __align__(128) __nv_bfloat16 verify_smem[];
  // the PDL wait is inside, after the run search (decode_attn_verify says why that is sound)
  const int nr = static_cast<int>(num_rows), ns = static_cast<int>(num_splits);
  const int mc = static_cast<int>(min_chunk);
  if (mc < kBKV || mc % kBKV != 0) __trap();  // ops/attention_verify.py: whole tiles
  if (head_dim == 128)
    decode_attn_verify<128>(q, k_cache, v_cache, block_tables, kv_lens, part_o, part_ml,
                            counters, out, nr, hq, hkv, block_size, max_blocks, ns, mc, scale,
                            verify_smem);
  else if (head_dim == 64)
    decode_attn_verify<64>(q, k_cache, v_cache, block_tables, kv_lens, part_o, part_ml,
                           counters, out, nr, hq, hkv, block_size, max_blocks, ns, mc, scale,
                           verify_smem);
  else if (head_dim == 256)
    decode_attn_verify<256>(q, k_cache, v_cache, block_tables, kv_lens, part_o, part_ml,
                            counters, out, nr, hq, hkv, block_size, max_blocks, ns, mc, scale,
                            verify_smem);
  else
    __trap();  // ops/attention_verify.py VERIFY_HEAD_DIMS
}

// The same with qk_norm_rope_kv_bf16 done by the blocks (VerifyRope; the file's header): D 64,
// 128 or 256, the classic qkv layout (full rotation, plain or no norm weights; ops/
// attention_verify.py verify_rope_fits). q is the buffer the blocks stage the rotated q in.
extern "C" __global__ void __launch_bounds__(kThreads, 1)
    decode_attn_verify_rope_bf16(const __nv_bfloat16* qkv, __nv_bfloat16* q,
                                 __nv_bfloat16* k_cache, __nv_bfloat16* v_cache,
                                 const __nv_bfloat16* q_norm_w, const __nv_bfloat16* k_norm_w,
                                 const float* cos_sin, const int* positions, const int* slots,
                                 const int* block_tables, const int* kv_lens, float* part_o,
                                 float* part_ml, unsigned* counters, __nv_bfloat16* out,
                                 uint32_t num_rows, uint32_t hq, uint32_t hkv,
                                 uint32_t head_dim, uint32_t block_size, uint32_t max_blocks,
                                 uint32_t num_splits, float scale, uint32_t min_chunk,
                                 float eps) {
  extern __shared__ __align__(128) __nv_bfloat16 verify_smem[];
  const int nr = static_cast<int>(num_rows), ns = static_cast<int>(num_splits);
  const int mc = static_cast<int>(min_chunk);
  if (mc < kBKV || mc % kBKV != 0) __trap();  // ops/attention_verify.py: whole tiles
  const VerifyRope rope{qkv, q, k_cache, v_cache, q_norm_w, k_norm_w, cos_sin, positions,
                        slots, eps};
  if (head_dim == 128)
    decode_attn_verify<128, true>(q, k_cache, v_cache, block_tables, kv_lens, part_o, part_ml,
                                  counters, out, nr, hq, hkv, block_size, max_blocks, ns, mc,
                                  scale, verify_smem, rope);
  else if (head_dim == 64)
    decode_attn_verify<64, true>(q, k_cache, v_cache, block_tables, kv_lens, part_o, part_ml,
                                 counters, out, nr, hq, hkv, block_size, max_blocks, ns, mc,
                                 scale, verify_smem, rope);
  else if (head_dim == 256)
    decode_attn_verify<256, true>(q, k_cache, v_cache, block_tables, kv_lens, part_o, part_ml,
                                  counters, out, nr, hq, hkv, block_size, max_blocks, ns, mc,
                                  scale, verify_smem, rope);
  else
    __trap();  // ops/attention_verify.py VERIFY_HEAD_DIMS
}

// ---- the clustered entry (decode_attn_verify_cluster_bf16, ATLAS_DECODE_ATTN_VERIFY_CLUSTER)
// The plain batch-1 step's machinery for a verification step: a sequence's T rows (its last
// token and K drafts) are one piece, as above, whose T x G tile rows are cut into m16 tiles;
// each tile is served for each kv head by ONE thread-block cluster of kClusterBlocks blocks,
// block b taking keys [b chunk_j, (b + 1) chunk_j) of each row j (chunk_j = cluster_chunk(L_j):
// whole 64-key tiles by the row's own kv_len L_j; the block loads the union of its piece's
// rows' ranges in tiles at absolute positions and masks each row to its own), and the blocks'
// partials merged through distributed shared memory in rank order (no partials in global
// memory, no ticket, no L2 re-read). A block's warp w takes keys [16 w, 16 w + 16) of every
// tile for the tile's 16 rows and the warps merge in warp order, so a row's arithmetic (its
// key partition over blocks and warps, its online softmax's order, both merges' orders)
// depends on its own kv_len alone: its bits do not depend on the other rows of its step, nor
// on the step's tile count (verify_piece's do: its warps split each tile by the piece's m16
// tile count, so Qwen3-8B's K = 4, 20 tile rows, left K = 3's 16-row bits: gpu30, the
// K policy's acceptance 0.32 for 0.7). A plain row (a run of one) takes the same arithmetic.
//
// With qk_norm_rope_kv's work (VerifyRope): the block norms and rotates its piece's q rows
// (its kv head's q heads) straight into its Q tile, and the step's keys in its range (the
// run's rows from the first in the step: at most kMaxStepRows of them) into a staging area,
// appends them to the caches (one block a key, or two where the rows' chunks differ, and a
// later piece of the same run: each computes the same bits) and substitutes them into its
// K/V tiles once
// those have landed. So no block reads another block's cache write, and the K/V history can
// be requested before the PDL wait: the run search, the split range, the block-table entries
// and the first kStages - 1 tiles' cp.async copies (kv_lens, the block tables and cached rows
// of earlier steps: nothing the qkv projection before this launch writes, the argument of
// decode_attn.cuh RopedQ; the tiles' rows of this step's keys are copied stale and
// overwritten), the rows' positions and slots (host step inputs) and the norm weights go out
// first; only the qkv rows and the positions' cos/sin rows are read after it.
//
// Why (gpu22, Qwen3-8B b1 K = 3 at 512 keys, PDL off): decode_attn_verify_bf16 took 39.6 us a
// call where the plain step's clustered kernel takes 18.6: it waits before its first K/V
// request (only an L2 prefetch of tile 0 goes out before), writes every split's partial to
// global memory and merges them in the last block after an acq_rel ticket (two more
// dependent L2 trips and a gpu-scope release), and needs qk_norm_rope_kv_bf16 launched
// before it (2.8 us and a launch). Its rope entry moved that work inside but kept the rest
// and staged q through global memory (44.2 us).
//
// Launch (ops/attention_verify.py decode_attention_verify_cluster): grid (kClusterBlocks,
// hkv x slots, windows), clusters of kClusterBlocks along x, y = kv head + hkv x tile slot:
// slot t serves tiles t, t + slots, ... of each of its window's pieces, one after the other
// (ops/attention_verify.py cluster_tile_slots: by default a slot a tile of the longest piece,
// the tiles side by side; ATLAS_DECODE_ATTN_VERIFY_TILE_CLUSTERS=0: one slot, the tiles in
// turn, each reading the K/V again from L2); a piece of fewer tiles is skipped before the PDL
// wait (slot 0 always waits). 128 threads, dynamic shared memory ClusterSmem<D>::kBytes.
// Preconditions as decode_attn_verify_rope_bf16's, and a run of one sequence's rows is at
// most kMaxStepRows rows (else a trap).
namespace {

constexpr int kClusterBlocks = 8;  // VERIFY_CLUSTER_BLOCKS (the portable cluster size)

// A q row's destination in the swizzled Q tile: element i of tile row `row` (norm_rope_row's
// dst), so the rotated q goes from registers to where ldmatrix reads it.
template <int CH>
struct SwizzledRow {
  __nv_bfloat16* tile;
  int row;
  __device__ __forceinline__ __nv_bfloat16& operator[](int i) const {
    return tile[atlas::swizzle_offset<CH>(row, i >> 3) + (i & 7)];
  }
};

// The clustered entry's shared memory: VerifyTile's Q tile and ring, then the staging of the
// step's keys (k then v, kMaxStepRows rows each). After the loop the ring holds the warps'
// partial o [kWarps][16][D] and the block's merged o [16][D] (f32; the area holds kMaxRows),
// the Q tile (its first 16 rows used) the warps' and the block's m and l (what the cluster
// peers read).
template <int D>
struct ClusterSmem {
  using T = VerifyTile<D>;
  static constexpr int kStageElems = kMaxStepRows * D;
  static constexpr int kBytes = T::kSmemBytes + 2 * kStageElems * 2;  // VERIFY_CLUSTER_SMEM
  static_assert(kWarps * 16 == kMaxRows, "the warps' partial rows and the block's rows");
  static_assert(2 * kMaxRows * D * 4 <= T::kRingBytes, "both o's fit the ring");
  static_assert(4 * kMaxRows * 4 <= T::kQElems * 2, "the m's and l's fit the Q tile");
  static_assert(kBytes <= 227 * 1024, "fits one block's shared memory");
};

// Keys per block of a row holding `len` keys: its share of the kClusterBlocks blocks in whole
// 64-key tiles (ops/attention_verify.py VERIFY_CLUSTER_BLOCKS). A function of the row's own
// kv_len alone, in whole tiles at absolute positions, so that a row's partition of its keys
// (and every sum over it) does not depend on the other rows of its step: the same row (the
// same token at the same position) gives the same bits whichever row of a verification step
// it is, which speculative decoding's acceptance needs (a piece-wide chunk made row j of a
// step and row 0 of the step after differ in the last bits: bench_spec acceptance 0.03, gpu27).
__device__ __forceinline__ int cluster_chunk(int len) {
  return kBKV * max((len + kClusterBlocks * kBKV - 1) / (kClusterBlocks * kBKV), 1);
}

// The piece starting at row r0 (a row of this block's window [.., stop)), if r0 starts one:
// its m16 tile mt (tile rows [16 mt, 16 mt + 16) of its step rows x q heads; none if the
// piece has fewer) attended by this cluster (this block: its rank's keys), written to out.
// Returns the rows from r0 on it accounts for (>= 1), as verify_piece; where r0 starts a
// piece, *tile_out (if not null) gets its tile rows. Every block of the cluster runs the
// same pieces in the same order (they depend on kv_lens and the block tables only).
template <int D>
__device__ __forceinline__ int cluster_piece(const VerifyRope& rope, const int* block_tables,
                                             const int* kv_lens, __nv_bfloat16* out, int r0,
                                             int stop, int num_rows, int hq, int hkv,
                                             int block_size, int max_blocks, float scale,
                                             int mt, int* tile_out, __nv_bfloat16* smem) {
  using T = VerifyTile<D>;
  using S = ClusterSmem<D>;
  constexpr int RT = T::kRowsPerThread;
  constexpr int CH = T::kChunks;
  constexpr int kRowStep = kThreads / CH;
  const cooperative_groups::cluster_group cluster = cooperative_groups::this_cluster();
  const int rank = static_cast<int>(cluster.block_rank());
  const int kvh = static_cast<int>(blockIdx.y) % hkv;
  const int group = hq / hkv;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, c = lane & 3;
  const atlas::PageMap pages(block_size);
  __shared__ int s_back, s_fwd;
  __shared__ int s_keys[2];  // the staged keys' positions [s_keys[0], s_keys[1])
  // the piece's rows' positions, and each staged key's row's position and slot (< 0: a
  // padding row's key, which the cache keeps), read before the wait (host step inputs)
  __shared__ int s_qpos[kMaxStepRows], s_kpos[kMaxStepRows], s_kslot[kMaxStepRows];
  const int cap = min(kMaxStepRows, kMaxRows / group);
  const int* table = block_tables + static_cast<size_t>(r0) * max_blocks;
  const int ch = tid % CH, row0 = tid / CH;
  // Block-table entries of tile `tile` of keys [base, end): this thread's rows (0 past end).
  auto lookup = [&](int base, int end, int tile, int (&page)[RT]) {
#pragma unroll
    for (int j = 0; j < RT; ++j) {
      const int p = base + tile * kBKV + row0 + j * kRowStep;
      page[j] = p < end ? __ldcg(table + pages.page(p)) : 0;
    }
  };

  // Tile 0's entries requested beside the run search, guessing the piece is the window's
  // rows from r0 (a verification: the sequence's rows); looked up again if not.
  const int len0 = __ldcg(kv_lens + r0);
  const int guess_len = min(len0 + min(cap, max(stop - r0, 1)) - 1, max_blocks * block_size);
  const int guess_lo = rank * cluster_chunk(guess_len);
  const int guess_hi = min(guess_lo + cluster_chunk(guess_len), guess_len);
  int page[RT];
  lookup(guess_lo, guess_hi, 0, page);
  if (warp == 0) {
    const unsigned back = __ballot_sync(
        0xffffffffu,
        atlas::continues_run(kv_lens, block_tables, r0 - lane, num_rows, max_blocks, pages));
    const unsigned fwd = __ballot_sync(
        0xffffffffu,
        atlas::continues_run(kv_lens, block_tables, r0 + 1 + lane, num_rows, max_blocks,
                             pages));
    if (lane == 0) {
      s_back = leading_yes(back);
      s_fwd = leading_yes(fwd);
    }
  }
  __syncthreads();
  const int back = s_back;
  if (back % cap != 0) {  // not a piece's first row: the cluster of that row serves it
    const int start = r0 - back % cap;
    return min(start + cap, r0 + s_fwd + 1) - r0;
  }
  const int n = min(cap, s_fwd + 1);  // step rows of this piece: kv_lens len0 .. len0 + n - 1
  const int rows = n * group;  // the piece's tile rows (step row i / group, head i % group)
  if (tile_out != nullptr) *tile_out = rows;
  const int t0 = mt * 16;      // this cluster's m16 tile: tile rows [t0, t0 + 16)
  if (t0 >= rows) return n;    // the piece has fewer tiles (cluster-uniform)
  // this block's keys: the union [lo, hi) of its rows' ranges (row j: [rank chunk_j,
  // min((rank + 1) chunk_j, len_j)), chunk_j = cluster_chunk(len_j); the rows' chunks differ
  // by at most a tile), tiles from lo (a multiple of 64); lo = hi = 0: no keys here
  int lo = 0x7fffffff, hi = 0;
  for (int j = 0; j < n; ++j) {
    const int len_j = len0 + j, chunk_j = cluster_chunk(len_j);
    const int lo_j = rank * chunk_j, hi_j = min(lo_j + chunk_j, len_j);
    if (lo_j < hi_j) {
      lo = min(lo, lo_j);
      hi = max(hi, hi_j);
    }
  }
  if (hi == 0) lo = 0;
  const int n_tiles = hi > lo ? (hi - lo + kBKV - 1) / kBKV : 0;
  const int mrows = min(16, rows - t0);  // this tile's rows that hold a (step row, head)
  if (lo != guess_lo || hi > guess_hi) lookup(lo, hi, 0, page);
  // the step's keys in [lo, hi): the run's rows from its first in the step (back rows before
  // r0) append keys first, first + 1, ... (one each, at kv_len - 1)
  const int first = len0 - back - 1;
  const int key_lo = max(first, lo), key_hi = min(first + back + n, hi);
  if (key_hi - key_lo > kMaxStepRows) __trap();  // a run longer than the staging holds
  if (tid == 0) {  // read after the barrier behind the wait
    s_keys[0] = key_lo;
    s_keys[1] = key_hi;
  }
  if (tid < n) {
    s_qpos[tid] = __ldcg(rope.positions + r0 + tid);
  } else if (tid >= kMaxStepRows && tid - kMaxStepRows < key_hi - key_lo) {
    const int j = tid - kMaxStepRows, row = r0 - back + (key_lo + j - first);
    s_kpos[j] = __ldcg(rope.positions + row);
    s_kslot[j] = __ldcg(rope.slots + row);
  }

  __nv_bfloat16* sq = smem;
  __nv_bfloat16* ring = smem + T::kQElems;
  __nv_bfloat16* stage_k = ring + T::kStages * T::kStageElems;
  __nv_bfloat16* stage_v = stage_k + S::kStageElems;
  auto issue = [&](int tile, const int (&pg)[RT]) {
    __nv_bfloat16* sk = ring + (tile % T::kStages) * T::kStageElems;
    __nv_bfloat16* sv = sk + T::kTileElems;
#pragma unroll
    for (int j = 0; j < RT; ++j) {
      const int rr = row0 + j * kRowStep, p = lo + tile * kBKV + rr;
      const bool ok = p < hi;
      const size_t row = (static_cast<size_t>(pg[j]) * hkv + kvh) * block_size + pages.row(p);
      const size_t off = ok ? row * D + ch * 8 : 0;
      const int dst = atlas::swizzle_offset<CH>(rr, ch);
      atlas::cp_async_16(sk + dst, rope.k_cache + off, ok);
      atlas::cp_async_16(sv + dst, rope.v_cache + off, ok);
    }
  };
  // Before the wait: the first kStages - 1 tiles' copies, the next tile's entries, the norm
  // weights (see the section's header for why each may be read now).
#pragma unroll
  for (int t = 0; t < T::kStages - 1; ++t) {
    if (t < n_tiles) {
      if (t > 0) lookup(lo, hi, t, page);
      issue(t, page);
    }
    atlas::cp_async_commit();
  }
  if (T::kStages - 1 < n_tiles) lookup(lo, hi, T::kStages - 1, page);
  const bool normed = rope.q_norm_w != nullptr;
  const auto wq = atlas::rope::load_norm_w<false>(rope.q_norm_w, normed, D, D, lane);
  const auto wk = atlas::rope::load_norm_w<false>(rope.k_norm_w, normed, D, D, lane);
  atlas::pdl_enter();
  __syncthreads();  // the positions and slots above

  const size_t pitch = static_cast<size_t>(hq + 2 * hkv) * D;
  if (n_tiles > 0) {  // block-uniform: a block without keys needs no q
    // this tile's q rows (piece tile rows t0 + i) into the Q tile (zeros past the piece's)
    for (int i = warp; i < 16; i += kWarps) {  // warp-uniform
      const SwizzledRow<CH> dst{sq, i};
      if (i >= mrows) {
        for (int e = lane; e < D; e += 32) dst[e] = atlas::f32_to_bf16(0.f);
        continue;
      }
      const int row = r0 + (t0 + i) / group, h = kvh * group + (t0 + i) % group;
      atlas::rope::norm_rope_row<false>(
          rope.qkv + static_cast<size_t>(row) * pitch + static_cast<size_t>(h) * D, dst, wq,
          normed, false, rope.cos_sin + static_cast<size_t>(s_qpos[(t0 + i) / group]) * D, D,
          D, rope.eps, lane);
    }
    // the step's keys in the range: normed and rotated into the staging area, appended
    for (int j = warp; j < key_hi - key_lo; j += kWarps) {  // warp-uniform
      const int row = r0 - back + (key_lo + j - first), slot = s_kslot[j];
      if (slot < 0) continue;  // padding: the cache as it is
      const __nv_bfloat16* src = rope.qkv + static_cast<size_t>(row) * pitch;
      atlas::rope::norm_rope_row<false>(
          src + static_cast<size_t>(hq + kvh) * D, stage_k + j * D, wk, normed, false,
          rope.cos_sin + static_cast<size_t>(s_kpos[j]) * D, D, D, rope.eps, lane);
      const uint4* v_src =
          reinterpret_cast<const uint4*>(src + static_cast<size_t>(hq + hkv + kvh) * D);
      for (int i = lane; i < CH; i += 32) reinterpret_cast<uint4*>(stage_v + j * D)[i] = v_src[i];
      __syncwarp();
      const size_t at =
          ((static_cast<size_t>(slot / block_size) * hkv + kvh) * block_size + slot % block_size) *
          D;
      for (int i = lane; i < CH; i += 32) {
        reinterpret_cast<uint4*>(rope.k_cache + at)[i] =
            reinterpret_cast<const uint4*>(stage_k + j * D)[i];
        reinterpret_cast<uint4*>(rope.v_cache + at)[i] =
            reinterpret_cast<const uint4*>(stage_v + j * D)[i];
      }
    }
  }
  __syncthreads();  // the Q tile and the staged keys

  // warp w: keys [16 w, 16 w + 16) of every tile, for the tile's 16 rows
  int key_first[2], last[2];  // tile row i (step row (t0 + i) / group): its own keys here
#pragma unroll
  for (int hh = 0; hh < 2; ++hh) {
    const int i = g + 8 * hh;
    const int len_i = len0 + (t0 + i) / group, chunk_i = cluster_chunk(len_i);
    key_first[hh] = i < mrows ? rank * chunk_i : 0x7fffffff;
    last[hh] = i < mrows ? min(rank * chunk_i + chunk_i, len_i) - 1 : -1;
  }
  const float scale_log2 = scale * atlas::kAttnLog2e;
  float o[D / 8][4];
#pragma unroll
  for (int j = 0; j < D / 8; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) o[j][e] = 0.f;
  float m_run[2] = {kNoKey, kNoKey}, l_run[2] = {0.f, 0.f};

  for (int t = 0; t < n_tiles; ++t) {
    atlas::cp_async_wait<T::kStages - 2>();  // tile t landed: this thread's copies
    __syncthreads();  // ... every thread's; and every warp is done with tile t - 1's slot
    if (t + T::kStages - 1 < n_tiles) {
      issue(t + T::kStages - 1, page);
      if (t + T::kStages < n_tiles) lookup(lo, hi, t + T::kStages, page);
    }
    atlas::cp_async_commit();
    __nv_bfloat16* sk = ring + (t % T::kStages) * T::kStageElems;
    __nv_bfloat16* sv = sk + T::kTileElems;
    const int t_lo = lo + t * kBKV;
    // (the key range from shared memory: registers are short at D = 256)
    const int sub_lo = max(s_keys[0], t_lo), sub_hi = min(s_keys[1], t_lo + kBKV);
    if (sub_lo < sub_hi) {  // block-uniform: the step's keys in this tile, over the copies
      const uint4* from_k = reinterpret_cast<const uint4*>(ring + T::kStages * T::kStageElems);
      const uint4* from_v = from_k + S::kStageElems / 8;
      for (int idx = tid; idx < (sub_hi - sub_lo) * CH; idx += kThreads) {
        const int j = sub_lo - s_keys[0] + idx / CH, cq = idx % CH;
        if (s_kslot[j] < 0) continue;
        const int dst = atlas::swizzle_offset<CH>(sub_lo - t_lo + idx / CH, cq);
        *reinterpret_cast<uint4*>(sk + dst) = from_k[j * CH + cq];
        *reinterpret_cast<uint4*>(sv + dst) = from_v[j * CH + cq];
      }
      __syncthreads();
    }
    const int k0 = warp * 16;  // the warp's 16 keys, within the tile
    float s[2][4];
    tile_scores<D>(sq, sk, 0, k0, lane, s);
    tile_softmax_pv<D>(s, t_lo + k0 + 2 * c, key_first, last, scale_log2, m_run, l_run, o, sv,
                       k0, lane);
  }
  atlas::cp_async_wait<0>();  // only empty groups remain; none may outlive the ring
  __syncthreads();            // every warp is done with the ring and the Q tile

  // The warps' partials, then the block's per row (o normalized; m -inf, l 0 without keys).
  float* so = reinterpret_cast<float*>(ring);  // [kWarps][16][D]
  float* bo = so + kMaxRows * D;               // [kMaxRows][D]
  float* sm = reinterpret_cast<float*>(sq);    // [kWarps][16]
  float* sl = sm + kMaxRows;
  float* bm = sl + kMaxRows;                   // [kMaxRows]
  float* bl = bm + kMaxRows;
  atlas::stash_mma_partials<D, D>(o, m_run, l_run, 16, so, sm, sl);
  __syncthreads();
  for (int idx = tid; idx < mrows * D; idx += kThreads) {
    const int i = idx / D, d = idx % D;
    float mx = kNoKey;
    for (int w = 0; w < kWarps; ++w) mx = fmaxf(mx, sm[w * 16 + i]);
    float total = 0.f, acc = 0.f;
    if (mx != kNoKey) {
      for (int w = 0; w < kWarps; ++w) {  // in key order, whatever the step's tile count
        const int at = w * 16 + i;
        const float wt = exp2f(sm[at] - mx);
        total += sl[at] * wt;
        acc += so[at * D + d] * wt;
      }
    }
    bo[i * D + d] = mx != kNoKey ? acc / total : 0.f;
    if (d == 0) {
      bm[i] = mx;
      bl[i] = total;
    }
  }

  // The cluster's merge: block `rank` takes 1 / kClusterBlocks of the piece's rows x D
  // elements, each over the kClusterBlocks blocks' partials (weights l 2^(m - top); a block
  // without keys for the row weighs 0), all loads of an element issued before the first use
  // (one distributed-shared-memory trip); the second barrier keeps every block's partials
  // alive until its peers have read them.
  cluster.sync();
  const int total_elems = mrows * D, per = (total_elems + kClusterBlocks - 1) / kClusterBlocks;
  const int e_end = min((rank + 1) * per, total_elems);
  for (int e = rank * per + tid; e < e_end; e += kThreads) {
    const int i = e / D, d = e % D;
    float pm[kClusterBlocks], pl[kClusterBlocks], po[kClusterBlocks];
#pragma unroll
    for (int r = 0; r < kClusterBlocks; ++r) {
      pm[r] = *cluster.map_shared_rank(bm + i, r);
      pl[r] = *cluster.map_shared_rank(bl + i, r);
      po[r] = *cluster.map_shared_rank(bo + i * D + d, r);
    }
    float top = kNoKey;
#pragma unroll
    for (int r = 0; r < kClusterBlocks; ++r) top = fmaxf(top, pm[r]);
    float total = 0.f, acc = 0.f;
    if (top != kNoKey) {  // else no keys at all: zeros, as a plain decode row
#pragma unroll
      for (int r = 0; r < kClusterBlocks; ++r) {
        const float w = pl[r] * exp2f(pm[r] - top);  // 0 for a block without keys
        total += w;
        acc = fmaf(w, po[r], acc);
      }
    }
    const size_t orow =
        static_cast<size_t>(r0 + (t0 + i) / group) * hq + kvh * group + (t0 + i) % group;
    out[orow * D + d] = atlas::f32_to_bf16(top != kNoKey ? acc / total : 0.f);
  }
  cluster.sync();
  return n;
}

template <int D>
__device__ __forceinline__ void decode_attn_verify_cluster(
    const VerifyRope& rope, const int* block_tables, const int* kv_lens, __nv_bfloat16* out,
    int num_rows, int hq, int hkv, int block_size, int max_blocks, float scale,
    __nv_bfloat16* smem) {
  const int window = (num_rows + static_cast<int>(gridDim.z) - 1) / static_cast<int>(gridDim.z);
  const int first = static_cast<int>(blockIdx.z) * window;
  const int stop = min(first + window, num_rows);
  // grid y: kv head fastest, then this cluster's m16 tile of every piece (of `slots`)
  const int slots = static_cast<int>(gridDim.y) / hkv, mt0 = static_cast<int>(blockIdx.y) / hkv;
  __shared__ int s_tile_rows;  // the piece's tile rows (thread 0 writes, after a barrier)
  for (int r0 = first; r0 < stop;) {
    int advance = 1;
    // tiles mt0, mt0 + slots, ... of the piece at r0 (one tile when the launch has a slot a
    // tile: ops/attention_verify.py cluster_tile_slots)
    for (int mt = mt0;; mt += slots) {
      __syncthreads();  // the tile before is done with the shared memory
      if (threadIdx.x == 0) s_tile_rows = 0;
      advance = cluster_piece<D>(rope, block_tables, kv_lens, out, r0, stop, num_rows, hq,
                                 hkv, block_size, max_blocks, scale, mt,
                                 threadIdx.x == 0 ? &s_tile_rows : nullptr, smem);
      __syncthreads();
      if ((mt + slots) * 16 >= s_tile_rows) break;
    }
    r0 += advance;
  }
}

}  // namespace

// qk_norm_rope_kv_bf16 and the verification attention of a step's rows in one launch, each
// piece of a sequence's rows served by a cluster per kv head (the section above). D 64, 128
// or 256, the classic qkv layout (ops/attention_verify.py rope_fits); no partial buffers.
extern "C" __global__ void __cluster_dims__(kClusterBlocks, 1, 1) __launch_bounds__(kThreads, 1)
    decode_attn_verify_cluster_bf16(const __nv_bfloat16* qkv, __nv_bfloat16* k_cache,
                                    __nv_bfloat16* v_cache, const __nv_bfloat16* q_norm_w,
                                    const __nv_bfloat16* k_norm_w, const float* cos_sin,
                                    const int* positions, const int* slots,
                                    const int* block_tables, const int* kv_lens,
                                    __nv_bfloat16* out, uint32_t num_rows, uint32_t hq,
                                    uint32_t hkv, uint32_t head_dim, uint32_t block_size,
                                    uint32_t max_blocks, float scale, float eps) {
  extern __shared__ __align__(128) __nv_bfloat16 verify_smem[];
  if (gridDim.x != kClusterBlocks) __trap();  // ops/attention_verify.py: one cluster a piece
  const VerifyRope rope{qkv, nullptr, k_cache, v_cache, q_norm_w, k_norm_w, cos_sin, positions,
                        slots, eps};
  const int nr = static_cast<int>(num_rows), bs = static_cast<int>(block_size);
  const int mb = static_cast<int>(max_blocks), h = static_cast<int>(hq);
  const int hk = static_cast<int>(hkv);
  if (head_dim == 128)
    decode_attn_verify_cluster<128>(rope, block_tables, kv_lens, out, nr, h, hk, bs, mb, scale,
                                    verify_smem);
  else if (head_dim == 64)
    decode_attn_verify_cluster<64>(rope, block_tables, kv_lens, out, nr, h, hk, bs, mb, scale,
                                   verify_smem);
  else if (head_dim == 256)
    decode_attn_verify_cluster<256>(rope, block_tables, kv_lens, out, nr, h, hk, bs, mb, scale,
                                    verify_smem);
  else
    __trap();  // ops/attention_verify.py VERIFY_HEAD_DIMS
}
