// Attention over the paged KV cache: flash-style prefill (tensor cores) and split-K decode.
//
// Cache layout (kernel_abi.py): K and V pools [num_blocks, hkv, block_size, head_dim] bf16;
// token p of sequence b lives in block block_tables[b][p / block_size] at offset
// p % block_size. kv_lens[b] counts the cached tokens including this step's.
//
// prefill_attn_bf16: grid (hq, ceil(max_q_len / 64), num_seqs), 128 threads. A block owns
//   64 queries of one head of one sequence (16 per warp); query tiles are numbered from the
//   end, so the blocks that see the most keys (causal) are scheduled first and the short
//   ones fill the tail, and all heads of a tile run together (GQA siblings share K/V in L2). Q is staged once into registers
//   as mma A fragments; K/V tiles of kBKV keys stream through a 2-stage cp.async ring
//   (gathered row by row through the block table, rows past the last visible key zero-filled
//   and never read from the cache). S = Q K^T and O += P V run on mma.m16n8k16; the online
//   softmax is f32 in log2 units. P enters the PV product as two bf16 mmas, P = hi + lo with
//   hi = bf16(P), lo = bf16(P - hi): P keeps ~16 significant bits, so the result matches the
//   f32-probability reference to accumulation-order error (a single rounded P would differ
//   from any reference by whole bf16 ulps wherever f32 noise flips a rounding). That costs
//   one third more tensor-core work. Query i of a chunk of q_len sits at absolute
//   position kv_len - q_len + i and sees keys 0..that position, so first and chunked prefill
//   are the same kernel. With a sliding window (window > 0) it sees the last `window` of
//   them: a block starts at the first tile any of its rows sees, the tiles holding the start
//   of some row's window are masked on both sides, and the first tile's keys before every
//   row's window are zero-filled and never read. out is [tokens, hq * proj_dim]: a head's
//   first proj_dim <= D elements (a padded head, ops/attention.py padded_head_dim). With
//   attention sinks (gpt-oss: sinks bf16 [hq], null: none) each row's denominator also sums
//   e^(sinks[h] - m) against its running max m, at the final normalization.
// decode_attn_bf16: grid (num_splits, hkv x slices, num_seqs), 128 threads. A block reads
//   the K/V rows of its split once and serves one slice of up to 4 of the kv head's q heads
//   (slices = ceil(group / 4): a group of 8 runs as 2 blocks side by side, the second K/V
//   read mostly from L2, instead of 2 serial passes). num_splits is only the
//   grid size (fixed in a CUDA graph); the split is decided here from the live kv_len:
//   c = max(ceil(kv_len / num_splits), kMinKeysPerSplit), split i covers keys
//   [i c, min((i + 1) c, kv_len)), and the ceil(kv_len / c) splits with keys are the active
//   ones. An inactive split's block exits at once and writes nothing, so a short context
//   costs a few blocks of one K/V round trip each, not num_splits blocks of a few keys.
//   head_dim / 8 lanes share a key (16 bytes each), kDecodeUnroll keys per lane are loaded
//   per iteration and the next iteration's rows are in flight while one is computed.
//   Partial results are merged across key groups by shuffles and across warps in shared
//   memory. With one active split (kv_len <= kMinKeysPerSplit) that is the answer, written
//   to out. Otherwise each split writes part_o [seq, hq, split, D] (normalized by its own l)
//   and part_ml [seq, hq, split, 2] = (max score in natural-log units, sum of exp(score -
//   max)), and the last of the (seq, kv head)'s active splits to finish merges them into out
//   (in split order, whichever block is last): a ticket from counters[seq * gridDim.y +
//   blockIdx.y] (zero before every launch; the last block resets it, so graph replays find
//   it zero).
//   That replaces a second combine launch. A sequence with no keys gets zeros.
// decode_attn_cluster_bf16: the same for grids of kClusterSplits splits or more (small
//   batches), in thread-block clusters of kClusterSplits consecutive splits, with splits of
//   at least kClusterMinKeys keys: a cluster merges its splits' partials through distributed
//   shared memory (decode_cluster_merge), so up to 512 keys need no partials, no ticket and
//   no L2 re-read; beyond that each cluster's merged partial takes the ticket path.
// decode_attn_rope_bf16, decode_attn_rope_cluster_bf16: the same with qk_norm_rope_kv_bf16's
//   work done in the blocks (RopedQ), and everything but the qkv row read (or requested into
//   L2) before the PDL wait (RopedQ says why that is sound).
// decode_attn_combine_bf16: grid (1, hq, num_seqs), 128 threads: the same merge for the
//   partials of the long-context kernel (attention_long.cu), which has no merge of its own;
//   with a sliding window its splits cut the min(kv_len, window) keys the window sees.
// The decode kernels are instances of decode_attn.cuh's template; attention_twins.cu holds
// their twins the engine does not launch by default (phase-traced, for
// tools/gpu/trace_decode_attn.py).
// Every other entry point waits for the previous kernel (programmatic dependent launch)
// before it reads anything: q, the cache, the tables and kv_lens are all written by earlier
// work.
#include "atlas_common.cuh"
#include "attention_tile.cuh"
#include "decode_attn.cuh"
#include "mma_util.cuh"

namespace {

// Element offset of the head_dim-long row of token p, kv head kvh, in a K or V pool.
__device__ __forceinline__ size_t cache_row(const int* table, int p, int hkv, int kvh,
                                            int block_size, int head_dim) {
  const int blk = table[p / block_size];
  return ((static_cast<size_t>(blk) * hkv + kvh) * block_size + p % block_size) * head_dim;
}

// ---- prefill ------------------------------------------------------------------------------

template <int D>
struct Prefill {
  static constexpr int kBQ = 64;                 // ops/attention.py PREFILL_QUERY_TILE
  // keys per K/V tile: the ring is the same 32 KiB for every D (D = 256 keeps its 16 x 4
  // Q fragments and 32 x 4 O accumulators in registers, so its S tile is the smallest)
  static constexpr int kBKV = D == 256 ? 16 : D == 128 ? 32 : 64;
  static constexpr int kChunks = D / 8;          // 16-byte chunks per row
  static constexpr int kTileElems = kBKV * D;    // one K or V tile [kBKV][D], swizzled
  static constexpr int kStageElems = 2 * kTileElems;
  static constexpr int kSmemElems = 2 * kStageElems;
  static_assert(kBQ * D <= kSmemElems, "the Q tile is staged in the K/V ring");
};
constexpr int kPrefillSmemElems = Prefill<128>::kSmemElems;
static_assert(Prefill<64>::kSmemElems == kPrefillSmemElems &&
                  Prefill<256>::kSmemElems == kPrefillSmemElems,
              "one static buffer serves every head dim");

// kSinks: the instantiation taking attention sinks (an entry's run-time dispatch: the plain
// instantiations keep their code and registers)
template <int D, bool kSinks = false>
__device__ __forceinline__ void prefill_attn(
    const __nv_bfloat16* __restrict__ q, const __nv_bfloat16* __restrict__ k_cache,
    const __nv_bfloat16* __restrict__ v_cache, const int* __restrict__ block_tables,
    const int* __restrict__ cu_q, const int* __restrict__ kv_lens, __nv_bfloat16* __restrict__ out,
    int hq, int hkv, int block_size, int max_blocks, float scale, int window, int proj_dim,
    const __nv_bfloat16* __restrict__ sinks, __nv_bfloat16* smem) {
  using P = Prefill<D>;
  const int b = blockIdx.z, h = blockIdx.x, q0 = (gridDim.y - 1 - blockIdx.y) * P::kBQ;
  const int seq_start = cu_q[b], q_len = cu_q[b + 1] - seq_start;
  if (q0 >= q_len) return;  // uniform per block: this tile is past the sequence's chunk
  const int kv_len = kv_lens[b];
  const int first_pos = kv_len - q_len;  // absolute position of the chunk's query 0
  const int kvh = h / (hq / hkv);
  const int n_keys = first_pos + min(q0 + P::kBQ, q_len);  // keys any query here can see
  const int n_tiles = (n_keys + P::kBKV - 1) / P::kBKV;
  // A sliding window (window > 0) lets row p see keys [p - span, p]: the block's first row
  // sees from lo_key on (the tiles before t0 hold no key any row here sees), and below
  // lo_tiles some row's window begins inside a tile (the last row's from n_keys - window)
  const int span = window - 1;
  const int lo_key = window > 0 ? max(first_pos + q0 - span, 0) : 0;
  const int t0 = lo_key / P::kBKV;
  const int lo_tiles = window > 0 ? (max(n_keys - window, 0) + P::kBKV - 1) / P::kBKV : 0;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int* table = block_tables + static_cast<size_t>(b) * max_blocks;

  // Q tile [kBQ][D] -> smem (rows past the chunk zero-filled) -> A fragments in registers.
#pragma unroll
  for (int it = 0; it < P::kBQ * P::kChunks / kThreads; ++it) {
    const int i = tid + it * kThreads, r = i / P::kChunks, ch = i % P::kChunks;
    const bool ok = q0 + r < q_len;
    const __nv_bfloat16* src =
        ok ? q + (static_cast<size_t>(seq_start + q0 + r) * hq + h) * D + ch * 8 : q;
    atlas::cp_async_16(smem + atlas::swizzle_offset<P::kChunks>(r, ch), src, ok);
  }
  atlas::cp_async_commit();
  atlas::cp_async_wait<0>();
  __syncthreads();
  uint32_t qf[D / 16][4];
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk)
    atlas::ldmatrix_x4(qf[kk], smem + atlas::swizzle_offset<P::kChunks>(warp * 16 + (lane & 15),
                                                                          2 * kk + (lane >> 4)));
  __syncthreads();  // the ring below overwrites the staged Q

  // K/V tile `tile` -> ring stage `stage`: [K tile][V tile], rows = keys, swizzled chunks.
  // `first` (tile t0 only): its keys before lo_key are zero-filled too, never read (a
  // windowed cache need not hold them).
  auto load_kv = [&](int stage, int tile, bool first) {
    __nv_bfloat16* sk = smem + stage * P::kStageElems;
    __nv_bfloat16* sv = sk + P::kTileElems;
#pragma unroll
    for (int it = 0; it < P::kBKV * P::kChunks / kThreads; ++it) {
      const int i = tid + it * kThreads, r = i / P::kChunks, ch = i % P::kChunks;
      const int p = tile * P::kBKV + r;
      const bool ok = p < n_keys && (!first || p >= lo_key);
      const size_t off = ok ? cache_row(table, p, hkv, kvh, block_size, D) + ch * 8 : 0;
      const int dst = atlas::swizzle_offset<P::kChunks>(r, ch);
      atlas::cp_async_16(sk + dst, k_cache + off, ok);
      atlas::cp_async_16(sv + dst, v_cache + off, ok);
    }
  };

  // This thread's two query rows (fragment rows g and g + 8 of its warp's 16) and the last
  // key each may see. Rows past the chunk get kv_len - 1 (finite, never stored; with a window
  // the last row's keys).
  const int row_g = q0 + warp * 16 + (lane >> 2);
  int limit[2];
#pragma unroll
  for (int hh = 0; hh < 2; ++hh) {
    const int qi = row_g + 8 * hh;
    limit[hh] = qi < q_len ? first_pos + qi : kv_len - 1;
  }
  const float scale_log2 = scale * kLog2e;
  float o[D / 8][4];
#pragma unroll
  for (int j = 0; j < D / 8; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) o[j][e] = 0.f;
  float m_run[2] = {-INFINITY, -INFINITY}, l_run[2] = {0.f, 0.f};

  // Tile t, masked causally and (window_tile: the tiles below lo_tiles, in a loop of their
  // own so the other tiles' loop is the one without a window) to each row's window.
  auto step = [&](int t, bool window_tile) {
    if (t + 1 < n_tiles) load_kv((t + 1) & 1, t + 1, false);
    atlas::cp_async_commit();
    atlas::cp_async_wait<1>();  // tile t has landed
    __syncthreads();
    const __nv_bfloat16* sk = smem + (t & 1) * P::kStageElems;
    const __nv_bfloat16* sv = sk + P::kTileElems;

    // S = Q K^T for this warp's 16 rows x kBKV keys.
    float s[P::kBKV / 8][4];
#pragma unroll
    for (int j = 0; j < P::kBKV / 8; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) s[j][e] = 0.f;
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
#pragma unroll
      for (int j = 0; j < P::kBKV / 8; j += 2) {
        // matrices: (keys 0-7, d lo), (keys 0-7, d hi), (keys 8-15, d lo), (keys 8-15, d hi)
        const int r = j * 8 + (lane & 7) + ((lane >> 4) << 3);
        uint32_t kb[4];
        atlas::ldmatrix_x4(kb, sk + atlas::swizzle_offset<P::kChunks>(r, 2 * kk + ((lane >> 3) & 1)));
        atlas::mma_bf16_16816(s[j], qf[kk], kb[0], kb[1]);
        atlas::mma_bf16_16816(s[j + 1], qf[kk], kb[2], kb[3]);
      }
    }

    // Causal (and window) mask and online softmax (attention_tile.cuh).
    float corr[2];
    if (window_tile)
      atlas::online_softmax_tile<P::kBKV / 8, true, true>(s, t * P::kBKV + (lane & 3) * 2, limit,
                                                          scale_log2, m_run, l_run, corr, span);
    else
      atlas::online_softmax_tile(s, t * P::kBKV + (lane & 3) * 2, limit, scale_log2, m_run,
                                 l_run, corr);
#pragma unroll
    for (int j = 0; j < D / 8; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) o[j][e] *= corr[e >> 1];

    // O += P V: two S n-tiles (16 keys) form one A fragment (as hi + lo bf16 parts); V comes
    // through transposed ldmatrix.
#pragma unroll
    for (int kt = 0; kt < P::kBKV / 16; ++kt) {
      uint32_t pf[2][4];  // hi + lo parts
      atlas::prob_fragments<2>(s, kt, pf);
      atlas::pv_slice_mma<D, 2, false>(o, pf, sv, kt * 16, lane);
    }
    __syncthreads();  // stage t & 1 is refilled by the next iteration's prefetch
  };
  load_kv(t0 & 1, t0, true);
  atlas::cp_async_commit();
  int t = t0;
  for (; t < lo_tiles; ++t) step(t, true);
  for (; t < n_tiles; ++t) step(t, false);

  // the head's sink logit in the running max's log2 units (its column dropped: only the
  // denominator takes it)
  const float sink_log2 = kSinks ? __bfloat162float(sinks[h]) * kLog2e : 0.f;
#pragma unroll
  for (int hh = 0; hh < 2; ++hh) {
    float l = l_run[hh];
    l += __shfl_xor_sync(0xffffffffu, l, 1);
    l += __shfl_xor_sync(0xffffffffu, l, 2);
    const int qi = row_g + 8 * hh;
    if (qi >= q_len) continue;
    if constexpr (kSinks) l += exp2f(sink_log2 - m_run[hh]);  // a row sees >= 1 key
    const float inv = 1.f / l;
    __nv_bfloat16* dst =
        out + (static_cast<size_t>(seq_start + qi) * hq + h) * proj_dim + (lane & 3) * 2;
#pragma unroll
    for (int j = 0; j < D / 8; ++j)
      if (j * 8 < proj_dim)  // a padded head's first proj_dim elements
        *reinterpret_cast<__nv_bfloat162*>(dst + j * 8) =
            __floats2bfloat162_rn(o[j][2 * hh] * inv, o[j][2 * hh + 1] * inv);
  }
}

}  // namespace

// Two blocks per SM (8 warps): the register budget this implies (<= 255) keeps the Q and O
// fragments of D = 128 and 256 (16 x 4 Q, 32 x 4 O a thread; 255 registers) resident without
// spills on both sm_90a and sm_121.
extern "C" __global__ void __launch_bounds__(kThreads, 2)
    prefill_attn_bf16(const __nv_bfloat16* q, const __nv_bfloat16* k_cache,
                      const __nv_bfloat16* v_cache, const int* block_tables, const int* cu_q,
                      const int* kv_lens, __nv_bfloat16* out, uint32_t num_seqs, uint32_t hq,
                      uint32_t hkv, uint32_t head_dim, uint32_t block_size, uint32_t max_blocks,
                      float scale, uint32_t window, uint32_t proj_dim,
                      const __nv_bfloat16* sinks) {
  atlas::pdl_enter();  // q, cu_q, kv_lens and the cache come from the kernels before this one
  // K/V ring: 2 stages x {K [kBKV][D], V [kBKV][D]} bf16, 16-byte chunks XOR-swizzled by row.
  __shared__ __align__(128) __nv_bfloat16 smem[kPrefillSmemElems];
  const int w = static_cast<int>(window), pd = static_cast<int>(proj_dim);
  if (sinks != nullptr) {  // gpt-oss (D 64); D 128 too, D 256 has no sink instantiation
    if (head_dim == 64)
      prefill_attn<64, true>(q, k_cache, v_cache, block_tables, cu_q, kv_lens, out, hq, hkv,
                             block_size, max_blocks, scale, w, pd, sinks, smem);
    else if (head_dim == 128)
      prefill_attn<128, true>(q, k_cache, v_cache, block_tables, cu_q, kv_lens, out, hq, hkv,
                              block_size, max_blocks, scale, w, pd, sinks, smem);
    else
      __trap();  // core/head_dims.py SINK_HEAD_DIMS
    return;
  }
  if (head_dim == 128)
    prefill_attn<128>(q, k_cache, v_cache, block_tables, cu_q, kv_lens, out, hq, hkv, block_size,
                      max_blocks, scale, w, pd, sinks, smem);
  else if (head_dim == 256)
    prefill_attn<256>(q, k_cache, v_cache, block_tables, cu_q, kv_lens, out, hq, hkv, block_size,
                      max_blocks, scale, w, pd, sinks, smem);
  else if (head_dim == 64)
    prefill_attn<64>(q, k_cache, v_cache, block_tables, cu_q, kv_lens, out, hq, hkv, block_size,
                     max_blocks, scale, w, pd, sinks, smem);
  else
    __trap();  // ops/attention.py HEAD_DIMS
}


extern "C" __global__ void __launch_bounds__(kThreads, 2)
    decode_attn_bf16(const __nv_bfloat16* q, const __nv_bfloat16* k_cache,
                     const __nv_bfloat16* v_cache, const int* block_tables, const int* kv_lens,
                     float* part_o, float* part_ml, unsigned* counters, __nv_bfloat16* out,
                     uint32_t num_seqs, uint32_t hq, uint32_t hkv, uint32_t head_dim,
                     uint32_t block_size, uint32_t max_blocks, uint32_t num_splits,
                     float scale) {
  decode_attn_cached<false, kDecodeAheadRounds, NoTrace>(q, k_cache, v_cache, block_tables, kv_lens,
                                                         part_o, part_ml, counters, out, hq, hkv,
                                                         head_dim, block_size, max_blocks,
                                                         num_splits, scale, kNoCluster);
}

// decode_attn_bf16 with the splits in clusters of kClusterSplits (grid x a multiple of it),
// merged by pushing the warps' partials (decode_push_merge; attention_twins.cu has the pull
// merge, decode_attn_cluster_pull_bf16).
extern "C" __global__ void __cluster_dims__(kClusterSplits, 1, 1) __launch_bounds__(kThreads, 2)
    decode_attn_cluster_bf16(const __nv_bfloat16* q, const __nv_bfloat16* k_cache,
                             const __nv_bfloat16* v_cache, const int* block_tables,
                             const int* kv_lens, float* part_o, float* part_ml,
                             unsigned* counters, __nv_bfloat16* out, uint32_t num_seqs,
                             uint32_t hq, uint32_t hkv, uint32_t head_dim, uint32_t block_size,
                             uint32_t max_blocks, uint32_t num_splits, float scale) {
  __shared__ atlas::PushScratch mine;
  decode_attn_cached<true, 1, NoTrace>(q, k_cache, v_cache, block_tables, kv_lens, part_o, part_ml,
                                       counters, out, hq, hkv, head_dim, block_size, max_blocks,
                                       num_splits, scale, &mine);
}

// qk_norm_rope_kv_bf16 (classic layout: q heads D apart, full rotation, plain or no norm
// weights) and decode_attn_bf16 in one launch: see RopedQ.
extern "C" __global__ void __launch_bounds__(kThreads, 2)
    decode_attn_rope_bf16(const __nv_bfloat16* qkv, __nv_bfloat16* k_cache,
                          __nv_bfloat16* v_cache, const __nv_bfloat16* q_norm_w,
                          const __nv_bfloat16* k_norm_w, const float* cos_sin,
                          const int* positions, const int* slots, const int* block_tables,
                          const int* kv_lens, float* part_o, float* part_ml,
                          unsigned* counters, __nv_bfloat16* out, uint32_t num_seqs,
                          uint32_t hq, uint32_t hkv, uint32_t head_dim, uint32_t block_size,
                          uint32_t max_blocks, uint32_t num_splits, float scale, float eps) {
  decode_attn_roped<false, true, kDecodeAheadRounds, NoTrace>(qkv, k_cache, v_cache, q_norm_w,
                                                              k_norm_w, cos_sin, positions, slots,
                                                              block_tables, kv_lens, part_o,
                                                              part_ml, counters, out, hq, hkv,
                                                              head_dim, block_size, max_blocks,
                                                              num_splits, scale, eps, kNoCluster);
}

// decode_attn_rope_bf16 waiting for the previous kernel before it reads anything (the A/B
// of its pre-wait reads).
extern "C" __global__ void __launch_bounds__(kThreads, 2)
    decode_attn_rope_wait_bf16(const __nv_bfloat16* qkv, __nv_bfloat16* k_cache,
                               __nv_bfloat16* v_cache, const __nv_bfloat16* q_norm_w,
                               const __nv_bfloat16* k_norm_w, const float* cos_sin,
                               const int* positions, const int* slots, const int* block_tables,
                               const int* kv_lens, float* part_o, float* part_ml,
                               unsigned* counters, __nv_bfloat16* out, uint32_t num_seqs,
                               uint32_t hq, uint32_t hkv, uint32_t head_dim,
                               uint32_t block_size, uint32_t max_blocks, uint32_t num_splits,
                               float scale, float eps) {
  decode_attn_roped<false, false, 1, NoTrace>(qkv, k_cache, v_cache, q_norm_w, k_norm_w, cos_sin,
                                              positions, slots, block_tables, kv_lens, part_o,
                                              part_ml, counters, out, hq, hkv, head_dim, block_size,
                                              max_blocks, num_splits, scale, eps, kNoCluster);
}

// decode_attn_rope_bf16 with the splits in clusters of kClusterSplits (grid x a multiple),
// merged as decode_attn_cluster_bf16 (the pull twin: decode_attn_rope_cluster_pull_bf16).
extern "C" __global__ void __cluster_dims__(kClusterSplits, 1, 1) __launch_bounds__(kThreads, 2)
    decode_attn_rope_cluster_bf16(const __nv_bfloat16* qkv, __nv_bfloat16* k_cache,
                                  __nv_bfloat16* v_cache, const __nv_bfloat16* q_norm_w,
                                  const __nv_bfloat16* k_norm_w, const float* cos_sin,
                                  const int* positions, const int* slots,
                                  const int* block_tables, const int* kv_lens, float* part_o,
                                  float* part_ml, unsigned* counters, __nv_bfloat16* out,
                                  uint32_t num_seqs, uint32_t hq, uint32_t hkv,
                                  uint32_t head_dim, uint32_t block_size, uint32_t max_blocks,
                                  uint32_t num_splits, float scale, float eps) {
  __shared__ atlas::PushScratch mine;
  decode_attn_roped<true, true, 1, NoTrace>(qkv, k_cache, v_cache, q_norm_w, k_norm_w, cos_sin,
                                            positions, slots, block_tables, kv_lens, part_o,
                                            part_ml, counters, out, hq, hkv, head_dim, block_size,
                                            max_blocks, num_splits, scale, eps, &mine);
}

// Merges the partials the long-context kernel (attention_long.cu) wrote: grid (1, hq,
// num_seqs), kThreads threads; each block is decode_merge_rows with a group of one head,
// writing its first proj_dim elements (out [num_seqs, hq * proj_dim]), the head's attention
// sink (sinks bf16 [hq], null: none) in the merged denominator.
// kEarly: decode_attn_combine_early_bf16, which lets the kernel after it (the o_proj or the
// output gate) launch before its own wait (atlas_common.cuh pdl_enter_early;
// ops/early_trigger.py routes batched steps to it).
template <bool kEarly>
__device__ __forceinline__ void decode_attn_combine(const float* part_o, const float* part_ml,
                                                    const int* kv_lens, __nv_bfloat16* out,
                                                    uint32_t hq, uint32_t head_dim,
                                                    uint32_t num_splits, uint32_t window,
                                                    uint32_t proj_dim,
                                                    const __nv_bfloat16* sinks) {
  atlas::pdl_enter_early<kEarly>();  // the partials and kv_lens come from the kernels before
  const int ns = static_cast<int>(num_splits), h = static_cast<int>(hq);
  // the kernel split the keys its window sees (window > 0: the last min(kv_len, window))
  const int kv_len = kv_lens[blockIdx.z];
  const int n = window > 0 ? min(kv_len, static_cast<int>(window)) : kv_len;
  const int active = decode_active_splits(n, ns);
  const int head = static_cast<int>(blockIdx.y), pd = static_cast<int>(proj_dim);
  if (head_dim == 128)
    decode_merge_rows<128>(part_o, part_ml, out, h, head, 1, ns, active, pd, sinks);
  else if (head_dim == 256)
    decode_merge_rows<256>(part_o, part_ml, out, h, head, 1, ns, active, pd, sinks);
  else if (head_dim == 64)
    decode_merge_rows<64>(part_o, part_ml, out, h, head, 1, ns, active, pd, sinks);
  else
    __trap();  // ops/attention.py HEAD_DIMS
}

extern "C" __global__ void __launch_bounds__(kThreads)
    decode_attn_combine_bf16(const float* part_o, const float* part_ml, const int* kv_lens,
                             __nv_bfloat16* out, uint32_t num_seqs, uint32_t hq,
                             uint32_t head_dim, uint32_t num_splits, uint32_t window,
                             uint32_t proj_dim, const __nv_bfloat16* sinks) {
  decode_attn_combine<false>(part_o, part_ml, kv_lens, out, hq, head_dim, num_splits, window,
                             proj_dim, sinks);
}

extern "C" __global__ void __launch_bounds__(kThreads)
    decode_attn_combine_early_bf16(const float* part_o, const float* part_ml,
                                   const int* kv_lens, __nv_bfloat16* out, uint32_t num_seqs,
                                   uint32_t hq, uint32_t head_dim, uint32_t num_splits,
                                   uint32_t window, uint32_t proj_dim,
                                   const __nv_bfloat16* sinks) {
  decode_attn_combine<true>(part_o, part_ml, kv_lens, out, hq, head_dim, num_splits, window,
                            proj_dim, sinks);
}
