// FP8 (E4M3) paged KV cache writer: calibration of the per-(layer, kv head) scales and the
// quantizing append.
//
// The rotary kernel (rope_kv.cu) writes this step's rotated K and V rows in bf16 into a
// staging buffer `stage` = [2 (K, V), hkv, stage_rows, head_dim] (token t of the step is row
// t); these kernels then quantize them into the fp8 pools, so the bf16 path's kernels stay
// untouched. scales is f32 [2, hkv] per layer (K scales, then V scales); a code c stands
// for c * scale.
//
// kv_fp8_calibrate: grid (hkv, 2), 256 threads. A scale that is still 0 (not from the
//   checkpoint, not yet calibrated) is set from this step: amax over the first
//   min(tokens, calib_tokens) tokens with a slot >= 0 of |x| of that head, scale =
//   amax / 448 (E4M3's largest finite value), or 1 when amax is 0. A set scale never changes.
// kv_fp8_append: grid (tokens, 2), 256 threads. code = cvt.rn.satfinite.e4m3(x * (1 / scale))
//   to pool[block][h][offset][d] of slot = slots[t]; a negative slot writes nothing.
#include <cuda_fp8.h>
#include <cstdint>
#include "atlas_common.cuh"

namespace {
constexpr float kE4m3Max = 448.0f;
}

extern "C" __global__ void kv_fp8_calibrate(const __nv_bfloat16* __restrict__ stage,
                                            uint32_t stage_rows, const int* __restrict__ slots,
                                            float* __restrict__ scales, uint32_t tokens,
                                            uint32_t calib_tokens, uint32_t hkv,
                                            uint32_t head_dim) {
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
        if (lane == 0) *scale = v > 0.0f ? v / kE4m3Max : 1.0f;
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
