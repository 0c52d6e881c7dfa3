"""The decode-traffic model behind the MoE benchmark's bandwidth fraction, checked by hand."""

import pytest

from atlas.bench.decode_bytes import decode_bytes_per_step, expected_distinct_experts
from atlas.core.config import ModelConfig
from test_moe_plan import QWEN3_30B_A3B


def test_qwen3_30b_a3b_batch_1():
    b = decode_bytes_per_step(ModelConfig.from_dict(QWEN3_30B_A3B), context=640)
    assert b["experts"] == 48 * 8 * 3 * 768 * 2048 * 2  # 8 of 128 experts: 3.62 GB
    assert b["router"] == 48 * 128 * 2048 * 2
    assert b["attention"] == 48 * (4096 + 2 * 512 + 4096) * 2048 * 2
    assert b["kv_cache"] == 48 * 2 * 640 * 512 * 2
    assert b["lm_head"] == 151936 * 2048 * 2 and b["embedding"] == 2048 * 2
    assert b["norms"] == 2048 * 2 + 48 * (2 * 2048 + 2 * 128) * 2
    assert b["dense_mlp"] == b["shared_experts"] == 0
    assert 6.0e9 < sum(b.values()) < 6.2e9


def test_dense_layers_and_shared_experts_count_whole():
    raw = dict(QWEN3_30B_A3B, num_hidden_layers=2, mlp_only_layers=[1],
               shared_expert_intermediate_size=512)
    b = decode_bytes_per_step(ModelConfig.from_dict(raw), context=0)
    assert b["dense_mlp"] == 3 * 6144 * 2048 * 2
    assert b["shared_experts"] == (3 * 512 + 1) * 2048 * 2 and b["kv_cache"] == 0


def test_batches_read_the_expected_distinct_experts():
    assert expected_distinct_experts(128, 8, 1) == pytest.approx(8)
    assert expected_distinct_experts(128, 8, 64) == pytest.approx(128 * (1 - (120 / 128) ** 64))
    assert expected_distinct_experts(4, 4, 3) == pytest.approx(4)


def test_qwen3_5_35b_a3b_batch_1_counts_the_hybrid_layers():
    """Qwen3.5-35B-A3B (transformers' Qwen3_5MoeTextConfig defaults): 10 gated full-attention
    layers with a KV cache, 30 Gated-DeltaNet layers whose state is read and written back,
    8 of 256 experts and the shared expert in all 40."""
    layer_types = (["linear_attention"] * 3 + ["full_attention"]) * 10
    raw = {"model_type": "qwen3_5_moe_text", "hidden_size": 2048, "num_hidden_layers": 40,
           "num_attention_heads": 16, "num_key_value_heads": 2, "head_dim": 256,
           "vocab_size": 248320, "rms_norm_eps": 1e-6, "layer_types": layer_types,
           "rope_parameters": {"rope_type": "default", "rope_theta": 1e7,
                               "partial_rotary_factor": 0.25},
           "linear_num_key_heads": 16, "linear_num_value_heads": 32,
           "linear_key_head_dim": 128, "linear_value_head_dim": 128,
           "linear_conv_kernel_dim": 4, "num_experts": 256, "num_experts_per_tok": 8,
           "moe_intermediate_size": 512, "shared_expert_intermediate_size": 512}
    b = decode_bytes_per_step(ModelConfig.from_dict(raw), context=640)
    assert b["attention"] == 10 * ((2 * 4096 + 2 * 512) * 2048 + 2048 * 4096) * 2
    assert b["kv_cache"] == 10 * 2 * 640 * 512 * 2
    conv_dim = 2 * 2048 + 4096
    assert b["linear_attention"] == 30 * ((conv_dim + 4096 + 64) * 2048 + conv_dim * 4 + 64
                                          + 128 + 2048 * 4096) * 2
    assert b["linear_state"] == 30 * 2 * (3 * conv_dim * 2 + 32 * 128 * 128 * 4)
    assert b["experts"] == 40 * 8 * 3 * 512 * 2048 * 2
    assert b["router"] == 40 * 256 * 2048 * 2
    assert b["shared_experts"] == 40 * (3 * 512 + 1) * 2048 * 2
    assert b["norms"] == 2048 * 2 + 40 * 2 * 2048 * 2 + 10 * 2 * 256 * 2
    assert b["dense_mlp"] == 0
    # NVFP4 with the Gated-DeltaNet projections quantized too: only the projections shrink
    q = decode_bytes_per_step(ModelConfig.from_dict(raw), context=640, quant="nvfp4",
                              linear_attn=True)
    assert q["linear_attention"] == pytest.approx(
        30 * ((conv_dim + 4096 + 64) * 2048 + 2048 * 4096) * 0.5625
        + 30 * (conv_dim * 4 + 64 + 128) * 2)
    assert q["shared_experts"] == pytest.approx(40 * (3 * 512 * 0.5625 + 2) * 2048)


def test_quantized_formats_count_their_projections_codes_and_scales() -> None:
    cfg = ModelConfig.from_dict(QWEN3_30B_A3B)
    bf16 = decode_bytes_per_step(cfg, context=640)
    for quant, per_value in (("nvfp4", 0.5625), ("fp8-block", 1.0 + 4 / 128 ** 2)):
        got = decode_bytes_per_step(cfg, context=640, quant=quant)
        for part in ("attention", "experts"):
            assert got[part] == pytest.approx(bf16[part] * per_value / 2)
        for part in ("router", "lm_head", "kv_cache", "norms", "embedding"):
            assert got[part] == bf16[part]
        with_head = decode_bytes_per_step(cfg, context=640, quant=quant, lm_head=True)
        assert with_head["lm_head"] == pytest.approx(bf16["lm_head"] * per_value / 2)
        assert got["linear_attention"] == bf16["linear_attention"] == 0.0  # not hybrid


def test_kv_counts_padded_rows_and_only_the_window_of_sliding_layers() -> None:
    """Phi-3.5-mini's head_dim 96 is cached as 128-element rows (ops.attention.
    padded_head_dim); Mistral-7B-v0.1's every layer reads at most its 4,096-key window."""
    phi = {"model_type": "phi3", "hidden_size": 3072, "num_hidden_layers": 32,
           "num_attention_heads": 32, "num_key_value_heads": 32, "vocab_size": 32064,
           "intermediate_size": 8192, "rms_norm_eps": 1e-5, "rope_theta": 1e4}
    b = decode_bytes_per_step(ModelConfig.from_dict(phi), context=512)
    assert b["kv_cache"] == 32 * 2 * 512 * 32 * 128 * 2
    assert b["attention"] == 32 * (3 * 3072 + 3072) * 3072 * 2  # projections unpadded
    mistral = {"model_type": "mistral", "hidden_size": 4096, "num_hidden_layers": 32,
               "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 32000,
               "intermediate_size": 14336, "rms_norm_eps": 1e-5, "sliding_window": 4096,
               "rope_theta": 1e4}
    cfg = ModelConfig.from_dict(mistral)
    assert decode_bytes_per_step(cfg, context=8000)["kv_cache"] == 32 * 2 * 4096 * 1024 * 2
    assert decode_bytes_per_step(cfg, context=1000)["kv_cache"] == 32 * 2 * 1000 * 1024 * 2
