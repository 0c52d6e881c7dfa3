"""tools/throughput_model.py: the scheduler under the throughput suite's 64-stream level with
a cost model calibrated on the H200 (gpu12): it must reproduce the measured level with the
old single budget, and show the mixed-step budget meeting the inter-token p99 target without
costing throughput."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

TOOL = Path(__file__).resolve().parents[2] / "tools" / "throughput_model.py"


@pytest.fixture(scope="module")
def model():
    spec = importlib.util.spec_from_file_location("throughput_model", TOOL)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_old_single_budget_reproduces_the_measured_level(model):
    """gpu12, c = 64: 8,264 tok/s, wall 15.9 s, inter-token p99 69.4 ms, TTFT p50 1,235."""
    r = model.simulate(model.parse_args(["--max-mixed-step-tokens", "0",
                                           "--mixed-attn-factor", "2"]))
    assert r["tok_s"] == pytest.approx(8264, rel=0.03)
    assert r["itl_p99_ms"] == pytest.approx(69.4, rel=0.1)
    assert r["ttft_p50_ms"] == pytest.approx(1235, rel=0.2)


def test_default_mixed_budget_meets_the_itl_target_at_the_same_throughput(model):
    r = model.simulate(model.parse_args([]))
    assert r["itl_p99_ms"] <= 40 and r["itl_max_ms"] <= 40
    assert r["tok_s"] >= 8264 * 0.98


def test_profile_sets_the_decode_costs(model, tmp_path):
    """A profile_decode.py record: attention rows scaled to 64 x 1,536 keys, the rest fixed."""
    record = {"batch": 32, "context": 1536, "gpu_ms": 9.0,
              "kernels": [{"kernel": "decode_attn_rope_bf16", "us_per_step": 3000.0},
                          {"kernel": "decode_attn_cluster_bf16", "us_per_step": 500.0},
                          {"kernel": "gemm_decode_sm90_bf16_split4", "us_per_step": 4000.0}]}
    path = tmp_path / "profile.json"
    path.write_text(json.dumps(record))
    a = model.parse_args(["--profile", str(path)])
    assert a.decode_fixed_ms == pytest.approx(5.5)
    assert a.attn_ms == pytest.approx(7.0)   # 3.5 ms at 32 rows -> 64 rows
