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
        self.rank_token = np.array([i for _, i in entries], dtype=np.int32)
        lex_parent, lex_byte, lex_depth, lex_of_rank = _prefix_nodes([b for b, _ in entries])
        # breadth-first ids: by depth, then (stable) by the lexicographic creation order
        order = np.argsort(lex_depth, kind="stable")
        bfs_of_lex = np.empty_like(order)
        bfs_of_lex[order] = np.arange(order.size)
        count = self.num_nodes = int(order.size)
        self.parent = bfs_of_lex[lex_parent[order]].astype(np.int32)
        self.parent[0] = 0
        self.byte = lex_byte[order].astype(np.int32)
        depth = lex_depth[order]
        token_node = bfs_of_lex[lex_of_rank].astype(np.int32)
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

    def prefix_tokens(self, data: bytes) -> np.ndarray:
        """Ids of the tokens whose bytes are a non-empty prefix of `data`, shortest first."""
        node, found = 0, []
        for byte in data:
            first, n = int(self.first_child[node]), int(self.num_children[node])
            k = first + int(np.searchsorted(self.byte[first:first + n], byte))
            if k >= first + n or self.byte[k] != byte:
                break
            node = k
            lo = int(self.lo[node])
            found.append(self.rank_token[lo:lo + int(self.num_exact[node])])
        return np.concatenate(found) if found else np.zeros(0, dtype=np.int32)

    def exact_ranks(self, nodes: np.ndarray) -> np.ndarray:
        """Ranks of the tokens that end exactly at `nodes`."""
        return _expand_ranges(self.lo[nodes], self.num_exact[nodes])


def _expand_ranges(starts: np.ndarray, counts: np.ndarray) -> np.ndarray:
    keep = counts > 0
    starts, counts = starts[keep], counts[keep]
    total = int(counts.sum())
    if not total:
        return np.zeros(0, dtype=np.int32)
    offsets = np.arange(total) - np.repeat(np.cumsum(counts) - counts, counts)
    return (np.repeat(starts, counts) + offsets).astype(np.int32)


def _prefix_nodes(tokens: list[bytes]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The trie of sorted `tokens` in creation (= lexicographic) order, root first: each
    node's parent, last byte and depth, and each token's node. One pass: a token shares its
    first `common` bytes' nodes with the previous token and adds one node per byte after."""
    parent, last, depth = [0], [0], [0]
    token_node = []
    path = [0]                                   # node ids along the previous token
    previous = b""
    for token in tokens:
        common = 0
        limit = min(len(previous), len(token))
        while common < limit and previous[common] == token[common]:
            common += 1
        del path[common + 1:]
        for k in range(common, len(token)):
            path.append(len(parent))
            parent.append(path[k])
            last.append(token[k])
            depth.append(k + 1)
        token_node.append(path[len(token)])
        previous = token
    return (np.array(parent, dtype=np.int64), np.array(last, dtype=np.int64),
            np.array(depth, dtype=np.int32), np.array(token_node, dtype=np.int64))
