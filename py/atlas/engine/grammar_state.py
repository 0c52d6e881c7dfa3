"""A sequence's grammar constraint (structured output), as the engine keeps it.

The server compiles the grammar; the engine owns the per-sequence `GrammarMatcher` and
advances it with every token the sequence appends (drawn or forced), so its state lives on
the `Sequence` and survives preemption untouched (a recomputed sequence re-feeds tokens to
the model, never to the matcher). The reasoning block stays unconstrained: with thinking
on, the grammar waits for the think-close token; when the model may still open a think
block itself, its first token may be the think-open token besides what the grammar allows.

Near the end of the output budget the mask narrows to the shortest way to finish the
grammar (`atlas.grammar.completion`), so a constrained answer that runs out of tokens is
still complete (an open string is closed, required fields get their shortest values),
provided the budget holds the shortest completion when the grammar starts.

A grammar that no token can continue (`GrammarDeadEndError`), or a token the mask should
have excluded, is recorded in `error`: the scheduler then ends the request with
`FinishReason.ERROR` and that message instead of sampling from an empty mask (no hang).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..grammar import CompiledGrammar, GrammarDeadEndError, GrammarMatcher

_ALL_ALLOWED = np.uint32(0xFFFFFFFF)


@dataclass(frozen=True, slots=True)
class GrammarRequest:
    """What a request asks of the engine: follow `grammar`. `think_close_id`: the grammar
    starts after this token (thinking on); `think_open_id`: the first token may open a think
    block instead (the prompt has not opened it)."""

    grammar: CompiledGrammar
    think_close_id: int | None = None
    think_open_id: int | None = None
    starts_inside_thinking: bool = False


class GrammarState:
    """The matcher plus where the sequence stands against its reasoning block."""

    __slots__ = ("matcher", "request", "thinking", "may_open_thinking", "error", "tokens_left")

    def __init__(self, request: GrammarRequest, max_new_tokens: int | None = None) -> None:
        """`max_new_tokens`: the sequence's output budget (max_tokens, or the context's
        room when smaller); near its end the mask steers to the shortest way to finish."""
        self.request = request
        self.tokens_left = max_new_tokens
        self.matcher = GrammarMatcher(request.grammar)
        #: True inside an unconstrained reasoning block
        self.thinking = request.starts_inside_thinking and request.think_close_id is not None
        #: the model may still open the reasoning block itself (only as its first token)
        self.may_open_thinking = (request.think_open_id is not None
                                  and request.think_close_id is not None
                                  and not request.starts_inside_thinking)
        self.error: str | None = None

    @property
    def constrains_next(self) -> bool:
        """Whether the next token is drawn under a mask."""
        return not self.thinking and self.error is None and not self.matcher.is_terminated()

    @property
    def is_terminated(self) -> bool:
        return self.matcher.is_terminated()

    def fill_mask(self, bitmask: np.ndarray, row: int) -> None:
        """Write the next token's mask into `bitmask[row]` (the sampler's pinned rows).

        A dead end records the error and leaves the row unmasked: the token drawn there is
        discarded, since the scheduler ends the sequence when it commits the step."""
        try:
            self.matcher.fill_next_token_bitmask(bitmask, row, self.tokens_left)
        except GrammarDeadEndError as exc:
            self.error = f"structured output failed: {exc}"
            bitmask[row] = _ALL_ALLOWED
            return
        open_id = self.request.think_open_id
        if self.may_open_thinking and open_id is not None:
            bitmask[row, open_id // 32] |= np.uint32(1 << (open_id % 32))

    def observe(self, token: int) -> None:
        """Advance past `token`, the sequence's next output token."""
        if self.tokens_left is not None:
            self.tokens_left -= 1
        if self.error is not None:
            return
        r = self.request
        if self.thinking:
            self.thinking = token != r.think_close_id
            return
        opens = self.may_open_thinking and token == r.think_open_id
        self.may_open_thinking = False
        if opens:
            self.thinking = True
            return
        if not self.matcher.accept_token(token):
            self.error = (f"structured output failed: token {token} does not continue the "
                          "grammar")
