"""ModelConfig parsing: HF rules for defaults, PCND errors for fields that change numerics."""

import json

import pytest

from atlas.core.config import ConfigError, ModelConfig, canonical_model_type

SMOLLM2 = {
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 576,
    "intermediate_size": 1536, "num_hidden_layers": 30, "num_attention_heads": 9,
    "num_key_value_heads": 3, "vocab_size": 49152, "rms_norm_eps": 1e-05,
    "rope_theta": 100000.0, "max_position_embeddings": 8192, "tie_word_embeddings": True,
    "torch_dtype": "bfloat16", "bos_token_id": 1, "eos_token_id": 2,
}


def test_llama_config_from_file(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(SMOLLM2))
    cfg = ModelConfig.from_hf(tmp_path)
    assert cfg.model_type == "llama"
    assert cfg.architectures == ("LlamaForCausalLM",)
    assert (cfg.hidden_size, cfg.num_hidden_layers, cfg.num_attention_heads,
            cfg.num_key_value_heads, cfg.vocab_size) == (576, 30, 9, 3, 49152)
    assert cfg.head_dim == 64  # hidden_size // heads when head_dim is absent
    assert cfg.rope_theta == 100000.0 and cfg.rope_scaling is None
    assert cfg.tie_word_embeddings and cfg.dtype == "bfloat16"
    assert cfg.bos_token_id == 1 and cfg.eos_token_ids == (2,) and cfg.eos_token_id == 2
    assert not cfg.has_qk_norm and not cfg.qkv_bias and not cfg.o_bias
    assert cfg.hidden_act == "silu"
    assert cfg.source.endswith("config.json")


def test_hf_documented_defaults():
    raw = {k: v for k, v in SMOLLM2.items()
           if k not in ("num_key_value_heads", "tie_word_embeddings", "max_position_embeddings")}
    cfg = ModelConfig.from_dict(raw)
    assert cfg.num_key_value_heads == 9  # HF rule: missing kv heads -> MHA
    assert cfg.tie_word_embeddings is False
    assert cfg.max_position_embeddings is None


def test_nested_text_config_wins():
    raw = {"model_type": "Qwen3", "architectures": ["X"], "hidden_size": 1,
           "text_config": {k: v for k, v in SMOLLM2.items() if k != "architectures"}
           | {"model_type": "qwen3", "head_dim": 128, "eos_token_id": [151645, 151643]}}
    cfg = ModelConfig.from_dict(raw)
    assert cfg.model_type == "qwen3" and cfg.has_qk_norm
    assert cfg.hidden_size == 576 and cfg.head_dim == 128
    assert cfg.eos_token_ids == (151645, 151643)
    assert cfg.architectures == ("X",)


def test_rope_parameters_variant():
    raw = {k: v for k, v in SMOLLM2.items() if k != "rope_theta"}
    cfg = ModelConfig.from_dict(raw | {"rope_parameters": {"rope_type": "default",
                                                           "rope_theta": 1e6}})
    assert cfg.rope_theta == 1e6 and cfg.rope_scaling is None
    yarn = {"rope_type": "yarn", "rope_theta": 5e5, "factor": 4.0}
    cfg = ModelConfig.from_dict(raw | {"rope_parameters": yarn})
    assert cfg.rope_theta == 5e5
    assert cfg.rope_scaling == {"rope_type": "yarn", "factor": 4.0}


def test_legacy_rope_scaling_type_key_normalized():
    cfg = ModelConfig.from_dict(SMOLLM2 | {"rope_scaling": {"type": "linear", "factor": 2.0}})
    assert cfg.rope_scaling["rope_type"] == "linear"


@pytest.mark.parametrize("field", ["hidden_size", "num_hidden_layers", "num_attention_heads",
                                   "intermediate_size", "vocab_size", "rms_norm_eps",
                                   "rope_theta", "model_type"])
def test_missing_critical_field_names_field_and_file(tmp_path, field):
    raw = {k: v for k, v in SMOLLM2.items() if k != field}
    (tmp_path / "config.json").write_text(json.dumps(raw))
    with pytest.raises(ConfigError) as err:
        ModelConfig.from_hf(tmp_path / "config.json")
    assert repr(field) in str(err.value) and "config.json" in str(err.value)


@pytest.mark.parametrize("field,value", [("hidden_size", "576"), ("hidden_size", 57.6),
                                         ("num_hidden_layers", True), ("rms_norm_eps", "1e-5"),
                                         ("tie_word_embeddings", "yes"),
                                         ("eos_token_id", ["x"]), ("vocab_size", 0)])
def test_wrong_types_rejected(field, value):
    with pytest.raises(ConfigError, match=repr(field)):
        ModelConfig.from_dict(SMOLLM2 | {field: value})


def test_head_dim_unresolvable():
    with pytest.raises(ConfigError, match="head_dim"):
        ModelConfig.from_dict(SMOLLM2 | {"num_attention_heads": 7})


def test_missing_file_and_bad_json(tmp_path):
    with pytest.raises(ConfigError, match="no config.json"):
        ModelConfig.from_hf(tmp_path)
    (tmp_path / "config.json").write_text("{not json")
    with pytest.raises(ConfigError, match="not valid JSON"):
        ModelConfig.from_hf(tmp_path)


def test_canonical_model_type():
    assert canonical_model_type("Qwen3") == "qwen3"
    assert canonical_model_type("qwen3-5.moe") == "qwen3_5_moe"


def _windows(**fields) -> tuple[int, ...]:
    return ModelConfig.from_dict(SMOLLM2 | {"num_hidden_layers": 4} | fields).attention_windows


def test_sliding_windows_follow_each_familys_rule():
    # Llama has no sliding attention: a stray field changes nothing
    assert _windows(sliding_window=4096) == ()
    # Mistral v0.1 / Phi-3 / Mixtral: every layer slides when the config sets a window
    assert _windows(model_type="mistral", sliding_window=4096) == (4096,) * 4
    assert _windows(model_type="phi3", sliding_window=2047) == (2047,) * 4
    assert _windows(model_type="mistral", sliding_window=None) == ()
    # Qwen2 / Qwen3 carry a window that is off unless use_sliding_window says so; on, the
    # layers from max_window_layers slide
    assert _windows(model_type="qwen2", sliding_window=32768) == ()
    assert _windows(model_type="qwen2", sliding_window=64, use_sliding_window=True,
                    max_window_layers=2) == (0, 0, 64, 64)
    assert _windows(model_type="qwen3", sliding_window=64, use_sliding_window=True,
                    max_window_layers=4) == ()
    # an explicit layer_types list wins; Qwen2-MoE's rule: the even layers below the bound
    assert _windows(model_type="qwen2", sliding_window=64, use_sliding_window=True,
                    layer_types=["sliding_attention", "full_attention"] * 2) == (64, 0, 64, 0)
    assert _windows(model_type="qwen2_moe", sliding_window=64, use_sliding_window=True,
                    max_window_layers=3) == (64, 0, 64, 0)
    # SmolLM3: the NoPE layers (every 4th by default) slide
    assert _windows(model_type="smollm3", sliding_window=64,
                    use_sliding_window=True) == (0, 0, 0, 64)
    with pytest.raises(ConfigError, match="layer_types"):
        _windows(model_type="qwen2", sliding_window=64, use_sliding_window=True,
                 layer_types=["sliding_attention"])


def test_qwen2_always_has_qkv_biases_and_llama_bias_covers_o_proj():
    qwen2 = ModelConfig.from_dict(SMOLLM2 | {"model_type": "qwen2"})
    assert qwen2.qkv_bias and not qwen2.o_bias
    llama = ModelConfig.from_dict(SMOLLM2 | {"attention_bias": True})
    assert llama.qkv_bias and llama.o_bias


#: google/gemma-3-4b-it's text_config as published (the older keys: rope_local_base_freq,
#: sliding_window_pattern, rope_scaling for the full layers), scaled down to 12 layers
GEMMA3_4B = {"model_type": "gemma3", "architectures": ["Gemma3ForConditionalGeneration"],
             "text_config": {"model_type": "gemma3_text", "hidden_size": 2560,
                             "intermediate_size": 10240, "num_hidden_layers": 12,
                             "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 256,
                             "query_pre_attn_scalar": 256, "rope_local_base_freq": 10000.0,
                             "rope_scaling": {"factor": 8.0, "rope_type": "linear"},
                             "rope_theta": 1000000.0, "sliding_window": 1024,
                             "sliding_window_pattern": 6, "rms_norm_eps": 1e-6,
                             "vocab_size": 262208, "max_position_embeddings": 131072,
                             "hidden_activation": "gelu_pytorch_tanh"}}


def test_gemma3_reads_the_published_keys():
    cfg = ModelConfig.from_dict(GEMMA3_4B)
    assert cfg.model_type == "gemma3" and cfg.multimodal_wrapper and cfg.norm_offset
    assert cfg.attention_windows == (1024,) * 5 + (0,) + (1024,) * 5 + (0,)
    assert cfg.rope_theta == 1e6 and cfg.rope_scaling == {"factor": 8.0, "rope_type": "linear"}
    assert cfg.local_rope_theta == 1e4 and cfg.attention_scale == 256 ** -0.5
    assert cfg.embed_scale == 50.5  # sqrt(2560) = 50.596 rounded to bf16
    assert cfg.hidden_act == "gelu_pytorch_tanh" and cfg.unsupported_fields == ()
    capped = ModelConfig.from_dict({**GEMMA3_4B, "text_config": {
        **GEMMA3_4B["text_config"], "final_logit_softcapping": 30.0}})
    assert capped.unsupported_fields == ("final_logit_softcapping",)


def test_context_limit_is_the_positions_not_the_window():
    assert ModelConfig.from_dict(SMOLLM2).context_limit == (8192, "max_position_embeddings")
    windowed = ModelConfig.from_dict(SMOLLM2 | {"model_type": "mistral",
                                                "sliding_window": 4096})
    assert windowed.context_limit == (8192, "max_position_embeddings")
    unbounded = ModelConfig.from_dict({k: v for k, v in SMOLLM2.items()
                                       if k != "max_position_embeddings"})
    assert unbounded.context_limit is None


def test_yarn_extends_the_context_to_its_original_positions_times_factor():
    qwen3 = SMOLLM2 | {"max_position_embeddings": 40960, "rope_scaling": {
        "rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}}
    assert ModelConfig.from_dict(qwen3).context_limit == (131072, "rope_scaling (yarn)")


def test_nope_layers_from_the_list_or_smollm3s_interval():
    smollm3 = SMOLLM2 | {"model_type": "smollm3", "num_hidden_layers": 8}
    assert ModelConfig.from_dict(smollm3).nope_layers == (3, 7)   # every 4th by default
    listed = smollm3 | {"no_rope_layers": [1, 0, 1, 1, 1, 1, 0, 1]}
    assert ModelConfig.from_dict(listed).nope_layers == (1, 6)
    assert ModelConfig.from_dict(SMOLLM2).nope_layers == ()     # llama: rope everywhere
    with pytest.raises(ConfigError, match="no_rope_layers"):
        ModelConfig.from_dict(smollm3 | {"no_rope_layers": [1, 0]})


def test_minimax_m2_family_rules():
    """The published MiniMax-M2 config's spelling: expert width in intermediate_size, the
    legacy `rotary_dim`; the router always sigmoid-scored, score-biased and renormalized;
    q/k norms over the whole projection."""
    minimax = SMOLLM2 | {"model_type": "minimax_m2", "hidden_size": 3072, "head_dim": 128,
                         "num_attention_heads": 48, "num_key_value_heads": 8,
                         "intermediate_size": 1536, "num_local_experts": 256,
                         "num_experts_per_tok": 8, "rotary_dim": 64}
    cfg = ModelConfig.from_dict(minimax)
    assert cfg.rotary_dim == 64 and cfg.partial_rotary_factor == 0.5
    assert cfg.has_qk_norm and cfg.qk_norm_whole
    moe = cfg.moe
    assert moe is not None and moe.intermediate_size == 1536 and moe.num_experts == 256
    assert (moe.scoring, moe.score_bias, moe.norm_topk_prob) == ("sigmoid", True, True)
    qwen3 = ModelConfig.from_dict(SMOLLM2 | {"model_type": "qwen3"})
    assert qwen3.has_qk_norm and not qwen3.qk_norm_whole
    with pytest.raises(ConfigError, match="rotary_dim"):
        ModelConfig.from_dict(minimax | {"rotary_dim": 129})
