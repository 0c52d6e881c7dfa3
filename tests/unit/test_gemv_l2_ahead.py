"""ATLAS_GEMV_L2_AHEAD: batch-1 bf16 GEMVs on their *_ahead twins (the next wave of blocks'
first weight tile requested into L2 before the PDL wait; the same sums). The switch parses and
is off by default; with it on a dense model's batch-1 decode step launches the twins in place
of the plain single-row entries (MockGpuBackend) and the LM head keeps its f32 entry; the twins'
host references are the plain entries'; their check cases (`-k "gemv ahead"`, `-k "gemv swiglu
ahead"`) hold on the host backend."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from atlas.core.sampling import GREEDY
from atlas.model.batch import PenaltyHistory, SeqChunk
from atlas.model.load import load_runner
from atlas.runtime.cases.gemv import gemv_cases
from atlas.runtime.cases.gemv_swiglu import gemv_swiglu_cases
from atlas.runtime.host import HostBackend
from atlas.runtime.kernel_abi import (GEMV_SINGLE, GEMV_SINGLE_AHEAD, GEMV_SWIGLU_SINGLE,
                                      GEMV_SWIGLU_SINGLE_AHEAD)
from atlas.runtime.kernel_check import check
from atlas.runtime.ops.routes import KernelRoutes
from atlas.runtime.reference import load_all

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def test_switch_parses_and_defaults_off() -> None:
    assert KernelRoutes().gemv_l2_ahead is False
    assert KernelRoutes.from_env({}).gemv_l2_ahead is False
    assert KernelRoutes.from_env({"ATLAS_GEMV_L2_AHEAD": "1"}).gemv_l2_ahead is True


def test_twins_share_the_plain_references() -> None:
    refs = load_all()
    for twin, plain in ((GEMV_SINGLE_AHEAD, GEMV_SINGLE),
                        (GEMV_SWIGLU_SINGLE_AHEAD, GEMV_SWIGLU_SINGLE)):
        assert twin.params == plain.params
        assert refs[(twin.module, twin.func)] is refs[(plain.module, plain.func)]


def _decode_names(monkeypatch, switch: str) -> list[str]:
    monkeypatch.setenv("ATLAS_GEMV_L2_AHEAD", switch)
    runner = load_runner(FIXTURES / "tiny-qwen3", backend="mock", max_seq_len=64,
                         max_batch_size=4, max_prefill_tokens=32)
    dev = runner.backend
    prompt = [1, 2, 3, 4, 5]
    runner.execute([SeqChunk(7, prompt, 0, [0], GREEDY, history=PenaltyHistory(prompt))])
    dev.drain_launches()
    dev.graph_launches.clear()
    runner.execute([SeqChunk(7, [3], 5, [0], GREEDY, rng_position=1)])
    (replay,) = dev.graph_launches
    return [r.func for r in replay.graph]


@pytest.mark.parametrize("switch", ["1", "0"])
def test_batch_one_decode_launches(monkeypatch, switch: str) -> None:
    names = _decode_names(monkeypatch, switch)
    on, off = ("gemv_bf16_single_ahead", "gemv_bf16_single")[::1 if switch == "1" else -1]
    swiglu = "gemv_swiglu_bf16_single" + ("_ahead" if switch == "1" else "")
    layers = names.count("add_rmsnorm_bf16") // 2
    assert layers >= 1 and off not in names
    assert names.count(on) == 3 * layers  # qkv, o_proj, down
    assert names.count(swiglu) == layers
    assert names.count("gemv_bf16_f32_single") == 1  # the LM head


CASES = [c for c in gemv_cases(np.random.default_rng(3)) + gemv_swiglu_cases(
    np.random.default_rng(3)) if "ahead" in c.name]


def test_cases_cover_many_waves_and_both_entries() -> None:
    names = " | ".join(c.name for c in CASES)
    for part in ("gemv ahead m1 n12352 k2048", "gemv ahead m1 n130", "gemv swiglu ahead"):
        assert part in names, part


@pytest.mark.parametrize("case", [c for c in CASES if "n12352" not in c.name],
                         ids=lambda c: c.name)
def test_check_cases_hold_on_the_host(case) -> None:
    result = check(HostBackend(), case)
    assert result.passed, result.detail
