// Skinny wgmma GEMM for decode batches: y[m, n] = sum_k x[m, k] * w[n, k] for 1 <= m <= 256
// (bf16 in, f32 accumulate, bf16 or bf16-valued f32 out), sm_90a only.
//
// Decode at 9..256 rows is (nearly) memory-bound: every weight byte feeds at most m FMAs, so
// the weights must stream from HBM once at close to copy bandwidth. The product is computed
// transposed, y^T[n, m] = W[n, k] . x^T, with the *weight* as wgmma's M = 64 operand and the
// batch as its N (16, 32, 64, 128 or 256: m rounded up), so a small batch costs no padded MMA
// rows of weights, only a narrower N. Both operands are K-major in shared memory exactly as in
// gemm_sm90.cu (a weight tile row and an x row are each 64 bf16 = 128 bytes, 128-byte swizzle;
// wgmma_util.cuh), so the same descriptors and copies serve.
//
// Block: G warpgroups (blockDim.x = 128 G, G = 1 or 2: the launch builder's choice) own
// 64 G weight rows (outputs n), 64 per warpgroup, and all m batch rows, over a contiguous
// range of 64-column k-tiles. A ring of kStages stages in dynamic shared memory holds
// W [64 G][64] + x [N][64] per stage, filled by every thread with 16-byte cp.async
// (rows past n or m and columns past k zero-filled: any n, any m <= 256, k % 8 == 0; the
// weight copies carry the L2::256B prefetch hint, so DRAM serves each row 256 contiguous
// bytes at a time: the H200 decode bench at batch 32 put the kernel level with gemv_mma
// without it, 2026-12-01). The
// pipeline is gemm_sm90's: prefetch distance kStages - 2, one wgmma group in flight (two-
// warpgroup blocks: kStages - 1, each tile's wgmmas waited for; see kAhead). The ring
// is sized so that two one-warpgroup blocks fit on an SM for N <= 128 (two blocks' weight
// streams in flight per SM) and one for N = 256 or G = 2 (ring_stages below;
// ops/matmul_decode.py mirrors it). x (at most 256 x k bf16) is re-read by every block from
// L2, the weights once from HBM: the L2-to-SM traffic is (1 + m / (64 G)) times the weight
// bytes, twice them at m = 64 with one warpgroup. Two warpgroups share each x tile between
// 128 weight rows (1.5 times at m = 64), for batches of 17 rows and more (N >= 32: the x
// tile's copies must cover the 256 threads).
//
// Split-K over a thread-block cluster: a narrow projection has too few 64-row tiles to give
// every SM a block (n = 4096: 64 tiles), so the entry points *_split{2,4,8} are compiled with
// __cluster_dims__(S): the S blocks of a cluster (consecutive blockIdx.x, rank = blockIdx.x %
// S, tile = blockIdx.x / S) each take 1/S of the k-tiles, leave their f32 partial tile in
// their own shared memory, and after a cluster barrier rank r sums batch rows
// [m r / S, m (r + 1) / S) over the S partials (distributed shared memory, ranks in fixed
// order 0..S-1: bit-reproducible, no workspace, no atomics) and writes them; a second
// barrier keeps every partial alive until all ranks have read it. The launch builder picks S
// (ops/matmul_decode.py decode_split).
//
// SwiGLU epilogue (the *_swiglu_* entry points): w is a fused [gate | up] weight [n, k]
// (n = 2 I: gate rows [0, I), up rows [I, 2 I), as the checkpoint stores them) and y the
// activation [m, I] = bf16(bf16(silu(bf16(gate))) * bf16(up)): exactly the unfused kernel
// into gate_up, then silu_mul_bf16, in one launch. A block's 64 G weight rows are laid out
// at load as 32 G gate rows [32 G t, 32 G t + 32 G) then the matching 32 G up rows (I past
// them), so its partial tile holds both halves of its 32 G activation columns and the
// epilogue combines them (after the cluster's sum of the split-K partials, so every rank
// sees whole sums). The accumulation is the unfused kernel's, row for row (the same k-tiles
// per rank, the same wgmma order over k): the result equals the unfused path bit for bit.
// This removes the silu_mul launch (its PDL wait and dependent round trips) and half of
// gate_up's output bytes from a decode step. The *_geglu_* entry points do the same with
// Gemma 3's tanh-GELU GLU, act = bf16(bf16(gelu_tanh(bf16(gate))) * bf16(up)): the unfused
// kernel then gelu_tanh_mul_bf16, bit for bit (gemm_decode_tile.cuh Glu selects the
// activation at compile time; one kernel body, one epilogue).
//
// PDL: the first tiles' weight copies are issued before griddepcontrol.wait (no kernel writes
// weights), and L2 prefetches of the next l2_tiles k-tiles of the block's rows (a kernel
// argument, 0: none; ops/matmul_decode.py, ATLAS_DECODE_GEMM_L2_TILES), a window the loop
// then keeps l2_tiles ahead of its ring; x is read and y written only after it.
//
// Launch (ops/matmul_decode.py): grid = ceil(n / (64 G)) * S (1-D), 128 G threads, dynamic
// shared memory smem_bytes(N, G) (up to ~201 KiB: the caller opts in).
// Preconditions: 1 <= m <= 256, n >= 1, k >= 8 with k % 8 == 0, x and w 16-byte aligned;
// the gated (SwiGLU, GeGLU) entries also n even.
#include "atlas_common.cuh"
#include "gemm_decode_tile.cuh"
#include "mma_util.cuh"
#include "wgmma_util.cuh"

namespace {

using namespace atlas::decode_gemm;  // geometry, gate_up_row, store_tile

constexpr int kMaxStages = 8;            // ops/matmul_decode.py DECODE_MAX_STAGES
static_assert(smem_bytes(kMaxCols, 1, kMaxStages) <= 227 * 1024, "227 KiB per block");
static_assert(smem_bytes(kMaxCols, kMaxGroups, kMaxStages) <= 227 * 1024, "227 KiB per block");
static_assert(2 * (smem_bytes(128, 1, kMaxStages) + 1024) <= 228 * 1024,
              "two N <= 128 blocks fit an SM");

// The gated entries' weight tile: k-tile `kt` of the rows gate_up_row lays out (rows past I
// zero-filled, as cp_async_k64_tile does past n; the same L2::256B prefetch hint and swizzled
// layout).
template <int ROWS, int THREADS>
__device__ __forceinline__ void cp_async_gate_up_tile(uint32_t dst,
                                                      const __nv_bfloat16* __restrict__ w,
                                                      int pair0, int inter, int k, int kt) {
  constexpr int kChunks = 8;
  static_assert(ROWS * kChunks % THREADS == 0, "copies divide evenly over the threads");
#pragma unroll
  for (int it = 0; it < ROWS * kChunks / THREADS; ++it) {
    const int i = static_cast<int>(threadIdx.x) + it * THREADS;
    const int r = i / kChunks, ch = i % kChunks;
    const int gr = gate_up_row<ROWS>(r, pair0, inter), gk = kt * 64 + ch * 8;
    const bool ok = gr >= 0 && gk < k;
    const __nv_bfloat16* p = ok ? w + static_cast<size_t>(gr) * k + gk : w;
    asm volatile("cp.async.cg.shared.global.L2::256B [%0], [%1], 16, %2;\n"
                 ::"r"(dst + atlas::swizzle128(r, ch)), "l"(p), "r"(ok ? 16 : 0)
                 : "memory");
  }
}

// kGlu not kNone: w is [gate | up] and y the activation (see the header): the weight tile is
// laid out as gate/up pairs and the epilogue writes kGlu of each pair (bf16 out only).
template <int kCols, int kSplit, bool kF32Out, int kGroups, Glu kGlu = Glu::kNone>
__device__ __forceinline__ void gemm_decode(const __nv_bfloat16* __restrict__ x,
                                            const __nv_bfloat16* __restrict__ w,
                                            void* __restrict__ y, int m, int n, int k,
                                            int l2_tiles, uint8_t* smem_raw) {
  constexpr int kThreads = kGroupThreads * kGroups, kRows = kGroupRows * kGroups;
  constexpr int kStages = ring_stages(kCols, kGroups, kMaxStages);
  constexpr int kStage = stage_bytes(kCols, kGroups);
  constexpr int kStageW = kRows * BK * 2;
  constexpr int kPitch = partial_pitch(kGroups);  // the epilogue's f32 partial tile
  static_assert(kStages >= 3, "prefetch distance kStages - 2 must be at least 1");
  static_assert(kStage % kAlign == 0 && kStageW % kAlign == 0, "stage bases stay aligned");
  static_assert(kCols * kPitch * 4 <= kStages * kStage, "the partial tile fits in the ring");
  static_assert(kCols * 8 % kThreads == 0, "the x tile's copies cover every thread");
  constexpr bool kGated = kGlu != Glu::kNone;  // a [gate | up] weight ending with kGlu
  static_assert(!(kGated && kF32Out), "the activation is bf16");
  constexpr int kOutRows = kGated ? kRows / 2 : kRows;  // output columns of a block
  const int inter = n / 2;                               // activation width (kGated)
  // tiles in flight ahead of the one multiplied: one-warpgroup blocks keep kStages - 2 and
  // one wgmma group in flight (a slot is refilled two tiles after its wgmmas were issued);
  // two-warpgroup blocks, alone on their SM, keep kStages - 1 and wait for each tile's
  // wgmmas (a slot is refilled the tile after), so one more tile of weights streams per SM
  constexpr int kAhead = kGroups > 1 ? kStages - 1 : kStages - 2;

  const uint32_t raw = atlas::smem_addr(smem_raw);
  const uint32_t smem = (raw + kAlign - 1) & ~uint32_t(kAlign - 1);
  float* part = reinterpret_cast<float*>(smem_raw + (smem - raw));  // [kCols][kPitch], later

  const int tile = static_cast<int>(blockIdx.x) / kSplit;
  const int rank = static_cast<int>(blockIdx.x) % kSplit;  // == the cluster rank
  const int row0 = tile * kOutRows;  // first output column (kGated: first gate/up pair)
  const int k_tiles = (k + BK - 1) / BK;
  const int kt0 = k_tiles * rank / kSplit;
  const int count = k_tiles * (rank + 1) / kSplit - kt0;  // k-tiles of this block

  auto stage_w = [&](int s) { return smem + s * kStage; };
  auto stage_x = [&](int s) { return smem + s * kStage + kStageW; };
  auto load_w = [&](int s, int kt) {
    if constexpr (kGated)
      cp_async_gate_up_tile<kRows, kThreads>(stage_w(s), w, row0, inter, k, kt);
    else
      atlas::cp_async_k64_tile<kRows, kThreads, true>(stage_w(s), w, row0, n, k, kt);
  };

  // prologue: weights first (legal before the PDL wait), then x; group s holds tile s's x
  // (and group 0 every prologue W), so "groups 0..s done" means tile s landed
#pragma unroll
  for (int s = 0; s < kAhead; ++s)
    if (s < count) load_w(s, kt0 + s);
  // ... and, l2_tiles > 0, keep L2 l2_tiles k-tiles ahead of the ring: one 128-byte line of
  // each of the block's weight rows per tile (no kernel writes weights). Before the PDL wait
  // that is the next l2_tiles tiles: a block launched early (into an SM the previous
  // kernel's tail freed) keeps DRAM streaming past what its ring holds while it waits. In
  // the loop, tile i + kAhead + l2_tiles as tile i + kAhead's copies go out: DRAM bytes in
  // flight beyond the ring's (32-64 KB a SM), and the ring's copies then hit L2.
  auto prefetch_l2 = [&](int t) {
    if (t >= count) return;
    for (int r = threadIdx.x; r < kRows; r += kThreads) {
      const int gr =
          kGated ? gate_up_row<kRows>(r, row0, inter) : (row0 + r < n ? row0 + r : -1);
      if (gr >= 0) {
        const __nv_bfloat16* p = w + static_cast<size_t>(gr) * k + (kt0 + t) * BK;
        asm volatile("prefetch.global.L2 [%0];\n" ::"l"(p));
      }
    }
  };
  for (int t = kAhead; t < kAhead + l2_tiles && t < count; ++t) prefetch_l2(t);
  atlas::pdl_enter();
#pragma unroll
  for (int s = 0; s < kAhead; ++s) {
    if (s < count) atlas::cp_async_k64_tile<kCols, kThreads>(stage_x(s), x, 0, m, k, kt0 + s);
    atlas::cp_async_commit();  // always commit: the waits below count groups
  }

  float acc[kCols / 2];
#pragma unroll
  for (int i = 0; i < kCols / 2; ++i) acc[i] = 0.f;

  for (int i = 0; i < count; ++i) {
    atlas::cp_async_wait<kAhead - 1>();  // tile i landed (this thread)
    atlas::fence_proxy_async();          // visible to wgmma
    __syncthreads();                     // ... of every thread
    const int next = i + kAhead;
    if (next < count) {
      const int s = next % kStages;
      load_w(s, kt0 + next);
      atlas::cp_async_k64_tile<kCols, kThreads>(stage_x(s), x, 0, m, k, kt0 + next);
    }
    atlas::cp_async_commit();
    if (l2_tiles > 0) prefetch_l2(next + l2_tiles);
    const int s = i % kStages;
    // warpgroup g multiplies weight rows [64 g, 64 g + 64) of the stage by the shared x tile
    const uint32_t w_rows = stage_w(s) + (threadIdx.x / kGroupThreads) * kGroupRows * BK * 2;
    atlas::wgmma_k64_tile(acc, atlas::smem_desc(w_rows), atlas::smem_desc(stage_x(s)));
    if constexpr (kAhead == kStages - 1) {  // slot s is refilled next tile
      atlas::wgmma_wait<0>();
      atlas::fence_acc(acc);
    }
  }
  atlas::wgmma_wait<0>();
  atlas::fence_acc(acc);
  atlas::cp_async_wait<0>();  // no copy may outlive the loop (only empty groups remain)
  __syncthreads();            // every wgmma and copy of the ring is done before reuse

  store_tile<kCols, kSplit, kF32Out, kGroups, kGlu, false, false>(acc, part, y, m, n, row0,
                                                               rank);
}

// N = the batch rounded up to a wgmma width (at least 32 with two warpgroups); the ring
// layout follows from it.
template <int kSplit, bool kF32Out, int kGroups, Glu kGlu>
__device__ __forceinline__ void dispatch_cols(const __nv_bfloat16* x, const __nv_bfloat16* w,
                                              void* y, int m, int n, int k, int l2,
                                              uint8_t* smem) {
  if (kGroups == 1 && m <= 16)
    gemm_decode<16, kSplit, kF32Out, 1, kGlu>(x, w, y, m, n, k, l2, smem);
  else if (m <= 32)
    gemm_decode<32, kSplit, kF32Out, kGroups, kGlu>(x, w, y, m, n, k, l2, smem);
  else if (m <= 64)
    gemm_decode<64, kSplit, kF32Out, kGroups, kGlu>(x, w, y, m, n, k, l2, smem);
  else if (m <= 128)
    gemm_decode<128, kSplit, kF32Out, kGroups, kGlu>(x, w, y, m, n, k, l2, smem);
  else if (m <= kMaxCols)
    gemm_decode<kMaxCols, kSplit, kF32Out, kGroups, kGlu>(x, w, y, m, n, k, l2, smem);
  else
    __trap();  // ops/matmul_decode.py checks 1 <= m <= 256
}

// The block's warpgroups (blockDim.x / 128) select the block shape.
template <int kSplit, bool kF32Out, Glu kGlu = Glu::kNone>
__device__ __forceinline__ void dispatch(const __nv_bfloat16* x, const __nv_bfloat16* w,
                                         void* y, uint32_t m, uint32_t n, uint32_t k,
                                         uint32_t l2_tiles) {
  extern __shared__ __align__(16) uint8_t smem_raw[];
  const int mi = static_cast<int>(m), ni = static_cast<int>(n), ki = static_cast<int>(k);
  const int l2 = static_cast<int>(l2_tiles);
  if (blockDim.x == kGroupThreads * kMaxGroups)
    dispatch_cols<kSplit, kF32Out, kMaxGroups, kGlu>(x, w, y, mi, ni, ki, l2, smem_raw);
  else if (blockDim.x == kGroupThreads)
    dispatch_cols<kSplit, kF32Out, 1, kGlu>(x, w, y, mi, ni, ki, l2, smem_raw);
  else
    __trap();  // ops/matmul_decode.py launches 128 or 256 threads
}

constexpr int kMaxThreads = kGroupThreads * kMaxGroups;

}  // namespace

extern "C" __global__ void __launch_bounds__(kMaxThreads)
    gemm_decode_sm90_bf16(const __nv_bfloat16* x, const __nv_bfloat16* w, __nv_bfloat16* y,
        uint32_t m, uint32_t n, uint32_t k, uint32_t l2_tiles) {
  dispatch<1, false>(x, w, y, m, n, k, l2_tiles);
}

extern "C" __global__ void __launch_bounds__(kMaxThreads)
    gemm_decode_sm90_bf16_f32(const __nv_bfloat16* x, const __nv_bfloat16* w, float* y,
        uint32_t m, uint32_t n, uint32_t k, uint32_t l2_tiles) {
  dispatch<1, true>(x, w, y, m, n, k, l2_tiles);
}

extern "C" __global__ void __cluster_dims__(2, 1, 1) __launch_bounds__(kMaxThreads)
    gemm_decode_sm90_bf16_split2(const __nv_bfloat16* x, const __nv_bfloat16* w, __nv_bfloat16* y,
        uint32_t m, uint32_t n, uint32_t k, uint32_t l2_tiles) {
  dispatch<2, false>(x, w, y, m, n, k, l2_tiles);
}

extern "C" __global__ void __cluster_dims__(2, 1, 1) __launch_bounds__(kMaxThreads)
    gemm_decode_sm90_bf16_f32_split2(const __nv_bfloat16* x, const __nv_bfloat16* w, float* y,
        uint32_t m, uint32_t n, uint32_t k, uint32_t l2_tiles) {
  dispatch<2, true>(x, w, y, m, n, k, l2_tiles);
}

extern "C" __global__ void __cluster_dims__(4, 1, 1) __launch_bounds__(kMaxThreads)
    gemm_decode_sm90_bf16_split4(const __nv_bfloat16* x, const __nv_bfloat16* w, __nv_bfloat16* y,
        uint32_t m, uint32_t n, uint32_t k, uint32_t l2_tiles) {
  dispatch<4, false>(x, w, y, m, n, k, l2_tiles);
}

extern "C" __global__ void __cluster_dims__(4, 1, 1) __launch_bounds__(kMaxThreads)
    gemm_decode_sm90_bf16_f32_split4(const __nv_bfloat16* x, const __nv_bfloat16* w, float* y,
        uint32_t m, uint32_t n, uint32_t k, uint32_t l2_tiles) {
  dispatch<4, true>(x, w, y, m, n, k, l2_tiles);
}

extern "C" __global__ void __cluster_dims__(8, 1, 1) __launch_bounds__(kMaxThreads)
    gemm_decode_sm90_bf16_split8(const __nv_bfloat16* x, const __nv_bfloat16* w, __nv_bfloat16* y,
        uint32_t m, uint32_t n, uint32_t k, uint32_t l2_tiles) {
  dispatch<8, false>(x, w, y, m, n, k, l2_tiles);
}

extern "C" __global__ void __cluster_dims__(8, 1, 1) __launch_bounds__(kMaxThreads)
    gemm_decode_sm90_bf16_f32_split8(const __nv_bfloat16* x, const __nv_bfloat16* w, float* y,
        uint32_t m, uint32_t n, uint32_t k, uint32_t l2_tiles) {
  dispatch<8, true>(x, w, y, m, n, k, l2_tiles);
}


// The gate_up projection ending with its SwiGLU: w = [gate | up] [n, k], act [m, n / 2].
extern "C" __global__ void __launch_bounds__(kMaxThreads)
    gemm_decode_sm90_swiglu_bf16(const __nv_bfloat16* x, const __nv_bfloat16* w,
        __nv_bfloat16* act, uint32_t m, uint32_t n, uint32_t k, uint32_t l2_tiles) {
  dispatch<1, false, Glu::kSwiglu>(x, w, act, m, n, k, l2_tiles);
}

extern "C" __global__ void __cluster_dims__(2, 1, 1) __launch_bounds__(kMaxThreads)
    gemm_decode_sm90_swiglu_bf16_split2(const __nv_bfloat16* x, const __nv_bfloat16* w,
        __nv_bfloat16* act, uint32_t m, uint32_t n, uint32_t k, uint32_t l2_tiles) {
  dispatch<2, false, Glu::kSwiglu>(x, w, act, m, n, k, l2_tiles);
}

extern "C" __global__ void __cluster_dims__(4, 1, 1) __launch_bounds__(kMaxThreads)
    gemm_decode_sm90_swiglu_bf16_split4(const __nv_bfloat16* x, const __nv_bfloat16* w,
        __nv_bfloat16* act, uint32_t m, uint32_t n, uint32_t k, uint32_t l2_tiles) {
  dispatch<4, false, Glu::kSwiglu>(x, w, act, m, n, k, l2_tiles);
}

extern "C" __global__ void __cluster_dims__(8, 1, 1) __launch_bounds__(kMaxThreads)
    gemm_decode_sm90_swiglu_bf16_split8(const __nv_bfloat16* x, const __nv_bfloat16* w,
        __nv_bfloat16* act, uint32_t m, uint32_t n, uint32_t k, uint32_t l2_tiles) {
  dispatch<8, false, Glu::kSwiglu>(x, w, act, m, n, k, l2_tiles);
}

// ... ending with the tanh-GELU GLU instead (Gemma 3): bit for bit the plain entry of the same
// split into [gate | up], then gelu_tanh_mul_bf16.
extern "C" __global__ void __launch_bounds__(kMaxThreads)
    gemm_decode_sm90_geglu_bf16(const __nv_bfloat16* x, const __nv_bfloat16* w,
        __nv_bfloat16* act, uint32_t m, uint32_t n, uint32_t k, uint32_t l2_tiles) {
  dispatch<1, false, Glu::kGeglu>(x, w, act, m, n, k, l2_tiles);
}

extern "C" __global__ void __cluster_dims__(2, 1, 1) __launch_bounds__(kMaxThreads)
    gemm_decode_sm90_geglu_bf16_split2(const __nv_bfloat16* x, const __nv_bfloat16* w,
        __nv_bfloat16* act, uint32_t m, uint32_t n, uint32_t k, uint32_t l2_tiles) {
  dispatch<2, false, Glu::kGeglu>(x, w, act, m, n, k, l2_tiles);
}

extern "C" __global__ void __cluster_dims__(4, 1, 1) __launch_bounds__(kMaxThreads)
    gemm_decode_sm90_geglu_bf16_split4(const __nv_bfloat16* x, const __nv_bfloat16* w,
        __nv_bfloat16* act, uint32_t m, uint32_t n, uint32_t k, uint32_t l2_tiles) {
  dispatch<4, false, Glu::kGeglu>(x, w, act, m, n, k, l2_tiles);
}

extern "C" __global__ void __cluster_dims__(8, 1, 1) __launch_bounds__(kMaxThreads)
    gemm_decode_sm90_geglu_bf16_split8(const __nv_bfloat16* x, const __nv_bfloat16* w,
        __nv_bfloat16* act, uint32_t m, uint32_t n, uint32_t k, uint32_t l2_tiles) {
  dispatch<8, false, Glu::kGeglu>(x, w, act, m, n, k, l2_tiles);
}
