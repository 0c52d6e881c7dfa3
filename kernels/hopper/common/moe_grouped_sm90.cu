// MoE grouped GEMMs on Hopper warpgroup MMA (sm_90a only): the same contract and tile layout
// as moe_grouped.cu's moe_grouped_gate_up_silu_bf16 / moe_grouped_down_bf16 (moe_align_i32's
// sorted_slots / tile_expert, kTileM = 64 rows per tile), with wgmma instead of mma.sync.
//
// Block: one warpgroup (128 threads) computes a 64 x 256 tile with
// wgmma.mma_async m64n256k16 (128 f32 accumulators per thread), both operands K-major in a
// 4-stage ring of 128-byte-swizzled shared tiles (A [64][64] + B [256][64] bf16, 40 KiB a
// stage) filled by 16-byte cp.async; the pipeline is gemm_sm90.cu's (prefetch distance 2, one
// wgmma group in flight). A tile whose tile_expert is -1 exits at once. Each thread copies
// chunk tid % 8 of tile rows tid / 8 + 16 it: its A rows are fixed for the whole K loop
// (gathered through sorted_slots, a padding slot is a zero row), its B rows are computed per
// copy from the row index.
//   * gate_up: block (bx, tile) covers intermediate columns [128 bx, 128 bx + 128): B row r is
//     the gate row (r / 8 even) or the up row (odd) of intermediate column
//     128 bx + 8 (r / 16) + r % 8, so accumulator n-tile 2q (columns 16q..16q+7 of the wgmma
//     tile) holds gate and n-tile 2q + 1 up for the same columns, in the same thread at
//     register j and j + 4: the epilogue applies SwiGLU and writes act[p] (bf16).
//   * down: B rows are w_down[e] rows 256 bx + r; the epilogue writes y[sorted_slots[p]].
// The *_epilogue_* / *_bias_* entries: the same with gpt-oss's expert epilogue
// (moe_epilogue.cuh: the gate/up bias and the clamped GLU, the down bias), entries of their own.
// Accumulator fragment (wgmma_util.cuh): acc[j] of lane l in warp w holds tile row
// 16 w + l / 4 + 8 ((j / 2) % 2) and column 8 (j / 4) + 2 (l % 4) + j % 2.
// Dynamic shared memory: kSmemBytes (ops/moe.py MOE_SM90_SMEM).
#include "atlas_common.cuh"
#include "mma_util.cuh"
#include "moe_epilogue.cuh"
#include "wgmma_util.cuh"

namespace {

constexpr int kTileM = 64;       // ops/moe.py MOE_TILE_M
constexpr int kTileN = 256;      // ops/moe.py MOE_SM90_TILE_N
constexpr int kThreads = 128;    // ops/moe.py MOE_SM90_THREADS: one warpgroup
constexpr int kBK = 64;
constexpr int kStages = 4;
constexpr int kChunks = kBK / 8;  // 16-byte chunks per tile row: 128 bytes
constexpr int kStageA = kTileM * kBK * 2;
constexpr int kStageBytes = kStageA + kTileN * kBK * 2;
constexpr int kAlign = 1024;
constexpr int kSmemBytes = kStages * kStageBytes + kAlign;  // ops/moe.py MOE_SM90_SMEM
constexpr int kRowsA = kTileM * kChunks / kThreads;
constexpr int kRowsB = kTileN * kChunks / kThreads;
constexpr int kRowStep = kThreads / kChunks;  // tile rows between a thread's copies
static_assert(kChunks == 8, "the 128-byte swizzle needs 128-byte tile rows");
static_assert(kBK == 64, "atlas::wgmma_k64_tile issues the wgmmas of 64-column k-tiles");
static_assert(kStageA % kAlign == 0 && kStageBytes % kAlign == 0, "stage bases stay aligned");
static_assert(kSmemBytes <= 227 * 1024, "sm_90 allows 227 KiB of shared memory per block");

__device__ __forceinline__ bool valid_expert(int e, uint32_t experts) {
  return e >= 0 && e < static_cast<int>(experts);
}

// One 16-byte copy of chunk `ch` of a row (null: zeros) into tile row r at shared `tile`.
__device__ __forceinline__ void copy_chunk(uint32_t tile, int r, int ch,
                                           const __nv_bfloat16* row, int gk, int k,
                                           const __nv_bfloat16* fallback) {
  const bool ok = row != nullptr && gk < k;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n"
               ::"r"(tile + atlas::swizzle128(r, ch)), "l"(ok ? row + gk : fallback),
               "r"(ok ? 16 : 0)
               : "memory");
}

// acc = A[64 x k] * B[256 x k]^T; a_rows: this thread's A rows; b_row(r): B tile row r.
template <class BRow>
__device__ __forceinline__ void sm90_mainloop(const __nv_bfloat16* const (&a_rows)[kRowsA],
                                              BRow b_row, const __nv_bfloat16* fallback, int k,
                                              float (&acc)[128]) {
  extern __shared__ uint8_t smem_raw[];
  const uint32_t smem = (atlas::smem_addr(smem_raw) + kAlign - 1) & ~uint32_t(kAlign - 1);
  const int ch = threadIdx.x % kChunks, r0 = threadIdx.x / kChunks;
  const int k_tiles = (k + kBK - 1) / kBK;
  auto load_stage = [&](int s, int kt) {
    const uint32_t sa = smem + s * kStageBytes, sb = sa + kStageA;
    const int gk = kt * kBK + ch * 8;
#pragma unroll
    for (int it = 0; it < kRowsA; ++it)
      copy_chunk(sa, r0 + it * kRowStep, ch, a_rows[it], gk, k, fallback);
#pragma unroll
    for (int it = 0; it < kRowsB; ++it)
      copy_chunk(sb, r0 + it * kRowStep, ch, b_row(r0 + it * kRowStep), gk, k, fallback);
  };

#pragma unroll
  for (int s = 0; s < kStages - 2; ++s) {
    if (s < k_tiles) load_stage(s, s);
    atlas::cp_async_commit();  // always commit: the waits below count groups
  }
#pragma unroll
  for (int i = 0; i < 128; ++i) acc[i] = 0.f;

  for (int kt = 0; kt < k_tiles; ++kt) {
    atlas::cp_async_wait<kStages - 3>();  // tile kt landed (this thread)
    atlas::fence_proxy_async();           // visible to wgmma
    __syncthreads();                      // ... of every thread
    const int next = kt + kStages - 2;
    if (next < k_tiles) load_stage(next % kStages, next);
    atlas::cp_async_commit();

    const uint32_t sa = smem + (kt % kStages) * kStageBytes;
    const uint64_t da = atlas::smem_desc(sa), db = atlas::smem_desc(sa + kStageA);
    atlas::wgmma_k64_tile(acc, da, db);  // tile kt - 1's wgmmas are done after it
  }
  atlas::wgmma_wait<0>();
  atlas::fence_acc(acc);
  atlas::cp_async_wait<0>();  // no copy may outlive the block (only empty groups remain)
}

__device__ __forceinline__ int acc_row(int j) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  return 16 * warp + (lane >> 2) + 8 * ((j >> 1) & 1);
}

__device__ __forceinline__ int acc_col(int j) {
  return 8 * (j >> 2) + 2 * (threadIdx.x & 3);
}

// kEpi: the expert epilogue `epi` (gpt-oss) on every column
template <bool kEpi = false>
__device__ __forceinline__ void gate_up_tile(const __nv_bfloat16* __restrict__ x,
                                             const __nv_bfloat16* __restrict__ w,
                                             const int32_t* __restrict__ sorted_slots,
                                             const int32_t* __restrict__ tile_expert,
                                             __nv_bfloat16* __restrict__ act, uint32_t top_k,
                                             uint32_t hidden, uint32_t inter, uint32_t experts,
                                             const atlas::moe::Epilogue& epi = {}) {
  const int tile = blockIdx.y, e = tile_expert[tile];
  if (!valid_expert(e, experts)) return;
  const int p0 = tile * kTileM, col0 = blockIdx.x * (kTileN / 2);
  const int n_inter = static_cast<int>(inter);
  const __nv_bfloat16* a_rows[kRowsA];
#pragma unroll
  for (int it = 0; it < kRowsA; ++it) {
    const int slot = sorted_slots[p0 + static_cast<int>(threadIdx.x) / kChunks + it * kRowStep];
    a_rows[it] = slot >= 0 ? x + static_cast<size_t>(slot / static_cast<int>(top_k)) * hidden
                           : nullptr;
  }
  const __nv_bfloat16* we = w + static_cast<size_t>(e) * 2 * inter * hidden;
  auto b_row = [&](int r) -> const __nv_bfloat16* {
    const int col = col0 + (r >> 4) * 8 + (r & 7);
    return col < n_inter ? we + static_cast<size_t>(((r >> 3) & 1) * n_inter + col) * hidden
                         : nullptr;
  };
  float acc[128];
  sm90_mainloop(a_rows, b_row, w, static_cast<int>(hidden), acc);

#pragma unroll
  for (int j = 0; j < 128; j += 2) {
    if ((j >> 2) & 1) continue;  // an up n-tile: handled with its gate n-tile (j - 4)
    const int col = col0 + (j >> 3) * 8 + 2 * (threadIdx.x & 3);
    if (col >= n_inter) continue;  // inter % 16 == 0: col + 1 < inter too
    float v[2];
#pragma unroll
    for (int c = 0; c < 2; ++c) {
      const float g = atlas::round_bf16(acc[j + c]), u = atlas::round_bf16(acc[j + 4 + c]);
      if constexpr (kEpi)
        v[c] = atlas::moe::epilogue_act(g, u, epi, e, col + c, n_inter);
      else
        v[c] = atlas::round_bf16(g / (1.f + expf(-g))) * u;
    }
    const size_t at = static_cast<size_t>(p0 + acc_row(j)) * inter + col;
    *reinterpret_cast<__nv_bfloat162*>(act + at) = __floats2bfloat162_rn(v[0], v[1]);
  }
}

// kBias: the down bias (gpt-oss; bias [experts, hidden], or null) added to each bf16 sum
template <bool kBias = false>
__device__ __forceinline__ void down_tile(const __nv_bfloat16* __restrict__ act,
                                          const __nv_bfloat16* __restrict__ w,
                                          const int32_t* __restrict__ sorted_slots,
                                          const int32_t* __restrict__ tile_expert,
                                          __nv_bfloat16* __restrict__ y, uint32_t hidden,
                                          uint32_t inter, uint32_t experts,
                                          const __nv_bfloat16* bias = nullptr) {
  const int tile = blockIdx.y, e = tile_expert[tile];
  if (!valid_expert(e, experts)) return;
  const int p0 = tile * kTileM, n0 = blockIdx.x * kTileN;
  const int n_hidden = static_cast<int>(hidden);
  const __nv_bfloat16* a_rows[kRowsA];
#pragma unroll
  for (int it = 0; it < kRowsA; ++it)
    a_rows[it] = act + static_cast<size_t>(p0 + static_cast<int>(threadIdx.x) / kChunks +
                                           it * kRowStep) * inter;
  const __nv_bfloat16* we = w + static_cast<size_t>(e) * hidden * inter;
  auto b_row = [&](int r) -> const __nv_bfloat16* {
    return n0 + r < n_hidden ? we + static_cast<size_t>(n0 + r) * inter : nullptr;
  };
  float acc[128];
  sm90_mainloop(a_rows, b_row, w, static_cast<int>(inter), acc);

  const int slot_lo = sorted_slots[p0 + acc_row(0)], slot_hi = sorted_slots[p0 + acc_row(2)];
#pragma unroll
  for (int j = 0; j < 128; j += 2) {
    const int slot = (j >> 1) & 1 ? slot_hi : slot_lo;
    const int col = n0 + acc_col(j);
    if (slot < 0 || col >= n_hidden) continue;  // padding row; hidden % 16 == 0
    float y0 = acc[j], y1 = acc[j + 1];
    if constexpr (kBias) {
      y0 = atlas::moe::epilogue_down(atlas::round_bf16(y0), bias, e, col, n_hidden);
      y1 = atlas::moe::epilogue_down(atlas::round_bf16(y1), bias, e, col + 1, n_hidden);
    }
    *reinterpret_cast<__nv_bfloat162*>(y + static_cast<size_t>(slot) * hidden + col) =
        __floats2bfloat162_rn(y0, y1);
  }
}

}  // namespace

extern "C" __global__ void __launch_bounds__(kThreads, 1)
    moe_grouped_gate_up_silu_sm90_bf16(const __nv_bfloat16* x, const __nv_bfloat16* w_gate_up,
                                       const int32_t* sorted_slots, const int32_t* tile_expert,
                                       __nv_bfloat16* act, uint32_t top_k, uint32_t hidden,
                                       uint32_t inter, uint32_t experts, uint32_t max_tiles) {
  atlas::pdl_enter();
  if (blockIdx.y >= max_tiles) return;
  gate_up_tile(x, w_gate_up, sorted_slots, tile_expert, act, top_k, hidden, inter, experts);
}

extern "C" __global__ void __launch_bounds__(kThreads, 1)
    moe_grouped_down_sm90_bf16(const __nv_bfloat16* act, const __nv_bfloat16* w_down,
                               const int32_t* sorted_slots, const int32_t* tile_expert,
                               __nv_bfloat16* y, uint32_t hidden, uint32_t inter,
                               uint32_t experts, uint32_t max_tiles) {
  atlas::pdl_enter();
  if (blockIdx.y >= max_tiles) return;
  down_tile(act, w_down, sorted_slots, tile_expert, y, hidden, inter, experts);
}

extern "C" __global__ void __launch_bounds__(kThreads, 1)
    moe_grouped_gate_up_epilogue_sm90_bf16(const __nv_bfloat16* x,
                                           const __nv_bfloat16* w_gate_up,
                                           const int32_t* sorted_slots,
                                           const int32_t* tile_expert, __nv_bfloat16* act,
                                           uint32_t top_k, uint32_t hidden, uint32_t inter,
                                           uint32_t experts, uint32_t max_tiles,
                                           const __nv_bfloat16* expert_bias, float glu_alpha,
                                           float glu_limit) {
  atlas::pdl_enter();
  if (blockIdx.y >= max_tiles) return;
  gate_up_tile<true>(x, w_gate_up, sorted_slots, tile_expert, act, top_k, hidden, inter,
                     experts, atlas::moe::Epilogue{expert_bias, glu_alpha, glu_limit});
}

extern "C" __global__ void __launch_bounds__(kThreads, 1)
    moe_grouped_down_bias_sm90_bf16(const __nv_bfloat16* act, const __nv_bfloat16* w_down,
                                    const int32_t* sorted_slots, const int32_t* tile_expert,
                                    __nv_bfloat16* y, uint32_t hidden, uint32_t inter,
                                    uint32_t experts, uint32_t max_tiles,
                                    const __nv_bfloat16* expert_bias) {
  atlas::pdl_enter();
  if (blockIdx.y >= max_tiles) return;
  down_tile<true>(act, w_down, sorted_slots, tile_expert, y, hidden, inter, experts,
                  expert_bias);
}
