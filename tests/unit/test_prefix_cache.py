"""Prefix caching in the block manager, driven through the scheduler and engine core against
the fake paged-KV executor (which reads every token back through the block tables, so a
wrong shared block or a wrong start position changes the output)."""

from __future__ import annotations

from atlas.core.sampling import GREEDY
from atlas.engine.block_manager import BlockManager
from atlas.engine.core import EngineCore
from atlas.engine.prefix_cache import PrefixCache, chain_key
from atlas.engine.request import EngineRequest, FinishReason
from atlas.engine.scheduler import Scheduler
from atlas.engine.scheduling_policy import FifoPolicy
from tests.server.fakes import FakeBlockPool, FakeExecutor

VOCAB = list(range(10, 60))
BS = 4
SYSTEM = [11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24]   # 3.5 blocks


def make(num_blocks=64, max_num_seqs=8, max_prefill=16, prefix_caching=True):
    pool = FakeBlockPool(num_blocks)
    ex = FakeExecutor(vocab_ids=VOCAB, vocab_size=64, eos_id=2, block_size=BS,
                      num_kv_blocks=num_blocks)
    blocks = BlockManager(pool, num_blocks, BS, prefix_caching=prefix_caching)
    sched = Scheduler(blocks, FifoPolicy(), max_num_seqs=max_num_seqs, max_seq_len=512,
                      max_prefill_tokens=max_prefill)
    return pool, ex, EngineCore(sched, ex)


def run(core, requests, first_id=0):
    """Add `requests` and step to completion: ({seq_id: tokens}, {seq_id: cached tokens})."""
    for i, r in enumerate(requests):
        core.add(first_id + i, r)
    tokens: dict[int, list[int]] = {}
    cached: dict[int, int] = {}
    while core.has_work:
        report = core.step()
        assert report.error is None
        for o in report.outputs:
            tokens.setdefault(o.seq_id, []).extend(o.new_token_ids)
            cached[o.seq_id] = o.num_cached_tokens
            if o.finish_reason is not None:
                assert o.finish_reason == FinishReason.LENGTH
    return tokens, cached


def cold(prompt, max_tokens=8):
    _, _, core = make(prefix_caching=False)
    return run(core, [EngineRequest(prompt, GREEDY, max_tokens)])[0][0]


def assert_nothing_held(pool, core):
    """No sequence holds a block; every block is free or an unused cached one."""
    blocks = core.scheduler.blocks
    assert blocks.num_available == blocks.num_blocks
    assert pool.num_free + blocks.cache.num_cached == blocks.num_blocks


def turn(i, n=5):
    return SYSTEM + [30 + (i * 3 + j) % 20 for j in range(n)]


def test_a_warm_request_skips_the_cached_prefix_and_answers_as_cold():
    pool, ex, core = make()
    first, cached = run(core, [EngineRequest(turn(0), GREEDY, 8)])
    assert cached[0] == 0 and first[0] == cold(turn(0))
    ex.steps.clear()
    second, cached = run(core, [EngineRequest(turn(1), GREEDY, 8)], first_id=1)
    assert cached[1] == 12   # the three full blocks of SYSTEM
    assert ex.steps[0][0].start_pos == 12 and ex.steps[0][0].history is not None
    assert second[1] == cold(turn(1))
    stats = core.scheduler.blocks.prefix_cache_stats()
    assert stats.hit_tokens == 12 and stats.query_tokens == 2 * len(turn(0))
    assert_nothing_held(pool, core)


def test_a_prompt_cached_whole_still_computes_its_last_block_and_samples():
    pool, ex, core = make()
    prompt = SYSTEM[:12]   # exactly three blocks
    run(core, [EngineRequest(prompt, GREEDY, 3)])
    ex.steps.clear()
    again, cached = run(core, [EngineRequest(prompt, GREEDY, 3)], first_id=1)
    assert cached[1] == 8 and ex.steps[0][0].token_ids == prompt[8:]
    assert again[1] == cold(prompt, 3)
    assert_nothing_held(pool, core)


def test_concurrent_requests_share_a_prefix_read_only():
    pool, ex, core = make(max_prefill=64)
    run(core, [EngineRequest(SYSTEM + [40], GREEDY, 2)])
    tokens, cached = run(core, [EngineRequest(turn(i), GREEDY, 8) for i in range(6)],
                         first_id=1)
    for i in range(6):
        assert tokens[1 + i] == cold(turn(i)) and cached[1 + i] == 12
    tables = [c.block_table[:3] for c in ex.steps[-1]]
    assert len({tuple(t) for t in tables}) == 1   # one copy of the prefix, six readers
    assert_nothing_held(pool, core)


def test_eviction_under_a_tight_pool_keeps_outputs_right():
    pool, _, core = make(num_blocks=8)
    prompts = [[10 + (i * 11 + j) % 50 for j in range(14)] for i in range(6)]
    for i, p in enumerate(prompts):
        tokens, _ = run(core, [EngineRequest(p, GREEDY, 6)], first_id=i)
        assert tokens[i] == cold(p, 6)
    stats = core.scheduler.blocks.prefix_cache_stats()
    assert stats.evictions > 0 and stats.cached_blocks <= 8
    assert_nothing_held(pool, core)
    # the most recent prompt is still cached; the first one was evicted
    tokens, cached = run(core, [EngineRequest(prompts[-1], GREEDY, 6),
                                ], first_id=10)
    assert cached[10] == 12 and tokens[10] == cold(prompts[-1], 6)


def test_preempting_a_sequence_that_shares_blocks_keeps_outputs_right():
    pool, _, core = make(num_blocks=12, max_prefill=64)
    run(core, [EngineRequest(SYSTEM + [40], GREEDY, 2)])
    reqs = [EngineRequest(turn(i), GREEDY, 12) for i in range(4)]
    tokens, _ = run(core, reqs, first_id=1)
    assert core.scheduler.num_preemptions > 0
    for i in range(4):
        assert tokens[1 + i] == cold(turn(i), 12)
    assert_nothing_held(pool, core)


def test_abort_mid_prefill_caches_only_computed_blocks():
    pool, ex, core = make(max_prefill=8)
    long_prompt = SYSTEM + list(range(30, 50))
    core.add(0, EngineRequest(long_prompt, GREEDY, 5))
    core.step()   # the first 8-token chunk
    assert core.scheduler.running[0].num_computed == 8
    core.abort(0, FinishReason.ABORT)
    assert_nothing_held(pool, core)
    assert core.scheduler.blocks.cache.num_cached == 2
    tokens, cached = run(core, [EngineRequest(long_prompt, GREEDY, 5)], first_id=1)
    assert cached[1] == 8 and tokens[1] == cold(long_prompt, 5)
    assert_nothing_held(pool, core)


def test_prefix_caching_off_never_hits():
    pool, _, core = make(prefix_caching=False)
    run(core, [EngineRequest(turn(0), GREEDY, 4)])
    _, cached = run(core, [EngineRequest(turn(0), GREEDY, 4)], first_id=1)
    assert cached[1] == 0 and core.scheduler.blocks.prefix_cache_stats() is None
    assert pool.num_free == 64


def test_lru_evicts_the_least_recently_released_block_first():
    cache = PrefixCache()
    keys = [chain_key(0, [1]), chain_key(0, [2]), chain_key(0, [3])]
    for block, key in zip((7, 8, 9), keys):
        assert cache.insert(block, key, [block])
    assert not cache.insert(5, keys[0], [7])   # the key is cached already
    for block in (9, 7, 8):
        cache.release(block)
    cache.acquire([9])   # a hit takes 9 out of the LRU
    assert cache.num_evictable == 2 and cache.evict(1) == [7]
    assert cache.match(keys, lambda i: [7 + i]) == []   # block 7 (the first) is gone
    cache.release(9)
    assert cache.evict(2) == [8, 9] and cache.num_cached == 0 and cache.evictions == 3
