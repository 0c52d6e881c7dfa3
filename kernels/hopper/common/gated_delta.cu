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
// gated_delta_chunk_bf16 (prefill): CUDA cores (not yet tensor cores). The block walks its
// sequence's tokens in chunks of kChunk with its [dk, kDvTile] state tile in shared memory.
// Per chunk (gamma = cumulative sum of g inside the chunk, e = exp(gamma)):
//   A[i][j]  = beta_i (k_i . k_j) exp(gamma_i - gamma_j)   (j < i)
//   QKd[i][j] = (q_i . k_j) exp(gamma_i - gamma_j)          (j <= i)
//   R_i = beta_i (v_i - e_i k_i^T S),  V'_i = R_i - sum_{j<i} A[i][j] V'_j   (forward subst.)
//   o_i = e_i q_i^T S + sum_{j<=i} QKd[i][j] V'_j
//   S  <- e_last S + sum_i k_i exp(gamma_last - gamma_i) V'_i^T
// which is the token-by-token recurrence regrouped (the WY/UT form). Shared arrays are padded
// (rows of dk + 1 and kDvTile + 1 floats) so the column walks do not hit one bank.
#include "atlas_common.cuh"
#include "gated_delta_gate.cuh"

namespace {

constexpr int kThreads = 128;  // ops/linear_attention.py DELTA_THREADS
constexpr int kWarps = kThreads / 32;
constexpr int kDvTile = 32;    // ops/linear_attention.py DELTA_DV_TILE
constexpr int kChunk = 64;     // ops/linear_attention.py CHUNK
constexpr int kMaxDk = 256;    // ops/linear_attention.py DELTA_MAX_DK
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

extern "C" __global__ void __launch_bounds__(kThreads)
gated_delta_chunk_bf16(const __nv_bfloat16* __restrict__ qkv, uint32_t qkv_pitch,
                       const __nv_bfloat16* __restrict__ ba, uint32_t ba_pitch,
                       const __nv_bfloat16* __restrict__ a_log,
                       const __nv_bfloat16* __restrict__ dt_bias, float* __restrict__ state,
                       const int32_t* __restrict__ state_slots, const int32_t* __restrict__ cu_q,
                       const int32_t* __restrict__ kv_lens, __nv_bfloat16* __restrict__ out,
                       uint32_t num_seqs, uint32_t hk, uint32_t hv, uint32_t dk, uint32_t dv) {
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

  for (int c0 = 0; c0 < q_len; c0 += kChunk) {
    const int n = min(kChunk, q_len - c0);
    // 1. this chunk's q and k rows (zero past n) and gate terms
    for (int idx = tid; idx < kChunk * d.dk; idx += kThreads) {
      const int r = idx / d.dk, i = idx % d.dk;
      float qv = 0.f, kv = 0.f;
      if (r < n) {
        const __nv_bfloat16* qrow = qkv + q_offset(seq_start + c0 + r, qkv_pitch, kh, d.dk);
        qv = atlas::bf16_to_f32(qrow[i]);
        kv = atlas::bf16_to_f32(qrow[static_cast<size_t>(d.hk) * d.dk + i]);
      }
      Qs[r * ldk + i] = qv;
      Ks[r * ldk + i] = kv;
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
    if (tid == 0) {
      float acc = 0.f;
      for (int r = 0; r < n; ++r) {
        acc += gam[r];
        gam[r] = acc;
      }
    }
    __syncthreads();
    if (tid < kChunk) {
      const float last = gam[n - 1];
      eg[tid] = tid < n ? expf(gam[tid]) : 0.f;
      kdec[tid] = tid < n ? expf(last - gam[tid]) : 0.f;
    }
    // 3. A (strictly lower, with beta and decay) and QK * decay (lower with the diagonal)
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
    __syncthreads();
    // 4. R = beta (v - e k^T S) and the inter-chunk output e q^T S
    for (int idx = tid; idx < kChunk * kDvTile; idx += kThreads) {
      const int r = idx / kDvTile, c = idx % kDvTile;
      float rv = 0.f, ov = 0.f;
      if (r < n) {
        float ks_ = 0.f, qs_ = 0.f;
        for (int e = 0; e < d.dk; ++e) {
          const float se = S[e * kDvTile + c];
          ks_ = fmaf(Ks[r * ldk + e], se, ks_);
          qs_ = fmaf(Qs[r * ldk + e], se, qs_);
        }
        const float v = atlas::bf16_to_f32(
            qkv[static_cast<size_t>(seq_start + c0 + r) * qkv_pitch +
                2 * static_cast<size_t>(d.hk) * d.dk + static_cast<size_t>(h) * d.dv + col0 + c]);
        rv = beta[r] * (v - eg[r] * ks_);
        ov = eg[r] * qs_;
      }
      Vn[r * ldv + c] = rv;
      Ob[r * ldv + c] = ov;
    }
    __syncthreads();
    // 5. forward substitution (I + A) V' = R, a quad of lanes per column
    {
      const int c = tid >> 2, part = tid & 3;
      for (int i = 1; i < n; ++i) {
        float acc = 0.f;
        for (int j = part; j < i; j += 4) acc = fmaf(A[i * ldc + j], Vn[j * ldv + c], acc);
        acc += __shfl_xor_sync(0xffffffffu, acc, 1);
        acc += __shfl_xor_sync(0xffffffffu, acc, 2);
        if (part == 0) Vn[i * ldv + c] -= acc;
        __syncwarp();
      }
    }
    __syncthreads();
    // 6. outputs; 7. the state update (disjoint writes: out in global, S in shared)
    for (int idx = tid; idx < n * kDvTile; idx += kThreads) {
      const int r = idx / kDvTile, c = idx % kDvTile;
      float o = Ob[r * ldv + c];
      for (int j = 0; j <= r; ++j) o = fmaf(QK[r * ldc + j], Vn[j * ldv + c], o);
      out[static_cast<size_t>(seq_start + c0 + r) * d.hv * d.dv + static_cast<size_t>(h) * d.dv +
          col0 + c] = atlas::f32_to_bf16(o);
    }
    const float e_last = eg[n - 1];
    for (int idx = tid; idx < d.dk * kDvTile; idx += kThreads) {
      const int e = idx / kDvTile, c = idx % kDvTile;
      float acc = 0.f;
      for (int r = 0; r < n; ++r) acc = fmaf(Ks[r * ldk + e] * kdec[r], Vn[r * ldv + c], acc);
      S[idx] = fmaf(e_last, S[idx], acc);
    }
    __syncthreads();  // the next chunk overwrites Qs, Ks, A, QK, Vn, Ob, gam
  }
  for (int idx = tid; idx < d.dk * kDvTile; idx += kThreads) {
    const int i = idx / kDvTile, c = idx % kDvTile;
    sg[static_cast<size_t>(i) * d.dv + c] = S[idx];
  }
}
