"""tools/gpu/layer_diff.py's capture on the host backend: the per-add keys and the
layer_NNN residual streams line up (layer k leaves through add 2k + 1, and add 2k + 2
starts from it), so a comparison with transformers' hidden states is layer for layer."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np

from atlas.core.numerics import bf16_bits_to_f32, f32_to_bf16_bits

REPO = Path(__file__).resolve().parents[2]
FIXTURE = REPO / "tests/fixtures/tiny-qwen3_5_moe"  # 3 layers: the third add onwards


def _tool():
    spec = importlib.util.spec_from_file_location("layer_diff", REPO / "tools/gpu/layer_diff.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_capture_keys_line_up_layer_by_layer() -> None:
    layers = json.loads((FIXTURE / "config.json").read_text())["num_hidden_layers"]
    saved = _tool().capture(FIXTURE, "host", 12)
    assert sorted(k for k in saved if k.startswith("layer_")) == [
        f"layer_{i:03d}" for i in range(layers)]
    assert sorted(k for k in saved if k.endswith("_delta")) == [
        f"{n:03d}_delta" for n in range(2 * layers)]
    for k in range(layers):
        after = saved[f"{2 * k + 1:03d}_resid"] + saved[f"{2 * k + 1:03d}_delta"]
        want = bf16_bits_to_f32(f32_to_bf16_bits(after.astype(np.float32)))
        np.testing.assert_array_equal(saved[f"layer_{k:03d}"], want)
        if k + 1 < layers:
            np.testing.assert_array_equal(saved[f"{2 * k + 2:03d}_resid"],
                                          saved[f"layer_{k:03d}"])
    assert any(k.startswith("router_") for k in saved)  # the sparse layer's logits
