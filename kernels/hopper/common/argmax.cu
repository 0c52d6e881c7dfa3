// Greedy decoding: out[r] = argmax of f32 logits row r. Ties go to the lowest index, NaN
// entries are ignored, and a row with no comparable entry (all NaN) yields 0.
//
// Launch: grid = rows, block = 32..1024 threads (multiple of 32).
#include "argmax_reduce.cuh"

extern "C" __global__ void __launch_bounds__(1024)
argmax_f32(const float* __restrict__ logits, int32_t* __restrict__ out, uint32_t rows,
           uint32_t n) {
  if (blockIdx.x >= rows) return;
  __shared__ atlas::ArgBest scratch[32];
  const float* row = logits + static_cast<size_t>(blockIdx.x) * n;
  const atlas::ArgBest best = atlas::row_argmax(row, n, scratch);
  if (threadIdx.x == 0) out[blockIdx.x] = best.index == atlas::kNoIndex ? 0 : best.index;
}
