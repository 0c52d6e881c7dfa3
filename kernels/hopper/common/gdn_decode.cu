// A Gated-DeltaNet layer's decode step between its two projections, in one launch: causal
// conv1d update + SiLU, L2 norm of q and k, the gated delta rule's recurrent step and the
// gated RMSNorm. It computes exactly what conv1d.cu, gated_delta.cu (step form) and
// gated_rmsnorm.cu compute in turn (same f32 operations, same bf16 roundings: the conv
// output, the rule's output and the norm's two), without their intermediate buffers and with
// the state read once and written once (reference/gdn_decode.py is the spec).
//
// Inputs per sequence b (one token each, row t = cu_q[b], at position kv_lens[b] - 1): the
// fused input projection row proj[t] = [q (hk*dk) | k (hk*dk) | v (hv*dv) | z (hv*dv) |
// b (hv) | a (hv)], proj_pitch apart; conv_w bf16 [conv_dim, kernel] (conv_dim = 2*hk*dk +
// hv*dv); the ring conv state bf16 [slots, kernel, conv_dim] (conv1d.cu's layout) and the
// delta-rule state f32 [slots, hv, dk, dv], both at state_slots[b]; A_log, dt_bias bf16 [hv];
// the norm weight bf16 [dv]. out bf16 [tokens, hv * dv] is the gated norm's output, the
// input of the output projection. A sequence at position 0 reads no state.
//
// Launch (ops/linear_attention.py gdn_decode): grid (hv, num_seqs), one block per (value
// head, sequence) of (dk / kRows) * (dv / kCols) threads rounded up to whole warps: thread
// tid = rg * (dv / 4) + cg owns the state columns 4cg..4cg+3 of rows rg, rg + R, ...
// (R = dk / kRows row groups), kRows float4s that stay in registers between the read and the
// write (threads past R * dv / 4 own none: they only convolve and reduce). A warp reads
// whole state rows (512 bytes at dv = 128).
// The block convolves its 2*dk + dv channels (q and k of its key head, v of its head); the
// key channels are shared by the hv / hk value heads of a group, so only the group's first
// head writes them into the ring. That is race-free because a decode step writes the ring
// row of its own position, which no reader of this step reads (it reads the kernel - 1
// positions before). Dynamic shared memory: ops/linear_attention.py gdn_decode_smem_bytes.
#include "atlas_common.cuh"
#include "gated_delta_gate.cuh"

namespace {

constexpr int kRows = 16;        // ops/linear_attention.py GDN_DECODE_ROWS
constexpr int kCols = 4;         // one float4 of state columns per thread
constexpr int kMaxThreads = 256;  // ops/linear_attention.py GDN_DECODE_MAX_THREADS
// Two blocks an SM on Hopper (128 registers: the state tile fits without spills); sm_121's
// compiler needs more for the same code, so it keeps one block and no spills.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 1200
constexpr int kMinBlocks = 1;
#else
constexpr int kMinBlocks = 2;
#endif

__device__ __forceinline__ int align4(int n) { return (n + 3) & ~3; }

// Conv channel (column of the projection row) of block channel c: q, k of key head kh, then
// v of value head h.
__device__ __forceinline__ int conv_channel(int c, int kh, int h, int hk, int dk, int dv) {
  if (c < dk) return kh * dk + c;
  if (c < 2 * dk) return hk * dk + kh * dk + (c - dk);
  return 2 * hk * dk + h * dv + (c - 2 * dk);
}

__device__ __forceinline__ float4 fma4(float a, float4 x, float4 acc) {
  return make_float4(fmaf(a, x.x, acc.x), fmaf(a, x.y, acc.y), fmaf(a, x.z, acc.z),
                     fmaf(a, x.w, acc.w));
}

__device__ __forceinline__ float4 add4(float4 a, float4 b) {
  return make_float4(a.x + b.x, a.y + b.y, a.z + b.z, a.w + b.w);
}

__device__ __forceinline__ float silu_gate(float normed, float z) {
  return normed * (z / (1.f + expf(-z)));
}

}  // namespace

extern "C" __global__ void __launch_bounds__(kMaxThreads, kMinBlocks)
gated_deltanet_decode_bf16(const __nv_bfloat16* __restrict__ proj, uint32_t proj_pitch,
                           const __nv_bfloat16* __restrict__ conv_w,
                           __nv_bfloat16* __restrict__ conv_state,
                           const __nv_bfloat16* __restrict__ a_log,
                           const __nv_bfloat16* __restrict__ dt_bias,
                           const __nv_bfloat16* __restrict__ norm_w, float* __restrict__ state,
                           const int32_t* __restrict__ state_slots,
                           const int32_t* __restrict__ cu_q, const int32_t* __restrict__ kv_lens,
                           __nv_bfloat16* __restrict__ out, uint32_t num_seqs, uint32_t hk,
                           uint32_t hv, uint32_t dk, uint32_t dv, uint32_t kernel, float eps) {
  extern __shared__ float smem[];
  const int HK = static_cast<int>(hk), HV = static_cast<int>(hv), DK = static_cast<int>(dk),
            DV = static_cast<int>(dv), K = static_cast<int>(kernel);
  const int ch = 2 * DK + DV, C = DV / kCols, R = DK / kRows;
  const int conv_dim = 2 * HK * DK + HV * DV;
  float* wsm = smem;                  // [ch][K] conv weights
  float* xs = wsm + align4(ch * K);   // [ch] conv outputs q | k | v
  float* red = xs + align4(ch);       // [R][DV] partial sums of the row groups
  float* scratch = red + R * DV;      // [32] block_sum
  const int h = blockIdx.x, b = blockIdx.y, tid = threadIdx.x, nthreads = blockDim.x;
  const int kh = h / (HV / HK), cg = tid % C, rg = tid / C;
  const bool owns_state = rg < R;  // the padding threads of the last warp do not

  // Weights (no kernel writes them) before the wait: conv taps, gate and norm constants.
  for (int i = tid; i < ch * K; i += nthreads)
    wsm[i] = atlas::bf16_to_f32(conv_w[static_cast<size_t>(conv_channel(i / K, kh, h, HK, DK, DV)) * K + i % K]);
  const float a_log_h = atlas::bf16_to_f32(a_log[h]), dt_bias_h = atlas::bf16_to_f32(dt_bias[h]);
  float wn[kCols];
#pragma unroll
  for (int c = 0; c < kCols; ++c) wn[c] = atlas::bf16_to_f32(norm_w[cg * kCols + c]);
  atlas::pdl_enter();  // the projection, the step inputs and both states are earlier work
  if (b >= static_cast<int>(num_seqs)) return;  // block-uniform
  const int t = cu_q[b], pos = kv_lens[b] - 1, slot = state_slots[b];
  const bool fresh = pos == 0;

  // 1. issue the state tile's loads first: they are in flight while the conv runs
  float* sg = state + (static_cast<size_t>(slot) * HV + h) * DK * DV + cg * kCols;
  float4 s[kRows];
#pragma unroll
  for (int j = 0; j < kRows; ++j)
    s[j] = fresh || !owns_state
               ? make_float4(0.f, 0.f, 0.f, 0.f)
               : *reinterpret_cast<const float4*>(sg + static_cast<size_t>(rg + R * j) * DV);

  // 2. conv1d + SiLU of the block's channels (taps oldest first, as conv1d.cu sums them)
  const __nv_bfloat16* row = proj + static_cast<size_t>(t) * proj_pitch;
  __nv_bfloat16* ring = conv_state + static_cast<size_t>(slot) * K * conv_dim;
  const bool writes_key_channels = h % (HV / HK) == 0;
  for (int c = tid; c < ch; c += nthreads) {
    const int gc = conv_channel(c, kh, h, HK, DK, DV);
    const __nv_bfloat16 x_new = row[gc];
    float acc = 0.f;
    for (int j = 0; j < K - 1; ++j) {
      const int p = pos - (K - 1) + j;
      if (p >= 0)
        acc = fmaf(wsm[c * K + j], atlas::bf16_to_f32(ring[static_cast<size_t>(p % K) * conv_dim + gc]), acc);
    }
    acc = fmaf(wsm[c * K + K - 1], atlas::bf16_to_f32(x_new), acc);
    const float y = atlas::round_bf16(acc);
    xs[c] = atlas::round_bf16(y / (1.f + expf(-y)));
    if (c >= 2 * DK || writes_key_channels) ring[static_cast<size_t>(pos % K) * conv_dim + gc] = x_new;
  }
  __syncthreads();  // xs complete

  // 3. L2 norms of q and k, the gate terms
  float sq = 0.f, sk = 0.f;
  for (int i = tid; i < DK; i += nthreads) {
    sq = fmaf(xs[i], xs[i], sq);
    sk = fmaf(xs[DK + i], xs[DK + i], sk);
  }
  const float q_scale = rsqrtf(atlas::block_sum(sq, scratch) + atlas::kDeltaL2Eps) *
                        rsqrtf(static_cast<float>(DK));
  const float k_scale = rsqrtf(atlas::block_sum(sk, scratch) + atlas::kDeltaL2Eps);
  const atlas::GateTerms gt = atlas::gate_terms(row + conv_dim + HV * DV, 0, 0, h, HV, a_log_h,
                                                dt_bias_h);
  const float decay = expf(gt.decay_log);
  const float* qn = xs;
  const float* kn = xs + DK;

  // 4. k^T S over the columns, reduced across the row groups
  float4* red4 = reinterpret_cast<float4*>(red);
  if (owns_state) {
    float4 part = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
    for (int j = 0; j < kRows; ++j) part = fma4(kn[rg + R * j], s[j], part);
    red4[rg * C + cg] = part;
  }
  __syncthreads();
  float4 kv_mem = make_float4(0.f, 0.f, 0.f, 0.f);
  for (int r = 0; r < R; ++r) kv_mem = add4(kv_mem, red4[r * C + cg]);
  const float kv_scale = decay * k_scale;
  const float* v = xs + 2 * DK + cg * kCols;
  const float4 delta = make_float4(gt.beta * (v[0] - kv_mem.x * kv_scale),
                                   gt.beta * (v[1] - kv_mem.y * kv_scale),
                                   gt.beta * (v[2] - kv_mem.z * kv_scale),
                                   gt.beta * (v[3] - kv_mem.w * kv_scale));

  // 5. S = decay S + k delta^T, written once; q^T S of the new state
  float4 o = make_float4(0.f, 0.f, 0.f, 0.f);
  if (owns_state) {
#pragma unroll
    for (int j = 0; j < kRows; ++j) {
      const float kk = kn[rg + R * j] * k_scale;
      float4 nv;
      nv.x = fmaf(kk, delta.x, decay * s[j].x);
      nv.y = fmaf(kk, delta.y, decay * s[j].y);
      nv.z = fmaf(kk, delta.z, decay * s[j].z);
      nv.w = fmaf(kk, delta.w, decay * s[j].w);
      *reinterpret_cast<float4*>(sg + static_cast<size_t>(rg + R * j) * DV) = nv;
      o = fma4(qn[rg + R * j], nv, o);
    }
  }
  __syncthreads();  // every thread has read red's k^T S partials
  if (owns_state) red4[rg * C + cg] = o;
  __syncthreads();

  // 6. the rule's output (bf16) and the gated RMSNorm over the head's dv columns
  float ob[kCols] = {0.f, 0.f, 0.f, 0.f};
  float ss = 0.f;
  if (rg == 0) {
    float4 total = make_float4(0.f, 0.f, 0.f, 0.f);
    for (int r = 0; r < R; ++r) total = add4(total, red4[r * C + cg]);
    ob[0] = atlas::round_bf16(total.x * q_scale);
    ob[1] = atlas::round_bf16(total.y * q_scale);
    ob[2] = atlas::round_bf16(total.z * q_scale);
    ob[3] = atlas::round_bf16(total.w * q_scale);
#pragma unroll
    for (int c = 0; c < kCols; ++c) ss = fmaf(ob[c], ob[c], ss);
  }
  const float inv_rms = rsqrtf(atlas::block_sum(ss, scratch) / static_cast<float>(DV) + eps);
  if (rg == 0) {
    const __nv_bfloat16* z = row + conv_dim + h * DV + cg * kCols;
    __nv_bfloat16* o_row = out + static_cast<size_t>(t) * HV * DV + h * DV + cg * kCols;
#pragma unroll
    for (int c = 0; c < kCols; ++c) {
      const float normed = atlas::round_bf16(wn[c] * atlas::round_bf16(ob[c] * inv_rms));
      o_row[c] = atlas::f32_to_bf16(silu_gate(normed, atlas::bf16_to_f32(z[c])));
    }
  }
}
