// The decode GEMM for FP8 E4M3 weights on Hopper's FP8 tensor cores: y[m, n] = sum_k x[m, k] *
// e4m3(w[n, k]) * s(n, k) for 1 <= m <= 8 (x bf16, f32 accumulate, bf16 or bf16-valued f32
// out, or the SwiGLU activation of a fused [gate | up] weight), sm_90a.
//
// Why: the batch-1 FP8 GEMVs decode every weight byte on the CUDA cores before multiplying
// (mma.sync .e4m3 is emulated on sm_90a: ptxas unpacks each register pair to f16 on the ALU
// pipe, the pipe that binds those GEMVs at ~2.6-2.7 TB/s on either card; docs/quantization.md,
// session 55), while wgmma .e4m3 is native (QGMMA): the weight bytes go from the TMA unit into
// shared memory and from there into the tensor cores with no instruction per weight.
//
// The mould is gemm_decode_tma.cu's (read its header first): one producer thread streams the
// block's weight tiles through a ring of mbarrier-guarded slots, one consumer warpgroup
// multiplies, split-K over a cluster summed in the shared epilogue (gemm_decode_tile.cuh
// store_part). A k-tile is 128 E4M3 values = one 128-byte swizzle row, so a [64][128] weight
// box is the bf16 kernel's [64][64] box byte for byte (the host encodes the tensor map over
// the codes as a bf16 matrix [n][k / 2]); gated weights copy two [32][128] boxes, gate rows at
// row0 and up rows I past them, as there.
//
// x enters the tensor cores as E4M3 too, exactly: per token and k-tile, v = x 2^a with 2^a
// putting the tile's largest |x| in [128, 256), then hi = e4m3(v) and mid = e4m3((v - hi) 16),
// so v = hi + mid / 16 with no error for every |v| >= 2^-6 (a bf16 value has 8 significant
// bits, hi keeps 4, the residual's other 4 fit mid's; values under 2^-6 of a tile whose largest
// is >= 128, i.e. below ~2^-13 of it, lose low bits). B's rows are (hi, mid) pairs of each token,
// so a thread's accumulator pairs (d[2i], d[2i + 1]) hold one token's two parts; wgmma N is 8
// (m <= 4) or 16 (m <= 8). The consumers convert the block's whole k range of x into shared
// memory after the PDL wait (while the first ring of weight tiles streams in), once.
//
// Accuracy: Hopper's FP8 MMAs accumulate with fewer bits than f32 (about 14 of mantissa, as
// DeepSeek-V3's report measured), so each k-tile's 128 products (four k32 MMAs) go into a
// fresh accumulator that is then promoted to an f32 total with the tile's weight scale and x
// scale: the error is that of a 128-term partial sum at ~2^-14, far under a bf16 ulp of the
// output (cases/gemm_decode_fp8.py states the check tolerance). Two accumulator sets
// alternate so that tile i's MMAs run while tile i - 1's are promoted.
//
// Scales: the FP8 index map of gemv_fp8.cu, s(n, k) = scale[(n >> row_shift) row_stride +
// (k >> col_shift) col_stride], constant over each k-tile (col_shift >= 7 or col_stride 0:
// the 128x128 blocks, per channel, per tensor; ops/matmul_fp8_wgmma.py checks it). The
// producer warp's lanes copy each k-tile's 64 row scales into the slot beside its weights
// (cp.async, their landing an arrival on the slot's mbarrier), so the consumers read them from
// shared memory with the tile.
//
// Block: one consumer warpgroup (64 weight rows) and one producer warp, 160 threads, up to
// two blocks an SM. Shared memory, sized by the launch (ops/matmul_fp8_wgmma.py smem_bytes):
// the x tiles of the block's k range (at most kMaxXTiles k-tiles: the host picks splits
// whose blocks' ranges fit), their scales, two partial tiles (split: the inbox), then a ring of 8 KiB weight
// slots with each slot's weight scales, as many slots (2..kMaxStages) as the launch's dynamic
// shared memory holds past the rest. Why the ring's depth is the launch's: under PDL the
// kernels beside this one (the attention after qkv, the norm and projection after o_proj)
// become resident, and issue their own early reads, only where this one leaves an SM room
// (gpu201: at 112 KB a block, two an SM, each projection was faster alone and the step
// slower).
// Entry points: *_split{2..8} for clusters of S blocks over K (rank r takes k-tiles
// [K r / S, K (r + 1) / S)). Tiles: ceil(n / 64) (gated: n / 2 pairs in 32-pair tiles, the
// same count).
//
// Persistent: a launch of C clusters (the host launches min(tiles, the clusters the device
// holds at once)) gives cluster c tiles c, c + C, ...: each block stages its x once, and the
// producer streams the weight tiles of all the block's tiles through the ring without a break,
// so the next tile's first weights land while the consumers sum the last one (gpu198's trace of
// the one-tile-a-cluster form: x staging ~5 us a block, the cluster epilogue ~1.5 us, every
// block of a multi-wave grid paying both, and clusters of a later wave waiting for a GPC's
// slots). The split-K sum runs on mbarriers, not cluster barriers (the producer, streaming
// ahead, never joins them): rank r sums batch rows [m r / S, m (r + 1) / S); each consumer
// thread pushes its sums of every row into the summing rank's inbox with st.async, counted on
// that rank's inbox_full; the rank sums its inbox in rank order (bit-reproducible), stores, and
// its warps arrive on every rank's sent_ok, which a rank awaits before pushing its next tile.
// No block reads a peer's shared memory, so a block exits once its own sums are stored; a rank
// without rows (m < S) keeps no inbox phases (tests/unit/test_gemm_decode_fp8_protocol.py
// models the protocol). Without a split one named barrier orders the warpgroup's writes and
// reads of its two partial tiles.
//
// Preconditions (host): 1 <= m <= 8, k % 16 == 0, codes 16-byte aligned, x 8-byte aligned,
// gated entries n even, the grid a multiple of S.
#include "atlas_common.cuh"
#include "bulk_copy.cuh"
#include <cuda_fp16.h>

#include "gemm_decode_tile.cuh"
#include "mma_util.cuh"
#include "wgmma_util.cuh"

namespace {

using namespace atlas::decode_gemm;  // geometry, store_part
using atlas::bulk::TensorMap;

constexpr int kKTile = 128;                           // E4M3 values (bytes) of a k-tile
constexpr int kSlotBytes = kGroupRows * kKTile;       // a [64][128] weight tile: 8 KiB
constexpr int kMaxStages = 16;                        // ops/matmul_fp8_wgmma.py FP8_MAX_STAGES
constexpr int kMaxXTiles = 32;                        // ... FP8_MAX_X_TILES: a block's k-tiles
constexpr int kXBytes = kMaxXTiles * 16 * kKTile;     // ... at wgmma N = 16: FP8_X_BYTES
constexpr int kXScaleBytes = kMaxXTiles * 8 * 4;      // a float per (token, k-tile)
constexpr int kSlotScaleBytes = kGroupRows * 4;       // a slot's tile rows' scales
constexpr int kPitch = partial_pitch(1);              // a partial tile's row (floats)
constexpr int kPartFloats = 8 * kPitch;               // one for each of 8 tokens
constexpr int kPartBytes = 2 * kPartFloats * 4;       // two: ... FP8_PART_BYTES
constexpr int kProducerThreads = 32;
constexpr int kThreads = kGroupThreads + kProducerThreads;
// the most a launch asks (the deepest ring past the largest x): ... FP8_SMEM_MAX
constexpr int kSmemBytes = kAlign + kXBytes + kXScaleBytes + kPartBytes +
                           kMaxStages * (kSlotBytes + kSlotScaleBytes);
constexpr long long kHangCycles = 4000000000LL;  // gemm_decode_tma.cu's trap, not a hang

// The block's mbarriers: the ring's (a slot's weight tile and scales landed / its MMAs
// retired), the inbox's (every rank's partial of this rank's batch rows landed) and sent_ok
// (every rank has summed out of its inbox: the next tile's partials may go).
struct Barriers {
  uint64_t full[kMaxStages], empty[kMaxStages], inbox_full, sent_ok;
};
static_assert(kSmemBytes + sizeof(Barriers) + 1024 <= 227 * 1024, "the deepest ring fits");
static_assert(kMaxXTiles * 8 * 4 <= kXScaleBytes,
              "a scale for every (token, k-tile) the x tiles hold");

// d[64 x N] (+)= A[64 x 32] * B[N x 32]^T, E4M3 operands K-major in shared memory (128-byte
// swizzle), f32 accumulators in wgmma's fragment layout (wgmma_util.cuh); `accumulate` 0
// overwrites d.
__device__ __forceinline__ void wgmma_e4m3_k32(float (&d)[4], uint64_t a, uint64_t b,
                                               int accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %6, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n8k32.f32.e4m3.e4m3 {%0, %1, %2, %3}, %4, %5, p, 1, 1;\n"
      "}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "l"(a), "l"(b), "r"(accumulate));
}

__device__ __forceinline__ void wgmma_e4m3_k32(float (&d)[8], uint64_t a, uint64_t b,
                                               int accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %10, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n16k32.f32.e4m3.e4m3 "
      "{%0, %1, %2, %3, %4, %5, %6, %7}, %8, %9, p, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),
        "+f"(d[7])
      : "l"(a), "l"(b), "r"(accumulate));
}

// Two f32 as E4M3 (round to nearest, saturating): `lo` in the low byte.
__device__ __forceinline__ uint32_t e4m3x2(float lo, float hi) {
  uint16_t r;
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;\n" : "=h"(r) : "f"(hi), "f"(lo));
  return r;
}

// The two E4M3 values of the low 16 bits of `b` back as f32 (exact).
__device__ __forceinline__ float2 e4m3x2_to_f32(uint32_t b) {
  uint32_t h;
  asm("cvt.rn.f16x2.e4m3x2 %0, %1;\n" : "=r"(h) : "h"(static_cast<uint16_t>(b)));
  const __half2 v = *reinterpret_cast<const __half2*>(&h);
  return __half22float2(v);
}

// The FP8 scale index map (kernel_abi.py _FP8_SCALE).
struct ScaleMap {
  const float* scale;
  uint32_t row_shift, row_stride, col_shift, col_stride;
  __device__ __forceinline__ const float* row(int r) const {
    return scale + static_cast<size_t>(static_cast<uint32_t>(r) >> row_shift) * row_stride;
  }
  __device__ __forceinline__ uint32_t col(int kt) const {
    return (static_cast<uint32_t>(kt * kKTile) >> col_shift) * col_stride;
  }
};

// The traced entries' stamps (tools/gpu/trace_decode_fp8.py): %globaltimer (ns) of block
// phases in trace[block][kTraceWords], words [0, 8) stamped by consumer thread 0, [8, 12) by
// the producer thread, kTraceSm the block's SM. Null: the plain entries, no stamps.
enum Fp8Phase : int {
  kFp8Start,       // consumer thread 0's first instruction
  kFp8Waited,      // its griddepcontrol.wait returned
  kFp8XStaged,     // the block's x tiles staged (the warpgroup barrier passed)
  kFp8FirstTile,   // the first weight tile landed and its MMAs issued
  kFp8LastTile,    // the block's last tile: its last k-tile's MMAs retired into the totals
  kFp8Epilogue,    // ... its part buffer free (the partial's stores next)
  kFp8End,         // the block's sums stored and its part buffers read by every rank
  kFp8RingIssued = 8,  // producer: the first ring's copies issued (before its wait)
  kFp8ProducerWaited,  // producer: its griddepcontrol.wait returned
  kFp8AllIssued,       // producer: every copy issued
};
constexpr int kTraceWords = 16;  // ops/matmul_fp8_wgmma.py TRACE_WORDS
constexpr int kTraceSm = 15;     // ... TRACE_SM_WORD
// durations (ns): consumer thread 0's waits for landed slots, the producer's for drained ones
// (weights late vs MMAs late; ... TRACE_WAITS)
constexpr int kTraceConsumerWaitNs = 11;
constexpr int kTraceProducerWaitNs = 12;

__device__ __forceinline__ unsigned long long now_ns() {
  unsigned long long ns;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(ns));
  return ns;
}

__device__ __forceinline__ void stamp(unsigned long long* trace, int phase) {
  if (trace == nullptr) return;
  trace[static_cast<size_t>(blockIdx.x) * kTraceWords + phase] = now_ns();
}

// One f32 from global into shared memory without waiting for it (cp.async); copies_arrive
// makes the landing of all the thread's copies so far an arrival on `bar` (noinc: the
// barrier's count includes it).
__device__ __forceinline__ void copy_f32_async(float* dst, const float* src) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(atlas::smem_addr(dst)),
               "l"(src) : "memory");
}

__device__ __forceinline__ void copies_arrive(uint64_t* bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared.b64 [%0];\n" ::"r"(atlas::smem_addr(bar))
               : "memory");
}

// v into cluster block `rank`'s shared memory at `dst`'s offset, its bytes counted on that
// block's mbarrier at `bar`'s offset (st.async: the sender neither waits nor needs to stay).
__device__ __forceinline__ void push_f32(float* dst, float v, uint64_t* bar, int rank) {
  const uint32_t d = atlas::map_rank(atlas::smem_addr(dst), rank);
  const uint32_t b = atlas::map_rank(atlas::smem_addr(bar), rank);
  asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.f32 [%0], %1, [%2];\n"
               ::"r"(d), "f"(v), "r"(b) : "memory");
}

// The block's x, tokens [0, m) and k-tiles [kt0, kt0 + count), into `tiles` (tile i at
// i * kCols * 128: row 2t = hi of token t, row 2t + 1 = mid, rows from 2m zero, 128-byte
// swizzled) and `xscale` (xscale[i * kCols / 2 + t] = 2^-a of the header). One warp converts a
// (token, k-tile) unit at a time, four values a lane, loads of eight units in flight.
template <int kCols>
__device__ __forceinline__ void stage_x(const __nv_bfloat16* __restrict__ x, int m, int k,
                                        int kt0, int count, uint32_t tiles, float* xscale) {
  constexpr int kTileBytes = kCols * kKTile, kBatch = 8;
  const int tid = static_cast<int>(threadIdx.x), lane = tid & 31, warp = tid >> 5;
  // rows past the batch: zero (their columns feed no output, but keep them finite)
  const int zero_rows = kCols - 2 * m;
  for (int e = tid; e < count * zero_rows * 8; e += kGroupThreads) {
    const int i = e / (zero_rows * 8), r = 2 * m + e % (zero_rows * 8) / 8, ch = e % 8;
    asm volatile("st.shared.v4.u32 [%0], {%1, %1, %1, %1};\n"
                 ::"r"(tiles + i * kTileBytes + r * 128 + ch * 16), "r"(0u) : "memory");
  }
  const int units = m * count;
  for (int u0 = warp; u0 < units; u0 += 4 * kBatch) {
    uint2 raw[kBatch];
#pragma unroll
    for (int b = 0; b < kBatch; ++b) {
      const int u = u0 + 4 * b, t = u / count, col = (kt0 + u % count) * kKTile + 4 * lane;
      raw[b] = make_uint2(0u, 0u);
      if (u < units && col < k)
        raw[b] = *reinterpret_cast<const uint2*>(x + static_cast<size_t>(t) * k + col);
    }
#pragma unroll
    for (int b = 0; b < kBatch; ++b) {
      const int u = u0 + 4 * b;
      if (u >= units) break;
      const int t = u / count, i = u % count;
      float v[4];
      v[0] = __uint_as_float(raw[b].x << 16);
      v[1] = __uint_as_float(raw[b].x & 0xFFFF0000u);
      v[2] = __uint_as_float(raw[b].y << 16);
      v[3] = __uint_as_float(raw[b].y & 0xFFFF0000u);
      float amax = fmaxf(fmaxf(fabsf(v[0]), fabsf(v[1])), fmaxf(fabsf(v[2]), fabsf(v[3])));
#pragma unroll
      for (int off = 16; off > 0; off >>= 1)
        amax = fmaxf(amax, __shfl_xor_sync(0xFFFFFFFFu, amax, off));
      // a = 7 - floor(log2 amax), clamped so that 2^a and 2^-a are normal floats
      const int e = static_cast<int>((__float_as_uint(amax) >> 23) & 0xFF) - 127;
      const int a = amax == 0.f ? 0 : max(-126, min(126, 7 - e));
      const float up = __uint_as_float(static_cast<uint32_t>(127 + a) << 23);
      uint32_t hi = 0, mid = 0;
#pragma unroll
      for (int j = 0; j < 4; j += 2) {
        const float a0 = v[j] * up, a1 = v[j + 1] * up;
        const uint32_t h = e4m3x2(a0, a1);
        const float2 back = e4m3x2_to_f32(h);
        hi |= h << (8 * j);
        mid |= e4m3x2((a0 - back.x) * 16.f, (a1 - back.y) * 16.f) << (8 * j);
      }
      const uint32_t tile = tiles + i * kTileBytes;
      const int ch = lane >> 2, byte = (lane & 3) * 4;
      const int r_hi = 2 * t, r_mid = 2 * t + 1;
      asm volatile("st.shared.u32 [%0], %1;\n" ::"r"(tile + atlas::swizzle128(r_hi, ch) + byte),
                   "r"(hi) : "memory");
      asm volatile("st.shared.u32 [%0], %1;\n" ::"r"(tile + atlas::swizzle128(r_mid, ch) + byte),
                   "r"(mid) : "memory");
      if (lane == 0)
        xscale[i * (kCols / 2) + t] = __uint_as_float(static_cast<uint32_t>(127 - a) << 23);
    }
  }
}

// The block's tiles (header): clusters c, c + C, ... of the launch's C = gridDim / kSplit take
// tiles c, c + C, ...; kCols: wgmma N, twice the tokens it can hold; kTraced: the traced
// twins' wait accounting (trace words kTraceConsumerWaitNs, kTraceProducerWaitNs).
template <int kCols, int kSplit, bool kF32Out, Glu kGlu, bool kTraced>
__device__ __forceinline__ void gemm_decode_fp8(const TensorMap& wmap,
                                                const __nv_bfloat16* __restrict__ x,
                                                const ScaleMap& smap, void* __restrict__ y,
                                                int m, int n, int k, uint8_t* smem_raw,
                                                Barriers& bars, unsigned long long* trace) {
  constexpr int kAcc = kCols / 2, kTokens = kCols / 2, kTileBytes = kCols * kKTile;
  constexpr bool kGated = kGlu != Glu::kNone;
  constexpr int kOutRows = kGated ? kGroupRows / 2 : kGroupRows;
  constexpr int kOwn = (kTokens + kSplit - 1) / kSplit;  // tokens a rank sums, at most
  static_assert(kSplit == 1 || kSplit * kOwn * kPitch * 4 <= kPartBytes, "the inbox fits");
  const uint32_t raw = atlas::smem_addr(smem_raw);
  const uint32_t smem = (raw + kAlign - 1) & ~uint32_t(kAlign - 1);
  uint8_t* base = smem_raw + (smem - raw);
  const int k_tiles = (k + kKTile - 1) / kKTile;
  // the layout (header): the ring's slots, as many as the launch's shared memory holds past
  // the rest (the host sized it: smem_bytes), the x tiles of the largest k range of a rank
  // (both 1 KiB-aligned for their swizzle), the x scales, the partial tiles, the slots' scales
  const int x_bytes = (k_tiles + kSplit - 1) / kSplit * kTileBytes;
  uint32_t dynamic_bytes;
  asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(dynamic_bytes));
  const int stages = min(kMaxStages, (static_cast<int>(dynamic_bytes) - kAlign - x_bytes -
                                      kXScaleBytes - kPartBytes) /
                                         (kSlotBytes + kSlotScaleBytes));
  if (stages < 2) __trap();  // the host sizes at least two slots
  const uint32_t ring = smem;
  const uint32_t xtiles = smem + stages * kSlotBytes;
  float* xscale = reinterpret_cast<float*>(base + stages * kSlotBytes + x_bytes);
  float* parts = xscale + kXScaleBytes / 4;  // split: the inbox; else two partial tiles
  float* wscale = parts + kPartBytes / 4;    // [slot][tile row]

  const int rank = static_cast<int>(blockIdx.x) % kSplit;  // == the cluster rank
  const int cluster = static_cast<int>(blockIdx.x) / kSplit;
  const int clusters = static_cast<int>(gridDim.x) / kSplit;
  const int inter = n / 2;  // activation width (kGated)
  const int tiles = ((kGated ? inter : n) + kOutRows - 1) / kOutRows;
  const int my_tiles = cluster < tiles ? (tiles - cluster + clusters - 1) / clusters : 0;
  const int kt0 = k_tiles * rank / kSplit;
  const int count = k_tiles * (rank + 1) / kSplit - kt0;
  const int mi0 = m * rank / kSplit, mi1 = m * (rank + 1) / kSplit;  // this rank's sums
  // a tile's bytes into this rank's inbox: every rank's partial of its batch rows
  const uint32_t inbox_bytes = kSplit * (mi1 - mi0) * kGroupRows * 4;
  const int tid = static_cast<int>(threadIdx.x);
  if (trace != nullptr && tid == 0) {
    stamp(trace, kFp8Start);
    unsigned smid;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(smid));
    trace[static_cast<size_t>(blockIdx.x) * kTraceWords + kTraceSm] = smid;
  }
  // the weight row whose scales tile row r of tile `row0` takes, clamped into the weight
  // (rows past n or I feed no output)
  auto weight_row = [&](int r, int row0) {
    if constexpr (kGated) {
      const int w = gate_up_row<kGroupRows>(r, row0, inter);
      return w < 0 ? 0 : w;
    } else {
      return min(row0 + r, n - 1);
    }
  };

  if (tid == 0) {
    for (int s = 0; s < stages; ++s) {
      // the producer's expect_tx and each producer lane's scale copies (cp.async, noinc)
      atlas::bulk::init_barrier(&bars.full[s], 1 + kProducerThreads);
      atlas::bulk::init_barrier(&bars.empty[s], kGroupThreads / 32);  // per consumer warp
    }
    atlas::bulk::init_barrier(&bars.inbox_full, 1);                    // + the tile's bytes
    atlas::bulk::init_barrier(&bars.sent_ok, kSplit * kGroupThreads / 32);  // every rank's warps
    atlas::bulk::fence_barrier_init();
    if constexpr (kSplit > 1)
      if (my_tiles > 0 && inbox_bytes > 0)
        atlas::bulk::expect_bytes(&bars.inbox_full, inbox_bytes);
  }
  __syncthreads();
  // peers send to this block only past the cluster barrier's wait, which the init's release
  // fence precedes
  if constexpr (kSplit > 1) atlas::cluster_arrive_relaxed();

  if (tid >= kGroupThreads) {  // the producer warp: the weight tiles and their scales
    const int lane = tid - kGroupThreads;
    const bool lead = lane == 0;
    if (lead) atlas::bulk::prefetch_map(&wmap);
    const uint64_t policy = atlas::l2_stream_policy();
    unsigned long long waited = 0;
    // load g: k-tile g % count of the block's tile g / count, into slot g % stages; each
    // lane copies the k-tile's scales of tile rows lane and lane + 32
    auto load = [&](int g) {
      const int s = g % stages, j = g / count, i = g - j * count;
      if (g >= stages) {
        unsigned long long t0 = 0;
        if constexpr (kTraced) t0 = now_ns();
        atlas::bulk::wait_parity_or_trap(&bars.empty[s], (g / stages - 1) & 1, kHangCycles);
        if constexpr (kTraced) waited += now_ns() - t0;
      }
      const int row0 = (cluster + j * clusters) * kOutRows;
      if (lead) {
        atlas::bulk::expect_bytes(&bars.full[s], kSlotBytes);
        const uint32_t dst = ring + s * kSlotBytes;
        const int c0 = (kt0 + i) * (kKTile / 2);  // the codes seen as bf16 [n][k / 2]
        if constexpr (kGated) {  // gate rows [row0, +32), then the up rows I past them
          atlas::bulk::copy_tile_2d_stream(dst, &wmap, c0, row0, &bars.full[s], policy);
          atlas::bulk::copy_tile_2d_stream(dst + kSlotBytes / 2, &wmap, c0, inter + row0,
                                           &bars.full[s], policy);
        } else {
          atlas::bulk::copy_tile_2d_stream(dst, &wmap, c0, row0, &bars.full[s], policy);
        }
      }
      const uint32_t col = smap.col(kt0 + i);
      float* sc = wscale + s * kGroupRows;
      copy_f32_async(sc + lane, smap.row(weight_row(lane, row0)) + col);
      copy_f32_async(sc + lane + 32, smap.row(weight_row(lane + 32, row0)) + col);
      copies_arrive(&bars.full[s]);
    };
    // the first ring before the PDL wait (no kernel writes weights), the rest after it
    const int loads = my_tiles * count;
    const int ahead = loads < stages ? loads : stages;
    for (int g = 0; g < ahead; ++g) load(g);
    if (lead) stamp(trace, kFp8RingIssued);
    atlas::pdl_enter();
    if (lead) stamp(trace, kFp8ProducerWaited);
    for (int g = ahead; g < loads; ++g) load(g);
    if (lead) {
      stamp(trace, kFp8AllIssued);
      if constexpr (kTraced) trace[static_cast<size_t>(blockIdx.x) * kTraceWords +
                                   kTraceProducerWaitNs] = waited;
    }
    if constexpr (kSplit > 1) atlas::cluster_wait();  // the arrive's pair
    return;  // the consumers' barriers never count this warp
  }

  // the consumer warpgroup
  const int lane = tid & 31, warp = tid >> 5;
  // this thread's two rows of a tile (wgmma_util.cuh fragment)
  const int r_lo = 16 * warp + (lane >> 2), r_hi = r_lo + 8;
  atlas::pdl_enter();
  if (tid == 0) stamp(trace, kFp8Waited);
  stage_x<kCols>(x, m, k, kt0, count, xtiles, xscale);
  // the x tiles (generic-proxy stores) before any wgmma reads them (async proxy), for all
  // four warps
  atlas::bulk::fence_async_shared();
  asm volatile("bar.sync 1, %0;\n" ::"n"(kGroupThreads) : "memory");
  if (tid == 0) stamp(trace, kFp8XStaged);
  if constexpr (kSplit > 1) atlas::cluster_wait();  // every peer's barriers initialized

  unsigned long long waited = 0;
  float tot[kAcc], a0[kAcc], a1[kAcc];
#pragma unroll
  for (int j = 0; j < kAcc; ++j) a0[j] = a1[j] = 0.f;
  for (int j = 0, g = 0; j < my_tiles; ++j, g += count) {
    const int row0 = (cluster + j * clusters) * kOutRows;  // first output column (pair)
#pragma unroll
    for (int i = 0; i < kAcc; ++i) tot[i] = 0.f;
    // k-tile i's four k32 MMAs into a fresh accumulator set, in flight on return; its
    // weight scales (this thread's two rows) out of the slot
    auto issue = [&](float (&a)[kAcc], int i, float& wlo, float& whi) {
      const int s = (g + i) % stages;
      unsigned long long t0 = 0;
      if constexpr (kTraced) t0 = now_ns();
      atlas::bulk::wait_parity_or_trap(&bars.full[s], ((g + i) / stages) & 1, kHangCycles);
      if constexpr (kTraced) waited += now_ns() - t0;
      atlas::wgmma_fence();
      const uint32_t wt = ring + s * kSlotBytes, xt = xtiles + i * kTileBytes;
#pragma unroll
      for (int kk = 0; kk < 4; ++kk)
        wgmma_e4m3_k32(a, atlas::smem_desc(wt + 32 * kk), atlas::smem_desc(xt + 32 * kk), kk);
      atlas::wgmma_commit();
      wlo = wscale[s * kGroupRows + r_lo];
      whi = wscale[s * kGroupRows + r_hi];
    };
    // k-tile i's retired products into the f32 totals, scaled by its weight scales and x
    // scales; mid parts carry their 1/16; its slot freed
    auto retire = [&](float (&a)[kAcc], int i, float wlo, float whi) {
      atlas::fence_acc(a);
#pragma unroll
      for (int q = 0; q < kAcc; ++q) {
        const float xs = xscale[i * kTokens + (lane & 3) + 4 * (q >> 2)];
        const float f = ((q >> 1) & 1 ? whi : wlo) * xs * ((q & 1) ? 0.0625f : 1.f);
        tot[q] = fmaf(a[q], f, tot[q]);
      }
      if (lane == 0) atlas::bulk::arrive(&bars.empty[(g + i) % stages]);
    };
    // two accumulator sets: k-tile i's MMAs run while k-tile i - 1's are promoted
    float w0lo = 0.f, w0hi = 0.f, w1lo = 0.f, w1hi = 0.f;
    for (int i = 0; i < count; i += 2) {
      issue(a0, i, w0lo, w0hi);
      if (j == 0 && i == 0 && tid == 0) stamp(trace, kFp8FirstTile);
      atlas::wgmma_wait<1>();
      if (i > 0) retire(a1, i - 1, w1lo, w1hi);
      if (i + 1 < count) {
        issue(a1, i + 1, w1lo, w1hi);
        atlas::wgmma_wait<1>();
        retire(a0, i, w0lo, w0hi);
      }
    }
    atlas::wgmma_wait<0>();
    if (count > 0) {
      if (count & 1)
        retire(a0, count - 1, w0lo, w0hi);
      else
        retire(a1, count - 1, w1lo, w1hi);
    }
    if (tid == 0) stamp(trace, kFp8LastTile);

    if constexpr (kSplit > 1) {
      // push: this thread's sums of each batch row t < m into the inbox of the rank that sums
      // row t (slot [rank][t - its first row]), counted on that rank's inbox_full; the
      // inboxes are free once every rank's warps have read the tile before (sent_ok)
      if (j > 0)
        atlas::bulk::wait_parity_or_trap<true>(&bars.sent_ok, (j - 1) & 1, kHangCycles);
      if (tid == 0) stamp(trace, kFp8Epilogue);
#pragma unroll
      for (int q = 0; q < kAcc; q += 4) {  // token (lane & 3) + q / 4 ... : hi + mid / 16
        const int t = (lane & 3) + q;
        if (t >= m) continue;
        int owner = kSplit - 1;  // the rank whose batch rows [m o / S, m (o + 1) / S) hold t
        while (m * owner / kSplit > t) --owner;
        const int slot = (rank * kOwn + t - m * owner / kSplit) * kPitch;
        push_f32(parts + slot + r_lo, tot[q] + tot[q + 1], &bars.inbox_full, owner);
        push_f32(parts + slot + r_lo + 8, tot[q + 2] + tot[q + 3], &bars.inbox_full, owner);
      }
      // this rank's batch rows, once every rank's partial of them has landed (a rank with
      // none has no inbox: an empty phase would complete on its own arrival and could run
      // two phases ahead of a warp still waiting, which parity cannot tell apart)
      const bool more = j + 1 < my_tiles;
      if (inbox_bytes > 0) {
        atlas::bulk::wait_parity_or_trap<true>(&bars.inbox_full, j & 1, kHangCycles);
        if (tid == 0 && more) atlas::bulk::expect_bytes(&bars.inbox_full, inbox_bytes);
      }
      auto whole4 = [&](int mi, int r, float (&v)[4]) {
#pragma unroll
        for (int i = 0; i < 4; ++i) v[i] = 0.f;
#pragma unroll
        for (int p = 0; p < kSplit; ++p) {  // ranks in order: the one-tile form's sums
          const float4 t = *reinterpret_cast<const float4*>(
              parts + (p * kOwn + mi - mi0) * kPitch + r);
          v[0] += t.x;
          v[1] += t.y;
          v[2] += t.z;
          v[3] += t.w;
        }
      };
      store_quads<kF32Out, kGlu, kGroupThreads, kOutRows>(whole4, y, n, row0, mi0, mi1, true);
      __syncwarp();  // the warp's inbox reads before it lets the ranks send again
      if (lane == 0 && more)
        for (int p = 0; p < kSplit; ++p) atlas::bulk::arrive_cluster(&bars.sent_ok, p);
    } else {
      // the tile's partial into part buffer j % 2 (the warpgroup barrier of tile j - 1
      // ordered every read of the tile before), then its sums stored
      float* part = parts + (j & 1) * kPartFloats;
      if (tid == 0) stamp(trace, kFp8Epilogue);
#pragma unroll
      for (int q = 0; q < kAcc; q += 4) {
        const int t = (lane & 3) + q;
        part[t * kPitch + r_lo] = tot[q] + tot[q + 1];
        part[t * kPitch + r_lo + 8] = tot[q + 2] + tot[q + 3];
      }
      asm volatile("bar.sync 1, %0;\n" ::"n"(kGroupThreads) : "memory");
      sum_store_quads<1, kF32Out, kGlu, kGroupThreads, kOutRows, kPitch>(part, y, n, row0, 0,
                                                                        m, true);
    }
  }
  // a block exits once its inbox has taken every byte sent to it (each tile's wait) and no
  // rank will arrive on its sent_ok again (none does after the last tile)
  if (tid == 0) {
    stamp(trace, kFp8End);
    if constexpr (kTraced)
      trace[static_cast<size_t>(blockIdx.x) * kTraceWords + kTraceConsumerWaitNs] = waited;
  }
}

// trace: the traced twins' stamps (non-null there only)
template <int kSplit, bool kF32Out, Glu kGlu, bool kTraced = false>
__device__ __forceinline__ void dispatch(const TensorMap& wmap, const __nv_bfloat16* x,
                                         const ScaleMap& smap, void* y, uint32_t m, uint32_t n,
                                         uint32_t k, unsigned long long* trace = nullptr) {
  extern __shared__ __align__(16) uint8_t smem_raw[];
  __shared__ Barriers bars;
  const int mi = static_cast<int>(m), ni = static_cast<int>(n), ki = static_cast<int>(k);
  if (mi <= 4)
    gemm_decode_fp8<8, kSplit, kF32Out, kGlu, kTraced>(wmap, x, smap, y, mi, ni, ki, smem_raw,
                                                       bars, trace);
  else if (mi <= 8)
    gemm_decode_fp8<16, kSplit, kF32Out, kGlu, kTraced>(wmap, x, smap, y, mi, ni, ki, smem_raw,
                                                        bars, trace);
  else
    __trap();  // ops/matmul_fp8_wgmma.py checks 1 <= m <= 8
}

}  // namespace

// w and the other pointers as kernel_abi.py's _FP8_DECODE: the host reference reads the codes
// through w, the kernel through wmap (the codes as a bf16 matrix [n][k / 2]). Per split: the
// bf16 product, its f32 logits twin (a quantized LM head), the [gate | up] product ending with
// its SwiGLU (y = act [m, n / 2]).

extern "C" __global__ void __launch_bounds__(kThreads)
    gemm_decode_fp8_bf16(const __nv_bfloat16* x, const uint8_t* w,
        const float* scale, void* y, uint32_t m, uint32_t n, uint32_t k, uint32_t row_shift,
        uint32_t row_stride, uint32_t col_shift, uint32_t col_stride,
        const __grid_constant__ TensorMap wmap) {
  const ScaleMap smap{scale, row_shift, row_stride, col_shift, col_stride};
  dispatch<1, false, Glu::kNone>(wmap, x, smap, y, m, n, k);
}

extern "C" __global__ void __launch_bounds__(kThreads)
    gemm_decode_fp8_f32(const __nv_bfloat16* x, const uint8_t* w,
        const float* scale, void* y, uint32_t m, uint32_t n, uint32_t k, uint32_t row_shift,
        uint32_t row_stride, uint32_t col_shift, uint32_t col_stride,
        const __grid_constant__ TensorMap wmap) {
  const ScaleMap smap{scale, row_shift, row_stride, col_shift, col_stride};
  dispatch<1, true, Glu::kNone>(wmap, x, smap, y, m, n, k);
}

extern "C" __global__ void __launch_bounds__(kThreads)
    gemm_decode_fp8_swiglu_bf16(const __nv_bfloat16* x, const uint8_t* w,
        const float* scale, void* y, uint32_t m, uint32_t n, uint32_t k, uint32_t row_shift,
        uint32_t row_stride, uint32_t col_shift, uint32_t col_stride,
        const __grid_constant__ TensorMap wmap) {
  const ScaleMap smap{scale, row_shift, row_stride, col_shift, col_stride};
  dispatch<1, false, Glu::kSwiglu>(wmap, x, smap, y, m, n, k);
}

extern "C" __global__ void __cluster_dims__(2, 1, 1) __launch_bounds__(kThreads)
    gemm_decode_fp8_bf16_split2(const __nv_bfloat16* x, const uint8_t* w,
        const float* scale, void* y, uint32_t m, uint32_t n, uint32_t k, uint32_t row_shift,
        uint32_t row_stride, uint32_t col_shift, uint32_t col_stride,
        const __grid_constant__ TensorMap wmap) {
  const ScaleMap smap{scale, row_shift, row_stride, col_shift, col_stride};
  dispatch<2, false, Glu::kNone>(wmap, x, smap, y, m, n, k);
}

extern "C" __global__ void __cluster_dims__(2, 1, 1) __launch_bounds__(kThreads)
    gemm_decode_fp8_f32_split2(const __nv_bfloat16* x, const uint8_t* w,
        const float* scale, void* y, uint32_t m, uint32_t n, uint32_t k, uint32_t row_shift,
        uint32_t row_stride, uint32_t col_shift, uint32_t col_stride,
        const __grid_constant__ TensorMap wmap) {
  const ScaleMap smap{scale, row_shift, row_stride, col_shift, col_stride};
  dispatch<2, true, Glu::kNone>(wmap, x, smap, y, m, n, k);
}

extern "C" __global__ void __cluster_dims__(2, 1, 1) __launch_bounds__(kThreads)
    gemm_decode_fp8_swiglu_bf16_split2(const __nv_bfloat16* x, const uint8_t* w,
        const float* scale, void* y, uint32_t m, uint32_t n, uint32_t k, uint32_t row_shift,
        uint32_t row_stride, uint32_t col_shift, uint32_t col_stride,
        const __grid_constant__ TensorMap wmap) {
  const ScaleMap smap{scale, row_shift, row_stride, col_shift, col_stride};
  dispatch<2, false, Glu::kSwiglu>(wmap, x, smap, y, m, n, k);
}

extern "C" __global__ void __cluster_dims__(3, 1, 1) __launch_bounds__(kThreads)
    gemm_decode_fp8_bf16_split3(const __nv_bfloat16* x, const uint8_t* w,
        const float* scale, void* y, uint32_t m, uint32_t n, uint32_t k, uint32_t row_shift,
        uint32_t row_stride, uint32_t col_shift, uint32_t col_stride,
        const __grid_constant__ TensorMap wmap) {
  const ScaleMap smap{scale, row_shift, row_stride, col_shift, col_stride};
  dispatch<3, false, Glu::kNone>(wmap, x, smap, y, m, n, k);
}

extern "C" __global__ void __cluster_dims__(3, 1, 1) __launch_bounds__(kThreads)
    gemm_decode_fp8_f32_split3(const __nv_bfloat16* x, const uint8_t* w,
        const float* scale, void* y, uint32_t m, uint32_t n, uint32_t k, uint32_t row_shift,
        uint32_t row_stride, uint32_t col_shift, uint32_t col_stride,
        const __grid_constant__ TensorMap wmap) {
  const ScaleMap smap{scale, row_shift, row_stride, col_shift, col_stride};
  dispatch<3, true, Glu::kNone>(wmap, x, smap, y, m, n, k);
}

extern "C" __global__ void __cluster_dims__(3, 1, 1) __launch_bounds__(kThreads)
    gemm_decode_fp8_swiglu_bf16_split3(const __nv_bfloat16* x, const uint8_t* w,
        const float* scale, void* y, uint32_t m, uint32_t n, uint32_t k, uint32_t row_shift,
        uint32_t row_stride, uint32_t col_shift, uint32_t col_stride,
        const __grid_constant__ TensorMap wmap) {
  const ScaleMap smap{scale, row_shift, row_stride, col_shift, col_stride};
  dispatch<3, false, Glu::kSwiglu>(wmap, x, smap, y, m, n, k);
}

extern "C" __global__ void __cluster_dims__(4, 1, 1) __launch_bounds__(kThreads)
    gemm_decode_fp8_bf16_split4(const __nv_bfloat16* x, const uint8_t* w,
        const float* scale, void* y, uint32_t m, uint32_t n, uint32_t k, uint32_t row_shift,
        uint32_t row_stride, uint32_t col_shift, uint32_t col_stride,
        const __grid_constant__ TensorMap wmap) {
  const ScaleMap smap{scale, row_shift, row_stride, col_shift, col_stride};
  dispatch<4, false, Glu::kNone>(wmap, x, smap, y, m, n, k);
}

extern "C" __global__ void __cluster_dims__(4, 1, 1) __launch_bounds__(kThreads)
    gemm_decode_fp8_f32_split4(const __nv_bfloat16* x, const uint8_t* w,
        const float* scale, void* y, uint32_t m, uint32_t n, uint32_t k, uint32_t row_shift,
        uint32_t row_stride, uint32_t col_shift, uint32_t col_stride,
        const __grid_constant__ TensorMap wmap) {
  const ScaleMap smap{scale, row_shift, row_stride, col_shift, col_stride};
  dispatch<4, true, Glu::kNone>(wmap, x, smap, y, m, n, k);
}

extern "C" __global__ void __cluster_dims__(4, 1, 1) __launch_bounds__(kThreads)
    gemm_decode_fp8_swiglu_bf16_split4(const __nv_bfloat16* x, const uint8_t* w,
        const float* scale, void* y, uint32_t m, uint32_t n, uint32_t k, uint32_t row_shift,
        uint32_t row_stride, uint32_t col_shift, uint32_t col_stride,
        const __grid_constant__ TensorMap wmap) {
  const ScaleMap smap{scale, row_shift, row_stride, col_shift, col_stride};
  dispatch<4, false, Glu::kSwiglu>(wmap, x, smap, y, m, n, k);
}

extern "C" __global__ void __cluster_dims__(5, 1, 1) __launch_bounds__(kThreads)
    gemm_decode_fp8_bf16_split5(const __nv_bfloat16* x, const uint8_t* w,
        const float* scale, void* y, uint32_t m, uint32_t n, uint32_t k, uint32_t row_shift,
        uint32_t row_stride, uint32_t col_shift, uint32_t col_stride,
        const __grid_constant__ TensorMap wmap) {
  const ScaleMap smap{scale, row_shift, row_stride, col_shift, col_stride};
  dispatch<5, false, Glu::kNone>(wmap, x, smap, y, m, n, k);
}

extern "C" __global__ void __cluster_dims__(5, 1, 1) __launch_bounds__(kThreads)
    gemm_decode_fp8_f32_split5(const __nv_bfloat16* x, const uint8_t* w,
        const float* scale, void* y, uint32_t m, uint32_t n, uint32_t k, uint32_t row_shift,
        uint32_t row_stride, uint32_t col_shift, uint32_t col_stride,
        const __grid_constant__ TensorMap wmap) {
  const ScaleMap smap{scale, row_shift, row_stride, col_shift, col_stride};
  dispatch<5, true, Glu::kNone>(wmap, x, smap, y, m, n, k);
}

extern "C" __global__ void __cluster_dims__(5, 1, 1) __launch_bounds__(kThreads)
    gemm_decode_fp8_swiglu_bf16_split5(const __nv_bfloat16* x, const uint8_t* w,
        const float* scale, void* y, uint32_t m, uint32_t n, uint32_t k, uint32_t row_shift,
        uint32_t row_stride, uint32_t col_shift, uint32_t col_stride,
        const __grid_constant__ TensorMap wmap) {
  const ScaleMap smap{scale, row_shift, row_stride, col_shift, col_stride};
  dispatch<5, false, Glu::kSwiglu>(wmap, x, smap, y, m, n, k);
}

extern "C" __global__ void __cluster_dims__(6, 1, 1) __launch_bounds__(kThreads)
    gemm_decode_fp8_bf16_split6(const __nv_bfloat16* x, const uint8_t* w,
        const float* scale, void* y, uint32_t m, uint32_t n, uint32_t k, uint32_t row_shift,
        uint32_t row_stride, uint32_t col_shift, uint32_t col_stride,
        const __grid_constant__ TensorMap wmap) {
  const ScaleMap smap{scale, row_shift, row_stride, col_shift, col_stride};
  dispatch<6, false, Glu::kNone>(wmap, x, smap, y, m, n, k);
}

extern "C" __global__ void __cluster_dims__(6, 1, 1) __launch_bounds__(kThreads)
    gemm_decode_fp8_f32_split6(const __nv_bfloat16* x, const uint8_t* w,
        const float* scale, void* y, uint32_t m, uint32_t n, uint32_t k, uint32_t row_shift,
        uint32_t row_stride, uint32_t col_shift, uint32_t col_stride,
        const __grid_constant__ TensorMap wmap) {
  const ScaleMap smap{scale, row_shift, row_stride, col_shift, col_stride};
  dispatch<6, true, Glu::kNone>(wmap, x, smap, y, m, n, k);
}

extern "C" __global__ void __cluster_dims__(6, 1, 1) __launch_bounds__(kThreads)
    gemm_decode_fp8_swiglu_bf16_split6(const __nv_bfloat16* x, const uint8_t* w,
        const float* scale, void* y, uint32_t m, uint32_t n, uint32_t k, uint32_t row_shift,
        uint32_t row_stride, uint32_t col_shift, uint32_t col_stride,
        const __grid_constant__ TensorMap wmap) {
  const ScaleMap smap{scale, row_shift, row_stride, col_shift, col_stride};
  dispatch<6, false, Glu::kSwiglu>(wmap, x, smap, y, m, n, k);
}

extern "C" __global__ void __cluster_dims__(7, 1, 1) __launch_bounds__(kThreads)
    gemm_decode_fp8_bf16_split7(const __nv_bfloat16* x, const uint8_t* w,
        const float* scale, void* y, uint32_t m, uint32_t n, uint32_t k, uint32_t row_shift,
        uint32_t row_stride, uint32_t col_shift, uint32_t col_stride,
        const __grid_constant__ TensorMap wmap) {
  const ScaleMap smap{scale, row_shift, row_stride, col_shift, col_stride};
  dispatch<7, false, Glu::kNone>(wmap, x, smap, y, m, n, k);
}

extern "C" __global__ void __cluster_dims__(7, 1, 1) __launch_bounds__(kThreads)
    gemm_decode_fp8_f32_split7(const __nv_bfloat16* x, const uint8_t* w,
        const float* scale, void* y, uint32_t m, uint32_t n, uint32_t k, uint32_t row_shift,
        uint32_t row_stride, uint32_t col_shift, uint32_t col_stride,
        const __grid_constant__ TensorMap wmap) {
  const ScaleMap smap{scale, row_shift, row_stride, col_shift, col_stride};
  dispatch<7, true, Glu::kNone>(wmap, x, smap, y, m, n, k);
}

extern "C" __global__ void __cluster_dims__(7, 1, 1) __launch_bounds__(kThreads)
    gemm_decode_fp8_swiglu_bf16_split7(const __nv_bfloat16* x, const uint8_t* w,
        const float* scale, void* y, uint32_t m, uint32_t n, uint32_t k, uint32_t row_shift,
        uint32_t row_stride, uint32_t col_shift, uint32_t col_stride,
        const __grid_constant__ TensorMap wmap) {
  const ScaleMap smap{scale, row_shift, row_stride, col_shift, col_stride};
  dispatch<7, false, Glu::kSwiglu>(wmap, x, smap, y, m, n, k);
}

extern "C" __global__ void __cluster_dims__(8, 1, 1) __launch_bounds__(kThreads)
    gemm_decode_fp8_bf16_split8(const __nv_bfloat16* x, const uint8_t* w,
        const float* scale, void* y, uint32_t m, uint32_t n, uint32_t k, uint32_t row_shift,
        uint32_t row_stride, uint32_t col_shift, uint32_t col_stride,
        const __grid_constant__ TensorMap wmap) {
  const ScaleMap smap{scale, row_shift, row_stride, col_shift, col_stride};
  dispatch<8, false, Glu::kNone>(wmap, x, smap, y, m, n, k);
}

extern "C" __global__ void __cluster_dims__(8, 1, 1) __launch_bounds__(kThreads)
    gemm_decode_fp8_f32_split8(const __nv_bfloat16* x, const uint8_t* w,
        const float* scale, void* y, uint32_t m, uint32_t n, uint32_t k, uint32_t row_shift,
        uint32_t row_stride, uint32_t col_shift, uint32_t col_stride,
        const __grid_constant__ TensorMap wmap) {
  const ScaleMap smap{scale, row_shift, row_stride, col_shift, col_stride};
  dispatch<8, true, Glu::kNone>(wmap, x, smap, y, m, n, k);
}

extern "C" __global__ void __cluster_dims__(8, 1, 1) __launch_bounds__(kThreads)
    gemm_decode_fp8_swiglu_bf16_split8(const __nv_bfloat16* x, const uint8_t* w,
        const float* scale, void* y, uint32_t m, uint32_t n, uint32_t k, uint32_t row_shift,
        uint32_t row_stride, uint32_t col_shift, uint32_t col_stride,
        const __grid_constant__ TensorMap wmap) {
  const ScaleMap smap{scale, row_shift, row_stride, col_shift, col_stride};
  dispatch<8, false, Glu::kSwiglu>(wmap, x, smap, y, m, n, k);
}

// The traced twins of the bf16 product at the splits the rule picks for Qwen3-8B-like shapes
// (1..4): the same instructions with the block's phase stamps written to trace (u64
// [grid][kTraceWords], zeroed by the caller; tools/gpu/trace_decode_fp8.py reads them).

extern "C" __global__ void __launch_bounds__(kThreads)
    gemm_decode_fp8_trace_bf16(const __nv_bfloat16* x, const uint8_t* w,
        const float* scale, void* y, uint32_t m, uint32_t n, uint32_t k, uint32_t row_shift,
        uint32_t row_stride, uint32_t col_shift, uint32_t col_stride,
        const __grid_constant__ TensorMap wmap, unsigned long long* trace) {
  const ScaleMap smap{scale, row_shift, row_stride, col_shift, col_stride};
  dispatch<1, false, Glu::kNone, true>(wmap, x, smap, y, m, n, k, trace);
}

extern "C" __global__ void __cluster_dims__(2, 1, 1) __launch_bounds__(kThreads)
    gemm_decode_fp8_trace_bf16_split2(const __nv_bfloat16* x, const uint8_t* w,
        const float* scale, void* y, uint32_t m, uint32_t n, uint32_t k, uint32_t row_shift,
        uint32_t row_stride, uint32_t col_shift, uint32_t col_stride,
        const __grid_constant__ TensorMap wmap, unsigned long long* trace) {
  const ScaleMap smap{scale, row_shift, row_stride, col_shift, col_stride};
  dispatch<2, false, Glu::kNone, true>(wmap, x, smap, y, m, n, k, trace);
}

extern "C" __global__ void __cluster_dims__(3, 1, 1) __launch_bounds__(kThreads)
    gemm_decode_fp8_trace_bf16_split3(const __nv_bfloat16* x, const uint8_t* w,
        const float* scale, void* y, uint32_t m, uint32_t n, uint32_t k, uint32_t row_shift,
        uint32_t row_stride, uint32_t col_shift, uint32_t col_stride,
        const __grid_constant__ TensorMap wmap, unsigned long long* trace) {
  const ScaleMap smap{scale, row_shift, row_stride, col_shift, col_stride};
  dispatch<3, false, Glu::kNone, true>(wmap, x, smap, y, m, n, k, trace);
}

extern "C" __global__ void __cluster_dims__(4, 1, 1) __launch_bounds__(kThreads)
    gemm_decode_fp8_trace_bf16_split4(const __nv_bfloat16* x, const uint8_t* w,
        const float* scale, void* y, uint32_t m, uint32_t n, uint32_t k, uint32_t row_shift,
        uint32_t row_stride, uint32_t col_shift, uint32_t col_stride,
        const __grid_constant__ TensorMap wmap, unsigned long long* trace) {
  const ScaleMap smap{scale, row_shift, row_stride, col_shift, col_stride};
  dispatch<4, false, Glu::kNone, true>(wmap, x, smap, y, m, n, k, trace);
}
