"""One sequence's position in a compiled grammar: the object the engine keeps per request.

The engine asks for the next mask (`fill_next_token_bitmask`, computed while the GPU runs
the forward pass), samples under it, then `accept_token`s the sampled id. `rollback`
undoes accepted tokens (speculative decoding rejects draft tokens after the fact).
"""

from __future__ import annotations

import numpy as np

from .compiled import CompiledGrammar
from .completion import FINISH_SLACK
from .errors import GrammarError
from .state_table import DEAD


class GrammarMatcher:
    def __init__(self, grammar: CompiledGrammar) -> None:
        self.grammar = grammar
        self._history: list[tuple[int, bool]] = [(grammar.states.initial, False)]

    @property
    def state(self) -> int:
        """The current parse state of the compiled grammar's state table."""
        return self._history[-1][0]

    def is_terminated(self) -> bool:
        """True once an end-of-sequence token was accepted in an accepting state."""
        return self._history[-1][1]

    def can_end(self) -> bool:
        """Whether the output so far is a complete sentence of the grammar."""
        return bool(self.grammar.states.accepting[self.state])

    def accept_token(self, token_id: int) -> bool:
        """Advance by one sampled token; False (and no change) if the grammar forbids it."""
        if self.is_terminated() or not 0 <= token_id < self.grammar.vocab.size:
            return False
        if token_id in self.grammar.vocab.eos_token_ids:
            if not self.can_end():
                return False
            self._history.append((self.state, True))
            return True
        state = self.grammar.advance(self.state, token_id)
        if state == DEAD:
            return False
        self._history.append((state, False))
        return True

    def fill_next_token_bitmask(self, bitmask: np.ndarray, index: int = 0,
                                tokens_left: int | None = None) -> None:
        """Write the allowed-token mask into row `index` of a [rows, words] uint32 array
        (or into a [words] array). Raises GrammarDeadEndError where nothing can follow.

        `tokens_left` (this token included): once it is no more than the shortest way to
        finish (in bytes) plus the end token, only tokens along that way (then EOS) are
        allowed, so the output is complete when the budget runs out (see completion.py)."""
        if bitmask.dtype != np.uint32 or bitmask.shape[-1] != self.grammar.num_words:
            raise GrammarError(f"bitmask must be uint32 with {self.grammar.num_words} words "
                               f"per row, got {bitmask.dtype} {bitmask.shape}")
        row = bitmask if bitmask.ndim == 1 else bitmask[index]
        if self.is_terminated():
            row[:] = 0
            return
        words = self.grammar.mask_words(self.state)
        row[:] = words if tokens_left is None else self._finishing(words, tokens_left)

    def _finishing(self, words: np.ndarray, tokens_left: int) -> np.ndarray:
        """`words` narrowed so the output can still finish within `tokens_left` tokens
        (see completion.py); as they are while the budget is far, or if nothing fits."""
        completions = self.grammar.completions
        if tokens_left > completions.distance(self.state) + 1 + FINISH_SLACK:
            return words
        # after this token, tokens_left - 1 remain: the completion's bytes plus EOS
        ids = completions.tokens_finishing_within(self.state, tokens_left - 2)
        narrowed = words & self.grammar.pack_ids(ids) if ids.size else words
        return narrowed if narrowed.any() else words

    def rollback(self, num_tokens: int) -> None:
        """Undo the last `num_tokens` accepted tokens (an accepted EOS counts as one)."""
        if not 0 <= num_tokens < len(self._history):
            raise GrammarError(f"cannot roll back {num_tokens} tokens: "
                               f"{len(self._history) - 1} accepted")
        if num_tokens:
            del self._history[-num_tokens:]

    @property
    def num_accepted(self) -> int:
        return len(self._history) - 1
