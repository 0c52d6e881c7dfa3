// The decode wgmma GEMM with its operands streamed by the TMA unit: y[m, n] = sum_k x[m, k] *
// w[n, k] for 1 <= m <= 256 (bf16 in, f32 accumulate, bf16 or bf16-valued f32 out), sm_90a.
// The same product, block geometry, split-K cluster sum and gated (SwiGLU, GeGLU) epilogue as
// gemm_decode_sm90.cu (read its header first; gemm_decode_tile.cuh holds what they share), so
// for the same split both kernels produce the same bits; only how bytes reach shared memory
// differs.
//
// Why: decode batches are memory-bound, and what bounds a block's weight stream is the bytes
// it keeps in flight. The cp.async kernel has every thread issue 16-byte copies into its ring
// and refills a slot only two tiles after its wgmmas were issued (prefetch distance kStages -
// 2), with a block barrier per tile. Here one producer thread issues one TMA copy per operand
// tile (cp.async.bulk.tensor.2d: the [64 G][64] weight box and the [N][64] x box, written
// 128-byte swizzled exactly as the wgmma descriptors read them, rows past n or m and columns
// past k zero-filled by the unit), completing on a per-slot "full" mbarrier; the consumer
// warpgroups wait on it, multiply, and release the slot on a per-slot "empty" mbarrier as soon
// as its wgmmas retire. Every slot of the ring but the one being multiplied is in flight, no
// consumer thread spends an instruction on copies, and no block barrier sits in the loop; the
// ring holds up to kMaxStages tiles (the weight tile of the narrowest batch is 80% of a stage).
//
// Block: G consumer warpgroups (threads [0, 128 G), G = 1 or 2) and one producer warp (threads
// [128 G, 128 G + 32): its first lane issues every copy). The operands come from two tensor
// maps the host encodes once (ops/matmul_decode.py; cached per weight and per x buffer):
// wmap over w [n][k] with a [64 G][64] box (gated entries: [32 G][64], copied twice per
// stage, gate rows at row0 and up rows at I + row0 -- gate rows past I then hold up rows,
// whose products feed no output column), xmap over x [m][k] with an [N][64] box; both
// bf16, 128-byte swizzle, zero fill. x and w themselves are parameters only for the host
// reference (kernel_abi.py).
//
// Split-K, grid and ring sizes as in gemm_decode_sm90.cu: entry points *_split{2,4,8} are
// compiled for clusters of S blocks (rank = blockIdx.x % S, tile = blockIdx.x / S, rank r takes
// k-tiles [K r / S, K (r + 1) / S)); one-warpgroup blocks with N <= 128 get a ring of at most
// kPairBudget bytes (two blocks per SM), the others kSoloBudget (one per SM). This kernel also
// has *_split{3,5,6,7} (every portable cluster size; the cp.async kernel has only the powers of
// two): a narrow projection's tiles x S can then come close to the resident blocks instead of
// half of them -- Qwen3-8B o_proj / down at m = 64 are 32 two-warpgroup tiles, whose split 4
// (128 blocks) exceeds the 124 the H200 holds in clusters of 4 one block an SM, so split 2
// streams on 64 of 132 SMs; split 3 streams on 96 (ops/matmul_decode.py decode_split).
//
// PDL: the producer issues the first ring's weight copies before griddepcontrol.wait (no
// kernel writes weights); x is copied and y written only after it.
//
// Persistent entries (*_persistent, *_persistent_split2: the splits whose grids run several
// waves, KernelRoutes.decode_gemm_persistent): a grid of C clusters, at most the ones the
// device holds at once, where cluster c computes tiles c, c + C, c + 2C, ... with one
// producer and one ring. Its stages are numbered over every tile (a rank has the same `count`
// k-tiles in each, so tile j's stage i is ring stage j count + i, slot and phases following),
// and the producer issues the next tile's first stages (at most a ring, all into slots the
// consumers release before this tile's epilogue) as soon as this tile's last are issued: the
// epilogue (partial scatter, cluster sum, store) runs while the next tile streams in, where
// a grid of one tile a block refills every block's ring from empty each wave. The partial
// tile cannot share the ring's base as in the one-tile form: it sits at persistent_part_offset
// past it, above the ring where the block's share of shared memory has room (N <= 64 on two
// warpgroups: no slot shared), else overlapping the ring's top slots [kEpilogueSlot,
// kStages), which the producer fills for the next tile only after every thread's proxy fence
// and a block barrier past the epilogue (whose last cluster barrier ends the remote reads).
// Every rank of a cluster walks the same tiles, so each tile's two cluster barriers in
// store_tile are met by all of them. Same sums in the same order: the same bits as the
// one-tile entry of the same split.
//
// Launch (ops/matmul_decode.py): grid = ceil(n / (64 G)) * S (1-D), 128 G + 32 threads,
// dynamic shared memory smem_bytes(N, G, kMaxStages); persistent: grid = C S with C <=
// ceil(n / (64 G)), shared memory persistent_smem_bytes(N, G). Preconditions: 1 <= m <= 256,
// n >= 1, k >= 8 with k % 8 == 0, x and w 16-byte aligned; the gated entries also n even.
#include "atlas_common.cuh"
#include "bulk_copy.cuh"
#include "gemm_decode_tile.cuh"
#include "mma_util.cuh"
#include "wgmma_util.cuh"

namespace {

using namespace atlas::decode_gemm;  // geometry, store_tile

// CUtensorMap: 128 opaque bytes, 64-byte aligned (the driver header's definition, without it).
struct alignas(64) TensorMap {
  uint64_t opaque[16];
};

constexpr int kProducerThreads = 32;     // one warp; ops/matmul_decode.py TMA_PRODUCER_THREADS
constexpr int kMaxStages = 16;  // ops/matmul_decode.py TMA_MAX_STAGES

constexpr int kBarrierBytes = 2 * kMaxStages * 8;  // the static full/empty mbarriers
// A ring slot that waits this long (~2 s at 1.98 GHz; a tile lands in microseconds, and a
// PDL wait behind a decode kernel lasts milliseconds) never fills: trap, do not hang.
constexpr long long kHangCycles = 4000000000LL;
static_assert(smem_bytes(kMaxCols, 1, kMaxStages) + kBarrierBytes <= 227 * 1024,
              "sm_90 allows 227 KiB per block");
static_assert(smem_bytes(kMaxCols, kMaxGroups, kMaxStages) + kBarrierBytes <= 227 * 1024,
              "sm_90 allows 227 KiB per block");
// two one-warpgroup blocks of any N <= 128 fit an SM (1 KiB reserved per block)
constexpr bool pair_fits(int cols) {
  return 2 * (smem_bytes(cols, 1, kMaxStages) + kBarrierBytes + 1024) <= 228 * 1024;
}
static_assert(pair_fits(16) && pair_fits(32) && pair_fits(64) && pair_fits(128),
              "two N <= 128 blocks fit an SM");

// A block's share of shared memory, static included (1 KiB a block is the driver's): an SM's
// 228 KiB for one block, half of it each for two (what the one-tile ring sizes assume).
__host__ __device__ constexpr int block_shared(int cols, int groups) {
  return ring_budget(cols, groups) == kPairBudget ? 114 * 1024 - 1024 : 227 * 1024;
}

// The persistent entries' partial tile, in bytes from the ring's base: right past the ring
// where the block's share holds both, else as high as the share allows (overlapping the
// ring's top slots; ops/matmul_decode.py persistent_smem_bytes mirrors this).
__host__ __device__ constexpr int persistent_part_offset(int cols, int groups) {
  const int ring = ring_stages(cols, groups, kMaxStages) * stage_bytes(cols, groups);
  const int part = cols * partial_pitch(groups) * 4;
  const int top = (block_shared(cols, groups) - kBarrierBytes - kAlign - part) / 16 * 16;
  return top < ring ? top : ring;
}

// Dynamic shared memory of a persistent launch: the ring and the partial tile past or over it.
__host__ __device__ constexpr int persistent_smem_bytes(int cols, int groups) {
  const int ring = ring_stages(cols, groups, kMaxStages) * stage_bytes(cols, groups);
  const int end = persistent_part_offset(cols, groups) + cols * partial_pitch(groups) * 4;
  return (end > ring ? end : ring) + kAlign;
}

constexpr bool persistent_fits(int cols, int groups) {
  return persistent_smem_bytes(cols, groups) + kBarrierBytes <= block_shared(cols, groups) &&
         persistent_part_offset(cols, groups) >= stage_bytes(cols, groups);
}
static_assert(persistent_fits(16, 1) && persistent_fits(32, 1) && persistent_fits(64, 1) &&
                  persistent_fits(128, 1) && persistent_fits(kMaxCols, 1) &&
                  persistent_fits(16, 2) && persistent_fits(32, 2) && persistent_fits(64, 2) &&
                  persistent_fits(128, 2) && persistent_fits(kMaxCols, 2),
              "the persistent layout keeps the one-tile form's blocks an SM and a slot the "
              "epilogue leaves to the next tile");

// The ring of a decode GEMM block: kStages slots of a [64 G][64] weight tile and a [kCols][64]
// x tile, each with a "full" mbarrier (the producer's copies land) and an "empty" one (every
// consumer warp has released the slot). Its copies are issued by the producer thread.
template <int kCols, int kGroups, bool kGated, int kStages>
struct Ring {
  static constexpr int kStage = stage_bytes(kCols, kGroups);
  static constexpr int kStageW = kGroupRows * kGroups * BK * 2;
  const TensorMap* wmap;
  const TensorMap* xmap;
  uint32_t smem;      // the ring's base (swizzle-atom aligned)
  uint64_t* full;
  uint64_t* empty;
  int inter;          // a gated weight's up rows start here
  uint64_t stream;    // the weights' L2 policy

  // The barriers, by thread 0, published to the block by the caller's block barrier.
  __device__ __forceinline__ void init() const {
    if (threadIdx.x == 0) {
      for (int s = 0; s < kStages; ++s) {
        atlas::bulk::init_barrier(&full[s], 1);
        atlas::bulk::init_barrier(&empty[s], kGroups * kGroupThreads / 32);  // per consumer warp
      }
      atlas::bulk::fence_barrier_init();
    }
    __syncthreads();
  }
  // k-tile kt of the weight tile whose first output column (gated: gate/up pair) is row0
  __device__ __forceinline__ void load_w(int s, int kt, int row0) const {
    const uint32_t dst = smem + s * kStage;
    if constexpr (kGated) {  // gate rows [row0, +rows / 2), then the up rows I past them
      atlas::bulk::copy_tile_2d_stream(dst, wmap, kt * BK, row0, &full[s], stream);
      atlas::bulk::copy_tile_2d_stream(dst + kStageW / 2, wmap, kt * BK, inter + row0, &full[s],
                                       stream);
    } else {
      atlas::bulk::copy_tile_2d_stream(dst, wmap, kt * BK, row0, &full[s], stream);
    }
  }
  __device__ __forceinline__ void load_x(int s, int kt) const {
    atlas::bulk::copy_tile_2d(smem + s * kStage + kStageW, xmap, kt * BK, 0, &full[s]);
  }
  // ring stage g (counted over the block's k-tiles), once the slot's previous stage is released
  __device__ __forceinline__ void load(int g, int kt, int row0) const {
    const int s = g % kStages;
    if (g >= kStages)
      atlas::bulk::wait_parity_or_trap(&empty[s], (g / kStages - 1) & 1, kHangCycles);
    atlas::bulk::expect_bytes(&full[s], kStage);
    load_w(s, kt, row0);
    load_x(s, kt);
  }
  // a consumer's k-tile at ring stage g: wait for it, multiply (its wgmmas stay in flight)
  template <int R>
  __device__ __forceinline__ void multiply(float (&acc)[R], int g, uint32_t w_off) const {
    const int s = g % kStages;
    atlas::bulk::wait_parity_or_trap(&full[s], (g / kStages) & 1, kHangCycles);
    const uint32_t stage = smem + s * kStage;
    atlas::wgmma_k64_tile(acc, atlas::smem_desc(stage + w_off), atlas::smem_desc(stage + kStageW));
  }
};

// kPersistent: the tile loop of the persistent entries (header); else the block's one tile.
template <int kCols, int kSplit, bool kF32Out, int kGroups, Glu kGlu, bool kPersistent>
__device__ __forceinline__ void gemm_decode_tma(const TensorMap& wmap, const TensorMap& xmap,
                                                void* __restrict__ y, int m, int n, int k,
                                                uint8_t* smem_raw, uint64_t* full,
                                                uint64_t* empty) {
  constexpr int kThreads = kGroupThreads * kGroups, kRows = kGroupRows * kGroups;
  constexpr int kStages = ring_stages(kCols, kGroups, kMaxStages);
  constexpr int kStage = stage_bytes(kCols, kGroups);
  constexpr int kStageW = kRows * BK * 2;
  constexpr bool kGated = kGlu != Glu::kNone;  // a [gate | up] weight ending with kGlu
  constexpr int kOutRows = kGated ? kRows / 2 : kRows;
  // the partial tile: at the ring's base once the one tile's ring has drained; persistent,
  // past it or over slots [kEpilogueSlot, kStages) only (header)
  constexpr int kPartOff = kPersistent ? persistent_part_offset(kCols, kGroups) : 0;
  constexpr int kEpilogueSlot = kPartOff / kStage < kStages ? kPartOff / kStage : kStages;
  static_assert(kStages >= 2, "a slot fills while another is multiplied");
  static_assert(kStage % kAlign == 0 && kStageW % (2 * kAlign) == 0,
                "stage bases (and the gated tile's up half) stay swizzle-atom aligned");
  static_assert(kPersistent || kCols * partial_pitch(kGroups) * 4 <= kStages * kStage,
                "the partial tile fits in the ring");
  const int inter = n / 2;  // activation width (kGated)

  const uint32_t raw = atlas::smem_addr(smem_raw);
  const uint32_t smem = (raw + kAlign - 1) & ~uint32_t(kAlign - 1);
  float* part = reinterpret_cast<float*>(smem_raw + (smem - raw) + kPartOff);

  // the cluster's tiles: blockIdx.x / S, then every grid's worth of clusters past it
  const int first_tile = static_cast<int>(blockIdx.x) / kSplit;
  const int tiles = kPersistent ? (n + kRows - 1) / kRows : first_tile + 1;
  const int tile_step = kPersistent ? static_cast<int>(gridDim.x) / kSplit : 1;
  const int rank = static_cast<int>(blockIdx.x) % kSplit;  // == the cluster rank
  const int k_tiles = (k + BK - 1) / BK;
  const int kt0 = k_tiles * rank / kSplit;
  const int count = k_tiles * (rank + 1) / kSplit - kt0;  // k-tiles of this block, each tile
  const int tid = static_cast<int>(threadIdx.x);

  const Ring<kCols, kGroups, kGated, kStages> ring{&wmap, &xmap, smem, full, empty, inter,
                                                   atlas::l2_stream_policy()};
  ring.init();

  int issued = 0;  // the producer's stages of the current tile issued before its iteration
  if (tid == kThreads) {
    atlas::bulk::prefetch_map(&wmap);
    atlas::bulk::prefetch_map(&xmap);
    // the first ring's weights before the PDL wait (one arrival announces the whole stage,
    // so each slot's phase completes only once its x tile has landed too); none for a
    // persistent cluster past the last tile (no copy may outlive the block)
    issued = first_tile >= tiles ? 0 : count < kStages ? count : kStages;
    for (int i = 0; i < issued; ++i) {
      atlas::bulk::expect_bytes(&full[i], kStage);
      ring.load_w(i, kt0 + i, first_tile * kOutRows);
    }
    atlas::pdl_enter();
    for (int i = 0; i < issued; ++i) ring.load_x(i, kt0 + i);
  } else {
    atlas::pdl_enter();
  }

  float acc[kCols / 2];
  int g0 = 0;  // the ring stage of the current tile's first k-tile
  for (int tile = first_tile; tile < tiles; tile += tile_step, g0 += count) {
    const int row0 = tile * kOutRows;  // first output column (kGated: first gate/up pair)
    const int next = tile + tile_step;
#pragma unroll
    for (int i = 0; i < kCols / 2; ++i) acc[i] = 0.f;

    if (tid == kThreads) {  // the producer thread (its warp's other lanes only join barriers)
      for (int i = issued; i < count; ++i) ring.load(g0 + i, kt0 + i, row0);
      issued = 0;
      // persistent: the next tile's first stages, while the consumers finish this one. At
      // most a ring (each slot's previous stage is then this tile's or older, released
      // before this tile's epilogue, which the producer joins only after), none into the
      // partial tile's slots (their turn comes after the epilogue).
      if (kPersistent && next < tiles) {
        for (; issued < count && issued < kStages && (g0 + count + issued) % kStages <
                                                          kEpilogueSlot; ++issued)
          ring.load(g0 + count + issued, kt0 + issued, next * kOutRows);
      }
    } else if (tid < kThreads) {  // the consumer warpgroups
      // warpgroup g multiplies weight rows [64 g, 64 g + 64) of each stage by its x tile
      const uint32_t w_off = (tid / kGroupThreads) * kGroupRows * BK * 2;
      for (int i = 0; i < count; ++i) {
        const int g = g0 + i;
        // four k16 wgmmas, then wait until only they are in flight: stage g - 1's are done
        ring.multiply(acc, g, w_off);
        // wgmma.wait_group is warpgroup-collective: once it returns, stage g - 1's operands
        // are read for every lane, so one lane a warp releases the slot (4 G arrivals)
        if (i > 0 && (tid & 31) == 0) atlas::bulk::arrive(&empty[(g - 1) % kStages]);
      }
      atlas::wgmma_wait<0>();
      atlas::fence_acc(acc);
      // persistent: the tile's last slot is released for a later tile's stage too
      if (kPersistent && count > 0 && (tid & 31) == 0)
        atlas::bulk::arrive(&empty[(g0 + count - 1) % kStages]);
    }
    // every wgmma retired, and every copy into the partial tile's bytes landed (each of this
    // tile's full phases was awaited; the next tile's copies so far avoid those slots)
    __syncthreads();

    store_tile<kCols, kSplit, kF32Out, kGroups, kGlu, true, true>(acc, part, y, m, n, row0,
                                                                 rank);
    if constexpr (kPersistent && kEpilogueSlot < kStages) {
      if (next < tiles) {
        // the partial tile's bytes go back to the ring: each thread's generic-proxy accesses
        // to them (a cluster's remote reads end before store_tile's closing cluster barrier)
        // are ordered before the producer's copies (async proxy) by its proxy fence and a
        // block barrier
        atlas::bulk::fence_async_shared();
        __syncthreads();
      }
    }
    if constexpr (!kPersistent) break;  // one tile: no loop for the register allocator
  }
}

// ---- Stream-K (the *_streamk entries; header: "Stream-K") ----------------------------------

// A stream-K block's ring: as many of ring_stages' slots as leave room past them for the
// partial tile in the block's share of shared memory (the epilogue then never waits for the
// ring, nor the ring for the epilogue).
__host__ __device__ constexpr int streamk_part_bytes(int cols, int groups) {
  return cols * partial_pitch(groups) * 4;
}
__host__ __device__ constexpr int streamk_stages(int cols, int groups) {
  const int room = (block_shared(cols, groups) - kBarrierBytes - kAlign -
                    streamk_part_bytes(cols, groups)) / stage_bytes(cols, groups);
  const int ring = ring_stages(cols, groups, kMaxStages);
  return room < ring ? room : ring;
}
// Dynamic shared memory of a stream-K launch (ops/matmul_decode.py streamk_smem_bytes).
__host__ __device__ constexpr int streamk_smem_bytes(int cols, int groups) {
  return streamk_stages(cols, groups) * stage_bytes(cols, groups) +
         streamk_part_bytes(cols, groups) + kAlign;
}
constexpr int kStreamkMaxCols = 128;  // ops/matmul_decode.py STREAMK_MAX_COLS
static_assert(streamk_stages(16, 1) >= 3 && streamk_stages(32, 1) >= 3 &&
                  streamk_stages(64, 1) >= 3 && streamk_stages(128, 1) >= 3 &&
                  streamk_stages(16, 2) >= 3 && streamk_stages(32, 2) >= 3 &&
                  streamk_stages(64, 2) >= 3 && streamk_stages(kStreamkMaxCols, 2) >= 3,
              "a stream-K ring keeps three slots beside its partial tile");
static_assert(streamk_smem_bytes(kStreamkMaxCols, 1) + kBarrierBytes <= block_shared(128, 1) &&
                  streamk_smem_bytes(kStreamkMaxCols, 2) + kBarrierBytes <= block_shared(128, 2),
              "the ring and the partial tile fit the block's share of shared memory");

__device__ __forceinline__ void named_sync(int threads) {
  asm volatile("bar.sync 1, %0;\n" ::"r"(threads) : "memory");
}

__device__ __forceinline__ uint32_t ld_acquire_gpu(const uint32_t* p) {
  uint32_t v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];\n" : "=r"(v) : "l"(p) : "memory");
  return v;
}

__device__ __forceinline__ void st_release_gpu(uint32_t* p, uint32_t v) {
  asm volatile("st.release.gpu.global.u32 [%0], %1;\n" ::"l"(p), "r"(v) : "memory");
}

// The first of the `units` (tile, k-tile) pairs, tile-major, that block j of `blocks` owns.
__device__ __forceinline__ int streamk_start(long long units, int j, int blocks) {
  return static_cast<int>(units * j / blocks);
}

// One stream-K block (header). `work` holds one f32 partial a block ([acc][thread]), `flags`
// one word a block: 1 from its partial's release until the tile's owner has acquired it.
template <int kCols, bool kF32Out, int kGroups, Glu kGlu>
__device__ __forceinline__ void gemm_decode_tma_streamk(const TensorMap& wmap,
                                                        const TensorMap& xmap,
                                                        void* __restrict__ y, int m, int n,
                                                        int k, float* __restrict__ work,
                                                        uint32_t* __restrict__ flags,
                                                        uint8_t* smem_raw, uint64_t* full,
                                                        uint64_t* empty) {
  constexpr int kThreads = kGroupThreads * kGroups, kRows = kGroupRows * kGroups;
  constexpr int kStages = streamk_stages(kCols, kGroups);
  constexpr int kStage = stage_bytes(kCols, kGroups);
  constexpr bool kGated = kGlu != Glu::kNone;
  constexpr int kOutRows = kGated ? kRows / 2 : kRows;
  constexpr int kAcc = kCols / 2;
  static_assert(kCols <= kStreamkMaxCols, "stream-K runs up to 128 batch rows");
  const int inter = n / 2;  // activation width (kGated)

  const uint32_t raw = atlas::smem_addr(smem_raw);
  const uint32_t smem = (raw + kAlign - 1) & ~uint32_t(kAlign - 1);
  float* part = reinterpret_cast<float*>(smem_raw + (smem - raw) + kStages * kStage);

  const int tiles = (n + kRows - 1) / kRows, k_tiles = (k + BK - 1) / BK;
  const long long units = static_cast<long long>(tiles) * k_tiles;
  const int blocks = static_cast<int>(gridDim.x), b = static_cast<int>(blockIdx.x);
  const int u0 = streamk_start(units, b, blocks), u1 = streamk_start(units, b + 1, blocks);
  const int tid = static_cast<int>(threadIdx.x);

  const Ring<kCols, kGroups, kGated, kStages> ring{&wmap, &xmap, smem, full, empty, inter,
                                                   atlas::l2_stream_policy()};
  ring.init();

  if (tid >= kThreads) {  // the producer warp: its first lane streams the block's units
    if (tid == kThreads) {
      atlas::bulk::prefetch_map(&wmap);
      atlas::bulk::prefetch_map(&xmap);
      // the first ring's weights before the PDL wait, their x tiles after it
      const int ahead = u1 - u0 < kStages ? u1 - u0 : kStages;
      for (int g = 0; g < ahead; ++g) {
        const int u = u0 + g, tile = u / k_tiles;
        atlas::bulk::expect_bytes(&full[g], kStage);
        ring.load_w(g, u - tile * k_tiles, tile * kOutRows);
      }
      atlas::pdl_enter();
      for (int g = 0; g < ahead; ++g) ring.load_x(g, (u0 + g) % k_tiles);
      for (int g = ahead; u0 + g < u1; ++g) {
        const int u = u0 + g, tile = u / k_tiles;
        ring.load(g, u - tile * k_tiles, tile * kOutRows);
      }
    } else {
      atlas::pdl_enter();
    }
    return;  // no barrier below counts the producer warp
  }
  atlas::pdl_enter();

  // the consumer warpgroups: the block's segments (one tile's k-tiles each) in order
  const uint32_t w_off = (tid / kGroupThreads) * kGroupRows * BK * 2;
  float acc[kAcc];
  for (int u = u0; u < u1;) {
    const int tile = u / k_tiles, kt_begin = u - tile * k_tiles;
    const int kt_end = u1 - u < k_tiles - kt_begin ? kt_begin + (u1 - u) : k_tiles;
    const int g0 = u - u0, count = kt_end - kt_begin;
#pragma unroll
    for (int i = 0; i < kAcc; ++i) acc[i] = 0.f;
    for (int i = 0; i < count; ++i) {
      const int g = g0 + i;
      ring.multiply(acc, g, w_off);
      if (i > 0 && (tid & 31) == 0) atlas::bulk::arrive(&empty[(g - 1) % kStages]);
    }
    atlas::wgmma_wait<0>();
    atlas::fence_acc(acc);
    if ((tid & 31) == 0) atlas::bulk::arrive(&empty[(g0 + count - 1) % kStages]);
    u += count;

    if (kt_begin > 0) {
      // not the tile's first k-tiles: this is the block's first segment; its partial goes to
      // the owner (the block holding k-tile 0, whose last segment this tile is)
      float* mine = work + static_cast<size_t>(b) * kAcc * kThreads + tid;
#pragma unroll
      for (int i = 0; i < kAcc; ++i) __stcg(mine + i * kThreads, acc[i]);
      __threadfence();
      named_sync(kThreads);
      if (tid == 0) st_release_gpu(flags + b, 1u);
      continue;
    }
    if (kt_end < k_tiles) {
      // the owner: add the later blocks' partials of this tile in block order (a fixed order
      // for a given grid: the same bits every launch)
      const long long tile_end = static_cast<long long>(tile + 1) * k_tiles;
      for (int j = b + 1; j < blocks && streamk_start(units, j, blocks) < tile_end; ++j) {
        if (streamk_start(units, j + 1, blocks) == streamk_start(units, j, blocks)) continue;
        if (tid == 0) {
          const long long start = clock64();
          while (ld_acquire_gpu(flags + j) == 0u)
            if (clock64() - start > kHangCycles) __trap();
          flags[j] = 0u;  // its only reader is this block; the next launch sets it again
        }
        named_sync(kThreads);
        const float* theirs = work + static_cast<size_t>(j) * kAcc * kThreads + tid;
#pragma unroll
        for (int i = 0; i < kAcc; ++i) acc[i] += __ldcg(theirs + i * kThreads);
      }
    }
    // the whole tile's sums: scattered, then stored (gated: their activation) by the consumers
    named_sync(kThreads);  // the last segment's readers of `part` are done
    scatter_acc<kCols, kGroups>(acc, part);
    named_sync(kThreads);
    sum_store_quads<1, kF32Out, kGlu, kThreads, kOutRows, partial_pitch(kGroups)>(
        part, y, n, tile * kOutRows, 0, m, true);
  }
}

template <bool kF32Out, int kGroups, Glu kGlu>
__device__ __forceinline__ void streamk_cols(const TensorMap& wmap, const TensorMap& xmap,
                                             void* y, int m, int n, int k, float* work,
                                             uint32_t* flags, uint8_t* smem, uint64_t* full,
                                             uint64_t* empty) {
  if (m <= 16)
    gemm_decode_tma_streamk<16, kF32Out, kGroups, kGlu>(wmap, xmap, y, m, n, k, work, flags,
                                                        smem, full, empty);
  else if (m <= 32)
    gemm_decode_tma_streamk<32, kF32Out, kGroups, kGlu>(wmap, xmap, y, m, n, k, work, flags,
                                                        smem, full, empty);
  else if (m <= 64)
    gemm_decode_tma_streamk<64, kF32Out, kGroups, kGlu>(wmap, xmap, y, m, n, k, work, flags,
                                                        smem, full, empty);
  else if (m <= kStreamkMaxCols)
    gemm_decode_tma_streamk<kStreamkMaxCols, kF32Out, kGroups, kGlu>(wmap, xmap, y, m, n, k,
                                                                     work, flags, smem, full,
                                                                     empty);
  else
    __trap();  // ops/matmul_decode.py runs stream-K up to STREAMK_MAX_COLS rows
}

template <bool kF32Out, Glu kGlu>
__device__ __forceinline__ void streamk_dispatch(const TensorMap& wmap, const TensorMap& xmap,
                                                 void* y, uint32_t m, uint32_t n, uint32_t k,
                                                 float* work, uint32_t* flags) {
  extern __shared__ __align__(16) uint8_t smem_raw[];
  __shared__ __align__(8) uint64_t full[kMaxStages], empty[kMaxStages];
  const int mi = static_cast<int>(m), ni = static_cast<int>(n), ki = static_cast<int>(k);
  if (blockDim.x == kGroupThreads * kMaxGroups + kProducerThreads)
    streamk_cols<kF32Out, kMaxGroups, kGlu>(wmap, xmap, y, mi, ni, ki, work, flags, smem_raw,
                                            full, empty);
  else if (blockDim.x == kGroupThreads + kProducerThreads)
    streamk_cols<kF32Out, 1, kGlu>(wmap, xmap, y, mi, ni, ki, work, flags, smem_raw, full,
                                   empty);
  else
    __trap();
}

// N = the batch rounded up to a wgmma width (the TMA box covers any N for either block shape).
template <int kSplit, bool kF32Out, int kGroups, Glu kGlu, bool kPersistent>
__device__ __forceinline__ void dispatch_cols(const TensorMap& wmap, const TensorMap& xmap,
                                              void* y, int m, int n, int k, uint8_t* smem,
                                              uint64_t* full, uint64_t* empty) {
  if (m <= 16)
    gemm_decode_tma<16, kSplit, kF32Out, kGroups, kGlu, kPersistent>(wmap, xmap, y, m, n, k,
                                                                    smem, full, empty);
  else if (m <= 32)
    gemm_decode_tma<32, kSplit, kF32Out, kGroups, kGlu, kPersistent>(wmap, xmap, y, m, n, k,
                                                                    smem, full, empty);
  else if (m <= 64)
    gemm_decode_tma<64, kSplit, kF32Out, kGroups, kGlu, kPersistent>(wmap, xmap, y, m, n, k,
                                                                    smem, full, empty);
  else if (m <= 128)
    gemm_decode_tma<128, kSplit, kF32Out, kGroups, kGlu, kPersistent>(wmap, xmap, y, m, n, k,
                                                                     smem, full, empty);
  else if (m <= kMaxCols)
    gemm_decode_tma<kMaxCols, kSplit, kF32Out, kGroups, kGlu, kPersistent>(
        wmap, xmap, y, m, n, k, smem, full, empty);
  else
    __trap();  // ops/matmul_decode.py checks 1 <= m <= 256
}

// The block's consumer warpgroups ((blockDim.x - 32) / 128) select the block shape.
template <int kSplit, bool kF32Out, Glu kGlu = Glu::kNone, bool kPersistent = false>
__device__ __forceinline__ void dispatch(const TensorMap& wmap, const TensorMap& xmap, void* y,
                                         uint32_t m, uint32_t n, uint32_t k) {
  extern __shared__ __align__(16) uint8_t smem_raw[];
  __shared__ __align__(8) uint64_t full[kMaxStages], empty[kMaxStages];
  const int mi = static_cast<int>(m), ni = static_cast<int>(n), ki = static_cast<int>(k);
  if (blockDim.x == kGroupThreads * kMaxGroups + kProducerThreads)
    dispatch_cols<kSplit, kF32Out, kMaxGroups, kGlu, kPersistent>(wmap, xmap, y, mi, ni, ki,
                                                                  smem_raw, full, empty);
  else if (blockDim.x == kGroupThreads + kProducerThreads)
    dispatch_cols<kSplit, kF32Out, 1, kGlu, kPersistent>(wmap, xmap, y, mi, ni, ki, smem_raw,
                                                         full, empty);
  else
    __trap();  // ops/matmul_decode.py launches 160 or 288 threads
}

constexpr int kMaxThreads = kGroupThreads * kMaxGroups + kProducerThreads;

}  // namespace

// x and w are the host reference's operands (kernel_abi.py); the kernel reads them through
// wmap and xmap.

extern "C" __global__ void __launch_bounds__(kMaxThreads)
    gemm_decode_tma_bf16(const __nv_bfloat16* x, const __nv_bfloat16* w,
        void* y, uint32_t m, uint32_t n, uint32_t k, const __grid_constant__ TensorMap wmap,
        const __grid_constant__ TensorMap xmap) {
  dispatch<1, false>(wmap, xmap, y, m, n, k);
}

extern "C" __global__ void __launch_bounds__(kMaxThreads)
    gemm_decode_tma_bf16_f32(const __nv_bfloat16* x, const __nv_bfloat16* w,
        void* y, uint32_t m, uint32_t n, uint32_t k, const __grid_constant__ TensorMap wmap,
        const __grid_constant__ TensorMap xmap) {
  dispatch<1, true>(wmap, xmap, y, m, n, k);
}

extern "C" __global__ void __cluster_dims__(2, 1, 1) __launch_bounds__(kMaxThreads)
    gemm_decode_tma_bf16_split2(const __nv_bfloat16* x, const __nv_bfloat16* w,
        void* y, uint32_t m, uint32_t n, uint32_t k, const __grid_constant__ TensorMap wmap,
        const __grid_constant__ TensorMap xmap) {
  dispatch<2, false>(wmap, xmap, y, m, n, k);
}

extern "C" __global__ void __cluster_dims__(2, 1, 1) __launch_bounds__(kMaxThreads)
    gemm_decode_tma_bf16_f32_split2(const __nv_bfloat16* x, const __nv_bfloat16* w,
        void* y, uint32_t m, uint32_t n, uint32_t k, const __grid_constant__ TensorMap wmap,
        const __grid_constant__ TensorMap xmap) {
  dispatch<2, true>(wmap, xmap, y, m, n, k);
}

extern "C" __global__ void __cluster_dims__(3, 1, 1) __launch_bounds__(kMaxThreads)
    gemm_decode_tma_bf16_split3(const __nv_bfloat16* x, const __nv_bfloat16* w,
        void* y, uint32_t m, uint32_t n, uint32_t k, const __grid_constant__ TensorMap wmap,
        const __grid_constant__ TensorMap xmap) {
  dispatch<3, false>(wmap, xmap, y, m, n, k);
}

extern "C" __global__ void __cluster_dims__(3, 1, 1) __launch_bounds__(kMaxThreads)
    gemm_decode_tma_bf16_f32_split3(const __nv_bfloat16* x, const __nv_bfloat16* w,
        void* y, uint32_t m, uint32_t n, uint32_t k, const __grid_constant__ TensorMap wmap,
        const __grid_constant__ TensorMap xmap) {
  dispatch<3, true>(wmap, xmap, y, m, n, k);
}

extern "C" __global__ void __cluster_dims__(4, 1, 1) __launch_bounds__(kMaxThreads)
    gemm_decode_tma_bf16_split4(const __nv_bfloat16* x, const __nv_bfloat16* w,
        void* y, uint32_t m, uint32_t n, uint32_t k, const __grid_constant__ TensorMap wmap,
        const __grid_constant__ TensorMap xmap) {
  dispatch<4, false>(wmap, xmap, y, m, n, k);
}

extern "C" __global__ void __cluster_dims__(4, 1, 1) __launch_bounds__(kMaxThreads)
    gemm_decode_tma_bf16_f32_split4(const __nv_bfloat16* x, const __nv_bfloat16* w,
        void* y, uint32_t m, uint32_t n, uint32_t k, const __grid_constant__ TensorMap wmap,
        const __grid_constant__ TensorMap xmap) {
  dispatch<4, true>(wmap, xmap, y, m, n, k);
}

extern "C" __global__ void __cluster_dims__(5, 1, 1) __launch_bounds__(kMaxThreads)
    gemm_decode_tma_bf16_split5(const __nv_bfloat16* x, const __nv_bfloat16* w,
        void* y, uint32_t m, uint32_t n, uint32_t k, const __grid_constant__ TensorMap wmap,
        const __grid_constant__ TensorMap xmap) {
  dispatch<5, false>(wmap, xmap, y, m, n, k);
}

extern "C" __global__ void __cluster_dims__(5, 1, 1) __launch_bounds__(kMaxThreads)
    gemm_decode_tma_bf16_f32_split5(const __nv_bfloat16* x, const __nv_bfloat16* w,
        void* y, uint32_t m, uint32_t n, uint32_t k, const __grid_constant__ TensorMap wmap,
        const __grid_constant__ TensorMap xmap) {
  dispatch<5, true>(wmap, xmap, y, m, n, k);
}

extern "C" __global__ void __cluster_dims__(6, 1, 1) __launch_bounds__(kMaxThreads)
    gemm_decode_tma_bf16_split6(const __nv_bfloat16* x, const __nv_bfloat16* w,
        void* y, uint32_t m, uint32_t n, uint32_t k, const __grid_constant__ TensorMap wmap,
        const __grid_constant__ TensorMap xmap) {
  dispatch<6, false>(wmap, xmap, y, m, n, k);
}

extern "C" __global__ void __cluster_dims__(6, 1, 1) __launch_bounds__(kMaxThreads)
    gemm_decode_tma_bf16_f32_split6(const __nv_bfloat16* x, const __nv_bfloat16* w,
        void* y, uint32_t m, uint32_t n, uint32_t k, const __grid_constant__ TensorMap wmap,
        const __grid_constant__ TensorMap xmap) {
  dispatch<6, true>(wmap, xmap, y, m, n, k);
}

extern "C" __global__ void __cluster_dims__(7, 1, 1) __launch_bounds__(kMaxThreads)
    gemm_decode_tma_bf16_split7(const __nv_bfloat16* x, const __nv_bfloat16* w,
        void* y, uint32_t m, uint32_t n, uint32_t k, const __grid_constant__ TensorMap wmap,
        const __grid_constant__ TensorMap xmap) {
  dispatch<7, false>(wmap, xmap, y, m, n, k);
}

extern "C" __global__ void __cluster_dims__(7, 1, 1) __launch_bounds__(kMaxThreads)
    gemm_decode_tma_bf16_f32_split7(const __nv_bfloat16* x, const __nv_bfloat16* w,
        void* y, uint32_t m, uint32_t n, uint32_t k, const __grid_constant__ TensorMap wmap,
        const __grid_constant__ TensorMap xmap) {
  dispatch<7, true>(wmap, xmap, y, m, n, k);
}

extern "C" __global__ void __cluster_dims__(8, 1, 1) __launch_bounds__(kMaxThreads)
    gemm_decode_tma_bf16_split8(const __nv_bfloat16* x, const __nv_bfloat16* w,
        void* y, uint32_t m, uint32_t n, uint32_t k, const __grid_constant__ TensorMap wmap,
        const __grid_constant__ TensorMap xmap) {
  dispatch<8, false>(wmap, xmap, y, m, n, k);
}

extern "C" __global__ void __cluster_dims__(8, 1, 1) __launch_bounds__(kMaxThreads)
    gemm_decode_tma_bf16_f32_split8(const __nv_bfloat16* x, const __nv_bfloat16* w,
        void* y, uint32_t m, uint32_t n, uint32_t k, const __grid_constant__ TensorMap wmap,
        const __grid_constant__ TensorMap xmap) {
  dispatch<8, true>(wmap, xmap, y, m, n, k);
}

// The gate_up projection ending with its SwiGLU: w = [gate | up] [n, k], y = act [m, n / 2].
extern "C" __global__ void __launch_bounds__(kMaxThreads)
    gemm_decode_tma_swiglu_bf16(const __nv_bfloat16* x, const __nv_bfloat16* w,
        void* y, uint32_t m, uint32_t n, uint32_t k, const __grid_constant__ TensorMap wmap,
        const __grid_constant__ TensorMap xmap) {
  dispatch<1, false, Glu::kSwiglu>(wmap, xmap, y, m, n, k);
}

extern "C" __global__ void __cluster_dims__(2, 1, 1) __launch_bounds__(kMaxThreads)
    gemm_decode_tma_swiglu_bf16_split2(const __nv_bfloat16* x, const __nv_bfloat16* w,
        void* y, uint32_t m, uint32_t n, uint32_t k, const __grid_constant__ TensorMap wmap,
        const __grid_constant__ TensorMap xmap) {
  dispatch<2, false, Glu::kSwiglu>(wmap, xmap, y, m, n, k);
}

extern "C" __global__ void __cluster_dims__(3, 1, 1) __launch_bounds__(kMaxThreads)
    gemm_decode_tma_swiglu_bf16_split3(const __nv_bfloat16* x, const __nv_bfloat16* w,
        void* y, uint32_t m, uint32_t n, uint32_t k, const __grid_constant__ TensorMap wmap,
        const __grid_constant__ TensorMap xmap) {
  dispatch<3, false, Glu::kSwiglu>(wmap, xmap, y, m, n, k);
}

extern "C" __global__ void __cluster_dims__(4, 1, 1) __launch_bounds__(kMaxThreads)
    gemm_decode_tma_swiglu_bf16_split4(const __nv_bfloat16* x, const __nv_bfloat16* w,
        void* y, uint32_t m, uint32_t n, uint32_t k, const __grid_constant__ TensorMap wmap,
        const __grid_constant__ TensorMap xmap) {
  dispatch<4, false, Glu::kSwiglu>(wmap, xmap, y, m, n, k);
}

extern "C" __global__ void __cluster_dims__(5, 1, 1) __launch_bounds__(kMaxThreads)
    gemm_decode_tma_swiglu_bf16_split5(const __nv_bfloat16* x, const __nv_bfloat16* w,
        void* y, uint32_t m, uint32_t n, uint32_t k, const __grid_constant__ TensorMap wmap,
        const __grid_constant__ TensorMap xmap) {
  dispatch<5, false, Glu::kSwiglu>(wmap, xmap, y, m, n, k);
}

extern "C" __global__ void __cluster_dims__(6, 1, 1) __launch_bounds__(kMaxThreads)
    gemm_decode_tma_swiglu_bf16_split6(const __nv_bfloat16* x, const __nv_bfloat16* w,
        void* y, uint32_t m, uint32_t n, uint32_t k, const __grid_constant__ TensorMap wmap,
        const __grid_constant__ TensorMap xmap) {
  dispatch<6, false, Glu::kSwiglu>(wmap, xmap, y, m, n, k);
}

extern "C" __global__ void __cluster_dims__(7, 1, 1) __launch_bounds__(kMaxThreads)
    gemm_decode_tma_swiglu_bf16_split7(const __nv_bfloat16* x, const __nv_bfloat16* w,
        void* y, uint32_t m, uint32_t n, uint32_t k, const __grid_constant__ TensorMap wmap,
        const __grid_constant__ TensorMap xmap) {
  dispatch<7, false, Glu::kSwiglu>(wmap, xmap, y, m, n, k);
}

extern "C" __global__ void __cluster_dims__(8, 1, 1) __launch_bounds__(kMaxThreads)
    gemm_decode_tma_swiglu_bf16_split8(const __nv_bfloat16* x, const __nv_bfloat16* w,
        void* y, uint32_t m, uint32_t n, uint32_t k, const __grid_constant__ TensorMap wmap,
        const __grid_constant__ TensorMap xmap) {
  dispatch<8, false, Glu::kSwiglu>(wmap, xmap, y, m, n, k);
}

// ... ending with the tanh-GELU GLU instead (Gemma 3's gelu_pytorch_tanh): bit for bit the
// plain entry of the same split into [gate | up], then gelu_tanh_mul_bf16.
extern "C" __global__ void __launch_bounds__(kMaxThreads)
    gemm_decode_tma_geglu_bf16(const __nv_bfloat16* x, const __nv_bfloat16* w,
        void* y, uint32_t m, uint32_t n, uint32_t k, const __grid_constant__ TensorMap wmap,
        const __grid_constant__ TensorMap xmap) {
  dispatch<1, false, Glu::kGeglu>(wmap, xmap, y, m, n, k);
}

extern "C" __global__ void __cluster_dims__(2, 1, 1) __launch_bounds__(kMaxThreads)
    gemm_decode_tma_geglu_bf16_split2(const __nv_bfloat16* x, const __nv_bfloat16* w,
        void* y, uint32_t m, uint32_t n, uint32_t k, const __grid_constant__ TensorMap wmap,
        const __grid_constant__ TensorMap xmap) {
  dispatch<2, false, Glu::kGeglu>(wmap, xmap, y, m, n, k);
}

extern "C" __global__ void __cluster_dims__(3, 1, 1) __launch_bounds__(kMaxThreads)
    gemm_decode_tma_geglu_bf16_split3(const __nv_bfloat16* x, const __nv_bfloat16* w,
        void* y, uint32_t m, uint32_t n, uint32_t k, const __grid_constant__ TensorMap wmap,
        const __grid_constant__ TensorMap xmap) {
  dispatch<3, false, Glu::kGeglu>(wmap, xmap, y, m, n, k);
}

extern "C" __global__ void __cluster_dims__(4, 1, 1) __launch_bounds__(kMaxThreads)
    gemm_decode_tma_geglu_bf16_split4(const __nv_bfloat16* x, const __nv_bfloat16* w,
        void* y, uint32_t m, uint32_t n, uint32_t k, const __grid_constant__ TensorMap wmap,
        const __grid_constant__ TensorMap xmap) {
  dispatch<4, false, Glu::kGeglu>(wmap, xmap, y, m, n, k);
}

extern "C" __global__ void __cluster_dims__(5, 1, 1) __launch_bounds__(kMaxThreads)
    gemm_decode_tma_geglu_bf16_split5(const __nv_bfloat16* x, const __nv_bfloat16* w,
        void* y, uint32_t m, uint32_t n, uint32_t k, const __grid_constant__ TensorMap wmap,
        const __grid_constant__ TensorMap xmap) {
  dispatch<5, false, Glu::kGeglu>(wmap, xmap, y, m, n, k);
}

extern "C" __global__ void __cluster_dims__(6, 1, 1) __launch_bounds__(kMaxThreads)
    gemm_decode_tma_geglu_bf16_split6(const __nv_bfloat16* x, const __nv_bfloat16* w,
        void* y, uint32_t m, uint32_t n, uint32_t k, const __grid_constant__ TensorMap wmap,
        const __grid_constant__ TensorMap xmap) {
  dispatch<6, false, Glu::kGeglu>(wmap, xmap, y, m, n, k);
}

extern "C" __global__ void __cluster_dims__(7, 1, 1) __launch_bounds__(kMaxThreads)
    gemm_decode_tma_geglu_bf16_split7(const __nv_bfloat16* x, const __nv_bfloat16* w,
        void* y, uint32_t m, uint32_t n, uint32_t k, const __grid_constant__ TensorMap wmap,
        const __grid_constant__ TensorMap xmap) {
  dispatch<7, false, Glu::kGeglu>(wmap, xmap, y, m, n, k);
}

extern "C" __global__ void __cluster_dims__(8, 1, 1) __launch_bounds__(kMaxThreads)
    gemm_decode_tma_geglu_bf16_split8(const __nv_bfloat16* x, const __nv_bfloat16* w,
        void* y, uint32_t m, uint32_t n, uint32_t k, const __grid_constant__ TensorMap wmap,
        const __grid_constant__ TensorMap xmap) {
  dispatch<8, false, Glu::kGeglu>(wmap, xmap, y, m, n, k);
}

// The persistent forms (header) at the splits whose grids run several waves: unsplit (the
// LM head) and split 2 (Qwen3-8B gate_up at 64 rows: 384 blocks, 2.9 waves).
extern "C" __global__ void __launch_bounds__(kMaxThreads)
    gemm_decode_tma_bf16_persistent(const __nv_bfloat16* x, const __nv_bfloat16* w,
        void* y, uint32_t m, uint32_t n, uint32_t k, const __grid_constant__ TensorMap wmap,
        const __grid_constant__ TensorMap xmap) {
  dispatch<1, false, Glu::kNone, true>(wmap, xmap, y, m, n, k);
}

extern "C" __global__ void __launch_bounds__(kMaxThreads)
    gemm_decode_tma_bf16_f32_persistent(const __nv_bfloat16* x, const __nv_bfloat16* w,
        void* y, uint32_t m, uint32_t n, uint32_t k, const __grid_constant__ TensorMap wmap,
        const __grid_constant__ TensorMap xmap) {
  dispatch<1, true, Glu::kNone, true>(wmap, xmap, y, m, n, k);
}

extern "C" __global__ void __launch_bounds__(kMaxThreads)
    gemm_decode_tma_swiglu_bf16_persistent(const __nv_bfloat16* x, const __nv_bfloat16* w,
        void* y, uint32_t m, uint32_t n, uint32_t k, const __grid_constant__ TensorMap wmap,
        const __grid_constant__ TensorMap xmap) {
  dispatch<1, false, Glu::kSwiglu, true>(wmap, xmap, y, m, n, k);
}

extern "C" __global__ void __launch_bounds__(kMaxThreads)
    gemm_decode_tma_geglu_bf16_persistent(const __nv_bfloat16* x, const __nv_bfloat16* w,
        void* y, uint32_t m, uint32_t n, uint32_t k, const __grid_constant__ TensorMap wmap,
        const __grid_constant__ TensorMap xmap) {
  dispatch<1, false, Glu::kGeglu, true>(wmap, xmap, y, m, n, k);
}

extern "C" __global__ void __cluster_dims__(2, 1, 1) __launch_bounds__(kMaxThreads)
    gemm_decode_tma_bf16_persistent_split2(const __nv_bfloat16* x, const __nv_bfloat16* w,
        void* y, uint32_t m, uint32_t n, uint32_t k, const __grid_constant__ TensorMap wmap,
        const __grid_constant__ TensorMap xmap) {
  dispatch<2, false, Glu::kNone, true>(wmap, xmap, y, m, n, k);
}

extern "C" __global__ void __cluster_dims__(2, 1, 1) __launch_bounds__(kMaxThreads)
    gemm_decode_tma_bf16_f32_persistent_split2(const __nv_bfloat16* x, const __nv_bfloat16* w,
        void* y, uint32_t m, uint32_t n, uint32_t k, const __grid_constant__ TensorMap wmap,
        const __grid_constant__ TensorMap xmap) {
  dispatch<2, true, Glu::kNone, true>(wmap, xmap, y, m, n, k);
}

extern "C" __global__ void __cluster_dims__(2, 1, 1) __launch_bounds__(kMaxThreads)
    gemm_decode_tma_swiglu_bf16_persistent_split2(const __nv_bfloat16* x,
        const __nv_bfloat16* w, void* y, uint32_t m, uint32_t n, uint32_t k,
        const __grid_constant__ TensorMap wmap, const __grid_constant__ TensorMap xmap) {
  dispatch<2, false, Glu::kSwiglu, true>(wmap, xmap, y, m, n, k);
}

extern "C" __global__ void __cluster_dims__(2, 1, 1) __launch_bounds__(kMaxThreads)
    gemm_decode_tma_geglu_bf16_persistent_split2(const __nv_bfloat16* x,
        const __nv_bfloat16* w, void* y, uint32_t m, uint32_t n, uint32_t k,
        const __grid_constant__ TensorMap wmap, const __grid_constant__ TensorMap xmap) {
  dispatch<2, false, Glu::kGeglu, true>(wmap, xmap, y, m, n, k);
}

// Stream-K (header): one block per resident slot, each over an equal share of the (tile,
// k-tile) units; work / flags: ops/matmul_decode.py streamk_workspace.
extern "C" __global__ void __launch_bounds__(kMaxThreads)
    gemm_decode_tma_bf16_streamk(const __nv_bfloat16* x, const __nv_bfloat16* w, void* y,
                                 uint32_t m, uint32_t n, uint32_t k,
                                 const __grid_constant__ TensorMap wmap,
                                 const __grid_constant__ TensorMap xmap, float* work,
                                 uint32_t* flags) {
  streamk_dispatch<false, Glu::kNone>(wmap, xmap, y, m, n, k, work, flags);
}

extern "C" __global__ void __launch_bounds__(kMaxThreads)
    gemm_decode_tma_bf16_f32_streamk(const __nv_bfloat16* x, const __nv_bfloat16* w, void* y,
                                     uint32_t m, uint32_t n, uint32_t k,
                                     const __grid_constant__ TensorMap wmap,
                                     const __grid_constant__ TensorMap xmap, float* work,
                                     uint32_t* flags) {
  streamk_dispatch<true, Glu::kNone>(wmap, xmap, y, m, n, k, work, flags);
}

extern "C" __global__ void __launch_bounds__(kMaxThreads)
    gemm_decode_tma_swiglu_bf16_streamk(const __nv_bfloat16* x, const __nv_bfloat16* w, void* y,
                                        uint32_t m, uint32_t n, uint32_t k,
                                        const __grid_constant__ TensorMap wmap,
                                        const __grid_constant__ TensorMap xmap, float* work,
                                        uint32_t* flags) {
  streamk_dispatch<false, Glu::kSwiglu>(wmap, xmap, y, m, n, k, work, flags);
}

extern "C" __global__ void __launch_bounds__(kMaxThreads)
    gemm_decode_tma_geglu_bf16_streamk(const __nv_bfloat16* x, const __nv_bfloat16* w, void* y,
                                       uint32_t m, uint32_t n, uint32_t k,
                                       const __grid_constant__ TensorMap wmap,
                                       const __grid_constant__ TensorMap xmap, float* work,
                                       uint32_t* flags) {
  streamk_dispatch<false, Glu::kGeglu>(wmap, xmap, y, m, n, k, work, flags);
}
