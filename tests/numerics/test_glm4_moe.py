"""GLM-4.5 (`tiny-glm4-moe`) beyond the MoE parity suite (test_moe_parity.py): controls that
show its routing rules are real (the fixture's parity fails without the routed scaling or
without the score bias), its MTP layer's tensors left unloaded with a log line, and the
router's logits kept as float32 sums, with bf16 experts and with FP8 ones (the quantized
MoE block, its shared expert folded in ungated; their logits against the bf16 model's:
test_quantized_moe.py)."""

import json
import logging
from pathlib import Path

import numpy as np
import pytest

from atlas.core.sampling import GREEDY
from atlas.engine.parity import compare_with_golden
from atlas.model import moe
from atlas.model.batch import PenaltyHistory, SeqChunk
from atlas.model.load import load_runner
from atlas.model.moe_quant import QuantMoeMlp
from atlas.runtime.quantize import quantize_checkpoint
from atlas.runtime.weights import WeightStore

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "tiny-glm4-moe"


def _golden() -> dict[str, np.ndarray]:
    return dict(np.load(FIXTURE / "golden.npz"))


def _config_copy(tmp_path: Path, **over) -> Path:
    """The fixture with config.json fields replaced (the weights linked, not copied)."""
    model = tmp_path / FIXTURE.name
    model.mkdir()
    (model / "model.safetensors").symlink_to(FIXTURE / "model.safetensors")
    config = json.loads((FIXTURE / "config.json").read_text())
    (model / "config.json").write_text(json.dumps({**config, **over}))
    return model


def test_parity_needs_the_routed_scaling(tmp_path):
    r = compare_with_golden(_config_copy(tmp_path, routed_scaling_factor=1.0), _golden(),
                            backend="host")
    assert r["cosine"] < 0.99 and r["greedy_match"] < 4, r  # 0.88, 1 of 16


def test_parity_needs_the_score_bias(monkeypatch):
    monkeypatch.setattr(moe, "routing_for",
                        lambda cfg, bias, routing=moe.routing_for: routing(cfg, 0))
    r = compare_with_golden(FIXTURE, _golden(), backend="host")
    assert not r["passed"] and r["greedy_match"] < 16, r  # cosine 0.99953, 12 of 16


def test_mtp_layer_is_left_unloaded_and_logged(caplog):
    mtp = [n for n in WeightStore(FIXTURE).tensors if n.startswith("model.layers.3.")]
    assert any(n.endswith("eh_proj.weight") for n in mtp) and len(mtp) > 20
    caplog.set_level(logging.INFO, logger="atlas.model.load")
    load_runner(FIXTURE, backend="host", max_seq_len=64, max_batch_size=1)
    assert [m for m in caplog.messages
            if f"ignoring {len(mtp)} tensors of the MTP layers after the decoder's "
               "(model.layers.3.*" in m], caplog.messages


@pytest.fixture(scope="module")
def fp8_glm(tmp_path_factory: pytest.TempPathFactory) -> Path:
    qdir = tmp_path_factory.mktemp("glm") / "fp8"
    quantize_checkpoint(FIXTURE, qdir, "fp8-block")
    return qdir


def test_fp8_experts_run_on_the_quantized_block_with_the_shared_expert_folded(fp8_glm):
    """The router stays bf16 in the checkpoint (the quantizer keeps `mlp.gate`); the one
    shared expert, as wide as an expert and FP8 alike, is expert 8 of the quantized matrices,
    without a gate."""
    runner = load_runner(fp8_glm, backend="host", max_seq_len=64, max_batch_size=1)
    for layer in (1, 2):
        block = runner.model.layers[layer].mlp
        assert isinstance(block, QuantMoeMlp) and block.gate_up.format == "fp8"
        assert block.gate_up.experts == block.down.experts == 8 + 1
        assert block.shape.shared_inter == 32 and block.shared is None
        assert block.shared_gate == 0 and block.routing.unrounded


@pytest.mark.parametrize("quantized", [False, True])
def test_router_logits_are_float32_sums(quantized: bool, request):
    """The router's logits are not bf16 values (MoeConfig.router_f32: transformers runs
    GLM-4.5's router in float32), on the grouped (prefill) and the decode path alike, with
    bf16 or FP8 experts."""
    model = request.getfixturevalue("fp8_glm") if quantized else FIXTURE
    runner = load_runner(model, backend="host", max_seq_len=64, max_batch_size=1,
                         max_prefill_tokens=32)
    block = runner.model.layers[2].mlp
    assert isinstance(block, QuantMoeMlp if quantized else moe.MoeMlp)
    assert block.routing.unrounded
    dev = runner.backend
    prompt = list(range(5, 25))
    for chunk, tokens in ((SeqChunk(0, prompt, 0, [0, 1], GREEDY,
                                    history=PenaltyHistory(prompt)), len(prompt)),
                          (SeqChunk(0, [7], len(prompt), [0, 1], GREEDY), 1)):
        runner.execute([chunk])
        logits = dev.download(block.bufs.logits, np.float32, (tokens, 8))
        widened = logits.view(np.uint32) & 0xFFFF
        assert np.isfinite(logits).all() and (widened != 0).mean() > 0.9
