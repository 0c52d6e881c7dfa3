"""The mixture-of-experts MLP block: router, routed experts, optional shared expert.

One `MoeMlp` per sparse layer, all sharing one set of graph-stable scratch buffers
(`MoeBuffers`, reserved in the step arena for the largest step the runner allows, so a
captured decode graph and the largest prefill chunk both fit). A forward is launches only:

  normed -> router logits (f32) -> top-k ids / weights (device) -> experts -> delta
         -> [shared expert: SwiGLU -> shared_out; gate logit; delta += sigmoid(gate) * shared_out]

A decode step (up to DECODE_MAX_TOKENS rows) is three launches: the router (gate GEMV and
top-k, the shared expert's gate as one more row; where `router_takes_norm`, also the pending
residual add + RMSNorm before the block), gate/up and down, where the shared expert is more
slots of the same launches (its columns in chunks of the routed width, weighted by
bf16(sigmoid(gate)), or 1 where it has no gate); the down launch writes the block's output
into delta, and the model's add_rmsnorm launch after it does the residual add and the next
norm (with ATLAS_MOE_ROUTE_IN_EXPERTS=1 at batch 1 the router writes only the logits and the
expert launches route from them). Prefill chunks (and decode steps with
ATLAS_MOE_FUSED_DECODE=0) take the separate launches: router GEMV/GEMM, top-k, the experts,
the shared expert's own SwiGLU, gate and add.

`runtime.ops.moe.experts` picks the decode kernels (few tokens: only the selected experts'
weights are read) or the grouped path (align, grouped GEMMs, combine); neither syncs with the
host, so decode steps are captured in CUDA graphs like the dense model's.

GLM-4.5 (`MoeConfig.router_f32`, `shared_gated` False) takes the same paths: its router's
logits are float32 sums (`Routing.unrounded`: `matmul.linear_f32_unrounded` on the separate
path, the fused router's unrounded mode on the decode path), and its shared expert is added
ungated (no gate weight, no gate logit: `shared_add` with a null gate on the separate path,
the shared slots weighted 1 on the decode path; both bf16(routed + shared)).

gpt-oss (`MoeConfig.router_bias`, `expert_bias`, `swiglu_limit`) takes the separate launches at
every step: its router is a Linear with a bias (the float32 sums of
`matmul.linear_f32_unrounded`, then `topk` with the bias, bf16(sum + bias), as transformers'
bf16 Linear rounds once), which the fused decode router does not take; its experts run with
`ops.moe.ExpertEpilogue` (per-expert gate/up and down biases, the clamped GLU) on the expert
entries that apply it.

Two products have a narrow output the tensor-core GEMM cannot take (its n must be a multiple
of 16): the shared-expert gate (n = 1) reads a weight buffer padded with zero rows to
`GATE_PAD_ROWS` and the shared-add kernel reads column 0 at that stride; a router whose
expert count is not a multiple of 16 (Mixtral's 8, Qwen1.5-MoE's 60) computes its logits
with the GEMV in chunks of GEMV_MAX_M rows when a step has more rows than that.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Mapping

from ..core.config import ModelConfig, MoeConfig
from ..core.dtype import DType
from ..runtime.buffers import BufferArena
from ..runtime.gpu import DevicePtr, GpuBackend, Stream
from ..runtime.ops import KernelCache, matmul
from ..runtime.ops.matmul_quant import Bf16Linear
from ..runtime.ops import moe as moe_ops
from ..runtime.ops.moe_shared import shared_add
from .loaders.moe import SHARED_GATE_ROWS
from .model import DenseMlp, MlpBlock, StepBuffers, swiglu

if TYPE_CHECKING:
    from .expert_parallel import ExpertShard

#: rows of the zero-padded shared-expert gate weight (the GEMM's n granularity)
GATE_PAD_ROWS = SHARED_GATE_ROWS
#: the GEMM needs n to be a multiple of this (ops.matmul.gemm)
GEMM_N_MULTIPLE = 16


def moe_shape(cfg: ModelConfig, moe: MoeConfig) -> moe_ops.MoeShape:
    """The layer's shape, its shared expert (if any) folded into the decode launches."""
    return moe_ops.MoeShape(moe.num_experts, moe.top_k, cfg.hidden_size, moe.intermediate_size,
                            moe.shared_intermediate_size)


@dataclass(frozen=True, slots=True)
class MoeBuffers:
    """Scratch shared by every MoE layer of a step (only one layer runs at a time)."""

    logits: DevicePtr        # f32 [tokens, experts]
    topk_ids: DevicePtr      # i32 [tokens, top_k]
    topk_weights: DevicePtr  # f32 [tokens, top_k]
    scratch: moe_ops.MoeScratch
    #: u32 [1] the fused router's last-block ticket (ops.moe.gate_topk); zeroed at bind, left
    #: zero by every launch
    router_counter: DevicePtr
    shared_out: DevicePtr = 0   # bf16 [tokens, hidden], shared-expert models only
    shared_gate: DevicePtr = 0  # f32 [tokens, GATE_PAD_ROWS]

    @classmethod
    def reserve(cls, arena: BufferArena, cfg: ModelConfig, max_tokens: int) -> None:
        """Reserve the buffers for steps of up to `max_tokens` rows (before allocate)."""
        moe = cfg.moe
        if moe is None:
            return
        layout = moe_ops.scratch_layout(moe_shape(cfg, moe), max_tokens)
        arena.reserve("moe_logits", DType.FP32, (max_tokens, moe.num_experts))
        slots = moe_shape(cfg, moe).slots  # decode rows carry the shared expert's slots too
        arena.reserve("moe_topk_ids", DType.I32, (max_tokens, slots))
        arena.reserve("moe_topk_weights", DType.FP32, (max_tokens, slots))
        arena.reserve("moe_router_counter", DType.I32, (1,))
        for name in ("act", "y", "sorted_slots", "tile_expert"):
            nbytes = getattr(layout, name)
            if nbytes:
                arena.reserve(f"moe_{name}", DType.U8, (nbytes,))
        if moe.shared_intermediate_size:
            arena.reserve("moe_shared_out", DType.BF16, (max_tokens, cfg.hidden_size))
        if moe.shared_intermediate_size and moe.shared_gated:
            arena.reserve("moe_shared_gate", DType.FP32, (max_tokens, GATE_PAD_ROWS))

    @classmethod
    def bind(cls, arena: BufferArena, max_tokens: int, backend: GpuBackend) -> "MoeBuffers":
        """The reserved buffers' addresses (after allocate); zeroes the router's counter."""
        def opt(name: str) -> DevicePtr:
            return arena[name] if name in arena else 0

        scratch = moe_ops.MoeScratch(act=arena["moe_act"], y=opt("moe_y"),
                                     sorted_slots=opt("moe_sorted_slots"),
                                     tile_expert=opt("moe_tile_expert"), max_tokens=max_tokens)
        counter = arena.slice("moe_router_counter")
        backend.memset(arena["moe_router_counter"], 0, counter.nbytes)
        return cls(arena["moe_logits"], arena["moe_topk_ids"], arena["moe_topk_weights"],
                   scratch, arena["moe_router_counter"], opt("moe_shared_out"),
                   opt("moe_shared_gate"))


@dataclass(frozen=True, slots=True)
class SharedExpert:
    """A SwiGLU MLP every token runs, scaled by sigmoid(gate . x) (Qwen2-MoE, Qwen3-Next) or,
    with no gate, added as it is (GLM-4.5)."""

    gate_up: DevicePtr
    down: DevicePtr
    #: bf16 [GATE_PAD_ROWS, hidden]: row 0 the gate, the rest zeros; 0: ungated
    gate: DevicePtr
    inter: int


@dataclass(frozen=True, slots=True)
class MoeMlp:
    """A sparse layer's MLP (see the module docstring)."""

    shape: moe_ops.MoeShape
    routing: moe_ops.Routing
    router: DevicePtr
    gate_up: DevicePtr
    down: DevicePtr
    bufs: MoeBuffers
    shared: SharedExpert | None = None
    #: expert parallelism (expert_parallel.py): this rank's block of experts; None: all
    ep: "ExpertShard | None" = None
    #: gpt-oss's expert biases and clamped GLU (ops.moe.ExpertEpilogue); none by default
    epilogue: moe_ops.ExpertEpilogue = moe_ops.NO_EPILOGUE

    def _fused_decode(self, kc: KernelCache, t: int) -> bool:
        """Whether a step of `t` rows takes the three-launch decode path (`_decode`): not
        with a router logit bias (gpt-oss), which only `topk` takes."""
        return (moe_ops.uses_decode_kernels(t) and kc.routes.moe_fused_decode
                and not self.routing.logit_bias)

    def router_takes_norm(self, kc: KernelCache, t: int) -> bool:
        """Whether `forward` may be given the residual add + RMSNorm before the block
        (`norm`) for its router launch to do (ops.moe.router_takes_norm on the fused decode
        path; not under expert parallelism, whose router runs the same way but whose
        caller keeps the plain order)."""
        return (self.ep is None and self._fused_decode(kc, t)
                and moe_ops.router_takes_norm(kc, t, self.shape))

    def forward(self, kc: KernelCache, s: Stream, b: StepBuffers, t: int,
                norm: moe_ops.RouterNorm | None = None) -> None:
        """The block over b.normed into b.delta; `norm` (where `router_takes_norm`):
        b.normed is first formed by the router launch from norm's residual and delta."""
        if self.ep is not None:  # the output is a partial sum until `combine`
            self._forward(kc, s, b, t)
            self.ep.combine(s, b.delta, t, self.shape.hidden)
            return
        self._forward(kc, s, b, t, norm)

    def _forward(self, kc: KernelCache, s: Stream, b: StepBuffers, t: int,
                 norm: moe_ops.RouterNorm | None = None) -> None:
        if self._fused_decode(kc, t):
            self._decode(kc, s, b, t, norm)
            return
        if norm is not None:
            raise ValueError("MoE block: the router takes the norm on the fused decode path "
                             "only (router_takes_norm)")
        sh, bf = self.shape.routed_only, self.bufs
        self._router_logits(kc, s, b.normed, t)
        moe_ops.topk(kc, s, bf.logits, bf.topk_ids, bf.topk_weights, t, sh.experts, sh.top_k,
                     self.routing)
        moe_ops.experts(kc, s, b.normed, self.gate_up, self.down, bf.topk_ids, bf.topk_weights,
                        b.delta, t, self._local(kc, s, t, sh), bf.scratch,
                        epilogue=self.epilogue)
        if self.shared is not None:
            se = self.shared
            swiglu(kc, s, b, se.gate_up, se.down, bf.shared_out, t, sh.hidden, se.inter)
            add_shared(kc, s, b, bf, t, sh.hidden, se.gate)

    def _decode(self, kc: KernelCache, s: Stream, b: StepBuffers, t: int,
                norm: moe_ops.RouterNorm | None = None) -> None:
        """Three launches: the router (gate GEMV + top-k, the shared expert's gate as one
        more row), gate/up and down over the routed slots and the shared expert's slots,
        into delta (the model's add_rmsnorm adds it and normalizes). Where
        ops.moe.routes_in_experts (opt-in, batch 1) the router writes only the logits and the
        two expert launches take the top-k of them themselves."""
        sh, bf = self.shape, self.bufs
        shared = None
        if self.shared is not None:
            shared = moe_ops.SharedExpertWeights(self.shared.gate_up, self.shared.down,
                                                 self.shared.gate)
        route = None
        # (`norm` implies the fused router: router_takes_norm excludes routes_in_experts)
        if self.ep is None and moe_ops.routes_in_experts(kc, t, sh):
            # the router writes only the logits; gate/up and down each take the top-k of them
            moe_ops.gate_logits(kc, s, b.normed, self.router, bf.logits, t, sh, shared,
                                bf.shared_gate, self.routing.unrounded)
            route = moe_ops.LogitRoute(bf.logits, bf.shared_gate if shared else 0, self.routing)
        else:
            moe_ops.gate_topk(kc, s, b.normed, self.router, bf.logits, bf.topk_ids,
                              bf.topk_weights, bf.router_counter, t, sh, self.routing, shared,
                              bf.shared_gate, norm=norm)
        sh = self._local(kc, s, t, sh)
        moe_ops.experts(kc, s, b.normed, self.gate_up, self.down, bf.topk_ids, bf.topk_weights,
                        b.delta, t, sh, bf.scratch, shared=shared, route=route)

    def _local(self, kc: KernelCache, s: Stream, t: int, sh: moe_ops.MoeShape
               ) -> moe_ops.MoeShape:
        """The shape the expert launches run with: under expert parallelism the step's
        top-k ids rewritten to this rank's experts (-1 elsewhere) and its expert count."""
        return sh if self.ep is None else self.ep.select(kc, s, self.bufs.topk_ids, t, sh)

    def _router_logits(self, kc: KernelCache, s: Stream, x: DevicePtr, t: int) -> None:
        router_logits(kc, s, x, self.router, self.bufs.logits, t, self.shape,
                      self.routing.unrounded)


def add_shared(kc: KernelCache, s: Stream, b: StepBuffers, bufs: MoeBuffers, t: int,
               hidden: int, gate: DevicePtr) -> None:
    """delta += the shared expert's output (bufs.shared_out), scaled by
    bf16(sigmoid(gate . normed)) where it has a gate (`gate`: its zero-padded row), as it is
    where not (0: GLM-4.5's), with transformers' rounding (moe_shared_add_bf16)."""
    if gate:
        matmul.linear(kc, s, b.normed, gate, bufs.shared_gate, t, GATE_PAD_ROWS, hidden,
                      out_f32=True)
    shared_add(kc, s, b.delta, bufs.shared_out, bufs.shared_gate if gate else 0, b.delta, t,
               hidden, GATE_PAD_ROWS)


def shared_gate_of(moe: MoeConfig, ptr: Mapping[str, DevicePtr], layer: int) -> DevicePtr:
    """Layer `layer`'s shared-expert gate buffer (loaders/moe.py plans one for a gated
    shared expert only), 0 for an ungated one."""
    return ptr[f"l{layer}.shared_gate"] if moe.shared_gated else 0


def router_logits(kc: KernelCache, s: Stream, x: DevicePtr, router: DevicePtr,
                  logits: DevicePtr, t: int, shape: moe_ops.MoeShape,
                  unrounded: bool = False) -> None:
    """logits f32 [t, experts] = x @ router.T, as the bf16 product widened (`unrounded`:
    the float32 sums themselves, Routing.unrounded)."""
    e, h = shape.experts, shape.hidden
    if unrounded:
        matmul.linear_f32_unrounded(kc, s, x, router, logits, t, e, h)
        return
    if e % GEMM_N_MULTIPLE == 0 or t <= matmul.GEMV_MAX_M:
        matmul.linear(kc, s, x, router, logits, t, e, h, out_f32=True)
        return
    for r0 in range(0, t, matmul.GEMV_MAX_M):  # the GEMM cannot take this n
        rows = min(matmul.GEMV_MAX_M, t - r0)
        matmul.gemv(kc, s, x + 2 * r0 * h, router, logits + 4 * r0 * e, rows, e, h,
                    out_f32=True)


def routing_for(moe: MoeConfig, score_bias: DevicePtr) -> moe_ops.Routing:
    return moe_ops.Routing(scoring=moe.scoring, renormalize=moe.norm_topk_prob,
                           scale=moe.routed_scaling_factor, bias=score_bias,
                           unrounded=moe.router_f32)


def with_router_bias(routing: moe_ops.Routing, router_bias: DevicePtr) -> moe_ops.Routing:
    """`routing` for a router with a bias (gpt-oss: bf16 [experts], 0: none): it reads the
    float32 sums and adds the bias in `topk` (Routing.logit_bias)."""
    if not router_bias:
        return routing
    return replace(routing, unrounded=True, logit_bias=router_bias)


def epilogue_of(moe: MoeConfig, ptr: Mapping[str, DevicePtr],
                layer: int) -> moe_ops.ExpertEpilogue:
    """Layer `layer`'s expert epilogue (gpt-oss: the loader's `experts_gate_up_bias` and
    `experts_down_bias` buffers, the clamped GLU); none for the other families."""
    if not (moe.expert_bias or moe.swiglu_limit):
        return moe_ops.NO_EPILOGUE
    b = f"l{layer}."
    return moe_ops.ExpertEpilogue(ptr.get(b + "experts_gate_up_bias", 0),
                                  ptr.get(b + "experts_down_bias", 0), moe.swiglu_alpha,
                                  moe.swiglu_limit)


def build_mlp(cfg: ModelConfig, layer: int, ptr: Mapping[str, DevicePtr],
              bufs: MoeBuffers | None, ep: "ExpertShard | None" = None) -> MlpBlock:
    """Layer `layer`'s MLP block over the uploaded weight buffers `ptr` (WeightPlan names);
    with `ep`, a sparse layer runs only that rank's experts (and its shared expert only
    where the rank holds it)."""
    b, moe = f"l{layer}.", cfg.moe
    if moe is None or not moe.is_sparse(layer):
        h, inter = cfg.hidden_size, cfg.intermediate_size
        return DenseMlp(Bf16Linear(ptr[b + "gate_up"], 2 * inter, h),
                        Bf16Linear(ptr[b + "down"], h, inter))
    if bufs is None:
        raise ValueError(f"layer {layer} is sparse but no MoE buffers were reserved")
    shared, shape = None, moe_shape(cfg, moe)
    if moe.shared_intermediate_size and (ep is None or ep.holds_shared):
        shared = SharedExpert(ptr[b + "shared_gate_up"], ptr[b + "shared_down"],
                              shared_gate_of(moe, ptr, layer), moe.shared_intermediate_size)
    elif moe.shared_intermediate_size:  # another rank runs the shared expert
        shape = shape.routed_only
    routing = with_router_bias(routing_for(moe, ptr.get(b + "score_bias", 0)),
                               ptr.get(b + "router_bias", 0))
    return MoeMlp(shape, routing, ptr[b + "router"], ptr[b + "experts_gate_up"],
                  ptr[b + "experts_down"], bufs, shared, ep, epilogue_of(moe, ptr, layer))
