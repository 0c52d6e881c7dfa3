"""Bit-exact number formats on the host: bf16 (round-to-nearest-even), FP8 E4M3, E2M1.

bf16 values are stored as uint16 bit patterns everywhere on the host side (numpy has no
bf16), so these conversions are the single definition of how Atlas rounds.
"""

from __future__ import annotations

import numpy as np


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
