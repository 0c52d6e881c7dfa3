// Block-wide argmax with a fixed tie rule: the larger value wins, equal values go to the
// lower index, NaN never wins. Shared by argmax.cu and sampler.cu so greedy decoding picks
// the same token on both paths.
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

// Argmax of one f32 row of n values (float4 loads when the row is 16-byte aligned).
__device__ __forceinline__ ArgBest row_argmax(const float* __restrict__ row, uint32_t n,
                                              ArgBest* scratch) {
  ArgBest best = arg_none();
  if ((n & 3u) == 0 && (reinterpret_cast<uintptr_t>(row) & 15u) == 0) {
    const float4* row4 = reinterpret_cast<const float4*>(row);
    for (uint32_t q = threadIdx.x; q < n / 4; q += blockDim.x) {
      const float4 v = row4[q];
      const int i = static_cast<int>(4 * q);
      arg_update(best, v.x, i);
      arg_update(best, v.y, i + 1);
      arg_update(best, v.z, i + 2);
      arg_update(best, v.w, i + 3);
    }
  } else {
    for (uint32_t i = threadIdx.x; i < n; i += blockDim.x)
      arg_update(best, row[i], static_cast<int>(i));
  }
  return block_argmax(best, scratch);
}

}  // namespace atlas
