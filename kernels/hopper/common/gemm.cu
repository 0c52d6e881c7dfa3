// Tensor-core GEMM: c[m, n] = sum_k a[m, k] * w[n, k] (bf16 in, f32 accumulate, bf16 or f32
// out) for prefill and decode batches above the GEMV's 8 rows.
//
// A block computes a BM x BN tile of c with WM x WN warps; each warp owns a
// (BM/WM) x (BN/WN) sub-tile of m16n8k16 accumulators. K advances in BK-wide tiles through a
// STAGES-deep cp.async ring in shared memory (tile kt+STAGES-1 loads while kt computes);
// fragments come from XOR-swizzled shared tiles through ldmatrix, so both the cp.async
// writes and the ldmatrix reads are bank-conflict-free. Rows of a past m, rows of w past n
// and columns past k are zero-filled by cp.async (src-size 0), so any m works and n, k need
// only be multiples of 16 (k may end in half a BK tile). All shared memory is static and
// <= 48 KiB, so no opt-in attribute is needed.
//
// The f32 outputs hold the bf16-rounded sums (a bf16 LM head's logits), except
// gemm_bf16_f32_unrounded's: the float32 sums (a float32 router's logits, GLM-4.5).
//
// Tiles (ops/matmul.py GEMM_TILE, GEMM_SKINNY_TILE):
//   gemm_bf16[_f32[_unrounded]] 128 x 128, BK 32, 8 warps (2 x 4, 64 x 32 each), 3 stages
//   gemm_bf16[_f32]_skinny    64 x  32, BK 64, 4 warps (4 x 1, 16 x 32 each), 4 stages
// Grid: (ceil(n / BN), ceil(m / BM)).
#include "atlas_common.cuh"
#include "mma_util.cuh"

namespace {

template <int BM, int BN, int BK, int WM, int WN, int STAGES>
struct Tile {
  static constexpr int kThreads = WM * WN * 32;
  static constexpr int kWarpM = BM / WM, kWarpN = BN / WN;
  static constexpr int kMTiles = kWarpM / 16, kNTiles = kWarpN / 8;
  static constexpr int kChunks = BK / 8;  // 16-byte chunks per tile row
  static constexpr int kStageElems = (BM + BN) * BK;
  static constexpr int kSmemElems = STAGES * kStageElems;
  static_assert(kWarpM % 16 == 0 && kWarpN % 16 == 0, "warp tile must be 16-aligned");
  static_assert(BM * kChunks % kThreads == 0 && BN * kChunks % kThreads == 0,
                "tile loads must divide evenly over the threads");
  static_assert(kSmemElems * 2 <= 48 * 1024, "static shared memory is limited to 48 KiB");
};

// Copy k-tile `kt` of rows [row0, row0 + ROWS) of `src` ([rows, k] row-major) into a
// swizzled [ROWS][BK] shared tile, zero-filling rows >= rows and columns >= k.
template <int ROWS, int BK, int THREADS>
__device__ __forceinline__ void load_tile(__nv_bfloat16* dst, const __nv_bfloat16* __restrict__ src,
                                          int row0, int rows, int k, int kt) {
  constexpr int kChunks = BK / 8;
#pragma unroll
  for (int it = 0; it < ROWS * kChunks / THREADS; ++it) {
    const int i = threadIdx.x + it * THREADS;
    const int r = i / kChunks, ch = i % kChunks;
    const int gr = row0 + r, gk = kt * BK + ch * 8;
    const bool ok = gr < rows && gk < k;
    const __nv_bfloat16* p = ok ? src + static_cast<size_t>(gr) * k + gk : src;
    atlas::cp_async_16(dst + atlas::swizzle_offset<kChunks>(r, ch), p, ok);
  }
}

template <int BM, int BN, int BK, int WM, int WN, int STAGES, bool kF32Out,
          bool kRound = true>
__device__ __forceinline__ void gemm_tile(const __nv_bfloat16* __restrict__ a,
                                          const __nv_bfloat16* __restrict__ w, void* __restrict__ c,
                                          int m, int n, int k) {
  using T = Tile<BM, BN, BK, WM, WN, STAGES>;
  // smem: STAGES x { A tile [BM][BK], then W tile [BN][BK] }, 16-byte chunks swizzled.
  __shared__ __align__(128) __nv_bfloat16 smem[T::kSmemElems];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int wm = warp / WN, wn = warp % WN;
  const int bm = blockIdx.y * BM, bn = blockIdx.x * BN;
  const int k_tiles = (k + BK - 1) / BK;

  float acc[T::kMTiles][T::kNTiles][4];
#pragma unroll
  for (int i = 0; i < T::kMTiles; ++i)
#pragma unroll
    for (int j = 0; j < T::kNTiles; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.f;

  auto load_stage = [&](int stage, int kt) {
    __nv_bfloat16* sa = smem + stage * T::kStageElems;
    load_tile<BM, BK, T::kThreads>(sa, a, bm, m, k, kt);
    load_tile<BN, BK, T::kThreads>(sa + BM * BK, w, bn, n, k, kt);
  };

#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < k_tiles) load_stage(s, s);
    atlas::cp_async_commit();  // always commit: the wait below counts groups
  }

  for (int kt = 0; kt < k_tiles; ++kt) {
    atlas::cp_async_wait<STAGES - 2>();  // tile kt has landed (for this thread)...
    __syncthreads();                     // ...for all threads; stage kt-1 is free again
    if (kt + STAGES - 1 < k_tiles) load_stage((kt + STAGES - 1) % STAGES, kt + STAGES - 1);
    atlas::cp_async_commit();

    const __nv_bfloat16* sa = smem + (kt % STAGES) * T::kStageElems;
    const __nv_bfloat16* sb = sa + BM * BK;
#pragma unroll
    for (int kk = 0; kk < BK / 16; ++kk)
      atlas::warp_mma_k16<T::kMTiles, T::kNTiles, T::kChunks>(acc, sa, sb, wm * T::kWarpM,
                                                              wn * T::kWarpN, kk);
  }
  atlas::cp_async_wait<0>();  // no copy may outlive the block (only empty groups remain)

#pragma unroll
  for (int i = 0; i < T::kMTiles; ++i) {
#pragma unroll
    for (int j = 0; j < T::kNTiles; ++j) {
      const int col = bn + wn * T::kWarpN + j * 8 + (lane & 3) * 2;
      if (col >= n) continue;  // n % 16 == 0: col < n implies col + 1 < n
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int row = bm + wm * T::kWarpM + i * 16 + (lane >> 2) + h * 8;
        if (row >= m) continue;
        const size_t at = static_cast<size_t>(row) * n + col;
        if constexpr (kF32Out) {
          // logits: bf16-rounded values, widened (transformers' bf16 LM head), or (kRound
          // false) the float32 sums
          const float lo = acc[i][j][2 * h], hi = acc[i][j][2 * h + 1];
          *reinterpret_cast<float2*>(static_cast<float*>(c) + at) =
              kRound ? make_float2(atlas::round_bf16(lo), atlas::round_bf16(hi))
                     : make_float2(lo, hi);
        } else {
          *reinterpret_cast<__nv_bfloat162*>(static_cast<__nv_bfloat16*>(c) + at) =
              __floats2bfloat162_rn(acc[i][j][2 * h], acc[i][j][2 * h + 1]);
        }
      }
    }
  }
}

#define ATLAS_GEMM_LARGE 128, 128, 32, 2, 4, 3
#define ATLAS_GEMM_SKINNY 64, 32, 64, 4, 1, 4

}  // namespace

extern "C" __global__ void __launch_bounds__(256)
    gemm_bf16(const __nv_bfloat16* a, const __nv_bfloat16* w, __nv_bfloat16* c, uint32_t m,
              uint32_t n, uint32_t k) {
  atlas::pdl_enter();
  gemm_tile<ATLAS_GEMM_LARGE, false>(a, w, c, m, n, k);
}

extern "C" __global__ void __launch_bounds__(256)
    gemm_bf16_f32(const __nv_bfloat16* a, const __nv_bfloat16* w, float* c, uint32_t m,
                  uint32_t n, uint32_t k) {
  atlas::pdl_enter();
  gemm_tile<ATLAS_GEMM_LARGE, true>(a, w, c, m, n, k);
}

extern "C" __global__ void __launch_bounds__(256)
    gemm_bf16_f32_unrounded(const __nv_bfloat16* a, const __nv_bfloat16* w, float* c,
                            uint32_t m, uint32_t n, uint32_t k) {
  atlas::pdl_enter();
  gemm_tile<ATLAS_GEMM_LARGE, true, false>(a, w, c, m, n, k);
}

extern "C" __global__ void __launch_bounds__(128)
    gemm_bf16_skinny(const __nv_bfloat16* a, const __nv_bfloat16* w, __nv_bfloat16* c,
                     uint32_t m, uint32_t n, uint32_t k) {
  atlas::pdl_enter();
  gemm_tile<ATLAS_GEMM_SKINNY, false>(a, w, c, m, n, k);
}

extern "C" __global__ void __launch_bounds__(128)
    gemm_bf16_f32_skinny(const __nv_bfloat16* a, const __nv_bfloat16* w, float* c,
                         uint32_t m, uint32_t n, uint32_t k) {
  atlas::pdl_enter();
  gemm_tile<ATLAS_GEMM_SKINNY, true>(a, w, c, m, n, k);
}
