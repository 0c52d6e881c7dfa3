"""Quantized checkpoints end to end on the CPU reference backend.

The tiny fixtures are quantized by `quantize_checkpoint` (and, for the compressed-tensors
per-channel spelling, by hand below); the engine loads them with the FP8 kernels' references
(GEMV in registers for decode rows, dequantize + GEMM for prefill) and must match the bf16
engine on the *dequantized* checkpoint (`dequantize_checkpoint`, built from each part's own
unfused scales): cosine >= 0.9999 on every step's logits. Both sides use the same weights;
the only difference is the bf16 rounding of the dequantized weight on the reference side.
Malformed checkpoints fail at load, naming the tensor or field.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from atlas.core.numerics import bf16_bits_to_f32, f32_to_bf16_bits, f32_to_fp8_e4m3
from atlas.core.quant_config import QuantConfigError
from atlas.engine.quant_parity import (DECODE_MIN_COSINE, PREFILL_MIN_COSINE, compare_quantized,
                                        step_logits)
from atlas.model.load import load_runner
from atlas.runtime.dequantize import dequantize_checkpoint
from atlas.runtime.quantize import is_quantized_name, quantize_checkpoint
from atlas.runtime.weights import WeightError, WeightStore, write_safetensors
from tests.numerics.quant_support import modelopt_to_compressed_tensors_nvfp4
from tests.numerics.quant_support import rewrite_checkpoint as _rewrite

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
#: 80 prompt rows take the dequantize + GEMM path (more rows than GEMV passes pay off for)
PROMPT = [(37 * i + 11) % 500 + 5 for i in range(80)]
DECODE = [33, 250, 3]  # one row each: the quantized GEMV


def _assert_matches_dequantized(qdir: Path, tmp_path: Path) -> None:
    ref_dir = tmp_path / "dequantized"
    assert dequantize_checkpoint(qdir, ref_dir) > 0
    r = compare_quantized(qdir, ref_dir, PROMPT, DECODE, "host")
    assert r["prefill_cosine"] >= PREFILL_MIN_COSINE, r
    assert r["decode_min_cosine"] >= DECODE_MIN_COSINE and r["passed"], r


# tiny-qwen3 fuses parts of 512/256/256 and 384/384 rows (128-row block scales concatenate);
# tiny-llama's gate|up parts are 192 rows, so its block scales are re-laid on 64-row blocks;
# tiny-qwen2's q/k/v biases stay bf16 beside its quantized projections; tiny-phi3's fused
# qkv_proj / gate_up_proj are one part each
@pytest.mark.parametrize("fixture,scheme", [("tiny-qwen3", "fp8-block"),
                                            ("tiny-qwen3", "fp8-tensor"),
                                            ("tiny-llama", "fp8-block"),
                                            ("tiny-qwen2", "fp8-block"),
                                            ("tiny-phi3", "fp8-block"),
                                            ("tiny-qwen3", "nvfp4"), ("tiny-llama", "nvfp4"),
                                            ("tiny-qwen2", "nvfp4")])
def test_quantized_checkpoint_matches_its_dequantized_weights(fixture: str, scheme: str,
                                                        tmp_path: Path) -> None:
    qdir = tmp_path / "q"
    quantize_checkpoint(FIXTURES / fixture, qdir, scheme)
    _assert_matches_dequantized(qdir, tmp_path)


def _write_compressed_tensors_channel(src: Path, dst: Path) -> None:
    """llm-compressor's FP8 per-channel spelling: bf16 `weight_scale` [N, 1], and one
    layer's down projection left in bf16 through the `ignore` list."""
    store = WeightStore(src)
    kept = "model.layers.1.mlp.down_proj.weight"
    layout, arrays = [], []
    for name in sorted(store.tensors):
        info = store.info(name)
        if name == kept or not is_quantized_name(name, info.shape):
            layout.append((name, info.dtype, info.shape))
            arrays.append(store.read(name))
            continue
        w = bf16_bits_to_f32(store.read(name))
        amax = np.abs(w).max(axis=1, keepdims=True)
        scale = bf16_bits_to_f32(f32_to_bf16_bits((amax / 448.0).astype(np.float32)))
        layout += [(name, "F8_E4M3", info.shape),
                   (name[: -len("weight")] + "weight_scale", "BF16", (info.shape[0], 1))]
        arrays += [f32_to_fp8_e4m3(w / scale), f32_to_bf16_bits(scale)]
    dst.mkdir()
    write_safetensors(dst / "model.safetensors", layout, arrays)
    config = json.loads((src / "config.json").read_text())
    config["quantization_config"] = {
        "quant_method": "compressed-tensors", "format": "float-quantized",
        "ignore": ["lm_head", kept[: -len(".weight")]],
        "config_groups": {"group_0": {"targets": ["Linear"], "weights": {
            "num_bits": 8, "type": "float", "strategy": "channel", "symmetric": True,
            "dynamic": False}}}}
    (dst / "config.json").write_text(json.dumps(config))


def test_compressed_tensors_per_channel_checkpoint_matches(tmp_path: Path) -> None:
    qdir = tmp_path / "ct"
    _write_compressed_tensors_channel(FIXTURES / "tiny-qwen3", qdir)
    _assert_matches_dequantized(qdir, tmp_path)


def test_compressed_tensors_nvfp4_checkpoint_matches(tmp_path: Path) -> None:
    """llm-compressor's NVFP4 spelling: `weight_packed`, `weight_global_scale` (which
    divides), `format: nvfp4-pack-quantized`; rewritten from the ModelOpt layout."""
    modelopt = tmp_path / "modelopt"
    quantize_checkpoint(FIXTURES / "tiny-qwen3", modelopt, "nvfp4")
    qdir = tmp_path / "ct"
    modelopt_to_compressed_tensors_nvfp4(modelopt, qdir)
    assert "model.layers.0.mlp.up_proj.weight_packed" in WeightStore(qdir)
    _assert_matches_dequantized(qdir, tmp_path)


@pytest.fixture(scope="module")
def fp8_block_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    qdir = tmp_path_factory.mktemp("fp8") / "q"
    quantize_checkpoint(FIXTURES / "tiny-qwen3", qdir, "fp8-block")
    return qdir


SCALE = "model.layers.1.self_attn.k_proj.weight_scale_inv"


def test_missing_scale_fails_naming_the_tensor(fp8_block_dir: Path, tmp_path: Path) -> None:
    _rewrite(fp8_block_dir, tmp_path / "bad",
             lambda n, d, s, a: None if n == SCALE else (None, d, s, a))
    with pytest.raises(WeightError, match=f"missing scale tensor '{SCALE}'"):
        load_runner(tmp_path / "bad", backend="host", max_seq_len=32)


def test_wrong_scale_shape_fails_naming_the_tensor(fp8_block_dir: Path,
                                                   tmp_path: Path) -> None:
    def edit(n: str, d: str, s: tuple[int, ...], a: np.ndarray):
        return (None, d, (1, 2), a.reshape(1, 2)) if n == SCALE else (None, d, s, a)  # [2, 1]
    _rewrite(fp8_block_dir, tmp_path / "bad", edit)
    with pytest.raises(WeightError, match=rf"'{SCALE}' has shape \[1, 2\].*\[2, 1\]"):
        load_runner(tmp_path / "bad", backend="host", max_seq_len=32)


def test_bf16_codes_in_an_fp8_fusion_fail_naming_the_parts(fp8_block_dir: Path,
                                                           tmp_path: Path) -> None:
    part = "model.layers.0.mlp.up_proj.weight"

    def edit(n: str, d: str, s: tuple[int, ...], a: np.ndarray):
        return (None, "BF16", s, a.astype(np.uint16)) if n == part else (None, d, s, a)
    _rewrite(fp8_block_dir, tmp_path / "bad", edit)
    with pytest.raises(WeightError, match=f"{part}: bf16"):
        load_runner(tmp_path / "bad", backend="host", max_seq_len=32)


@pytest.fixture(scope="module")
def nvfp4_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    qdir = tmp_path_factory.mktemp("nvfp4") / "q"
    quantize_checkpoint(FIXTURES / "tiny-qwen3", qdir, "nvfp4")
    return qdir


def test_nvfp4_missing_global_scale_fails_naming_it(nvfp4_dir: Path, tmp_path: Path) -> None:
    name = "model.layers.0.self_attn.v_proj.weight_scale_2"
    _rewrite(nvfp4_dir, tmp_path / "bad", lambda n, d, s, a: None if n == name else (None, d, s, a))
    with pytest.raises(WeightError, match=f"missing scale tensor '{name}'"):
        load_runner(tmp_path / "bad", backend="host", max_seq_len=32)


def test_nvfp4_wrong_group_scale_shape_fails_naming_it(nvfp4_dir: Path,
                                                       tmp_path: Path) -> None:
    name = "model.layers.1.mlp.down_proj.weight_scale"  # [128, 384 / 16 = 24]

    def edit(n: str, d: str, s: tuple[int, ...], a: np.ndarray):
        return (None, d, (256, 12), a.reshape(256, 12)) if n == name else (None, d, s, a)
    _rewrite(nvfp4_dir, tmp_path / "bad", edit)
    with pytest.raises(WeightError, match=rf"'{name}': shape \[256, 12\], want \[128, 24\]"):
        load_runner(tmp_path / "bad", backend="host", max_seq_len=32)


def test_fp8_codes_under_an_nvfp4_config_fail_naming_the_parts(fp8_block_dir: Path,
                                                               tmp_path: Path) -> None:
    bad = tmp_path / "bad"
    shutil.copytree(fp8_block_dir, bad)
    config = json.loads((bad / "config.json").read_text())
    config["quantization_config"] = {"quant_method": "modelopt", "quant_algo": "NVFP4"}
    (bad / "config.json").write_text(json.dumps(config))
    with pytest.raises(WeightError, match="must all be nvfp4.*q_proj.weight: missing"):
        load_runner(bad, backend="host", max_seq_len=32)


@pytest.mark.parametrize("qcfg,match", [
    ({"quant_method": "modelopt", "quant_algo": "INT4_AWQ"}, "unknown quant_algo 'INT4_AWQ'"),
    ({"quant_method": "gptq", "bits": 4}, "quant_method 'gptq' is not supported"),
    ({"quant_method": "fp8", "weight_block_size": [128, 96]}, "powers of two"),
    ({"quant_method": "modelopt", "quant_algo": "NVFP4", "group_size": 32}, "group_size 32"),
])
def test_unsupported_quantization_configs_fail_at_load(fp8_block_dir: Path, tmp_path: Path,
                                                       qcfg: dict, match: str) -> None:
    bad = tmp_path / "bad"
    shutil.copytree(fp8_block_dir, bad)
    config = json.loads((bad / "config.json").read_text())
    config["quantization_config"] = qcfg
    (bad / "config.json").write_text(json.dumps(config))
    with pytest.raises(QuantConfigError, match=match):
        load_runner(bad, backend="host", max_seq_len=32)


@pytest.mark.parametrize("scheme", ["fp8-block", "nvfp4"])
def test_tensor_core_decode_routes_give_the_same_logits(scheme: str, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """The host backend made to claim a hopper set's modules: every decode row then takes the
    tensor-core GEMVs (the register-fed kernel, its gate_up + SwiGLU entry point instead of
    silu_mul, its f32 entry point for the quantized LM head) through their references. Same
    specification as the CUDA-core GEMV (and ring-kernel logits) route the plain host backend
    takes, so the same logits to the bit; the launches prove the route."""
    from atlas.runtime.host import HostBackend

    qdir = tmp_path / "q"
    quantize_checkpoint(FIXTURES / "tiny-qwen3", qdir, scheme, lm_head=True)
    prompt, decode = PROMPT[:6], DECODE
    plain = step_logits(qdir, prompt, decode, "host", use_graphs=False)
    launched: list[str] = []
    real_launch = HostBackend.launch

    def launch(self, handle, *args, **kwargs):  # type: ignore[no-untyped-def]
        launched.append(handle.func)
        return real_launch(self, handle, *args, **kwargs)

    monkeypatch.setattr(HostBackend, "module_names",
                        property(lambda self: ["gemv_mma_quant", "gemv_quant_direct"]))
    monkeypatch.setattr(HostBackend, "launch", launch)
    routed = step_logits(qdir, prompt, decode, "host", use_graphs=False)
    fmt = "fp8" if scheme == "fp8-block" else "nvfp4"
    assert {f"gemv_qd_{fmt}_swiglu_bf16", f"gemv_qd_{fmt}_bf16", f"gemv_qd_{fmt}_f32"} <= set(
        launched)
    assert "silu_mul_bf16" not in launched and not any("gemv_silu" in f for f in launched)
    for got, want in zip(routed, plain):
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("scheme", ["fp8-block", "nvfp4"])
def test_a_quantized_lm_head_matches_its_dequantized_weights(scheme: str, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch
                                                            ) -> None:
    """`quantize_checkpoint(lm_head=True)`: the LM head is stored quantized, loads as a
    quantized linear and its f32 logits (the tensor-core GEMVs' `_f32` entry points, any
    number of rows) match the bf16 engine on the dequantized checkpoint."""
    from atlas.runtime.host import HostBackend

    qdir = tmp_path / "q"
    quantize_checkpoint(FIXTURES / "tiny-qwen3", qdir, scheme, lm_head=True)
    store = WeightStore(qdir)
    assert store.info("lm_head.weight").dtype == ("U8" if scheme == "nvfp4" else "F8_E4M3")
    launched: list[str] = []
    real_launch = HostBackend.launch

    def launch(self, handle, *args, **kwargs):  # type: ignore[no-untyped-def]
        launched.append(handle.func)
        return real_launch(self, handle, *args, **kwargs)

    monkeypatch.setattr(HostBackend, "launch", launch)
    _assert_matches_dequantized(qdir, tmp_path)
    fmt = "fp8" if scheme == "fp8-block" else "nvfp4"
    assert f"gemv_mma_{fmt}_f32" in launched  # the quantized head's logits (host: ring route)
