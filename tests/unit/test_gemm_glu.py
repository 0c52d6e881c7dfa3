"""The prefill GEMM's gated entries (gemm_sm90_tma_{swiglu,geglu}_bf16, ATLAS_GEMM_SWIGLU, on by
default): which products a model's gate_up sends there and the launch they make (a mock
sm_90a device that loaded the wgmma modules); the values are the check cases'
(cases/gemm.py GEMM_SM90_TMA_GLU_SHAPES, run on the host in test_gemm_sm90_tma.py)."""

from __future__ import annotations

import pytest

from atlas.runtime.mock import MockGpuBackend
from atlas.runtime.ops import KernelCache, matmul
from atlas.runtime.ops.routes import KernelRoutes


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
