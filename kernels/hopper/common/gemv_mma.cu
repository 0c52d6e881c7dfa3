// Batched decode GEMV on tensor cores: y[m, n] = sum_k x[m, k] * w[n, k] for 1 <= m <= 64.
//
// Decode at 9..64 rows is still memory-bound (each weight byte feeds at most 64 FMAs), so the
// kernel is built like the GEMV: every weight byte is streamed from HBM once, straight into
// registers, many 16-byte loads in flight per thread. What changes is the math: the product is
// computed transposed, C^T[n, m] = W[n, k] . X^T, with mma.m16n8k16 taking 16 weight rows as
// its A operand and 8 activation rows as each B tile, so the weight rows fill the MMA's M
// dimension and no tile is padding at m = 16..64 (only the last 8-row B tile may be partial).
//
// Fragments without shared memory. The sum over k does not care in which order the k values
// are fed, as long as A and B agree. Lane (g = lane / 4, c = lane % 4) loads 16 bytes (8 bf16,
// k = 32 s + 8 c .. + 7 of k-step s) from weight rows g and g + 8 of a 16-row tile and from
// activation row g of each 8-row B tile. Element pairs (0,1) (2,3) feed the first MMA's k
// slots (2c, 2c+1) (2c+8, 2c+9) and pairs (4,5) (6,7) the second MMA's: the slot -> k map
// depends on c only, so A and B see the same permutation of k. Both operands are then plain
// 16-byte loads: weights with ld.global.nc.L1::no_allocate (read once), activations through
// the read-only cache (x is re-read by every block and stays in L2).
//
// A block owns kRowsPerBlock = 32 weight rows (two A tiles, so each activation fragment feeds
// two MMAs and L2 traffic for x is m / 32 of the weight bytes) and splits K into kWarps
// contiguous slices, one per warp. A warp double-buffers the weight fragments of kStepsAhead
// k-steps in registers: the next batch of loads is issued before the current one's MMAs. The
// warps' partial sums are reduced in a fixed pairwise tree through shared memory (bit
// reproducible, no atomics), then written out coalesced and rounded once.
//
// Weight rows past n re-read row n - 1 and activation rows past m re-read row m - 1; neither
// is stored. Chunks past k are zero in both operands.
// Launch (ops/matmul_batched.py): grid = ceil(n / 32), block = 256 threads, no dynamic smem.
// Preconditions: 1 <= m <= 64, n >= 1, k % 8 == 0, x and w 16-byte aligned.
#include "mma_util.cuh"

namespace {

constexpr int kWarps = 8;              // ops/matmul_batched.py BATCHED_THREADS / 32
constexpr int kTilesPerBlock = 2;      // 16-row A tiles per block
constexpr int kRowsPerBlock = 16 * kTilesPerBlock;  // ops/matmul_batched.py BATCHED_ROWS_PER_BLOCK
constexpr int kMaxBTiles = 8;          // 8-row B tiles: m <= 64
constexpr int kStepsAhead = 2;         // k-steps (32 k each) per register buffer
constexpr int kMaxValues = kTilesPerBlock * kMaxBTiles * 4;  // f32 partials per lane

// Streamed 16-byte weight load (read once): no L1 allocation, 256-byte L2 prefetch. volatile
// keeps it behind the caller's bounds check.
__device__ __forceinline__ uint4 ld_weights(const uint4* p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}

__device__ __forceinline__ uint32_t word(const uint4& v, int i) {
  return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w;
}

// Weight fragments of kStepsAhead k-steps: [step][tile][half: row g or g + 8].
using WeightFrags = uint4[kStepsAhead][kTilesPerBlock][2];

// One warp's view of the problem: where its lane reads and which k-steps it owns.
struct WarpSlice {
  const uint4* wrow[kTilesPerBlock][2];  // this lane's weight rows, at chunk c
  const uint4* x;                        // activations, chunk c of row 0
  int kc;                                // 16-byte chunks per row (k / 8)
  int c;                                 // lane % 4: the chunk within a k-step
  int step_end;                          // one past the warp's last k-step

  // Chunk index of this lane in k-step s, or -1 past the row's end.
  __device__ __forceinline__ int chunk(int s) const {
    const int ch = 4 * s + c;
    return ch < kc ? ch : -1;
  }

  __device__ __forceinline__ void load_weights(WeightFrags& a, int s0) const {
#pragma unroll
    for (int u = 0; u < kStepsAhead; ++u) {
      const int ch = s0 + u < step_end ? chunk(s0 + u) : -1;
#pragma unroll
      for (int t = 0; t < kTilesPerBlock; ++t)
#pragma unroll
        for (int h = 0; h < 2; ++h)
          a[u][t][h] = ch >= 0 ? ld_weights(wrow[t][h] + ch) : make_uint4(0u, 0u, 0u, 0u);
    }
  }
};

// acc[t][b][i] += the k-steps s0 .. s0 + kStepsAhead - 1 of A tile t times B tile b.
template <int kBTiles>
__device__ __forceinline__ void mma_steps(const WarpSlice& ws, const WeightFrags& a, int s0,
                                          const int (&xrow)[kBTiles],
                                          float (&acc)[kTilesPerBlock][kBTiles][4]) {
  uint4 xv[kStepsAhead][kBTiles];
#pragma unroll
  for (int u = 0; u < kStepsAhead; ++u) {
    const int ch = s0 + u < ws.step_end ? ws.chunk(s0 + u) : -1;
#pragma unroll
    for (int b = 0; b < kBTiles; ++b)
      xv[u][b] = ch >= 0 ? __ldg(ws.x + static_cast<size_t>(xrow[b]) * ws.kc + ch)
                         : make_uint4(0u, 0u, 0u, 0u);
  }
#pragma unroll
  for (int u = 0; u < kStepsAhead; ++u)
#pragma unroll
    for (int j = 0; j < 2; ++j)  // the two k16 halves of the 32-k step
#pragma unroll
      for (int t = 0; t < kTilesPerBlock; ++t) {
        const uint32_t af[4] = {word(a[u][t][0], 2 * j), word(a[u][t][1], 2 * j),
                                word(a[u][t][0], 2 * j + 1), word(a[u][t][1], 2 * j + 1)};
#pragma unroll
        for (int b = 0; b < kBTiles; ++b)
          atlas::mma_bf16_16816(acc[t][b], af, word(xv[u][b], 2 * j), word(xv[u][b], 2 * j + 1));
      }
}

// Shared memory of a block: the reduction's exchange buffer, later the output tile.
struct Smem {
  union {
    float exchange[kWarps / 2][kMaxValues][32];  // [sending warp - half][value][lane]
    float tile[kMaxBTiles * 8][kRowsPerBlock];   // [batch row][weight row in block]
  };
};

// Sum the warps' partials in a fixed tree (warp w += warp w + half, half = 4, 2, 1); warp 0
// ends with the block's totals.
template <int kBTiles>
__device__ __forceinline__ void reduce_over_warps(float (&acc)[kTilesPerBlock][kBTiles][4],
                                                  Smem& sm, int warp, int lane) {
#pragma unroll
  for (int half = kWarps / 2; half >= 1; half >>= 1) {
    if (warp >= half && warp < 2 * half) {
#pragma unroll
      for (int t = 0; t < kTilesPerBlock; ++t)
#pragma unroll
        for (int b = 0; b < kBTiles; ++b)
#pragma unroll
          for (int i = 0; i < 4; ++i)
            sm.exchange[warp - half][(t * kBTiles + b) * 4 + i][lane] = acc[t][b][i];
    }
    __syncthreads();
    if (warp < half) {
#pragma unroll
      for (int t = 0; t < kTilesPerBlock; ++t)
#pragma unroll
        for (int b = 0; b < kBTiles; ++b)
#pragma unroll
          for (int i = 0; i < 4; ++i)
            acc[t][b][i] += sm.exchange[warp][(t * kBTiles + b) * 4 + i][lane];
    }
    __syncthreads();
  }
}

template <int kBTiles, bool kF32Out>
__device__ __forceinline__ void gemv_mma(const __nv_bfloat16* __restrict__ x,
                                         const __nv_bfloat16* __restrict__ w,
                                         void* __restrict__ y, int m, int n, int k, Smem& sm) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2;
  const int row0 = blockIdx.x * kRowsPerBlock;
  const int kc = k >> 3, steps = (kc + 3) >> 2;

  WarpSlice ws;
  ws.kc = kc;
  ws.c = lane & 3;
  ws.x = reinterpret_cast<const uint4*>(x) + ws.c;
#pragma unroll
  for (int t = 0; t < kTilesPerBlock; ++t)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int row = min(row0 + 16 * t + 8 * h + g, n - 1);
      ws.wrow[t][h] = reinterpret_cast<const uint4*>(w) + static_cast<size_t>(row) * kc + ws.c;
    }
  const int step_begin = steps * warp / kWarps;
  ws.step_end = steps * (warp + 1) / kWarps;
  int xrow[kBTiles];
#pragma unroll
  for (int b = 0; b < kBTiles; ++b) xrow[b] = min(8 * b + g, m - 1);

  float acc[kTilesPerBlock][kBTiles][4];
#pragma unroll
  for (int t = 0; t < kTilesPerBlock; ++t)
#pragma unroll
    for (int b = 0; b < kBTiles; ++b)
#pragma unroll
      for (int i = 0; i < 4; ++i) acc[t][b][i] = 0.f;

  // The first weights are requested before waiting on the previous kernel (no kernel writes
  // them), so their DRAM round trip overlaps that kernel's tail; x is read only after.
  WeightFrags a0, a1;
  ws.load_weights(a0, step_begin);
  atlas::pdl_enter();
  for (int s = step_begin; s < ws.step_end; s += 2 * kStepsAhead) {
    ws.load_weights(a1, s + kStepsAhead);
    mma_steps(ws, a0, s, xrow, acc);
    if (s + kStepsAhead >= ws.step_end) break;
    ws.load_weights(a0, s + 2 * kStepsAhead);
    mma_steps(ws, a1, s + kStepsAhead, xrow, acc);
  }

  reduce_over_warps(acc, sm, warp, lane);

  // Warp 0 scatters the C^T fragments into the [batch row][weight row] tile:
  // value i of (tile t, B tile b) is weight row 16 t + g (+8 for i >= 2), batch row
  // 8 b + 2 c (+1 for odd i).
  if (warp == 0) {
    const int c = lane & 3;
#pragma unroll
    for (int t = 0; t < kTilesPerBlock; ++t)
#pragma unroll
      for (int b = 0; b < kBTiles; ++b)
#pragma unroll
        for (int i = 0; i < 4; ++i)
          sm.tile[8 * b + 2 * c + (i & 1)][16 * t + g + 8 * (i >> 1)] = acc[t][b][i];
  }
  __syncthreads();
  for (int e = threadIdx.x; e < m * kRowsPerBlock; e += kWarps * 32) {
    const int mi = e / kRowsPerBlock, r = e % kRowsPerBlock, row = row0 + r;
    if (row >= n) continue;
    const size_t at = static_cast<size_t>(mi) * n + row;
    if (kF32Out)  // logits: the bf16-rounded value, widened (transformers' bf16 LM head)
      static_cast<float*>(y)[at] = atlas::round_bf16(sm.tile[mi][r]);
    else
      static_cast<__nv_bfloat16*>(y)[at] = atlas::f32_to_bf16(sm.tile[mi][r]);
  }
}

template <bool kF32Out>
__device__ __forceinline__ void dispatch(const __nv_bfloat16* x, const __nv_bfloat16* w, void* y,
                                         uint32_t m, uint32_t n, uint32_t k) {
  __shared__ Smem sm;
  const int mi = static_cast<int>(m), ni = static_cast<int>(n), ki = static_cast<int>(k);
  switch ((mi + 7) / 8) {
    case 1: gemv_mma<1, kF32Out>(x, w, y, mi, ni, ki, sm); break;
    case 2: gemv_mma<2, kF32Out>(x, w, y, mi, ni, ki, sm); break;
    case 3: gemv_mma<3, kF32Out>(x, w, y, mi, ni, ki, sm); break;
    case 4: gemv_mma<4, kF32Out>(x, w, y, mi, ni, ki, sm); break;
    case 5: gemv_mma<5, kF32Out>(x, w, y, mi, ni, ki, sm); break;
    case 6: gemv_mma<6, kF32Out>(x, w, y, mi, ni, ki, sm); break;
    case 7: gemv_mma<7, kF32Out>(x, w, y, mi, ni, ki, sm); break;
    case 8: gemv_mma<8, kF32Out>(x, w, y, mi, ni, ki, sm); break;
    default: __trap();  // ops/matmul_batched.py checks 1 <= m <= 64
  }
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
