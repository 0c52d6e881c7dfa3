"""KV block accounting for the scheduler: the pool protocol and who holds which blocks.

`BlockPool` is the one allocator interface (`atlas.runtime.kv_cache.BlockAllocator`
implements it; tests inject fakes with leak accounting). `BlockManager` grows and frees each
sequence's block table. Prefix caching belongs here: a lookup of the full-block hash chain of
a prompt before admission, shared blocks through the pool's reference counts, and unreferenced
cached blocks kept in LRU order until the pool runs short. Recurrent-state slots of hybrid
models sit beside this manager, sized by the same memory plan.
"""

from __future__ import annotations

from typing import Protocol, Sequence as Seq

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

    def __init__(self, pool: BlockPool, num_blocks: int, block_size: int) -> None:
        if min(num_blocks, block_size) <= 0:
            raise ValueError(f"num_blocks={num_blocks} and block_size={block_size} must be "
                             "positive")
        self.pool = pool
        self.num_blocks = num_blocks
        self.block_size = block_size

    @property
    def utilization(self) -> float:
        return 1.0 - self.pool.num_free / self.num_blocks

    def blocks_missing(self, seq: Sequence, num_tokens: int) -> int:
        """How many more blocks `seq` needs to hold `num_tokens` tokens (0 when it has them)."""
        return max(-(-num_tokens // self.block_size) - len(seq.block_table), 0)

    def can_reserve(self, seq: Sequence, num_tokens: int) -> bool:
        return self.pool.can_allocate(self.blocks_missing(seq, num_tokens))

    def reserve(self, seq: Sequence, num_tokens: int) -> None:
        """Grow `seq`'s block table to hold `num_tokens` (check `can_reserve` first)."""
        missing = self.blocks_missing(seq, num_tokens)
        if missing:
            seq.block_table.extend(self.pool.allocate(missing))

    def release(self, seq: Sequence) -> None:
        """Return all of `seq`'s blocks to the pool (finished or preempted)."""
        self.pool.free(seq.block_table)
        seq.block_table = []
