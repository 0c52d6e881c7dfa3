"""ModelConfig: the model's shape, read from a Hugging Face `config.json`.

Every buffer, KV-cache and kernel-target decision derives from this one object, so it
follows the PCND rule: a field that changes numerics (sizes, eps, rope base) has no
implicit default; a missing or mistyped one is a `ConfigError` naming the field and the
file. The only defaults are the ones Hugging Face itself documents (num_key_value_heads
falls back to num_attention_heads, head_dim to hidden_size // num_attention_heads, the
bias flags and tie_word_embeddings to False; for mixture-of-experts configs
decoder_sparse_step to 1, mlp_only_layers to none, norm_topk_prob to False (Mixtral,
Qwen3.5-MoE and MiniMax-M2 always renormalize; GLM-4.5 by default), softmax scoring
(MiniMax-M2 and GLM-4.5: sigmoid with a score bias, always) and routed_scaling_factor to 1;
GLM-4.5's partial_rotary_factor 0.5, first_k_dense_replace 1, n_shared_experts 1 and
n_group = topk_group = 1, as its transformers config; gpt-oss's attention_bias true,
sliding_window 128 on the even layers, swiglu_alpha 1.702 and swiglu_limit 7.0, as
GptOssConfig has them).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
import struct
from typing import Any, Mapping

#: model types whose attention applies a per-head RMSNorm to q and k before RoPE
QK_NORM_MODEL_TYPES = frozenset({"qwen3", "qwen3_moe", "qwen3_5", "qwen3_5_moe", "qwen3_next"})
#: model types whose q and k RMSNorms span the whole projection (all heads of a token at
#: once, one weight per q or k feature), before the split into heads and RoPE (MiniMax-M2)
WHOLE_QK_NORM_MODEL_TYPES = frozenset({"minimax_m2"})
#: hybrid families: Gated-DeltaNet and gated full-attention layers (`layer_types`), RMSNorm
#: weights stored zero-centred and applied as (1 + w), partial rotary embeddings
HYBRID_MODEL_TYPES = frozenset({"qwen3_5", "qwen3_5_moe", "qwen3_next"})
#: the text model's own model_type inside a multimodal wrapper -> the family name
_TEXT_MODEL_TYPES = {"qwen3_5_text": "qwen3_5", "qwen3_5_moe_text": "qwen3_5_moe",
                     "gemma3_text": "gemma3"}
#: Gemma 3: RMSNorm weights applied as (1 + w), a norm on each sublayer's output before the
#: residual add (post_attention / post_feedforward), the tanh-GELU GLU, embeddings scaled by
#: sqrt(hidden_size), softmax scale query_pre_attn_scalar^-0.5, sliding layers rotating by
#: their own base (rope_local_base_freq)
GEMMA_MODEL_TYPES = frozenset({"gemma3"})
LAYER_TYPES = ("full_attention", "linear_attention")
#: model types whose q/k/v projections carry a bias: always (HF Qwen2Attention: bias=True),
#: or unless `qkv_bias` says otherwise (HF Qwen2-MoE default: qkv_bias = true)
QKV_BIAS_MODEL_TYPES = frozenset({"qwen2"})
QKV_BIAS_FLAG_MODEL_TYPES = frozenset({"qwen2_moe"})
#: GLM-4.5 (`glm4_moe`: GLM-4.5, GLM-4.5-Air, GLM-4.6): DeepSeek-V3-style experts (the first
#: `first_k_dense_replace` layers dense, `n_shared_experts` shared experts added ungated, a
#: sigmoid router with a score bias computed in float32, `n_group` / `topk_group` group
#: selection); `attention_bias` puts biases on q/k/v only (its o_proj has none), q/k RMSNorms
#: per head under `use_qk_norm`, MTP layers stored after the decoder's (`trailing_mtp_layers`)
GLM_MOE_MODEL_TYPES = frozenset({"glm4_moe"})
#: OpenAI gpt-oss (`gpt_oss`: gpt-oss-20b, gpt-oss-120b): q/k/v and o_proj biases
#: (`attention_bias`, default true), a learned per-head attention sink in every layer
#: (`self_attn.sinks`: one more logit in each softmax denominator), sliding and full attention
#: layers alternating (`layer_types`), experts of `intermediate_size` under a router with a
#: bias (softmax over the top-k logits), gate/up and down biases and the clamped SwiGLU
#: (`swiglu_alpha`, `swiglu_limit`)
GPT_OSS_MODEL_TYPES = frozenset({"gpt_oss"})
#: partial_rotary_factor where a family's transformers config defaults it (Glm4MoeConfig: 0.5)
PARTIAL_ROTARY_DEFAULTS = {"glm4_moe": 0.5}
#: config keys that name the routed-expert count, by family (Qwen, Mixtral/MiniMax, DeepSeek)
NUM_EXPERTS_KEYS = ("num_experts", "num_local_experts", "n_routed_experts")
ROUTER_SCORINGS = ("softmax", "sigmoid")
#: families whose router renormalizes the top-k weights unless the config says otherwise (HF
#: Qwen3NextConfig: norm_topk_prob = True), and those whose router always does (Qwen3.5-MoE's
#: has no switch)
NORM_TOPK_BY_DEFAULT = frozenset({"qwen3_next", "glm4_moe"})
NORM_TOPK_ALWAYS = frozenset({"qwen3_5_moe", "mixtral", "minimax_m2", "gpt_oss"})
#: families whose router always scores by sigmoid and selects with a per-expert
#: `e_score_correction_bias` (transformers' MiniMaxM2SparseMoeBlock and Glm4MoeTopkRouter have
#: no switch for either)
SIGMOID_BIASED_ROUTER_MODEL_TYPES = frozenset({"minimax_m2", "glm4_moe"})
#: families with NoPE layers (no rotary embedding) every `no_rope_layer_interval` layers unless
#: `no_rope_layers` lists them
NOPE_INTERVAL_MODEL_TYPES = frozenset({"smollm3"})
#: rope_type spellings transformers' Phi3Config reads as "longrope" (early Phi-3-128k configs
#: say "su")
LONGROPE_ALIAS_MODEL_TYPES = frozenset({"phi3"})
LONGROPE_ALIASES = ("su", "yarn")
#: families whose every attention layer slides over `sliding_window` keys when the config sets
#: one (transformers' Mistral, Mixtral, Phi-3 and Qwen3-MoE attention)
WINDOW_ALL_LAYERS_MODEL_TYPES = frozenset({"mistral", "mixtral", "phi3", "qwen3_moe"})
#: families whose `layer_types` (or, in older configs, every `sliding_window_pattern`-th
#: layer kept full) mark the sliding layers (transformers' Gemma 3; gpt-oss, every other
#: layer)
WINDOW_PATTERN_MODEL_TYPES = GEMMA_MODEL_TYPES | GPT_OSS_MODEL_TYPES
#: the period of that pattern where neither key is given, and the window where the config
#: names none, by family (GptOssConfig: layers 0, 2, ... slide over 128 keys)
WINDOW_PATTERN_DEFAULTS = {"gpt_oss": 2}
WINDOW_DEFAULTS = {"gpt_oss": 128}
#: families whose `use_sliding_window` switch (default off) turns the window on for the layers
#: their `layer_types` rule names (transformers' Qwen2 / Qwen3 / Qwen2-MoE / SmolLM3 configs)
WINDOW_SWITCH_MODEL_TYPES = frozenset({"qwen2", "qwen3", "qwen2_moe", "smollm3"})
#: families whose experts are `intermediate_size` wide (no `moe_intermediate_size`: every
#: layer is sparse, Mixtral)
EXPERT_WIDTH_IS_INTERMEDIATE = frozenset({"mixtral", "minimax_m2", "gpt_oss"})
#: families whose every layer routes through experts: config.json has no dense
#: `intermediate_size` (it falls back to moe_intermediate_size and sizes nothing)
ALL_SPARSE_MODEL_TYPES = frozenset({"qwen3_5_moe"})


class ConfigError(ValueError):
    """config.json is missing a field that changes correctness, or has a wrong type."""


def canonical_model_type(name: str) -> str:
    """`Qwen3`, `qwen-3.5` -> `qwen3`, `qwen_3_5`: one spelling for target selection; a
    multimodal checkpoint's text model type (`qwen3_5_text`) names its family."""
    name = name.strip().lower().replace("-", "_").replace(".", "_")
    return _TEXT_MODEL_TYPES.get(name, name)


class _Fields:
    """Typed access to the merged config dict; every error names the field and the file."""

    def __init__(self, data: Mapping[str, Any], source: str) -> None:
        self.data = data
        self.source = source

    def error(self, key: str, problem: str) -> ConfigError:
        return ConfigError(f"{self.source}: field {key!r} {problem}")

    def present(self, key: str) -> bool:
        return self.data.get(key) is not None

    def int_(self, key: str, default: int | None = None, required: bool = True) -> int | None:
        value = self.data.get(key)
        if value is None:
            if default is None and required:
                raise self.error(key, "is required (it changes the model's shape or numerics)")
            return default
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.error(key, f"must be an integer, got {value!r}")
        if value <= 0:
            raise self.error(key, f"must be positive, got {value}")
        return value

    def float_(self, key: str, value: Any = None) -> float:
        value = self.data.get(key) if value is None else value
        if value is None:
            raise self.error(key, "is required (it changes the model's numerics)")
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self.error(key, f"must be a number, got {value!r}")
        return float(value)

    def bool_(self, key: str, default: bool) -> bool:
        value = self.data.get(key)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise self.error(key, f"must be true or false, got {value!r}")
        return value

    def str_(self, key: str) -> str | None:
        value = self.data.get(key)
        if value is not None and not isinstance(value, str):
            raise self.error(key, f"must be a string, got {value!r}")
        return value

    def token_ids(self, key: str) -> tuple[int, ...]:
        value = self.data.get(key)
        if value is None:
            return ()
        items = value if isinstance(value, list) else [value]
        if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in items):
            raise self.error(key, f"must be a token id or a list of token ids, got {value!r}")
        return tuple(items)

    def dict_(self, key: str) -> dict[str, Any] | None:
        value = self.data.get(key)
        if value is not None and not isinstance(value, dict):
            raise self.error(key, f"must be an object or null, got {value!r}")
        return dict(value) if value is not None else None


@dataclass(frozen=True, slots=True)
class MoeConfig:
    """The mixture-of-experts part of a config: routing, expert sizes, which layers are sparse.

    Layer i has a routed-expert MLP when i is not in `mlp_only_layers` and (i + 1) is a
    multiple of `decoder_sparse_step` (the Qwen2-MoE / Qwen3-MoE rule); the other layers
    keep a dense MLP of the model's `intermediate_size`. GLM-4.5's `first_k_dense_replace`
    leading dense layers are folded into `mlp_only_layers`.
    """

    num_experts: int
    top_k: int
    intermediate_size: int
    norm_topk_prob: bool
    decoder_sparse_step: int
    mlp_only_layers: tuple[int, ...]
    #: width of the shared-expert MLP every token also runs (Qwen2-MoE style, scaled by
    #: sigmoid(shared_expert_gate(x)); GLM-4.5's n_shared_experts x moe_intermediate_size,
    #: ungated); 0 when the model has none
    shared_intermediate_size: int
    #: "softmax" (Qwen, Mixtral) or "sigmoid" (DeepSeek-V3, MiniMax) router scores
    scoring: str
    #: a per-expert `e_score_correction_bias` is added to the scores for selection only
    score_bias: bool
    routed_scaling_factor: float
    #: the shared expert's output is scaled by sigmoid(shared_expert_gate(x)) (Qwen2-MoE,
    #: Qwen3-Next); False: added as it is (GLM-4.5's `shared_experts`, no gate tensor)
    shared_gated: bool = True
    #: the router's logits are the float32 sums of the bf16 input times the bf16 weight, not
    #: rounded to bf16 (transformers keeps GLM-4.5's router in float32 and casts its input up)
    router_f32: bool = False
    #: the router is a Linear with a bias (gpt-oss's `mlp.router.bias`): its logits are
    #: bf16(x . w + b), one rounding of the float32 sum plus the bias
    router_bias: bool = False
    #: the experts' gate/up and down projections carry per-expert biases (gpt-oss's
    #: `gate_up_proj_bias`, `down_proj_bias`), added to each bf16 product in bf16
    expert_bias: bool = False
    #: gpt-oss's clamped SwiGLU when > 0: g = min(g, limit), u = clamp(u, -limit, limit),
    #: act = (u + 1) * g * sigmoid(swiglu_alpha * g); 0: the plain silu(g) * u
    swiglu_limit: float = 0.0
    swiglu_alpha: float = 0.0

    def is_sparse(self, layer: int) -> bool:
        """Whether layer `layer` routes its MLP through the experts."""
        return layer not in self.mlp_only_layers and (layer + 1) % self.decoder_sparse_step == 0

    @classmethod
    def from_fields(cls, f: "_Fields", num_layers: int,
                    model_type: str = "") -> "MoeConfig | None":
        """The MoE fields, or None for a dense config (no expert count, or zero experts).
        `model_type` (canonical) picks the family's norm_topk_prob default."""
        key = next((k for k in NUM_EXPERTS_KEYS if f.data.get(k) not in (None, 0)), None)
        if key is None:
            return None
        num_experts = f.int_(key)
        top_k = f.int_("num_experts_per_tok")
        if top_k > num_experts:
            raise f.error("num_experts_per_tok", f"= {top_k} exceeds {key} = {num_experts}")
        only = f.data.get("mlp_only_layers") or []
        if not (isinstance(only, list) and all(isinstance(i, int) and not isinstance(i, bool)
                                               and 0 <= i < num_layers for i in only)):
            raise f.error("mlp_only_layers", f"must be a list of layer indices below "
                          f"num_hidden_layers = {num_layers}, got {only!r}")
        biased_sigmoid = model_type in SIGMOID_BIASED_ROUTER_MODEL_TYPES
        scoring = f.str_("scoring_func") or ("sigmoid" if biased_sigmoid else "softmax")
        if scoring not in ROUTER_SCORINGS:
            raise f.error("scoring_func", f"must be one of {ROUTER_SCORINGS}, got {scoring!r}")
        inter = f.int_("intermediate_size" if model_type in EXPERT_WIDTH_IS_INTERMEDIATE
                       else "moe_intermediate_size")
        glm, oss = model_type in GLM_MOE_MODEL_TYPES, model_type in GPT_OSS_MODEL_TYPES
        if glm:
            only = [*only, *range(_count(f, "first_k_dense_replace", 1, num_layers))]
            _check_group_selection(f, num_experts)
            shared_size = inter * _count(f, "n_shared_experts", 1)
        else:
            shared = f.data.get("shared_expert_intermediate_size")
            shared_size = 0 if shared in (None, 0) else f.int_("shared_expert_intermediate_size")
        scale = f.data.get("routed_scaling_factor")
        return cls(
            num_experts=num_experts, top_k=top_k, intermediate_size=inter,
            norm_topk_prob=(model_type in NORM_TOPK_ALWAYS
                            or f.bool_("norm_topk_prob", model_type in NORM_TOPK_BY_DEFAULT)),
            decoder_sparse_step=f.int_("decoder_sparse_step", default=1),
            mlp_only_layers=tuple(sorted(set(only))),
            shared_intermediate_size=shared_size,
            scoring=scoring,
            score_bias=(biased_sigmoid or f.bool_("use_routing_bias", False)
                        or f.str_("topk_method") == "noaux_tc"),
            routed_scaling_factor=f.float_("routed_scaling_factor",
                                           1.0 if scale is None else scale),
            shared_gated=not glm, router_f32=glm,
            **(_gpt_oss_moe_fields(f) if oss else {}),
        )


def _gpt_oss_moe_fields(f: _Fields) -> dict[str, Any]:
    """gpt-oss's router bias, expert biases and clamped SwiGLU (GptOssConfig's defaults:
    swiglu_alpha 1.702, swiglu_limit 7.0; both must be positive)."""
    limit = _positive_float(f, "swiglu_limit", f.data.get("swiglu_limit", 7.0))
    alpha = _positive_float(f, "swiglu_alpha", f.data.get("swiglu_alpha", 1.702))
    return {"router_bias": True, "expert_bias": True, "swiglu_limit": limit,
            "swiglu_alpha": alpha}


def _count(f: _Fields, key: str, default: int, most: int | None = None) -> int:
    """A non-negative integer field (0 allowed: no dense layers, no shared expert), at most
    `most` where given; `default` (transformers') where absent."""
    value = f.data.get(key)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise f.error(key, f"must be a non-negative integer, got {value!r}")
    if most is not None and value > most:
        raise f.error(key, f"= {value} exceeds num_hidden_layers = {most}")
    return value


def _check_group_selection(f: _Fields, num_experts: int) -> None:
    """DeepSeek-V3's group-limited selection (transformers' Glm4MoeTopkRouter): the experts in
    `n_group` groups, a token choosing among the `topk_group` groups whose two best biased
    scores sum highest. With every group chosen (n_group 1, or topk_group = n_group:
    GLM-4.5's published configs) it is the plain top-k the router kernels compute; fewer
    chosen groups is refused (no kernel masks groups)."""
    groups, chosen = f.int_("n_group", default=1), f.int_("topk_group", default=1)
    if num_experts % groups:
        raise f.error("n_group", f"= {groups} does not divide the {num_experts} experts")
    if chosen > groups:
        raise f.error("topk_group", f"= {chosen} exceeds n_group = {groups}")
    if chosen < groups:
        raise f.error("topk_group", f"= {chosen} < n_group = {groups}: group-limited expert "
                      "selection (DeepSeek-V3 style) is not implemented; only topk_group = "
                      "n_group (or n_group = 1), the plain top-k, is")


@dataclass(frozen=True, slots=True)
class LinearAttentionConfig:
    """The Gated-DeltaNet mixer of a hybrid model's `linear_attention` layers."""

    num_key_heads: int
    num_value_heads: int
    key_head_dim: int
    value_head_dim: int
    conv_kernel: int

    @property
    def key_dim(self) -> int:
        return self.num_key_heads * self.key_head_dim

    @property
    def value_dim(self) -> int:
        return self.num_value_heads * self.value_head_dim

    @property
    def conv_dim(self) -> int:
        """Channels of the causal conv: q, k and v side by side."""
        return 2 * self.key_dim + self.value_dim


@dataclass(frozen=True, slots=True)
class ModelConfig:
    """The dimensions and numerics of a decoder-only transformer checkpoint."""

    model_type: str
    architectures: tuple[str, ...]
    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    intermediate_size: int
    vocab_size: int
    rms_norm_eps: float
    rope_theta: float
    rope_scaling: dict[str, Any] | None
    max_position_embeddings: int | None
    tie_word_embeddings: bool
    dtype: str | None
    bos_token_id: int | None
    eos_token_ids: tuple[int, ...]
    #: biases on the q/k/v projections (Qwen2, Qwen2-MoE; Llama-style `attention_bias`)
    qkv_bias: bool
    #: a bias on o_proj (Llama-style `attention_bias` sets both)
    o_bias: bool
    mlp_bias: bool
    hidden_act: str
    #: per layer, the keys a query sees when the layer slides (it and the window - 1 before
    #: it; 0: every earlier key); () when no layer slides (`_attention_windows`)
    attention_windows: tuple[int, ...] = ()
    moe: MoeConfig | None = None
    #: hybrid models: "full_attention" / "linear_attention" per layer; () for dense ones
    layer_types: tuple[str, ...] = ()
    linear_attention: LinearAttentionConfig | None = None
    #: share of each attention head's dims that rotate (Qwen3.5: 0.25)
    partial_rotary_factor: float = 1.0
    #: the checkpoint wraps the text model in a multimodal one (config `text_config`,
    #: tensors under model.language_model.*)
    multimodal_wrapper: bool = False
    #: multi-token-prediction layers under `mtp.*` (Qwen3.5 `mtp_num_hidden_layers`,
    #: Qwen3-Next `num_nextn_predict_layers`); 0: none
    mtp_layers: int = 0
    #: softmax scale of q . k (Gemma 3: query_pre_attn_scalar^-0.5); None: head_dim^-0.5
    attention_scale: float | None = None
    #: the token embeddings times this (Gemma 3: sqrt(hidden_size), as a bf16 value)
    embed_scale: float = 1.0
    #: sliding layers' rotary base where it differs from rope_theta (Gemma 3's local base)
    local_rope_theta: float | None = None
    #: config fields set to what no kernel implements (Gemma 2's logit soft-capping,
    #: EmbeddingGemma's bidirectional attention): the loader refuses them by name
    unsupported_fields: tuple[str, ...] = ()
    #: layers whose attention applies no rotary embedding (SmolLM3's NoPE layers:
    #: `no_rope_layers`, 1 = rope, 0 = none; by default every `no_rope_layer_interval`-th)
    nope_layers: tuple[int, ...] = ()
    #: per-head q/k RMSNorms switched on by the config (GLM-4.5's `use_qk_norm`); the
    #: QK_NORM_MODEL_TYPES have them always
    use_qk_norm: bool = False
    #: multi-token-prediction layers stored after the decoder's, as model.layers.{
    #: num_hidden_layers + i} (GLM-4.5's `num_nextn_predict_layers`): not part of the model,
    #: their tensors are left unloaded
    trailing_mtp_layers: int = 0
    #: a learned per-head logit every attention softmax's denominator also sums (gpt-oss's
    #: `self_attn.sinks`, bf16 [num_attention_heads] a layer); its column is dropped
    attention_sinks: bool = False
    source: str = "<dict>"

    @property
    def has_qk_norm(self) -> bool:
        """Qwen3-style attention normalizes q and k per head, MiniMax-M2's over the whole
        projection (`qk_norm_whole`); implied by the model type."""
        return self.model_type in QK_NORM_MODEL_TYPES or self.qk_norm_whole or self.use_qk_norm

    @property
    def qk_norm_whole(self) -> bool:
        """The q and k RMSNorms span all heads of a token (weights [heads * head_dim] and
        [kv_heads * head_dim]) rather than one head (weights [head_dim])."""
        return self.model_type in WHOLE_QK_NORM_MODEL_TYPES

    @property
    def norm_one_round(self) -> bool:
        """RMSNorm weights apply to the float32 normalized row with one rounding (gpt-oss's
        GptOssRMSNorm); else Llama's two roundings or the (1 + w) offset form."""
        return self.model_type in GPT_OSS_MODEL_TYPES

    @property
    def bias_in_f32(self) -> bool:
        """The attention projections' biases join their float32 sums, one rounding, as
        transformers' bf16 Linear does (gpt-oss, whose routed layers amplify the second
        rounding of a bias added to the bf16 product: model.py `_biased_linear`); else the
        bias is added to the bf16 product (Qwen2: within one rounding)."""
        return self.model_type in GPT_OSS_MODEL_TYPES

    @property
    def is_hybrid(self) -> bool:
        return self.model_type in HYBRID_MODEL_TYPES

    @property
    def is_gemma(self) -> bool:
        return self.model_type in GEMMA_MODEL_TYPES

    @property
    def norm_offset(self) -> bool:
        """RMSNorm weights stored zero-centred and applied as (1 + w) (hybrid families,
        Gemma 3)."""
        return self.is_hybrid or self.is_gemma

    @property
    def rotary_dim(self) -> int:
        """Leading dims of each head that rotate (all of them unless partial rotary)."""
        return int(self.head_dim * self.partial_rotary_factor)

    @property
    def context_limit(self) -> tuple[int, str] | None:
        """The longest sequence served exactly and the config field that sets it:
        max_position_embeddings (with YaRN, the original positions times its factor, as
        vLLM derives it: Qwen3's long-context recipe adds rope_scaling and leaves
        max_position_embeddings as it was). A sliding window does not bound it: the
        attention kernels slide (`attention_windows`)."""
        positions = (self.max_position_embeddings, "max_position_embeddings")
        scaling = self.rope_scaling or {}
        if scaling.get("rope_type") == "yarn" and scaling.get("original_max_position_embeddings"):
            positions = (int(scaling["original_max_position_embeddings"]
                             * float(scaling.get("factor") or 1.0)), "rope_scaling (yarn)")
        return positions if positions[0] else None

    @property
    def eos_token_id(self) -> int | None:
        """The first end-of-sequence id (generation stops on any of `eos_token_ids`)."""
        return self.eos_token_ids[0] if self.eos_token_ids else None

    @classmethod
    def from_hf(cls, path: str | Path) -> "ModelConfig":
        """Read `config.json` from a model directory (or the file itself)."""
        p = Path(path)
        file = p / "config.json" if p.is_dir() else p
        try:
            text = file.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise ConfigError(f"{file}: no config.json (is this a model directory?)") from None
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"{file}: not valid JSON: {exc}") from None
        return cls.from_dict(data, source=str(file))

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], source: str = "<dict>") -> "ModelConfig":
        """Build from a parsed config dict; a nested `text_config` overrides the top level."""
        if not isinstance(data, Mapping):
            raise ConfigError(f"{source}: top level must be a JSON object")
        merged = dict(data)
        text_config = merged.get("text_config")
        if text_config is not None:
            if not isinstance(text_config, Mapping):
                raise ConfigError(f"{source}: field 'text_config' must be an object")
            merged.update({k: v for k, v in text_config.items() if v is not None})
        f = _Fields(merged, source)

        model_type = f.str_("model_type")
        if not model_type:
            raise f.error("model_type", "is required (it selects the architecture)")
        architectures = data.get("architectures") or merged.get("architectures") or []
        if not isinstance(architectures, list) or not all(isinstance(a, str)
                                                          for a in architectures):
            raise f.error("architectures", f"must be a list of strings, got {architectures!r}")

        heads = f.int_("num_attention_heads")
        hidden = f.int_("hidden_size")
        head_dim = f.int_("head_dim", required=False)
        if head_dim is None:
            if hidden % heads:
                raise f.error("head_dim", f"is missing and hidden_size={hidden} is not a "
                              f"multiple of num_attention_heads={heads}")
            head_dim = hidden // heads
        canonical = canonical_model_type(model_type)
        partial_rotary = _partial_rotary(f, head_dim, PARTIAL_ROTARY_DEFAULTS.get(canonical, 1.0))
        rope_theta, rope_scaling = _rope(f, canonical, int(head_dim * partial_rotary))
        dtype = f.str_("torch_dtype") or f.str_("dtype")
        oss = canonical in GPT_OSS_MODEL_TYPES
        attention_bias = f.bool_("attention_bias", oss)  # GptOssConfig: true by default
        hybrid = canonical in HYBRID_MODEL_TYPES
        layers = f.int_("num_hidden_layers")
        nope = _nope_layers(f, layers, canonical)
        moe = MoeConfig.from_fields(f, layers, canonical)
        intermediate = f.int_("intermediate_size", required=not (
            canonical in ALL_SPARSE_MODEL_TYPES and moe is not None))
        if intermediate is None:  # an all-sparse family's config without the field
            assert moe is not None
            intermediate = moe.intermediate_size
        return cls(
            model_type=canonical,
            architectures=tuple(architectures),
            hidden_size=hidden,
            num_hidden_layers=layers,
            num_attention_heads=heads,
            num_key_value_heads=f.int_("num_key_value_heads", default=heads),
            head_dim=head_dim,
            intermediate_size=intermediate,
            vocab_size=f.int_("vocab_size"),
            rms_norm_eps=f.float_("rms_norm_eps"),
            rope_theta=rope_theta,
            rope_scaling=rope_scaling,
            max_position_embeddings=f.int_("max_position_embeddings", required=False),
            tie_word_embeddings=f.bool_("tie_word_embeddings", False),
            dtype=dtype,
            bos_token_id=(f.token_ids("bos_token_id") or (None,))[0],
            eos_token_ids=f.token_ids("eos_token_id"),
            qkv_bias=(attention_bias or canonical in QKV_BIAS_MODEL_TYPES
                      or (canonical in QKV_BIAS_FLAG_MODEL_TYPES and f.bool_("qkv_bias", True))),
            o_bias=attention_bias and canonical not in GLM_MOE_MODEL_TYPES,
            mlp_bias=f.bool_("mlp_bias", False),
            hidden_act=f.str_("hidden_act") or f.str_("hidden_activation") or "silu",
            attention_windows=_attention_windows(f, layers, canonical, nope),
            moe=moe,
            layer_types=_layer_types(f, layers) if hybrid else (),
            linear_attention=_linear_attention(f) if hybrid else None,
            partial_rotary_factor=partial_rotary,
            multimodal_wrapper=text_config is not None,
            mtp_layers=_mtp_layers(f) if hybrid else 0,
            nope_layers=nope,
            **(_gemma_fields(f, hidden) if canonical in GEMMA_MODEL_TYPES else {}),
            **(_glm_fields(f) if canonical in GLM_MOE_MODEL_TYPES else {}),
            attention_sinks=oss,
            source=source,
        )


def _nope_layers(f: _Fields, layers: int, model_type: str) -> tuple[int, ...]:
    """The layers without rotary embedding: `no_rope_layers` (one 0/1 a layer, 1 = rope),
    else SmolLM3's default of every `no_rope_layer_interval`-th layer (4)."""
    value = f.data.get("no_rope_layers")
    if value is None:
        if model_type not in NOPE_INTERVAL_MODEL_TYPES:
            return ()
        interval = f.int_("no_rope_layer_interval", default=4)
        return tuple(i for i in range(layers) if (i + 1) % interval == 0)
    if (not isinstance(value, list) or len(value) != layers
            or any(v not in (0, 1) or isinstance(v, bool) for v in value)):
        raise f.error("no_rope_layers", f"must list 0 or 1 per layer ({layers} layers), "
                      f"got {value!r}")
    return tuple(i for i, rope in enumerate(value) if not rope)


def _glm_fields(f: _Fields) -> dict[str, Any]:
    """GLM-4.5's switches beyond the shared ones: per-head q/k norms (`use_qk_norm`, default
    off) and its MTP layers after the decoder's (`num_nextn_predict_layers`, transformers 5's
    `num_mtp_layers`)."""
    key = "num_mtp_layers" if f.present("num_mtp_layers") else "num_nextn_predict_layers"
    return {"use_qk_norm": f.bool_("use_qk_norm", False),
            "trailing_mtp_layers": _count(f, key, 0)}


def _mtp_layers(f: _Fields) -> int:
    """MTP layer count under either family's key; 0 (a config may say so) means none."""
    for key in ("mtp_num_hidden_layers", "num_nextn_predict_layers"):
        value = f.data.get(key)
        if value is None or value == 0:
            continue
        return f.int_(key) or 0
    return 0


def _rope(f: _Fields, model_type: str,
          rotary_dim: int) -> tuple[float, dict[str, Any] | None]:
    """rope_theta and the scaling dict, from the classic keys or newer `rope_parameters`.

    transformers >= 4.56 folds both into `rope_parameters` ({"rope_type": "default",
    "rope_theta": ...}); a "default" rope_type means no scaling. Gemma 3 keeps one such dict
    per layer type: the full-attention layers' are the model's (`_gemma_fields` reads the
    sliding layers' base); its older configs default rope_theta to 1e6 as transformers does.
    A LongRoPE dict is completed and checked against the `rotary_dim` (`_longrope`).
    """
    params = f.dict_("rope_parameters")
    if model_type in GEMMA_MODEL_TYPES:
        if params is not None and isinstance(params.get("full_attention"), Mapping):
            params = dict(params["full_attention"])
        if f.data.get("rope_theta") is None and (params or {}).get("rope_theta") is None:
            params = {**(params or {}), "rope_theta": GEMMA_GLOBAL_ROPE_THETA}
    theta = f.data.get("rope_theta")
    if theta is None and params is not None:
        theta = params.get("rope_theta")
    if theta is None:
        raise f.error("rope_theta", "is required (also looked for rope_parameters.rope_theta)")
    scaling, where = f.dict_("rope_scaling"), "rope_scaling"
    if scaling is None and params is not None:
        rest = {k: v for k, v in params.items() if k != "rope_theta"}
        if rest.get("rope_type", rest.get("type", "default")) != "default":
            scaling, where = rest, "rope_parameters"
    if scaling is not None and "rope_type" not in scaling and "type" in scaling:
        scaling["rope_type"] = scaling["type"]
    if scaling is not None and model_type in LONGROPE_ALIAS_MODEL_TYPES and scaling.get(
            "rope_type") in LONGROPE_ALIASES:
        scaling["rope_type"] = "longrope"
    if scaling is not None and scaling.get("rope_type") == "longrope":
        scaling = _longrope(f, scaling, where, rotary_dim)
    return f.float_("rope_theta", theta), scaling


def _longrope(f: _Fields, scaling: dict[str, Any], where: str,
              rotary_dim: int) -> dict[str, Any]:
    """A LongRoPE scaling dict made whole, as transformers reads it: both factor lists (one
    positive number per rotating frequency), `original_max_position_embeddings` (Phi-3 keeps
    it at the top level, where transformers looks first, then in the dict, then falls back
    to max_position_embeddings) and `factor` (max_position_embeddings over the original
    context where the dict has none; it sets the default attention factor). `where` names
    the key the dict came from, so errors point at the field as the file spells it."""
    out = dict(scaling)
    for key in ("long_factor", "short_factor"):
        out[key] = _rope_factor_list(f, f"{where}.{key}", scaling.get(key), rotary_dim)
    original = _longrope_original(f, scaling, where)
    out["original_max_position_embeddings"] = original
    for key in ("factor", "attention_factor"):
        if scaling.get(key) is not None:
            out[key] = _positive_float(f, f"{where}.{key}", scaling[key])
    if out.get("factor") is None:
        out["factor"] = f.int_("max_position_embeddings") / original
    return out


def _rope_factor_list(f: _Fields, name: str, value: Any, rotary_dim: int) -> list[float]:
    """One of LongRoPE's factor lists: rotary_dim / 2 positive numbers, one per frequency."""
    want = rotary_dim // 2
    if value is None:
        raise f.error(name, f"is required for longrope rope scaling ({want} positive numbers, "
                      f"one per rotating frequency: rotary dim {rotary_dim} / 2)")
    numbers = isinstance(value, list) and all(
        isinstance(v, (int, float)) and not isinstance(v, bool) and 0 < v < math.inf
        for v in value)
    if not numbers or len(value) != want:
        shown = f"{len(value)} entries" if isinstance(value, list) else repr(value)
        raise f.error(name, f"must list {want} positive numbers (one per rotating frequency: "
                      f"rotary dim {rotary_dim} / 2), got {shown}")
    return [float(v) for v in value]


def _longrope_original(f: _Fields, scaling: Mapping[str, Any], where: str) -> int:
    """The pretraining context LongRoPE's factors switch at, in transformers' order: the
    top-level field, the scaling dict's, max_position_embeddings."""
    if f.present("original_max_position_embeddings"):
        return f.int_("original_max_position_embeddings")
    value = scaling.get("original_max_position_embeddings")
    if value is None:
        return f.int_("max_position_embeddings")
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise f.error(f"{where}.original_max_position_embeddings",
                      f"must be a positive integer, got {value!r}")
    return value


def _positive_float(f: _Fields, name: str, value: Any) -> float:
    number = f.float_(name, value)
    if not 0 < number < math.inf:
        raise f.error(name, f"must be a positive number, got {value!r}")
    return number


def _layer_types(f: _Fields, layers: int) -> tuple[str, ...]:
    """Per-layer mixer of a hybrid model; without `layer_types`, transformers' default of a
    full-attention layer every `full_attention_interval` (4) layers."""
    value = f.data.get("layer_types")
    if value is None:
        interval = f.int_("full_attention_interval", default=4)
        return tuple("full_attention" if (i + 1) % interval == 0 else "linear_attention"
                     for i in range(layers))
    if not isinstance(value, list) or len(value) != layers or any(
            v not in LAYER_TYPES for v in value):
        raise f.error("layer_types", f"must list one of {LAYER_TYPES} per layer "
                      f"({layers} layers), got {value!r}")
    return tuple(value)


def _linear_attention(f: _Fields) -> LinearAttentionConfig:
    return LinearAttentionConfig(
        num_key_heads=f.int_("linear_num_key_heads"),
        num_value_heads=f.int_("linear_num_value_heads"),
        key_head_dim=f.int_("linear_key_head_dim"),
        value_head_dim=f.int_("linear_value_head_dim"),
        conv_kernel=f.int_("linear_conv_kernel_dim"))


def _partial_rotary(f: _Fields, head_dim: int, default: float = 1.0) -> float:
    """`partial_rotary_factor` at the top level or inside rope_parameters, else the legacy
    `rotary_dim` (rotating dims of a head, MiniMax-M2's published configs) over head_dim;
    else the family's `default` (PARTIAL_ROTARY_DEFAULTS; 1)."""
    params = f.dict_("rope_parameters") or {}
    value = f.data.get("partial_rotary_factor", params.get("partial_rotary_factor"))
    if value is None and f.data.get("rotary_dim") is not None:
        rotary_dim = f.int_("rotary_dim")
        if not 0 < rotary_dim <= head_dim or rotary_dim % 2:
            raise f.error("rotary_dim", f"must be an even number in (0, head_dim = "
                          f"{head_dim}], got {rotary_dim}")
        return rotary_dim / head_dim
    if value is None:
        return default
    factor = f.float_("partial_rotary_factor", value)
    if not 0.0 < factor <= 1.0:
        raise f.error("partial_rotary_factor", f"must be in (0, 1], got {factor}")
    return factor


def _bf16_value(x: float) -> float:
    """x rounded to the nearest bf16 (ties to even), as a float: what transformers' bf16
    tensors hold of a Python scalar (the CLI's config reading stays free of numpy)."""
    bits = struct.unpack("<I", struct.pack("<f", x))[0]
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return struct.unpack("<f", struct.pack("<I", bits))[0]


#: transformers' Gemma 3 rotary bases where a config names none (global, sliding layers)
GEMMA_GLOBAL_ROPE_THETA = 1_000_000.0
GEMMA_LOCAL_ROPE_THETA = 10_000.0


def _gemma_fields(f: _Fields, hidden: int) -> dict[str, Any]:
    """Gemma 3's fields beyond the Llama ones: the softmax scale, the embedding scale (the
    bf16 value of sqrt(hidden_size), which transformers multiplies by) and the sliding
    layers' rotary base (`rope_parameters.sliding_attention.rope_theta`, or the older
    `rope_local_base_freq`)."""
    params = f.dict_("rope_parameters") or {}
    local = params.get("sliding_attention")
    local_theta = (local or {}).get("rope_theta") if isinstance(local, Mapping) else None
    if local_theta is None:
        local_theta = f.data.get("rope_local_base_freq", GEMMA_LOCAL_ROPE_THETA)
    scalar = f.float_("query_pre_attn_scalar")
    if scalar <= 0:
        raise f.error("query_pre_attn_scalar", f"must be positive, got {scalar}")
    embed_scale = _bf16_value(hidden ** 0.5)
    unsupported = tuple(k for k in ("attn_logit_softcapping", "final_logit_softcapping",
                                    "use_bidirectional_attention") if f.data.get(k))
    return {"attention_scale": scalar ** -0.5, "embed_scale": embed_scale,
            "local_rope_theta": f.float_("rope_local_base_freq", local_theta),
            "unsupported_fields": unsupported}


def _attention_windows(f: _Fields, layers: int, model_type: str,
                       nope_layers: tuple[int, ...]) -> tuple[int, ...]:
    """Each layer's sliding window (0: full attention) as transformers builds it: every layer
    of the WINDOW_ALL_LAYERS families when `sliding_window` is set; in the WINDOW_SWITCH
    families only under `use_sliding_window` (their configs carry a window size even when it
    is off), on the layers an explicit `layer_types` list marks "sliding_attention", else by
    the family's rule (Qwen2 / Qwen3: layers from `max_window_layers` on; Qwen2-MoE: the even
    layers below it; SmolLM3: the NoPE layers; Gemma 3: all but every
    `sliding_window_pattern`-th, 6; gpt-oss: the even layers, over 128 keys where the config
    has no `sliding_window` key, WINDOW_PATTERN_DEFAULTS / WINDOW_DEFAULTS); () when no layer
    slides. Other families have no sliding attention and ignore the field."""
    sliding_families = (WINDOW_ALL_LAYERS_MODEL_TYPES | WINDOW_SWITCH_MODEL_TYPES
                        | WINDOW_PATTERN_MODEL_TYPES)
    if model_type not in sliding_families:
        return ()
    if model_type in WINDOW_SWITCH_MODEL_TYPES and not f.bool_("use_sliding_window", False):
        return ()
    window = (WINDOW_DEFAULTS.get(model_type) if "sliding_window" not in f.data
              else f.int_("sliding_window", required=False))
    if window is None:
        return ()
    kinds = f.data.get("layer_types")
    if kinds is not None and model_type not in WINDOW_ALL_LAYERS_MODEL_TYPES:
        allowed = ("full_attention", "sliding_attention")
        if not isinstance(kinds, list) or len(kinds) != layers or any(
                k not in allowed for k in kinds):
            raise f.error("layer_types", f"must list one of {allowed} per layer ({layers} "
                          f"layers), got {kinds!r}")
        sliding = [k == "sliding_attention" for k in kinds]
    elif model_type in ("qwen2", "qwen3"):
        first = f.int_("max_window_layers", default=28)
        sliding = [i >= first for i in range(layers)]
    elif model_type == "qwen2_moe":
        below = f.int_("max_window_layers", default=28)
        sliding = [i % 2 == 0 and i < below for i in range(layers)]
    elif model_type == "smollm3":
        sliding = [i in nope_layers for i in range(layers)]
    elif model_type in WINDOW_PATTERN_MODEL_TYPES:
        pattern = f.int_("sliding_window_pattern",
                         default=WINDOW_PATTERN_DEFAULTS.get(model_type, 6))
        sliding = [(i + 1) % pattern != 0 for i in range(layers)]
    else:
        sliding = [True] * layers
    return tuple(window if s else 0 for s in sliding) if any(sliding) else ()
