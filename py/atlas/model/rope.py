"""Rotary-embedding tables: cos/sin per position, computed once at load time.

The kernel reads cos_sin f32 [max_positions, head_dim] (cos of the head_dim/2 frequencies,
then their sin) and rounds to bf16 itself, as transformers does when it casts cos/sin to the
activation dtype. Frequency scaling variants are applied here, on the host, so one kernel
serves every rope_type this module accepts.
"""

from __future__ import annotations

import math
from typing import Any, Mapping

import numpy as np

SUPPORTED_ROPE_TYPES = ("default", "linear", "llama3")


class RopeConfigError(ValueError):
    """rope_scaling names a type this engine does not implement."""


def inverse_frequencies(head_dim: int, theta: float,
                        scaling: Mapping[str, Any] | None) -> np.ndarray:
    """Per-pair inverse frequencies in float32, with llama3/linear scaling applied."""
    exponents = np.arange(0, head_dim, 2, dtype=np.int64).astype(np.float32) / np.float32(head_dim)
    inv_freq = (1.0 / (np.float32(theta) ** exponents)).astype(np.float32)
    rope_type = "default"
    if scaling:
        rope_type = str(scaling.get("rope_type", scaling.get("type", "default")))
    if rope_type == "default":
        return inv_freq
    if rope_type == "linear":
        return (inv_freq / np.float32(_require(scaling, "factor"))).astype(np.float32)
    if rope_type == "llama3":
        factor = float(_require(scaling, "factor"))
        low = float(_require(scaling, "low_freq_factor"))
        high = float(_require(scaling, "high_freq_factor"))
        old_ctx = float(_require(scaling, "original_max_position_embeddings"))
        inv64 = inv_freq.astype(np.float64)
        wavelen = 2.0 * math.pi / inv64
        low_wavelen, high_wavelen = old_ctx / low, old_ctx / high
        scaled = np.where(wavelen > low_wavelen, inv64 / factor, inv64)
        smooth = (old_ctx / wavelen - low) / (high - low)
        smoothed = (1.0 - smooth) * scaled / factor + smooth * scaled
        medium = (wavelen >= high_wavelen) & (wavelen <= low_wavelen)
        return np.where(medium, smoothed, scaled).astype(np.float32)
    raise RopeConfigError(
        f"rope_scaling type {rope_type!r} is not supported; supported: "
        f"{', '.join(SUPPORTED_ROPE_TYPES)}")


def _require(scaling: Mapping[str, Any] | None, key: str) -> Any:
    if scaling is None or key not in scaling:
        raise RopeConfigError(f"rope_scaling is missing {key!r}")
    return scaling[key]


def cos_sin_table(head_dim: int, theta: float, scaling: Mapping[str, Any] | None,
                  max_positions: int) -> np.ndarray:
    """f32 [max_positions, head_dim]: cos of each frequency, then sin.

    The angle is formed in float32 (position * inv_freq, as transformers' f32 matmul does)
    and its cos/sin evaluated in float64 before rounding to float32.
    """
    inv_freq = inverse_frequencies(head_dim, theta, scaling)
    pos = np.arange(max_positions, dtype=np.float32)[:, None]
    angles = (pos * inv_freq[None, :]).astype(np.float32).astype(np.float64)
    return np.concatenate([np.cos(angles), np.sin(angles)], axis=1).astype(np.float32)
