// Decode GEMV: y[m, n] = sum_k x[m, k] * w[n, k] for 1 <= m <= 8 rows of x.
//
// x comes from a load policy: `PlainX` reads it, `SwigluX` computes it on the fly from the
// MLP's gate_up [m, 2k] = [gate | up] as silu_mul_bf16 would (atlas::swiglu_bf16x8, the same
// bf16 roundings), so the down projection needs no separate activation kernel or buffer.
// Every block recomputes the activation of the whole row (k / 8 chunks per thread at most a
// few dozen expf): cheap next to the launch it saves.
//
// The streaming, accumulation and reduction are gemv_core.cuh's, with the bf16 weight format.
// Launch (ops/matmul.py): grid = ceil(n / 4), block = min(256, roundup32(k / 8)) threads.
// Preconditions: k % 8 == 0, x (or gate_up) and w 16-byte aligned.
#include "gemv_core.cuh"

namespace {

using namespace atlas::gemv;

__shared__ float partial_sums[kMaxThreads / 32][kMaxAcc];  // [warp][m * 4 + r]

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

// m == 1 only (ops/matmul.py picks it for batch-1 decode): without the 8-row instantiation
// the kernel needs about a third of the registers, so more blocks stream weights per SM.
extern "C" __global__ void __launch_bounds__(kMaxThreads)
    gemv_bf16_single(const __nv_bfloat16* x, const __nv_bfloat16* w, __nv_bfloat16* y,
                     uint32_t m, uint32_t n, uint32_t k) {
  if (m != 1) __trap();
  gemv_rows<1, false>(plain_x(x, k), Bf16W{}, w, y, n, k, partial_sums);
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
