// Decode GEMV: y[m, n] = sum_k x[m, k] * w[n, k] for 1 <= m <= 8 rows of x.
//
// x comes from a load policy: `PlainX` reads it, `SwigluX` computes it on the fly from the
// MLP's gate_up [m, 2k] = [gate | up] as silu_mul_bf16 would (atlas::swiglu_bf16x8, the same
// bf16 roundings), so the down projection needs no separate activation kernel or buffer.
// Every block recomputes the activation of the whole row (k / 8 chunks per thread at most a
// few dozen expf): cheap next to the launch it saves.
//
// `NormX` (gemv_add_rmsnorm_bf16_single) is the residual add + RMSNorm of rmsnorm.cu fused
// into the x load of the projection that consumes it (qkv, gate_up): every block computes
// h = bf16(resid + delta) and its 1/rms itself (the row is small and L2-resident) and stages
// the normalized row in shared memory; block 0 also stores h to resid_out, a different
// buffer than resid (other blocks are still reading resid), so the model alternates two
// residual buffers. That removes the add_rmsnorm launch (and its x round trip) before each
// projection at the cost of re-reading 3 k bf16 per block from L2.
//
// The residual stream can instead be carried by the GEMVs themselves at batch 1 (fewer round
// trips than NormX: no block reduction over the row before the first FMA, no staging):
// * `AddResidual` (gemv_residual_bf16_single, gemv_silu_residual_bf16_single: o_proj, down)
//   is an output policy: each block adds its 4 outputs to the residual in place, h =
//   bf16(resid + bf16(y)), the add_rmsnorm numerics, and writes the sum of its h^2 to
//   ssq[blockIdx.x] (rows are owned by one block, so in place is safe and no buffer swaps);
// * `SsqNormX` (gemv_rmsnorm_bf16_single: qkv, gate_up) is the x policy that consumes it:
//   1/rms from the ceil(k / 4) partial sums (a fixed-order block sum, all loads in flight
//   at once: deterministic, one L2 trip), then x = RMSNorm(h) * w computed per chunk on
//   load, like SwigluX.
//
// At batch 1 the MLP's gate_up product can instead end with its SwiGLU (gemv_core.cuh
// `StoreSwiglu`: a block owns two gate rows and their two up rows and writes two features of
// the activation), with each of the x loads above (gemv_swiglu_bf16_single,
// gemv_rmsnorm_swiglu_bf16_single, gemv_add_rmsnorm_swiglu_bf16_single): the silu_mul launch
// (or the down GEMV's per-block recomputation of the whole activation, SwigluX) leaves the
// step, and the down projection is a plain GEMV over act. Bit for bit the GEMV, then silu_mul.
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
extern __shared__ uint4 staged_x[];  // NormX: the normalized row; the ring kernels' ring
// the ring kernels' (gemv_ring.cuh) partial sums, two buffers alternating by group parity
__shared__ float ring_partials[2][kMaxThreads / 32][kMaxAcc];
// SsqNormX's block sum: its own scratch, since warps that finish the main loop early write
// partial_sums while slower ones may still read the sum (no barrier after it)
__shared__ float ssq_scratch[kMaxThreads / 32];
// partial sums of squares each SsqNormX thread requests at once (all in flight together):
// one round of loads up to 8 x 256 partials, a residual row of 8,192
constexpr int kSsqPerThread = 8;

// x = RMSNorm(h) * w (or * (1 + w) with `offset`), h = bf16(resid + delta) (h = resid when
// delta is null), in rmsnorm.cu's numerics (f32 sum of squares; the CUDA kernels sum in
// different orders, so the two agree to f32 rounding). One row (m == 1).
struct NormX {
  const uint4* resid;
  const uint4* delta;      // null: no residual add (the first layer)
  const uint4* norm_w;
  uint4* resid_out;        // null: h is not stored
  int kc;
  float eps;
  bool offset;

  __device__ __forceinline__ uint4 summed(int c) const {
    const uint4 r = __ldg(resid + c);
    if (delta == nullptr) return r;
    float a[8], d[8];
    atlas::unpack_bf16x8(r, a);
    atlas::unpack_bf16x8(__ldg(delta + c), d);
#pragma unroll
    for (int e = 0; e < 8; ++e) a[e] += d[e];
    return atlas::pack_bf16x8(a);
  }

  __device__ __forceinline__ void prepare() const {
    float sumsq = 0.f;
    for (int c = threadIdx.x; c < kc; c += blockDim.x) {
      const uint4 h = summed(c);
      staged_x[c] = h;
      if (resid_out != nullptr && blockIdx.x == 0) resid_out[c] = h;
      float v[8];
      atlas::unpack_bf16x8(h, v);
#pragma unroll
      for (int e = 0; e < 8; ++e) sumsq = fmaf(v[e], v[e], sumsq);
    }
    // partial_sums is free until the final reduction, which follows the barrier below
    const float total = atlas::block_sum(sumsq, partial_sums[0]);
    const float inv_rms = rsqrtf(total / static_cast<float>(8 * kc) + eps);
    for (int c = threadIdx.x; c < kc; c += blockDim.x) {
      float v[8], wf[8], out[8];
      atlas::unpack_bf16x8(staged_x[c], v);
      atlas::unpack_bf16x8(__ldg(norm_w + c), wf);
#pragma unroll
      for (int e = 0; e < 8; ++e)
        out[e] = offset ? (v[e] * inv_rms) * (1.f + wf[e]) : wf[e] * atlas::round_bf16(v[e] * inv_rms);
      staged_x[c] = atlas::pack_bf16x8(out);
    }
    __syncthreads();
  }

  __device__ __forceinline__ void load(int, int c, float (&xf)[8]) const {
    atlas::unpack_bf16x8(staged_x[c], xf);
  }
};

// x = RMSNorm(h) * w (or * (1 + w) with `offset`) of the residual row h, whose sum of
// squares is already in ssq: ceil(k / 4) partials, one per block of the AddResidual GEMV that
// wrote h. One row (m == 1).
struct SsqNormX {
  const uint4* resid;
  const float* ssq;
  const uint4* norm_w;
  int kc;
  float eps;
  bool offset;
  float inv_rms = 0.f;

  // The block sums the partials in a fixed order (each thread's kSsqPerThread-strided
  // share, then block_sum): deterministic. A thread requests its whole share before adding
  // any of it, so the sum waits on one L2 trip, not one per partial (measured on the H200:
  // a serial loop cost 5 us at hidden 1,024 and 30 us at 4,096). The thread's first chunks
  // of h and w are requested into L1 first, so the x loads after the sum hit L1.
  __device__ __forceinline__ void prepare() {
    for (int c = threadIdx.x; c < min(kc, kUnroll * static_cast<int>(blockDim.x)); c += blockDim.x) {
      asm volatile("prefetch.global.L1 [%0];" ::"l"(resid + c));
      asm volatile("prefetch.global.L1 [%0];" ::"l"(norm_w + c));
    }
    const int parts = (8 * kc + kRowsPerBlock - 1) / kRowsPerBlock;
    const int stride = static_cast<int>(blockDim.x);
    float s = 0.f;
    for (int base = 0; base < parts; base += kSsqPerThread * stride) {
      float v[kSsqPerThread];
#pragma unroll
      for (int j = 0; j < kSsqPerThread; ++j) {
        const int i = base + j * stride + static_cast<int>(threadIdx.x);
        v[j] = i < parts ? __ldg(ssq + i) : 0.f;
      }
#pragma unroll
      for (int j = 0; j < kSsqPerThread; ++j) s += v[j];
    }
    inv_rms = rsqrtf(atlas::block_sum(s, ssq_scratch) / static_cast<float>(8 * kc) + eps);
  }

  __device__ __forceinline__ void load(int, int c, float (&xf)[8]) const {
    float wf[8];
    atlas::unpack_bf16x8(__ldg(resid + c), xf);
    atlas::unpack_bf16x8(__ldg(norm_w + c), wf);
#pragma unroll
    for (int e = 0; e < 8; ++e)
      xf[e] = atlas::round_bf16(offset ? (xf[e] * inv_rms) * (1.f + wf[e])
                                       : wf[e] * atlas::round_bf16(xf[e] * inv_rms));
  }
};

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
      xf[e] = atlas::round_bf16(xf[e] * atlas::round_bf16(1.f / (1.f + expf(-g[e]))));
  }
};

__device__ __forceinline__ AttnGateX attn_gate_x(const __nv_bfloat16* attn,
                                                 const __nv_bfloat16* gate, uint32_t head_dim,
                                                 uint32_t head_pitch) {
  return {reinterpret_cast<const uint4*>(attn), reinterpret_cast<const uint4*>(gate),
          static_cast<int>(head_dim >> 3), static_cast<int>(head_pitch >> 3)};
}

// resid[row] = bf16(resid[row] + bf16(y[row])) for the block's rows, in place, and
// ssq[blockIdx.x] = the sum of their squares (f32, rows past n count 0). One row (M == 1).
struct AddResidual {
  __nv_bfloat16* resid;
  float* ssq;
  float old = 0.f;  // lane t < kRowsPerBlock: resid[row0 + t], read before the main loop

  __device__ __forceinline__ static int row(int r, int n) { return consecutive_row(r, n); }

  __device__ __forceinline__ void prepare(int row0, int n) {
    if (threadIdx.x < kRowsPerBlock && row0 + static_cast<int>(threadIdx.x) < n)
      old = atlas::bf16_to_f32(resid[row0 + threadIdx.x]);
  }

  template <int M, bool kF32Out>
  __device__ __forceinline__ void finish(void*, float sum, int t, int row0, int n) const {
    static_assert(M == 1 && !kF32Out, "the residual epilogue is single-row bf16");
    float sq = 0.f;
    if (t < kRowsPerBlock && row0 + t < n) {
      const float h = atlas::round_bf16(old + atlas::round_bf16(sum));
      resid[row0 + t] = atlas::f32_to_bf16(h);
      sq = h * h;
    }
    sq += __shfl_xor_sync(0xffffffffu, sq, 1);  // kRowsPerBlock == 4 lanes, fixed order
    sq += __shfl_xor_sync(0xffffffffu, sq, 2);
    if (t == 0) ssq[blockIdx.x] = sq;
  }
};
static_assert(kRowsPerBlock == 4, "AddResidual sums its rows' squares over 4 lanes");

template <bool kF32Out, class XLoad>
__device__ __forceinline__ void gemv(XLoad xload, const __nv_bfloat16* w, void* y, uint32_t m,
                                     uint32_t n, uint32_t k) {
  gemv_any_m<kF32Out>(xload, Bf16W{}, w, y, m, n, k, partial_sums);
}

// One row through NormX (the add + RMSNorm staged by every block), stored by `Out`.
template <class Out>
__device__ __forceinline__ void add_rmsnorm_gemv(const __nv_bfloat16* resid,
                                                 const __nv_bfloat16* delta,
                                                 const __nv_bfloat16* norm_w,
                                                 __nv_bfloat16* resid_out,
                                                 const __nv_bfloat16* w, __nv_bfloat16* y,
                                                 uint32_t n, uint32_t k, float eps,
                                                 uint32_t offset) {
  const NormX xload{reinterpret_cast<const uint4*>(resid), reinterpret_cast<const uint4*>(delta),
                    reinterpret_cast<const uint4*>(norm_w), reinterpret_cast<uint4*>(resid_out),
                    static_cast<int>(k >> 3), eps, offset != 0};
  gemv_rows<1, false>(xload, Bf16W{}, w, y, n, k, partial_sums, Out{});
}

// One row through SsqNormX (the norm from the residual epilogue's partials), stored by `Out`.
template <class Out>
__device__ __forceinline__ void rmsnorm_gemv(const __nv_bfloat16* resid, const float* ssq,
                                             const __nv_bfloat16* norm_w,
                                             const __nv_bfloat16* w, __nv_bfloat16* y,
                                             uint32_t n, uint32_t k, float eps,
                                             uint32_t offset) {
  SsqNormX xload{reinterpret_cast<const uint4*>(resid), ssq,
                 reinterpret_cast<const uint4*>(norm_w), static_cast<int>(k >> 3), eps,
                 offset != 0};
  gemv_rows<1, false>(xload, Bf16W{}, w, y, n, k, partial_sums, Out{});
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

// y = RMSNorm(bf16(resid + delta)) @ w.T for one row, and resid_out = bf16(resid + delta)
// (see NormX): the add_rmsnorm kernel and the projection after it in one launch. Dynamic
// shared memory: k * 2 bytes (ops/matmul.py NORM_GEMV_MAX_K bounds it). On sm_90 at least
// 5 blocks per SM, as gemv_bf16_single has (44 registers): the prologue would otherwise take
// 58 and leave 4 blocks of loads in flight per SM (sm_121's ptxas spills under that bound).
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 1000
constexpr int kNormGemvMinBlocks = 1;
#else
constexpr int kNormGemvMinBlocks = 5;
#endif
extern "C" __global__ void __launch_bounds__(kMaxThreads, kNormGemvMinBlocks)
    gemv_add_rmsnorm_bf16_single(const __nv_bfloat16* resid, const __nv_bfloat16* delta,
                                 const __nv_bfloat16* norm_w, __nv_bfloat16* resid_out,
                                 const __nv_bfloat16* w, __nv_bfloat16* y, uint32_t n,
                                 uint32_t k, float eps, uint32_t offset) {
  add_rmsnorm_gemv<StoreY>(resid, delta, norm_w, resid_out, w, y, n, k, eps, offset);
}

// The residual epilogue (AddResidual) for the projections that end a sublayer: y = x @ w.T
// is added to resid in place (resid[i] = bf16(resid[i] + bf16(y[i]))) and ssq[b] gets the
// sum of squares of block b's 4 new residual values, for gemv_rmsnorm_bf16_single.
extern "C" __global__ void __launch_bounds__(kMaxThreads)
    gemv_residual_bf16_single(const __nv_bfloat16* x, const __nv_bfloat16* w,
                              __nv_bfloat16* resid, float* ssq, uint32_t n, uint32_t k) {
  gemv_rows<1, false>(plain_x(x, k), Bf16W{}, w, nullptr, n, k, partial_sums,
                      AddResidual{resid, ssq});
}

// The same for the MLP down projection with its SwiGLU (gemv_silu_bf16_single's x load).
extern "C" __global__ void __launch_bounds__(kMaxThreads, 1)
    gemv_silu_residual_bf16_single(const __nv_bfloat16* gate_up, const __nv_bfloat16* w,
                                   __nv_bfloat16* resid, float* ssq, uint32_t n, uint32_t k) {
  gemv_rows<1, false>(swiglu_x(gate_up, k), Bf16W{}, w, nullptr, n, k, partial_sums,
                      AddResidual{resid, ssq});
}

// y = RMSNorm(resid) @ w.T for one row whose sum of squares a residual-epilogue GEMV left in
// ssq (k / 4 partials): the norm costs this GEMV one reduction of k / 4 floats and no launch.
extern "C" __global__ void __launch_bounds__(kMaxThreads)
    gemv_rmsnorm_bf16_single(const __nv_bfloat16* resid, const float* ssq,
                             const __nv_bfloat16* norm_w, const __nv_bfloat16* w,
                             __nv_bfloat16* y, uint32_t n, uint32_t k, float eps,
                             uint32_t offset) {
  rmsnorm_gemv<StoreY>(resid, ssq, norm_w, w, y, n, k, eps, offset);
}

// ---- batch 1's o_proj of gated full attention with the output gate on load (AttnGateX):
// y = (x * sigmoid(gate)) @ w.T, x the attention output, the gate of head h at gate + h *
// head_pitch (the qkv row); plain, and with the residual epilogue (gemv_residual's). head_dim and
// head_pitch multiples of 8, gate 16-byte aligned, k = heads * head_dim. The IEEE division
// of the sigmoid: 1 block/SM bound, as gemv_silu_* (ptxas caps registers around its
// slow-path call otherwise).
extern "C" __global__ void __launch_bounds__(kMaxThreads, 1)
    gemv_attn_gate_bf16_single(const __nv_bfloat16* x, const __nv_bfloat16* gate,
                               const __nv_bfloat16* w, __nv_bfloat16* y, uint32_t n,
                               uint32_t k, uint32_t head_dim, uint32_t head_pitch) {
  gemv_rows<1, false>(attn_gate_x(x, gate, head_dim, head_pitch), Bf16W{}, w, y, n, k,
                      partial_sums);
}

extern "C" __global__ void __launch_bounds__(kMaxThreads, 1)
    gemv_attn_gate_residual_bf16_single(const __nv_bfloat16* x, const __nv_bfloat16* gate,
                                        const __nv_bfloat16* w, __nv_bfloat16* resid,
                                        float* ssq, uint32_t n, uint32_t k, uint32_t head_dim,
                                        uint32_t head_pitch) {
  gemv_rows<1, false>(attn_gate_x(x, gate, head_dim, head_pitch), Bf16W{}, w, nullptr, n, k,
                      partial_sums, AddResidual{resid, ssq});
}

// ---- batch 1's gate_up ending with its SwiGLU (StoreSwiglu): act [1, n / 2] = swiglu(x @
// w.T) for the fused [gate | up] weight w [n, k], n even; grid ceil(n / 4), the threads of
// the GEMV with the same x load. The x loads: plain, SsqNormX, NormX (as the three above).
extern "C" __global__ void __launch_bounds__(kMaxThreads)
    gemv_swiglu_bf16_single(const __nv_bfloat16* x, const __nv_bfloat16* w,
                            __nv_bfloat16* act, uint32_t m, uint32_t n, uint32_t k) {
  if (m != 1) __trap();
  gemv_rows<1, false>(plain_x(x, k), Bf16W{}, w, act, n, k, partial_sums, StoreSwiglu{});
}

extern "C" __global__ void __launch_bounds__(kMaxThreads)
    gemv_rmsnorm_swiglu_bf16_single(const __nv_bfloat16* resid, const float* ssq,
                                    const __nv_bfloat16* norm_w, const __nv_bfloat16* w,
                                    __nv_bfloat16* act, uint32_t n, uint32_t k, float eps,
                                    uint32_t offset) {
  rmsnorm_gemv<StoreSwiglu>(resid, ssq, norm_w, w, act, n, k, eps, offset);
}

extern "C" __global__ void __launch_bounds__(kMaxThreads, kNormGemvMinBlocks)
    gemv_add_rmsnorm_swiglu_bf16_single(const __nv_bfloat16* resid, const __nv_bfloat16* delta,
                                        const __nv_bfloat16* norm_w, __nv_bfloat16* resid_out,
                                        const __nv_bfloat16* w, __nv_bfloat16* act, uint32_t n,
                                        uint32_t k, float eps, uint32_t offset) {
  add_rmsnorm_gemv<StoreSwiglu>(resid, delta, norm_w, resid_out, w, act, n, k, eps, offset);
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
