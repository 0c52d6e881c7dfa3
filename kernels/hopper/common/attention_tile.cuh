// Per-warp pieces shared by the tensor-core attention kernels (attention.cu's prefill,
// attention_long.cu, attention_sm90.cu). A warp holds the scores of 16 query rows x 8 NT keys
// in mma.m16n8k16's C layout (which is also each warp's slice of a wgmma m64nN accumulator):
// s[j][e] is row g + 8 (e / 2), key 8 j + 2c + e % 2 (g = lane / 4, c = lane % 4); a row's
// values live in the 4 lanes of a quad. sm_80+ PTX only, so gb10 compiles it too.
#pragma once

#include "bf16_vec.cuh"
#include "mma_util.cuh"

namespace atlas {

constexpr float kAttnLog2e = 1.4426950408889634f;

// Key position -> (block-table index, row in the page) of the paged KV cache: a shift and a
// mask where the page size is a power of two (the engine's 16), a division otherwise (~15
// instructions by a run-time value; the long kernels map several positions per tile).
struct PageMap {
  int size, shift;
  bool pow2;
  __device__ __forceinline__ explicit PageMap(int block_size)
      : size(block_size), shift(__ffs(block_size) - 1),
        pow2((block_size & (block_size - 1)) == 0) {}
  __device__ __forceinline__ int page(int p) const { return pow2 ? p >> shift : p / size; }
  __device__ __forceinline__ int row(int p) const { return pow2 ? p & (size - 1) : p % size; }
};

// Verification steps (attention_verify.cu): row `row` continues row - 1's run of one
// sequence's rows: one more key, and the same block for row - 1's newest key (written this
// step by row - 1, in a block only its sequence holds: the KV cache copies shared blocks
// before writing, so no other sequence's table names it).
__device__ __forceinline__ bool continues_run(const int* kv_lens, const int* block_tables,
                                              int row, int num_rows, int max_blocks,
                                              const PageMap& pages) {
  if (row <= 0 || row >= num_rows) return false;
  const int prev = kv_lens[row - 1];
  if (prev < 1 || kv_lens[row] != prev + 1) return false;
  const int pg = pages.page(prev - 1);
  return block_tables[static_cast<size_t>(row) * max_blocks + pg] ==
         block_tables[static_cast<size_t>(row - 1) * max_blocks + pg];
}

// Keys per split of a verification row of `len` keys (ops/attention_verify.py
// verify_split_rule): its share of num_splits in whole 64-key tiles, at least min_chunk. A
// row's partition then depends on its own kv_len only: the same keys, tiles (at absolute
// positions) and sums whichever row of whichever step it is (speculative acceptance needs it).
__device__ __forceinline__ int verify_row_chunk(int len, int num_splits, int min_chunk) {
  constexpr int kTile = 64;
  return max((max((len + num_splits - 1) / num_splits, 1) + kTile - 1) / kTile * kTile,
             min_chunk);
}

// One tile of the online softmax, f32 in log2 units: scores of keys key0 + 8 j + e (key0
// includes this lane's 2c) past last[hh] become -inf, the rest count scaled by scale_log2;
// each row's running max m_run and sum l_run (this lane's columns only: reduce l over the
// quad at the end) absorb the tile; s becomes the probabilities exp2(s * scale_log2 - max)
// (one FFMA and one ex2 per score: the softmax's FP32 work competes with the MMAs'
// neighbours for issue slots in the long kernels), and corr[hh]
// is the factor the row's output accumulators must be multiplied by. A row with no key seen
// yet keeps max -inf, zero probabilities and corr 0 (its accumulators are zero anyway).
// kMask = false skips the comparison with last[] for a tile the caller knows every row of
// sees whole (causal tiles below the diagonal): same values, less work per score.
// kWindow (sliding-window attention, a tile holding keys before some row's window): a key
// counts only within [last[hh] - span, last[hh]] (span = window - 1 keys before the row's
// own), one unsigned comparison a score: last - key is negative, so huge, past last.
template <int NT, bool kMask = true, bool kWindow = false>
__device__ __forceinline__ void online_softmax_tile(float (&s)[NT][4], int key0,
                                                    const int (&last)[2], float scale_log2,
                                                    float (&m_run)[2], float (&l_run)[2],
                                                    float (&corr)[2], int span = 0) {
#pragma unroll
  for (int hh = 0; hh < 2; ++hh) {
    float mx = -INFINITY;
#pragma unroll
    for (int j = 0; j < NT; ++j)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        float& x = s[j][2 * hh + e];
        if (kWindow ? static_cast<unsigned>(last[hh] - (key0 + j * 8 + e)) >
                          static_cast<unsigned>(span)
                    : kMask && key0 + j * 8 + e > last[hh])
          x = -INFINITY;
        mx = fmaxf(mx, x);
      }
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
    // the max of the scaled scores is the scaled max (scale_log2 > 0, rounding is monotonic)
    const float m_new = fmaxf(m_run[hh], mx * scale_log2);
    const float base = m_new == -INFINITY ? 0.f : m_new;
    corr[hh] = exp2f(m_run[hh] - base);
    float sum = 0.f;
#pragma unroll
    for (int j = 0; j < NT; ++j)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        float& x = s[j][2 * hh + e];
        x = exp2f(fmaf(x, scale_log2, -base));  // one FFMA per score: scale and shift
        sum += x;
      }
    l_run[hh] = l_run[hh] * corr[hh] + sum;
    m_run[hh] = m_new;
  }
}

// The probabilities of key slice kt (n-tiles 2kt and 2kt + 1: 16 keys) as NP bf16 A
// fragments of an m16n8k16 (or wgmma register-A) product whose sum carries ~8 NP significant
// bits: part 0 = bf16(p), part i = bf16(p - parts 0..i-1). A single rounded P would differ
// from any f32 reference by whole bf16 ulps wherever f32 noise flips a rounding; hi + lo
// (NP = 2) keeps ~16 bits, enough for bf16 outputs, NP = 3 ~24 bits for f32 ones.
// Registers a0 (g, 2c..), a1 (g + 8, 2c..), a2 (g, 2c + 8..), a3 (g + 8, 2c + 8..).
template <int NP, int NT>
__device__ __forceinline__ void prob_fragments(const float (&s)[NT][4], int kt,
                                               uint32_t (&p)[NP][4]) {
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    float a = s[2 * kt + (i >> 1)][2 * (i & 1)], b = s[2 * kt + (i >> 1)][2 * (i & 1) + 1];
#pragma unroll
    for (int part = 0; part < NP; ++part) {
      p[part][i] = pack_bf16x2(a, b);
      float ha, hb;
      unpack_bf16x2(p[part][i], ha, hb);
      a -= ha;
      b -= hb;
    }
  }
}

// O[16 x D] += P V over the 16 keys at rows r0.. of a shared V tile ([keys][D] bf16, chunks
// swizzled by swizzle_offset<D / 8>): P as NP bf16 A fragments (prob_fragments), V through
// transposed ldmatrix; o[j] is the C fragment of output columns 8 j.. (mma.m16n8k16).
// kFresh sums each 8-column slice's products in a zeroed accumulator and adds it to o with
// a CUDA-core f32 add: the tensor cores' f32 accumulation is not round-to-nearest, and over
// thousands of keys in one accumulator its error outgrows the f32 partials' tolerance.
template <int D, int NP, bool kFresh>
__device__ __forceinline__ void pv_slice_mma(float (&o)[D / 8][4], const uint32_t (&p)[NP][4],
                                             const __nv_bfloat16* sv, int r0, int lane) {
#pragma unroll
  for (int dp = 0; dp < D / 16; ++dp) {
    // matrices: (keys 0-7, d lo), (keys 8-15, d lo), (keys 0-7, d hi), (keys 8-15, d hi)
    const int r = r0 + (lane & 7) + (((lane >> 3) & 1) << 3);
    uint32_t vb[4];
    ldmatrix_x4_trans(vb, sv + swizzle_offset<D / 8>(r, 2 * dp + (lane >> 4)));
    float c[2][4] = {};
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float (&acc)[4] = kFresh ? c[h] : o[2 * dp + h];
#pragma unroll
      for (int part = 0; part < NP; ++part)
        mma_bf16_16816(acc, p[part], vb[2 * h], vb[2 * h + 1]);
      if (kFresh) {
#pragma unroll
        for (int e = 0; e < 4; ++e) o[2 * dp + h][e] += c[h][e];
      }
    }
  }
}

// A warp's (o, m, l) after its keys into shared memory for the block's merge of the warps:
// its m16 tile's rows g and g + 8 below `rows`, o at so[(warp * 16 + row) * P + 8 j + 2c + e]
// (one 8-byte store a pair), m and l (l summed over the quad first: each lane saw its own key
// columns) at sm / sl [warp * 16 + row]. P = D leaves the 8 rows of a store in one bank
// group (8-way conflicts at G = 8); kMergePitch<D> = D + 8 spreads rows g 0..3 over the 32
// banks, so a warp's store is two wavefronts.
template <int D>
constexpr int kMergePitch = D + 8;
template <int D, int P>
__device__ __forceinline__ void stash_mma_partials(const float (&o)[D / 8][4],
                                                    const float (&m_run)[2],
                                                    const float (&l_run)[2], int rows,
                                                    float* so, float* sm, float* sl) {
  static_assert(P % 2 == 0, "8-byte stores");
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, c = lane & 3;
#pragma unroll
  for (int hh = 0; hh < 2; ++hh) {
    float l = l_run[hh];
    l += __shfl_xor_sync(0xffffffffu, l, 1);
    l += __shfl_xor_sync(0xffffffffu, l, 2);
    const int row = g + 8 * hh;
    if (row >= rows) continue;
    float* dst = so + (warp * 16 + row) * P + 2 * c;
#pragma unroll
    for (int j = 0; j < D / 8; ++j)
      *reinterpret_cast<float2*>(dst + j * 8) = make_float2(o[j][2 * hh], o[j][2 * hh + 1]);
    if (c == 0) {
      sm[warp * 16 + row] = m_run[hh];
      sl[warp * 16 + row] = l;
    }
  }
}

}  // namespace atlas
