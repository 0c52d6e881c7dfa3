"""NVFP4 weights: the format's dequantization against an explicit per-element loop and the
NVFP4 GEMV launch builders on the host backend against a float64 oracle (the kernels' E2M1
decode is emulated bit for bit in test_quant_decode.py)."""

from __future__ import annotations

import numpy as np
import pytest

from atlas.core.numerics import E2M1_LUT, FP8_E4M3_LUT
from atlas.core.quant import dequantize_nvfp4
from atlas.runtime.cases.gemv_nvfp4 import dequant_nvfp4_case, nvfp4_linear_case
from atlas.runtime.host import HostBackend
from atlas.runtime.kernel_check import check
from atlas.runtime.ops.matmul_nvfp4 import Nvfp4Weight
from atlas.runtime.ops.matmul_quant import gemv_passes


def test_dequantize_nvfp4_matches_a_loop() -> None:
    rng = np.random.default_rng(0)
    n, k = 3, 64
    packed = rng.integers(0, 256, (n, k // 2), dtype=np.uint8)
    s_codes = rng.integers(0, 0x70, (n, k // 16), dtype=np.uint8)
    rows = np.array([0.5, 0.25, 3.0], np.float32)
    want = np.empty((n, k))
    for i in range(n):
        for j in range(k):
            byte = int(packed[i, j // 2])
            nib = byte & 0xF if j % 2 == 0 else byte >> 4
            want[i, j] = float(E2M1_LUT[nib]) * float(FP8_E4M3_LUT[s_codes[i, j // 16]]) * rows[i]
    np.testing.assert_array_equal(dequantize_nvfp4(packed, s_codes, rows), want)
    np.testing.assert_array_equal(dequantize_nvfp4(packed, s_codes, 0.5),
                                  dequantize_nvfp4(packed, s_codes, np.full(n, 0.5)))


@pytest.mark.parametrize("m,n,k,silu,parts", [
    (1, 36, 96, False, 1), (3, 33, 64, False, 3), (8, 20, 128, True, 2), (12, 16, 64, False, 2),
    (16, 32, 64, True, 1), (61, 16, 512, True, 2), (72, 32, 64, False, 1), (80, 16, 64, True, 1),
])
def test_nvfp4_linear_on_the_host_backend(m: int, n: int, k: int, silu: bool,
                                          parts: int) -> None:
    result = check(HostBackend(), nvfp4_linear_case(np.random.default_rng(5), m, n, k, silu,
                                                    parts))
    assert result.passed, result.detail


def test_nvfp4_dequantize_kernel_on_the_host_backend() -> None:
    result = check(HostBackend(), dequant_nvfp4_case(np.random.default_rng(2), 40, 96))
    assert result.passed, result.detail


def test_gemv_passes_run_while_they_move_fewer_bytes() -> None:
    n, k = 4096, 4096
    fp8 = n * k + 4 * 32 * 32
    nvfp4 = Nvfp4Weight(0, 0, 0, n, k).nbytes
    assert nvfp4 == n * k // 2 + n * k // 16 + 4 * n
    assert [gemv_passes(fp8, n, k, m) for m in (1, 8, 9, 32, 33, 2048)] == [1, 1, 2, 4, 0, 0]
    assert [gemv_passes(nvfp4, n, k, m) for m in (8, 64, 65)] == [1, 8, 0]


def test_nvfp4_weight_preconditions() -> None:
    with pytest.raises(ValueError, match="multiple of 32"):
        Nvfp4Weight(0, 0, 0, 8, 48)
    with pytest.raises(ValueError, match="16-byte"):
        Nvfp4Weight(8, 0, 0, 8, 64)
