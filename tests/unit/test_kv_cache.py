"""Paged KV cache: block accounting, the sizing policy and its error, the device pools and the
block-table mirror."""

from __future__ import annotations

import numpy as np
import pytest

from atlas.core.dtype import DType
from atlas.runtime.host import HostBackend
from atlas.runtime.kv_cache import (BlockAllocator, KvBlockError, KvCacheBudgetError,
                                    KvCacheConfig, OutOfBlocksError, PagedKvCache,
                                    kv_bytes_per_block)
from atlas.runtime.mock import MockGpuBackend

# ---- BlockAllocator -----------------------------------------------------------------------


def test_fresh_allocator_hands_out_ids_in_order() -> None:
    pool = BlockAllocator(6)
    assert pool.allocate(3) == [0, 1, 2]
    assert pool.allocate_one() == 3
    assert (pool.num_free, pool.num_used) == (2, 4)


def test_freed_blocks_are_reused_most_recent_first() -> None:
    pool = BlockAllocator(4)
    blocks = pool.allocate(4)
    pool.free([blocks[1], blocks[3]])
    assert pool.allocate_one() == 3
    assert pool.allocate_one() == 1
    assert pool.num_free == 0


def test_allocation_is_all_or_nothing_on_exhaustion() -> None:
    pool = BlockAllocator(3)
    pool.allocate(2)
    assert pool.can_allocate(1) and not pool.can_allocate(2)
    with pytest.raises(OutOfBlocksError, match="2 KV blocks requested, 1 of 3 free"):
        pool.allocate(2)
    assert pool.num_free == 1  # nothing was taken by the failed call
    pool.allocate_one()
    with pytest.raises(OutOfBlocksError):
        pool.allocate_one()
    assert pool.allocate(0) == []
    with pytest.raises(ValueError):
        pool.allocate(-1)


def test_double_free_and_foreign_ids_are_detected() -> None:
    pool = BlockAllocator(4)
    (b,) = pool.allocate(1)
    pool.free_one(b)
    with pytest.raises(KvBlockError, match="double free of KV block 0"):
        pool.free_one(b)
    with pytest.raises(KvBlockError, match="outside"):
        pool.free_one(4)
    with pytest.raises(KvBlockError, match="outside"):
        pool.free_one(-1)  # must not wrap around to the last block
    assert pool.num_free == 4


def test_shared_blocks_return_after_their_last_reference() -> None:
    pool = BlockAllocator(2)
    b = pool.allocate_one()
    pool.incref(b)
    assert pool.ref_count(b) == 2
    pool.free_one(b)
    assert pool.num_free == 1 and pool.ref_count(b) == 1
    pool.free_one(b)
    assert pool.num_free == 2 and pool.ref_count(b) == 0
    with pytest.raises(KvBlockError, match="not allocated"):
        pool.incref(b)


def test_allocator_churn_keeps_the_invariants() -> None:
    rng = np.random.default_rng(7)
    pool = BlockAllocator(64)
    held: list[int] = []
    for _ in range(2000):
        if held and (rng.random() < 0.5 or not pool.can_allocate(1)):
            held.remove(b := held[int(rng.integers(len(held)))])
            pool.free_one(b)
        else:
            held.extend(pool.allocate(int(rng.integers(1, 1 + min(4, pool.num_free)))))
        assert pool.num_used == len(held) == len(set(held))
    pool.free(held)
    assert sorted(pool.allocate(64)) == list(range(64))


# ---- sizing policy ------------------------------------------------------------------------

SMOL = dict(num_layers=30, num_kv_heads=3, head_dim=64)  # SmolLM2-135M


def test_bytes_per_block_counts_k_and_v_of_every_layer() -> None:
    assert kv_bytes_per_block(30, 3, 64, 16) == 2 * 30 * 3 * 16 * 64 * 2


def test_plan_fills_the_budget_left_after_weights_and_scratch() -> None:
    per_block = kv_bytes_per_block(30, 3, 64, 16)
    total = 1000 * per_block
    cfg = KvCacheConfig.plan(**SMOL, max_batch_size=64, max_seq_len=4096, total_memory=total,
                             weight_bytes=100 * per_block, arena_bytes=50 * per_block,
                             gpu_memory_utilization=0.5)
    table = 4 * 64 * 256
    assert cfg.num_blocks == (500 * per_block - 150 * per_block - table) // per_block
    assert cfg.max_blocks_per_seq == 256
    assert cfg.bytes_per_block == per_block


def test_plan_is_capped_by_what_the_batch_can_use() -> None:
    cfg = KvCacheConfig.plan(**SMOL, max_batch_size=4, max_seq_len=100, total_memory=8 << 30,
                             weight_bytes=0, arena_bytes=0)
    assert cfg.num_blocks == 4 * 7  # ceil(100 / 16) blocks per sequence
    small = KvCacheConfig.plan(**SMOL, max_batch_size=4, max_seq_len=100,
                               total_memory=8 << 30, weight_bytes=0, arena_bytes=0,
                               max_num_blocks=10)
    assert small.num_blocks == 10


def test_plan_respects_measured_free_memory() -> None:
    per_block = kv_bytes_per_block(30, 3, 64, 16)
    cfg = KvCacheConfig.plan(**SMOL, max_batch_size=8, max_seq_len=160, total_memory=8 << 30,
                             weight_bytes=0, arena_bytes=0,
                             free_memory=20 * per_block + 4 * 8 * 10)
    assert cfg.num_blocks == 20


def test_plan_fails_clearly_when_one_sequence_does_not_fit() -> None:
    per_block = kv_bytes_per_block(30, 3, 64, 16)
    with pytest.raises(KvCacheBudgetError) as info:
        KvCacheConfig.plan(**SMOL, max_batch_size=1, max_seq_len=32 * 16,
                           total_memory=40 * per_block, weight_bytes=10 * per_block,
                           arena_bytes=0, gpu_memory_utilization=1.0)
    msg = str(info.value)
    assert f"{32 * per_block:,} bytes" in msg  # needed
    assert "only" in msg and "--max-seq-len" in msg
    with pytest.raises(KvCacheBudgetError, match="max_num_blocks=3"):
        KvCacheConfig.plan(**SMOL, max_batch_size=1, max_seq_len=64, total_memory=8 << 30,
                           weight_bytes=0, arena_bytes=0, max_num_blocks=3)
    with pytest.raises(ValueError, match="gpu_memory_utilization"):
        KvCacheConfig.plan(**SMOL, max_batch_size=1, max_seq_len=64, total_memory=8 << 30,
                           weight_bytes=0, arena_bytes=0, gpu_memory_utilization=1.5)


# ---- PagedKvCache -------------------------------------------------------------------------

def _cfg(num_blocks: int = 10) -> KvCacheConfig:
    return KvCacheConfig(num_layers=3, num_kv_heads=2, head_dim=8, num_blocks=num_blocks,
                         max_batch_size=4, max_seq_len=64)


def test_pools_are_disjoint_per_layer_and_sized_for_the_abi_layout() -> None:
    backend = HostBackend(references={})
    kv = PagedKvCache(backend, _cfg())
    layer_elems = 10 * 2 * 16 * 8  # [num_blocks, hkv, block_size, head_dim]
    starts = sorted(kv.k_ptrs + kv.v_ptrs)
    assert all(b - a >= 2 * layer_elems for a, b in zip(starts, starts[1:]))
    for layer in range(3):
        # the whole pool is addressable and writing one does not touch another
        backend.view(kv.k_cache(layer), np.uint16, layer_elems)[:] = layer + 1
        backend.view(kv.v_cache(layer), np.uint16, layer_elems)[:] = 100 + layer
    for layer in range(3):
        assert set(backend.view(kv.k_cache(layer), np.uint16, layer_elems)) == {layer + 1}
        assert set(backend.view(kv.v_cache(layer), np.uint16, layer_elems)) == {100 + layer}


def test_block_table_mirror_uploads_only_changed_rows() -> None:
    backend = HostBackend(references={})
    kv = PagedKvCache(backend, _cfg())
    cols = kv.max_blocks_per_seq
    kv.set_block_table(1, [4, 5, 6])
    kv.set_block_table(2, [7])
    assert kv.upload_block_tables() == 2
    device = backend.view(kv.block_tables, np.int32, 4 * cols).reshape(4, cols)
    assert device[1, :4].tolist() == [4, 5, 6, 0] and device[2, :2].tolist() == [7, 0]
    assert kv.upload_block_tables() == 0  # nothing changed since
    kv.set_block_table(1, [9])  # a shorter table clears its stale tail
    assert kv.upload_block_tables() == 1
    assert device[1, :4].tolist() == [9, 0, 0, 0]


def test_block_table_rejects_bad_ids_and_overlong_tables() -> None:
    kv = PagedKvCache(HostBackend(references={}), _cfg())
    with pytest.raises(KvBlockError, match=r"\[10\]"):
        kv.set_block_table(0, [1, 10])
    assert kv.block_tables_host[0, :2].tolist() == [0, 0]
    with pytest.raises(ValueError, match="max_blocks_per_seq"):
        kv.set_block_table(0, list(range(kv.max_blocks_per_seq + 1)))


def test_release_frees_everything() -> None:
    mock = MockGpuBackend()
    kv = PagedKvCache(mock, _cfg())
    assert mock.bytes_in_use == kv.nbytes
    kv.release()
    assert mock.live_allocations == {}


def test_only_bf16_and_fp8_e4m3_pools_are_supported() -> None:
    cfg = KvCacheConfig(3, 2, 8, 10, 4, 64, dtype=DType.FP8E5M2)
    with pytest.raises(ValueError, match="fp8e5m2 is not supported"):
        PagedKvCache(MockGpuBackend(), cfg)
