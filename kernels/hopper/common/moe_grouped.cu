// MoE expert FFN for batched decode and prefill: tokens grouped by expert on the device, a
// grouped tensor-core GEMM per projection, and a weighted un-permute.
//
// Slots: slot s = t * top_k + j is token t's j-th routed expert (topk_ids flattened).
//
// moe_align_i32 (grid ceil(experts / 8), 256 threads): every block counts the slots per
//   expert in shared memory and scans the per-expert tile counts ceil(count / kTileM) (warp
//   0, 32 experts per step); then warp w owns expert e = 8 bx + w and writes its slots in
//   ascending order (ballot + popc over the slots, 32 at a time) at tile offset[e] * kTileM,
//   padding its last tile with -1. Block 0 writes tile_expert (expert of every tile, -1 past
//   the last used one) and -1 over sorted_slots past the used tiles. Deterministic: the
//   layout depends only on topk_ids.
// moe_grouped_gate_up_silu_bf16 / moe_grouped_down_bf16 (grid (column tiles, max_tiles),
//   128 threads): block (bx, tile) computes a kTileM x kTileN product for expert
//   tile_expert[tile] (a tile of -1 exits at once: experts without tokens cost nothing) with
//   mma.sync m16n8k16 (bf16 in, f32 accumulate) fed by ldmatrix from XOR-swizzled shared
//   tiles and a kStages-deep cp.async ring, the same fragment scheme as gemm.cu. mma.sync, not
//   wgmma: a first grouped GEMM that could be written and checked without a GPU; the same
//   source compiles for sm_121. Rows of A are gathered through per-thread row pointers fixed
//   for the whole K loop (a null row is zero-filled: padding slots):
//   * gate_up: A row r = x[sorted_slots[p] / top_k] (p = tile * kTileM + r), K = hidden; the
//     kTileN B rows interleave 8 gate rows and the 8 matching up rows of the expert's
//     [2 inter, hidden] weight, so n-tile 2q (gate) and 2q + 1 (up) of a warp hold the same
//     8 intermediate columns in the same lanes and registers: the epilogue applies SwiGLU
//     (g, u rounded to bf16 first, as the dense path) and writes act[p] for kTileN / 2
//     columns. Padding rows compute (and write) zeros.
//   * down: A row r = act[p], K = inter; B rows = w_down[e] rows; the epilogue writes
//     y[sorted_slots[p]] (bf16) and skips padding rows: the output is un-permuted.
// moe_grouped_gate_up_epilogue_bf16 / moe_grouped_down_bias_bf16: the same two with gpt-oss's
//   expert epilogue (moe_epilogue.cuh): the gate/up bias and the clamped GLU, the down bias
//   (y = bf16(bf16(y) + b)); entries of their own, the plain ones' code unchanged.
// moe_combine_bf16 (grid (ceil(hidden / 8 / threads), tokens)): out[t] = bf16(sum_j
//   topk_weights[t][j] * y[t * top_k + j]) in float32, j in order, ids outside [0, experts)
//   skipped (their y rows were never written).
// Preconditions (ops/moe.py): hidden, inter multiples of 16; x, act, y, weights 16-byte
// aligned; max_tiles >= ops.moe.max_tiles(slots, experts); experts <= kMaxExperts.
#include "atlas_common.cuh"
#include "bf16_vec.cuh"
#include "mma_util.cuh"
#include "moe_epilogue.cuh"

namespace {

constexpr int kTileM = 64;       // ops/moe.py MOE_TILE_M
constexpr int kTileN = 128;      // ops/moe.py MOE_TILE_N
constexpr int kThreads = 128;    // ops/moe.py MOE_GROUPED_THREADS: 4 warps, 2 x 2
constexpr int kBK = 32;
constexpr int kStages = 3;
constexpr int kChunks = kBK / 8;  // 16-byte chunks per tile row
constexpr int kWarpM = kTileM / 2, kWarpN = kTileN / 2;
constexpr int kMTiles = kWarpM / 16, kNTiles = kWarpN / 8;
constexpr int kStageElems = (kTileM + kTileN) * kBK;
constexpr int kRowsA = kTileM * kChunks / kThreads;  // A rows each thread copies per k-tile
constexpr int kRowsB = kTileN * kChunks / kThreads;
static_assert(kTileM * kChunks % kThreads == 0 && kTileN * kChunks % kThreads == 0, "copies");
static_assert(kStages * kStageElems * 2 <= 48 * 1024, "static shared memory");
static_assert(kNTiles % 2 == 0 && kWarpN % 16 == 0, "gate/up n-tiles come in pairs");

constexpr int kMaxExperts = 1024;  // ops/moe.py ALIGN_MAX_EXPERTS
constexpr int kAlignWarps = 8;     // ops/moe.py ALIGN_EXPERTS_PER_BLOCK

// ---- align ----------------------------------------------------------------------------------
__device__ __forceinline__ bool valid_expert(int e, uint32_t experts) {
  return e >= 0 && e < static_cast<int>(experts);
}

__device__ __forceinline__ int warp_inclusive_scan(int v, int lane) {
#pragma unroll
  for (int offset = 1; offset < 32; offset <<= 1) {
    const int o = __shfl_up_sync(0xffffffffu, v, offset);
    if (lane >= offset) v += o;
  }
  return v;
}

__device__ __forceinline__ void align_slots(const int32_t* __restrict__ topk_ids,
                                            int32_t* __restrict__ sorted_slots,
                                            int32_t* __restrict__ tile_expert, int slots,
                                            uint32_t experts, int max_tiles) {
  __shared__ int counts[kMaxExperts];
  __shared__ int first_tile[kMaxExperts + 1];  // [experts]: the tiles used in all
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int num_experts = static_cast<int>(experts);
  for (int e = threadIdx.x; e < num_experts; e += blockDim.x) counts[e] = 0;
  __syncthreads();
  for (int s = threadIdx.x; s < slots; s += blockDim.x) {
    const int e = topk_ids[s];
    if (valid_expert(e, experts)) atomicAdd(&counts[e], 1);
  }
  __syncthreads();
  if (warp == 0) {
    int carry = 0;
    for (int base = 0; base < num_experts; base += 32) {
      const int e = base + lane;
      const int tiles = e < num_experts ? (counts[e] + kTileM - 1) / kTileM : 0;
      const int inclusive = warp_inclusive_scan(tiles, lane);
      if (e < num_experts) first_tile[e] = carry + inclusive - tiles;
      carry += __shfl_sync(0xffffffffu, inclusive, 31);
    }
    if (lane == 0) first_tile[num_experts] = carry;
  }
  __syncthreads();
  const int used_tiles = min(first_tile[num_experts], max_tiles);
  const int capacity = max_tiles * kTileM;

  if (blockIdx.x == 0) {
    for (int e = warp; e < num_experts; e += kAlignWarps)
      for (int t = first_tile[e] + lane; t < first_tile[e + 1] && t < max_tiles; t += 32)
        tile_expert[t] = e;
    for (int t = used_tiles + threadIdx.x; t < max_tiles; t += blockDim.x) tile_expert[t] = -1;
    for (int p = used_tiles * kTileM + threadIdx.x; p < capacity; p += blockDim.x)
      sorted_slots[p] = -1;
  }

  const int e = blockIdx.x * kAlignWarps + warp;
  if (e >= num_experts) return;
  const int base = first_tile[e] * kTileM;
  const uint32_t lower = (1u << lane) - 1u;  // lanes below this one
  int placed = 0;
  for (int s0 = 0; s0 < slots; s0 += 32) {
    const int s = s0 + lane;
    const bool mine = s < slots && topk_ids[s] == e;
    const uint32_t hits = __ballot_sync(0xffffffffu, mine);
    const int at = base + placed + __popc(hits & lower);
    if (mine && at < capacity) sorted_slots[at] = s;
    placed += __popc(hits);
  }
  const int end = (placed + kTileM - 1) / kTileM * kTileM;
  for (int p = base + placed + lane; p < base + end && p < capacity; p += 32) sorted_slots[p] = -1;
}

// ---- grouped GEMM -----------------------------------------------------------------------------
// Copy k-tile kt of ROWS rows, given by per-thread row pointers (null: a zero row), into a
// swizzled [ROWS][kBK] shared tile; columns >= k are zero-filled. Thread i copies chunk
// i % kChunks of rows i / kChunks, i / kChunks + kThreads / kChunks, ...
template <int NROWS>
__device__ __forceinline__ void load_rows(__nv_bfloat16* dst,
                                          const __nv_bfloat16* const (&rows)[NROWS],
                                          const __nv_bfloat16* fallback, int k, int kt) {
  const int ch = threadIdx.x % kChunks;
  const int gk = kt * kBK + ch * 8;
#pragma unroll
  for (int it = 0; it < NROWS; ++it) {
    const int r = threadIdx.x / kChunks + it * (kThreads / kChunks);
    const bool ok = rows[it] != nullptr && gk < k;
    atlas::cp_async_16(dst + atlas::swizzle_offset<kChunks>(r, ch), ok ? rows[it] + gk : fallback,
                       ok);
  }
}

// The shared tile row that row pointer `it` of this thread fills (see load_rows).
__device__ __forceinline__ int copy_row(int it) {
  return static_cast<int>(threadIdx.x) / kChunks + it * (kThreads / kChunks);
}

// acc += A[kTileM x k] * B[kTileN x k]^T for the rows given by the pointers.
__device__ __forceinline__ void grouped_mainloop(const __nv_bfloat16* const (&a_rows)[kRowsA],
                                                 const __nv_bfloat16* const (&b_rows)[kRowsB],
                                                 const __nv_bfloat16* fallback, int k,
                                                 float (&acc)[kMTiles][kNTiles][4]) {
  __shared__ __align__(128) __nv_bfloat16 smem[kStages * kStageElems];
  const int warp = threadIdx.x >> 5;
  const int wm = warp / 2, wn = warp % 2;
  const int k_tiles = (k + kBK - 1) / kBK;

#pragma unroll
  for (int i = 0; i < kMTiles; ++i)
#pragma unroll
    for (int j = 0; j < kNTiles; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.f;

  auto load_stage = [&](int stage, int kt) {
    __nv_bfloat16* sa = smem + stage * kStageElems;
    load_rows<kRowsA>(sa, a_rows, fallback, k, kt);
    load_rows<kRowsB>(sa + kTileM * kBK, b_rows, fallback, k, kt);
  };

#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < k_tiles) load_stage(s, s);
    atlas::cp_async_commit();  // always commit: the wait below counts groups
  }

  for (int kt = 0; kt < k_tiles; ++kt) {
    atlas::cp_async_wait<kStages - 2>();  // tile kt has landed (for this thread)...
    __syncthreads();                      // ...for all threads; stage kt-1 is free again
    if (kt + kStages - 1 < k_tiles) load_stage((kt + kStages - 1) % kStages, kt + kStages - 1);
    atlas::cp_async_commit();

    const __nv_bfloat16* sa = smem + (kt % kStages) * kStageElems;
    const __nv_bfloat16* sb = sa + kTileM * kBK;
#pragma unroll
    for (int kk = 0; kk < kBK / 16; ++kk)
      atlas::warp_mma_k16<kMTiles, kNTiles, kChunks>(acc, sa, sb, wm * kWarpM, wn * kWarpN, kk);
  }
  atlas::cp_async_wait<0>();  // no copy may outlive the block (only empty groups remain)
}

// Row `r` (0..kTileM) and column offset within the warp's n-tile of accumulator element
// acc[i][j][2h + c]: row wm * kWarpM + 16 i + lane / 4 + 8 h, column 2 (lane % 4) + c.
__device__ __forceinline__ int acc_row(int i, int h) {
  const int lane = threadIdx.x & 31, wm = (threadIdx.x >> 5) / 2;
  return wm * kWarpM + i * 16 + (lane >> 2) + h * 8;
}

__device__ __forceinline__ float silu_bf16(float g) {
  return atlas::round_bf16(g / (1.f + expf(-g)));
}

// kEpi: the expert epilogue `epi` (gpt-oss; moe_epilogue.cuh) on every column
template <bool kEpi = false>
__device__ __forceinline__ void grouped_gate_up(const __nv_bfloat16* __restrict__ x,
                                                const __nv_bfloat16* __restrict__ w,
                                                const int32_t* __restrict__ sorted_slots,
                                                const int32_t* __restrict__ tile_expert,
                                                __nv_bfloat16* __restrict__ act, uint32_t top_k,
                                                uint32_t hidden, uint32_t inter,
                                                uint32_t experts,
                                                const atlas::moe::Epilogue& epi = {}) {
  const int tile = blockIdx.y;
  const int e = tile_expert[tile];
  if (!valid_expert(e, experts)) return;
  const int col0 = blockIdx.x * (kTileN / 2);  // first intermediate column of this block
  const int p0 = tile * kTileM;
  const __nv_bfloat16* a_rows[kRowsA];
#pragma unroll
  for (int it = 0; it < kRowsA; ++it) {
    const int slot = sorted_slots[p0 + copy_row(it)];
    a_rows[it] = slot >= 0 ? x + static_cast<size_t>(slot / static_cast<int>(top_k)) * hidden
                           : nullptr;
  }
  // B row r: 16-row group q = r / 16 holds intermediate columns col0 + 8 q .. + 8: its first
  // 8 rows are their gate rows, the next 8 their up rows
  const __nv_bfloat16* we = w + static_cast<size_t>(e) * 2 * inter * hidden;
  const __nv_bfloat16* b_rows[kRowsB];
#pragma unroll
  for (int it = 0; it < kRowsB; ++it) {
    const int r = copy_row(it);
    const int col = col0 + (r >> 4) * 8 + (r & 7);
    const int wrow = ((r >> 3) & 1) * static_cast<int>(inter) + col;
    b_rows[it] = col < static_cast<int>(inter) ? we + static_cast<size_t>(wrow) * hidden : nullptr;
  }
  float acc[kMTiles][kNTiles][4];
  grouped_mainloop(a_rows, b_rows, w, static_cast<int>(hidden), acc);

  const int lane = threadIdx.x & 31, wn = (threadIdx.x >> 5) % 2;
#pragma unroll
  for (int i = 0; i < kMTiles; ++i) {
#pragma unroll
    for (int j = 0; j < kNTiles; j += 2) {  // n-tile j: gate, j + 1: up, same columns
      const int col = col0 + (wn * kWarpN + j * 8) / 2 + (lane & 3) * 2;
      if (col >= static_cast<int>(inter)) continue;  // inter % 16 == 0: col + 1 < inter too
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int p = p0 + acc_row(i, h);
        float v[2];
#pragma unroll
        for (int c = 0; c < 2; ++c) {
          const float g = atlas::round_bf16(acc[i][j][2 * h + c]);
          const float u = atlas::round_bf16(acc[i][j + 1][2 * h + c]);
          if constexpr (kEpi)
            v[c] = atlas::moe::epilogue_act(g, u, epi, e, col + c, static_cast<int>(inter));
          else
            v[c] = silu_bf16(g) * u;
        }
        *reinterpret_cast<__nv_bfloat162*>(act + static_cast<size_t>(p) * inter + col) =
            __floats2bfloat162_rn(v[0], v[1]);
      }
    }
  }
}

// kBias: the down bias (gpt-oss; bias [experts, hidden], or null) added to each bf16 sum
template <bool kBias = false>
__device__ __forceinline__ void grouped_down(const __nv_bfloat16* __restrict__ act,
                                             const __nv_bfloat16* __restrict__ w,
                                             const int32_t* __restrict__ sorted_slots,
                                             const int32_t* __restrict__ tile_expert,
                                             __nv_bfloat16* __restrict__ y, uint32_t hidden,
                                             uint32_t inter, uint32_t experts,
                                             const __nv_bfloat16* bias = nullptr) {
  const int tile = blockIdx.y;
  const int e = tile_expert[tile];
  if (!valid_expert(e, experts)) return;
  const int n0 = blockIdx.x * kTileN;
  const int p0 = tile * kTileM;
  const __nv_bfloat16* a_rows[kRowsA];
#pragma unroll
  for (int it = 0; it < kRowsA; ++it)
    a_rows[it] = act + static_cast<size_t>(p0 + copy_row(it)) * inter;
  const __nv_bfloat16* we = w + static_cast<size_t>(e) * hidden * inter;
  const __nv_bfloat16* b_rows[kRowsB];
#pragma unroll
  for (int it = 0; it < kRowsB; ++it) {
    const int n = n0 + copy_row(it);
    b_rows[it] = n < static_cast<int>(hidden) ? we + static_cast<size_t>(n) * inter : nullptr;
  }
  float acc[kMTiles][kNTiles][4];
  grouped_mainloop(a_rows, b_rows, w, static_cast<int>(inter), acc);

  const int lane = threadIdx.x & 31, wn = (threadIdx.x >> 5) % 2;
#pragma unroll
  for (int i = 0; i < kMTiles; ++i) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int slot = sorted_slots[p0 + acc_row(i, h)];
      if (slot < 0) continue;  // padding row
#pragma unroll
      for (int j = 0; j < kNTiles; ++j) {
        const int col = n0 + wn * kWarpN + j * 8 + (lane & 3) * 2;
        if (col >= static_cast<int>(hidden)) continue;  // hidden % 16 == 0
        float y0 = acc[i][j][2 * h], y1 = acc[i][j][2 * h + 1];
        if constexpr (kBias) {
          const int hd = static_cast<int>(hidden);
          y0 = atlas::moe::epilogue_down(atlas::round_bf16(y0), bias, e, col, hd);
          y1 = atlas::moe::epilogue_down(atlas::round_bf16(y1), bias, e, col + 1, hd);
        }
        *reinterpret_cast<__nv_bfloat162*>(y + static_cast<size_t>(slot) * hidden + col) =
            __floats2bfloat162_rn(y0, y1);
      }
    }
  }
}

}  // namespace

extern "C" __global__ void __launch_bounds__(32 * kAlignWarps)
    moe_align_i32(const int32_t* topk_ids, int32_t* sorted_slots, int32_t* tile_expert,
                  uint32_t slots, uint32_t experts, uint32_t max_tiles) {
  atlas::pdl_enter();
  if (experts > kMaxExperts) __trap();  // ops/moe.py refuses this
  align_slots(topk_ids, sorted_slots, tile_expert, static_cast<int>(slots), experts,
              static_cast<int>(max_tiles));
}

extern "C" __global__ void __launch_bounds__(kThreads)
    moe_grouped_gate_up_silu_bf16(const __nv_bfloat16* x, const __nv_bfloat16* w_gate_up,
                                  const int32_t* sorted_slots, const int32_t* tile_expert,
                                  __nv_bfloat16* act, uint32_t top_k, uint32_t hidden,
                                  uint32_t inter, uint32_t experts, uint32_t max_tiles) {
  atlas::pdl_enter();
  if (blockIdx.y >= max_tiles) return;
  grouped_gate_up(x, w_gate_up, sorted_slots, tile_expert, act, top_k, hidden, inter, experts);
}

extern "C" __global__ void __launch_bounds__(kThreads)
    moe_grouped_down_bf16(const __nv_bfloat16* act, const __nv_bfloat16* w_down,
                          const int32_t* sorted_slots, const int32_t* tile_expert,
                          __nv_bfloat16* y, uint32_t hidden, uint32_t inter, uint32_t experts,
                          uint32_t max_tiles) {
  atlas::pdl_enter();
  if (blockIdx.y >= max_tiles) return;
  grouped_down(act, w_down, sorted_slots, tile_expert, y, hidden, inter, experts);
}

// The two grouped GEMMs with gpt-oss's expert epilogue (moe_epilogue.cuh): gate/up with the
// gate/up bias and the clamped GLU, down with the down bias. The same grids and threads.
extern "C" __global__ void __launch_bounds__(kThreads)
    moe_grouped_gate_up_epilogue_bf16(const __nv_bfloat16* x, const __nv_bfloat16* w_gate_up,
                                      const int32_t* sorted_slots, const int32_t* tile_expert,
                                      __nv_bfloat16* act, uint32_t top_k, uint32_t hidden,
                                      uint32_t inter, uint32_t experts, uint32_t max_tiles,
                                      const __nv_bfloat16* expert_bias, float glu_alpha,
                                      float glu_limit) {
  atlas::pdl_enter();
  if (blockIdx.y >= max_tiles) return;
  grouped_gate_up<true>(x, w_gate_up, sorted_slots, tile_expert, act, top_k, hidden, inter,
                        experts, atlas::moe::Epilogue{expert_bias, glu_alpha, glu_limit});
}

extern "C" __global__ void __launch_bounds__(kThreads)
    moe_grouped_down_bias_bf16(const __nv_bfloat16* act, const __nv_bfloat16* w_down,
                               const int32_t* sorted_slots, const int32_t* tile_expert,
                               __nv_bfloat16* y, uint32_t hidden, uint32_t inter,
                               uint32_t experts, uint32_t max_tiles,
                               const __nv_bfloat16* expert_bias) {
  atlas::pdl_enter();
  if (blockIdx.y >= max_tiles) return;
  grouped_down<true>(act, w_down, sorted_slots, tile_expert, y, hidden, inter, experts,
                     expert_bias);
}

extern "C" __global__ void __launch_bounds__(256)
    moe_combine_bf16(const __nv_bfloat16* y, const int32_t* topk_ids, const float* topk_weights,
                     __nv_bfloat16* out, uint32_t tokens, uint32_t top_k, uint32_t hidden,
                     uint32_t experts) {
  atlas::pdl_enter();
  const int token = blockIdx.y;
  const int v = blockIdx.x * blockDim.x + threadIdx.x;
  if (token >= static_cast<int>(tokens) || v >= static_cast<int>(hidden / 8)) return;
  float acc[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
  for (int j = 0; j < static_cast<int>(top_k); ++j) {
    const size_t slot = static_cast<size_t>(token) * top_k + j;
    if (!valid_expert(topk_ids[slot], experts)) continue;
    const float wj = topk_weights[slot];
    float yf[8];
    atlas::unpack_bf16x8(reinterpret_cast<const uint4*>(y + slot * hidden)[v], yf);
#pragma unroll
    for (int e = 0; e < 8; ++e) acc[e] = fmaf(wj, yf[e], acc[e]);
  }
  reinterpret_cast<uint4*>(out + static_cast<size_t>(token) * hidden)[v] = atlas::pack_bf16x8(acc);
}
