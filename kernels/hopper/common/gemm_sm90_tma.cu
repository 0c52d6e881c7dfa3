// The prefill wgmma GEMM with its operands streamed by the TMA unit and a warp-specialized
// block: c[m, n] = sum_k a[m, k] * w[n, k] (bf16 in, f32 accumulate, bf16 or bf16-valued f32
// out), sm_90a. The same contract, tile (128 x 256 x 64), raster and epilogue as
// gemm_sm90.cu (read its header first; gemm_sm90_tile.cuh holds what they share), and the
// same wgmma sequence over K in each warpgroup, so both kernels produce the same bits; only
// how bytes reach shared memory and how the block waits for them differ.
//
// Why: gemm_sm90 runs at 67-75% of the H200's bf16 peak where cuBLAS runs at 83-88% (kernel
// table 2026-11-30). There every thread issues 16-byte cp.async copies (24 a k-tile), the
// whole block meets at a barrier every k-tile, and a slot is refilled only two tiles after
// its wgmmas were issued. Here one producer thread issues two TMA copies a k-tile
// (cp.async.bulk.tensor.2d: the [128][64] A box and the [256][64] W box, written 128-byte
// swizzled exactly as the wgmma descriptors read them, rows past m or n and columns past k
// zero-filled by the unit) completing on the slot's "full" mbarrier; each consumer
// warpgroup waits on it, issues its four m64n256k16 wgmmas, and once the previous tile's
// wgmmas have retired (wgmma.wait_group 1) releases that tile's slot on its "empty"
// mbarrier. No consumer thread spends an instruction on copies, no block barrier sits in
// the loop, and the producer refills a slot the moment both warpgroups are done with it:
// STAGES - 1 tiles are in flight while one is multiplied.
//
// Block: two consumer warpgroups (threads [0, 256): warpgroup g owns tile rows [64g, 64g +
// 64) and all 256 columns, 128 f32 accumulators a thread) and one producer warp (threads
// [256, 288): its first lane issues every copy, the others only keep the PDL contract).
// 288 threads at one block an SM leave 224 registers a thread, which the consumers' 128
// accumulators fit without setmaxnreg (a producer warpgroup would cap them at 168).
// Ring: STAGES = 4 slots of 48 KiB ([128][64] A then [256][64] W, bf16; 5 would exceed the
// 227 KiB a block may have), each base 1024-byte aligned (the swizzle atom).
//
// Operands come from two tensor maps the host encodes (ops/matmul.py, KernelCache.tensor_map:
// once per weight, once per activation buffer and row count): amap over a [m][k] with a
// [128][64] box, wmap over w [n][k] with a [256][64] box, both bf16, 128-byte swizzle, zero
// fill. a and w themselves are parameters only for the host reference (kernel_abi.py).
//
// Clusters (the *_cluster2 entries, ATLAS_GEMM_TMA_MULTICAST=1): the blocks of m-tiles 2j
// and 2j + 1 of one n-tile form a cluster of two and share the W tile: rank r copies W rows
// [bn + 128 r, +128) (wmap's box is then [128][64]) into both blocks' slots with one
// multicast copy, so a block reads 32 KB a k-tile from L2 instead of 48 (a 128 x 256 tile
// at the H200's peak asks ~9 TB/s of L2 over 132 SMs otherwise). Each block's full barrier
// counts the bytes of its A box and of both W halves, whichever block's copy brings them;
// its empty barrier counts the consumer warps of both blocks (each releases the slot in both:
// the peer's producer writes into it too). An odd m-tile count pads the grid with a tile
// wholly past m, whose A box is not copied (nor a W half wholly past n): what they would
// hold feeds only rows and columns the epilogue drops.
//
// Tiles: block b takes tiles b, b + gridDim.x, ... of the raster (gridDim.x even with
// clusters, so a cluster's blocks take the two tiles of a pair). The host launches one block
// a tile, or with ATLAS_GEMM_TMA_PERSISTENT=1 the blocks the device holds at once: the ring
// then runs on from tile to tile (`fill` counts the stages over all of a block's tiles), and
// the consumers release a tile's last slot before its epilogue, so the producer fills the
// next tile's stages while they store.
//
// PDL: the producer issues the first ring's W copies before griddepcontrol.wait (no kernel
// writes weights); a is copied and c written only after it.
//
// Grid: 1-D, tile_count<1 or 2>(m, n) blocks or fewer (ops/matmul.py tma_grid), 288 threads,
// dynamic shared memory SMEM_BYTES (ops/matmul.py GEMM_SM90_TMA_SMEM). Preconditions: m >= 1,
// n and k multiples of 16, a and w 16-byte aligned.
#include "atlas_common.cuh"
#include "bulk_copy.cuh"
#include "gemm_sm90_tile.cuh"
#include "mma_util.cuh"
#include "wgmma_util.cuh"

namespace {

using namespace atlas::prefill_gemm;  // tile geometry, tile_origin, store_tile
using atlas::bulk::TensorMap;
using atlas::Glu;

constexpr int STAGES = 4;
constexpr int kProducerThreads = 32;  // one warp; ops/matmul.py GEMM_SM90_TMA_THREADS
constexpr int THREADS = kConsumerThreads + kProducerThreads;
constexpr int SMEM_BYTES = STAGES * kStageBytes + kAlign;  // + slack to align the base
constexpr int kBarrierBytes = 2 * STAGES * 8;                // the static full/empty mbarriers
// A slot that waits this long (~2 s at 1.98 GHz; a tile lands in microseconds, a PDL wait
// behind a prefill kernel lasts milliseconds) never fills: trap, do not hang.
constexpr long long kHangCycles = 4000000000LL;
static_assert(SMEM_BYTES + kBarrierBytes <= 227 * 1024, "sm_90 allows 227 KiB per block");
static_assert(STAGES >= 2, "a slot fills while another is multiplied");
static_assert(BK == 64, "atlas::wgmma_k64_tile issues the wgmmas of 64-column k-tiles");

// The halves of a cluster barrier (every thread of both blocks that has not exited).
__device__ __forceinline__ void cluster_arrive() {
  asm volatile("barrier.cluster.arrive.release;\n" ::: "memory");
}
__device__ __forceinline__ void cluster_wait() {
  asm volatile("barrier.cluster.wait.acquire;\n" ::: "memory");
}

__device__ __forceinline__ uint32_t cluster_rank() {
  uint32_t rank;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(rank));
  return rank;
}

// What one tile's copies bring into a block: its origin, whether its A box and this rank's
// W part are copied (a box wholly past the matrix is not: the pad tile of an odd m-tile count,
// a W half past n; what it would hold feeds only rows and columns the epilogue drops), and
// the bytes a stage of it receives (its A box and every rank's W part that is copied).
template <int kCluster>
struct TileCopies {
  static constexpr int kWRows = BN / kCluster;  // W rows of one block's copy (its box)
  static constexpr int kWBytes = kWRows * BK * 2;
  int bm, bn, stage_bytes;
  bool copies_a, copies_w;

  __device__ __forceinline__ TileCopies(unsigned t, int m, int n, uint32_t rank) {
    tile_origin<kCluster>(t, m, n, bm, bn);
    copies_a = bm < m;
    copies_w = bn + static_cast<int>(rank) * kWRows < n;
    stage_bytes = copies_a ? kStageA : 0;
#pragma unroll
    for (int r = 0; r < kCluster; ++r) stage_bytes += bn + r * kWRows < n ? kWBytes : 0;
  }
};

// kCluster = 1: one block, one [256][64] W box a k-tile. kCluster = 2: the blocks of m-tiles
// 2j and 2j + 1 of one n-tile form a cluster; rank r copies W rows [bn + 128 r, +128) into
// both blocks at once (multicast), so each block reads 32 KB a k-tile from L2 instead of 48,
// and a slot is refilled only once the consumers of both blocks have released it.
// Block b takes tiles b, b + gridDim.x, ... (a grid of one block a tile: one each; a
// persistent grid of the resident blocks: several, the ring running on from tile to tile, so
// the producer fills the next tile's first stages while the consumers store this one). With
// clusters gridDim.x is even, so both blocks of a cluster take the two tiles of a pair.
// kGlu (not kNone, kCluster 1): w is a fused [gate | up] weight [n = 2 I][k] and c the
// activation [m][I]: a tile's W stage is gate rows [bn / 2, +128) then up rows [I + bn / 2,
// +128) (two [128][64] boxes of wmap), and the epilogue writes kGlu of each gate / up pair
// (store_tile_glu): the plain entry into gate_up, then silu_mul / gelu_tanh_mul, bit for bit.
template <bool kF32Out, int kCluster, Glu kGlu = Glu::kNone>
__device__ __forceinline__ void gemm_sm90_tma_tiles(const TensorMap& amap,
                                                    const TensorMap& wmap,
                                                    void* __restrict__ c, int m, int n, int k) {
  static_assert(kCluster == 1 || kCluster == 2, "a cluster pairs two m-tiles at most");
  constexpr bool kGated = kGlu != Glu::kNone;
  static_assert(!kGated || (kCluster == 1 && !kF32Out), "gated: one block a tile, bf16 out");
  using Copies = TileCopies<kCluster>;
  static_assert(Copies::kWBytes % kAlign == 0, "each W part starts on a swizzle atom");
  extern __shared__ __align__(16) uint8_t smem_raw[];
  __shared__ __align__(8) uint64_t full[STAGES], empty[STAGES];
  const uint32_t smem = (atlas::smem_addr(smem_raw) + kAlign - 1) & ~uint32_t(kAlign - 1);

  const unsigned tiles = tile_count<kCluster>(m, n);
  const int k_tiles = (k + BK - 1) / BK;
  const unsigned tid = threadIdx.x;
  const uint32_t rank = kCluster == 1 ? 0 : cluster_rank();

  if (tid == 0) {
    for (int s = 0; s < STAGES; ++s) {
      atlas::bulk::init_barrier(&full[s], 1);
      // one arrival a consumer warp of each block the slot's copies fill
      atlas::bulk::init_barrier(&empty[s], kCluster * kConsumerThreads / 32);
    }
    atlas::bulk::fence_barrier_init();
  }
  if constexpr (kCluster == 1) {
    __syncthreads();
  } else {  // the peer's copies and arrivals find this block's barriers initialised
    cluster_arrive();
    cluster_wait();
  }

  if (tid >= kConsumerThreads) {  // the producer warp
    if (tid == kConsumerThreads) {
      atlas::bulk::prefetch_map(&wmap);
      atlas::bulk::prefetch_map(&amap);
      unsigned t = blockIdx.x;  // < tiles: the grid has at most one block a tile
      Copies tile(t, m, n, rank);
      auto load_w = [&](int s, int kt) {
        if (!tile.copies_w) return;
        const uint32_t dst = smem + s * kStageBytes + kStageA + rank * Copies::kWBytes;
        const int row = tile.bn + static_cast<int>(rank) * Copies::kWRows;
        if constexpr (kGated) {  // gate rows, then the up rows I past them
          atlas::bulk::copy_tile_2d(dst, &wmap, kt * BK, tile.bn / 2, &full[s]);
          atlas::bulk::copy_tile_2d(dst + BN / 2 * BK * 2, &wmap, kt * BK, n / 2 + tile.bn / 2,
                                    &full[s]);
        } else if constexpr (kCluster == 1)
          atlas::bulk::copy_tile_2d(dst, &wmap, kt * BK, row, &full[s]);
        else
          atlas::bulk::copy_tile_2d_multicast(dst, &wmap, kt * BK, row, &full[s],
                                              (1u << kCluster) - 1);
      };
      auto load_a = [&](int s, int kt) {
        if (tile.copies_a)
          atlas::bulk::copy_tile_2d(smem + s * kStageBytes, &amap, kt * BK, tile.bm, &full[s]);
      };
      // the first tile's first ring of weights before the PDL wait (one arrival announces the
      // whole stage, so each slot's phase completes only once its A tile has landed too)
      const int first = k_tiles < STAGES ? k_tiles : STAGES;
      for (int i = 0; i < first; ++i) {
        atlas::bulk::expect_bytes(&full[i], tile.stage_bytes);
        load_w(i, i);
      }
      atlas::pdl_enter();
      for (int i = 0; i < first; ++i) load_a(i, i);
      // then fill after fill (`fill` counts them over every tile of this block) as the
      // consumers release the slots
      int kt = first;
      for (unsigned fill = first;; ++fill, ++kt) {
        if (kt == k_tiles) {
          t += gridDim.x;
          if (t >= tiles) break;
          tile = Copies(t, m, n, rank);
          kt = 0;
        }
        const int s = fill % STAGES;
        if (fill >= STAGES)
          atlas::bulk::wait_parity_or_trap(&empty[s], (fill / STAGES - 1) & 1, kHangCycles);
        atlas::bulk::expect_bytes(&full[s], tile.stage_bytes);
        load_w(s, kt);
        load_a(s, kt);
      }
    } else {
      atlas::pdl_enter();
    }
    if constexpr (kCluster > 1) {  // the closing cluster barrier counts every live thread
      cluster_arrive();
      cluster_wait();
    }
    return;  // every copy is awaited by the consumers, whose block keeps the ring alive
  }

  // the consumer warpgroups
  atlas::pdl_enter();
  // one lane a warp releases slot `fill % STAGES` in each block that fills it
  auto release = [&](unsigned fill) {
    if ((tid & 31) != 0) return;
    if constexpr (kCluster == 1) {
      atlas::bulk::arrive(&empty[fill % STAGES]);
    } else {
#pragma unroll
      for (int r = 0; r < kCluster; ++r) atlas::bulk::arrive_cluster(&empty[fill % STAGES], r);
    }
  };
  const uint32_t a_off = (tid / kGroupThreads) * 64 * BK * 2;  // this warpgroup's 64 A rows
  unsigned fill = 0;
  for (unsigned t = blockIdx.x; t < tiles; t += gridDim.x) {
    int bm, bn;
    tile_origin<kCluster>(t, m, n, bm, bn);
    float acc[128];
#pragma unroll
    for (int i = 0; i < 128; ++i) acc[i] = 0.f;
    // do-while (k >= 16: at least one k-tile): a `for` gives the zero-trip path its own
    // zeroed accumulators joining before wgmma.wait_group 0, and ptxas then serializes every
    // wgmma (C7515, nvcc 13.0)
    int kt = 0;
    do {
      const int s = fill % STAGES;
      atlas::bulk::wait_parity_or_trap(&full[s], (fill / STAGES) & 1, kHangCycles);
      const uint32_t stage = smem + s * kStageBytes;
      // four k16 wgmmas, then wait until only they are in flight: the previous fill's are
      // done (wgmma.wait_group is warpgroup-collective: its operands are read for every lane)
      atlas::wgmma_k64_tile(acc, atlas::smem_desc(stage + a_off),
                            atlas::smem_desc(stage + kStageA));
      if (kt > 0) release(fill - 1);
      ++fill;
    } while (++kt < k_tiles);
    atlas::wgmma_wait<0>();
    atlas::fence_acc(acc);
    release(fill - 1);  // before the store: the producer fills the next tile's stages meanwhile
    if constexpr (kGated)
      store_tile_glu<kGlu>(acc, static_cast<__nv_bfloat16*>(c), m, n / 2, bm, bn / 2, tid);
    else
      store_tile<kF32Out>(acc, c, m, n, bm, bn, tid);
  }
  // kCluster 2: the peer's consumers arrive on this block's empty barriers until their last
  // tile's loop ends, so neither block exits before both have passed this barrier
  if constexpr (kCluster > 1) {
    cluster_arrive();
    cluster_wait();
  }
}

}  // namespace

// a and w are the host reference's operands (kernel_abi.py); the kernel reads them through
// amap and wmap.

extern "C" __global__ void __launch_bounds__(THREADS, 1)
    gemm_sm90_tma_bf16(const __nv_bfloat16* a, const __nv_bfloat16* w, __nv_bfloat16* c,
                       uint32_t m, uint32_t n, uint32_t k, const __grid_constant__ TensorMap amap,
                       const __grid_constant__ TensorMap wmap) {
  gemm_sm90_tma_tiles<false, 1>(amap, wmap, c, m, n, k);
}

extern "C" __global__ void __launch_bounds__(THREADS, 1)
    gemm_sm90_tma_bf16_f32(const __nv_bfloat16* a, const __nv_bfloat16* w, float* c,
                           uint32_t m, uint32_t n, uint32_t k,
                           const __grid_constant__ TensorMap amap,
                           const __grid_constant__ TensorMap wmap) {
  gemm_sm90_tma_tiles<true, 1>(amap, wmap, c, m, n, k);
}

// Clusters of two m-tiles sharing each W tile by multicast: wmap in [128][64] boxes, a grid of
// ceil(m / 256) * 2 * ceil(n / 256) blocks.
extern "C" __global__ void __cluster_dims__(2, 1, 1) __launch_bounds__(THREADS, 1)
    gemm_sm90_tma_cluster2_bf16(const __nv_bfloat16* a, const __nv_bfloat16* w,
                                __nv_bfloat16* c, uint32_t m, uint32_t n, uint32_t k,
                                const __grid_constant__ TensorMap amap,
                                const __grid_constant__ TensorMap wmap) {
  gemm_sm90_tma_tiles<false, 2>(amap, wmap, c, m, n, k);
}

extern "C" __global__ void __cluster_dims__(2, 1, 1) __launch_bounds__(THREADS, 1)
    gemm_sm90_tma_cluster2_bf16_f32(const __nv_bfloat16* a, const __nv_bfloat16* w, float* c,
                                    uint32_t m, uint32_t n, uint32_t k,
                                    const __grid_constant__ TensorMap amap,
                                    const __grid_constant__ TensorMap wmap) {
  gemm_sm90_tma_tiles<true, 2>(amap, wmap, c, m, n, k);
}

// The gate_up projection ending with its gated activation: w = [gate | up] [n = 2 I][k] in
// [128][64] wmap boxes, c = act [m][I] (bf16). Same grid as the plain entry at n.
extern "C" __global__ void __launch_bounds__(THREADS, 1)
    gemm_sm90_tma_swiglu_bf16(const __nv_bfloat16* a, const __nv_bfloat16* w, __nv_bfloat16* c,
                              uint32_t m, uint32_t n, uint32_t k,
                              const __grid_constant__ TensorMap amap,
                              const __grid_constant__ TensorMap wmap) {
  gemm_sm90_tma_tiles<false, 1, Glu::kSwiglu>(amap, wmap, c, m, n, k);
}

extern "C" __global__ void __launch_bounds__(THREADS, 1)
    gemm_sm90_tma_geglu_bf16(const __nv_bfloat16* a, const __nv_bfloat16* w, __nv_bfloat16* c,
                             uint32_t m, uint32_t n, uint32_t k,
                             const __grid_constant__ TensorMap amap,
                             const __grid_constant__ TensorMap wmap) {
  gemm_sm90_tma_tiles<false, 1, Glu::kGeglu>(amap, wmap, c, m, n, k);
}
