"""Checkpoint quantization detection (every producer spelling, clear errors) and the scale
re-laying of fused FP8 weights against per-element expectations."""

from __future__ import annotations

import numpy as np
import pytest

from atlas.core.quant import Fp8ScaleMap, fused_fp8_scales
from atlas.core.quant_config import CheckpointQuant, QuantConfigError, parse_quant_config


def _ct(weights: dict, fmt: str = "float-quantized") -> dict:
    return {"quant_method": "compressed-tensors", "format": fmt,
            "config_groups": {"group_0": {"targets": ["Linear"], "weights": weights}}}


@pytest.mark.parametrize("qcfg,hf,want", [
    (None, None, CheckpointQuant()),
    ({"quant_method": "fp8", "fmt": "e4m3", "weight_block_size": [128, 128]}, None,
     ("fp8-block", "weight_scale_inv", (128, 128))),
    ({"quant_method": "fp8", "fmt": "float8_e4m3fn", "weight_block_size": [128, 128],
      "modules_to_not_convert": ["gate", "e_score_correction_bias", "lm_head"]}, None,
     ("fp8-block", "weight_scale_inv", (128, 128))),  # MiniMax-M2's spelling
    ({"quant_method": "modelopt", "quant_algo": "FP8"}, None, ("fp8-tensor", "weight_scale")),
    (None, {"quantization": {"quant_algo": "FP8"}}, ("fp8-tensor", "weight_scale")),
    ({"quant_method": "modelopt", "quant_algo": "NVFP4", "group_size": 16}, None,
     ("nvfp4", "weight_scale")),
    (_ct({"num_bits": 8, "type": "float", "strategy": "channel"}), None,
     ("fp8-channel", "weight_scale")),
    (_ct({"num_bits": 8, "type": "float", "strategy": "tensor"}), None,
     ("fp8-tensor", "weight_scale")),
    (_ct({"num_bits": 8, "type": "float", "strategy": "block", "block_structure": [128, 128]}),
     None, ("fp8-block", "weight_scale", (128, 128))),
    (_ct({"num_bits": 4, "type": "float", "strategy": "tensor_group", "group_size": 16},
         "nvfp4-pack-quantized"), None, ("nvfp4", "weight_scale")),
])
def test_producer_spellings_are_detected(qcfg, hf, want) -> None:
    got = parse_quant_config(qcfg, hf)
    if isinstance(want, CheckpointQuant):
        assert got.format == want.format and not got.quantized
        return
    assert (got.format, got.scale_name) == want[:2]
    if len(want) == 3:
        assert got.block == want[2]
    if got.format == "nvfp4":  # compressed-tensors stores the reciprocal global scale
        ct = qcfg["quant_method"] == "compressed-tensors"
        assert got.global_reciprocal == ct
        assert (got.codes_name, got.global_name) == (
            ("weight_packed", "weight_global_scale") if ct else ("weight", "weight_scale_2"))


@pytest.mark.parametrize("listed, want", [(None, ("lm_head",)), ([], ()),
                                           (["model.embed_tokens"], ("model.embed_tokens",))])
def test_fp8_block_exclusions_follow_transformers(listed, want) -> None:
    """FineGrainedFP8Config: no modules_to_not_convert keeps the LM head bf16 (the published
    releases); a list (what `atlas models quantize` writes) names every kept module."""
    qcfg = {"quant_method": "fp8", "fmt": "e4m3", "weight_block_size": [128, 128]}
    if listed is not None:
        qcfg["modules_to_not_convert"] = listed
    assert parse_quant_config(qcfg, None).excluded == want


@pytest.mark.parametrize("qcfg,hf,match", [
    ({"quant_method": "awq"}, None, "quant_method 'awq' is not supported"),
    ({"quant_method": "fp8"}, None, "without weight_block_size"),
    ({"quant_method": "fp8", "fmt": "e5m2", "weight_block_size": [128, 128]}, None, "e5m2"),
    ({"quant_method": "modelopt", "quant_algo": "W4A8_AWQ"}, None, "unknown quant_algo"),
    ({"quant_method": "modelopt", "quant_algo": "NVFP4", "group_size": 32}, None,
     "group_size 32"),
    ({"quant_method": "modelopt", "quant_algo": "FP8"},
     {"quantization": {"quant_algo": "NVFP4"}}, "hf_quant_config.json says nvfp4"),
    (None, {"producer": {}}, "no 'quantization' object"),
    (_ct({"num_bits": 8, "type": "int", "strategy": "channel"}), None, "type 'int'"),
    (_ct({"num_bits": 8, "type": "float", "strategy": "group"}), None, "strategy 'group'"),
    (_ct({"num_bits": 4, "type": "float", "strategy": "tensor_group", "group_size": 16}),
     None, "nvfp4-pack-quantized"),
    ({"quant_method": "compressed-tensors", "config_groups": {}}, None, "config_groups"),
])
def test_unsupported_and_malformed_configs_say_why(qcfg, hf, match) -> None:
    with pytest.raises(QuantConfigError, match=match):
        parse_quant_config(qcfg, hf)


def test_mixed_compressed_tensors_groups_are_refused() -> None:
    q = _ct({"num_bits": 8, "type": "float", "strategy": "channel"})
    q["config_groups"]["group_1"] = {"weights": {"num_bits": 8, "type": "float",
                                                 "strategy": "tensor"}}
    with pytest.raises(QuantConfigError, match="mix weight formats"):
        parse_quant_config(q)


def _expected(layout: str, scales: list[np.ndarray], rows: list[int], k: int) -> np.ndarray:
    """Per-element scale of the stacked weight, part by part (the definition)."""
    out = []
    for s, r in zip(scales, rows):
        if layout == "block":
            out.append(Fp8ScaleMap.block(r, k).expand(s, r, k))
        elif layout == "channel":
            out.append(Fp8ScaleMap.channel(r).expand(s, r, k))
        else:
            out.append(Fp8ScaleMap.tensor().expand(s, r, k))
    return np.concatenate(out)


@pytest.mark.parametrize("layout,rows", [
    ("block", [256, 128, 128]),      # aligned: plain concatenation, 128-row blocks kept
    ("block", [192, 192]),           # re-laid on 64-row blocks
    ("block", [48, 80, 200]),        # re-laid on 16-row blocks; last part ends mid-block
    ("channel", [64, 32]),
    ("tensor", [64, 32, 32]),        # per-tensor parts -> per-channel vector
    ("tensor", [96]),                # single part stays per-tensor
])
def test_fused_scales_equal_each_parts_own_scale(layout: str, rows: list[int]) -> None:
    k = 272
    rng = np.random.default_rng(1)
    shapes = {"block": lambda r: (-(-r // 128), -(-k // 128)), "channel": lambda r: (r, 1),
              "tensor": lambda r: ()}[layout]
    scales = [rng.uniform(0.1, 2, shapes(r)).astype(np.float32) for r in rows]
    fused, smap = fused_fp8_scales(layout, scales, rows, k)
    assert fused.size == max(1, int(np.prod(smap.shape)))
    np.testing.assert_array_equal(smap.expand(fused, sum(rows), k),
                                  _expected(layout, scales, rows, k))
    if layout == "block":
        assert 1 << smap.row_shift == (128 if rows[0] % 128 == 0 and rows[1] % 128 == 0
                                       else 64 if rows == [192, 192] else 16)
