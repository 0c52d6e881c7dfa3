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
from atlas.engine.speculative import NgramDrafter, Speculator
from atlas.model.load import load_runner

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def warm_and_cold(runner, prompts: list[list[int]], max_tokens: int, **warm_options):
    """Greedy outputs of `prompts` all cold, and one after another with the cache on."""
    cold = LLMEngine(runner, max_prefill_tokens=64, prefix_caching=False)
    want = [c.token_ids for c in cold.generate(
        [EngineRequest(p, GREEDY, max_tokens) for p in prompts])]
    warm = LLMEngine(runner, max_prefill_tokens=64, **warm_options)
    got = [warm.generate([EngineRequest(p, GREEDY, max_tokens)])[0].token_ids
           for p in prompts]
    stats = warm.core.scheduler.blocks.prefix_cache_stats()
    blocks = warm.core.scheduler.blocks
    assert blocks.num_available == blocks.num_blocks
    return want, got, stats


@pytest.mark.parametrize("fixture", ["tiny-qwen3", "tiny-llama", "tiny-qwen3-moe",
                                     "tiny-qwen2-moe", "tiny-mistral-swa", "tiny-gemma3",
                                     "tiny-phi3-longrope", "tiny-phi3-d96"])
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


@pytest.mark.parametrize("fixture", ["tiny-qwen3_5", "tiny-qwen3_5_moe"])
def test_hybrid_warm_equals_cold_through_state_snapshots(fixture):
    """A hybrid hit restores the recurrent state snapshotted where a chunk ended on a
    checkpoint (every `snapshot_interval` = 16 tokens here, each 64-token budget cut at the
    last one it crosses): without the restore the warm turns would continue from another
    sequence's state."""
    runner = load_runner(FIXTURES / fixture, backend="host", max_seq_len=128,
                         max_batch_size=2, max_prefill_tokens=64)
    prefix = [(7 * j + 3) % 250 + 4 for j in range(37)]
    turns = [[5, 9, 200, 17], [44, 45, 46], [44, 45, 46, 2, 2, 9, 11]]
    want, got, stats = warm_and_cold(runner, [prefix + t for t in turns], 10,
                                     snapshot_interval=16)
    assert got == want
    assert stats.hit_tokens == 2 * 32   # 41 tokens: the first chunk stops at 32


def test_hybrid_snapshot_pool_of_one_evicts_and_stays_right():
    """Checkpoints every 32 tokens, a 64-token prefill budget and one snapshot slot: the
    first prompt snapshots 64 then 96 (evicting 64); the second shares 64 tokens of KV but
    no snapshot, recomputes and snapshots 64 (evicting 96); the third hits 96 tokens of KV
    and restores the second's snapshot at 64. Every output equals the cold one. Synchronous
    steps: running ahead, the chunk to 96 is planned while the one to 64 holds the only
    slot, so it takes no snapshot (the eviction order differs, the outputs do not)."""
    runner = load_runner(FIXTURES / "tiny-qwen3_5", backend="host", max_seq_len=192,
                         max_batch_size=2, max_prefill_tokens=64, ssm_cache_slots=1)
    base = [(11 * j + 5) % 300 + 4 for j in range(100)]
    prompts = [base + [7, 8], base[:70] + [9, 9, 9], base + [7, 8, 1]]
    cold = LLMEngine(runner, max_prefill_tokens=64, prefix_caching=False)
    want = [c.token_ids for c in cold.generate([EngineRequest(p, GREEDY, 6) for p in prompts])]
    warm = LLMEngine(runner, max_prefill_tokens=64, snapshot_interval=32,
                     async_scheduling=False)
    got = [warm.generate([EngineRequest(p, GREEDY, 6)])[0].token_ids for p in prompts]
    assert got == want
    counters = warm.core.counters()
    assert counters["prefix_cache_hits_total"] == 64
    assert counters["prefix_cache_state_restores_total"] == 1
    assert counters["prefix_cache_state_evictions_total"] == 3
    assert counters["prefix_cache_state_snapshots"] == 1


def test_shared_prefix_in_a_tight_pool_with_preemption_and_speculation():
    """Three concurrent requests share a 37-token prefix in a pool too small for all of them
    while n-gram speculation verifies drafts: blocks are shared read-only, unreferenced
    cached blocks are evicted, a sequence holding shared blocks is preempted and resumes.
    Every output equals its request's cold run alone, and the pool ends empty."""
    runner = load_runner(FIXTURES / "tiny-qwen3", backend="host", max_seq_len=96,
                         max_batch_size=3, max_prefill_tokens=64, max_num_blocks=10,
                         num_draft_tokens=3)
    prefix = [(7 * j + 3) % 250 + 4 for j in range(37)]
    prompts = [prefix + t for t in ([5, 9, 200, 17], [44, 45, 46], [2, 2, 9, 11, 5])]
    alone = [LLMEngine(runner, max_prefill_tokens=64, prefix_caching=False).generate(
        [EngineRequest(p, GREEDY, 24)])[0].token_ids for p in prompts]
    engine = LLMEngine(runner, max_prefill_tokens=64, speculator=Speculator(NgramDrafter(), 3))
    got = [c.token_ids for c in engine.generate([EngineRequest(p, GREEDY, 24)
                                                 for p in prompts])]
    assert got == alone
    scheduler = engine.core.scheduler
    stats = scheduler.blocks.prefix_cache_stats()
    assert scheduler.num_preemptions > 0 and stats.evictions > 0 and stats.hit_tokens >= 32
    assert scheduler.speculator.verify_steps > 0
    assert scheduler.blocks.num_available == scheduler.blocks.num_blocks


@pytest.mark.parametrize("async_scheduling", [False, True])
def test_abort_mid_prefill_leaks_nothing_and_later_hits_stay_right(async_scheduling):
    """A request aborted after the first of its prefill chunks leaves only its computed,
    full blocks in the cache; a later request with the same prompt hits them and answers
    what a cold run answers. With async scheduling the first chunk is still in flight when
    the abort comes: its blocks are offered all the same (what reads them runs after it)."""
    runner = load_runner(FIXTURES / "tiny-qwen3", backend="host", max_seq_len=128,
                         max_batch_size=2, max_prefill_tokens=32)
    prompt = [(5 * j + 1) % 250 + 4 for j in range(90)]
    cold = LLMEngine(runner, max_prefill_tokens=32, prefix_caching=False).generate(
        [EngineRequest(prompt, GREEDY, 8)])[0].token_ids
    engine = LLMEngine(runner, max_prefill_tokens=32, async_scheduling=async_scheduling)
    core = engine.core
    core.add(0, EngineRequest(prompt, GREEDY, 8))
    core.step()   # the first 32-token chunk
    core.abort(0, "abort")
    blocks = core.scheduler.blocks
    assert blocks.num_available == blocks.num_blocks
    assert blocks.prefix_cache_stats().cached_blocks == 32 // runner.block_size
    assert engine.generate([EngineRequest(prompt, GREEDY, 8)])[0].token_ids == cold
    assert blocks.prefix_cache_stats().hit_tokens == 32
    assert blocks.num_available == blocks.num_blocks
