// One-shot all-reduce over peer-mapped memory (CUDA IPC over NVLink): for the small bf16
// messages of decode, where NCCL's ring/tree protocols cost more in latency than the bytes.
//
// Every rank owns one workspace (comm/oneshot.py maps each peer's into this process):
//   [0, kFlagBytes)   u32 flags[kMaxBlocks][kMaxWorld]: flags[b][p] = the last call whose
//                     block b data peer p has published into its own workspace
//   [kFlagBytes, ..)  u32 calls[kMaxBlocks]: this rank's count of calls, per block
//   [kDataOffset, ..) bf16 data[2][capacity]: double buffer, call e uses data[e & 1]
// A call (the same grid on every rank, every call: ops/allreduce.py launches a fixed grid)
// is, for each block b with e = calls[b] + 1:
//   1. copy this block's elements of `in` into data[e & 1] of the own workspace;
//   2. publish: after the block's barrier, thread p stores e into peer p's flags[b][rank]
//      (release, system scope);
//   3. wait: thread p spins (acquire, system scope) until the own flags[b][p] >= e: every
//      peer's block b has published its copy of the same elements;
//   4. out[i] = bf16(sum over ranks r = 0..world-1, in rank order, of float(data_r[e & 1][i]))
//      (every rank sums in the same order: all ranks get bit-identical results);
//   5. calls[b] = e.
// Why one barrier is enough: a rank rewrites data[e & 1] only at call e + 2, and it finishes
// call e + 1 only after every peer started call e + 1, i.e. finished reading call e (kernels
// of one stream run in order; this one waits on the previous one before anything else).
// A peer that never arrives (a dead rank) ends the wait after ~kSpinLimit polls: the block
// writes NaN to its outputs and sets the workspace's error word, never hangs the GPU.
// `out` may alias `in`. count % 8 == 0, capacity >= count, 16-byte aligned buffers.
//
// Launch: grid = ops.allreduce.ONESHOT_BLOCKS (<= kMaxBlocks), block = ONESHOT_THREADS.
#include "atlas_common.cuh"
#include "bf16_vec.cuh"

namespace {

constexpr uint32_t kMaxWorld = 8;
constexpr uint32_t kMaxBlocks = 64;
constexpr uint32_t kFlagBytes = kMaxBlocks * kMaxWorld * 4;
constexpr uint32_t kErrorOffset = kFlagBytes + kMaxBlocks * 4;  // u32: a peer timed out
constexpr uint32_t kDataOffset = 4096;
constexpr uint64_t kSpinLimit = 1ull << 24;  // polls (~1-2 s): a dead peer, not a slow one

__device__ __forceinline__ void store_release_sys(uint32_t* p, uint32_t v) {
  asm volatile("st.release.sys.global.u32 [%0], %1;\n" ::"l"(p), "r"(v) : "memory");
}

__device__ __forceinline__ uint32_t load_acquire_sys(const uint32_t* p) {
  uint32_t v;
  asm volatile("ld.acquire.sys.global.u32 %0, [%1];\n" : "=r"(v) : "l"(p) : "memory");
  return v;
}

// A peer's data, never from a stale L1 line.
__device__ __forceinline__ uint4 load_volatile(const uint4* p) {
  uint4 v;
  asm volatile("ld.volatile.global.v4.u32 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}

__device__ __forceinline__ uint32_t* flags_of(uint64_t base, uint32_t block, uint32_t rank) {
  return reinterpret_cast<uint32_t*>(base) + block * kMaxWorld + rank;
}

__device__ __forceinline__ __nv_bfloat16* data_of(uint64_t base, uint32_t e, uint32_t capacity) {
  return reinterpret_cast<__nv_bfloat16*>(base + kDataOffset) +
         static_cast<size_t>(e & 1u) * capacity;
}

}  // namespace

extern "C" __global__ void __launch_bounds__(512)
allreduce_oneshot_bf16(const uint64_t* __restrict__ peers, const __nv_bfloat16* in,
                       __nv_bfloat16* out, uint32_t count, uint32_t capacity, uint32_t world,
                       uint32_t rank) {
  __shared__ uint32_t epoch;
  __shared__ int timed_out;
  const uint32_t b = blockIdx.x;
  if (world > kMaxWorld || rank >= world || gridDim.x > kMaxBlocks) __trap();  // ops refuses
  atlas::pdl_wait();
  const uint64_t own = peers[rank];
  uint32_t* calls = reinterpret_cast<uint32_t*>(own + kFlagBytes);
  if (threadIdx.x == 0) {
    epoch = calls[b] + 1;
    timed_out = 0;
  }
  __syncthreads();
  const uint32_t e = epoch;
  const uint32_t vecs = count / atlas::kBf16PerVec;
  const uint32_t stride = gridDim.x * blockDim.x;
  uint4* mine = reinterpret_cast<uint4*>(data_of(own, e, capacity));
  for (uint32_t v = b * blockDim.x + threadIdx.x; v < vecs; v += stride)
    mine[v] = reinterpret_cast<const uint4*>(in)[v];
  __syncthreads();
  if (threadIdx.x < world) {
    const uint32_t p = threadIdx.x;
    __threadfence_system();
    store_release_sys(flags_of(peers[p], b, rank), e);
    const uint32_t* arrived = flags_of(own, b, p);
    uint64_t polls = 0;
    while (load_acquire_sys(arrived) < e) {
      if (++polls > kSpinLimit) {
        timed_out = 1;
        break;
      }
    }
  }
  __syncthreads();
  atlas::pdl_launch_dependents();
  if (timed_out) {
    const uint4 nan = make_uint4(0x7FC07FC0u, 0x7FC07FC0u, 0x7FC07FC0u, 0x7FC07FC0u);
    for (uint32_t v = b * blockDim.x + threadIdx.x; v < vecs; v += stride)
      reinterpret_cast<uint4*>(out)[v] = nan;
    if (threadIdx.x == 0) *reinterpret_cast<uint32_t*>(own + kErrorOffset) = 1;
  } else {
    for (uint32_t v = b * blockDim.x + threadIdx.x; v < vecs; v += stride) {
      float acc[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
      for (uint32_t r = 0; r < world; ++r) {
        const uint4* src = reinterpret_cast<const uint4*>(data_of(peers[r], e, capacity));
        float x[8];
        atlas::unpack_bf16x8(load_volatile(src + v), x);
#pragma unroll
        for (int k = 0; k < 8; ++k) acc[k] += x[k];
      }
      reinterpret_cast<uint4*>(out)[v] = atlas::pack_bf16x8(acc);
    }
  }
  if (threadIdx.x == 0) calls[b] = e;
}
