// MoE gate/up for decode batches of 2..8 tokens on tensor cores: the batched GEMV's scheme
// (gemv_mma_core.cuh: mma.m16n8k16 with weight rows as A and activation rows as B, per-warp
// cp.async rings with K split over the 8 warps, a fixed-order reduction over warps) on the
// rows of the experts the batch selected.
//
// moe_gate_up_mma_bf16: the act of moe_gate_up_silu_bf16 (moe_decode.cu; the same arguments),
// act[t][j][i] = bf16(bf16(silu(bf16(g))) * bf16(u)) with g = x[t] . w_gate_up[e][i] and
// u = x[t] . w_gate_up[e][inter + i], e = topk_ids[t][j]; slot top_k + c of every token is
// the shared expert's column chunk c (columns [c inter, (c + 1) inter) of shared_gate_up,
// zero past shared_inter); an id outside [0, experts) gives zeros.
//
// Grid (ceil(inter / 16 / T), shared_slots + min(tokens x top_k, experts)), 256 threads,
// dynamic shared memory ring_bytes() (ops/moe.py gate_up_mma_smem). A column tile is 16 act
// columns; T = ceil((inter / 16) / gridDim.x) tiles a block (ops/moe.py gate_up_mma_tiles
// picks gridDim.x so the grid is about one wave of resident blocks). Block (bx, d) computes
// act column tiles [T bx, min(T bx + T, inter / 16)) of one distinct expert ("key", pair_key
// below): d < shared_slots is the shared expert's chunk d, d >= shared_slots the
// (d - shared_slots)-th distinct routed expert in ascending id order; blocks past the distinct
// experts the routing has exit after reading it. It reads the routing once, then streams its
// tiles in order. A tile's A tiles are its 16 columns' gate rows (tile 0) and up rows (tile 1),
// so lane (g, c) ends with g and u of the same (column, token) in acc[0] and acc[1] and the
// SwiGLU is formed in registers; its B tile the x rows of the tokens that selected the expert
// (at most 8: a token is one B row however many of its slots hold the expert), in ascending
// token order, rows past them zero-filled (nothing read). Each token's act is written to every
// slot of it that holds the expert. The weights of one (expert, column tile) are read once for
// the whole batch; x is read from L2 once per tile (at most 8 x hidden x 2 bytes against the
// tile's 32 x hidden x 2 of weights).
//
// Pipeline over the tiles: once a warp's stream_k of tile i drains its ring, the warp requests
// tile i + 1's first ring of weights (prologue_weights), then joins tile i's reduction over
// warps (its exchange buffer is static shared memory, not the ring) and warp 0 writes tile i's
// act, then prologue_x and stream_k of tile i + 1: the later tiles' DRAM round trip hides
// behind the reduction and the epilogue. Every tile's sums are formed as in a block of one
// tile (the same K split, mma order and reduction tree), so the act is bit for bit the same
// whatever T.
//
// PDL: the routed experts' ids are the router's output (the launch just before), so a routed
// block reads the routing, and requests any weight, only after atlas::pdl_enter(); the shared
// expert's blocks need no routing and request their first tile's first ring of weights before
// it (as moe_decode.cu's batch-1 GEMV does). pdl_enter waits before it lets the down launch
// start, which reads the routing before its own wait (moe_decode.cu's header).
//
// Block (bx, 0) also writes the zeros of every pair whose id lies outside [0, experts) in its
// columns (those pairs have no block: they are not distinct experts). A dead shared tile
// (columns past shared_inter: inter and shared_inter are multiples of 16, so a tile is wholly
// live or wholly dead; the dead tiles of a chunk follow its live ones) writes its zeros and
// reads no weights.
//
// Ring: 5 k-steps a warp (kRingBudget, 100 KiB a block) so that two blocks share an SM: one
// block's routing read, reductions and epilogues overlap the other's stream, and the grid's
// one wave can place its blocks two an SM. Preconditions (ops/moe.py): 2 <= tokens <= 8
// (1 works too), top_k + shared_slots <= 32, experts <= 512, hidden and inter multiples of 16,
// x and the weights 16-byte aligned.
#include "bf16_vec.cuh"
#include "gemv_mma_core.cuh"

namespace {

constexpr int kWarps = 8;             // ops/moe.py GATE_UP_MMA_THREADS / 32
constexpr int kCols = 16;             // act columns a block: ops/moe.py GATE_UP_MMA_COLS
constexpr int kTiles = 2;             // A tiles: the columns' gate rows, then their up rows
constexpr int kBTiles = 1;            // one B tile: the expert's tokens, at most 8
constexpr int kMaxStages = 8;         // ops/moe.py GATE_UP_MMA_MAX_STAGES
constexpr int kRingBudget = 102400;   // ops/moe.py GATE_UP_MMA_RING_BUDGET: 2 blocks an SM
constexpr int kMaxPairs = 256;        // DECODE_MAX_TOKENS x ROUTER_MAX_TOP_K (ops/moe.py)
constexpr int kKeyWords = 16;         // bitmap words of routed ids: ROUTER_MAX_EXPERTS / 32

using Ring = atlas::gemv_mma::RingShape<kWarps, kRingBudget, kMaxStages>;
constexpr int kStages = Ring::stages(kTiles, kBTiles);
constexpr int kSlots = atlas::gemv_mma::stage_slots(kTiles, kBTiles);
static_assert(kStages >= 2, "the ring must double-buffer");
static_assert(kTiles * 16 == 2 * kCols, "tile 0 holds the gate rows, tile 1 the up rows");

// The reduction's exchange buffer (4 KiB of static shared memory, apart from the rings: a
// warp requests the next tile's weights into its ring before the reduction).
using Exchange = float[kWarps / 2][kTiles * kBTiles * 4][32];

// The block's view of the routing, in static shared memory.
struct Routing {
  int key[kMaxPairs];          // pair_key of every pair (token t, slot j) at t * slots + j
  uint32_t bits[kKeyWords];    // routed experts present (bit e)
  int expert;                  // the block's key; -1: no expert (the block exits)
  uint32_t tokens;             // bit t: token t selected it
};

// The expert pair (token, slot) q reads: its routed id, experts + c for the shared chunk c
// (the same for every token), or -1 - q for an id outside [0, experts) (never shared).
__device__ __forceinline__ int pair_key(int id, int q, int slots, int top_k, int experts) {
  const int j = q % slots;
  if (j >= top_k) return experts + (j - top_k);
  return id >= 0 && id < experts ? id : -1 - q;
}

// Warp 0: the r-th (from 0) set bit of bits[0 .. kKeyWords), or -1 past the last one.
__device__ __forceinline__ int nth_key(const uint32_t* bits, int r, int lane) {
  const uint32_t word = lane < kKeyWords ? bits[lane] : 0u;
  const int own = __popc(word);
  int incl = own;  // inclusive prefix count of set bits over the lanes' words
#pragma unroll
  for (int d = 1; d < 32; d <<= 1) {
    const int v = __shfl_up_sync(0xffffffffu, incl, d);
    if (lane >= d) incl += v;
  }
  const int before = incl - own;
  const bool mine = r >= before && r < incl;
  int key = -1;
  if (mine) {  // drop the word's r - before lower set bits
    uint32_t w = word;
    for (int i = before; i < r; ++i) w &= w - 1u;
    key = 32 * lane + __ffs(w) - 1;
  }
  const unsigned holder = __ballot_sync(0xffffffffu, mine);
  return holder ? __shfl_sync(0xffffffffu, key, __ffs(holder) - 1) : -1;
}

// The n-th (from 0) set bit of mask (n < popc(mask)).
__device__ __forceinline__ int nth_bit(uint32_t mask, int n) {
  for (int i = 0; i < n; ++i) mask &= mask - 1u;
  return __ffs(mask) - 1;
}

__device__ __forceinline__ void gate_up_mma(const __nv_bfloat16* __restrict__ x,
                                            const __nv_bfloat16* __restrict__ w_gate_up,
                                            const int32_t* __restrict__ topk_ids,
                                            __nv_bfloat16* __restrict__ act, int tokens,
                                            int top_k, int hidden, int inter, int experts,
                                            const __nv_bfloat16* __restrict__ shared_gate_up,
                                            int shared_slots, int shared_inter) {
  extern __shared__ uint4 smem[];
  __shared__ Routing rt;
  __shared__ Exchange exchange;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2;
  const int slots = top_k + shared_slots, n = tokens * slots;
  const int d = blockIdx.y, col_tiles = inter / kCols;
  const int per = (col_tiles + static_cast<int>(gridDim.x) - 1) / static_cast<int>(gridDim.x);
  const int tile0 = min(per * static_cast<int>(blockIdx.x), col_tiles);
  const int tile_end = min(tile0 + per, col_tiles);  // this block's tiles [tile0, tile_end)
  const int col_lo = kCols * tile0, width = kCols * (tile_end - tile0);
  const int kc = hidden >> 3, steps = (kc + 3) >> 2;
  const int step0 = steps * warp / kWarps;
  const int count = steps * (warp + 1) / kWarps - step0;  // k-steps of this warp
  uint4* ring = smem + warp * kStages * kSlots;
  if (n > kMaxPairs || experts > 32 * kKeyWords) __trap();  // ops/moe.py checks both

  atlas::gemv_mma::LaneSources<kTiles, kBTiles, true> src;
  src.kc = kc;
  src.c = lane & 3;
  // The weight rows of the block's expert: gate row i at gate + i kc, up row i at up + i kc
  // (i from the chunk's / expert's column 0); tile t's A rows are those of columns 16 t ...
  const uint4* gate = nullptr;
  const uint4* up = nullptr;
  auto aim = [&](int tile) {
    const size_t row0 = static_cast<size_t>(kCols * tile);
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      src.wrow[0][h] = gate + (row0 + g + 8 * h) * kc;
      src.wrow[1][h] = up + (row0 + g + 8 * h) * kc;
    }
  };
  // The shared expert's chunk d: columns [d inter, d inter + inter) of its gate and up halves,
  // live below shared_inter; tiles [tile0, live_end) stream, [live_end, tile_end) are zeros.
  // No routing needed, so its first tile's first ring of weights is requested before the PDL
  // wait.
  const bool shared_block = d < shared_slots;
  int live_end = tile_end;
  if (shared_block) {
    live_end = min(max((shared_inter - d * inter) / kCols, tile0), tile_end);
    gate = reinterpret_cast<const uint4*>(shared_gate_up) + static_cast<size_t>(d) * inter * kc;
    up = gate + static_cast<size_t>(shared_inter) * kc;
    if (tile0 < live_end) {
      aim(tile0);
      atlas::gemv_mma::prologue_weights<kStages, kSlots>(src, ring, lane, step0, count);
    }
  }
  // pdl_wait before pdl_launch_dependents: the down launch after this one reads the routing
  // before its own wait
  atlas::pdl_enter();

  // The routing (after the wait: the router wrote it), once a block: every pair's key, the
  // routed experts' bitmap.
  if (threadIdx.x < kKeyWords) rt.bits[threadIdx.x] = 0u;
  __syncthreads();
  for (int q = threadIdx.x; q < n; q += blockDim.x) {
    const int key = pair_key(__ldcg(topk_ids + q), q, slots, top_k, experts);
    rt.key[q] = key;
    if (key >= 0 && key < experts) atomicOr(&rt.bits[key >> 5], 1u << (key & 31));  // a set
  }
  __syncthreads();
  if (warp == 0) {
    int key = experts + d;  // the shared chunk d
    if (!shared_block) key = nth_key(rt.bits, d - shared_slots, lane);
    bool has = false;  // lane t: whether token t selected `key` in any slot
    if (key >= 0 && lane < tokens)
      for (int j = 0; j < slots; ++j) has |= rt.key[lane * slots + j] == key;
    const uint32_t mask = __ballot_sync(0xffffffffu, has);
    if (lane == 0) {
      rt.expert = key;
      rt.tokens = mask;
    }
  }
  // Block (bx, 0): the zeros of the pairs whose id is outside [0, experts), in its columns.
  if (d == 0)
    for (int e = threadIdx.x; e < n * width; e += blockDim.x) {
      const int q = e / width;
      if (rt.key[q] < 0)
        act[static_cast<size_t>(q) * inter + col_lo + e % width] = atlas::f32_to_bf16(0.f);
    }
  __syncthreads();
  const int key = rt.expert;
  const uint32_t mask = rt.tokens;
  if (key < 0) return;  // past the distinct experts of this routing
  if (shared_block) {  // the tiles past the shared expert's width: zeros
    const int dead_lo = kCols * live_end, dead = kCols * tile_end - dead_lo;
    for (int e = threadIdx.x; e < tokens * dead; e += blockDim.x) {
      const int q = (e / dead) * slots + top_k + d;
      act[static_cast<size_t>(q) * inter + dead_lo + e % dead] = atlas::f32_to_bf16(0.f);
    }
  }
  const int rows = __popc(mask);  // B rows: the tokens that selected the expert, ascending
  src.xlive[0] = g < rows;
  src.xrow[0] = reinterpret_cast<const uint4*>(x) +
                static_cast<size_t>(g < rows ? nth_bit(mask, g) : 0) * kc;
  if (!shared_block && tile0 < live_end) {  // the routed expert's rows, known only now
    gate = reinterpret_cast<const uint4*>(w_gate_up) + static_cast<size_t>(key) * 2 * inter * kc;
    up = gate + static_cast<size_t>(inter) * kc;
    aim(tile0);
    atlas::gemv_mma::prologue_weights<kStages, kSlots>(src, ring, lane, step0, count);
  }

  for (int tile = tile0; tile < live_end; ++tile) {  // its first ring of weights requested
    float acc[kTiles][kBTiles][4];
#pragma unroll
    for (int t = 0; t < kTiles; ++t)
#pragma unroll
      for (int i = 0; i < 4; ++i) acc[t][0][i] = 0.f;
    atlas::gemv_mma::prologue_x<kStages, kSlots>(src, ring, lane, step0, count);
    atlas::gemv_mma::stream_k<kStages, kSlots>(src, ring, lane, step0, count, acc);
    // This warp's ring is drained (its own: no other warp reads it): the next tile's first
    // weights go out now, ahead of this tile's reduction and epilogue.
    if (tile + 1 < live_end) {
      aim(tile + 1);
      atlas::gemv_mma::prologue_weights<kStages, kSlots>(src, ring, lane, step0, count);
    }
    // Starts and ends with __syncthreads: the previous tile's reads of `exchange` are done.
    atlas::gemv_mma::reduce_over_warps(acc, exchange, warp, lane);

    // Warp 0: value i of A tile t is weight row 16 t + g + 8 (i >> 1) of the tile (tile 0: the
    // gate row of column col0 + g + 8 (i >> 1), tile 1: its up row), B row 2 c + (i & 1).
    if (warp == 0) {
      const int c = lane & 3, col0 = kCols * tile;
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int r = 2 * c + (i & 1);
        if (r >= rows) continue;
        const int t = nth_bit(mask, r), col = col0 + g + 8 * (i >> 1);
        const float gs = atlas::round_bf16(acc[0][0][i]), us = atlas::round_bf16(acc[1][0][i]);
        const __nv_bfloat16 v = atlas::f32_to_bf16(atlas::swiglu_f32(gs, us));
        for (int j = 0; j < slots; ++j)  // every slot of token t that holds the expert
          if (rt.key[t * slots + j] == key)
            act[static_cast<size_t>(t * slots + j) * inter + col] = v;
      }
    }
  }
}

}  // namespace

// Two blocks an SM (at most 128 registers, 2 x (100 KiB of rings + 5.1 KiB static)). No
// spills on sm_90a.
extern "C" __global__ void __launch_bounds__(kWarps * 32, 2)
    moe_gate_up_mma_bf16(const __nv_bfloat16* x, const __nv_bfloat16* w_gate_up,
                         const int32_t* topk_ids, __nv_bfloat16* act, uint32_t tokens,
                         uint32_t top_k, uint32_t hidden, uint32_t inter, uint32_t experts,
                         const __nv_bfloat16* shared_gate_up, uint32_t shared_slots,
                         uint32_t shared_inter) {
  gate_up_mma(x, w_gate_up, topk_ids, act, static_cast<int>(tokens), static_cast<int>(top_k),
              static_cast<int>(hidden), static_cast<int>(inter), static_cast<int>(experts),
              shared_gate_up, static_cast<int>(shared_slots), static_cast<int>(shared_inter));
}
