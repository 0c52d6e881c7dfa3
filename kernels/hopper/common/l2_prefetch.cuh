// A launch's share of an L2 prefetch (sm_90): weights of a later projection that cannot
// stream under PDL (only the launch right after a kernel starts early) requested while a
// latency-bound kernel leaves DRAM idle, so that projection reads them from L2. The lines
// come in at the normal eviction priority; the decode weight streams between here and their
// reader take evict_first (atlas_common.cuh l2_stream_policy), so they replace each other,
// not these lines.
#pragma once

#include "atlas_common.cuh"

namespace atlas {

// Block b of the grid, thread t: 4 KiB pieces b * blockDim + t, then every (grid x block)
// threads on, of `bytes` (a multiple of 16) at p (16-byte aligned). Fire and forget: nothing
// waits for the lines, and the bytes must be memory no kernel writes (weights).
__device__ __forceinline__ void prefetch_l2_share(const void* p, uint64_t bytes) {
  constexpr uint64_t kPiece = 4096;
  const uint64_t pieces = (bytes + kPiece - 1) / kPiece;
  const uint64_t threads = static_cast<uint64_t>(gridDim.x) * gridDim.y * gridDim.z * blockDim.x;
  const uint64_t block = blockIdx.x + static_cast<uint64_t>(gridDim.x) *
                                          (blockIdx.y + static_cast<uint64_t>(gridDim.y) * blockIdx.z);
  for (uint64_t i = block * blockDim.x + threadIdx.x; i < pieces; i += threads) {
    const uint64_t off = i * kPiece;
    prefetch_l2_bulk(static_cast<const char*>(p) + off,
                     static_cast<uint32_t>(bytes - off < kPiece ? bytes - off : kPiece));
  }
}

}  // namespace atlas
