"""The quantized decode GEMV's variants (gemv_quant_direct.cu): the shared-memory-staged one
(gemv_staged, entry points gemv_qs_*, ATLAS_QUANT_STAGED=1): its launch builder's route,
geometry, shared memory and fallbacks on a mock Hopper device, its constants against the
kernel's; which register-fed loop each format takes (ATLAS_QUANT_TILE_LOOP); and their
products end to end on the host references against float64."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from atlas.runtime.cases.gemv_fp8 import fp8_linear_case
from atlas.runtime.cases.gemv_nvfp4 import nvfp4_linear_case
from atlas.runtime.cases.gemv_quant_direct import (STAGED_LOGITS_SHAPES, STAGED_SHAPES,
                                                   STAGED_SWIGLU_SHAPES, swiglu_case)
from atlas.runtime.host import HostBackend
from atlas.runtime.kernel_check import check
from atlas.runtime.mock import MockGpuBackend
from atlas.runtime.ops import KernelCache, matmul_quant_mma
from atlas.runtime.ops.matmul_quant import QuantLinear
from atlas.runtime.ops.routes import KernelRoutes
from tests.unit.quant_support import (QUANT_MODULES, HopperQuantMock, direct_weight,
                                     routed_funcs, run_product)

KERNEL = (Path(__file__).parents[2] / "kernels" / "hopper" / "common" /
          "gemv_quant_direct.cu").read_text()
STAGED = KernelRoutes(quant_staged=True, quant_fp8_core=False,  # one FP8 / NVFP4 row too
                      quant_nvfp4_h2=False, quant_fp8_h2=False)


def _constant(name: str) -> int:
    (value,) = re.findall(rf"constexpr int {name} = (\d+);", KERNEL)
    return int(value)


def _direct_mock() -> HopperQuantMock:
    """A hopper leaf's set: the tensor-core quantized GEMVs, both kernels."""
    return HopperQuantMock(QUANT_MODULES + ("gemv_quant_direct",))


def _weight(dev: MockGpuBackend, fmt: str, n: int, k: int, misalign: int = 0):
    return direct_weight(dev, fmt, n, k, misalign)


def test_the_launch_builder_mirrors_the_kernel_constants() -> None:
    """512 threads = 16 warps, the ring's most units, and shared memory: the dynamic ring holds
    at least 5 units of either format (16 rows x 32 steps: ~190 KiB in flight) beside the
    kernel's static partial sums and barriers (2 x 16 x 4 x 32 floats + 16 mbarriers) in the
    SM's 227 KiB."""
    warps, stages = _constant("kStagedWarps"), _constant("kMaxStages")
    unit_steps = warps * _constant("kStepsPerWarp")
    assert matmul_quant_mma.STAGED_THREADS == 32 * warps
    assert matmul_quant_mma.STAGED_MAX_STAGES == stages
    nvfp4_unit = 16 * ((unit_steps * 64 + 64) + (unit_steps * 8 + 16))
    assert matmul_quant_mma.STAGED_SHARED // nvfp4_unit >= 5
    static = 2 * warps * 4 * 32 * 4 + 8 * stages
    assert matmul_quant_mma.STAGED_SHARED + static <= 227 * 1024


def test_the_staged_switch_reads_the_environment() -> None:
    """1 / 0 force the staged variant on / off for both formats; unset leaves the per-format
    rule (STAGED_BY_DEFAULT)."""
    dev = _direct_mock()
    for fmt in ("fp8", "nvfp4"):
        w = _weight(dev, fmt, 64, 512)
        want = fmt in matmul_quant_mma.STAGED_BY_DEFAULT
        assert matmul_quant_mma.uses_staged(KernelCache(dev, KernelRoutes()), w) is want
    assert KernelRoutes.from_env({}).quant_staged is None
    assert KernelRoutes.from_env({"ATLAS_QUANT_STAGED": "1"}).quant_staged is True
    assert KernelRoutes.from_env({"ATLAS_QUANT_STAGED": "0"}).quant_staged is False
    with pytest.raises(ValueError, match="ATLAS_QUANT_STAGED"):
        KernelRoutes.from_env({"ATLAS_QUANT_STAGED": "on"})


@pytest.mark.parametrize("fmt", ["fp8", "nvfp4"])
@pytest.mark.parametrize("product, n, grid", [("linear", 6144, 132), ("linear", 1000, 63),
                                              ("swiglu", 2 * 12288, 132),
                                              ("logits", 20000, 132)])
def test_switched_on_products_take_the_staged_entry_points(fmt: str, product: str, n: int,
                                                           grid: int) -> None:
    """One block of 512 threads per SM (132 on the H200) or per tile where there are fewer
    (1,000 rows: 63 tiles), STAGED_SHARED bytes of dynamic shared memory opted in once."""
    dev = _direct_mock()
    kc, k, m = KernelCache(dev, STAGED), 4096, 3
    assert kc.facts.sm_count == 132
    w, x = _weight(dev, fmt, n, k), dev.alloc(m * k * 2)
    run_product(kc, w, x, product, m)
    (rec,) = dev.drain_launches()
    out = {"linear": "bf16", "swiglu": "swiglu_bf16", "logits": "f32"}[product]
    assert (rec.module, rec.func) == ("gemv_quant_direct", f"gemv_qs_{fmt}_{out}")
    assert rec.grid[0] == grid and rec.block[0] == 512
    assert rec.shared == matmul_quant_mma.STAGED_SHARED
    assert dev.opt_ins == [(rec.func, matmul_quant_mma.STAGED_SHARED)]
    assert (rec.args["x"], rec.args["m"], rec.args["n"], rec.args["k"]) == (x, m, n, k)


@pytest.mark.parametrize("case", ["nvfp4 k % 256", "nvfp4 scales", "m9", "off"])
def test_products_the_staged_variant_cannot_take_stay_where_they_were(case: str) -> None:
    """Bulk copies need 16-byte sources and sizes: an NVFP4 k of 384 (24-byte scale rows) or
    8-byte-aligned group scales keep the register-fed kernel; 9 rows the ring kernel; the
    switch off (ATLAS_QUANT_STAGED=0) the register-fed kernel."""
    dev = _direct_mock()
    k, m = 384 if case == "nvfp4 k % 256" else 512, 9 if case == "m9" else 1
    w = _weight(dev, "nvfp4", 64, k, misalign=8 if case == "nvfp4 scales" else 0)
    kc = KernelCache(dev, KernelRoutes(quant_staged=False, quant_nvfp4_h2=False) if case == "off"
                        else STAGED)
    QuantLinear(w).linear(kc, 0, dev.alloc(m * k * 2), dev.alloc(m * 64 * 2), m)
    (rec,) = dev.drain_launches()
    assert rec.func == ("gemv_mma_nvfp4_bf16" if case == "m9" else "gemv_qd_nvfp4_bf16")


@pytest.mark.parametrize("make", [
    lambda rng: fp8_linear_case(rng, "block", 1, 70, 1088, staged=True),
    lambda rng: fp8_linear_case(rng, "channel", 8, 33, 192, staged=True),
    lambda rng: nvfp4_linear_case(rng, 3, 40, 1280, parts=2, staged=True),
    lambda rng: nvfp4_linear_case(rng, 2, 300, 512, logits=True, staged=True),
    lambda rng: swiglu_case(rng, "nvfp4", 5, 24, 256, staged=True),
    lambda rng: swiglu_case(rng, "tensor", 2, 40, 128, staged=True)])
def test_staged_products_on_the_host_references(make) -> None:
    """The staged entry points end to end on the host backend (arguments reach the
    references by their ABI names) against the float64 oracle."""
    case = make(np.random.default_rng(7))
    assert case.module == "gemv_quant_direct" and "gemv_qd_staged_" in case.name
    result = check(HostBackend(), case)
    assert result.passed, result.detail


@pytest.mark.parametrize("product, shapes", [("linear", STAGED_SHAPES),
                                            ("logits", STAGED_LOGITS_SHAPES),
                                            ("swiglu", STAGED_SWIGLU_SHAPES)])
def test_the_staged_device_cases_route_to_the_staged_entry_points(product: str,
                                                                  shapes: list) -> None:
    """Every shape of the staged check cases (check_kernels -k gemv_qd_staged) launches a
    gemv_qs_* entry point: its weight meets staged_supports, so none falls back unnoticed."""
    for fmt, func in routed_funcs(STAGED, product, shapes):
        assert func.startswith(f"gemv_qs_{fmt}_"), func


@pytest.mark.parametrize("env, fmt, func, grid", [
    ({}, "fp8", "gemv_qd_fp8_bf16", 384), ({}, "nvfp4", "gemv_qd_nvfp4_bf16", 384),
    ({"ATLAS_QUANT_TILE_LOOP": "1"}, "nvfp4", "gemv_qd_nvfp4_tile_bf16", 384),
    ({"ATLAS_QUANT_TILE_LOOP": "0"}, "fp8", "gemv_qd_fp8_pipe_bf16", 384),
    ({"ATLAS_QUANT_PERSISTENT": "1"}, "fp8", "gemv_qd_fp8_pipe_bf16", 132),
    ({"ATLAS_QUANT_PERSISTENT": "1", "ATLAS_QUANT_TILE_LOOP": "1"}, "nvfp4",
     "gemv_qd_nvfp4_bf16", 132),
    ({"ATLAS_QUANT_E2M1_LUT": "1", "ATLAS_QUANT_TILE_LOOP": "1"}, "nvfp4",
     "gemv_qd_nvfp4_lut_bf16", 384)])
def test_each_format_takes_its_measured_loop(env: dict[str, str], fmt: str, func: str,
                                             grid: int) -> None:
    """Qwen3-8B's qkv (384 tiles): FP8 on the one-block-per-tile loop (gpu18: 20-25% ahead),
    NVFP4 pipelined (7-11% ahead); ATLAS_QUANT_TILE_LOOP forces either; the one-wave grid
    and the byte-table decode have the pipelined loop only."""
    dev = _direct_mock()
    w, x = _weight(dev, fmt, 6144, 4096), dev.alloc(4096 * 2)
    routes = KernelRoutes.from_env({**env, "ATLAS_QUANT_STAGED": "0", "ATLAS_QUANT_NVFP4_H2": "0",
                                   "ATLAS_QUANT_FP8_CORE": "0", "ATLAS_QUANT_FP8_H2": "0"})
    QuantLinear(w).linear(KernelCache(dev, routes), 0, x, dev.alloc(6144 * 2), 1)
    (rec,) = dev.drain_launches()
    assert (rec.func, rec.grid[0], rec.block[0]) == (func, grid, 256)
    with pytest.raises(ValueError, match="ATLAS_QUANT_TILE_LOOP"):
        KernelRoutes.from_env({"ATLAS_QUANT_TILE_LOOP": "yes"})


@pytest.mark.parametrize("make", [
    lambda rng: fp8_linear_case(rng, "block", 3, 70, 1088, direct=True, tile_loop=False),
    lambda rng: nvfp4_linear_case(rng, 2, 40, 640, parts=2, direct=True, tile_loop=True),
    lambda rng: nvfp4_linear_case(rng, 1, 300, 256, direct=True, logits=True, tile_loop=True),
    lambda rng: swiglu_case(rng, "nvfp4", 3, 24, 256, tile_loop=True)])
def test_the_other_loops_on_the_host_references(make) -> None:
    case = make(np.random.default_rng(5))
    assert "_pipe" in case.name or "_tile" in case.name
    result = check(HostBackend(), case)
    assert result.passed, result.detail
