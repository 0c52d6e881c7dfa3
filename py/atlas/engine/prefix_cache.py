"""The prefix cache: full KV blocks found again by the tokens that produced them.

Chat and agent clients resend the same long prefix every turn; the KV of a full block
depends only on the tokens before and inside it, so a block computed once can be shared
read-only by every later sequence that starts with the same tokens (the book's
RadixAttention idea, here as vLLM's hash chain instead of a tree).

* A full block's key is `hash((parent_key, its tokens))`, so one dict lookup per block
  walks a prompt's prefix; the entry keeps the tokens and a hit compares them, so only a
  64-bit collision of the *parent* chain could alias two prefixes.
* Only full, computed blocks are cached. A partly filled last block is never shared: the
  next sequence recomputes those (< block_size) tokens into a block of its own, so no
  sequence ever writes a shared block and no copy-on-write is needed.
* The cache owns the pool allocation of each cached block and counts the sequences using
  it. A block no sequence uses stays cached in LRU order (an OrderedDict: O(1) touch, pop)
  and is evicted, oldest first, only when the pool runs out of free blocks.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Callable, Sequence as Seq


@dataclass(slots=True)
class _Entry:
    key: int
    tokens: tuple[int, ...]
    users: int


@dataclass(frozen=True, slots=True)
class PrefixCacheStats:
    """Counters for /metrics: prompt tokens looked up and found, blocks held, evictions."""

    query_tokens: int
    hit_tokens: int
    cached_blocks: int
    evictions: int

    @property
    def hit_rate(self) -> float:
        return self.hit_tokens / self.query_tokens if self.query_tokens else 0.0


def chain_key(parent: int, tokens: Seq[int]) -> int:
    """The key of a full block whose predecessors' chain key is `parent` (0 for the first)."""
    return hash((parent, tuple(tokens)))


class PrefixCache:
    """Cached full blocks by chain key, with user counts and an LRU of unused ones."""

    def __init__(self) -> None:
        self._block_of: dict[int, int] = {}
        self._entries: dict[int, _Entry] = {}
        self._unused: OrderedDict[int, None] = OrderedDict()
        self.query_tokens = 0
        self.hit_tokens = 0
        self.evictions = 0

    def __contains__(self, block: int) -> bool:
        return block in self._entries

    @property
    def num_cached(self) -> int:
        return len(self._entries)

    @property
    def num_evictable(self) -> int:
        return len(self._unused)

    def stats(self) -> PrefixCacheStats:
        return PrefixCacheStats(self.query_tokens, self.hit_tokens, len(self._entries),
                                self.evictions)

    def match(self, keys: Seq[int], tokens_of: Callable[[int], Seq[int]]) -> list[int]:
        """The cached blocks of the longest prefix of `keys` (`tokens_of(i)`: the tokens
        of block i, compared on a hit), without taking them."""
        hits: list[int] = []
        for i, key in enumerate(keys):
            block = self._block_of.get(key)
            if block is None or self._entries[block].tokens != tuple(tokens_of(i)):
                break
            hits.append(block)
        return hits

    def num_unused_among(self, blocks: Seq[int]) -> int:
        """How many of `blocks` sit in the LRU (taking them makes them unevictable)."""
        return sum(1 for b in blocks if b in self._unused)

    def acquire(self, blocks: Seq[int]) -> None:
        """One more user for each cached block (a hit)."""
        for b in blocks:
            entry = self._entries[b]
            if entry.users == 0:
                del self._unused[b]
            entry.users += 1

    def insert(self, block: int, key: int, tokens: Seq[int]) -> bool:
        """Take ownership of a sequence's just-filled block, its one user being that
        sequence. False (nothing changes) when the key is cached already, by a sequence
        that computed the same prefix at the same time: the block stays the sequence's."""
        if key in self._block_of:
            return False
        self._block_of[key] = block
        self._entries[block] = _Entry(key, tuple(tokens), 1)
        return True

    def release(self, block: int) -> None:
        """One user fewer; an unused block becomes the most recent LRU entry."""
        entry = self._entries[block]
        entry.users -= 1
        if entry.users == 0:
            self._unused[block] = None

    def evict(self, n: int) -> list[int]:
        """Drop the `n` least recently used unused blocks; the caller frees them."""
        out = []
        for _ in range(n):
            block, _ = self._unused.popitem(last=False)
            del self._block_of[self._entries.pop(block).key]
            out.append(block)
        self.evictions += len(out)
        return out


@dataclass(frozen=True, slots=True)
class SnapshotStats:
    """Counters for /metrics: snapshots held, restored (hits), taken, evicted."""

    held: int
    hits: int
    saves: int
    evictions: int


class StateSnapshots:
    """Recurrent-state snapshots of cached prefixes, for hybrid models (the book's Marconi).

    A hybrid model's KV blocks alone cannot resume a sequence: its linear-attention layers
    need their state at the hit's end. The executor keeps `num_slots` state snapshots; this
    index maps a prefix (the chain key of its last full block) to the slot holding the state
    after it, least recently used first out. Admission rule: a snapshot is taken where a
    chunk ends on a checkpoint, a multiple of `interval` tokens, and the prefix there has
    none yet; the scheduler cuts each prefill chunk at the last checkpoint it crosses
    (`BlockManager.cut_chunk`), so a hit loses less than `interval` tokens to recompute.
    Checkpoints that fall inside one chunk get no snapshot: the state exists only at a
    step's end (a delta-rule kernel that wrote it at chunk boundaries would lift that).
    A claimed slot is pending (never evicted, never matched) until the step that fills it
    commits; a slot being restored in a step may be reclaimed by a save in the same step,
    since the executor restores before the forward and saves after it.
    """

    def __init__(self, num_slots: int, interval: int) -> None:
        if num_slots < 1 or interval < 1:
            raise ValueError(f"state snapshots: num_slots={num_slots} and interval={interval} "
                             "must be positive")
        self.num_slots = num_slots
        self.interval = interval
        self._slot_of: OrderedDict[int, int] = OrderedDict()   # LRU: oldest first
        self._pending: set[int] = set()
        self._free = list(range(num_slots - 1, -1, -1))
        self.hits = self.saves = self.evictions = 0

    def stats(self) -> SnapshotStats:
        return SnapshotStats(len(self._slot_of), self.hits, self.saves, self.evictions)

    def checkpoint(self, start: int, end: int) -> int:
        """The last checkpoint (a multiple of `interval`) in (start, end], 0 when none."""
        point = end // self.interval * self.interval
        return point if point > start else 0

    def find(self, keys: Seq[int]) -> tuple[int, int]:
        """(n, slot): the longest prefix keys[:n] with a snapshot after its last block, and
        that snapshot's slot; (0, -1) when none. A hit becomes the most recent entry."""
        for n in range(len(keys), 0, -1):
            slot = self._slot_of.get(keys[n - 1])
            if slot is not None:
                self._slot_of.move_to_end(keys[n - 1])
                self.hits += 1
                return n, slot
        return 0, -1

    def has(self, key: int) -> bool:
        return key in self._slot_of

    def claim(self) -> int | None:
        """A slot to take a snapshot into (the least recently used one if none is free),
        pending until `commit` or `discard`; None when every slot is pending."""
        if self._free:
            slot = self._free.pop()
        elif self._slot_of:
            _, slot = self._slot_of.popitem(last=False)
            self.evictions += 1
        else:
            return None
        self._pending.add(slot)
        return slot

    def commit(self, key: int, slot: int) -> None:
        """The step that filled `slot` with the state after prefix `key` completed."""
        self._pending.remove(slot)
        if key in self._slot_of:    # another sequence snapshotted the same prefix meanwhile
            self._free.append(slot)
            return
        self._slot_of[key] = slot
        self.saves += 1

    def discard(self, slot: int) -> None:
        """A pending snapshot whose step will never commit (its sequence went away)."""
        self._pending.remove(slot)
        self._free.append(slot)
