"""gpt-oss configs and weight plans: the published configs, GptOssConfig's defaults, its
refusals, both expert layouts (bf16 [E, in, out] with gate/up interleaved, the release's MXFP4
blocks) converted on the host into the packed buffers, and what Atlas does not run for it yet
(tensor / expert parallelism, quantized KV caches)."""

import json
from pathlib import Path

import numpy as np
import pytest

from atlas.core.config import ConfigError, ModelConfig
from atlas.core.dtype import DType
from atlas.core.quant_config import parse_quant_config
from atlas.model.expert_parallel import check_expert_parallel
from atlas.model.factory import loader_for_config
from atlas.model.loaders.dense import UnsupportedModelError
from atlas.model.loaders.moe import gate_up_rows
from atlas.model.load import StartupError, load_runner
from atlas.model.parallel import check_tensor_parallel

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "tiny-gpt-oss"
YARN = {"rope_type": "yarn", "factor": 32.0, "beta_fast": 32.0, "beta_slow": 1.0,
        "truncate": False, "original_max_position_embeddings": 4096}
#: the published openai/gpt-oss-20b config.json, fields that matter here
GPT_OSS_20B = dict(
    architectures=["GptOssForCausalLM"], model_type="gpt_oss", hidden_size=2880,
    intermediate_size=2880, num_local_experts=32, num_experts_per_tok=4, experts_per_token=4,
    num_hidden_layers=24, num_attention_heads=64, num_key_value_heads=8, head_dim=64,
    vocab_size=201088, max_position_embeddings=131072, rms_norm_eps=1e-5, rope_theta=150000,
    sliding_window=128, layer_types=["sliding_attention", "full_attention"] * 12,
    rope_scaling=YARN, attention_bias=True, swiglu_limit=7.0, tie_word_embeddings=False,
    quantization_config={"quant_method": "mxfp4", "modules_to_not_convert": [
        "model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens",
        "lm_head"]})
SMALL = dict(GPT_OSS_20B, hidden_size=128, intermediate_size=64, num_local_experts=8,
             num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
             layer_types=["sliding_attention", "full_attention"], vocab_size=512)


def oss(**over) -> ModelConfig:
    return ModelConfig.from_dict({**SMALL, **over}, source="m/config.json")


@pytest.mark.parametrize("experts, layers", [(32, 24), (128, 36)])
def test_published_configs(experts, layers):
    """gpt-oss-20b, and gpt-oss-120b: the same but 36 layers of 128 experts."""
    c = ModelConfig.from_dict(dict(GPT_OSS_20B, num_local_experts=experts,
                                   num_hidden_layers=layers,
                                   layer_types=["sliding_attention", "full_attention"] * (
                                       layers // 2)))
    m = c.moe
    assert (m.num_experts, m.top_k, m.intermediate_size) == (experts, 4, 2880)
    assert (m.scoring, m.norm_topk_prob, m.score_bias) == ("softmax", True, False)
    assert m.router_bias and m.expert_bias and (m.swiglu_limit, m.swiglu_alpha) == (7.0, 1.702)
    assert all(m.is_sparse(i) for i in range(layers))
    assert c.qkv_bias and c.o_bias and c.attention_sinks and c.bias_in_f32 and c.norm_one_round
    assert (c.head_dim, c.num_attention_heads, c.num_key_value_heads) == (64, 64, 8)
    assert c.attention_windows == (128, 0) * (layers // 2)
    assert c.rope_scaling["rope_type"] == "yarn" and c.rope_scaling["factor"] == 32.0
    assert parse_quant_config(GPT_OSS_20B["quantization_config"]).mxfp4_experts


def test_defaults_are_gpt_oss_configs():
    """GptOssConfig's defaults where a config leaves the keys out: q/k/v/o biases, layers 0,
    2, ... sliding over 128 keys, swiglu_alpha 1.702 and swiglu_limit 7."""
    keys = ("attention_bias", "sliding_window", "layer_types", "swiglu_limit")
    c = ModelConfig.from_dict({k: v for k, v in SMALL.items() if k not in keys})
    assert c.qkv_bias and c.o_bias and c.attention_windows == (128, 0)
    assert (c.moe.swiglu_limit, c.moe.swiglu_alpha) == (7.0, 1.702)
    assert oss(swiglu_alpha=1.5, swiglu_limit=10).moe.swiglu_alpha == 1.5
    plain = oss(attention_bias=False)  # transformers' switch: no q/k/v/o biases
    assert not (plain.qkv_bias or plain.o_bias)
    assert not any(n.endswith(".bias") and "self_attn" in n
                   for n in loader_for_config(plain).plan(plain).expected())


@pytest.mark.parametrize("over, message", [
    (dict(swiglu_limit=0), "'swiglu_limit'"),
    (dict(swiglu_alpha=-1.0), "'swiglu_alpha'"),
    (dict(head_dim=96), r"head_dim=96 is not supported \(supported: \(64, 128\)\)"),
])
def test_refusals_name_the_field(over, message):
    with pytest.raises((ConfigError, UnsupportedModelError), match=message):
        c = oss(**over)
        loader_for_config(c).plan(c)


def _expected(c: ModelConfig, names=(), quant=None):
    kw = {} if quant is None else {"quant": parse_quant_config(quant)}
    return loader_for_config(c).plan(c, names, **kw)


def test_plan_reads_the_bf16_layout():
    c = oss()
    plan = _expected(c)
    exp = plan.expected()
    a, m = "model.layers.1.self_attn.", "model.layers.1.mlp."
    assert exp[a + "o_proj.bias"] == (DType.BF16, (128,))
    assert exp[a + "sinks"] == (DType.BF16, (4,))
    assert exp[a + "q_proj.bias"] == (DType.BF16, (256,))
    assert exp[m + "router.weight"] == (DType.BF16, (8, 128))
    assert exp[m + "router.bias"] == (DType.BF16, (8,))
    assert exp[m + "experts.gate_up_proj"] == (DType.BF16, (8, 128, 128))  # [E, H, 2I]
    assert exp[m + "experts.down_proj"] == (DType.BF16, (8, 64, 128))      # [E, I, H]
    assert exp[m + "experts.gate_up_proj_bias"] == (DType.BF16, (8, 128))
    assert exp[m + "experts.down_proj_bias"] == (DType.BF16, (8, 128))
    # the packed buffers, as every MoE family's
    assert plan.buffers["l1.experts_gate_up"] == 8 * 128 * 128 * 2
    assert plan.buffers["l1.experts_down"] == 8 * 128 * 64 * 2
    assert plan.buffers["l1.experts_gate_up_bias"] == 8 * 128 * 2


def test_plan_reads_the_mxfp4_blocks_named_or_configured():
    c = oss()
    m = "model.layers.0.mlp.experts."
    for names, quant in (({m + "gate_up_proj_blocks"}, None),
                         ((), GPT_OSS_20B["quantization_config"])):
        exp = _expected(c, names, quant).expected()
        assert exp[m + "gate_up_proj_blocks"] == (DType.U8, (8, 128, 4, 16))  # [E, 2I, H/32, 16]
        assert exp[m + "gate_up_proj_scales"] == (DType.U8, (8, 128, 4))
        assert exp[m + "down_proj_blocks"] == (DType.U8, (8, 128, 2, 16))     # [E, H, I/32, 16]
        assert exp[m + "down_proj_scales"] == (DType.U8, (8, 128, 2))
        assert m + "gate_up_proj" not in exp and m + "gate_up_proj_bias" in exp
    with pytest.raises(UnsupportedModelError, match="multiples of 32, got 48"):
        _expected(oss(intermediate_size=48), {m + "gate_up_proj_blocks"})


def test_mxfp4_is_refused_for_other_families():
    c = ModelConfig.from_dict(json.loads((FIXTURE.parent / "tiny-mixtral" / "config.json")
                                         .read_text()), source="m/config.json")
    with pytest.raises(UnsupportedModelError, match="quant_method 'mxfp4'.* not supported for "
                                                    "mixtral"):
        _expected(c, quant={"quant_method": "mxfp4"})


def test_gate_up_rows_deinterleave_gate_then_up():
    """transformers' gate = gate_up[..., ::2], up = gate_up[..., 1::2]; rows here."""
    interleaved = np.array([10, 20, 11, 21, 12, 22])
    assert gate_up_rows(interleaved).tolist() == [10, 11, 12, 20, 21, 22]


def test_parallelism_is_refused_with_the_reason():
    c = ModelConfig.from_hf(FIXTURE)
    with pytest.raises(UnsupportedModelError, match="float32 sums.*one GPU per replica"):
        check_tensor_parallel(c, 2)
    with pytest.raises(UnsupportedModelError, match="not split across ranks yet"):
        check_expert_parallel(c, 2)


def test_quantized_kv_cache_is_refused():
    """Even where no window binds (--max-seq-len 8, the sliding layers' window)."""
    with pytest.raises(StartupError, match="attention sinks run on bf16 KV pools only"):
        load_runner(FIXTURE, backend="host", max_seq_len=8, max_batch_size=1,
                    kv_cache_dtype="fp8")


def test_synthetic_weights_load_and_run():
    """Benchmark weights (the published shapes on the GPU): every bias and sink made, the
    converted expert buffers filled directly."""
    from atlas.core.sampling import GREEDY
    from atlas.model.batch import PenaltyHistory, SeqChunk

    runner = load_runner(FIXTURE, backend="host", max_seq_len=64, max_batch_size=1,
                         synthetic_seed=1)
    prompt = list(range(3, 20))
    runner.execute([SeqChunk(0, prompt, 0, [0, 1], GREEDY, history=PenaltyHistory(prompt))])
    logits = runner.read_logits(1)
    assert np.isfinite(logits).all() and logits.std() > 0
