// Decode GEMV: y[m, n] = sum_k x[m, k] * w[n, k] for 1 <= m <= 8 rows of x.
//
// x comes from a load policy: `PlainX` reads it, `SwigluX` computes it on the fly from the
// MLP's gate_up [m, 2k] = [gate | up] as silu_mul_bf16 would (atlas::swiglu_bf16x8, the same
// bf16 roundings), so the down projection needs no separate activation kernel or buffer.
// Every block recomputes the activation of the whole row (k / 8 chunks per thread at most a
// few dozen expf): cheap next to the launch it saves.
//
// At batch 1 the MLP's gate_up product can instead end with its SwiGLU (gemv_core.cuh
// `StoreSwiglu`: a block owns two gate rows and their two up rows and writes two features of
// the activation; gemv_swiglu_bf16_single): the silu_mul launch (or the down GEMV's
// per-block recomputation of the whole activation, SwigluX) leaves the step, and the down
// projection is a plain GEMV over act. Bit for bit the GEMV, then silu_mul.
//
// The streaming, accumulation and reduction are gemv_core.cuh's, with the bf16 weight format.
// Launch (ops/matmul.py): grid = ceil(n / 4), block = min(256, roundup32(k / 8)) threads.
// The gemv_ring_* entry points run the same products for 1..8 rows with the weights streamed
// through a per-thread cp.async ring in shared memory (gemv_ring.cuh: the bytes in flight no
// longer depend on the registers the m-row FMAs take), bit for bit gemv_bf16's sums; ops/
// matmul.py sends 2..8 rows to them unless ATLAS_GEMV_RING=0.
// Preconditions: k % 8 == 0, x (or gate_up) and w 16-byte aligned.
#include "gemv_core.cuh"
#include "gemv_ring.cuh"

namespace {

using namespace atlas::gemv;

__shared__ float partial_sums[kMaxThreads / 32][kMaxAcc];  // [warp][m * 4 + r]
extern __shared__ uint4 staged_x[];  // the ring kernels' ring
// the ring kernels' (gemv_ring.cuh) partial sums, two buffers alternating by group parity
__shared__ float ring_partials[2][kMaxThreads / 32][kMaxAcc];

// x = the sigmoid output gate of gated full attention applied on load (Qwen3.5 / Qwen3-Next
// o_proj): x[i] = bf16(attn[i] * bf16(sigmoid(gate[h * head_pitch + d]))), i = h * D + d, in
// attn_gate.cu's numerics, so the product is sigmoid_gate_mul_bf16 then the GEMV bit for
// bit and the gate's launch leaves the step. A chunk of 8 lies in one head (D % 8 == 0).
// One row (m == 1).
struct AttnGateX {
  const uint4* attn;
  const uint4* gate;  // the gate of head 0 (16-byte aligned), heads head_pitch / 8 chunks apart
  int head_chunks;    // D / 8
  int pitch_chunks;   // head_pitch / 8

  __device__ __forceinline__ void prepare() const {}

  __device__ __forceinline__ void load(int, int c, float (&xf)[8]) const {
    const int h = c / head_chunks;
    float g[8];
    atlas::unpack_bf16x8(__ldg(attn + c), xf);
    atlas::unpack_bf16x8(__ldg(gate + h * pitch_chunks + (c - h * head_chunks)), g);
#pragma unroll
    for (int e = 0; e < 8; ++e)
      xf[e] = atlas::round_bf16(atlas::sigmoid_gated(xf[e], g[e]));
  }
};

__device__ __forceinline__ AttnGateX attn_gate_x(const __nv_bfloat16* attn,
                                                 const __nv_bfloat16* gate, uint32_t head_dim,
                                                 uint32_t head_pitch) {
  return {reinterpret_cast<const uint4*>(attn), reinterpret_cast<const uint4*>(gate),
          static_cast<int>(head_dim >> 3), static_cast<int>(head_pitch >> 3)};
}

template <bool kF32Out, class XLoad>
__device__ __forceinline__ void gemv(XLoad xload, const __nv_bfloat16* w, void* y, uint32_t m,
                                     uint32_t n, uint32_t k) {
  gemv_any_m<kF32Out>(xload, Bf16W{}, w, y, m, n, k, partial_sums);
}

}  // namespace

extern "C" __global__ void __launch_bounds__(kMaxThreads)
    gemv_bf16(const __nv_bfloat16* x, const __nv_bfloat16* w, __nv_bfloat16* y, uint32_t m,
              uint32_t n, uint32_t k) {
  gemv<false>(plain_x(x, k), w, y, m, n, k);
}

extern "C" __global__ void __launch_bounds__(kMaxThreads)
    gemv_bf16_f32(const __nv_bfloat16* x, const __nv_bfloat16* w, float* y, uint32_t m,
                  uint32_t n, uint32_t k) {
  gemv<true>(plain_x(x, k), w, y, m, n, k);
}

// The float32 sums unrounded (StoreF32Unrounded), 1..8 rows: a float32 router's logits.
extern "C" __global__ void __launch_bounds__(kMaxThreads)
    gemv_bf16_f32_unrounded(const __nv_bfloat16* x, const __nv_bfloat16* w, float* y,
                            uint32_t m, uint32_t n, uint32_t k) {
  gemv_any_m<true>(plain_x(x, k), Bf16W{}, w, y, m, n, k, partial_sums, StoreF32Unrounded<>{});
}

// m == 1 only (ops/matmul.py picks it for batch-1 decode): without the 8-row instantiation
// the kernel needs about a third of the registers, so more blocks stream weights per SM.
extern "C" __global__ void __launch_bounds__(kMaxThreads)
    gemv_bf16_single(const __nv_bfloat16* x, const __nv_bfloat16* w, __nv_bfloat16* y,
                     uint32_t m, uint32_t n, uint32_t k) {
  if (m != 1) __trap();
  gemv_rows<1, false>(plain_x(x, k), Bf16W{}, w, y, n, k, partial_sums);
}

// The same at ATLAS_GEMV_LEAN_MAXNREG registers (48: no spills; free, ptxas takes 56): a block
// more an SM at every width (128 threads 9 -> 10, 160 7 -> 8, 192 6 -> 7, 256 4 -> 5).
// ops/matmul._launch_single takes it only where that brings the launch into fewer waves of
// resident blocks: capped everywhere, the short kernels under a GEMV's early blocks lost more
// than the GEMVs gained (gpu172: more first tiles requested before the PDL wait). The same bits.
#ifndef ATLAS_GEMV_LEAN_MAXNREG
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 1000
#define ATLAS_GEMV_LEAN_MAXNREG 56  // sm_121 (free: 58) spills 16 bytes at 48, none at 56
#else
#define ATLAS_GEMV_LEAN_MAXNREG 48
#endif
#endif
extern "C" __global__ void __maxnreg__(ATLAS_GEMV_LEAN_MAXNREG)
    gemv_bf16_lean_single(const __nv_bfloat16* x, const __nv_bfloat16* w, __nv_bfloat16* y,
                          uint32_t m, uint32_t n, uint32_t k) {
  if (m != 1) __trap();
  gemv_rows<1, false>(plain_x(x, k), Bf16W{}, w, y, n, k, partial_sums);
}

// gemv_bf16_single plus a bias [n]: y = bf16(bf16(x @ w.T) + bias), bit for bit it followed
// by bias_add_bf16 (batch 1's q/k/v projection of Qwen2-family attention, ops/matmul.py
// gemv_bias): the attention kernel after it starts its prologue under the GEMV again.
extern "C" __global__ void __launch_bounds__(kMaxThreads)
    gemv_bias_bf16_single(const __nv_bfloat16* x, const __nv_bfloat16* w, __nv_bfloat16* y,
                          uint32_t m, uint32_t n, uint32_t k, const __nv_bfloat16* bias) {
  if (m != 1) __trap();
  gemv_rows<1, false>(plain_x(x, k), Bf16W{}, w, y, n, k, partial_sums,
                      StoreBias<>(bias, static_cast<int>(n)));
}

extern "C" __global__ void __launch_bounds__(kMaxThreads)
    gemv_bf16_f32_single(const __nv_bfloat16* x, const __nv_bfloat16* w, float* y, uint32_t m,
                         uint32_t n, uint32_t k) {
  if (m != 1) __trap();
  gemv_rows<1, true>(plain_x(x, k), Bf16W{}, w, y, n, k, partial_sums);
}

// The MLP down projection with its activation fused: y = swiglu(gate_up) @ w.T, where
// gate_up is [m, 2k] = [gate | up] and k is the intermediate size (w is [n, k]).
// Minimum 1 block per SM: the IEEE division in silu has a slow-path subroutine call, and
// without this bound ptxas caps registers (64 / 128) around it and spills on sm_90a.
extern "C" __global__ void __launch_bounds__(kMaxThreads, 1)
    gemv_silu_bf16(const __nv_bfloat16* gate_up, const __nv_bfloat16* w, __nv_bfloat16* y,
                   uint32_t m, uint32_t n, uint32_t k) {
  gemv<false>(swiglu_x(gate_up, k), w, y, m, n, k);
}

extern "C" __global__ void __launch_bounds__(kMaxThreads, 1)
    gemv_silu_bf16_single(const __nv_bfloat16* gate_up, const __nv_bfloat16* w,
                          __nv_bfloat16* y, uint32_t m, uint32_t n, uint32_t k) {
  if (m != 1) __trap();
  gemv_rows<1, false>(swiglu_x(gate_up, k), Bf16W{}, w, y, n, k, partial_sums);
}

// ---- batch 1's o_proj of gated full attention with the output gate on load (AttnGateX):
// y = (x * sigmoid(gate)) @ w.T, x the attention output, the gate of head h at gate + h *
// head_pitch (the qkv row). head_dim and head_pitch multiples of 8, gate 16-byte aligned,
// k = heads * head_dim. The IEEE division of the sigmoid: 1 block/SM bound, as gemv_silu_*
// (ptxas caps registers around its slow-path call otherwise).
extern "C" __global__ void __launch_bounds__(kMaxThreads, 1)
    gemv_attn_gate_bf16_single(const __nv_bfloat16* x, const __nv_bfloat16* gate,
                               const __nv_bfloat16* w, __nv_bfloat16* y, uint32_t n,
                               uint32_t k, uint32_t head_dim, uint32_t head_pitch) {
  gemv_rows<1, false>(attn_gate_x(x, gate, head_dim, head_pitch), Bf16W{}, w, y, n, k,
                      partial_sums);
}

// ---- batch 1's gate_up ending with its SwiGLU (StoreSwiglu): act [1, n / 2] = swiglu(x @
// w.T) for the fused [gate | up] weight w [n, k], n even; grid ceil(n / 4), the threads of
// the GEMV.
extern "C" __global__ void __launch_bounds__(kMaxThreads)
    gemv_swiglu_bf16_single(const __nv_bfloat16* x, const __nv_bfloat16* w,
                            __nv_bfloat16* act, uint32_t m, uint32_t n, uint32_t k) {
  if (m != 1) __trap();
  gemv_rows<1, false>(plain_x(x, k), Bf16W{}, w, act, n, k, partial_sums, StoreSwiglu<>{});
}

// ... ending with the tanh-GELU GLU instead (Gemma 3): bit for bit the GEMV, then
// gelu_tanh_mul_bf16
extern "C" __global__ void __launch_bounds__(kMaxThreads)
    gemv_geglu_bf16_single(const __nv_bfloat16* x, const __nv_bfloat16* w,
                           __nv_bfloat16* act, uint32_t m, uint32_t n, uint32_t k) {
  if (m != 1) __trap();
  gemv_rows<1, false>(plain_x(x, k), Bf16W{}, w, act, n, k, partial_sums,
                      StoreSwiglu<kRowsPerBlock, true>{});
}

// ---- the same two single-row products in 8-row blocks (gemv_core.cuh StoreY<8> /
// StoreSwiglu<8>: 4 features a block; ATLAS_GEMV_ROWS=8, ops/matmul.py): twice the weight bytes
// a block (32 KiB at k 2,048) for the same launch, reduction and exit. Bit for bit the 4-row
// entries (a row's FMA chain and reduction order do not depend on its block row).
// Grid ceil(n / 8), the threads of the GEMV.
extern "C" __global__ void __launch_bounds__(kMaxThreads)
    gemv_bf16_x8_single(const __nv_bfloat16* x, const __nv_bfloat16* w, __nv_bfloat16* y,
                        uint32_t m, uint32_t n, uint32_t k) {
  if (m != 1) __trap();
  gemv_rows<1, false>(plain_x(x, k), Bf16W{}, w, y, n, k, partial_sums, StoreY<8>{});
}

// The gate_up + SwiGLU in 8-row blocks, twice: registers left free (ptxas takes 114, 120 as
// allocated) for 256-thread blocks (k >= 4,096), whose SM holds two either way; capped at
// ATLAS_GEMV_X8N_MAXNREG (`_x8n_`, 96: no spills; 88 neither, 80 spills 20 bytes) for narrower
// ones, so that an SM holds three 192-thread blocks (k 3,072: 144 KiB of weights in flight
// against 96), four of 160 (k 2,560), five of 128 (k 2,048) instead of two, three, four. At 256
// threads the cap gained nothing and cost the Qwen3-8B gate_up ~0.3-0.9 us (gpu170, H100).
// ops/matmul._launch_single picks by the block's threads; the same bits either way.
#ifndef ATLAS_GEMV_X8N_MAXNREG
#define ATLAS_GEMV_X8N_MAXNREG 96
#endif
extern "C" __global__ void __launch_bounds__(kMaxThreads)
    gemv_swiglu_bf16_x8_single(const __nv_bfloat16* x, const __nv_bfloat16* w,
                               __nv_bfloat16* act, uint32_t m, uint32_t n, uint32_t k) {
  if (m != 1) __trap();
  gemv_rows<1, false>(plain_x(x, k), Bf16W{}, w, act, n, k, partial_sums, StoreSwiglu<8>{});
}

extern "C" __global__ void __maxnreg__(ATLAS_GEMV_X8N_MAXNREG)
    gemv_swiglu_bf16_x8n_single(const __nv_bfloat16* x, const __nv_bfloat16* w,
                                __nv_bfloat16* act, uint32_t m, uint32_t n, uint32_t k) {
  if (m != 1) __trap();
  gemv_rows<1, false>(plain_x(x, k), Bf16W{}, w, act, n, k, partial_sums, StoreSwiglu<8>{});
}

// ---- the m-row products on the cp.async ring (gemv_ring.cuh; ATLAS_GEMV_RING=0 routes m > 1
// back to gemv_bf16 / gemv_bf16_f32 / gemv_silu_bf16). Dynamic shared memory: the ring,
// stages * kSlotsPerTile * 16 bytes per thread (ops/matmul.py gemv_ring_plan); <= 128
// registers (two 256-thread blocks per SM, more of narrower ones), whose rings fit the SM.
extern "C" __global__ void __launch_bounds__(kMaxThreads, 2)
    gemv_ring_bf16(const __nv_bfloat16* x, const __nv_bfloat16* w, __nv_bfloat16* y, uint32_t m,
                   uint32_t n, uint32_t k, uint32_t stages) {
  gemv_ring_any_m<false>(plain_x(x, k), w, y, m, n, k, stages, staged_x, ring_partials);
}

extern "C" __global__ void __launch_bounds__(kMaxThreads, 2)
    gemv_ring_bf16_f32(const __nv_bfloat16* x, const __nv_bfloat16* w, float* y, uint32_t m,
                       uint32_t n, uint32_t k, uint32_t stages) {
  gemv_ring_any_m<true>(plain_x(x, k), w, y, m, n, k, stages, staged_x, ring_partials);
}

// The down projection with its SwiGLU computed on load (gemv_silu_bf16's x).
extern "C" __global__ void __launch_bounds__(kMaxThreads, 2)
    gemv_ring_silu_bf16(const __nv_bfloat16* gate_up, const __nv_bfloat16* w, __nv_bfloat16* y,
                        uint32_t m, uint32_t n, uint32_t k, uint32_t stages) {
  gemv_ring_any_m<false>(swiglu_x(gate_up, k), w, y, m, n, k, stages, staged_x, ring_partials);
}
