"""Finishing a grammar within a token budget.

A sampled sequence under a grammar ends only when the model chooses to close every open
construct; a weak model (or random weights) may keep a string or an array open until
`max_tokens` and return text that does not parse. `Completions` knows, per parse state,
the fewest bytes that complete the output (`distance`: per automaton position the fewest
bytes finishing its rule, summed along a stack, the best stack of the configuration), and
which tokens leave the output finishable within a budget (`tokens_finishing_within`).

The matcher applies it near the end of a sequence's budget (`FINISH_SLACK`): each token
must leave a completion no longer than the tokens left after it minus the end token. A
single-byte token along a shortest completion always qualifies, so the allowed set is never
empty while the budget holds the shortest completion, and the output is complete (EOS
accepted) when the budget runs out.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Callable

import numpy as np

from .pda import CHAR, END, Automaton
from .state_table import StateTable

#: how many tokens before the budget's end the mask starts refusing tokens after which the
#: output could not finish in time. One token may lengthen the shortest completion a lot
#: (opening an object with required fields), so the check must start before the budget is
#: down to the completion itself. Within this window each new parse state walks the
#: vocabulary once (memoized per state).
FINISH_SLACK = 64


def completion_lengths(automaton: Automaton) -> list[int]:
    """For each position, the fewest bytes that finish its rule from there (a fixpoint over
    rule minimum lengths, then sums along each alternative)."""
    inf = float("inf")
    kind, arg, starts = automaton.kind, automaton.arg, automaton.rule_starts

    def rest(pos: int, shortest: list[float]) -> float:
        total = 0.0
        while kind[pos] != END:
            total += 1 if kind[pos] == CHAR else shortest[arg[pos]]
            pos += 1
        return total

    shortest = [inf] * len(starts)
    changed = True
    while changed:
        changed = False
        for rule, alternatives in enumerate(starts):
            best = min((rest(p, shortest) for p in alternatives), default=inf)
            if best < shortest[rule]:
                shortest[rule], changed = best, True
    return [0 if k == END else int(rest(p, shortest)) for p, k in enumerate(kind)]


class Completions:
    """Completion distances over one compiled grammar's state table (thread-safe under the
    grammar's lock, which guards the table). `successors(state)`: every allowed non-EOS
    token and the state after it; `eos_ids`: the vocabulary's end tokens."""

    def __init__(self, automaton: Automaton, states: StateTable, lock: threading.RLock,
                 successors: Callable[[int], tuple[np.ndarray, np.ndarray]],
                 eos_ids: np.ndarray, cache_size: int = 64) -> None:
        self.states = states
        self._rest = completion_lengths(automaton)
        self._lock = lock
        self._successors = successors
        self._eos = eos_ids
        self._distance: dict[int, int] = {}
        self._after: OrderedDict[int, tuple[np.ndarray, np.ndarray]] = OrderedDict()
        self._cache_size = cache_size

    def distance(self, state: int) -> int:
        """Fewest bytes that complete the output from `state` (0: it may end here)."""
        got = self._distance.get(state)
        if got is None:
            with self._lock:
                rest = self._rest
                got = self._distance[state] = min(
                    (sum(rest[p] for p in stack) for stack in self.states.config(state)),
                    default=0)
        return got

    def tokens_finishing_within(self, state: int, max_bytes: int) -> np.ndarray:
        """Tokens allowed in `state` after which the output can still be completed in at
        most `max_bytes` more bytes (EOS included when `state` may end)."""
        tokens, after = self._token_distances(state)
        ids = tokens[after <= max_bytes]
        if self.states.accepting[state]:
            ids = np.concatenate([ids, self._eos])
        return ids

    def _token_distances(self, state: int) -> tuple[np.ndarray, np.ndarray]:
        """(allowed tokens, the completion distance after each), memoized (LRU)."""
        with self._lock:
            got = self._after.get(state)
            if got is not None:
                self._after.move_to_end(state)
                return got
            tokens, after = self._successors(state)
            distinct, inverse = np.unique(after, return_inverse=True)
            cost = np.array([self.distance(int(s)) for s in distinct], dtype=np.int64)
            got = self._after[state] = (tokens, cost[inverse] if tokens.size else cost[:0])
            if len(self._after) > self._cache_size:
                self._after.popitem(last=False)
            return got
