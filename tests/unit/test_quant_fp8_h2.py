"""The batch-1 FP8 GEMV on packed half-precision FMAs (gemv_fp8.cu gemv_fp8_h2_*, the NVFP4
kernel's loop in gemv_h2.cuh over the Fp8H2 format): its route switch (ATLAS_QUANT_FP8_H2),
the three products a decode step routes to it (qkv / o / down, the gate_up that ends with its
SwiGLU, a quantized LM head's logits) with their launch geometry on a mock Hopper device, the
routes it leaves as they were when switched off, its check cases end to end on the host
backend against float64, and the emulation of its f16 arithmetic (reference/gemv_fp8.
h2_product) against a float64 dequantized oracle within the kernel's stated error bound, its
range guard from |x| >= 16 included."""

from __future__ import annotations

import numpy as np
import pytest

from atlas.core.numerics import bf16_bits_to_f32, f32_to_bf16_bits, fp8_e4m3_to_f32
from atlas.core.quant import Fp8ScaleMap, dequantize_fp8
from atlas.runtime.cases.gemv_fp8 import fp8_linear_case, random_fp8
from atlas.runtime.cases.gemv_quant_direct import (FP8_H2_SPIKES_EXTREME, FP8_H2_SPIKES_LOOP,
                                                   FP8_H2_SPIKES_MID, FP8_H2_SPIKES_OFF,
                                                   FP8_H2_SPIKES_SWIGLU, FP8_H2_TINY,
                                                   swiglu_case)
from atlas.runtime.cases.quant_linear import with_spikes
from atlas.runtime.host import HostBackend
from atlas.runtime.kernel_check import check
from atlas.runtime.ops import KernelCache, matmul_quant
from atlas.runtime.ops.matmul_quant import Fp8Weight, QuantLinear
from atlas.runtime.ops.routes import KernelRoutes
from atlas.runtime.reference.gemv_fp8 import H2_CHUNK, H2_GUARD_EXP, h2_product
from atlas.runtime.reference.gemv_h2 import h2_guard_exponents
from tests.unit.quant_support import QUANT_MODULES, HopperQuantMock, direct_weight

H2 = KernelRoutes(quant_fp8_h2=True)
OFF = KernelRoutes.from_env({"ATLAS_QUANT_FP8_H2": "0"})


def _mock() -> HopperQuantMock:
    return HopperQuantMock(QUANT_MODULES + ("gemv_quant_direct",))


def _weight(dev: HopperQuantMock, layout: str, n: int, k: int) -> Fp8Weight:
    smap = {"block": lambda: Fp8ScaleMap.block(n, k), "channel": lambda: Fp8ScaleMap.channel(n),
            "tensor": Fp8ScaleMap.tensor}[layout]()
    return Fp8Weight(dev.alloc(n * k), dev.alloc(4 * int(np.prod(smap.shape or (1,)))), n, k,
                     smap)


def test_the_switch_parses_and_defaults_to_the_launch_builders_rule() -> None:
    assert KernelRoutes.from_env({}).quant_fp8_h2 is None
    assert KernelRoutes.from_env({"ATLAS_QUANT_FP8_H2": "1"}).quant_fp8_h2 is True
    assert OFF.quant_fp8_h2 is False
    dev = _mock()
    w = direct_weight(dev, "fp8", 256, 1024)
    assert matmul_quant.uses_fp8_h2(KernelCache(dev), w, 1) is matmul_quant.FP8_H2_BY_DEFAULT
    assert not matmul_quant.uses_fp8_h2(KernelCache(HostBackend()), w, 1)  # no module loaded
    assert not matmul_quant.uses_fp8_h2(KernelCache(dev, OFF), w, 1)


# k 12,288: 768 chunks, two full passes of 192 threads (matmul_h2.h2_threads)
@pytest.mark.parametrize("layout, k, threads", [("block", 4096, 128), ("block", 12288, 192),
                                                ("block", 1040, 64), ("channel", 3072, 96),
                                                ("tensor", 16, 32)])
def test_one_row_launches_four_rows_a_block_two_chunks_a_thread(layout: str, k: int,
                                                                threads: int) -> None:
    dev = _mock()
    n = 4101  # a last block with rows past n
    w = _weight(dev, layout, n, k)
    x, y = dev.alloc(2 * k), dev.alloc(2 * n)
    QuantLinear(w).linear(KernelCache(dev, H2), 0, x, y, 1)
    (rec,) = dev.drain_launches()
    assert (rec.module, rec.func) == ("gemv_fp8", "gemv_fp8_h2_bf16")
    assert rec.grid[0] == -(-n // 4) and rec.block[0] == threads and rec.shared == 0
    assert (rec.args["x"], rec.args["w"], rec.args["scale"], rec.args["y"]) == (
        x, w.codes, w.scales, y)
    assert (rec.args["m"], rec.args["n"], rec.args["k"]) == (1, n, k)
    assert (rec.args["row_shift"], rec.args["row_stride"], rec.args["col_shift"],
            rec.args["col_stride"]) == w.map_args


def test_logits_and_the_gate_up_swiglu_take_their_entry_points() -> None:
    dev = _mock()
    kc = KernelCache(dev, H2)
    head = QuantLinear(direct_weight(dev, "fp8", 151936, 4096))
    logits = dev.alloc(4 * 151936)
    head.linear(kc, 0, dev.alloc(2 * 4096), logits, 1, out_f32=True)
    (rec,) = dev.drain_launches()
    assert rec.func == "gemv_fp8_h2_f32" and rec.grid[0] == 151936 // 4
    assert rec.args["y"] == logits
    gate_up = QuantLinear(direct_weight(dev, "fp8", 2 * 12289, 4096))  # odd feature count
    assert gate_up.fuses_swiglu(kc, 1)
    act = dev.alloc(2 * 12289)
    gate_up.linear_swiglu(kc, 0, dev.alloc(2 * 4096), act, 1)
    (rec,) = dev.drain_launches()
    assert rec.func == "gemv_fp8_h2_swiglu_bf16" and rec.args["y"] == act
    assert rec.grid[0] == -(-12289 // 2) and rec.args["n"] == 2 * 12289  # two features a block


def test_switched_off_every_product_keeps_its_previous_route() -> None:
    """ATLAS_QUANT_FP8_H2=0: qkv / o / down and the gate_up + SwiGLU on the convert GEMVs
    (ATLAS_QUANT_FP8_CORE's and ATLAS_QUANT_FP8_CORE_SWIGLU's defaults), the logits on the
    convert GEMV's f32 twin."""
    dev = _mock()
    kc = KernelCache(dev, OFF)
    w = QuantLinear(direct_weight(dev, "fp8", 4096, 4096))
    w.linear(kc, 0, dev.alloc(2 * 4096), dev.alloc(2 * 4096), 1)
    w.linear(kc, 0, dev.alloc(2 * 4096), dev.alloc(4 * 4096), 1, out_f32=True)
    gate_up = QuantLinear(direct_weight(dev, "fp8", 2 * 1024, 4096))
    assert gate_up.fuses_swiglu(kc, 1)
    gate_up.linear_swiglu(kc, 0, dev.alloc(2 * 4096), dev.alloc(2 * 1024), 1)
    funcs = [(r.module, r.func) for r in dev.drain_launches()]
    assert funcs[0] == ("gemv_fp8", "gemv_fp8_cvt_bf16_single")
    assert funcs[1] == ("gemv_fp8", "gemv_fp8_cvt_f32_single")
    assert funcs[2] == ("gemv_fp8", "gemv_fp8_cvt_swiglu_x8_single")
    assert not any("h2" in f for _, f in funcs)


@pytest.mark.parametrize("m", [2, 8])
def test_more_rows_and_a_forced_tensor_core_product_are_not_taken(m: int) -> None:
    dev = _mock()
    kc = KernelCache(dev, H2)
    w = direct_weight(dev, "fp8", 256, 1024)
    QuantLinear(w).linear(kc, 0, dev.alloc(2 * m * 1024), dev.alloc(2 * m * 256), m)
    matmul_quant.linear_quant(kc, 0, dev.alloc(2048), w, dev.alloc(512), 1, mma=True)
    assert [r.module for r in dev.drain_launches()] == ["gemv_quant_direct"] * 2
    odd = direct_weight(dev, "fp8", 257, 1024)
    assert not QuantLinear(odd).fuses_swiglu(kc, 1)
    with pytest.raises(ValueError, match="even n"):
        matmul_quant.gemv_fp8_h2(kc, 0, dev.alloc(2048), odd, dev.alloc(512), "swiglu")
    with pytest.raises(ValueError, match="x pointer"):
        matmul_quant.gemv_fp8_h2(kc, 0, dev.alloc(2048) + 8, w, dev.alloc(512))


@pytest.mark.parametrize("case", [
    lambda rng: fp8_linear_case(rng, "block", 1, 1001, 1040, h2=True),
    lambda rng: fp8_linear_case(rng, "channel", 1, 67, 20496, h2=True),
    lambda rng: fp8_linear_case(rng, "tensor", 1, 301, 2048, logits=True, h2=True),
    lambda rng: swiglu_case(rng, "block", 1, 203, 1408, h2=True),
    lambda rng: fp8_linear_case(rng, "block", 1, 259, 4096, h2=True, x_spikes=FP8_H2_SPIKES_OFF),
    lambda rng: fp8_linear_case(rng, "block", 1, 130, 4096, h2=True, x_spikes=FP8_H2_SPIKES_MID),
    lambda rng: fp8_linear_case(rng, "block", 1, 40, 20496, h2=True,
                                x_spikes=FP8_H2_SPIKES_LOOP),
    lambda rng: fp8_linear_case(rng, "block", 1, 130, 1408, h2=True,
                                x_spikes=FP8_H2_SPIKES_EXTREME),
    lambda rng: fp8_linear_case(rng, "block", 1, 259, 4096, h2=True, x_spikes=FP8_H2_TINY),
    lambda rng: swiglu_case(rng, "block", 1, 203, 1408, h2=True, x_spikes=FP8_H2_SPIKES_SWIGLU)])
def test_check_cases_route_to_the_h2_gemv_and_match_float64(case) -> None:
    """Each case forces the route its name says (ATLAS_QUANT_FP8_H2 aside), is selected by
    the device check's filter `-k "fp8 h2"`, and on the host backend (the reference kernels)
    matches the float64 oracle."""
    c = case(np.random.default_rng(3))
    assert "fp8 h2" in c.name and c.module == "gemv_fp8"
    assert c.reference_abs_tol > 0.0
    result = check(HostBackend(), c)
    assert result.passed, result.detail


def _bf16(values: list[float]) -> np.ndarray:
    return f32_to_bf16_bits(np.array(values, np.float32))


def test_the_guard_exponent_puts_each_threads_largest_x_below_16() -> None:
    """e = 0 below 16 (bf16's 15.94 included), then the exponent putting the chunk max in
    [8, 16), per thread (chunk c on thread c % threads), raised, never lowered."""
    x = np.zeros((6, H2_CHUNK), np.float32)
    x[0, 5], x[1, 0], x[2, 15], x[3, 7], x[4, 1], x[5, 2] = (
        200.0, 15.9375, -3.0, -3e9, 3.38e38, 16.0)
    e = h2_guard_exponents(f32_to_bf16_bits(x.reshape(-1)), 3, H2_CHUNK, H2_GUARD_EXP)
    # threads 0: chunks 0, 3; 1: 1, 4; 2: 2, 5
    assert e.tolist() == [4, 0, 0, 28, 124, 1]
    top = np.ldexp(np.abs(bf16_bits_to_f32(_bf16([200.0, 3e9, 3.38e38, 16.0]))),
                   -np.array([4, 28, 124, 1]))
    assert ((top >= 8) & (top < 16)).all()


def _operands(rng: np.random.Generator, n: int, k: int, spikes: dict[int, float] | None
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray, Fp8ScaleMap]:
    codes, scales, smap = random_fp8(rng, n, k, "block")
    x = with_spikes(f32_to_bf16_bits(rng.uniform(-1, 1, (1, k)).astype(np.float32)), spikes)[0]
    return x, codes, scales, smap


def _chunk_bound(x: np.ndarray, codes: np.ndarray, scales: np.ndarray, smap: Fp8ScaleMap,
                 threads: int) -> np.ndarray:
    """gemv_fp8.cu's stated bound [n]: per 16-value chunk c, s_c (2^-8 sum |x_i v_i| (with
    1% for the rounding of the bound's own partial sums) + 2^(e_c - 25) x 16 x 449 (x and
    running sums below f16's normals)), summed over the chunks, plus the f32 rounding of the
    output."""
    n, k = codes.shape
    xf = np.abs(bf16_bits_to_f32(x).astype(np.float64)).reshape(-1, H2_CHUNK)
    v = np.abs(fp8_e4m3_to_f32(codes).astype(np.float64)).reshape(n, -1, H2_CHUNK)
    s = np.abs(smap.expand(scales, n, k)[:, ::H2_CHUNK].astype(np.float64))
    e = h2_guard_exponents(x, threads, H2_CHUNK, H2_GUARD_EXP)
    rel = 1.01 * 2.0 ** -8 * (v * xf[None]).sum(axis=2)
    return (s * (rel + np.ldexp(16.0 * 449.0, e - 25)[None])).sum(axis=1)


@pytest.mark.parametrize("spikes, k", [(None, 4096), (FP8_H2_SPIKES_OFF, 4096),
                                       (FP8_H2_SPIKES_MID, 4096), (FP8_H2_SPIKES_LOOP, 20496),
                                       (FP8_H2_SPIKES_EXTREME, 1408), (FP8_H2_TINY, 4096)])
def test_the_emulation_is_within_the_stated_bound_of_float64(spikes: dict[int, float] | None,
                                                             k: int) -> None:
    """The reference's outputs (before the bf16 rounding) differ from the float64 product
    of the dequantized weight by no more than the kernel comment's per-chunk bound, and
    (random signs) by far less in RMS: under 2^-10 of the outputs' RMS. With x at 16 or
    more, the guard keeps every output finite where the unguarded sums overflow, and below
    16 it changes no bit."""
    rng = np.random.default_rng(7)
    n = 96
    x, codes, scales, smap = _operands(rng, n, k, spikes)
    threads = min(256, max(32, -(-(k // 16) // 64) * 32))  # the launch's: roundup32(ceil(k / 32))
    got = h2_product(x, codes, scales, smap, threads).astype(np.float64)
    exact = bf16_bits_to_f32(x).astype(np.float64) @ dequantize_fp8(codes, scales, smap).T
    assert np.isfinite(got).all()
    top = max(abs(v) for v in spikes.values()) if spikes else 0.0
    bound = _chunk_bound(x, codes, scales, smap, threads) + 2.0 ** -24 * np.abs(exact)
    assert (np.abs(got - exact) <= bound).all()
    if top < 2 ** 16:  # no x lost below 2^-17 of its thread's largest
        rms = float(np.sqrt(np.mean(exact * exact)))
        assert float(np.sqrt(np.mean((got - exact) ** 2))) <= 2.0 ** -10 * rms
    plain = h2_product(x, codes, scales, smap, threads, guard=False)
    if top < 16:
        assert got.astype(np.float32).tobytes() == plain.tobytes()
    else:  # 200 and more: products of the largest codes overflow f16 unguarded
        assert not np.isfinite(plain).all()
