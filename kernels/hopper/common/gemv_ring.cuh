// The m-row decode GEMV on a per-thread cp.async ring: y[m, n] = sum_k x[m, k] * w[n, k] for
// 1 <= m <= 8, bit for bit the sums of gemv_core.cuh's gemv_rows (row-invariant: row i of an
// m-row product equals the single-row kernel's product of that row).
//
// Why: gemv_rows holds each thread's weight tile in registers from its request to its use,
// and a thread has one tile in flight at a time. Its m-row instantiations take 80-128
// registers (the 8-row one, which the general entry point's switch allocates for every m:
// 128), so 2 blocks of 256 threads fit an SM instead of the single-row kernel's 4, and at
// Qwen3-8B's k = 4,096 a block is one tile long: request 32 KB, wait a DRAM round trip,
// multiply, reduce, exit. Bytes in flight per SM then halve exactly when the FMAs per byte
// grow m-fold (a verification step of K = 3 drafts runs every projection at m = 4).
//
// Here the weight tiles land in shared memory through cp.async (no registers held while in
// flight) and each block walks a queue of tiles, `stages - 1` tiles ahead of the one it
// multiplies: blocks are persistent over 4-row groups (group g = blockIdx.x + j * gridDim.x),
// a tile is one iteration of gemv_rows' loop (kUnroll chunks of each of the 4 rows per
// thread: 32 KB a block at 256 threads), and the tiles of the block's next groups stream in
// while it multiplies and reduces the current one. Each thread copies and later reads only
// its own slots, so no barrier guards the ring (cp.async.wait_group is per thread); the only
// barrier is the group's reduction, whose partial sums alternate between two buffers by group
// parity so that the next group's writes never race warp 0's reads of this one.
//
// The sums are gemv_rows' exactly: thread t of a group's block takes chunks t + j T in the
// same order with the same FMA chain per (m, row), then the same butterfly and fixed-order
// warp sum. The first `stages - 1` tiles are requested before the PDL wait (weights are never
// written by a kernel). Launch (ops/matmul.py gemv_ring_plan): grid = min(groups, 16 warps'
// worth of blocks per SM: 2 of 256 threads, 4 of 128, ...), block = gemv_threads(k), dynamic
// shared memory = stages * kUnroll * 4 * 16 B per thread; 2 <= stages <= kRingMaxStages.
#pragma once

#include "gemv_core.cuh"
#include "mma_util.cuh"

namespace atlas::gemv {

constexpr int kRingMaxStages = 3;                       // ops/matmul.py RING_MAX_STAGES
constexpr int kSlotsPerTile = kUnroll * kRowsPerBlock;  // 16-byte slots a thread owns per stage

// Wait until tile t (committed `stages - 1` groups before the newest) has landed.
__device__ __forceinline__ void ring_wait(int stages) {
  static_assert(kRingMaxStages == 3, "one wait per ring depth");
  if (stages == 2)
    atlas::cp_async_wait<1>();
  else
    atlas::cp_async_wait<2>();
}

template <int M, bool kF32Out, class XLoad>
__device__ __forceinline__ void gemv_ring_rows(XLoad xload, const __nv_bfloat16* w, void* y,
                                               int n, int k, int stages, uint4* ring,
                                               float (*partial)[kMaxThreads / 32][kMaxAcc]) {
  constexpr int V = pow2_at_least(M) * kRowsPerBlock;
  constexpr int kLanesPerValue = 32 / V;
  const int kc = k >> 3;
  const int threads = static_cast<int>(blockDim.x), tid = static_cast<int>(threadIdx.x);
  const int lane = tid & 31, warp = tid >> 5;
  const int per_iter = kUnroll * threads;  // chunks of a row one tile covers
  const int iters = (kc + per_iter - 1) / per_iter;
  const int groups = (n + kRowsPerBlock - 1) / kRowsPerBlock;
  const int block = static_cast<int>(blockIdx.x), grid = static_cast<int>(gridDim.x);
  const int tiles = block < groups ? ((groups - 1 - block) / grid + 1) * iters : 0;
  const uint4* w4 = reinterpret_cast<const uint4*>(w);
  uint4* mine = ring + tid;  // slot s of stage q: mine[(q * kSlotsPerTile + s) * threads]
  const int stage_stride = kSlotsPerTile * threads;

  // The issuer walks the tiles in order without divisions: `next` is the next tile to
  // request, at iteration `next_it` of the group whose first row is `next_row0`, into stage
  // `next_q`. Each call requests it (if it exists) and commits a group (an empty one past the
  // last tile, so that every wait counts the same number of groups).
  int next = 0, next_it = 0, next_row0 = block * kRowsPerBlock, next_q = 0;
  auto issue = [&]() {
    if (next < tiles) {
      const int c0 = next_it * per_iter + tid;
      uint4* slot = mine + next_q * stage_stride;
      const uint64_t stream = atlas::l2_stream_policy();  // the weights' L2 policy
#pragma unroll
      for (int r = 0; r < kRowsPerBlock; ++r) {  // rows past n re-read row n-1; never stored
        const uint4* row = w4 + static_cast<size_t>(min(next_row0 + r, n - 1)) * kc;
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
          const int c = c0 + u * threads;
          atlas::cp_async_16_prefetch256_stream(slot + (u * kRowsPerBlock + r) * threads,
                                                c < kc ? row + c : w4, c < kc, stream);
        }
      }
    }
    atlas::cp_async_commit();
    ++next;
    if (++next_it == iters) {
      next_it = 0;
      next_row0 += grid * kRowsPerBlock;
    }
    if (++next_q == stages) next_q = 0;
  };

  for (int t = 0; t < stages - 1; ++t) issue();
  atlas::pdl_enter();
  xload.prepare();

  float acc[V];
#pragma unroll
  for (int i = 0; i < V; ++i) acc[i] = 0.f;
  // the tile multiplied: iteration `it` of the block's group number `j` (first row `row0`),
  // in stage `q`
  int it = 0, j = 0, row0 = block * kRowsPerBlock, q = 0;
  for (int t = 0; t < tiles; ++t) {
    issue();
    ring_wait(stages);
    const int c0 = it * per_iter + tid;
    const uint4* slot = mine + q * stage_stride;
    if (++q == stages) q = 0;
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int c = c0 + u * threads;
      if (c >= kc) break;
      float wf[kRowsPerBlock][8];
#pragma unroll
      for (int r = 0; r < kRowsPerBlock; ++r)
        atlas::unpack_bf16x8(slot[(u * kRowsPerBlock + r) * threads], wf[r]);
#pragma unroll
      for (int m = 0; m < M; ++m) {
        float dot[kRowsPerBlock];
#pragma unroll
        for (int r = 0; r < kRowsPerBlock; ++r) dot[r] = acc[m * kRowsPerBlock + r];
        float xf[8];
        xload.load(m, c, xf);
#pragma unroll
        for (int r = 0; r < kRowsPerBlock; ++r)
#pragma unroll
          for (int e = 0; e < 8; ++e) dot[r] = fmaf(xf[e], wf[r][e], dot[r]);
#pragma unroll
        for (int r = 0; r < kRowsPerBlock; ++r) acc[m * kRowsPerBlock + r] = dot[r];
      }
    }
    if (++it != iters) continue;
    // the group's last tile: reduce as gemv_rows does, into this group's partial buffer
    float(*part)[kMaxAcc] = partial[j & 1];
    const float v = warp_reduce_scatter<V>(acc, lane);
    if ((lane & (kLanesPerValue - 1)) == 0) part[warp][lane >> log2_exact(kLanesPerValue)] = v;
    __syncthreads();
    if (tid < 32) {
      float sum = 0.f;
      if (tid < M * kRowsPerBlock)
        for (int i = 0; i < (threads >> 5); ++i) sum += part[i][tid];
      StoreY<>{}.template finish<M, kF32Out>(y, sum, tid, row0, n);
    }
#pragma unroll
    for (int i = 0; i < V; ++i) acc[i] = 0.f;
    it = 0;
    ++j;
    row0 += grid * kRowsPerBlock;
  }
  atlas::cp_async_wait<0>();  // only empty groups remain; leave nothing in flight
}

// One instantiation per row count, chosen at run time (the rows of the step).
template <bool kF32Out, class XLoad>
__device__ __forceinline__ void gemv_ring_any_m(XLoad xload, const __nv_bfloat16* w, void* y,
                                                uint32_t m, uint32_t n, uint32_t k,
                                                uint32_t stages, uint4* ring,
                                                float (*partial)[kMaxThreads / 32][kMaxAcc]) {
  if (stages < 2 || stages > kRingMaxStages) __trap();  // ops/matmul.py gemv_ring_plan
  const int s = static_cast<int>(stages);
  switch (m) {
    case 1: gemv_ring_rows<1, kF32Out>(xload, w, y, n, k, s, ring, partial); break;
    case 2: gemv_ring_rows<2, kF32Out>(xload, w, y, n, k, s, ring, partial); break;
    case 3: gemv_ring_rows<3, kF32Out>(xload, w, y, n, k, s, ring, partial); break;
    case 4: gemv_ring_rows<4, kF32Out>(xload, w, y, n, k, s, ring, partial); break;
    case 5: gemv_ring_rows<5, kF32Out>(xload, w, y, n, k, s, ring, partial); break;
    case 6: gemv_ring_rows<6, kF32Out>(xload, w, y, n, k, s, ring, partial); break;
    case 7: gemv_ring_rows<7, kF32Out>(xload, w, y, n, k, s, ring, partial); break;
    case 8: gemv_ring_rows<8, kF32Out>(xload, w, y, n, k, s, ring, partial); break;
    default: __trap();  // ops/matmul.py routes m > 8 elsewhere
  }
}

}  // namespace atlas::gemv
