"""Speculative decoding: drafters propose tokens, one forward verifies them all.

A decoding sequence's chunk becomes its last token plus K drafted ones; the executor samples
at every one of those K+1 positions (row i at RNG position len(output)+i), and `accept`
keeps drafts while the target's sample equals them, then the first sample that differs (or
the bonus token after K accepted drafts).

Why that is exact. Our drafters are deterministic (their q is one-hot on the draft d), so
rejection sampling accepts d with probability min(1, p(d)/1) = p(d) and otherwise draws from
the residual max(p - q, 0) renormalised, which is p with d removed. Drawing x ~ p and
accepting when x == d does exactly that: P(accept) = p(d), and given x != d, x is
distributed as p(y)/(1 - p(d)) over y != d. Since the draws are keyed by (seed, output
position) like plain decoding, a seeded request even draws the same tokens with and without
speculation (up to numerics: the verify forward batches positions a decode step runs one at
a time). Greedy is the temperature-0 case: the argmax equals d or the first mismatch is the
token plain decoding would emit.

Speculation is skipped for requests with penalties (each row's counts would have to include
the drafts before it) and with a thinking budget (a forced token would cut a verified run).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Callable, Mapping, Protocol, Sequence as Seq

from .sequence import Sequence


class Drafter(Protocol):
    name: str

    def propose(self, seq: Sequence, k: int) -> list[int]:
        """Up to `k` tokens expected to follow `seq`'s tokens (fewer or none is fine)."""


@dataclass(slots=True)
class _NgramIndex:
    """n-gram -> the position right after its latest occurrence, built incrementally."""

    ends: dict[tuple[int, ...], int] = field(default_factory=dict)
    upto: int = 0


class NgramDrafter:
    """Prompt lookup: find the latest earlier occurrence of the sequence's last n tokens
    (longest n first) and propose what followed it. Costs O(max_n^2) per new token (the
    index lives on the sequence, so preemption or a finish drops it with the sequence)."""

    name = "ngram"

    def __init__(self, max_n: int = 4, min_n: int = 1) -> None:
        if not 1 <= min_n <= max_n:
            raise ValueError(f"ngram sizes must satisfy 1 <= min_n <= max_n, got {min_n}, "
                             f"{max_n}")
        self.max_n, self.min_n = max_n, min_n

    def propose(self, seq: Sequence, k: int) -> list[int]:
        n_tok = seq.num_tokens
        tokens = seq.token_slice(0, n_tok)
        index = seq.draft_state
        if not isinstance(index, _NgramIndex):
            index = seq.draft_state = _NgramIndex()
        ends = index.ends
        for j in range(index.upto, n_tok):   # every n-gram some known token follows
            for n in range(self.min_n, min(self.max_n, j) + 1):
                ends[tuple(tokens[j - n:j])] = j
        index.upto = n_tok
        for n in range(min(self.max_n, n_tok - 1), self.min_n - 1, -1):
            j = ends.get(tuple(tokens[n_tok - n:]))
            if j is not None:
                return tokens[j:j + k]
        return []


class OracleDrafter:
    """Benchmark-only: proposes the known greedy continuation of each prompt, each token
    replaced by a wrong one with probability 1 - `accept_rate`, so tok/s can be measured as
    a function of the acceptance rate independently of any draft model's quality."""

    name = "oracle"

    def __init__(self, continuations: Mapping[tuple[int, ...], Seq[int]], accept_rate: float,
                 vocab_size: int, seed: int = 0) -> None:
        if not 0.0 <= accept_rate <= 1.0 or vocab_size < 2:
            raise ValueError(f"oracle drafter: accept_rate={accept_rate} must be in [0, 1] "
                             f"and vocab_size={vocab_size} at least 2")
        self.continuations = {tuple(p): list(c) for p, c in continuations.items()}
        self.accept_rate = accept_rate
        self.vocab_size = vocab_size
        self._rng = random.Random(seed)

    def propose(self, seq: Sequence, k: int) -> list[int]:
        known = self.continuations.get(tuple(seq.request.prompt_ids), [])
        done = len(seq.output_ids)
        out = []
        for tok in known[done:done + k]:
            if self._rng.random() >= self.accept_rate:
                tok = (tok + 1 + self._rng.randrange(self.vocab_size - 1)) % self.vocab_size
            out.append(tok)
        return out


class MtpDrafter:
    """The model's own multi-token-prediction head (Qwen3.5 / Qwen3-Next `mtp.*`): the
    executor ran it after the step that produced the sequence's last token, one MTP layer
    drafting K tokens autoregressively (model/mtp.py); `source(seq_id)` returns them.
    Greedy drafts: q is one-hot, so the verification's accept rule stays exact."""

    name = "mtp"

    def __init__(self, source: Callable[[int], list[int]]) -> None:
        self.source = source

    def propose(self, seq: Sequence, k: int) -> list[int]:
        return self.source(seq.seq_id)[:k]


@dataclass(slots=True)
class Speculator:
    """A drafter, how many tokens it may propose per step, and what it achieved."""

    drafter: Drafter
    num_draft_tokens: int
    drafted: int = 0
    accepted: int = 0
    verify_steps: int = 0

    def __post_init__(self) -> None:
        if self.num_draft_tokens < 1:
            raise ValueError(f"num_draft_tokens must be >= 1, got {self.num_draft_tokens}")

    @staticmethod
    def applies_to(seq: Sequence) -> bool:
        return not seq.sampling.params.has_penalties and seq.sampling.thinking is None

    def record(self, num_drafts: int, num_accepted: int) -> None:
        self.drafted += num_drafts
        self.accepted += num_accepted
        self.verify_steps += 1

    @property
    def mean_accepted_length(self) -> float:
        """Drafts accepted per verification step (tokens per step is one more)."""
        return self.accepted / self.verify_steps if self.verify_steps else 0.0


def make_drafter(name: str, **options) -> Drafter:
    """A drafter by name: "ngram" (options max_n, min_n), "mtp" (option source: the
    executor's `mtp_drafts`) or the benchmark's "oracle" (options continuations,
    accept_rate, vocab_size, seed)."""
    if name == "ngram":
        return NgramDrafter(**options)
    if name == "mtp":
        return MtpDrafter(**options)
    if name == "oracle":
        return OracleDrafter(**options)
    raise ValueError(f"unknown drafter {name!r}; known: ngram, mtp, oracle")
