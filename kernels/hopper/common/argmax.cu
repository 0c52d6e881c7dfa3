// Greedy decoding: out[r] = argmax of f32 logits row r. Ties go to the lowest index, NaN
// entries are ignored, and a row with no comparable entry (all NaN) yields 0.
//
// A row is split into chunks of kChunk values, one block each, so a 152K-entry vocabulary
// is read by ~38 SMs instead of one. Each block writes its (value, index) partial; the last
// block of the row to arrive reduces them (arrive_last) and writes out[r].
//
// Launch: grid = (ceil(n / 4096), rows), block = 256.
// partials: ArgBest [rows, ceil(n / 4096)] scratch; counters: u32 [rows], zero before the
// launch and left zero after it.
#include "argmax_reduce.cuh"

namespace {
constexpr int kThreads = 256;
constexpr int kVec = 4;  // float4 loads per thread
constexpr uint32_t kChunk = 4u * kVec * kThreads;
}  // namespace

extern "C" __global__ void __launch_bounds__(kThreads)
argmax_f32(const float* __restrict__ logits, int32_t* __restrict__ out,
           atlas::ArgBest* __restrict__ partials, unsigned* __restrict__ counters,
           uint32_t rows, uint32_t n) {
  const uint32_t r = blockIdx.y, chunks = (n + kChunk - 1) / kChunk;
  if (r >= rows || blockIdx.x >= chunks) return;
  __shared__ atlas::ArgBest scratch[32];
  __shared__ int s_last;
  atlas::pdl_enter();
  const float* row = logits + static_cast<size_t>(r) * n;
  const uint32_t begin = blockIdx.x * kChunk;
  float x[4 * kVec];
  atlas::load_chunk<kVec>(row, n, begin, x);
  const atlas::ArgBest mine = atlas::block_argmax(atlas::thread_argmax<kVec>(x, begin), scratch);
  atlas::ArgBest* part = partials + static_cast<size_t>(r) * chunks;
  if (threadIdx.x == 0) part[blockIdx.x] = mine;
  if (!atlas::arrive_last(counters + r, chunks, &s_last)) return;
  atlas::ArgBest best = atlas::arg_none();
  for (uint32_t c = threadIdx.x; c < chunks; c += blockDim.x) {
    const float v = __ldcg(&part[c].value);
    const int i = __ldcg(&part[c].index);
    best = atlas::arg_merge(best, {v, i});
  }
  best = atlas::block_argmax(best, scratch);
  if (threadIdx.x == 0) out[r] = best.index == atlas::kNoIndex ? 0 : best.index;
}
