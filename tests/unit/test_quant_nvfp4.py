"""NVFP4 weights: the format's dequantization against an explicit per-element loop, the
kernel's PRMT E2M1 decode (its constants and selectors read from the .cu file, the PTX
`prmt.b32` semantics emulated) against the E2M1 table for every input, and the NVFP4 GEMV
launch builders on the host backend against a float64 oracle."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from atlas.core.numerics import E2M1_LUT, FP8_E4M3_LUT, e2m1_to_f32
from atlas.core.quant import dequantize_nvfp4
from atlas.runtime.cases.gemv_nvfp4 import dequant_nvfp4_case, nvfp4_linear_case
from atlas.runtime.host import HostBackend
from atlas.runtime.kernel_check import check
from atlas.runtime.ops.matmul_nvfp4 import Nvfp4Weight
from atlas.runtime.ops.matmul_quant import gemv_passes

KERNEL = Path(__file__).parents[2] / "kernels" / "hopper" / "common" / "gemv_nvfp4.cu"


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


def _prmt(a: np.ndarray, b: np.ndarray, sel: np.ndarray) -> np.ndarray:
    """PTX prmt.b32 (default mode): byte n of d = byte (sel nibble n & 7) of {b, a}, or that
    byte's msb replicated when the nibble's bit 3 is set."""
    a, b, sel = (np.asarray(v, np.uint64) for v in (a, b, sel))
    src = [(a >> np.uint64(8 * i)) & np.uint64(0xFF) for i in range(4)] + \
          [(b >> np.uint64(8 * i)) & np.uint64(0xFF) for i in range(4)]
    d = np.zeros(np.broadcast(a, b, sel).shape, np.uint64)
    for n in range(4):
        s = (sel >> np.uint64(4 * n)) & np.uint64(0xF)
        byte = np.choose((s & np.uint64(7)).astype(np.int64), src)
        byte = np.where(s & np.uint64(8), np.where(byte & np.uint64(0x80), 0xFF, 0), byte)
        d |= byte.astype(np.uint64) << np.uint64(8 * n)
    return d & np.uint64(0xFFFFFFFF)


def test_kernel_prmt_decode_is_exact_for_every_input() -> None:
    src = KERNEL.read_text()
    const = {name: int(v, 16)
             for name, v in re.findall(r"(k(?:Hi|Lo)(?:03|47)) = (0x[0-9A-Fa-f]+)u", src)}
    sign_sel = int(re.search(r"prmt\(q << 4, q, (0x[0-9A-Fa-f]+)u\)", src).group(1), 16)
    p01_sel, p23_sel = (int(v, 16) for v in re.findall(r"prmt\(lo, hs, (0x[0-9A-Fa-f]+)u\)", src))
    q = np.arange(1 << 16, dtype=np.uint64) | np.uint64(0xBEEF0000)  # upper bits ignored
    idx = q & np.uint64(0x7777)
    hi = _prmt(const["kHi03"], const["kHi47"], idx)
    lo = _prmt(const["kLo03"], const["kLo47"], idx)
    sg = _prmt((q << np.uint64(4)) & np.uint64(0xFFFFFFFF), q, sign_sel)
    hs = hi | (sg & np.uint64(0x80808080))
    p01, p23 = _prmt(lo, hs, p01_sel), _prmt(lo, hs, p23_sel)
    mask_hi, full = np.uint64(0xFFFF0000), np.uint64(0xFFFFFFFF)
    got = np.stack([(p01 << np.uint64(16)) & full, p01 & mask_hi, (p23 << np.uint64(16)) & full,
                    p23 & mask_hi], axis=1).astype(np.uint32)
    nibbles = np.stack([(q >> np.uint64(4 * j)) & np.uint64(0xF) for j in range(4)], axis=1)
    want = e2m1_to_f32(nibbles.astype(np.uint8)).astype(np.float32).view(np.uint32)
    np.testing.assert_array_equal(got, want)  # bit-exact, signed zeros included


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
