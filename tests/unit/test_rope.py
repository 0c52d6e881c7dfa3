"""Rotary tables: frequencies, llama3 and YaRN scaling, and refusal of unknown scaling types."""

import math

import numpy as np
import pytest

from atlas.model.rope import (RopeConfigError, attention_factor, cos_sin_table,
                              inverse_frequencies)


def test_default_frequencies_and_table():
    inv = inverse_frequencies(8, 10000.0, None)
    want = [10000.0 ** (-i / 8) for i in (0, 2, 4, 6)]
    np.testing.assert_allclose(inv, want, rtol=1e-6)
    table = cos_sin_table(8, 10000.0, None, 5)
    assert table.shape == (5, 8) and table.dtype == np.float32
    np.testing.assert_allclose(table[3, :4], np.cos(3 * np.asarray(want)), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(table[3, 4:], np.sin(3 * np.asarray(want)), rtol=1e-5, atol=1e-6)
    assert (table[0, :4] == 1).all() and (table[0, 4:] == 0).all()


def test_llama3_scaling_bands():
    scaling = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
               "high_freq_factor": 4.0, "original_max_position_embeddings": 64}
    base = inverse_frequencies(64, 500000.0, None).astype(np.float64)
    scaled = inverse_frequencies(64, 500000.0, scaling).astype(np.float64)
    wavelen = 2 * math.pi / base
    high = wavelen < 64 / 4  # short wavelengths: unchanged
    low = wavelen > 64 / 1  # long wavelengths: divided by the factor
    assert high.any() and low.any()
    np.testing.assert_allclose(scaled[high], base[high], rtol=1e-6)
    np.testing.assert_allclose(scaled[low], base[low] / 8, rtol=1e-6)
    mid = ~high & ~low
    smooth = (64 / wavelen[mid] - 1) / 3
    np.testing.assert_allclose(scaled[mid], (1 - smooth) * base[mid] / 8 + smooth * base[mid],
                               rtol=1e-6)


def test_linear_scaling_and_unknown_types():
    lin = inverse_frequencies(16, 10000.0, {"rope_type": "linear", "factor": 4.0})
    np.testing.assert_allclose(lin, inverse_frequencies(16, 10000.0, None) / 4, rtol=1e-6)
    with pytest.raises(RopeConfigError, match="'dynamic' is not supported"):
        inverse_frequencies(16, 10000.0, {"rope_type": "dynamic", "factor": 4.0})
    with pytest.raises(RopeConfigError, match="missing 'original_max_position_embeddings'"):
        inverse_frequencies(16, 10000.0, {"rope_type": "yarn", "factor": 4.0})
    with pytest.raises(RopeConfigError, match="missing 'low_freq_factor'"):
        inverse_frequencies(16, 10000.0, {"rope_type": "llama3", "factor": 8.0})


def test_yarn_keeps_fast_dims_interpolates_slow_ones_and_scales_the_table():
    """Qwen3's long-context setting: dims rotating more than beta_fast (32) times within the
    original 32,768 positions keep their frequency, those under beta_slow (1) are divided by
    the factor, a linear ramp between; cos and sin carry 0.1 ln(4) + 1."""
    scaling = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}
    base = inverse_frequencies(128, 1e6, None).astype(np.float64)
    yarn = inverse_frequencies(128, 1e6, scaling).astype(np.float64)
    rotations = 32768 * base / (2 * math.pi)
    fast, slow = rotations > 40, rotations < 0.9   # clear of the ramp's floor/ceil ends
    assert fast.any() and slow.any() and (~fast & ~slow).any()
    np.testing.assert_allclose(yarn[fast], base[fast], rtol=1e-6)
    np.testing.assert_allclose(yarn[slow], base[slow] / 4, rtol=1e-6)
    assert (yarn <= base * (1 + 1e-6)).all() and (yarn >= base / 4 * (1 - 1e-6)).all()
    scale = 0.1 * math.log(4) + 1
    assert attention_factor(scaling) == pytest.approx(scale)
    table = cos_sin_table(128, 1e6, scaling, 3)
    np.testing.assert_allclose(table[0, :64], scale, rtol=1e-7)
    # DeepSeek-V3's spelling: mscale over mscale_all_dim, or a given attention_factor
    assert attention_factor(scaling | {"mscale": 1.0, "mscale_all_dim": 1.0}) == 1.0
    assert attention_factor(scaling | {"attention_factor": 0.5}) == 0.5
    assert attention_factor({"rope_type": "llama3", "factor": 8.0}) == 1.0
