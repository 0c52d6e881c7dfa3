"""Driving a matcher the way a sampler does, without a model: random walks.

Tests use walks to show every finished output is valid; the mask benchmark uses them to
time `fill_next_token_bitmask` per token. A walk explores with uniformly random allowed
tokens for a while, then finishes: EOS when allowed, else the single-byte token that most
shortens the completion of the grammar (so loops and recursion end), else a random allowed
token. Every sampled token must be accepted: a mask that allows a token the matcher then
refuses fails the walk.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field

import numpy as np

from .compiled import CompiledGrammar
from .matcher import GrammarMatcher


@dataclass(slots=True)
class WalkTimings:
    """Seconds per call, one entry per generated token."""
    mask: list[float] = field(default_factory=list)
    accept: list[float] = field(default_factory=list)


def allowed_ids(bitmask: np.ndarray, vocab_size: int) -> np.ndarray:
    bits = np.unpackbits(bitmask.view(np.uint8), bitorder="little")
    return np.flatnonzero(bits[:vocab_size])


class RandomWalker:
    """Random walks over one vocabulary (its single-byte tokens indexed once)."""

    def __init__(self, grammar: CompiledGrammar) -> None:
        self.grammar = grammar
        self._single = {data[0]: i for i, data in enumerate(grammar.vocab.token_bytes)
                        if data is not None and len(data) == 1}
        self._completion_cost = grammar.completions.distance

    def _finishing_choice(self, state: int, allowed: np.ndarray, rng: random.Random) -> int:
        """EOS if allowed, else the single-byte token that most shortens the completion (the
        cost falls by one per byte along a shortest completion, so finishing terminates)."""
        allowed_set = set(allowed.tolist())
        eos = sorted(allowed_set & self.grammar.vocab.eos_token_ids)
        if eos:
            return eos[0]
        options = [(self._completion_cost(self.grammar.advance(state, token)), byte, token)
                   for byte, token in self._single.items() if token in allowed_set]
        return min(options)[2] if options else int(rng.choice(allowed))

    def walk(self, seed: int, explore: int | None = None, max_steps: int = 3000,
             timings: WalkTimings | None = None) -> bytes:
        """Sample allowed tokens until EOS is accepted; the text generated (bytes)."""
        grammar = self.grammar
        rng = random.Random(seed)
        explore = rng.randint(3, 60) if explore is None else explore
        matcher = GrammarMatcher(grammar)
        mask = np.zeros(grammar.num_words, dtype=np.uint32)
        out: list[bytes] = []
        for step in range(max_steps):
            if matcher.is_terminated():
                return b"".join(out)
            started = time.perf_counter()
            matcher.fill_next_token_bitmask(mask)
            filled = time.perf_counter()
            allowed = allowed_ids(mask, grammar.vocab.size)
            if step < explore:
                token = int(rng.choice(allowed))
            else:
                token = self._finishing_choice(matcher.state, allowed, rng)
            before_accept = time.perf_counter()
            accepted = matcher.accept_token(token)
            if timings is not None:
                timings.mask.append(filled - started)
                timings.accept.append(time.perf_counter() - before_accept)
            if not accepted:
                raise AssertionError(f"the mask allowed token {token}; the matcher refused it")
            if token not in grammar.vocab.eos_token_ids:
                out.append(grammar.vocab.token_bytes[token])
        raise AssertionError(f"no EOS after {max_steps} tokens: {b''.join(out)[:300]!r}")


def random_walk(grammar: CompiledGrammar, seed: int, explore: int | None = None,
                max_steps: int = 3000) -> bytes:
    return RandomWalker(grammar).walk(seed, explore, max_steps)
