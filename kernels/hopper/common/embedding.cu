// Embedding lookup (also used as a row gather): out[i, :] = table[ids[i], :] for bf16 rows
// of `dim` elements. An id outside [0, vocab) writes a zero row rather than reading out of
// bounds, so a bad token id can never fault the device. embedding_scaled_bf16 multiplies each
// element by `scale` with one bf16 rounding (Gemma's `embed * bf16(sqrt(hidden))`: the caller
// passes the bf16 value of its scale).
//
// Launch: grid = (g, chunks) with any g <= n, block = 32..1024 threads (multiple of 32),
// dim % 8 == 0. Block (b, c) copies 16-byte vectors [c * kVecs * blockDim.x, (c + 1) * kVecs
// * blockDim.x) of rows b, b + g, .., so chunks = ceil(dim / (8 * kVecs * blockDim.x)). A
// thread issues all of its (up to kVecs) loads before its first store: a copy is
// latency-bound unless several loads per thread are in flight; the wait for a row's id is
// paid under the row before.
#include "atlas_common.cuh"
#include "row_loop.cuh"

namespace {
constexpr uint32_t kVecs = 4;

// kScale: every element times `scale`, rounded to bf16 once (a zero row stays zero). Rows
// blockIdx.x, + gridDim.x, .. (row_loop.cuh: the next row's id and vectors requested before
// the current row's stores).
template <bool kScale>
__device__ __forceinline__ void embedding_rows(const int32_t* __restrict__ ids,
                                               const __nv_bfloat16* __restrict__ table,
                                               __nv_bfloat16* __restrict__ out, uint32_t n,
                                               uint32_t dim, uint32_t vocab, float scale) {
  if (blockIdx.x >= n) return;
  atlas::pdl_enter();  // ids and (for the row gather) the table come from earlier kernels
  const uint32_t nvec = dim / 8;
  const uint32_t first = blockIdx.y * kVecs * blockDim.x + threadIdx.x;
  struct Row { uint4 v[kVecs]; };
  atlas::for_rows_prefetched<Row>(
      n,
      [&](uint32_t i, Row& r) {
        const int32_t id = ids[i];
        const bool valid = id >= 0 && static_cast<uint32_t>(id) < vocab;
        const uint4* src =
            reinterpret_cast<const uint4*>(table + (valid ? static_cast<size_t>(id) : 0) * dim);
#pragma unroll
        for (uint32_t j = 0; j < kVecs; ++j) {
          const uint32_t k = first + j * blockDim.x;
          r.v[j] = valid && k < nvec ? src[k] : make_uint4(0u, 0u, 0u, 0u);
        }
      },
      [&](uint32_t i, Row& r) {
        uint4* dst = reinterpret_cast<uint4*>(out + static_cast<size_t>(i) * dim);
#pragma unroll
        for (uint32_t j = 0; j < kVecs; ++j) {
          const uint32_t k = first + j * blockDim.x;
          if (k >= nvec) continue;
          if constexpr (kScale) {
            __nv_bfloat162* h = reinterpret_cast<__nv_bfloat162*>(&r.v[j]);
#pragma unroll
            for (int e = 0; e < 4; ++e) {
              const float2 f = __bfloat1622float2(h[e]);
              h[e] = __floats2bfloat162_rn(f.x * scale, f.y * scale);
            }
          }
          dst[k] = r.v[j];
        }
      });
}

}  // namespace

extern "C" __global__ void __launch_bounds__(1024)
embedding_bf16(const int32_t* __restrict__ ids, const __nv_bfloat16* __restrict__ table,
               __nv_bfloat16* __restrict__ out, uint32_t n, uint32_t dim, uint32_t vocab) {
  embedding_rows<false>(ids, table, out, n, dim, vocab, 1.f);
}

extern "C" __global__ void __launch_bounds__(1024)
embedding_scaled_bf16(const int32_t* __restrict__ ids, const __nv_bfloat16* __restrict__ table,
                      __nv_bfloat16* __restrict__ out, uint32_t n, uint32_t dim, uint32_t vocab,
                      float scale) {
  embedding_rows<true>(ids, table, out, n, dim, vocab, scale);
}
