"""Config of the hybrid Qwen3.5 family: layer types, linear-attention dims, partial rotary,
the multimodal wrapper, and errors that name the field."""

from __future__ import annotations

import pytest

from atlas.core.config import ConfigError, ModelConfig
from atlas.model.factory import loader_for_config
from atlas.model.loaders.dense import UnsupportedModelError
from atlas.model.loaders.hybrid import Qwen35Loader, Qwen35MoeLoader, Qwen3NextLoader

TEXT = {"model_type": "qwen3_5_text", "hidden_size": 2048, "num_hidden_layers": 8,
        "num_attention_heads": 16, "num_key_value_heads": 2, "head_dim": 256,
        "intermediate_size": 6144, "vocab_size": 248320, "rms_norm_eps": 1e-6,
        "linear_num_key_heads": 16, "linear_num_value_heads": 32, "linear_key_head_dim": 128,
        "linear_value_head_dim": 128, "linear_conv_kernel_dim": 4,
        "rope_parameters": {"rope_type": "default", "rope_theta": 10000000,
                            "partial_rotary_factor": 0.25, "mrope_section": [11, 11, 10],
                            "mrope_interleaved": True}}


def test_text_config_defaults_to_full_attention_every_fourth_layer():
    cfg = ModelConfig.from_dict(TEXT)
    assert cfg.model_type == "qwen3_5" and cfg.is_hybrid and not cfg.multimodal_wrapper
    assert cfg.layer_types == ("linear_attention",) * 3 + ("full_attention",) + (
        "linear_attention",) * 3 + ("full_attention",)
    la = cfg.linear_attention
    assert (la.key_dim, la.value_dim, la.conv_dim) == (2048, 4096, 8192)
    assert cfg.rotary_dim == 64 and cfg.rope_scaling is None and cfg.has_qk_norm
    assert isinstance(loader_for_config(cfg), Qwen35Loader)


def test_multimodal_wrapper_reads_its_text_config():
    cfg = ModelConfig.from_dict({"model_type": "qwen3_5", "text_config": TEXT,
                                 "vision_config": {"depth": 27}})
    assert cfg.model_type == "qwen3_5" and cfg.multimodal_wrapper
    plan = Qwen35Loader().plan(cfg)
    names = {s.name for s in plan.slots}
    assert "model.language_model.layers.0.linear_attn.in_proj_qkv.weight" in names
    assert "model.language_model.layers.3.self_attn.q_proj.weight" in names
    assert not any("visual" in n for n in names)
    assert plan.buffers["l0.in_proj"] == 2 * 2048 * (8192 + 4096 + 64)  # [qkv | z | b | a]
    assert plan.buffers["l3.qkv"] == 2 * 2048 * (2 * 16 + 2 * 2) * 256  # q and its gate, k, v


@pytest.mark.parametrize("field, value, match", [
    ("layer_types", ["full_attention"] * 3, "one of"),
    ("layer_types", ["linear_attention"] * 7 + ["mamba"], "one of"),
    ("linear_num_value_heads", None, "linear_num_value_heads"),
    ("partial_rotary_factor", 1.5, "partial_rotary_factor"),
])
def test_bad_hybrid_fields_name_the_field(field, value, match):
    with pytest.raises(ConfigError, match=match):
        ModelConfig.from_dict({**TEXT, field: value})


def test_unsupported_linear_head_dims_are_rejected_before_loading():
    cfg = ModelConfig.from_dict({**TEXT, "linear_value_head_dim": 48})
    with pytest.raises(UnsupportedModelError, match="value % 32"):
        Qwen35Loader().plan(cfg)


MOE_TEXT = {**{k: v for k, v in TEXT.items() if k != "intermediate_size"},
            "model_type": "qwen3_5_moe_text", "num_experts": 256, "num_experts_per_tok": 8,
            "moe_intermediate_size": 512, "shared_expert_intermediate_size": 512}


def test_qwen3_5_moe_routes_every_layer_and_always_renormalizes():
    """transformers' Qwen3.5-MoE config has no dense intermediate_size and its router always
    renormalizes the top-k weights (no norm_topk_prob switch, even if a config sets one)."""
    cfg = ModelConfig.from_dict({"model_type": "qwen3_5_moe", "text_config": {
        **MOE_TEXT, "norm_topk_prob": False}, "vision_config": {"depth": 27}})
    assert cfg.model_type == "qwen3_5_moe" and cfg.multimodal_wrapper and cfg.is_hybrid
    assert cfg.moe.norm_topk_prob and cfg.intermediate_size == 512
    assert all(cfg.moe.is_sparse(i) for i in range(8))
    loader = loader_for_config(cfg)
    assert isinstance(loader, Qwen35MoeLoader)
    plan = loader.plan(cfg, {"model.language_model.layers.0.mlp.experts.gate_up_proj"})
    names = {s.name for s in plan.slots}
    assert "model.language_model.layers.0.mlp.experts.gate_up_proj" in names  # stacked
    assert "model.language_model.layers.1.mlp.experts.255.down_proj.weight" in names
    assert "model.language_model.layers.3.mlp.shared_expert_gate.weight" in names
    assert plan.buffers["l0.experts_gate_up"] == 2 * 256 * 2 * 512 * 2048
    assert "l0.gate_up" not in plan.buffers  # no dense MLP


def test_qwen3_5_moe_without_experts_is_rejected():
    cfg = ModelConfig.from_dict({**TEXT, "model_type": "qwen3_5_moe_text"})
    with pytest.raises(UnsupportedModelError, match="num_experts"):
        loader_for_config(cfg).plan(cfg)


def test_qwen3_next_renormalizes_by_default_and_keeps_dense_layers():
    raw = {**TEXT, "model_type": "qwen3_next", "intermediate_size": 5120, "num_experts": 512,
           "num_experts_per_tok": 10, "moe_intermediate_size": 512,
           "shared_expert_intermediate_size": 512, "mlp_only_layers": [2]}
    cfg = ModelConfig.from_dict(raw)
    assert cfg.moe.norm_topk_prob and not cfg.moe.is_sparse(2) and cfg.moe.is_sparse(3)
    assert not ModelConfig.from_dict({**raw, "norm_topk_prob": False}).moe.norm_topk_prob
    plan = loader_for_config(cfg).plan(cfg)
    assert isinstance(loader_for_config(cfg), Qwen3NextLoader)
    names = {s.name for s in plan.slots}
    assert "model.layers.0.linear_attn.in_proj_qkvz.weight" in names
    assert "model.layers.2.mlp.gate_proj.weight" in names  # the dense layer
    assert plan.buffers["l2.gate_up"] == 2 * 2 * 5120 * 2048
    assert plan.buffers["l0.in_proj"] == 2 * 2048 * (8192 + 4096 + 64)


@pytest.mark.parametrize("model_type, model, leaf", [
    ("qwen3_5_moe", "qwen3.5-35b-a3b", "qwen3.5-35b-a3b"),
    ("qwen3_next", "qwen3", "common")])
def test_hybrid_moe_model_types_have_a_kernel_leaf(model_type, model, leaf):
    """Both select a leaf on the GPU and its behavior: qwen3_5_moe at hidden 2048 its size leaf
    (the router and expert shapes compiled in), qwen3_next the family leaf (the common/
    Gated-DeltaNet and MoE kernels) with Qwen3's behavior (hermes tools)."""
    from pathlib import Path

    from atlas.kernels.tree import select_model

    repo = Path(__file__).resolve().parents[2]
    served = select_model(repo, "hopper", model_type, 2048, "bf16")
    assert served.model == model and served.target.model == leaf
