"""`quantize_checkpoint` on MoE fixtures: transformers 5's fused expert tensors come out in
the published per-expert layout, each expert's weights within its format's rounding of its
slice of the fused tensor; routers, shared-expert gates, norms and Gated-DeltaNet
projections stay bf16 as they were."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from atlas.core.numerics import bf16_bits_to_f32
from atlas.core.quant import Fp8ScaleMap, dequantize_fp8, dequantize_nvfp4
from atlas.runtime.quantize import fused_expert_parts, quantize_checkpoint
from atlas.runtime.weights import WeightStore

FIXTURES = Path(__file__).parents[1] / "fixtures"


def test_fused_expert_parts_name_each_expert_in_row_order() -> None:
    parts = fused_expert_parts("model.layers.3.mlp.experts.gate_up_proj", (2, 96, 128))
    assert parts == [("model.layers.3.mlp.experts.0.gate_proj.weight", (48, 128)),
                     ("model.layers.3.mlp.experts.0.up_proj.weight", (48, 128)),
                     ("model.layers.3.mlp.experts.1.gate_proj.weight", (48, 128)),
                     ("model.layers.3.mlp.experts.1.up_proj.weight", (48, 128))]
    down = fused_expert_parts("model.language_model.layers.0.mlp.experts.down_proj",
                              (3, 64, 32))
    assert down is not None and down[2] == (
        "model.language_model.layers.0.mlp.experts.2.down_proj.weight", (64, 32))
    assert fused_expert_parts("model.layers.0.mlp.gate.weight", (16, 128)) is None
    assert fused_expert_parts("model.layers.0.mlp.experts.gate_up_proj", (96, 128)) is None


@pytest.mark.parametrize("scheme", ["fp8-block", "nvfp4"])
def test_fused_experts_are_written_per_expert(scheme: str, tmp_path: Path) -> None:
    src = WeightStore(FIXTURES / "tiny-qwen3-moe")
    report = quantize_checkpoint(FIXTURES / "tiny-qwen3-moe", tmp_path / "q", scheme)
    out = WeightStore(tmp_path / "q")
    assert not any(n.endswith(("experts.gate_up_proj", "experts.down_proj")) for n in out.tensors)
    experts, inter, hidden = 16, 48, 128
    # per sparse layer: 3 projections per expert; plus 4 attention + 3 dense MLP linears
    assert report.quantized == experts * 3 + 4 * 2 + 3
    gate_up = bf16_bits_to_f32(src.read("model.layers.0.mlp.experts.gate_up_proj"))
    down = bf16_bits_to_f32(src.read("model.layers.0.mlp.experts.down_proj"))
    for e in (0, 9, 15):
        for proj, want in (("gate_proj", gate_up[e, :inter]), ("up_proj", gate_up[e, inter:]),
                           ("down_proj", down[e])):
            base = f"model.layers.0.mlp.experts.{e}.{proj}"
            if scheme == "fp8-block":
                codes = out.read(base + ".weight")
                assert out.info(base + ".weight").dtype == "F8_E4M3"
                back = dequantize_fp8(codes, out.read(base + ".weight_scale_inv"),
                                      Fp8ScaleMap.block(*codes.shape))
                tol = 2.0 ** -4 * np.abs(want).max()  # half an E4M3 ulp of the block amax
            else:
                assert out.info(base + ".weight").shape == (want.shape[0], want.shape[1] // 2)
                back = dequantize_nvfp4(out.read(base + ".weight"),
                                        out.read(base + ".weight_scale"),
                                        float(out.read(base + ".weight_scale_2")))
                # E2M1 values lie at most 2 apart (4 -> 6) in units of the group scale
                # (amax / 6, rounded to E4M3): half that gap, per 16-value group
                groups = np.abs(want).reshape(want.shape[0], -1, 16).max(axis=2)
                tol = np.repeat(groups / 5, 16, axis=1)
            assert np.all(np.abs(back - want) <= tol)
    assert out.info("model.layers.0.mlp.gate.weight").dtype == "BF16"  # the router
    np.testing.assert_array_equal(out.read("model.layers.0.mlp.gate.weight"),
                                  src.read("model.layers.0.mlp.gate.weight"))


def test_hybrid_moe_keeps_router_shared_gate_and_linear_attention_bf16(tmp_path: Path) -> None:
    quantize_checkpoint(FIXTURES / "tiny-qwen3_5_moe", tmp_path / "q", "nvfp4")
    out = WeightStore(tmp_path / "q")
    p = "model.layers.0."
    for kept in ("mlp.gate.weight", "mlp.shared_expert_gate.weight",
                 "linear_attn.in_proj_qkv.weight", "linear_attn.out_proj.weight",
                 # the shared expert's down has k = 48: the dense NVFP4 kernels take k % 32
                 "mlp.shared_expert.down_proj.weight"):
        assert out.info(p + kept).dtype == "BF16", kept
    for quantized in ("mlp.shared_expert.gate_proj.weight", "mlp.shared_expert.up_proj.weight",
                      "mlp.experts.7.down_proj.weight", "self_attn.q_proj.weight"):
        name = quantized.replace("model.layers.0.", "")
        layer = "model.layers.2." if name.startswith("self_attn") else p
        assert out.info(layer + name).dtype == "U8", name
    hf = json.loads((tmp_path / "q" / "hf_quant_config.json").read_text())
    excluded = hf["quantization"]["exclude_modules"]
    assert p + "mlp.gate" in excluded and p + "mlp.shared_expert.down_proj" in excluded
    assert not any(".experts." in m for m in excluded)
