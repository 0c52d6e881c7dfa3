// RMSNorm over bf16 rows, optionally fused with the residual add, in transformers' numerics:
//   r   = bf16(residual + delta)                     (add_rmsnorm only; written back)
//   out = bf16(w * bf16(r * rsqrt(mean(r^2) + eps))) (mean in f32 over the bf16 row)
// The two roundings are the `hidden.to(bf16)` and `weight * hidden` op boundaries of HF's
// LlamaRMSNorm/Qwen3RMSNorm. The *_offset_* entry points take zero-centred weights
// (Qwen3.5/Qwen3-Next): out = bf16((r * rsqrt(mean(r^2) + eps)) * (1 + w)), all f32, one rounding.
// norm_add_rmsnorm_offset_bf16 (Gemma 3) first normalizes delta the same way with its own
// weights (the sublayer's output norm), then adds and normalizes:
//   r = bf16(residual + bf16(delta * rsqrt(mean(delta^2) + eps) * (1 + w_delta))).
// The *_oneround_* entry points (gpt-oss's GptOssRMSNorm) apply the plain weight to the f32
// normalized row: out = bf16(w * (r * rsqrt(mean(r^2) + eps))), one rounding.
//
// Launch: grid = rows (the plain entries: any grid), block = 32..1024 threads (multiple of
// 32), dim % 8 == 0 and dim <= 8 * kMaxVecs * blockDim.x. Each thread keeps its (at most kMaxVecs) 16-byte vectors
// (packed bf16, 4 registers each) between the reduction and the scaling, so the row is read
// from DRAM once. A thread issues all of its row loads (x, then delta) before using the
// first, so a small block with several vectors a thread (ops/norm.py's block size for many
// rows, which lets an SM hold many rows at once) waits for DRAM once per row, not per vector.
// Many rows (ops/norm.py's prefill launches of the plain entries: 3 rows a block by default)
// take fewer blocks than rows: a block normalizes rows blockIdx.x, + gridDim.x, .. with the
// next row's vectors requested before the current row's reduction and stores (row_loop.cuh
// says why).
// w stays loaded inside the scaling loop: every block on an SM reads the same w, so those
// loads hit L1 and holding them in registers would only cost occupancy. Each thread asks for
// its w lines into L1 before the PDL wait (w is a weight: no kernel writes it), so at batch-1
// decode, where the norm's whole time is dependent round trips after the previous GEMV, the
// scaling loop's w loads do not add one more L2 trip.
#include "atlas_common.cuh"
#include "bf16_vec.cuh"
#include "rmsnorm_core.cuh"
#include "row_loop.cuh"

namespace {

constexpr int kMaxVecs = 4;

// dst[j] = src[threadIdx.x + j * blockDim.x] for the vectors below nvec, all loads issued
// before any result is used.
// kCoherent: through L2 (ld.global.cg), never the non-coherent path: with no trigger right
// after griddepcontrol.wait (the *_late_* entries) ptxas hoists a __restrict__ row's
// ld.global.nc above the wait (their SASS had the delta's LDGs before it), a read of the
// previous kernel's output before it is complete.
template <bool kCoherent = false>
__device__ __forceinline__ void load_vecs(const uint4* src, int nvec, uint4 (&dst)[kMaxVecs]) {
#pragma unroll
  for (int j = 0; j < kMaxVecs; ++j) {
    const int i = threadIdx.x + j * blockDim.x;
    if (i < nvec) dst[j] = kCoherent ? __ldcg(src + i) : src[i];
  }
}

// Scale one row held in registers: out = RMSNorm(packed) * w (kOffset: * (1 + w); kOneRound:
// w times the f32 normalized values, one rounding).
template <bool kOffset, bool kOneRound>
__device__ __forceinline__ void store_normed(const uint4 (&packed)[kMaxVecs], int nvec,
                                             const __nv_bfloat16* __restrict__ w,
                                             __nv_bfloat16* out, uint32_t dim, float eps,
                                             float* scratch) {
  float sumsq = 0.f;
#pragma unroll
  for (int j = 0; j < kMaxVecs; ++j)
    if (threadIdx.x + j * blockDim.x < nvec)
      sumsq = atlas::rmsnorm::sumsq_bf16x8(packed[j], sumsq);
  const float total = atlas::block_sum(sumsq, scratch);
  const float inv_rms = rsqrtf(total / static_cast<float>(dim) + eps);
  const uint4* wv = reinterpret_cast<const uint4*>(w);
  uint4* ov = reinterpret_cast<uint4*>(out);
#pragma unroll
  for (int j = 0; j < kMaxVecs; ++j) {
    const int i = threadIdx.x + j * blockDim.x;
    if (i < nvec)
      ov[i] = kOneRound ? atlas::rmsnorm::scale_one_round_bf16x8(packed[j], wv[i], inv_rms)
                        : atlas::rmsnorm::scale_bf16x8(packed[j], wv[i], inv_rms, kOffset);
  }
}

// residual += delta, out = RMSNorm(residual) * w, one row a block. kNormDelta: delta is
// normalized by w_delta (zero-centred) before the add. kOneRound: the plain weight times the
// f32 normalized values, one rounding (kOffset unused). kLate: the block lets the next kernel
// launch here, once its loads have landed (see add_rmsnorm_entry).
template <bool kOffset, bool kNormDelta = false, bool kOneRound = false, bool kLate = false>
__device__ __forceinline__ void add_rmsnorm_row(__nv_bfloat16* residual,
                                                const __nv_bfloat16* __restrict__ delta,
                                                const __nv_bfloat16* __restrict__ w,
                                                __nv_bfloat16* out, uint32_t dim, float eps,
                                                const __nv_bfloat16* __restrict__ w_delta = nullptr) {
  const size_t base = static_cast<size_t>(blockIdx.x) * dim;
  const int nvec = static_cast<int>(dim / atlas::kBf16PerVec);
  uint4 packed[kMaxVecs], dpacked[kMaxVecs];
  __shared__ float scratch[32];
  uint4* rv = reinterpret_cast<uint4*>(residual + base);
  load_vecs(rv, nvec, packed);
  load_vecs<kLate>(reinterpret_cast<const uint4*>(delta + base), nvec, dpacked);
  if constexpr (kNormDelta) {
    float dsq = 0.f;
#pragma unroll
    for (int j = 0; j < kMaxVecs; ++j)
      if (threadIdx.x + j * blockDim.x < nvec)
        dsq = atlas::rmsnorm::sumsq_bf16x8(dpacked[j], dsq);
    const float dinv = rsqrtf(atlas::block_sum(dsq, scratch) / static_cast<float>(dim) + eps);
    const uint4* wdv = reinterpret_cast<const uint4*>(w_delta);
#pragma unroll
    for (int j = 0; j < kMaxVecs; ++j) {
      const int i = threadIdx.x + j * blockDim.x;
      if (i < nvec) dpacked[j] = atlas::rmsnorm::scale_bf16x8(dpacked[j], wdv[i], dinv, true);
    }
  }
#pragma unroll
  for (int j = 0; j < kMaxVecs; ++j) {
    const int i = threadIdx.x + j * blockDim.x;
    if (i < nvec) {
      packed[j] = atlas::rmsnorm::add_bf16x8(packed[j], dpacked[j]);  // bf16(residual + delta)
      rv[i] = packed[j];
    }
  }
  if constexpr (kLate) atlas::pdl_launch_dependents();
  store_normed<kOffset, kOneRound>(packed, nvec, w, out + base, dim, eps, scratch);
}

// The plain norm over rows blockIdx.x, + gridDim.x, .. of `dim` starting `pitch` elements
// apart, the next row's vectors requested before the current row's reduction
// (row_loop.cuh). In place (x == out) is safe: a row is loaded whole before its own stores,
// and rows differ.
template <bool kOffset, bool kOneRound>
__device__ __forceinline__ void rmsnorm_rows(const __nv_bfloat16* x,
                                             const __nv_bfloat16* __restrict__ w,
                                             __nv_bfloat16* out, uint32_t rows, uint32_t dim,
                                             float eps, uint32_t pitch) {
  const int nvec = static_cast<int>(dim / atlas::kBf16PerVec);
  __shared__ float scratch[32];
  struct Row { uint4 v[kMaxVecs]; };
  atlas::for_rows_prefetched<Row>(
      rows,
      [&](uint32_t row, Row& r) {
        load_vecs(reinterpret_cast<const uint4*>(x + static_cast<size_t>(row) * pitch), nvec,
                  r.v);
      },
      [&](uint32_t row, const Row& r) {
        store_normed<kOffset, kOneRound>(r.v, nvec, w, out + static_cast<size_t>(row) * pitch,
                                         dim, eps, scratch);
      });
}

// Before pdl_wait: request this thread's vectors of the norm weight into L1 (no registers).
__device__ __forceinline__ void prefetch_weight(const __nv_bfloat16* w, uint32_t dim) {
  const uint4* wv = reinterpret_cast<const uint4*>(w);
  const int nvec = static_cast<int>(dim / atlas::kBf16PerVec);
#pragma unroll
  for (int j = 0; j < kMaxVecs; ++j) {
    const int i = threadIdx.x + j * blockDim.x;
    if (i < nvec) asm volatile("prefetch.global.L1 [%0];\n" ::"l"(wv + i) : "memory");
  }
}

}  // namespace

extern "C" __global__ void __launch_bounds__(1024)
rmsnorm_bf16(const __nv_bfloat16* __restrict__ x, const __nv_bfloat16* __restrict__ w,
             __nv_bfloat16* __restrict__ out, uint32_t rows, uint32_t dim, float eps) {
  if (blockIdx.x >= rows) return;
  prefetch_weight(w, dim);
  atlas::pdl_enter();
  rmsnorm_rows<false, false>(x, w, out, rows, dim, eps, dim);
}

extern "C" __global__ void __launch_bounds__(1024)
rmsnorm_offset_bf16(const __nv_bfloat16* __restrict__ x, const __nv_bfloat16* __restrict__ w,
                    __nv_bfloat16* __restrict__ out, uint32_t rows, uint32_t dim, float eps) {
  if (blockIdx.x >= rows) return;
  prefetch_weight(w, dim);
  atlas::pdl_enter();
  rmsnorm_rows<true, false>(x, w, out, rows, dim, eps, dim);
}

extern "C" __global__ void __launch_bounds__(1024)
rmsnorm_oneround_bf16(const __nv_bfloat16* __restrict__ x, const __nv_bfloat16* __restrict__ w,
                      __nv_bfloat16* __restrict__ out, uint32_t rows, uint32_t dim, float eps) {
  if (blockIdx.x >= rows) return;
  prefetch_weight(w, dim);
  atlas::pdl_enter();
  rmsnorm_rows<false, true>(x, w, out, rows, dim, eps, dim);
}

// Rows of `dim` starting `pitch` elements apart, normalized in place (x == out) or into
// rows as far apart: a segment of a wider row, such as the q (or k) part of the fused
// [q | k | v] projection that MiniMax-M2 normalizes over all its heads at once. Each thread
// loads its vectors before the block's reduction and stores only after it, so writing over
// the row read is safe.
extern "C" __global__ void __launch_bounds__(1024)
rmsnorm_pitched_bf16(const __nv_bfloat16* x, const __nv_bfloat16* __restrict__ w,
                     __nv_bfloat16* out, uint32_t rows, uint32_t dim, uint32_t pitch,
                     float eps) {
  if (blockIdx.x >= rows) return;
  prefetch_weight(w, dim);
  atlas::pdl_enter();
  rmsnorm_rows<false, false>(x, w, out, rows, dim, eps, pitch);
}

// residual += delta, out = RMSNorm(residual) * w (kOffset: * (1 + w)). kEarly: the *_early_*
// entry points (ops/early_trigger.py), the next kernel (a projection) may launch before this
// one's wait (atlas_common.cuh pdl_enter_early says why that is sound); it buys the
// projection's first weight tiles requested under the kernel before the norm (the down
// projection), not only during the norm's own ~2 us. kOneRound: the *_oneround_* entries.
// kLate (the *_late_* entries, ops/norm.py norm_triggers_late): the trigger follows the
// block's residual and delta loads instead of the wait, so the projection's weight requests
// (tens of MB at batch 1) do not queue ahead of the norm's two rows in the memory system, as
// the attention's late trigger keeps them off its K/V (attention_long.cu kLateTrigger).
template <bool kOffset, bool kEarly, bool kOneRound = false, bool kLate = false>
__device__ __forceinline__ void add_rmsnorm_entry(__nv_bfloat16* residual,
                                                  const __nv_bfloat16* delta,
                                                  const __nv_bfloat16* w, __nv_bfloat16* out,
                                                  uint32_t rows, uint32_t dim, float eps) {
  static_assert(!(kEarly && kLate), "one trigger point");
  if (blockIdx.x >= rows) return;
  prefetch_weight(w, dim);
  if constexpr (kLate)
    atlas::pdl_wait();
  else
    atlas::pdl_enter_early<kEarly>();
  add_rmsnorm_row<kOffset, false, kOneRound, kLate>(residual, delta, w, out, dim, eps);
}

extern "C" __global__ void __launch_bounds__(1024)
add_rmsnorm_bf16(__nv_bfloat16* __restrict__ residual,
                 const __nv_bfloat16* __restrict__ delta,
                 const __nv_bfloat16* __restrict__ w, __nv_bfloat16* __restrict__ out,
                 uint32_t rows, uint32_t dim, float eps) {
  add_rmsnorm_entry<false, false>(residual, delta, w, out, rows, dim, eps);
}

extern "C" __global__ void __launch_bounds__(1024)
add_rmsnorm_offset_bf16(__nv_bfloat16* __restrict__ residual,
                        const __nv_bfloat16* __restrict__ delta,
                        const __nv_bfloat16* __restrict__ w, __nv_bfloat16* __restrict__ out,
                        uint32_t rows, uint32_t dim, float eps) {
  add_rmsnorm_entry<true, false>(residual, delta, w, out, rows, dim, eps);
}

extern "C" __global__ void __launch_bounds__(1024)
add_rmsnorm_early_bf16(__nv_bfloat16* __restrict__ residual,
                       const __nv_bfloat16* __restrict__ delta,
                       const __nv_bfloat16* __restrict__ w, __nv_bfloat16* __restrict__ out,
                       uint32_t rows, uint32_t dim, float eps) {
  add_rmsnorm_entry<false, true>(residual, delta, w, out, rows, dim, eps);
}

extern "C" __global__ void __launch_bounds__(1024)
add_rmsnorm_offset_early_bf16(__nv_bfloat16* __restrict__ residual,
                              const __nv_bfloat16* __restrict__ delta,
                              const __nv_bfloat16* __restrict__ w, __nv_bfloat16* __restrict__ out,
                              uint32_t rows, uint32_t dim, float eps) {
  add_rmsnorm_entry<true, true>(residual, delta, w, out, rows, dim, eps);
}

extern "C" __global__ void __launch_bounds__(1024)
add_rmsnorm_late_bf16(__nv_bfloat16* __restrict__ residual,
                      const __nv_bfloat16* __restrict__ delta,
                      const __nv_bfloat16* __restrict__ w, __nv_bfloat16* __restrict__ out,
                      uint32_t rows, uint32_t dim, float eps) {
  add_rmsnorm_entry<false, false, false, true>(residual, delta, w, out, rows, dim, eps);
}

extern "C" __global__ void __launch_bounds__(1024)
add_rmsnorm_offset_late_bf16(__nv_bfloat16* __restrict__ residual,
                             const __nv_bfloat16* __restrict__ delta,
                             const __nv_bfloat16* __restrict__ w, __nv_bfloat16* __restrict__ out,
                             uint32_t rows, uint32_t dim, float eps) {
  add_rmsnorm_entry<true, false, false, true>(residual, delta, w, out, rows, dim, eps);
}

// The step's first norm with its embedding lookup, one row a block: r = table[ids[row]]
// (times `scale` rounded to bf16 once where scale != 1, Gemma's embed_scale; a zero row for
// an id outside [0, vocab)), residual[row] = r, out[row] = RMSNorm(r) * w: embedding_bf16
// (embedding_scaled_bf16) then the plain entry, bit for bit, in one launch, so a decode
// step's first projection waits on one kernel after the staged inputs instead of two.
// kLate as add_rmsnorm's: the trigger follows the row's loads (ops/norm.norm_triggers_late).
// The id is the staging kernel's output: read through L2 (a plain __restrict__ load may be
// scheduled above the wait, tools/gpu/pdl_audit.py).
template <bool kOffset, bool kOneRound, bool kLate>
__device__ __forceinline__ void embed_rmsnorm_entry(const int32_t* ids,
                                                    const __nv_bfloat16* __restrict__ table,
                                                    __nv_bfloat16* residual,
                                                    const __nv_bfloat16* w, __nv_bfloat16* out,
                                                    uint32_t rows, uint32_t dim, uint32_t vocab,
                                                    float scale, float eps) {
  if (blockIdx.x >= rows) return;
  prefetch_weight(w, dim);
  if constexpr (kLate)
    atlas::pdl_wait();
  else
    atlas::pdl_enter();
  __shared__ float scratch[32];
  const int32_t id = __ldcg(ids + blockIdx.x);
  const bool valid = id >= 0 && static_cast<uint32_t>(id) < vocab;
  const int nvec = static_cast<int>(dim / atlas::kBf16PerVec);
  const uint4* src = reinterpret_cast<const uint4*>(table + (valid ? static_cast<size_t>(id)
                                                                   : size_t{0}) * dim);
  uint4 packed[kMaxVecs];
#pragma unroll
  for (int j = 0; j < kMaxVecs; ++j) {
    const int i = threadIdx.x + j * blockDim.x;
    packed[j] = valid && i < nvec ? src[i] : make_uint4(0u, 0u, 0u, 0u);
  }
  const size_t base = static_cast<size_t>(blockIdx.x) * dim;
  uint4* rv = reinterpret_cast<uint4*>(residual + base);
#pragma unroll
  for (int j = 0; j < kMaxVecs; ++j) {
    const int i = threadIdx.x + j * blockDim.x;
    if (i >= nvec) continue;
    if (scale != 1.f) packed[j] = atlas::scale_bf16x8(packed[j], scale);
    rv[i] = packed[j];
  }
  if constexpr (kLate) atlas::pdl_launch_dependents();
  store_normed<kOffset, kOneRound>(packed, nvec, w, out + base, dim, eps, scratch);
}

extern "C" __global__ void __launch_bounds__(1024)
embed_rmsnorm_bf16(
    const int32_t* __restrict__ ids, const __nv_bfloat16* __restrict__ table,
    __nv_bfloat16* __restrict__ residual, const __nv_bfloat16* __restrict__ w,
    __nv_bfloat16* __restrict__ out, uint32_t rows, uint32_t dim, uint32_t vocab, float scale,
    float eps) {
  embed_rmsnorm_entry<false, false, false>(ids, table, residual, w, out, rows, dim, vocab,
                                           scale, eps);
}

extern "C" __global__ void __launch_bounds__(1024)
embed_rmsnorm_offset_bf16(
    const int32_t* __restrict__ ids, const __nv_bfloat16* __restrict__ table,
    __nv_bfloat16* __restrict__ residual, const __nv_bfloat16* __restrict__ w,
    __nv_bfloat16* __restrict__ out, uint32_t rows, uint32_t dim, uint32_t vocab, float scale,
    float eps) {
  embed_rmsnorm_entry<true, false, false>(ids, table, residual, w, out, rows, dim, vocab,
                                          scale, eps);
}

extern "C" __global__ void __launch_bounds__(1024)
embed_rmsnorm_oneround_bf16(
    const int32_t* __restrict__ ids, const __nv_bfloat16* __restrict__ table,
    __nv_bfloat16* __restrict__ residual, const __nv_bfloat16* __restrict__ w,
    __nv_bfloat16* __restrict__ out, uint32_t rows, uint32_t dim, uint32_t vocab, float scale,
    float eps) {
  embed_rmsnorm_entry<false, true, false>(ids, table, residual, w, out, rows, dim, vocab,
                                          scale, eps);
}

extern "C" __global__ void __launch_bounds__(1024)
embed_rmsnorm_late_bf16(
    const int32_t* __restrict__ ids, const __nv_bfloat16* __restrict__ table,
    __nv_bfloat16* __restrict__ residual, const __nv_bfloat16* __restrict__ w,
    __nv_bfloat16* __restrict__ out, uint32_t rows, uint32_t dim, uint32_t vocab, float scale,
    float eps) {
  embed_rmsnorm_entry<false, false, true>(ids, table, residual, w, out, rows, dim, vocab,
                                          scale, eps);
}

extern "C" __global__ void __launch_bounds__(1024)
embed_rmsnorm_offset_late_bf16(
    const int32_t* __restrict__ ids, const __nv_bfloat16* __restrict__ table,
    __nv_bfloat16* __restrict__ residual, const __nv_bfloat16* __restrict__ w,
    __nv_bfloat16* __restrict__ out, uint32_t rows, uint32_t dim, uint32_t vocab, float scale,
    float eps) {
  embed_rmsnorm_entry<true, false, true>(ids, table, residual, w, out, rows, dim, vocab,
                                         scale, eps);
}

extern "C" __global__ void __launch_bounds__(1024)
add_rmsnorm_oneround_bf16(__nv_bfloat16* __restrict__ residual,
                          const __nv_bfloat16* __restrict__ delta,
                          const __nv_bfloat16* __restrict__ w, __nv_bfloat16* __restrict__ out,
                          uint32_t rows, uint32_t dim, float eps) {
  add_rmsnorm_entry<false, false, true>(residual, delta, w, out, rows, dim, eps);
}

extern "C" __global__ void __launch_bounds__(1024)
add_rmsnorm_oneround_early_bf16(__nv_bfloat16* __restrict__ residual,
                                const __nv_bfloat16* __restrict__ delta,
                                const __nv_bfloat16* __restrict__ w,
                                __nv_bfloat16* __restrict__ out, uint32_t rows, uint32_t dim,
                                float eps) {
  add_rmsnorm_entry<false, true, true>(residual, delta, w, out, rows, dim, eps);
}

// Gemma 3's residual step: the sublayer's output norm (w_delta), the add, the next norm (w),
// all zero-centred weights, in one launch instead of rmsnorm_offset then add_rmsnorm_offset.
extern "C" __global__ void __launch_bounds__(1024)
norm_add_rmsnorm_offset_bf16(__nv_bfloat16* __restrict__ residual,
                             const __nv_bfloat16* __restrict__ delta,
                             const __nv_bfloat16* __restrict__ w_delta,
                             const __nv_bfloat16* __restrict__ w, __nv_bfloat16* __restrict__ out,
                             uint32_t rows, uint32_t dim, float eps) {
  if (blockIdx.x >= rows) return;
  prefetch_weight(w_delta, dim);
  prefetch_weight(w, dim);
  atlas::pdl_enter();
  add_rmsnorm_row<true, true>(residual, delta, w, out, dim, eps, w_delta);
}
