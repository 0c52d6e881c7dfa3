"""A bad checkpoint fails at load with one clear line naming the problem (CPU backend)."""

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from atlas.core.config import ConfigError
from atlas.engine.parity import compare_with_golden
from atlas.model.load import StartupError, load_runner
from atlas.model.loaders.dense import UnsupportedModelError
from atlas.runtime.kv_cache import KvCacheBudgetError
from atlas.runtime.weights import WeightError, WeightStore, write_safetensors

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "tiny-qwen3"


def _copy(tmp_path: Path, fixture: Path = FIXTURE) -> Path:
    d = tmp_path / fixture.name
    shutil.copytree(fixture, d)
    return d


def _edit_tensors(model: Path, edit) -> None:
    """Rewrite the checkpoint after `edit` changes its {name: (dtype, array)} map."""
    store = WeightStore(model)
    tensors = {n: (i.dtype, store.read(n)) for n, i in store.tensors.items()}
    edit(tensors)
    write_safetensors(model / "model.safetensors",
                      [(n, dt, a.shape) for n, (dt, a) in tensors.items()],
                      (a for _, a in tensors.values()))


def _load(model: Path, **kw):
    return load_runner(model, backend="host", max_seq_len=64, max_batch_size=2,
                       max_prefill_tokens=32, **kw)


def test_wrong_shape_names_the_tensor(tmp_path):
    model = _copy(tmp_path)
    name = "model.layers.1.mlp.down_proj.weight"
    _edit_tensors(model, lambda t: t.__setitem__(name, (t[name][0], t[name][1][:, :-16].copy())))
    with pytest.raises(WeightError, match=rf"tensor '{name}': shape \[128, 368\], want "
                                          r"\[128, 384\]"):
        _load(model)


@pytest.mark.parametrize("fixture, name", [
    ("tiny-qwen3", "model.layers.0.self_attn.k_norm.weight"),
    ("tiny-qwen2", "model.layers.1.self_attn.v_proj.bias"),
    ("tiny-qwen2-moe", "model.layers.1.mlp.experts.4.down_proj.weight"),
    ("tiny-glm4-moe", "model.layers.2.mlp.shared_experts.up_proj.weight"),
    ("tiny-glm4-moe", "model.layers.1.mlp.gate.e_score_correction_bias"),
    ("tiny-gpt-oss", "model.layers.1.self_attn.sinks"),
    ("tiny-gpt-oss", "model.layers.2.self_attn.o_proj.bias"),
    ("tiny-gpt-oss", "model.layers.0.mlp.router.bias"),
    ("tiny-gpt-oss", "model.layers.3.mlp.experts.gate_up_proj"),   # host-converted
    ("tiny-gpt-oss", "model.layers.3.mlp.experts.gate_up_proj_bias")])
def test_missing_tensor_names_it(tmp_path, fixture, name):
    model = _copy(tmp_path, FIXTURE.parent / fixture)
    _edit_tensors(model, lambda t: t.pop(name))
    with pytest.raises(WeightError, match=f"missing tensor '{name}'$"):
        _load(model)


def test_unknown_model_type(tmp_path):
    model = _copy(tmp_path)
    cfg = json.loads((model / "config.json").read_text())
    cfg["model_type"] = "mamba2"
    (model / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(UnsupportedModelError, match="unsupported model_type 'mamba2'"):
        _load(model)


def test_missing_config_field(tmp_path):
    model = _copy(tmp_path)
    cfg = json.loads((model / "config.json").read_text())
    del cfg["rms_norm_eps"]
    (model / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(ConfigError, match="'rms_norm_eps' is required"):
        _load(model)


def test_too_little_memory_for_the_kv_pool(tmp_path):
    with pytest.raises(KvCacheBudgetError, match="one 64-token sequence needs"):
        _load(_copy(tmp_path), gpu_memory_utilization=1e-6)


def test_a_good_checkpoint_still_loads(tmp_path):
    runner = _load(_copy(tmp_path))
    assert runner.num_kv_blocks >= 4 and runner.vocab_size == 512
    assert np.isfinite(runner.read_logits(1)).all()


MOE_FIXTURE = FIXTURE.parent / "tiny-qwen2-moe"


def test_config_with_more_experts_than_the_checkpoint(tmp_path):
    model = _copy(tmp_path, MOE_FIXTURE)
    cfg = json.loads((model / "config.json").read_text())
    cfg["num_experts"] = 8
    (model / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(WeightError, match=r"layer 1 has 6 experts \(model\.layers\.1\.mlp\."
                                          r"experts\.0\.\.5\) but num_experts = 8"):
        _load(model)


def _fuse_experts(t: dict, experts: int) -> None:
    """Rewrite layer 1's per-expert tensors as transformers 5's stacked ones, keeping the
    first `experts` of them."""
    p = "model.layers.1.mlp.experts."
    gu = [np.concatenate([t.pop(f"{p}{x}.gate_proj.weight")[1],
                          t.pop(f"{p}{x}.up_proj.weight")[1]]) for x in range(6)]
    down = [t.pop(f"{p}{x}.down_proj.weight")[1] for x in range(6)]
    t[p + "gate_up_proj"] = ("BF16", np.stack(gu[:experts]))
    t[p + "down_proj"] = ("BF16", np.stack(down[:experts]))


def test_stacked_experts_of_the_wrong_count_name_the_tensor(tmp_path):
    """The fused layout with 5 experts where the config says 6: the tensor is named."""
    model = _copy(tmp_path, MOE_FIXTURE)
    _edit_tensors(model, lambda t: _fuse_experts(t, 5))
    p = "model.layers.1.mlp.experts."
    with pytest.raises(WeightError, match=rf"tensor '{p}gate_up_proj': shape \[5, 128, 128\], "
                                          r"want \[6, 128, 128\]"):
        _load(model)


def test_both_expert_layouts_load_the_same_weights(tmp_path):
    """Stacked and per-expert tensors pack into the same device bytes: same logits, bit for bit."""
    per_expert = _load(_copy(tmp_path, MOE_FIXTURE))
    fused_dir = tmp_path / "fused"
    shutil.copytree(MOE_FIXTURE, fused_dir)
    _edit_tensors(fused_dir, lambda t: _fuse_experts(t, 6))
    assert "model.layers.1.mlp.experts.gate_up_proj" in WeightStore(fused_dir)
    fused = _load(fused_dir)
    assert np.array_equal(per_expert.read_logits(1), fused.read_logits(1))
    assert np.isfinite(fused.read_logits(1)).all()


def test_a_binding_sliding_window_refuses_the_routes_that_do_not_slide():
    """A window shorter than --max-seq-len slides on the bf16 pools' kernels; quantized KV
    pools take no window, so the load refuses them naming the way out (nothing is served
    past the window wrongly). A window the engine never outgrows binds nothing and refuses
    nothing."""
    model = FIXTURE.parent / "tiny-mistral-swa"  # every layer slides over 8 keys
    runner = _load(model)
    assert [lw.window for lw in runner.model.layers] == [8, 8]
    with pytest.raises(StartupError, match="bf16 KV pools only.*--max-seq-len 8"):
        _load(model, kv_cache_dtype="fp8")
    short = load_runner(model, backend="host", max_seq_len=8, max_batch_size=2,
                        max_prefill_tokens=8, kv_cache_dtype="fp8")
    assert [lw.window for lw in short.model.layers] == [0, 0]


def test_gemma_logit_soft_capping_is_refused_by_name(tmp_path):
    """Gemma 2's soft-capped logits are not implemented: a config asking for them fails at
    load naming the field, rather than serving uncapped logits."""
    model = _copy(tmp_path, FIXTURE.parent / "tiny-gemma3")
    config = json.loads((model / "config.json").read_text())
    (model / "config.json").write_text(json.dumps(config | {"attn_logit_softcapping": 50.0}))
    with pytest.raises(UnsupportedModelError, match="attn_logit_softcapping"):
        _load(model)


@pytest.mark.parametrize("prefix", ["model.language_model.", "language_model.model."])
def test_gemma3_multimodal_layouts_load_the_same_decoder(tmp_path, prefix):
    """Gemma 3's multimodal checkpoints keep the decoder under model.language_model.
    (transformers 5) or language_model.model. (as Google published them) beside a vision
    tower that is not loaded: the same weights give the same logits as the text-only
    layout."""
    text = FIXTURE.parent / "tiny-gemma3"
    model = _copy(tmp_path, text)
    config = json.loads((model / "config.json").read_text())
    wrapped = {"model_type": "gemma3", "architectures": ["Gemma3ForConditionalGeneration"],
               "text_config": config, "vision_config": {"hidden_size": 8}}
    (model / "config.json").write_text(json.dumps(wrapped))

    def rename(tensors):
        moved = {(prefix + n[len("model."):] if n.startswith("model.") else n): t
                 for n, t in tensors.items()}
        moved["vision_tower.patch_embedding.weight"] = ("BF16", np.zeros((8, 8), np.uint16))
        tensors.clear()
        tensors.update(moved)
    _edit_tensors(model, rename)
    golden = dict(np.load(text / "golden.npz"))
    want = compare_with_golden(text, golden, backend="host")
    got = compare_with_golden(model, golden, backend="host")
    assert got["greedy_match"] == got["greedy_total"] and got["cosine"] == want["cosine"]
