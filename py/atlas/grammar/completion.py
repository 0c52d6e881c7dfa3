"""Finishing a grammar within a token budget: the shortest way from a parse state to a
complete sentence, and the tokens that follow it.

A sampled sequence under a grammar ends only when the model chooses to close every open
construct; a weak model (or random weights) may keep a string or an array open until
`max_tokens` and return text that does not parse. `ShortestCompletion` finds, per parse
state, the shortest byte string that completes the output (breadth-first over the byte
transitions, memoized along every path found: a suffix of a shortest path is a shortest
path). The engine switches a sequence to it once the tokens left are no more than its
length plus the end token (`engine/grammar_state.py`): from then on only tokens spelling a
prefix of that completion are allowed, each shortens it by at least one byte, so the
output is a complete sentence when the budget runs out.
"""

from __future__ import annotations

import numpy as np

import threading
from typing import Callable

from .state_table import DEAD, StateTable
from .token_trie import TokenTrie

#: how far (in tokens) before the budget demands the shortest completion the mask starts
#: refusing tokens after which the output could no longer finish in time: one token may
#: lengthen the shortest completion a lot (opening an object with required fields), and
#: once it has, the budget is short. Within this window each step walks the vocabulary.
FINISH_SLACK = 64

#: parse states one search may visit before it gives up (a grammar whose completions are
#: that far away is not worth finishing early)
MAX_SEARCH_STATES = 20_000

_ALL_BYTES = np.arange(256, dtype=np.int32)


class ShortestCompletion:
    """Shortest completions over one compiled grammar's state table and vocabulary trie
    (thread-safe under the grammar's lock, which guards the table)."""

    def __init__(self, states: StateTable, trie: TokenTrie, lock: threading.RLock,
                 successors: Callable[[int], tuple[np.ndarray, np.ndarray]],
                 eos_ids: np.ndarray) -> None:
        """`successors(state)`: every allowed non-EOS token and the state after it."""
        self.states = states
        self.trie = trie
        self._successors = successors
        self._eos = eos_ids
        self._lock = lock
        self._memo: dict[int, bytes | None] = {}

    def bytes_to_finish(self, state: int) -> bytes | None:
        """The shortest bytes taking `state` to an accepting state (b"" when it accepts);
        None when none is found within MAX_SEARCH_STATES states."""
        with self._lock:
            if state not in self._memo:
                self._search(state)
            return self._memo[state]

    def _search(self, start: int) -> None:
        """Breadth-first from `start`, one numpy gather per level (frontier x 256 bytes);
        the first accepting state reached ends the search."""
        table = self.states
        parent: dict[int, tuple[int, int]] = {start: (start, -1)}
        frontier = np.array([start], dtype=np.int32)
        end = None
        while frontier.size and len(parent) < MAX_SEARCH_STATES:
            hits = frontier[table.accepting[frontier]]
            if hits.size:
                end = int(hits[0])
                break
            nxt = table.step_many(np.repeat(frontier, 256), np.tile(_ALL_BYTES, frontier.size))
            succ, first = np.unique(nxt, return_index=True)
            fresh = []
            for state, at in zip(succ.tolist(), first.tolist()):
                if state != DEAD and state not in parent:
                    parent[state] = (int(frontier[at // 256]), at % 256)
                    fresh.append(state)
            frontier = np.array(fresh, dtype=np.int32)
        if end is None:
            self._memo[start] = None
            return
        path = bytearray()
        state = end
        while state != start:
            state, byte = parent[state]
            path.append(byte)
        path.reverse()
        full = bytes(path)
        state = start
        for k in range(len(full)):     # every state on the way: the rest of the path
            self._memo.setdefault(state, full[k:])
            state = table.step(state, full[k])
        self._memo.setdefault(state, b"")

    def tokens_toward_finish(self, state: int) -> np.ndarray | None:
        """Non-EOS token ids that spell a prefix of the shortest completion (None when the
        state has no completion; empty when it accepts already, where only EOS remains)."""
        rest = self.bytes_to_finish(state)
        if rest is None:
            return None
        return self.trie.prefix_tokens(rest)

    def tokens_finishing_within(self, state: int, max_bytes: int) -> np.ndarray:
        """Tokens allowed in `state` after which the output can still finish in at most
        `max_bytes` more bytes (EOS included when `state` accepts)."""
        tokens, after = self._successors(state)
        distinct, inverse = np.unique(after, return_inverse=True)
        fits = np.array([(rest := self.bytes_to_finish(int(s))) is not None
                         and len(rest) <= max_bytes for s in distinct], dtype=bool)
        ids = tokens[fits[inverse]] if tokens.size else tokens
        if self.states.accepting[state]:
            ids = np.concatenate([ids, self._eos])
        return ids
