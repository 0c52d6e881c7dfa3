"""Rotary-embedding tables: cos/sin per position, computed once at load time.

The kernel reads cos_sin f32 [max_positions, head_dim] (cos of the head_dim/2 frequencies,
then their sin) and rounds to bf16 itself, as transformers does when it casts cos/sin to the
activation dtype. Frequency scaling variants are applied here, on the host, so one kernel
serves every rope_type this module accepts.

LongRoPE (Phi-3.5, Phi-4-mini) has two sets of per-frequency divisors: `short_factor` for
sequences within the pretraining context (`original_max_position_embeddings`) and
`long_factor` beyond it. transformers picks the set per forward pass, from the longest
position in it; Atlas picks once per engine, from the table's length (the engine's
max_seq_len), so a sequence's cached keys never need re-rotating and prefix caching and
speculation stay exact. The two agree whenever the engine's context is within the original
one (short factors everywhere) or a prompt alone is longer than it (long factors for the
prompt and every later step); they differ only for a sequence that stays within the
original context on an engine serving more: transformers rotates it by the short factors,
Atlas by the long ones.
"""

from __future__ import annotations

import math
from typing import Any, Mapping

import numpy as np

SUPPORTED_ROPE_TYPES = ("default", "linear", "llama3", "yarn", "longrope")


class RopeConfigError(ValueError):
    """rope_scaling names a type this engine does not implement."""


def _theta_powers(dim: int, theta: float) -> np.ndarray:
    """theta ** (2i / dim) for each rotation pair i, as float32: the exponents in float32 as
    transformers forms them, the power evaluated in float64 and rounded once. torch's
    float32 pow lands on that correctly rounded value for all but a few (dim, theta, i),
    where numpy's float32 power is up to 2 ulps off in about a fifth of the entries."""
    exponents = np.arange(0, dim, 2, dtype=np.int64).astype(np.float32) / np.float32(dim)
    return (np.float64(theta) ** exponents.astype(np.float64)).astype(np.float32)


def inverse_frequencies(head_dim: int, theta: float, scaling: Mapping[str, Any] | None,
                        max_positions: int | None = None) -> np.ndarray:
    """Per-pair inverse frequencies in float32, with linear / llama3 / YaRN / LongRoPE
    scaling applied. `max_positions` (the table's length) only matters to LongRoPE, which
    takes its long factors when it exceeds the original context (None: within it)."""
    inv_freq = (np.float32(1.0) / _theta_powers(head_dim, theta)).astype(np.float32)
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
    if rope_type == "longrope":
        return _longrope_frequencies(head_dim, theta, scaling, max_positions)
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
    pos_freqs = _theta_powers(dim, theta)
    extrapolated = (np.float32(1.0) / pos_freqs).astype(np.float32)
    interpolated = (np.float32(1.0) / (factor * pos_freqs)).astype(np.float32)
    ramp = np.clip((np.arange(dim // 2, dtype=np.float32) - np.float32(low))
                   / np.float32(high - low), 0, 1).astype(np.float32)
    keep = (np.float32(1.0) - ramp).astype(np.float32)
    return (interpolated * (np.float32(1.0) - keep) + extrapolated * keep).astype(np.float32)


def longrope_uses_long_factors(scaling: Mapping[str, Any], max_positions: int | None) -> bool:
    """Whether a LongRoPE table of `max_positions` rows takes `long_factor` (its positions
    reach past `original_max_position_embeddings`) rather than `short_factor`, at every
    position: one set per engine (see the module docstring)."""
    original = int(_require(scaling, "original_max_position_embeddings"))
    return max_positions is not None and max_positions > original


def _longrope_frequencies(dim: int, theta: float, scaling: Mapping[str, Any] | None,
                          max_positions: int | None) -> np.ndarray:
    """LongRoPE (arXiv 2402.13753): each default frequency divided by its own factor from
    the set `longrope_uses_long_factors` picks, in float32 as transformers computes it."""
    assert scaling is not None
    key = "long_factor" if longrope_uses_long_factors(scaling, max_positions) else "short_factor"
    factors = np.asarray(_require(scaling, key), dtype=np.float32)
    if factors.shape != (dim // 2,):
        raise RopeConfigError(f"rope_scaling.{key} must have {dim // 2} entries (rotary dim "
                              f"{dim} / 2), got {factors.size}")
    wavelengths = (factors * _theta_powers(dim, theta)).astype(np.float32)
    return (np.float32(1.0) / wavelengths).astype(np.float32)


def attention_factor(scaling: Mapping[str, Any] | None) -> float:
    """What cos and sin are multiplied by: YaRN's attention temperature (`attention_factor`,
    else from `mscale` / `mscale_all_dim` as DeepSeek-V3 sets them, else
    0.1 ln(factor) + 1), LongRoPE's (`attention_factor`, else sqrt(1 + ln(factor) /
    ln(original_max_position_embeddings)), whichever factor set the table uses), 1 for the
    other types."""
    rope_type = scaling.get("rope_type", scaling.get("type")) if scaling else None
    if rope_type not in ("yarn", "longrope"):
        return 1.0
    assert scaling is not None
    if scaling.get("attention_factor") is not None:
        return float(scaling["attention_factor"])
    factor = float(_require(scaling, "factor"))
    if rope_type == "longrope":
        return _longrope_attention_factor(factor, scaling)

    def mscale(weight: float) -> float:
        return 1.0 if factor <= 1 else 0.1 * weight * math.log(factor) + 1.0

    m, m_all = scaling.get("mscale"), scaling.get("mscale_all_dim")
    if m and m_all:
        return mscale(float(m)) / mscale(float(m_all))
    return mscale(1.0)


def _longrope_attention_factor(factor: float, scaling: Mapping[str, Any]) -> float:
    """LongRoPE's default scale of cos and sin: 1 without extension, else
    sqrt(1 + ln(factor) / ln(original context))."""
    if factor <= 1.0:
        return 1.0
    original = float(_require(scaling, "original_max_position_embeddings"))
    return math.sqrt(1.0 + math.log(factor) / math.log(original))


def _require(scaling: Mapping[str, Any] | None, key: str) -> Any:
    if scaling is None or key not in scaling:
        raise RopeConfigError(f"rope_scaling is missing {key!r}")
    return scaling[key]


def cos_sin_table(head_dim: int, theta: float, scaling: Mapping[str, Any] | None,
                  max_positions: int) -> np.ndarray:
    """f32 [max_positions, head_dim]: cos of each frequency, then sin.

    The angle is formed in float32 (position * inv_freq, as transformers' f32 matmul does)
    and its cos/sin evaluated in float64 before rounding to float32, then scaled in float32
    by the type's attention factor (YaRN's, LongRoPE's; 1 otherwise).
    """
    inv_freq = inverse_frequencies(head_dim, theta, scaling, max_positions)
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
