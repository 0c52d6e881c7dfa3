"""KV block accounting for the scheduler: the pool protocol and who holds which blocks.

`BlockPool` is the one allocator interface (`atlas.runtime.kv_cache.BlockAllocator`
implements it; tests inject fakes with leak accounting). `BlockManager` grows and frees each
sequence's block table, and (unless turned off) keeps full blocks in the `PrefixCache`:
admission looks up the full-block key chain of a sequence's tokens and starts it after the
hit, and every block a sequence fills is offered to the cache. A sequence's table holds its
own blocks and cache-owned ones; releasing it frees the former to the pool and drops one
user of the latter. A hybrid model's cache also needs its recurrent state at the hit's end:
`StateSnapshots` indexes the executor's state snapshots by the same chain keys, a hit is
cut back to the longest prefix with a snapshot, and prefill chunks end on the snapshots'
checkpoints so the state there can be saved (`cut_chunk`, `claim_snapshot`).
"""

from __future__ import annotations

from typing import Protocol, Sequence as Seq

from .prefix_cache import PrefixCache, PrefixCacheStats, StateSnapshots, chain_key
from .sequence import Sequence


class BlockPool(Protocol):
    """KV block ids with O(1) allocate and free."""

    @property
    def num_free(self) -> int: ...

    def can_allocate(self, n: int) -> bool: ...

    def allocate(self, n: int) -> list[int]: ...

    def free(self, blocks: Seq[int]) -> None: ...


class BlockManager:
    """Reserves blocks for a sequence's next tokens and returns them when it leaves."""

    def __init__(self, pool: BlockPool, num_blocks: int, block_size: int,
                 prefix_caching: bool = True, snapshots: StateSnapshots | None = None) -> None:
        """`snapshots`: a hybrid model's state-snapshot index (with `prefix_caching`)."""
        if min(num_blocks, block_size) <= 0:
            raise ValueError(f"num_blocks={num_blocks} and block_size={block_size} must be "
                             "positive")
        if snapshots is not None and (not prefix_caching or snapshots.interval % block_size):
            raise ValueError("state snapshots need the prefix cache and an interval that is a "
                             f"multiple of the block size {block_size}")
        self.pool = pool
        self.num_blocks = num_blocks
        self.block_size = block_size
        self.cache = PrefixCache() if prefix_caching else None
        self.snapshots = snapshots

    @property
    def num_available(self) -> int:
        """Blocks a reservation may take: free ones and unused cached ones (evicted then)."""
        return self.pool.num_free + (self.cache.num_evictable if self.cache else 0)

    @property
    def utilization(self) -> float:
        return 1.0 - self.num_available / self.num_blocks

    def prefix_cache_stats(self) -> PrefixCacheStats | None:
        return self.cache.stats() if self.cache else None

    def blocks_missing(self, seq: Sequence, num_tokens: int) -> int:
        """How many more blocks `seq` needs to hold `num_tokens` tokens (0 when it has them)."""
        return max(-(-num_tokens // self.block_size) - len(seq.block_table), 0)

    def can_reserve(self, seq: Sequence, num_tokens: int) -> bool:
        return self.blocks_missing(seq, num_tokens) <= self.num_available

    def reserve(self, seq: Sequence, num_tokens: int) -> None:
        """Grow `seq`'s block table to hold `num_tokens` (check `can_reserve` first)."""
        missing = self.blocks_missing(seq, num_tokens)
        if not missing:
            return
        short = missing - self.pool.num_free
        if short > 0 and self.cache is not None:
            self.pool.free(self.cache.evict(short))
        seq.block_table.extend(self.pool.allocate(missing))

    def admit(self, seq: Sequence, budget: int, reuse: bool = True) -> int:
        """Start a waiting sequence (no blocks, nothing computed): take its cached prefix
        (unless not `reuse`: every position must be computed), then reserve its first chunk
        of at most `budget` tokens. Returns that chunk's size, 0 (nothing changed) when the
        pool cannot hold it yet.

        At least one token is always left to compute, so the step that ends the prompt
        samples: a prompt cached whole recomputes its last block."""
        hits: list[int] = []
        restore = None
        if self.cache is not None and reuse:
            full = (seq.num_tokens - 1) // self.block_size
            keys = self._chain_keys(seq, full)
            hits = self.cache.match(keys, lambda i: self._block_tokens(seq, i))
            if self.snapshots is not None and hits:
                n, slot = self.snapshots.find(keys[:len(hits)])
                hits, restore = hits[:n], (slot if n else None)
        start = len(hits) * self.block_size
        chunk = self.cut_chunk(seq, start, min(seq.num_tokens - start, budget))
        missing = -(-(start + chunk) // self.block_size) - len(hits)
        taken = self.cache.num_unused_among(hits) if self.cache else 0
        if missing > self.num_available - taken:
            return 0
        if self.cache is not None and reuse:
            self.cache.acquire(hits)
            self.cache.query_tokens += seq.num_tokens
            self.cache.hit_tokens += start
        seq.block_table = hits
        seq.num_cached_blocks = len(hits)
        seq.num_computed = start
        seq.state_restore = restore
        if seq.num_preemptions == 0:
            seq.num_cached_tokens = start
        self.reserve(seq, start + chunk)
        return chunk

    def cut_chunk(self, seq: Sequence, start: int, chunk: int) -> int:
        """A prefill chunk of `seq` from `start`, shortened to end on the last snapshot
        checkpoint it crosses whose prefix has no snapshot yet (unchanged without one)."""
        end = self._snapshot_point(seq, start, start + chunk)
        return end - start if end else chunk

    def claim_snapshot(self, seq: Sequence, start: int, end: int) -> int | None:
        """The snapshot slot a chunk [start, end) of `seq` saves its final state into: when
        it ends on a checkpoint without a snapshot and a slot can be had; else None. The
        snapshot is pending on `seq` until `cache_computed` sees the chunk committed. A chunk
        whose last token is still pending (the engine runs a step ahead) cannot look its
        prefix up yet: it claims a slot, and the commit drops it if the prefix has one."""
        if self.snapshots is None or self.snapshots.checkpoint(start, end) != end:
            return None
        if end <= seq.num_known and self.snapshots.has(self._prefix_key(seq, end)):
            return None
        slot = self.snapshots.claim()
        if slot is not None:
            seq.pending_snapshots.append((slot, end))
        return slot

    def cache_computed(self, seq: Sequence, upto: int) -> None:
        """Offer the blocks of `seq`'s first `upto` tokens (a committed chunk's end) to the
        prefix cache, and the state snapshots its committed chunks took. Tokens past what
        the host knows are left for a later commit."""
        if self.cache is None:
            return
        upto = min(upto, seq.num_known, seq.num_computed)
        while seq.pending_snapshots and seq.pending_snapshots[0][1] <= upto:
            assert self.snapshots is not None
            slot, end = seq.pending_snapshots.pop(0)
            self.snapshots.commit(self._prefix_key(seq, end), slot)
        full = upto // self.block_size
        if full <= seq.num_cached_blocks:
            return
        keys = self._chain_keys(seq, full)
        for i in range(seq.num_cached_blocks, full):
            self.cache.insert(seq.block_table[i], keys[i], self._block_tokens(seq, i))
        seq.num_cached_blocks = full

    def release(self, seq: Sequence) -> None:
        """Return `seq`'s blocks (finished or preempted): its own to the pool, one user of
        each cached one to the cache (newest first, so a chain's tail is evicted first)."""
        cache = self.cache
        own = seq.block_table
        if cache is not None:
            own = [b for b in seq.block_table if b not in cache]
            for b in reversed(seq.block_table):
                if b in cache:
                    cache.release(b)
        self.pool.free(own)
        seq.block_table = []
        seq.num_cached_blocks = 0
        seq.state_restore = None
        for slot, _ in seq.pending_snapshots:
            assert self.snapshots is not None
            self.snapshots.discard(slot)
        seq.pending_snapshots.clear()

    def _snapshot_point(self, seq: Sequence, start: int, end: int) -> int:
        """The checkpoint in (start, end] a chunk should end on to take a snapshot (0: none):
        only with snapshots on, and only where the prefix has none yet."""
        if self.snapshots is None:
            return 0
        point = self.snapshots.checkpoint(start, end)
        if not point or self.snapshots.has(self._prefix_key(seq, point)):
            return 0
        return point

    def _prefix_key(self, seq: Sequence, num_tokens: int) -> int:
        """The chain key of `seq`'s first `num_tokens` tokens (a multiple of the block size)."""
        n = num_tokens // self.block_size
        return self._chain_keys(seq, n)[n - 1]

    def _chain_keys(self, seq: Sequence, n: int) -> list[int]:
        """The chain keys of `seq`'s first `n` full blocks, computed once per sequence
        (its tokens never change once written)."""
        keys = seq.block_keys
        for i in range(len(keys), n):
            keys.append(chain_key(keys[-1] if keys else 0, self._block_tokens(seq, i)))
        return keys

    def _block_tokens(self, seq: Sequence, i: int) -> list[int]:
        return seq.token_slice(i * self.block_size, (i + 1) * self.block_size)
