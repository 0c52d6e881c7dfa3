// Causal depthwise conv1d + SiLU with a rolling per-sequence state (Gated-DeltaNet's
// short convolution; transformers' causal_conv1d_fn / causal_conv1d_update in bf16):
//   y[t, c]   = bf16(sum_j w[c, j] * x[t - kernel + 1 + j, c])     (f32 sum)
//   out[t, c] = bf16(y * sigmoid(y))
// x rows are x_pitch elements apart (the conv reads the first `channels` columns of the fused
// input projection); w is bf16 [channels, kernel]. The state of a sequence is a ring of the
// inputs at its last positions: conv_state bf16 [slots, kernel, channels], the input at
// position p in row p % kernel. The history before a chunk starting at position
// start = kv_lens[b] - q_len is read from the ring rows of positions start - kernel + 1 ..
// start - 1; positions below 0 read zero, so a fresh slot (start == 0) is never read. The
// ring keeps `kernel` rows although a step needs kernel - 1 of them: a decode step writes its
// input into the one row no reader of that step touches (gdn_decode.cu relies on this, where
// the blocks of several value heads read the same key channels while one of them writes).
//
// Launch (ops/linear_attention.py): grid (ceil(channels / 128), ceil(max_q_len / kTokenTile),
// num_seqs), 128 threads, one channel per thread walking the tile's tokens with a sliding
// window in registers, the inputs of kLoadBatch tokens loaded at a time (one round trip per
// batch rather than per token). The kernel is left-padded to kMaxKernel taps with zero weights so the
// window has a fixed size (static register indices). Only token tile 0 of a sequence reads
// the ring (tiles >= 1 start kTokenTile >= kernel tokens in), and the same thread writes the
// chunk's last kernel - 1 inputs into it after all its reads.
#include "atlas_common.cuh"

namespace {

constexpr int kThreads = 128;   // ops/linear_attention.py CONV_THREADS
constexpr int kTokenTile = 64;  // ops/linear_attention.py CONV_TOKEN_TILE
constexpr int kMaxKernel = 8;   // ops/linear_attention.py CONV_MAX_KERNEL
constexpr int kWin = kMaxKernel - 1;
constexpr int kLoadBatch = 8;   // tokens whose inputs a thread loads before using the first

}  // namespace

extern "C" __global__ void __launch_bounds__(kThreads)
causal_conv1d_silu_bf16(const __nv_bfloat16* __restrict__ x, uint32_t x_pitch,
                        const __nv_bfloat16* __restrict__ w, __nv_bfloat16* __restrict__ conv_state,
                        const int32_t* __restrict__ state_slots, const int32_t* __restrict__ cu_q,
                        const int32_t* __restrict__ kv_lens, __nv_bfloat16* __restrict__ out,
                        uint32_t num_seqs, uint32_t channels, uint32_t kernel) {
  const int c = static_cast<int>(blockIdx.x * kThreads + threadIdx.x);
  const int K = static_cast<int>(kernel), hist = K - 1, pad = kMaxKernel - K;
  const bool live = c < static_cast<int>(channels);
  // Weights (never written by a kernel: read before the wait), right-aligned in kMaxKernel.
  float wk[kMaxKernel];
#pragma unroll
  for (int j = 0; j < kMaxKernel; ++j)
    wk[j] = live && j >= pad ? atlas::bf16_to_f32(w[static_cast<size_t>(c) * K + (j - pad)]) : 0.f;
  atlas::pdl_enter();  // x, the step inputs and the state come from earlier work
  const uint32_t b = blockIdx.z;
  if (b >= num_seqs || !live) return;
  const int seq_start = cu_q[b], q_len = cu_q[b + 1] - seq_start;
  const int t0 = static_cast<int>(blockIdx.y) * kTokenTile;
  if (t0 >= q_len) return;
  const int start = kv_lens[b] - q_len;  // absolute position of the chunk's first token
  __nv_bfloat16* st = conv_state + static_cast<size_t>(state_slots[b]) * K * channels + c;
  const __nv_bfloat16* xc = x + static_cast<size_t>(seq_start) * x_pitch + c;

  // win[j] holds the input at chunk position t - kWin + j (j < kWin) for the current t.
  float win[kWin];
#pragma unroll
  for (int j = 0; j < kWin; ++j) {
    const int p = t0 - kWin + j;
    float v = 0.f;
    if (p >= t0 - hist) {  // inside the conv's reach (the padded taps read zeros)
      if (p >= 0)
        v = atlas::bf16_to_f32(xc[static_cast<size_t>(p) * x_pitch]);
      else if (start + p >= 0)
        v = atlas::bf16_to_f32(st[static_cast<size_t>((start + p) % K) * channels]);
    }
    win[j] = v;
  }
  const int t_end = min(t0 + kTokenTile, q_len);
  __nv_bfloat16* oc = out + static_cast<size_t>(seq_start) * channels + c;
  for (int tb = t0; tb < t_end; tb += kLoadBatch) {
    float xb[kLoadBatch];  // the batch's inputs, all loads in flight before the first use
#pragma unroll
    for (int u = 0; u < kLoadBatch; ++u)
      xb[u] = tb + u < t_end ? atlas::bf16_to_f32(xc[static_cast<size_t>(tb + u) * x_pitch]) : 0.f;
#pragma unroll
    for (int u = 0; u < kLoadBatch; ++u) {
      if (tb + u >= t_end) break;
      float acc = 0.f;
#pragma unroll
      for (int j = 0; j < kWin; ++j) acc = fmaf(wk[j], win[j], acc);
      acc = fmaf(wk[kWin], xb[u], acc);
      const float y = atlas::round_bf16(acc);
      oc[static_cast<size_t>(tb + u) * channels] = atlas::f32_to_bf16(y / (1.f + expf(-y)));
#pragma unroll
      for (int j = 0; j + 1 < kWin; ++j) win[j] = win[j + 1];
      win[kWin - 1] = xb[u];
    }
  }
  if (blockIdx.y != 0) return;
  // The ring keeps the chunk's last kernel - 1 inputs (older rows stay when it is shorter).
  for (int p = max(q_len - hist, 0); p < q_len; ++p)
    st[static_cast<size_t>((start + p) % K) * channels] = xc[static_cast<size_t>(p) * x_pitch];
}
