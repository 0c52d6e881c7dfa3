"""The weight plan of a mixture-of-experts decoder (Qwen3-MoE, Qwen2-MoE with shared experts,
Mixtral, MiniMax-M2, GLM-4.5, gpt-oss).

Attention is the dense decoder's; a sparse layer's MLP becomes a router `[E, H]` plus the
experts, packed into one contiguous buffer per projection so a kernel indexes any expert
by pointer arithmetic: `experts_gate_up` `[E, 2I, H]` (expert e's gate rows, then its up
rows) and `experts_down` `[E, H, I]`, bf16 row-major.

Two checkpoint layouts exist in the wild and both land in those same bytes:

* one tensor per expert (`mlp.experts.{e}.gate_proj.weight` [I, H], `up_proj`, `down_proj`
  [H, I]): the published Qwen checkpoints and transformers' default `save_pretrained`;
* the fused layout transformers 5 keeps in memory and writes with
  `save_pretrained(save_original_format=False)`: `mlp.experts.gate_up_proj` [E, 2I, H]
  (gate rows then up rows, `Concatenate(dim=1)` in its conversion mapping) and
  `mlp.experts.down_proj` [E, H, I].

Each upload goes straight to its offset (the per-expert layout is E * 3 tensors placed back
to back), so packing costs no host copy. Quantized experts (FP8, NVFP4: the per-expert
layout, as published) become two linears of E parts each (`linear_plan.add_linear(experts=)`:
codes and scales stacked like a fused q|k|v, every scale checked first); a shared expert as
wide as an expert and stored alike is folded in as expert E (docs/quantization.md). The
layout is chosen per layer from the names the checkpoint holds; an expert the config does
not know is an error, not silently ignored.

gpt-oss stores its experts the other way round, `gate_up_proj` [E, H, 2I] with the gate and
up columns interleaved (gate j at column 2j, up j at 2j + 1) and `down_proj` [E, I, H], in
bf16 or (the official release) as MXFP4 `*_blocks` / `*_scales` whose rows are the output
features ([E, 2I, H] interleaved, [E, H, I]); both become the packed buffers above through
host conversions (`dense.HostTransform`, one expert at a time), and so do its per-expert
gate/up biases ([E, 2I], interleaved, into [gate | up] order).
"""

from __future__ import annotations

from collections.abc import Container
from dataclasses import dataclass

import numpy as np

from ...core.config import ModelConfig, MoeConfig
from ...core.dtype import DType
from ...core.head_dims import SINK_HEAD_DIMS
from ...core.numerics import MXFP4_BLOCK, mxfp4_to_bf16_bits
from ...runtime.weights import WeightError
from .dense import (DenseDecoderLoader, HostTransform, UnsupportedModelError, WeightPlan,
                    add_swiglu)
from .linear_plan import add_linear, stored_format

#: rows of the shared-expert gate's device buffer: its one row, then zeros, so the
#: tensor-core GEMM (n a multiple of 16) can compute the gate logit of a prefill chunk
SHARED_GATE_ROWS = 16


class MoeLoaderError(WeightError):
    """The checkpoint's experts disagree with the config (count or layout)."""


@dataclass(frozen=True, slots=True)
class ExpertNames:
    """How a checkpoint names a sparse layer's tensors: the MoE block under the layer
    (`block`: its router is `gate.weight`, expert x's projections `experts.{x}.<proj>.weight`
    in the per-expert layout), the gate, up and down projections' names, the router's
    score bias under the block (`score_bias`, where the config has one) and the shared
    expert's MLP under the block (`shared`, where the config has one)."""

    block: str = "mlp."
    gate: str = "gate_proj"
    up: str = "up_proj"
    down: str = "down_proj"
    score_bias: str = "gate.e_score_correction_bias"
    shared: str = "shared_expert."


QWEN_EXPERTS = ExpertNames()
#: Mixtral as published: `block_sparse_moe.experts.{x}.w1` (gate), `w3` (up), `w2` (down)
MIXTRAL_EXPERTS = ExpertNames("block_sparse_moe.", "w1", "w3", "w2")
#: MiniMax-M2 as published: Mixtral's names, the score bias beside the router (not in it)
MINIMAX_EXPERTS = ExpertNames("block_sparse_moe.", "w1", "w3", "w2", "e_score_correction_bias")
#: MiniMax-M2 in transformers 5's fused layout (`mlp.experts.gate_up_proj`, the bias renamed
#: to `mlp.e_score_correction_bias`)
MINIMAX_FUSED_EXPERTS = ExpertNames(score_bias="e_score_correction_bias")
#: GLM-4.5 (either layout): Qwen's names, its ungated shared experts under `shared_experts`
GLM_EXPERTS = ExpertNames(shared="shared_experts.")


def _moe(cfg: ModelConfig) -> MoeConfig:
    if cfg.moe is None:
        raise UnsupportedModelError(f"{cfg.source}: model_type {cfg.model_type!r} needs "
                                    "num_experts, num_experts_per_tok and moe_intermediate_size")
    return cfg.moe


class MoeDecoderLoader(DenseDecoderLoader):
    """Dense attention + per-layer MLP: routed experts where `MoeConfig.is_sparse`, else SwiGLU."""

    family = "qwen2_moe"
    has_qk_norm = False

    def check_config(self, cfg: ModelConfig) -> None:
        super().check_config(cfg)
        check_moe_config(cfg)

    def plan_mlp(self, plan: WeightPlan, cfg: ModelConfig, layer: int,
                 names: Container[str]) -> None:
        if not _moe(cfg).is_sparse(layer):
            super().plan_mlp(plan, cfg, layer, names)
            return
        spelling = self.expert_names(layer, names)
        add_moe_mlp(plan, cfg, layer, f"model.layers.{layer}.{spelling.block}", names, spelling)

    def expert_names(self, layer: int, names: Container[str]) -> ExpertNames:
        """The spelling of layer `layer`'s MoE tensors in this checkpoint."""
        return QWEN_EXPERTS


def check_moe_config(cfg: ModelConfig) -> None:
    """Reject expert sizes the MoE kernels do not take (the GEMMs' n granularity)."""
    moe = _moe(cfg)
    for name, value in (("moe_intermediate_size", moe.intermediate_size),
                        ("shared_expert_intermediate_size", moe.shared_intermediate_size)):
        if value % 16:
            raise UnsupportedModelError(f"{name}={value} must be a multiple of 16")


def add_moe_mlp(plan: WeightPlan, cfg: ModelConfig, layer: int, p: str,
                names: Container[str], spelling: ExpertNames = QWEN_EXPERTS) -> None:
    """Sparse layer `layer`'s router, packed experts and shared expert, from the checkpoint
    tensors under `p` (its MoE block's prefix), in whichever expert layout `names` holds;
    `spelling` names the per-expert projections."""
    moe = _moe(cfg)
    h, inter, e = cfg.hidden_size, moe.intermediate_size, moe.num_experts
    b = f"l{layer}."
    plan.add(b + "router", [(p + "gate.weight", (e, h))])
    if moe.score_bias:
        plan.add(b + "score_bias", [(p + spelling.score_bias, (e,))],
                 dtype=DType.FP32)
    si, sp = moe.shared_intermediate_size, p + spelling.shared
    shared = ([(sp + f"{proj}.weight", si) for proj in ("gate_proj", "up_proj")],
              [(sp + "down_proj.weight", h)]) if si else None
    if p + "experts.gate_up_proj" in names:
        plan.add(b + "experts_gate_up", [(p + "experts.gate_up_proj", (e, 2 * inter, h))])
        plan.add(b + "experts_down", [(p + "experts.down_proj", (e, h, inter))])
        experts = "bf16"
    else:
        _check_expert_count(cfg, layer, p, names, spelling)
        experts = _add_per_expert(plan, b, p + "experts.", e, inter, h, layer, spelling,
                                  shared if si == inter else None)
    if shared is not None:
        if experts == "bf16" and any(stored_format(plan, part) != "bf16" for part in shared):
            raise MoeLoaderError(f"{cfg.source}: layer {layer}'s shared expert is "
                                 f"{plan.quant.format} but its routed experts are bf16 "
                                 "(quantized shared experts run beside quantized experts only)")
        if experts != "folded":
            # beside quantized experts, a shared expert of another width (or format) is a
            # dense MLP of linears (model/moe_quant.py)
            add_swiglu(plan, b + "shared_", sp, si, h, quantizable=experts == "quantized")
        if moe.shared_gated:  # zero rows up to the GEMM's n granularity (model/moe.py)
            plan.add(b + "shared_gate", [(p + "shared_expert_gate.weight", (1, h))],
                     min_bytes=DType.BF16.nbytes(SHARED_GATE_ROWS * h))


SharedParts = tuple[list[tuple[str, int]], list[tuple[str, int]]]


def _add_per_expert(plan: WeightPlan, b: str, q: str, e: int, inter: int, h: int,
                    layer: int, spelling: ExpertNames, shared: SharedParts | None = None
                    ) -> str:
    """The per-expert layout's two packed projections, bf16 or (both) quantized as the
    checkpoint stores them: 'bf16', 'quantized' (linears of `experts` parts), or 'folded'
    when `shared` (a shared expert as wide as a routed one: its gate/up and down parts) is
    stored in the same format and becomes expert e of the quantized matrices (ops/moe_quant.py
    folds_shared: its decode slot runs in the experts' launches)."""
    gate_up = [part for x in range(e) for part in ((f"{q}{x}.{spelling.gate}.weight", inter),
                                                   (f"{q}{x}.{spelling.up}.weight", inter))]
    down = [(f"{q}{x}.{spelling.down}.weight", h) for x in range(e)]
    formats = {stored_format(plan, gate_up), stored_format(plan, down)}
    if formats == {"bf16"}:
        plan.add(b + "experts_gate_up", [(name, (rows, h)) for name, rows in gate_up])
        plan.add(b + "experts_down", [(name, (rows, inter)) for name, rows in down])
        return "bf16"
    if "bf16" in formats:
        raise MoeLoaderError(f"layer {layer}: experts' gate/up and down projections must be "
                             f"stored alike ({q}0.{spelling.gate} / {spelling.down}: one "
                             f"bf16, one {plan.quant.format})")
    fold = shared is not None and all(stored_format(plan, part) != "bf16" for part in shared)
    if fold:
        assert shared is not None
        gate_up, down = gate_up + shared[0], down + shared[1]
    add_linear(plan, b + "experts_gate_up", gate_up, h, experts=e + fold)
    add_linear(plan, b + "experts_down", down, inter, experts=e + fold)
    return "folded" if fold else "quantized"


def _check_expert_count(cfg: ModelConfig, layer: int, p: str, names: Container[str],
                        spelling: ExpertNames) -> None:
    """One-tensor-per-expert layout: the checkpoint's expert count must be the config's.

    More experts than configured would be silently ignored, fewer would surface as a list of
    missing tensors; both become one line naming the layer and the counts. (A single missing
    tensor of an expert in range is left to `WeightStore.validate`, which names it.)
    """
    e = _moe(cfg).num_experts
    q = p + "experts."

    def has(x: int) -> bool:
        return any(f"{q}{x}.{proj}.{codes}" in names
                   for proj in (spelling.gate, spelling.up, spelling.down)
                   for codes in ("weight", "weight_packed"))  # bf16 / FP8 / ModelOpt, CT NVFP4

    if has(e):
        raise MoeLoaderError(f"{cfg.source}: checkpoint has tensor {q}{e}.* but num_experts = "
                             f"{e} (experts are numbered 0..{e - 1})")
    present = next((x for x in range(e) if not has(x)), e)
    if 0 < present < e and not any(has(x) for x in range(present, e)):
        raise MoeLoaderError(f"{cfg.source}: layer {layer} has {present} experts "
                             f"({q}0..{present - 1}) but num_experts = {e}")


class Qwen3MoeLoader(MoeDecoderLoader):
    """Qwen3-MoE: Qwen3 attention (q/k RMSNorm) with routed experts."""

    family = "qwen3_moe"
    has_qk_norm = True


class MixtralLoader(MoeDecoderLoader):
    """Mixtral: Llama attention, every layer's MLP routed (softmax top-k, renormalized) through
    experts under `block_sparse_moe` as published, or transformers 5's fused layout under
    `mlp` (`save_pretrained(save_original_format=False)`)."""

    family = "mixtral"

    def expert_names(self, layer: int, names: Container[str]) -> ExpertNames:
        fused = f"model.layers.{layer}.mlp.experts.gate_up_proj"
        return QWEN_EXPERTS if fused in names else MIXTRAL_EXPERTS


class MiniMaxM2Loader(MixtralLoader):
    """MiniMax-M2: Mixtral's layout with q and k RMSNorms over the whole projection
    (`ModelConfig.qk_norm_whole`) and a sigmoid router whose per-expert score bias sits
    beside it (`block_sparse_moe.e_score_correction_bias`)."""

    family = "minimax_m2"
    has_qk_norm = True

    def expert_names(self, layer: int, names: Container[str]) -> ExpertNames:
        fused = f"model.layers.{layer}.mlp.experts.gate_up_proj"
        return MINIMAX_FUSED_EXPERTS if fused in names else MINIMAX_EXPERTS


class Glm4MoeLoader(MoeDecoderLoader):
    """GLM-4.5 / GLM-4.5-Air / GLM-4.6: dense attention with q/k/v biases (o_proj none) and
    per-head q/k norms where `use_qk_norm` says, `first_k_dense_replace` dense layers, then
    routed experts (either layout; bf16, or FP8 / NVFP4 per expert as the quantized Qwen
    checkpoints store them) beside ungated `shared_experts` (quantized alike and as wide as an
    expert: folded in) and a float32 sigmoid router (`MoeConfig.router_f32`, its weight bf16).
    Its MTP layers (model.layers.{num_hidden_layers}.*) are not loaded (load.py)."""

    family = "glm4_moe"

    def expert_names(self, layer: int, names: Container[str]) -> ExpertNames:
        return GLM_EXPERTS


def gate_up_rows(interleaved: np.ndarray) -> np.ndarray:
    """gpt-oss's gate/up rows (or bias entries) [2I, ...] with gate j at row 2j and up j at
    2j + 1 -> the packed [gate rows | up rows] order the expert kernels read."""
    return np.concatenate([interleaved[0::2], interleaved[1::2]])


def _bf16_gate_up(w: np.ndarray) -> np.ndarray:
    """One expert's bf16 `gate_up_proj` [H, 2I] (bits) -> its [2I, H] packed rows."""
    return np.ascontiguousarray(gate_up_rows(w.T))


def _bf16_down(w: np.ndarray) -> np.ndarray:
    """One expert's bf16 `down_proj` [I, H] (bits) -> [H, I]."""
    return np.ascontiguousarray(w.T)


def _mxfp4_gate_up(blocks: np.ndarray, scales: np.ndarray) -> np.ndarray:
    """One expert's MXFP4 gate/up ([2I, H / 32, 16] codes, [2I, H / 32] scales) -> bf16 bits
    [2I, H] in packed order (the decode is exact: E2M1 times a power of two)."""
    return gate_up_rows(mxfp4_to_bf16_bits(blocks, scales))


class GptOssLoader(MoeDecoderLoader):
    """OpenAI gpt-oss (gpt-oss-20b, gpt-oss-120b): attention with q/k/v and o_proj biases and
    a learned sink per q head (`self_attn.sinks`), every layer routed through
    `intermediate_size`-wide experts under `mlp.router` (a Linear with a bias), with gate/up
    and down biases and the clamped SwiGLU (MoeConfig.swiglu_limit). Experts in the bf16
    layout transformers writes, or the official release's MXFP4 blocks (quant_method
    'mxfp4'), both converted on the host into the packed bf16 buffers (module docstring)."""

    family = "gpt_oss"
    decodes_mxfp4 = True
    #: where the prefill kernel takes attention sinks
    head_dims = SINK_HEAD_DIMS

    def plan_mlp(self, plan: WeightPlan, cfg: ModelConfig, layer: int,
                 names: Container[str]) -> None:
        moe = _moe(cfg)
        h, inter, e = cfg.hidden_size, moe.intermediate_size, moe.num_experts
        b, p = f"l{layer}.", f"model.layers.{layer}.mlp."
        plan.add(b + "router", [(p + "router.weight", (e, h))])
        plan.add(b + "router_bias", [(p + "router.bias", (e,))])
        q = p + "experts."
        blocks = q + "gate_up_proj_blocks"
        # the bf16 layout where the checkpoint has it (a synthetic store has every name),
        # else the MXFP4 blocks where it has those or its config says so
        if q + "gate_up_proj" not in names and (blocks in names or plan.quant.mxfp4_experts):
            for width in (h, inter):
                if width % MXFP4_BLOCK:
                    raise UnsupportedModelError(
                        f"{cfg.source}: MXFP4 experts need hidden_size and intermediate_size "
                        f"multiples of {MXFP4_BLOCK}, got {width}")
            gate_up = ((blocks, DType.U8, (e, 2 * inter, h // MXFP4_BLOCK, MXFP4_BLOCK // 2)),
                       (q + "gate_up_proj_scales", DType.U8, (e, 2 * inter, h // MXFP4_BLOCK)))
            down = ((q + "down_proj_blocks", DType.U8,
                     (e, h, inter // MXFP4_BLOCK, MXFP4_BLOCK // 2)),
                    (q + "down_proj_scales", DType.U8, (e, h, inter // MXFP4_BLOCK)))
            convert = (_mxfp4_gate_up, mxfp4_to_bf16_bits)  # down: [H, I / 32, 16] -> [H, I]
        else:
            gate_up = ((q + "gate_up_proj", DType.BF16, (e, h, 2 * inter)),)
            down = ((q + "down_proj", DType.BF16, (e, inter, h)),)
            convert = (_bf16_gate_up, _bf16_down)
        plan.add_transform(HostTransform(b + "experts_gate_up", gate_up, (2 * inter, h),
                                         convert[0], count=e))
        plan.add_transform(HostTransform(b + "experts_down", down, (h, inter), convert[1],
                                         count=e))
        plan.add_transform(HostTransform(
            b + "experts_gate_up_bias", ((q + "gate_up_proj_bias", DType.BF16, (e, 2 * inter)),),
            (2 * inter,), gate_up_rows, count=e))
        plan.add(b + "experts_down_bias", [(q + "down_proj_bias", (e, h))])
