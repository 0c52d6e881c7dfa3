// Decode GEMV over NVFP4 weights: y[m, n] = sum_k x[m, k] * e2m1(q[n, k]) * e4m3(s[n, k / 16])
// * g[n], 1 <= m <= 8, dequantized in registers (weights never expanded in memory).
//
// Layout (ModelOpt / compressed-tensors NVFP4): q packed two E2M1 codes a byte [n, k / 2],
// element 2i in the low nibble; s one E4M3 scale per 16 values [n, k / 16]; g a float32 per
// output row (the checkpoint's per-tensor global scale repeated over the tensor's rows, so
// fused q|k|v or gate|up parts keep their own). A 16-byte chunk holds 32 values: two scale
// groups, kGroups = 2 in gemv_core.cuh.
//
// E2M1 -> f32 without a conversion instruction (Hopper has none): the f32 bit patterns of
// the eight magnitudes {0, .5, 1, 1.5, 2, 3, 4, 6} are zero below their top two bytes, so
// PRMT byte lookups give exact bf16 pairs (quant_decode.cuh e2m1x8_to_bf16x2, with the
// unscaled table) and widening a pair is a shift and a mask. About 2.5 integer ops a value,
// every value exact. The E4M3 group scale is e4m3_to_f32 (exact, subnormals included)
// times g[row] (one f32 rounding).
// Launch (ops/matmul_quant.py): grid = ceil(n / 4), block = min(256, roundup32(k / 32)).
// Preconditions: k % 32 == 0, x (or gate_up) and q 16-byte aligned, s 2-byte aligned.
#include "gemv_core.cuh"
#include "quant_decode.cuh"

namespace {

using namespace atlas::gemv;
using atlas::quant::E2m1Lut;
using atlas::quant::e4m3_to_f32;

struct Nvfp4W {  // q [n, k / 2] packed E2M1, 32 values a chunk, two 16-value scale groups
  static constexpr int kSub = 4;
  static constexpr int kGroups = 2;
  static constexpr bool kScaled = true;
  const uint16_t* scale_pairs;  // s viewed as [n, k / 32] pairs of E4M3 codes
  const float* row_scale;       // g [n]
  uint32_t pairs_per_row;       // k / 32
  E2m1Lut lut;                  // the unscaled E2M1 magnitudes (scale 1)
  // scale group g (values 16 g .. 16 g + 15) of a chunk: exact bf16 pairs, widened
  __device__ __forceinline__ void widen(const uint4& v, int g, float (&wf)[16]) const {
#pragma unroll
    for (int w = 0; w < 2; ++w) {
      uint32_t p[4];
      atlas::quant::e2m1x8_to_bf16x2(w == 0 ? (g == 0 ? v.x : v.z) : (g == 0 ? v.y : v.w), lut,
                                     p);
#pragma unroll
      for (int i = 0; i < 4; ++i) atlas::unpack_bf16x2(p[i], wf[8 * w + 2 * i], wf[8 * w + 2 * i + 1]);
    }
  }
  __device__ __forceinline__ void chunk_scales(int row, int c, float (&s)[2]) const {
    const uint32_t pair = __ldg(scale_pairs + static_cast<size_t>(row) * pairs_per_row + c);
    const float g = __ldg(row_scale + row);
    s[0] = e4m3_to_f32(pair & 0xffu) * g;
    s[1] = e4m3_to_f32(pair >> 8) * g;
  }
};

__device__ __forceinline__ Nvfp4W nvfp4_fmt(const uint8_t* scale, const float* row_scale,
                                            uint32_t k) {
  return {reinterpret_cast<const uint16_t*>(scale), row_scale, k >> 5,
          E2m1Lut::scaled(0x3F803F80u)};  // bf16 pair (1, 1)
}

__shared__ float partial_sums[kMaxThreads / 32][kMaxAcc];  // [warp][m * 4 + r]

}  // namespace

#define ATLAS_NVFP4_ARGS \
  const uint8_t *scale, const float *row_scale, __nv_bfloat16 *y, uint32_t m, uint32_t n, uint32_t k

extern "C" __global__ void __launch_bounds__(kMaxThreads)
    gemv_nvfp4_bf16(const __nv_bfloat16* x, const uint8_t* w, ATLAS_NVFP4_ARGS) {
  gemv_any_m<false>(plain_x(x, k), nvfp4_fmt(scale, row_scale, k), w, y, m, n, k, partial_sums);
}

// m == 1 only: the single-row instantiation alone keeps registers low (more blocks per SM).
extern "C" __global__ void __launch_bounds__(kMaxThreads)
    gemv_nvfp4_bf16_single(const __nv_bfloat16* x, const uint8_t* w, ATLAS_NVFP4_ARGS) {
  if (m != 1) __trap();
  gemv_rows<1, false>(plain_x(x, k), nvfp4_fmt(scale, row_scale, k), w, y, n, k, partial_sums);
}

// The MLP down projection with SwiGLU fused into the x load (gate_up [m, 2k] = [gate | up]).
extern "C" __global__ void __launch_bounds__(kMaxThreads, 1)
    gemv_silu_nvfp4_bf16(const __nv_bfloat16* gate_up, const uint8_t* w, ATLAS_NVFP4_ARGS) {
  gemv_any_m<false>(swiglu_x(gate_up, k), nvfp4_fmt(scale, row_scale, k), w, y, m, n, k,
                    partial_sums);
}

extern "C" __global__ void __launch_bounds__(kMaxThreads, 1)
    gemv_silu_nvfp4_bf16_single(const __nv_bfloat16* gate_up, const uint8_t* w,
                                ATLAS_NVFP4_ARGS) {
  if (m != 1) __trap();
  gemv_rows<1, false>(swiglu_x(gate_up, k), nvfp4_fmt(scale, row_scale, k), w, y, n, k,
                      partial_sums);
}

// Dequantize to bf16 (w_out[n, k] = bf16(e2m1 * f32(e4m3 * g))) for row counts the GEMV
// does not take: the prefill GEMM then runs on the bf16 copy. One thread per 32 values.
extern "C" __global__ void __launch_bounds__(256)
    dequant_nvfp4_bf16(const uint8_t* w, const uint8_t* scale, const float* row_scale,
                       __nv_bfloat16* w_out, uint32_t n, uint32_t k) {
  atlas::pdl_enter();
  const uint32_t kc = k >> 5;
  const size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= static_cast<size_t>(n) * kc) return;
  const int row = static_cast<int>(i / kc), c = static_cast<int>(i % kc);
  const Nvfp4W fmt = nvfp4_fmt(scale, row_scale, k);
  const uint4 v = __ldg(reinterpret_cast<const uint4*>(w) + i);
  float s[2];
  fmt.chunk_scales(row, c, s);
  uint4* out = reinterpret_cast<uint4*>(w_out) + 4 * i;
#pragma unroll
  for (int g = 0; g < 2; ++g) {
    float wf[16];
    fmt.widen(v, g, wf);
#pragma unroll
    for (int e = 0; e < 16; ++e) wf[e] *= s[g];
    out[2 * g] = atlas::pack_bf16x8(*reinterpret_cast<float(*)[8]>(wf));
    out[2 * g + 1] = atlas::pack_bf16x8(*reinterpret_cast<float(*)[8]>(wf + 8));
  }
}
