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

SUPPORTED_ROPE_TYPES = ("default", "linear", "llama3", "yarn")


class RopeConfigError(ValueError):
    """rope_scaling names a type this engine does not implement."""


def inverse_frequencies(head_dim: int, theta: float,
                        scaling: Mapping[str, Any] | None) -> np.ndarray:
    """Per-pair inverse frequencies in float32, with linear / llama3 / YaRN scaling applied."""
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
    if rope_type == "yarn":
        return _yarn_frequencies(head_dim, theta, scaling)
    raise RopeConfigError(
        f"rope_scaling type {rope_type!r} is not supported; supported: "
        f"{', '.join(SUPPORTED_ROPE_TYPES)}")


def _yarn_frequencies(dim: int, theta: float, scaling: Mapping[str, Any] | None) -> np.ndarray:
    """YaRN (arXiv 2309.00071) as transformers computes it: each frequency blends its
    interpolated (/ factor) and extrapolated (unchanged) values by a linear ramp over the
    dims whose rotations within the original context fall between beta_slow and beta_fast
    (floor/ceil of the range unless `truncate` is false), all in float32."""
    factor = np.float32(_require(scaling, "factor"))
    old_ctx = float(_require(scaling, "original_max_position_embeddings"))
    assert scaling is not None
    beta_fast = float(scaling.get("beta_fast") or 32)
    beta_slow = float(scaling.get("beta_slow") or 1)

    def correction_dim(rotations: float) -> float:
        return dim * math.log(old_ctx / (rotations * 2 * math.pi)) / (2 * math.log(theta))

    low, high = correction_dim(beta_fast), correction_dim(beta_slow)
    if scaling.get("truncate", True):
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, dim - 1)
    if low == high:
        high += 0.001  # transformers' guard against a zero-width ramp
    exponents = np.arange(0, dim, 2, dtype=np.int64).astype(np.float32) / np.float32(dim)
    pos_freqs = (np.float32(theta) ** exponents).astype(np.float32)
    extrapolated = (np.float32(1.0) / pos_freqs).astype(np.float32)
    interpolated = (np.float32(1.0) / (factor * pos_freqs)).astype(np.float32)
    ramp = np.clip((np.arange(dim // 2, dtype=np.float32) - np.float32(low))
                   / np.float32(high - low), 0, 1).astype(np.float32)
    keep = (np.float32(1.0) - ramp).astype(np.float32)
    return (interpolated * (np.float32(1.0) - keep) + extrapolated * keep).astype(np.float32)


def attention_factor(scaling: Mapping[str, Any] | None) -> float:
    """What cos and sin are multiplied by: YaRN's attention temperature (`attention_factor`,
    else from `mscale` / `mscale_all_dim` as DeepSeek-V3 sets them, else
    0.1 ln(factor) + 1), 1 for the other types."""
    if not scaling or scaling.get("rope_type", scaling.get("type")) != "yarn":
        return 1.0
    if scaling.get("attention_factor") is not None:
        return float(scaling["attention_factor"])
    factor = float(_require(scaling, "factor"))

    def mscale(weight: float) -> float:
        return 1.0 if factor <= 1 else 0.1 * weight * math.log(factor) + 1.0

    m, m_all = scaling.get("mscale"), scaling.get("mscale_all_dim")
    if m and m_all:
        return mscale(float(m)) / mscale(float(m_all))
    return mscale(1.0)


def _require(scaling: Mapping[str, Any] | None, key: str) -> Any:
    if scaling is None or key not in scaling:
        raise RopeConfigError(f"rope_scaling is missing {key!r}")
    return scaling[key]


def cos_sin_table(head_dim: int, theta: float, scaling: Mapping[str, Any] | None,
                  max_positions: int) -> np.ndarray:
    """f32 [max_positions, head_dim]: cos of each frequency, then sin.

    The angle is formed in float32 (position * inv_freq, as transformers' f32 matmul does)
    and its cos/sin evaluated in float64 before rounding to float32, then scaled in float32
    by the type's attention factor (YaRN's; 1 otherwise).
    """
    inv_freq = inverse_frequencies(head_dim, theta, scaling)
    pos = np.arange(max_positions, dtype=np.float32)[:, None]
    angles = (pos * inv_freq[None, :]).astype(np.float32).astype(np.float64)
    table = np.concatenate([np.cos(angles), np.sin(angles)], axis=1).astype(np.float32)
    scale = attention_factor(scaling)
    return table if scale == 1.0 else (table * np.float32(scale)).astype(np.float32)


def identity_cos_sin(head_dim: int, max_positions: int) -> np.ndarray:
    """The table of a layer without rotary embedding (SmolLM3's NoPE layers): cos 1 and sin 0
    at every position, so q * cos + rotate_half(q) * sin is q itself, bit for bit, in every
    rotary kernel (a product by 1 or 0 and a sum with a zero are exact)."""
    table = np.zeros((max_positions, head_dim), np.float32)
    table[:, :head_dim // 2] = 1.0
    return table
