// Attention over a quantized paged KV cache (FP8 E4M3 or NVFP4), dequantizing in registers.
//
// Pools as kernel_abi's bf16 cache with quantized rows: a row (block, kv head, offset) is
// head_dim E4M3 code bytes (FP8), or head_dim / 2 bytes of E2M1 nibbles then head_dim / 16
// E4M3 group-scale bytes (NVFP4, kv_quant.cu's layout). kv_scales f32 [2, hkv]: an element
// is code * scale (FP8) or e2m1 * group scale * scale (NVFP4) of its (K or V, kv head). Same
// block tables, kv_lens, split rule and outputs as attention.cu's bf16 kernels, so
// decode_attn_combine_bf16 merges these partials unchanged.
//
// decode_attn_{fp8,nvfp4}: grid (num_splits, hkv, num_seqs), 128 threads (split rule of
//   attention.cu). A block reads its split's K/V rows once for all the kv head's q heads
//   (passes of up to 4), D / 8 lanes per key with 8 elements each, 4 keys per lane in
//   flight and the next iteration's rows loaded before this one's are used; scores
//   s = (q . codes) * (lane's group scale; 1 for FP8) summed over the key's lanes, times
//   scale * k_scale, online softmax in f32 log2 units, P unrounded, O accumulated in f32
//   with the group scale per key row and v_scale once at the end. Writes the partials.
// prefill_attn_{fp8,nvfp4}: grid (hq, ceil(max_q_len / 64), num_seqs), 128 threads: warp w
//   serves rows w, w + 4, ... of the block's 64-query tile, one key at a time: lane l holds
//   elements [l E, l E + E) of the head (E = head_dim / 32; NVFP4's 16-element groups hold
//   whole lanes) and the warp sums q.k by shuffles (the CUDA-core baseline: no tensor
//   cores); query i of a chunk of q_len sits at position kv_len - q_len + i and sees keys
//   0..that position; out bf16 [tokens, hq, D].
#include <cuda_fp8.h>
#include <cuda_fp16.h>
#include <cstdint>
#include "atlas_common.cuh"
#include "decode_merge.cuh"

namespace {

constexpr uint32_t kWarps = 4;
constexpr uint32_t kQueryTile = 64;
constexpr uint32_t kMinKeysPerSplit = 32;  // ops.attention.DECODE_MIN_KEYS_PER_SPLIT

__device__ __forceinline__ float e4m3_to_f32(uint32_t code) {
    const __half_raw h = __nv_cvt_fp8_to_halfraw((__nv_fp8_storage_t)code, __NV_E4M3);
    return __half2float(__half(h));
}

// FP8 rows: head_dim code bytes; lane l's E codes start at byte l E (E = 2, 4 or 8: aligned
// since the row pitch and lane offsets are multiples of E)
struct Fp8Rows {
    __host__ __device__ static constexpr uint32_t pitch(uint32_t d) { return d; }
    template <int E>
    __device__ __forceinline__ static float load(const unsigned char* row, uint32_t lane,
                                                 float* out) {
        const unsigned char* p = row + lane * E;
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
        return 1.0f;
    }
    // decode's lanes: 8 elements at element 8 sub (8 code bytes), factor 1
    template <int D>
    __device__ __forceinline__ static uint2 load8(const unsigned char* row, uint32_t sub) {
        return *reinterpret_cast<const uint2*>(row + sub * 8);
    }
    __device__ __forceinline__ static float decode8(uint2 raw, float* out) {
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            out[i] = e4m3_to_f32((raw.x >> (8 * i)) & 0xff);
            out[i + 4] = e4m3_to_f32((raw.y >> (8 * i)) & 0xff);
        }
        return 1.0f;
    }
};

// value of an E2M1 nibble: its exponent and mantissa bits placed in an f32's (bits 23-22)
// give e2m1 * 2^-126 exactly (subnormal for the codes 0 and 1)
__device__ __forceinline__ float e2m1_to_f32(uint32_t nib) {
    return __uint_as_float(((nib & 8u) << 28) | ((nib & 7u) << 22)) * 0x1p126f;
}

// NVFP4 rows: head_dim / 2 nibble bytes, then one E4M3 scale byte per 16 elements; lane l's
// E nibbles are E / 2 bytes at byte l E / 2 (pitch 9 head_dim / 16 is a multiple of 4), its
// group scale is byte l E / 16 of the scale tail. Returns the group scale.
struct Nvfp4Rows {
    __host__ __device__ static constexpr uint32_t pitch(uint32_t d) { return d / 2 + d / 16; }
    template <int E>
    __device__ __forceinline__ static float load(const unsigned char* row, uint32_t lane,
                                                 float* out) {
        constexpr uint32_t D = 32 * E;
        const unsigned char* p = row + lane * (E / 2);
        uint32_t w;
        if constexpr (E == 2) w = *p;
        else if constexpr (E == 4) w = *reinterpret_cast<const unsigned short*>(p);
        else w = *reinterpret_cast<const uint32_t*>(p);
#pragma unroll
        for (int i = 0; i < E; ++i) out[i] = e2m1_to_f32(w >> (4 * i));
        return e4m3_to_f32(row[D / 2 + lane * E / 16]);
    }
    // decode's lanes: 8 elements at element 8 sub (4 nibble bytes; x) and the scale byte of
    // their group (y); the factor is the group scale
    template <int D>
    __device__ __forceinline__ static uint2 load8(const unsigned char* row, uint32_t sub) {
        return make_uint2(*reinterpret_cast<const uint32_t*>(row + sub * 4),
                          row[D / 2 + sub / 2]);
    }
    __device__ __forceinline__ static float decode8(uint2 raw, float* out) {
#pragma unroll
        for (int i = 0; i < 8; ++i) out[i] = e2m1_to_f32(raw.x >> (4 * i));
        return e4m3_to_f32(raw.y);
    }
};

// Online softmax of one query row (q already in registers) over keys [lo, hi) of one
// sequence; leaves m, l and the unnormalized o in the caller's registers.
template <class Rows, int E>
__device__ __forceinline__ void attend(const float* q, const unsigned char* k_cache,
                                       const unsigned char* v_cache, const int* table,
                                       uint32_t kvh, uint32_t hkv, uint32_t block_size,
                                       uint32_t lo, uint32_t hi, float qk_scale, float v_scale,
                                       float& m, float& l, float* o) {
    constexpr uint32_t P = Rows::pitch(32 * E);
    const uint32_t lane = threadIdx.x % 32;
    for (uint32_t key = lo; key < hi; ++key) {
        const size_t row = ((size_t)table[key / block_size] * hkv + kvh) * block_size
                           + key % block_size;
        float k[E], v[E];
        const float kf = Rows::template load<E>(k_cache + row * P, lane, k);
        const float vf = Rows::template load<E>(v_cache + row * P, lane, v);
        float dot = 0.0f;
#pragma unroll
        for (int i = 0; i < E; ++i) dot += q[i] * k[i];
        const float s = atlas::warp_sum(dot * kf) * qk_scale;
        const float m_new = fmaxf(m, s);
        const float corr = expf(m - m_new);  // m = -inf at the first key: 0
        const float p = expf(s - m_new);
        const float pv = p * (vf * v_scale);
        l = l * corr + p;
#pragma unroll
        for (int i = 0; i < E; ++i) o[i] = o[i] * corr + pv * v[i];
        m = m_new;
    }
}

template <int E>
__device__ __forceinline__ void load_q(const __nv_bfloat16* q, float* out) {
    const uint32_t lane = threadIdx.x % 32;
#pragma unroll
    for (int i = 0; i < E; ++i) out[i] = atlas::bf16_to_f32(q[lane * E + i]);
}

// ---- decode ------------------------------------------------------------------------------
// A block reads its split's K/V rows once and serves the kv head's q heads in passes of up
// to kDecodeHeads (their q and o in registers). D / 8 lanes share a key, 8 elements each
// (FP8: 8 code bytes; NVFP4: 4 nibble bytes and their group's scale byte), so a warp covers
// 32 / (D / 8) keys and the block kKeyGroups; each lane has kDecodeUnroll keys in flight and
// loads the next iteration's rows before it uses this one's. Softmax in log2 units; the
// key groups merge by shuffles, the warps through shared memory; v_scale multiplies the
// merged o once. Partials always (decode_attn_combine_bf16 merges them).
constexpr int kDecodeHeads = atlas::kMergeHeads;
static_assert(kWarps == atlas::kMergeWarps, "decode_merge.cuh merges 4 warps");
constexpr int kDecodeUnroll = 4;
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

template <int D>
struct DecodeShape {
    static constexpr int kLanesPerKey = D / 8;
    static constexpr int kKeyGroups = kWarps * (32 / kLanesPerKey);
    static constexpr int kStep = kKeyGroups * kDecodeUnroll;
};

struct KvLanes {
    uint2 k[kDecodeUnroll], v[kDecodeUnroll];
};

// this lane's 8 elements of keys base + u * kKeyGroups + grp (zeros past end)
template <class Rows, int D>
__device__ __forceinline__ KvLanes load_keys(const unsigned char* __restrict__ k_cache,
                                             const unsigned char* __restrict__ v_cache,
                                             const int* __restrict__ table, int base, int end,
                                             int grp, uint32_t sub, uint32_t hkv, uint32_t kvh,
                                             uint32_t block_size) {
    constexpr uint32_t P = Rows::pitch(D);
    KvLanes kv;
#pragma unroll
    for (int u = 0; u < kDecodeUnroll; ++u) {
        const int p = base + u * DecodeShape<D>::kKeyGroups + grp;
        kv.k[u] = make_uint2(0u, 0u);
        kv.v[u] = make_uint2(0u, 0u);
        if (p < end) {
            const size_t row = ((size_t)table[p / block_size] * hkv + kvh) * block_size
                               + p % block_size;
            kv.k[u] = Rows::template load8<D>(k_cache + row * P, sub);
            kv.v[u] = Rows::template load8<D>(v_cache + row * P, sub);
        }
    }
    return kv;
}

// One pass over the split's keys [begin, end) for q heads h0 .. h0 + G - 1.
template <class Rows, int D, int G>
__device__ __forceinline__ void decode_pass(
        uint32_t h0, int begin, int end, const __nv_bfloat16* __restrict__ q,
        const unsigned char* __restrict__ k_cache, const unsigned char* __restrict__ v_cache,
        const int* __restrict__ table, float* __restrict__ part_o, float* __restrict__ part_ml,
        uint32_t hq, uint32_t hkv, uint32_t block_size, uint32_t num_splits, float qk_scale,
        float v_scale, atlas::DecodeScratch& red) {
    using Shape = DecodeShape<D>;
    const uint32_t split = blockIdx.x, kvh = blockIdx.y, b = blockIdx.z;
    const uint32_t lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const uint32_t sub = lane % Shape::kLanesPerKey;
    const int grp = (int)(warp * (32 / Shape::kLanesPerKey) + lane / Shape::kLanesPerKey);

    KvLanes cur = load_keys<Rows, D>(k_cache, v_cache, table, begin, end, grp, sub, hkv, kvh,
                                     block_size);
    float qf[G][8], m[G], l[G], o[G][8];
    const float q_mul = qk_scale * kLog2e;
#pragma unroll
    for (int g = 0; g < G; ++g) {
        const uint4 raw = *reinterpret_cast<const uint4*>(
            q + ((size_t)b * hq + h0 + g) * D + sub * 8);
        const uint32_t w[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            qf[g][2 * i] = __uint_as_float(w[i] << 16) * q_mul;
            qf[g][2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u) * q_mul;
        }
        m[g] = -INFINITY;
        l[g] = 0.0f;
#pragma unroll
        for (int i = 0; i < 8; ++i) o[g][i] = 0.0f;
    }

    for (int base = begin; base < end; base += Shape::kStep) {  // uniform: shuffles are safe
        const KvLanes next = load_keys<Rows, D>(k_cache, v_cache, table, base + Shape::kStep,
                                                end, grp, sub, hkv, kvh, block_size);
        float s[kDecodeUnroll][G];
#pragma unroll
        for (int u = 0; u < kDecodeUnroll; ++u) {
            const bool ok = base + u * Shape::kKeyGroups + grp < end;
            float kf[8];
            const float kfac = Rows::decode8(cur.k[u], kf);
#pragma unroll
            for (int g = 0; g < G; ++g) {
                float d = 0.0f;
#pragma unroll
                for (int i = 0; i < 8; ++i) d = fmaf(qf[g][i], kf[i], d);
                d *= kfac;
#pragma unroll
                for (int off = Shape::kLanesPerKey / 2; off >= 1; off >>= 1)
                    d += __shfl_xor_sync(0xffffffffu, d, off);
                s[u][g] = ok ? d : -INFINITY;
            }
        }
        float ref[G];
#pragma unroll
        for (int g = 0; g < G; ++g) {
            float mx = m[g];
#pragma unroll
            for (int u = 0; u < kDecodeUnroll; ++u) mx = fmaxf(mx, s[u][g]);
            ref[g] = mx == -INFINITY ? 0.0f : mx;
            const float corr = exp2f(m[g] - ref[g]);
            l[g] *= corr;
#pragma unroll
            for (int i = 0; i < 8; ++i) o[g][i] *= corr;
            m[g] = mx;
        }
#pragma unroll
        for (int u = 0; u < kDecodeUnroll; ++u) {  // one key's V decoded at a time
            float vf[8];
            const float vfac = Rows::decode8(cur.v[u], vf);
#pragma unroll
            for (int g = 0; g < G; ++g) {
                const float p = exp2f(s[u][g] - ref[g]);
                l[g] += p;
                const float pv = p * vfac;
#pragma unroll
                for (int i = 0; i < 8; ++i) o[g][i] = fmaf(pv, vf[i], o[g][i]);
            }
        }
        cur = next;
    }

    atlas::stash_warp_partials<G, Shape::kLanesPerKey>(m, l, o, red);
    __syncthreads();
    for (uint32_t idx = threadIdx.x; idx < G * D; idx += blockDim.x) {
        const uint32_t g = idx / D, d = idx % D;
        float mx, total;
        const float o_d = atlas::merge_warp_partials(red, g, d, mx, total);
        const size_t row = ((size_t)b * hq + h0 + g) * num_splits + split;
        part_o[row * D + d] = o_d * v_scale;
        if (d == 0) {
            part_ml[row * 2] = mx * kLn2;
            part_ml[row * 2 + 1] = total;
        }
    }
    __syncthreads();  // `red` is reused by the next pass
}

template <class Rows, int E>
__device__ void decode_rows(const __nv_bfloat16* __restrict__ q,
                            const unsigned char* __restrict__ k_cache,
                            const unsigned char* __restrict__ v_cache,
                            const float* __restrict__ kv_scales,
                            const int* __restrict__ block_tables,
                            const int* __restrict__ kv_lens, float* __restrict__ part_o,
                            float* __restrict__ part_ml, uint32_t hq, uint32_t hkv,
                            uint32_t block_size, uint32_t max_blocks, uint32_t num_splits,
                            float scale, atlas::DecodeScratch& red) {
    constexpr int D = 32 * E;
    const uint32_t split = blockIdx.x, kvh = blockIdx.y, seq = blockIdx.z;
    const uint32_t kv_len = (uint32_t)kv_lens[seq];
    const uint32_t chunk = max((kv_len + num_splits - 1) / num_splits, kMinKeysPerSplit);
    const uint32_t lo = split * chunk;
    if (lo >= kv_len) return;  // inactive split: writes nothing
    const uint32_t hi = min(lo + chunk, kv_len);
    const uint32_t group = hq / hkv;
    const int* table = block_tables + (size_t)seq * max_blocks;
    const float qk_scale = scale * kv_scales[kvh], v_scale = kv_scales[hkv + kvh];
    for (uint32_t h = 0; h < group; h += kDecodeHeads) {
        const uint32_t h0 = kvh * group + h;
        switch (min(group - h, (uint32_t)kDecodeHeads)) {
            case 4: decode_pass<Rows, D, 4>(h0, lo, hi, q, k_cache, v_cache, table, part_o,
                                            part_ml, hq, hkv, block_size, num_splits, qk_scale,
                                            v_scale, red); break;
            case 3: decode_pass<Rows, D, 3>(h0, lo, hi, q, k_cache, v_cache, table, part_o,
                                            part_ml, hq, hkv, block_size, num_splits, qk_scale,
                                            v_scale, red); break;
            case 2: decode_pass<Rows, D, 2>(h0, lo, hi, q, k_cache, v_cache, table, part_o,
                                            part_ml, hq, hkv, block_size, num_splits, qk_scale,
                                            v_scale, red); break;
            default: decode_pass<Rows, D, 1>(h0, lo, hi, q, k_cache, v_cache, table, part_o,
                                             part_ml, hq, hkv, block_size, num_splits,
                                             qk_scale, v_scale, red); break;
        }
    }
}

template <class Rows, int E>
__device__ void prefill_rows(const __nv_bfloat16* __restrict__ q,
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
        attend<Rows, E>(qr, k_cache, v_cache, table, kvh, hkv, block_size, 0, pos + 1, qk_scale,
                  v_scale, m, l, o);
        const float inv = 1.0f / l;
#pragma unroll
        for (int i = 0; i < E; ++i)
            out[(tok * hq + head) * D + lane * E + i] = atlas::f32_to_bf16(o[i] * inv);
    }
}


template <class Rows>
__device__ __forceinline__ void decode_entry(
        const __nv_bfloat16* q, const unsigned char* k_cache, const unsigned char* v_cache,
        const float* kv_scales, const int* block_tables, const int* kv_lens, float* part_o,
        float* part_ml, uint32_t hq, uint32_t hkv, uint32_t head_dim, uint32_t block_size,
        uint32_t max_blocks, uint32_t num_splits, float scale) {
    __shared__ atlas::DecodeScratch red;  // one per kernel, whichever head_dim runs
    switch (head_dim) {
        case 64: decode_rows<Rows, 2>(q, k_cache, v_cache, kv_scales, block_tables, kv_lens,
                                      part_o, part_ml, hq, hkv, block_size, max_blocks,
                                      num_splits, scale, red); break;
        case 128: decode_rows<Rows, 4>(q, k_cache, v_cache, kv_scales, block_tables, kv_lens,
                                       part_o, part_ml, hq, hkv, block_size, max_blocks,
                                       num_splits, scale, red); break;
        case 256: decode_rows<Rows, 8>(q, k_cache, v_cache, kv_scales, block_tables, kv_lens,
                                       part_o, part_ml, hq, hkv, block_size, max_blocks,
                                       num_splits, scale, red); break;
        default: break;  // ops.attention rejects other head dims before launch
    }
}

template <class Rows>
__device__ __forceinline__ void prefill_entry(
        const __nv_bfloat16* q, const unsigned char* k_cache, const unsigned char* v_cache,
        const float* kv_scales, const int* block_tables, const int* cu_q, const int* kv_lens,
        __nv_bfloat16* out, uint32_t hq, uint32_t hkv, uint32_t head_dim, uint32_t block_size,
        uint32_t max_blocks, float scale) {
    switch (head_dim) {
        case 64: prefill_rows<Rows, 2>(q, k_cache, v_cache, kv_scales, block_tables, cu_q,
                                       kv_lens, out, hq, hkv, block_size, max_blocks, scale);
            break;
        case 128: prefill_rows<Rows, 4>(q, k_cache, v_cache, kv_scales, block_tables, cu_q,
                                        kv_lens, out, hq, hkv, block_size, max_blocks, scale);
            break;
        case 256: prefill_rows<Rows, 8>(q, k_cache, v_cache, kv_scales, block_tables, cu_q,
                                        kv_lens, out, hq, hkv, block_size, max_blocks, scale);
            break;
        default: break;
    }
}

}  // namespace

// one entry point per (pass, format): the ABI names them, so no macro writes them
extern "C" __global__ void __launch_bounds__(128)
decode_attn_fp8(const __nv_bfloat16* q, const unsigned char* k_cache,
                const unsigned char* v_cache, const float* kv_scales, const int* block_tables,
                const int* kv_lens, float* part_o, float* part_ml, uint32_t num_seqs,
                uint32_t hq, uint32_t hkv, uint32_t head_dim, uint32_t block_size,
                uint32_t max_blocks, uint32_t num_splits, float scale) {
    atlas::pdl_wait();
    (void)num_seqs;
    decode_entry<Fp8Rows>(q, k_cache, v_cache, kv_scales, block_tables, kv_lens, part_o,
                          part_ml, hq, hkv, head_dim, block_size, max_blocks, num_splits,
                          scale);
}

extern "C" __global__ void __launch_bounds__(128)
decode_attn_nvfp4(const __nv_bfloat16* q, const unsigned char* k_cache,
                  const unsigned char* v_cache, const float* kv_scales,
                  const int* block_tables, const int* kv_lens, float* part_o, float* part_ml,
                  uint32_t num_seqs, uint32_t hq, uint32_t hkv, uint32_t head_dim,
                  uint32_t block_size, uint32_t max_blocks, uint32_t num_splits, float scale) {
    atlas::pdl_wait();
    (void)num_seqs;
    decode_entry<Nvfp4Rows>(q, k_cache, v_cache, kv_scales, block_tables, kv_lens, part_o,
                            part_ml, hq, hkv, head_dim, block_size, max_blocks, num_splits,
                            scale);
}

extern "C" __global__ void __launch_bounds__(128)
prefill_attn_fp8(const __nv_bfloat16* q, const unsigned char* k_cache,
                 const unsigned char* v_cache, const float* kv_scales, const int* block_tables,
                 const int* cu_q, const int* kv_lens, __nv_bfloat16* out, uint32_t num_seqs,
                 uint32_t hq, uint32_t hkv, uint32_t head_dim, uint32_t block_size,
                 uint32_t max_blocks, float scale) {
    atlas::pdl_wait();
    (void)num_seqs;
    prefill_entry<Fp8Rows>(q, k_cache, v_cache, kv_scales, block_tables, cu_q, kv_lens, out,
                           hq, hkv, head_dim, block_size, max_blocks, scale);
}

extern "C" __global__ void __launch_bounds__(128)
prefill_attn_nvfp4(const __nv_bfloat16* q, const unsigned char* k_cache,
                   const unsigned char* v_cache, const float* kv_scales,
                   const int* block_tables, const int* cu_q, const int* kv_lens,
                   __nv_bfloat16* out, uint32_t num_seqs, uint32_t hq, uint32_t hkv,
                   uint32_t head_dim, uint32_t block_size, uint32_t max_blocks, float scale) {
    atlas::pdl_wait();
    (void)num_seqs;
    prefill_entry<Nvfp4Rows>(q, k_cache, v_cache, kv_scales, block_tables, cu_q, kv_lens, out,
                             hq, hkv, head_dim, block_size, max_blocks, scale);
}
