// Batched decode GEMV on tensor cores: y[m, n] = sum_k x[m, k] * w[n, k] for 1 <= m <= 64.
//
// Decode at 9..64 rows is still memory-bound (each weight byte feeds at most 64 FMAs), so the
// kernel is built like the GEMV: every weight byte is streamed from HBM once, many 16-byte
// loads in flight per warp. What changes is the math: the product is computed transposed,
// C^T[n, m] = W[n, k] . X^T, with mma.m16n8k16 taking 16 weight rows as its A operand and 8
// activation rows as each B tile, so the weight rows fill the MMA's M dimension and no tile is
// padding at m = 16..64 (only the last 8-row B tile may be partial).
//
// Fragments without ldmatrix. The sum over k does not care in which order the k values are
// fed, as long as A and B agree. Lane (g = lane / 4, c = lane % 4) loads 16 bytes (8 bf16,
// k = 32 s + 8 c .. + 7 of k-step s) from weight rows g and g + 8 of a 16-row tile and from
// activation row g of each 8-row B tile. Element pairs (0,1) (2,3) feed the first MMA's k
// slots (2c, 2c+1) (2c+8, 2c+9) and pairs (4,5) (6,7) the second MMA's: the slot -> k map
// depends on c only, so A and B see the same permutation of k, and every fragment is one
// plain 16-byte load per lane (x is re-read by every block and stays in L2).
//
// A block owns 16 * kTiles weight rows (kTiles = 2 or 4 A tiles: each activation fragment
// feeds kTiles MMAs, so the L2 -> SM traffic for x is m / (16 kTiles) of the weight bytes) and
// splits K into kWarps contiguous slices, one per warp. Loads go through a per-warp ring of
// kStages k-steps in dynamic shared memory filled with cp.async (16 bytes per lane per
// fragment, L2 only), so the bytes in flight are not bounded by registers: each lane reads
// back exactly the slots it filled, so the ring needs no barrier, only cp.async.wait_group.
// The warps' partial sums are reduced in a fixed pairwise tree through shared memory (bit
// reproducible, no atomics), then written out coalesced and rounded once.
//
// 32 or 64 rows per block. At m = 64 and 32 rows per block every block streams twice as many
// x bytes as weight bytes through L2 and its ring; 64 rows halve that, but also halve the
// grid, which leaves SMs idle on narrow projections. The caller picks per (m, n) and says
// which through the grid: ceil(n / 32) blocks mean 32 rows each, fewer mean 64 (the caller
// takes 64 only for n > 64, where ceil(n / 64) < ceil(n / 32)).
//
// Weight rows past n re-read row n - 1 and activation rows past m re-read row m - 1; neither
// is stored. Chunks past k are zero-filled in both operands.
// Launch (ops/matmul_batched.py): grid = ceil(n / rows), block = 256 threads, dynamic shared
// memory ring_bytes(rows / 16, ceil(m / 8)) (up to 192 KiB: the caller opts in).
// Preconditions: 1 <= m <= 64, n >= 1, k % 8 == 0, x and w 16-byte aligned.
#include "mma_util.cuh"

namespace {

constexpr int kWarps = 8;          // ops/matmul_batched.py BATCHED_THREADS / 32
constexpr int kNarrowTiles = 2;    // 16-row A tiles per block; matmul_batched.py NARROW_ROWS / 16
constexpr int kWideTiles = 4;      // matmul_batched.py WIDE_ROWS / 16
constexpr int kMaxBTiles = 8;      // 8-row B tiles: m <= 64
constexpr int kMaxStages = 8;      // ops/matmul_batched.py BATCHED_MAX_STAGES
constexpr int kRingBudget = 196608;  // 192 KiB; ops/matmul_batched.py BATCHED_RING_BUDGET

// 16-byte slots of one warp's ring stage (one 32-k step): per lane, the weight chunks of rows
// g and g + 8 of each A tile, then the activation chunk of each B tile.
__host__ __device__ constexpr int stage_slots(int tiles, int btiles) {
  return (2 * tiles + btiles) * 32;
}

// As many k-steps in flight per warp as the budget holds, at most kMaxStages.
__host__ __device__ constexpr int ring_stages(int tiles, int btiles) {
  return kRingBudget / (kWarps * stage_slots(tiles, btiles) * 16) < kMaxStages
             ? kRingBudget / (kWarps * stage_slots(tiles, btiles) * 16)
             : kMaxStages;
}

__host__ __device__ constexpr int ring_bytes(int tiles, int btiles) {
  return kWarps * ring_stages(tiles, btiles) * stage_slots(tiles, btiles) * 16;
}

__device__ __forceinline__ uint32_t word(const uint4& v, int i) {
  return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w;
}

// One lane's sources: the starts of its weight rows and activation rows.
template <int kTiles, int kBTiles>
struct LaneSources {
  const uint4* wrow[kTiles][2];
  const uint4* xrow[kBTiles];
  int kc;  // 16-byte chunks per row (k / 8)
  int c;

  // Chunk index of this lane in k-step s; past the row's end, -1 (the slot is zero-filled
  // and the row start, always mapped, stands in as the unread source address).
  __device__ __forceinline__ int chunk(int s) const {
    const int ch = 4 * s + c;
    return ch < kc ? ch : -1;
  }

  // The weight slots of k-step s into `stage` (may run before the PDL wait), with the
  // L2::256B prefetch hint: a k-step reads 64 bytes of each weight row, the hint makes DRAM
  // serve 256 (this step's and the next three's).
  __device__ __forceinline__ void fill_weights(uint4* stage, int lane, int s) const {
    const int ch = chunk(s);
    const uint64_t stream = atlas::l2_stream_policy();  // the weights' L2 policy
#pragma unroll
    for (int t = 0; t < kTiles; ++t)
#pragma unroll
      for (int h = 0; h < 2; ++h)
        atlas::cp_async_16_prefetch256_stream(stage + (2 * t + h) * 32 + lane,
                                              ch >= 0 ? wrow[t][h] + ch : wrow[t][h], ch >= 0,
                                              stream);
  }

  // The activation slots of k-step s into `stage` (only after the PDL wait).
  __device__ __forceinline__ void fill_x(uint4* stage, int lane, int s) const {
    const int ch = chunk(s);
#pragma unroll
    for (int b = 0; b < kBTiles; ++b)
      atlas::cp_async_16(stage + (2 * kTiles + b) * 32 + lane,
                         ch >= 0 ? xrow[b] + ch : xrow[b], ch >= 0);
  }
};

// acc[t][b] += one k-step (two k16 halves) of A tile t times B tile b, from this lane's slots.
// The activation fragments stay in registers while each A tile's are loaded in turn, so the
// wide block's 128 accumulators leave room for operands without spilling.
template <int kTiles, int kBTiles>
__device__ __forceinline__ void mma_step(const uint4* stage, int lane,
                                         float (&acc)[kTiles][kBTiles][4]) {
  uint4 xv[kBTiles];
#pragma unroll
  for (int b = 0; b < kBTiles; ++b) xv[b] = stage[(2 * kTiles + b) * 32 + lane];
#pragma unroll
  for (int t = 0; t < kTiles; ++t) {
    const uint4 a0 = stage[(2 * t) * 32 + lane], a1 = stage[(2 * t + 1) * 32 + lane];
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      const uint32_t af[4] = {word(a0, 2 * j), word(a1, 2 * j), word(a0, 2 * j + 1),
                              word(a1, 2 * j + 1)};
#pragma unroll
      for (int b = 0; b < kBTiles; ++b)
        atlas::mma_bf16_16816(acc[t][b], af, word(xv[b], 2 * j), word(xv[b], 2 * j + 1));
    }
  }
}

constexpr int kMaxValues = kWideTiles * kMaxBTiles * 4;  // f32 partials per lane

// After the loop the rings' shared memory is reused: the reduction's exchange buffer, then
// the output tile.
struct Smem {
  union {
    float exchange[kWarps / 2][kMaxValues][32];    // [sending warp - half][value][lane]
    float tile[kMaxBTiles * 8][16 * kWideTiles];   // [batch row][weight row in block]
  };
};

// Sum the warps' partials in a fixed tree (warp w += warp w + half, half = 4, 2, 1); warp 0
// ends with the block's totals.
template <int kTiles, int kBTiles>
__device__ __forceinline__ void reduce_over_warps(float (&acc)[kTiles][kBTiles][4], Smem& sm,
                                                  int warp, int lane) {
#pragma unroll
  for (int half = kWarps / 2; half >= 1; half >>= 1) {
    if (warp >= half && warp < 2 * half) {
#pragma unroll
      for (int t = 0; t < kTiles; ++t)
#pragma unroll
        for (int b = 0; b < kBTiles; ++b)
#pragma unroll
          for (int i = 0; i < 4; ++i)
            sm.exchange[warp - half][(t * kBTiles + b) * 4 + i][lane] = acc[t][b][i];
    }
    __syncthreads();
    if (warp < half) {
#pragma unroll
      for (int t = 0; t < kTiles; ++t)
#pragma unroll
        for (int b = 0; b < kBTiles; ++b)
#pragma unroll
          for (int i = 0; i < 4; ++i)
            acc[t][b][i] += sm.exchange[warp][(t * kBTiles + b) * 4 + i][lane];
    }
    __syncthreads();
  }
}

template <int kTiles, int kBTiles, bool kF32Out>
__device__ __forceinline__ void gemv_mma(const __nv_bfloat16* __restrict__ x,
                                         const __nv_bfloat16* __restrict__ w,
                                         void* __restrict__ y, int m, int n, int k,
                                         uint4* smem) {
  constexpr int kRows = 16 * kTiles;
  constexpr int kStages = ring_stages(kTiles, kBTiles), kSlots = stage_slots(kTiles, kBTiles);
  static_assert(kStages >= 2 && ring_bytes(kTiles, kBTiles) >= static_cast<int>(sizeof(Smem)),
                "the ring must double-buffer and hold the reduction's buffers");
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2;
  const int row0 = blockIdx.x * kRows;
  const int kc = k >> 3, steps = (kc + 3) >> 2;

  LaneSources<kTiles, kBTiles> src;
  src.kc = kc;
  src.c = lane & 3;
#pragma unroll
  for (int t = 0; t < kTiles; ++t)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int row = min(row0 + 16 * t + 8 * h + g, n - 1);
      src.wrow[t][h] = reinterpret_cast<const uint4*>(w) + static_cast<size_t>(row) * kc;
    }
#pragma unroll
  for (int b = 0; b < kBTiles; ++b) {
    const int row = min(8 * b + g, m - 1);
    src.xrow[b] = reinterpret_cast<const uint4*>(x) + static_cast<size_t>(row) * kc;
  }
  const int step0 = steps * warp / kWarps;
  const int count = steps * (warp + 1) / kWarps - step0;  // k-steps of this warp
  uint4* ring = smem + warp * kStages * kSlots;

  float acc[kTiles][kBTiles][4];
#pragma unroll
  for (int t = 0; t < kTiles; ++t)
#pragma unroll
    for (int b = 0; b < kBTiles; ++b)
#pragma unroll
      for (int i = 0; i < 4; ++i) acc[t][b][i] = 0.f;

  // Prologue: the weights of the first kStages - 1 steps are requested before waiting on the
  // previous kernel (no kernel writes them), so their DRAM round trip overlaps its tail; x
  // only after. Commit group i then holds everything step i needs (group 0 also the later
  // steps' weights), and the loop commits one group per step, possibly empty.
#pragma unroll
  for (int i = 0; i < kStages - 1; ++i)
    if (i < count) src.fill_weights(ring + i * kSlots, lane, step0 + i);
  atlas::pdl_enter();
#pragma unroll
  for (int i = 0; i < kStages - 1; ++i) {
    if (i < count) src.fill_x(ring + i * kSlots, lane, step0 + i);
    atlas::cp_async_commit();
  }
  // Step i sits in slot i % kStages; the slot refilled in iteration i (with step
  // i + kStages - 1) is the one step i - 1 used, whose values already fed its MMAs.
  for (int i = 0, slot = 0, refill = kStages - 1; i < count; ++i) {
    atlas::cp_async_wait<kStages - 2>();  // groups 0..i are complete: step i has landed
    mma_step(ring + slot * kSlots, lane, acc);
    if (i + kStages - 1 < count) {
      src.fill_weights(ring + refill * kSlots, lane, step0 + i + kStages - 1);
      src.fill_x(ring + refill * kSlots, lane, step0 + i + kStages - 1);
    }
    atlas::cp_async_commit();
    slot = slot + 1 == kStages ? 0 : slot + 1;
    refill = slot == 0 ? kStages - 1 : slot - 1;
  }
  atlas::cp_async_wait<0>();
  __syncthreads();  // every warp is done with its ring before the exchange buffer reuses it

  Smem& sm = *reinterpret_cast<Smem*>(smem);
  reduce_over_warps(acc, sm, warp, lane);

  // Warp 0 scatters the C^T fragments into the [batch row][weight row] tile:
  // value i of (tile t, B tile b) is weight row 16 t + g (+8 for i >= 2), batch row
  // 8 b + 2 c (+1 for odd i).
  if (warp == 0) {
    const int c = lane & 3;
#pragma unroll
    for (int t = 0; t < kTiles; ++t)
#pragma unroll
      for (int b = 0; b < kBTiles; ++b)
#pragma unroll
        for (int i = 0; i < 4; ++i)
          sm.tile[8 * b + 2 * c + (i & 1)][16 * t + g + 8 * (i >> 1)] = acc[t][b][i];
  }
  __syncthreads();
  for (int e = threadIdx.x; e < m * kRows; e += kWarps * 32) {
    const int mi = e / kRows, r = e % kRows, row = row0 + r;
    if (row >= n) continue;
    const size_t at = static_cast<size_t>(mi) * n + row;
    if (kF32Out)  // logits: the bf16-rounded value, widened (transformers' bf16 LM head)
      static_cast<float*>(y)[at] = atlas::round_bf16(sm.tile[mi][r]);
    else
      static_cast<__nv_bfloat16*>(y)[at] = atlas::f32_to_bf16(sm.tile[mi][r]);
  }
}

template <int kTiles, bool kF32Out>
__device__ __forceinline__ void dispatch_m(const __nv_bfloat16* x, const __nv_bfloat16* w,
                                           void* y, int m, int n, int k, uint4* smem) {
  switch ((m + 7) / 8) {
    case 1: gemv_mma<kTiles, 1, kF32Out>(x, w, y, m, n, k, smem); break;
    case 2: gemv_mma<kTiles, 2, kF32Out>(x, w, y, m, n, k, smem); break;
    case 3: gemv_mma<kTiles, 3, kF32Out>(x, w, y, m, n, k, smem); break;
    case 4: gemv_mma<kTiles, 4, kF32Out>(x, w, y, m, n, k, smem); break;
    case 5: gemv_mma<kTiles, 5, kF32Out>(x, w, y, m, n, k, smem); break;
    case 6: gemv_mma<kTiles, 6, kF32Out>(x, w, y, m, n, k, smem); break;
    case 7: gemv_mma<kTiles, 7, kF32Out>(x, w, y, m, n, k, smem); break;
    case 8: gemv_mma<kTiles, 8, kF32Out>(x, w, y, m, n, k, smem); break;
    default: __trap();  // ops/matmul_batched.py checks 1 <= m <= 64
  }
}

// The block's row count follows from the grid (see the header): a grid that covers n with
// 32-row blocks has 32-row blocks, a smaller one 64-row blocks.
template <bool kF32Out>
__device__ __forceinline__ void dispatch(const __nv_bfloat16* x, const __nv_bfloat16* w, void* y,
                                         uint32_t m, uint32_t n, uint32_t k) {
  extern __shared__ uint4 smem[];
  const int mi = static_cast<int>(m), ni = static_cast<int>(n), ki = static_cast<int>(k);
  if (static_cast<int64_t>(gridDim.x) * (16 * kNarrowTiles) >= ni)
    dispatch_m<kNarrowTiles, kF32Out>(x, w, y, mi, ni, ki, smem);
  else
    dispatch_m<kWideTiles, kF32Out>(x, w, y, mi, ni, ki, smem);
}

}  // namespace

extern "C" __global__ void __launch_bounds__(kWarps * 32, 1)
    gemv_mma_bf16(const __nv_bfloat16* x, const __nv_bfloat16* w, __nv_bfloat16* y, uint32_t m,
                  uint32_t n, uint32_t k) {
  dispatch<false>(x, w, y, m, n, k);
}

extern "C" __global__ void __launch_bounds__(kWarps * 32, 1)
    gemv_mma_bf16_f32(const __nv_bfloat16* x, const __nv_bfloat16* w, float* y, uint32_t m,
                      uint32_t n, uint32_t k) {
  dispatch<true>(x, w, y, m, n, k);
}
