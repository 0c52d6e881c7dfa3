"""The weight plan of a dense decoder (Llama-style): which checkpoint tensors exist, what
shape and dtype each must have, and where each lands in device memory.

q/k/v projections are placed back to back in one fused [q|k|v] matrix and gate/up in one
[gate|up] matrix, so a decode step runs one GEMV for each instead of three and two. The
fusion costs nothing at load time: each tensor is uploaded straight to its offset. A layout
the kernels cannot read as stored (gpt-oss's experts: [in, out] with gate and up columns
interleaved, or MXFP4 blocks) is a `HostTransform`: converted on the host, expert by expert,
then uploaded.
"""

from __future__ import annotations

from collections.abc import Callable, Container, Mapping
from dataclasses import dataclass, field

import numpy as np

from ...core.config import ModelConfig
from ...core.dtype import DType
from ...core.head_dims import PADDED_HEAD_DIMS
from ...core.quant_config import CheckpointQuant
from .linear_plan import LinearPlan, add_linear, stored_dtypes

ALIGN = 256
#: the attention kernels' head dims (64, 128) and those they serve padded to 128
#: (core.head_dims.padded_head_dim: Phi-3-mini's 96)
SUPPORTED_HEAD_DIMS = tuple(sorted((64, 128) + PADDED_HEAD_DIMS))


class UnsupportedModelError(ValueError):
    """The checkpoint's architecture or a config value is outside what Atlas implements."""


@dataclass(frozen=True, slots=True)
class TensorSlot:
    """A checkpoint tensor and its destination: `buffer` at `offset` bytes."""

    name: str
    dtype: DType
    shape: tuple[int, ...]
    buffer: str
    offset: int

    @property
    def nbytes(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return self.dtype.nbytes(n)


@dataclass(frozen=True, slots=True)
class HostTransform:
    """A device buffer made on the host from checkpoint tensors whose layout the kernels do
    not read as stored: experts [first, first + count) of `sources` (name, dtype, shape;
    each [experts, ...]) are read one expert at a time, `convert(*rows)` (numpy arrays, bf16
    as uint16 bits, one expert's slice of each source, in order) returns that expert's part
    of the buffer (bf16 bits of `part_shape`), and the parts are uploaded back to back. A
    ValueError from `convert` names the tensor at load (model/load.py)."""

    buffer: str
    sources: tuple[tuple[str, DType, tuple[int, ...]], ...]
    part_shape: tuple[int, ...]
    convert: Callable[..., np.ndarray]
    first: int = 0
    count: int = 0

    @property
    def part_bytes(self) -> int:
        return DType.BF16.nbytes(int(np.prod(self.part_shape)))


@dataclass
class WeightPlan:
    """Device buffers (name -> bytes) and the tensors that fill them: straight copies
    (`slots`) and host conversions (`transforms`)."""

    buffers: dict[str, int] = field(default_factory=dict)
    slots: list[TensorSlot] = field(default_factory=list)
    transforms: list[HostTransform] = field(default_factory=list)
    #: the linear weights (bf16 or quantized: see linear_plan), the checkpoint's
    #: quantization and stored dtypes (tensor name -> safetensors dtype) they are planned by
    linears: dict[str, LinearPlan] = field(default_factory=dict)
    quant: CheckpointQuant = field(default_factory=CheckpointQuant)
    stored: Mapping[str, str] = field(default_factory=dict)

    def add(self, buffer: str, parts: list[tuple[str, tuple[int, ...]]],
            dtype: DType = DType.BF16, min_bytes: int = 0) -> None:
        """Create `buffer` holding `parts` back to back (a fused weight when len > 1).

        `min_bytes` sizes the buffer past its parts: the rest stays zero (the loader
        zero-fills the weight allocation), for a weight a kernel reads with padding rows.
        """
        offset = 0
        for name, shape in parts:
            slot = TensorSlot(name, dtype, shape, buffer, offset)
            self.slots.append(slot)
            offset += slot.nbytes
        self.buffers[buffer] = max(offset, min_bytes)

    def add_transform(self, transform: HostTransform) -> None:
        """Create `transform.buffer`, filled by the host conversion (count parts)."""
        self.transforms.append(transform)
        self.buffers[transform.buffer] = transform.count * transform.part_bytes

    def expected(self) -> dict[str, tuple[DType, tuple[int, ...]]]:
        out = {s.name: (s.dtype, s.shape) for s in self.slots}
        out.update({name: (dtype, shape) for t in self.transforms
                    for name, dtype, shape in t.sources})
        return out

    def layout(self) -> tuple[dict[str, int], int]:
        """Byte offset of every buffer inside one allocation, and the allocation's size."""
        offsets, total = {}, 0
        for name, nbytes in self.buffers.items():
            offsets[name] = total
            total += (nbytes + ALIGN - 1) // ALIGN * ALIGN
        return offsets, total


class DenseDecoderLoader:
    """Llama-family decoder: embedding, N x (attention + SwiGLU MLP), final norm, LM head;
    also Mistral (the same layers) and Qwen2 (plus q/k/v biases, `ModelConfig.qkv_bias`); an
    o_proj bias (`ModelConfig.o_bias`) and per-head attention sinks
    (`ModelConfig.attention_sinks`) where the family has them (gpt-oss)."""

    family = "llama"
    has_qk_norm = False
    #: the family's loader decodes MXFP4 experts (CheckpointQuant.mxfp4_experts)
    decodes_mxfp4 = False
    #: attention head dims the kernels are compiled for
    head_dims: tuple[int, ...] = SUPPORTED_HEAD_DIMS
    #: the MLP activations (config hidden_act) the family's kernels implement
    activations: tuple[str, ...] = ("silu",)

    def check_config(self, cfg: ModelConfig) -> None:
        """Reject config values the kernels do not implement, naming the field."""
        if cfg.head_dim not in self.head_dims:
            raise UnsupportedModelError(
                f"head_dim={cfg.head_dim} is not supported (supported: {self.head_dims})")
        if cfg.num_attention_heads % cfg.num_key_value_heads:
            raise UnsupportedModelError(
                f"num_attention_heads={cfg.num_attention_heads} is not a multiple of "
                f"num_key_value_heads={cfg.num_key_value_heads}")
        # an o_proj bias is read where it joins the float32 sums (gpt-oss: model.py
        # `_biased_linear`); no other family's is
        for flag, what in (("o_bias", "attention_bias=true (a bias on o_proj)"),
                           ("mlp_bias", "mlp_bias=true")):
            if getattr(cfg, flag) and not (flag == "o_bias" and cfg.bias_in_f32):
                raise UnsupportedModelError(f"{what} is not supported for {cfg.model_type}")
        act = cfg.hidden_act
        if act not in self.activations:
            raise UnsupportedModelError(f"hidden_act={act!r} is not supported for "
                                        f"{cfg.model_type} (only {self.activations})")
        for name, value in (("hidden_size", cfg.hidden_size), ("intermediate_size",
                                                               cfg.intermediate_size)):
            if value % 16:
                raise UnsupportedModelError(f"{name}={value} must be a multiple of 16")

    def plan(self, cfg: ModelConfig, names: Container[str] = (),
             quant: CheckpointQuant = CheckpointQuant()) -> WeightPlan:
        """Every tensor the model needs and its device buffer. `names` (the checkpoint's
        tensor names) lets a loader pick between layouts the wild has for the same weights;
        with `quant`, its dtypes say which projections are stored quantized."""
        self.check_config(cfg)
        if quant.mxfp4_experts and not self.decodes_mxfp4:
            raise UnsupportedModelError(f"{cfg.source}: quant_method 'mxfp4' (MXFP4 experts) "
                                        f"is not supported for {cfg.model_type}")
        h, d, vocab = cfg.hidden_size, cfg.head_dim, cfg.vocab_size
        q_rows, kv_rows = cfg.num_attention_heads * d, cfg.num_key_value_heads * d
        plan = WeightPlan(quant=quant, stored=stored_dtypes(names))
        pre = self.prefix(cfg, names)
        plan.add("embed", [(pre + "embed_tokens.weight", (vocab, h))])
        for i in range(cfg.num_hidden_layers):
            p = f"{pre}layers.{i}."
            add_linear(plan, f"l{i}.qkv", self.qkv_parts(p, q_rows, kv_rows), h)
            if cfg.qkv_bias:  # bf16 whatever the weights' format, added after the product
                plan.add(f"l{i}.qkv_bias", [(p + "self_attn.q_proj.bias", (q_rows,)),
                                            (p + "self_attn.k_proj.bias", (kv_rows,)),
                                            (p + "self_attn.v_proj.bias", (kv_rows,))])
            add_linear(plan, f"l{i}.o", [(p + "self_attn.o_proj.weight", h)], q_rows)
            if cfg.o_bias:  # bf16, joining the product's float32 sums
                plan.add(f"l{i}.o_bias", [(p + "self_attn.o_proj.bias", (h,))])
            if cfg.attention_sinks:  # one bf16 logit a q head
                plan.add(f"l{i}.sinks", [(p + "self_attn.sinks", (cfg.num_attention_heads,))])
            self.plan_mlp(plan, cfg, i, names)
            self.plan_norms(plan, p, i, h)
            if self.has_qk_norm or cfg.use_qk_norm:  # per head, or the whole projection
                q_w, k_w = (q_rows, kv_rows) if cfg.qk_norm_whole else (d, d)
                plan.add(f"l{i}.q_norm", [(p + "self_attn.q_norm.weight", (q_w,))])
                plan.add(f"l{i}.k_norm", [(p + "self_attn.k_norm.weight", (k_w,))])
        plan.add("final_norm", [(pre + "norm.weight", (h,))])
        if not cfg.tie_word_embeddings:
            # a linear: bf16, or quantized where the checkpoint stores it so
            add_linear(plan, "lm_head", [("lm_head.weight", vocab)], h)
        return plan

    def prefix(self, cfg: ModelConfig, names: Container[str]) -> str:
        """Where the decoder's tensors live in the checkpoint (`model.`)."""
        return "model."

    def plan_norms(self, plan: WeightPlan, p: str, layer: int, hidden: int) -> None:
        """Layer `layer`'s RMSNorm weights: before attention and before the MLP."""
        plan.add(f"l{layer}.in_norm", [(p + "input_layernorm.weight", (hidden,))])
        plan.add(f"l{layer}.post_norm", [(p + "post_attention_layernorm.weight", (hidden,))])

    def qkv_parts(self, p: str, q_rows: int, kv_rows: int) -> list[tuple[str, int]]:
        """The checkpoint tensors of layer prefix `p`'s fused [q | k | v] projection."""
        return [(p + "self_attn.q_proj.weight", q_rows), (p + "self_attn.k_proj.weight", kv_rows),
                (p + "self_attn.v_proj.weight", kv_rows)]

    def plan_mlp(self, plan: WeightPlan, cfg: ModelConfig, layer: int,
                 names: Container[str]) -> None:
        """Layer `layer`'s MLP: SwiGLU with gate and up fused into one [gate|up] matrix."""
        add_swiglu(plan, f"l{layer}.", f"{self.prefix(cfg, names)}layers.{layer}.mlp.",
                   cfg.intermediate_size, cfg.hidden_size, quantizable=True)


def add_swiglu(plan: WeightPlan, buffer: str, prefix: str, inter: int, hidden: int,
               quantizable: bool = False) -> None:
    """A SwiGLU MLP's `gate_up` [2 * inter, hidden] and `down` [hidden, inter] buffers;
    `quantizable`: planned as linears (a dense layer's MLP), else bf16 only (MoE shared
    experts: their kernels read bf16)."""
    if quantizable:
        add_linear(plan, buffer + "gate_up", [(prefix + "gate_proj.weight", inter),
                                              (prefix + "up_proj.weight", inter)], hidden)
        add_linear(plan, buffer + "down", [(prefix + "down_proj.weight", hidden)], inter)
        return
    plan.add(buffer + "gate_up", [(prefix + "gate_proj.weight", (inter, hidden)),
                                  (prefix + "up_proj.weight", (inter, hidden))])
    plan.add(buffer + "down", [(prefix + "down_proj.weight", (hidden, inter))])


class Qwen3Loader(DenseDecoderLoader):
    """Qwen3 dense: the Llama layout plus per-head RMSNorm on q and k before RoPE."""

    family = "qwen3"
    has_qk_norm = True


class Phi3Loader(DenseDecoderLoader):
    """Phi-3 / Phi-4: the Llama layers with q/k/v stored as one `qkv_proj` and gate/up as one
    `gate_up_proj` (already the fused [q | k | v] and [gate | up] rows the kernels read)."""

    family = "phi3"

    def qkv_parts(self, p: str, q_rows: int, kv_rows: int) -> list[tuple[str, int]]:
        return [(p + "self_attn.qkv_proj.weight", q_rows + 2 * kv_rows)]

    def plan_mlp(self, plan: WeightPlan, cfg: ModelConfig, layer: int,
                 names: Container[str]) -> None:
        p, h, inter = f"model.layers.{layer}.mlp.", cfg.hidden_size, cfg.intermediate_size
        add_linear(plan, f"l{layer}.gate_up", [(p + "gate_up_proj.weight", 2 * inter)], h)
        add_linear(plan, f"l{layer}.down", [(p + "down_proj.weight", h)], inter)


class Gemma3Loader(DenseDecoderLoader):
    """Gemma 3 (text): Qwen3's per-head q/k norms, a tanh-GELU GLU, and four RMSNorms a
    layer: before attention (input_layernorm) and the MLP (pre_feedforward_layernorm), and on
    each one's output before it joins the residual stream (post_attention_layernorm,
    post_feedforward_layernorm); every norm weight zero-centred, applied as (1 + w). The
    text-only checkpoints keep the decoder under `model.`, the multimodal ones under
    `model.language_model.` (transformers 5) or `language_model.model.` (as Google published
    them; the vision tower is not loaded)."""

    family = "gemma3"
    has_qk_norm = True
    head_dims = (64, 128, 256)
    activations = ("gelu_pytorch_tanh",)
    _PREFIXES = ("model.", "model.language_model.", "language_model.model.")

    def check_config(self, cfg: ModelConfig) -> None:
        super().check_config(cfg)
        for field in cfg.unsupported_fields:
            raise UnsupportedModelError(f"{field} is not supported for {cfg.model_type}")

    def prefix(self, cfg: ModelConfig, names: Container[str]) -> str:
        found = [p for p in self._PREFIXES if p + "embed_tokens.weight" in names]
        if found:
            return found[0]
        return "model.language_model." if cfg.multimodal_wrapper else "model."

    def plan_norms(self, plan: WeightPlan, p: str, layer: int, hidden: int) -> None:
        for buffer, name in (("in_norm", "input_layernorm"),
                             ("post_norm", "pre_feedforward_layernorm"),
                             ("attn_out_norm", "post_attention_layernorm"),
                             ("mlp_out_norm", "post_feedforward_layernorm")):
            plan.add(f"l{layer}.{buffer}", [(f"{p}{name}.weight", (hidden,))])
