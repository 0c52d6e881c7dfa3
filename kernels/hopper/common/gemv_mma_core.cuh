// The batched tensor-core GEMV's machinery (gemv_mma.cu's scheme), shared by gemv_mma.cu and
// moe_decode_mma.cu: per-warp cp.async rings of k-steps in dynamic shared memory, fragments
// as plain 16-byte loads, mma.m16n8k16 with weight rows as A (16 a tile) and activation rows
// as B (8 a tile), and the fixed-order reduction of the warps' partial sums.
//
// Fragments without ldmatrix. The sum over k does not care in which order the k values are
// fed, as long as A and B agree. Lane (g = lane / 4, c = lane % 4) loads 16 bytes (8 bf16,
// k = 32 s + 8 c .. + 7 of k-step s) from weight rows g and g + 8 of a 16-row tile and from
// activation row g of each 8-row B tile. Element pairs (0,1) (2,3) feed the first MMA's k
// slots (2c, 2c+1) (2c+8, 2c+9) and pairs (4,5) (6,7) the second MMA's: the slot -> k map
// depends on c only, so A and B see the same permutation of k, and every fragment is one
// plain 16-byte load per lane.
//
// What a kernel supplies: the lane's row starts (LaneSources: weight rows g and g + 8 of each
// A tile, activation row g of each B tile, and with kMaskX which of its activation rows exist:
// a masked row's slots are zero-filled and read nothing), its warp's k-step range, and its
// ring geometry (RingShape: warps, the ring budget in bytes, the most stages). The caller
// issues the prologue in two halves around its PDL wait (weights may go before it, since no
// kernel writes them; activations only after), then stream_k runs the loop and
// reduce_over_warps sums the partials of every warp into warp 0's accumulators.
#pragma once

#include "mma_util.cuh"

namespace atlas::gemv_mma {

// 16-byte slots of one warp's ring stage (one 32-k step): per lane, the weight chunks of rows
// g and g + 8 of each A tile, then the activation chunk of each B tile.
__host__ __device__ constexpr int stage_slots(int tiles, int btiles) {
  return (2 * tiles + btiles) * 32;
}

// A kernel's ring geometry: kWarps warps each with a ring of as many k-steps as kBudget
// bytes (all warps' rings together) hold, at most kMaxStages.
template <int kWarps, int kBudget, int kMaxStages>
struct RingShape {
  static constexpr int warps = kWarps;

  __host__ __device__ static constexpr int stages(int tiles, int btiles) {
    return kBudget / (kWarps * stage_slots(tiles, btiles) * 16) < kMaxStages
               ? kBudget / (kWarps * stage_slots(tiles, btiles) * 16)
               : kMaxStages;
  }

  __host__ __device__ static constexpr int bytes(int tiles, int btiles) {
    return kWarps * stages(tiles, btiles) * stage_slots(tiles, btiles) * 16;
  }
};

__device__ __forceinline__ uint32_t word(const uint4& v, int i) {
  return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w;
}

// One lane's sources: the starts of its weight rows and activation rows. kMaskX: xlive[b]
// says whether activation row b of this lane exists (else its slots are zero-filled and the
// row start, still a mapped address, is not read); without it every row is read.
template <int kTiles, int kBTiles, bool kMaskX = false>
struct LaneSources {
  const uint4* wrow[kTiles][2];
  const uint4* xrow[kBTiles];
  bool xlive[kMaskX ? kBTiles : 1];  // read only with kMaskX
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
    for (int b = 0; b < kBTiles; ++b) {
      if constexpr (kMaskX) {
        const bool live = ch >= 0 && xlive[b];
        atlas::cp_async_16(stage + (2 * kTiles + b) * 32 + lane, live ? xrow[b] + ch : xrow[b],
                           live);
      } else {
        atlas::cp_async_16(stage + (2 * kTiles + b) * 32 + lane,
                           ch >= 0 ? xrow[b] + ch : xrow[b], ch >= 0);
      }
    }
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

// The prologue's first half: the weights of this warp's first kStages - 1 steps (before the
// PDL wait where the rows do not depend on the previous kernel).
template <int kStages, int kSlots, class Src>
__device__ __forceinline__ void prologue_weights(const Src& src, uint4* ring, int lane,
                                                 int step0, int count) {
#pragma unroll
  for (int i = 0; i < kStages - 1; ++i)
    if (i < count) src.fill_weights(ring + i * kSlots, lane, step0 + i);
}

// The second half (after the wait): the activations of those steps, one commit group each.
// Commit group i then holds everything step i needs (group 0 also the later steps'
// weights), and the loop commits one group per step, possibly empty.
template <int kStages, int kSlots, class Src>
__device__ __forceinline__ void prologue_x(const Src& src, uint4* ring, int lane, int step0,
                                           int count) {
#pragma unroll
  for (int i = 0; i < kStages - 1; ++i) {
    if (i < count) src.fill_x(ring + i * kSlots, lane, step0 + i);
    atlas::cp_async_commit();
  }
}

// The k loop of one warp over its steps step0 .. step0 + count - 1 (prologue issued), then
// every copy of the warp drained. Step i sits in slot i % kStages; the slot refilled in
// iteration i (with step i + kStages - 1) is the one step i - 1 used, whose values already
// fed its MMAs.
template <int kStages, int kSlots, class Src, int kTiles, int kBTiles>
__device__ __forceinline__ void stream_k(const Src& src, uint4* ring, int lane, int step0,
                                         int count, float (&acc)[kTiles][kBTiles][4]) {
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
}

// Sum the partials of 2 kHalf warps in a fixed tree (warp w += warp w + half, half = kHalf,
// kHalf / 2, ..., 1) through `exchange` [kHalf][values][32] (values >= kTiles * kBTiles * 4);
// warp 0 ends with the block's totals. Bit reproducible, no atomics.
template <int kHalf, int kValues, int kTiles, int kBTiles>
__device__ __forceinline__ void reduce_over_warps(float (&acc)[kTiles][kBTiles][4],
                                                  float (&exchange)[kHalf][kValues][32],
                                                  int warp, int lane) {
  static_assert(kValues >= kTiles * kBTiles * 4, "the exchange buffer holds every partial");
#pragma unroll
  for (int half = kHalf; half >= 1; half >>= 1) {
    if (warp >= half && warp < 2 * half) {
#pragma unroll
      for (int t = 0; t < kTiles; ++t)
#pragma unroll
        for (int b = 0; b < kBTiles; ++b)
#pragma unroll
          for (int i = 0; i < 4; ++i)
            exchange[warp - half][(t * kBTiles + b) * 4 + i][lane] = acc[t][b][i];
    }
    __syncthreads();
    if (warp < half) {
#pragma unroll
      for (int t = 0; t < kTiles; ++t)
#pragma unroll
        for (int b = 0; b < kBTiles; ++b)
#pragma unroll
          for (int i = 0; i < 4; ++i)
            acc[t][b][i] += exchange[warp][(t * kBTiles + b) * 4 + i][lane];
    }
    __syncthreads();
  }
}

}  // namespace atlas::gemv_mma
