"""Benchmark-only synthetic weights: a model directory with only config.json loads with
`synthetic_seed`, the tensors have make_fixtures' distribution, and the seed decides them."""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import numpy as np
import pytest

from atlas.core.numerics import bf16_bits_to_f32
from atlas.model.load import load_runner
from atlas.runtime.synthetic_weights import SyntheticWeights, init_std, tensor_key
from atlas.runtime.weights import WeightError

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "tiny-qwen2-moe"


def _config_only(tmp_path: Path) -> Path:
    d = tmp_path / "synthetic"
    d.mkdir()
    shutil.copy(FIXTURE / "config.json", d / "config.json")
    return d


def _load(model: Path, seed: int):
    return load_runner(model, backend="host", max_seq_len=64, max_batch_size=2,
                       max_prefill_tokens=16, synthetic_seed=seed)


def test_config_only_directory_loads_and_the_seed_decides(tmp_path):
    model = _config_only(tmp_path)
    a, b, c = _load(model, 1), _load(model, 1), _load(model, 2)
    la, lb, lc = (r.read_logits(1) for r in (a, b, c))
    assert np.isfinite(la).all() and np.array_equal(la, lb) and not np.array_equal(la, lc)
    assert a.info.weights_bytes == load_runner(FIXTURE, backend="host", max_seq_len=64,
                                               max_batch_size=2,
                                               max_prefill_tokens=16).info.weights_bytes


def test_distribution_follows_make_fixtures(tmp_path):
    from atlas.runtime.host import HostBackend

    dev = HostBackend()
    store = SyntheticWeights(hidden_size=256, seed=3)
    shapes = {"model.layers.0.mlp.experts.gate_up_proj": (8, 128, 256),
              "model.layers.0.mlp.experts.down_proj": (8, 256, 64),
              "model.embed_tokens.weight": (512, 256),
              "model.layers.0.input_layernorm.weight": (256,)}
    store.validate({n: ("bf16", s) for n, s in shapes.items()})
    dst = {n: dev.alloc(2 * math.prod(s)) for n, s in shapes.items()}
    report = store.upload(dev, None, dst)
    assert report.nbytes == sum(2 * math.prod(s) for s in shapes.values())
    got = {n: bf16_bits_to_f32(dev.download(dst[n], np.uint16, s)).astype(np.float64)
           for n, s in shapes.items()}
    for name, want in (("model.layers.0.mlp.experts.gate_up_proj", 1 / 16),
                       ("model.layers.0.mlp.experts.down_proj", 2 / 8),
                       ("model.embed_tokens.weight", 1.6 / 16)):
        assert init_std(name, shapes[name], 256) == pytest.approx(want)
        assert abs(got[name].mean()) < 0.02 * want and got[name].std() == pytest.approx(want,
                                                                                     rel=0.02)
    norm = got["model.layers.0.input_layernorm.weight"]
    assert norm.mean() == pytest.approx(1.0, abs=0.02) and norm.std() == pytest.approx(0.1,
                                                                                     rel=0.15)
    assert tensor_key(3, "a") != tensor_key(3, "b") != tensor_key(4, "b")


def test_unsupported_dtype_is_refused():
    with pytest.raises(WeightError, match="tensor 'x' is .*only bf16 and float32"):
        SyntheticWeights(16, 0).validate({"x": ("I32", (4,))})
