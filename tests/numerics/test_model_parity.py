"""End-to-end numerics on the CPU reference backend.

Tiny random-weight llama / qwen3 / llama3-rope / qwen3-yarn / qwen2 (q/k/v biases) / mistral /
phi3 (fused tensors, partial rotary; LongRoPE past its original context; Phi-3-mini's head_dim
96, attended padded to 128) / smollm3 (a NoPE layer) /
gemma3 checkpoints, and mistral / qwen2 / phi3-d96 ones whose attention slides over a window far
shorter than prompt + output (tests/fixtures,
made by tools/make_fixtures.py with transformers) must reproduce transformers' last-position
logits (cosine >= 0.999) and its 16 greedy tokens exactly; the embedded default model must
answer the capital-of-France question correctly.
"""

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from atlas.core.sampling import GREEDY
from atlas.engine.llm_engine import LLMEngine
from atlas.engine.parity import compare_with_golden
from atlas.engine.request import EngineRequest
from atlas.model.load import load_runner

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


@pytest.mark.parametrize("name", ["tiny-llama", "tiny-qwen3", "tiny-llama3-rope",
                                  "tiny-qwen3-yarn", "tiny-qwen2", "tiny-mistral", "tiny-phi3",
                                  "tiny-phi3-longrope", "tiny-smollm3", "tiny-mistral-swa",
                                  "tiny-qwen2-swa", "tiny-gemma3", "tiny-phi3-d96"])
def test_fixture_matches_transformers(name):
    golden = dict(np.load(FIXTURES / name / "golden.npz"))
    r = compare_with_golden(FIXTURES / name, golden, backend="host")
    assert r["cosine"] >= 0.999, r
    assert r["argmax_match"], r
    assert r["greedy_match"] == r["greedy_total"], r


def test_the_sliding_window_is_what_matches(tmp_path):
    """The windowed goldens depend on the window: the same checkpoint attending to every key
    (its config's window taken out) is far from them."""
    model = tmp_path / "tiny-mistral-swa"
    shutil.copytree(FIXTURES / model.name, model)
    config = json.loads((model / "config.json").read_text())
    (model / "config.json").write_text(json.dumps(config | {"sliding_window": None}))
    golden = dict(np.load(model / "golden.npz"))
    r = compare_with_golden(model, golden, backend="host")
    assert r["cosine"] < 0.9 and r["greedy_match"] < r["greedy_total"], r


def _short_context_golden(golden: dict) -> dict:
    """tiny-phi3-longrope's second golden (tools/make_fixtures.py SHORT_CONTEXT_PLANS): 28
    tokens in all, within the original 32 positions, where transformers takes the short
    factors."""
    return {k.removeprefix("short_"): v for k, v in golden.items() if k.startswith("short_")}


def test_longrope_short_factors_within_the_original_context():
    """An engine no longer than the original context (32) rotates by the short factors, as
    transformers does for a sequence within it."""
    model = FIXTURES / "tiny-phi3-longrope"
    golden = _short_context_golden(dict(np.load(model / "golden.npz")))
    r = compare_with_golden(model, golden, backend="host", max_seq_len=32)
    assert r["cosine"] >= 0.999, r
    assert r["greedy_match"] == r["greedy_total"], r


def test_the_longrope_factor_set_is_what_matches(tmp_path):
    """Each golden depends on its factor set: the long-prompt goldens are far from the same
    checkpoint with its long factors replaced by the short ones, and the short-context golden
    is far from an engine longer than the original context (long factors at every position:
    where Atlas and transformers part, docs/kernels.md)."""
    model = tmp_path / "tiny-phi3-longrope"
    shutil.copytree(FIXTURES / model.name, model)
    golden = dict(np.load(model / "golden.npz"))
    r = compare_with_golden(model, _short_context_golden(golden), backend="host")
    assert r["cosine"] < 0.9 and r["greedy_match"] < r["greedy_total"], r
    config = json.loads((model / "config.json").read_text())
    config["rope_scaling"]["long_factor"] = config["rope_scaling"]["short_factor"]
    (model / "config.json").write_text(json.dumps(config))
    r = compare_with_golden(model, golden, backend="host")
    assert r["cosine"] < 0.9 and r["greedy_match"] < r["greedy_total"], r


@pytest.mark.parametrize("name", ["tiny-qwen3", "tiny-llama"])
def test_persistent_decode_matches_transformers(name, monkeypatch):
    """ATLAS_PERSISTENT_DECODE=1 (the layers in one launch) still reproduces transformers'
    greedy tokens and logits."""
    monkeypatch.setenv("ATLAS_PERSISTENT_DECODE", "1")
    golden = dict(np.load(FIXTURES / name / "golden.npz"))
    r = compare_with_golden(FIXTURES / name, golden, backend="host")
    assert r["cosine"] >= 0.999, r
    assert r["greedy_match"] == r["greedy_total"], r


@pytest.mark.parametrize("name", ["tiny-qwen3", "tiny-qwen2", "tiny-phi3", "tiny-smollm3",
                                  "tiny-qwen2-swa", "tiny-gemma3", "tiny-phi3-d96"])
def test_batched_decode_matches_solo_runs(name):
    """Three prompts decoded together give exactly what each gives alone (graph buckets,
    padding rows and per-row block tables must not mix sequences; a bias row per token)."""
    model = FIXTURES / name
    runner = load_runner(model, backend="host", max_seq_len=64, max_batch_size=4,
                         max_prefill_tokens=32)
    engine = LLMEngine(runner, max_prefill_tokens=32)
    prompts = [[5, 9, 200, 17], [300, 2, 2, 2, 2, 2, 9], [44]]
    reqs = [EngineRequest(p, GREEDY, 10) for p in prompts]
    together = [r.token_ids for r in engine.generate(reqs)]
    alone = [engine.generate([r])[0].token_ids for r in reqs]
    assert together == alone
    blocks = engine.core.scheduler.blocks
    assert blocks.num_available == blocks.num_blocks


@pytest.mark.parametrize("name", ["tiny-llama", "tiny-qwen2", "tiny-phi3", "tiny-qwen3-yarn",
                                  "tiny-mistral-swa", "tiny-gemma3", "tiny-phi3-d96"])
def test_chunked_prefill_equals_one_shot(name):
    model = FIXTURES / name
    runner = load_runner(model, backend="host", max_seq_len=64, max_batch_size=2,
                         max_prefill_tokens=32)
    req = EngineRequest(list(range(3, 40)), GREEDY, 8)
    one_shot = LLMEngine(runner, max_prefill_tokens=32).generate([req])[0].token_ids
    chunked = LLMEngine(runner, max_prefill_tokens=5).generate([req])[0].token_ids
    assert chunked == one_shot


@pytest.mark.slow
def test_default_model_knows_the_capital_of_france(default_model_dir):
    from atlas.server.app_assets import load_assets

    tok = load_assets(default_model_dir).tokenizer
    text = tok.chat_template(False).render(
        [{"role": "user", "content": "What is the capital of France?"}])
    runner = load_runner(default_model_dir, backend="host", max_seq_len=128, max_batch_size=1,
                         max_prefill_tokens=64)
    (out,) = LLMEngine(runner, max_prefill_tokens=64).generate(
        [EngineRequest(tok.encode(text), GREEDY, 24, tok.eos_token_ids)])
    answer = tok.decode(out.token_ids)
    assert "Paris" in answer, answer
    assert out.finish_reason == "stop"


def test_reference_distances_reads_the_transformers_controls():
    from atlas.engine.parity import reference_distances

    f32 = np.array([[1.0, 2.0, 3.0, 4.0]], np.float32)
    golden = {"logits": f32 + [[0.0, 0.0, 0.0, 0.5]], "sdpa_logits": f32 * 2.0,
              "f32_logits": f32, "greedy": np.array([5, 6, 7]),
              "sdpa_greedy": np.array([5, 9, 7])}
    assert reference_distances({"logits": f32, "greedy": np.array([1])}, f32[0], [1]) == {}
    r = reference_distances(golden, f32[0] - [0.25, 0.0, 0.0, 0.0], [5, 6, 8])
    assert r["cosine_vs_f32"]["transformers_sdpa"] == pytest.approx(1.0)  # a pure rescale
    assert r["cosine_vs_f32"]["transformers_eager"] < 1.0
    assert r["max_abs_err_vs_f32"] == pytest.approx(
        {"atlas": 0.25, "transformers_eager": 0.5, "transformers_sdpa": 4.0})
    assert r["greedy_identical_prefix"] == {"atlas_vs_eager": 2, "atlas_vs_sdpa": 1,
                                            "sdpa_vs_eager": 1}


def test_reference_distances_without_an_sdpa_control():
    """gpt-oss's goldens have no SDPA control (transformers refuses SDPA with sinks): the
    float32 distances and the eager prefix still come back, no SDPA entries."""
    from atlas.engine.parity import reference_distances

    f32 = np.array([[1.0, 2.0, 3.0, 4.0]], np.float32)
    golden = {"logits": f32 + [[0.0, 0.0, 0.0, 0.5]], "f32_logits": f32,
              "greedy": np.array([5, 6, 7])}
    r = reference_distances(golden, f32[0] - [0.25, 0.0, 0.0, 0.0], [5, 6, 8])
    assert r["max_abs_err_vs_f32"] == pytest.approx({"atlas": 0.25, "transformers_eager": 0.5})
    assert r["greedy_identical_prefix"] == {"atlas_vs_eager": 2}


def test_tail_distribution_lines_up_the_prompt_positions():
    """The tiny MoE fixture's golden has every prompt position: its last 8 stand in for the
    eager tail, a rescale of them for SDPA (cosine 1), a perturbation for float32. Atlas's
    logits at those positions (prefill to the first, the rest one decode step each) must
    match eager position for position: a shift by one would wreck the cosines."""
    from atlas.engine.parity import tail_distribution

    model = FIXTURES / "tiny-qwen3-moe"
    golden = dict(np.load(model / "golden.npz"))
    assert tail_distribution(model, golden, backend="host") == {}
    eager = golden["logits"][-8:].astype(np.float32)
    rng = np.random.default_rng(0)
    golden.update(eager_tail_logits=eager, sdpa_tail_logits=eager * 2.0,
                  f32_tail_logits=eager + rng.normal(0, 0.05, eager.shape).astype(np.float32))
    r = tail_distribution(model, golden, backend="host")
    assert r["positions"] == 8
    # bf16 noise is ~1e-4; a position shifted by one is ~1e-1
    assert r["atlas"]["vs_eager"]["max"] < 1e-3 and r["atlas"]["vs_eager"]["argmax_agree"] == 1
    assert r["transformers_sdpa"]["vs_eager"]["max"] < 1e-12
    assert r["atlas"]["vs_f32"]["median"] > 1e-6  # the perturbation is seen
    assert set(r["transformers_eager"]) == {"vs_f32"}
