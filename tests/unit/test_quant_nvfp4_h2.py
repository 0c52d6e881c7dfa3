"""The batch-1 NVFP4 GEMV on packed half-precision FMAs (gemv_nvfp4.cu gemv_nvfp4_h2_*):
its route switch (ATLAS_QUANT_NVFP4_H2), the three products a decode step routes to it
(qkv / o / down, the gate_up that ends with its SwiGLU, a quantized LM head's logits) with
their launch geometry on a mock Hopper device, the products it must leave alone, and its
check cases end to end on the host backend against float64, and the emulation of its range
guard (reference/gemv_nvfp4.h2_product: large x scaled before the f16 conversion). (Its
decode's bits are checked in test_quant_decode.py.)"""

from __future__ import annotations

import numpy as np
import pytest

from atlas.core.numerics import bf16_bits_to_f32, f32_to_bf16_bits
from atlas.core.quant import dequantize_nvfp4
from atlas.runtime.cases.gemv_nvfp4 import nvfp4_linear_case
from atlas.runtime.cases.gemv_quant_direct import (H2_SPIKES_EXTREME, H2_SPIKES_LOGITS,
                                                   H2_SPIKES_LOOP, H2_SPIKES_OFF,
                                                   H2_SPIKES_SWIGLU, nvfp4_every_scale_case,
                                                   swiglu_case)
from atlas.runtime.cases.quant_linear import with_spikes
from atlas.runtime.host import HostBackend
from atlas.runtime.kernel_check import check
from atlas.runtime.ops import KernelCache, matmul_nvfp4, matmul_quant
from atlas.runtime.ops.matmul_quant import QuantLinear
from atlas.runtime.ops.routes import KernelRoutes
from atlas.runtime.reference.gemv_h2 import h2_guard_exponents
from atlas.runtime.reference.gemv_nvfp4 import h2_product
from tests.unit.quant_support import QUANT_MODULES, HopperQuantMock, direct_weight

H2 = KernelRoutes(quant_nvfp4_h2=True, quant_h2_rows=4)  # the 4-row blocks; 8 below


def _mock() -> HopperQuantMock:
    return HopperQuantMock(QUANT_MODULES + ("gemv_quant_direct",))


def test_the_switch_parses_and_defaults_to_the_launch_builders_rule() -> None:
    assert KernelRoutes.from_env({}).quant_nvfp4_h2 is None
    assert KernelRoutes.from_env({"ATLAS_QUANT_NVFP4_H2": "1"}).quant_nvfp4_h2 is True
    assert KernelRoutes.from_env({"ATLAS_QUANT_NVFP4_H2": "0"}).quant_nvfp4_h2 is False
    dev = _mock()
    w = direct_weight(dev, "nvfp4", 256, 1024)
    assert matmul_nvfp4.uses_h2(KernelCache(dev), w, 1) is matmul_nvfp4.H2_BY_DEFAULT
    assert not matmul_nvfp4.uses_h2(KernelCache(HostBackend()), w, 1)  # no module loaded


@pytest.mark.parametrize("k, threads", [(4096, 64), (12288, 192), (1056, 32), (32768, 256)])
def test_one_row_launches_four_rows_a_block_two_chunks_a_thread(k: int, threads: int) -> None:
    dev = _mock()
    n = 4101  # a last block with rows past n
    w = direct_weight(dev, "nvfp4", n, k)
    x, y = dev.alloc(2 * k), dev.alloc(4 * n)
    QuantLinear(w).linear(KernelCache(dev, H2), 0, x, y, 1)
    (rec,) = dev.drain_launches()
    assert (rec.module, rec.func) == ("gemv_nvfp4", "gemv_nvfp4_h2_bf16")
    assert rec.grid[0] == -(-n // 4) and rec.block[0] == threads and rec.shared == 0
    assert (rec.args["x"], rec.args["w"], rec.args["scale"], rec.args["row_scale"]) == (
        x, w.codes, w.scales, w.row_scales)
    assert (rec.args["y"], rec.args["m"], rec.args["n"], rec.args["k"]) == (y, 1, n, k)


@pytest.mark.parametrize("k, threads", [(4096, 128), (12288, 192), (1056, 64), (64, 32),
                                        (20512, 224)])
def test_eight_row_blocks_take_one_chunk_of_each_row_a_thread(k: int, threads: int) -> None:
    """ATLAS_QUANT_H2_ROWS=8 (the default, H2_ROWS): gemv_nvfp4_h2x8_* over ceil(n / 8)
    blocks (SwiGLU: 4 features a block), k / 32 threads up to 256; past 256 chunks as few
    threads as keep every pass full (384 chunks: 2 passes of 192, not 256 + 128; 641: 3
    of 224)."""
    assert matmul_nvfp4.H2_ROWS == 8
    assert KernelRoutes.from_env({"ATLAS_QUANT_H2_ROWS": "8"}).quant_h2_rows == 8
    with pytest.raises(ValueError, match="ATLAS_QUANT_H2_ROWS"):
        KernelRoutes.from_env({"ATLAS_QUANT_H2_ROWS": "6"})
    dev = _mock()
    kc = KernelCache(dev, KernelRoutes(quant_nvfp4_h2=True, quant_h2_rows=8))
    n = 4101
    QuantLinear(direct_weight(dev, "nvfp4", n, k)).linear(kc, 0, dev.alloc(2 * k),
                                                          dev.alloc(2 * n), 1)
    gate_up = QuantLinear(direct_weight(dev, "nvfp4", 2 * 12289, k))
    gate_up.linear_swiglu(kc, 0, dev.alloc(2 * k), dev.alloc(2 * 12289), 1)
    (rec, sw) = dev.drain_launches()
    assert rec.func == "gemv_nvfp4_h2x8_bf16" and rec.grid[0] == -(-n // 8)
    assert rec.block[0] == threads
    assert sw.func == "gemv_nvfp4_h2x8_swiglu_bf16" and sw.grid[0] == -(-12289 // 4)


def test_logits_and_the_gate_up_swiglu_take_their_entry_points() -> None:
    dev = _mock()
    kc = KernelCache(dev, H2)
    head = QuantLinear(direct_weight(dev, "nvfp4", 151936, 4096))
    logits = dev.alloc(4 * 151936)
    head.linear(kc, 0, dev.alloc(2 * 4096), logits, 1, out_f32=True)
    (rec,) = dev.drain_launches()
    assert rec.func == "gemv_nvfp4_h2_f32" and rec.grid[0] == 151936 // 4
    assert rec.args["y"] == logits
    gate_up = QuantLinear(direct_weight(dev, "nvfp4", 2 * 12289, 4096))  # odd feature count
    assert gate_up.fuses_swiglu(kc, 1)
    act = dev.alloc(2 * 12289)
    gate_up.linear_swiglu(kc, 0, dev.alloc(2 * 4096), act, 1)
    (rec,) = dev.drain_launches()
    assert rec.func == "gemv_nvfp4_h2_swiglu_bf16" and rec.args["y"] == act
    assert rec.grid[0] == -(-12289 // 2) and rec.args["n"] == 2 * 12289  # two features a block


@pytest.mark.parametrize("routes, m, fmt", [(KernelRoutes(quant_nvfp4_h2=False), 1, "nvfp4"),
                                            (H2, 2, "nvfp4"), (H2, 8, "nvfp4"),
                                            (KernelRoutes(quant_nvfp4_h2=True,
                                                          quant_fp8_core=False,
                                                          quant_fp8_h2=False), 1, "fp8")])
def test_other_products_keep_the_tensor_core_gemv(routes: KernelRoutes, m: int,
                                                   fmt: str) -> None:
    dev = _mock()
    w = direct_weight(dev, fmt, 256, 1024)
    QuantLinear(w).linear(KernelCache(dev, routes), 0, dev.alloc(2 * m * 1024),
                          dev.alloc(2 * m * 256), m)
    assert [r.module for r in dev.drain_launches()] == ["gemv_quant_direct"]


def test_a_forced_tensor_core_product_and_an_odd_gate_up_are_not_taken() -> None:
    dev = _mock()
    kc = KernelCache(dev, H2)
    w = direct_weight(dev, "nvfp4", 256, 1024)
    matmul_quant.linear_quant(kc, 0, dev.alloc(2048), w, dev.alloc(512), 1, mma=True)
    assert [r.module for r in dev.drain_launches()] == ["gemv_quant_direct"]
    odd = direct_weight(dev, "nvfp4", 257, 1024)
    assert not QuantLinear(odd).fuses_swiglu(kc, 1)
    with pytest.raises(ValueError, match="even n"):
        matmul_nvfp4.gemv_h2(kc, 0, dev.alloc(2048), odd, dev.alloc(512), "swiglu")
    with pytest.raises(ValueError, match="x"):
        matmul_nvfp4.gemv_h2(kc, 0, dev.alloc(2048) + 8, w, dev.alloc(512))
    with pytest.raises(ValueError, match="y"):
        matmul_nvfp4.gemv_h2(kc, 0, dev.alloc(2048), w, dev.alloc(1024) + 2, "f32")


@pytest.mark.parametrize("case", [
    lambda rng: nvfp4_linear_case(rng, 1, 1001, 1056, parts=2, h2=True),
    lambda rng: nvfp4_linear_case(rng, 1, 40, 20512, h2=True),
    lambda rng: nvfp4_linear_case(rng, 1, 301, 2048, parts=2, logits=True, h2=True),
    lambda rng: nvfp4_every_scale_case(rng, 1, 130, 1408, h2=True),
    lambda rng: swiglu_case(rng, "nvfp4", 1, 203, 1408, h2=True),
    lambda rng: nvfp4_linear_case(rng, 1, 259, 4096, h2=True, x_spikes=H2_SPIKES_OFF),
    lambda rng: nvfp4_linear_case(rng, 1, 40, 20512, h2=True, x_spikes=H2_SPIKES_LOOP),
    lambda rng: nvfp4_linear_case(rng, 1, 64, 4096, logits=True, h2=True,
                                  x_spikes=H2_SPIKES_LOGITS),
    lambda rng: nvfp4_linear_case(rng, 1, 130, 1408, h2=True, x_spikes=H2_SPIKES_EXTREME),
    lambda rng: swiglu_case(rng, "nvfp4", 1, 203, 1408, h2=True, x_spikes=H2_SPIKES_SWIGLU)])
def test_check_cases_route_to_the_h2_gemv_and_match_float64(case) -> None:
    """Each case forces the route its name says (ATLAS_QUANT_NVFP4_H2 aside) and, on the
    host backend (the reference kernels), matches the float64 oracle."""
    c = case(np.random.default_rng(3))
    assert c.name.startswith("gemv_nvfp4_h2") and c.module == "gemv_nvfp4"
    assert c.reference_abs_tol > 0.0
    result = check(HostBackend(), c)
    assert result.passed, result.detail


def _bf16(values: list[float]) -> np.ndarray:
    return f32_to_bf16_bits(np.array(values, np.float32))


def test_the_guard_exponent_puts_each_threads_largest_x_below_2_16() -> None:
    """e = 0 below 2^16 (bf16's 65,280 included), then the exponent putting the chunk max in
    [2^15, 2^16), per thread (chunk c on thread c % threads), raised, never lowered."""
    x = np.zeros((6, 32), np.float32)
    x[0, 5], x[1, 0], x[2, 31], x[3, 7], x[4, 1], x[5, 2] = (
        1e5, 65280.0, -3.0, -3e9, 3.38e38, 65536.0)
    e = h2_guard_exponents(f32_to_bf16_bits(x.reshape(-1)), threads=3, chunk=32, guard_exp=16)
    # threads 0: chunks 0, 3; 1: 1, 4; 2: 2, 5
    assert e.tolist() == [1, 0, 0, 16, 112, 1]
    assert (np.ldexp(np.abs(bf16_bits_to_f32(_bf16([1e5, 3e9, 3.38e38]))),
                     -np.array([1, 16, 112])) < 2 ** 16).all()


@pytest.mark.parametrize("spikes, k", [(H2_SPIKES_LOOP, 20512), (H2_SPIKES_EXTREME, 1408),
                                       (H2_SPIKES_LOGITS, 4096), (H2_SPIKES_OFF, 4096)])
def test_the_guard_keeps_massive_activations_finite_and_ordinary_bits_unchanged(
        spikes: dict[int, float], k: int) -> None:
    """Unguarded, an x of 2^16 or more overflows its f16 conversion (inf or NaN outputs);
    guarded, the outputs are finite and within the check's tolerance of float64; below
    2^16 the guard changes no bit."""
    rng = np.random.default_rng(5)
    n = 96
    packed = rng.integers(0, 256, (n, k // 2), dtype=np.uint8)
    s_codes = rng.integers(0x20, 0x48, (n, k // 16), dtype=np.uint8)
    g = np.full(n, 1.0 / k, np.float32)
    x = with_spikes(f32_to_bf16_bits(rng.uniform(-1, 1, (1, k)).astype(np.float32)),
                    spikes)[0]
    threads = min(256, -(-k // 2048) * 32)  # the launch's: roundup32(ceil(k / 64))
    guarded = h2_product(x, packed, s_codes, g, threads)
    plain = h2_product(x, packed, s_codes, g, threads, guard=False)
    exact = bf16_bits_to_f32(x).astype(np.float64) @ dequantize_nvfp4(packed, s_codes, g).T
    assert np.isfinite(guarded).all()
    rms = float(np.sqrt(np.mean(exact * exact)))
    assert np.abs(guarded - exact).max() <= 2.0 ** -8 * rms
    if max(abs(v) for v in spikes.values()) < 2 ** 16:
        assert guarded.tobytes() == plain.tobytes()
    else:
        assert not np.isfinite(plain).all()
