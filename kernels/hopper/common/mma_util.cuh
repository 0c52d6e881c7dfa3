// Tensor-core building blocks shared by the GEMM and attention kernels: cp.async copies
// into swizzled shared tiles, ldmatrix fragment loads and the bf16 m16n8k16 mma.
// Everything here is sm_80+ PTX, so it assembles for sm_90a and sm_121 alike.
//
// Fragment layouts of mma.m16n8k16 (g = lane / 4, c = lane % 4):
//   A (16x16, row-major)  a0: [g][2c..2c+1]  a1: [g+8][2c..]  a2: [g][2c+8..]  a3: [g+8][2c+8..]
//   B (16x8, "col")       b0: [k=2c..2c+1][n=g]               b1: [k=2c+8..][n=g]
//   C/D (16x8, f32)       d0,d1: [g][2c..2c+1]                 d2,d3: [g+8][2c..2c+1]
// A C fragment pair covering 16 columns therefore is, after packing to bf16, exactly an A
// fragment over those 16 columns (used to feed softmax probabilities to the PV product).
#pragma once

#include "atlas_common.cuh"

namespace atlas {

// Element offset of 16-byte chunk `chunk` of row `row` in a tile of CPR chunks per row.
// XOR-swizzling the chunk index by the row spreads the eight rows read by one ldmatrix
// 8x8 matrix (same logical chunk) over all eight 16-byte bank groups: conflict-free reads,
// while the cp.async writes of one row stay a permutation of that row.
template <int CPR>
__device__ __forceinline__ int swizzle_offset(int row, int chunk) {
  static_assert(CPR == 4 || CPR % 8 == 0, "rows must be 64 bytes or a multiple of 128");
  const int phys = CPR == 4 ? chunk ^ ((row >> 1) & 3) : chunk ^ (row & 7);
  return (row * CPR + phys) * 8;
}

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// 16-byte global -> shared copy; when `valid` is false nothing is read and zeros are stored
// (src must still be a mapped address; callers pass the tensor base).
__device__ __forceinline__ void cp_async_16(void* dst, const void* src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(dst)),
               "l"(src), "r"(valid ? 16 : 0)
               : "memory");
}

// The same with the L2::256B prefetch hint, for streamed weights: DRAM then serves a row 256
// contiguous bytes at a time instead of the 16-64 bytes one k-step of a kernel asks for.
__device__ __forceinline__ void cp_async_16_prefetch256(void* dst, const void* src, bool valid) {
  asm volatile("cp.async.cg.shared.global.L2::256B [%0], [%1], 16, %2;\n" ::"r"(smem_addr(dst)),
               "l"(src), "r"(valid ? 16 : 0)
               : "memory");
}

// cp_async_16 / cp_async_16_prefetch256 for bytes streamed once a step (K/V pages, weights):
// with the evict_first L2 policy (atlas_common.cuh kStreamEvictFirst; `policy` from
// l2_stream_policy()).
__device__ __forceinline__ void cp_async_16_stream(void* dst, const void* src, bool valid,
                                                   uint64_t policy) {
  if constexpr (kStreamEvictFirst) {
    asm volatile("cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2, %3;\n" ::"r"(
                     smem_addr(dst)),
                 "l"(src), "r"(valid ? 16 : 0), "l"(policy)
                 : "memory");
  } else {
    cp_async_16(dst, src, valid);
  }
}

__device__ __forceinline__ void cp_async_16_prefetch256_stream(void* dst, const void* src,
                                                               bool valid, uint64_t policy) {
  if constexpr (kStreamEvictFirst) {
    asm volatile(
        "cp.async.cg.shared.global.L2::cache_hint.L2::256B [%0], [%1], 16, %2, %3;\n" ::"r"(
            smem_addr(dst)),
        "l"(src), "r"(valid ? 16 : 0), "l"(policy)
        : "memory");
  } else {
    cp_async_16_prefetch256(dst, src, valid);
  }
}

__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}

// Wait until at most N committed groups are still in flight.
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

// Four 8x8 bf16 matrices; lanes 8i..8i+7 give the row addresses of matrix i, and register i
// receives matrix i in the A/B fragment distribution (row g, columns 2c..2c+1).
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p))
               : "memory");
}

// Same, transposed: register i receives matrix i as [row 2c..2c+1][column g], which turns a
// row-major [k][n] tile into B fragments.
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p))
               : "memory");
}

// d += a * b on tensor cores, bf16 inputs, f32 accumulators.
__device__ __forceinline__ void mma_bf16_16816(float (&d)[4], const uint32_t (&a)[4],
                                               uint32_t b0, uint32_t b1) {
  asm(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// One k16 step of a warp's MT x NT grid of m16n8k16 tiles: acc[i][j] += A[a_row0 + 16 i ..]
// x B[b_row0 + 8 j ..]^T, both operands [rows][CPR * 8] bf16 shared tiles swizzled by
// swizzle_offset<CPR>, at 16-byte chunks 2 kk and 2 kk + 1. A fragments: matrices rows 0-7 /
// 8-15 (lanes 0-15) at chunk 2 kk, then at 2 kk + 1 (lanes 16-31); B fragments, two n-tiles a
// load: (n 0-7, k lo), (n 0-7, k hi), (n 8-15, k lo), (n 8-15, k hi).
template <int MT, int NT, int CPR>
__device__ __forceinline__ void warp_mma_k16(float (&acc)[MT][NT][4], const __nv_bfloat16* sa,
                                             const __nv_bfloat16* sb, int a_row0, int b_row0,
                                             int kk) {
  static_assert(NT % 2 == 0, "B fragments load two n-tiles at a time");
  const int lane = threadIdx.x & 31;
  uint32_t af[MT][4];
  uint32_t bf[NT][2];
#pragma unroll
  for (int i = 0; i < MT; ++i) {
    const int r = a_row0 + i * 16 + (lane & 15);
    ldmatrix_x4(af[i], sa + swizzle_offset<CPR>(r, 2 * kk + (lane >> 4)));
  }
#pragma unroll
  for (int j = 0; j < NT; j += 2) {
    const int r = b_row0 + j * 8 + (lane & 7) + ((lane >> 4) << 3);
    uint32_t t[4];
    ldmatrix_x4(t, sb + swizzle_offset<CPR>(r, 2 * kk + ((lane >> 3) & 1)));
    bf[j][0] = t[0];
    bf[j][1] = t[1];
    bf[j + 1][0] = t[2];
    bf[j + 1][1] = t[3];
  }
#pragma unroll
  for (int i = 0; i < MT; ++i)
#pragma unroll
    for (int j = 0; j < NT; ++j) mma_bf16_16816(acc[i][j], af[i], bf[j][0], bf[j][1]);
}

}  // namespace atlas
