"""The mixture-of-experts MLP block over FP8 / NVFP4 experts (ops/moe_quant.py).

What differs from the bf16 block (moe.py `MoeMlp`): the experts are `QuantExperts`, so a
decode step runs the router (`ops.moe.gate_topk`) and the two quantized-expert launches
(`ops.moe_quant.decode_experts`: only the selected experts' quantized bytes are read), and a
prefill chunk dequantizes both projections into the step's weight scratch and runs the bf16
grouped path (`ops.moe.experts`) on it. A shared expert (ModelOpt quantizes its
projections, keeps its one-row gate in bf16) as wide as a routed expert and stored alike is
folded by the loader into the expert matrices as one more expert (Qwen3.5-MoE,
Qwen3-Next): at decode it is one more slot of the same three launches (the router writes
its slot and gate weight, as on the bf16 path), at prefill its bf16 copy runs as a SwiGLU
into `shared_out`. Any other shared expert is a dense SwiGLU MLP of linears in whatever
format the checkpoint stores. Both add their gated output with `moe_shared_add_bf16`
(transformers' rounding) outside decode. The block's output goes into delta; the model's
add_rmsnorm launch after it does the residual add and the next norm, as after the bf16 block.

GLM-4.5 runs here as on the bf16 block: its float32 router (`Routing.unrounded`, the router
kept bf16 by the quantizers) writes float32 logits on both paths, and its ungated shared
expert (gate 0; folded for GLM-4.5's one shared expert as wide as a routed one) is weighted
1 at decode and added as it is at prefill (moe.py `add_shared`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from ..core.config import ModelConfig
from ..runtime.gpu import DevicePtr, Stream
from ..runtime.ops import KernelCache
from ..runtime.ops import moe as moe_ops
from ..runtime.ops.matmul_quant import LinearWeight
from ..runtime.ops.moe_quant import (QuantExperts, check_pair, decode_experts, folds_shared,
                                     prefill_scratch_bytes)
from .model import DenseMlp, StepBuffers, swiglu
from .moe import (MoeBuffers, add_shared, moe_shape, router_logits, routing_for,
                  shared_gate_of)


@dataclass(frozen=True, slots=True)
class QuantSharedExpert:
    """A shared expert's SwiGLU (bf16 or quantized linears) and its bf16 gate
    [GATE_PAD_ROWS, hidden] (row 0 the gate, zeros after; 0: ungated)."""

    mlp: DenseMlp
    gate: DevicePtr


@dataclass(frozen=True, slots=True)
class QuantMoeMlp:
    """A sparse layer's MLP with quantized routed experts (see the module docstring).
    `shape.shared_inter` > 0: the shared expert is folded into the expert matrices (expert
    shape.experts; ops.moe_quant.folds_shared) and `shared_gate` is its bf16 gate (0:
    ungated); else a shared expert, if any, is `shared` (its own linears)."""

    shape: moe_ops.MoeShape
    routing: moe_ops.Routing
    router: DevicePtr
    gate_up: QuantExperts
    down: QuantExperts
    bufs: MoeBuffers
    shared: QuantSharedExpert | None = None
    shared_gate: DevicePtr = 0

    def __post_init__(self) -> None:
        if folds_shared(self.shape) == (self.shared is not None) and self.shape.shared_inter:
            raise ValueError("QuantMoeMlp: a shared expert is folded or separate, not both")
        check_pair(self.gate_up, self.down, self.shape)

    def router_takes_norm(self, kc: KernelCache, t: int) -> bool:
        """Whether `forward` may be given the add + norm before the block for its decode
        router launch to do (ops.moe.router_takes_norm)."""
        return moe_ops.uses_decode_kernels(t) and moe_ops.router_takes_norm(kc, t, self.shape)

    def forward(self, kc: KernelCache, s: Stream, b: StepBuffers, t: int,
                norm: moe_ops.RouterNorm | None = None) -> None:
        sh, bf = self.shape, self.bufs
        folded = folds_shared(sh)
        if norm is not None and not moe_ops.uses_decode_kernels(t):
            raise ValueError("QuantMoeMlp: the router takes the norm on decode steps only "
                             "(router_takes_norm)")
        if moe_ops.uses_decode_kernels(t):
            shared = (moe_ops.SharedExpertWeights(self.gate_up.codes, self.down.codes,
                                                  self.shared_gate) if folded else None)
            moe_ops.gate_topk(kc, s, b.normed, self.router, bf.logits, bf.topk_ids,
                              bf.topk_weights, bf.router_counter, t, sh, self.routing, shared,
                              bf.shared_gate, norm=norm)
            decode_experts(kc, s, b.normed, self.gate_up, self.down, bf.topk_ids,
                           bf.topk_weights, bf.scratch.act, b.delta, t, sh)
        else:
            routed = sh.routed_only
            router_logits(kc, s, b.normed, self.router, bf.logits, t, routed,
                          self.routing.unrounded)
            moe_ops.topk(kc, s, bf.logits, bf.topk_ids, bf.topk_weights, t, routed.experts,
                         routed.top_k, self.routing)
            w_gate_up, w_down = self._dequantized(kc, s, b)
            moe_ops.experts(kc, s, b.normed, w_gate_up, w_down, bf.topk_ids, bf.topk_weights,
                            b.delta, t, routed, bf.scratch)
            if folded:  # expert `experts` of the bf16 copies: [gate | up] and down
                e, h, i = sh.experts, sh.hidden, sh.inter
                swiglu(kc, s, b, w_gate_up + 2 * e * 2 * i * h, w_down + 2 * e * h * i,
                       bf.shared_out, t, h, i)
                add_shared(kc, s, b, bf, t, h, self.shared_gate)
        if self.shared is not None:
            self.shared.mlp.project(kc, s, b, t, bf.shared_out)
            add_shared(kc, s, b, bf, t, sh.hidden, self.shared.gate)

    def _dequantized(self, kc: KernelCache, s: Stream, b: StepBuffers
                     ) -> tuple[DevicePtr, DevicePtr]:
        """Both projections in bf16, in the step's weight scratch (sized by
        `ops.moe_quant.prefill_scratch_bytes` at load)."""
        if not b.w_scratch:
            raise ValueError("quantized MoE prefill needs the step's weight scratch")
        down = b.w_scratch + -(-self.gate_up.bf16_bytes // 256) * 256
        self.gate_up.dequant(kc, s, b.w_scratch)
        self.down.dequant(kc, s, down)
        return b.w_scratch, down


Linears = Mapping[str, "LinearWeight | QuantExperts"]


def build_quant_mlp(cfg: ModelConfig, layer: int, ptr: Mapping[str, DevicePtr],
                    linears: Linears, bufs: MoeBuffers) -> QuantMoeMlp:
    """Sparse layer `layer`'s block from its uploaded buffers and built linears (load.py):
    a shared expert the loader folded into the experts (one more expert), else its own."""
    b, moe = f"l{layer}.", cfg.moe
    assert moe is not None
    shape, routing = moe_shape(cfg, moe), routing_for(moe, ptr.get(b + "score_bias", 0))
    gate_up, down = linears[b + "experts_gate_up"], linears[b + "experts_down"]
    if not (isinstance(gate_up, QuantExperts) and isinstance(down, QuantExperts)):
        raise ValueError(f"layer {layer}: experts_gate_up and experts_down must both be "
                         "quantized")
    if shape.shared_inter and gate_up.experts > moe.num_experts:  # folded
        return QuantMoeMlp(shape, routing, ptr[b + "router"], gate_up, down, bufs,
                           shared_gate=shared_gate_of(moe, ptr, layer))
    shared = None
    if shape.shared_inter:
        shared_gate_up, shared_down = linears[b + "shared_gate_up"], linears[b + "shared_down"]
        if isinstance(shared_gate_up, QuantExperts) or isinstance(shared_down, QuantExperts):
            raise ValueError(f"layer {layer}: the shared expert is a dense MLP, not experts")
        shared = QuantSharedExpert(DenseMlp(shared_gate_up, shared_down),
                                   shared_gate_of(moe, ptr, layer))
    return QuantMoeMlp(shape.routed_only, routing, ptr[b + "router"], gate_up, down, bufs,
                       shared)


def expert_scratch_bytes(linears: Linears, max_tokens: int) -> int:
    """The weight scratch the quantized MoE layers' prefill chunks need (0 when steps never
    exceed the decode kernels' batch): the largest layer's two projections in bf16."""
    if max_tokens <= moe_ops.DECODE_MAX_TOKENS:
        return 0
    sizes = [prefill_scratch_bytes(gate_up, down)
             for name, gate_up in linears.items()
             if name.endswith(".experts_gate_up") and isinstance(gate_up, QuantExperts)
             and isinstance(down := linears[name[: -len("gate_up")] + "down"], QuantExperts)]
    return max(sizes, default=0)
