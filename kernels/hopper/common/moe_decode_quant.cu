// MoE expert FFN for decode batches (1..8 tokens) over FP8 or NVFP4 expert weights, read
// directly and dequantized in registers (the weights are never expanded in memory), and the
// NVFP4 dequantize of the prefill path (the FP8 one is gemv_fp8.cu's dequant_fp8_bf16).
//
// Weights (ops/moe_quant.py QuantExperts): every expert's rows stacked into one matrix, as
// the bf16 layout packs them: gate_up [experts * 2 inter, hidden] (expert e's gate rows,
// then its up rows), down [experts * hidden, inter]; row r of expert e is matrix row
// e * rows + r.
//   FP8: E4M3 codes, one byte a value; f32 scales through the Fp8ScaleMap index map
//     s(row, col) = scale[(row >> row_shift) * row_stride + (col >> col_shift) * col_stride]
//     (blocks span >= 16 columns, so one scale covers a 16-value group).
//   NVFP4: E2M1 codes packed two a byte (value 2i in the low nibble) [rows, k / 2], one E4M3
//     scale a 16 values [rows, k / 16], one f32 a row (the expert tensor's global scale).
// A 16-value group is the unit of work: k % 16 == 0 is all these kernels need.
//
// Slots: a token's topk rows hold `slots` (expert id, weight) pairs, the first `routed` the
// router's top-k, then a shared expert folded in as one more expert of the stacked matrix
// (id experts_routed + c: the decode router writes it so, ops/moe.py gate_topk; its weight
// bf16(sigmoid(gate)), or 1 for an ungated one: GLM-4.5's). `experts` counts every expert of
// the matrix, shared included.
// moe_gate_up_silu_{fp8,nvfp4}: grid (ceil(inter / 8), tokens * slots), 256 threads; warp w
//   of block (bx, p) computes intermediate column i = 8 bx + w of pair p = t * slots + j,
//   e = topk_ids[p]: g = bf16(x[t] . gate row i), u = bf16(x[t] . up row i) (lanes take
//   16-value groups round-robin, kRounds of them requested at once, partials meet in
//   atlas::warp_sum), act[p][i] = bf16(bf16(silu(g)) * u) (bf16_vec.cuh swiglu_f32, the
//   dense MLP's rounding); an id outside [0, experts) writes zeros.
// moe_down_sum_{fp8,nvfp4}: grid (ceil(hidden / 8), tokens), 256 threads; warp w of block
//   (bx, t) owns output row n = 8 bx + w of token t, streaming kSlots slots' rows at once:
//   y_j = bf16(act[t][j] . down row n of expert e_j); routed slots in order
//   acc += topk_weights[t][j] * y_j (f32); out[t][n] = bf16(acc), or with shared slots
//   bf16(bf16(acc) + sum of bf16(w_j * y_j) over them) (moe_down_sum_bf16's rounding);
//   invalid ids contribute nothing. No atomics in the sums: bit-reproducible.
// moe_down_sum_early_{fp8,nvfp4} (ATLAS_MOE_QUANT_DOWN_EARLY=1; off until measured): the
//   same sums, bit for bit (down_sum's kEarly: the same loads of the same bytes in the same
//   FMA order), with a prologue before the PDL wait: each warp reads its token's first
//   kSlots slots' ids and weights (into registers, kept for that pass) and requests group
//   `lane` of each valid slot's row (codes and scales) into L2 (prefetch.global.L2), so the
//   DRAM round trip of the first weights overlaps the gate/up launch's tail; after the wait
//   those loads hit L2. Expected ~1-3 us a layer of moe_down_sum_nvfp4's 17.31 us (H200,
//   Qwen3.5-35B-A3B NVFP4 batch 1, PDL off) on the bf16 twin's precedent: not measured yet.
//   Sound although the routing is a kernel's output: the down launch is always the one
//   right after gate/up (ops/moe_quant.py decode_experts), whose pdl_enter waits for the
//   router (two launches back, the routing's only writer) before it lets this launch start,
//   so the routing is complete and visible; read through L2 (.cg), never ld.global.nc (ptxas
//   sinks those below griddepcontrol.wait: atlas_common.cuh ld_prefetch). The weights
//   are requested into L2, not registers: holding the first round in registers took 143
//   (NVFP4) / 196 (FP8) registers (one 256-thread block an SM: Qwen3.5's batch-1 grid of
//   256 blocks in two waves) or, bounded to 128, spilled (nvcc 13.0). And the plain kernel's
//   SASS issues each slot's loads of the pass loop behind that slot's own branch
//   (`if (e[j] < 0)`) and consumes them before the next slot's, one round trip a slot
//   (NVFP4: two, the scales after the codes), not the kSlots in flight the loop intends.
//   So the early entries' pass loop also issues a group's loads (codes, scales, the 16 act
//   values) for kInFlight = 4 slots at once, every valid one's before the first product
//   (SASS: 20 LDGs (NVFP4) / 16 (FP8) before the first FFMA), then forms the products in
//   slot order with group_dot's own arithmetic (its load and compute parts, shared): two
//   round trips a group for 8 slots, still bit-identical. All 8 at once took 155 registers
//   (one block an SM) or spilled bounded to 128; with 4, 108 (NVFP4) / 103 (FP8), no spills,
//   two blocks an SM (105 / 102 with the fused-norm tail, removed in session 24). Also
//   unmeasured.
// Every value the other kernels read was written by the router (the launch before) or
// gate/up, so they wait first (atlas::pdl_enter). Group products accumulate in f32 and take
// their scale once per group (FP8: code x x sums times the block scale; NVFP4: times
// f32(e4m3(s) * g), one rounding), within a few f32 ulps of the exact float64 sums the
// references (reference/moe_quant.py) form.
#include <cuda_fp16.h>

#include "atlas_common.cuh"
#include "bf16_vec.cuh"
#include "quant_decode.cuh"

namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kGroup = 16;  // values per work unit (one NVFP4 scale group)
constexpr int kRounds = 4;  // gate/up: groups a lane requests before using the first
constexpr int kSlots = 8;   // down: slots whose weights a warp streams at once
// early down: slots whose loads of a group are issued together, before their products (all
// kSlots took 155 registers, one block an SM, or spilled bounded to 128: nvcc 13.0)
constexpr int kInFlight = 4;

using atlas::quant::e4m3_to_f32;

// What the early down entries (down_sum's kEarly) do before the PDL wait: the routing (a
// kernel's output) read through L2 only (.cg, never ld.global.nc: ptxas sinks those below
// griddepcontrol.wait, atlas_common.cuh ld_prefetch), and the weights requested into L2.
// volatile: they stay ahead of the wait (an asm volatile) and behind their guards.
__device__ __forceinline__ int32_t ld_s32_before_wait(const int32_t* p) {
  int32_t v;
  asm volatile("ld.global.cg.s32 %0, [%1];\n" : "=r"(v) : "l"(p));
  return v;
}

__device__ __forceinline__ float ld_f32_before_wait(const float* p) {
  float v;
  asm volatile("ld.global.cg.f32 %0, [%1];\n" : "=f"(v) : "l"(p));
  return v;
}

__device__ __forceinline__ void prefetch_l2(const void* p) {
  asm volatile("prefetch.global.L2 [%0];\n" ::"l"(p));
}

// sum_i x_i * e4m3(c_i) over the four codes of `c` (value i in byte i) and four bf16 x
// values held as pairs (x0, x1), (x2, x3): hardware E4M3 -> f16 pairs (exact), widened.
__device__ __forceinline__ float dot4_e4m3(uint32_t c, uint32_t x01, uint32_t x23, float acc) {
  uint32_t h0, h1;
  asm("{\n .reg .b16 lo, hi;\n mov.b32 {lo, hi}, %2;\n cvt.rn.f16x2.e4m3x2 %0, lo;\n"
      " cvt.rn.f16x2.e4m3x2 %1, hi;\n}" : "=r"(h0), "=r"(h1) : "r"(c));
  const float2 w01 = __half22float2(*reinterpret_cast<const __half2*>(&h0));
  const float2 w23 = __half22float2(*reinterpret_cast<const __half2*>(&h1));
  float a0, a1, a2, a3;
  atlas::unpack_bf16x2(x01, a0, a1);
  atlas::unpack_bf16x2(x23, a2, a3);
  acc = fmaf(a0, w01.x, acc);
  acc = fmaf(a1, w01.y, acc);
  acc = fmaf(a2, w23.x, acc);
  return fmaf(a3, w23.y, acc);
}

struct Fp8Experts {
  const uint8_t* w;
  const float* scale;
  uint32_t k, row_shift, row_stride, col_shift, col_stride;

  // One group's operands in registers: its 16 codes, the 16 x values, the block scale.
  struct Group {
    uint4 c, xa, xb;
    float s;
  };

  // group_dot's loads: x[16 g .. 16 g + 15] and row's codes for those columns ...
  __device__ __forceinline__ void load_values(Group& q, uint32_t row, uint32_t g,
                                              const __nv_bfloat16* x) const {
    const uint32_t col = g * kGroup;
    q.c = __ldg(reinterpret_cast<const uint4*>(w + static_cast<size_t>(row) * k + col));
    q.xa = *reinterpret_cast<const uint4*>(x + col);
    q.xb = *reinterpret_cast<const uint4*>(x + col + 8);
  }

  // ... and their scale
  __device__ __forceinline__ void load_scale(Group& q, uint32_t row, uint32_t g) const {
    q.s = __ldg(scale + static_cast<size_t>(row >> row_shift) * row_stride +
                static_cast<size_t>((g * kGroup) >> col_shift) * col_stride);
  }

  // group_dot's arithmetic: the unscaled sum of code x x ...
  __device__ __forceinline__ static float values_dot(const Group& q) {
    float acc = dot4_e4m3(q.c.x, q.xa.x, q.xa.y, 0.f);
    acc = dot4_e4m3(q.c.y, q.xa.z, q.xa.w, acc);
    acc = dot4_e4m3(q.c.z, q.xb.x, q.xb.y, acc);
    return dot4_e4m3(q.c.w, q.xb.z, q.xb.w, acc);
  }

  // ... times the scale
  __device__ __forceinline__ static float scaled(const Group& q, float acc) { return acc * q.s; }

  // x[16 g .. 16 g + 15] . dequant(w)[row][same columns]: loads and arithmetic interleaved
  // as written (the scale requested after the codes are used)
  __device__ __forceinline__ float group_dot(uint32_t row, uint32_t g,
                                             const __nv_bfloat16* x) const {
    Group q;
    load_values(q, row, g, x);
    const float acc = values_dot(q);
    load_scale(q, row, g);
    return scaled(q, acc);
  }

  // group_dot's weight bytes (codes, scale) requested into L2: allowed before the PDL wait
  __device__ __forceinline__ void prefetch(uint32_t row, uint32_t g) const {
    const uint32_t col = g * kGroup;
    prefetch_l2(w + static_cast<size_t>(row) * k + col);
    prefetch_l2(scale + static_cast<size_t>(row >> row_shift) * row_stride +
                static_cast<size_t>(col >> col_shift) * col_stride);
  }
};

struct Nvfp4Experts {
  const uint8_t* w;
  const uint8_t* scale;
  const float* row_scale;
  uint32_t k;
  atlas::quant::E2m1Lut lut;  // the unscaled E2M1 magnitudes (scale 1)

  // One group's operands in registers: its 16 codes, the 16 x values, the E4M3 group scale
  // (its byte) and the row's f32 scale.
  struct Group {
    uint2 q;
    uint4 xv[2];
    uint32_t s;
    float g;
  };

  // group_dot's loads: x[16 g .. 16 g + 15] and row's codes for those columns ...
  __device__ __forceinline__ void load_values(Group& q, uint32_t row, uint32_t g,
                                              const __nv_bfloat16* x) const {
    const uint32_t col = g * kGroup;
    q.q = __ldg(reinterpret_cast<const uint2*>(w + static_cast<size_t>(row) * (k / 2) + col / 2));
    q.xv[0] = *reinterpret_cast<const uint4*>(x + col);
    q.xv[1] = *reinterpret_cast<const uint4*>(x + col + 8);
  }

  // ... and their scales: the group's E4M3 byte, the row's f32
  __device__ __forceinline__ uint32_t load_group_scale(uint32_t row, uint32_t g) const {
    return __ldg(scale + static_cast<size_t>(row) * (k / kGroup) + g);
  }
  __device__ __forceinline__ float load_row_scale(uint32_t row) const {
    return __ldg(row_scale + row);
  }
  __device__ __forceinline__ void load_scale(Group& q, uint32_t row, uint32_t g) const {
    q.s = load_group_scale(row, g);
    q.g = load_row_scale(row);
  }

  // group_dot's arithmetic: the unscaled sum of code x x ...
  __device__ __forceinline__ float values_dot(const Group& q) const {
    float acc = 0.f;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      uint32_t p[4];  // (v0, v1) .. (v6, v7) of the word's eight codes, exact bf16 pairs
      atlas::quant::e2m1x8_to_bf16x2(h ? q.q.y : q.q.x, lut, p);
      const uint32_t xs[4] = {q.xv[h].x, q.xv[h].y, q.xv[h].z, q.xv[h].w};
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        float w0, w1, a0, a1;
        atlas::unpack_bf16x2(p[i], w0, w1);
        atlas::unpack_bf16x2(xs[i], a0, a1);
        acc = fmaf(a0, w0, acc);
        acc = fmaf(a1, w1, acc);
      }
    }
    return acc;
  }

  // ... times f32(e4m3(s) * g), one rounding (s32: e4m3(s) widened, exact)
  __device__ __forceinline__ static float scaled(float acc, float s32, float g) {
    const float s = s32 * g;
    return acc * s;
  }
  __device__ __forceinline__ static float scaled(const Group& q, float acc) {
    return scaled(acc, e4m3_to_f32(q.s), q.g);
  }

  // x[16 g .. 16 g + 15] . dequant(w)[row][same columns]: loads and arithmetic interleaved
  // as written (the scales requested after the codes are decoded, the group's widened
  // before the row's is requested)
  __device__ __forceinline__ float group_dot(uint32_t row, uint32_t g,
                                             const __nv_bfloat16* x) const {
    Group q;
    load_values(q, row, g, x);
    const float acc = values_dot(q);
    const float s32 = e4m3_to_f32(load_group_scale(row, g));
    return scaled(acc, s32, load_row_scale(row));
  }

  // group_dot's weight bytes (codes, scales) requested into L2: allowed before the PDL wait
  __device__ __forceinline__ void prefetch(uint32_t row, uint32_t g) const {
    prefetch_l2(w + static_cast<size_t>(row) * (k / 2) + g * (kGroup / 2));
    prefetch_l2(scale + static_cast<size_t>(row) * (k / kGroup) + g);
    prefetch_l2(row_scale + row);
  }
};

__device__ __forceinline__ Nvfp4Experts nvfp4_experts(const uint8_t* w, const uint8_t* scale,
                                                      const float* row_scale, uint32_t k) {
  return {w, scale, row_scale, k, atlas::quant::E2m1Lut::scaled(0x3F803F80u)};  // pair (1, 1)
}

template <class Fmt>
__device__ __forceinline__ void gate_up_silu(const __nv_bfloat16* x, const Fmt& f,
                                             const int32_t* topk_ids, __nv_bfloat16* act,
                                             uint32_t slots, uint32_t hidden, uint32_t inter,
                                             uint32_t experts) {
  // pdl_wait before pdl_launch_dependents: the early down launch after this one reads the
  // routing before its own wait
  atlas::pdl_enter();
  const uint32_t pair = blockIdx.y, lane = threadIdx.x & 31;
  const uint32_t col = blockIdx.x * kWarps + (threadIdx.x >> 5);
  if (col >= inter) return;
  const int32_t e = topk_ids[pair];
  float out = 0.f;
  if (e >= 0 && static_cast<uint32_t>(e) < experts) {
    const __nv_bfloat16* xr = x + static_cast<size_t>(pair / slots) * hidden;
    const uint32_t gate_row = static_cast<uint32_t>(e) * 2u * inter + col;
    const uint32_t groups = hidden / kGroup;
    float g = 0.f, u = 0.f;
    for (uint32_t g0 = lane; g0 < groups; g0 += 32 * kRounds) {
#pragma unroll
      for (int r = 0; r < kRounds; ++r) {  // kRounds rounds of loads in flight per lane
        const uint32_t grp = g0 + 32 * r;
        if (grp < groups) {
          g += f.group_dot(gate_row, grp, xr);
          u += f.group_dot(gate_row + inter, grp, xr);
        }
      }
    }
    g = atlas::round_bf16(atlas::warp_sum(g));
    u = atlas::round_bf16(atlas::warp_sum(u));
    out = atlas::swiglu_f32(g, u);
  }
  if (lane == 0) act[static_cast<size_t>(pair) * inter + col] = __float2bfloat16_rn(out);
}

// group_dot in two parts, for a caller that has several groups' loads in flight at once:
// every load of the group (codes, x values, scales) ...
template <class Fmt>
__device__ __forceinline__ void load_group(const Fmt& f, typename Fmt::Group& q, uint32_t row,
                                           uint32_t g, const __nv_bfloat16* x) {
  f.load_values(q, row, g, x);
  f.load_scale(q, row, g);
}

// ... then its arithmetic, group_dot's to the bit
template <class Fmt>
__device__ __forceinline__ float group_product(const Fmt& f, const typename Fmt::Group& q) {
  return f.scaled(q, f.values_dot(q));
}

// kEarly (moe_down_sum_early_*): before the PDL wait, each warp reads the routing of its
// token's first kSlots slots (ids and weights, into registers) and requests its row's first
// round of weight groups (group `lane` of each valid slot: codes and scales) into L2; after
// the wait that pass takes its routing from the registers and its weights hit L2. Every
// pass's groups are then loaded kInFlight slots at a time before their products
// (load_group, group_product). The same loads of the same bytes otherwise, and every
// rounding as without it.
template <bool kEarly, class Fmt>
__device__ __forceinline__ void down_sum(const __nv_bfloat16* act, const Fmt& f,
                                         const int32_t* topk_ids, const float* topk_weights,
                                         __nv_bfloat16* out, uint32_t slots, uint32_t routed,
                                         uint32_t hidden, uint32_t inter, uint32_t experts) {
  if constexpr (!kEarly) atlas::pdl_enter();
  const uint32_t t = blockIdx.y, lane = threadIdx.x & 31;
  const uint32_t row = blockIdx.x * kWarps + (threadIdx.x >> 5);
  const uint32_t groups = inter / kGroup;
  int32_t e0[kSlots];  // kEarly: slots 0 .. kSlots - 1's valid ids (or -1) and weights
  float w0[kSlots];
  if constexpr (kEarly) {
    int32_t id[kSlots];
#pragma unroll
    for (int j = 0; j < kSlots; ++j) {  // every slot's routing in flight at once
      const bool live = row < hidden && static_cast<uint32_t>(j) < slots;
      id[j] = live ? ld_s32_before_wait(topk_ids + t * slots + j) : -1;
      w0[j] = live ? ld_f32_before_wait(topk_weights + t * slots + j) : 0.f;
    }
#pragma unroll
    for (int j = 0; j < kSlots; ++j) {
      e0[j] = id[j] >= 0 && static_cast<uint32_t>(id[j]) < experts ? id[j] : -1;  // uniform
      if (e0[j] >= 0 && lane < groups)
        f.prefetch(static_cast<uint32_t>(e0[j]) * hidden + row, lane);
    }
    atlas::pdl_enter();
  }
  float acc = 0.f, shared = 0.f;
  // kSlots slots at a time: their loads are independent, so all are in flight together
  for (uint32_t j0 = 0; row < hidden && j0 < slots; j0 += kSlots) {
    const bool early = kEarly && j0 == 0;  // this pass's routing read before the wait
    int32_t e[kSlots];
    float part[kSlots];
#pragma unroll
    for (int j = 0; j < kSlots; ++j) {
      const uint32_t slot = j0 + j;
      if (early) {
        e[j] = e0[j];
      } else {
        const int32_t id = slot < slots ? topk_ids[t * slots + slot] : -1;
        e[j] = id >= 0 && static_cast<uint32_t>(id) < experts ? id : -1;  // warp-uniform
      }
      part[j] = 0.f;
    }
    for (uint32_t grp = lane; grp < groups; grp += 32) {
      if constexpr (kEarly) {
        // kInFlight slots at a time: every valid slot's loads of the group issued (an
        // invalid slot's skipped, as its product), then the products in slot order,
        // group_dot's arithmetic: kSlots / kInFlight round trips a group, not one a slot
#pragma unroll
        for (int j1 = 0; j1 < kSlots; j1 += kInFlight) {
          typename Fmt::Group q[kInFlight];
#pragma unroll
          for (int j = j1; j < j1 + kInFlight; ++j) {
            if (e[j] < 0) continue;
            uint32_t wrow = static_cast<uint32_t>(e[j]) * hidden + row, arow = t * slots + j0 + j;
            // opaque rows: each slot's addresses are formed here, not hoisted out of the
            // group loop as 64-bit pointers held across it (197 registers, FP8)
            asm volatile("" : "+r"(wrow), "+r"(arow));
            load_group(f, q[j - j1], wrow, grp, act + static_cast<size_t>(arow) * inter);
          }
#pragma unroll
          for (int j = j1; j < j1 + kInFlight; ++j)
            if (e[j] >= 0) part[j] += group_product(f, q[j - j1]);
        }
      } else {
#pragma unroll
        for (int j = 0; j < kSlots; ++j) {
          if (e[j] < 0) continue;
          const __nv_bfloat16* a = act + static_cast<size_t>(t * slots + j0 + j) * inter;
          part[j] += f.group_dot(static_cast<uint32_t>(e[j]) * hidden + row, grp, a);
        }
      }
    }
#pragma unroll
    for (int j = 0; j < kSlots; ++j) {  // slot order: y_j = bf16(product), acc += w_j * y_j
      if (e[j] < 0) continue;
      const float w = early ? w0[j] : topk_weights[t * slots + j0 + j];
      const float y = atlas::round_bf16(atlas::warp_sum(part[j]));
      if (j0 + j < routed)
        acc = fmaf(w, y, acc);
      else  // a shared expert's slot: bf16(weight * bf16(product)), as transformers rounds
        shared += atlas::round_bf16(w * y);
    }
  }
  if (routed < slots) acc = atlas::round_bf16(acc) + shared;
  if (lane == 0 && row < hidden)
    out[static_cast<size_t>(t) * hidden + row] = __float2bfloat16_rn(acc);
}

}  // namespace

#define ATLAS_FP8_MAP \
  uint32_t row_shift, uint32_t row_stride, uint32_t col_shift, uint32_t col_stride

extern "C" __global__ void __launch_bounds__(kThreads)
    moe_gate_up_silu_fp8(const __nv_bfloat16* x, const uint8_t* w, const float* scale,
                         const int32_t* topk_ids, __nv_bfloat16* act, uint32_t tokens,
                         uint32_t slots, uint32_t hidden, uint32_t inter, uint32_t experts,
                         ATLAS_FP8_MAP) {
  (void)tokens;
  gate_up_silu(x, Fp8Experts{w, scale, hidden, row_shift, row_stride, col_shift, col_stride},
               topk_ids, act, slots, hidden, inter, experts);
}

extern "C" __global__ void __launch_bounds__(kThreads)
    moe_gate_up_silu_nvfp4(const __nv_bfloat16* x, const uint8_t* w, const uint8_t* scale,
                           const float* row_scale, const int32_t* topk_ids, __nv_bfloat16* act,
                           uint32_t tokens, uint32_t slots, uint32_t hidden, uint32_t inter,
                           uint32_t experts) {
  (void)tokens;
  gate_up_silu(x, nvfp4_experts(w, scale, row_scale, hidden), topk_ids, act, slots, hidden,
               inter, experts);
}

extern "C" __global__ void __launch_bounds__(kThreads)
    moe_down_sum_fp8(const __nv_bfloat16* act, const uint8_t* w, const float* scale,
                     const int32_t* topk_ids, const float* topk_weights, __nv_bfloat16* out,
                     uint32_t tokens, uint32_t slots, uint32_t routed, uint32_t hidden,
                     uint32_t inter, uint32_t experts, ATLAS_FP8_MAP) {
  (void)tokens;
  down_sum<false>(act, Fp8Experts{w, scale, inter, row_shift, row_stride, col_shift, col_stride},
                  topk_ids, topk_weights, out, slots, routed, hidden, inter, experts);
}

extern "C" __global__ void __launch_bounds__(kThreads)
    moe_down_sum_nvfp4(const __nv_bfloat16* act, const uint8_t* w, const uint8_t* scale,
                       const float* row_scale, const int32_t* topk_ids,
                       const float* topk_weights, __nv_bfloat16* out, uint32_t tokens,
                       uint32_t slots, uint32_t routed, uint32_t hidden, uint32_t inter,
                       uint32_t experts) {
  (void)tokens;
  down_sum<false>(act, nvfp4_experts(w, scale, row_scale, inter), topk_ids, topk_weights, out,
                  slots, routed, hidden, inter, experts);
}

// The same sums with the routing read and the first round of weights requested before the
// PDL wait (down_sum's kEarly; the header says why that is sound): ATLAS_MOE_QUANT_DOWN_EARLY.
extern "C" __global__ void __launch_bounds__(kThreads)
    moe_down_sum_early_fp8(const __nv_bfloat16* act, const uint8_t* w, const float* scale,
                           const int32_t* topk_ids, const float* topk_weights,
                           __nv_bfloat16* out, uint32_t tokens, uint32_t slots,
                           uint32_t routed, uint32_t hidden, uint32_t inter, uint32_t experts,
                           ATLAS_FP8_MAP) {
  (void)tokens;
  down_sum<true>(act, Fp8Experts{w, scale, inter, row_shift, row_stride, col_shift, col_stride},
                 topk_ids, topk_weights, out, slots, routed, hidden, inter, experts);
}

extern "C" __global__ void __launch_bounds__(kThreads)
    moe_down_sum_early_nvfp4(const __nv_bfloat16* act, const uint8_t* w, const uint8_t* scale,
                             const float* row_scale, const int32_t* topk_ids,
                             const float* topk_weights, __nv_bfloat16* out, uint32_t tokens,
                             uint32_t slots, uint32_t routed, uint32_t hidden, uint32_t inter,
                             uint32_t experts) {
  (void)tokens;
  down_sum<true>(act, nvfp4_experts(w, scale, row_scale, inter), topk_ids, topk_weights, out,
                 slots, routed, hidden, inter, experts);
}

// w_out[n, k] bf16 = bf16(e2m1(q) * f32(e4m3(s) * g[row])), one 16-value group a thread
// (grid ceil(n * k / 16 / 256), 256 threads): dequant_nvfp4_bf16's values for k % 16 == 0.
extern "C" __global__ void __launch_bounds__(kThreads)
    moe_dequant_nvfp4_bf16(const uint8_t* w, const uint8_t* scale, const float* row_scale,
                           __nv_bfloat16* w_out, uint32_t n, uint32_t k) {
  atlas::pdl_enter();
  const size_t groups = static_cast<size_t>(n) * (k / kGroup);
  const size_t i = static_cast<size_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (i >= groups) return;
  const uint32_t row = static_cast<uint32_t>(i / (k / kGroup));
  const float s = e4m3_to_f32(__ldg(scale + i)) * __ldg(row_scale + row);
  const uint2 q = __ldg(reinterpret_cast<const uint2*>(w) + i);
  const atlas::quant::E2m1Lut lut = atlas::quant::E2m1Lut::scaled(0x3F803F80u);
  float v[16];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    uint32_t p[4];
    atlas::quant::e2m1x8_to_bf16x2(h ? q.y : q.x, lut, p);
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      atlas::unpack_bf16x2(p[j], v[8 * h + 2 * j], v[8 * h + 2 * j + 1]);
      v[8 * h + 2 * j] *= s;
      v[8 * h + 2 * j + 1] *= s;
    }
  }
  uint4* dst = reinterpret_cast<uint4*>(w_out + i * kGroup);
  float lo[8], hi[8];
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    lo[j] = v[j];
    hi[j] = v[8 + j];
  }
  dst[0] = atlas::pack_bf16x8(lo);
  dst[1] = atlas::pack_bf16x8(hi);
}
