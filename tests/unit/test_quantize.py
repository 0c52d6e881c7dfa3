"""`quantize_checkpoint` on the tiny Qwen3 fixture: the published tensor layouts and configs,
kept tensors untouched, dequantized weights within each format's rounding of the originals,
and clear errors for what it refuses."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from atlas.core.numerics import bf16_bits_to_f32, fp8_e4m3_to_f32
from atlas.core.quant import Fp8ScaleMap, dequantize_fp8
from atlas.runtime.quantize import (QuantizeError, dequantize_nvfp4, is_quantized_name,
                                    quantize_checkpoint, quantize_fp8_block)
from atlas.runtime.weights import WeightStore

FIXTURE = Path(__file__).parents[1] / "fixtures" / "tiny-qwen3"


@pytest.fixture(scope="module")
def source() -> WeightStore:
    return WeightStore(FIXTURE)


def _linear_names(store: WeightStore) -> list[str]:
    return [n for n, i in store.tensors.items() if is_quantized_name(n, i.shape)]


@pytest.mark.parametrize("scheme", ["fp8-block", "fp8-tensor", "nvfp4"])
def test_quantize_writes_the_published_layout(scheme: str, source: WeightStore,
                                              tmp_path: Path) -> None:
    report = quantize_checkpoint(FIXTURE, tmp_path / "q", scheme)
    out = WeightStore(tmp_path / "q")
    linear = _linear_names(source)
    assert report.quantized == len(linear) > 0
    cfg = json.loads((tmp_path / "q" / "config.json").read_text())["quantization_config"]
    for name, info in source.tensors.items():
        if name in linear:
            continue
        assert out.info(name).dtype == info.dtype
        np.testing.assert_array_equal(out.read(name), source.read(name))  # kept as is
    for name in linear:
        w = bf16_bits_to_f32(source.read(name)).astype(np.float64)
        base = name[: -len(".weight")]
        amax = np.abs(w).max()
        if scheme == "fp8-block":
            kept = sorted({n[: -len(".weight")] for n, i in out.tensors.items()
                           if n.endswith(".weight") and i.dtype == "BF16"})
            assert cfg == {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic",
                           "weight_block_size": [128, 128], "modules_to_not_convert": kept}
            scale = out.read(base + ".weight_scale_inv")
            smap = Fp8ScaleMap.block(*w.shape)
            assert scale.shape == smap.shape and out.info(name).dtype == "F8_E4M3"
            back = dequantize_fp8(out.read(name), scale, smap)
            # E4M3 keeps 3 mantissa bits: half an ulp is 2^-4 of the value (blocks' amax)
            assert np.abs(back - w).max() <= 2.0 ** -4 * amax
        elif scheme == "fp8-tensor":
            assert cfg["quant_method"] == "modelopt" and cfg["quant_algo"] == "FP8"
            scale = out.read(base + ".weight_scale")
            assert scale.shape == () and out.info(base + ".input_scale").shape == ()
            back = fp8_e4m3_to_f32(out.read(name)) * scale
            assert np.abs(back - w).max() <= 2.0 ** -4 * amax + 2.0 ** -9 * float(scale)
        else:
            assert cfg["quant_algo"] == "NVFP4" and cfg["group_size"] == 16
            assert out.info(name).shape == (w.shape[0], w.shape[1] // 2)
            assert out.info(base + ".weight_scale").dtype == "F8_E4M3"
            back = dequantize_nvfp4(out.read(name), out.read(base + ".weight_scale"),
                                    float(out.read(base + ".weight_scale_2")))
            # E2M1's coarsest step is 2 (between 4 and 6) of a group scale amax/6: a third of
            # the group's amax at most, plus the E4M3 rounding of the group scale
            groups = np.abs(w).reshape(w.shape[0], -1, 16).max(axis=2)
            bound = np.repeat(groups, 16, axis=1) * (1 / 6 + 2.0 ** -4)
            assert (np.abs(back - w) <= bound + 1e-12).all()
            assert (tmp_path / "q" / "hf_quant_config.json").is_file()
    assert (tmp_path / "q" / "tokenizer.json").is_file() == (FIXTURE / "tokenizer.json").is_file()


def test_block_scales_are_block_amax_over_448() -> None:
    rng = np.random.default_rng(0)
    w = rng.standard_normal((130, 272)).astype(np.float32)
    codes, scale = quantize_fp8_block(w)
    for bi in range(2):
        for bj in range(3):
            block = w[bi * 128:(bi + 1) * 128, bj * 128:(bj + 1) * 128]
            assert scale[bi, bj] == np.float32(np.abs(block).max() / 448.0)
    assert np.abs(fp8_e4m3_to_f32(codes)).max() == 448.0


def test_quantize_refuses_what_it_cannot_do(tmp_path: Path) -> None:
    with pytest.raises(QuantizeError, match="unknown scheme"):
        quantize_checkpoint(FIXTURE, tmp_path / "a", "int3")
    quantize_checkpoint(FIXTURE, tmp_path / "b", "fp8-block")
    with pytest.raises(QuantizeError, match="already quantized"):
        quantize_checkpoint(tmp_path / "b", tmp_path / "c", "nvfp4")
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "x").write_text("x")
    with pytest.raises(QuantizeError, match="not empty"):
        quantize_checkpoint(FIXTURE, tmp_path / "d", "fp8-block")


def test_models_quantize_cli(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from atlas_cli.cmd_models import QUANT_SCHEMES
    from atlas_cli.main import cli
    from atlas.runtime.quantize import SCHEMES

    assert QUANT_SCHEMES == SCHEMES
    runner = CliRunner()
    dst = tmp_path / "q"
    done = runner.invoke(cli, ["models", "quantize", str(FIXTURE), str(dst), "--to", "fp8-block"])
    assert done.exit_code == 0, done.output
    assert done.stdout.strip() == str(dst)
    total = len(WeightStore(FIXTURE).tensors)
    lines = [ln for ln in done.stderr.splitlines() if ln.strip().startswith("[")]
    assert len(lines) == total and lines[-1].strip().startswith(f"[{total}/{total}] ")
    assert "weights quantized to fp8-block" in done.stderr
    cfg = json.loads((dst / "config.json").read_text())["quantization_config"]
    assert cfg["quant_method"] == "fp8"
    again = runner.invoke(cli, ["models", "quantize", str(FIXTURE), str(dst), "--to", "nvfp4"])
    assert again.exit_code != 0 and "not empty" in again.output
    bad = runner.invoke(cli, ["models", "quantize", str(FIXTURE), str(tmp_path / "x"),
                              "--to", "int3"])
    assert bad.exit_code != 0 and "fp8-block" in bad.output
    # the LM head: quantized by default where the checkpoint has a separate one (as with
    # --lm-head), kept bf16 (the published layout) with --no-lm-head
    assert WeightStore(dst).info("lm_head.weight").dtype == "F8_E4M3"
    head = runner.invoke(cli, ["models", "quantize", str(FIXTURE), str(tmp_path / "h"),
                               "--to", "nvfp4", "--lm-head"])
    assert head.exit_code == 0, head.output
    assert WeightStore(tmp_path / "h").info("lm_head.weight").dtype == "U8"
    kept = runner.invoke(cli, ["models", "quantize", str(FIXTURE), str(tmp_path / "k"),
                               "--to", "nvfp4", "--no-lm-head"])
    assert kept.exit_code == 0, kept.output
    assert WeightStore(tmp_path / "k").info("lm_head.weight").dtype == "BF16"


@pytest.mark.parametrize("scheme", ["fp8-block", "nvfp4"])
def test_lm_head_is_quantized_only_when_asked(scheme: str, tmp_path: Path) -> None:
    plain = quantize_checkpoint(FIXTURE, tmp_path / "plain", scheme)
    report = quantize_checkpoint(FIXTURE, tmp_path / "head", scheme, lm_head=True)
    assert report.quantized == plain.quantized + 1 and report.kept == plain.kept - 1
    codes = "U8" if scheme == "nvfp4" else "F8_E4M3"
    assert WeightStore(tmp_path / "plain").info("lm_head.weight").dtype == "BF16"
    head = WeightStore(tmp_path / "head")
    assert head.info("lm_head.weight").dtype == codes
    scale = "lm_head.weight_scale" if scheme == "nvfp4" else "lm_head.weight_scale_inv"
    assert scale in head and "model.embed_tokens.weight" in head
    assert head.info("model.embed_tokens.weight").dtype == "BF16"


def test_lm_head_of_tied_embeddings_is_refused(tmp_path: Path) -> None:
    """Asked for (True) it is an error; by default (None) the tied head is left as it is."""
    src = tmp_path / "tied"
    shutil.copytree(FIXTURE, src)
    cfg = json.loads((src / "config.json").read_text())
    (src / "config.json").write_text(json.dumps({**cfg, "tie_word_embeddings": True}))
    with pytest.raises(QuantizeError, match="no separate lm_head.weight"):
        quantize_checkpoint(src, tmp_path / "q", "fp8-block", lm_head=True)
    assert not (tmp_path / "q").exists()
    quantize_checkpoint(src, tmp_path / "auto", "fp8-block", lm_head=None)
    assert WeightStore(tmp_path / "auto").info("lm_head.weight").dtype == "BF16"
