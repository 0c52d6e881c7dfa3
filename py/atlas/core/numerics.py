"""Bit-exact number formats on the host: bf16 (round-to-nearest-even), FP8 E4M3/E5M2, E2M1.

numpy has no bf16, FP8 or FP4 types, so on the host these values live as integer bit
patterns (uint16 for bf16, one uint8 per FP8 or E2M1 code) and this module is the single
definition of how Atlas rounds into them and widens out of them. Reference kernels,
weight loaders and tests all go through it, so a host result and a GPU result can be
compared byte for byte.

Format summary (the book's NVFP4 and FP8 chapters):

* bf16: the top 16 bits of an f32; rounding is nearest-even, matching torch's
  ``float32 -> bfloat16`` and CUDA's ``__float2bfloat16_rn``.
* FP8 E4M3 (OCP "e4m3fn"): sign, 4 exponent bits (bias 7), 3 mantissa bits. No infinity;
  S.1111.111 (0x7F / 0xFF) is NaN, so the largest finite value is 448.
* FP8 E5M2: sign, 5 exponent bits (bias 15), 2 mantissa bits, IEEE-style Inf and NaN.
* E2M1 (the NVFP4 element): sign, 2 exponent bits (bias 1), 1 mantissa bit; magnitudes
  {0, 0.5, 1, 1.5, 2, 3, 4, 6}. No Inf, no NaN.
"""

from __future__ import annotations

import functools

import numpy as np

# --------------------------------------------------------------------------------------
# bf16
# --------------------------------------------------------------------------------------


def f32_to_bf16_bits(x: np.ndarray) -> np.ndarray:
    """Round float32 to bf16 (nearest, ties to even) and return the uint16 bit patterns.

    NaN stays NaN (quiet, sign kept); +-Inf and values that overflow round to +-Inf.
    """
    f = np.ascontiguousarray(x, dtype=np.float32)
    u = f.view(np.uint32)
    rounding = np.uint32(0x7FFF) + ((u >> np.uint32(16)) & np.uint32(1))
    rounded = ((u + rounding) >> np.uint32(16)).astype(np.uint16)
    is_nan = np.isnan(f)
    if is_nan.any():
        rounded = np.where(is_nan, ((u >> np.uint32(16)) | np.uint32(0x40)).astype(np.uint16),
                           rounded)
    return rounded


def bf16_bits_to_f32(b: np.ndarray) -> np.ndarray:
    """Widen uint16 bf16 bit patterns to float32 (exact)."""
    return (np.asarray(b, dtype=np.uint16).astype(np.uint32) << np.uint32(16)).view(np.float32)


def round_bf16(x: np.ndarray) -> np.ndarray:
    """Round float32 values to the nearest bf16 and return them as float32."""
    return bf16_bits_to_f32(f32_to_bf16_bits(x))


# --------------------------------------------------------------------------------------
# FP8 (E4M3 and E5M2)
# --------------------------------------------------------------------------------------


def _minifloat_magnitudes(exp_bits: int, man_bits: int, bias: int) -> np.ndarray:
    """Magnitudes of every sign-less code of a small IEEE-like format, as float64.

    Exponent field 0 is subnormal (m * 2^(1-bias-man_bits)); the rest are normal
    (1 + m/2^man_bits) * 2^(e-bias). Special codes (Inf/NaN) are patched by the caller,
    because E4M3 and E5M2 disagree about them.
    """
    codes = np.arange(1 << (exp_bits + man_bits))
    exp_field = codes >> man_bits
    mantissa = codes & ((1 << man_bits) - 1)
    subnormal = np.ldexp(mantissa.astype(np.float64), 1 - bias - man_bits)
    normal = np.ldexp(1.0 + mantissa / float(1 << man_bits), exp_field - bias)
    return np.where(exp_field == 0, subnormal, normal)


def _signed_table(magnitudes: np.ndarray) -> np.ndarray:
    """Code table with the sign in the top bit: [+magnitudes, -magnitudes] as float32."""
    return np.concatenate([magnitudes, -magnitudes]).astype(np.float32)


def _build_e4m3_table() -> np.ndarray:
    mags = _minifloat_magnitudes(exp_bits=4, man_bits=3, bias=7)
    mags[0x7F] = np.nan  # S.1111.111 is the only NaN; there is no Inf.
    return _signed_table(mags)


def _build_e5m2_table() -> np.ndarray:
    mags = _minifloat_magnitudes(exp_bits=5, man_bits=2, bias=15)
    mags[0x7C] = np.inf
    mags[0x7D:0x80] = np.nan
    return _signed_table(mags)


FP8_E4M3_LUT: np.ndarray = _build_e4m3_table()
"""float32[256]: the value of every E4M3 code (0x7F and 0xFF are NaN)."""
FP8_E4M3_LUT.flags.writeable = False

FP8_E5M2_LUT: np.ndarray = _build_e5m2_table()
"""float32[256]: the value of every E5M2 code (0x7C/0xFC are +-Inf, 0x7D-0x7F/0xFD-0xFF NaN)."""
FP8_E5M2_LUT.flags.writeable = False

E4M3_MAX = 448.0
E4M3_NAN = 0x7F
_E4M3_MAX_CODE = 0x7E
_E4M3_MIN_NORMAL_EXP = -6  # exponent of 2^-6, the smallest normal E4M3 magnitude


def fp8_e4m3_to_f32(codes: np.ndarray) -> np.ndarray:
    """Decode E4M3 codes (any integer array, uint8 range) to float32 (exact)."""
    return FP8_E4M3_LUT[np.asarray(codes, dtype=np.uint8)]


def fp8_e5m2_to_f32(codes: np.ndarray) -> np.ndarray:
    """Decode E5M2 codes (any integer array, uint8 range) to float32 (exact)."""
    return FP8_E5M2_LUT[np.asarray(codes, dtype=np.uint8)]


def f32_to_fp8_e4m3(x: np.ndarray) -> np.ndarray:
    """Encode float32 to E4M3 codes: round to nearest, ties to even, saturating.

    Overflow behaviour (chosen to match PTX ``cvt.rn.satfinite.e4m3x2.f32``, which the
    GPU kernels use): any finite value or infinity beyond +-448 becomes +-448 (0x7E/0xFE),
    and NaN becomes 0x7F whatever its sign. Saturation is what a scaled quantizer wants: a
    value slightly past the calibrated range is clipped, not turned into a NaN that poisons
    a whole GEMM. (torch's ``.to(torch.float8_e4m3fn)`` differs only here: it yields NaN
    for |x| >= 480.) Negative values that round to zero keep their sign (0x80).

    The arithmetic is the integer one a GPU would do: for E4M3-normal inputs, round the
    f32 mantissa from 23 to 3 bits in place (a carry correctly bumps the exponent) and
    rebias; for E4M3-subnormal inputs, the value is an integer multiple of 2^-9, and
    rounding |x| * 2^9 to an integer (ties to even) gives the code directly.
    """
    f = np.ascontiguousarray(x, dtype=np.float32)
    u = f.view(np.uint32)
    sign = ((u >> np.uint32(24)) & np.uint32(0x80)).astype(np.uint8)
    mag = u & np.uint32(0x7FFFFFFF)

    # Normal range: keep exponent + 3 mantissa bits, round-to-nearest-even on the 20 dropped
    # bits, then move the exponent bias from 127 to 7 (subtract 120 << 3 from the code).
    # Saturate before the subtraction so huge exponents cannot wrap around.
    rounded = (mag + np.uint32(0x7FFFF) + ((mag >> np.uint32(20)) & np.uint32(1))) >> np.uint32(20)
    rebias = np.uint32((127 - 7) << 3)
    normal = np.minimum(np.maximum(rounded, rebias) - rebias, np.uint32(_E4M3_MAX_CODE))

    # Subnormal range (|x| < 2^-6): code = rint(|x| * 2^9); rint is ties-to-even and the
    # product is exact. A result of 8 is the smallest normal code, which is also right.
    small = np.abs(f) < np.float32(2.0 ** _E4M3_MIN_NORMAL_EXP)
    subnormal = np.rint(np.abs(np.where(small, f, 0)) * np.float32(512.0)).astype(np.uint32)

    code = np.where(small, subnormal, normal).astype(np.uint8) | sign
    return np.where(np.isnan(f), np.uint8(E4M3_NAN), code).astype(np.uint8)


# --------------------------------------------------------------------------------------
# E2M1 (FP4, the NVFP4 element)
# --------------------------------------------------------------------------------------

E2M1_MAGNITUDES: tuple[float, ...] = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)

E2M1_LUT: np.ndarray = _signed_table(
    _minifloat_magnitudes(exp_bits=2, man_bits=1, bias=1))
"""float32[16]: the value of every E2M1 nibble; bit 3 is the sign (0x8 is -0.0)."""
E2M1_LUT.flags.writeable = False

E2M1_THRESHOLD_BITS: tuple[int, ...] = (
    0x3E800000,  # 0.25
    0x3F400000,  # 0.75
    0x3FA00000,  # 1.25
    0x3FE00000,  # 1.75
    0x40200000,  # 2.5
    0x40600000,  # 3.5
    0x40A00000,  # 5.0
)
"""f32 bit patterns of the midpoints between adjacent E2M1 magnitudes, ascending."""

_E2M1_THRESHOLDS_U32 = np.array(E2M1_THRESHOLD_BITS, dtype=np.uint32)


def e2m1_to_f32(codes: np.ndarray) -> np.ndarray:
    """Decode E2M1 nibbles (low 4 bits of each integer) to float32 (exact)."""
    return E2M1_LUT[np.asarray(codes, dtype=np.uint8) & np.uint8(0xF)]


def f32_to_e2m1(x: np.ndarray) -> np.ndarray:
    """Encode float32 to E2M1 nibbles (one uint8 per element, 0..15): the branchless rule.

    This is the book's software conversion (``e2m1_branchless.cu``), which GPUs without
    ``cvt.rn.satfinite.e2m1x2.f32`` (sm_90a, sm_121) run: the magnitude code is the number
    of midpoint thresholds the f32 magnitude bits reach (``abs_bits >= threshold``, an
    unsigned integer compare, so ordering is exact), and the sign bit is copied to bit 3.

    Consequences, all deliberate and tested:

    * Ties round **up in magnitude** (away from zero): 0.25 -> 0.5, 1.25 -> 1.5,
      2.5 -> 3, 5 -> 6. This is not round-half-even; at 0.25, 1.25, 2.5 and 5 it differs
      from the hardware instruction, at 0.75, 1.75 and 3.5 it agrees.
    * |x| > 6 and +-Inf saturate to +-6; there is no overflow code.
    * NaN has magnitude bits above every threshold, so it encodes as +-6 (sign kept).
    * Negative inputs that round to zero give 0x8 (-0).
    """
    f = np.ascontiguousarray(x, dtype=np.float32)
    u = f.view(np.uint32)
    mag = u & np.uint32(0x7FFFFFFF)
    sign = ((u >> np.uint32(31)) << np.uint32(3)).astype(np.uint8)
    idx = np.zeros(f.shape, dtype=np.uint8)
    for threshold in _E2M1_THRESHOLDS_U32:
        idx += (mag >= threshold).astype(np.uint8)
    return sign | idx


def pack_e2m1(codes: np.ndarray) -> np.ndarray:
    """Pack nibbles two per byte along the last axis: element 2i low, 2i+1 high.

    This is the NVFP4 checkpoint layout (weight [N, K/2] bytes for K elements); the last
    axis must be even.
    """
    c = np.asarray(codes, dtype=np.uint8)
    if c.shape[-1] % 2:
        raise ValueError(f"E2M1 packing needs an even last axis, got shape {c.shape}")
    return (c[..., 0::2] & np.uint8(0xF)) | ((c[..., 1::2] & np.uint8(0xF)) << np.uint8(4))


def unpack_e2m1(packed: np.ndarray) -> np.ndarray:
    """Inverse of `pack_e2m1`: each byte yields its low nibble, then its high nibble."""
    p = np.asarray(packed, dtype=np.uint8)
    out = np.empty(p.shape[:-1] + (p.shape[-1] * 2,), dtype=np.uint8)
    out[..., 0::2] = p & np.uint8(0xF)
    out[..., 1::2] = p >> np.uint8(4)
    return out


# --------------------------------------------------------------------------------------
# MXFP4 (OCP microscaling: E2M1 elements, one E8M0 exponent per 32)
# --------------------------------------------------------------------------------------

#: elements sharing one E8M0 scale, and the E8M0 code that means NaN
MXFP4_BLOCK = 32
E8M0_NAN = 255


def mxfp4_to_f32(blocks: np.ndarray, scales: np.ndarray) -> np.ndarray:
    """Decode MXFP4 to float32, exactly: `blocks` uint8 [..., G, 16] (two E2M1 codes a byte,
    element 2i in the low nibble, 2i + 1 in the high one: `unpack_e2m1`, transformers'
    convert_moe_packed_tensors order), `scales` uint8 [..., G] E8M0 exponents (a block's
    elements times 2^(s - 127)); returns [..., G * 32]. gpt-oss's released experts are
    stored so. Raises ValueError for mismatched shapes, a NaN scale (255), or a block whose
    scale overflows float32 (then bf16 too)."""
    b = np.asarray(blocks, dtype=np.uint8)
    s = np.asarray(scales, dtype=np.uint8)
    if b.shape[-1:] != (MXFP4_BLOCK // 2,) or b.shape[:-1] != s.shape:
        raise ValueError(f"MXFP4 blocks {list(b.shape)} and scales {list(s.shape)} do not "
                         f"pair up (blocks [..., G, {MXFP4_BLOCK // 2}], scales [..., G])")
    if (s == E8M0_NAN).any():
        raise ValueError(f"MXFP4 scale {E8M0_NAN} (E8M0 NaN) at block "
                         f"{np.argwhere(s == E8M0_NAN)[0].tolist()}")
    values = e2m1_to_f32(unpack_e2m1(b))                                  # [..., G, 32]
    exponents = s.astype(np.int32)[..., None] - np.int32(127)
    with np.errstate(over="ignore"):
        out = np.ldexp(values, exponents).astype(np.float32)
    if not np.isfinite(out).all():
        where = np.argwhere(~np.isfinite(out))[0].tolist()
        raise ValueError(f"MXFP4 block {where[:-1]} (scale 2^{int(s[tuple(where[:-1])]) - 127}) "
                         "overflows float32")
    return out.reshape(*out.shape[:-2], -1)


#: the smallest E8M0 code at which some E2M1 value overflows float32 / bf16 (6 x 2^126)
_MXFP4_OVERFLOW_SCALE = 253


@functools.cache
def _mxfp4_bf16_pairs() -> np.ndarray:
    """uint32 [256 scales, 256 bytes]: a byte's two decoded elements as bf16 bits, element 2i
    in the low half (little-endian: the lower address), for scales below the overflow ones
    (those rows hold zeros: `mxfp4_to_bf16_bits` never reads them)."""
    scales = np.arange(_MXFP4_OVERFLOW_SCALE, dtype=np.uint8)
    blocks = np.broadcast_to(np.arange(256, dtype=np.uint8).reshape(16, 16),
                             (len(scales), 16, 16))
    values = mxfp4_to_f32(blocks, np.repeat(scales[:, None], 16, axis=1))  # [S, 512]
    bits = f32_to_bf16_bits(values).reshape(len(scales), 256, 2).astype(np.uint32)
    table = np.zeros((256, 256), dtype=np.uint32)
    table[:len(scales)] = bits[..., 0] | (bits[..., 1] << np.uint32(16))
    return table


def mxfp4_to_bf16_bits(blocks: np.ndarray, scales: np.ndarray) -> np.ndarray:
    """`mxfp4_to_f32` as bf16 bits (uint16 [..., G * 32]; every MXFP4 value is a bf16 value,
    so this is exact), by one table lookup a byte: a loader's decode of gpt-oss-20b's experts
    takes seconds, not the minutes of the float32 path. Blocks with a NaN scale or one that
    may overflow go through `mxfp4_to_f32`, which raises for them."""
    b = np.asarray(blocks, dtype=np.uint8)
    s = np.asarray(scales, dtype=np.uint8)
    if b.shape[-1:] != (MXFP4_BLOCK // 2,) or b.shape[:-1] != s.shape or (
            s.size and s.max() >= _MXFP4_OVERFLOW_SCALE):
        return f32_to_bf16_bits(mxfp4_to_f32(b, s))
    pairs = _mxfp4_bf16_pairs()[s[..., None], b]                          # [..., G, 16]
    return np.ascontiguousarray(pairs).view(np.uint16).reshape(*s.shape[:-1], -1)
