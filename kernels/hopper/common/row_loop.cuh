// A block's loop over rows blockIdx.x, + gridDim.x, .. of a row-wise bandwidth kernel (the
// plain RMSNorm), the next row's loads in flight under the current row's work and stores.
// Why: one block a row made a 2,048-row prefill one wave of blocks that all load, then all
// compute and store, in step, so DRAM idled between the phases (the plain RMSNorm at 54% of
// copy where the add + RMSNorm, two waves, streamed at 83%: gpu138). gpu141 (H200): 14.31
// -> 12.79 us at 3 rows a block. (The embedding gather on it gained nothing: 10.21 us at one
// row a block, 10.23 at 4, 11.12 at 2; it keeps its one-row blocks.)
#pragma once

#include <cstdint>

namespace atlas {

// load(row, buf) fills a register buffer of type T with a row's data (issuing its loads);
// finish(row, buf) consumes it. Two buffers alternate in a loop unrolled by two (a
// `cur = next` copy would wait on the next row's data before the one after it could be
// requested). Every thread of a block runs the same rows, so `finish` may hold barriers.
template <class T, class Load, class Finish>
__device__ __forceinline__ void for_rows_prefetched(uint32_t rows, Load load, Finish finish) {
  uint32_t row = blockIdx.x;
  if (row >= rows) return;
  T a, b;
  load(row, a);
  while (true) {
    const uint32_t next = row + gridDim.x;
    if (next < rows) load(next, b);
    finish(row, a);
    if (next >= rows) return;
    row = next + gridDim.x;
    if (row < rows) load(row, a);
    finish(next, b);
    if (row >= rows) return;
  }
}

}  // namespace atlas
