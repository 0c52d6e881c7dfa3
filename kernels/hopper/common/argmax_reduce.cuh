// Argmax with a fixed tie rule (the larger value wins, equal values go to the lower index, NaN
// never wins) and the pieces of a row split over many blocks: each block loads one chunk,
// publishes a partial, and the last block to arrive reduces the partials. The rule is a total
// order on (value, index), so the result never depends on the order blocks finish in. Shared
// by argmax.cu and sampler.cu so greedy decoding picks the same token on both paths.
#pragma once

#include <math.h>

#include "atlas_common.cuh"

namespace atlas {

constexpr int kNoIndex = 0x7fffffff;

struct ArgBest {
  float value;
  int index;
};

__device__ __forceinline__ ArgBest arg_none() { return {-INFINITY, kNoIndex}; }

// Fold candidate (v, i) into `best`; NaN candidates are ignored.
__device__ __forceinline__ void arg_update(ArgBest& best, float v, int i) {
  if (v > best.value || (v == best.value && i < best.index)) best = {v, i};
}

__device__ __forceinline__ ArgBest arg_merge(ArgBest a, ArgBest b) {
  return (b.value > a.value || (b.value == a.value && b.index < a.index)) ? b : a;
}

__device__ __forceinline__ ArgBest warp_argmax(ArgBest b) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) {
    const ArgBest o = {__shfl_xor_sync(0xffffffffu, b.value, offset),
                       __shfl_xor_sync(0xffffffffu, b.index, offset)};
    b = arg_merge(b, o);
  }
  return b;
}

// Every thread of the block receives the block's best; `scratch` holds 32 entries.
__device__ __forceinline__ ArgBest block_argmax(ArgBest b, ArgBest* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = (blockDim.x + 31) >> 5;
  b = warp_argmax(b);
  __syncthreads();
  if (lane == 0) scratch[warp] = b;
  __syncthreads();
  ArgBest total = arg_none();
  for (int w = 0; w < nwarps; ++w) total = arg_merge(total, scratch[w]);
  return total;
}

// A quiet NaN: the value of chunk slots past the end of the row (ignored by every consumer).
__device__ __forceinline__ float absent() { return __int_as_float(0x7fffffff); }

// Load this thread's 4*V values of the chunk starting at `begin`: slot (j, c) holds element
// chunk_index(begin, j, c). All V loads are issued before any is used (the latency of one
// row read is what a single block per row paid 150 times over). float4 loads when the row
// is 16-byte aligned and n is a multiple of 4; slots past n hold absent().
template <int V>
__device__ __forceinline__ void load_chunk(const float* __restrict__ row, uint32_t n,
                                           uint32_t begin, float (&x)[4 * V]) {
  const bool vec = (n & 3u) == 0 && (reinterpret_cast<uintptr_t>(row) & 15u) == 0;
#pragma unroll
  for (int j = 0; j < V; ++j) {
    const uint32_t i = begin + 4u * (threadIdx.x + j * blockDim.x);
    if (vec) {
      const float4 v = i < n ? *reinterpret_cast<const float4*>(row + i)
                             : make_float4(absent(), absent(), absent(), absent());
      x[4 * j] = v.x;
      x[4 * j + 1] = v.y;
      x[4 * j + 2] = v.z;
      x[4 * j + 3] = v.w;
    } else {
#pragma unroll
      for (int c = 0; c < 4; ++c) x[4 * j + c] = i + c < n ? row[i + c] : absent();
    }
  }
}

__device__ __forceinline__ uint32_t chunk_index(uint32_t begin, int j, int c) {
  return begin + 4u * (threadIdx.x + j * blockDim.x) + c;
}

// This thread's argmax over the values load_chunk gave it.
template <int V>
__device__ __forceinline__ ArgBest thread_argmax(const float (&x)[4 * V], uint32_t begin) {
  ArgBest best = arg_none();
#pragma unroll
  for (int j = 0; j < V; ++j)
#pragma unroll
    for (int c = 0; c < 4; ++c) arg_update(best, x[4 * j + c], static_cast<int>(chunk_index(begin, j, c)));
  return best;
}

// Called by every thread after the block published its partial (plain stores by any of its
// threads): true in every thread of the one block of `expected` that arrives last, which may
// then read all partials (through L2: __ldcg). That block also re-zeroes the counter, so the
// next launch (a graph replay) starts from zero.
__device__ __forceinline__ bool arrive_last(unsigned* counter, unsigned expected, int* s_flag) {
  __threadfence();  // each thread's stores are visible device-wide before the arrival counts
  __syncthreads();
  if (threadIdx.x == 0) {
    const unsigned prior = atomicAdd(counter, 1u);
    const int last = prior == expected - 1;
    if (last) *counter = 0u;
    *s_flag = last;
  }
  __syncthreads();
  if (!*s_flag) return false;
  __threadfence();  // order the partial reads after the counter read
  return true;
}

}  // namespace atlas
