// Bulk asynchronous global -> shared copies (sm_90+ cp.async.bulk, the TMA unit's 1-D form)
// completing on shared-memory mbarriers. Header-only; any kernel that stages data no
// thread needs to touch on the way in (weights) can use it.
//
// Why: a copy is one instruction from one thread, costs no registers while in flight and
// lands straight in shared memory, so a block can have most of its shared memory in flight
// at once. In particular a kernel may issue copies of memory no kernel writes (weights)
// BEFORE atlas::pdl_wait(): they are asm volatile with a memory clobber, as pdl_wait is, so
// neither the compiler nor ptxas moves them across it, and the previous kernel's runtime
// hides their DRAM latency and transfer (atlas_common.cuh states the PDL contract).
//
// Protocol of one buffer guarded by one mbarrier (count 1), per fill:
//   one thread: expect_bytes(bar, total) then copy_to_shared(...) pieces summing to total;
//   every reader: wait_parity(bar, phase) with phase = the fill's index & 1;
//   before the buffer is refilled, every reader is done with it (a block barrier), and the
//   refilling thread calls fence_async_shared() so the async copy orders after those reads.
//
// The 2-D tensor form (copy_tile_2d) takes a tile of a matrix described by a tensor map (a
// CUtensorMap the host encoded, passed as a `const __grid_constant__` kernel parameter): one
// instruction moves a whole [rows][cols] box, zero-filling what lies past the matrix, and may
// write it 128-byte swizzled exactly as wgmma's descriptors read it (gemm_decode_tma.cu).
// Readers that only consume it through wgmma (the async proxy) and release the buffer with
// an mbarrier arrival (`arrive`) need no proxy fence.
#pragma once

#include <stdint.h>

#include "atlas_common.cuh"

namespace atlas::bulk {

// A CUtensorMap as a kernel parameter (`const __grid_constant__ TensorMap`): 128 opaque bytes,
// 64-byte aligned (the driver header's definition, without it; GpuBackend.tensor_map_2d).
struct alignas(64) TensorMap {
  uint64_t opaque[16];
};

__device__ __forceinline__ uint32_t shared_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// Initialise an mbarrier expecting `count` arrivals per phase. Make it visible to the async
// proxy with fence_barrier_init() and to the other threads with a block barrier.
__device__ __forceinline__ void init_barrier(uint64_t* bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(shared_addr(bar)), "r"(count)
               : "memory");
}

__device__ __forceinline__ void fence_barrier_init() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}

// Generic-proxy accesses to shared memory before this are ordered before later async-proxy
// (bulk copy) writes of the same thread's issue.
__device__ __forceinline__ void fence_async_shared() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

// The calling thread's arrival for this phase, announcing `bytes` of copies to come.
__device__ __forceinline__ void expect_bytes(uint64_t* bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(shared_addr(bar)),
               "r"(bytes)
               : "memory");
}

// Copy `bytes` (a multiple of 16; both addresses 16-byte aligned) from global to shared
// memory; completion is counted on `bar`.
__device__ __forceinline__ void copy_to_shared(void* dst, const void* src, uint32_t bytes,
                                               uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(
          shared_addr(dst)),
      "l"(src), "r"(bytes), "r"(shared_addr(bar))
      : "memory");
}

// Copy the box at element coordinates (c0 = column, c1 = row) of the 2-D tensor map at
// generic address `map` (a __grid_constant__ parameter's address) to shared address `dst`
// (1024-byte aligned for a 128-byte swizzle); completion counted on `bar` (the box's full
// bytes, the zero-filled part included).
__device__ __forceinline__ void copy_tile_2d(uint32_t dst, const void* map, int c0, int c1,
                                             uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%2, %3}], [%4];\n" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(shared_addr(bar))
      : "memory");
}

// copy_tile_2d for boxes streamed once a step (decode weights): with the evict_first L2
// policy (atlas_common.cuh kStreamEvictFirst; `policy` from l2_stream_policy()).
__device__ __forceinline__ void copy_tile_2d_stream(uint32_t dst, const void* map, int c0,
                                                    int c1, uint64_t* bar, uint64_t policy) {
  if constexpr (kStreamEvictFirst) {
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
        ".L2::cache_hint [%0], [%1, {%2, %3}], [%4], %5;\n" ::"r"(dst),
        "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(shared_addr(bar)),
        "l"(policy)
        : "memory");
  } else {
    copy_tile_2d(dst, map, c0, c1, bar);
  }
}

// copy_tile_2d into every block of the cluster named in `cta_mask` (bit r: rank r): the box
// lands at shared offset `dst` of each, and each one's mbarrier at `bar`'s offset counts its
// bytes. All of them must have initialised that mbarrier (a cluster barrier after the init).
__device__ __forceinline__ void copy_tile_2d_multicast(uint32_t dst, const void* map, int c0,
                                                       int c1, uint64_t* bar,
                                                       uint16_t cta_mask) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
      ".multicast::cluster [%0], [%1, {%2, %3}], [%4], %5;\n" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(shared_addr(bar)),
      "h"(cta_mask)
      : "memory");
}

// Fetch a tensor map into the TMA unit's descriptor cache ahead of its first copy.
__device__ __forceinline__ void prefetch_map(const void* map) {
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<uint64_t>(map)) : "memory");
}

// The calling thread's plain arrival on `bar` (a consumer releasing a buffer).
__device__ __forceinline__ void arrive(uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(shared_addr(bar)) : "memory");
}

// The calling thread's plain arrival on the mbarrier at `bar`'s offset in cluster block
// `rank` (a consumer releasing a buffer that rank's copies fill; release at cluster scope).
__device__ __forceinline__ void arrive_cluster(uint64_t* bar, uint32_t rank) {
  uint32_t remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(remote)
               : "r"(shared_addr(bar)), "r"(rank));
  asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];\n" ::"r"(remote)
               : "memory");
}

// Whether the barrier's phase `parity` has completed (its bytes have all landed); the
// instruction itself waits a while (an implementation-defined time) before answering no.
// kCluster: acquire at cluster scope, so what other blocks of the cluster wrote before their
// release arrivals on `bar` (arrive_cluster) is visible to the caller once it says yes.
template <bool kCluster = false>
__device__ __forceinline__ bool try_wait_parity(uint64_t* bar, uint32_t parity) {
  uint32_t done;
  if constexpr (kCluster) {
    asm volatile(
        "{\n .reg .pred p;\n"
        " mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [%1], %2;\n"
        " selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(shared_addr(bar)), "r"(parity)
        : "memory");
  } else {
    asm volatile(
        "{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
        " selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(shared_addr(bar)), "r"(parity)
        : "memory");
  }
  return done != 0;
}

// Spin until the barrier's phase `parity` has completed (its bytes have all landed).
__device__ __forceinline__ void wait_parity(uint64_t* bar, uint32_t parity) {
  while (!try_wait_parity(bar, parity)) {
  }
}

// wait_parity for a phase that must complete within `max_cycles` SM clocks of the first
// refusal, else the kernel traps: a byte count its copies can never meet (a launch whose
// geometry disagrees with the kernel's) then fails the launch instead of hanging the device.
template <bool kCluster = false>
__device__ __forceinline__ void wait_parity_or_trap(uint64_t* bar, uint32_t parity,
                                                    long long max_cycles) {
  if (try_wait_parity<kCluster>(bar, parity)) return;
  const long long start = clock64();
  while (!try_wait_parity<kCluster>(bar, parity))
    if (clock64() - start > max_cycles) __trap();
}

}  // namespace atlas::bulk
