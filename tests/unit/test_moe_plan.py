"""Mixture-of-experts configs and weight plans: which layers are sparse, both expert layouts
packed into the same [E, 2I, H] / [E, H, I] buffers, shared experts, router options, and
config refusals that name the field."""

import pytest

from atlas.core.config import ConfigError, ModelConfig
from atlas.core.dtype import DType
from atlas.model.factory import loader_for_config
from atlas.model.loaders.dense import UnsupportedModelError
from atlas.model.loaders.moe import SHARED_GATE_ROWS, MoeLoaderError
from atlas.model.model import dense_mlp_width

#: the published Qwen/Qwen3-30B-A3B config.json, fields that matter here
QWEN3_30B_A3B = dict(
    architectures=["Qwen3MoeForCausalLM"], model_type="qwen3_moe", hidden_size=2048,
    num_hidden_layers=48, num_attention_heads=32, num_key_value_heads=4, head_dim=128,
    intermediate_size=6144, moe_intermediate_size=768, num_experts=128, num_experts_per_tok=8,
    norm_topk_prob=True, decoder_sparse_step=1, mlp_only_layers=[], vocab_size=151936,
    rms_norm_eps=1e-6, rope_theta=1e6, tie_word_embeddings=False, sliding_window=None,
    use_sliding_window=False)
SMALL = dict(QWEN3_30B_A3B, hidden_size=256, num_hidden_layers=4, num_attention_heads=2,
             num_key_value_heads=1, intermediate_size=384, moe_intermediate_size=64,
             num_experts=8, num_experts_per_tok=2, vocab_size=512)


def cfg(**over) -> ModelConfig:
    return ModelConfig.from_dict({**SMALL, **over}, source="m/config.json")


def test_qwen3_30b_a3b_config():
    c = ModelConfig.from_dict(QWEN3_30B_A3B)
    m = c.moe
    assert (m.num_experts, m.top_k, m.intermediate_size) == (128, 8, 768)
    assert m.norm_topk_prob and m.scoring == "softmax" and not m.score_bias
    assert m.shared_intermediate_size == 0 and m.routed_scaling_factor == 1.0
    assert all(m.is_sparse(i) for i in range(48))
    assert c.has_qk_norm and not c.qkv_bias
    assert dense_mlp_width(c) == 768  # no dense layer, no shared expert: no 6144-wide scratch


def test_dense_config_has_no_moe():
    assert ModelConfig.from_dict({**SMALL, "model_type": "qwen3", "num_experts": 0}).moe is None


def test_sparse_step_and_mlp_only_layers_pick_the_sparse_layers():
    m = cfg(decoder_sparse_step=2, mlp_only_layers=[3]).moe
    assert [m.is_sparse(i) for i in range(4)] == [False, True, False, False]
    c = cfg(mlp_only_layers=[1, 2])
    assert [c.moe.is_sparse(i) for i in range(4)] == [True, False, False, True]
    assert dense_mlp_width(c) == 384


def test_router_options_from_other_families():
    m = cfg(scoring_func="sigmoid", topk_method="noaux_tc", routed_scaling_factor=2.5).moe
    assert (m.scoring, m.score_bias, m.routed_scaling_factor) == ("sigmoid", True, 2.5)
    assert cfg(scoring_func="sigmoid", use_routing_bias=True).moe.score_bias
    minimax = {k: v for k, v in SMALL.items() if k != "num_experts"} | {"num_local_experts": 16}
    assert ModelConfig.from_dict(minimax).moe.num_experts == 16


@pytest.mark.parametrize("over, message", [
    (dict(num_experts_per_tok=9), "'num_experts_per_tok' = 9 exceeds num_experts = 8"),
    (dict(num_experts_per_tok=None), "'num_experts_per_tok' is required"),
    (dict(moe_intermediate_size=None), "'moe_intermediate_size' is required"),
    (dict(mlp_only_layers=[4]), "'mlp_only_layers' must be a list of layer indices below"),
    (dict(scoring_func="relu"), "'scoring_func' must be one of"),
    (dict(norm_topk_prob="yes"), "'norm_topk_prob' must be true or false"),
])
def test_bad_moe_fields_name_field_and_file(over, message):
    with pytest.raises(ConfigError, match=f"m/config.json: field {message}"):
        cfg(**over)


def test_qwen2_moe_has_qkv_bias_unless_told_otherwise():
    c = cfg(model_type="qwen2_moe")
    assert c.qkv_bias and not c.o_bias and not c.has_qk_norm
    exp = loader_for_config(c).plan(c).expected()
    q_rows = c.num_attention_heads * c.head_dim
    assert exp["model.layers.0.self_attn.q_proj.bias"] == (DType.BF16, (q_rows,))
    unbiased = cfg(model_type="qwen2_moe", qkv_bias=False)
    assert not unbiased.qkv_bias
    assert not any(n.endswith(".bias") for n in loader_for_config(unbiased).plan(
        unbiased).expected())


def _expert_names(layer: int, experts: int) -> set[str]:
    p = f"model.layers.{layer}.mlp.experts."
    return {f"{p}{x}.{w}.weight" for x in range(experts) for w in ("gate_proj", "up_proj",
                                                                   "down_proj")}


def test_per_expert_layout_packs_gate_up_then_down():
    c = cfg(mlp_only_layers=[1])
    plan = loader_for_config(c).plan(c)
    gu = [s for s in plan.slots if s.buffer == "l0.experts_gate_up"]
    assert [s.name.rsplit(".", 3)[-3:-1] for s in gu[:4]] == [
        ["0", "gate_proj"], ["0", "up_proj"], ["1", "gate_proj"], ["1", "up_proj"]]
    assert [s.offset for s in gu[:3]] == [0, 64 * 256 * 2, 2 * 64 * 256 * 2]
    assert plan.buffers["l0.experts_gate_up"] == 8 * 2 * 64 * 256 * 2
    assert plan.buffers["l0.experts_down"] == 8 * 256 * 64 * 2
    assert plan.expected()["model.layers.0.mlp.gate.weight"] == (DType.BF16, (8, 256))
    assert "l1.gate_up" in plan.buffers and "l1.router" not in plan.buffers  # dense layer


def test_fused_layout_is_one_tensor_per_projection():
    c = cfg()
    names = {"model.layers.0.mlp.experts.gate_up_proj", "model.layers.0.mlp.experts.down_proj"}
    exp = loader_for_config(c).plan(c, names).expected()
    assert exp["model.layers.0.mlp.experts.gate_up_proj"] == (DType.BF16, (8, 128, 256))
    assert exp["model.layers.0.mlp.experts.down_proj"] == (DType.BF16, (8, 256, 64))
    assert "model.layers.1.mlp.experts.0.gate_proj.weight" in exp  # chosen per layer


def test_shared_expert_and_score_bias_buffers():
    c = cfg(model_type="qwen2_moe", qkv_bias=False, shared_expert_intermediate_size=96,
            scoring_func="sigmoid", use_routing_bias=True)
    plan = loader_for_config(c).plan(c)
    exp = plan.expected()
    assert exp["model.layers.0.mlp.shared_expert.gate_proj.weight"] == (DType.BF16, (96, 256))
    assert exp["model.layers.0.mlp.shared_expert_gate.weight"] == (DType.BF16, (1, 256))
    assert exp["model.layers.0.mlp.gate.e_score_correction_bias"] == (DType.FP32, (8,))
    assert plan.buffers["l0.shared_gate"] == SHARED_GATE_ROWS * 256 * 2  # zero-padded rows
    assert dense_mlp_width(c) == 96


def test_expert_count_mismatch_is_one_line():
    c = cfg()
    loader = loader_for_config(c)
    with pytest.raises(MoeLoaderError, match=r"checkpoint has tensor model\.layers\.0\.mlp\."
                                             r"experts\.8\.\* but num_experts = 8"):
        loader.plan(c, _expert_names(0, 9))
    with pytest.raises(MoeLoaderError, match=r"layer 0 has 6 experts .* but num_experts = 8"):
        loader.plan(c, _expert_names(0, 6))
    loader.plan(c, _expert_names(0, 8) - {"model.layers.0.mlp.experts.3.up_proj.weight"})


def test_moe_dims_must_suit_the_kernels():
    c = cfg(moe_intermediate_size=72)
    with pytest.raises(UnsupportedModelError, match="moe_intermediate_size=72"):
        loader_for_config(c).plan(c)


@pytest.mark.parametrize("model_type, model", [("qwen3_moe", "qwen3"), ("qwen2_moe", "qwen2"),
                                              ("mixtral", "mistral"), ("glm4_moe", "glm4_moe"),
                                              ("gpt_oss", "gpt_oss")])
def test_moe_model_types_have_a_kernel_leaf(model_type, model):
    """The tiny fixtures' shapes select a family leaf on the GPU (common/ MoE kernels)."""
    from pathlib import Path

    from atlas.kernels.tree import select_model

    repo = Path(__file__).resolve().parents[2]
    served = select_model(repo, "hopper", model_type, 128, "bf16")
    assert served.model == model and served.target.model == "common"


def _mixtral(**over) -> ModelConfig:
    """A Mixtral-8x7B-shaped config (smaller): experts `intermediate_size` wide, no
    `moe_intermediate_size` or `norm_topk_prob` keys."""
    fields = {k: v for k, v in SMALL.items() if k not in (
        "moe_intermediate_size", "num_experts", "norm_topk_prob", "decoder_sparse_step",
        "mlp_only_layers", "use_sliding_window")}
    return ModelConfig.from_dict(dict(fields, model_type="mixtral", num_local_experts=8, **over),
                                 source="m/config.json")


def test_mixtral_config_routes_every_layer_through_renormalized_experts():
    c = _mixtral()
    m = c.moe
    assert (m.num_experts, m.top_k, m.intermediate_size) == (8, 2, 384)
    assert m.norm_topk_prob and m.scoring == "softmax" and m.shared_intermediate_size == 0
    assert all(m.is_sparse(i) for i in range(c.num_hidden_layers))


def test_mixtral_plan_reads_the_published_or_the_fused_expert_names():
    c = _mixtral()
    p = "model.layers.1."
    published = {f"{p}block_sparse_moe.experts.{x}.{w}.weight" for x in range(8)
                 for w in ("w1", "w2", "w3")}
    plan = loader_for_config(c).plan(c, published)
    gate_up = [s.name for s in plan.slots if s.buffer == "l1.experts_gate_up"]
    assert gate_up[:3] == [f"{p}block_sparse_moe.experts.0.w1.weight",
                           f"{p}block_sparse_moe.experts.0.w3.weight",
                           f"{p}block_sparse_moe.experts.1.w1.weight"]
    assert plan.expected()[f"{p}block_sparse_moe.gate.weight"] == (DType.BF16, (8, 256))
    fused = loader_for_config(c).plan(c, {f"{p}mlp.experts.gate_up_proj"})
    assert [s.name for s in fused.slots if s.buffer == "l1.experts_gate_up"] == [
        f"{p}mlp.experts.gate_up_proj"]


def test_mixtral_expert_count_mismatch_names_the_w1_tensors():
    c = _mixtral()
    names = {f"model.layers.0.block_sparse_moe.experts.{x}.w1.weight" for x in range(9)}
    with pytest.raises(MoeLoaderError, match=r"block_sparse_moe\.experts\.8\.\* but "
                                             r"num_experts = 8"):
        loader_for_config(c).plan(c, names)


#: the published zai-org/GLM-4.5-Air config.json, fields that matter here
GLM_45_AIR = dict(
    architectures=["Glm4MoeForCausalLM"], model_type="glm4_moe", hidden_size=4096,
    num_hidden_layers=46, num_attention_heads=96, num_key_value_heads=8, head_dim=128,
    intermediate_size=10944, moe_intermediate_size=1408, n_routed_experts=128,
    num_experts_per_tok=8, n_shared_experts=1, first_k_dense_replace=1, n_group=1,
    topk_group=1, norm_topk_prob=True, routed_scaling_factor=1.0, partial_rotary_factor=0.5,
    attention_bias=True, use_qk_norm=False, num_nextn_predict_layers=1, vocab_size=151552,
    max_position_embeddings=131072, rms_norm_eps=1e-5, rope_theta=1e6,
    tie_word_embeddings=False)
GLM_SMALL = dict(GLM_45_AIR, hidden_size=256, num_hidden_layers=4, num_attention_heads=4,
                 num_key_value_heads=2, head_dim=64, intermediate_size=384,
                 moe_intermediate_size=64, n_routed_experts=8, num_experts_per_tok=2,
                 vocab_size=512)


def glm(**over) -> ModelConfig:
    return ModelConfig.from_dict({**GLM_SMALL, **over}, source="m/config.json")


def test_glm_4_5_air_config():
    c = ModelConfig.from_dict(GLM_45_AIR)
    m = c.moe
    assert (m.num_experts, m.top_k, m.intermediate_size) == (128, 8, 1408)
    assert (m.scoring, m.score_bias, m.norm_topk_prob) == ("sigmoid", True, True)
    assert m.router_f32 and not m.shared_gated and m.shared_intermediate_size == 1408
    assert [m.is_sparse(i) for i in range(3)] == [False, True, True]  # first_k_dense_replace
    assert c.qkv_bias and not c.o_bias and not c.has_qk_norm
    assert (c.rotary_dim, c.trailing_mtp_layers) == (64, 1)
    assert dense_mlp_width(c) == 10944


def test_glm4_moe_defaults_are_transformers():
    """Glm4MoeConfig's defaults where a config leaves the keys out: half of each head
    rotating, one dense layer, one shared expert, renormalized weights, no q/k norm."""
    keys = ("partial_rotary_factor", "first_k_dense_replace", "n_shared_experts",
            "norm_topk_prob", "use_qk_norm", "n_group", "topk_group")
    c = ModelConfig.from_dict({k: v for k, v in GLM_SMALL.items() if k not in keys})
    m = c.moe
    assert (c.partial_rotary_factor, m.mlp_only_layers, m.shared_intermediate_size) == (
        0.5, (0,), 64)
    assert m.norm_topk_prob and not c.use_qk_norm
    c = glm(first_k_dense_replace=0, n_shared_experts=2, use_qk_norm=True,
            num_mtp_layers=2)  # transformers 5's spelling of num_nextn_predict_layers
    assert c.moe.mlp_only_layers == () and c.moe.shared_intermediate_size == 128
    assert c.has_qk_norm and c.trailing_mtp_layers == 2


@pytest.mark.parametrize("over, message", [
    (dict(n_group=8, topk_group=4), "'topk_group' = 4 < n_group = 8: group-limited expert "
                                    "selection"),
    (dict(n_group=3, topk_group=3), "'n_group' = 3 does not divide the 8 experts"),
    (dict(n_group=2, topk_group=4), "'topk_group' = 4 exceeds n_group = 2"),
    (dict(first_k_dense_replace=5), "'first_k_dense_replace' = 5 exceeds num_hidden_layers"),
    (dict(n_shared_experts=-1), "'n_shared_experts' must be a non-negative integer"),
])
def test_glm4_moe_refusals_name_the_field(over, message):
    with pytest.raises(ConfigError, match=f"m/config.json: field {message}"):
        glm(**over)


def test_glm4_moe_every_group_chosen_is_the_plain_top_k():
    assert glm(n_group=4, topk_group=4).moe.num_experts == 8


def test_glm4_moe_plan():
    """q/k/v biases without an o_proj bias, per-head q/k norms under use_qk_norm, the dense
    layer's MLP, a bf16 router and a float32 score bias, the shared experts under
    `shared_experts` with no gate; either expert layout."""
    c = glm(use_qk_norm=True)
    plan = loader_for_config(c).plan(c)
    exp = plan.expected()
    p = "model.layers.1.mlp."
    assert exp["model.layers.0.self_attn.q_proj.bias"] == (DType.BF16, (256,))
    assert exp["model.layers.0.self_attn.q_norm.weight"] == (DType.BF16, (64,))
    assert "model.layers.0.self_attn.o_proj.bias" not in exp
    assert "l0.gate_up" in plan.buffers and "l0.router" not in plan.buffers
    assert exp[p + "gate.weight"] == (DType.BF16, (8, 256))
    assert exp[p + "gate.e_score_correction_bias"] == (DType.FP32, (8,))
    assert exp[p + "shared_experts.up_proj.weight"] == (DType.BF16, (64, 256))
    assert exp[p + "experts.7.down_proj.weight"] == (DType.BF16, (256, 64))
    assert not any("shared_expert_gate" in n or "layers.4." in n for n in exp)
    assert "l1.shared_gate" not in plan.buffers
    fused = loader_for_config(c).plan(c, {p + "experts.gate_up_proj"}).expected()
    assert fused[p + "experts.gate_up_proj"] == (DType.BF16, (8, 128, 256))
    assert fused[p + "shared_experts.gate_proj.weight"] == (DType.BF16, (64, 256))
    plain = glm()
    assert not any(n.endswith("q_norm.weight")
                   for n in loader_for_config(plain).plan(plain).expected())
