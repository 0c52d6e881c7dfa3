// The parts of the prefill wgmma GEMM that do not depend on how its operands reach shared
// memory, shared by gemm_sm90.cu (16-byte cp.async issued by every thread) and
// gemm_sm90_tma.cu (TMA tensor copies issued by one producer thread): the tile and stage
// geometry, the raster that maps a block to its 128 x 256 tile of c, and the epilogue that
// rounds and stores a warpgroup's accumulators. One definition, so both kernels walk their
// tiles and write alike: with the same wgmma sequence over K they produce the same bits.
// sm_90a only (the wgmma accumulator layout).
#pragma once

#include "atlas_common.cuh"
#include "glu.cuh"

namespace atlas::prefill_gemm {

// c tile BM x BN, two warpgroups of 64 rows each, K in BK = 64 column tiles (128-byte rows);
// GROUP_M m-tiles share a raster group (ops/matmul.py GEMM_SM90_TILE).
constexpr int BM = 128, BN = 256, BK = 64, GROUP_M = 8;
constexpr int kGroupThreads = 128;               // one consumer warpgroup
constexpr int kConsumerThreads = 2 * kGroupThreads;
constexpr int kStageA = BM * BK * 2;             // bytes of a [128][64] bf16 A tile
constexpr int kStageBytes = kStageA + BN * BK * 2;  // + a [256][64] W tile: 48 KiB
constexpr int kAlign = 1024;                     // 128-byte swizzle atom
static_assert(kStageA % kAlign == 0 && kStageBytes % kAlign == 0, "stage bases stay aligned");

// The c tile of tile index `t` (blockIdx.x): GROUP_M m-tiles form a group, walked m-fastest
// (column-major inside a group), so the blocks resident together share A row panels and W
// column panels in L2. Writes the tile's first row and column. kPairM = 2: the m-tiles are
// counted up to an even number (the grid's last row tile may lie wholly past m), so blocks
// 2i and 2i + 1 (a cluster of 2) get m-tiles 2j and 2j + 1 of the same n-tile (GROUP_M and
// every group's m-tiles are even).
template <int kPairM = 1>
__device__ __forceinline__ void tile_origin(unsigned t, int m, int n, int& bm, int& bn) {
  static_assert(GROUP_M % kPairM == 0, "a raster group holds whole pairs");
  const int tiles_m = ((m + BM - 1) / BM + kPairM - 1) / kPairM * kPairM;
  const int tiles_n = (n + BN - 1) / BN;
  const int per_group = GROUP_M * tiles_n;
  const int group = t / per_group, first_m = group * GROUP_M;  // unsigned t: as blockIdx.x
  const int group_m = min(tiles_m - first_m, GROUP_M);
  const int in_group = t % per_group;
  bm = (first_m + in_group % group_m) * BM;
  bn = (in_group / group_m) * BN;
}

// Tiles of the grid tile_origin<kPairM> maps (m-tiles counted up to a multiple of kPairM).
template <int kPairM = 1>
__device__ __forceinline__ unsigned tile_count(int m, int n) {
  return static_cast<unsigned>(((m + BM - 1) / BM + kPairM - 1) / kPairM * kPairM) *
         static_cast<unsigned>((n + BN - 1) / BN);
}

// Calls fn(j, row, col) for the accumulator pairs j = 0, 2, .., kCount - 2 of the wgmma
// m64n256 fragment of thread `tid` (= threadIdx.x in [0, 256), unsigned as threadIdx.x; its
// warpgroup owns tile rows [64 wg, 64 wg + 64)) of the tile at (bm, bn): acc[j] and acc[j + 1]
// are c[row][col] and c[row][col + 1].
template <int kCount, typename Fn>
__device__ __forceinline__ void for_each_pair(int bm, int bn, unsigned tid, Fn&& fn) {
  const int wg = tid / kGroupThreads;
  const int lane = tid & 31, warp_in_wg = (tid >> 5) & 3;
  const int row_base = bm + wg * 64 + warp_in_wg * 16 + (lane >> 2);
  const int col_base = bn + (lane & 3) * 2;
#pragma unroll
  for (int j = 0; j < kCount; j += 2)
    fn(j, row_base + ((j >> 1) & 1) * 8, col_base + (j >> 2) * 8);
}

// Store a warpgroup's 64 x 256 accumulators of the tile at (bm, bn), masked to m x n: bf16, or
// bf16-rounded values widened to f32 (transformers' bf16 LM head).
template <bool kF32Out>
__device__ __forceinline__ void store_tile(const float (&acc)[128], void* __restrict__ c, int m,
                                           int n, int bm, int bn, unsigned tid) {
  for_each_pair<128>(bm, bn, tid, [&](int j, int row, int col) {
    if (col >= n || row >= m) return;  // n % 16 == 0: col < n implies col + 1 < n
    const size_t at = static_cast<size_t>(row) * n + col;
    if constexpr (kF32Out) {
      *reinterpret_cast<float2*>(static_cast<float*>(c) + at) =
          make_float2(round_bf16(acc[j]), round_bf16(acc[j + 1]));
    } else {
      *reinterpret_cast<__nv_bfloat162*>(static_cast<__nv_bfloat16*>(c) + at) =
          __floats2bfloat162_rn(acc[j], acc[j + 1]);
    }
  });
}

// The gated twin of store_tile (kGlu not kNone): the tile's 256 columns are 128 gate columns
// then their 128 up columns (the gated entries copy gate rows [p0, p0 + 128) and up rows
// [I + p0, I + p0 + 128) of the fused weight), so thread `tid` holds gate column c in acc[j]
// (j < 64) and its up column c + 128 in acc[j + 64]; act[row][p0 + c] = glu_f32 of the pair
// (the unfused GEMM's bf16 gate_up, then silu_mul / gelu_tanh_mul: the same bits), masked to
// m x I (I even: a thread's column pair is stored whole).
template <Glu kGlu>
__device__ __forceinline__ void store_tile_glu(const float (&acc)[128],
                                               __nv_bfloat16* __restrict__ act, int m,
                                               int inter, int bm, int p0, unsigned tid) {
  for_each_pair<64>(bm, p0, tid, [&](int j, int row, int col) {
    if (col >= inter || row >= m) return;
    *reinterpret_cast<__nv_bfloat162*>(act + static_cast<size_t>(row) * inter + col) =
        __floats2bfloat162_rn(glu_f32<kGlu>(acc[j], acc[j + 64]),
                              glu_f32<kGlu>(acc[j + 1], acc[j + 65]));
  });
}

}  // namespace atlas::prefill_gemm
