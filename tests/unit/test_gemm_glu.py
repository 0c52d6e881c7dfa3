"""The prefill GEMM's gated entries (gemm_sm90_tma_{swiglu,geglu}_bf16, ATLAS_GEMM_SWIGLU, on by
default): which products a model's gate_up sends there and the launch they make (a mock
sm_90a device that loaded the wgmma modules), a quantized weight's prefill through its bf16
scratch included; the values are the check cases' (cases/gemm.py GEMM_SM90_TMA_GLU_SHAPES, run
on the host in test_gemm_sm90_tma.py)."""

from __future__ import annotations

import pytest

from atlas.runtime.mock import MockGpuBackend
from atlas.runtime.ops import KernelCache, matmul
from atlas.runtime.ops.matmul_quant import Bf16Linear, QuantLinear
from atlas.runtime.ops.routes import KernelRoutes
from tests.unit.quant_support import QUANT_MODULES, HopperQuantMock, direct_weight


class _Sm90Mock(MockGpuBackend):
    """A mock device whose PTX set has the wgmma GEMM and its TMA twin."""

    @property
    def module_names(self) -> list[str]:
        return ["gemm", "gemm_sm90", "gemm_sm90_tma", "gemv", "gemm_decode_sm90",
                "gemm_decode_tma"]


def _kc(**env: str) -> KernelCache:
    return KernelCache(_Sm90Mock(), routes=KernelRoutes.from_env(env))


def test_prefill_gate_up_ends_with_its_activation_on_the_tma_twin() -> None:
    kc = _kc()
    # Qwen3-8B's gate_up at a 2,048-token chunk: the TMA twin's route, the gated entry
    assert matmul.linear_route(kc, 2048, 2 * 12288) == "gemm_sm90_tma"
    assert matmul.fuses_gate_up_swiglu(kc, 2048, 2 * 12288, 4096)
    assert matmul.fuses_gate_up_swiglu(kc, 2048, 2 * 12288, 4096, gelu=True)
    assert not matmul.fuses_gate_up_swiglu(kc, 2048, 2 * 12288 + 8, 4096)  # not 16-aligned
    assert not matmul.fuses_gate_up_swiglu(_kc(ATLAS_GEMM_SWIGLU="0"), 2048, 2 * 12288, 4096)
    # the cp.async twin has no gated entry
    assert not matmul.fuses_gate_up_swiglu(_kc(ATLAS_GEMM_TMA="0"), 2048, 2 * 12288, 4096)


@pytest.mark.parametrize("gelu, func", [(False, "gemm_sm90_tma_swiglu_bf16"),
                                        (True, "gemm_sm90_tma_geglu_bf16")])
def test_the_gated_launch_covers_the_pairs_with_the_plain_grid(gelu, func) -> None:
    kc = _kc()
    dev = kc.backend
    m, inter, k = 2048, 12288, 4096
    x, w, act = dev.alloc(m * k * 2), dev.alloc(2 * inter * k * 2), dev.alloc(m * inter * 2)
    matmul.linear_swiglu(kc, 0, x, w, act, m, 2 * inter, k, gelu)
    (rec,) = dev.drain_launches()
    assert rec.func == func
    assert rec.grid[0] == (m // 128) * (2 * inter // 256)  # 128 pairs a 256-row tile
    assert (rec.args["c"], rec.args["m"], rec.args["n"], rec.args["k"]) == (act, m, 2 * inter, k)
    with pytest.raises(ValueError, match="multiples of 16"):
        matmul.gemm_glu(kc, 0, x, w, act, m, 2 * inter + 8, k)


@pytest.mark.parametrize("fmt, dequant", [("fp8", "dequant_fp8_bf16"),
                                          ("nvfp4", "dequant_nvfp4_bf16")])
def test_a_quantized_prefill_gate_up_dequantizes_then_ends_with_its_activation(
        fmt, dequant) -> None:
    """Where the product dequantizes into the bf16 scratch, the bf16 GEMM's gated entry
    follows behind the fence that lets it read the scratch (no [m, 2 I] gate_up, no
    silu_mul); batch 1 keeps its quantized GEMV, and a bf16
    weight takes (and ignores) the scratch argument."""
    dev = HopperQuantMock(QUANT_MODULES + ("gemm_sm90", "gemm_sm90_tma"))
    kc = KernelCache(dev)
    m, inter, k = 2048, 1024, 4096
    gate_up = QuantLinear(direct_weight(dev, fmt, 2 * inter, k))
    assert gate_up.fuses_swiglu(kc, m)
    assert not gate_up.fuses_swiglu(KernelCache(dev, KernelRoutes.from_env(
        {"ATLAS_GEMM_SWIGLU": "0"})), m)
    scratch, act = dev.alloc(2 * inter * k * 2), dev.alloc(m * inter * 2)
    gate_up.linear_swiglu(kc, 0, dev.alloc(m * k * 2), act, m, w_scratch=scratch)
    first, fence, second = dev.drain_launches()
    assert (first.func, fence.func, second.func) == (dequant, "pdl_fence",
                                                     "gemm_sm90_tma_swiglu_bf16")
    assert (second.args["w"], second.args["c"]) == (scratch, act)
    with pytest.raises(ValueError, match="scratch"):
        gate_up.linear_swiglu(kc, 0, dev.alloc(m * k * 2), act, m)
    dense = Bf16Linear(dev.alloc(2 * inter * k * 2), 2 * inter, k)
    dense.linear_swiglu(kc, 0, dev.alloc(m * k * 2), act, m, w_scratch=scratch)
    assert [r.func for r in dev.drain_launches()] == ["gemm_sm90_tma_swiglu_bf16"]
