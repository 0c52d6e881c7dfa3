"""A prefix-cache hit must not change a single greedy token (host backend, real models).

The warm request starts its prefill after the cached blocks, so its new turn attends the
shared prefix's KV as another sequence wrote it; the cold request prefills everything. Both
run through the same engine loop; only `prefix_caching` differs.
"""

from pathlib import Path

import pytest

from atlas.core.sampling import GREEDY
from atlas.engine.llm_engine import LLMEngine
from atlas.engine.request import EngineRequest
from atlas.model.load import load_runner

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def warm_and_cold(runner, prompts: list[list[int]], max_tokens: int):
    """Greedy outputs of `prompts` all cold, and one after another with the cache on."""
    cold = LLMEngine(runner, max_prefill_tokens=64, prefix_caching=False)
    want = [c.token_ids for c in cold.generate(
        [EngineRequest(p, GREEDY, max_tokens) for p in prompts])]
    warm = LLMEngine(runner, max_prefill_tokens=64)
    got = [warm.generate([EngineRequest(p, GREEDY, max_tokens)])[0].token_ids
           for p in prompts]
    stats = warm.core.scheduler.blocks.prefix_cache_stats()
    blocks = warm.core.scheduler.blocks
    assert blocks.num_available == blocks.num_blocks
    return want, got, stats


@pytest.mark.parametrize("fixture", ["tiny-qwen3", "tiny-llama", "tiny-qwen3-moe",
                                     "tiny-qwen2-moe"])
def test_tiny_dense_and_moe_warm_equals_cold(fixture):
    runner = load_runner(FIXTURES / fixture, backend="host", max_seq_len=96, max_batch_size=2,
                         max_prefill_tokens=64)
    prefix = [(7 * j + 3) % 250 + 4 for j in range(37)]
    turns = [[5, 9, 200, 17], [44, 45, 46], [300 % 256, 2, 2, 9, 11]]
    want, got, stats = warm_and_cold(runner, [prefix + t for t in turns], 10)
    assert got == want
    block = runner.block_size
    assert stats.hit_tokens == 2 * (len(prefix) // block) * block


def test_default_model_warm_equals_cold(default_model_dir):
    from atlas.server.app_assets import load_assets

    tok = load_assets(default_model_dir).tokenizer
    system = ("You are a concise assistant for a travel agency. Answer in one sentence and "
              "name the country of every city you mention.")
    history = [{"role": "system", "content": system}, {"role": "user", "content": "Hello!"},
               {"role": "assistant", "content": "Hello! How can I help with your trip?"}]
    prompts = [tok.encode(tok.chat_template(False).render(
        history + [{"role": "user", "content": q}]))
        for q in ("What is the capital of France?", "Where is Kyoto?")]
    shared = next(i for i, (a, b) in enumerate(zip(*prompts)) if a != b)
    runner = load_runner(default_model_dir, backend="host", max_seq_len=192,
                         max_batch_size=1, max_prefill_tokens=64)
    want, got, stats = warm_and_cold(runner, prompts, 12)
    assert got == want
    assert stats.hit_tokens == shared // runner.block_size * runner.block_size > 32


def test_hybrid_model_gets_no_prefix_hits_and_refuses_speculation():
    """Its recurrent state is built by prefill from position 0 (no snapshots yet): a cache
    hit would skip that, so the engine turns the cache off for it."""
    from atlas.engine.speculative import NgramDrafter, Speculator

    runner = load_runner(FIXTURES / "tiny-qwen3_5", backend="host", max_seq_len=96,
                         max_batch_size=2, max_prefill_tokens=64, num_draft_tokens=2)
    prompt = [(5 * j + 1) % 200 + 4 for j in range(40)]
    engine = LLMEngine(runner, max_prefill_tokens=64)
    first, again = (engine.generate([EngineRequest(prompt, GREEDY, 6)])[0].token_ids
                    for _ in range(2))
    assert first == again and engine.core.scheduler.blocks.prefix_cache_stats() is None
    with pytest.raises(ValueError, match="recurrent"):
        LLMEngine(runner, max_prefill_tokens=64, speculator=Speculator(NgramDrafter(), 2))
