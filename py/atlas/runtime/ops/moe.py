"""Launch builders for mixture-of-experts layers: router, expert FFN (decode and grouped).

Contract (row-major, contiguous; reference/moe.py is the executable specification):

* x bf16 [tokens, hidden]: the normalized hidden states entering the MoE block.
* w_gate bf16 [experts, hidden]: the router (a Linear); its logits are f32 [tokens, experts]
  holding the bf16-rounded products (matmul.linear(out_f32=True), like transformers' bf16
  gate followed by softmax(dtype=float)), or for a float32 router (`Routing.unrounded`:
  GLM-4.5's) the float32 sums themselves (matmul.linear_f32_unrounded), the input of `topk`.
* w_gate_up bf16 [experts, 2 * inter, hidden]: per expert the gate rows, then the up rows
  (transformers 5's fused `experts.gate_up_proj`); w_down bf16 [experts, hidden, inter].
* topk_ids i32 [tokens, top_k], best expert first; topk_weights f32 [tokens, top_k].
* out bf16 [tokens, hidden] = bf16(sum_j topk_weights[t, j] * y[t, j]) with
  y[t, j] = bf16(swiglu(x[t] w_gate_up[e]^T) w_down[e]^T), e = topk_ids[t, j]; the gate and
  up products and the activation are bf16-rounded as in the dense MLP.

Paths (`experts`): up to DECODE_MAX_TOKENS tokens take two launches that read only the
selected experts' weights (gate/up into act [tokens, top_k, inter]: moe_gate_up_gemv_bf16
[_single], two columns of one expert a block with the dense GEMV's loading scheme (at batch 1
with ATLAS_MOE_GATE_UP_TILED=1 moe_gate_up_gemv_tiles_bf16: a block takes several such column
pairs of its slot, the next pair's weights requested before the current pair's reduction,
one wave), or with
ATLAS_MOE_GATE_UP_GEMV=0 the column-loop moe_gate_up_silu_bf16; in both the pairs routed to
one expert go GATE_UP_GROUP_PAIRS to a block, so a batch reads each selected expert once per
4 tokens that chose it; then
moe_down_sum_bf16 which applies the weights and sums over k in float32, in slot order: no
atomics, bit-reproducible). The down launch spreads (row, slot) items over every SM: a
block group holds `down_rows_per_group` output rows of one token for all their slots
(neighbouring warps stream different experts' rows, 14..16 16-byte loads in flight per
lane), sums each row's slots in shared memory, and requests the next group's weights before
that reduction; every block takes the same rows, one wave of the SMs (`down_rows`). At
batch 1 (ATLAS_MOE_DOWN_GEMV, `down_uses_gemv`) the down launch is GEMV-shaped instead
(moe_down_gemv_*): tiles of DOWN_GEMV_ROWS output rows, each thread all its chunks of a
tile's rows (the rows' slots concatenated) in flight at once, one DRAM round trip a tile,
the next tile's requested before the current one is reduced (`down_gemv_rows`).
It reads the token's routing before its PDL wait (the router's output, two launches back:
the gate/up launch between waits for it before letting the down launch start), so its first
weights stream while gate/up still runs; gate/up's act rows are staged in shared memory
(`down_smem`). The down launch writes the block's output into `out` (the model's delta); the
residual add + next RMSNorm is the model's add_rmsnorm launch (or the next MoE router's). A
decode step routes in one launch too (`gate_topk`: the gate GEMV's rows spread over blocks,
the last block does the top-k; at batch 1 one cluster of 16 blocks, rank 0 routing from its
shared memory, `router_uses_cluster`).

Shared expert (Qwen2-MoE, Qwen3-Next, Qwen3.5-MoE), decode path: `MoeShape.shared_inter`
folds it into the same three launches as `shared_slots` = ceil(shared_inter / inter) more
slots per token after the top_k routed ones. Slot top_k + c computes the shared expert's
intermediate columns [c inter, (c + 1) inter) (zeros past shared_inter), the router writes
its weight bf16(sigmoid(bf16(x . shared_gate))) into those slots, and the down launch forms
bf16(routed sum) + bf16(weight * bf16(shared product)): transformers' rounding, the same
values as the separate shared-expert launches the grouped (prefill) path keeps. An ungated
shared expert (GLM-4.5: `SharedExpertWeights.gate` 0) has no gate row: the router gives its
slots weight 1, so the down launch forms bf16(routed sum) + bf16(shared product), what
moe_shared_add_bf16 with a null gate computes.

gpt-oss's experts (`ExpertEpilogue`: per-expert biases on the gate/up and down products, the
clamped GLU) take the epilogue twins of the column-loop gate/up kernel
(moe_gate_up_epilogue_bf16), the row-group down kernel (moe_down_sum_bias_bf16) and the
grouped GEMMs (both kinds: *_epilogue_*, *_bias_*), entries of their own so the plain ones keep
their code; the GEMV-shaped decode entries have no twin and are not taken
(`gate_up_uses_gemv`, `down_uses_gemv`), nor is the fused router, which has no logit bias
(model/moe.py).

More tokens take the grouped path: moe_align_i32 sorts the slots t * top_k + j by expert
into MOE_TILE_M-row tiles on the device, the grouped GEMM
computes the gate/up product with SwiGLU in its epilogue (act in sorted order), the grouped
down GEMM writes each slot's y un-permuted, and moe_combine_bf16 forms the weighted sums.
The grouped GEMMs run on Hopper wgmma (moe_grouped_sm90) where the PTX set has it, else on
mma.sync (moe_grouped, every target).
Grids of the grouped launches are sized for the worst case (`max_tiles`); tiles with no
expert exit at once, so experts without tokens cost nothing. Neither path synchronizes with
the host or reads routing on the host: both are capturable in a CUDA graph.

Every scratch buffer comes from `MoeScratch` (sized once by `scratch_layout` for the largest
batch, so graph replays see fixed addresses).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..gpu import DevicePtr, KernelLaunch, KernelSig, Stream
from ..kernel_abi import (MOE_ALIGN, MOE_COMBINE, MOE_GATE_UP_EPILOGUE, MOE_GATE_UP_GEMV,
                          MOE_GATE_UP_GEMV_SINGLE, MOE_GATE_UP_GEMV_TILES,
                          MOE_GATE_UP_GEMV_TILES_ROUTE, MOE_DOWN_GEMV_ROUTE_SUM,
                          MOE_ADD_RMSNORM_GATE_TOPK_SIGMOID, MOE_ADD_RMSNORM_GATE_TOPK_SOFTMAX,
                          MOE_ADD_RMSNORM_GATE_TOPK_CLUSTER_SIGMOID,
                          MOE_ADD_RMSNORM_GATE_TOPK_CLUSTER_SOFTMAX,
                          MOE_GATE_LOGITS, MOE_DOWN_GEMV_SUM, MOE_DOWN_GEMV_SUM_STEPS,
                          MOE_DOWN_SUM, MOE_DOWN_SUM_BIAS,
                          MOE_GATE_TOPK_SIGMOID,
                          MOE_GATE_TOPK_SOFTMAX, MOE_GATE_UP_SILU,
                          MOE_GROUPED_DOWN, MOE_GROUPED_DOWN_BIAS, MOE_GROUPED_DOWN_SM90,
                          MOE_GROUPED_DOWN_SM90_BIAS, MOE_GROUPED_GATE_UP,
                          MOE_GROUPED_GATE_UP_EPILOGUE, MOE_GROUPED_GATE_UP_SM90,
                          MOE_GROUPED_GATE_UP_SM90_EPILOGUE, MOE_TOPK_SIGMOID, MOE_TOPK_SOFTMAX,
                          MOE_TOPK_SOFTMAX_BIAS)
from . import KernelCache
from ._preconditions import require_aligned, require_multiple
from .matmul import gemv_threads

#: rows of one grouped-GEMM M-tile (moe_grouped.cu kTileM)
MOE_TILE_M = 64
#: output columns of one grouped-GEMM block (moe_grouped.cu kTileN): for gate_up that is
#: kTileN / 2 intermediate columns (their gate and up rows side by side)
MOE_TILE_N = 128
MOE_GROUPED_THREADS = 128
#: the Hopper wgmma grouped GEMMs (moe_grouped_sm90.cu): 64 x 256 tiles of one warpgroup,
#: a 4-stage ring of A [64][64] + B [256][64] bf16 plus 1 KiB to align its base
MOE_SM90_TILE_N = 256
MOE_SM90_THREADS = 128
MOE_SM90_SMEM = 4 * (64 + 256) * 64 * 2 + 1024
#: tokens at or below this take the decode kernels (their grids grow with tokens * top_k)
DECODE_MAX_TOKENS = 8
#: the gate/up decode kernel gives each warp one intermediate column; 8 warps per block
DECODE_ROWS_PER_BLOCK = 8
DECODE_THREADS = 256
#: the gate/up decode kernel's blocks resident per SM (at most 128 registers, 256 threads)
GATE_UP_BLOCKS_PER_SM = 2
#: at batch 2..8, the most pairs routed to one expert a gate/up block computes from one read
#: of its weights (moe_decode.cu kGroupPairs; batch 1: one)
GATE_UP_GROUP_PAIRS = 4
#: columns of one expert a block of the GEMV-shaped gate/up kernel computes (its gate and
#: up rows: the dense GEMV's GEMV_ROWS_PER_BLOCK rows, moe_decode.cu gate_up_gemv)
GATE_UP_GEMV_COLS = 2
#: 16-byte chunks of each weight row a GEMV-shaped gate/up thread loads at once
#: (gemv_core.cuh kUnroll): its blocks get enough threads for this many chunks each
GATE_UP_GEMV_UNROLL = 2
#: the tiled batch-1 gate/up kernel's registers per thread (moe_decode.cu: the launch bounds
#: of 4 blocks of 256 threads): with the register file of 64 K, its blocks an SM where the
#: backend has no device to ask (`gate_up_tiles`)
GATE_UP_TILES_REGS = 64
#: the least share of one wave the tiled gate/up grid must fill to be taken (gate_up_tiled)
GATE_UP_TILED_MIN_FILL = 0.9
SM_REGISTERS = 64 * 1024
#: the down decode kernel's (row, slot) items per warp in one group, by the row's chunk
#: steps ceil(inter / 256) (moe_decode.cu DownTile: x its chunks per item = 14..16 16-byte
#: loads in flight per lane); longer rows take DOWN_TILE_ITEMS_LONG
DOWN_TILE_ITEMS = {1: 8, 2: 7, 3: 5, 4: 4}
DOWN_TILE_ITEMS_LONG = 3
#: the down decode kernel's blocks resident per SM (at most 128 registers, 256 threads): its
#: grid is sized to about one wave of them, each block taking as many row groups as that needs
DOWN_BLOCKS_PER_SM = 2
#: output rows of one block of the GEMV-shaped down kernels (moe_decode.cu kGemvRows): every
#: thread holds its chunks of all of them at once (a row of 8 slots x 768: 3 chunks a row)
DOWN_GEMV_ROWS = 4
#: the most 32-chunk groups of a row they sum in shared memory (kGemvMaxGroups): slots x
#: inter / 256
DOWN_GEMV_MAX_GROUPS = 1024
#: the decode kernels' dynamic shared memory (gate/up: every token's x; down: the token's act
#: rows, slots x inter bf16) may not exceed this
DOWN_MAX_SMEM = 200 * 1024
#: the router keeps each token's scores in one warp's registers (moe_router.cu)
ROUTER_MAX_EXPERTS = 512
ROUTER_MAX_TOP_K = 32
ROUTER_TOKENS_PER_BLOCK = 4
#: the fused decode router (gate GEMV + top-k): one warp per expert row, 8 per block; its
#: last block routes one token per warp, so it takes up to DECODE_MAX_TOKENS tokens
ROUTER_GATE_THREADS = 256
#: its dynamic shared memory (x staged by every block, tokens x hidden bf16) may not exceed this
ROUTER_GATE_MAX_SMEM = 200 * 1024
#: 16-byte vectors of a row each router thread normalizes (moe_router.cu kNormVecs)
ROUTER_NORM_VECS = 4
#: the cluster router (moe_router.cu kCluster*, `router_uses_cluster`): one cluster of this many
#: blocks (above the portable 8: the launch opts in), a warp an expert row, 8 to 16 warps a
#: block; rank 0 keeps the logits in shared memory and routes from there (256 experts at most)
ROUTER_CLUSTER_BLOCKS = 16
ROUTER_CLUSTER_MIN_WARPS = 8
ROUTER_CLUSTER_MAX_WARPS = 16
ROUTER_CLUSTER_MAX_EXPERTS = ROUTER_CLUSTER_BLOCKS * ROUTER_CLUSTER_MAX_WARPS
#: the batch-1 expert kernels that route from the logits themselves (`routes_in_experts`)
#: keep a token's scores in one warp's registers within their budgets: up to this many
#: experts (moe_decode.cu kRouteMaxTier x 32)
ROUTE_IN_EXPERTS_MAX_EXPERTS = 256
#: the align kernel counts experts in shared memory; one warp per expert
ALIGN_MAX_EXPERTS = 1024
ALIGN_EXPERTS_PER_BLOCK = 8


@dataclass(frozen=True, slots=True)
class MoeShape:
    """The sizes every MoE launch derives from. `shared_inter` > 0 folds a shared expert of
    that intermediate size into the decode launches as `shared_slots` more slots per token
    (its columns in chunks of `inter`; see the module docstring); the grouped path takes
    routed experts only (`routed_only`)."""

    experts: int
    top_k: int
    hidden: int
    inter: int
    shared_inter: int = 0

    @property
    def shared_slots(self) -> int:
        return -(-self.shared_inter // self.inter)

    @property
    def slots(self) -> int:
        """Slots per token of the decode launches: the routed top_k, then the shared ones."""
        return self.top_k + self.shared_slots

    @property
    def routed_only(self) -> "MoeShape":
        return MoeShape(self.experts, self.top_k, self.hidden, self.inter)

    def validate(self) -> None:
        if not 1 <= self.top_k <= min(self.experts, ROUTER_MAX_TOP_K):
            raise ValueError(f"moe: top_k={self.top_k} must be in 1..min(experts="
                             f"{self.experts}, {ROUTER_MAX_TOP_K})")
        if not 1 <= self.experts <= ROUTER_MAX_EXPERTS:
            raise ValueError(f"moe: experts={self.experts} must be in 1..{ROUTER_MAX_EXPERTS}")
        require_multiple("moe", "hidden", self.hidden, 16)
        require_multiple("moe", "inter", self.inter, 16)
        if self.shared_inter:
            require_multiple("moe", "shared_inter", self.shared_inter, 16)
        if self.slots > ROUTER_MAX_TOP_K:
            raise ValueError(f"moe: top_k {self.top_k} + {self.shared_slots} shared-expert "
                             f"slots exceed {ROUTER_MAX_TOP_K}")


@dataclass(frozen=True, slots=True)
class SharedExpertWeights:
    """A shared expert's weights for the decode launches (MoeShape.shared_inter wide):
    gate_up bf16 [2 shared_inter, hidden] (gate rows, then up rows), down bf16
    [hidden, shared_inter], gate bf16 [hidden] (shared_expert_gate's row; 0: an ungated
    shared expert, its slots weighted 1)."""

    gate_up: DevicePtr
    down: DevicePtr
    gate: DevicePtr


def _shared_args(shape: MoeShape, shared: SharedExpertWeights | None, which: str
                 ) -> tuple[DevicePtr, int, int]:
    """(weight pointer, shared_slots, shared_inter) kernel arguments; checks that the
    weights and the shape agree on whether there is a shared expert."""
    if (shared is None) != (shape.shared_inter == 0):
        raise ValueError(f"moe: shared_inter={shape.shared_inter} needs shared-expert "
                         f"weights exactly when it is non-zero")
    if shared is None:
        return 0, 0, 0
    ptr = getattr(shared, which)
    require_aligned("moe", f"shared {which}", ptr, 16)
    return ptr, shape.shared_slots, shape.shared_inter


@dataclass(frozen=True, slots=True)
class Routing:
    """How the router turns logits into (ids, weights): `scoring` "softmax" (Qwen-MoE,
    Mixtral) or "sigmoid" (DeepSeek-V3, MiniMax-M2: chosen by sigmoid + bias, weighted by
    the sigmoid); `renormalize` is norm_topk_prob; `scale` the routed_scaling_factor; `bias`
    the device address of e_score_correction_bias, f32 [experts] (0: none; sigmoid only);
    `unrounded`: the router's logits are its float32 sums, not bf16-rounded (a float32 router,
    MoeConfig.router_f32: what the fused decode router and the router GEMV then write);
    `logit_bias`: the router Linear's bias, bf16 [experts] (gpt-oss; 0: none; softmax over
    unrounded sums only): the logits become bf16(sum + bias) in `topk`."""

    scoring: str = "softmax"
    renormalize: bool = True
    scale: float = 1.0
    bias: DevicePtr = 0
    unrounded: bool = False
    logit_bias: DevicePtr = 0

    def __post_init__(self) -> None:
        if self.scoring not in ("softmax", "sigmoid"):
            raise ValueError(f"moe routing: scoring must be 'softmax' or 'sigmoid', got "
                             f"{self.scoring!r}")
        if self.bias and self.scoring != "sigmoid":
            raise ValueError("moe routing: a score-correction bias needs sigmoid scoring")
        if self.logit_bias and not (self.scoring == "softmax" and self.unrounded):
            raise ValueError("moe routing: a router logit bias needs softmax scoring over the "
                             "unrounded float32 logits")


@dataclass(frozen=True, slots=True)
class ExpertEpilogue:
    """What gpt-oss's experts add around the SwiGLU expert products (MoeConfig.expert_bias,
    swiglu_limit): `gate_up_bias` bf16 [experts, 2 inter] (each expert's gate entries, then
    its up entries, as its weight rows) added to the bf16 gate/up products, `down_bias` bf16
    [experts, hidden] added to its bf16 down product (0: none), and with `limit` > 0 the
    clamped GLU (kernel_abi MOE_GATE_UP_EPILOGUE's comment; `alpha` its sigmoid gain)."""

    gate_up_bias: DevicePtr = 0
    down_bias: DevicePtr = 0
    alpha: float = 0.0
    limit: float = 0.0

    def __bool__(self) -> bool:
        return bool(self.gate_up_bias or self.down_bias or self.limit)

    def gate_up_args(self) -> tuple[DevicePtr, float, float]:
        """(expert_bias, glu_alpha, glu_limit) of the gate/up entries."""
        return self.gate_up_bias, float(self.alpha), float(self.limit)


#: the plain expert FFN (no biases, SwiGLU)
NO_EPILOGUE = ExpertEpilogue()


@dataclass(frozen=True, slots=True)
class LogitRoute:
    """The router's logits (f32 [tokens, experts]), its shared-expert logits (f32 [tokens],
    or 0: none, or an ungated shared expert, weight 1) and its rule, for the batch-1 expert
    launches that route from them themselves (`routes_in_experts`: the router launch then
    writes only these, `gate_logits`)."""

    logits: DevicePtr
    shared_logits: DevicePtr
    routing: Routing

    def args(self) -> tuple[int, float, int]:
        """(renormalize, scale, sigmoid) kernel arguments."""
        r = self.routing
        return int(r.renormalize), float(r.scale), int(r.scoring == "sigmoid")


def max_tiles(slots: int, experts: int) -> int:
    """Most M-tiles `slots` routed slots can occupy (each non-empty expert pads to whole
    tiles): ceil(slots / MOE_TILE_M) + min(experts, slots)."""
    return -(-slots // MOE_TILE_M) + min(experts, slots)


@dataclass(frozen=True, slots=True)
class MoeScratchLayout:
    """Byte sizes of the scratch buffers for batches of up to `max_tokens` tokens."""

    act: int
    y: int
    sorted_slots: int
    tile_expert: int

    @property
    def total(self) -> int:
        return self.act + self.y + self.sorted_slots + self.tile_expert


def scratch_layout(shape: MoeShape, max_tokens: int) -> MoeScratchLayout:
    """Scratch for `experts` with up to max_tokens tokens (grouped buffers only when
    max_tokens > DECODE_MAX_TOKENS)."""
    decode_act = 2 * min(max_tokens, DECODE_MAX_TOKENS) * shape.slots * shape.inter
    if max_tokens <= DECODE_MAX_TOKENS:
        return MoeScratchLayout(act=decode_act, y=0, sorted_slots=0, tile_expert=0)
    slots = max_tokens * shape.top_k
    tiles = max_tiles(slots, shape.experts)
    return MoeScratchLayout(act=max(decode_act, 2 * tiles * MOE_TILE_M * shape.inter),
                            y=2 * slots * shape.hidden, sorted_slots=4 * tiles * MOE_TILE_M,
                            tile_expert=4 * tiles)


@dataclass(frozen=True, slots=True)
class MoeScratch:
    """Device buffers of `scratch_layout` (16-byte aligned); y, sorted_slots and
    tile_expert may be 0 when only decode batches run."""

    act: DevicePtr
    y: DevicePtr = 0
    sorted_slots: DevicePtr = 0
    tile_expert: DevicePtr = 0
    max_tokens: int = DECODE_MAX_TOKENS


# ---- router -------------------------------------------------------------------------------
def topk(kc: KernelCache, stream: Stream, logits: DevicePtr, topk_ids: DevicePtr,
         topk_weights: DevicePtr, tokens: int, experts: int, top_k: int,
         routing: Routing = Routing()) -> None:
    """logits f32 [tokens, experts] -> topk_ids i32 and topk_weights f32 [tokens, top_k]."""
    MoeShape(experts, top_k, 16, 16).validate()
    if not tokens:
        return
    grid = -(-tokens // ROUTER_TOKENS_PER_BLOCK)
    block = 32 * ROUTER_TOKENS_PER_BLOCK
    renorm, scale = int(routing.renormalize), float(routing.scale)
    if routing.logit_bias:  # a router Linear's bias (gpt-oss): Routing checked softmax
        kc.get(MOE_TOPK_SOFTMAX_BIAS)(stream, grid, block, 0, logits, topk_ids, topk_weights,
                                      tokens, experts, top_k, renorm, scale, routing.logit_bias)
    elif routing.scoring == "softmax":
        kc.get(MOE_TOPK_SOFTMAX)(stream, grid, block, 0, logits, topk_ids, topk_weights,
                                 tokens, experts, top_k, renorm, scale)
    else:
        kc.get(MOE_TOPK_SIGMOID)(stream, grid, block, 0, logits, routing.bias, topk_ids,
                                 topk_weights, tokens, experts, top_k, renorm, scale)


@dataclass(frozen=True, slots=True)
class RouterNorm:
    """The residual add + RMSNorm before a decode MoE block, done by its router launch
    (moe_router.cu NormIn, `gate_topk`): residual += delta (bf16, in place), the router's x =
    RMSNorm(residual) * w (* (1 + w) with `offset`), also written to x for the expert
    launches."""

    residual: DevicePtr
    delta: DevicePtr
    weight: DevicePtr
    eps: float
    offset: bool = False


def router_takes_norm(kc: KernelCache, tokens: int, shape: MoeShape) -> bool:
    """Whether a decode MoE block's router launch may also do the residual add + RMSNorm
    before it (`RouterNorm`; ATLAS_MOE_ROUTER_NORM=0: never): the fused router runs (not
    `routes_in_experts`) and the row fits its threads' norm vectors."""
    return (kc.routes.moe_router_norm and 1 <= tokens <= DECODE_MAX_TOKENS
            and not routes_in_experts(kc, tokens, shape)
            and shape.hidden <= 8 * ROUTER_NORM_VECS * ROUTER_GATE_THREADS)


def router_cluster_warps(experts: int) -> int:
    """Warps a block of the cluster router: a warp an expert row over its 16 blocks."""
    return max(ROUTER_CLUSTER_MIN_WARPS, -(-experts // ROUTER_CLUSTER_BLOCKS))


def router_uses_cluster(kc: KernelCache, tokens: int, shape: MoeShape, routing: Routing
                        ) -> bool:
    """Whether a decode step's router launch that takes the norm (`RouterNorm`) runs as one
    cluster (the default; ATLAS_MOE_ROUTER_CLUSTER=0: never): batch 1, at most
    ROUTER_CLUSTER_MAX_EXPERTS experts, and a device that holds such a cluster (asked once;
    backends without a device cannot say no)."""
    if not (kc.routes.moe_router_cluster and tokens == 1
            and shape.experts <= ROUTER_CLUSTER_MAX_EXPERTS):
        return False
    smem = gate_topk_smem(1, shape.hidden) * 2  # x and r, as the launch (NormIn)
    launch = kc.get_large_cluster(_cluster_sig(routing), smem)
    held = kc.resident_blocks(launch.handle, 32 * router_cluster_warps(shape.experts), smem,
                              ROUTER_CLUSTER_BLOCKS)
    return held is None or held > 0


def _cluster_sig(routing: Routing) -> KernelSig:
    return (MOE_ADD_RMSNORM_GATE_TOPK_CLUSTER_SOFTMAX if routing.scoring == "softmax"
            else MOE_ADD_RMSNORM_GATE_TOPK_CLUSTER_SIGMOID)


def gate_topk(kc: KernelCache, stream: Stream, x: DevicePtr, w_gate: DevicePtr,
              logits: DevicePtr, topk_ids: DevicePtr, topk_weights: DevicePtr,
              counter: DevicePtr, tokens: int, shape: MoeShape, routing: Routing = Routing(),
              shared: SharedExpertWeights | None = None, shared_logits: DevicePtr = 0,
              norm: RouterNorm | None = None) -> None:
    """The decode router in one launch: logits f32 [tokens, experts] = bf16(x . w_gate)
    (what the f32-output linear writes; routing.unrounded: x . w_gate, what
    matmul.linear_f32_unrounded writes), then `topk` of them into rows of shape.slots;
    with a shared expert, shared_logits f32 [tokens] = its gate logit and its slots get the
    weight bf16(sigmoid(logit)), or 1 where shared.gate is 0 (ungated: no logit). counter:
    one u32, zero. `norm`: x is first formed (and written) as add_rmsnorm of norm.residual
    and norm.delta (`router_takes_norm`). No router logit bias (`Routing.logit_bias`: the
    separate router_logits + `topk` launches take it)."""
    shape.validate()
    if routing.logit_bias:
        raise ValueError("moe_gate_topk: the fused router takes no logit bias (gpt-oss's "
                         "router runs as router logits + topk)")
    shared_gate, n_shared, _ = _shared_args(shape, shared, "gate")
    if n_shared:
        require_aligned("moe_gate_topk", "shared_logits", shared_logits, 4)
    if not 1 <= tokens <= DECODE_MAX_TOKENS:
        raise ValueError(f"moe_gate_topk: {tokens} tokens; the fused router takes "
                         f"1..{DECODE_MAX_TOKENS} (more: linear + topk)")
    require_aligned("moe_gate_topk", "x", x, 16)
    require_aligned("moe_gate_topk", "w_gate", w_gate, 16)
    require_aligned("moe_gate_topk", "counter", counter, 4)
    rows = shape.experts + (1 if shared_gate else 0)  # the shared gate: one more row
    smem = gate_topk_smem(tokens, shape.hidden) * (2 if norm else 1)  # NormIn: r too
    renorm, scale = int(routing.renormalize), float(routing.scale)
    softmax = routing.scoring == "softmax"
    bias = () if softmax else (routing.bias,)
    grid = -(-rows // (ROUTER_GATE_THREADS // 32))
    tail = (logits, shared_logits, topk_ids, topk_weights, counter, tokens, shape.experts,
            shape.hidden, shape.top_k, n_shared, renorm, scale, int(routing.unrounded))
    if norm is None:
        sig = MOE_GATE_TOPK_SOFTMAX if softmax else MOE_GATE_TOPK_SIGMOID
        kc.get_with_shared(sig, smem)(stream, grid, ROUTER_GATE_THREADS, smem, x, w_gate,
                                      shared_gate, *bias, *tail)
        return
    if shape.hidden > 8 * ROUTER_NORM_VECS * ROUTER_GATE_THREADS:
        raise ValueError(f"moe_add_rmsnorm_gate_topk: hidden {shape.hidden} exceeds "
                         f"{8 * ROUTER_NORM_VECS * ROUTER_GATE_THREADS}")
    for name, ptr in (("residual", norm.residual), ("delta", norm.delta),
                      ("norm weight", norm.weight)):
        require_aligned("moe_add_rmsnorm_gate_topk", name, ptr, 16)
    norm_args = (norm.residual, norm.delta, norm.weight, x, w_gate, shared_gate, *bias)
    if router_uses_cluster(kc, tokens, shape, routing):
        kc.get_large_cluster(_cluster_sig(routing), smem)(
            stream, ROUTER_CLUSTER_BLOCKS, 32 * router_cluster_warps(shape.experts), smem,
            *norm_args, *tail[:4], *tail[5:], float(norm.eps), int(norm.offset))  # no counter
        return
    sig = MOE_ADD_RMSNORM_GATE_TOPK_SOFTMAX if softmax else MOE_ADD_RMSNORM_GATE_TOPK_SIGMOID
    kc.get_with_shared(sig, smem)(stream, grid, ROUTER_GATE_THREADS, smem, *norm_args, *tail,
                                  float(norm.eps), int(norm.offset))


def gate_topk_smem(tokens: int, hidden: int) -> int:
    """Dynamic shared memory of the fused router: x (bf16 rows, staged by every block)."""
    nbytes = 2 * tokens * hidden
    if nbytes > ROUTER_GATE_MAX_SMEM:
        raise ValueError(f"moe_gate_topk: {tokens} x hidden {hidden} of x ({nbytes} bytes) "
                         f"exceed its {ROUTER_GATE_MAX_SMEM} bytes of shared memory")
    return nbytes


def gate_logits(kc: KernelCache, stream: Stream, x: DevicePtr, w_gate: DevicePtr,
                logits: DevicePtr, tokens: int, shape: MoeShape,
                shared: SharedExpertWeights | None = None, shared_logits: DevicePtr = 0,
                unrounded: bool = False) -> None:
    """gate_topk's logits (and shared_logits) alone, no top-k: for `routes_in_experts`
    (`unrounded` as Routing.unrounded)."""
    shape.validate()
    shared_gate, n_shared, _ = _shared_args(shape, shared, "gate")
    if n_shared:
        require_aligned("moe_gate_logits", "shared_logits", shared_logits, 4)
    if not 1 <= tokens <= DECODE_MAX_TOKENS:
        raise ValueError(f"moe_gate_logits: {tokens} tokens; it takes 1..{DECODE_MAX_TOKENS}")
    require_aligned("moe_gate_logits", "x", x, 16)
    require_aligned("moe_gate_logits", "w_gate", w_gate, 16)
    rows = shape.experts + (1 if shared_gate else 0)
    smem = gate_topk_smem(tokens, shape.hidden)
    kc.get_with_shared(MOE_GATE_LOGITS, smem)(
        stream, -(-rows // (ROUTER_GATE_THREADS // 32)), ROUTER_GATE_THREADS, smem, x, w_gate,
        shared_gate, logits, shared_logits, tokens, shape.experts, shape.hidden, n_shared,
        int(unrounded))


def routes_in_experts(kc: KernelCache, tokens: int, shape: MoeShape) -> bool:
    """Whether a decode step's MoE block routes inside its expert launches (the router launch
    writing only the logits, `gate_logits`; gate/up and down each computing the top-k from
    them, the router's code in every block) instead of the router's last block: switched on
    (ATLAS_MOE_ROUTE_IN_EXPERTS=1; off by default, no gain measured), batch 1 on the tiled
    gate/up (ATLAS_MOE_GATE_UP_TILED=1) and the GEMV-shaped down, at most
    ROUTE_IN_EXPERTS_MAX_EXPERTS experts."""
    return (kc.routes.moe_route_in_experts and tokens == 1
            and shape.experts <= ROUTE_IN_EXPERTS_MAX_EXPERTS
            and gate_up_uses_gemv(kc, tokens) and kc.routes.moe_gate_up_tiled is True
            and down_uses_gemv(kc, tokens, shape))


# ---- experts: decode ----------------------------------------------------------------------
def _check_weights(name: str, *ptrs: DevicePtr) -> None:
    for i, p in enumerate(ptrs):
        require_aligned(name, f"argument {i}", p, 16)


def decode_gate_up(kc: KernelCache, stream: Stream, x: DevicePtr, w_gate_up: DevicePtr,
                   topk_ids: DevicePtr, act: DevicePtr, tokens: int, shape: MoeShape,
                   shared: SharedExpertWeights | None = None,
                   route: LogitRoute | None = None,
                   epilogue: ExpertEpilogue = NO_EPILOGUE) -> None:
    """act [tokens, slots, inter] = swiglu of each selected expert's gate/up products (and
    of the shared expert's column chunks); with `route` (where `routes_in_experts`) the
    experts are the top-k of route.logits, topk_ids unused; an `epilogue` (gpt-oss) runs on
    the column-loop kernel's twin, the one gate/up decode entry that takes it."""
    _check_weights("moe_gate_up_silu", x, w_gate_up)
    if not 1 <= tokens <= DECODE_MAX_TOKENS:  # the kernel keeps every pair's id in shared memory
        raise ValueError(f"moe_gate_up_silu: {tokens} tokens; the decode kernel takes "
                         f"1..{DECODE_MAX_TOKENS}")
    sh_ptr, n_shared, sh_inter = _shared_args(shape, shared, "gate_up")
    args = (x, w_gate_up, topk_ids, act, tokens, shape.top_k, shape.hidden, shape.inter,
            shape.experts, sh_ptr, n_shared, sh_inter)
    pairs = tokens * shape.slots
    if route is not None:
        _require_routes_in_experts(kc, tokens, shape)
        if epilogue:
            raise ValueError("moe_gate_up: routing inside the expert launches takes no expert "
                             "epilogue")
    if gate_up_uses_gemv(kc, tokens, epilogue):
        threads = gate_up_gemv_threads(kc, shape.hidden)
        cols = -(-shape.inter // GATE_UP_GEMV_COLS)
        if route is not None:
            tiles = gate_up_tiles(kc, shape, threads, MOE_GATE_UP_GEMV_TILES_ROUTE)
            kc.get(MOE_GATE_UP_GEMV_TILES_ROUTE)(
                stream, (-(-cols // tiles), pairs, 1), threads, 0, x, w_gate_up, route.logits,
                route.routing.bias, act, tokens, shape.top_k, shape.hidden, shape.inter,
                shape.experts, sh_ptr, n_shared, sh_inter, tiles, route.args()[2])
            return
        if tokens == 1 and gate_up_tiled(kc, shape, threads):
            tiles = gate_up_tiles(kc, shape, threads)
            kc.get(MOE_GATE_UP_GEMV_TILES)(stream, (-(-cols // tiles), pairs, 1), threads, 0,
                                           *args, tiles)
            return
        sig = MOE_GATE_UP_GEMV_SINGLE if tokens == 1 else MOE_GATE_UP_GEMV
        kc.get(sig)(stream, (cols, pairs, 1), threads, 0, *args)
        return
    groups = -(-shape.inter // DECODE_ROWS_PER_BLOCK)
    per_block = gate_up_groups_per_block(tokens, shape.slots, shape.inter, kc.facts.sm_count)
    smem = gate_up_smem(tokens, shape.hidden)
    if epilogue:
        kc.get_with_shared(MOE_GATE_UP_EPILOGUE, smem)(
            stream, (-(-groups // per_block), pairs, 1), DECODE_THREADS, smem, *args,
            *epilogue.gate_up_args())
        return
    kc.get_with_shared(MOE_GATE_UP_SILU, smem)(
        stream, (-(-groups // per_block), pairs, 1), DECODE_THREADS, smem, *args)


def gate_up_gemv_threads(kc: KernelCache, hidden: int) -> int:
    """Threads of a GEMV-shaped gate/up block: ATLAS_MOE_GATE_UP_GEMV_THREADS, else enough
    warps for GATE_UP_GEMV_UNROLL chunks of a row each (32..256, matmul.gemv_threads' rule).
    At hidden 2048 that is 128 threads with 8 loads in flight each (4 rows x 2 chunks) where
    one chunk a thread (256 threads) had 4: the same 16 KB a block, twice the blocks (and
    bytes in flight) an SM, half the waves."""
    if kc.routes.moe_gate_up_gemv_threads:
        return kc.routes.moe_gate_up_gemv_threads
    return gemv_threads(hidden, GATE_UP_GEMV_UNROLL)


def _require_routes_in_experts(kc: KernelCache, tokens: int, shape: MoeShape) -> None:
    if not routes_in_experts(kc, tokens, shape):
        raise ValueError(f"moe: routing inside the expert launches takes batch 1 on the tiled "
                         f"gate/up and GEMV-shaped down with at most "
                         f"{ROUTE_IN_EXPERTS_MAX_EXPERTS} experts (routes_in_experts), not "
                         f"{tokens} tokens of {shape.experts} experts under these routes")


def gate_up_tiled(kc: KernelCache, shape: MoeShape, threads: int) -> bool:
    """Whether batch 1's gate/up takes the tiled entry: ATLAS_MOE_GATE_UP_TILED where set,
    else where the tiled grid (gate_up_tiles pairs a block) fills at least
    GATE_UP_TILED_MIN_FILL of the wave it is sized to (routes.py's entry has the per-kernel
    measurements: a full wave also lets the down launch start early; a part-empty one streams
    the experts with fewer blocks). An H200 holds 1,056 tiled blocks: Qwen3-30B-A3B's 384
    pairs x 8 slots make 1,024 (97%, tiled), Qwen3.5-35B-A3B's 256 x 9 make 774 (73%, not)."""
    forced = kc.routes.moe_gate_up_tiled
    if forced is not None:
        return forced
    col_pairs = -(-shape.inter // GATE_UP_GEMV_COLS)
    blocks = -(-col_pairs // gate_up_tiles(kc, shape, threads)) * shape.slots
    return blocks >= GATE_UP_TILED_MIN_FILL * _tiled_resident(kc, threads)


def _tiled_resident(kc: KernelCache, threads: int,
                    sig: KernelSig = MOE_GATE_UP_GEMV_TILES) -> int:
    """Blocks of the tiled gate/up the device holds at once: the driver's occupancy, or
    without a device the register file's share (8 blocks of 128 threads an SM)."""
    resident = kc.resident_blocks(kc.get(sig).handle, threads, 0, 1)
    if resident is None:
        resident = kc.facts.sm_count * (SM_REGISTERS // (GATE_UP_TILES_REGS * threads))
    return max(1, resident)


def gate_up_tiles(kc: KernelCache, shape: MoeShape, threads: int,
                  sig: KernelSig = MOE_GATE_UP_GEMV_TILES) -> int:
    """Column pairs a block of the tiled batch-1 gate/up kernel (ATLAS_MOE_GATE_UP_TILED=1)
    takes, one after the other:
    ATLAS_MOE_GATE_UP_TILES=N, or by default as many as bring the grid (slots x pair blocks)
    into one wave of the blocks the device holds at once (the driver's occupancy; without a
    device, the register file's share, 8 blocks of 128 threads an SM). Qwen3-30B-A3B: 3
    pairs, 128 x 8 blocks, where 384 x 8 two-column blocks ran ~3 waves, each block paying
    the routing read before its first weight request."""
    col_pairs = -(-shape.inter // GATE_UP_GEMV_COLS)
    if kc.routes.moe_gate_up_tiles:
        return min(col_pairs, kc.routes.moe_gate_up_tiles)
    resident = _tiled_resident(kc, threads, sig)
    return max(1, min(col_pairs, -(-shape.slots * col_pairs // resident)))


def gate_up_groups_per_block(tokens: int, slots: int, inter: int, sm_count: int) -> int:
    """Column groups (8 columns, one a warp) a gate/up block streams one after the other:
    as many as bring the (tokens x slots) pairs' blocks to about one wave of
    GATE_UP_BLOCKS_PER_SM per SM (at batch 1 every pair is a leader; at batch 2..8 the
    blocks of pairs whose expert an earlier pair has exit at once, so fewer work)."""
    groups = -(-inter // DECODE_ROWS_PER_BLOCK)
    return max(1, min(groups, -(-groups * tokens * slots // (GATE_UP_BLOCKS_PER_SM * sm_count))))


def gate_up_smem(tokens: int, hidden: int) -> int:
    """Dynamic shared memory of the gate/up kernel: every token's x row (bf16)."""
    nbytes = 2 * tokens * hidden
    if nbytes > DOWN_MAX_SMEM:
        raise ValueError(f"moe_gate_up_silu: {tokens} x hidden {hidden} of x ({nbytes} bytes) "
                         f"exceed the kernel's {DOWN_MAX_SMEM} bytes of shared memory")
    return nbytes


def down_rows_per_group(slots: int, inter: int) -> int:
    """Output rows of one group of the down kernel: all slots of each row, 8 warps x the
    tile's items per warp (DownTile) at most; at least one row."""
    steps = -(-inter // 256)
    items = DOWN_TILE_ITEMS.get(steps, DOWN_TILE_ITEMS_LONG)
    if slots > DECODE_ROWS_PER_BLOCK * items:
        raise ValueError(f"moe_down: {slots} slots of inter {inter} exceed one group of the "
                         f"down kernel ({DECODE_ROWS_PER_BLOCK} warps x {items} items)")
    return DECODE_ROWS_PER_BLOCK * items // slots


def down_rows(slots: int, tokens: int, hidden: int, inter: int, sm_count: int,
              wave: bool = True) -> int:
    """Output rows per block of the down kernels (`wave`, ATLAS_MOE_DOWN_WAVE): equal blocks
    filling one wave of DOWN_BLOCKS_PER_SM blocks on every SM, ceil(tokens x hidden / (2 x
    SMs)) rows each (the last group of a block may be partial), so no SM streams more rows
    than another but by one block's share. Whole groups a block (down_rows_grouped, the
    session-6 rule) left some SMs with one block and others with two: at batch 1 of
    Qwen3-30B-A3B 205 blocks of 10 rows on 132 SMs, the busiest SMs 20 rows where 16 do."""
    if not wave:
        return down_rows_grouped(slots, tokens, hidden, inter, sm_count)
    down_rows_per_group(slots, inter)  # refuses slot counts one group cannot hold
    return max(1, min(hidden, -(-tokens * hidden // (DOWN_BLOCKS_PER_SM * sm_count))))


def down_rows_grouped(slots: int, tokens: int, hidden: int, inter: int, sm_count: int) -> int:
    """Output rows per block of the down kernels: whole groups (down_rows_per_group), as many
    as bring the grid (tokens x row blocks) to about one wave of DOWN_BLOCKS_PER_SM blocks per
    SM. Each group's weight rows are requested while the previous group is reduced (the
    first group's before the PDL wait), so longer blocks lose nothing to their barriers.
    History: one short pass per block (1,024 blocks at batch 1, 16,384 for Qwen3.5-35B-A3B's
    9 slots at batch 8) or passes of 1..2 rows were latency-bound: 115 us per layer for
    Qwen3.5-35B-A3B at batch 8 (2026-12-01)."""
    per_group = down_rows_per_group(slots, inter)
    groups = -(-hidden // per_group)
    per_block = -(-tokens * groups // (DOWN_BLOCKS_PER_SM * sm_count))
    return per_group * max(1, min(groups, per_block))


def down_smem(slots: int, inter: int) -> int:
    """Dynamic shared memory of the down kernels: the token's act rows (bf16)."""
    nbytes = 2 * slots * inter
    if nbytes > DOWN_MAX_SMEM:
        raise ValueError(f"moe_down: {slots} slots x inter {inter} of act ({nbytes} bytes) "
                         f"exceed the kernel's {DOWN_MAX_SMEM} bytes of shared memory")
    return nbytes


def gate_up_uses_gemv(kc: KernelCache, tokens: int,
                      epilogue: ExpertEpilogue = NO_EPILOGUE) -> bool:
    """Whether a decode gate/up launch of `tokens` takes the GEMV-shaped kernel: switched on
    (ATLAS_MOE_GATE_UP_GEMV), at most ATLAS_MOE_GATE_UP_GEMV_MAX_M tokens (default 1), and
    no expert epilogue (its entries have none: gpt-oss runs on the column-loop kernel)."""
    r = kc.routes
    return r.moe_gate_up_gemv and tokens <= r.moe_gate_up_gemv_max_m and not epilogue


def down_uses_gemv(kc: KernelCache, tokens: int, shape: MoeShape,
                   epilogue: ExpertEpilogue = NO_EPILOGUE) -> bool:
    """Whether a decode down launch of `tokens` takes the GEMV-shaped kernels: switched on
    (ATLAS_MOE_DOWN_GEMV), at most ATLAS_MOE_DOWN_GEMV_MAX_M tokens (default 1), a shape
    whose 32-chunk warp spans each lie in one slot (inter a multiple of 256) with at most
    DOWN_GEMV_MAX_GROUPS of them a row, and no down bias (gpt-oss: the row-group kernel)."""
    r = kc.routes
    return (r.moe_down_gemv and tokens <= r.moe_down_gemv_max_m and shape.inter % 256 == 0
            and shape.slots * shape.inter // 256 <= DOWN_GEMV_MAX_GROUPS
            and not epilogue.down_bias)


def down_gemv_rows(tokens: int, hidden: int, sm_count: int, tiles: int = 0) -> int:
    """Output rows a block of the GEMV-shaped down kernels takes: `tiles` tiles of
    DOWN_GEMV_ROWS (ATLAS_MOE_DOWN_GEMV_TILES), or by default as many as bring the grid
    (tokens x row blocks) to one wave of DOWN_BLOCKS_PER_SM blocks an SM: a block requests its
    next tile's weights before it reduces the current one, so one prologue (the routing read,
    the first requests) serves all of them. Batch 1 of Qwen3-30B-A3B: 2 tiles (256 blocks of 8
    rows) where a tile a block is 512 blocks, two waves of 2 an SM."""
    all_tiles = -(-hidden // DOWN_GEMV_ROWS)
    if not tiles:
        tiles = -(-tokens * all_tiles // (DOWN_BLOCKS_PER_SM * sm_count))
    return DOWN_GEMV_ROWS * max(1, min(all_tiles, tiles))


def down_gemv_steps(slots: int, inter: int) -> int:
    """The chunk steps a thread of the GEMV-shaped down kernel takes of a row of `slots`
    slots of `inter` (its down_gemv_run switch: ceil(slots x inter / 8 / DECODE_THREADS), 4
    for 4 and more), which names the twin holding that count's code alone
    (MOE_DOWN_GEMV_SUM_STEPS)."""
    return min(4, -(-slots * (inter // 8) // DECODE_THREADS))


def _down_launch(kc: KernelCache, tokens: int, shape: MoeShape,
                 sigs: tuple[KernelSig, KernelSig], epilogue: ExpertEpilogue = NO_EPILOGUE
                 ) -> tuple[KernelLaunch, tuple[int, int, int], int, int]:
    """(launch, grid, rows per block, dynamic shared bytes) of a decode down launch: the
    GEMV-shaped kernel (sigs[1], or with routes.moe_down_one_step its twin for the shape's
    chunk steps) where `down_uses_gemv`, else the row-group one (sigs[0])."""
    if down_uses_gemv(kc, tokens, shape, epilogue):
        rows = down_gemv_rows(tokens, shape.hidden, kc.facts.sm_count,
                              kc.routes.moe_down_gemv_tiles)
        sig = (MOE_DOWN_GEMV_SUM_STEPS[down_gemv_steps(shape.slots, shape.inter) - 1]
               if kc.routes.moe_down_one_step else sigs[1])
        return kc.get(sig), (-(-shape.hidden // rows), tokens, 1), rows, 0
    rows = down_rows(shape.slots, tokens, shape.hidden, shape.inter, kc.facts.sm_count,
                     kc.routes.moe_down_wave)
    smem = down_smem(shape.slots, shape.inter)
    return (kc.get_with_shared(sigs[0], smem), (-(-shape.hidden // rows), tokens, 1), rows,
            smem)


def _down_route_launch(kc: KernelCache, tokens: int, shape: MoeShape, sig: KernelSig
                       ) -> tuple[KernelLaunch, tuple[int, int, int], int]:
    """(launch, grid, rows per block) of a down launch routing from the logits: the
    GEMV-shaped kernel's geometry."""
    _require_routes_in_experts(kc, tokens, shape)
    rows = down_gemv_rows(tokens, shape.hidden, kc.facts.sm_count, kc.routes.moe_down_gemv_tiles)
    return kc.get(sig), (-(-shape.hidden // rows), tokens, 1), rows


def decode_down(kc: KernelCache, stream: Stream, act: DevicePtr, w_down: DevicePtr,
                topk_ids: DevicePtr, topk_weights: DevicePtr, out: DevicePtr, tokens: int,
                shape: MoeShape, shared: SharedExpertWeights | None = None,
                route: LogitRoute | None = None,
                epilogue: ExpertEpilogue = NO_EPILOGUE) -> None:
    """out [tokens, hidden] = the weighted sum over k of each expert's down product (plus
    the gated shared expert's); with `route`, over the routing of route.logits; the
    `epilogue`'s down bias on the row-group kernel's twin (the entry that takes it)."""
    _check_weights("moe_down_sum", act, w_down)
    sh_ptr, n_shared, sh_inter = _shared_args(shape, shared, "down")
    if route is not None:
        launch, grid, rows = _down_route_launch(kc, tokens, shape, MOE_DOWN_GEMV_ROUTE_SUM)
        launch(stream, grid, DECODE_THREADS, 0, act, w_down, route.logits, route.shared_logits,
               route.routing.bias, out, tokens, shape.top_k, shape.hidden, shape.inter,
               shape.experts, rows, sh_ptr, n_shared, sh_inter, *route.args())
        return
    biased = bool(epilogue.down_bias)  # then down_uses_gemv is False: the row-group twin
    launch, grid, rows, smem = _down_launch(
        kc, tokens, shape, (MOE_DOWN_SUM_BIAS if biased else MOE_DOWN_SUM, MOE_DOWN_GEMV_SUM),
        epilogue)
    launch(stream, grid, DECODE_THREADS, smem, act, w_down, topk_ids, topk_weights, out, tokens,
           shape.top_k, shape.hidden, shape.inter, shape.experts, rows, sh_ptr, n_shared,
           sh_inter, *((epilogue.down_bias,) if biased else ()))


# ---- experts: grouped ---------------------------------------------------------------------
def align(kc: KernelCache, stream: Stream, topk_ids: DevicePtr, sorted_slots: DevicePtr,
          tile_expert: DevicePtr, slots: int, experts: int, tiles: int) -> None:
    """Sort the slots by expert into tiles (sorted_slots [tiles * MOE_TILE_M], tile_expert
    [tiles]); `tiles` must be at least max_tiles(slots, experts)."""
    if not 1 <= experts <= ALIGN_MAX_EXPERTS:
        raise ValueError(f"moe_align: experts={experts} must be in 1..{ALIGN_MAX_EXPERTS}")
    if tiles < max_tiles(slots, experts):
        raise ValueError(f"moe_align: {tiles} tiles < max_tiles({slots}, {experts})")
    grid = -(-experts // ALIGN_EXPERTS_PER_BLOCK)
    kc.get(MOE_ALIGN)(stream, grid, 32 * ALIGN_EXPERTS_PER_BLOCK, 0, topk_ids, sorted_slots,
                      tile_expert, slots, experts, tiles)


def grouped_uses_sm90(kc: KernelCache) -> bool:
    """The grouped GEMMs' dispatch rule: switched on (kc.routes.moe_sm90; ATLAS_MOE_SM90=0
    keeps them on mma.sync) and the moe_grouped_sm90 module loaded (sm_90a PTX sets only;
    not gb10, the host references or the mock)."""
    return kc.routes.moe_sm90 and MOE_GROUPED_GATE_UP_SM90.module in kc.backend.module_names


def _grouped_launch(kc: KernelCache, sm90: bool | None, sigs: tuple[KernelSig, KernelSig],
                    out_cols: int) -> tuple[KernelLaunch, int, int, int]:
    """(launch, columns per block, threads, shared bytes) of one grouped GEMM."""
    if sm90 is None:
        sm90 = grouped_uses_sm90(kc)
    if sm90:
        return (kc.get_with_shared(sigs[1], MOE_SM90_SMEM), -(-out_cols // MOE_SM90_TILE_N),
                MOE_SM90_THREADS, MOE_SM90_SMEM)
    return kc.get(sigs[0]), -(-out_cols // MOE_TILE_N), MOE_GROUPED_THREADS, 0


def grouped_gate_up(kc: KernelCache, stream: Stream, x: DevicePtr, w_gate_up: DevicePtr,
                    sorted_slots: DevicePtr, tile_expert: DevicePtr, act: DevicePtr,
                    shape: MoeShape, tiles: int, sm90: bool | None = None,
                    epilogue: ExpertEpilogue = NO_EPILOGUE) -> None:
    """act [tiles * MOE_TILE_M, inter] (sorted order) = swiglu(x[slot // top_k] gate/up)
    (with the `epilogue`'s gate/up bias and GLU). `sm90` forces (True) or avoids (False) the
    wgmma kernel; None: `grouped_uses_sm90`."""
    _check_weights("moe_grouped_gate_up", x, w_gate_up, act)
    sigs = ((MOE_GROUPED_GATE_UP_EPILOGUE, MOE_GROUPED_GATE_UP_SM90_EPILOGUE) if epilogue
            else (MOE_GROUPED_GATE_UP, MOE_GROUPED_GATE_UP_SM90))
    launch, cols, threads, smem = _grouped_launch(kc, sm90, sigs, 2 * shape.inter)
    launch(stream, (cols, tiles, 1), threads, smem, x, w_gate_up, sorted_slots, tile_expert,
           act, shape.top_k, shape.hidden, shape.inter, shape.experts, tiles,
           *(epilogue.gate_up_args() if epilogue else ()))


def grouped_down(kc: KernelCache, stream: Stream, act: DevicePtr, w_down: DevicePtr,
                 sorted_slots: DevicePtr, tile_expert: DevicePtr, y: DevicePtr,
                 shape: MoeShape, tiles: int, sm90: bool | None = None,
                 epilogue: ExpertEpilogue = NO_EPILOGUE) -> None:
    """y [slots, hidden]: each routed slot's bf16 down product (plus the `epilogue`'s down
    bias, in bf16), written un-permuted."""
    _check_weights("moe_grouped_down", act, w_down)
    biased = bool(epilogue.down_bias)
    sigs = ((MOE_GROUPED_DOWN_BIAS, MOE_GROUPED_DOWN_SM90_BIAS) if biased
            else (MOE_GROUPED_DOWN, MOE_GROUPED_DOWN_SM90))
    launch, cols, threads, smem = _grouped_launch(kc, sm90, sigs, shape.hidden)
    launch(stream, (cols, tiles, 1), threads, smem, act, w_down, sorted_slots, tile_expert, y,
           shape.hidden, shape.inter, shape.experts, tiles,
           *((epilogue.down_bias,) if biased else ()))


def combine(kc: KernelCache, stream: Stream, y: DevicePtr, topk_ids: DevicePtr,
            topk_weights: DevicePtr, out: DevicePtr, tokens: int, shape: MoeShape) -> None:
    """out [tokens, hidden] = bf16(sum_j topk_weights[t, j] * y[t * top_k + j])."""
    _check_weights("moe_combine", y, out)
    vecs = shape.hidden // 8
    threads = min(256, -(-vecs // 32) * 32)
    kc.get(MOE_COMBINE)(stream, (-(-vecs // threads), tokens, 1), threads, 0, y, topk_ids,
                        topk_weights, out, tokens, shape.top_k, shape.hidden, shape.experts)


# ---- the whole expert FFN -----------------------------------------------------------------
def uses_decode_kernels(tokens: int) -> bool:
    """The dispatch rule of `experts` (for the benchmarks' labels too)."""
    return tokens <= DECODE_MAX_TOKENS


def experts(kc: KernelCache, stream: Stream, x: DevicePtr, w_gate_up: DevicePtr,
            w_down: DevicePtr, topk_ids: DevicePtr, topk_weights: DevicePtr, out: DevicePtr,
            tokens: int, shape: MoeShape, scratch: MoeScratch, sm90: bool | None = None,
            shared: SharedExpertWeights | None = None, route: LogitRoute | None = None,
            epilogue: ExpertEpilogue = NO_EPILOGUE) -> None:
    """out [tokens, hidden] = the routed experts' weighted sum (see the module docstring);
    `sm90` as for `grouped_gate_up`. Decode batches only: with `shared` (and
    shape.shared_inter) the gated shared expert is added in the same launches (topk_ids/weights
    rows of shape.slots, as gate_topk writes them); with `route` (batch 1 where
    `routes_in_experts`) both launches route from route.logits (`gate_logits`'), not from
    topk_ids / topk_weights. `epilogue`: gpt-oss's expert biases and clamped GLU, on the
    entries that take them (the module docstring)."""
    shape.validate()
    if not tokens:
        return
    if tokens > scratch.max_tokens:
        raise ValueError(f"moe experts: {tokens} tokens exceed the scratch's "
                         f"{scratch.max_tokens}")
    if uses_decode_kernels(tokens):
        decode_gate_up(kc, stream, x, w_gate_up, topk_ids, scratch.act, tokens, shape, shared,
                       route, epilogue)
        decode_down(kc, stream, scratch.act, w_down, topk_ids, topk_weights, out, tokens,
                    shape, shared, route, epilogue)
        return
    if route is not None:
        raise ValueError(f"moe experts: routing inside the expert launches is batch 1 only, "
                         f"not {tokens} tokens")
    if shared is not None or shape.shared_inter:
        raise ValueError(f"moe experts: the folded shared expert is a decode-path launch "
                         f"(<= {DECODE_MAX_TOKENS} tokens), not {tokens}")
    if not (scratch.y and scratch.sorted_slots and scratch.tile_expert):
        raise ValueError(f"moe experts: {tokens} tokens need the grouped scratch buffers "
                         f"(scratch_layout with max_tokens > {DECODE_MAX_TOKENS})")
    slots = tokens * shape.top_k
    tiles = max_tiles(slots, shape.experts)
    align(kc, stream, topk_ids, scratch.sorted_slots, scratch.tile_expert, slots,
          shape.experts, tiles)
    grouped_gate_up(kc, stream, x, w_gate_up, scratch.sorted_slots, scratch.tile_expert,
                    scratch.act, shape, tiles, sm90, epilogue)
    grouped_down(kc, stream, scratch.act, w_down, scratch.sorted_slots, scratch.tile_expert,
                 scratch.y, shape, tiles, sm90, epilogue)
    combine(kc, stream, scratch.y, topk_ids, topk_weights, out, tokens, shape)
