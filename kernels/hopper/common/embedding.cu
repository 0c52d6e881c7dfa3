// Embedding lookup (also used as a row gather): out[i, :] = table[ids[i], :] for bf16 rows
// of `dim` elements. An id outside [0, vocab) writes a zero row rather than reading out of
// bounds, so a bad token id can never fault the device. embedding_scaled_bf16 multiplies each
// element by `scale` with one bf16 rounding (Gemma's `embed * bf16(sqrt(hidden))`: the caller
// passes the bf16 value of its scale).
//
// Launch: grid = (n, chunks), block = 32..1024 threads (multiple of 32), dim % 8 == 0.
// Block (i, c) copies 16-byte vectors [c * kVecs * blockDim.x, (c + 1) * kVecs * blockDim.x)
// of row i, so chunks = ceil(dim / (8 * kVecs * blockDim.x)). A thread issues all of its
// (up to kVecs) loads before its first store: a copy is latency-bound unless several loads
// per thread are in flight, and the only other wait, for the id, is paid once per block.
#include "atlas_common.cuh"
#include "bf16_vec.cuh"

namespace {
constexpr uint32_t kVecs = 4;

// kScale: every element times `scale`, rounded to bf16 once (a zero row stays zero)
template <bool kScale>
__device__ __forceinline__ void embedding_rows(const int32_t* __restrict__ ids,
                                               const __nv_bfloat16* __restrict__ table,
                                               __nv_bfloat16* __restrict__ out, uint32_t n,
                                               uint32_t dim, uint32_t vocab, float scale) {
  const uint32_t i = blockIdx.x;
  if (i >= n) return;
  atlas::pdl_enter();  // ids and (for the row gather) the table come from earlier kernels
  const int32_t id = ids[i];
  const bool valid = id >= 0 && static_cast<uint32_t>(id) < vocab;
  const uint32_t nvec = dim / 8;
  const uint32_t first = blockIdx.y * kVecs * blockDim.x + threadIdx.x;
  const size_t row = valid ? static_cast<size_t>(id) : 0;
  const uint4* src = reinterpret_cast<const uint4*>(table + row * dim);
  uint4* dst = reinterpret_cast<uint4*>(out + static_cast<size_t>(i) * dim);
  uint4 v[kVecs];
#pragma unroll
  for (uint32_t j = 0; j < kVecs; ++j) {
    const uint32_t k = first + j * blockDim.x;
    v[j] = valid && k < nvec ? src[k] : make_uint4(0u, 0u, 0u, 0u);
  }
#pragma unroll
  for (uint32_t j = 0; j < kVecs; ++j) {
    const uint32_t k = first + j * blockDim.x;
    if (k >= nvec) continue;
    dst[k] = kScale ? atlas::scale_bf16x8(v[j], scale) : v[j];
  }
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
