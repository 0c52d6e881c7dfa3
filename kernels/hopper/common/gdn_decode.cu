// A Gated-DeltaNet layer's decode step between its two projections, in one launch: causal
// conv1d update + SiLU, L2 norm of q and k, the gated delta rule's recurrent step and the
// gated RMSNorm. It computes exactly what conv1d.cu, gated_delta.cu (step form) and
// gated_rmsnorm.cu compute in turn (same f32 operations, same bf16 roundings: the conv
// output, the rule's output and the norm's two), without their intermediate buffers and with
// the state read once and written once (reference/gdn_decode.py is the spec).
//
// Rows: row b of the step (cu_q[b] = its token's row, at position kv_lens[b] - 1, state slot
// state_slots[b]) is one decode token. A verification step (model/runner.py) feeds a
// sequence's K + 1 tokens as consecutive rows with the same state slot at consecutive
// positions: such a run is computed by the block of its first row, token by token, exactly as
// K + 1 decode steps would be (the same code per token, the state carried in registers and
// the conv history shifted through them instead of a round trip through memory), and the
// blocks of its later rows return at once. After token j of row b + j the state (delta-rule
// tile and the ring's kernel rows, those at or above position 0) is written to slot
// state_out[b + j], what an in-place step leaves in its slot: in place
// when state_out[b] == state_slots[b] (plain decode: only a run of one row may do that, see
// the ring below), else out of place, so each prefix of the drafts leaves its own state and
// a rejected draft is undone by choosing the slot, not by recomputing.
// Inputs per row b: the fused input projection row proj[t] = [q (hk*dk) | k (hk*dk) | v (hv*dv) | z (hv*dv) |
// b (hv) | a (hv)], proj_pitch apart; conv_w bf16 [conv_dim, kernel] (conv_dim = 2*hk*dk +
// hv*dv); the ring conv state bf16 [slots, kernel, conv_dim] (conv1d.cu's layout) and the
// delta-rule state f32 [slots, hv, dk, dv], both at state_slots[b]; A_log, dt_bias bf16 [hv];
// the norm weight bf16 [dv]. out bf16 [tokens, hv * dv] is the gated norm's output, the
// input of the output projection. A sequence at position 0 reads no state.
//
// Why a cluster per head: at batch 1 the step is latency-bound (a layer's whole state is
// 2 MiB at Qwen3.5's 32 heads of 128 x 128), so it must be spread over the SMs: one block
// per (head, sequence) gives 32 blocks each streaming 64 KiB through one SM. Value columns
// are independent in the rule, so kSplit blocks share a head, each owning dv / kSplit
// columns (grid (kSplit, hv, num_seqs), cluster (kSplit, 1, 1): 128 blocks at batch 1). Only
// the gated RMSNorm spans the head's columns: each block's sum of squares goes to its
// cluster peers through distributed shared memory (summed in rank order by every block, so
// all agree). Every block convolves the head's q and k channels itself (2 dk of them: cheap
// next to a round trip between blocks) and its own dv / kSplit value channels.
//
// Block: max((dk / kRows) * (dv / kSplit / kCols), ch / 4) threads rounded up to whole
// warps (ch = 2 dk + dv / kSplit channels). Thread tid = rg * C + cg (C column groups of
// kCols) owns the state columns col0 + 4cg..+3 of rows rg, rg + R, ... (R = dk / kRows row
// groups), kRows float4s that stay in registers between the read and the write; threads
// past R * C own none. Thread tid < ch / 4 convolves channels 4 tid..4 tid + 3 (never
// straddling q, k and v: dk and dv / kSplit are multiples of 4), so its taps, history, input
// and ring write are one 8-byte access each, all issued together: the loads of a step are
// a few independent round trips, not a loop of dependent ones (the session-4 kernel's
// scalar conv loop made its 12.8 us at batch 1).
// The key channels are shared by the hv / hk value heads of a group, so only rank 0 of the
// group's first head writes them into the ring. That is race-free because a decode step
// writes the ring row of its own position, which no reader of this step reads (it reads the
// kernel - 1 positions before). A run of several tokens would overwrite rows the others still
// read, so it writes out of place (every ring row, into the out slot).
//
// PDL: before griddepcontrol.wait the block stages its conv taps, and also reads the step
// inputs (cu_q, kv_lens, state_slots, state_out), its state tile and its ring history into
// registers.
// Those are no weights, but the only kernel that may still be running then is the one
// launched just before this (every kernel waits before it lets its dependents start), and
// the model launches this right after the input projection GEMV (model/gated_deltanet.py),
// which writes none of them: the state and the ring were last written by this layer's step
// before, the step inputs by copies ahead of the step. So the state's DRAM round trip
// overlaps the projection's tail; the projection row itself is read after the wait.
// Dynamic shared memory: ops/linear_attention.py gdn_decode_smem_bytes.
#include <cooperative_groups.h>

#include "atlas_common.cuh"
#include "bf16_vec.cuh"
#include "gated_delta_gate.cuh"

namespace coop = cooperative_groups;

namespace {

constexpr int kSplit = 4;         // ops/linear_attention.py GDN_DECODE_SPLIT: blocks per head
constexpr int kRows = 8;          // ops/linear_attention.py GDN_DECODE_ROWS
constexpr int kCols = 4;          // one float4 of state columns per thread
constexpr int kMaxThreads = 256;  // ops/linear_attention.py GDN_DECODE_MAX_THREADS
constexpr int kMaxKernel = 8;     // ops/linear_attention.py CONV_MAX_KERNEL
constexpr int kMaxHist = kMaxKernel - 1;

__device__ __forceinline__ int align4(int n) { return (n + 3) & ~3; }

// A step input read before the PDL wait: a plain global load. The compiler makes loads
// through const __restrict__ pointers ld.global.nc, which ptxas sinks below
// griddepcontrol.wait (atlas_common.cuh, ld_prefetch): the state slot would then arrive
// only after the wait, and the state tile's loads, whose addresses need it, with it.
__device__ __forceinline__ int ld_step_input(const int32_t* p) {
  int v;
  asm volatile("ld.global.s32 %0, [%1];\n" : "=r"(v) : "l"(p));
  return v;
}

// One row's inputs as loaded from the projection (see 1. in the kernel).
struct RowInputs {
  int t, oslot;         // the row's token and the slot its state goes to
  uint2 x, z;           // the block's 4 conv channels, z of its 4 output columns
  __nv_bfloat16 b, a;   // the gate inputs of its value head
};

// Conv channel (column of the projection row) of block channel c: q, k of key head kh, then
// the block's value columns col0.. of value head h.
__device__ __forceinline__ int conv_channel(int c, int kh, int h, int col0, int hk, int dk,
                                            int dv) {
  if (c < dk) return kh * dk + c;
  if (c < 2 * dk) return hk * dk + kh * dk + (c - dk);
  return 2 * hk * dk + h * dv + col0 + (c - 2 * dk);
}

__device__ __forceinline__ void unpack4(uint2 v, float (&f)[4]) {
  atlas::unpack_bf16x2(v.x, f[0], f[1]);
  atlas::unpack_bf16x2(v.y, f[2], f[3]);
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

// Both sums over the block behind one barrier (which also publishes the shared-memory
// writes made before it); `scratch` needs 2 floats per warp and is used once.
__device__ __forceinline__ float2 block_sum2(float a, float b, float* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
  a = atlas::warp_sum(a);
  b = atlas::warp_sum(b);
  if (lane == 0) {
    scratch[2 * warp] = a;
    scratch[2 * warp + 1] = b;
  }
  __syncthreads();
  float2 total = make_float2(0.f, 0.f);
  for (int i = 0; i < nwarps; ++i) {
    total.x += scratch[2 * i];
    total.y += scratch[2 * i + 1];
  }
  return total;
}

}  // namespace

extern "C" __global__ void __cluster_dims__(kSplit, 1, 1) __launch_bounds__(kMaxThreads, 2)
gated_deltanet_decode_bf16(const __nv_bfloat16* __restrict__ proj, uint32_t proj_pitch,
                           const __nv_bfloat16* __restrict__ conv_w,
                           __nv_bfloat16* __restrict__ conv_state,
                           const __nv_bfloat16* __restrict__ a_log,
                           const __nv_bfloat16* __restrict__ dt_bias,
                           const __nv_bfloat16* __restrict__ norm_w, float* __restrict__ state,
                           const int32_t* __restrict__ state_slots,
                           const int32_t* __restrict__ state_out,
                           const int32_t* __restrict__ cu_q, const int32_t* __restrict__ kv_lens,
                           __nv_bfloat16* __restrict__ out, uint32_t num_seqs, uint32_t hk,
                           uint32_t hv, uint32_t dk, uint32_t dv, uint32_t kernel, float eps) {
  extern __shared__ float smem[];
  // the cluster's sums of squares, by rank, double-buffered by token parity: a peer may
  // write token j + 1's before this block has read token j's, never token j + 2's (a
  // cluster barrier lies between)
  __shared__ float norm_parts[2][kSplit];
  const int HK = static_cast<int>(hk), HV = static_cast<int>(hv), DK = static_cast<int>(dk),
            DV = static_cast<int>(dv), K = static_cast<int>(kernel);
  const int dvt = DV / kSplit, ch = 2 * DK + dvt, C = dvt / kCols, R = DK / kRows;
  const int conv_dim = 2 * HK * DK + HV * DV;
  float* xs = smem;                   // [ch] conv outputs q | k | v
  float* red_k = xs + align4(ch);     // [R][dvt] k^T S partials of the row groups
  float* red_o = red_k + R * dvt;     // [R][dvt] q^T S partials
  float* scratch = red_o + R * dvt;   // [2 * 32] block_sum2
  // [ch / 4][2K + 1] words: each convolving thread's K taps (bf16 x4, two words each), rows
  // one word longer than the taps: at 2K words a row (8 at K 4) the 32 lanes' 16-bit tap
  // reads fell in 4 banks (8-way conflicts on 16 loads a thread and token), at 2K + 1 in 32
  uint32_t* wsm = reinterpret_cast<uint32_t*>(scratch + 64);
  const int tap_pitch = 2 * K + 1;
  const int rank = blockIdx.x, h = blockIdx.y, b = blockIdx.z, tid = threadIdx.x;
  const int col0 = rank * dvt;
  const int kh = h / (HV / HK), cg = tid % C, rg = tid / C;
  const bool owns_state = rg < R;          // the padding threads of the last warp do not
  const bool convolves = tid < ch / kCols;  // channels 4 tid .. 4 tid + 3
  // q / k channels are shared by the group's value heads: one block of the group writes them
  const bool writes_ring = convolves && (kCols * tid >= 2 * DK || (rank == 0 && h % (HV / HK) == 0));
  const int c0 = kCols * tid;
  const int gc = convolves ? conv_channel(c0, kh, h, col0, HK, DK, DV) : 0;
  if (b >= static_cast<int>(num_seqs)) return;  // uniform over the cluster (same b)
  const int slot = ld_step_input(state_slots + b), len0 = ld_step_input(kv_lens + b);
  // a row continuing the run of the row before it belongs to that row's block
  if (b > 0 && ld_step_input(state_slots + b - 1) == slot &&
      ld_step_input(kv_lens + b - 1) == len0 - 1)
    return;
  // A block may write a peer's shared memory only once the peer runs: this arrival, waited
  // on just before the first writes in 6, says so at no cost on the way.
  coop::cluster_group cluster = coop::this_cluster();
  auto started = cluster.barrier_arrive();

  // Before the wait (see the header): conv taps (channel gc + e's tap j is bf16 e * K + j
  // of the chunk's 4K), gate and norm constants, the step inputs, then the state tile and
  // the ring history; the taps go to shared memory only once every load is in flight.
  uint2 taps[kMaxKernel];
  const uint2* wg = reinterpret_cast<const uint2*>(conv_w + static_cast<size_t>(gc) * K);
#pragma unroll
  for (int j = 0; j < kMaxKernel; ++j)
    taps[j] = convolves && j < K ? __ldg(wg + j) : make_uint2(0u, 0u);
  const float a_log_h = atlas::bf16_to_f32(a_log[h]), dt_bias_h = atlas::bf16_to_f32(dt_bias[h]);
  __nv_bfloat162 wn[kCols / 2];  // the norm weights of the block's columns, kept packed
#pragma unroll
  for (int c = 0; c < kCols / 2; ++c)
    wn[c] = __halves2bfloat162(norm_w[col0 + cg * kCols + 2 * c],
                               norm_w[col0 + cg * kCols + 2 * c + 1]);
  const int pos0 = len0 - 1;
  const bool fresh = pos0 == 0;
  const size_t tile = static_cast<size_t>(h) * DK * DV + col0 + cg * kCols;
  const float* sg = state + static_cast<size_t>(slot) * HV * DK * DV + tile;
  float4 s[kRows];
#pragma unroll
  for (int j = 0; j < kRows; ++j)
    s[j] = fresh || !owns_state
               ? make_float4(0.f, 0.f, 0.f, 0.f)
               : *reinterpret_cast<const float4*>(sg + static_cast<size_t>(rg + R * j) * DV);
  const size_t ring_slot = static_cast<size_t>(K) * conv_dim;
  const __nv_bfloat16* ring = conv_state + static_cast<size_t>(slot) * ring_slot + gc;
  // hist[i]: the input at position pos - kMaxHist + i (newest last, so a token shifts it
  // with static register indices); the last K - 1 are the taps' history, zero below 0
  const int first = kMaxHist - (K - 1);
  uint2 hist[kMaxHist];
#pragma unroll
  for (int i = 0; i < kMaxHist; ++i) {
    const int p = pos0 - kMaxHist + i;
    hist[i] = convolves && i >= first && p >= 0
                  ? *reinterpret_cast<const uint2*>(ring + static_cast<size_t>(p % K) * conv_dim)
                  : make_uint2(0u, 0u);
  }
  if (convolves) {
#pragma unroll
    for (int j = 0; j < kMaxKernel; ++j)
      if (j < K) {
        wsm[tid * tap_pitch + 2 * j] = taps[j].x;
        wsm[tid * tap_pitch + 2 * j + 1] = taps[j].y;
      }
  }
  // the run: later rows with this slot at the next positions (1 in plain decode)
  int run = 1;
  while (b + run < static_cast<int>(num_seqs) && ld_step_input(state_slots + b + run) == slot &&
         ld_step_input(kv_lens + b + run) == len0 + run)
    ++run;
  const int t0 = ld_step_input(cu_q + b), oslot0 = ld_step_input(state_out + b);
  const bool in_place = oslot0 == slot;  // plain decode (then run == 1)
  atlas::pdl_enter();  // the projection row is the previous kernel's output

  const int col = col0 + cg * kCols;
  // 1. a row's inputs: the conv chunk, z of the block's output columns, b and a of the head;
  //    a run loads the next token's while it computes this one's
  const auto load_row = [&](int t, int oslot) {
    RowInputs in;
    in.t = t;
    in.oslot = oslot;
    const __nv_bfloat16* row = proj + static_cast<size_t>(t) * proj_pitch;
    in.x = convolves ? *reinterpret_cast<const uint2*>(row + gc) : make_uint2(0u, 0u);
    in.z = rg == 0 ? *reinterpret_cast<const uint2*>(row + conv_dim + h * DV + col)
                   : make_uint2(0u, 0u);
    in.b = row[conv_dim + HV * DV + h];
    in.a = row[conv_dim + HV * DV + HV + h];
    return in;
  };
  RowInputs next = load_row(t0, oslot0);
  for (int step = 0; step < run; ++step) {
    const RowInputs cur = next;
    if (step + 1 < run) next = load_row(cu_q[b + step + 1], state_out[b + step + 1]);
    const int t = cur.t, pos = pos0 + step, oslot = cur.oslot;
    const uint2 x_new = cur.x, zv = cur.z;
    const atlas::GateTerms gt = atlas::gate_terms_of(cur.b, cur.a, a_log_h, dt_bias_h);

    // 2. conv1d + SiLU of the chunk (taps oldest first, as conv1d.cu sums them; the taps
    //    before position 0 are skipped: zero), and its share of the q / k sums of squares;
    //    the history then shifts by one input
    float sq = 0.f, sk = 0.f;
    if (convolves) {
      float xf[kCols], y[kCols];
      unpack4(x_new, xf);
      const __nv_bfloat16* w4 = reinterpret_cast<const __nv_bfloat16*>(wsm + tid * tap_pitch);
#pragma unroll
      for (int e = 0; e < kCols; ++e) y[e] = 0.f;
#pragma unroll
      for (int i = 0; i < kMaxHist; ++i) {
        const int j = i - first;  // tap j, at position pos - K + 1 + j
        if (j >= 0 && pos - kMaxHist + i >= 0) {
          float hf[kCols];
          unpack4(hist[i], hf);
#pragma unroll
          for (int e = 0; e < kCols; ++e) y[e] = fmaf(atlas::bf16_to_f32(w4[e * K + j]), hf[e], y[e]);
        }
      }
      float ss = 0.f;
#pragma unroll
      for (int e = 0; e < kCols; ++e) {
        const float acc = atlas::round_bf16(fmaf(atlas::bf16_to_f32(w4[e * K + K - 1]), xf[e], y[e]));
        const float x = atlas::round_bf16(acc / (1.f + expf(-acc)));
        xs[c0 + e] = x;
        ss = fmaf(x, x, ss);
      }
      if (c0 < DK) sq = ss;
      else if (c0 < 2 * DK) sk = ss;
      __nv_bfloat16* ring_out = conv_state + static_cast<size_t>(oslot) * ring_slot + gc;
      if (writes_ring) {
        *reinterpret_cast<uint2*>(ring_out + static_cast<size_t>(pos % K) * conv_dim) = x_new;
        if (!in_place) {  // the rest of the ring: positions pos - K + 1 .. pos - 1
#pragma unroll
          for (int i = 0; i < kMaxHist; ++i) {
            const int p = pos - kMaxHist + i;
            if (i >= first && p >= 0)
              *reinterpret_cast<uint2*>(ring_out + static_cast<size_t>(p % K) * conv_dim) = hist[i];
          }
        }
      }
#pragma unroll
      for (int i = 0; i + 1 < kMaxHist; ++i) hist[i] = hist[i + 1];
      hist[kMaxHist - 1] = x_new;
    }

    // 3. L2 norms of q and k (the barrier also publishes xs), the gate terms
    const float2 sums = block_sum2(sq, sk, scratch);
    const float q_scale = rsqrtf(sums.x + atlas::kDeltaL2Eps) * rsqrtf(static_cast<float>(DK));
    const float k_scale = rsqrtf(sums.y + atlas::kDeltaL2Eps);
    const float decay = expf(gt.decay_log);
    const float* qn = xs;
    const float* kn = xs + DK;

    // 4. k^T S over the block's columns, reduced across the row groups
    float4* rk4 = reinterpret_cast<float4*>(red_k);
    float4* ro4 = reinterpret_cast<float4*>(red_o);
    if (owns_state) {
      float4 part = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
      for (int j = 0; j < kRows; ++j) part = fma4(kn[rg + R * j], s[j], part);
      rk4[rg * C + cg] = part;
    }
    __syncthreads();

    // 5. S = decay S + k delta^T, written once per token; q^T S of the new state
    if (owns_state) {
      float4 kv_mem = make_float4(0.f, 0.f, 0.f, 0.f);
      for (int r = 0; r < R; ++r) kv_mem = add4(kv_mem, rk4[r * C + cg]);
      const float kv_scale = decay * k_scale;
      const float* v = xs + 2 * DK + cg * kCols;
      const float4 delta = make_float4(gt.beta * (v[0] - kv_mem.x * kv_scale),
                                       gt.beta * (v[1] - kv_mem.y * kv_scale),
                                       gt.beta * (v[2] - kv_mem.z * kv_scale),
                                       gt.beta * (v[3] - kv_mem.w * kv_scale));
      float* so = state + static_cast<size_t>(oslot) * HV * DK * DV + tile;
      float4 o = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
      for (int j = 0; j < kRows; ++j) {
        const float kk = kn[rg + R * j] * k_scale;
        float4 nv;
        nv.x = fmaf(kk, delta.x, decay * s[j].x);
        nv.y = fmaf(kk, delta.y, decay * s[j].y);
        nv.z = fmaf(kk, delta.z, decay * s[j].z);
        nv.w = fmaf(kk, delta.w, decay * s[j].w);
        *reinterpret_cast<float4*>(so + static_cast<size_t>(rg + R * j) * DV) = nv;
        s[j] = nv;
        o = fma4(qn[rg + R * j], nv, o);
      }
      ro4[rg * C + cg] = o;
    }
    __syncthreads();

    // 6. the rule's output (bf16) of the block's columns (row group 0: threads 0..C-1,
    //    inside warp 0 since C <= 32); their sum of squares into every cluster peer's
    //    norm_parts[parity][rank], so one cluster barrier leaves each block all kSplit
    float ob[kCols] = {0.f, 0.f, 0.f, 0.f};
    if (rg == 0) {
      float4 total = make_float4(0.f, 0.f, 0.f, 0.f);
      for (int r = 0; r < R; ++r) total = add4(total, ro4[r * C + cg]);
      ob[0] = atlas::round_bf16(total.x * q_scale);
      ob[1] = atlas::round_bf16(total.y * q_scale);
      ob[2] = atlas::round_bf16(total.z * q_scale);
      ob[3] = atlas::round_bf16(total.w * q_scale);
    }
    if (step == 0) cluster.barrier_wait(std::move(started));
    float* parts = norm_parts[step & 1];
    if (tid < 32) {
      float ss = 0.f;
#pragma unroll
      for (int c = 0; c < kCols; ++c) ss = fmaf(ob[c], ob[c], ss);
      ss = atlas::warp_sum(ss);
      if (tid < kSplit) *cluster.map_shared_rank(&parts[rank], tid) = ss;
    }
    cluster.sync();  // every block's sum is in every block's parts (and no block reads a
                     // peer's memory after its last token's, so each may exit when done)

    // 7. the gated RMSNorm over the head's dv columns
    if (rg == 0) {
      float sum_sq = 0.f;
#pragma unroll
      for (int p = 0; p < kSplit; ++p) sum_sq += parts[p];
      const float inv_rms = rsqrtf(sum_sq / static_cast<float>(DV) + eps);
      float zf[kCols];
      unpack4(zv, zf);
      float o4[kCols];
#pragma unroll
      for (int c = 0; c < kCols; ++c) {
        const __nv_bfloat162 w2 = wn[c / 2];
        const float w = atlas::bf16_to_f32(c % 2 ? w2.y : w2.x);
        const float normed = atlas::round_bf16(w * atlas::round_bf16(ob[c] * inv_rms));
        o4[c] = silu_gate(normed, zf[c]);
      }
      *reinterpret_cast<uint2*>(out + static_cast<size_t>(t) * HV * DV + h * DV + col) =
          make_uint2(atlas::pack_bf16x2(o4[0], o4[1]), atlas::pack_bf16x2(o4[2], o4[3]));
    }
  }
}
