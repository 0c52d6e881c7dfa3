// Decode GEMV over quantized weights on tensor cores: y[m, n] = sum_k x[m, k] * W[n, k] for
// 1 <= m <= 64, W = FP8 E4M3 codes under a scale map, or NVFP4 (E2M1 codes, one E4M3 scale
// per 16 values, one f32 scale per row). The quantized bytes stream from HBM once for any m.
//
// Why tensor cores at batch 1: the CUDA-core GEMV (gemv_core.cuh) spends ~6 instructions
// per FP8 weight (integer decode to f32, an FFMA, scale loads) and ~5 per NVFP4 weight;
// at 4.3 TB/s an SM receives ~16 weight bytes a cycle, i.e. 16 FP8 / 32 NVFP4 values, and
// issues 128 thread-instructions a cycle: 8 / 4 instructions per value is the whole budget,
// so those kernels were issue-bound at 45% / 30% of copy bandwidth. Here a weight costs
// its decode into half a bf16 pair (FP8: 2 instructions a value, NVFP4: 2.5 with the
// scale) and 1/8 of an mma.m16n8k16, which also takes over the f32 accumulation.
//
// Mapping (as gemv_mma.cu): C^T[n, m] = W[n, k] . X^T, weight rows are the MMA's A operand
// (16 per tile, kTiles = 2 tiles a block), batch rows its B operand (8 per tile, kBTiles =
// ceil(m / 8)). A k-step is 64 values: lane (g = lane / 4, c = lane % 4) holds values
// 64 s + 16 c .. + 15 of weight rows g and g + 8 of each tile (FP8: 16 bytes, NVFP4: 8
// bytes) and of batch row g of each B tile (32 bytes of bf16). Its 16 values form 8 pairs
// (2p, 2p + 1); MMA j of the step takes pairs 2j and 2j + 1 as the k slots (2c, 2c+1) and
// (2c+8, 2c+9) of both operands, so A and B see the same permutation of k and every
// fragment is the lane's own bytes. The 16 values of a lane are one NVFP4 scale group.
//
// Scales. NVFP4: an E2M1 value times its E4M3 group scale is exact in bf16 (at most 2 x 4
// significant bits, 2^-10 .. 2688), so each (row, group) gets byte tables of its eight
// scaled magnitudes (4 bf16x2 multiplies + 4 PRMTs per 16 values) and the codes are looked
// up in them; the row's f32 scale multiplies the result once at the end. FP8: decoded pairs are the
// values times 2^-112 (quant_decode.cuh); each step's MMAs start from zero and their sum
// is added times s(row, 64 s) * 2^56, the result times 2^56 at the end. A step must lie in
// one scale column block: col_stride = 0 or col_shift >= 6. Products under 2^-126 after
// the 2^-112 (|x q| < 2^-14) may be flushed by the tensor cores: an absolute error of at
// most k 2^-14 s, far below a bf16 ulp of any output with a non-negligible x.
//
// Loads go through a per-warp cp.async ring in dynamic shared memory (weights of the first
// stages requested before the PDL wait); each warp owns a contiguous range of k-steps, the
// warps' partials are summed in a fixed order (bit-reproducible), rounded once.
// Launch (ops/matmul_quant_mma.py): grid = ceil(n / 32), block = 256, dynamic shared memory
// ring_bytes(format, ceil(m / 8)). `_small` entry points take m <= 8 only (fewer registers:
// two blocks per SM); `_f32` ones write f32 logits (a quantized LM head). Preconditions:
// k % 64 == 0, n >= 1, x 16-byte and w 16-byte aligned (NVFP4: scales 4-byte aligned).
#include "mma_util.cuh"
#include "quant_decode.cuh"

namespace {

using namespace atlas::quant;

constexpr int kWarps = 8;
constexpr int kTiles = 2;                      // 16-row A tiles per block
constexpr int kRows = 16 * kTiles;             // ops/matmul_quant_mma.py MMA_ROWS
constexpr int kStepK = 64;                     // k values per lane-quad step
constexpr int kMaxStages = 12;
// Ring bytes a block aims at: at m <= 8 (one B tile, the _small entry points' few registers)
// two blocks share an SM; more rows take the full entry points (one block per SM).
constexpr int kRingBudgetSmall = 110 * 1024;   // ops/matmul_quant_mma.py _RING_BUDGET
constexpr int kRingBudgetFull = 200 * 1024;
constexpr int kXBytes = 32;                    // a lane's x values of one B tile per step

struct Fp8 {
  static constexpr int kWBytes = 16;           // a lane's bytes of one weight row per step
  static constexpr int kScaleBytes = 0;        // streamed group scales per stage
};
struct Nvfp4 {
  static constexpr int kWBytes = 8;
  static constexpr int kScaleBytes = kTiles * 16 * 4;  // 4 group scales of each row
};

__host__ __device__ constexpr int stages_within(int fit) {
  return fit > kMaxStages ? kMaxStages : fit < 2 ? 2 : fit;
}

// x slots: per B tile, the lanes of the first xrows batch rows (4 lanes a row; at m <= 8
// the slots shrink to the rows that exist, rounded up to a power of two).
template <class F>
__host__ __device__ constexpr int stage_bytes(int btiles, int xrows) {
  return 2 * kTiles * 32 * F::kWBytes + F::kScaleBytes + btiles * 4 * xrows * kXBytes;
}

template <class F>
__host__ __device__ constexpr int ring_stages(int btiles, int xrows) {
  // as many steps in flight per warp as the budget holds, 2..kMaxStages
  return stages_within((btiles == 1 ? kRingBudgetSmall : kRingBudgetFull) /
                       (kWarps * stage_bytes<F>(btiles, xrows)));
}

__device__ __forceinline__ void cp_async_8(void* dst, const void* src) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 8;\n" ::"r"(atlas::smem_addr(dst)),
               "l"(src) : "memory");
}

__device__ __forceinline__ void cp_async_4(void* dst, const void* src) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(atlas::smem_addr(dst)),
               "l"(src) : "memory");
}

struct Fp8Scales {  // s(n, k) = scale[(n >> row_shift) * row_stride + (k >> col_shift) * col_stride]
  const float* scale;
  uint32_t row_shift, row_stride, col_shift, col_stride;
  __device__ __forceinline__ float at(int row, int k0) const {
    return __ldg(scale + (static_cast<uint32_t>(row) >> row_shift) * row_stride +
                 (static_cast<uint32_t>(k0) >> col_shift) * col_stride) * 0x1p56f;
  }
};

struct Nvfp4Scales {
  const uint8_t* group;   // [n, k / 16] E4M3
  const float* row;       // [n]
};

// One lane's cursors into the block's operands, at the next step to copy: steps are copied
// in order, so each copy advances the cursors by one step instead of recomputing addresses.
template <class F, int kBTiles, int kXRows>
struct Lane {
  const uint8_t* wrow[kTiles][2];  // weight rows g and g + 8 of each tile
  const uint4* xrow[kBTiles];      // batch row g of each B tile; null past m
  const uint8_t* srow;             // NVFP4: the group scales of the row this lane copies
  int lane;

  // The weight (and group-scale) slots of the next step into `stage` (may run before the
  // PDL wait: no kernel writes them).
  __device__ __forceinline__ void fill_weights(uint8_t* stage) {
#pragma unroll
    for (int t = 0; t < kTiles; ++t)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        uint8_t* dst = stage + ((2 * t + h) * 32 + lane) * F::kWBytes;
        if constexpr (F::kWBytes == 16)
          atlas::cp_async_16(dst, wrow[t][h], true);
        else
          cp_async_8(dst, wrow[t][h]);
        wrow[t][h] += 4 * F::kWBytes;
      }
    if constexpr (F::kScaleBytes > 0) {  // lane l: the 4 scales of tile l / 16, row l % 16
      cp_async_4(stage + 2 * kTiles * 32 * F::kWBytes + 4 * lane, srow);
      srow += 4;
    }
  }

  // The activation slots of the next step (only after the PDL wait).
  __device__ __forceinline__ void fill_x(uint8_t* stage) {
    uint8_t* base = stage + 2 * kTiles * 32 * F::kWBytes + F::kScaleBytes;
#pragma unroll
    for (int b = 0; b < kBTiles; ++b) {
      if (!xrow[b]) continue;  // a batch row past m: its MMA column is never stored, so
                               // whatever the slot holds (even NaN) cannot reach an output
      uint8_t* dst = base + (b * 4 * kXRows + lane) * kXBytes;  // lane < 4 kXRows here
      atlas::cp_async_16(dst, xrow[b], true);
      atlas::cp_async_16(dst + 16, xrow[b] + 1, true);
      xrow[b] += kStepK / 8;
    }
  }
};

// This lane's x values of the step; lanes of rows past kXRows (past m) read another row's.
template <class F, int kBTiles, int kXRows>
__device__ __forceinline__ void load_x(const uint8_t* stage, int lane, uint4 (&xv)[kBTiles][2]) {
  const uint8_t* base = stage + 2 * kTiles * 32 * F::kWBytes + F::kScaleBytes;
#pragma unroll
  for (int b = 0; b < kBTiles; ++b) {
    const uint4* p = reinterpret_cast<const uint4*>(
        base + (b * 4 * kXRows + (lane & (4 * kXRows - 1))) * kXBytes);
    xv[b][0] = p[0];
    xv[b][1] = p[1];
  }
}

// MMA j of a step: A pairs (2j, 2j + 1) of rows g and g + 8, B the x words 2j, 2j + 1.
template <int kBTiles>
__device__ __forceinline__ void mma_pairs(float (&acc)[kBTiles][4], const uint32_t (&a)[4],
                                          const uint4 (&xv)[kBTiles][2], int j) {
#pragma unroll
  for (int b = 0; b < kBTiles; ++b)
    atlas::mma_bf16_16816(acc[b], a, word(xv[b][j >> 1], 2 * (j & 1)),
                          word(xv[b][j >> 1], 2 * (j & 1) + 1));
}

// One FP8 step: acc += (the step's MMAs) * s(row, k0) for rows g and g + 8 of each tile.
template <int kBTiles, int kXRows>
__device__ __forceinline__ void fp8_step(const uint8_t* stage, int lane, int g, int row0, int k0,
                                         const Fp8Scales& sc, int n,
                                         float (&acc)[kTiles][kBTiles][4]) {
  float s[kTiles][2];
#pragma unroll
  for (int t = 0; t < kTiles; ++t)
#pragma unroll
    for (int h = 0; h < 2; ++h) s[t][h] = sc.at(min(row0 + 16 * t + 8 * h + g, n - 1), k0);
  uint4 xv[kBTiles][2];
  load_x<Fp8, kBTiles, kXRows>(stage, lane, xv);
#pragma unroll
  for (int t = 0; t < kTiles; ++t) {
    const uint4 wa = reinterpret_cast<const uint4*>(stage)[(2 * t) * 32 + lane];
    const uint4 wb = reinterpret_cast<const uint4*>(stage)[(2 * t + 1) * 32 + lane];
    float part[kBTiles][4];
#pragma unroll
    for (int b = 0; b < kBTiles; ++b)
#pragma unroll
      for (int i = 0; i < 4; ++i) part[b][i] = 0.f;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const uint32_t ra = word(wa, j), rb = word(wb, j);
      const uint32_t a[4] = {e4m3x2_to_bf16x2<false>(ra), e4m3x2_to_bf16x2<false>(rb),
                             e4m3x2_to_bf16x2<true>(ra), e4m3x2_to_bf16x2<true>(rb)};
      mma_pairs(part, a, xv, j);
    }
#pragma unroll
    for (int b = 0; b < kBTiles; ++b)
#pragma unroll
      for (int i = 0; i < 4; ++i) acc[t][b][i] = fmaf(part[b][i], s[t][i >> 1], acc[t][b][i]);
  }
}

// One NVFP4 step: A = E2M1 codes times their group scale, looked up in tables made per
// (row, group) from the scale (exact in bf16, E2m1Lut).
template <int kBTiles, int kXRows>
__device__ __forceinline__ void nvfp4_step(const uint8_t* stage, int lane, int g, int c,
                                           float (&acc)[kTiles][kBTiles][4]) {
  const uint8_t* scales = stage + 2 * kTiles * 32 * Nvfp4::kWBytes;
  uint4 xv[kBTiles][2];
  load_x<Nvfp4, kBTiles, kXRows>(stage, lane, xv);
#pragma unroll
  for (int t = 0; t < kTiles; ++t) {
    const uint2 wa = reinterpret_cast<const uint2*>(stage)[(2 * t) * 32 + lane];
    const uint2 wb = reinterpret_cast<const uint2*>(stage)[(2 * t + 1) * 32 + lane];
    uint32_t sa, sb;  // this lane's group scales of rows g and g + 8
    e4m3x2_to_bf16_pairs(scales[(16 * t + g) * 4 + c] | (scales[(16 * t + 8 + g) * 4 + c] << 8),
                         sa, sb);
    const E2m1Lut la = E2m1Lut::scaled(sa), lb = E2m1Lut::scaled(sb);
#pragma unroll
    for (int half = 0; half < 2; ++half) {  // word `half`: values 8 half .. 8 half + 7
      uint32_t pa[4], pb[4];
      e2m1x8_to_bf16x2(half ? wa.y : wa.x, la, pa);
      e2m1x8_to_bf16x2(half ? wb.y : wb.x, lb, pb);
#pragma unroll
      for (int jj = 0; jj < 2; ++jj) {  // MMA 2 half + jj: pairs 2 jj, 2 jj + 1 of the word
        const uint32_t a[4] = {pa[2 * jj], pb[2 * jj], pa[2 * jj + 1], pb[2 * jj + 1]};
        mma_pairs(acc[t], a, xv, 2 * half + jj);
      }
    }
  }
}

template <class F, bool kF32Out, int kBTiles, int kXRows = 8>
__device__ __forceinline__ void gemv_mma_quant(const __nv_bfloat16* __restrict__ x,
                                               const uint8_t* __restrict__ w, Fp8Scales fp8,
                                               Nvfp4Scales nvfp4, void* __restrict__ y,
                                               int m, int n, int k, uint8_t* smem) {
  constexpr int kStages = ring_stages<F>(kBTiles, kXRows);
  constexpr int kStage = stage_bytes<F>(kBTiles, kXRows);
  constexpr int kPartials = kWarps * kTiles * kBTiles * 4 * 32;  // f32 partial sums
  static_assert(kWarps * kStages * kStage >= kPartials * 4, "partials must fit the ring");
  static_assert(kWarps * kStages * kStage <= 227 * 1024, "the ring must fit an SM");
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, c = lane & 3;
  const int row0 = blockIdx.x * kRows;
  const int steps = k / kStepK;
  const size_t wpitch = static_cast<size_t>(k) * F::kWBytes / 16;  // row bytes

  // This warp's k-steps [first, first + count) stream through its ring: slot j holds step
  // first + i for i % kStages == j; commit group i holds what step i needs.
  const int first = steps * warp / kWarps, count = steps * (warp + 1) / kWarps - first;
  Lane<F, kBTiles, kXRows> src;
  src.lane = lane;
#pragma unroll
  for (int t = 0; t < kTiles; ++t)
#pragma unroll
    for (int h = 0; h < 2; ++h)
      src.wrow[t][h] = w + static_cast<size_t>(min(row0 + 16 * t + 8 * h + g, n - 1)) * wpitch +
                       (4 * first + c) * F::kWBytes;
#pragma unroll
  for (int b = 0; b < kBTiles; ++b)
    src.xrow[b] = 8 * b + g < m ? reinterpret_cast<const uint4*>(x) +
                                      static_cast<size_t>(8 * b + g) * (k / 8) +
                                      first * (kStepK / 8) + 2 * c
                                : nullptr;
  src.srow = nvfp4.group + static_cast<size_t>(min(row0 + lane, n - 1)) * (k / 16) + 4 * first;

  uint8_t* const ring = smem + warp * kStages * kStage;
  float acc[kTiles][kBTiles][4] = {};

  // The weights (and group scales) of the first kStages - 1 steps are requested before the
  // PDL wait, since no kernel writes them; the activations after it.
  const int primed = min(count, kStages - 1);
  for (int i = 0; i < primed; ++i) src.fill_weights(ring + i * kStage);
  atlas::pdl_enter();
  for (int i = 0; i < kStages - 1; ++i) {
    if (i < primed) src.fill_x(ring + i * kStage);
    atlas::cp_async_commit();  // empty groups past `count` keep the group arithmetic
  }
  for (int i = 0; i < count; ++i) {
    atlas::cp_async_wait<kStages - 2>();  // groups 0..i have landed (this lane's copies)
    __syncwarp();  // ... and every lane's: group scales are read by other lanes than the
                   // one that copied them; every lane is also done with step i - 1's slot
    const uint8_t* stage = ring + (i % kStages) * kStage;
    if constexpr (F::kScaleBytes == 0)
      fp8_step<kBTiles, kXRows>(stage, lane, g, row0, (first + i) * kStepK, fp8, n, acc);
    else
      nvfp4_step<kBTiles, kXRows>(stage, lane, g, c, acc);
    const int next = i + kStages - 1;  // into the slot step i - 1 used
    if (next < count) {
      src.fill_weights(ring + (next % kStages) * kStage);
      src.fill_x(ring + (next % kStages) * kStage);
    }
    atlas::cp_async_commit();
  }
  atlas::cp_async_wait<0>();
  __syncthreads();  // every warp is done with its ring before the partials reuse it

  // Partials as [warp][v][lane], v = (t * kBTiles + b) * 4 + i the flat fragment index.
  constexpr int kValues = kTiles * kBTiles * 4;
  float* part = reinterpret_cast<float*>(smem);
  const float* flat = &acc[0][0][0];
#pragma unroll
  for (int v = 0; v < kValues; ++v) part[(warp * kValues + v) * 32 + lane] = flat[v];
  __syncthreads();
  // Output (mi, r): value i = 2 h + (mi & 1) of lane 4 (r % 8) + (mi % 8) / 2 of
  // (tile r / 16, B tile mi / 8), h = (r % 16) / 8; warps summed in order.
  for (int e = threadIdx.x; e < m * kRows; e += kWarps * 32) {
    const int mi = e / kRows, r = e % kRows, row = row0 + r;
    if (row >= n) continue;
    const int t = r >> 4, h = (r >> 3) & 1, gl = r & 7, b = mi >> 3, col = mi & 7;
    const int at = ((t * kBTiles + b) * 4 + 2 * h + (col & 1)) * 32 + 4 * gl + (col >> 1);
    float sum = 0.f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) sum += part[w * kValues * 32 + at];
    sum *= F::kScaleBytes == 0 ? 0x1p56f : __ldg(nvfp4.row + row);
    const size_t out = static_cast<size_t>(mi) * n + row;
    if (kF32Out)  // logits: the bf16-rounded value, widened (as the bf16 GEMV's f32 output)
      static_cast<float*>(y)[out] = atlas::round_bf16(sum);
    else
      static_cast<__nv_bfloat16*>(y)[out] = atlas::f32_to_bf16(sum);
  }
}

template <class F, bool kF32Out = false>
__device__ __forceinline__ void dispatch(const __nv_bfloat16* x, const uint8_t* w, Fp8Scales fp8,
                                         Nvfp4Scales nvfp4, void* y, uint32_t m,
                                         uint32_t n, uint32_t k, bool small) {
  extern __shared__ uint4 smem_vec[];
  uint8_t* smem = reinterpret_cast<uint8_t*>(smem_vec);
  const int mi = static_cast<int>(m), ni = static_cast<int>(n), ki = static_cast<int>(k);
  if (m <= 8) {
    switch (m) {  // one B tile, x slots for 1, 2, 4 or 8 batch rows
      case 1: gemv_mma_quant<F, kF32Out, 1, 1>(x, w, fp8, nvfp4, y, mi, ni, ki, smem); break;
      case 2: gemv_mma_quant<F, kF32Out, 1, 2>(x, w, fp8, nvfp4, y, mi, ni, ki, smem); break;
      case 3:
      case 4: gemv_mma_quant<F, kF32Out, 1, 4>(x, w, fp8, nvfp4, y, mi, ni, ki, smem); break;
      default: gemv_mma_quant<F, kF32Out, 1, 8>(x, w, fp8, nvfp4, y, mi, ni, ki, smem); break;
    }
    return;
  }
  if (small) __trap();  // ops/matmul_quant_mma.py routes m > 8 to the full entry points
  switch ((m + 7) / 8) {
    case 2: gemv_mma_quant<F, kF32Out, 2>(x, w, fp8, nvfp4, y, mi, ni, ki, smem); break;
    case 3: gemv_mma_quant<F, kF32Out, 3>(x, w, fp8, nvfp4, y, mi, ni, ki, smem); break;
    case 4: gemv_mma_quant<F, kF32Out, 4>(x, w, fp8, nvfp4, y, mi, ni, ki, smem); break;
    case 5: gemv_mma_quant<F, kF32Out, 5>(x, w, fp8, nvfp4, y, mi, ni, ki, smem); break;
    case 6: gemv_mma_quant<F, kF32Out, 6>(x, w, fp8, nvfp4, y, mi, ni, ki, smem); break;
    case 7: gemv_mma_quant<F, kF32Out, 7>(x, w, fp8, nvfp4, y, mi, ni, ki, smem); break;
    case 8: gemv_mma_quant<F, kF32Out, 8>(x, w, fp8, nvfp4, y, mi, ni, ki, smem); break;
    default: __trap();  // ops/matmul_quant_mma.py checks 1 <= m <= 64
  }
}

}  // namespace

#define ATLAS_FP8_MMA_ARGS                                                                 \
  const __nv_bfloat16 *x, const uint8_t *w, const float *scale, void *y, uint32_t m,         \
      uint32_t n, uint32_t k, uint32_t row_shift, uint32_t row_stride, uint32_t col_shift,    \
      uint32_t col_stride
#define ATLAS_FP8_MMA_SCALES (Fp8Scales{scale, row_shift, row_stride, col_shift, col_stride})
#define ATLAS_NVFP4_MMA_ARGS                                                                 \
  const __nv_bfloat16 *x, const uint8_t *w, const uint8_t *scale, const float *row_scale,  \
      void *y, uint32_t m, uint32_t n, uint32_t k

extern "C" __global__ void __launch_bounds__(kWarps * 32, 2)
    gemv_mma_fp8_bf16_small(ATLAS_FP8_MMA_ARGS) {
  dispatch<Fp8>(x, w, ATLAS_FP8_MMA_SCALES, Nvfp4Scales{w, nullptr}, y, m, n, k, true);
}

extern "C" __global__ void __launch_bounds__(kWarps * 32, 1)
    gemv_mma_fp8_bf16(ATLAS_FP8_MMA_ARGS) {
  dispatch<Fp8>(x, w, ATLAS_FP8_MMA_SCALES, Nvfp4Scales{w, nullptr}, y, m, n, k, false);
}

// f32 outputs (logits of a quantized LM head: each bf16-rounded sum widened), 1..64 rows
extern "C" __global__ void __launch_bounds__(kWarps * 32, 1)
    gemv_mma_fp8_f32(ATLAS_FP8_MMA_ARGS) {
  dispatch<Fp8, true>(x, w, ATLAS_FP8_MMA_SCALES, Nvfp4Scales{w, nullptr}, y, m, n, k, false);
}

extern "C" __global__ void __launch_bounds__(kWarps * 32, 1)
    gemv_mma_nvfp4_f32(ATLAS_NVFP4_MMA_ARGS) {
  dispatch<Nvfp4, true>(x, w, Fp8Scales{}, Nvfp4Scales{scale, row_scale}, y, m, n, k, false);
}

extern "C" __global__ void __launch_bounds__(kWarps * 32, 2)
    gemv_mma_nvfp4_bf16_small(ATLAS_NVFP4_MMA_ARGS) {
  dispatch<Nvfp4>(x, w, Fp8Scales{}, Nvfp4Scales{scale, row_scale}, y, m, n, k, true);
}

extern "C" __global__ void __launch_bounds__(kWarps * 32, 1)
    gemv_mma_nvfp4_bf16(ATLAS_NVFP4_MMA_ARGS) {
  dispatch<Nvfp4>(x, w, Fp8Scales{}, Nvfp4Scales{scale, row_scale}, y, m, n, k, false);
}
