"""Which sliding windows bind in an engine, and the routes a binding one refuses."""

import pytest

from atlas.core.config import ModelConfig
from atlas.model.windows import WindowError, binding_windows, check_windows

MISTRAL = {"model_type": "mistral", "hidden_size": 64, "num_hidden_layers": 3,
           "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 128,
           "vocab_size": 256, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
           "max_position_embeddings": 4096, "sliding_window": 512}


def test_a_window_binds_only_below_the_engines_length():
    cfg = ModelConfig.from_dict(MISTRAL)
    assert binding_windows(cfg, 4096) == (512, 512, 512)
    assert binding_windows(cfg, 512) == (0, 0, 0)  # never outgrown: full attention
    assert binding_windows(ModelConfig.from_dict(MISTRAL | {"sliding_window": None}),
                           4096) == (0, 0, 0)


def test_a_binding_window_refuses_each_route_that_does_not_slide():
    ok = dict(quantized_kv=False, slides=True)
    check_windows((512, 0), 4096, **ok)
    for change, match in ((dict(quantized_kv=True), "bf16 KV pools only"),
                          (dict(slides=False), "long decode attention kernel")):
        with pytest.raises(WindowError, match=match + ".*--max-seq-len 512"):
            check_windows((512, 0), 4096, **ok | change)
        check_windows((0, 0), 4096, **ok | change)  # nothing binds: nothing refused
