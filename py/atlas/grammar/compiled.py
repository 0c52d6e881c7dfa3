"""A grammar compiled against one vocabulary: token masks per parse state.

The adaptive token mask cache (XGrammar's idea): for every byte-class position p of the
automaton, walk the whole vocabulary trie once from a stack holding only p. A token is

* accepted — some stack is still inside p's frame after the token's last byte: valid
  whatever lies below p on the real stack;
* rejected — every stack died without the frame ever finishing: invalid in any context;
* uncertain — the frame could finish part-way (the rest of the token then belongs to the
  unknown caller): only these need the real stack.

At run time a state's mask is the union of its top positions' accepted sets plus an exact
walk from the real configuration restricted to the trie paths leading to uncertain tokens.
Masks are memoized per state, so a loop (string content, digits) costs one lookup per
token after its first visit.

One CompiledGrammar serves every request with the same grammar; its tables grow as new
states are met, under a lock, so matchers may run on several threads.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np

from .completion import Completions
from .errors import GrammarDeadEndError
from .pda import Automaton
from .state_table import DEAD, StateTable
from .token_trie import TokenTrie
from .vocab import Vocabulary


def _joined(parts: list[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    if not parts:
        empty = np.zeros(0, dtype=np.int32)
        return empty, empty
    return (np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts]))


def bitmask_words(vocab_size: int) -> int:
    """uint32 words of a packed token mask (bit i of word i // 32 is token i)."""
    return (vocab_size + 31) // 32


@dataclass(frozen=True, slots=True)
class PositionMask:
    """One position's context-independent result; `accepted_words` is set when the accepted
    set is large (packed bits), `accepted_ids` otherwise; uncertain as rank ranges."""
    accepted_ids: np.ndarray
    accepted_words: np.ndarray | None
    uncertain_lo: np.ndarray
    uncertain_hi: np.ndarray

    @property
    def num_uncertain(self) -> int:
        return int((self.uncertain_hi - self.uncertain_lo).sum())


class CompiledGrammar:
    def __init__(self, automaton: Automaton, vocab: Vocabulary, trie: TokenTrie,
                 precompute: bool = True, mask_cache_size: int = 256) -> None:
        """`mask_cache_size` masks of vocab/8 bytes each are kept (LRU): 256 x 19 KB at
        Qwen3's vocabulary."""
        self.automaton = automaton
        self.vocab = vocab
        self.trie = trie
        self.states = StateTable(automaton)
        self.num_words = bitmask_words(vocab.size)
        self._eos = np.array(sorted(vocab.eos_token_ids), dtype=np.int64)
        self._positions: dict[int, PositionMask] = {}
        self._masks: OrderedDict[int, np.ndarray] = OrderedDict()
        self._mask_cache_size = mask_cache_size
        self._lock = threading.RLock()
        #: how far each state is from a complete output (finishing within a budget)
        self.completions = Completions(automaton, self.states, self._lock, self.successors,
                                       self._eos)
        if precompute:
            self.precompute_positions(automaton.char_positions)

    @property
    def num_position_masks(self) -> int:
        """Positions whose context-independent split is computed so far."""
        return len(self._positions)

    # -- walks --------------------------------------------------------------------------

    def _walk(self, starts: np.ndarray, escape: bool, relevant: np.ndarray | None = None,
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Breadth-first walk of the trie from each start state at once.

        Returns (alive nodes, their source index, dead-after-escape nodes, their source
        index, the alive nodes' states). `escape`: track whether the start frame may have
        finished before each byte.
        `relevant`: prefix sums over ranks; only subtrees holding a counted rank are walked.
        Walking many sources together pays numpy's per-call overhead once per trie level.
        """
        trie, table = self.trie, self.states
        roots = np.zeros(starts.size, dtype=np.int32)
        nodes, source = trie.children(roots)
        states = starts[source]
        escaped = table.accepting[states] if escape else np.zeros(nodes.size, dtype=bool)
        alive_parts, escaped_parts, alive_states = [], [], []
        while nodes.size:
            if relevant is not None:
                keep = relevant[trie.hi[nodes]] > relevant[trie.lo[nodes]]
                nodes, source, states, escaped = (nodes[keep], source[keep], states[keep],
                                                  escaped[keep])
            nxt = table.step_many(states, trie.byte[nodes])
            alive = nxt != DEAD
            if escape:
                out = ~alive & escaped
                escaped_parts.append((nodes[out], source[out]))
            nodes, source, nxt, escaped = nodes[alive], source[alive], nxt[alive], escaped[alive]
            alive_parts.append((nodes, source))
            alive_states.append(nxt)
            if escape:
                escaped = escaped | table.accepting[nxt]
            nodes, owner = trie.children(nodes)
            source, states, escaped = source[owner], nxt[owner], escaped[owner]
        states_out = (np.concatenate(alive_states) if alive_states
                      else np.zeros(0, dtype=np.int32))
        return (*_joined(alive_parts), *_joined(escaped_parts), states_out)

    def precompute_positions(self, positions: list[int], batch: int = 64) -> None:
        """Fill the position cache for many positions with a few multi-source walks."""
        with self._lock:
            self._precompute_positions(positions, batch)

    def _precompute_positions(self, positions: list[int], batch: int) -> None:
        todo = [p for p in positions if p not in self._positions]
        for i in range(0, len(todo), batch):
            chunk = todo[i:i + batch]
            starts = np.array([self.states.intern(frozenset({(p,)})) for p in chunk],
                              dtype=np.int32)
            alive, alive_src, escaped, escaped_src, _ = self._walk(starts, escape=True)
            alive_order, escaped_order = np.argsort(alive_src, kind="stable"), \
                np.argsort(escaped_src, kind="stable")
            alive, alive_src = alive[alive_order], alive_src[alive_order]
            escaped, escaped_src = escaped[escaped_order], escaped_src[escaped_order]
            a_cut = np.searchsorted(alive_src, np.arange(len(chunk) + 1))
            e_cut = np.searchsorted(escaped_src, np.arange(len(chunk) + 1))
            for k, position in enumerate(chunk):
                self._positions[position] = self._position_result(
                    alive[a_cut[k]:a_cut[k + 1]], escaped[e_cut[k]:e_cut[k + 1]])

    def _position_result(self, alive: np.ndarray, escaped: np.ndarray) -> PositionMask:
        ids = self.trie.rank_token[self.trie.exact_ranks(alive)]
        words = None
        if ids.size > self.num_words:
            words = self._pack(ids)
            ids = ids[:0]
        return PositionMask(ids, words, self.trie.lo[escaped], self.trie.hi[escaped])

    def position_mask(self, position: int) -> PositionMask:
        """The context-independent split for a stack whose top is `position` (cached)."""
        if position not in self._positions:
            self.precompute_positions([position])
        return self._positions[position]

    # -- masks --------------------------------------------------------------------------

    def pack_ids(self, ids: np.ndarray) -> np.ndarray:
        """Token ids as a packed [num_words] uint32 mask."""
        return self._pack(ids)

    @property
    def eos_ids(self) -> np.ndarray:
        return self._eos

    def _pack(self, ids: np.ndarray) -> np.ndarray:
        flags = np.zeros(self.num_words * 32, dtype=bool)
        flags[ids] = True
        return np.packbits(flags, bitorder="little").view("<u4").astype(np.uint32)

    def mask_words(self, state: int) -> np.ndarray:
        """The packed mask of tokens allowed in `state` (read-only; memoized)."""
        with self._lock:
            words = self._masks.get(state)
            if words is not None:
                self._masks.move_to_end(state)
                return words
            words = self._compute_mask(state)
            words.flags.writeable = False
            self._masks[state] = words
            if len(self._masks) > self._mask_cache_size:
                self._masks.popitem(last=False)
            return words

    def _compute_mask(self, state: int) -> np.ndarray:
        tops = sorted(self.states.tops(state))
        self.precompute_positions(tops)                  # new positions: one batched walk
        parts = [self._positions[p] for p in tops]
        words = np.zeros(self.num_words, dtype=np.uint32)
        for part in parts:
            if part.accepted_words is not None:
                words |= part.accepted_words
        ids = [part.accepted_ids for part in parts if part.accepted_ids.size]
        uncertain_lo = np.concatenate([p.uncertain_lo for p in parts] or [np.zeros(0, int)])
        if uncertain_lo.size:
            uncertain_hi = np.concatenate([p.uncertain_hi for p in parts])
            cover = np.zeros(self.trie.num_ranks + 1, dtype=np.int32)
            np.add.at(cover, uncertain_lo, 1)
            np.add.at(cover, uncertain_hi, -1)
            counted = np.concatenate([[0], np.cumsum(np.cumsum(cover)[:-1] > 0)])
            alive, _, _, _, _ = self._walk(np.array([state], dtype=np.int32), escape=False,
                                        relevant=counted)
            ids.append(self.trie.rank_token[self.trie.exact_ranks(alive)])
        if self.states.accepting[state] and self._eos.size:
            ids.append(self._eos)
        if ids:
            words |= self._pack(np.concatenate(ids))
        if not words.any():
            raise GrammarDeadEndError(
                "no token of the vocabulary can continue the output here, and the grammar "
                "may not end here (a grammar that needs a character no token spells?)")
        return words

    def successors(self, state: int) -> tuple[np.ndarray, np.ndarray]:
        """(every non-EOS token allowed in `state`, the state after each): one walk of the
        whole vocabulary trie, for the rare callers that need more than the mask."""
        with self._lock:
            alive, _, _, _, states = self._walk(np.array([state], dtype=np.int32),
                                                escape=False)
        counts = self.trie.num_exact[alive]
        tokens = self.trie.rank_token[self.trie.exact_ranks(alive)]
        return tokens, np.repeat(states, counts)

    def advance(self, state: int, token_id: int) -> int:
        """The state after a (non-EOS) token; DEAD when the token is not allowed."""
        data = self.vocab.token_bytes[token_id]
        if data is None:
            return DEAD
        with self._lock:
            for byte in data:
                state = self.states.step(state, byte)
                if state == DEAD:
                    return DEAD
        return state
