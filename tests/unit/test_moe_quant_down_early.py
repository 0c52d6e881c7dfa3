"""ATLAS_MOE_QUANT_DOWN_EARLY: the quantized decode MoE down launch on its early twin
(moe_down_sum_early_{fp8,nvfp4}: the routing read and the first weights requested before the
PDL wait; the same bits). The switch parses and is off by default; with it on, a decode step's
sparse layers launch the early entry right after gate/up (the ordering its pre-wait reads
rely on); its check cases (`-k "down early"`) hold on the host backend."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from atlas.core.sampling import GREEDY
from atlas.model.batch import PenaltyHistory, SeqChunk
from atlas.model.load import load_runner
from atlas.runtime.cases.moe_quant import moe_decode_quant_cases
from atlas.runtime.host import HostBackend
from atlas.runtime.kernel_abi import MOE_DOWN_SUM_EARLY_FP8, MOE_DOWN_SUM_EARLY_NVFP4
from atlas.runtime.kernel_check import check
from atlas.runtime.ops.routes import KernelRoutes
from atlas.runtime.quantize import quantize_checkpoint
from atlas.runtime.reference import load_all
from tests.numerics.quant_support import narrow_shared_expert

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
ROUTER, GATE_UP = "moe_gate_topk_softmax_bf16", "moe_gate_up_silu_nvfp4"
DOWN, EARLY = "moe_down_sum_nvfp4", "moe_down_sum_early_nvfp4"


def test_switch_parses_and_defaults_off() -> None:
    assert KernelRoutes().moe_quant_down_early is False
    assert KernelRoutes.from_env({}).moe_quant_down_early is False
    assert KernelRoutes.from_env({"ATLAS_MOE_QUANT_DOWN_EARLY": "1"}).moe_quant_down_early
    assert not KernelRoutes.from_env({"ATLAS_MOE_QUANT_DOWN_EARLY": "0"}).moe_quant_down_early


def test_early_entries_share_the_plain_entries_references() -> None:
    refs = load_all()
    for sig in (MOE_DOWN_SUM_EARLY_FP8, MOE_DOWN_SUM_EARLY_NVFP4):
        plain = sig.func.replace("_early", "")
        assert refs[(sig.module, sig.func)] is refs[(sig.module, plain)]


@pytest.fixture(scope="module")
def nvfp4_folded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("folded")
    narrow_shared_expert(FIXTURES / "tiny-qwen3_5_moe", root / "bf16")
    quantize_checkpoint(root / "bf16", root / "q", "nvfp4")
    return root / "q"


def _decode_graph(model: Path) -> list:
    runner = load_runner(model, backend="mock", max_seq_len=64, max_batch_size=4,
                         max_prefill_tokens=32)
    dev = runner.backend
    runner.execute([SeqChunk(7, [1, 2, 3, 4, 5], 0, [0], GREEDY,
                             history=PenaltyHistory([1, 2, 3, 4, 5]))])
    dev.drain_launches()
    dev.graph_launches.clear()
    runner.execute([SeqChunk(7, [3], 5, [0], GREEDY)])
    assert dev.drain_launches() == []
    (replay,) = dev.graph_launches
    return list(replay.graph)


@pytest.mark.parametrize("switch", ["1", None])
def test_decode_launches_the_early_entry_with_the_switch(nvfp4_folded: Path, monkeypatch,
                                                         switch: str | None) -> None:
    if switch is None:
        monkeypatch.delenv("ATLAS_MOE_QUANT_DOWN_EARLY", raising=False)
    else:
        monkeypatch.setenv("ATLAS_MOE_QUANT_DOWN_EARLY", switch)
    graph = _decode_graph(nvfp4_folded)
    names = [r.func for r in graph]
    want, other = (EARLY, DOWN) if switch else (DOWN, EARLY)
    assert names.count(want) == 3 and other not in names
    for at in [i for i, n in enumerate(names) if n == ROUTER]:
        # the early entry's pre-wait reads need the router two launches back, gate/up between
        assert names[at:at + 3] == [ROUTER, GATE_UP, want]
        down = graph[at + 2].args
        assert down["slots"] == 4 and down["routed"] == 3 and down["experts"] == 9
        assert down["residual"] and down["normed"] and down["offset"] == 1


CASES = [c for c in moe_decode_quant_cases(np.random.default_rng(12))
         if "down early" in c.name]


def test_cases_cover_both_formats_norms_shared_and_invalid_ids() -> None:
    names = " | ".join(c.name for c in CASES)
    for part in ("fp8 block t1", "nvfp4 t1", "nvfp4 t3 e16 k4 h256 i96 (down",
                 "e16+shared", "+shared k8 h2048 i512", "add_rmsnorm plain",
                 "add_rmsnorm offset", "fp8 tensor"):
        assert part in names, part
    assert {c.name.split()[1] for c in CASES} == {"fp8", "nvfp4"}


@pytest.mark.parametrize("case", [c for c in CASES if " h2048 " not in c.name],
                         ids=lambda c: c.name)
def test_check_cases_hold_on_the_host(case) -> None:
    result = check(HostBackend(), case)
    assert result.passed, result.detail
