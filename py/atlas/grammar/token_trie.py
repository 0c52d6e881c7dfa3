"""The vocabulary as a byte trie in flat arrays, for walking all tokens at once.

Nodes are the distinct token prefixes, numbered breadth first and, within a level, in
byte order, so a node's children are one contiguous run. Tokens are numbered by *rank*:
their order when sorted by bytes, so every node's subtree is one rank range
``[lo, hi)`` and the tokens ending exactly at the node are its first ``num_exact`` ranks.
A walk advances a whole frontier of nodes one byte per numpy step (`state.py`'s table
answers (state, byte) -> state), so visiting N trie nodes costs O(N) array work, not O(N)
Python calls.
"""

from __future__ import annotations

import numpy as np

from .vocab import Vocabulary


class TokenTrie:
    def __init__(self, vocab: Vocabulary) -> None:
        entries = sorted((b, i) for i, b in enumerate(vocab.token_bytes) if b)
        self.vocab_size = vocab.size
        self.rank_token = np.array([i for _, i in entries], dtype=np.int32)
        prefixes = sorted({b[:k] for b, _ in entries for k in range(1, len(b) + 1)})
        by_length = np.argsort(np.fromiter(map(len, prefixes), dtype=np.int32,
                                           count=len(prefixes)), kind="stable")
        nodes = [b""] + [prefixes[i] for i in by_length.tolist()]
        index = {p: n for n, p in enumerate(nodes)}
        count = len(nodes)
        self.num_nodes = count
        self.parent = np.array([0] + [index[p[:-1]] for p in nodes[1:]], dtype=np.int32)
        self.byte = np.array([0] + [p[-1] for p in nodes[1:]], dtype=np.int32)
        depth = np.array([len(p) for p in nodes], dtype=np.int32)
        token_node = np.array([index[b] for b, _ in entries], dtype=np.int32)
        ranks = np.arange(len(entries), dtype=np.int32)
        self.num_exact = np.bincount(token_node, minlength=count).astype(np.int32)
        lo = np.full(count, len(entries), dtype=np.int32)
        hi = np.zeros(count, dtype=np.int32)
        np.minimum.at(lo, token_node, ranks)
        np.maximum.at(hi, token_node, ranks + 1)
        level_start = np.searchsorted(depth, np.arange(depth.max() + 2))
        for d in range(int(depth.max()), 0, -1):
            level = np.arange(level_start[d], level_start[d + 1])
            np.minimum.at(lo, self.parent[level], lo[level])
            np.maximum.at(hi, self.parent[level], hi[level])
        self.lo, self.hi = lo, hi
        first = np.searchsorted(self.parent[1:], np.arange(count), side="left") + 1
        last = np.searchsorted(self.parent[1:], np.arange(count), side="right") + 1
        self.first_child = first.astype(np.int32)
        self.num_children = (last - first).astype(np.int32)
        self.num_ranks = len(entries)

    def children(self, nodes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(children of `nodes`, index into `nodes` of each child's parent)."""
        counts = self.num_children[nodes]
        total = int(counts.sum())
        owner = np.repeat(np.arange(nodes.size), counts)
        starts = np.cumsum(counts) - counts
        offsets = np.arange(total) - np.repeat(starts, counts)
        return self.first_child[nodes][owner] + offsets, owner

    def exact_ranks(self, nodes: np.ndarray) -> np.ndarray:
        """Ranks of the tokens that end exactly at `nodes`."""
        return _expand_ranges(self.lo[nodes], self.num_exact[nodes])

    def subtree_ranks(self, nodes: np.ndarray) -> np.ndarray:
        return _expand_ranges(self.lo[nodes], self.hi[nodes] - self.lo[nodes])


def _expand_ranges(starts: np.ndarray, counts: np.ndarray) -> np.ndarray:
    keep = counts > 0
    starts, counts = starts[keep], counts[keep]
    total = int(counts.sum())
    if not total:
        return np.zeros(0, dtype=np.int32)
    offsets = np.arange(total) - np.repeat(np.cumsum(counts) - counts, counts)
    return (np.repeat(starts, counts) + offsets).astype(np.int32)
