"""LongRoPE (Phi-3.5, Phi-4-mini): config parsing in both placements, the factor set chosen
per table length, the attention factor, and errors naming the field.

The reference values are the formula evaluated in float64 here (transformers'
`_compute_longrope_parameters`: inv_freq = 1 / (factors * theta ** (2i / dim)); the
attention factor sqrt(1 + ln(factor) / ln(original)) unless given), so the suite needs no
torch; the fixture tiny-phi3-longrope checks the whole model against transformers itself
(tests/numerics/test_model_parity.py).
"""

import math

import numpy as np
import pytest

from atlas.core.config import ConfigError, ModelConfig
from atlas.model.rope import (RopeConfigError, attention_factor, cos_sin_table,
                              inverse_frequencies, longrope_uses_long_factors)

#: Phi-3-style: head_dim 64 with a quarter not rotating (rotary dim 48, 24 factors), the
#: original context at the top level, 256 positions over 32
LONG = [1.0 + 0.25 * i for i in range(24)]
SHORT = [1.0 + 0.05 * i for i in range(24)]
PHI3 = {
    "architectures": ["Phi3ForCausalLM"], "model_type": "phi3", "hidden_size": 256,
    "intermediate_size": 160, "num_hidden_layers": 2, "num_attention_heads": 4,
    "num_key_value_heads": 2, "vocab_size": 512, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
    "max_position_embeddings": 256, "original_max_position_embeddings": 32,
    "partial_rotary_factor": 0.75,
    "rope_scaling": {"type": "longrope", "long_factor": LONG, "short_factor": SHORT},
}


def _formula(dim: int, theta: float, factors: list[float]) -> np.ndarray:
    exponents = np.arange(0, dim, 2, dtype=np.float64) / dim
    return 1.0 / (np.asarray(factors, np.float64) * theta ** exponents)


def test_phi3_placement_is_completed_with_the_original_context_and_factor():
    cfg = ModelConfig.from_dict(PHI3)
    assert cfg.rotary_dim == 48
    scaling = cfg.rope_scaling
    assert scaling["rope_type"] == "longrope"
    assert scaling["original_max_position_embeddings"] == 32
    assert scaling["factor"] == 8.0  # max_position_embeddings / original
    assert scaling["long_factor"] == LONG and scaling["short_factor"] == SHORT
    assert cfg.context_limit == (256, "max_position_embeddings")


def test_rope_parameters_placement_and_where_the_original_context_comes_from():
    """transformers 5's spelling (everything inside rope_parameters) parses the same; the
    top-level field wins over the dict's, as in transformers; without either,
    max_position_embeddings (no extension: factor 1)."""
    rest = {k: v for k, v in PHI3.items() if k not in (
        "rope_scaling", "rope_theta", "original_max_position_embeddings",
        "partial_rotary_factor")}
    params = {"rope_type": "longrope", "rope_theta": 10000.0, "partial_rotary_factor": 0.75,
              "long_factor": LONG, "short_factor": SHORT, "original_max_position_embeddings": 64}
    cfg = ModelConfig.from_dict(rest | {"rope_parameters": params})
    assert cfg.rope_theta == 10000.0 and cfg.rotary_dim == 48
    assert cfg.rope_scaling["original_max_position_embeddings"] == 64
    assert cfg.rope_scaling["factor"] == 4.0
    top = ModelConfig.from_dict(rest | {"rope_parameters": params,
                                        "original_max_position_embeddings": 32})
    assert top.rope_scaling["original_max_position_embeddings"] == 32
    del params["original_max_position_embeddings"]
    bare = ModelConfig.from_dict(rest | {"rope_parameters": params}).rope_scaling
    assert bare["original_max_position_embeddings"] == 256 and bare["factor"] == 1.0
    given = ModelConfig.from_dict(PHI3 | {"rope_scaling": PHI3["rope_scaling"] | {"factor": 2}})
    assert given.rope_scaling["factor"] == 2.0


def test_phi3_reads_su_as_longrope():
    """Early Phi-3-128k configs say "su"; transformers' Phi3Config reads it as longrope."""
    su = PHI3 | {"rope_scaling": PHI3["rope_scaling"] | {"type": "su"}}
    assert ModelConfig.from_dict(su).rope_scaling["rope_type"] == "longrope"


@pytest.mark.parametrize("scaling, message", [
    ({"type": "longrope", "long_factor": LONG},
     r"'rope_scaling.short_factor' is required .*24 positive numbers"),
    ({"type": "longrope", "long_factor": LONG[:-1], "short_factor": SHORT},
     r"'rope_scaling.long_factor' must list 24 positive numbers .*got 23 entries"),
    ({"type": "longrope", "long_factor": LONG, "short_factor": [0.0] + SHORT[1:]},
     r"'rope_scaling.short_factor' must list 24 positive numbers"),
    ({"type": "longrope", "long_factor": "1.0", "short_factor": SHORT},
     r"'rope_scaling.long_factor' must list 24 .*got '1.0'"),
    ({"type": "longrope", "long_factor": LONG, "short_factor": SHORT, "factor": -1},
     r"'rope_scaling.factor' must be a positive number"),
])
def test_factor_errors_name_the_field_and_the_expected_length(scaling, message):
    with pytest.raises(ConfigError, match=message):
        ModelConfig.from_dict(PHI3 | {"rope_scaling": scaling})


def test_errors_name_rope_parameters_when_the_dict_lives_there():
    raw = {k: v for k, v in PHI3.items() if k != "rope_scaling"}
    params = {"rope_type": "longrope", "long_factor": LONG, "short_factor": SHORT[:3]}
    with pytest.raises(ConfigError, match=r"'rope_parameters.short_factor' must list 24"):
        ModelConfig.from_dict(raw | {"rope_parameters": params})


def test_the_table_takes_one_factor_set_by_its_length():
    """Short factors while the table stays within the original context (32 rows), long ones
    at every position, the first included, once it reaches past it."""
    scaling = ModelConfig.from_dict(PHI3).rope_scaling
    assert not longrope_uses_long_factors(scaling, 32)
    assert longrope_uses_long_factors(scaling, 33)
    short = inverse_frequencies(48, 10000.0, scaling, 32)
    np.testing.assert_allclose(short, _formula(48, 10000.0, SHORT), rtol=1e-6)
    np.testing.assert_array_equal(inverse_frequencies(48, 10000.0, scaling), short)
    np.testing.assert_allclose(inverse_frequencies(48, 10000.0, scaling, 33),
                               _formula(48, 10000.0, LONG), rtol=1e-6)
    within, beyond = cos_sin_table(48, 10000.0, scaling, 32), cos_sin_table(48, 10000.0,
                                                                            scaling, 33)
    assert not np.allclose(within[1:], beyond[1:32], atol=1e-3)
    angles = 5 * _formula(48, 10000.0, LONG)
    scale = math.sqrt(1 + math.log(8) / math.log(32))
    np.testing.assert_allclose(beyond[5], scale * np.concatenate([np.cos(angles),
                                                                  np.sin(angles)]),
                               rtol=1e-5, atol=1e-6)


def test_attention_factor():
    """sqrt(1 + ln(factor) / ln(original)) whichever set the table takes (Phi-3.5:
    sqrt(1 + ln 32 / ln 4096) = sqrt(17 / 12)); 1 without extension; a given one wins."""
    phi35 = {"rope_type": "longrope", "factor": 32.0, "original_max_position_embeddings": 4096}
    assert attention_factor(phi35) == pytest.approx(math.sqrt(17 / 12), rel=1e-15)
    assert attention_factor(phi35 | {"factor": 1.0}) == 1.0
    assert attention_factor(phi35 | {"attention_factor": 1.5}) == 1.5
    scaling = ModelConfig.from_dict(PHI3).rope_scaling
    np.testing.assert_allclose(cos_sin_table(48, 10000.0, scaling, 2)[0, :24],
                               math.sqrt(1.6), rtol=1e-7)


def test_table_refuses_a_factor_list_of_the_wrong_length():
    scaling = {"rope_type": "longrope", "long_factor": LONG, "short_factor": SHORT,
               "original_max_position_embeddings": 32, "factor": 8.0}
    with pytest.raises(RopeConfigError, match=r"rope_scaling.long_factor must have 32 entries"):
        inverse_frequencies(64, 10000.0, scaling, 64)
    with pytest.raises(RopeConfigError, match="missing 'short_factor'"):
        inverse_frequencies(48, 10000.0, {k: v for k, v in scaling.items()
                                          if k != "short_factor"}, 32)
