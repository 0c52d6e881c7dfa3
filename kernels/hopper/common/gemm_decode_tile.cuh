// The parts of the decode wgmma GEMM that do not depend on how its operands reach shared
// memory, shared by gemm_decode_sm90.cu (16-byte cp.async issued by every thread) and
// gemm_decode_tma.cu (TMA tensor copies issued by one producer thread): the block geometry
// and ring sizing, the SwiGLU entries' gate/up row layout, and the epilogue that scatters the
// accumulators, sums a cluster's split-K partials in a fixed rank order and stores (or
// SwiGLUs) the tile.
// One definition, so both kernels round, order their sums and write alike: for the same
// split they produce the same bits (gemm_decode_sm90.cu's header states the design).
// sm_90a only (wgmma accumulator layout, distributed shared memory).
#pragma once

#include <cooperative_groups.h>

#include "atlas_common.cuh"
#include "bf16_vec.cuh"

namespace atlas::decode_gemm {

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

// The fused [gate | up] weight's row (n = 2 I rows) that row r of a SwiGLU block's tile holds:
// tile rows [0, ROWS / 2) are gate rows [pair0, pair0 + ROWS / 2), tile rows [ROWS / 2, ROWS)
// the up rows I past them; -1 past I.
template <int ROWS>
__device__ __forceinline__ int gate_up_row(int r, int pair0, int inter) {
  const int j = pair0 + r % (ROWS / 2);
  return j >= inter ? -1 : r < ROWS / 2 ? j : inter + j;
}

// kSplit of the TMA kernel's *_ticket entry points: the split is a launch parameter, the
// blocks of a tile meet through global memory (store_tile_ticket), not in a cluster.
constexpr int kTicketSplit = 0;
constexpr int kMaxTicketSplit = 8;  // ops/matmul_decode.py DECODE_GEMM_TICKET_SPLITS

// Where store_tile_ticket's sum reads the S partials of its tile: rank p's [m][row_pitch] f32
// rows at tile_ws + p rank_floats of the split workspace, except its own (`rank`), read from
// its shared-memory partial tile. sum_store_quads of the other splits takes none.
struct TicketParts {
  const float* tile_ws;
  size_t rank_floats;
  int row_pitch;
  int split;
  int rank;
};
struct NoTicketParts {};

// The sum-and-store half of store_tile four output columns a thread: each rank's partial is
// read with one 16-byte (distributed) shared-memory load per quad instead of four 4-byte ones,
// and each quad is stored with one 8-byte (bf16) or 16-byte (f32) store where the output row's
// width is a multiple of 4 (every quad then is aligned; else element by element). The sums are
// store_tile's scalar ones element for element (0 + p0 + p1 + ... in rank order for a split,
// the partial itself without one), so the bits are the same. Threads with `active` false only
// skip the loop. kSplit = kTicketSplit: the partials are `ticket`'s (global memory, L2 loads).
template <int kSplit, bool kF32Out, bool kSwiglu, int kThreads, int kOutRows, int kPitch,
          class Ticket = NoTicketParts>
__device__ __forceinline__ void sum_store_quads(float* part, void* y, int n, int row0, int mi0,
                                                int mi1, bool active,
                                                const Ticket& ticket = {}) {
  constexpr int kQuads = kOutRows / 4;  // quads of a batch row
  static_assert(kOutRows % 4 == 0 && kPitch % 4 == 0, "quads stay 16-byte aligned");
  const int width = kSwiglu ? n / 2 : n;  // output columns of a row
  const bool vec = width % 4 == 0;
  auto whole4 = [&](int mi, int r, float (&v)[4]) {
    if constexpr (kSplit == kTicketSplit) {
      // every rank's load issued before the first add (L2 round trips overlap), then the
      // sums in rank order
      float4 t[kMaxTicketSplit];
#pragma unroll
      for (int p = 0; p < kMaxTicketSplit; ++p) {
        if (p < ticket.split) {
          t[p] = p == ticket.rank
                     ? *reinterpret_cast<const float4*>(part + mi * kPitch + r)
                     : __ldcg(reinterpret_cast<const float4*>(
                           ticket.tile_ws + p * ticket.rank_floats + mi * ticket.row_pitch + r));
        }
      }
#pragma unroll
      for (int i = 0; i < 4; ++i) v[i] = 0.f;
#pragma unroll
      for (int p = 0; p < kMaxTicketSplit; ++p) {
        if (p < ticket.split) {
          v[0] += t[p].x;
          v[1] += t[p].y;
          v[2] += t[p].z;
          v[3] += t[p].w;
        }
      }
    } else if constexpr (kSplit > 1) {
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
  const int total = (mi1 - mi0) * kQuads;
  // a ticket's last block sums its tile alone, from L2: more quads a thread in flight
  constexpr int kUnroll = kSplit == kTicketSplit ? 4 : 2;
#pragma unroll kUnroll
  for (int e = active ? static_cast<int>(threadIdx.x) : total; e < total; e += kThreads) {
    const int mi = mi0 + e / kQuads, r = (e % kQuads) * 4, col = row0 + r;
    if (col >= width) continue;
    float v[4];
    whole4(mi, r, v);
    if constexpr (kSwiglu) {
      float u[4];
      whole4(mi, r + kOutRows, u);
#pragma unroll
      for (int i = 0; i < 4; ++i) v[i] = swiglu_f32(round_bf16(v[i]), round_bf16(u[i]));
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

// The accumulators of the consumer threads (threads [0, 128 G); kProducer: a producer warp
// past them writes nothing) scattered into the [batch row][weight row] f32 partial tile `part`
// (row pitch partial_pitch(G)): d[j] of lane l in warp q is weight row 16q + l/4 + 8 ((j/2) %
// 2), batch row 8 (j/4) + 2 (l%4) + j%2 (warp q of the block is warp q % 4 of warpgroup q / 4,
// whose rows start at 64 (q / 4)).
template <int kCols, int kGroups, bool kProducer>
__device__ __forceinline__ void scatter_partial(const float (&acc)[kCols / 2], float* part) {
  constexpr int kThreads = kGroupThreads * kGroups, kPitch = partial_pitch(kGroups);
  const int tid = static_cast<int>(threadIdx.x);
  if (!kProducer || tid < kThreads) {
    const int lane = tid & 31, q = tid >> 5;
#pragma unroll
    for (int j = 0; j < kCols / 2; ++j) {
      const int r = 16 * q + (lane >> 2) + 8 * ((j >> 1) & 1);
      const int c = 8 * (j >> 2) + 2 * (lane & 3) + (j & 1);
      part[c * kPitch + r] = acc[j];
    }
  }
}

// The block's output tile from its consumer threads' accumulators (threads [0, 128 G): the
// warpgroups; kProducer: the block has a producer warp past them, which only joins the
// barriers; kQuads: the sums are read and stored four columns a thread, sum_store_quads).
// `part` is the block's shared memory, free for a [kCols][partial_pitch(G)] f32 tile (the
// caller has finished every wgmma and copy into it and synchronized the block); `row0` the
// block's first output column (kSwiglu: first gate/up pair), `rank` its cluster rank. Every
// thread of every block of the cluster must call it.
//
// The accumulators are scattered into the [batch row][weight row] partial tile
// (scatter_partial). Then rank r
// sums batch rows [m r / S, m (r + 1) / S) over the S partials (distributed shared memory,
// ranks in fixed order 0..S-1: bit-reproducible) and writes them, coalesced along n; a last
// cluster barrier keeps every partial alive until all ranks have read it.
template <int kCols, int kSplit, bool kF32Out, int kGroups, bool kSwiglu, bool kProducer,
          bool kQuads>
__device__ __forceinline__ void store_tile(float (&acc)[kCols / 2], float* part, void* y, int m,
                                           int n, int row0, int rank) {
  constexpr int kThreads = kGroupThreads * kGroups, kRows = kGroupRows * kGroups;
  constexpr int kPitch = partial_pitch(kGroups);
  constexpr int kOutRows = kSwiglu ? kRows / 2 : kRows;  // output columns of a block
  static_assert(!(kSwiglu && kF32Out), "the activation is bf16");
  const int inter = n / 2;  // activation width (kSwiglu)
  const int tid = static_cast<int>(threadIdx.x);
  scatter_partial<kCols, kGroups, kProducer>(acc, part);

  if constexpr (kSplit > 1) {
    cooperative_groups::this_cluster().sync();  // every rank's partial is written and visible
  } else {
    __syncthreads();
  }
  const int mi0 = m * rank / kSplit, mi1 = m * (rank + 1) / kSplit;
  if constexpr (kQuads) {
    sum_store_quads<kSplit, kF32Out, kSwiglu, kThreads, kOutRows, kPitch>(
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
    if constexpr (kSwiglu) {
      if (col >= inter) continue;
      // gate_up rounded to bf16 as the unfused kernel stores it, then silu_mul's op
      const float g = round_bf16(whole(mi, r));
      const float u = round_bf16(whole(mi, r + kOutRows));
      static_cast<__nv_bfloat16*>(y)[static_cast<size_t>(mi) * inter + col] =
          f32_to_bf16(swiglu_f32(g, u));
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

// store_tile for a split of K over S = `split` independent blocks a tile (no cluster: any S,
// the blocks placed wherever the device has room) that meet through global memory: the TMA
// kernel's *_ticket entry points. Each block scatters its partial tile (scatter_partial),
// writes its batch rows [0, m) to its slot of the split workspace `ws` (tile t's S partials
// at ws + t S m kRows, rank r's m x kRows f32 at + r m kRows), fences, and takes a ticket from
// tickets[tile]; the block that draws the last one (S - 1) sums the S partials in rank order
// 0..S-1 (0 + p0 + p1 + ..., its own from shared memory: the cluster kernel's sums, so the
// same bits for the same S) and stores (or SwiGLUs) the whole tile, and sets the counter back
// to zero for the next launch (a graph replays with the counters as it found them). The
// others return. Every thread of the block calls it, after the caller synchronized the block
// past its last wgmma and copy and made its PDL wait (the previous launch, whose last blocks
// zeroed the counters, has completed); ws and tickets are ops/matmul_decode.py's split
// workspace (zeroed when allocated). S >= 2 (the launch builder runs S = 1 unticketed).
template <int kCols, bool kF32Out, int kGroups, bool kSwiglu>
__device__ __forceinline__ void store_tile_ticket(const float (&acc)[kCols / 2], float* part,
                                                  void* y, int m, int n, int row0, int tile,
                                                  int rank, int split, float* ws,
                                                  unsigned* tickets) {
  constexpr int kThreads = kGroupThreads * kGroups, kRows = kGroupRows * kGroups;
  constexpr int kPitch = partial_pitch(kGroups);
  constexpr int kOutRows = kSwiglu ? kRows / 2 : kRows;  // output columns of a block
  constexpr int kRowQuads = kRows / 4;                    // 16-byte quads of a partial row
  static_assert(!(kSwiglu && kF32Out), "the activation is bf16");
  __shared__ unsigned last;  // this block drew its tile's last ticket
  const int tid = static_cast<int>(threadIdx.x);
  scatter_partial<kCols, kGroups, true>(acc, part);
  __syncthreads();
  const size_t rank_floats = static_cast<size_t>(m) * kRows;
  float* tile_ws = ws + static_cast<size_t>(tile) * split * rank_floats;
  float* mine = tile_ws + rank * rank_floats;
  // to L2 only (.cg): the tile's last block, on another SM, reads them back from there
  for (int e = tid; e < m * kRowQuads; e += static_cast<int>(blockDim.x)) {
    const int mi = e / kRowQuads, r = (e % kRowQuads) * 4;
    __stcg(reinterpret_cast<float4*>(mine + mi * kRows + r),
           *reinterpret_cast<const float4*>(part + mi * kPitch + r));
  }
  __threadfence();  // this thread's part is visible device-wide before the ticket is taken
  __syncthreads();
  if (tid == 0) {
    const unsigned ticket = atomicAdd(&tickets[tile], 1u);
    last = ticket == static_cast<unsigned>(split - 1);
    if (last) tickets[tile] = 0u;  // every rank has arrived: no other block touches it
  }
  __syncthreads();
  if (!last) return;
  __threadfence();  // the other ranks' parts (fenced before their tickets) are read after this
  sum_store_quads<kTicketSplit, kF32Out, kSwiglu, kThreads, kOutRows, kPitch>(
      part, y, n, row0, 0, m, tid < kThreads, TicketParts{tile_ws, rank_floats, kRows, split,
                                                           rank});
}

}  // namespace atlas::decode_gemm
