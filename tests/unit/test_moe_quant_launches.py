"""The launch sequence of a quantized MoE layer, recorded by MockGpuBackend: a decode step's
sparse layer with a folded shared expert (Qwen3.5-35B-A3B's shape) is three launches in the
graph (router with the shared slot doing the residual add + RMSNorm before it, gate/up, down
into delta), then the next add_rmsnorm, as the bf16 layer (ATLAS_MOE_FUSED_DECODE=0 too); a
prefill chunk dequantizes the experts and takes the grouped path."""

from __future__ import annotations

from pathlib import Path

import pytest

from atlas.core.sampling import GREEDY
from atlas.model.batch import PenaltyHistory, SeqChunk
from atlas.model.load import load_runner
from atlas.runtime.quantize import quantize_checkpoint
from tests.numerics.quant_support import narrow_shared_expert
from tests.unit.decode_support import batch1_decode_graph

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
# NVFP4 experts' down launch is the early twin by default (ops/moe_quant.py down_early); the
# router launch also does the residual add + RMSNorm before the layer (ATLAS_MOE_ROUTER_NORM),
# at batch 1 as one cluster (ATLAS_MOE_ROUTER_CLUSTER)
ROUTER, GATE_UP, DOWN = ("moe_add_rmsnorm_gate_topk_cluster_softmax_bf16",
                         "moe_gate_up_silu_nvfp4", "moe_down_sum_early_nvfp4")
PLAIN = "moe_down_sum_nvfp4"  # ATLAS_MOE_QUANT_DOWN_EARLY=0's entry


@pytest.fixture(scope="module")
def nvfp4_folded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("folded")
    narrow_shared_expert(FIXTURES / "tiny-qwen3_5_moe", root / "bf16")
    quantize_checkpoint(root / "bf16", root / "q", "nvfp4")
    return root / "q"


def test_decode_layer_is_three_launches_with_the_shared_expert_folded(nvfp4_folded: Path
                                                                      ) -> None:
    graph = batch1_decode_graph(nvfp4_folded)
    names = [r.func for r in graph]
    assert names.count(ROUTER) == names.count(GATE_UP) == names.count(DOWN) == 3
    for at in [i for i, n in enumerate(names) if n == ROUTER]:
        assert names[at:at + 3] == [ROUTER, GATE_UP, DOWN]
        assert graph[at].args["shared_slots"] == 1  # the shared slot, routed on the device
        assert graph[at].args["offset"] == 1 and names[at - 1] != "add_rmsnorm_offset_bf16"
        down = graph[at + 2].args
        assert down["slots"] == 4 and down["routed"] == 3 and down["experts"] == 9
        assert down["out"]  # delta: the next layer's add_rmsnorm adds it
        assert names[at + 3].startswith("add_rmsnorm")
    assert not any(n.startswith("moe_shared_add") for n in names)


def test_fused_decode_switch_keeps_the_add_rmsnorm_launch(nvfp4_folded: Path,
                                                          monkeypatch) -> None:
    monkeypatch.setenv("ATLAS_MOE_FUSED_DECODE", "0")
    graph = batch1_decode_graph(nvfp4_folded)
    names = [r.func for r in graph]
    downs = [i for i, n in enumerate(names) if n == DOWN]
    assert len(downs) == 3
    for at in downs:
        assert graph[at].args["out"]
        assert names[at + 1].startswith("add_rmsnorm")


def test_prefill_dequantizes_the_experts_for_the_grouped_path(nvfp4_folded: Path) -> None:
    runner = load_runner(nvfp4_folded, backend="mock", max_seq_len=64, max_batch_size=4,
                         max_prefill_tokens=32)
    dev = runner.backend
    dev.drain_launches()
    runner.execute([SeqChunk(8, list(range(1, 21)), 0, [1, 2], GREEDY,
                             history=PenaltyHistory(list(range(1, 21))))])
    names = [r.func for r in dev.drain_launches()]
    assert names.count("moe_dequant_nvfp4_bf16") == 2 * 3  # gate_up and down, 3 layers
    assert GATE_UP not in names and names.count("moe_shared_add_bf16") == 3


@pytest.mark.parametrize("switch", ["1", None, "0"])
def test_decode_launches_the_early_entry_with_the_switch(nvfp4_folded: Path, monkeypatch,
                                                         switch: str | None) -> None:
    if switch is None:
        monkeypatch.delenv("ATLAS_MOE_QUANT_DOWN_EARLY", raising=False)
    else:
        monkeypatch.setenv("ATLAS_MOE_QUANT_DOWN_EARLY", switch)
    graph = batch1_decode_graph(nvfp4_folded)
    names = [r.func for r in graph]
    # unset: NVFP4 experts (this checkpoint's) take the early entry
    want, other = (PLAIN, DOWN) if switch == "0" else (DOWN, PLAIN)
    assert names.count(want) == 3 and other not in names
    for at in [i for i, n in enumerate(names) if n == ROUTER]:
        # the early entry's pre-wait reads need the router two launches back, gate/up between
        assert names[at:at + 3] == [ROUTER, GATE_UP, want]
        down = graph[at + 2].args
        assert down["slots"] == 4 and down["routed"] == 3 and down["experts"] == 9
        assert down["out"]
