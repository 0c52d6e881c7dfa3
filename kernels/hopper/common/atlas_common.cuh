// Shared device helpers for Atlas kernels: bf16 conversion and warp/block reductions.
// Header-only; every entry point stays `extern "C" __global__` in its own .cu file.
#pragma once

#include <cuda_bf16.h>
#include <stdint.h>

namespace atlas {

// Programmatic dependent launch (sm_90+). The runtime launches a kernel whose PTX contains
// `griddepcontrol.wait` with programmatic stream serialization, so it may start while the
// kernel before it in the stream is still running. The contract every entry point keeps:
//   * before pdl_wait() it reads only memory no kernel writes (weights, constant tables)
//     and writes nothing; pdl_wait() returns once the previous kernel has completed and its
//     writes are visible;
//   * pdl_launch_dependents() comes after pdl_wait() (so at most two kernels overlap, and
//     the next one's pre-wait prologue never races the one before this).
// The second rule is what makes the narrower exception in gdn_decode.cu sound: a kernel the
// model always launches right after a known one may, before its wait, also read memory
// that kernel does not write (its header says which and why).
// The *_early_* entry points break the second rule on purpose (pdl_enter_early below): in
// batched steps a few short kernels that the model always follows with a projection
// (rmsnorm.cu's add_rmsnorm, silu_mul.cu, attention.cu's decode_attn_combine, attn_gate.cu)
// trigger before their wait, so three kernels may overlap there. Sound because the projection
// reads only weights and writes nothing before its own wait, and the early kernel was itself
// launched only once every block of the one before it had started (dependents launch only
// when every block of a grid has triggered or exited), so the projection's blocks, resident
// early, never hold SMs a block they wait on still needs; and the exceptions above never
// follow an early entry (ops/early_trigger.py keeps that list).
// Without the launch attribute both are no-ops, so eager and graph launches agree.
__device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}

__device__ __forceinline__ void pdl_launch_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;\n" :::);
#endif
}

// The split halves of a cluster barrier, every thread of every block of the cluster taking
// part (exited threads count as arrived): an arrive without memory ordering (the caller says
// why none is needed) and a wait.
__device__ __forceinline__ void cluster_arrive_relaxed() {
  asm volatile("barrier.cluster.arrive.relaxed;\n" ::: "memory");
}

__device__ __forceinline__ void cluster_wait() {
  asm volatile("barrier.cluster.wait;\n" ::: "memory");
}

// The address of the same shared-memory location in cluster block `rank`.
__device__ __forceinline__ unsigned map_rank(unsigned addr, unsigned rank) {
  unsigned out;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(out) : "r"(addr), "r"(rank));
  return out;
}

// The usual entry prologue of a kernel with nothing to prefetch: wait for the previous
// kernel, then let the next one start launching.
__device__ __forceinline__ void pdl_enter() {
  pdl_wait();
  pdl_launch_dependents();
}

// The entry prologue of a kernel with an *_early_* twin: kEarly lets the next kernel launch
// before this one's wait (see the exception above), so the projection after it requests its
// first weight tiles under the kernel before this one, not only during this one's own run.
template <bool kEarly>
__device__ __forceinline__ void pdl_enter_early() {
  if constexpr (kEarly) {
    pdl_launch_dependents();
    pdl_wait();
  } else {
    pdl_enter();
  }
}

// Streamed 16-byte weight load: read-only path, no L1 allocation, 256-byte L2 prefetch.
// volatile: callers guard it with a bounds check, and the compiler must not speculate an
// asm load past that check (the tail chunk of the last row would read past the allocation).
__device__ __forceinline__ uint4 ld_stream(const uint4* p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0,%1,%2,%3}, [%4];\n"
      : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
      : "l"(p));
  return v;
}

// The same 16-byte streamed weight load for use BEFORE pdl_wait(): a plain (weak, coherent)
// global load with no L1 allocation and the 256-byte L2 prefetch. ptxas sinks every
// ld.global.nc below griddepcontrol.wait (the read-only path must not see data the previous
// grid is still writing), so an ld_stream placed before the wait is issued after it in SASS
// (checked with nvdisasm, nvcc 13.0, sm_90a): a pre-wait weight prefetch must use this.
__device__ __forceinline__ uint4 ld_prefetch(const uint4* p) {
  uint4 v;
  asm volatile("ld.global.L1::no_allocate.L2::256B.v4.u32 {%0,%1,%2,%3}, [%4];\n"
      : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
      : "l"(p));
  return v;
}

// Request `bytes` (a multiple of 16) at p (16-byte aligned) into L2 without waiting and
// without registers: the TMA unit's bulk prefetch (sm_90). Before pdl_wait() only on memory no
// kernel writes (weights).
__device__ __forceinline__ void prefetch_l2_bulk(const void* p, uint32_t bytes) {
  asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;\n" ::"l"(p), "r"(bytes) : "memory");
}

// L2 eviction policy for bytes a kernel streams once per step (decode weights, K/V pages):
// evict_first, so a step's streams (hundreds of MB at batch 64) replace each other in L2 and
// not the small lines every layer reads again (kv_len, block tables, slots, positions, cos/sin
// rows, norm weights, activations), which otherwise go back to DRAM behind the stream (gpu75:
// ~12.6 us a block of the batch-64 attention). gpu76: Qwen3-8B batch 64 x 1,536 9.23 -> 8.91
// ms a step (the attention 121.5 -> 113.8 us), the 64-stream throughput level 11,514 ->
// 11,940 tok/s. -DATLAS_L2_STREAM_EVICT_FIRST=0 builds the unhinted set for A/B runs
// (tools/gpu/prep_device.sh ATLAS_PREP_VARIANT).
#ifndef ATLAS_L2_STREAM_EVICT_FIRST
#define ATLAS_L2_STREAM_EVICT_FIRST 1
#endif
constexpr bool kStreamEvictFirst = ATLAS_L2_STREAM_EVICT_FIRST != 0;

// The policy a streaming copy takes (cp_async_16_stream, bulk::copy_tile_2d_stream): made once
// per thread before its copy loop; unused (0) when kStreamEvictFirst is off.
__device__ __forceinline__ uint64_t l2_stream_policy() {
  uint64_t policy = 0;
  if constexpr (kStreamEvictFirst)
    asm("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(policy));
  return policy;
}

// A streamed weight load under a `policy` from l2_stream_policy(): ld_prefetch before the PDL
// wait (kPreWait), else ld_stream, with the L2 cache hint when kStreamEvictFirst is on.
template <bool kPreWait>
__device__ __forceinline__ uint4 ld_weight(const uint4* p, uint64_t policy) {
  if constexpr (!kStreamEvictFirst) return kPreWait ? ld_prefetch(p) : ld_stream(p);
  uint4 v;
  if constexpr (kPreWait)
    asm volatile(
        "ld.global.L1::no_allocate.L2::cache_hint.L2::256B.v4.u32 {%0,%1,%2,%3}, [%4], %5;\n"
        : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
        : "l"(p), "l"(policy));
  else
    asm volatile(
        "ld.global.nc.L1::no_allocate.L2::cache_hint.L2::256B.v4.u32 {%0,%1,%2,%3}, [%4], %5;\n"
        : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
        : "l"(p), "l"(policy));
  return v;
}

// Copy n 16-byte chunks from global memory (through L2: another kernel may have written
// them) into shared memory, the whole block cooperating, kUnroll loads of a thread in flight
// before its first store (a load and its store per iteration cost one dependent L2 round trip
// per chunk). The caller synchronizes the block before reading dst.
template <int kUnroll>
__device__ __forceinline__ void stage_to_shared(uint4* dst, const uint4* src, int n) {
  for (int base = threadIdx.x; base < n; base += kUnroll * static_cast<int>(blockDim.x)) {
    uint4 v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int i = base + u * static_cast<int>(blockDim.x);
      if (i < n) v[u] = __ldcg(src + i);
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int i = base + u * static_cast<int>(blockDim.x);
      if (i < n) dst[i] = v[u];
    }
  }
}

__device__ __forceinline__ float bf16_to_f32(__nv_bfloat16 v) { return __bfloat162float(v); }

// Round-to-nearest-even, identical to atlas.core.numerics.f32_to_bf16_bits.
__device__ __forceinline__ __nv_bfloat16 f32_to_bf16(float v) { return __float2bfloat16_rn(v); }

// Round a float to bf16 precision and widen it back (models a torch bf16 op boundary).
__device__ __forceinline__ float round_bf16(float v) { return __bfloat162float(__float2bfloat16_rn(v)); }

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

// Sum over the whole block; `scratch` needs blockDim.x / 32 floats. All threads get the sum.
__device__ __forceinline__ float block_sum(float v, float* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = (blockDim.x + 31) >> 5;
  v = warp_sum(v);
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  float total = 0.f;
  for (int i = 0; i < nwarps; ++i) total += scratch[i];
  return total;
}

}  // namespace atlas
