// Decode GEMV over quantized weights, tensor cores fed straight from registers: y[m, n] =
// sum_k x[m, k] * W[n, k] for 1 <= m <= 8, W = FP8 E4M3 codes under a scale map, or NVFP4
// (E2M1 codes, one E4M3 scale per 16 values, one f32 scale per row).
//
// Why another kernel next to gemv_mma_quant.cu (same math, same fragments): that one stages
// every operand through a per-warp cp.async ring in shared memory, which costs a shared
// store and load per weight byte, a ring barrier per step and ~100 KiB of shared memory per
// block (two blocks per SM); at batch 1 it measured ~60% of copy bandwidth over the
// Qwen3-8B projections. The bf16 CUDA-core GEMV, which loads its weights straight into
// registers (16-byte streaming loads, many blocks per SM), runs at ~85%. Here each lane
// loads the very bytes its MMA A fragment needs (16-byte `ld_stream` loads), kSteps steps
// at once, and the next kSteps steps are requested before the current ones are decoded
// (a register double buffer).
//
// Session 7: one block per 16-row tile ran Qwen3-8B's qkv in ~1.5 waves of one-shot blocks
// (each warp loaded its 4 KiB, waited, decoded, and the block ended: loads and decode in
// series, 35-58% of copy bandwidth); the ld_stream loads "before the PDL wait" were sunk
// below it by ptxas. Now (ATLAS_QUANT_PERSISTENT=1; off by default, gpu16 timed one block
// per tile ahead on NVFP4 gate_up) the grid can be one wave (ops/matmul_quant_mma.
// direct_blocks: each SM an even share of whole tiles); a block loops over its tiles with
// the next batch always in flight (across tile boundaries too). On either grid two register
// buffers alternate in a loop unrolled by two (the old `cur = nxt` copy waited for the next
// batch's data before the one after it could be requested), the first batch really is
// issued before the wait (plain loads), and the epilogue's row scales are requested at the
// tile's start.
//
// Mapping: C^T[n, m] = W[n, k] . X^T, weight rows are the MMA's A operand (one 16-row tile
// at a time per block), batch rows its B operand (one 8-row B tile; columns past m are
// computed from row m - 1 and never stored). The 8 warps of a block split K into contiguous
// ranges and their partial sums are added in a fixed order (bit-reproducible), rounded once.
// A step of a lane (g = lane / 4, c = lane % 4) is 16 bytes of weight rows g and g + 8:
//   FP8: values 64 s + 16 c .. + 15 (a 64-value step per lane quad), as gemv_mma_quant.cu:
//        pairs (2j, 2j + 1) of the lane's 16 values are MMA j's k slots (2c, 2c + 1) and
//        (2c + 8, 2c + 9); one scale per (row, step), so scale blocks must span 64 columns.
//   NVFP4: values 128 s + 32 c .. + 31, two 16-value scale groups of four MMAs each. A
//        word of 8 codes becomes the pairs (v_i, v_{i + 4}) by bit moves and one bf16x2
//        multiply by the group scale (quant_decode.cuh e2m1x8_scaled_pairs: 2 integer-pipe
//        and 2 other instructions per pair; SASS of a 4-step batch, nvcc 13.0: ~24 issue
//        slots per 8 codes of a lane, ~11 of them on the half-rate integer pipe, against
//        the ~35 a lane may spend per 8 codes at 4.28 TB/s); x is permuted into the same
//        pairs (4 PRMT per 8 values, shared by rows g and g + 8); the row scale multiplies
//        the sum at the end.
//        The MMAs of a step form two independent chains (one per group).
// x is read with the same permutation (the lane's own 32 / 64 bytes of x row g) through L1.
// Batches whose kSteps steps all exist run without per-step branches (the x loads and the
// decode then schedule across steps).
//
// The `_swiglu` entry points compute a dense MLP's gate_up product and end with its SwiGLU:
// w is the fused [gate | up] weight [n = 2 I, k], y the activation [m, I] = bf16(bf16(silu(
// bf16(gate))) * bf16(up)), exactly silu_mul_bf16 over the plain GEMV's bf16 output. A block
// takes 8 features: A rows g = gate row j, g + 8 = up row I + j of feature j = 8 block + g, so
// both halves of a feature end in one lane and the silu_mul launch (and the gate_up round
// trip through memory) disappears.
// The `_f32` entry points write f32 logits: each bf16-rounded sum widened (a quantized LM
// head, as the bf16 GEMV's f32 output).
// Launch (ops/matmul_quant_mma.py): grid = direct_blocks(tiles) <= tiles = ceil(n / 16)
// (SwiGLU: ceil(n / 2 / 8)), any grid is correct; block = 256, no dynamic shared memory.
// Preconditions: 1 <= m <= 8; FP8: k % 64 == 0, col_stride == 0 or col_shift >= 6; NVFP4:
// k % 128 == 0; SwiGLU: n even; x and w 16-byte aligned, NVFP4 scales 2-byte aligned.
#include "bf16_vec.cuh"
#include "bulk_copy.cuh"
#include "mma_util.cuh"
#include "quant_decode.cuh"

namespace {

using namespace atlas::quant;

constexpr int kWarps = 8;
constexpr int kRows = 16;   // weight rows per block: ops/matmul_quant_mma.py DIRECT_ROWS
constexpr int kSteps = 4;   // steps per lane per load batch (two batches in flight)

// What the epilogue writes: y bf16 [m, n]; y f32 [m, n] holding the bf16-rounded sums
// widened (logits of a quantized LM head, as the bf16 GEMV's f32 output); or the SwiGLU
// of a fused [gate | up] product, bf16 [m, n / 2].
enum class Out { kBf16, kF32, kSwiglu };

// What one lane loads for one step: its 16 bytes of rows g and g + 8, and their scales.
struct Frag {
  uint4 wa, wb;
  // FP8: f32 scale bits of rows g, g + 8; NVFP4: sa holds the step's two group-scale codes
  // of row g (bits 0..15) and of row g + 8 (bits 16..31), sb is unused (a register saved)
  uint32_t sa, sb;
};

// A scale load: through the read-only path, or (kPreWait) a plain volatile load that ptxas
// keeps above the PDL wait (it sinks read-only-path loads below griddepcontrol.wait).
template <bool kPreWait, class T>
__device__ __forceinline__ T load_scale(const T* p) {
  if constexpr (kPreWait)
    return *reinterpret_cast<const volatile T*>(p);
  else
    return __ldg(p);
}

struct Fp8 {
  static constexpr int kStepK = 64;  // k values per lane-quad step
  static constexpr int kScaleBytesPerStep = 0;  // a row's group-scale bytes per step (none)
  const float* scale;
  uint32_t row_shift, row_stride, col_shift, col_stride;

  template <bool kPreWait>
  __device__ __forceinline__ uint32_t scale_bits(int row, int k0) const {
    return __float_as_uint(load_scale<kPreWait>(
        scale + (static_cast<uint32_t>(row) >> row_shift) * row_stride +
        (static_cast<uint32_t>(k0) >> col_shift) * col_stride));
  }
  // the lane's scales of rows ra, rb at step s (k0 = 64 s)
  template <bool kPreWait>
  __device__ __forceinline__ void scales(Frag& f, int ra, int rb, int s, int) const {
    f.sa = scale_bits<kPreWait>(ra, s * kStepK);
    f.sb = scale_bits<kPreWait>(rb, s * kStepK);
  }

  // acc += the step's MMAs times s(row, step) (decoded pairs are the values times 2^-112;
  // the scale is taken times 2^56 here and the sum times 2^56 at the end); one chain either way
  template <bool kOneChain>
  __device__ __forceinline__ void step(const Frag& f, const uint4 (&xv)[4], float (&acc)[4]) const {
    float part[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const uint32_t ra = word(f.wa, j), rb = word(f.wb, j);
      const uint32_t a[4] = {e4m3x2_to_bf16x2<false>(ra), e4m3x2_to_bf16x2<false>(rb),
                             e4m3x2_to_bf16x2<true>(ra), e4m3x2_to_bf16x2<true>(rb)};
      atlas::mma_bf16_16816(part, a, word(xv[j >> 1], 2 * (j & 1)),
                            word(xv[j >> 1], 2 * (j & 1) + 1));
    }
    const float sa = __uint_as_float(f.sa) * 0x1p56f, sb = __uint_as_float(f.sb) * 0x1p56f;
    acc[0] = fmaf(part[0], sa, acc[0]);
    acc[1] = fmaf(part[1], sa, acc[1]);
    acc[2] = fmaf(part[2], sb, acc[2]);
    acc[3] = fmaf(part[3], sb, acc[3]);
  }
  __device__ __forceinline__ float out_scale(int) const { return 0x1p56f; }
};

// kLut: the session-5 byte-table decode (quant_decode.cuh E2m1Lut, the group scale folded
// into the tables), kept behind ATLAS_QUANT_E2M1_LUT=1 as the A/B of the bit-move decode.
template <bool kLut>
struct Nvfp4 {
  static constexpr int kStepK = 128;
  static constexpr int kScaleBytesPerStep = kStepK / 16;  // a row's E4M3 group scales per step
  const uint8_t* group;  // [n, k / 16] E4M3
  const float* row;      // [n]
  uint32_t groups_per_row;

  template <bool kPreWait>
  __device__ __forceinline__ void scales(Frag& f, int ra, int rb, int s, int c) const {
    const int at = s * kScaleBytesPerStep + 2 * c;  // the lane's two groups of the step
    const uint8_t* a = group + static_cast<size_t>(ra) * groups_per_row + at;
    const uint8_t* b = group + static_cast<size_t>(rb) * groups_per_row + at;
    f.sa = load_scale<kPreWait>(reinterpret_cast<const uint16_t*>(a)) |
           static_cast<uint32_t>(load_scale<kPreWait>(reinterpret_cast<const uint16_t*>(b)))
               << 16;
  }

  // acc += the step's MMAs: per scale group h (words 2 h, 2 h + 1 of each row) the codes
  // decoded by bit moves into pairs (v_i, v_{i + 4}) times the group scale (exact bf16, see
  // quant_decode.cuh e2m1x8_scaled_pairs), x permuted into the same pairs; the MMAs
  // accumulate sum x * e2m1 * s / kE2m1PairScale, out_scale restores the factor. kOneChain
  // (the narrow loops: more warps hide the MMA latency) puts every MMA on acc, four registers
  // and four adds a step fewer.
  template <bool kOneChain>
  __device__ __forceinline__ void step(const Frag& f, const uint4 (&xv)[4], float (&acc)[4]) const {
    if constexpr (kLut) {
      step_lut(f, xv, acc);
      return;
    }
    uint32_t sa[2], sb[2];  // bf16 pairs (s, s) * 2^kE2m1ScaleExp of rows g, g + 8, groups 0, 1
    e4m3x2_to_bf16_pairs_scaled(f.sa, sa[0], sa[1]);
    e4m3x2_to_bf16_pairs_scaled(f.sa >> 16, sb[0], sb[1]);
    float part[4] = {0.f, 0.f, 0.f, 0.f};  // group 1's MMAs: a second, independent chain
#pragma unroll
    for (int w = 0; w < 4; ++w) {  // 8 values of the lane's 32: group w / 2
      uint32_t pa[4], pb[4], px[4];
      e2m1x8_scaled_pairs(word(f.wa, w), sa[w >> 1], pa);
      e2m1x8_scaled_pairs(word(f.wb, w), sb[w >> 1], pb);
      const uint4& x = xv[w];  // x values 8 w .. 8 w + 7
      spread_x_pairs(x.x, x.y, x.z, x.w, px);
#pragma unroll
      for (int jj = 0; jj < 2; ++jj) {  // MMA k slots (2c, 2c + 1) | (2c + 8, 2c + 9)
        const uint32_t a[4] = {pa[2 * jj], pb[2 * jj], pa[2 * jj + 1], pb[2 * jj + 1]};
        atlas::mma_bf16_16816(w < 2 || kOneChain ? acc : part, a, px[2 * jj], px[2 * jj + 1]);
      }
    }
    if constexpr (!kOneChain) {
#pragma unroll
      for (int i = 0; i < 4; ++i) acc[i] += part[i];
    }
  }

  // The byte-table decode: per group, tables of the E2M1 magnitudes times the group scale
  // (exact in bf16), pairs (v_2j, v_2j+1) matching x's own pairs.
  __device__ __forceinline__ void step_lut(const Frag& f, const uint4 (&xv)[4],
                                           float (&acc)[4]) const {
#pragma unroll
    for (int h = 0; h < 2; ++h) {  // scale group h: words 2h, 2h + 1 of each row
      uint32_t la_s, lb_s;  // bf16 pairs (s, s) of rows g and g + 8
      const uint32_t codes = ((f.sa >> (8 * h)) & 0xffu) | (((f.sa >> (16 + 8 * h)) & 0xffu) << 8);
      e4m3x2_to_bf16_pairs(codes, la_s, lb_s);
      const E2m1Lut la = E2m1Lut::scaled(la_s), lb = E2m1Lut::scaled(lb_s);
#pragma unroll
      for (int half = 0; half < 2; ++half) {  // 8 values of the group: pairs 4 half .. + 3
        uint32_t pa[4], pb[4];
        e2m1x8_to_bf16x2(word(f.wa, 2 * h + half), la, pa);
        e2m1x8_to_bf16x2(word(f.wb, 2 * h + half), lb, pb);
#pragma unroll
        for (int jj = 0; jj < 2; ++jj) {  // MMA j = 2 half + jj of the group
          const uint32_t a[4] = {pa[2 * jj], pb[2 * jj], pa[2 * jj + 1], pb[2 * jj + 1]};
          const uint4& x = xv[2 * h + half];  // x values 16 h + 8 half .. + 7
          atlas::mma_bf16_16816(acc, a, word(x, 2 * jj), word(x, 2 * jj + 1));
        }
      }
    }
  }

  __device__ __forceinline__ float out_scale(int row) const {
    return __ldg(this->row + row) * (kLut ? 1.f : kE2m1PairScale);
  }
};

// x values of one step for this lane: FP8 16 values (two 16-byte words, xv[0..1]), NVFP4 32.
template <class F>
__device__ __forceinline__ void load_x(const uint4* xrow, int s, int c, uint4 (&xv)[4]) {
  constexpr int kWords = F::kStepK / 32;  // 16-byte x words per lane per step
  const uint4* p = xrow + (s * F::kStepK + c * (F::kStepK / 4)) / 8;
#pragma unroll
  for (int i = 0; i < kWords; ++i) xv[i] = __ldg(p + i);
}

// A lane's A-fragment rows in one tile: weight rows ra (A rows g) and rb (g + 8), or (SwiGLU)
// the gate and up rows of feature 8 tile + g; rows past the end re-read the last one and are
// never stored.
struct TileRows {
  int ra, rb;
  const uint4* wa;  // the lane's first 16 bytes of each row (c-th of a step's quad)
  const uint4* wb;
};

template <class F, bool kSwiglu>
__device__ __forceinline__ TileRows tile_rows(const uint8_t* w, int tile, int g, int c, int n,
                                              int k) {
  const int inter = n >> 1;
  const int ra = kSwiglu ? min(tile * 8 + g, inter - 1) : min(tile * kRows + g, n - 1);
  const int rb = kSwiglu ? inter + ra : min(tile * kRows + 8 + g, n - 1);
  // a step is 16 bytes per lane: FP8 64 codes / NVFP4 128 codes of a row per lane quad
  const size_t pitch = static_cast<size_t>(k) / (F::kStepK / 64);  // row bytes
  return {ra, rb, reinterpret_cast<const uint4*>(w + static_cast<size_t>(ra) * pitch) + c,
          reinterpret_cast<const uint4*>(w + static_cast<size_t>(rb) * pitch) + c};
}

// The lane's weights and scales of steps s0 .. s0 + kSteps - 1 (those before `last`).
// kPreWait: issued before the PDL wait, as plain loads (ptxas sinks every read-only-path
// load below griddepcontrol.wait, atlas_common.cuh ld_prefetch); the weights and scales are
// memory no kernel writes.
template <bool kPreWait, class F, bool kSwiglu, int kS>
__device__ __forceinline__ void load_batch(Frag (&f)[kS], const F& fmt, const uint8_t* w,
                                           int tile, int s0, int last, int g, int c, int n,
                                           int k) {
  const TileRows t = tile_rows<F, kSwiglu>(w, tile, g, c, n, k);
  const uint64_t stream = atlas::l2_stream_policy();  // the weights' L2 policy
#pragma unroll
  for (int u = 0; u < kS; ++u) {
    const int s = s0 + u;
    if (s < last) {
      f[u].wa = atlas::ld_weight<kPreWait>(t.wa + 4 * s, stream);
      f[u].wb = atlas::ld_weight<kPreWait>(t.wb + 4 * s, stream);
      fmt.template scales<kPreWait>(f[u], t.ra, t.rb, s, c);
    }
  }
}

// Whether a load batch is issued before the PDL wait, as a type (a generic lambda's argument).
template <bool kPreWait>
struct Pre {
  static constexpr bool value = kPreWait;
};

// A position in a warp's sequence of load batches: batch b (steps first + kSteps b ..) of
// the block's tile `tile`. Every warp of a block walks the same sequence (batches per tile =
// those of the warp with the most steps; a warp's batches past its `last` step are empty),
// so the per-tile barriers line up.
struct Cursor {
  int tile, b;
  __device__ __forceinline__ void next(int per_tile) {
    if (++b == per_tile) {
      b = 0;
      tile += gridDim.x;
    }
  }
};

// Epilogue thread t's output scales for tile `tile` (rows of output r = t % 16, or SwiGLU
// feature t % 8's gate and up rows), requested at the tile's start so their latency hides
// behind its steps.
template <Out kOut, class F>
__device__ __forceinline__ void tile_out_scales(const F& fmt, int tile, int t, int m, int n,
                                                float& scale_a, float& scale_b) {
  if (kOut == Out::kSwiglu) {
    const int inter = n >> 1;
    if (t < m * 8) {
      const int j = min(tile * 8 + (t & 7), inter - 1);
      scale_a = fmt.out_scale(j);
      scale_b = fmt.out_scale(inter + j);
    }
  } else if (t < m * kRows) {
    scale_a = fmt.out_scale(min(tile * kRows + t % kRows, n - 1));
  }
}

// Reduce and store one tile from its warps' partial sums (partial[warp][i][lane]: the MMA
// accumulator i of the lane), by threads t < m * 16 (SwiGLU: m * 8). Output (mi, r): value
// i = 2 h + (mi & 1) of lane 4 (r % 8) + mi / 2, h = r / 8; the warps' partials summed in
// order (bit-reproducible), rounded once.
template <Out kOut, int kW>
__device__ __forceinline__ void store_tile(const float (&partial)[kW][4][32], float scale_a,
                                           float scale_b, void* __restrict__ y, int tile, int t,
                                           int m, int n) {
  if (kOut == Out::kSwiglu) {  // feature j = 8 tile + r of batch row mi: gate at h = 0, up at 1
    const int inter = n >> 1;
    if (t < m * 8) {
      const int mi = t >> 3, r = t & 7, j = tile * 8 + r;
      if (j < inter) {
        const int i = mi & 1, l = 4 * r + (mi >> 1);
        float gate = 0.f, up = 0.f;
#pragma unroll
        for (int v = 0; v < kW; ++v) {
          gate += partial[v][i][l];
          up += partial[v][2 + i][l];
        }
        gate = atlas::round_bf16(gate * scale_a);
        up = atlas::round_bf16(up * scale_b);
        static_cast<__nv_bfloat16*>(y)[static_cast<size_t>(mi) * inter + j] =
            atlas::f32_to_bf16(atlas::swiglu_f32(gate, up));
      }
    }
  } else if (t < m * kRows) {
    const int mi = t / kRows, r = t % kRows, row = tile * kRows + r;
    if (row < n) {
      const int i = 2 * (r >> 3) + (mi & 1), l = 4 * (r & 7) + (mi >> 1);
      float sum = 0.f;
#pragma unroll
      for (int v = 0; v < kW; ++v) sum += partial[v][i][l];
      const size_t o = static_cast<size_t>(mi) * n + row;
      if (kOut == Out::kF32)
        static_cast<float*>(y)[o] = atlas::round_bf16(sum * scale_a);
      else
        static_cast<__nv_bfloat16*>(y)[o] = atlas::f32_to_bf16(sum * scale_a);
    }
  }
}

// acc += the steps s0 .. of a batch (those before `last`) from their fragments f and x.
template <class F, int kS>
__device__ __forceinline__ void decode_batch(const F& fmt, const Frag (&f)[kS],
                                             const uint4* xrow, int s0, int last, int c,
                                             float (&acc)[4]) {
  if (s0 + kS <= last) {  // a whole batch: no per-step branches, loads scheduled freely
#pragma unroll
    for (int u = 0; u < kS; ++u) {
      uint4 xv[4];
      load_x<F>(xrow, s0 + u, c, xv);
      fmt.template step<(kS == 1)>(f[u], xv, acc);
    }
  } else {
#pragma unroll
    for (int u = 0; u < kS - 1; ++u) {
      if (s0 + u < last) {
        uint4 xv[4];
        load_x<F>(xrow, s0 + u, c, xv);
        fmt.template step<(kS == 1)>(f[u], xv, acc);
      }
    }
  }
}

// One block per tile (16 weight rows, or 8 SwiGLU features), the session-6 loop: a warp's
// next batch is requested once the current one has landed (the `cur = nxt` copy waits for
// it), so a warp has one batch in flight while it decodes the one before; loads through the
// read-only path (`ld_stream`, scales `__ldg`). gpu18 (2026-12-02 04:36, Qwen3-8B batch 1)
// timed it 20-25% ahead of gemv_direct's pipelined loop for FP8 at every shape (qkv 10.27 us
// vs 12.77, o 6.33 vs 7.70, gate_up 28.45 vs 35.68, down 14.28 vs 17.95) while NVFP4 on
// gemv_direct (with the cheaper decode) was 7-11% ahead of its old kernel on qkv / o / down:
// the FP8 entry points take this loop, NVFP4 keeps gemv_direct (ops/matmul_quant_mma.py
// direct_sig; ATLAS_QUANT_TILE_LOOP=0 / 1 forces either loop for both formats, the A/B).
// Launch: grid = tiles exactly.
template <class F, Out kOut>
__device__ __forceinline__ void gemv_direct_tile(const __nv_bfloat16* __restrict__ x,
                                                 const uint8_t* __restrict__ w, const F fmt,
                                                 void* __restrict__ y, int m, int n, int k) {
  constexpr bool kSwiglu = kOut == Out::kSwiglu;
  __shared__ float partial[kWarps][4][32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, t = threadIdx.x;
  const int g = lane >> 2, c = lane & 3, tile = blockIdx.x;
  const int steps = k / F::kStepK;
  const int first = steps * warp / kWarps, last = steps * (warp + 1) / kWarps;
  Frag cur[kSteps], nxt[kSteps];
  load_batch<false, F, kSwiglu, kSteps>(cur, fmt, w, tile, first, last, g, c, n, k);
  atlas::pdl_enter();
  const uint4* xrow =
      reinterpret_cast<const uint4*>(x) + static_cast<size_t>(min(g, m - 1)) * (k / 8);
  float acc[4] = {0.f, 0.f, 0.f, 0.f};
  for (int s0 = first; s0 < last; s0 += kSteps) {
    if (s0 + kSteps < last)
      load_batch<false, F, kSwiglu, kSteps>(nxt, fmt, w, tile, s0 + kSteps, last, g, c, n, k);
    decode_batch(fmt, cur, xrow, s0, last, c, acc);
#pragma unroll
    for (int u = 0; u < kSteps; ++u) cur[u] = nxt[u];
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) partial[warp][i][lane] = acc[i];
  __syncthreads();
  float scale_a = 0.f, scale_b = 0.f;
  tile_out_scales<kOut>(fmt, tile, t, m, n, scale_a, scale_b);
  store_tile<kOut>(partial, scale_a, scale_b, y, tile, t, m, n);
}

// Each block takes tiles blockIdx.x, + gridDim.x, ... (16 weight rows, or 8 SwiGLU features,
// a tile; the launch builder sizes the grid so every SM gets an even share in one wave). The
// 8 warps split a tile's K into contiguous step ranges. A warp's batches alternate between
// two register buffers, the loop unrolled by two so that no buffer is copied: a batch's
// loads are issued as soon as the buffer's previous batch is decoded, and while the warp
// waits for one batch the next is in flight (a copy `cur = nxt` would wait for the next
// batch's data before the one after could be requested). The sequence runs across tile
// boundaries (the next tile's first batch is in flight while the block reduces a tile); the
// very first batch is issued before the PDL wait.
template <class F, Out kOut, int kS>
__device__ __forceinline__ void gemv_direct(const __nv_bfloat16* __restrict__ x,
                                            const uint8_t* __restrict__ w, const F fmt,
                                            void* __restrict__ y, int m, int n, int k) {
  constexpr bool kSwiglu = kOut == Out::kSwiglu;
  // the warps' partial sums, two buffers: tile i + 1 writes one while tile i's epilogue may
  // still read the other; the barrier of tile i + 1 orders tile i + 2's writes after it
  __shared__ float partials[2][kWarps][4][32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, t = threadIdx.x;
  const int g = lane >> 2, c = lane & 3;
  const int tiles = kSwiglu ? ((n >> 1) + 7) / 8 : (n + kRows - 1) / kRows;
  const int steps = k / F::kStepK;
  const int first = steps * warp / kWarps, last = steps * (warp + 1) / kWarps;
  const int per_tile = ((steps + kWarps - 1) / kWarps + kS - 1) / kS;

  // the narrow loops (batches of fewer than kSteps steps) request both buffers before the PDL
  // wait, as many bytes as the wide loop's one batch
  constexpr bool kTwoAhead = kS < kSteps;
  Frag fa[kS], fb[kS];
  Cursor at{static_cast<int>(blockIdx.x), 0};  // the next batch to decode
  // request the batch after `at` into f (none past the block's last tile)
  // (`pre`: Pre<true> for plain loads issued before the PDL wait)
  auto load_next = [&](Frag (&f)[kS], auto pre) {
    Cursor ahead = at;
    ahead.next(per_tile);
    if (ahead.tile < tiles)
      load_batch<decltype(pre)::value, F, kSwiglu, kS>(f, fmt, w, ahead.tile,
                                                       first + kS * ahead.b, last, g, c, n, k);
  };
  load_batch<true, F, kSwiglu, kS>(fa, fmt, w, at.tile, first, last, g, c, n, k);
  if constexpr (kTwoAhead) load_next(fb, Pre<true>{});
  atlas::pdl_enter();
  const uint4* xrow =
      reinterpret_cast<const uint4*>(x) + static_cast<size_t>(min(g, m - 1)) * (k / 8);
  float acc[4] = {0.f, 0.f, 0.f, 0.f};
  float scale_a = 0.f, scale_b = 0.f;  // epilogue thread t's output scales for the tile

  // Decode batch `at` from f into acc; after a tile's last batch, reduce and store the tile.
  auto consume = [&](const Frag (&f)[kS]) {
    const int tile = at.tile, s0 = first + kS * at.b;
    if (at.b == 0) tile_out_scales<kOut>(fmt, tile, t, m, n, scale_a, scale_b);
    decode_batch(fmt, f, xrow, s0, last, c, acc);
    at.next(per_tile);
    if (at.b != 0) return;  // the tile has more batches

    // the block's i-th tile (tile = blockIdx.x + i gridDim.x) uses buffer i % 2
    float (&partial)[kWarps][4][32] = partials[(tile / gridDim.x) & 1];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      partial[warp][i][lane] = acc[i];
      acc[i] = 0.f;
    }
    __syncthreads();
    store_tile<kOut>(partial, scale_a, scale_b, y, tile, t, m, n);
  };

  // fa holds batch `at` (requested): fb takes the one after it, then fa the one after that;
  // (kTwoAhead) fb holds the one after `at` already, each buffer is refilled once decoded
  while (at.tile < tiles) {
    if constexpr (!kTwoAhead) load_next(fb, Pre<false>{});
    consume(fa);
    if (at.tile >= tiles) break;
    load_next(fa, Pre<false>{});
    consume(fb);
    if constexpr (kTwoAhead) {
      if (at.tile >= tiles) break;
      load_next(fb, Pre<false>{});
    }
  }
}


// ---- The staged variant (ATLAS_QUANT_STAGED=1; entry points gemv_qs_*) ----------------------
// The same products, steps, fragments and epilogue as gemv_direct, fed through shared memory
// by bulk copies (bulk_copy.cuh) instead of per-lane register loads. Why: the register-fed
// kernel holds at most two 4-step batches per warp (registers), so a short kernel (a block's
// tile is 1-3 batches per warp) runs as "all warps wait, then all warps decode": memory idles
// while the SM decodes and the reverse (NVFP4's decode costs ~190 issue slots per KiB of
// weights, about what the SM's share of copy bandwidth delivers per KiB). A bulk copy costs
// no register while in flight and one instruction per row, so here ~200 KiB of the SM's
// weights are requested at once, before the PDL wait, and a warp decodes a stage as soon as
// it has landed while the later ones stream.
//   * grid: one block per SM (or per tile when there are fewer), 16 warps; block b takes
//     tiles b, b + gridDim.x, ... (ops/matmul_quant_mma.py staged launch);
//   * a unit is one tile's 16 weight rows x kStageSteps steps (FP8 2,048 values of a row,
//     NVFP4 4,096 and their group scales); the ring holds `stages` units (as many as the
//     launch's dynamic shared memory allows, up to kMaxStages), each slot with one mbarrier;
//   * warp w decodes steps w and w + 16 of each unit (the same fragments as gemv_direct, one
//     16-byte shared load per row and step; a row's slice is padded by 64 bytes so rows g
//     and g + 1 fall in different banks, the NVFP4 scale rows by 16 bytes likewise), then a
//     block barrier, after which each warp refills its row of the slot with the unit
//     `stages` ahead; after a tile's last unit the warps' partial sums are reduced and
//     stored (store_tile).
// Rows past n (and SwiGLU features past n / 2) copy the last row and are never stored.
// Preconditions (ops/matmul_quant_mma.py staged_supports): those of gemv_direct; NVFP4
// k % 256 == 0 (a row's group scales a multiple of 16 bytes); w and the NVFP4 group scales
// 16-byte aligned.
constexpr int kStagedWarps = 16;
constexpr int kStepsPerWarp = 2;  // steps of a unit per warp
constexpr int kStageSteps = kStepsPerWarp * kStagedWarps;
static_assert(kStagedWarps == kRows, "warp w copies tile row w of each unit");
constexpr int kMaxStages = 16;             // ops/matmul_quant_mma.py STAGED_MAX_STAGES
constexpr int kCodePitch = kStageSteps * 64 + 64;   // a row's code bytes per unit, padded
constexpr int kScalePitch = kStageSteps * 8 + 16;   // a row's NVFP4 scale bytes, padded

__device__ __forceinline__ uint32_t dynamic_smem_bytes() {
  uint32_t v;
  asm("mov.u32 %0, %%dynamic_smem_size;\n" : "=r"(v));
  return v;
}

// bulk_copy.cuh's wait_parity, bounded: a phase that never completes (a byte count that does
// not match the copies) traps after 2^22 polls (0.1 s or more; a unit lands in microseconds)
// instead of hanging the device.
__device__ __forceinline__ void wait_landed(uint64_t* bar, uint32_t parity) {
  for (uint32_t polls = 0;; ++polls) {
    uint32_t done;
    asm volatile(
        "{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
        " selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(atlas::bulk::shared_addr(bar)), "r"(parity)
        : "memory");
    if (done) return;
    if (polls == (1u << 22)) __trap();
  }
}

// Weight row of tile row r (0..15): rows 16 tile + r, or (SwiGLU) gate rows 8 tile + r for
// r < 8 and the matching up rows for r >= 8; clamped to the last row / feature.
template <bool kSwiglu>
__device__ __forceinline__ int tile_row(int tile, int r, int n) {
  if (kSwiglu) {
    const int inter = n >> 1, j = min(tile * 8 + (r & 7), inter - 1);
    return r < 8 ? j : inter + j;
  }
  return min(tile * kRows + r, n - 1);
}

template <class F, Out kOut>
__device__ __forceinline__ void gemv_staged(const __nv_bfloat16* __restrict__ x,
                                            const uint8_t* __restrict__ w, const F fmt,
                                            void* __restrict__ y, int m, int n, int k) {
  constexpr bool kSwiglu = kOut == Out::kSwiglu;
  constexpr int kScaleStep = F::kScaleBytesPerStep;
  constexpr int kScaleRow = kScaleStep ? kScalePitch : 0;
  constexpr int kStageBytes = kRows * (kCodePitch + kScaleRow);
  __shared__ uint64_t full[kMaxStages];
  __shared__ float partials[2][kStagedWarps][4][32];  // as gemv_direct's, by tile parity
  extern __shared__ __align__(128) uint8_t ring[];
  const int t = threadIdx.x, lane = t & 31, warp = t >> 5;
  const int g = lane >> 2, c = lane & 3;
  const int tiles = kSwiglu ? ((n >> 1) + 7) / 8 : (n + kRows - 1) / kRows;
  const int steps = k / F::kStepK;
  const int chunks = (steps + kStageSteps - 1) / kStageSteps;  // units per tile
  const int my_tiles = static_cast<int>(blockIdx.x) < tiles
                           ? (tiles - 1 - static_cast<int>(blockIdx.x)) / gridDim.x + 1
                           : 0;
  const int units = my_tiles * chunks;
  const int fit = static_cast<int>(dynamic_smem_bytes() / kStageBytes);
  const int stages = min(kMaxStages, min(units, fit));
  if (units > 0 && stages < 1) __trap();  // the launch gave no room for a unit
  const size_t pitch = static_cast<size_t>(k) / (F::kStepK / 64);  // row bytes of codes

  // Where a unit lies: the block's ti-th tile (tile blockIdx.x + ti gridDim.x), steps
  // chunk * kStageSteps .. of it. Advanced one unit at a time (no divisions in the loop).
  struct UnitPos {
    int ti, chunk;
    __device__ __forceinline__ void next(int chunks) {
      if (++chunk == chunks) {
        chunk = 0;
        ++ti;
      }
    }
  };
  const auto tile_of = [&](const UnitPos& p) {
    return static_cast<int>(blockIdx.x) + p.ti * static_cast<int>(gridDim.x);
  };
  // A unit's bytes (its copies sum to them), and its copies of tile row r into ring slot
  // `slot`: the row's codes and (NVFP4) its group scales. Each warp's lane 0 copies its own
  // row (warp w: row w), so no thread issues more than two copies per unit (a copy takes
  // uniform operands: ptxas loops over the lanes of a warp that issue different ones).
  const auto unit_bytes = [&](const UnitPos& p) {
    const int width = min(kStageSteps, steps - p.chunk * kStageSteps);
    return static_cast<uint32_t>(kRows * width * (64 + kScaleStep));
  };
  const auto copy_row = [&](const UnitPos& p, int slot, int r) {
    const int s0 = p.chunk * kStageSteps, width = min(kStageSteps, steps - s0);
    uint8_t* dst = ring + slot * kStageBytes;
    const size_t row = static_cast<size_t>(tile_row<kSwiglu>(tile_of(p), r, n));
    atlas::bulk::copy_to_shared(dst + r * kCodePitch, w + row * pitch + s0 * 64,
                                static_cast<uint32_t>(width * 64), &full[slot]);
    if constexpr (kScaleStep != 0)
      atlas::bulk::copy_to_shared(dst + kRows * kCodePitch + r * kScaleRow,
                                  fmt.group + row * fmt.groups_per_row + s0 * kScaleStep,
                                  static_cast<uint32_t>(width * kScaleStep), &full[slot]);
  };

  // Before the wait (weights only): thread 0 sets up the slots and announces units
  // 0 .. stages - 1, then every warp requests its row of each. `ahead` ends at unit `stages`,
  // the first refill.
  UnitPos ahead{0, 0};
  if (t == 0) {
    for (int i = 0; i < stages; ++i) atlas::bulk::init_barrier(&full[i], 1);
    atlas::bulk::fence_barrier_init();
    for (UnitPos p{0, 0}; p.ti * chunks + p.chunk < stages; p.next(chunks))
      atlas::bulk::expect_bytes(&full[p.ti * chunks + p.chunk], unit_bytes(p));
  }
  __syncthreads();
  for (int i = 0; i < stages; ++i, ahead.next(chunks))
    if (lane == 0) copy_row(ahead, i, warp);
  atlas::pdl_enter();
  const uint4* xrow =
      reinterpret_cast<const uint4*>(x) + static_cast<size_t>(min(g, m - 1)) * (k / 8);
  float acc[4] = {0.f, 0.f, 0.f, 0.f};
  float scale_a = 0.f, scale_b = 0.f;  // epilogue thread t's output scales for the tile
  int slot = 0;
  uint32_t phase = 0;  // the slot's fill round, mod 2
  UnitPos at{0, 0};
  for (int u = 0; u < units; ++u) {
    const int tile = tile_of(at);
    // This warp's steps of the unit: warp and warp + kStagedWarps (those < steps). x and
    // (FP8) their scales come from global memory: requested before the wait.
    const int s0 = at.chunk * kStageSteps + warp;
    if (at.chunk == 0) tile_out_scales<kOut>(fmt, tile, t, m, n, scale_a, scale_b);
    Frag f[kStepsPerWarp];
    uint4 xv[kStepsPerWarp][4];
#pragma unroll
    for (int j = 0; j < kStepsPerWarp; ++j) {
      const int s = s0 + j * kStagedWarps;
      if (s < steps) {
        load_x<F>(xrow, s, c, xv[j]);
        if constexpr (kScaleStep == 0)
          fmt.template scales<false>(f[j], tile_row<kSwiglu>(tile, g, n),
                                     tile_row<kSwiglu>(tile, g + 8, n), s, c);
      }
    }
    wait_landed(&full[slot], phase);
#pragma unroll
    for (int j = 0; j < kStepsPerWarp; ++j) {
      if (s0 + j * kStagedWarps >= steps) break;
      const int at_step = (warp + j * kStagedWarps) * 64 + c * 16;  // in the unit's rows
      const uint8_t* st = ring + slot * kStageBytes + at_step;
      f[j].wa = *reinterpret_cast<const uint4*>(st + g * kCodePitch);
      f[j].wb = *reinterpret_cast<const uint4*>(st + (g + 8) * kCodePitch);
      if constexpr (kScaleStep != 0) {  // the lane's two groups of rows g and g + 8
        const uint8_t* sc = ring + slot * kStageBytes + kRows * kCodePitch +
                            (warp + j * kStagedWarps) * kScaleStep + 2 * c;
        const uint32_t hi = *reinterpret_cast<const uint16_t*>(sc + (g + 8) * kScaleRow);
        f[j].sa = *reinterpret_cast<const uint16_t*>(sc + g * kScaleRow) | hi << 16;
      }
      fmt.template step<false>(f[j], xv[j], acc);
    }
    const bool tile_done = at.chunk == chunks - 1;
    float (&partial)[kStagedWarps][4][32] = partials[at.ti & 1];
    if (tile_done) {
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        partial[warp][i][lane] = acc[i];
        acc[i] = 0.f;
      }
    }
    // The slot's next fill (unit u + stages, `ahead`): announced now (its phase cannot
    // complete before the copies that follow the barrier land, so a warp still waiting on
    // this unit's phase sees it done), copied after the barrier, when no warp reads the
    // slot any more.
    const bool refill = u + stages < units;
    if (t == 0 && refill) atlas::bulk::expect_bytes(&full[slot], unit_bytes(ahead));
    __syncthreads();  // slot consumed by every warp; the tile's partial sums visible
    if (lane == 0 && refill) {
      atlas::bulk::fence_async_shared();
      copy_row(ahead, slot, warp);
    }
    if (tile_done) store_tile<kOut>(partial, scale_a, scale_b, y, tile, t, m, n);
    ahead.next(chunks);
    at.next(chunks);
    if (++slot == stages) {
      slot = 0;
      phase ^= 1u;
    }
  }
}

}  // namespace

#define ATLAS_QD_FP8_ARGS                                                                  \
  const __nv_bfloat16 *x, const uint8_t *w, const float *scale, void *y, uint32_t m,         \
      uint32_t n, uint32_t k, uint32_t row_shift, uint32_t row_stride, uint32_t col_shift,   \
      uint32_t col_stride
#define ATLAS_QD_NVFP4_ARGS                                                                 \
  const __nv_bfloat16 *x, const uint8_t *w, const uint8_t *scale, const float *row_scale, \
      void *y, uint32_t m, uint32_t n, uint32_t k

// Which loop an entry point runs: gemv_direct_tile (one block per tile), gemv_direct
// (pipelined, any grid) or gemv_staged.
enum class Loop { kTile, kPipe, kNarrow1, kNarrow2, kStaged };

template <Loop kLoop, Out kOut, class F>
__device__ __forceinline__ void run_gemv(const __nv_bfloat16* x, const uint8_t* w, const F& fmt,
                                         void* y, uint32_t m, uint32_t n, uint32_t k) {
  if (m < 1 || m > 8) __trap();  // ops/matmul_quant_mma.py routes more rows elsewhere
  const int mi = static_cast<int>(m), ni = static_cast<int>(n), ki = static_cast<int>(k);
  if constexpr (kLoop == Loop::kTile)
    gemv_direct_tile<F, kOut>(x, w, fmt, y, mi, ni, ki);
  else if constexpr (kLoop == Loop::kPipe)
    gemv_direct<F, kOut, kSteps>(x, w, fmt, y, mi, ni, ki);
  else if constexpr (kLoop == Loop::kNarrow1)
    gemv_direct<F, kOut, 1>(x, w, fmt, y, mi, ni, ki);
  else if constexpr (kLoop == Loop::kNarrow2)
    gemv_direct<F, kOut, 2>(x, w, fmt, y, mi, ni, ki);
  else
    gemv_staged<F, kOut>(x, w, fmt, y, mi, ni, ki);
}

#define ATLAS_QD_FP8_PASS x, w, scale, y, m, n, k, row_shift, row_stride, col_shift, col_stride
#define ATLAS_QD_NVFP4_PASS x, w, scale, row_scale, y, m, n, k

template <Loop kLoop, Out kOut>
__device__ __forceinline__ void fp8_entry(ATLAS_QD_FP8_ARGS) {
  run_gemv<kLoop, kOut>(x, w, Fp8{scale, row_shift, row_stride, col_shift, col_stride}, y, m, n,
                        k);
}

template <Loop kLoop, Out kOut, bool kLut = false>
__device__ __forceinline__ void nvfp4_entry(ATLAS_QD_NVFP4_ARGS) {
  run_gemv<kLoop, kOut>(x, w, Nvfp4<kLut>{scale, row_scale, k / 16}, y, m, n, k);
}

// One entry point per (format, loop, output): FP8_ENTRY(name, loop, out, blocks per SM).
#define ATLAS_QD_FP8_ENTRY(name, loop, out, threads, per_sm)                                \
  extern "C" __global__ void __launch_bounds__(threads, per_sm) name(ATLAS_QD_FP8_ARGS) {   \
    fp8_entry<Loop::loop, Out::out>(ATLAS_QD_FP8_PASS);                                     \
  }
#define ATLAS_QD_NVFP4_ENTRY(name, loop, out, lut, threads, per_sm)                         \
  extern "C" __global__ void __launch_bounds__(threads, per_sm) name(ATLAS_QD_NVFP4_ARGS) { \
    nvfp4_entry<Loop::loop, Out::out, lut>(ATLAS_QD_NVFP4_PASS);                            \
  }

// The defaults (ops/matmul_quant_mma.py direct_sig): FP8 on the tile loop, NVFP4 pipelined.
ATLAS_QD_FP8_ENTRY(gemv_qd_fp8_bf16, kTile, kBf16, kWarps * 32, 2)
ATLAS_QD_FP8_ENTRY(gemv_qd_fp8_f32, kTile, kF32, kWarps * 32, 2)
ATLAS_QD_FP8_ENTRY(gemv_qd_fp8_swiglu_bf16, kTile, kSwiglu, kWarps * 32, 2)
ATLAS_QD_NVFP4_ENTRY(gemv_qd_nvfp4_bf16, kPipe, kBf16, false, kWarps * 32, 2)
ATLAS_QD_NVFP4_ENTRY(gemv_qd_nvfp4_f32, kPipe, kF32, false, kWarps * 32, 2)
ATLAS_QD_NVFP4_ENTRY(gemv_qd_nvfp4_swiglu_bf16, kPipe, kSwiglu, false, kWarps * 32, 2)

// The other loop of each format: FP8 pipelined (the one-wave grid, ATLAS_QUANT_PERSISTENT=1,
// needs it; ATLAS_QUANT_TILE_LOOP=0) and NVFP4 on the tile loop (ATLAS_QUANT_TILE_LOOP=1).
ATLAS_QD_FP8_ENTRY(gemv_qd_fp8_pipe_bf16, kPipe, kBf16, kWarps * 32, 2)
ATLAS_QD_FP8_ENTRY(gemv_qd_fp8_pipe_f32, kPipe, kF32, kWarps * 32, 2)
ATLAS_QD_FP8_ENTRY(gemv_qd_fp8_pipe_swiglu_bf16, kPipe, kSwiglu, kWarps * 32, 2)
ATLAS_QD_NVFP4_ENTRY(gemv_qd_nvfp4_tile_bf16, kTile, kBf16, false, kWarps * 32, 2)
ATLAS_QD_NVFP4_ENTRY(gemv_qd_nvfp4_tile_f32, kTile, kF32, false, kWarps * 32, 2)
ATLAS_QD_NVFP4_ENTRY(gemv_qd_nvfp4_tile_swiglu_bf16, kTile, kSwiglu, false, kWarps * 32, 2)

// NVFP4 on the byte-table decode (ATLAS_QUANT_E2M1_LUT=1: the A/B of the bit-move decode).
ATLAS_QD_NVFP4_ENTRY(gemv_qd_nvfp4_lut_bf16, kPipe, kBf16, true, kWarps * 32, 2)
ATLAS_QD_NVFP4_ENTRY(gemv_qd_nvfp4_lut_f32, kPipe, kF32, true, kWarps * 32, 2)
ATLAS_QD_NVFP4_ENTRY(gemv_qd_nvfp4_lut_swiglu_bf16, kPipe, kSwiglu, true, kWarps * 32, 2)

// Staged through shared memory (ATLAS_QUANT_STAGED=1): one block of 16 warps per SM.
ATLAS_QD_FP8_ENTRY(gemv_qs_fp8_bf16, kStaged, kBf16, kStagedWarps * 32, 1)
ATLAS_QD_FP8_ENTRY(gemv_qs_fp8_f32, kStaged, kF32, kStagedWarps * 32, 1)
ATLAS_QD_FP8_ENTRY(gemv_qs_fp8_swiglu_bf16, kStaged, kSwiglu, kStagedWarps * 32, 1)
ATLAS_QD_NVFP4_ENTRY(gemv_qs_nvfp4_bf16, kStaged, kBf16, false, kStagedWarps * 32, 1)
ATLAS_QD_NVFP4_ENTRY(gemv_qs_nvfp4_f32, kStaged, kF32, false, kStagedWarps * 32, 1)
ATLAS_QD_NVFP4_ENTRY(gemv_qs_nvfp4_swiglu_bf16, kStaged, kSwiglu, false, kStagedWarps * 32, 1)

// The pipelined loop on narrower batches, for more blocks per SM (ATLAS_QUANT_NARROW=1 / 2):
// n1 one step a batch under 64 registers (four blocks, 32 warps an SM; NVFP4's MMAs on one
// accumulator chain), n2 two steps under 80 (three blocks, 24 warps; NVFP4 spills 8 bytes in
// its bf16 / f32 entry points, once per batch's loads, none in the decode). Both request
// their two batches before the PDL wait (gemv_direct kTwoAhead). Why: every variant timed so far (tile, pipe, staged, byte
// tables) ran 16 warps an SM and NVFP4 streamed at 35-50% of copy on all of them, FP8 at up
// to 83% with about as many instructions per weight *value*: NVFP4 issues ~190 instructions
// per KiB of a warp's weights, all but a few dependent chains (decode -> MMA), and 4 warps a
// scheduler leave most issue slots empty (~1.3 instructions a cycle an SM measured). More
// resident warps hide those chains, and one wave then holds Qwen3-8B's qkv (384 tiles).
ATLAS_QD_FP8_ENTRY(gemv_qd_fp8_n1_bf16, kNarrow1, kBf16, kWarps * 32, 4)
ATLAS_QD_FP8_ENTRY(gemv_qd_fp8_n1_f32, kNarrow1, kF32, kWarps * 32, 4)
ATLAS_QD_FP8_ENTRY(gemv_qd_fp8_n1_swiglu_bf16, kNarrow1, kSwiglu, kWarps * 32, 4)
ATLAS_QD_NVFP4_ENTRY(gemv_qd_nvfp4_n1_bf16, kNarrow1, kBf16, false, kWarps * 32, 4)
ATLAS_QD_NVFP4_ENTRY(gemv_qd_nvfp4_n1_f32, kNarrow1, kF32, false, kWarps * 32, 4)
ATLAS_QD_NVFP4_ENTRY(gemv_qd_nvfp4_n1_swiglu_bf16, kNarrow1, kSwiglu, false, kWarps * 32, 4)
ATLAS_QD_FP8_ENTRY(gemv_qd_fp8_n2_bf16, kNarrow2, kBf16, kWarps * 32, 3)
ATLAS_QD_FP8_ENTRY(gemv_qd_fp8_n2_f32, kNarrow2, kF32, kWarps * 32, 3)
ATLAS_QD_FP8_ENTRY(gemv_qd_fp8_n2_swiglu_bf16, kNarrow2, kSwiglu, kWarps * 32, 3)
ATLAS_QD_NVFP4_ENTRY(gemv_qd_nvfp4_n2_bf16, kNarrow2, kBf16, false, kWarps * 32, 3)
ATLAS_QD_NVFP4_ENTRY(gemv_qd_nvfp4_n2_f32, kNarrow2, kF32, false, kWarps * 32, 3)
ATLAS_QD_NVFP4_ENTRY(gemv_qd_nvfp4_n2_swiglu_bf16, kNarrow2, kSwiglu, false, kWarps * 32, 3)
