"""Recurrent-state snapshots for a hybrid model's prefix cache: the index, and how the
scheduler cuts prefill chunks on checkpoints, saves there and restores on a hit (pure logic,
no executor: the chunks are what an executor would be told to do)."""

from __future__ import annotations

import pytest

from atlas.core.sampling import GREEDY
from atlas.engine.block_manager import BlockManager
from atlas.engine.prefix_cache import StateSnapshots
from atlas.engine.request import EngineRequest
from atlas.engine.scheduler import Scheduler
from atlas.engine.scheduling_policy import FifoPolicy
from tests.server.fakes import FakeBlockPool

BS = 4


def test_checkpoints_are_the_last_interval_multiple_a_chunk_crosses():
    snaps = StateSnapshots(2, interval=8)
    assert snaps.checkpoint(0, 20) == 16
    assert snaps.checkpoint(16, 30) == 24
    assert snaps.checkpoint(0, 7) == 0
    assert snaps.checkpoint(16, 23) == 0      # 16 is the start, not crossed
    assert snaps.checkpoint(30, 32) == 32     # a decode token landing on one


def test_index_is_lru_and_never_evicts_a_pending_snapshot():
    snaps = StateSnapshots(2, interval=8)
    a, b = snaps.claim(), snaps.claim()
    assert {a, b} == {0, 1} and snaps.claim() is None      # both pending
    snaps.commit(101, a)
    snaps.commit(102, b)
    assert snaps.find([101]) == (1, a)                     # 101 becomes most recent
    assert snaps.find([555, 102, 777]) == (2, b)
    assert snaps.find([555]) == (0, -1)
    snaps.find([101])
    c = snaps.claim()                                      # evicts 102, the older one
    assert c == b and not snaps.has(102) and snaps.has(101)
    snaps.discard(c)
    assert snaps.claim() == c
    snaps.commit(101, c)                                   # a duplicate prefix: slot freed
    assert snaps.stats().held == 1 and snaps.claim() == c
    assert snaps.stats().evictions == 1


def _scheduler(snapshots: StateSnapshots, budget: int = 64) -> Scheduler:
    blocks = BlockManager(FakeBlockPool(64), 64, BS, snapshots=snapshots)
    return Scheduler(blocks, FifoPolicy(), max_num_seqs=4, max_seq_len=256,
                     max_prefill_tokens=budget)


def _finish(sched: Scheduler, seq_id: int, prompt: list[int]) -> list:
    """Run `prompt` to its first token; the chunks the scheduler issued on the way."""
    sched.add(seq_id, EngineRequest(prompt, GREEDY, 1), 0.0)
    chunks = []
    while sched.has_work:
        plan = sched.schedule(0.0)
        chunks += plan.chunks
        sched.commit(plan, [7 if c.sample else None for c in plan.chunks], 0.0)
    return chunks


def test_prefill_is_cut_on_checkpoints_and_a_hit_restores_the_snapshot():
    snaps = StateSnapshots(4, interval=8)
    sched = _scheduler(snaps, budget=12)
    prompt = list(range(100, 122))                         # 22 tokens: checkpoints 8, 16
    chunks = _finish(sched, 0, prompt)
    # each 12-token budget stops at the last checkpoint it crosses
    assert [(c.start_pos, len(c.token_ids)) for c in chunks] == [(0, 8), (8, 8), (16, 6)]
    saves = [c.state_save for c in chunks]
    assert None not in saves[:2] and saves[2] is None and snaps.stats().held == 2
    for seq_id, shared, start, slot in ((1, 20, 16, saves[1]), (2, 9, 8, saves[0])):
        again = _finish(sched, seq_id, prompt[:shared] + [5, 6, 7])
        assert (again[0].start_pos, again[0].state_restore) == (start, slot)
    # a prefill budget that crosses no checkpoint runs whole
    assert [len(c.token_ids) for c in _finish(sched, 3, prompt[:16] + [1] * 7)] == [7]
    other = _finish(sched, 4, [9] + prompt[1:])            # no KV hit, no snapshot
    assert other[0].start_pos == 0 and other[0].state_restore is None
    assert sched.blocks.num_available == 64


def test_a_snapshot_is_dropped_when_its_sequence_leaves_mid_step():
    snaps = StateSnapshots(1, interval=8)
    sched = _scheduler(snaps, budget=8)
    sched.add(0, EngineRequest(list(range(100, 130)), GREEDY, 1), 0.0)
    plan = sched.schedule(0.0)
    assert plan.chunks[0].state_save == 0 and snaps.claim() is None
    sched.abort(0)
    assert snaps.claim() == 0 and snaps.stats().held == 0


def test_snapshots_need_the_prefix_cache_and_block_aligned_checkpoints():
    with pytest.raises(ValueError, match="multiple of the block size"):
        BlockManager(FakeBlockPool(8), 8, BS, snapshots=StateSnapshots(1, interval=6))
    with pytest.raises(ValueError, match="prefix cache"):
        BlockManager(FakeBlockPool(8), 8, BS, prefix_caching=False,
                     snapshots=StateSnapshots(1, interval=8))
