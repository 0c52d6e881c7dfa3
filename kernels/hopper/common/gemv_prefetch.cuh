// The single-row decode GEMV with its weights prefetched into shared memory before the PDL
// wait: y[n] = sum_k x[k] * w[n, k], bf16 weights.
//
// Why: at batch 1 a small model's GEMV is latency bound (Qwen3-0.6B's 4-12 MB projections
// took 4-8 us for ~1-3 us of bytes): launch, ramp-up and the first DRAM round trips are
// exposed. Weights are written by no kernel, so the PDL contract (atlas_common.cuh) lets a
// block read them before griddepcontrol.wait: each block bulk-copies (bulk_copy.cuh: no
// register cost, one instruction per piece) as much of its weight slice as its shared memory
// holds while the previous kernel (attention, a norm, the GEMV before) still runs. After the
// wait it only loads x and does shared-memory math; what did not fit streams through the
// same buffers as a ring, refilled as they are consumed (8B-size projections).
//
// Geometry (ops/matmul.py `gemv_prefetch_plan` mirrors it):
// * 1, 2 or 4 blocks per SM sharing 104 KiB (the plan picks: as many as keep the slice whole
//   in shared memory, since a block works through its tiles one after the other); block b
//   owns the contiguous 4-row groups [b * G / grid, (b + 1) * G / grid) of G = ceil(n / 4);
// * blockDim.x = T threads (ops/matmul.py gemv_threads: min(256, roundup32(k / 8)));
//   thread t owns the 16-byte chunks c = t + j T of every row, as gemv_core.cuh's blocks do,
//   so the sums are accumulated in the same order (bit-identical to gemv_rows<1>);
// * a tile is 4 rows x min(T, k / 8) chunks (a whole group when k / 8 <= T, else one of a
//   group's ceil(k / 8 / T) k-slices): at most 16 KiB; the ring holds `stages` tiles, each
//   with its own mbarrier, as many as the launch's dynamic shared memory allows after x;
// * dynamic shared memory = [x: k / 8 chunks, padded to 128 bytes][ring: stages tiles].
//   Each thread stages and reads back only its own x chunks (no block barrier for x), unless
//   the x policy is kBlockStaged: its prepare() fills xs with the whole block (gemv.cu NormX).
// A group's 4 sums are reduced per warp, parked in shared memory, and summed over warps by
// threads 0..3 after the tile's block barrier (which the ring needs anyway).
#pragma once

#include "bulk_copy.cuh"
#include "gemv_core.cuh"

namespace atlas::gemv {

constexpr int kMaxStages = 32;  // ops/matmul.py PREFETCH_MAX_STAGES

// The static part of a block's shared memory.
struct PrefetchShared {
  uint64_t full[kMaxStages];                                  // tile s has landed
  float partial[2][kMaxThreads / 32][kRowsPerBlock];           // [group & 1][warp][row]
};

__device__ __forceinline__ uint32_t dynamic_shared_bytes() {
  uint32_t v;
  asm("mov.u32 %0, %%dynamic_smem_size;\n" : "=r"(v));
  return v;
}

// What a block's 4-row group g computes and where its sums go.
// * kPlain: weight rows 4g .. 4g + 3 (those < n), y[row] = the sum (bf16, or for logits the
//   bf16-rounded value as f32);
// * kSwiglu: w is a fused [gate | up] weight of n = 2 I rows; the group takes gate rows
//   2g, 2g + 1 (tile rows 0, 1) and up rows I + 2g, I + 2g + 1 (tile rows 2, 3), and writes
//   y[j] = bf16(bf16(silu(bf16(gate_j))) * bf16(up_j)) for j = 2g, 2g + 1 (those < I):
//   the GEMV's bf16 outputs followed by silu_mul, bit for bit (atlas::swiglu_f32).
enum class GroupRows { kPlain, kSwiglu };

template <GroupRows kRows>
struct GroupMap {
  int n;  // weight rows
  __device__ __forceinline__ int outputs() const { return kRows == GroupRows::kSwiglu ? n / 2 : n; }
  // 4-row groups in all
  __device__ __forceinline__ int groups() const {
    return kRows == GroupRows::kSwiglu ? (n / 2 + 1) / 2 : (n + kRowsPerBlock - 1) / kRowsPerBlock;
  }
  // Tile rows [r0, r0 + count) of group g are weight rows first(g, r0) + [0, count),
  // contiguous: one run for kPlain, two (gate, up) of up to 2 rows for kSwiglu.
  __device__ __forceinline__ int runs() const { return kRows == GroupRows::kSwiglu ? 2 : 1; }
  __device__ __forceinline__ int run_rows(int g) const {
    return kRows == GroupRows::kSwiglu ? min(2, n / 2 - 2 * g) : min(kRowsPerBlock, n - kRowsPerBlock * g);
  }
  __device__ __forceinline__ int run_first(int g, int run) const {
    return kRows == GroupRows::kSwiglu ? 2 * g + run * (n / 2) : kRowsPerBlock * g;
  }
};

// The group's outputs from its warps' sums part[warp][tile row], summed in warp order (the
// general kernel's order): threads 0..3 (0..1 for kSwiglu) each store one.
template <bool kF32Out, GroupRows kRows>
__device__ __forceinline__ void store_group(const GroupMap<kRows>& map,
                                            const float (&part)[kMaxThreads / 32][kRowsPerBlock],
                                            int nwarps, int g, int tid, void* y) {
  const auto sum_of = [&](int r) {
    float sum = 0.f;
    for (int i = 0; i < nwarps; ++i) sum += part[i][r];
    return sum;
  };
  if constexpr (kRows == GroupRows::kSwiglu) {
    const int j = 2 * g + tid;
    if (tid < 2 && j < map.outputs()) {
      const float gate = atlas::round_bf16(sum_of(tid)), up = atlas::round_bf16(sum_of(2 + tid));
      static_cast<__nv_bfloat16*>(y)[j] = atlas::f32_to_bf16(atlas::swiglu_f32(gate, up));
    }
  } else {
    const int row = g * kRowsPerBlock + tid;
    if (tid < kRowsPerBlock && row < map.n) {
      if (kF32Out)  // logits: the bf16-rounded value, widened (transformers' bf16 LM head)
        static_cast<float*>(y)[row] = atlas::round_bf16(sum_of(tid));
      else
        static_cast<__nv_bfloat16*>(y)[row] = atlas::f32_to_bf16(sum_of(tid));
    }
  }
}

template <bool kF32Out, class XLoad, GroupRows kRows = GroupRows::kPlain>
__device__ __forceinline__ void gemv_prefetch_rows(XLoad xload, const __nv_bfloat16* __restrict__ w,
                                                   void* __restrict__ y, int n, int k,
                                                   uint4* dyn, PrefetchShared& sh) {
  static_assert(!(kF32Out && kRows == GroupRows::kSwiglu), "the SwiGLU epilogue stores bf16");
  const GroupMap<kRows> map{n};
  const int kc = k >> 3;
  const int T = static_cast<int>(blockDim.x), tid = static_cast<int>(threadIdx.x);
  const int lane = tid & 31, warp = tid >> 5;
  const int tile_w = min(T, kc);                      // a tile row's stride in shared memory
  const int nkt = (kc + T - 1) / T;                   // tiles per 4-row group
  const int tile_chunks = kRowsPerBlock * tile_w;
  const int x_chunks = (kc + 7) & ~7;
  const int groups = map.groups();
  const int g0 = static_cast<int>(static_cast<long long>(blockIdx.x) * groups / gridDim.x);
  const int g1 = static_cast<int>(static_cast<long long>(blockIdx.x + 1) * groups / gridDim.x);
  const int ntiles = (g1 - g0) * nkt;
  const int fit = (static_cast<int>(dynamic_shared_bytes() >> 4) - x_chunks) / tile_chunks;
  const int stages = min(kMaxStages, min(ntiles, fit));
  if (ntiles > 0 && stages < 1) __trap();  // the launch gave no room for a tile
  uint4* xs = dyn;
  uint4* ring = dyn + x_chunks;
  const uint4* wq = reinterpret_cast<const uint4*>(w);

  // Tile t of this block into ring slot s: its rows' k-slice, one copy per run of rows when
  // the rows are whole (k / 8 <= T: contiguous in global and shared memory alike). Rows past
  // the end are not copied; their sums come from stale shared memory and are never stored.
  const auto issue = [&](int t, int s) {
    const int g = g0 + t / nkt, c0 = (t % nkt) * T;
    const int width = min(tile_w, kc - c0), rows = map.run_rows(g);
    atlas::bulk::expect_bytes(&sh.full[s], static_cast<uint32_t>(map.runs() * rows * width * 16));
    for (int run = 0; run < map.runs(); ++run) {
      uint4* dst = ring + static_cast<size_t>(s) * tile_chunks + run * 2 * tile_w;
      const uint4* src = wq + static_cast<size_t>(map.run_first(g, run)) * kc + c0;
      if (width == kc) {
        atlas::bulk::copy_to_shared(dst, src, static_cast<uint32_t>(rows * kc * 16), &sh.full[s]);
      } else {
        for (int r = 0; r < rows; ++r)
          atlas::bulk::copy_to_shared(dst + r * tile_w, src + static_cast<size_t>(r) * kc,
                                      static_cast<uint32_t>(width * 16), &sh.full[s]);
      }
    }
  };

  // Before the wait: thread s sets up slot s and requests its first tile.
  if (tid < stages) {
    atlas::bulk::init_barrier(&sh.full[tid], 1);
    atlas::bulk::fence_barrier_init();
    issue(tid, tid);
  }
  __syncthreads();
  atlas::pdl_enter();

  // x: each thread stages the chunks it will multiply (all its loads in flight at once), or
  // a policy that needs the whole row (the fused RMSNorm) stages it into xs with the block.
  if constexpr (XLoad::kBlockStaged) {
    xload.prepare();
  } else {
#pragma unroll 4
    for (int c = tid; c < kc; c += T) xs[c] = xload.raw(0, c);
  }

  float acc[kRowsPerBlock];
#pragma unroll
  for (int r = 0; r < kRowsPerBlock; ++r) acc[r] = 0.f;
  for (int t = 0; t < ntiles; ++t) {
    const int s = t % stages, kt = t % nkt, g = g0 + t / nkt;
    atlas::bulk::wait_parity(&sh.full[s], static_cast<uint32_t>((t / stages) & 1));
    const int c = kt * T + tid;
    if (c < kc) {
      float xf[8];
      atlas::unpack_bf16x8(xs[c], xf);
      const uint4* tile = ring + static_cast<size_t>(s) * tile_chunks + tid;
#pragma unroll
      for (int r = 0; r < kRowsPerBlock; ++r) {
        float wf[8];
        atlas::unpack_bf16x8(tile[r * tile_w], wf);
#pragma unroll
        for (int e = 0; e < 8; ++e) acc[r] = fmaf(xf[e], wf[e], acc[r]);
      }
    }
    const bool group_done = kt == nkt - 1;
    if (group_done) {
      const float v = warp_reduce_scatter<kRowsPerBlock>(acc, lane);
      if ((lane & 7) == 0) sh.partial[g & 1][warp][lane >> 3] = v;
#pragma unroll
      for (int r = 0; r < kRowsPerBlock; ++r) acc[r] = 0.f;
    }
    __syncthreads();  // slot s is consumed; the group's warp sums are visible
    if (tid == 0 && t + stages < ntiles) {
      atlas::bulk::fence_async_shared();
      issue(t + stages, s);
    }
    if (group_done) store_group<kF32Out, kRows>(map, sh.partial[g & 1], T >> 5, g, tid, y);
  }
}

}  // namespace atlas::gemv
