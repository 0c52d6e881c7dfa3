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
