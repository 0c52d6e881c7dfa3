// The gated delta rule of Gated-DeltaNet (Qwen3.5 / Qwen3-Next linear attention), per value
// head h of a sequence with fp32 state S [dk, dv] (reference/gated_delta.py is the spec):
//   q, k <- L2-normalized in f32 (eps 1e-6), q *= dk^-0.5; key head h / (hv / hk)
//   beta = bf16(sigmoid(b)), g = -exp(A_log) * softplus(a + dt_bias)
//   S = exp(g) S;  S += k (beta (v - k^T S))^T;  o = q^T S           (token by token)
// Inputs: the conv output rows [q (hk*dk) | k (hk*dk) | v (hv*dv)] qkv_pitch apart, b and a in
// `ba` rows (b at +h, a at +hv) ba_pitch apart, A_log / dt_bias bf16 [hv]; the state pool f32
// [slots, hv, dk, dv] indexed by state_slots[b]; a sequence whose step starts at position 0
// (kv_lens[b] == its q_len from cu_q) starts from zero and never reads its slot. out bf16
// [tokens, hv * dv]. Value columns are independent in this recurrence, so a block owns
// kDvTile of them: grid (dv / kDvTile, hv, num_seqs), kThreads threads (ops/linear_attention.py).
//
// gated_delta_step_bf16 (decode, one token per sequence): warp w takes key rows w, w + 4, ...
// of its lane's column; k^T S and q^T S are reduced across the warps in shared memory. The
// state tile is read twice (the second read hits L1) and written once.
//
// gated_delta_chunk_bf16 (prefill, CUDA cores) and gated_delta_chunk_tc_bf16 (the same with
// its four products on tensor cores): the block walks its sequence's tokens in chunks of
// kChunk with its [dk, kDvTile] state tile in shared memory.
// Per chunk (gamma = cumulative sum of g inside the chunk, e = exp(gamma)):
//   A[i][j]  = beta_i (k_i . k_j) exp(gamma_i - gamma_j)   (j < i)
//   QKd[i][j] = (q_i . k_j) exp(gamma_i - gamma_j)          (j <= i)
//   R_i = beta_i (v_i - e_i k_i^T S),  V'_i = R_i - sum_{j<i} A[i][j] V'_j   (forward subst.)
//   o_i = e_i q_i^T S + sum_{j<=i} QKd[i][j] V'_j
//   S  <- e_last S + sum_i k_i exp(gamma_last - gamma_i) V'_i^T
// which is the token-by-token recurrence regrouped (the WY/UT form). Shared arrays are padded
// (rows of dk + 1 and kDvTile + 1 floats) so the column walks do not hit one bank.
// The tensor-core form computes K K^T and Q K^T (step 3), K S and Q S (step 4), QK V' (step
// 6) and (K * decay)^T V' (step 7) with mma.m16n8k16 on f32 operands split into bf16 hi + lo
// parts, d += hi*hi + hi*lo + lo*hi (the lo*lo term is below f32 rounding): products to ~2^-16
// relative, f32 accumulation, so it stays within the CUDA-core form's tolerances over
// thousands of tokens. Warp w owns 16-row m-tiles: rows 16w.. of the chunk in steps 3, 4 and
// 6 (all 64 columns of A and QK, all kDvTile of KS, QS and the outputs), key rows
// 16(w + 4i).. in step 7. It needs dk a multiple of 16; the forward substitution stays on
// CUDA cores.
#include "atlas_common.cuh"
#include "bf16_vec.cuh"
#include "gated_delta_gate.cuh"
#include "mma_util.cuh"

namespace {

constexpr int kThreads = 128;  // ops/linear_attention.py DELTA_THREADS
constexpr int kWarps = kThreads / 32;
constexpr int kDvTile = 32;    // ops/linear_attention.py DELTA_DV_TILE
constexpr int kChunk = 64;     // ops/linear_attention.py CHUNK
constexpr int kMaxDk = 256;    // ops/linear_attention.py DELTA_MAX_DK
constexpr int kLoadBatch = 8;  // 16-byte q and k loads a thread keeps in flight per chunk
static_assert(kChunk == 64, "the chunk's decay scan gives each lane of a warp two entries");
constexpr float kL2Eps = atlas::kDeltaL2Eps;
using atlas::GateTerms;
using atlas::gate_terms;

struct Dims {
  int hk, hv, dk, dv;
};

// Element offset of q (k: + hk * dk) of key head kh in a conv-output row.
__device__ __forceinline__ size_t q_offset(int t, uint32_t pitch, int kh, int dk) {
  return static_cast<size_t>(t) * pitch + static_cast<size_t>(kh) * dk;
}

// ---- f32 products on bf16 tensor cores (hi + lo split) ----------------------------------

// Two f32 values as packed bf16 hi parts and the packed bf16 rounding of what hi misses.
__device__ __forceinline__ void split2(float x0, float x1, uint32_t& hi, uint32_t& lo) {
  const __nv_bfloat16 h0 = atlas::f32_to_bf16(x0), h1 = atlas::f32_to_bf16(x1);
  const __nv_bfloat16 l0 = atlas::f32_to_bf16(x0 - atlas::bf16_to_f32(h0));
  const __nv_bfloat16 l1 = atlas::f32_to_bf16(x1 - atlas::bf16_to_f32(h1));
  hi = static_cast<uint32_t>(__bfloat16_as_ushort(h0)) |
       (static_cast<uint32_t>(__bfloat16_as_ushort(h1)) << 16);
  lo = static_cast<uint32_t>(__bfloat16_as_ushort(l0)) |
       (static_cast<uint32_t>(__bfloat16_as_ushort(l1)) << 16);
}

// An f32 operand in shared memory, element (row, col) at base[row * rs + col * cs] times
// scale[col] (scale may be null): the split m16n8k16 fragments of its 16x16 A tile at
// (r0, k0) (a_hi/a_lo) or of its 16x8 B tile at (k0, n0) as B[k][n] (b_hi/b_lo); the
// layouts are mma_util.cuh's (g = lane / 4, c = lane % 4).
struct F32Operand {
  const float* base;
  int rs, cs;
  const float* scale;

  __device__ __forceinline__ float at(int row, int col) const {
    const float v = base[row * rs + col * cs];
    return scale ? v * scale[col] : v;
  }

  __device__ __forceinline__ void a_frag(int r0, int k0, uint32_t (&hi)[4],
                                         uint32_t (&lo)[4]) const {
    const int g = (threadIdx.x & 31) >> 2, c2 = 2 * (threadIdx.x & 3);
#pragma unroll
    for (int i = 0; i < 4; ++i) {  // a0 [g][2c], a1 [g+8][2c], a2 [g][2c+8], a3 [g+8][2c+8]
      const int r = r0 + g + 8 * (i & 1), k = k0 + c2 + 8 * (i >> 1);
      split2(at(r, k), at(r, k + 1), hi[i], lo[i]);
    }
  }

  // B[k][n] = this operand's element (n, k): the B tile of the product X Y^T with Y = this.
  __device__ __forceinline__ void b_frag_t(int k0, int n0, uint32_t (&hi)[2],
                                           uint32_t (&lo)[2]) const {
    const int g = (threadIdx.x & 31) >> 2, c2 = 2 * (threadIdx.x & 3);
#pragma unroll
    for (int i = 0; i < 2; ++i) {  // b0 [k=2c..2c+1][n=g], b1 [k=2c+8..][n=g]
      const int k = k0 + c2 + 8 * i;
      split2(at(n0 + g, k), at(n0 + g, k + 1), hi[i], lo[i]);
    }
  }
};

// d += A B with A and B split: hi*hi + hi*lo + lo*hi.
__device__ __forceinline__ void mma_split(float (&d)[4], const uint32_t (&a_hi)[4],
                                          const uint32_t (&a_lo)[4], const uint32_t (&b_hi)[2],
                                          const uint32_t (&b_lo)[2]) {
  atlas::mma_bf16_16816(d, a_lo, b_hi[0], b_hi[1]);
  atlas::mma_bf16_16816(d, a_hi, b_lo[0], b_lo[1]);
  atlas::mma_bf16_16816(d, a_hi, b_hi[0], b_hi[1]);
}

// Element (row, col) of accumulator register i of a warp's 16x8 tile at (r0, n0).
__device__ __forceinline__ int acc_row(int r0, int i) {
  return r0 + ((threadIdx.x & 31) >> 2) + 8 * (i >> 1);
}
__device__ __forceinline__ int acc_col(int n0, int i) {
  return n0 + 2 * (threadIdx.x & 3) + (i & 1);
}

}  // namespace

extern "C" __global__ void __launch_bounds__(kThreads)
gated_delta_step_bf16(const __nv_bfloat16* __restrict__ qkv, uint32_t qkv_pitch,
                      const __nv_bfloat16* __restrict__ ba, uint32_t ba_pitch,
                      const __nv_bfloat16* __restrict__ a_log,
                      const __nv_bfloat16* __restrict__ dt_bias, float* __restrict__ state,
                      const int32_t* __restrict__ state_slots, const int32_t* __restrict__ cu_q,
                      const int32_t* __restrict__ kv_lens, __nv_bfloat16* __restrict__ out,
                      uint32_t num_seqs, uint32_t hk, uint32_t hv, uint32_t dk, uint32_t dv) {
  __shared__ float qs[kMaxDk], ks[kMaxDk];
  __shared__ float red[2][kWarps][kDvTile];
  __shared__ float scratch[kWarps];
  const Dims d{static_cast<int>(hk), static_cast<int>(hv), static_cast<int>(dk),
               static_cast<int>(dv)};
  const int h = blockIdx.y, b = blockIdx.z, tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int col = blockIdx.x * kDvTile + lane;
  const float a_log_h = atlas::bf16_to_f32(a_log[h]), dt_bias_h = atlas::bf16_to_f32(dt_bias[h]);
  atlas::pdl_enter();  // the conv output, projections, step inputs and state are earlier work
  if (b >= static_cast<int>(num_seqs)) return;  // block-uniform
  const int t = cu_q[b];
  const bool fresh = kv_lens[b] == cu_q[b + 1] - t;
  const int kh = h / (d.hv / d.hk);
  const __nv_bfloat16* qrow = qkv + q_offset(t, qkv_pitch, kh, d.dk);
  const __nv_bfloat16* krow = qrow + static_cast<size_t>(d.hk) * d.dk;
  float sq = 0.f, sk = 0.f;
  for (int i = tid; i < d.dk; i += kThreads) {
    const float qv = atlas::bf16_to_f32(qrow[i]), kv = atlas::bf16_to_f32(krow[i]);
    qs[i] = qv;
    ks[i] = kv;
    sq = fmaf(qv, qv, sq);
    sk = fmaf(kv, kv, sk);
  }
  const float q_scale = rsqrtf(atlas::block_sum(sq, scratch) + kL2Eps) * rsqrtf(static_cast<float>(d.dk));
  const float k_scale = rsqrtf(atlas::block_sum(sk, scratch) + kL2Eps);
  const GateTerms gt = gate_terms(ba, ba_pitch, t, h, d.hv, a_log_h, dt_bias_h);
  const float decay = expf(gt.decay_log);
  __syncthreads();  // qs / ks complete

  float* s = state + (static_cast<size_t>(state_slots[b]) * d.hv + h) * d.dk * d.dv + col;
  float part = 0.f;
  if (!fresh)
    for (int i = warp; i < d.dk; i += kWarps) part = fmaf(s[static_cast<size_t>(i) * d.dv], ks[i], part);
  red[0][warp][lane] = part;
  __syncthreads();
  float kv_mem = 0.f;
#pragma unroll
  for (int w = 0; w < kWarps; ++w) kv_mem += red[0][w][lane];
  kv_mem *= decay * k_scale;
  const float v = atlas::bf16_to_f32(qkv[static_cast<size_t>(t) * qkv_pitch +
                                         2 * static_cast<size_t>(d.hk) * d.dk +
                                         static_cast<size_t>(h) * d.dv + col]);
  const float delta = gt.beta * (v - kv_mem);
  float o = 0.f;
  for (int i = warp; i < d.dk; i += kWarps) {
    float* si = s + static_cast<size_t>(i) * d.dv;
    const float old = fresh ? 0.f : *si;
    const float nv = fmaf(ks[i] * k_scale, delta, decay * old);
    *si = nv;
    o = fmaf(nv, qs[i], o);
  }
  red[1][warp][lane] = o;
  __syncthreads();
  if (warp == 0) {
    float total = 0.f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) total += red[1][w][lane];
    out[static_cast<size_t>(t) * d.hv * d.dv + static_cast<size_t>(h) * d.dv + col] =
        atlas::f32_to_bf16(total * q_scale);
  }
}

namespace {

static_assert(kChunk == 16 * kWarps, "the tensor-core steps give each warp 16 chunk rows");

// 3 on tensor cores: warp w computes rows 16w.. of K K^T and Q K^T (all kChunk columns),
// then masks and scales them into A and QK.
__device__ __forceinline__ void chunk_products_tc(const float* Qs, const float* Ks, int ldk,
                                                  int dk, const float* gam,
                                                  const float* beta, int n, float* A,
                                                  float* QK, int ldc) {
  const F32Operand Kop{Ks, ldk, 1, nullptr}, Qop{Qs, ldk, 1, nullptr};
  const int r0 = 16 * (threadIdx.x >> 5);
  float kk[kChunk / 8][4] = {}, qk[kChunk / 8][4] = {};
  for (int k0 = 0; k0 < dk; k0 += 16) {
    uint32_t ka_hi[4], ka_lo[4], qa_hi[4], qa_lo[4];
    Kop.a_frag(r0, k0, ka_hi, ka_lo);
    Qop.a_frag(r0, k0, qa_hi, qa_lo);
#pragma unroll
    for (int j = 0; j < kChunk / 8; ++j) {
      uint32_t b_hi[2], b_lo[2];
      Kop.b_frag_t(k0, 8 * j, b_hi, b_lo);
      mma_split(kk[j], ka_hi, ka_lo, b_hi, b_lo);
      mma_split(qk[j], qa_hi, qa_lo, b_hi, b_lo);
    }
  }
#pragma unroll
  for (int j = 0; j < kChunk / 8; ++j)
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int row = acc_row(r0, i), col = acc_col(8 * j, i);
      float a = 0.f, q = 0.f;
      if (col <= row && row < n) {
        const float dec = expf(gam[row] - gam[col]);
        q = qk[j][i] * dec;
        if (col < row) a = beta[row] * kk[j][i] * dec;
      }
      A[row * ldc + col] = a;
      QK[row * ldc + col] = q;
    }
}

// 4's products on tensor cores: warp w computes rows 16w.. of K S and Q S ([kChunk,
// kDvTile]); the caller's epilogue gets (row, column, k.S, q.S) per accumulator element.
template <typename Epilogue>
__device__ __forceinline__ void state_products_tc(const float* Qs, const float* Ks, int ldk,
                                                  int dk, const float* S, Epilogue epilogue) {
  const F32Operand Kop{Ks, ldk, 1, nullptr}, Qop{Qs, ldk, 1, nullptr};
  const F32Operand St{S, 1, kDvTile, nullptr};  // St(c, e) = S[e][c]
  const int r0 = 16 * (threadIdx.x >> 5);
  float ks[kDvTile / 8][4] = {}, qs[kDvTile / 8][4] = {};
  for (int k0 = 0; k0 < dk; k0 += 16) {
    uint32_t ka_hi[4], ka_lo[4], qa_hi[4], qa_lo[4];
    Kop.a_frag(r0, k0, ka_hi, ka_lo);
    Qop.a_frag(r0, k0, qa_hi, qa_lo);
#pragma unroll
    for (int j = 0; j < kDvTile / 8; ++j) {
      uint32_t b_hi[2], b_lo[2];
      St.b_frag_t(k0, 8 * j, b_hi, b_lo);
      mma_split(ks[j], ka_hi, ka_lo, b_hi, b_lo);
      mma_split(qs[j], qa_hi, qa_lo, b_hi, b_lo);
    }
  }
#pragma unroll
  for (int j = 0; j < kDvTile / 8; ++j)
#pragma unroll
    for (int i = 0; i < 4; ++i) epilogue(acc_row(r0, i), acc_col(8 * j, i), ks[j][i], qs[j][i]);
}

// acc += A[r0 .. r0+16)[0 .. kChunk) x VnT[0 .. kChunk)[0 .. kDvTile) on tensor cores (split
// bf16): the one 16-row product both the chunk outputs and the state update take.
__device__ __forceinline__ void rows16_times_vn(const F32Operand& A, int r0, const F32Operand& VnT,
                                                float (&acc)[kDvTile / 8][4]) {
#pragma unroll
  for (int k0 = 0; k0 < kChunk; k0 += 16) {
    uint32_t a_hi[4], a_lo[4];
    A.a_frag(r0, k0, a_hi, a_lo);
#pragma unroll
    for (int j = 0; j < kDvTile / 8; ++j) {
      uint32_t b_hi[2], b_lo[2];
      VnT.b_frag_t(k0, 8 * j, b_hi, b_lo);
      mma_split(acc[j], a_hi, a_lo, b_hi, b_lo);
    }
  }
}

// 6 on tensor cores: warp w computes rows 16w.. of QK V' ([kChunk, kDvTile]; QK is zero
// above its diagonal and V' past row n, so the full product is the causal sum); the caller's
// epilogue gets (row, column, sum) per accumulator element.
template <typename Epilogue>
__device__ __forceinline__ void output_products_tc(const float* QK, int ldc, const float* Vn,
                                                   int ldv, Epilogue epilogue) {
  const F32Operand QKop{QK, ldc, 1, nullptr};
  const F32Operand VnT{Vn, 1, ldv, nullptr};  // VnT(c, r) = V'[r][c]
  const int r0 = 16 * (threadIdx.x >> 5);
  float acc[kDvTile / 8][4] = {};
  rows16_times_vn(QKop, r0, VnT, acc);
#pragma unroll
  for (int j = 0; j < kDvTile / 8; ++j)
#pragma unroll
    for (int i = 0; i < 4; ++i) epilogue(acc_row(r0, i), acc_col(8 * j, i), acc[j][i]);
}

// 7 on tensor cores: S[e][c] = e_last S[e][c] + sum_r K[r][e] kdec[r] V'[r][c], warp w
// taking key rows 16(w + kWarps i)...
__device__ __forceinline__ void state_update_tc(const float* Ks, int ldk, int dk,
                                                const float* kdec, const float* Vn, int ldv,
                                                float e_last, float* S) {
  const F32Operand KdT{Ks, 1, ldk, kdec};  // KdT(e, r) = K[r][e] kdec[r]
  const F32Operand VnT{Vn, 1, ldv, nullptr};  // VnT(c, r) = V'[r][c]
  for (int m0 = 16 * (threadIdx.x >> 5); m0 < dk; m0 += 16 * kWarps) {
    float acc[kDvTile / 8][4] = {};
    rows16_times_vn(KdT, m0, VnT, acc);
#pragma unroll
    for (int j = 0; j < kDvTile / 8; ++j)
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        float& s = S[acc_row(m0, i) * kDvTile + acc_col(8 * j, i)];
        s = fmaf(e_last, s, acc[j][i]);
      }
  }
}

template <bool kTc>
__device__ __forceinline__ void delta_chunk(
    const __nv_bfloat16* __restrict__ qkv, uint32_t qkv_pitch,
    const __nv_bfloat16* __restrict__ ba, uint32_t ba_pitch,
    const __nv_bfloat16* __restrict__ a_log, const __nv_bfloat16* __restrict__ dt_bias,
    float* __restrict__ state, const int32_t* __restrict__ state_slots,
    const int32_t* __restrict__ cu_q, const int32_t* __restrict__ kv_lens,
    __nv_bfloat16* __restrict__ out, uint32_t num_seqs, uint32_t hk, uint32_t hv, uint32_t dk,
    uint32_t dv) {
  extern __shared__ float smem[];  // ops/linear_attention.py delta_chunk_smem_bytes
  const Dims d{static_cast<int>(hk), static_cast<int>(hv), static_cast<int>(dk),
               static_cast<int>(dv)};
  const int ldk = d.dk + 1, ldc = kChunk + 1, ldv = kDvTile + 1;
  float* Qs = smem;                      // [kChunk][ldk]
  float* Ks = Qs + kChunk * ldk;         // [kChunk][ldk]
  float* A = Ks + kChunk * ldk;          // [kChunk][ldc]
  float* QK = A + kChunk * ldc;          // [kChunk][ldc]
  float* S = QK + kChunk * ldc;          // [dk][kDvTile]
  float* Vn = S + d.dk * kDvTile;        // [kChunk][ldv]
  float* Ob = Vn + kChunk * ldv;         // [kChunk][ldv]
  float* gam = Ob + kChunk * ldv;        // [kChunk] cumulative log decay
  float* beta = gam + kChunk;            // [kChunk]
  float* eg = beta + kChunk;             // [kChunk] exp(gam)
  float* kdec = eg + kChunk;             // [kChunk] exp(gam_last - gam)

  const int h = blockIdx.y, b = blockIdx.z, tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int col0 = blockIdx.x * kDvTile;
  const float a_log_h = atlas::bf16_to_f32(a_log[h]), dt_bias_h = atlas::bf16_to_f32(dt_bias[h]);
  atlas::pdl_enter();
  if (b >= static_cast<int>(num_seqs)) return;  // block-uniform
  const int seq_start = cu_q[b], q_len = cu_q[b + 1] - seq_start;
  if (q_len <= 0) return;
  const bool fresh = kv_lens[b] == q_len;
  const int kh = h / (d.hv / d.hk);
  const float q_norm_scale = rsqrtf(static_cast<float>(d.dk));
  float* sg = state + (static_cast<size_t>(state_slots[b]) * d.hv + h) * d.dk * d.dv + col0;
  for (int idx = tid; idx < d.dk * kDvTile; idx += kThreads) {
    const int i = idx / kDvTile, c = idx % kDvTile;
    S[idx] = fresh ? 0.f : sg[static_cast<size_t>(i) * d.dv + c];
  }

  const int vecs = d.dk / 8, chunk_vecs = kChunk * vecs;  // 16-byte pieces of q (or k) rows
  for (int c0 = 0; c0 < q_len; c0 += kChunk) {
    const int n = min(kChunk, q_len - c0);
    // 1. this chunk's q and k rows (zero past n), 8 bf16 a load with kLoadBatch loads of
    //    each in flight per thread before the first store, and the gate terms
    for (int base = 0; base < chunk_vecs; base += kLoadBatch * kThreads) {
      uint4 qv[kLoadBatch], kv[kLoadBatch];
#pragma unroll
      for (int u = 0; u < kLoadBatch; ++u) {
        const int idx = base + u * kThreads + tid, r = idx / vecs;
        qv[u] = kv[u] = make_uint4(0u, 0u, 0u, 0u);
        if (idx < chunk_vecs && r < n) {
          const uint4* qrow = reinterpret_cast<const uint4*>(
              qkv + q_offset(seq_start + c0 + r, qkv_pitch, kh, d.dk));
          qv[u] = qrow[idx % vecs];
          kv[u] = qrow[static_cast<size_t>(d.hk) * vecs + idx % vecs];
        }
      }
#pragma unroll
      for (int u = 0; u < kLoadBatch; ++u) {
        const int idx = base + u * kThreads + tid, r = idx / vecs, i = 8 * (idx % vecs);
        if (idx >= chunk_vecs) break;
        float qf[8], kf[8];
        atlas::unpack_bf16x8(qv[u], qf);
        atlas::unpack_bf16x8(kv[u], kf);
#pragma unroll
        for (int e = 0; e < 8; ++e) {
          Qs[r * ldk + i + e] = qf[e];
          Ks[r * ldk + i + e] = kf[e];
        }
      }
    }
    if (tid < kChunk) {
      GateTerms gt{0.f, 0.f};
      if (tid < n) gt = gate_terms(ba, ba_pitch, seq_start + c0 + tid, h, d.hv, a_log_h,
                                         dt_bias_h);
      beta[tid] = gt.beta;
      gam[tid] = gt.decay_log;
    }
    __syncthreads();
    // 2. L2 norms (a warp per row) and the cumulative decay
    for (int r = warp; r < n; r += kWarps) {
      float sq = 0.f, sk = 0.f;
      for (int i = lane; i < d.dk; i += 32) {
        sq = fmaf(Qs[r * ldk + i], Qs[r * ldk + i], sq);
        sk = fmaf(Ks[r * ldk + i], Ks[r * ldk + i], sk);
      }
      const float qsc = rsqrtf(atlas::warp_sum(sq) + kL2Eps) * q_norm_scale;
      const float ksc = rsqrtf(atlas::warp_sum(sk) + kL2Eps);
      for (int i = lane; i < d.dk; i += 32) {
        Qs[r * ldk + i] *= qsc;
        Ks[r * ldk + i] *= ksc;
      }
    }
    if (warp == 0) {  // inclusive scan of gam: two entries a lane, then across the warp
      const float g0 = gam[2 * lane], pair = g0 + gam[2 * lane + 1];
      float incl = pair;
#pragma unroll
      for (int off = 1; off < 32; off <<= 1) {
        const float t = __shfl_up_sync(0xffffffffu, incl, off);
        if (lane >= off) incl += t;
      }
      gam[2 * lane] = (incl - pair) + g0;
      gam[2 * lane + 1] = incl;
    }
    __syncthreads();
    if (tid < kChunk) {
      const float last = gam[n - 1];
      eg[tid] = tid < n ? expf(gam[tid]) : 0.f;
      kdec[tid] = tid < n ? expf(last - gam[tid]) : 0.f;
    }
    // 3. A (strictly lower, with beta and decay) and QK * decay (lower with the diagonal)
    if constexpr (kTc) {
      chunk_products_tc(Qs, Ks, ldk, d.dk, gam, beta, n, A, QK, ldc);
    } else {
      for (int idx = tid; idx < kChunk * kChunk; idx += kThreads) {
        const int i = idx / kChunk, j = idx % kChunk;
        float a = 0.f, qk = 0.f;
        if (j <= i && i < n) {
          float kk = 0.f, qkd = 0.f;
          for (int e = 0; e < d.dk; ++e) {
            const float kj = Ks[j * ldk + e];
            kk = fmaf(Ks[i * ldk + e], kj, kk);
            qkd = fmaf(Qs[i * ldk + e], kj, qkd);
          }
          const float dec = expf(gam[i] - gam[j]);
          qk = qkd * dec;
          if (j < i) a = beta[i] * kk * dec;
        }
        A[i * ldc + j] = a;
        QK[i * ldc + j] = qk;
      }
    }
    __syncthreads();
    // 4. R = beta (v - e k^T S) and the inter-chunk output e q^T S
    const auto r_and_o = [&](int r, int c, float ks_, float qs_) {
      float rv = 0.f, ov = 0.f;
      if (r < n) {
        const float v = atlas::bf16_to_f32(
            qkv[static_cast<size_t>(seq_start + c0 + r) * qkv_pitch +
                2 * static_cast<size_t>(d.hk) * d.dk + static_cast<size_t>(h) * d.dv + col0 + c]);
        rv = beta[r] * (v - eg[r] * ks_);
        ov = eg[r] * qs_;
      }
      Vn[r * ldv + c] = rv;
      Ob[r * ldv + c] = ov;
    };
    if constexpr (kTc) {
      state_products_tc(Qs, Ks, ldk, d.dk, S, r_and_o);
    } else {
      for (int idx = tid; idx < kChunk * kDvTile; idx += kThreads) {
        const int r = idx / kDvTile, c = idx % kDvTile;
        float ks_ = 0.f, qs_ = 0.f;
        if (r < n)
          for (int e = 0; e < d.dk; ++e) {
            const float se = S[e * kDvTile + c];
            ks_ = fmaf(Ks[r * ldk + e], se, ks_);
            qs_ = fmaf(Qs[r * ldk + e], se, qs_);
          }
        r_and_o(r, c, ks_, qs_);
      }
    }
    __syncthreads();
    // 5. forward substitution (I + A) V' = R, a quad of lanes per column, two rows a step:
    //    rows i and i + 1 sum their terms j < i together, then row i + 1 adds its term of
    //    row i once that is solved (half the serial steps of one row a step)
    {
      const int c = tid >> 2, part = tid & 3;
      for (int i = 1; i < n; i += 2) {
        const bool pair = i + 1 < n;
        const int i1 = pair ? i + 1 : i;
        float acc0 = 0.f, acc1 = 0.f;
        for (int j = part; j < i; j += 4) {
          const float v = Vn[j * ldv + c];
          acc0 = fmaf(A[i * ldc + j], v, acc0);
          acc1 = fmaf(A[i1 * ldc + j], v, acc1);
        }
        acc0 += __shfl_xor_sync(0xffffffffu, acc0, 1);
        acc1 += __shfl_xor_sync(0xffffffffu, acc1, 1);
        acc0 += __shfl_xor_sync(0xffffffffu, acc0, 2);
        acc1 += __shfl_xor_sync(0xffffffffu, acc1, 2);
        if (part == 0) {
          const float vi = Vn[i * ldv + c] - acc0;
          Vn[i * ldv + c] = vi;
          if (pair) Vn[i1 * ldv + c] -= fmaf(A[i1 * ldc + i], vi, acc1);
        }
        __syncwarp();
      }
    }
    __syncthreads();
    // 6. outputs; 7. the state update (disjoint writes: out in global, S in shared)
    const auto store_out = [&](int r, int c, float o) {
      out[static_cast<size_t>(seq_start + c0 + r) * d.hv * d.dv + static_cast<size_t>(h) * d.dv +
          col0 + c] = atlas::f32_to_bf16(o);
    };
    if constexpr (kTc) {
      output_products_tc(QK, ldc, Vn, ldv, [&](int r, int c, float qkv_) {
        if (r < n) store_out(r, c, Ob[r * ldv + c] + qkv_);
      });
    } else {
      for (int idx = tid; idx < n * kDvTile; idx += kThreads) {
        const int r = idx / kDvTile, c = idx % kDvTile;
        float o = Ob[r * ldv + c];
        for (int j = 0; j <= r; ++j) o = fmaf(QK[r * ldc + j], Vn[j * ldv + c], o);
        store_out(r, c, o);
      }
    }
    const float e_last = eg[n - 1];
    if constexpr (kTc) {
      state_update_tc(Ks, ldk, d.dk, kdec, Vn, ldv, e_last, S);
    } else {
      for (int idx = tid; idx < d.dk * kDvTile; idx += kThreads) {
        const int e = idx / kDvTile, c = idx % kDvTile;
        float acc = 0.f;
        for (int r = 0; r < n; ++r) acc = fmaf(Ks[r * ldk + e] * kdec[r], Vn[r * ldv + c], acc);
        S[idx] = fmaf(e_last, S[idx], acc);
      }
    }
    __syncthreads();  // the next chunk overwrites Qs, Ks, A, QK, Vn, Ob, gam
  }
  for (int idx = tid; idx < d.dk * kDvTile; idx += kThreads) {
    const int i = idx / kDvTile, c = idx % kDvTile;
    sg[static_cast<size_t>(i) * d.dv + c] = S[idx];
  }
}

}  // namespace

extern "C" __global__ void __launch_bounds__(kThreads)
gated_delta_chunk_bf16(const __nv_bfloat16* __restrict__ qkv, uint32_t qkv_pitch,
                       const __nv_bfloat16* __restrict__ ba, uint32_t ba_pitch,
                       const __nv_bfloat16* __restrict__ a_log,
                       const __nv_bfloat16* __restrict__ dt_bias, float* __restrict__ state,
                       const int32_t* __restrict__ state_slots, const int32_t* __restrict__ cu_q,
                       const int32_t* __restrict__ kv_lens, __nv_bfloat16* __restrict__ out,
                       uint32_t num_seqs, uint32_t hk, uint32_t hv, uint32_t dk, uint32_t dv) {
  delta_chunk<false>(qkv, qkv_pitch, ba, ba_pitch, a_log, dt_bias, state, state_slots, cu_q,
                     kv_lens, out, num_seqs, hk, hv, dk, dv);
}

// The same on tensor cores (steps 3, 4, 6 and 7; dk a multiple of 16).
extern "C" __global__ void __launch_bounds__(kThreads)
gated_delta_chunk_tc_bf16(const __nv_bfloat16* __restrict__ qkv, uint32_t qkv_pitch,
                          const __nv_bfloat16* __restrict__ ba, uint32_t ba_pitch,
                          const __nv_bfloat16* __restrict__ a_log,
                          const __nv_bfloat16* __restrict__ dt_bias, float* __restrict__ state,
                          const int32_t* __restrict__ state_slots, const int32_t* __restrict__ cu_q,
                          const int32_t* __restrict__ kv_lens, __nv_bfloat16* __restrict__ out,
                          uint32_t num_seqs, uint32_t hk, uint32_t hv, uint32_t dk, uint32_t dv) {
  delta_chunk<true>(qkv, qkv_pitch, ba, ba_pitch, a_log, dt_bias, state, state_slots, cu_q,
                    kv_lens, out, num_seqs, hk, hv, dk, dv);
}
