// Hopper warpgroup-MMA GEMM for prefill: c[m, n] = sum_k a[m, k] * w[n, k] (bf16 in, f32
// accumulate, bf16 or bf16-valued f32 out). The same contract as gemm.cu's gemm_bf16; this
// one issues wgmma.mma_async from shared-memory descriptors, which mma.sync cannot match on
// sm_90a (the tensor cores are fed at full rate only through wgmma).
//
// Block: 128 x 256 tile of c, 256 threads = two warpgroups; warpgroup g owns rows
// [64g, 64g + 64) of the tile and all 256 columns (one m64n256k16 wgmma per 16 of K, 128 f32
// accumulators per thread). K advances in BK = 64 tiles through a 4-stage ring in dynamic
// shared memory (48 KiB a stage: A [128][64] then W [256][64], bf16). Every thread fills the
// ring with 16-byte cp.async; rows past m or n and columns past k are zero-filled (src-size
// 0), so any m works and n, k need only be multiples of 16.
//
// Shared layout = wgmma's K-major 128-byte swizzle: a tile row (64 bf16 = 128 bytes) sits at
// row * 128 and its 16-byte chunk j at chunk j ^ (row % 8); eight rows form a 1024-byte core
// group (the descriptor's stride byte offset). Stage bases are 1024-byte aligned, so the
// hardware's address-bit XOR and ours agree and the descriptor's base offset is 0. The k-th
// 16-column slice of a tile starts 32 bytes further (descriptor start address + 2).
//
// Pipeline (prefetch distance STAGES - 2): iteration kt waits for tile kt's copies, makes them
// visible to the async proxy (fence.proxy.async) and to all threads (barrier), issues copies
// of tile kt + 2 into the slot tile kt - 2 used, then the four wgmmas of tile kt, and waits
// until at most this group is in flight. So the wgmmas of tile kt overlap the next
// iteration's barrier and copy issue, and a slot is refilled only after the wgmmas that read
// it (two groups back) have completed in every warpgroup (they passed the barrier after
// their wait).
//
// PDL: the weight copies of the first tiles are issued before griddepcontrol.wait (weights
// are never written by a kernel); `a` is read and `c` written only after it.
//
// Grid: 1-D, ceil(m / 128) * ceil(n / 256) blocks, mapped to tiles GROUP_M m-tiles at a time
// (column-major inside a group) so that the blocks resident together share A row panels and
// W column panels in L2. Dynamic shared memory: SMEM_BYTES (ops/matmul.py GEMM_SM90_SMEM).
#include "atlas_common.cuh"
#include "gemm_sm90_tile.cuh"
#include "mma_util.cuh"
#include "wgmma_util.cuh"

namespace {

using namespace atlas::prefill_gemm;  // tile geometry, tile_origin, store_tile

constexpr int STAGES = 4, THREADS = kConsumerThreads;
constexpr int kChunks = BK / 8;                  // 16-byte chunks per tile row (8 = 128 bytes)
constexpr int SMEM_BYTES = STAGES * kStageBytes + kAlign;  // + slack to align the base
static_assert(kChunks == 8, "the 128-byte swizzle needs 128-byte tile rows");
static_assert((BM + BN) * kChunks % THREADS == 0, "copies divide evenly over the threads");
static_assert(STAGES >= 3, "prefetch distance STAGES - 2 must be at least 1");
static_assert(BK == 64, "atlas::wgmma_k64_tile issues the wgmmas of 64-column k-tiles");
static_assert(SMEM_BYTES <= 227 * 1024, "sm_90 allows 227 KiB of shared memory per block");

template <int ROWS>
__device__ __forceinline__ void load_tile(uint32_t dst, const __nv_bfloat16* __restrict__ src,
                                          int row0, int rows, int k, int kt) {
  atlas::cp_async_k64_tile<ROWS, THREADS>(dst, src, row0, rows, k, kt);
}

template <bool kF32Out>
__device__ __forceinline__ void gemm_sm90_tile(const __nv_bfloat16* __restrict__ a,
                                               const __nv_bfloat16* __restrict__ w,
                                               void* __restrict__ c, int m, int n, int k) {
  extern __shared__ uint8_t smem_raw[];
  const uint32_t smem = (atlas::smem_addr(smem_raw) + kAlign - 1) & ~uint32_t(kAlign - 1);

  int bm, bn;
  tile_origin(blockIdx.x, m, n, bm, bn);
  const int k_tiles = (k + BK - 1) / BK;

  auto stage_a = [&](int s) { return smem + s * kStageBytes; };
  auto stage_w = [&](int s) { return smem + s * kStageBytes + kStageA; };

  // prologue: weights first (legal before the PDL wait), then activations; group s holds
  // tile s's A (and group 0 every prologue W), so "groups 0..s done" means tile s landed
#pragma unroll
  for (int s = 0; s < STAGES - 2; ++s)
    if (s < k_tiles) load_tile<BN>(stage_w(s), w, bn, n, k, s);
  atlas::pdl_enter();
#pragma unroll
  for (int s = 0; s < STAGES - 2; ++s) {
    if (s < k_tiles) load_tile<BM>(stage_a(s), a, bm, m, k, s);
    atlas::cp_async_commit();  // always commit: the waits below count groups
  }

  float acc[128];
#pragma unroll
  for (int i = 0; i < 128; ++i) acc[i] = 0.f;

  const int wg = threadIdx.x / 128;
  for (int kt = 0; kt < k_tiles; ++kt) {
    atlas::cp_async_wait<STAGES - 3>();                         // tile kt landed (this thread)
    atlas::fence_proxy_async();  // visible to wgmma
    __syncthreads();                                            // ... of every thread
    const int next = kt + STAGES - 2;
    if (next < k_tiles) {
      load_tile<BM>(stage_a(next % STAGES), a, bm, m, k, next);
      load_tile<BN>(stage_w(next % STAGES), w, bn, n, k, next);
    }
    atlas::cp_async_commit();

    const int s = kt % STAGES;
    const uint64_t da = atlas::smem_desc(stage_a(s) + wg * 64 * 128);
    const uint64_t db = atlas::smem_desc(stage_w(s));
    atlas::wgmma_k64_tile(acc, da, db);  // tile kt - 1's wgmmas are done after it
  }
  atlas::wgmma_wait<0>();
  atlas::fence_acc(acc);
  atlas::cp_async_wait<0>();  // no copy may outlive the block (only empty groups remain)

  store_tile<kF32Out>(acc, c, m, n, bm, bn, threadIdx.x);
}

}  // namespace

extern "C" __global__ void __launch_bounds__(THREADS, 1)
    gemm_sm90_bf16(const __nv_bfloat16* a, const __nv_bfloat16* w, __nv_bfloat16* c, uint32_t m,
                   uint32_t n, uint32_t k) {
  gemm_sm90_tile<false>(a, w, c, m, n, k);
}

extern "C" __global__ void __launch_bounds__(THREADS, 1)
    gemm_sm90_bf16_f32(const __nv_bfloat16* a, const __nv_bfloat16* w, float* c, uint32_t m,
                       uint32_t n, uint32_t k) {
  gemm_sm90_tile<true>(a, w, c, m, n, k);
}
