// Quantized paged KV cache writer: calibration of the per-(layer, kv head) scales and the
// quantizing appends, FP8 (E4M3) and NVFP4 (E2M1 with E4M3 scales per 16 elements).
//
// The rotary kernel (rope_kv.cu) writes this step's rotated K and V rows in bf16 into a
// staging buffer `stage` = [2 (K, V), hkv, stage_rows, head_dim] (token t of the step is row
// t); these kernels then quantize them into the pools, so the bf16 path's kernels stay
// untouched. scales is f32 [2, hkv] per layer (K scales, then V scales).
//
// kv_calibrate: grid (hkv, 2), 256 threads. A scale that is still 0 (not from the
//   checkpoint, not yet calibrated) is set from this step: amax over the first
//   min(tokens, calib_tokens) tokens with a slot >= 0 of |x| of that head, scale =
//   amax / qmax (qmax: 448 for FP8, E4M3's largest finite value; 448 * 6 for NVFP4, the
//   largest block scale times the largest E2M1 value), or 1 when amax is 0. A set scale
//   never changes.
// kv_fp8_append: grid (tokens, 2), 256 threads. code = cvt.rn.satfinite.e4m3(x * (1 / scale))
//   to pool[block][h][offset][d] of slot = slots[t]; a negative slot writes nothing.
// kv_nvfp4_append: grid (tokens, 2), 256 threads, one thread per 16-element group. A pool
//   row (block, h, offset) is head_dim / 2 bytes of E2M1 nibbles (element 2i in the low
//   nibble of byte i) then head_dim / 16 E4M3 group-scale bytes; an element is
//   e2m1 * e4m3(group scale) * scale. Each group tries two group scales, amax / 6 and
//   amax / 4 (the "four over six" rule: mapping the group's largest value onto E2M1's 4
//   keeps 3 and 6 representable near it, which often fits a group better), and keeps the
//   one whose squared error, summed over the 16 elements in order in f32, is smaller (6 on
//   a tie). Nibbles round to nearest with ties away from zero (the branchless threshold
//   rule of atlas.core.numerics.f32_to_e2m1: sm_90a has no cvt to e2m1).
#include <cuda_fp8.h>
#include <cuda_fp16.h>
#include <cstdint>
#include "atlas_common.cuh"

namespace {

__device__ __forceinline__ float e4m3_to_f32(uint32_t code) {
    const __half_raw h = __nv_cvt_fp8_to_halfraw((__nv_fp8_storage_t)code, __NV_E4M3);
    return __half2float(__half(h));
}

// E2M1 nibble of x: magnitude code = how many midpoints |x| reaches (ties away from 0)
__device__ __forceinline__ uint32_t f32_to_e2m1(float x) {
    const uint32_t bits = __float_as_uint(x), mag = bits & 0x7fffffffu;
    const uint32_t code = (mag >= 0x3E800000u) + (mag >= 0x3F400000u) + (mag >= 0x3FA00000u)
                          + (mag >= 0x3FE00000u) + (mag >= 0x40200000u)
                          + (mag >= 0x40600000u) + (mag >= 0x40A00000u);
    return code | ((bits >> 28) & 8u);
}

// value of an E2M1 nibble: its exponent and mantissa bits placed in an f32's (bits 23-22)
// give e2m1 * 2^-126 exactly (subnormal for the codes 0 and 1)
__device__ __forceinline__ float e2m1_to_f32(uint32_t nib) {
    return __uint_as_float(((nib & 8u) << 28) | ((nib & 7u) << 22)) * 0x1p126f;
}

// nibbles of x[16] at group scale s (0: all zero) and their summed squared error, in f32
// operations that cannot contract (the reference adds in the same order)
__device__ __forceinline__ float nvfp4_group(const float* x, float s, uint32_t* lo,
                                             uint32_t* hi) {
    float err = 0.0f;
    const float inv = s > 0.0f ? __fdiv_rn(1.0f, s) : 0.0f;
    *lo = 0u;
    *hi = 0u;
#pragma unroll
    for (int i = 0; i < 16; ++i) {
        const uint32_t nib = s > 0.0f ? f32_to_e2m1(__fmul_rn(x[i], inv)) : 0u;
        const float d = __fsub_rn(x[i], __fmul_rn(e2m1_to_f32(nib), s));
        err = __fadd_rn(err, __fmul_rn(d, d));
        if (i < 8) *lo |= nib << (4 * i);
        else *hi |= nib << (4 * (i - 8));
    }
    return err;
}

}  // namespace

extern "C" __global__ void kv_calibrate(const __nv_bfloat16* __restrict__ stage,
                                        uint32_t stage_rows, const int* __restrict__ slots,
                                        float* __restrict__ scales, uint32_t tokens,
                                        uint32_t calib_tokens, uint32_t hkv, uint32_t head_dim,
                                        float qmax) {
    __shared__ float scratch[32];
    atlas::pdl_wait();
    const uint32_t h = blockIdx.x, which = blockIdx.y;
    float* scale = scales + which * hkv + h;
    if (*scale > 0.0f) return;  // uniform across the block: no barrier is skipped by a part
    const uint32_t n = min(tokens, calib_tokens);
    const __nv_bfloat16* src = stage + ((size_t)which * hkv + h) * stage_rows * head_dim;
    float amax = 0.0f;
    for (uint32_t i = threadIdx.x; i < n * head_dim; i += blockDim.x) {
        const uint32_t t = i / head_dim;
        if (slots[t] >= 0) amax = fmaxf(amax, fabsf(atlas::bf16_to_f32(src[i])));
    }
    // block max through the sum helper's shape: warp max, then the first warp
    amax = atlas::warp_max(amax);
    const uint32_t warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    if (lane == 0) scratch[warp] = amax;
    __syncthreads();
    if (warp == 0) {
        float v = lane < (blockDim.x + 31) / 32 ? scratch[lane] : 0.0f;
        v = atlas::warp_max(v);
        if (lane == 0) *scale = v > 0.0f ? __fdiv_rn(v, qmax) : 1.0f;
    }
}

extern "C" __global__ void kv_fp8_append(const __nv_bfloat16* __restrict__ stage,
                                         uint32_t stage_rows, const int* __restrict__ slots,
                                         const float* __restrict__ scales,
                                         unsigned char* __restrict__ k_cache,
                                         unsigned char* __restrict__ v_cache, uint32_t tokens,
                                         uint32_t hkv, uint32_t head_dim, uint32_t block_size) {
    atlas::pdl_wait();
    const uint32_t t = blockIdx.x, which = blockIdx.y;
    const int slot = slots[t];
    if (slot < 0) return;
    const uint32_t block = (uint32_t)slot / block_size, offset = (uint32_t)slot % block_size;
    unsigned char* pool = which ? v_cache : k_cache;
    for (uint32_t i = threadIdx.x; i < hkv * head_dim; i += blockDim.x) {
        const uint32_t h = i / head_dim, d = i % head_dim;
        const float s = scales[which * hkv + h];
        const float inv = s > 0.0f ? 1.0f / s : 0.0f;
        const float x = atlas::bf16_to_f32(
            stage[(((size_t)which * hkv + h) * stage_rows + t) * head_dim + d]);
        const __nv_fp8_storage_t code =
            __nv_cvt_float_to_fp8(x * inv, __NV_SATFINITE, __NV_E4M3);
        pool[(((size_t)block * hkv + h) * block_size + offset) * head_dim + d] = code;
    }
}

extern "C" __global__ void kv_nvfp4_append(const __nv_bfloat16* __restrict__ stage,
                                           uint32_t stage_rows, const int* __restrict__ slots,
                                           const float* __restrict__ scales,
                                           unsigned char* __restrict__ k_cache,
                                           unsigned char* __restrict__ v_cache,
                                           uint32_t tokens, uint32_t hkv, uint32_t head_dim,
                                           uint32_t block_size) {
    atlas::pdl_wait();
    const uint32_t t = blockIdx.x, which = blockIdx.y;
    const int slot = slots[t];
    if (slot < 0) return;
    const uint32_t block = (uint32_t)slot / block_size, offset = (uint32_t)slot % block_size;
    const uint32_t groups = head_dim / 16, pitch = head_dim / 2 + groups;
    unsigned char* pool = which ? v_cache : k_cache;
    for (uint32_t i = threadIdx.x; i < hkv * groups; i += blockDim.x) {
        const uint32_t h = i / groups, grp = i % groups;
        const float g = scales[which * hkv + h];
        // 16 bf16 = two 16-byte loads (head_dim % 16 == 0 keeps them aligned)
        const uint4* src = reinterpret_cast<const uint4*>(
            stage + (((size_t)which * hkv + h) * stage_rows + t) * head_dim + grp * 16);
        float x[16];
        float amax = 0.0f;
#pragma unroll
        for (int half = 0; half < 2; ++half) {
            const uint4 w = src[half];
            const uint32_t words[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                x[half * 8 + 2 * j] = __uint_as_float(words[j] << 16);
                x[half * 8 + 2 * j + 1] = __uint_as_float(words[j] & 0xffff0000u);
            }
        }
#pragma unroll
        for (int j = 0; j < 16; ++j) amax = fmaxf(amax, fabsf(x[j]));
        uint32_t sb = 0u, lo = 0u, hi = 0u;
        if (g > 0.0f) {
            const uint32_t sb6 = __nv_cvt_float_to_fp8(__fdiv_rn(amax, __fmul_rn(6.0f, g)),
                                                       __NV_SATFINITE, __NV_E4M3);
            const uint32_t sb4 = __nv_cvt_float_to_fp8(__fdiv_rn(amax, __fmul_rn(4.0f, g)),
                                                       __NV_SATFINITE, __NV_E4M3);
            uint32_t lo4, hi4;
            const float e6 = nvfp4_group(x, __fmul_rn(e4m3_to_f32(sb6), g), &lo, &hi);
            const float e4 = nvfp4_group(x, __fmul_rn(e4m3_to_f32(sb4), g), &lo4, &hi4);
            sb = sb6;
            if (e4 < e6) {
                sb = sb4;
                lo = lo4;
                hi = hi4;
            }
        }
        unsigned char* row = pool + (((size_t)block * hkv + h) * block_size + offset) * pitch;
        // pitch = 9 * head_dim / 16 is a multiple of 4: the code words are 4-byte aligned
        uint32_t* codes = reinterpret_cast<uint32_t*>(row + grp * 8);
        codes[0] = lo;
        codes[1] = hi;
        row[head_dim / 2 + grp] = (unsigned char)sb;
    }
}
