"""Host number formats (atlas.core.numerics) against independent scalar references.

Each reference below is written from the format's definition in plain Python (struct,
integers, math.ldexp, exact float64 distances), not from the vectorized bit tricks under
test, so a shared mistake would have to be made twice in two different ways.
"""

from __future__ import annotations

import math
import struct

import numpy as np
import pytest

from atlas.core.numerics import (
    E2M1_LUT,
    E2M1_MAGNITUDES,
    E2M1_THRESHOLD_BITS,
    E4M3_MAX,
    E4M3_NAN,
    FP8_E4M3_LUT,
    FP8_E5M2_LUT,
    bf16_bits_to_f32,
    e2m1_to_f32,
    f32_to_bf16_bits,
    f32_to_e2m1,
    f32_to_fp8_e4m3,
    fp8_e4m3_to_f32,
    fp8_e5m2_to_f32,
    mxfp4_to_bf16_bits,
    mxfp4_to_f32,
    pack_e2m1,
    round_bf16,
    unpack_e2m1,
)


def _f32(bits: int) -> float:
    return struct.unpack("<f", struct.pack("<I", bits))[0]


def _bits(value: float) -> int:
    return struct.unpack("<I", struct.pack("<f", value))[0]


# --------------------------------------------------------------------------------------
# bf16
# --------------------------------------------------------------------------------------


def _ref_bf16(bits: int) -> int:
    """Nearest bf16 by exact distance, ties to even; 2^128 stands in for +Inf's slot."""
    if (bits & 0x7F800000) == 0x7F800000 and bits & 0x007FFFFF:
        return (bits >> 16) | 0x0040  # NaN: quieted, sign and top payload kept
    x = abs(_f32(bits))
    sign = bits & 0x80000000
    down = (bits & 0x7FFFFFFF) >> 16  # truncation toward zero: a bf16 code <= |x|
    if x == _f32(down << 16):
        return bits >> 16
    up = down + 1

    def value(code: int) -> float:
        return 2.0 ** 128 if code == 0x7F80 else _f32(code << 16)

    below, above = x - value(down), value(up) - x  # exact in float64
    if below < above or (below == above and down % 2 == 0):
        pick = down
    else:
        pick = up
    return (sign >> 16) | pick


def _check_bf16(bits: np.ndarray) -> None:
    got = f32_to_bf16_bits(bits.astype(np.uint32).view(np.float32))
    want = np.array([_ref_bf16(int(b)) for b in bits], dtype=np.uint16)
    bad = np.flatnonzero(got != want)
    assert bad.size == 0, (f"{bad.size} mismatches, first input 0x{int(bits[bad[0]]):08x}: "
                           f"got 0x{int(got[bad[0]]):04x} want 0x{int(want[bad[0]]):04x}")


def test_bf16_random_bit_patterns_over_whole_u32_space() -> None:
    rng = np.random.default_rng(1234)
    _check_bf16(rng.integers(0, 1 << 32, size=60_000, dtype=np.uint64).astype(np.uint32))


@pytest.mark.parametrize("low", [0x0000, 0x0001, 0x7FFF, 0x8000, 0x8001, 0xFFFF])
def test_bf16_every_upper_half_with_boundary_low_halves(low: int) -> None:
    """All 65,536 upper halves, so every tie (low == 0x8000, even and odd upper), every
    NaN/Inf/subnormal/zero class and the overflow-to-Inf edge are visited."""
    _check_bf16((np.arange(1 << 16, dtype=np.uint32) << np.uint32(16)) | np.uint32(low))


def test_bf16_named_edge_cases() -> None:
    cases = {
        0x3F808000: 0x3F80,  # 1 + half ulp, even upper: stays
        0x3F818000: 0x3F82,  # odd upper: rounds up to even
        0x7F7F7FFF: 0x7F7F,  # just under the overflow midpoint: max finite bf16
        0x7F7F8000: 0x7F80,  # overflow midpoint ties to even, which is +Inf
        0xFF7F8000: 0xFF80,  # same, negative
        0x7F800000: 0x7F80, 0xFF800000: 0xFF80,  # +-Inf
        0x00000000: 0x0000, 0x80000000: 0x8000,  # +-0
        0x00000001: 0x0000, 0x80008000: 0x8000,  # subnormals rounding to +-0
        0x00018000: 0x0002,  # subnormal tie, odd -> even upward
    }
    bits = np.array(list(cases), dtype=np.uint32)
    assert f32_to_bf16_bits(bits.view(np.float32)).tolist() == list(cases.values())


@pytest.mark.parametrize("bits", [0x7FC00000, 0x7F800001, 0xFFC00000, 0xFF800001, 0x7FFFFFFF])
def test_bf16_nan_stays_nan_quiet_and_keeps_sign(bits: int) -> None:
    out = int(f32_to_bf16_bits(np.array([bits], dtype=np.uint32).view(np.float32))[0])
    assert (out & 0x7F80) == 0x7F80 and (out & 0x0040), f"0x{out:04x} is not a quiet NaN"
    assert out >> 15 == bits >> 31


def test_bf16_widening_is_exact_and_round_bf16_is_idempotent() -> None:
    codes = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16)
    widened = bf16_bits_to_f32(codes)
    assert np.array_equal(widened.view(np.uint32), codes.astype(np.uint32) << np.uint32(16))
    finite = widened[np.isfinite(widened)]
    assert np.array_equal(round_bf16(finite), finite)


# --------------------------------------------------------------------------------------
# FP8 E4M3 / E5M2
# --------------------------------------------------------------------------------------


def _ref_minifloat(code: int, exp_bits: int, man_bits: int, bias: int) -> float:
    sign = -1.0 if code >> (exp_bits + man_bits) else 1.0
    e = (code >> man_bits) & ((1 << exp_bits) - 1)
    m = code & ((1 << man_bits) - 1)
    if e == 0:
        return sign * math.ldexp(m, 1 - bias - man_bits)
    return sign * math.ldexp((1 << man_bits) + m, e - bias - man_bits)


def _ref_e4m3(code: int) -> float:
    return math.nan if code & 0x7F == 0x7F else _ref_minifloat(code, 4, 3, 7)


def test_e4m3_every_code_matches_the_definition() -> None:
    assert FP8_E4M3_LUT.dtype == np.float32 and FP8_E4M3_LUT.shape == (256,)
    for code in range(256):
        want, got = _ref_e4m3(code), float(FP8_E4M3_LUT[code])
        if math.isnan(want):
            assert math.isnan(got), f"code 0x{code:02x}"
        else:
            assert got == want and math.copysign(1, got) == math.copysign(1, want), \
                f"code 0x{code:02x}: {got} != {want}"
    assert np.array_equal(fp8_e4m3_to_f32(np.arange(256)), FP8_E4M3_LUT, equal_nan=True)


def test_e4m3_landmarks() -> None:
    assert FP8_E4M3_LUT[0x7E] == E4M3_MAX == 448.0 and FP8_E4M3_LUT[0xFE] == -448.0
    assert FP8_E4M3_LUT[0x01] == 2.0 ** -9 and FP8_E4M3_LUT[0x08] == 2.0 ** -6
    assert FP8_E4M3_LUT[0x38] == 1.0
    assert np.flatnonzero(np.isnan(FP8_E4M3_LUT)).tolist() == [0x7F, 0xFF]
    assert not np.isinf(FP8_E4M3_LUT).any()


def test_e4m3_encoder_round_trips_every_finite_code() -> None:
    codes = np.array([c for c in range(256) if c & 0x7F != 0x7F], dtype=np.uint8)
    assert np.array_equal(f32_to_fp8_e4m3(FP8_E4M3_LUT[codes]), codes)


def _ref_e4m3_encode(x: float) -> int:
    """Brute-force nearest finite E4M3 value; ties to the even code; saturation at 448
    follows from 'nearest finite'. Candidates share x's sign so -0 stays -0."""
    if math.isnan(x):
        return E4M3_NAN
    base = 0x80 if math.copysign(1.0, x) < 0 else 0x00
    best, best_dist = base, math.inf
    for code in range(base, base + 0x7F):
        dist = abs(x - _ref_e4m3(code))
        if dist < best_dist or (dist == best_dist and code % 2 == 0):
            best, best_dist = code, dist
    return best


def _check_e4m3_encode(values: np.ndarray) -> None:
    values = values.astype(np.float32)
    got = f32_to_fp8_e4m3(values)
    want = np.array([_ref_e4m3_encode(float(v)) for v in values], dtype=np.uint8)
    bad = np.flatnonzero(got != want)
    assert bad.size == 0, (f"{bad.size} mismatches, first {float(values[bad[0]])!r}: "
                           f"got 0x{int(got[bad[0]]):02x} want 0x{int(want[bad[0]]):02x}")


def test_e4m3_encoder_random_values_against_brute_force() -> None:
    rng = np.random.default_rng(7)
    n = 6000
    magnitudes = np.exp2(rng.uniform(-13.0, 10.0, n))  # below the subnormals to past 448
    _check_e4m3_encode(np.where(rng.random(n) < 0.5, -1.0, 1.0) * magnitudes)


def test_e4m3_encoder_ties_go_to_even_and_near_ties_do_not() -> None:
    finite = FP8_E4M3_LUT[:0x7F].astype(np.float64)
    mids = ((finite[:-1] + finite[1:]) / 2).astype(np.float32)  # exact in f32
    assert np.array_equal((finite[:-1] + finite[1:]) / 2, mids)
    around = np.concatenate([mids, np.nextafter(mids, np.float32(0)),
                             np.nextafter(mids, np.float32(np.inf))])
    _check_e4m3_encode(np.concatenate([around, -around]))
    # Explicitly: 1.0625 lies between 1.0 (0x38, even) and 1.125 (0x39): goes to 0x38.
    assert f32_to_fp8_e4m3(np.float32([1.0625, 1.1875])).tolist() == [0x38, 0x3A]


def test_e4m3_overflow_saturates_and_nan_is_0x7f() -> None:
    x = np.float32([448.0, 463.99, 464.0, 480.0, 1e30, np.inf, -500.0, -np.inf,
                    np.nan, -np.nan, -1e-9, 0.0, -0.0, 2.0 ** -10, 2.0 ** -10 * 3])
    assert f32_to_fp8_e4m3(x).tolist() == [
        0x7E, 0x7E, 0x7E, 0x7E, 0x7E, 0x7E, 0xFE, 0xFE,
        E4M3_NAN, E4M3_NAN, 0x80, 0x00, 0x80, 0x00, 0x02]


def test_e5m2_every_code_matches_the_definition_and_ieee_half() -> None:
    for code in range(256):
        e, m = (code >> 2) & 0x1F, code & 3
        got = float(FP8_E5M2_LUT[code])
        if e == 0x1F:
            assert (math.isinf(got) and got > 0) == (code == 0x7C)
            assert (math.isinf(got) and got < 0) == (code == 0xFC)
            assert math.isnan(got) == (m != 0)
        else:
            assert got == _ref_minifloat(code, 5, 2, 15), f"code 0x{code:02x}"
    # E5M2 is the top byte of an IEEE half: an independent decoder for free.
    half = (np.arange(256, dtype=np.uint16) << np.uint16(8)).view(np.float16).astype(np.float32)
    assert np.array_equal(fp8_e5m2_to_f32(np.arange(256)), half, equal_nan=True)
    assert FP8_E5M2_LUT[0x7B] == 57344.0


# --------------------------------------------------------------------------------------
# E2M1
# --------------------------------------------------------------------------------------


def test_e2m1_table_is_the_nvfp4_value_set() -> None:
    assert E2M1_MAGNITUDES == (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)
    for code in range(16):
        want = _ref_minifloat(code, 2, 1, 1)
        assert E2M1_LUT[code] == want and math.copysign(1, E2M1_LUT[code]) == math.copysign(1, want)
    assert E2M1_LUT[:8].tolist() == list(E2M1_MAGNITUDES)
    assert np.array_equal(e2m1_to_f32(np.arange(256)), np.tile(E2M1_LUT, 16))


def test_e2m1_thresholds_are_the_midpoints() -> None:
    mids = [(a + b) / 2 for a, b in zip(E2M1_MAGNITUDES, E2M1_MAGNITUDES[1:])]
    assert [_f32(b) for b in E2M1_THRESHOLD_BITS] == mids


def _ref_e2m1_encode(x: float) -> int:
    """Brute-force nearest magnitude; a tie goes to the larger magnitude (the book's
    `abs >= midpoint` rule); NaN and beyond-range saturate to 6; sign bit always copied."""
    sign = 8 if math.copysign(1.0, x) < 0 else 0
    if math.isnan(x):
        return sign | 7
    a = abs(x)
    best = 0
    for i, level in enumerate(E2M1_MAGNITUDES):
        if abs(a - level) <= abs(a - E2M1_MAGNITUDES[best]):
            best = i
    return sign | best


def _check_e2m1_encode(values: np.ndarray) -> None:
    values = values.astype(np.float32)
    got = f32_to_e2m1(values)
    want = np.array([_ref_e2m1_encode(float(v)) for v in values], dtype=np.uint8)
    bad = np.flatnonzero(got != want)
    assert bad.size == 0, (f"{bad.size} mismatches, first {float(values[bad[0]])!r}: "
                           f"got {int(got[bad[0]])} want {int(want[bad[0]])}")


def test_e2m1_encoder_random_values_against_brute_force() -> None:
    rng = np.random.default_rng(99)
    _check_e2m1_encode(rng.uniform(-8.0, 8.0, 20_000))
    _check_e2m1_encode(rng.standard_normal(5_000) * 1e-3)


def test_e2m1_ties_round_away_from_zero_and_neighbours_do_not() -> None:
    mids = np.array([_f32(b) for b in E2M1_THRESHOLD_BITS], dtype=np.float32)
    below = np.nextafter(mids, np.float32(0))
    assert f32_to_e2m1(mids).tolist() == [1, 2, 3, 4, 5, 6, 7]
    assert f32_to_e2m1(-mids).tolist() == [9, 10, 11, 12, 13, 14, 15]
    assert f32_to_e2m1(below).tolist() == [0, 1, 2, 3, 4, 5, 6]
    _check_e2m1_encode(np.concatenate([mids, below, np.nextafter(mids, np.float32(9)), -below]))


def test_e2m1_round_trip_saturation_and_specials() -> None:
    assert np.array_equal(f32_to_e2m1(E2M1_LUT), np.arange(16, dtype=np.uint8))
    x = np.float32([6.0, 7.0, 1e30, np.inf, -np.inf, np.nan, -np.nan, -0.1, -0.0, 0.0, 1e-40])
    assert f32_to_e2m1(x).tolist() == [7, 7, 7, 7, 15, 7, 15, 8, 8, 0, 0]


def test_e2m1_pack_layout_and_round_trip() -> None:
    codes = np.arange(16, dtype=np.uint8).reshape(2, 8)
    packed = pack_e2m1(codes)
    assert packed.shape == (2, 4)
    assert packed[0].tolist() == [0x10, 0x32, 0x54, 0x76]  # element 2i in the low nibble
    assert np.array_equal(unpack_e2m1(packed), codes)
    with pytest.raises(ValueError, match="even"):
        pack_e2m1(np.zeros(3, dtype=np.uint8))


# --------------------------------------------------------------------------------------
# MXFP4 (gpt-oss's released experts): E2M1 pairs, one E8M0 exponent per 32 elements
# --------------------------------------------------------------------------------------


def test_mxfp4_hand_made_blocks() -> None:
    """Row 0: codes 1, 2 (0.5, 1.0) in byte 0, 9, 15 (-0.5, -6.0) in byte 1, scale 2^1; row
    1: code 7 (6.0) as element 0 and code 1 as element 31, scale 2^-7; rows x 2 groups."""
    blocks = np.zeros((2, 2, 16), dtype=np.uint8)
    blocks[0, 0, :2] = [0x21, 0xF9]
    blocks[1, 1, [0, 15]] = [0x07, 0x10]
    scales = np.array([[128, 127], [0, 120]], dtype=np.uint8)
    got = mxfp4_to_f32(blocks, scales)
    want = np.zeros((2, 64), dtype=np.float32)
    want[0, :4] = [1.0, 2.0, -1.0, -12.0]
    want[1, 32], want[1, 63] = 6.0 * 2.0**-7, 0.5 * 2.0**-7
    assert got.dtype == np.float32 and np.array_equal(got, want)
    tiny = mxfp4_to_f32(np.full((1, 16), 0x11, np.uint8), np.zeros(1, np.uint8))
    assert np.all(tiny == np.float32(2.0**-128))  # scale 0: 2^-127, subnormal but exact


def test_mxfp4_refuses_what_it_cannot_decode() -> None:
    blocks = np.full((1, 16), 0x77, np.uint8)
    with pytest.raises(ValueError, match="do not pair up"):
        mxfp4_to_f32(blocks, np.zeros((2,), np.uint8))
    with pytest.raises(ValueError, match=r"MXFP4 scale 255 \(E8M0 NaN\) at block \[0\]"):
        mxfp4_to_f32(blocks, np.array([255], np.uint8))
    with pytest.raises(ValueError, match=r"overflows float32"):
        mxfp4_to_f32(blocks, np.array([253], np.uint8))  # 6 x 2^126 = 1.5 x 2^128
    assert mxfp4_to_f32(blocks, np.array([252], np.uint8)).max() == np.float32(6.0 * 2.0**125)


def test_mxfp4_bf16_table_is_the_float32_decode() -> None:
    """Every byte at every scale (the loader's fast path), and the scales that may overflow
    taken by the float32 path: the same bits where they decode, its error where not."""
    blocks = np.broadcast_to(np.arange(256, dtype=np.uint8).reshape(16, 16), (256, 16, 16))
    scales = np.repeat(np.arange(256, dtype=np.uint8)[:, None], 16, axis=1)
    ok = slice(0, 253)
    got = mxfp4_to_bf16_bits(blocks[ok], scales[ok])
    assert got.dtype == np.uint16 and got.shape == (253, 512)
    assert np.array_equal(got, f32_to_bf16_bits(mxfp4_to_f32(blocks[ok], scales[ok])))
    small = np.full((1, 16), 0x23, np.uint8)  # 1.0 and 1.5: no overflow at 2^126
    assert np.array_equal(mxfp4_to_bf16_bits(small, np.array([253], np.uint8)),
                          f32_to_bf16_bits(mxfp4_to_f32(small, np.array([253], np.uint8))))
    with pytest.raises(ValueError, match="overflows float32"):
        mxfp4_to_bf16_bits(blocks[253], scales[253])


# --------------------------------------------------------------------------------------
# Parity with torch, where it is installed (the GPU machine): the book promises it.
# --------------------------------------------------------------------------------------


def test_parity_with_torch_where_available() -> None:
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(5)
    f = rng.integers(0, 1 << 32, size=200_000, dtype=np.uint64).astype(np.uint32).view(np.float32)
    f = f[~np.isnan(f)]  # torch canonicalises NaN to 0x7FC0; we keep the sign (tested above)
    theirs = torch.from_numpy(f.copy()).to(torch.bfloat16).view(torch.int16).numpy()
    assert np.array_equal(theirs.view(np.uint16), f32_to_bf16_bits(f))
    codes = torch.arange(256, dtype=torch.uint8)
    assert np.array_equal(codes.view(torch.float8_e4m3fn).float().numpy(), FP8_E4M3_LUT,
                          equal_nan=True)
    assert np.array_equal(codes.view(torch.float8_e5m2).float().numpy(), FP8_E5M2_LUT,
                          equal_nan=True)
    g = (rng.standard_normal(50_000) * np.exp2(rng.uniform(-12, 9, 50_000))).astype(np.float32)
    g = g[np.abs(g) < 464]  # torch turns |x| >= 480 into NaN where we saturate
    theirs8 = torch.from_numpy(g).to(torch.float8_e4m3fn).view(torch.uint8).numpy()
    assert np.array_equal(theirs8, f32_to_fp8_e4m3(g))
