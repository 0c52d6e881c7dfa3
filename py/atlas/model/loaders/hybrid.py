"""The weight plan of the hybrid Qwen3.5 family: Gated-DeltaNet and gated full-attention
layers (config `layer_types`), each followed by a SwiGLU MLP (`qwen3_5`) or a
mixture-of-experts one (`qwen3_5_moe`, `qwen3_next`: loaders/moe.py's plan under the
layer's prefix).

Fusions, as in the dense plan: a full-attention layer's q_proj (each head's query followed
by its output gate), k_proj and v_proj form one matrix; a linear-attention layer's four input
projections form one [qkv | z | b | a] matrix, so a step runs one GEMM for them. Checkpoints
that wrap the text model in a multimodal one keep it under `model.language_model.`; their
vision tower is not loaded.

Qwen3-Next (`qwen3_next`) stores the linear-attention input projections grouped by key
head instead: `in_proj_qkvz` holds, per key-head group g, [q_g | k_g | v_g | z_g] (one key
head's q and k, its hv/hk value heads' v and z) and `in_proj_ba` [b_g | a_g]. The loader
uploads both into the fused buffer as they are, then `RowMove`s (device copies, applied once
at load) put the rows in the [q | k | v | z | b | a] order the kernels take.
"""

from __future__ import annotations

from collections.abc import Container
from dataclasses import dataclass

from ...core.config import LinearAttentionConfig, ModelConfig
from ...runtime.ops.linear_attention import CONV_MAX_KERNEL, DELTA_DV_TILE, DELTA_MAX_DK
from ...core.quant_config import CheckpointQuant
from .dense import DenseDecoderLoader, UnsupportedModelError, WeightPlan, add_swiglu
from .linear_plan import add_linear, stored_dtypes
from .moe import add_moe_mlp, check_moe_config

#: head dims of the hybrid family's full attention (attention.cu instantiations)
HYBRID_HEAD_DIMS = (64, 128, 256)


def text_prefix(cfg: ModelConfig) -> str:
    """Where the text model's tensors live in the checkpoint."""
    return "model.language_model." if cfg.multimodal_wrapper else "model."


def in_proj_width(cfg: ModelConfig) -> int:
    """Columns of the fused linear-attention input projection [qkv | z | b | a]."""
    la = cfg.linear_attention
    assert la is not None
    return la.conv_dim + la.value_dim + 2 * la.num_value_heads


@dataclass(frozen=True, slots=True)
class RowMove:
    """Rows [src, src + rows) of a buffer as uploaded go to rows [dst, dst + rows)."""

    src: int
    dst: int
    rows: int


def grouped_in_proj_moves(la: LinearAttentionConfig) -> list[RowMove]:
    """Qwen3-Next's [qkvz grouped by key head | ba grouped by key head] rows -> the kernels'
    [q | k | v | z | b | a] (modeling_qwen3_next.fix_query_key_value_ordering, as rows)."""
    dk, dv, hk = la.key_head_dim, la.value_head_dim, la.num_key_heads
    r = la.num_value_heads // hk  # value heads per key head
    group = 2 * dk + 2 * r * dv
    ba_src, ba_dst = hk * group, la.conv_dim + la.value_dim
    moves = []
    for g in range(hk):
        src = g * group
        moves += [RowMove(src, g * dk, dk),
                  RowMove(src + dk, la.key_dim + g * dk, dk),
                  RowMove(src + 2 * dk, 2 * la.key_dim + g * r * dv, r * dv),
                  RowMove(src + 2 * dk + r * dv, la.conv_dim + g * r * dv, r * dv),
                  RowMove(ba_src + 2 * r * g, ba_dst + g * r, r),
                  RowMove(ba_src + 2 * r * g + r, ba_dst + la.num_value_heads + g * r, r)]
    return moves


class Qwen35Loader(DenseDecoderLoader):
    """Qwen3.5 dense (`qwen3_5`): hybrid layers, (1 + w) RMSNorm weights, partial rotary."""

    family = "qwen3_5"
    has_qk_norm = True
    head_dims = HYBRID_HEAD_DIMS

    def check_config(self, cfg: ModelConfig) -> None:
        la = cfg.linear_attention
        if la is None or not cfg.layer_types:
            raise UnsupportedModelError(f"{cfg.model_type}: config has no linear-attention "
                                        "fields (linear_num_key_heads, ...)")
        if cfg.rotary_dim < 2 or cfg.rotary_dim % 2:
            raise UnsupportedModelError(
                f"partial_rotary_factor={cfg.partial_rotary_factor} gives rotary dim "
                f"{cfg.rotary_dim}; it must be even and >= 2")
        if la.num_value_heads % la.num_key_heads:
            raise UnsupportedModelError(
                f"linear_num_value_heads={la.num_value_heads} is not a multiple of "
                f"linear_num_key_heads={la.num_key_heads}")
        if la.value_head_dim % DELTA_DV_TILE or la.key_head_dim % 8 or (
                la.key_head_dim > DELTA_MAX_DK):
            raise UnsupportedModelError(
                f"linear head dims key={la.key_head_dim}, value={la.value_head_dim}: need "
                f"value % {DELTA_DV_TILE} == 0, key % 8 == 0 and key <= {DELTA_MAX_DK}")
        if not 2 <= la.conv_kernel <= CONV_MAX_KERNEL:
            raise UnsupportedModelError(
                f"linear_conv_kernel_dim={la.conv_kernel} must be in 2..{CONV_MAX_KERNEL}")
        if in_proj_width(cfg) % 16:
            raise UnsupportedModelError(
                f"the fused linear-attention projection width {in_proj_width(cfg)} must be "
                "a multiple of 16")
        super().check_config(cfg)

    def plan(self, cfg: ModelConfig, names: Container[str] = (),
             quant: CheckpointQuant = CheckpointQuant()) -> WeightPlan:
        """As DenseDecoderLoader.plan; attention and MLP projections may be quantized (the
        linear-attention projections load as bf16)."""
        self.check_config(cfg)
        la = cfg.linear_attention
        assert la is not None
        h, d, vocab = cfg.hidden_size, cfg.head_dim, cfg.vocab_size
        pre = text_prefix(cfg)
        plan = WeightPlan(quant=quant, stored=stored_dtypes(names))
        plan.add("embed", [(pre + "embed_tokens.weight", (vocab, h))])
        for i, kind in enumerate(cfg.layer_types):
            p = f"{pre}layers.{i}."
            if kind == "full_attention":
                q_rows, kv_rows = 2 * cfg.num_attention_heads * d, cfg.num_key_value_heads * d
                add_linear(plan, f"l{i}.qkv", [(p + "self_attn.q_proj.weight", q_rows),
                                               (p + "self_attn.k_proj.weight", kv_rows),
                                               (p + "self_attn.v_proj.weight", kv_rows)], h)
                add_linear(plan, f"l{i}.o", [(p + "self_attn.o_proj.weight", h)],
                           cfg.num_attention_heads * d)
                plan.add(f"l{i}.q_norm", [(p + "self_attn.q_norm.weight", (d,))])
                plan.add(f"l{i}.k_norm", [(p + "self_attn.k_norm.weight", (d,))])
            else:
                a = p + "linear_attn."
                # linears: bf16, or quantized where the checkpoint stores them so
                add_linear(plan, f"l{i}.in_proj",
                           [(name, shape[0]) for name, shape in self.in_proj_parts(la, a, h)], h)
                plan.add(f"l{i}.conv", [(a + "conv1d.weight", (la.conv_dim, 1, la.conv_kernel))])
                plan.add(f"l{i}.a_log", [(a + "A_log", (la.num_value_heads,))])
                plan.add(f"l{i}.dt_bias", [(a + "dt_bias", (la.num_value_heads,))])
                plan.add(f"l{i}.gdn_norm", [(a + "norm.weight", (la.value_head_dim,))])
                add_linear(plan, f"l{i}.out_proj", [(a + "out_proj.weight", h)], la.value_dim)
            self.plan_layer_mlp(plan, cfg, i, p, names)
            plan.add(f"l{i}.in_norm", [(p + "input_layernorm.weight", (h,))])
            plan.add(f"l{i}.post_norm", [(p + "post_attention_layernorm.weight", (h,))])
        plan.add("final_norm", [(pre + "norm.weight", (h,))])
        if not cfg.tie_word_embeddings:
            # a linear: bf16, or quantized where the checkpoint stores it so
            add_linear(plan, "lm_head", [("lm_head.weight", vocab)], h)
        return plan

    def in_proj_parts(self, la: LinearAttentionConfig, a: str,
                      h: int) -> list[tuple[str, tuple[int, ...]]]:
        """The checkpoint tensors of the fused [qkv | z | b | a] projection, in order."""
        return [(a + "in_proj_qkv.weight", (la.conv_dim, h)),
                (a + "in_proj_z.weight", (la.value_dim, h)),
                (a + "in_proj_b.weight", (la.num_value_heads, h)),
                (a + "in_proj_a.weight", (la.num_value_heads, h))]

    def row_moves(self, cfg: ModelConfig) -> dict[str, list[RowMove]]:
        """Per plan buffer, the row permutation to apply after upload (none here)."""
        return {}

    def plan_layer_mlp(self, plan: WeightPlan, cfg: ModelConfig, i: int, p: str,
                       names: Container[str]) -> None:
        """Layer i's MLP from the tensors under `p` (the layer's prefix): dense SwiGLU here,
        and wherever an MoE family's config makes the layer dense."""
        add_swiglu(plan, f"l{i}.", p + "mlp.", cfg.intermediate_size, cfg.hidden_size,
                   quantizable=True)



class Qwen35MoeLoader(Qwen35Loader):
    """Qwen3.5-MoE (`qwen3_5_moe`): the hybrid layers, each with routed experts and a gated
    shared expert (loaders/moe.py; either expert layout), multimodal wrapper names too."""

    family = "qwen3_5_moe"

    def check_config(self, cfg: ModelConfig) -> None:
        super().check_config(cfg)
        check_moe_config(cfg)

    def plan_layer_mlp(self, plan: WeightPlan, cfg: ModelConfig, i: int, p: str,
                       names: Container[str]) -> None:
        assert cfg.moe is not None  # check_config
        if cfg.moe.is_sparse(i):
            add_moe_mlp(plan, cfg, i, p + "mlp.", names)
        else:
            super().plan_layer_mlp(plan, cfg, i, p, names)


class Qwen3NextLoader(Qwen35MoeLoader):
    """Qwen3-Next (`qwen3_next`): Qwen3.5-MoE's layers (dense where mlp_only_layers /
    decoder_sparse_step say) with key-head-grouped input projections (permuted at load, see
    the module docstring)."""

    family = "qwen3_next"

    def in_proj_parts(self, la: LinearAttentionConfig, a: str,
                      h: int) -> list[tuple[str, tuple[int, ...]]]:
        return [(a + "in_proj_qkvz.weight", (la.conv_dim + la.value_dim, h)),
                (a + "in_proj_ba.weight", (2 * la.num_value_heads, h))]

    def row_moves(self, cfg: ModelConfig) -> dict[str, list[RowMove]]:
        la = cfg.linear_attention
        assert la is not None
        moves = grouped_in_proj_moves(la)
        return {f"l{i}.in_proj": moves for i, kind in enumerate(cfg.layer_types)
                if kind == "linear_attention"}
