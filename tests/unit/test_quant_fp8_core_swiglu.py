"""The batch-1 FP8 gate_up ending with its SwiGLU on the convert GEMV (gemv_fp8.cu
gemv_fp8_cvt_swiglu_bf16_single): its route switch (ATLAS_QUANT_FP8_CORE_SWIGLU) and what
it yields to (the half-precision-FMA GEMV, the convert GEMV switched off, more rows), its
launch geometry on a mock Hopper device, and its check cases end to end on the host backend
against float64."""

from __future__ import annotations

import numpy as np
import pytest

from atlas.runtime.cases.gemv_quant_direct import FP8_CORE_SWIGLU_SHAPES, swiglu_case
from atlas.runtime.host import HostBackend
from atlas.runtime.kernel_check import check
from atlas.runtime.ops import KernelCache, matmul_quant
from atlas.runtime.ops.matmul_quant import QuantLinear
from atlas.runtime.ops.routes import KernelRoutes
from tests.unit.quant_support import QUANT_MODULES, HopperQuantMock, direct_weight

ON = KernelRoutes.from_env({"ATLAS_QUANT_FP8_CORE_SWIGLU": "1"})


def _mock() -> HopperQuantMock:
    return HopperQuantMock(QUANT_MODULES + ("gemv_quant_direct",))


def test_the_switch_parses_and_defaults_to_the_launch_builders_rule() -> None:
    assert KernelRoutes.from_env({}).quant_fp8_core_swiglu is None
    assert ON.quant_fp8_core_swiglu is True
    off = KernelRoutes.from_env({"ATLAS_QUANT_FP8_CORE_SWIGLU": "0"})
    dev = _mock()
    w = direct_weight(dev, "fp8", 2 * 1024, 4096)
    assert (matmul_quant.uses_core_swiglu(KernelCache(dev), w, 1)
            is matmul_quant.FP8_CORE_SWIGLU_BY_DEFAULT)
    assert matmul_quant.uses_core_swiglu(KernelCache(dev, ON), w, 1)
    assert not matmul_quant.uses_core_swiglu(KernelCache(dev, off), w, 1)
    assert not matmul_quant.uses_core_swiglu(KernelCache(HostBackend()), w, 1)  # no module


@pytest.mark.parametrize("rows", [8, 4])
@pytest.mark.parametrize("inter, k, threads", [(12288, 4096, 128), (12289, 4096, 128),
                                               (100, 12288, 256), (1, 64, 32)])
def test_gate_up_launches_the_convert_twin_rows_over_two_features_a_block(
        inter: int, k: int, threads: int, rows: int) -> None:
    """8-row blocks (the default, ATLAS_GEMV_SWIGLU_ROWS) hold 4 features, 4-row ones 2."""
    dev = _mock()
    kc = KernelCache(dev, KernelRoutes.from_env({"ATLAS_QUANT_FP8_CORE_SWIGLU": "1",
                                                 "ATLAS_GEMV_SWIGLU_ROWS": str(rows)}))
    gate_up = QuantLinear(direct_weight(dev, "fp8", 2 * inter, k))
    assert gate_up.fuses_swiglu(kc, 1)
    act = dev.alloc(2 * inter)
    gate_up.linear_swiglu(kc, 0, dev.alloc(2 * k), act, 1)
    (rec,) = dev.drain_launches()
    entry = "gemv_fp8_cvt_swiglu_x8_single" if rows == 8 else "gemv_fp8_cvt_swiglu_bf16_single"
    assert (rec.module, rec.func) == ("gemv_fp8", entry)
    assert rec.args["y"] == act and rec.args["n"] == 2 * inter and rec.args["m"] == 1
    assert rec.grid[0] == -(-inter // (rows // 2)) and rec.block[0] == threads


def test_it_yields_to_the_h2_gemv_the_convert_switch_and_more_rows() -> None:
    dev = _mock()
    w = direct_weight(dev, "fp8", 2 * 1024, 4096)
    both = KernelRoutes.from_env({"ATLAS_QUANT_FP8_CORE_SWIGLU": "1", "ATLAS_QUANT_FP8_H2": "1"})
    matmul_quant.linear_swiglu_quant(KernelCache(dev, both), 0, dev.alloc(8192), w,
                                     dev.alloc(2048), 1)
    no_core = KernelRoutes.from_env({"ATLAS_QUANT_FP8_CORE_SWIGLU": "1",
                                     "ATLAS_QUANT_FP8_CORE": "0"})
    matmul_quant.linear_swiglu_quant(KernelCache(dev, no_core), 0, dev.alloc(8192), w,
                                     dev.alloc(2048), 1)
    matmul_quant.linear_swiglu_quant(KernelCache(dev, ON), 0, dev.alloc(4 * 8192), w,
                                     dev.alloc(4 * 2048), 4)
    funcs = [r.func for r in dev.drain_launches()]
    assert funcs[0] == "gemv_fp8_h2_swiglu_bf16"
    assert all(f.startswith("gemv_qd_fp8") for f in funcs[1:]), funcs
    odd = direct_weight(dev, "fp8", 257, 1024)
    with pytest.raises(ValueError, match="even n"):
        matmul_quant.gemv_fp8(KernelCache(dev, ON), 0, dev.alloc(2048), odd, dev.alloc(512), 1,
                              cvt=True, swiglu=True)


@pytest.mark.parametrize("shape", FP8_CORE_SWIGLU_SHAPES[1:], ids=str)
def test_the_check_cases_pass_on_the_host_backend(shape: tuple[str, int, int]) -> None:
    layout, inter, k = shape
    case = swiglu_case(np.random.default_rng(inter), layout, 1, inter, k, core=True)
    result = check(HostBackend(), case)
    assert result.passed, result
