"""FP8 weights: the scale index map against explicit per-element loops, and the FP8 GEMV
launch builders on the host backend against an independent float64 product (every layout,
the fused SwiGLU down projection and the dequantize + GEMM path for more rows)."""

from __future__ import annotations

import numpy as np
import pytest

from atlas.core.numerics import FP8_E4M3_LUT, f32_to_fp8_e4m3
from atlas.core.quant import Fp8ScaleMap
from atlas.runtime.cases.gemv_fp8 import dequant_case, fp8_linear_case
from atlas.runtime.host import HostBackend
from atlas.runtime.kernel_check import check


def _loop_scale(scale: np.ndarray, n: int, k: int, layout: str) -> np.ndarray:
    out = np.empty((n, k), np.float32)
    for i in range(n):
        for j in range(k):
            if layout == "block":
                out[i, j] = scale[i // 128, j // 128]
            elif layout == "channel":
                out[i, j] = scale[i]
            else:
                out[i, j] = scale
    return out


@pytest.mark.parametrize("layout", ["block", "channel", "tensor"])
def test_scale_map_matches_the_published_layouts(layout: str) -> None:
    n, k = 300, 272
    smap = {"block": Fp8ScaleMap.block(n, k), "channel": Fp8ScaleMap.channel(n),
            "tensor": Fp8ScaleMap.tensor()}[layout]
    assert smap.shape == {"block": (3, 3), "channel": (n,), "tensor": ()}[layout]
    scale = np.random.default_rng(0).uniform(0.1, 1, smap.shape or ()).astype(np.float32)
    np.testing.assert_array_equal(smap.expand(scale, n, k), _loop_scale(scale, n, k, layout))


def test_block_sizes_must_be_powers_of_two_of_at_least_16() -> None:
    with pytest.raises(ValueError, match="power of two"):
        Fp8ScaleMap.block(256, 256, 96, 128)
    with pytest.raises(ValueError, match=">= 16"):
        Fp8ScaleMap.block(256, 256, 128, 8)


def test_e4m3_codes_cover_subnormals_and_saturate() -> None:
    x = np.array([2.0 ** -9, -448.0, 1000.0, 0.0], np.float32)
    np.testing.assert_array_equal(FP8_E4M3_LUT[f32_to_fp8_e4m3(x)], [2.0 ** -9, -448, 448, 0])


@pytest.mark.parametrize("layout,m,n,k,silu", [
    ("block", 1, 260, 1040, False), ("block", 8, 67, 512, True), ("channel", 3, 130, 256, False),
    ("tensor", 5, 33, 512, False), ("block", 12, 128, 256, False), ("channel", 16, 64, 256, True),
    ("block", 40, 128, 256, False), ("tensor", 48, 64, 256, True),  # dequantize + GEMM
])
def test_fp8_linear_on_the_host_backend(layout: str, m: int, n: int, k: int, silu: bool) -> None:
    case = fp8_linear_case(np.random.default_rng(7), layout, m, n, k, silu)
    result = check(HostBackend(), case)
    assert result.passed, result.detail


def test_dequantize_kernel_on_the_host_backend() -> None:
    result = check(HostBackend(), dequant_case(np.random.default_rng(3), 200, 272))
    assert result.passed, result.detail
