// Expert parallelism: one rank's view of the router's choices.
//
// A rank of an expert-parallel group holds experts [first, first + count) of every MoE layer.
// Every rank runs the (replicated) router and top-k on the same rows, then this kernel
// rewrites each routed expert id in place to the rank's local index, or to -1 where the
// expert lives on another rank. ids is [rows, stride] i32 whose first `width` columns are the
// routed ids (the decode launches keep a shared expert's slots after them, left untouched):
//   e = ids[r * stride + j], j < width:  e - first  if first <= e < first + count, else -1
// The expert kernels (moe_decode.cu, moe_grouped*.cu) skip ids outside [0, experts), so run
// with experts = count they compute exactly this rank's share of every token's weighted sum
// (the top-k weights stay as the router normalized them over all experts), reading only the
// rank's expert weights; one all-reduce of those partial sums gives every rank the output.
//
// Launch: grid = ceil(rows * width / blockDim.x), block = 32..256 threads (ops/moe_ep.py).
#include "atlas_common.cuh"

extern "C" __global__ void __launch_bounds__(256)
moe_ep_localize_i32(int* ids, uint32_t rows, uint32_t stride, uint32_t width, uint32_t first,
                    uint32_t count) {
  const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= rows * width) return;
  atlas::pdl_enter();
  int* id = ids + static_cast<size_t>(i / width) * stride + i % width;
  const int local = *id - static_cast<int>(first);
  *id = (local >= 0 && local < static_cast<int>(count)) ? local : -1;
}
