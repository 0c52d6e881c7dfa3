"""ATLAS_MOE_QUANT_DOWN_EARLY: the quantized decode MoE down launch on its early twin
(moe_down_sum_early_{fp8,nvfp4}: the routing read and the first weights requested before the
PDL wait; the same bits). The switch parses; unset, NVFP4 experts take the early entry and FP8
ones the plain one (measured); where a decode step's sparse layers launch the early entry it
comes right after gate/up (test_moe_quant_launches.py: the ordering its pre-wait reads rely
on); its check cases (`-k "down early"`) hold on the host backend."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from atlas.runtime.cases.moe_quant import moe_decode_quant_cases
from atlas.runtime.host import HostBackend
from atlas.runtime.kernel_abi import MOE_DOWN_SUM_EARLY_FP8, MOE_DOWN_SUM_EARLY_NVFP4
from atlas.runtime.kernel_check import check
from atlas.runtime.ops.moe_quant import down_early
from atlas.runtime.ops.routes import KernelRoutes
from atlas.runtime.reference import load_all


def test_switch_parses_and_defaults_by_format() -> None:
    assert KernelRoutes().moe_quant_down_early is None
    assert KernelRoutes.from_env({}).moe_quant_down_early is None
    assert KernelRoutes.from_env({"ATLAS_MOE_QUANT_DOWN_EARLY": "1"}).moe_quant_down_early
    assert KernelRoutes.from_env({"ATLAS_MOE_QUANT_DOWN_EARLY": "0"}).moe_quant_down_early is False
    with pytest.raises(ValueError, match="ATLAS_MOE_QUANT_DOWN_EARLY"):
        KernelRoutes.from_env({"ATLAS_MOE_QUANT_DOWN_EARLY": "yes"})


@pytest.mark.parametrize("forced, fp8, early", [(None, False, True), (None, True, False),
                                                (True, True, True), (False, False, False)])
def test_down_early_rule(forced: bool | None, fp8: bool, early: bool) -> None:
    kc = SimpleNamespace(routes=KernelRoutes(moe_quant_down_early=forced))
    assert down_early(kc, fp8) is early


def test_early_entries_share_the_plain_entries_references() -> None:
    refs = load_all()
    for sig in (MOE_DOWN_SUM_EARLY_FP8, MOE_DOWN_SUM_EARLY_NVFP4):
        plain = sig.func.replace("_early", "")
        assert refs[(sig.module, sig.func)] is refs[(sig.module, plain)]


CASES = [c for c in moe_decode_quant_cases(np.random.default_rng(12))
         if "down early" in c.name]


def test_cases_cover_both_formats_shared_and_invalid_ids() -> None:
    names = " | ".join(c.name for c in CASES)
    for part in ("fp8 block t1", "nvfp4 t1", "nvfp4 t3 e16 k4 h256 i96 (down",
                 "e16+shared", "+shared k8 h2048 i512", "fp8 tensor"):
        assert part in names, part
    assert {c.name.split()[1] for c in CASES} == {"fp8", "nvfp4"}
    assert any(c.graph for c in CASES)  # also replayed in the GPU check's CUDA graph


@pytest.mark.parametrize("case", [c for c in CASES if " h2048 " not in c.name],
                         ids=lambda c: c.name)
def test_check_cases_hold_on_the_host(case) -> None:
    result = check(HostBackend(), case)
    assert result.passed, result.detail
