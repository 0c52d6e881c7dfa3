// Attention over an FP8 (E4M3) paged KV cache, dequantizing in registers.
//
// Pools as kernel_abi's bf16 cache but one byte per element ([num_blocks, hkv, block_size,
// head_dim] E4M3 codes); kv_scales f32 [2, hkv]: element value = code * scale of its
// (K or V, kv head) (kv_quant.cu writes them). Same block tables, kv_lens, split rule and
// outputs as attention.cu's bf16 kernels, so decode_attn_combine_bf16 merges these
// partials unchanged.
//
// One warp serves one query row of one q head: lane l holds elements [l E, l E + E) of the
// head (E = head_dim / 32) in f32 registers, reads the same E code bytes of each key row in
// one load, and the warp sums q.k by shuffles; the softmax is online in f32, natural-log
// units, scores s = (q . codes) * (scale * k_scale), P unrounded, O accumulated in f32 with
// v_scale applied per key row.
// decode_attn_fp8: grid (num_splits, hkv, num_seqs), 128 threads: warp w serves the group's
//   q heads w, w + 4, ... over the split's keys (split rule of attention.cu).
// prefill_attn_fp8: grid (hq, ceil(max_q_len / 64), num_seqs), 128 threads: warp w serves
//   rows w, w + 4, ... of the block's 64-query tile; query i of a chunk of q_len sits at
//   position kv_len - q_len + i and sees keys 0..that position; out bf16 [tokens, hq, D].
#include <cuda_fp8.h>
#include <cuda_fp16.h>
#include <cstdint>
#include "atlas_common.cuh"

namespace {

constexpr uint32_t kWarps = 4;
constexpr uint32_t kQueryTile = 64;
constexpr uint32_t kMinKeysPerSplit = 32;  // ops.attention.DECODE_MIN_KEYS_PER_SPLIT

__device__ __forceinline__ float e4m3_to_f32(uint32_t code) {
    const __half_raw h = __nv_cvt_fp8_to_halfraw((__nv_fp8_storage_t)code, __NV_E4M3);
    return __half2float(__half(h));
}

// E code bytes starting at p (E = 2, 4 or 8: aligned since head_dim * lane offsets are)
template <int E>
__device__ __forceinline__ void load_codes(const unsigned char* p, float* out) {
    if constexpr (E == 2) {
        const uint32_t w = *reinterpret_cast<const unsigned short*>(p);
        out[0] = e4m3_to_f32(w & 0xff); out[1] = e4m3_to_f32(w >> 8);
    } else if constexpr (E == 4) {
        const uint32_t w = *reinterpret_cast<const uint32_t*>(p);
#pragma unroll
        for (int i = 0; i < 4; ++i) out[i] = e4m3_to_f32((w >> (8 * i)) & 0xff);
    } else {
        const uint2 w = *reinterpret_cast<const uint2*>(p);
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            out[i] = e4m3_to_f32((w.x >> (8 * i)) & 0xff);
            out[i + 4] = e4m3_to_f32((w.y >> (8 * i)) & 0xff);
        }
    }
}

// Online softmax of one query row (q already in registers) over keys [lo, hi) of one
// sequence; leaves m, l and the unnormalized o in the caller's registers.
template <int E>
__device__ __forceinline__ void attend(const float* q, const unsigned char* k_cache,
                                       const unsigned char* v_cache, const int* table,
                                       uint32_t kvh, uint32_t hkv, uint32_t block_size,
                                       uint32_t lo, uint32_t hi, float qk_scale, float v_scale,
                                       float& m, float& l, float* o) {
    constexpr uint32_t D = 32 * E;
    const uint32_t lane = threadIdx.x % 32;
    for (uint32_t key = lo; key < hi; ++key) {
        const size_t row = ((size_t)table[key / block_size] * hkv + kvh) * block_size
                           + key % block_size;
        float k[E], v[E];
        load_codes<E>(k_cache + row * D + lane * E, k);
        load_codes<E>(v_cache + row * D + lane * E, v);
        float dot = 0.0f;
#pragma unroll
        for (int i = 0; i < E; ++i) dot += q[i] * k[i];
        const float s = atlas::warp_sum(dot) * qk_scale;
        const float m_new = fmaxf(m, s);
        const float corr = expf(m - m_new);  // m = -inf at the first key: 0
        const float p = expf(s - m_new);
        l = l * corr + p;
#pragma unroll
        for (int i = 0; i < E; ++i) o[i] = o[i] * corr + p * (v[i] * v_scale);
        m = m_new;
    }
}

template <int E>
__device__ __forceinline__ void load_q(const __nv_bfloat16* q, float* out) {
    const uint32_t lane = threadIdx.x % 32;
#pragma unroll
    for (int i = 0; i < E; ++i) out[i] = atlas::bf16_to_f32(q[lane * E + i]);
}

template <int E>
__device__ void decode_fp8(const __nv_bfloat16* __restrict__ q,
                           const unsigned char* __restrict__ k_cache,
                           const unsigned char* __restrict__ v_cache,
                           const float* __restrict__ kv_scales,
                           const int* __restrict__ block_tables, const int* __restrict__ kv_lens,
                           float* __restrict__ part_o, float* __restrict__ part_ml, uint32_t hq,
                           uint32_t hkv, uint32_t block_size, uint32_t max_blocks,
                           uint32_t num_splits, float scale) {
    constexpr uint32_t D = 32 * E;
    const uint32_t split = blockIdx.x, kvh = blockIdx.y, seq = blockIdx.z;
    const uint32_t kv_len = (uint32_t)kv_lens[seq];
    const uint32_t chunk = max((kv_len + num_splits - 1) / num_splits, kMinKeysPerSplit);
    const uint32_t lo = split * chunk;
    if (lo >= kv_len) return;  // inactive split: writes nothing
    const uint32_t hi = min(lo + chunk, kv_len);
    const uint32_t group = hq / hkv, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int* table = block_tables + (size_t)seq * max_blocks;
    const float qk_scale = scale * kv_scales[kvh], v_scale = kv_scales[hkv + kvh];
    for (uint32_t j = warp; j < group; j += kWarps) {
        const uint32_t head = kvh * group + j;
        float qr[E], o[E];
        load_q<E>(q + ((size_t)seq * hq + head) * D, qr);
#pragma unroll
        for (int i = 0; i < E; ++i) o[i] = 0.0f;
        float m = -INFINITY, l = 0.0f;
        attend<E>(qr, k_cache, v_cache, table, kvh, hkv, block_size, lo, hi, qk_scale, v_scale,
                  m, l, o);
        const size_t idx = ((size_t)seq * hq + head) * num_splits + split;
        const float inv = 1.0f / l;
#pragma unroll
        for (int i = 0; i < E; ++i) part_o[idx * D + lane * E + i] = o[i] * inv;
        if (lane == 0) {
            part_ml[idx * 2] = m;
            part_ml[idx * 2 + 1] = l;
        }
    }
}

template <int E>
__device__ void prefill_fp8(const __nv_bfloat16* __restrict__ q,
                            const unsigned char* __restrict__ k_cache,
                            const unsigned char* __restrict__ v_cache,
                            const float* __restrict__ kv_scales,
                            const int* __restrict__ block_tables, const int* __restrict__ cu_q,
                            const int* __restrict__ kv_lens, __nv_bfloat16* __restrict__ out,
                            uint32_t hq, uint32_t hkv, uint32_t block_size, uint32_t max_blocks,
                            float scale) {
    constexpr uint32_t D = 32 * E;
    const uint32_t head = blockIdx.x, tile = blockIdx.y, seq = blockIdx.z;
    const uint32_t start = (uint32_t)cu_q[seq], q_len = (uint32_t)cu_q[seq + 1] - start;
    const uint32_t kv_len = (uint32_t)kv_lens[seq];
    const uint32_t kvh = head / (hq / hkv), warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int* table = block_tables + (size_t)seq * max_blocks;
    const float qk_scale = scale * kv_scales[kvh], v_scale = kv_scales[hkv + kvh];
    for (uint32_t r = warp; r < kQueryTile; r += kWarps) {
        const uint32_t row = tile * kQueryTile + r;
        if (row >= q_len) break;
        const size_t tok = start + row;
        float qr[E], o[E];
        load_q<E>(q + (tok * hq + head) * D, qr);
#pragma unroll
        for (int i = 0; i < E; ++i) o[i] = 0.0f;
        float m = -INFINITY, l = 0.0f;
        const uint32_t pos = kv_len - q_len + row;
        attend<E>(qr, k_cache, v_cache, table, kvh, hkv, block_size, 0, pos + 1, qk_scale,
                  v_scale, m, l, o);
        const float inv = 1.0f / l;
#pragma unroll
        for (int i = 0; i < E; ++i)
            out[(tok * hq + head) * D + lane * E + i] = atlas::f32_to_bf16(o[i] * inv);
    }
}

}  // namespace

extern "C" __global__ void __launch_bounds__(128)
decode_attn_fp8(const __nv_bfloat16* q, const unsigned char* k_cache,
                const unsigned char* v_cache, const float* kv_scales, const int* block_tables,
                const int* kv_lens, float* part_o, float* part_ml, uint32_t num_seqs,
                uint32_t hq, uint32_t hkv, uint32_t head_dim, uint32_t block_size,
                uint32_t max_blocks, uint32_t num_splits, float scale) {
    atlas::pdl_wait();
    (void)num_seqs;
    switch (head_dim) {
        case 64: decode_fp8<2>(q, k_cache, v_cache, kv_scales, block_tables, kv_lens, part_o,
                               part_ml, hq, hkv, block_size, max_blocks, num_splits, scale); break;
        case 128: decode_fp8<4>(q, k_cache, v_cache, kv_scales, block_tables, kv_lens, part_o,
                                part_ml, hq, hkv, block_size, max_blocks, num_splits, scale); break;
        case 256: decode_fp8<8>(q, k_cache, v_cache, kv_scales, block_tables, kv_lens, part_o,
                                part_ml, hq, hkv, block_size, max_blocks, num_splits, scale); break;
        default: break;  // ops.attention rejects other head dims before launch
    }
}

extern "C" __global__ void __launch_bounds__(128)
prefill_attn_fp8(const __nv_bfloat16* q, const unsigned char* k_cache,
                 const unsigned char* v_cache, const float* kv_scales, const int* block_tables,
                 const int* cu_q, const int* kv_lens, __nv_bfloat16* out, uint32_t num_seqs,
                 uint32_t hq, uint32_t hkv, uint32_t head_dim, uint32_t block_size,
                 uint32_t max_blocks, float scale) {
    atlas::pdl_wait();
    (void)num_seqs;
    switch (head_dim) {
        case 64: prefill_fp8<2>(q, k_cache, v_cache, kv_scales, block_tables, cu_q, kv_lens,
                                out, hq, hkv, block_size, max_blocks, scale); break;
        case 128: prefill_fp8<4>(q, k_cache, v_cache, kv_scales, block_tables, cu_q, kv_lens,
                                 out, hq, hkv, block_size, max_blocks, scale); break;
        case 256: prefill_fp8<8>(q, k_cache, v_cache, kv_scales, block_tables, cu_q, kv_lens,
                                 out, hq, hkv, block_size, max_blocks, scale); break;
        default: break;
    }
}
