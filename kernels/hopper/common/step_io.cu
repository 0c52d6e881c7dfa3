// A captured decode step's own input copy, as a kernel inside its graph, so that nothing
// runs on the stream between two steps' graphs (its output copy, the sampled ids into the
// host's buffer, is the sampler's: sampler.cu emit_token). Before these, a step queued a
// host-to-device copy of its inputs, a device-to-device copy of each carried token (the
// previous step's sample) and, after its graph, a device-to-host copy of the sampled ids:
// three copies whose engine hand-offs left ~20 us a step with no kernel running (gpu133,
// H200: the copies ran 1.4 + 2.6 + 0.8 us, started 3.4, 10.3 and 17.4 us after the graph's
// last kernel). The staging kernel and the sampler's emit_token read and write page-locked
// host memory mapped into the device's address space (unified addressing), which the host
// fills before the launch and reads after the step's event; the sampled ids go into one of
// the host's two alternating buffers (the host reads one while the next step may already
// write the other; the parity is a word of the staged inputs).
//
// stage_step_inputs_i32: dst[w] = src[w] for the words of four spans of the step's int32
// inputs (model/step_inputs.py StepLayout): [k * tok_stride, k * tok_stride + tokens) for
// k = 0, 1, 2 (the token ids, positions and KV slots of a step of `tokens` tokens), then
// [tail_at, tail_at + tail_words) (cu_q through the sampler's row records). A token id below
// zero in the first span is a carried token: -1 - r names row r of `sampled`, the sampler's
// output of the step before (on the device: this kernel runs after it in stream order).
// Once every word is read, ack[0] = src[seq_word] (the step's number, in a word of the tail):
// the host may then rewrite src for the next step while this one runs.
// Launch: grid = 1, block = 1024; each thread loads kWords words a pass before storing them.
// It waits like every entry but calls no PDL trigger, so the kernel after it launches only
// once it has completed (every later kernel may read the inputs, some before their own wait).

#include "atlas_common.cuh"

namespace {
constexpr uint32_t kStageThreads = 1024;
constexpr uint32_t kWords = 8;

// the input word of staged index i: the three token spans, then the tail
__device__ __forceinline__ uint32_t staged_word(uint32_t i, uint32_t tokens,
                                                uint32_t tok_stride, uint32_t tail_at) {
  const uint32_t lead = 3 * tokens;
  if (i >= lead) return tail_at + (i - lead);
  const uint32_t span = i / tokens;
  return span * tok_stride + (i - span * tokens);
}
}  // namespace

extern "C" __global__ void __launch_bounds__(kStageThreads)
stage_step_inputs_i32(const int32_t* __restrict__ src, int32_t* __restrict__ dst,
                      uint32_t tokens, uint32_t tok_stride, uint32_t tail_at,
                      uint32_t tail_words, const int32_t* __restrict__ sampled,
                      int32_t* __restrict__ ack, uint32_t seq_word) {
  atlas::pdl_wait();  // `sampled` is the kernel before's (a graph's first node: no wait)
  const uint32_t total = 3 * tokens + tail_words;
  const int32_t seq = threadIdx.x == 0 ? src[seq_word] : 0;  // read with the first pass
  for (uint32_t base = 0; base < total; base += kStageThreads * kWords) {
    int32_t v[kWords];
    uint32_t w[kWords];
#pragma unroll
    for (uint32_t j = 0; j < kWords; ++j) {  // every load of the pass issued before a store
      const uint32_t i = base + j * kStageThreads + threadIdx.x;
      w[j] = i < total ? staged_word(i, tokens, tok_stride, tail_at) : 0;
      v[j] = i < total ? src[w[j]] : 0;
    }
#pragma unroll
    for (uint32_t j = 0; j < kWords; ++j) {
      const uint32_t i = base + j * kStageThreads + threadIdx.x;
      if (i >= total) break;
      dst[w[j]] = i < tokens && v[j] < 0 ? sampled[-1 - v[j]] : v[j];
    }
  }
  __syncthreads();  // every word read (and stored) before the host hears of it
  if (threadIdx.x == 0) ack[0] = seq;
}
