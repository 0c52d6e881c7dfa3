"""The quantized decode GEMV's narrow pipelined loops (gemv_quant_direct.cu, entry points
gemv_qd_{fp8,nvfp4}_n{1,2}_*, ATLAS_QUANT_NARROW=1 / 2): the switch, the launch builder's
route, grid and occupancy against the kernel's launch bounds on a mock Hopper device, the
check cases' routes, and the products end to end on the host references against float64."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from atlas.runtime.cases.gemv_fp8 import fp8_linear_case
from atlas.runtime.cases.gemv_nvfp4 import nvfp4_linear_case
from atlas.runtime.cases.gemv_quant_direct import (NARROW_LOGITS_SHAPES, NARROW_SHAPES,
                                                   NARROW_SWIGLU_SHAPES, swiglu_case)
from atlas.runtime.cases.quant_linear import case_routes
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


def _mock() -> HopperQuantMock:
    return HopperQuantMock(QUANT_MODULES + ("gemv_quant_direct",))


def _weight(dev: MockGpuBackend, fmt: str, n: int, k: int):
    return direct_weight(dev, fmt, n, k)


def test_the_narrow_switch_reads_the_environment() -> None:
    assert KernelRoutes.from_env({}).quant_narrow is None
    for value in (0, 1, 2):
        assert KernelRoutes.from_env({"ATLAS_QUANT_NARROW": str(value)}).quant_narrow == value
    with pytest.raises(ValueError, match="ATLAS_QUANT_NARROW"):
        KernelRoutes.from_env({"ATLAS_QUANT_NARROW": "3"})


@pytest.mark.parametrize("narrow", [1, 2])
def test_the_launch_builder_mirrors_the_entry_points_launch_bounds(narrow: int) -> None:
    """Every n1 / n2 entry point declares the blocks per SM the persistent grid assumes."""
    bounds = re.findall(rf"ENTRY\(gemv_qd_\w+_n{narrow}_\w+, kNarrow{narrow}, .*?(\d+)\)\n",
                        KERNEL)
    assert len(bounds) == 6
    assert {int(b) for b in bounds} == {matmul_quant_mma.LOOP_BLOCKS_PER_SM[f"n{narrow}"]}


@pytest.mark.parametrize("fmt", ["fp8", "nvfp4"])
@pytest.mark.parametrize("narrow", [1, 2])
@pytest.mark.parametrize("product, n, grid", [("linear", 6144, 384), ("swiglu", 2 * 12288, 1536),
                                              ("logits", 20000, 1250)])
def test_switched_on_products_take_the_narrow_entry_points(fmt: str, narrow: int, product: str,
                                                           n: int, grid: int) -> None:
    """One block of 256 threads per tile (Qwen3-8B's qkv: 384, gate_up + SwiGLU: 1,536
    8-feature tiles, a vocabulary-like logits product: 1,250), no dynamic shared memory;
    ATLAS_QUANT_NARROW overrides the format's default loop (FP8's tile loop too)."""
    dev = _mock()
    routes = KernelRoutes.from_env({"ATLAS_QUANT_NARROW": str(narrow), "ATLAS_QUANT_STAGED": "0",
                                    "ATLAS_QUANT_TILE_LOOP": "1"})
    kc, k, m = KernelCache(dev, routes), 4096, 2
    w, x = _weight(dev, fmt, n, k), dev.alloc(m * k * 2)
    run_product(kc, w, x, product, m)
    (rec,) = dev.drain_launches()
    out = {"linear": "bf16", "swiglu": "swiglu_bf16", "logits": "f32"}[product]
    assert (rec.module, rec.func) == ("gemv_quant_direct", f"gemv_qd_{fmt}_n{narrow}_{out}")
    assert (rec.grid[0], rec.block[0], rec.shared) == (grid, 256, 0)
    assert (rec.args["x"], rec.args["m"], rec.args["n"], rec.args["k"]) == (x, m, n, k)


@pytest.mark.parametrize("env, grid", [
    ({"ATLAS_QUANT_NARROW": "1", "ATLAS_QUANT_PERSISTENT": "1"}, 384),
    ({"ATLAS_QUANT_NARROW": "2", "ATLAS_QUANT_PERSISTENT": "1"}, 384),
    ({"ATLAS_QUANT_NARROW": "1", "ATLAS_QUANT_BLOCKS_PER_SM": "4"}, 384),
    ({"ATLAS_QUANT_NARROW": "1", "ATLAS_QUANT_BLOCKS_PER_SM": "1"}, 132),
    ({"ATLAS_QUANT_PERSISTENT": "1"}, 132)])
def test_the_persistent_grid_counts_the_loops_occupancy(env: dict[str, str], grid: int) -> None:
    """Qwen3-8B's qkv (384 tiles) on the one-wave grid: four (n1) or three (n2) blocks an SM
    hold every tile at once (384 <= 396), the wide loops' two need 132 blocks of <= 3."""
    dev = _mock()
    routes = KernelRoutes.from_env({**env, "ATLAS_QUANT_STAGED": "0", "ATLAS_QUANT_NVFP4_H2": "0"})
    w, x = _weight(dev, "nvfp4", 6144, 4096), dev.alloc(4096 * 2)
    QuantLinear(w).linear(KernelCache(dev, routes), 0, x, dev.alloc(6144 * 2), 1)
    (rec,) = dev.drain_launches()
    assert rec.grid[0] == grid


def test_blocks_per_sm_past_the_loops_occupancy_is_an_error() -> None:
    """Three blocks an SM exist on n1 / n2 only: on the wide pipelined loop it is refused."""
    dev = _mock()
    routes = KernelRoutes.from_env({"ATLAS_QUANT_BLOCKS_PER_SM": "3", "ATLAS_QUANT_STAGED": "0",
                                    "ATLAS_QUANT_NVFP4_H2": "0"})
    w = _weight(dev, "nvfp4", 6144, 4096)
    with pytest.raises(ValueError, match="per_sm=3"):
        QuantLinear(w).linear(KernelCache(dev, routes), 0, dev.alloc(4096 * 2),
                              dev.alloc(6144 * 2), 1)
    assert matmul_quant_mma.direct_blocks(9496, 132, True, 3, most_per_sm=3) == 396


def test_unset_takes_the_per_format_default_and_zero_neither() -> None:
    dev = _mock()
    for fmt in ("fp8", "nvfp4"):
        w = _weight(dev, fmt, 64, 512)
        default = matmul_quant_mma.NARROW_BY_DEFAULT.get(fmt)
        want = f"n{default}" if default else {"fp8": "tile", "nvfp4": "pipe"}[fmt]
        assert matmul_quant_mma.direct_loop(KernelCache(dev, KernelRoutes()), w) == want
        off = KernelRoutes(quant_narrow=0)
        assert matmul_quant_mma.direct_loop(KernelCache(dev, off), w) in ("tile", "pipe")


def test_a_forced_tile_loop_overrides_a_narrow_default_not_the_narrow_switch(monkeypatch) -> None:
    """ATLAS_QUANT_TILE_LOOP=1 / 0 picks the tile / wide pipelined loop over a format's narrow
    default; ATLAS_QUANT_NARROW set picks its loop whatever ATLAS_QUANT_TILE_LOOP says."""
    monkeypatch.setattr(matmul_quant_mma, "NARROW_BY_DEFAULT", {"fp8": 1, "nvfp4": 2})
    dev = _mock()
    w = _weight(dev, "nvfp4", 64, 512)
    loop = matmul_quant_mma.direct_loop
    assert loop(KernelCache(dev, KernelRoutes()), w) == "n2"
    assert loop(KernelCache(dev, KernelRoutes(quant_tile_loop=True)), w) == "tile"
    assert loop(KernelCache(dev, KernelRoutes(quant_tile_loop=False)), w) == "pipe"
    assert loop(KernelCache(dev, KernelRoutes(quant_tile_loop=True, quant_narrow=1)), w) == "n1"
    assert loop(KernelCache(dev, KernelRoutes(quant_narrow=0)), w) == "pipe"


def test_cases_forcing_a_loop_keep_the_narrow_loops_off(monkeypatch) -> None:
    """A case named for the tile / pipelined loop runs it even under ATLAS_QUANT_NARROW."""
    monkeypatch.setenv("ATLAS_QUANT_NARROW", "1")
    assert case_routes(True, False, False, True, None).quant_narrow == 0
    assert case_routes(True, False, False, None, None).quant_narrow == 1
    assert case_routes(True, False, False, None, 2).quant_narrow == 2


@pytest.mark.parametrize("narrow", [1, 2])
@pytest.mark.parametrize("product, shapes", [("linear", NARROW_SHAPES),
                                            ("logits", NARROW_LOGITS_SHAPES),
                                            ("swiglu", NARROW_SWIGLU_SHAPES)])
def test_the_narrow_device_cases_route_to_the_narrow_entry_points(narrow: int, product: str,
                                                                  shapes: list) -> None:
    """Every shape of the narrow check cases (check_kernels -k gemv_qd_nvfp4_n1, ...)
    launches its format's n1 / n2 entry point on the routes the cases take."""
    for fmt, func in routed_funcs(case_routes(True, False, False, None, narrow), product,
                                  shapes):
        assert func.startswith(f"gemv_qd_{fmt}_n{narrow}_"), func


@pytest.mark.parametrize("narrow", [1, 2])
@pytest.mark.parametrize("make", [
    lambda rng, nw: fp8_linear_case(rng, "block", 3, 70, 1088, direct=True, narrow=nw),
    lambda rng, nw: fp8_linear_case(rng, "channel", 8, 33, 192, direct=True, narrow=nw),
    lambda rng, nw: nvfp4_linear_case(rng, 2, 40, 640, parts=2, direct=True, narrow=nw),
    lambda rng, nw: nvfp4_linear_case(rng, 1, 300, 256, direct=True, logits=True, narrow=nw),
    lambda rng, nw: swiglu_case(rng, "nvfp4", 3, 24, 256, narrow=nw),
    lambda rng, nw: swiglu_case(rng, "block", 2, 40, 256, narrow=nw)])
def test_narrow_products_on_the_host_references(narrow: int, make) -> None:
    """The narrow entry points end to end on the host backend (arguments reach the
    references by their ABI names) against the float64 oracle."""
    case = make(np.random.default_rng(11), narrow)
    assert f"_n{narrow}" in case.name
    result = check(HostBackend(), case)
    assert result.passed, result.detail
