// MoE expert FFN for decode batches (1..8 tokens): one launch per projection covering every
// (token, selected expert) pair, reading only the selected experts' weights.
//
// Both kernels are GEMV-shaped and bandwidth-bound: a warp streams weight rows of the
// selected experts (16-byte ld.global.nc chunks, many in flight per lane) and its partial
// sums meet in a butterfly (atlas::warp_sum), so every result is bit-reproducible.
//
// moe_gate_up_gemv_bf16[_single] (the default): the same act with the dense single-row
//   GEMV's loading scheme, two columns of one expert a block (see gate_up_gemv below).
// moe_gate_up_silu_bf16 (ATLAS_MOE_GATE_UP_GEMV=0): grid (ceil(groups / per_block),
//   tokens * slots), 256 threads,
//   groups = ceil(inter / 8) column groups (ops/moe.py gate_up_groups_per_block). Block
//   (bx, p) serves pair p = t * slots + j only if its rank among the pairs with its expert
//   (the shared expert's chunk c counts as expert experts + c for every token) is a multiple
//   of kGroupPairs (4; 1 at batch 1); then it computes, for it and the next pairs routed to
//   that expert (up to 4), columns i of its column groups, one warp a column:
//   g = bf16(x[t] . w_gate_up[e][i]), u = bf16(x[t] . w_gate_up[e][inter + i]) and
//   act[pair][i] = bf16(bf16(silu(g)) * u), the dense MLP's gate_up GEMV + silu_mul: at batch
//   2..8 the rows routed to one expert share one weight read. Each warp's next column is
//   requested right after the current one's products; x (every token) is staged in shared
//   memory. The expert ids are the router's output, the launch just before: read after the
//   PDL wait. It must keep pdl_wait before pdl_launch_dependents: the down launch after it
//   reads the routing before its own wait (below).
// moe_down_sum_bf16: grid (ceil(hidden / rows), tokens), 256 threads, rows = rows_per_block
//   (ops/moe.py down_rows), taken in groups of rows_per_group (down_rows_per_group) rows. A
//   group of block (bx, t) owns rows_per_group output rows of token t for all their slots:
//   its items (row r, slot j) go kItems per warp (DownTile, by inter), so neighbouring warps
//   stream different experts' rows, 14..16 chunks in flight per lane. The token's routing is
//   read before the PDL wait (written two launches back, see gate/up above), so the first
//   group's weights are requested while gate/up still runs; each later group's right after
//   the products of the one before, ahead of its reduction. gate/up's act rows of the token
//   are staged in shared memory after the wait. Item (r, j) leaves act[t][j] . w_down[e_j][n]
//   in shared memory; then thread r sums its row in slot order, acc += topk_weights[t][j] *
//   bf16(y_j) in float32, out = bf16(acc) (bit-reproducible, no atomics). Python gives
//   every block the same rows, one wave of 2 blocks per SM (the last group may be partial).
//   History (H200, 2026-12-01): one warp per row of all k experts (256 blocks at batch 1):
//   1.4-1.7 TB/s; passes of 16 / slots rows, 2 items per warp, loads issued after the wait:
//   25 MB in 11.1 us (2.3 TB/s) at batch 1 for Qwen3-30B-A3B, 115 us at batch 8 for
//   Qwen3.5-35B-A3B's 9 slots (1-row passes).
// moe_down_gemv_sum_bf16 (the default at batch 1): the same sum from a GEMV-shaped launch, 4
//   output rows a block, every thread all its chunks of the block's rows in flight at once
//   (see down_gemv_block).
// moe_gate_up_gemv_tiles_bf16 (the default at batch 1): the gate/up GEMV with several column
//   pairs of one slot a block, one wave (see gate_up_gemv_tiles).
// moe_gate_up_gemv_tiles_route_bf16, moe_down_gemv_route_sum_bf16: the batch-1 pair routing
//   from the router's logits themselves (LogitRouting; ops/moe.py routes_in_experts).
// An id outside [0, experts) gives act = 0 and is skipped in the sum.
// The expert epilogue (gpt-oss: moe_epilogue.cuh; ops/moe.py ExpertEpilogue) is taken by
// moe_gate_up_epilogue_bf16 (moe_gate_up_silu_bf16 with the gate/up bias and the clamped GLU
// on the routed slots) and moe_down_sum_bias_bf16 (moe_down_sum_bf16 with the down bias,
// y = bf16(bf16(y) + b) before it is weighted, in down_block instantiations of their own),
// entries of their own so the plain ones keep their code and registers; the GEMV-shaped
// entries have no twin (ops/moe.py routes the epilogue away from them).
//
// Where the leaf defines ATLAS_MOE_EXPERTS (an MoE leaf) with ATLAS_HIDDEN, gate/up launches
// of that hidden size run an instantiation with it as a compile-time constant (the whole row
// in flight at batch 1, fully unrolled); other shapes take the general one. The down kernels
// pick a compile-time tile by the row's chunk steps for every shape.
// Preconditions (ops/moe.py): hidden, inter multiples of 16; x, act and weights 16-byte
// aligned.
#include "atlas_common.cuh"
#include "bf16_vec.cuh"
#include "gemv_core.cuh"
#include "moe_epilogue.cuh"
#include "moe_route.cuh"

namespace {

constexpr int kWarps = 8;  // ops/moe.py DECODE_ROWS_PER_BLOCK
constexpr int kThreads = 32 * kWarps;

#if defined(ATLAS_MOE_EXPERTS) && defined(ATLAS_HIDDEN)
constexpr bool kLeaf = true;
constexpr int kLeafHidden = ATLAS_HIDDEN;
#else
constexpr bool kLeaf = false;
constexpr int kLeafHidden = 0;
#endif

using atlas::dot8;  // bf16_vec.cuh

__device__ __forceinline__ bool valid_expert(int e, uint32_t experts) {
  return e >= 0 && e < static_cast<int>(experts);
}

// The shared expert of a block (Qwen2-MoE / Qwen3-Next style, or GLM-4.5's ungated one: the
// router gives its slots weight 1), as `shared_slots` more slots after the top_k routed
// ones: slot top_k + c is chunk c of the shared expert's intermediate columns
// [c inter, (c + 1) inter) (past shared_inter: zero act). w_gate_up [2 shared_inter, hidden]
// (gate rows, then up rows), w_down [hidden, shared_inter].
struct SharedExpert {
  const __nv_bfloat16* w_gate_up;
  const __nv_bfloat16* w_down;
  int slots, inter;
};

// Where the batch-1 expert kernels route from the logits themselves (ops/moe.py
// routes_in_experts: the router launch then writes only the logits, moe_gate_logits_bf16):
// the router's inputs past its logits. The logits are the router's output: gate/up reads them
// after its PDL wait, down before its own (two launches back, as the routing it otherwise
// reads; see moe_down_gemv_*).
struct LogitRouting {
  const float* logits;         // f32 [tokens, experts]
  const float* bias;           // sigmoid scoring's e_score_correction_bias (or null)
  const float* shared_logits;  // f32 [tokens]: the shared expert's gate logit (null:
                               // ungated, its slots weighted 1: moe_route.cuh)
  uint32_t renormalize;
  float scale;
  uint32_t sigmoid;
};

// One warp: token `token`'s routing (ids, weights [slots]: moe_route.cuh route_slots, the
// router's own code, so the same bits) into shared memory; at most kRouteMaxTier x 32 experts
// (ops/moe.py ROUTE_IN_EXPERTS_MAX_EXPERTS: more would spill under gate/up's 64 registers).
// Not inlined (its arguments scalars, so no stack frame): its per-lane arrays get registers
// of their own, not a share of the caller's (inlined into gate/up it spilled).
constexpr int kRouteMaxTier = 8;
__device__ __noinline__ void route_token_slots(const float* logits, const float* bias,
                                               const float* shared_logit, int32_t* ids,
                                               float* weights, int experts, int top_k,
                                               int shared_slots, uint32_t renormalize,
                                               float scale, uint32_t sigmoid) {
  if (experts > 32 * kRouteMaxTier) __trap();
  atlas::moe::route_slots<true, kRouteMaxTier>(logits, bias, shared_logit, ids, weights,
                                               experts, top_k, shared_slots, renormalize, scale,
                                               sigmoid != 0);
}

// Warp 0 of a gate/up block: the (only) token's top_k ids alone (no weights: gate/up needs
// none), not inlined (its arguments scalars) so its arrays do not share gate/up's registers.
__device__ __noinline__ void route_token_ids(const float* logits, const float* bias,
                                             int32_t* ids, int experts, int top_k,
                                             uint32_t sigmoid) {
  if (experts > 32 * kRouteMaxTier) __trap();
  atlas::moe::route_ids<true, kRouteMaxTier>(logits, bias, ids, experts, top_k, sigmoid != 0);
}

__device__ __forceinline__ void route_ids_from_logits(const LogitRouting& r, int32_t* ids,
                                                      int experts, int top_k) {
  route_token_ids(r.logits, r.bias, ids, experts, top_k, r.sigmoid);
}

__device__ __forceinline__ void route_from_logits(const LogitRouting& r, int token, int32_t* ids,
                                                  float* weights, int experts, int top_k,
                                                  int shared_slots) {
  route_token_slots(r.logits + static_cast<size_t>(token) * experts, r.bias,
                    r.shared_logits != nullptr ? r.shared_logits + token : nullptr, ids,
                    weights, experts, top_k, shared_slots, r.renormalize, r.scale, r.sigmoid);
}

// ---- gate/up ------------------------------------------------------------------------------
constexpr int kMaxSlots = 32;  // ops/moe.py ROUTER_MAX_TOP_K
constexpr int kMaxPairs = 8 * 32;  // DECODE_MAX_TOKENS x ROUTER_MAX_TOP_K (ops/moe.py)
static_assert(kMaxPairs == kThreads, "gate/up ranks a pair with one thread per pair");
// at batch 2..8, the most pairs of one expert a gate/up block computes (one weight read)
constexpr int kGroupPairs = 4;

// The expert a pair (token, slot) reads: its routed id, experts + c for shared chunk c (the
// same for every token), or -1 - pair for an id outside [0, experts) (unique: never shared).
__device__ __forceinline__ int pair_key(const int32_t* ids, int q, int slots, int top_k,
                                        int experts) {
  const int j = q % slots;
  if (j >= top_k) return experts + (j - top_k);
  const int e = ids[q];
  return valid_expert(e, experts) ? e : -1 - q;
}

// One warp: the first `group` pairs q >= p with pair_key == key, in order, into pairs[] (and
// their tokens q / slots into tok[] where given); returns how many (at most group).
__device__ __forceinline__ int collect_pairs(const int32_t* ids, int p, int n, int slots,
                                             int top_k, int experts, int key, int group,
                                             int* pairs, int* tok) {
  const int lane = threadIdx.x & 31;
  int count = 0;
  for (int q0 = p; q0 < n && count < group; q0 += 32) {
    const int q = q0 + lane;
    const bool match = q < n && pair_key(ids, q, slots, top_k, experts) == key;
    const unsigned mask = __ballot_sync(0xffffffffu, match);
    const int at = count + __popc(mask & ((1u << lane) - 1u));
    if (match && at < group) {
      pairs[at] = q;
      if (tok != nullptr) tok[at] = q / slots;
    }
    count += __popc(mask);
  }
  return min(count, group);
}

// Block (bx, p) computes columns [bx cpb 8, (bx + 1) cpb 8) of pair p's expert (cpb =
// ceil(ceil(inter / 8) / gridDim.x) column groups of 8, one column a warp) for p and the
// next pairs routed to the same expert, up to kGroupPairs, if p leads them (the others'
// blocks exit): rows routed to one expert share one weight read at batch 2..8 (and every
// token's shared-expert slots do, 4 to a read); `e` is the expert (key). Each warp streams
// its columns' gate and up rows kSteps chunks a lane at a time, the next (column, pair batch,
// chunk batch) unit's loads issued right after the current unit's products; the first
// unit's are issued before `prepare` (the block's pair list `pairs` and x staged in shared
// memory as `xs`, then a barrier; it returns the pair count), so they overlap it. kTok:
// pairs a unit takes (1 at batch 1, else kGroupPairs); kHidden: 0 = run-time hidden. kEpi:
// a routed expert's columns end with the expert epilogue `epi` (a shared chunk's never do).
template <int kHidden, int kTok, bool kEpi, class Prepare>
__device__ __forceinline__ void gate_up_cols(const uint4* xs, const __nv_bfloat16* __restrict__ w,
                                             const int* pairs, Prepare&& prepare, int e,
                                             __nv_bfloat16* __restrict__ act, int slots,
                                             int hidden_arg, int inter, int experts,
                                             const SharedExpert& sh,
                                             const atlas::moe::Epilogue& epi) {
  const int hidden = kHidden > 0 ? kHidden : static_cast<int>(hidden_arg);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, kc = hidden / 8;
  // chunks a lane holds per row and batch: 8 (a 2048-wide row in flight; with kTok = 4
  // pairs' accumulators still within 128 registers), fewer where the leaf's row is shorter
  constexpr int kMaxSteps = 8;
  constexpr int kRowSteps = kHidden > 0 ? (kHidden / 8 + 31) / 32 : kMaxSteps;
  constexpr int kSteps = kRowSteps < kMaxSteps ? kRowSteps : kMaxSteps;
  const int cbatches = (kc + 32 * kSteps - 1) / (32 * kSteps);
  const int groups = (inter + kWarps - 1) / kWarps;
  const int cpb = (groups + gridDim.x - 1) / gridDim.x;
  int pbatches = 1;  // set once `prepare` has the pair count; unit 0 is column 0 regardless
  // the gate row of column i (its up row is `up_rows` rows further)
  const bool shared_expert = e >= experts;
  const size_t up_rows = shared_expert ? sh.inter : inter;
  auto column = [&](int u) { return (blockIdx.x * cpb + u / (pbatches * cbatches)) * kWarps + warp; };
  auto live = [&](int i) { return i < inter && (!shared_expert || (e - experts) * inter + i < sh.inter); };
  auto gate_row = [&](int i) {
    return reinterpret_cast<const uint4*>(
        shared_expert ? sh.w_gate_up + static_cast<size_t>((e - experts) * inter + i) * hidden
                      : w + (static_cast<size_t>(e) * 2 * inter + i) * hidden);
  };
  uint4 a[kSteps], b[kSteps];
  auto issue = [&](int u) {
    const int i = column(u), cb = u % cbatches;
    if (!live(i)) return;
    const uint4* wg = gate_row(i);
    const uint4* wu = wg + up_rows * kc;
    const uint64_t stream = atlas::l2_stream_policy();  // the experts' L2 policy
#pragma unroll
    for (int st = 0; st < kSteps; ++st) {  // past the row: its last chunk again, unused
      const int c = min(lane + 32 * (cb * kSteps + st), kc - 1);
      a[st] = atlas::ld_weight<false>(wg + c, stream);
      b[st] = atlas::ld_weight<false>(wu + c, stream);
    }
  };
  float g[kTok], up[kTok];
#pragma unroll
  for (int n = 0; n < kTok; ++n) g[n] = up[n] = 0.f;
  issue(0);
  const int n_pairs = prepare();
  pbatches = (n_pairs + kTok - 1) / kTok;
  const int units = cpb * pbatches * cbatches;
  for (int u = 0; u < units; ++u) {
    const int i = column(u), cb = u % cbatches, pb = (u / cbatches) % pbatches;
    const bool col_live = live(i);
    if (col_live) {
#pragma unroll
      for (int st = 0; st < kSteps; ++st) {
        const int c = lane + 32 * (cb * kSteps + st);
        float wg[8], wu[8];
        atlas::unpack_bf16x8(a[st], wg);
        atlas::unpack_bf16x8(b[st], wu);
#pragma unroll
        for (int n = 0; n < kTok; ++n) {
          const int q = pairs[min(pb * kTok + n, n_pairs - 1)];
          float xf[8];
          atlas::unpack_bf16x8(xs[(q / slots) * kc + min(c, kc - 1)], xf);
          if (c < kc && pb * kTok + n < n_pairs) {
#pragma unroll
            for (int k = 0; k < 8; ++k) {
              g[n] = fmaf(wg[k], xf[k], g[n]);
              up[n] = fmaf(wu[k], xf[k], up[n]);
            }
          }
        }
      }
    }
    if (u + 1 < units) issue(u + 1);
    if (cb == cbatches - 1) {  // the column's products for this pair batch are complete
#pragma unroll
      for (int n = 0; n < kTok; ++n) {
        const float gs = atlas::round_bf16(atlas::warp_sum(g[n]));
        const float us = atlas::round_bf16(atlas::warp_sum(up[n]));
        g[n] = up[n] = 0.f;
        if (lane == 0 && i < inter && pb * kTok + n < n_pairs) {
          float v = col_live ? atlas::round_bf16(gs / (1.f + expf(-gs))) * us : 0.f;
          if constexpr (kEpi)
            if (col_live && !shared_expert) v = atlas::moe::epilogue_act(gs, us, epi, e, i, inter);
          act[static_cast<size_t>(pairs[pb * kTok + n]) * inter + i] = atlas::f32_to_bf16(v);
        }
      }
    }
  }
}

// ---- gate/up as a GEMV (the default; ATLAS_MOE_GATE_UP_GEMV=0: moe_gate_up_silu) --------
// The block's four weight rows (gate rows of columns col0 and col0 + 1, then their up rows)
// for every pair in `tok` (x row of pair m: tok[m]) with the dense GEMV's loading scheme
// (atlas::gemv::load_weight_tile: 16 bytes a thread and row, kUnroll chunks a row in flight),
// its reduce-scatter and fixed-order sum over warps; lanes of warp 0 then form
// act[pair][col] = bf16(bf16(silu(bf16(g))) * bf16(u)) (0 for columns col0 + width on).
using GemvPartials = float[atlas::gemv::kMaxThreads / 32][atlas::gemv::kMaxAcc];

using GemvTile = uint4[atlas::gemv::kUnroll][atlas::gemv::kRowsPerBlock];

// acc[m * kRowsPerBlock + r] += the products of weight row r (`wrow`) with x row tok[m] over
// the whole row, kUnroll chunks a thread in flight. kFirstLoaded: `wv` already holds the
// first tile (chunk threadIdx.x on), requested by the caller; else it is requested here.
template <int M, bool kFirstLoaded, int V>
__device__ __forceinline__ void gate_up_products(const uint4* __restrict__ x, const int* tok,
                                                 const uint4* const (&wrow)[4], GemvTile& wv,
                                                 int kc, float (&acc)[V]) {
  using namespace atlas::gemv;
  for (int c0 = threadIdx.x; c0 < kc; c0 += kUnroll * blockDim.x) {
    if (!kFirstLoaded || c0 != static_cast<int>(threadIdx.x)) load_weight_tile(wv, wrow, c0, kc);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int c = c0 + u * blockDim.x;
      if (c >= kc) break;
      float wf[kRowsPerBlock][8];
#pragma unroll
      for (int r = 0; r < kRowsPerBlock; ++r) atlas::unpack_bf16x8(wv[u][r], wf[r]);
#pragma unroll
      for (int m = 0; m < M; ++m) {
        float xf[8];
        atlas::unpack_bf16x8(__ldg(x + static_cast<size_t>(tok[m]) * kc + c), xf);
#pragma unroll
        for (int r = 0; r < kRowsPerBlock; ++r)
#pragma unroll
          for (int e = 0; e < 8; ++e) acc[m * kRowsPerBlock + r] = fmaf(xf[e], wf[r][e], acc[m * kRowsPerBlock + r]);
      }
    }
  }
}

// The block's sums of `acc` (gate_up_products'): the GEMV's reduce-scatter into `partial`,
// one barrier, then warp 0's fixed-order sum over warps and act[pairs[m]][col0 + r] =
// bf16(bf16(silu(bf16(g))) * bf16(u)) (0 for columns col0 + width on). `partial` may be
// written again by the block only after its next barrier.
template <int M, int V>
__device__ __forceinline__ void gate_up_store(float (&acc)[V], const int* pairs, int width,
                                              __nv_bfloat16* __restrict__ act, int inter,
                                              int col0, GemvPartials& partial) {
  using namespace atlas::gemv;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const float v = warp_reduce_scatter<V>(acc, lane);
  constexpr int kLanesPerValue = 32 / V;
  if ((lane & (kLanesPerValue - 1)) == 0) partial[warp][lane >> log2_exact(kLanesPerValue)] = v;
  __syncthreads();
  if (warp != 0) return;
  float sum = 0.f;  // lane t = m * 4 + r: r 0, 1 the gate of col0, col0 + 1; r 2, 3 their up
  if (lane < M * kRowsPerBlock)
    for (int i = 0; i < static_cast<int>(blockDim.x >> 5); ++i) sum += partial[i][lane];
  const float up = __shfl_down_sync(0xffffffffu, sum, 2);
  const int m = lane >> 2, r = lane & 3;
  if (lane < M * kRowsPerBlock && r < 2 && col0 + r < inter) {
    const float g = atlas::round_bf16(sum), u = atlas::round_bf16(up);
    const float y = r < width ? atlas::swiglu_f32(g, u) : 0.f;
    act[static_cast<size_t>(pairs[m]) * inter + col0 + r] = atlas::f32_to_bf16(y);
  }
}

// kFirstLoaded: *first holds the first tile (chunk threadIdx.x on), requested by the caller;
// else the block requests it (first: null).
template <int M, bool kFirstLoaded>
__device__ __forceinline__ void gate_up_gemv_block(const uint4* __restrict__ x, const int* tok,
                                                   const int* pairs,
                                                   const uint4* const (&wrow)[4],
                                                   GemvTile* first, int width, int kc,
                                                   __nv_bfloat16* __restrict__ act, int inter,
                                                   int col0, GemvPartials& partial) {
  constexpr int V = atlas::gemv::pow2_at_least(M) * atlas::gemv::kRowsPerBlock;
  float acc[V];
#pragma unroll
  for (int i = 0; i < V; ++i) acc[i] = 0.f;
  GemvTile own;
  GemvTile& wv = kFirstLoaded ? *first : own;
  gate_up_products<M, kFirstLoaded>(x, tok, wrow, wv, kc, acc);
  gate_up_store<M>(acc, pairs, width, act, inter, col0, partial);
}

// The four weight rows of columns col0, col0 + 1 of `key` (pair_key's: an expert, the shared
// expert's chunk experts + c, or < 0 for an id outside [0, experts): no rows) and how many
// of the two columns exist (`width` <= 0: none; a column past it re-reads a live row, never
// stored). The shared expert's chunk c is its columns [c inter, (c + 1) inter).
struct GateUpRows {
  const uint4* row[4];
  int width;
};

__device__ __forceinline__ GateUpRows gate_up_rows(int key, int col0, const __nv_bfloat16* w,
                                                   const SharedExpert& sh, int kc, int inter,
                                                   int experts) {
  const uint4* gate = reinterpret_cast<const uint4*>(w);
  size_t up = static_cast<size_t>(inter) * kc, first = 0;
  int width = 0;
  if (key >= experts) {
    const int c0 = (key - experts) * inter + col0;
    gate = reinterpret_cast<const uint4*>(sh.w_gate_up);
    up = static_cast<size_t>(sh.inter) * kc;
    first = static_cast<size_t>(min(c0, sh.inter - 1)) * kc;
    width = min(inter - col0, sh.inter - c0);
  } else if (key >= 0) {
    first = (static_cast<size_t>(key) * 2 * inter + col0) * kc;
    width = inter - col0;
  }
  const uint4* g0 = gate + first;
  const uint4* g1 = width > 1 ? g0 + kc : g0;
  return GateUpRows{{g0, g1, g0 + up, g1 + up}, width};
}

// The pair list of a gate/up GEMV block, in shared memory: pairs[m] and its token tok[m]
struct GemvPairs {
  int pairs[kGroupPairs], tok[kGroupPairs];
  int n;
};

// After the block's pair list is complete: zeros where the block has no rows (an id outside
// [0, experts), columns past the shared expert's width), else the products. kFirstLoaded:
// the caller requested the first tile into *first.
template <bool kFirstLoaded>
__device__ __forceinline__ void gate_up_gemv_finish(const __nv_bfloat16* x, const GemvPairs& pl,
                                                    const GateUpRows& rows, GemvTile* first,
                                                    int kc, __nv_bfloat16* act, int inter,
                                                    int col0, GemvPartials& partial) {
  const int np = pl.n, width = rows.width;
  const uint4* const wrow[4] = {rows.row[0], rows.row[1], rows.row[2], rows.row[3]};
  const uint4* xv = reinterpret_cast<const uint4*>(x);
  if (width <= 0) {  // warp 0's lanes write the zeros as they would the products
    if (threadIdx.x < 2 * np && col0 + (threadIdx.x & 1) < inter)
      act[static_cast<size_t>(pl.pairs[threadIdx.x >> 1]) * inter + col0 + (threadIdx.x & 1)] =
          atlas::f32_to_bf16(0.f);
    return;
  }
#define ATLAS_GATE_UP_BLOCK(M) \
  gate_up_gemv_block<M, kFirstLoaded>(xv, pl.tok, pl.pairs, wrow, first, width, kc, act, inter, \
                                      col0, partial)
  switch (kFirstLoaded ? 1 : np) {
    case 1: ATLAS_GATE_UP_BLOCK(1); break;
    case 2: ATLAS_GATE_UP_BLOCK(2); break;
    case 3: ATLAS_GATE_UP_BLOCK(3); break;
    default: ATLAS_GATE_UP_BLOCK(4); break;
  }
#undef ATLAS_GATE_UP_BLOCK
}

// moe_gate_up_gemv_bf16_single, block (bx, y): columns 2 bx, 2 bx + 1 of slot p's expert,
// p = (y + top_k) mod slots, so the shared expert's slots come first: they need no routing
// and request their first tile before the PDL wait (under PDL they stream while the router
// runs); the routed slots read their id after it.
__device__ __forceinline__ void gate_up_gemv_single(const __nv_bfloat16* x,
                                                    const __nv_bfloat16* w_gate_up,
                                                    const int32_t* topk_ids,
                                                    __nv_bfloat16* act, int top_k, int hidden,
                                                    int inter, int experts,
                                                    const SharedExpert& sh) {
  const int slots = top_k + sh.slots, p = (static_cast<int>(blockIdx.y) + top_k) % slots;
  const int kc = hidden / 8, col0 = 2 * blockIdx.x;
  __shared__ GemvPairs pl;
  __shared__ GemvPartials partial;
  GemvTile wv;
  GateUpRows rows;
  if (p >= top_k) {  // the shared expert's chunk: weights only, before the wait
    rows = gate_up_rows(experts + (p - top_k), col0, w_gate_up, sh, kc, inter, experts);
    if (rows.width > 0) atlas::gemv::load_weight_tile<true>(wv, rows.row, threadIdx.x, kc);
  }
  // pdl_wait before pdl_launch_dependents: the down launch after this one reads the routing
  // before its own wait (see the header)
  atlas::pdl_enter();
  if (static_cast<int>(blockIdx.y) >= slots) return;
  if (p < top_k) {  // the router's output: read from L2, as every decode kernel reads it
    const int e = __ldcg(topk_ids + p);
    rows = gate_up_rows(valid_expert(e, experts) ? e : -1 - p, col0, w_gate_up, sh, kc, inter,
                        experts);
    if (rows.width > 0) atlas::gemv::load_weight_tile(wv, rows.row, threadIdx.x, kc);
  }
  if (threadIdx.x == 0) {
    pl.pairs[0] = p;
    pl.tok[0] = 0;
    pl.n = 1;
  }
  __syncthreads();
  gate_up_gemv_finish<true>(x, pl, rows, &wv, kc, act, inter, col0, partial);
}

// moe_gate_up_gemv_tiles_bf16 (batch 1, the default: ops/moe.py gate_up_tiles), block
// (bx, y): slot p = (y + top_k) mod slots as in _single (the shared expert's slots first, their
// first tile requested before the PDL wait), its column pairs t of [bx tiles, (bx + 1) tiles)
// (columns 2 t, 2 t + 1) one after the other: pair t + 1's first weight tile is requested right
// after pair t's products, before their reduction and store, so the block's loads stay in
// flight from pair to pair and one prologue (the wait, the routing read: a dependent L2 round
// trip before any routed weight is requested) serves `tiles` pairs. The grid is one wave
// (ops/moe.py: the driver's resident blocks), where _single's 2-column blocks run ~3 waves
// each paying that prologue. `partial` alternates by pair parity: one barrier a pair (a warp
// writes a buffer again only after the next pair's barrier, which warp 0 reaches after it has
// read the buffer). A pair with no rows (an id outside [0, experts), columns past the shared
// expert's width) stores zeros through the same path.
// kRoute (moe_gate_up_gemv_tiles_route_bf16): a routed slot's expert comes from the logits
// (`route`; warp 0 routes the token after the wait) instead of topk_ids.
template <bool kRoute>
__device__ __forceinline__ void gate_up_gemv_tiles(const __nv_bfloat16* x,
                                                   const __nv_bfloat16* w_gate_up,
                                                   const int32_t* topk_ids, __nv_bfloat16* act,
                                                   int top_k, int hidden, int inter, int experts,
                                                   const SharedExpert& sh, int tiles,
                                                   const LogitRouting& route) {
  const int slots = top_k + sh.slots, p = (static_cast<int>(blockIdx.y) + top_k) % slots;
  const int kc = hidden / 8, col_pairs = (inter + 1) / 2;
  const int t0 = static_cast<int>(blockIdx.x) * tiles, t_end = min(col_pairs, t0 + tiles);
  __shared__ GemvPartials partial[2];
  GemvTile wv;
  int key = experts + (p - top_k);  // the shared expert's chunk (p >= top_k)
  auto rows_of = [&](int t) { return gate_up_rows(key, 2 * t, w_gate_up, sh, kc, inter, experts); };
  if (p >= top_k && t0 < t_end) {  // weights only, before the wait
    const GateUpRows rows = rows_of(t0);
    if (rows.width > 0) atlas::gemv::load_weight_tile<true>(wv, rows.row, threadIdx.x, kc);
  }
  // pdl_wait before pdl_launch_dependents: the down launch after this one reads the routing
  // before its own wait (see the header)
  atlas::pdl_enter();
  if (static_cast<int>(blockIdx.y) >= slots || t0 >= t_end) return;
  if (p < top_k) {  // the router's output: read from L2, as every decode kernel reads it
    int e;
    if constexpr (kRoute) {
      __shared__ int32_t ids[kMaxSlots];
      if (threadIdx.x < 32) route_ids_from_logits(route, ids, experts, top_k);
      __syncthreads();
      e = ids[p];
    } else {
      e = __ldcg(topk_ids + p);
    }
    key = valid_expert(e, experts) ? e : -1 - p;
    const GateUpRows rows = rows_of(t0);
    if (rows.width > 0) atlas::gemv::load_weight_tile(wv, rows.row, threadIdx.x, kc);
  }
  const int pair[1] = {p}, tok[1] = {0};
  const uint4* xv = reinterpret_cast<const uint4*>(x);
  for (int t = t0; t < t_end; ++t) {
    const GateUpRows rows = rows_of(t);
    float acc[atlas::gemv::kRowsPerBlock] = {};
    if (rows.width > 0) gate_up_products<1, true>(xv, tok, rows.row, wv, kc, acc);
    if (t + 1 < t_end) {  // the next pair's first tile, before this pair's reduction
      const GateUpRows next = rows_of(t + 1);
      if (next.width > 0) atlas::gemv::load_weight_tile(wv, next.row, threadIdx.x, kc);
    }
    gate_up_store<1>(acc, pair, rows.width, act, inter, 2 * t, partial[t & 1]);
  }
}

// moe_gate_up_gemv_bf16, block (bx, p): columns 2 bx, 2 bx + 1 of pair p's expert (its key,
// pair_key) if p leads that expert's pairs (rank 0, kGroupPairs, ... among the pairs with
// its key), for p and the next pairs with the same key, one weight read for all of them;
// the other pairs' blocks exit after reading the routing (after the PDL wait: the ids are
// the router's output, the launch before).
__device__ __forceinline__ void gate_up_gemv_batch(const __nv_bfloat16* x,
                                                   const __nv_bfloat16* w_gate_up,
                                                   const int32_t* topk_ids,
                                                   __nv_bfloat16* act, int tokens, int top_k,
                                                   int hidden, int inter, int experts,
                                                   const SharedExpert& sh) {
  atlas::pdl_enter();  // before pdl_launch_dependents, as in gate_up_gemv_single
  const int slots = top_k + sh.slots, n = tokens * slots, p = blockIdx.y;
  if (p >= n) return;
  __shared__ int32_t ids[kMaxPairs];
  __shared__ GemvPairs pl;
  __shared__ GemvPartials partial;
  for (int q = threadIdx.x; q < n; q += blockDim.x) ids[q] = __ldcg(topk_ids + q);
  __syncthreads();
  const int key = pair_key(ids, p, slots, top_k, experts);
  int rank = 0;  // pairs before p with p's key, counted a block-width at a time
  for (int base = 0; base < p; base += blockDim.x) {
    const int q = base + static_cast<int>(threadIdx.x);
    rank += __syncthreads_count(q < p && pair_key(ids, q, slots, top_k, experts) == key);
  }
  if (rank % kGroupPairs != 0) return;
  if (threadIdx.x < 32) {  // the next kGroupPairs pairs p.. with this key, in order
    const int count = collect_pairs(ids, p, n, slots, top_k, experts, key, kGroupPairs,
                                    pl.pairs, pl.tok);
    if (threadIdx.x == 0) pl.n = count;
  }
  __syncthreads();
  const int kc = hidden / 8, col0 = 2 * blockIdx.x;
  gate_up_gemv_finish<false>(x, pl, gate_up_rows(key, col0, w_gate_up, sh, kc, inter, experts),
                             nullptr, kc, act, inter, col0, partial);
}

// The down projection's work items: item i of a group is (row r = i / slots, slot j =
// i % slots), so the slots of one output row sit in neighbouring warps; warp w takes items
// w + kWarps m, m < kItems. A group holds rows_per_group = kWarps kItems / slots rows (all
// their slots) and a lane holds kBatch 16-byte chunks of each of its kItems items at once:
// kItems x kBatch = 16..24 loads in flight per lane, chosen by the row's chunk steps
// ceil(inter / 256) (DownTile; ops/moe.py down_tile mirrors it).
constexpr int kMaxDownItems = 8;    // DownTile<1 or 3>::kItems
template <int kSteps> struct DownTile { static constexpr int kItems = 3, kBatch = 5; };
template <> struct DownTile<1> { static constexpr int kItems = 8, kBatch = 1; };
template <> struct DownTile<2> { static constexpr int kItems = 7, kBatch = 2; };
template <> struct DownTile<3> { static constexpr int kItems = 5, kBatch = 3; };
template <> struct DownTile<4> { static constexpr int kItems = 4, kBatch = 4; };

struct DownArgs {
  const __nv_bfloat16* act;      // [tokens, slots, inter]
  const __nv_bfloat16* w;        // [experts, hidden, inter]
  const int32_t* topk_ids;       // [tokens, slots] (slots = top_k + shared slots)
  const float* topk_weights;     // [tokens, slots]
  __nv_bfloat16* out;            // [tokens, hidden]: the weighted sum (delta)
  SharedExpert shared;           // slots past top_k: the shared expert's chunks (w_down)
  int tokens, top_k, hidden, inter, experts, rows;
  const __nv_bfloat16* bias = nullptr;  // the down bias [experts, hidden] (moe_epilogue.cuh)
};

// Output row `row` of `token` from its slots' float32 products y[0 .. slots): the routed
// slots' weighted sum in slot order, each expert's product rounded to bf16 (kBias: plus its
// down bias a.bias, in bf16); with a shared expert transformers' bf16(routed) + bf16(gate *
// bf16(shared)); then written as bf16.
template <bool kBias = false>
__device__ __forceinline__ void write_row(const DownArgs& a, const int32_t* ids,
                                          const float* weights, const float* y, int slots,
                                          int token, int row) {
  float acc_row = 0.f;
  for (int j = 0; j < a.top_k; ++j)
    if (valid_expert(ids[j], a.experts)) {
      float yj = atlas::round_bf16(y[j]);
      if constexpr (kBias) yj = atlas::moe::epilogue_down(yj, a.bias, ids[j], row, a.hidden);
      acc_row = fmaf(weights[j], yj, acc_row);
    }
  if (slots > a.top_k) {
    float shared = 0.f;
    for (int c = a.top_k; c < slots; ++c) shared += y[c];
    acc_row = atlas::round_bf16(acc_row) +
              atlas::round_bf16(weights[a.top_k] * atlas::round_bf16(shared));
  }
  a.out[static_cast<size_t>(token) * a.hidden + row] = atlas::f32_to_bf16(acc_row);
}

// One item's weight row: `n` of its chunks are real (0: a dead item, past the rows or with an
// expert id outside [0, experts); a shared chunk may be partial), `slot` picks its act row.
struct DownItem {
  const uint4* w;
  int n, slot;
};

__device__ __forceinline__ DownItem down_item(const DownArgs& a, const int32_t* ids, int i,
                                              int items, int slots, int row0, int row_end,
                                              int kc) {
  const int r = i / slots, j = i - r * slots, row = row0 + r;
  if (i >= items || row >= row_end) return DownItem{nullptr, 0, 0};
  if (j >= a.top_k) {  // shared chunk c: columns [c inter, ...) of the shared expert's row
    const int c = j - a.top_k, sh_kc = a.shared.inter / 8;
    return DownItem{reinterpret_cast<const uint4*>(a.shared.w_down) +
                        static_cast<size_t>(row) * sh_kc + c * kc,
                    max(0, min(kc, sh_kc - c * kc)), j};
  }
  const int e = ids[j];
  if (!valid_expert(e, a.experts)) return DownItem{nullptr, 0, j};
  return DownItem{reinterpret_cast<const uint4*>(a.w) +
                      (static_cast<size_t>(e) * a.hidden + row) * kc, kc, j};
}

// Chunks lane + 32 (s0 + s), s < kBatch, of every item (the ones past an item's end are not
// loaded and never used). kBeforeWait: the loads precede the PDL wait (atlas::ld_prefetch).
template <bool kBeforeWait, int kItems, int kBatch>
__device__ __forceinline__ void load_down_batch(const DownItem (&it)[kItems], int s0,
                                                uint4 (&wv)[kItems][kBatch]) {
  const int lane = threadIdx.x & 31;
  const uint64_t stream = atlas::l2_stream_policy();  // the experts' L2 policy
#pragma unroll
  for (int m = 0; m < kItems; ++m)
#pragma unroll
    for (int s = 0; s < kBatch; ++s) {
      const int c = lane + 32 * (s0 + s);
      if (c < it[m].n)
        wv[m][s] = atlas::ld_weight<kBeforeWait>(it[m].w + c, stream);
    }
}

// Block (bx, t): output rows [bx rows, (bx + 1) rows) of token t, in groups of
// rows_per_group rows. The token's routing (ids, weights: the router's output, two launches
// back) is read before the PDL wait: the gate/up launch between waits for the router before
// it lets this launch start (pdl_launch_dependents after pdl_wait), so it is complete and
// visible; read through L2. So the first group's weight rows are requested before the wait,
// while gate/up is still running, and each later group's right after the previous group's
// products (before the reduction and its barriers). After the wait the token's act rows
// (slots x inter bf16, gate/up's output) are staged in shared memory (`act_s`, dynamic: ops/
// moe.py down_smem), so the products read them at shared-memory latency, never a dependent
// L2 round trip per chunk. The products of a group land in `ys`, then thread r sums row r's
// slots in slot order in float32 (bit-reproducible, no atomics). kSteps: the row's chunk
// steps, 0 = run-time (more than four: looped in batches of DownTile<0>::kBatch).
// Not inlined: each instantiation gets its own register allocation (inlined into one kernel,
// the five tile shapes together spilled under the 128-register bound; apart none does).
// kBias: the rows take the down bias (a.bias: write_row<true>).
template <int kSteps, bool kBias = false>
__device__ __noinline__ void down_block(const DownArgs a) {
  using Tile = DownTile<kSteps>;
  constexpr int kItems = Tile::kItems, kBatch = Tile::kBatch;
  extern __shared__ uint4 act_s[];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, token = blockIdx.y;
  const int top_k = a.top_k, slots = top_k + a.shared.slots, kc = a.inter / 8;
  const int steps = kSteps > 0 ? kSteps : (kc + 31) / 32;
  const int rpg = max(1, kWarps * kItems / slots), items = rpg * slots;
  const int groups = (a.rows + rpg - 1) / rpg;
  const int row_end = min(a.hidden, static_cast<int>(blockIdx.x + 1) * a.rows);
  __shared__ int32_t ids[kMaxSlots];
  __shared__ float weights[kMaxSlots];
  __shared__ float ys[kWarps * kMaxDownItems];  // float32 product of each item of a group
  if (static_cast<int>(threadIdx.x) < slots) {
    ids[threadIdx.x] = __ldcg(a.topk_ids + static_cast<size_t>(token) * slots + threadIdx.x);
    weights[threadIdx.x] = __ldcg(a.topk_weights + static_cast<size_t>(token) * slots + threadIdx.x);
  }
  __syncthreads();

  DownItem it[kItems];
  uint4 wv[kItems][kBatch];
#pragma unroll
  for (int m = 0; m < kItems; ++m)
    it[m] = down_item(a, ids, warp + kWarps * m, items, slots, blockIdx.x * a.rows, row_end,
                      kc);
  load_down_batch<true>(it, 0, wv);
  atlas::pdl_enter();

  const uint4* act = reinterpret_cast<const uint4*>(a.act) + static_cast<size_t>(token) * slots * kc;
  atlas::stage_to_shared<3>(act_s, act, slots * kc);  // 3: the act of 8 x 768 in one trip
  __syncthreads();

  for (int g = 0; g < groups; ++g) {
    const int row0 = blockIdx.x * a.rows + g * rpg;
    float acc[kItems];
#pragma unroll
    for (int m = 0; m < kItems; ++m) acc[m] = 0.f;
    for (int s0 = 0; s0 < steps; s0 += kBatch) {
#pragma unroll
      for (int m = 0; m < kItems; ++m)
#pragma unroll
        for (int s = 0; s < kBatch; ++s) {
          const int c = lane + 32 * (s0 + s);
          // the act chunk is read whether or not the item has it (a valid address), so the
          // shared loads are not serialized behind the predicate
          const uint4 x = act_s[it[m].slot * kc + min(c, kc - 1)];
          if (c < it[m].n) acc[m] = dot8(wv[m][s], x, acc[m]);
        }
      if (s0 + kBatch < steps) {
        load_down_batch<false>(it, s0 + kBatch, wv);
      } else if (g + 1 < groups) {  // the next group's first batch, before this one's sums
#pragma unroll
        for (int m = 0; m < kItems; ++m)
          it[m] = down_item(a, ids, warp + kWarps * m, items, slots, row0 + rpg, row_end, kc);
        load_down_batch<false>(it, 0, wv);
      }
    }
#pragma unroll
    for (int m = 0; m < kItems; ++m) {
      const float y = atlas::warp_sum(acc[m]);
      const int i = warp + kWarps * m;
      if (lane == 0 && i < items) ys[i] = y;
    }
    __syncthreads();
    const int r = threadIdx.x, row = row0 + r;
    if (r < rpg && row < row_end)
      write_row<kBias>(a, ids, weights, ys + r * slots, slots, token, row);
    __syncthreads();  // ys is the next group's
  }
}

__device__ __forceinline__ DownArgs down_args(
    const __nv_bfloat16* act, const __nv_bfloat16* w, const int32_t* topk_ids,
    const float* topk_weights, __nv_bfloat16* out, uint32_t tokens, uint32_t top_k,
    uint32_t hidden, uint32_t inter, uint32_t experts, uint32_t rows,
    const __nv_bfloat16* shared_down, uint32_t shared_slots, uint32_t shared_inter) {
  return DownArgs{act, w, topk_ids, topk_weights, out,
                  SharedExpert{nullptr, shared_down, static_cast<int>(shared_slots),
                               static_cast<int>(shared_inter)},
                  static_cast<int>(tokens), static_cast<int>(top_k), static_cast<int>(hidden),
                  static_cast<int>(inter), static_cast<int>(experts), static_cast<int>(rows)};
}

// grid (ceil(hidden / rows), tokens): blockIdx.y is a token; the tile for the row's chunk
// steps. The PDL wait is in down_block (ptx_entries follows the call).
template <bool kBias = false>
__device__ __forceinline__ void down_dispatch(const DownArgs& a) {
  switch ((a.inter / 8 + 31) / 32) {  // the row's chunk steps: a tile shape per count
    case 1: down_block<1, kBias>(a); break;
    case 2: down_block<2, kBias>(a); break;
    case 3: down_block<3, kBias>(a); break;
    case 4: down_block<4, kBias>(a); break;
    default: down_block<0, kBias>(a); break;
  }
}


// ---- down as a GEMV (the default at batch 1; ATLAS_MOE_DOWN_GEMV=0: down_block above) -------
// Block (bx, t): output rows [kGemvRows bx, kGemvRows (bx + 1)) of token t. A row's work is
// the concatenation of its slots' weight rows, n = slots x inter / 8 16-byte chunks (chunk
// i = j kc + c: column chunk c of slot j's row); thread t takes chunks t + 256 u of every row
// of the block, kU of them at once, so each thread has kU x kGemvRows loads in flight and the
// block one DRAM round trip for all of its rows (the dense GEMV's scheme: no row groups
// pipelined behind each other, no act staging; the grid is many short blocks, ops/moe.py
// down_uses_gemv). kc is a multiple of 32 (ops/moe.py checks), so the 32 chunks of a warp
// lie in one slot: each warp's (chunk batch, row) sums are one value of one slot, reduced
// with the GEMV's reduce-scatter into part[g][r] (g = chunk / 32, the warp-wide chunk group),
// then thread (r, j) adds slot j's groups in order and write_row forms the weighted sum: a
// fixed order everywhere, bit-reproducible. The routing is read before the PDL wait (as
// down_block: the gate/up launch between waits for the router before it lets this one
// start), so the weights are requested before it; act (L2) and the residual after it.
constexpr int kGemvRows = 4;          // ops/moe.py DOWN_GEMV_ROWS
constexpr int kGemvMaxGroups = 1024;  // ops/moe.py DOWN_GEMV_MAX_GROUPS: slots x kc / 32

// Chunk i of a block's rows: the address of row 0's chunk (row r's: + r stride), or live
// false (past the row's n chunks, an id outside [0, experts), past the shared expert's width).
struct GemvChunk {
  const uint4* w;
  size_t stride;
  bool live;
};

__device__ __forceinline__ GemvChunk down_gemv_chunk(const DownArgs& a, const int32_t* ids,
                                                     int i, int n, int kc) {
  if (i >= n) return GemvChunk{nullptr, 0, false};
  const int j = i / kc, c = i - j * kc;
  if (j >= a.top_k) {  // shared chunk j - top_k: columns [(j - top_k) inter, ...) of its rows
    const int sh_kc = a.shared.inter / 8, col = (j - a.top_k) * kc + c;
    return GemvChunk{reinterpret_cast<const uint4*>(a.shared.w_down) + col,
                     static_cast<size_t>(sh_kc), col < sh_kc};
  }
  const int e = ids[j];
  if (!valid_expert(e, a.experts)) return GemvChunk{nullptr, 0, false};
  return GemvChunk{reinterpret_cast<const uint4*>(a.w) +
                       static_cast<size_t>(e) * a.hidden * kc + c,
                   static_cast<size_t>(kc), true};
}

// Batch b's chunks (t + 256 (kU b + u)) of rows row0 .. row0 + rows - 1 (dead ones: zeros).
template <bool kBeforeWait, int kU, int kRows>
__device__ __forceinline__ void load_gemv_batch(const DownArgs& a, const int32_t* ids, int b,
                                                int n, int kc, int row0, int rows,
                                                GemvChunk (&ch)[kU],
                                                uint4 (&wv)[kU][kRows]) {
  const uint64_t stream = atlas::l2_stream_policy();  // the experts' L2 policy
#pragma unroll
  for (int u = 0; u < kU; ++u) {
    ch[u] = down_gemv_chunk(a, ids, threadIdx.x + kThreads * (kU * b + u), n, kc);
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      if (!ch[u].live || r >= rows) {
        wv[u][r] = make_uint4(0u, 0u, 0u, 0u);
        continue;
      }
      const uint4* p = ch[u].w + (row0 + r) * ch[u].stride;
      wv[u][r] = atlas::ld_weight<kBeforeWait>(p, stream);
    }
  }
}

// The block's shared memory, declared once by the entry point (a __noinline__ function's
// own __shared__ arrays are allocated per instantiation, side by side).
struct GemvSmem {
  int32_t ids[kMaxSlots];
  float weights[kMaxSlots];
  float part[kGemvMaxGroups][kGemvRows];  // group g's sum for row r
  float ys[kGemvRows][kMaxSlots];         // slot j's product for row r
};

// kU: chunks of a row a thread holds at once (ceil(n / 256), at most 4: longer rows take
// batches of 4 one after the other). The block's rows [bx a.rows, (bx + 1) a.rows) go in
// tiles of kGemvRows, one unit (tile, batch) at a time: the next unit's weights (the next
// batch, or the next tile's first) are requested right after this unit's products, before
// its reduction, the slot sums and the rows' writes, so a block of several tiles keeps its
// loads in flight from one tile to the next (one wave of blocks, one prologue each).
// kRoute (moe_down_gemv_route_*): the token's routing from the logits (`route`, warp 0,
// before the wait as the topk reads it replaces) instead of topk_ids / topk_weights.
template <int kU, bool kRoute>
__device__ __noinline__ void down_gemv_block(const DownArgs a, GemvSmem& sm,
                                             const LogitRouting route) {
  using atlas::gemv::pow2_at_least;
  constexpr int V = pow2_at_least(kU * kGemvRows);  // reduce-scatter width (u r at u R + r)
  const int lane = threadIdx.x & 31, token = blockIdx.y;
  const int slots = a.top_k + a.shared.slots, kc = a.inter / 8, n = slots * kc;
  const int first = blockIdx.x * a.rows, end = min(a.hidden, first + a.rows);
  const int batches = (n + kU * kThreads - 1) / (kU * kThreads);
  const int units = (end - first + kGemvRows - 1) / kGemvRows * batches;
  int32_t* ids = sm.ids;
  float* weights = sm.weights;
  if (a.rows % kGemvRows != 0) __trap();  // ops/moe.py passes whole tiles
  if constexpr (kRoute) {
    if (threadIdx.x < 32)
      route_from_logits(route, token, ids, weights, a.experts, a.top_k, a.shared.slots);
  } else if (static_cast<int>(threadIdx.x) < slots) {
    ids[threadIdx.x] = __ldcg(a.topk_ids + static_cast<size_t>(token) * slots + threadIdx.x);
    weights[threadIdx.x] = __ldcg(a.topk_weights + static_cast<size_t>(token) * slots + threadIdx.x);
  }
  __syncthreads();
  // unit q: tile q / batches (rows row0(q) .. + tile_rows(q)), batch q % batches
  auto row0 = [&](int q) { return first + (q / batches) * kGemvRows; };
  auto tile_rows = [&](int q) { return min(kGemvRows, end - row0(q)); };
  GemvChunk ch[kU];
  uint4 wv[kU][kGemvRows];
  load_gemv_batch<true>(a, ids, 0, n, kc, first, tile_rows(0), ch, wv);
  atlas::pdl_enter();
  const uint4* act = reinterpret_cast<const uint4*>(a.act) + static_cast<size_t>(token) * n;
  for (int q = 0; q < units; ++q) {
    const int b = q % batches, r0 = row0(q), rows = tile_rows(q);
    uint4 xv[kU];
#pragma unroll
    for (int u = 0; u < kU; ++u) {
      const int i = threadIdx.x + kThreads * (kU * b + u);
      if (ch[u].live) xv[u] = __ldcg(act + i);
    }
    float acc[V];
#pragma unroll
    for (int v = 0; v < V; ++v) acc[v] = 0.f;
#pragma unroll
    for (int u = 0; u < kU; ++u)
#pragma unroll
      for (int r = 0; r < kGemvRows; ++r)
        if (ch[u].live && r < rows) acc[u * kGemvRows + r] = dot8(wv[u][r], xv[u], 0.f);
    if (q + 1 < units)
      load_gemv_batch<false>(a, ids, (q + 1) % batches, n, kc, row0(q + 1), tile_rows(q + 1),
                             ch, wv);
    const float s = atlas::gemv::warp_reduce_scatter<V>(acc, lane);
    constexpr int kLanesPerValue = 32 / V;
    const int v = lane / kLanesPerValue, u = v / kGemvRows, r = v % kGemvRows;
    const int g = (kU * b + u) * kWarps + (threadIdx.x >> 5);  // the warp's chunk group
    if (lane % kLanesPerValue == 0 && v < kU * kGemvRows && 32 * g < n) sm.part[g][r] = s;
    if (b + 1 < batches) continue;
    __syncthreads();  // the tile's groups are complete
    const int per_slot = kc / 32;  // warp groups of one slot's row
    for (int i = threadIdx.x; i < kGemvRows * slots; i += kThreads) {
      const int rr = i / slots, j = i - rr * slots;
      float y = 0.f;
      for (int k = 0; k < per_slot; ++k) y += sm.part[j * per_slot + k][rr];
      sm.ys[rr][j] = y;
    }
    __syncthreads();  // ys complete; part free for the next tile
    if (static_cast<int>(threadIdx.x) < rows)
      write_row(a, ids, weights, sm.ys[threadIdx.x], slots, token, r0 + threadIdx.x);
  }
}

// grid (ceil(hidden / rows_per_block), tokens); kU by the row's chunks per thread.
template <bool kRoute>
__device__ __forceinline__ void down_gemv_run(const DownArgs& a, GemvSmem& sm,
                                              const LogitRouting& route) {
  const int n = (a.top_k + a.shared.slots) * (a.inter / 8);
  switch ((n + kThreads - 1) / kThreads) {
    case 1: down_gemv_block<1, kRoute>(a, sm, route); break;
    case 2: down_gemv_block<2, kRoute>(a, sm, route); break;
    case 3: down_gemv_block<3, kRoute>(a, sm, route); break;
    default: down_gemv_block<4, kRoute>(a, sm, route); break;
  }
}

template <bool kRoute = false>
__device__ __forceinline__ void down_gemv_dispatch(const DownArgs& a,
                                                   const LogitRouting& route = LogitRouting{}) {
  __shared__ GemvSmem sm;
  down_gemv_run<kRoute>(a, sm, route);
}

// One chunk-step count's code only (the _s1 .. _s4 entries, ATLAS_MOE_DOWN_ONE_STEP; ops/moe.py
// down_gemv_steps): down_gemv_run's case for kSteps, trapping on a launch of another count
// (the attention's early entries measured one head dim's code against both's faster on the
// same path, gpu129).
template <int kSteps>
__device__ __forceinline__ void down_gemv_steps(const DownArgs& a) {
  __shared__ GemvSmem sm;
  const int steps = ((a.top_k + a.shared.slots) * (a.inter / 8) + kThreads - 1) / kThreads;
  if (kSteps < 4 ? steps != kSteps : steps < 4) __trap();
  down_gemv_block<kSteps, false>(a, sm, LogitRouting{});
}

}  // namespace

namespace {

// The column-loop gate/up entries' body; kEpi: with the expert epilogue `epi`
// (moe_gate_up_epilogue_bf16), whose run-time hidden instantiations alone it compiles.
template <bool kEpi>
__device__ __forceinline__ void gate_up_silu(const __nv_bfloat16* x,
                                             const __nv_bfloat16* w_gate_up,
                                             const int32_t* topk_ids, __nv_bfloat16* act,
                                             uint32_t tokens, uint32_t top_k, uint32_t hidden,
                                             uint32_t inter, uint32_t experts,
                                             const __nv_bfloat16* shared_gate_up,
                                             uint32_t shared_slots, uint32_t shared_inter,
                                             const atlas::moe::Epilogue& epi) {
  // pdl_wait before pdl_launch_dependents: the down launch after this one reads the routing
  // before its own wait (see the header)
  atlas::pdl_enter();
  const int slots = static_cast<int>(top_k + shared_slots), n = static_cast<int>(tokens) * slots;
  const int p = blockIdx.y, lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (p >= n) return;
  __shared__ int32_t ids[kMaxPairs];
  __shared__ int pairs[kGroupPairs];
  __shared__ int n_pairs;
  for (int q = threadIdx.x; q < n; q += blockDim.x) ids[q] = __ldcg(topk_ids + q);
  __syncthreads();
  const int key = pair_key(ids, p, slots, top_k, experts);
  // p's rank among the pairs with its expert (n <= kMaxPairs = blockDim.x: one pair a
  // thread): the pairs of one expert go kGroupPairs to a block, led by ranks 0, kGroupPairs,
  // ...; the others' blocks exit. A cap, not one block for all of them: the leader of the
  // shared expert (every token's) would do 8 pairs' products alone while the rest stream.
  const int group = tokens == 1 ? 1 : kGroupPairs;
  const int q = threadIdx.x;
  const int rank = __syncthreads_count(q < p && pair_key(ids, q, slots, top_k, experts) == key);
  if (rank % group != 0) return;
  extern __shared__ uint4 xs[];  // [tokens][hidden / 8]: ops/moe.py gate_up_smem
  // the pair list and x, after the first weight loads are out (gate_up_cols)
  auto prepare = [&]() {
    if (warp == 0) {  // the next `group` pairs p.. with this expert, in order
      const int count = collect_pairs(ids, p, n, slots, top_k, experts, key, group, pairs,
                                      nullptr);
      if (lane == 0) n_pairs = count;
    }
    atlas::stage_to_shared<4>(xs, reinterpret_cast<const uint4*>(x),
                              static_cast<int>(tokens * hidden / 8));
    __syncthreads();
    return static_cast<int>(n_pairs);
  };
  const SharedExpert sh{shared_gate_up, nullptr, static_cast<int>(shared_slots),
                        static_cast<int>(shared_inter)};
  const int h = static_cast<int>(hidden), in = static_cast<int>(inter), ex = static_cast<int>(experts);
  // key < 0: an id outside [0, experts): its act is zero (gate_up_cols writes zeros for a
  // column that is not live, and no weight row is read for it)
  const int e = key < 0 ? ex + static_cast<int>(shared_slots) : key;
  if constexpr (kEpi) {  // gpt-oss: the run-time hidden instantiations, with the epilogue
    if (tokens == 1)
      gate_up_cols<0, 1, true>(xs, w_gate_up, pairs, prepare, e, act, slots, h, in, ex, sh, epi);
    else
      gate_up_cols<0, kGroupPairs, true>(xs, w_gate_up, pairs, prepare, e, act, slots, h, in,
                                         ex, sh, epi);
    return;
  }
  if (tokens == 1) {
    if (kLeaf && hidden == kLeafHidden)
      gate_up_cols<kLeafHidden, 1, false>(xs, w_gate_up, pairs, prepare, e, act, slots, h, in,
                                          ex, sh, epi);
    else
      gate_up_cols<0, 1, false>(xs, w_gate_up, pairs, prepare, e, act, slots, h, in, ex, sh,
                                epi);
  } else {
    if (kLeaf && hidden == kLeafHidden)
      gate_up_cols<kLeafHidden, kGroupPairs, false>(xs, w_gate_up, pairs, prepare, e, act,
                                                    slots, h, in, ex, sh, epi);
    else
      gate_up_cols<0, kGroupPairs, false>(xs, w_gate_up, pairs, prepare, e, act, slots, h, in,
                                          ex, sh, epi);
  }
}

}  // namespace

// At least 2 blocks per SM (at most 128 registers). No spills on sm_90a or sm_121.
extern "C" __global__ void __launch_bounds__(kThreads, 2)
    moe_gate_up_silu_bf16(const __nv_bfloat16* x, const __nv_bfloat16* w_gate_up,
                          const int32_t* topk_ids, __nv_bfloat16* act, uint32_t tokens,
                          uint32_t top_k, uint32_t hidden, uint32_t inter, uint32_t experts,
                          const __nv_bfloat16* shared_gate_up, uint32_t shared_slots,
                          uint32_t shared_inter) {
  gate_up_silu<false>(x, w_gate_up, topk_ids, act, tokens, top_k, hidden, inter, experts,
                      shared_gate_up, shared_slots, shared_inter,
                      atlas::moe::Epilogue{nullptr, 0.f, 0.f});
}

// moe_gate_up_silu_bf16 with the expert epilogue (gpt-oss; moe_epilogue.cuh): expert_bias
// bf16 [experts, 2 inter] (or null) added to the routed slots' gate and up sums, then the
// clamped GLU where glu_limit > 0. The same grid, threads and shared memory.
extern "C" __global__ void __launch_bounds__(kThreads, 2)
    moe_gate_up_epilogue_bf16(const __nv_bfloat16* x, const __nv_bfloat16* w_gate_up,
                              const int32_t* topk_ids, __nv_bfloat16* act, uint32_t tokens,
                              uint32_t top_k, uint32_t hidden, uint32_t inter, uint32_t experts,
                              const __nv_bfloat16* shared_gate_up, uint32_t shared_slots,
                              uint32_t shared_inter, const __nv_bfloat16* expert_bias,
                              float glu_alpha, float glu_limit) {
  gate_up_silu<true>(x, w_gate_up, topk_ids, act, tokens, top_k, hidden, inter, experts,
                     shared_gate_up, shared_slots, shared_inter,
                     atlas::moe::Epilogue{expert_bias, glu_alpha, glu_limit});
}

extern "C" __global__ void __launch_bounds__(kThreads, 2)
    moe_down_sum_bf16(const __nv_bfloat16* act, const __nv_bfloat16* w_down,
                      const int32_t* topk_ids, const float* topk_weights, __nv_bfloat16* out,
                      uint32_t tokens, uint32_t top_k, uint32_t hidden, uint32_t inter,
                      uint32_t experts, uint32_t rows_per_block, const __nv_bfloat16* shared_down,
                      uint32_t shared_slots, uint32_t shared_inter) {
  down_dispatch(down_args(act, w_down, topk_ids, topk_weights, out, tokens, top_k, hidden, inter,
                          experts, rows_per_block, shared_down, shared_slots, shared_inter));
}

// moe_down_sum_bf16 with the down bias (gpt-oss; moe_epilogue.cuh): expert_bias bf16
// [experts, hidden] (or null) added to each routed slot's bf16 product before it is weighted
// (down_block's kBias instantiations). The same grid, threads and shared memory.
extern "C" __global__ void __launch_bounds__(kThreads, 2)
    moe_down_sum_bias_bf16(const __nv_bfloat16* act, const __nv_bfloat16* w_down,
                           const int32_t* topk_ids, const float* topk_weights,
                           __nv_bfloat16* out, uint32_t tokens, uint32_t top_k,
                           uint32_t hidden, uint32_t inter, uint32_t experts,
                           uint32_t rows_per_block, const __nv_bfloat16* shared_down,
                           uint32_t shared_slots, uint32_t shared_inter,
                           const __nv_bfloat16* expert_bias) {
  DownArgs a = down_args(act, w_down, topk_ids, topk_weights, out, tokens, top_k, hidden, inter,
                         experts, rows_per_block, shared_down, shared_slots, shared_inter);
  a.bias = expert_bias;  // null: write_row<true> adds nothing
  down_dispatch<true>(a);
}

// The down GEMV twin of moe_down_sum_bf16 (down_gemv_block): the same arguments, grid
// (ceil(hidden / rows_per_block), tokens), rows_per_block a multiple of DOWN_GEMV_ROWS
// (ops/moe.py down_gemv_rows), no dynamic shared memory; slots x inter / 8 a multiple of 32
// chunks (ops/moe.py down_uses_gemv).
extern "C" __global__ void __launch_bounds__(kThreads, 2)
    moe_down_gemv_sum_bf16(const __nv_bfloat16* act, const __nv_bfloat16* w_down,
                           const int32_t* topk_ids, const float* topk_weights,
                           __nv_bfloat16* out, uint32_t tokens, uint32_t top_k, uint32_t hidden,
                           uint32_t inter, uint32_t experts, uint32_t rows_per_block,
                           const __nv_bfloat16* shared_down, uint32_t shared_slots,
                           uint32_t shared_inter) {
  down_gemv_dispatch(down_args(act, w_down, topk_ids, topk_weights, out, tokens, top_k, hidden,
                               inter, experts, rows_per_block, shared_down, shared_slots,
                               shared_inter));
}

// moe_down_gemv_sum_bf16's twins holding one chunk-step count's code (a thread's chunks of a
// row: ceil(slots x inter / 8 / 256), 4 and more on _s4; ATLAS_MOE_DOWN_ONE_STEP=1): the same
// arguments and outputs.
extern "C" __global__ void __launch_bounds__(kThreads, 2)
    moe_down_gemv_sum_s1_bf16(const __nv_bfloat16* act, const __nv_bfloat16* w_down,
           const int32_t* topk_ids, const float* topk_weights, __nv_bfloat16* out,
           uint32_t tokens, uint32_t top_k, uint32_t hidden, uint32_t inter,
           uint32_t experts, uint32_t rows_per_block, const __nv_bfloat16* shared_down,
           uint32_t shared_slots, uint32_t shared_inter) {
  down_gemv_steps<1>(down_args(act, w_down, topk_ids, topk_weights, out, tokens, top_k,
                             hidden, inter, experts, rows_per_block, shared_down,
                             shared_slots, shared_inter));
}

extern "C" __global__ void __launch_bounds__(kThreads, 2)
    moe_down_gemv_sum_s2_bf16(const __nv_bfloat16* act, const __nv_bfloat16* w_down,
           const int32_t* topk_ids, const float* topk_weights, __nv_bfloat16* out,
           uint32_t tokens, uint32_t top_k, uint32_t hidden, uint32_t inter,
           uint32_t experts, uint32_t rows_per_block, const __nv_bfloat16* shared_down,
           uint32_t shared_slots, uint32_t shared_inter) {
  down_gemv_steps<2>(down_args(act, w_down, topk_ids, topk_weights, out, tokens, top_k,
                             hidden, inter, experts, rows_per_block, shared_down,
                             shared_slots, shared_inter));
}

extern "C" __global__ void __launch_bounds__(kThreads, 2)
    moe_down_gemv_sum_s3_bf16(const __nv_bfloat16* act, const __nv_bfloat16* w_down,
           const int32_t* topk_ids, const float* topk_weights, __nv_bfloat16* out,
           uint32_t tokens, uint32_t top_k, uint32_t hidden, uint32_t inter,
           uint32_t experts, uint32_t rows_per_block, const __nv_bfloat16* shared_down,
           uint32_t shared_slots, uint32_t shared_inter) {
  down_gemv_steps<3>(down_args(act, w_down, topk_ids, topk_weights, out, tokens, top_k,
                             hidden, inter, experts, rows_per_block, shared_down,
                             shared_slots, shared_inter));
}

extern "C" __global__ void __launch_bounds__(kThreads, 2)
    moe_down_gemv_sum_s4_bf16(const __nv_bfloat16* act, const __nv_bfloat16* w_down,
           const int32_t* topk_ids, const float* topk_weights, __nv_bfloat16* out,
           uint32_t tokens, uint32_t top_k, uint32_t hidden, uint32_t inter,
           uint32_t experts, uint32_t rows_per_block, const __nv_bfloat16* shared_down,
           uint32_t shared_slots, uint32_t shared_inter) {
  down_gemv_steps<4>(down_args(act, w_down, topk_ids, topk_weights, out, tokens, top_k,
                             hidden, inter, experts, rows_per_block, shared_down,
                             shared_slots, shared_inter));
}

// The down GEMV twin routing from the logits (LogitRouting; ops/moe.py routes_in_experts):
// the same arguments with the router's logits, shared logits, bias and weight rule in place of
// topk_ids / topk_weights, read before the PDL wait (the router is two launches back).
extern "C" __global__ void __launch_bounds__(kThreads, 2)
    moe_down_gemv_route_sum_bf16(const __nv_bfloat16* act, const __nv_bfloat16* w_down,
                                 const float* logits, const float* shared_logits,
                                 const float* bias, __nv_bfloat16* out, uint32_t tokens,
                                 uint32_t top_k, uint32_t hidden, uint32_t inter,
                                 uint32_t experts, uint32_t rows_per_block,
                                 const __nv_bfloat16* shared_down, uint32_t shared_slots,
                                 uint32_t shared_inter, uint32_t renormalize, float scale,
                                 uint32_t sigmoid) {
  down_gemv_dispatch<true>(
      down_args(act, w_down, nullptr, nullptr, out, tokens, top_k, hidden, inter, experts,
                rows_per_block, shared_down, shared_slots, shared_inter),
      LogitRouting{logits, bias, shared_logits, renormalize, scale, sigmoid});
}

// The gate/up GEMV (see gate_up_gemv): grid (ceil(inter / 2), tokens * slots), ops/moe.py
// gemv_threads(hidden) threads, no dynamic shared memory. _single: one token, 4 blocks per
// SM (64 registers). The batch entry holds 4 pairs' accumulators: 3 blocks per SM (80
// registers), 48 KB in flight per SM where the column-loop kernel keeps ~128 KB, so batches
// of 2..8 take it only where ATLAS_MOE_GATE_UP_GEMV_MAX_M says (ops/moe.py).
extern "C" __global__ void __launch_bounds__(atlas::gemv::kMaxThreads, 4)
    moe_gate_up_gemv_bf16_single(const __nv_bfloat16* x, const __nv_bfloat16* w_gate_up,
                                 const int32_t* topk_ids, __nv_bfloat16* act, uint32_t tokens,
                                 uint32_t top_k, uint32_t hidden, uint32_t inter,
                                 uint32_t experts, const __nv_bfloat16* shared_gate_up,
                                 uint32_t shared_slots, uint32_t shared_inter) {
  if (tokens != 1) __trap();  // ops/moe.py picks it for batch 1 only
  gate_up_gemv_single(x, w_gate_up, topk_ids, act, static_cast<int>(top_k),
                      static_cast<int>(hidden), static_cast<int>(inter), static_cast<int>(experts),
                      SharedExpert{shared_gate_up, nullptr, static_cast<int>(shared_slots),
                                   static_cast<int>(shared_inter)});
}

// The tiled batch-1 entry (gate_up_gemv_tiles): grid (ceil(ceil(inter / 2) / tiles), slots),
// ops/moe.py gate_up_gemv_threads(hidden) threads, no dynamic shared memory; 64 registers as
// _single, 2 KB of shared memory (8 blocks of 128 threads an SM).
extern "C" __global__ void __launch_bounds__(atlas::gemv::kMaxThreads, 4)
    moe_gate_up_gemv_tiles_bf16(const __nv_bfloat16* x, const __nv_bfloat16* w_gate_up,
                                const int32_t* topk_ids, __nv_bfloat16* act, uint32_t tokens,
                                uint32_t top_k, uint32_t hidden, uint32_t inter,
                                uint32_t experts, const __nv_bfloat16* shared_gate_up,
                                uint32_t shared_slots, uint32_t shared_inter, uint32_t tiles) {
  if (tokens != 1 || tiles == 0) __trap();  // ops/moe.py picks it for batch 1 only
  gate_up_gemv_tiles<false>(x, w_gate_up, topk_ids, act, static_cast<int>(top_k),
                            static_cast<int>(hidden), static_cast<int>(inter),
                            static_cast<int>(experts),
                            SharedExpert{shared_gate_up, nullptr, static_cast<int>(shared_slots),
                                         static_cast<int>(shared_inter)},
                            static_cast<int>(tiles), LogitRouting{});
}

// The same, routing from the logits (LogitRouting; top-k ids only, so no renormalize / scale).
extern "C" __global__ void __launch_bounds__(atlas::gemv::kMaxThreads, 4)
    moe_gate_up_gemv_tiles_route_bf16(const __nv_bfloat16* x, const __nv_bfloat16* w_gate_up,
                                      const float* logits, const float* bias,
                                      __nv_bfloat16* act, uint32_t tokens, uint32_t top_k,
                                      uint32_t hidden, uint32_t inter, uint32_t experts,
                                      const __nv_bfloat16* shared_gate_up,
                                      uint32_t shared_slots, uint32_t shared_inter,
                                      uint32_t tiles, uint32_t sigmoid) {
  if (tokens != 1 || tiles == 0) __trap();  // ops/moe.py picks it for batch 1 only
  gate_up_gemv_tiles<true>(x, w_gate_up, nullptr, act, static_cast<int>(top_k),
                           static_cast<int>(hidden), static_cast<int>(inter),
                           static_cast<int>(experts),
                           SharedExpert{shared_gate_up, nullptr, static_cast<int>(shared_slots),
                                        static_cast<int>(shared_inter)},
                           static_cast<int>(tiles),
                           LogitRouting{logits, bias, nullptr, 0, 1.f, sigmoid});
}

extern "C" __global__ void __launch_bounds__(atlas::gemv::kMaxThreads, 3)
    moe_gate_up_gemv_bf16(const __nv_bfloat16* x, const __nv_bfloat16* w_gate_up,
                          const int32_t* topk_ids, __nv_bfloat16* act, uint32_t tokens,
                          uint32_t top_k, uint32_t hidden, uint32_t inter, uint32_t experts,
                          const __nv_bfloat16* shared_gate_up, uint32_t shared_slots,
                          uint32_t shared_inter) {
  gate_up_gemv_batch(x, w_gate_up, topk_ids, act, static_cast<int>(tokens),
                     static_cast<int>(top_k), static_cast<int>(hidden), static_cast<int>(inter),
                     static_cast<int>(experts),
                     SharedExpert{shared_gate_up, nullptr, static_cast<int>(shared_slots),
                                  static_cast<int>(shared_inter)});
}
