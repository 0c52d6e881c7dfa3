"""Quantized synthetic weights (benchmarks only): a config.json with a quantization_config
and a seed give a model whose linears and routed experts are FP8 / NVFP4 (per expert, the
published layout), made on the device at the bf16 synthetic weights' standard deviations,
that runs (host backend) with logits of the bf16 synthetic model's magnitude."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from atlas.core.quant import Fp8ScaleMap
from atlas.engine.quant_parity import step_logits
from atlas.model.load import load_runner
from atlas.model.moe_quant import QuantMoeMlp
from atlas.runtime.ops.matmul_quant import Bf16Linear, QuantLinear
from atlas.runtime.quantize import quantization_config
from atlas.runtime.reference.moe_quant import fp8_experts, nvfp4_experts
from atlas.runtime.synthetic_weights import init_std

FIXTURES = Path(__file__).parents[1] / "fixtures"
FIXTURE = FIXTURES / "tiny-qwen3-moe"


def _config_dir(tmp_path: Path, scheme: str | None, lm_head: bool = False,
                fixture: Path = FIXTURE) -> Path:
    """The fixture's config.json alone, with `scheme`'s quantization_config (`lm_head`: not
    in its exclude_modules, as `atlas models quantize --lm-head` writes it)."""
    cfg = json.loads((fixture / "config.json").read_text())
    if scheme is not None:
        cfg["quantization_config"] = quantization_config(
            scheme, [] if lm_head else ["lm_head.weight"])[0]
    d = tmp_path / f"{scheme or 'bf16'}{'-lm_head' if lm_head else ''}"
    d.mkdir()
    (d / "config.json").write_text(json.dumps(cfg))
    return d


@pytest.mark.parametrize("scheme", ["nvfp4", "fp8-block"])
def test_quantized_synthetic_experts_have_the_bf16_weights_spread(scheme: str,
                                                                   tmp_path: Path) -> None:
    runner = load_runner(_config_dir(tmp_path, scheme), backend="host", synthetic_seed=3,
                         use_graphs=False, max_seq_len=64, max_batch_size=1)
    mlp = runner.model.layers[0].mlp
    assert isinstance(mlp, QuantMoeMlp)
    down = mlp.down
    assert down.format == ("nvfp4" if scheme == "nvfp4" else "fp8")
    mem = runner.backend
    if scheme == "nvfp4":
        w = nvfp4_experts(mem, down.codes, down.scales, down.row_scales, down.n, down.k)
    else:
        assert isinstance(down.smap, Fp8ScaleMap)
        w = fp8_experts(mem, down.codes, down.scales, down.n, down.k, down.smap)
    want = init_std("model.layers.0.mlp.experts.0.down_proj.weight", (128, 48), 128)
    assert want is not None and abs(float(w.std()) / want - 1.0) < 0.1
    assert mlp.gate_up.n == 16 * 2 * 48 and runner.model.layers[1].mlp.gate_up.k == 128
    assert isinstance(runner.model.lm_head, Bf16Linear)  # as the published releases keep it


@pytest.mark.parametrize("scheme", ["nvfp4", "fp8-block"])
def test_a_quantized_lm_head_when_the_config_does_not_exclude_it(scheme: str,
                                                                 tmp_path: Path) -> None:
    runner = load_runner(_config_dir(tmp_path, scheme, lm_head=True), backend="host",
                         synthetic_seed=3, use_graphs=False, max_seq_len=64, max_batch_size=1)
    assert isinstance(runner.model.lm_head, QuantLinear)


def test_the_published_fp8_block_config_keeps_the_lm_head_bf16(tmp_path: Path) -> None:
    """Qwen's FP8 releases name no modules_to_not_convert; transformers then keeps lm_head."""
    d = _config_dir(tmp_path, "fp8-block", lm_head=True)
    cfg = json.loads((d / "config.json").read_text())
    del cfg["quantization_config"]["modules_to_not_convert"]
    (d / "config.json").write_text(json.dumps(cfg))
    runner = load_runner(d, backend="host", synthetic_seed=3, use_graphs=False, max_seq_len=64,
                         max_batch_size=1)
    assert isinstance(runner.model.lm_head, Bf16Linear)


def test_quantized_synthetic_logits_match_the_bf16_synthetic_magnitude(tmp_path: Path) -> None:
    prompt, decode = [5, 6, 7] * 4, [9, 10]
    ref = step_logits(_config_dir(tmp_path, None), prompt, decode, "host", synthetic_seed=0)
    got = step_logits(_config_dir(tmp_path, "nvfp4"), prompt, decode, "host", synthetic_seed=0)
    for a, b in zip(got, ref):
        assert np.all(np.isfinite(a)) and 0.5 < float(a.std()) / float(b.std()) < 2.0


def test_hybrid_with_quantized_linear_attention_and_lm_head_runs(tmp_path: Path) -> None:
    """Everything quantizable in NVFP4 (bench_moe.py --lm-head --linear-attn) on
    tiny-qwen3_5_moe with its shared expert as wide as an expert (folded): the Gated-DeltaNet
    projections are quantized linears and a prefill + decode gives finite logits."""
    cfg = json.loads((FIXTURES / "tiny-qwen3_5_moe" / "config.json").read_text())
    cfg["shared_expert_intermediate_size"] = cfg["moe_intermediate_size"]
    cfg["quantization_config"] = quantization_config("nvfp4", [])[0]
    d = tmp_path / "q"
    d.mkdir()
    (d / "config.json").write_text(json.dumps(cfg))
    runner = load_runner(d, backend="host", synthetic_seed=1, use_graphs=False,
                         max_seq_len=64, max_batch_size=1)
    gdn = runner.model.layers[0].linear
    assert gdn is not None and isinstance(gdn.in_proj, QuantLinear)
    assert isinstance(gdn.out_proj, QuantLinear) and isinstance(runner.model.lm_head, QuantLinear)
    assert runner.model.layers[0].mlp.gate_up.experts == 9  # the shared expert folded in
    for logits in step_logits(d, [5, 6, 7] * 4, [9, 10], "host", synthetic_seed=1):
        assert np.all(np.isfinite(logits)) and logits.std() > 0



def test_glm_fp8_synthetic_weights_fold_the_shared_expert(tmp_path: Path) -> None:
    """GLM-4.5's names in FP8 (tools/gpu/call_head.sh times glm-4.5-air so): its
    `shared_experts` are FP8 like the experts and folded in ungated, its router bf16 and
    float32-summed, and a prefill + decode gives finite logits."""
    d = _config_dir(tmp_path, "fp8-block", fixture=FIXTURES / "tiny-glm4-moe")
    runner = load_runner(d, backend="host", synthetic_seed=2, use_graphs=False,
                         max_seq_len=64, max_batch_size=1)
    mlp = runner.model.layers[1].mlp
    assert isinstance(mlp, QuantMoeMlp) and mlp.gate_up.experts == 8 + 1
    assert mlp.shared_gate == 0 and mlp.routing.unrounded
    for logits in step_logits(d, [5, 6, 7] * 4, [9, 10], "host", synthetic_seed=2):
        assert np.all(np.isfinite(logits)) and logits.std() > 0
