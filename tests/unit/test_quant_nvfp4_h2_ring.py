"""The batch-1 NVFP4 half-precision-FMA GEMV's cp.async-ring twin (gemv_nvfp4.cu
gemv_nvfp4_h2_ring_*, gemv_h2.cuh gemv_h2_ring): its switches (ATLAS_QUANT_H2_RING,
ATLAS_QUANT_H2_RING_STAGES), the launch geometry on a mock Hopper device (the one-shot
kernel's threads, persistent blocks up to what the device holds, the ring's shared memory),
the weights it must leave to the one-shot blocks, and its check cases end to end on the host
backend against float64."""

from __future__ import annotations

import numpy as np
import pytest

from atlas.runtime.cases.gemv_quant_direct import gemv_nvfp4_h2_ring_cases
from atlas.runtime.host import HostBackend
from atlas.runtime.kernel_check import check
from atlas.runtime.ops import KernelCache, matmul_h2, matmul_nvfp4
from atlas.runtime.ops.matmul_quant import QuantLinear
from atlas.runtime.ops.routes import KernelRoutes
from tests.unit.quant_support import QUANT_MODULES, HopperQuantMock, direct_weight

RING = KernelRoutes(quant_nvfp4_h2=True, quant_h2_ring=True)


def _mock() -> HopperQuantMock:
    return HopperQuantMock(QUANT_MODULES + ("gemv_quant_direct",))


def test_the_switches_parse_and_default_to_the_launch_builders_rule() -> None:
    assert KernelRoutes.from_env({}).quant_h2_ring is None
    assert KernelRoutes.from_env({"ATLAS_QUANT_H2_RING": "1"}).quant_h2_ring is True
    assert KernelRoutes.from_env({"ATLAS_QUANT_H2_RING": "0"}).quant_h2_ring is False
    assert KernelRoutes.from_env({"ATLAS_QUANT_H2_RING_STAGES": "4"}).quant_h2_ring_stages == 4
    with pytest.raises(ValueError, match="ATLAS_QUANT_H2_RING_STAGES"):
        KernelRoutes.from_env({"ATLAS_QUANT_H2_RING_STAGES": "5"})
    dev = _mock()
    w = direct_weight(dev, "nvfp4", 256, 1024)
    assert matmul_nvfp4.uses_h2_ring(KernelCache(dev), w) is matmul_h2.H2_RING_BY_DEFAULT


@pytest.mark.parametrize("n, k, stages", [(6144, 4096, None), (4096, 12288, 2),
                                          (24576, 4096, 4), (130, 64, 3)])
def test_one_row_launches_persistent_blocks_of_the_one_shot_width(n: int, k: int,
                                                                   stages: int | None) -> None:
    dev = _mock()
    w = direct_weight(dev, "nvfp4", n, k)
    x, y = dev.alloc(2 * k), dev.alloc(2 * n)
    routes = KernelRoutes(quant_nvfp4_h2=True, quant_h2_ring=True, quant_h2_ring_stages=stages)
    QuantLinear(w).linear(KernelCache(dev, routes), 0, x, y, 1)
    (rec,) = dev.drain_launches()
    assert (rec.module, rec.func) == ("gemv_nvfp4", "gemv_nvfp4_h2_ring_bf16")
    threads = matmul_h2.h2_threads(k // 32)
    depth = matmul_h2.RING_DEFAULT_STAGES if stages is None else stages
    shared = depth * threads * matmul_h2.RING_STAGE_BYTES_PER_THREAD
    assert rec.block[0] == threads and rec.shared == shared and rec.args["stages"] == depth
    # the model's occupancy without a driver: registers and shared memory an SM
    facts = dev.device_facts()
    per_sm = min(matmul_h2.SM_REGISTERS // (matmul_h2.RING_REGISTERS * threads),
                 facts.shared_memory_per_sm // (shared + matmul_h2.RING_BLOCK_OVERHEAD))
    assert rec.grid[0] == min(-(-n // 4), facts.sm_count * per_sm)
    assert (rec.args["x"], rec.args["w"], rec.args["y"], rec.args["n"], rec.args["k"]) == (
        x, w.codes, y, n, k)
    assert ("gemv_nvfp4_h2_ring_bf16", shared) in dev.opt_ins


def test_logits_and_the_gate_up_swiglu_take_their_ring_entry_points() -> None:
    dev = _mock()
    kc = KernelCache(dev, RING)
    head = QuantLinear(direct_weight(dev, "nvfp4", 151936, 4096))
    head.linear(kc, 0, dev.alloc(2 * 4096), dev.alloc(4 * 151936), 1, out_f32=True)
    gate_up = QuantLinear(direct_weight(dev, "nvfp4", 2 * 12289, 4096))
    gate_up.linear_swiglu(kc, 0, dev.alloc(2 * 4096), dev.alloc(2 * 12289), 1)
    assert [r.func for r in dev.drain_launches()] == ["gemv_nvfp4_h2_ring_f32",
                                                      "gemv_nvfp4_h2_ring_swiglu_bf16"]


@pytest.mark.parametrize("k, misalign", [(1056, 0), (4096, 2)])
def test_rows_whose_scales_start_off_a_word_keep_the_one_shot_blocks(k: int,
                                                                     misalign: int) -> None:
    """k % 64 != 0 (an odd chunk count a row) or 2-byte aligned scales: a row's scale pairs
    would not start on the 4-byte word the ring copies."""
    dev = _mock()
    w = direct_weight(dev, "nvfp4", 256, k, misalign=misalign)
    assert not matmul_nvfp4.uses_h2_ring(KernelCache(dev, RING), w)
    QuantLinear(w).linear(KernelCache(dev, RING), 0, dev.alloc(2 * k), dev.alloc(512), 1)
    assert [r.func for r in dev.drain_launches()] == ["gemv_nvfp4_h2_bf16"]


def test_the_ring_cases_run_the_ring_and_match_float64_on_the_host_backend() -> None:
    cases = gemv_nvfp4_h2_ring_cases(np.random.default_rng(3))
    assert {c.name.split()[0] for c in cases} == {"gemv_nvfp4_h2_ring", "gemv_nvfp4_h2_ring_f32",
                                                  "gemv_nvfp4_h2_ring_swiglu"}
    small = [c for c in cases if "n130 " in c.name or "inter77 " in c.name]
    for case in small:
        result = check(HostBackend(), case)
        assert result.passed, (case.name, result.detail)
