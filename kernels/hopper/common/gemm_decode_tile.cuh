// The parts of the decode wgmma GEMM that do not depend on how its operands reach shared
// memory, shared by gemm_decode_sm90.cu (16-byte cp.async issued by every thread) and
// gemm_decode_tma.cu (TMA tensor copies issued by one producer thread): the block geometry
// and ring sizing, the gated entries' gate/up row layout, and the epilogue that scatters the
// accumulators, sums a cluster's split-K partials in a fixed rank order and stores the tile
// (or its gated activation: SwiGLU, or Gemma 3's tanh-GELU GLU).
// One definition, so both kernels round, order their sums and write alike: for the same
// split they produce the same bits (gemm_decode_sm90.cu's header states the design).
// sm_90a only (wgmma accumulator layout, distributed shared memory).
#pragma once

#include <cooperative_groups.h>

#include "atlas_common.cuh"
#include "bf16_vec.cuh"
#include "glu.cuh"

namespace atlas::decode_gemm {

using atlas::Glu;  // glu.cuh: the activation a gated entry ends with

constexpr int kGroupThreads = 128;  // one warpgroup; ops/matmul_decode.py DECODE_THREADS
constexpr int kGroupRows = 64;      // weight rows per warpgroup: wgmma's M (DECODE_ROWS)
constexpr int kMaxGroups = 2;       // warpgroups per block at most (DECODE_GROUPS)
constexpr int BK = 64;              // k-tile columns (128-byte rows)
constexpr int kMaxCols = 256;       // widest wgmma N: m <= 256
constexpr int kAlign = 1024;        // 128-byte swizzle atom

constexpr int kPairBudget = 110 * 1024;  // ring bytes for two blocks per SM (G = 1, N <= 128)
constexpr int kSoloBudget = 200 * 1024;  // ring bytes for one block per SM (N = 256 or G = 2)

// One ring stage: a [64 G][64] weight tile and an [N][64] x tile, bf16.
__host__ __device__ constexpr int stage_bytes(int cols, int groups) {
  return (kGroupRows * groups + cols) * BK * 2;
}

__host__ __device__ constexpr int ring_budget(int cols, int groups) {
  return cols > 128 || groups > 1 ? kSoloBudget : kPairBudget;
}

// Stages of a ring: as many as the budget holds, at most `max_stages` (each kernel's own;
// ops/matmul_decode.py ring_stages mirrors this).
__host__ __device__ constexpr int ring_stages(int cols, int groups, int max_stages) {
  return ring_budget(cols, groups) / stage_bytes(cols, groups) < max_stages
             ? ring_budget(cols, groups) / stage_bytes(cols, groups)
             : max_stages;
}

// Dynamic shared memory of a launch: the ring + slack to align its base to the swizzle atom.
__host__ __device__ constexpr int smem_bytes(int cols, int groups, int max_stages) {
  return ring_stages(cols, groups, max_stages) * stage_bytes(cols, groups) + kAlign;
}

// Row pitch (floats) of the [batch row][weight row] f32 partial tile the epilogue builds:
// 4 past the block's weight rows, so the accumulator scatter is free of bank conflicts.
__host__ __device__ constexpr int partial_pitch(int groups) { return kGroupRows * groups + 4; }

// The fused [gate | up] weight's row (n = 2 I rows) that row r of a gated block's tile holds:
// tile rows [0, ROWS / 2) are gate rows [pair0, pair0 + ROWS / 2), tile rows [ROWS / 2, ROWS)
// the up rows I past them; -1 past I.
template <int ROWS>
__device__ __forceinline__ int gate_up_row(int r, int pair0, int inter) {
  const int j = pair0 + r % (ROWS / 2);
  return j >= inter ? -1 : r < ROWS / 2 ? j : inter + j;
}

// The store of a tile's sums four output columns a thread: `whole4(mi, r, v)` gives the sums
// of batch row mi, tile rows [r, r + 4) (gated: gate rows; r + kOutRows: their up rows), and
// each quad is stored with one 8-byte (bf16) or 16-byte (f32) store where the output row's
// width is a multiple of 4 (every quad then is aligned; else element by element), batch rows
// [mi0, mi1). Threads with `active` false only skip the loop.
template <bool kF32Out, Glu kGlu, int kThreads, int kOutRows, typename Whole4>
__device__ __forceinline__ void store_quads(const Whole4& whole4, void* y, int n, int row0,
                                            int mi0, int mi1, bool active) {
  constexpr int kQuads = kOutRows / 4;  // quads of a batch row
  static_assert(kOutRows % 4 == 0, "quads stay 16-byte aligned");
  const int width = kGlu != Glu::kNone ? n / 2 : n;  // output columns of a row
  const bool vec = width % 4 == 0;
  const int total = (mi1 - mi0) * kQuads;
#pragma unroll 2
  for (int e = active ? static_cast<int>(threadIdx.x) : total; e < total; e += kThreads) {
    const int mi = mi0 + e / kQuads, r = (e % kQuads) * 4, col = row0 + r;
    if (col >= width) continue;
    float v[4];
    whole4(mi, r, v);
    if constexpr (kGlu != Glu::kNone) {
      float u[4];
      whole4(mi, r + kOutRows, u);
#pragma unroll
      for (int i = 0; i < 4; ++i) v[i] = glu_f32<kGlu>(v[i], u[i]);
    }
    const size_t at = static_cast<size_t>(mi) * width + col;
    if constexpr (kF32Out) {  // logits: the bf16-rounded values, widened
      float* out = static_cast<float*>(y) + at;
      if (vec) {
        *reinterpret_cast<float4*>(out) =
            make_float4(round_bf16(v[0]), round_bf16(v[1]), round_bf16(v[2]), round_bf16(v[3]));
      } else {
#pragma unroll
        for (int i = 0; i < 4; ++i)
          if (col + i < width) out[i] = round_bf16(v[i]);
      }
    } else {
      __nv_bfloat16* out = static_cast<__nv_bfloat16*>(y) + at;
      if (vec) {
        alignas(8) __nv_bfloat16 q[4];
#pragma unroll
        for (int i = 0; i < 4; ++i) q[i] = f32_to_bf16(v[i]);
        *reinterpret_cast<uint2*>(out) = *reinterpret_cast<const uint2*>(q);
      } else {
#pragma unroll
        for (int i = 0; i < 4; ++i)
          if (col + i < width) out[i] = f32_to_bf16(v[i]);
      }
    }
  }
}

// The sum-and-store half of store_tile four output columns a thread: each rank's partial is
// read with one 16-byte (distributed) shared-memory load per quad instead of four 4-byte ones
// (store_quads stores them). The sums are store_tile's scalar ones element for element (0 +
// p0 + p1 + ... in rank order for a split, the partial itself without one), so the bits are
// the same.
template <int kSplit, bool kF32Out, Glu kGlu, int kThreads, int kOutRows, int kPitch>
__device__ __forceinline__ void sum_store_quads(float* part, void* y, int n, int row0, int mi0,
                                                int mi1, bool active) {
  static_assert(kPitch % 4 == 0, "quads stay 16-byte aligned");
  auto whole4 = [&](int mi, int r, float (&v)[4]) {
    if constexpr (kSplit > 1) {
      cooperative_groups::cluster_group cluster = cooperative_groups::this_cluster();
#pragma unroll
      for (int i = 0; i < 4; ++i) v[i] = 0.f;
#pragma unroll
      for (int p = 0; p < kSplit; ++p) {
        const float* rank_part = cluster.map_shared_rank(part, p);
        const float4 t = *reinterpret_cast<const float4*>(rank_part + mi * kPitch + r);
        v[0] += t.x;
        v[1] += t.y;
        v[2] += t.z;
        v[3] += t.w;
      }
    } else {
      const float4 t = *reinterpret_cast<const float4*>(part + mi * kPitch + r);
      v[0] = t.x;
      v[1] = t.y;
      v[2] = t.z;
      v[3] = t.w;
    }
  };
  store_quads<kF32Out, kGlu, kThreads, kOutRows>(whole4, y, n, row0, mi0, mi1, active);
}

// A consumer thread's accumulators into the [batch row][weight row] f32 partial tile `part`
// (pitch partial_pitch(G)): d[j] of lane l in warp q is weight row 16q + l/4 + 8 ((j/2) % 2),
// batch row 8 (j/4) + 2 (l%4) + j%2 (warp q of the block is warp q % 4 of warpgroup q / 4,
// whose rows start at 64 (q / 4)).
template <int kCols, int kGroups>
__device__ __forceinline__ void scatter_acc(const float (&acc)[kCols / 2], float* part) {
  constexpr int kPitch = partial_pitch(kGroups);
  const int tid = static_cast<int>(threadIdx.x), lane = tid & 31, q = tid >> 5;
#pragma unroll
  for (int j = 0; j < kCols / 2; ++j) {
    const int r = 16 * q + (lane >> 2) + 8 * ((j >> 1) & 1);
    const int c = 8 * (j >> 2) + 2 * (lane & 3) + (j & 1);
    part[c * kPitch + r] = acc[j];
  }
}

// store_tile past its scatter: `part` holds the block's [batch row][weight row] f32 partial
// tile, written by its consumer threads (each kernel's own scatter: scatter_acc for the bf16
// accumulators, gemm_decode_fp8.cu's for its recombined FP8 sums); every thread of every block
// of the cluster must call it.
template <int kSplit, bool kF32Out, int kGroups, Glu kGlu, bool kProducer, bool kQuads>
__device__ __forceinline__ void store_part(float* part, void* y, int m, int n, int row0,
                                           int rank) {
  constexpr int kThreads = kGroupThreads * kGroups, kRows = kGroupRows * kGroups;
  constexpr int kPitch = partial_pitch(kGroups);
  constexpr bool kGated = kGlu != Glu::kNone;
  constexpr int kOutRows = kGated ? kRows / 2 : kRows;  // output columns of a block
  static_assert(!(kGated && kF32Out), "the activation is bf16");
  const int inter = n / 2;  // activation width (kGated)
  const int tid = static_cast<int>(threadIdx.x);

  if constexpr (kSplit > 1) {
    cooperative_groups::this_cluster().sync();  // every rank's partial is written and visible
  } else {
    __syncthreads();
  }
  const int mi0 = m * rank / kSplit, mi1 = m * (rank + 1) / kSplit;
  if constexpr (kQuads) {
    sum_store_quads<kSplit, kF32Out, kGlu, kThreads, kOutRows, kPitch>(
        part, y, n, row0, mi0, mi1, !kProducer || tid < kThreads);
    if constexpr (kSplit > 1) cooperative_groups::this_cluster().sync();  // partials live on
    return;
  }
  // the sum of the S partials of tile cell (batch row mi, tile row r)
  auto whole = [&](int mi, int r) {
    if constexpr (kSplit > 1) {
      cooperative_groups::cluster_group cluster = cooperative_groups::this_cluster();
      float v = 0.f;
#pragma unroll
      for (int p = 0; p < kSplit; ++p) v += cluster.map_shared_rank(part, p)[mi * kPitch + r];
      return v;
    } else {
      return part[mi * kPitch + r];
    }
  };
  // unrolled so that several outputs' distributed-shared-memory loads are in flight at once
  // (every block of the grid sums at the same time, with no weight bytes streaming)
  const int start = !kProducer || tid < kThreads ? tid : (mi1 - mi0) * kOutRows;
#pragma unroll 4
  for (int e = start; e < (mi1 - mi0) * kOutRows; e += kThreads) {
    const int mi = mi0 + e / kOutRows, r = e % kOutRows, col = row0 + r;
    if constexpr (kGated) {
      if (col >= inter) continue;
      // gate and up summed; glu_f32 rounds them to bf16 as the unfused kernel stores them
      const float g = whole(mi, r);
      const float u = whole(mi, r + kOutRows);
      static_cast<__nv_bfloat16*>(y)[static_cast<size_t>(mi) * inter + col] =
          f32_to_bf16(glu_f32<kGlu>(g, u));
    } else {
      if (col >= n) continue;
      const float v = whole(mi, r);
      const size_t at = static_cast<size_t>(mi) * n + col;
      if constexpr (kF32Out)  // logits: the bf16-rounded value, widened (transformers' LM head)
        static_cast<float*>(y)[at] = round_bf16(v);
      else
        static_cast<__nv_bfloat16*>(y)[at] = f32_to_bf16(v);
    }
  }
  if constexpr (kSplit > 1) cooperative_groups::this_cluster().sync();  // partials live on
}

// The block's output tile from its consumer threads' accumulators (threads [0, 128 G): the
// warpgroups; kProducer: the block has a producer warp past them, which only joins the
// barriers; kQuads: the sums are read and stored four columns a thread, sum_store_quads).
// `part` is the block's shared memory, free for a [kCols][partial_pitch(G)] f32 tile (the
// caller has finished every wgmma and copy into it and synchronized the block); `row0` the
// block's first output column (gated: first gate/up pair), `rank` its cluster rank. Every
// thread of every block of the cluster must call it.
//
// The accumulators are scattered into the [batch row][weight row] partial tile (scatter_acc),
// then rank r sums batch rows [m r / S, m (r + 1) / S) over the S partials (distributed
// shared memory, ranks in fixed order 0..S-1: bit-reproducible) and writes them, coalesced
// along n; a last cluster barrier keeps every partial alive until all ranks have read it.
template <int kCols, int kSplit, bool kF32Out, int kGroups, Glu kGlu, bool kProducer,
          bool kQuads>
__device__ __forceinline__ void store_tile(float (&acc)[kCols / 2], float* part, void* y, int m,
                                           int n, int row0, int rank) {
  if (!kProducer || static_cast<int>(threadIdx.x) < kGroupThreads * kGroups)
    scatter_acc<kCols, kGroups>(acc, part);
  store_part<kSplit, kF32Out, kGroups, kGlu, kProducer, kQuads>(part, y, m, n, row0, rank);
}

}  // namespace atlas::decode_gemm
