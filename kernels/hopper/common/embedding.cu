// Embedding lookup (also used as a row gather): out[i, :] = table[ids[i], :] for bf16 rows
// of `dim` elements. An id outside [0, vocab) writes a zero row rather than reading out of
// bounds, so a bad token id can never fault the device.
//
// Launch: grid = n, block = 32..256 threads; dim % 8 == 0 (16-byte vectors).
#include "atlas_common.cuh"

extern "C" __global__ void __launch_bounds__(256)
embedding_bf16(const int32_t* __restrict__ ids, const __nv_bfloat16* __restrict__ table,
               __nv_bfloat16* __restrict__ out, uint32_t n, uint32_t dim, uint32_t vocab) {
  const uint32_t i = blockIdx.x;
  if (i >= n) return;
  atlas::pdl_enter();  // ids and (for the row gather) the table come from earlier kernels
  const int32_t id = ids[i];
  const bool valid = id >= 0 && static_cast<uint32_t>(id) < vocab;
  const uint32_t nvec = dim / 8;
  const size_t row = valid ? static_cast<size_t>(id) : 0;
  const uint4* src = reinterpret_cast<const uint4*>(table + row * dim);
  uint4* dst = reinterpret_cast<uint4*>(out + static_cast<size_t>(i) * dim);
  for (uint32_t v = threadIdx.x; v < nvec; v += blockDim.x)
    dst[v] = valid ? src[v] : make_uint4(0u, 0u, 0u, 0u);
}
