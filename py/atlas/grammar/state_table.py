"""Parse configurations interned as integer states, with a lazily filled transition table.

The automaton's configurations (sets of stacks) are hashable; each one seen gets an id,
and ``table[state, byte]`` caches the successor (-1: not computed yet, 0: the dead state).
Mask walks look up thousands of (state, byte) pairs per numpy step and compute only the
few new ones in Python, so after warm-up stepping is an array gather. For grammars without
unbounded recursion the set of configurations is finite and the table converges to a DFA.
"""

from __future__ import annotations

import numpy as np

from .errors import GrammarError
from .pda import Automaton, Config

DEAD = 0
UNKNOWN = -1


class StateTable:
    def __init__(self, automaton: Automaton, max_states: int = 1 << 18) -> None:
        self.automaton = automaton
        self.max_states = max_states
        self._ids: dict[Config, int] = {}
        self._configs: list[Config] = []
        self._table = np.full((256, 256), UNKNOWN, dtype=np.int32)
        self.accepting = np.zeros(256, dtype=bool)
        self.intern(frozenset())
        self._table[DEAD] = DEAD
        self.initial = self.intern(automaton.initial())

    def __len__(self) -> int:
        return len(self._configs)

    def intern(self, config: Config) -> int:
        state = self._ids.get(config)
        if state is not None:
            return state
        state = len(self._configs)
        if state >= self.max_states:
            raise GrammarError(f"the grammar needed more than {self.max_states} parse states "
                               "(too deeply nested output?)")
        if state >= self._table.shape[0]:
            grown = np.full((2 * state, 256), UNKNOWN, dtype=np.int32)
            grown[:state] = self._table
            self._table = grown
            self.accepting = np.concatenate([self.accepting, np.zeros(state, dtype=bool)])
        self._ids[config] = state
        self._configs.append(config)
        self.accepting[state] = () in config
        return state

    def config(self, state: int) -> Config:
        return self._configs[state]

    def tops(self, state: int) -> set[int]:
        """The byte-class positions the configuration's stacks wait on."""
        return {stack[-1] for stack in self._configs[state] if stack}

    def _fill_row(self, state: int) -> None:
        row = np.full(256, DEAD, dtype=np.int32)
        for mask, config in self.automaton.successors(self._configs[state]):
            hits = np.unpackbits(np.frombuffer(mask.to_bytes(32, "little"), dtype=np.uint8),
                                 bitorder="little").astype(bool)
            row[hits] = self.intern(config)
        self._table[state] = row

    def step(self, state: int, byte: int) -> int:
        nxt = int(self._table[state, byte])
        if nxt == UNKNOWN:
            self._fill_row(state)
            nxt = int(self._table[state, byte])
        return nxt

    def step_many(self, states: np.ndarray, data: np.ndarray) -> np.ndarray:
        """Successors of many (state, byte) pairs; unknown entries are computed once."""
        nxt = self._table[states, data]
        missing = nxt == UNKNOWN
        if missing.any():
            for state in np.unique(states[missing]).tolist():
                self._fill_row(state)
            nxt = self._table[states, data]
        return nxt
