// Causal prefill attention over the paged KV cache on Hopper warpgroup MMA (sm_90a only),
// head_dim 128: the same contract as attention.cu's prefill_attn_bf16 (grid (hq,
// ceil(max_q_len / 64), num_seqs), query tiles numbered from the end, chunked prefill by
// kv_len - q_len), for long prompts, where the mma.sync kernel reaches ~19% of the tensor
// peak (kernel table 2026-11-30, T = 4096).
//
// A block is one warpgroup (128 threads) owning 64 queries of one q head; warp w holds rows
// 16w..16w+15 of every 64-row wgmma tile, in exactly mma.m16n8k16's C layout, so the online
// softmax is prefill_attn_bf16's per-warp code. Shared memory (128-byte swizzle, 1024-byte
// aligned tiles of 64 rows x 64 bf16, wgmma_util.cuh): Q as two d-halves, then a 2-stage ring
// of K (two d-halves) and V (two d-halves) tiles of 64 keys, gathered row by row through the
// block table with 16-byte cp.async (keys past the visible range zero-filled, never read).
// Per K/V tile:
//   S[64 x 64] = Q K^T: 8 wgmma m64n64k16, both operands K-major descriptors (Q's and K's
//     rows are 128 d-elements, split in two 64-wide halves: k16 slice kk reads half kk / 4 at
//     +32 bytes per slice), as gemm_sm90 does;
//   causal mask, online softmax in f32 log2 units (rows of a quad);
//   O[64 x 128] += P V: P as hi + lo bf16 A fragments in registers (prefill_attn_bf16's
//     ~16-bit probabilities; the S accumulator layout *is* the A fragment layout), V N-major
//     (a V tile row is one key's 64 d-values: the k16 slice kt starts 16 rows = 2048 bytes
//     further), 2 d-halves x 4 key slices x (hi, lo) = 16 wgmma m64n64k16 with A in registers.
// Each group is waited for before its results are used (no overlap inside the warpgroup; two
// blocks per SM overlap each other's softmax and MMAs). PDL: everything is read after the
// wait (q, the cache and the tables are written by earlier kernels).
//
// Launch (ops/attention.py prefill_attention, route `prefill_attn_sm90`): 128 threads,
// dynamic shared memory SMEM_BYTES (ops/attention_sm90.py PREFILL_SM90_SMEM).
#include "atlas_common.cuh"
#include "attention_tile.cuh"
#include "mma_util.cuh"
#include "wgmma_util.cuh"

namespace {

constexpr int kThreads = 128;                  // one warpgroup
constexpr int kBQ = 64;                        // queries per block (ops/attention.py tile)
constexpr int kBKV = 64;                       // keys per K/V tile
constexpr int D = 128;                         // the head dim compiled
constexpr int kChunks = D / 8;                 // 16-byte chunks per row
constexpr int kHalfBytes = 64 * 128;           // one [64 rows][64 bf16] swizzled half tile
constexpr int kTileBytes = 2 * kHalfBytes;     // a [64][128] tile: two d-halves
constexpr int kStageBytes = 2 * kTileBytes;    // K tile, then V tile
constexpr int kAlign = 1024;
constexpr int SMEM_BYTES = kTileBytes + 2 * kStageBytes + kAlign;  // Q + 2 stages + slack
static_assert(kBQ * kChunks % kThreads == 0 && kBKV * kChunks % kThreads == 0,
              "copies divide evenly over the threads");
static_assert(2 * (SMEM_BYTES + 1024) <= 228 * 1024, "two blocks fit on an SM");

__device__ __forceinline__ void cp16(uint32_t dst, const void* src, bool ok) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src),
               "r"(ok ? 16 : 0)
               : "memory");
}

// Shared address of 16-byte chunk `ch` (0..15) of row `r` of a [64][128] tile at `tile`.
__device__ __forceinline__ uint32_t tile_chunk(uint32_t tile, int r, int ch) {
  return tile + (ch >> 3) * kHalfBytes + atlas::swizzle128(r, ch & 7);
}

__device__ __forceinline__ void prefill_attn_sm90(
    const __nv_bfloat16* __restrict__ q, const __nv_bfloat16* __restrict__ k_cache,
    const __nv_bfloat16* __restrict__ v_cache, const int* __restrict__ block_tables,
    const int* __restrict__ cu_q, const int* __restrict__ kv_lens,
    __nv_bfloat16* __restrict__ out, int hq, int hkv, int block_size, int max_blocks,
    float scale, uint8_t* smem_raw) {
  const int b = blockIdx.z, h = blockIdx.x, q0 = (gridDim.y - 1 - blockIdx.y) * kBQ;
  const int seq_start = cu_q[b], q_len = cu_q[b + 1] - seq_start;
  if (q0 >= q_len) return;  // uniform per block: this tile is past the sequence's chunk
  const int kv_len = kv_lens[b];
  const int first_pos = kv_len - q_len;  // absolute position of the chunk's query 0
  const int kvh = h / (hq / hkv);
  const int n_keys = first_pos + min(q0 + kBQ, q_len);  // keys any query here can see
  const int n_tiles = (n_keys + kBKV - 1) / kBKV;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, c = lane & 3;
  const int* table = block_tables + static_cast<size_t>(b) * max_blocks;

  const uint32_t raw = atlas::smem_addr(smem_raw);
  const uint32_t q_tile = (raw + kAlign - 1) & ~uint32_t(kAlign - 1);
  auto k_tile = [&](int stage) { return q_tile + kTileBytes + stage * kStageBytes; };
  auto v_tile = [&](int stage) { return k_tile(stage) + kTileBytes; };

  // Q [64][128] (rows past the chunk zero) and K/V tile `tile` into ring stage `stage`.
#pragma unroll
  for (int it = 0; it < kBQ * kChunks / kThreads; ++it) {
    const int i = tid + it * kThreads, r = i / kChunks, ch = i % kChunks;
    const bool ok = q0 + r < q_len;
    const __nv_bfloat16* src =
        ok ? q + (static_cast<size_t>(seq_start + q0 + r) * hq + h) * D + ch * 8 : q;
    cp16(tile_chunk(q_tile, r, ch), src, ok);
  }
  auto load_kv = [&](int stage, int tile) {
#pragma unroll
    for (int it = 0; it < kBKV * kChunks / kThreads; ++it) {
      const int i = tid + it * kThreads, r = i / kChunks, ch = i % kChunks;
      const int p = tile * kBKV + r;
      const bool ok = p < n_keys;
      size_t off = 0;
      if (ok) {
        const int blk = table[p / block_size];
        off = ((static_cast<size_t>(blk) * hkv + kvh) * block_size + p % block_size) * D + ch * 8;
      }
      cp16(tile_chunk(k_tile(stage), r, ch), k_cache + off, ok);
      cp16(tile_chunk(v_tile(stage), r, ch), v_cache + off, ok);
    }
  };

  // This thread's two query rows (g and g + 8 of its warp's 16) and the last key each may
  // see; rows past the chunk get kv_len - 1 (finite, never stored).
  const int row_g = q0 + warp * 16 + g;
  int limit[2];
#pragma unroll
  for (int hh = 0; hh < 2; ++hh) {
    const int qi = row_g + 8 * hh;
    limit[hh] = qi < q_len ? first_pos + qi : kv_len - 1;
  }
  const float scale_log2 = scale * atlas::kAttnLog2e;
  float o[2][32];  // d-half, then the m64n64 accumulator fragment
#pragma unroll
  for (int dh = 0; dh < 2; ++dh)
#pragma unroll
    for (int j = 0; j < 32; ++j) o[dh][j] = 0.f;
  float m_run[2] = {-INFINITY, -INFINITY}, l_run[2] = {0.f, 0.f};

  load_kv(0, 0);
  atlas::cp_async_commit();  // group 0: Q and tile 0
  for (int t = 0; t < n_tiles; ++t) {
    if (t + 1 < n_tiles) load_kv((t + 1) & 1, t + 1);  // its slot was freed at the end of t-1
    atlas::cp_async_commit();
    atlas::cp_async_wait<1>();  // tile t (and Q) landed for this thread
    atlas::fence_proxy_async();  // visible to wgmma
    __syncthreads();             // ... for every thread
    const uint32_t kt_tile = k_tile(t & 1), vt_tile = v_tile(t & 1);

    // S = Q K^T: s[j][e] is row g + 8 (e / 2), key 8 j + 2c + e % 2 of this warp's rows
    // (the m64n64 accumulator's d[4 j + e]).
    float s[kBKV / 8][4];
    float (&s_acc)[kBKV / 2] = *reinterpret_cast<float (*)[kBKV / 2]>(&s[0][0]);
#pragma unroll
    for (int j = 0; j < kBKV / 2; ++j) s_acc[j] = 0.f;
    atlas::fence_acc(s_acc);
    atlas::wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      const int half = kk >> 2, slice = kk & 3;
      atlas::wgmma_bf16_k16(s_acc, atlas::smem_desc(q_tile + half * kHalfBytes) + 2 * slice,
                            atlas::smem_desc(kt_tile + half * kHalfBytes) + 2 * slice);
    }
    atlas::wgmma_commit();
    atlas::wgmma_wait<0>();
    atlas::fence_acc(s_acc);

    // Causal mask and online softmax (attention_tile.cuh).
    float corr[2];
    atlas::online_softmax_tile(s, t * kBKV + 2 * c, limit, scale_log2, m_run, l_run, corr);
#pragma unroll
    for (int dh = 0; dh < 2; ++dh)
#pragma unroll
      for (int j = 0; j < 32; ++j) o[dh][j] *= corr[(j >> 1) & 1];

    // O += P V: key slice kt is S n-tiles 2kt, 2kt + 1 as one A fragment (hi + lo parts),
    // all built before the fence (wgmma reads its A registers asynchronously).
    uint32_t pf[kBKV / 16][2][4];  // per key slice: hi, lo
#pragma unroll
    for (int kt = 0; kt < kBKV / 16; ++kt) atlas::prob_fragments<2>(s, kt, pf[kt]);
    atlas::fence_acc(o[0]);
    atlas::fence_acc(o[1]);
    atlas::wgmma_fence();
#pragma unroll
    for (int kt = 0; kt < kBKV / 16; ++kt)
#pragma unroll
      for (int dh = 0; dh < 2; ++dh) {
        const uint64_t dv = atlas::smem_desc(vt_tile + dh * kHalfBytes + kt * 16 * 128);
        atlas::wgmma_bf16_k16_rs_mn(o[dh], pf[kt][0], dv);
        atlas::wgmma_bf16_k16_rs_mn(o[dh], pf[kt][1], dv);
      }
    atlas::wgmma_commit();
    atlas::wgmma_wait<0>();
    atlas::fence_acc(o[0]);
    atlas::fence_acc(o[1]);
    __syncthreads();  // stage t & 1 is refilled by the next iteration's prefetch
  }
  atlas::cp_async_wait<0>();  // only empty groups remain

#pragma unroll
  for (int hh = 0; hh < 2; ++hh) {
    float l = l_run[hh];
    l += __shfl_xor_sync(0xffffffffu, l, 1);
    l += __shfl_xor_sync(0xffffffffu, l, 2);
    const int qi = row_g + 8 * hh;
    if (qi >= q_len) continue;
    const float inv = 1.f / l;
    __nv_bfloat16* dst = out + (static_cast<size_t>(seq_start + qi) * hq + h) * D + 2 * c;
#pragma unroll
    for (int dh = 0; dh < 2; ++dh)
#pragma unroll
      for (int j = 0; j < 8; ++j)
        *reinterpret_cast<__nv_bfloat162*>(dst + 64 * dh + 8 * j) = __floats2bfloat162_rn(
            o[dh][4 * j + 2 * hh] * inv, o[dh][4 * j + 2 * hh + 1] * inv);
  }
}

}  // namespace

extern "C" __global__ void __launch_bounds__(kThreads, 2)
    prefill_attn_sm90_bf16(const __nv_bfloat16* q, const __nv_bfloat16* k_cache,
                           const __nv_bfloat16* v_cache, const int* block_tables,
                           const int* cu_q, const int* kv_lens, __nv_bfloat16* out,
                           uint32_t num_seqs, uint32_t hq, uint32_t hkv, uint32_t head_dim,
                           uint32_t block_size, uint32_t max_blocks, float scale) {
  extern __shared__ __align__(16) uint8_t sm90_smem[];
  atlas::pdl_enter();  // q, cu_q, kv_lens and the cache come from the kernels before this one
  if (head_dim != D) __trap();  // ops/attention_sm90.py routes head_dim 128 only
  prefill_attn_sm90(q, k_cache, v_cache, block_tables, cu_q, kv_lens, out, hq, hkv, block_size,
                    max_blocks, scale, sm90_smem);
}
