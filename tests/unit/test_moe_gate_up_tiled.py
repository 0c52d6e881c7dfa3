"""ATLAS_MOE_GATE_UP_TILED unset: batch 1's MoE gate/up takes the tiled entry (a block several
column pairs, the grid one wave) where that grid fills at least GATE_UP_TILED_MIN_FILL of the
wave (ops/moe.py gate_up_tiled; gpu89 / gpu90: Qwen3-30B-A3B faster tiled, Qwen3.5-35B-A3B
slower), and =1 / =0 force it either way."""

from __future__ import annotations

from dataclasses import replace

import pytest

from atlas.runtime.host import HostBackend
from atlas.runtime.ops import KernelCache, moe
from atlas.runtime.ops.routes import KernelRoutes

SHAPE_30B = moe.MoeShape(128, 8, 2048, 768)
SHAPE_35B = moe.MoeShape(256, 8, 2048, 512, shared_inter=512)


class _Holding(HostBackend):
    """The host backend with the device's answer on how many blocks of a launch it holds."""

    def __init__(self, resident: int | None) -> None:
        super().__init__()
        self.resident = resident

    def resident_blocks(self, handle, block, shared_mem, cluster):
        return self.resident


def _tiled(shape: moe.MoeShape, resident: int | None, routes: KernelRoutes) -> bool:
    kc = KernelCache(_Holding(resident), routes)
    return moe.gate_up_tiled(kc, shape, moe.gate_up_gemv_threads(kc, shape.hidden))


@pytest.mark.parametrize("resident", [None, 1056])  # the register file's share; the H200's
def test_the_wave_fill_rule_picks_the_30b_and_not_the_35b(resident: int | None) -> None:
    routes = KernelRoutes()
    assert routes.moe_gate_up_tiled is None
    # 30B: 384 pairs x 8 slots in 3-pair blocks = 1,024 of 1,056 (97%)
    assert _tiled(SHAPE_30B, resident, routes)
    # 35B: 256 pairs x 9 slots in 3-pair blocks = 86 x 9 = 774 of 1,056 (73%)
    assert not _tiled(SHAPE_35B, resident, routes)


def test_a_smaller_device_changes_the_answer_by_its_wave() -> None:
    # a device holding 800: ceil(2304 / 800) = 3 pairs a block, 774 blocks, 97% of it: tiled
    assert _tiled(SHAPE_35B, 800, KernelRoutes())
    # one holding 4,000: one pair a block is 3,072 blocks, 77% of it: the two-column kernel
    assert not _tiled(SHAPE_30B, 4000, KernelRoutes())


def test_the_environment_forces_either_way() -> None:
    on = KernelRoutes.from_env({"ATLAS_MOE_GATE_UP_TILED": "1"})
    off = KernelRoutes.from_env({"ATLAS_MOE_GATE_UP_TILED": "0"})
    assert on.moe_gate_up_tiled is True and off.moe_gate_up_tiled is False
    assert _tiled(SHAPE_35B, 1056, on)
    assert not _tiled(SHAPE_30B, 1056, off)
    # routing inside the expert launches still needs the tiled entry asked for by name
    kc = KernelCache(_Holding(1056), replace(KernelRoutes(), moe_route_in_experts=True))
    assert not moe.routes_in_experts(kc, 1, SHAPE_30B)
