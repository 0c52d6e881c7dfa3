"""gpt-oss (`tiny-gpt-oss`) beyond the MoE parity suite (test_moe_parity.py): controls that
show its own rules are real (the fixture's parity fails without the attention sinks, without
the router's or the experts' biases, and with the plain SwiGLU in place of the clamped one),
and the official release's MXFP4 experts, decoded at load, giving the logits of the bf16
checkpoint holding the decoded values (a broken block named in the error)."""

import json
from pathlib import Path

import numpy as np
import pytest

from atlas.core.sampling import GREEDY
from atlas.engine.parity import compare_with_golden
from atlas.model import load, moe
from atlas.model.batch import PenaltyHistory, SeqChunk
from atlas.model.load import load_runner
from atlas.runtime.ops.moe import ExpertEpilogue
from atlas.runtime.weights import WeightError, WeightStore, write_safetensors

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "tiny-gpt-oss"
#: E2M1 magnitudes by code (bit 3 the sign), the OCP MX spec's table
E2M1 = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0], dtype=np.float32)


def _golden() -> dict[str, np.ndarray]:
    return dict(np.load(FIXTURE / "golden.npz"))


def _fails_parity() -> dict:
    r = compare_with_golden(FIXTURE, _golden(), backend="host")
    assert not r["passed"] and r["greedy_match"] < 16, r
    return r


def test_parity_needs_the_attention_sinks(monkeypatch):
    layer_weights = load.LayerWeights
    monkeypatch.setattr(load, "LayerWeights", lambda **kw: layer_weights(**{**kw, "sinks": 0}))
    r = _fails_parity()
    assert r["cosine"] < 0.99, r  # 0.970, 4 of 16


def test_parity_needs_the_router_bias(monkeypatch):
    monkeypatch.setattr(moe, "with_router_bias", lambda routing, bias: routing)
    r = _fails_parity()
    assert r["cosine"] < 0.999, r  # 0.9925, 1 of 16


def test_parity_needs_the_expert_biases(monkeypatch):
    def unbiased(cfg, ptr, layer, epilogue_of=moe.epilogue_of):
        e = epilogue_of(cfg, ptr, layer)
        return ExpertEpilogue(0, 0, e.alpha, e.limit)
    monkeypatch.setattr(moe, "epilogue_of", unbiased)
    r = _fails_parity()
    assert r["cosine"] < 0.99, r  # 0.979, 0 of 16


def test_parity_needs_the_clamped_swiglu(monkeypatch):
    """limit 0: silu(gate) * up, the biases kept."""
    def plain(cfg, ptr, layer, epilogue_of=moe.epilogue_of):
        e = epilogue_of(cfg, ptr, layer)
        return ExpertEpilogue(e.gate_up_bias, e.down_bias, e.alpha, 0.0)
    monkeypatch.setattr(moe, "epilogue_of", plain)
    r = _fails_parity()
    assert r["cosine"] < 0.9, r  # 0.77, 0 of 16


# ---- MXFP4 experts ----------------------------------------------------------------------

def _decode(blocks: np.ndarray, scales: np.ndarray) -> np.ndarray:
    """The MX spec's decode, written out: element 2i of a block in byte i's low nibble."""
    codes = np.stack([blocks & 0xF, blocks >> 4], axis=-1).reshape(*blocks.shape[:-1], -1)
    values = E2M1[codes & 7] * np.where(codes & 8, -1.0, 1.0)
    return (values * 2.0 ** (scales.astype(np.float64)[..., None] - 127)).reshape(
        *scales.shape[:-1], -1)


def _bf16_bits(x: np.ndarray) -> np.ndarray:
    bits = x.astype(np.float32).view(np.uint32)
    assert not (bits & 0xFFFF).any()  # MXFP4 values are bf16 values
    return (bits >> 16).astype(np.uint16)


def _checkpoints(root: Path, broken: str | None = None) -> tuple[Path, Path]:
    """The fixture with random MXFP4 experts (`*_blocks` [E, out, in / 32, 16], `*_scales`
    [E, out, in / 32], as the release stores them) and its twin with the decoded values in
    transformers' bf16 layout ([E, in, out]); `broken` names a scales tensor given a NaN
    scale (E8M0 255) in expert 5."""
    store, rng = WeightStore(FIXTURE), np.random.default_rng(3)
    config = json.loads((FIXTURE / "config.json").read_text())
    mx, bf = root / "mxfp4", root / "bf16"
    mx_layout, mx_arrays, bf_layout, bf_arrays = [], [], [], []
    for name in sorted(store.tensors):
        info = store.info(name)
        if not name.endswith(("experts.gate_up_proj", "experts.down_proj")):
            for layout, arrays in ((mx_layout, mx_arrays), (bf_layout, bf_arrays)):
                layout.append((name, info.dtype, info.shape))
                arrays.append(store.read(name))
            continue
        e, fan_in, fan_out = info.shape
        blocks = rng.integers(0, 256, (e, fan_out, fan_in // 32, 16), dtype=np.uint8)
        scales = rng.integers(119, 124, (e, fan_out, fan_in // 32), dtype=np.uint8)
        bf_layout.append((name, "BF16", info.shape))
        bf_arrays.append(_bf16_bits(_decode(blocks, scales).transpose(0, 2, 1)))
        if name + "_scales" == broken:
            scales[5, 1, 0] = 255
        mx_layout += [(name + "_blocks", "U8", blocks.shape), (name + "_scales", "U8",
                                                               scales.shape)]
        mx_arrays += [blocks, scales]
    quant = {"quant_method": "mxfp4", "modules_to_not_convert": [
        "model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens",
        "lm_head"]}
    for out, layout, arrays, cfg in ((mx, mx_layout, mx_arrays,
                                      {**config, "quantization_config": quant}),
                                     (bf, bf_layout, bf_arrays, config)):
        out.mkdir()
        write_safetensors(out / "model.safetensors", layout, arrays)
        (out / "config.json").write_text(json.dumps(cfg))
    return mx, bf


def _prefill_logits(model: Path) -> np.ndarray:
    runner = load_runner(model, backend="host", max_seq_len=64, max_batch_size=1)
    prompt = [int(t) for t in _golden()["input_ids"].reshape(-1)]
    runner.execute([SeqChunk(0, prompt, 0, [0, 1], GREEDY, history=PenaltyHistory(prompt))])
    return runner.read_logits(1).copy()


def test_mxfp4_experts_give_the_logits_of_their_bf16_values(tmp_path):
    mx, bf = _checkpoints(tmp_path)
    got, want = _prefill_logits(mx), _prefill_logits(bf)
    assert np.isfinite(want).all() and want.std() > 0
    assert np.array_equal(got, want)


def test_mxfp4_nan_scale_names_the_tensor_and_expert(tmp_path):
    name = "model.layers.2.mlp.experts.down_proj_scales"
    mx, _ = _checkpoints(tmp_path, broken=name)
    with pytest.raises(WeightError, match=rf"'model\.layers\.2\.mlp\.experts\.down_proj_blocks' "
                                          rf"\+ '{name}', expert 5: MXFP4 scale 255"):
        load_runner(mx, backend="host", max_seq_len=64, max_batch_size=1)
