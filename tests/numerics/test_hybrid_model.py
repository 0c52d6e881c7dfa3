"""The hybrid Qwen3.5 family (Gated-DeltaNet + gated full attention) end to end on the CPU
reference backend, against transformers and against itself.

tests/fixtures/tiny-qwen3_5 (tools/make_fixtures.py, transformers 5.17) has two
linear-attention layers and one gated full-attention layer with partial rotary and (1 + w)
norms; tiny-qwen3_5_moe has the same layers with a mixture-of-experts MLP (8 experts, top-3,
gated shared expert) in each, tiny-qwen3_next too, with key-head-grouped linear-attention
projections (permuted at load) and one dense layer. The recurrent state lives in
per-sequence slots, so the tests here check what could break it on each: chunk boundaries
inside and at the edges of the delta rule's 64-token chunks, sequences sharing a decode
batch at different positions, a slot reused after release (preemption) and the multimodal
checkpoint layout.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from atlas.core.sampling import GREEDY
from atlas.engine.llm_engine import LLMEngine
from atlas.engine.parity import compare_with_golden
from atlas.engine.request import EngineRequest
from atlas.model.batch import PenaltyHistory, SeqChunk
from atlas.model.load import load_runner
from atlas.runtime.weights import WeightStore, write_safetensors

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
MODEL = FIXTURES / "tiny-qwen3_5"
MODELS = [MODEL, FIXTURES / "tiny-qwen3_5_moe", FIXTURES / "tiny-qwen3_next"]
PROMPT = [(37 * i + 11) % 512 for i in range(150)]


@pytest.fixture(scope="module", params=MODELS, ids=lambda p: p.name)
def model(request) -> Path:
    return request.param


@pytest.fixture(scope="module")
def runner(model):
    return load_runner(model, backend="host", max_seq_len=256, max_batch_size=4,
                       max_prefill_tokens=256)


def _greedy(runner, prompts: list[list[int]], n: int, chunk: int) -> list[list[int]]:
    engine = LLMEngine(runner, max_prefill_tokens=chunk)
    return [c.token_ids for c in engine.generate([EngineRequest(p, GREEDY, n) for p in prompts])]


def test_matches_transformers(model):
    golden = dict(np.load(model / "golden.npz"))
    r = compare_with_golden(model, golden, backend="host")
    assert r["cosine"] >= 0.9999, r
    assert r["argmax_match"], r
    assert r["greedy_match"] == r["greedy_total"] == 16, r


@pytest.mark.parametrize("chunk", [1, 63, 64, 65])
def test_chunked_prefill_equals_one_shot(runner, chunk):
    """Prefill chunks of 1, 63, 64 and 65 tokens carry the conv and delta-rule state across
    step boundaries that fall inside, at and just past the kernel's 64-token chunks."""
    one_shot = _greedy(runner, [PROMPT], 6, 256)
    assert _greedy(runner, [PROMPT], 6, chunk) == one_shot


def test_batched_decode_matches_solo_runs(runner):
    """Sequences at different positions share decode steps (graph buckets with padding rows,
    one state slot each) and produce what each produces alone."""
    prompts = [PROMPT[:70], [5, 9, 200, 17], PROMPT[3:40]]
    together = _greedy(runner, prompts, 8, 256)
    alone = [_greedy(runner, [p], 8, 256)[0] for p in prompts]
    assert together == alone


def test_preempted_sequences_recompute_their_state(model):
    """A KV pool of 7 blocks cannot hold three 60-token sequences at once (4 blocks each), so
    the engine preempts and recomputes: each sequence's conv and delta-rule state is rebuilt
    from position 0 in a slot another sequence used, and the tokens equal the solo runs'."""
    tight = load_runner(model, backend="host", max_seq_len=64, max_batch_size=3,
                        max_prefill_tokens=64, max_num_blocks=7)
    prompts = [PROMPT[i * 40:i * 40 + 30] for i in range(3)]
    engine = LLMEngine(tight, max_prefill_tokens=64)
    together = [c.token_ids for c in engine.generate([EngineRequest(p, GREEDY, 30)
                                                      for p in prompts])]
    assert engine.core.scheduler.num_preemptions > 0   # the pool really was too small
    assert together == [engine.generate([EngineRequest(p, GREEDY, 30)])[0].token_ids
                        for p in prompts]


def _decode_logits(prompt: list[int], steps: int) -> list[np.ndarray]:
    """Logits of a prompt's prefill and `steps` greedy decode steps (decode graphs)."""
    r = load_runner(MODEL, backend="host", max_seq_len=64, max_batch_size=2,
                    max_prefill_tokens=64)
    tok = r.execute([SeqChunk(1, prompt, 0, [0], GREEDY, history=PenaltyHistory(prompt))])[0]
    logits = [r.read_logits(1)]
    for pos in range(len(prompt), len(prompt) + steps):
        tok = r.execute([SeqChunk(1, [tok], pos, [0], GREEDY)])[0]
        logits.append(r.read_logits(1))
    return logits


def test_fused_decode_step_equals_the_three_kernels(monkeypatch):
    """Decode graphs run each linear layer's conv, delta-rule step and gated norm as one
    kernel (gdn_decode); with ATLAS_GDN_FUSED=0 as the three kernels. Its specification is
    their composition, so on the host the logits agree bit for bit, over decode steps that
    go around the conv ring (kernel 4) twice."""
    monkeypatch.setenv("ATLAS_GDN_FUSED", "1")
    fused = _decode_logits(PROMPT[:5], 8)
    monkeypatch.setenv("ATLAS_GDN_FUSED", "0")
    unfused = _decode_logits(PROMPT[:5], 8)
    for a, b in zip(fused, unfused):
        np.testing.assert_array_equal(a, b)


def test_state_slot_usage_follows_sequences_and_releases(runner):
    """What /metrics reports as atlas_state_slots_in_use / _total: a slot per live sequence
    out of max_batch_size; released sequences give theirs back."""
    assert runner.state_slot_usage() == (0, 4)
    runner.execute([SeqChunk(s, [1, 2, 3], 0, [s], GREEDY, history=PenaltyHistory([1, 2, 3]))
                    for s in (0, 1)])
    assert runner.state_slot_usage() == (2, 4)
    runner.release(0)
    runner.release(1)
    assert runner.state_slot_usage() == (0, 4)


def test_a_sequence_must_start_at_position_zero():
    runner = load_runner(MODEL, backend="host", max_seq_len=64, max_batch_size=2,
                         max_prefill_tokens=64)
    with pytest.raises(RuntimeError, match="position 0"):
        runner.execute([SeqChunk(9, [1, 2], 16, [0, 1], GREEDY,
                                 history=PenaltyHistory([1, 2]))])
    runner.release(9)


@pytest.mark.parametrize("name", ["tiny-qwen3_5", "tiny-qwen3_5_moe"])
def test_multimodal_checkpoint_loads_its_language_model(tmp_path, caplog, name):
    """config with text_config + vision_config and tensors under model.language_model.*: the
    text model loads, the vision tower is skipped with a notice, the logits are the same."""
    src = FIXTURES / name
    text = json.loads((src / "config.json").read_text())
    family = text["model_type"].removesuffix("_text")
    config = {"model_type": family, "architectures": [text["architectures"][0].replace(
              "ForCausalLM", "ForConditionalGeneration")],
              "text_config": text, "vision_config": {"model_type": family, "depth": 1},
              "tie_word_embeddings": False}
    (tmp_path / "config.json").write_text(json.dumps(config))
    store = WeightStore(src)
    names = sorted(store.tensors)
    layout = [(n.replace("model.", "model.language_model.", 1) if n.startswith("model.") else n,
               store.tensors[n].dtype, store.tensors[n].shape) for n in names]
    layout.append(("model.visual.patch_embed.proj.weight", "F32", (4, 3)))
    write_safetensors(tmp_path / "model.safetensors", layout,
                      [store.read(n) for n in names] + [np.zeros((4, 3), np.float32)])
    golden = dict(np.load(src / "golden.npz"))
    with caplog.at_level("WARNING", logger="atlas.model.load"):
        r = compare_with_golden(tmp_path, golden, backend="host")
    assert r["cosine"] >= 0.9999 and r["greedy_match"] == 16, r
    assert [m for m in caplog.messages if "ignoring 1 vision-tower tensors" in m], caplog.messages


def test_state_pools_are_planned_beside_a_kv_cache_of_attention_layers_only():
    """tiny-qwen3_5: one KV pool layer per full-attention layer; conv and delta-rule state
    for every linear layer and every slot (max_batch_size + the padding rows' + the prefix
    cache's snapshots) inside the planned arena."""
    runner = load_runner(MODEL, backend="host", max_seq_len=256, max_batch_size=4,
                         max_prefill_tokens=256, ssm_cache_slots=3)
    assert runner.kv.cfg.num_layers == 1  # layer 2 of ("linear", "linear", "full")
    assert runner.num_state_snapshots == 3
    slots = runner.max_batch_size + 1 + 3
    conv, delta = runner.arena.slice("conv_state"), runner.arena.slice("delta_state")
    assert conv.nbytes == 2 * slots * 2 * 4 * (2 * 64 + 256)   # bf16 ring [k, conv_dim]
    assert delta.nbytes == 2 * slots * 4 * 8 * 32 * 32             # f32 [hv, dk, dv]
    assert conv.offset + conv.nbytes <= runner.arena.nbytes
    assert delta.offset + delta.nbytes <= runner.arena.nbytes
