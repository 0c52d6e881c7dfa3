// Causal prefill attention over the paged KV cache on Hopper warpgroup MMA (sm_90a only),
// head_dim 128 and 256: prefill_attn_bf16's contract (attention.cu: q [tokens, hq, D] packed
// by cu_q, chunked prefill by kv_len - q_len, the cache read through the block tables; out
// [tokens, hq * proj_dim], a padded head's first proj_dim elements) on a
// FlashAttention-3-shaped schedule, for long prompts.
//
// A block is two warpgroups (256 threads) owning 128 queries of one q head; warpgroup w owns
// rows [64 w, 64 w + 64) and its warp q of them rows 16 q.., in mma.m16n8k16's C layout (the
// wgmma m64nN accumulator), so the online softmax is attention_tile.cuh's per-warp code. Both
// warpgroups share every K/V tile: half the L2 -> shared traffic of 64-query blocks.
// Shared memory (wgmma_util.cuh's 128-byte swizzle, 1024-byte aligned): Q [128][D] as D / 64
// d-slabs of [128][64], then a 4-stage ring of K and V tiles of kBKV = 8192 / D keys (64 at
// D = 128, 32 at D = 256; 16 KiB each, also as [kBKV][64] d-slabs), gathered row by row
// through the block table with 16-byte cp.async (keys past the block's visible range
// zero-filled, never read). Block-table entries are read one tile ahead of their copies.
//
// Per K/V tile t, warpgroup-wide (FA3's intra-warpgroup overlap):
//   issue S_t = Q K_t^T (D / 16 wgmma m64n{kBKV}k16, both operands K-major descriptors);
//   issue O += P_{t-1} V_{t-1} (kBKV / 16 x D / 64 wgmma m64n64k16, P from registers, V
//     N-major: slice kt of a d-slab starts 16 rows = 2048 bytes further);
//   wait for S_t only; causal mask (only on tiles that reach past the warpgroup's first
//   row's diagonal) and online softmax in f32 log2 units while the PV product runs;
//   wait for PV; O *= the rows' correction; P_t = bf16(probabilities) into the A registers.
// So the tensor cores work on PV_{t-1} while the CUDA cores run tile t's exponentials, and
// the other warpgroup fills the gaps of this one. P enters PV as one bf16 (FlashAttention's
// and SDPA's rounding): the row sum l is summed from the f32 probabilities, so each output
// is within 2^-9 * max |v| of the f32-probability result (cases/attention_sm90.py).
//
// Ring: tile t + 2's copies are issued at the top of iteration t, into the slot tile t - 2
// used; its last reader (PV_{t-2}) completed in iteration t - 1 before this iteration's
// barrier. (The "wide" entry at head_dim 128: 128-key tiles of 32 KiB in 3 slots, tile t + 1
// issued at the top of iteration t into that same slot.) Both warpgroups run every tile of the block (the first one's rows see nothing of
// a last tile past their diagonal: probabilities 0), so no wgmma sits in a thread-dependent
// branch, which ptxas would serialize.
//
// Sliding window (window > 0: row p sees keys [p - window + 1, p]): a block starts at the
// first tile its first row sees (the ring and its commit groups are counted from there),
// that tile's keys before the row's window are zero-filled and never read, and the tiles
// holding the start of some row's window (block-wide) run in a loop of their own masked on
// both sides, so the loop of the other tiles is the one without a window.
//
// Grid (hq, ceil(max_q_len / 128), num_seqs), query tiles numbered from the end (the longest
// rows start first), 256 threads, dynamic shared memory kSmemBytes (ops/attention_sm90.py
// prefill_sm90_smem). PDL: everything is read after the wait (q, the cache and the tables
// are written by earlier kernels).
#include "atlas_common.cuh"
#include "attention_tile.cuh"
#include "mma_util.cuh"
#include "wgmma_util.cuh"

namespace {

constexpr int kWarpgroups = 2;
constexpr int kThreads = 128 * kWarpgroups;    // ops/attention_sm90.py PREFILL_SM90_THREADS
constexpr int kBQ = 64 * kWarpgroups;          // queries per block (PREFILL_SM90_QUERY_TILE)
constexpr int kAlign = 1024;                   // the 128-byte swizzle's atom
constexpr int kSlabRowBytes = 128;             // a d-slab row: 64 bf16

// kWide (head_dim 128 only, prefill_attn_sm90_wide_bf16): 128-key tiles in a 3-stage ring
// (prefetch distance 1 + PV in flight; 225 KiB with Q), so the per-tile barrier, ring
// bookkeeping and wgmma issue cost half as much per key and S is one m64n128 product.
template <int D, bool kWide = false>
struct Sm90Geometry {
  static constexpr int kBKV = (kWide ? 16384 : 8192) / D;      // keys per K/V tile
  static constexpr int kStages = kWide ? 3 : 4;                // K/V ring slots
  static constexpr int kAhead = kStages - 2;                   // tiles in flight past this one
  static constexpr int kSlabs = D / 64;                        // 64-wide d-slabs of a row
  static constexpr int kChunks = D / 8;                        // 16-byte chunks of a row
  static constexpr int kQSlabBytes = kBQ * kSlabRowBytes;
  static constexpr int kQBytes = kSlabs * kQSlabBytes;
  static constexpr int kKVSlabBytes = kBKV * kSlabRowBytes;
  static constexpr int kTileBytes = kSlabs * kKVSlabBytes;     // one K or V tile: 16 KiB
  static constexpr int kStageBytes = 2 * kTileBytes;
  static constexpr int kSmemBytes = kQBytes + kStages * kStageBytes + kAlign;
  static constexpr int kRowStep = kThreads / kChunks;          // rows between a thread's copies
  static constexpr int kKVRows = kBKV / kRowStep;              // K/V rows a thread copies
  static constexpr int kQRows = kBQ / kRowStep;                // Q rows a thread copies
  static constexpr int kSlices = kBKV / 16;                    // 16-key k-steps of PV
  static_assert(kThreads % kChunks == 0, "a thread copies the same chunk of each of its rows");
  static_assert(kBKV % kRowStep == 0 && kBQ % kRowStep == 0, "copies divide evenly");
  static_assert(kKVSlabBytes % kAlign == 0 && kQSlabBytes % kAlign == 0, "slabs stay aligned");
  static_assert(kSmemBytes <= 227 * 1024, "sm_90 allows 227 KiB of shared memory per block");
};

__device__ __forceinline__ void cp16(uint32_t dst, const void* src, bool ok) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src),
               "r"(ok ? 16 : 0)
               : "memory");
}

// Keep the compiler from moving writes of wgmma A-fragment registers across a wait (the
// MMA reads them asynchronously).
template <int N>
__device__ __forceinline__ void fence_frag(uint32_t (&a)[N][1][4]) {
#pragma unroll
  for (int i = 0; i < N; ++i)
#pragma unroll
    for (int e = 0; e < 4; ++e) asm volatile("" : "+r"(a[i][0][e])::"memory");
}

// kSplit (prefill_attn_sm90_split_bf16): `splits` blocks share a tile's rows, each taking
// its own run of the key tiles (split_tiles) and writing its rows' partials, and with `pack`
// the rows are (query, q head of the kv head's group) pairs, so a short chunk's tile holds
// the group's heads instead of padding (the grid's x is then the kv heads).
template <int D, bool kQRegs, bool kWide = false, bool kSplit = false>
__device__ __forceinline__ void prefill_attn_sm90(
    const __nv_bfloat16* __restrict__ q, const __nv_bfloat16* __restrict__ k_cache,
    const __nv_bfloat16* __restrict__ v_cache, const int* __restrict__ block_tables,
    const int* __restrict__ cu_q, const int* __restrict__ kv_lens,
    __nv_bfloat16* __restrict__ out, int hq, int hkv, int block_size, int max_blocks,
    float scale, int window, int proj_dim, uint8_t* smem_raw, int num_splits = 1,
    bool pack = false, float* __restrict__ part_o = nullptr,
    float* __restrict__ part_ml = nullptr) {
  static_assert(!(kSplit && kQRegs), "the split entry loads Q through shared memory");
  using G = Sm90Geometry<D, kWide>;
  constexpr int kBKV = G::kBKV, R = G::kKVRows, kStages = G::kStages, kAhead = G::kAhead;
  const int splits = kSplit ? num_splits : 1;
  const int b = blockIdx.z / splits, split = blockIdx.z % splits;
  const int group = hq / hkv;
  const int pk = kSplit && pack ? group : 1;  // rows a query holds: its group's heads, or 1
  const int kvh = pk > 1 ? static_cast<int>(blockIdx.x) : static_cast<int>(blockIdx.x) / group;
  // row r of the sequence's chunk: query r / pk of q head head_of(r)
  auto head_of = [&](int r) { return pk > 1 ? kvh * pk + r % pk : static_cast<int>(blockIdx.x); };
  const int q0 = (gridDim.y - 1 - blockIdx.y) * kBQ;
  const int seq_start = cu_q[b], q_len = cu_q[b + 1] - seq_start, n_rows = q_len * pk;
  if (q0 >= n_rows) return;  // uniform per block: this tile is past the sequence's chunk
  const int kv_len = kv_lens[b];
  const int first_pos = kv_len - q_len;  // absolute position of the chunk's query 0
  const int n_keys = first_pos + min((q0 + kBQ - 1) / pk + 1, q_len);  // keys any row sees
  const int n_tiles = (n_keys + kBKV - 1) / kBKV;
  const int tid = threadIdx.x, lane = tid & 31, wg = tid >> 7, warp = (tid >> 5) & 3;
  const int g = lane >> 2, c = lane & 3;
  // this warpgroup's rows [q0w, q0w + 64) and the tiles every one of them sees whole (no
  // causal mask) from lo_tiles on
  const int q0w = q0 + 64 * wg;
  const int full_tiles = (first_pos + q0w / pk + 1) / kBKV;
  // A sliding window (window > 0) lets row p see keys [p - span, p]: the block's first row
  // sees from lo_key on (the tiles before t0 hold no key any row here sees), and below
  // lo_tiles (block-wide) some row's window begins inside a tile (the last row's, padding
  // rows' too, from n_keys - window)
  const int span = window - 1;
  const int lo_key = window > 0 ? max(first_pos + q0 / pk - span, 0) : 0;
  const int t0 = lo_key / kBKV;
  const int lo_tiles = window > 0 ? (max(n_keys - window, 0) + kBKV - 1) / kBKV : 0;
  // this block's key tiles [ts, te): all of them, or its split's run of
  // ceil((n_tiles - t0) / splits) (ops/attention_sm90.py split_tiles)
  int ts = t0, te = n_tiles;
  if constexpr (kSplit) {
    const int per = (n_tiles - t0 + splits - 1) / splits;
    ts = min(t0 + split * per, n_tiles);
    te = min(ts + per, n_tiles);
  }
  const int row_g = q0w + warp * 16 + g;  // this thread's rows row_g and row_g + 8
  // a split's partial of row r (splits > 1): o normalized by its own l, (m in log2 units
  // of the scaled scores, l); a row that sees no key of the split: zeros, (-inf, 0)
  auto partial_at = [&](int r) {
    return (static_cast<size_t>(seq_start - cu_q[0] + r / pk) * hq + head_of(r)) * splits + split;
  };
  if (kSplit && ts >= te) {  // no tile of this split: an empty partial for every row
#pragma unroll
    for (int hh = 0; hh < 2; ++hh) {
      const int r = row_g + 8 * hh;
      if (r >= n_rows) continue;
      const size_t at = partial_at(r);
#pragma unroll
      for (int dh = 0; dh < G::kSlabs; ++dh)
#pragma unroll
        for (int j = 0; j < 8; ++j)
          *reinterpret_cast<float2*>(part_o + at * D + 64 * dh + 8 * j + 2 * c) =
              make_float2(0.f, 0.f);
      if (c == 0) *reinterpret_cast<float2*>(part_ml + 2 * at) = make_float2(-INFINITY, 0.f);
    }
    return;
  }
  const int* table = block_tables + static_cast<size_t>(b) * max_blocks;

  const uint32_t raw = atlas::smem_addr(smem_raw);
  const uint32_t q_tile = (raw + kAlign - 1) & ~uint32_t(kAlign - 1);
  auto k_tile = [&](int tile) {
    return q_tile + G::kQBytes + (tile % kStages) * G::kStageBytes;
  };

  // This thread copies chunk `ch` of rows row0 + j * kRowStep of every tile.
  const int ch = tid % G::kChunks, row0 = tid / G::kChunks;
  const uint32_t ch_q = (ch >> 3) * G::kQSlabBytes, ch_kv = (ch >> 3) * G::kKVSlabBytes;
  if constexpr (!kQRegs) {
#pragma unroll
    for (int j = 0; j < G::kQRows; ++j) {
      const int r = row0 + j * G::kRowStep;
      const bool ok = q0 + r < n_rows;  // rows past the chunk are zero
      const __nv_bfloat16* src =
          ok ? q + (static_cast<size_t>(seq_start + (q0 + r) / pk) * hq + head_of(q0 + r)) * D +
                   ch * 8
             : q;
      cp16(q_tile + ch_q + atlas::swizzle128(r, ch & 7), src, ok);
    }
  }
  const atlas::PageMap pages(block_size);
  auto lookup = [&](int tile, int (&page)[R]) {
#pragma unroll
    for (int j = 0; j < R; ++j) {
      const int p = tile * kBKV + row0 + j * G::kRowStep;
      page[j] = p < n_keys ? table[pages.page(p)] : 0;
    }
  };
  // `first` (tile t0 only): its keys before lo_key are zero-filled too, never read (a
  // windowed cache need not hold them)
  auto issue = [&](int tile, const int (&page)[R], bool first) {
    const uint32_t kt = k_tile(tile), vt = kt + G::kTileBytes;
#pragma unroll
    for (int j = 0; j < R; ++j) {
      const int r = row0 + j * G::kRowStep, p = tile * kBKV + r;
      const bool ok = p < n_keys && (!first || p >= lo_key);
      const size_t off =
          ok ? ((static_cast<size_t>(page[j]) * hkv + kvh) * block_size + pages.row(p)) * D +
                   ch * 8
             : 0;
      const uint32_t dst = ch_kv + atlas::swizzle128(r, ch & 7);
      cp16(kt + dst, k_cache + off, ok);
      cp16(vt + dst, v_cache + off, ok);
    }
  };

  // Prologue: group 0 = Q and tile t0, group i < kAhead = tile t0 + i, tile t0 + kAhead's
  // table entries requested.
  int page[R];
#pragma unroll
  for (int i = 0; i < kAhead; ++i) {
    if (i == 0 || ts + i < te) {
      lookup(ts + i, page);
      issue(ts + i, page, ts + i == t0);
    }
    atlas::cp_async_commit();
  }
  if (ts + kAhead < te) lookup(ts + kAhead, page);

  // This thread's two rows (g and g + 8 of its warp's 16) and the last key each may see;
  // rows past the chunk get kv_len - 1 (finite, never stored; with a window the last row's
  // keys).
  int limit[2];
#pragma unroll
  for (int hh = 0; hh < 2; ++hh) {
    const int r = row_g + 8 * hh;
    limit[hh] = r < n_rows ? first_pos + r / pk : kv_len - 1;
  }
  // kQRegs: Q as this warp's A fragments of every k16 step, straight from global memory
  // (rows past the chunk zero): S reads only K from shared memory
  uint32_t qf[kQRegs ? D / 16 : 1][4];
  if constexpr (kQRegs) {
    const uint32_t* q32 = reinterpret_cast<const uint32_t*>(q);
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk)
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int qi = row_g + 8 * (i & 1), col = 16 * kk + 2 * c + 8 * (i >> 1);
        const size_t at = (static_cast<size_t>(seq_start + qi) * hq + blockIdx.x) * D + col;
        qf[kk][i] = qi < q_len ? __ldg(q32 + at / 2) : 0u;
      }
  }
  const float scale_log2 = scale * atlas::kAttnLog2e;
  float o[G::kSlabs][32];  // d-slab, then the m64n64 accumulator fragment
#pragma unroll
  for (int dh = 0; dh < G::kSlabs; ++dh)
#pragma unroll
    for (int j = 0; j < 32; ++j) o[dh][j] = 0.f;
  float m_run[2] = {-INFINITY, -INFINITY}, l_run[2] = {0.f, 0.f};
  // S: s[j][e] is row g + 8 (e / 2), key 8 j + 2c + e % 2 of this warp's rows (the
  // m64n{kBKV} accumulator's d[4 j + e])
  float s[kBKV / 8][4];
  float (&s_acc)[kBKV / 2] = *reinterpret_cast<float (*)[kBKV / 2]>(&s[0][0]);
  uint32_t pf[G::kSlices][1][4];  // P of the previous tile: one bf16 A fragment per k-step

  auto issue_s = [&](int tile) {
    const uint32_t kt = k_tile(tile);
#pragma unroll
    for (int j = 0; j < kBKV / 2; ++j) s_acc[j] = 0.f;
    atlas::fence_acc(s_acc);
    atlas::wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      const int slab = kk >> 2, slice = kk & 3;
      const uint64_t desc_k = atlas::smem_desc(kt + slab * G::kKVSlabBytes) + 2 * slice;
      if constexpr (kQRegs)
        atlas::wgmma_bf16_k16_rs<0>(s_acc, qf[kk], desc_k);
      else
        atlas::wgmma_bf16_k16(
            s_acc,
            atlas::smem_desc(q_tile + slab * G::kQSlabBytes + wg * 64 * kSlabRowBytes) +
                2 * slice,
            desc_k);
    }
    atlas::wgmma_commit();
  };
  auto issue_pv = [&](int tile) {
    const uint32_t vt = k_tile(tile) + G::kTileBytes;
#pragma unroll
    for (int dh = 0; dh < G::kSlabs; ++dh) atlas::fence_acc(o[dh]);
    fence_frag(pf);
    atlas::wgmma_fence();
#pragma unroll
    for (int kt = 0; kt < G::kSlices; ++kt)
#pragma unroll
      for (int dh = 0; dh < G::kSlabs; ++dh)
        atlas::wgmma_bf16_k16_rs_mn(
            o[dh], pf[kt][0],
            atlas::smem_desc(vt + dh * G::kKVSlabBytes + kt * 16 * kSlabRowBytes));
    atlas::wgmma_commit();
  };
  auto pv_done = [&]() {
    atlas::wgmma_wait<0>();
#pragma unroll
    for (int dh = 0; dh < G::kSlabs; ++dh) atlas::fence_acc(o[dh]);
    fence_frag(pf);
  };

  // Tile t's softmax: mask only where the tile reaches past the warpgroup's first row's
  // diagonal (warpgroup-uniform), or (window_tile, below lo_tiles) to each row's window, O
  // rescaled once PV_{t-1} is done, then P_t packed.
  auto softmax_tile = [&](int t, bool pv_in_flight, bool window_tile) {
    float corr[2];
    if (window_tile)
      atlas::online_softmax_tile<kBKV / 8, true, true>(s, t * kBKV + 2 * c, limit, scale_log2,
                                                       m_run, l_run, corr, span);
    else if (t < full_tiles)
      atlas::online_softmax_tile<kBKV / 8, false>(s, t * kBKV + 2 * c, limit, scale_log2,
                                                  m_run, l_run, corr);
    else
      atlas::online_softmax_tile<kBKV / 8, true>(s, t * kBKV + 2 * c, limit, scale_log2,
                                                 m_run, l_run, corr);
    if (pv_in_flight) pv_done();
    // kWide: past the first tiles of a long row the running max rarely moves, so a warp
    // whose rows all keep theirs (correction exactly 1) skips the rescale, which leaves the
    // same bits (the 64-key entries rescale every tile, as measured). A row that has seen
    // no key yet (its window starts in a later tile) has correction 0, not 1: rescaled.
    if (!kWide || __any_sync(0xffffffffu, corr[0] != 1.f || corr[1] != 1.f)) {
#pragma unroll
      for (int dh = 0; dh < G::kSlabs; ++dh)
#pragma unroll
        for (int j = 0; j < 32; ++j) o[dh][j] *= corr[(j >> 1) & 1];
    }
#pragma unroll
    for (int kt = 0; kt < G::kSlices; ++kt) atlas::prob_fragments<1>(s, kt, pf[kt]);
  };
  // Top of iteration t: tile t landed everywhere, tile t + kAhead's copies issued into the
  // slot of tile t + kAhead - kStages = t - 2, whose last reader PV_{t-2} completed in
  // iteration t - 1, before this barrier.
  auto next_tile = [&](int t) {
    atlas::cp_async_wait<kAhead - 1>();  // tile t (and Q) landed for this thread
    atlas::fence_proxy_async();          // visible to wgmma
    __syncthreads();  // ... for every thread; PV_{t-2} done in both warpgroups
    if (t + kAhead < te) {
      issue(t + kAhead, page, false);
      if (t + kAhead + 1 < te) lookup(t + kAhead + 1, page);
    }
    atlas::cp_async_commit();
  };

  // Every warpgroup runs every tile of the block: a warpgroup whose rows end earlier sees
  // only masked keys there (probabilities 0, correction 1), which keeps the wgmma schedule
  // free of thread-dependent branches (ptxas serializes wgmma in divergent code).
  // The tiles below lo_tiles (block-uniform: the loops hold wgmma) are masked to the rows'
  // windows, the rest as without a window.
  next_tile(ts);
  issue_s(ts);
  atlas::wgmma_wait<0>();
  atlas::fence_acc(s_acc);
  softmax_tile(ts, false, ts < lo_tiles);
  auto step = [&](int t, bool window_tile) {
    next_tile(t);
    issue_s(t);
    issue_pv(t - 1);
    atlas::wgmma_wait<1>();  // S_t done; PV_{t-1} may still run
    atlas::fence_acc(s_acc);
    softmax_tile(t, true, window_tile);
  };
  int t = ts + 1;
  for (; t < min(lo_tiles, te); ++t) step(t, true);
  for (; t < te; ++t) step(t, false);
  issue_pv(te - 1);
  pv_done();
  atlas::cp_async_wait<0>();  // only empty groups remain

#pragma unroll
  for (int hh = 0; hh < 2; ++hh) {
    float l = l_run[hh];
    l += __shfl_xor_sync(0xffffffffu, l, 1);
    l += __shfl_xor_sync(0xffffffffu, l, 2);
    const int r = row_g + 8 * hh;
    if (r >= n_rows) continue;
    if (kSplit && splits > 1) {
      const size_t at = partial_at(r);
      const float inv = l > 0.f ? 1.f / l : 0.f;
#pragma unroll
      for (int dh = 0; dh < G::kSlabs; ++dh)
#pragma unroll
        for (int j = 0; j < 8; ++j)
          *reinterpret_cast<float2*>(part_o + at * D + 64 * dh + 8 * j + 2 * c) =
              make_float2(o[dh][4 * j + 2 * hh] * inv, o[dh][4 * j + 2 * hh + 1] * inv);
      if (c == 0)
        *reinterpret_cast<float2*>(part_ml + 2 * at) =
            make_float2(l > 0.f ? m_run[hh] : -INFINITY, l);
      continue;
    }
    const float inv = 1.f / l;
    __nv_bfloat16* dst =
        out + (static_cast<size_t>(seq_start + r / pk) * hq + head_of(r)) * proj_dim + 2 * c;
#pragma unroll
    for (int dh = 0; dh < G::kSlabs; ++dh)
#pragma unroll
      for (int j = 0; j < 8; ++j)
        if (64 * dh + 8 * j < proj_dim)  // a padded head's first proj_dim elements
          *reinterpret_cast<__nv_bfloat162*>(dst + 64 * dh + 8 * j) = __floats2bfloat162_rn(
              o[dh][4 * j + 2 * hh] * inv, o[dh][4 * j + 2 * hh + 1] * inv);
  }
}

}  // namespace

extern "C" __global__ void __launch_bounds__(kThreads, 1)
    prefill_attn_sm90_bf16(const __nv_bfloat16* q, const __nv_bfloat16* k_cache,
                           const __nv_bfloat16* v_cache, const int* block_tables,
                           const int* cu_q, const int* kv_lens, __nv_bfloat16* out,
                           uint32_t num_seqs, uint32_t hq, uint32_t hkv, uint32_t head_dim,
                           uint32_t block_size, uint32_t max_blocks, float scale,
                           uint32_t window, uint32_t proj_dim) {
  extern __shared__ __align__(16) uint8_t sm90_smem[];
  const int w = static_cast<int>(window), pd = static_cast<int>(proj_dim);
  atlas::pdl_enter();  // q, cu_q, kv_lens and the cache come from the kernels before this one
  if (head_dim == 128)
    prefill_attn_sm90<128, false>(q, k_cache, v_cache, block_tables, cu_q, kv_lens, out, hq,
                                  hkv, block_size, max_blocks, scale, w, pd, sm90_smem);
  else if (head_dim == 256)
    prefill_attn_sm90<256, false>(q, k_cache, v_cache, block_tables, cu_q, kv_lens, out, hq,
                                  hkv, block_size, max_blocks, scale, w, pd, sm90_smem);
  else
    __trap();  // ops/attention_sm90.py PREFILL_SM90_HEAD_DIMS
}

// The same at head_dim 128 with Q in registers (wgmma with A from registers for S = Q K^T):
// S then reads 2 KB of shared memory per m64n64k16 instead of 4 KB, which with PV's reads
// and the ring's copies keeps shared-memory traffic under its 128 B/clock per SM at full
// MMA rate. The A/B of ops/attention_sm90 (ATLAS_PREFILL_ATTN_QREG).
extern "C" __global__ void __launch_bounds__(kThreads, 1)
    prefill_attn_sm90_qreg_bf16(const __nv_bfloat16* q, const __nv_bfloat16* k_cache,
                                const __nv_bfloat16* v_cache, const int* block_tables,
                                const int* cu_q, const int* kv_lens, __nv_bfloat16* out,
                                uint32_t num_seqs, uint32_t hq, uint32_t hkv, uint32_t head_dim,
                                uint32_t block_size, uint32_t max_blocks, float scale,
                                uint32_t window, uint32_t proj_dim) {
  extern __shared__ __align__(16) uint8_t sm90_smem[];
  const int w = static_cast<int>(window), pd = static_cast<int>(proj_dim);
  atlas::pdl_enter();
  if (head_dim != 128) __trap();  // ops/attention_sm90.py PREFILL_SM90_QREG_HEAD_DIM
  prefill_attn_sm90<128, true>(q, k_cache, v_cache, block_tables, cu_q, kv_lens, out, hq, hkv,
                               block_size, max_blocks, scale, w, pd, sm90_smem);
}

// The same at head_dim 128 on 128-key tiles in a 3-stage ring (Sm90Geometry's kWide): the
// A/B of ops/attention_sm90 (ATLAS_PREFILL_ATTN_WIDE).
extern "C" __global__ void __launch_bounds__(kThreads, 1)
    prefill_attn_sm90_wide_bf16(const __nv_bfloat16* q, const __nv_bfloat16* k_cache,
                                const __nv_bfloat16* v_cache, const int* block_tables,
                                const int* cu_q, const int* kv_lens, __nv_bfloat16* out,
                                uint32_t num_seqs, uint32_t hq, uint32_t hkv, uint32_t head_dim,
                                uint32_t block_size, uint32_t max_blocks, float scale,
                                uint32_t window, uint32_t proj_dim) {
  extern __shared__ __align__(16) uint8_t sm90_smem[];
  const int w = static_cast<int>(window), pd = static_cast<int>(proj_dim);
  atlas::pdl_enter();
  if (head_dim != 128) __trap();  // ops/attention_sm90.py PREFILL_SM90_WIDE_HEAD_DIM
  prefill_attn_sm90<128, false, true>(q, k_cache, v_cache, block_tables, cu_q, kv_lens, out,
                                      hq, hkv, block_size, max_blocks, scale, w, pd, sm90_smem);
}

// Short chunks past long histories (ops/attention_sm90.py split_plan): the default entry's
// schedule (128-key tiles at head_dim 128, 64-key at 256) on a grid of (kv heads when `pack`,
// else q heads; row tiles; sequences x num_splits). With pack, a tile's rows are (query,
// q head) pairs of one kv head's group, so a 24-query chunk of a GQA-4 model fills 96 of its
// 128 rows and its K/V are read once for the group. Split s of a block takes its run of the
// key tiles and, when num_splits > 1, writes its rows' partials (part_o f32 [tokens, hq,
// num_splits, head_dim], o normalized by its own l; part_ml f32 [tokens, hq, num_splits, 2]:
// the max scaled score in log2 units and l; tokens counted from cu_q[0]) for
// prefill_attn_sm90_merge_bf16; with one split it writes out itself.
extern "C" __global__ void __launch_bounds__(kThreads, 1)
    prefill_attn_sm90_split_bf16(const __nv_bfloat16* q, const __nv_bfloat16* k_cache,
                                 const __nv_bfloat16* v_cache, const int* block_tables,
                                 const int* cu_q, const int* kv_lens, __nv_bfloat16* out,
                                 uint32_t num_seqs, uint32_t hq, uint32_t hkv,
                                 uint32_t head_dim, uint32_t block_size, uint32_t max_blocks,
                                 float scale, uint32_t window, uint32_t proj_dim,
                                 uint32_t num_splits, uint32_t pack, float* part_o,
                                 float* part_ml) {
  extern __shared__ __align__(16) uint8_t sm90_smem[];
  const int w = static_cast<int>(window), pd = static_cast<int>(proj_dim);
  const int ns = static_cast<int>(num_splits);
  atlas::pdl_enter();
  if (head_dim == 128)
    prefill_attn_sm90<128, false, true, true>(q, k_cache, v_cache, block_tables, cu_q, kv_lens,
                                              out, hq, hkv, block_size, max_blocks, scale, w, pd,
                                              sm90_smem, ns, pack != 0, part_o, part_ml);
  else if (head_dim == 256)
    prefill_attn_sm90<256, false, false, true>(q, k_cache, v_cache, block_tables, cu_q,
                                               kv_lens, out, hq, hkv, block_size, max_blocks,
                                               scale, w, pd, sm90_smem, ns, pack != 0, part_o,
                                               part_ml);
  else
    __trap();  // ops/attention_sm90.py PREFILL_SM90_HEAD_DIMS
}

// The merge of prefill_attn_sm90_split_bf16's partials: grid (ceil(hq * head_dim / 4 /
// 128), tokens bound), 128 threads, a thread one 4-element quad of one (token, q head) row:
// out = sum_s w_s o_s / sum_s w_s, w_s = l_s 2^(m_s - max m), splits without keys skipped;
// a head's first proj_dim elements (out rows hq * proj_dim). Tokens past cu_q[num_seqs]
// exit.
extern "C" __global__ void __launch_bounds__(128)
    prefill_attn_sm90_merge_bf16(const float* part_o, const float* part_ml, const int* cu_q,
                                 __nv_bfloat16* out, uint32_t num_seqs, uint32_t hq,
                                 uint32_t head_dim, uint32_t num_splits, uint32_t proj_dim) {
  atlas::pdl_enter();  // the partials come from the kernel before
  const int quads = static_cast<int>(head_dim) / 4;
  const int idx = blockIdx.x * blockDim.x + threadIdx.x;
  const int tok = blockIdx.y;
  if (idx >= static_cast<int>(hq) * quads || cu_q[0] + tok >= cu_q[num_seqs]) return;
  const int head = idx / quads, d = (idx % quads) * 4;
  if (d >= static_cast<int>(proj_dim)) return;  // a padded head's tail: never read
  const int ns = static_cast<int>(num_splits);
  const size_t row = static_cast<size_t>(tok) * hq + head;
  const float2* ml = reinterpret_cast<const float2*>(part_ml) + row * ns;
  const float* o = part_o + row * ns * head_dim + d;
  float top = -INFINITY, total = 0.f, acc[4] = {0.f, 0.f, 0.f, 0.f};
  for (int s = 0; s < ns; ++s) {
    const float2 e = __ldcg(ml + s);
    if (e.y == 0.f) continue;  // no key of this split is visible to the row
    const float4 v = __ldcg(reinterpret_cast<const float4*>(o + static_cast<size_t>(s) * head_dim));
    const float mx = fmaxf(top, e.x);
    const float rescale = exp2f(top - mx), wt = e.y * exp2f(e.x - mx);
    top = mx;
    total = fmaf(total, rescale, wt);
    acc[0] = fmaf(wt, v.x, acc[0] * rescale);
    acc[1] = fmaf(wt, v.y, acc[1] * rescale);
    acc[2] = fmaf(wt, v.z, acc[2] * rescale);
    acc[3] = fmaf(wt, v.w, acc[3] * rescale);
  }
  __nv_bfloat16* dst = out + (static_cast<size_t>(cu_q[0] + tok) * hq + head) * proj_dim + d;
  *reinterpret_cast<uint2*>(dst) = make_uint2(atlas::pack_bf16x2(acc[0] / total, acc[1] / total),
                                              atlas::pack_bf16x2(acc[2] / total, acc[3] / total));
}
