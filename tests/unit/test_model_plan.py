"""Weight plans: which tensors a family needs, fused layouts, and config refusals."""

import pytest

from atlas.core.config import ModelConfig
from atlas.core.dtype import DType
from atlas.model.factory import loader_for_config
from atlas.model.loaders.dense import UnsupportedModelError

BASE = dict(model_type="qwen3", hidden_size=256, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, head_dim=128, intermediate_size=512, vocab_size=512,
            rms_norm_eps=1e-6, rope_theta=1e6, tie_word_embeddings=False)


def cfg(**over):
    return ModelConfig.from_dict({**BASE, **over})


def test_qwen3_plan_fuses_qkv_and_gate_up():
    plan = loader_for_config(cfg()).plan(cfg())
    exp = plan.expected()
    assert exp["model.layers.1.self_attn.q_norm.weight"] == (DType.BF16, (128,))
    assert exp["lm_head.weight"] == (DType.BF16, (512, 256))
    qkv = [s for s in plan.slots if s.buffer == "l0.qkv"]
    assert [s.name.split(".")[-2] for s in qkv] == ["q_proj", "k_proj", "v_proj"]
    assert [s.offset for s in qkv] == [0, 512 * 256 * 2, (512 + 256) * 256 * 2]
    assert plan.buffers["l0.qkv"] == (512 + 2 * 256) * 256 * 2
    assert plan.buffers["l0.gate_up"] == 2 * 512 * 256 * 2
    offsets, total = plan.layout()
    assert all(o % 256 == 0 for o in offsets.values()) and total >= sum(plan.buffers.values())


def test_llama_tied_plan_has_no_lm_head_or_qk_norm():
    c = cfg(model_type="llama", tie_word_embeddings=True, head_dim=64)
    exp = loader_for_config(c).plan(c).expected()
    assert "lm_head.weight" not in exp
    assert not any("q_norm" in n for n in exp)
    assert exp["model.layers.0.self_attn.k_proj.weight"] == (DType.BF16, (128, 256))


def test_qwen2_plan_adds_one_bias_buffer_per_layer_in_qkv_order():
    c = cfg(model_type="qwen2")
    plan = loader_for_config(c).plan(c)
    bias = [s for s in plan.slots if s.buffer == "l1.qkv_bias"]
    assert [(s.name.split(".")[-2], s.shape, s.offset) for s in bias] == [
        ("q_proj", (512,), 0), ("k_proj", (256,), 1024), ("v_proj", (256,), 1536)]
    assert not any("q_norm" in n or "o_proj.bias" in n for n in plan.expected())


def test_phi3_plan_reads_the_fused_tensors_as_one_part_each():
    c = cfg(model_type="phi3")
    plan = loader_for_config(c).plan(c)
    assert [(s.name, s.shape) for s in plan.slots if s.buffer in ("l0.qkv", "l0.gate_up")] == [
        ("model.layers.0.self_attn.qkv_proj.weight", (1024, 256)),
        ("model.layers.0.mlp.gate_up_proj.weight", (1024, 256))]


@pytest.mark.parametrize("over, message", [
    (dict(model_type="mamba"), "unsupported model_type 'mamba'"),
    (dict(head_dim=72), r"head_dim=72 is not supported \(supported: \(64, 80, 96, 112, 128\)\)"),
    (dict(head_dim=256), "head_dim=256 is not supported"),  # the dense families' kernels
    (dict(attention_bias=True), r"attention_bias=true \(a bias on o_proj\)"),
    (dict(hidden_act="gelu"), "hidden_act='gelu'"),
    (dict(num_key_value_heads=3), "not a multiple"),
])
def test_unsupported_configs_name_the_problem(over, message):
    with pytest.raises(UnsupportedModelError, match=message):
        c = cfg(**over)
        loader_for_config(c).plan(c)
