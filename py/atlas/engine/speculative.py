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


@dataclass(slots=True)
class _Continuation:
    """The oracle's known continuation of a sequence's prompt, looked up once per sequence
    (keying the table by the prompt costs O(prompt) a step, which a benchmark's host-time
    profile would count as scheduling)."""

    tokens: list[int]


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
        state = seq.draft_state
        if not isinstance(state, _Continuation):
            state = seq.draft_state = _Continuation(
                self.continuations.get(tuple(seq.request.prompt_ids), []))
        known = state.tokens
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


#: pseudo-drafts of the prior in `Speculator.token_acceptance`: enough that a few lucky or
#: unlucky early steps do not swing K, few enough that a real rate shows within a few steps
PRIOR_DRAFTS = 10


def expected_tokens(num_drafts: int, token_acceptance: float) -> float:
    """Tokens a verification of K drafts emits on average when each draft is right with
    probability p given the ones before it were: 1 + p + ... + p^K (2.53 at p = 0.7, K = 3:
    the accepted drafts, then the target's own token)."""
    return sum(token_acceptance ** i for i in range(num_drafts + 1))


def best_num_drafts(step_cost: Mapping[int, Seq[float]], batch: int, max_drafts: int,
                    token_acceptance: float) -> int:
    """The drafts per sequence that maximize tokens per unit of step time at this batch size:
    K in 0..max_drafts maximizing expected_tokens(K, p) / c(B, K), where c(B, K) is the
    step-cost table's time of a verification step with K drafts per sequence relative to a
    plain step (c(B, 0) = 1: plain decoding). B's row is the smallest measured batch size
    >= B (verification costs grow with the batch), else the largest measured one."""
    if not step_cost:
        return max_drafts
    sizes = sorted(step_cost)
    costs = step_cost[next((b for b in sizes if b >= batch), sizes[-1])]
    best_k, best_rate = 0, 1.0
    for k in range(1, min(max_drafts, len(costs)) + 1):
        rate = expected_tokens(k, token_acceptance) / costs[k - 1]
        if rate > best_rate:
            best_k, best_rate = k, rate
    return best_k


def step_cost_table(measured: Mapping[str, Mapping[str, float]]) -> dict[int, list[float]]:
    """The draft policy's table from tools/gpu/bench_spec.py's JSON "step_cost" object
    ({"8": {"plain_ms": ..., "k1_ratio": 1.22, "k2_ratio": ...}, ...}): batch -> [c(B, 1),
    c(B, 2), ...] for the K it measured from 1 up. A malformed object is a ValueError
    naming what is wrong."""
    table: dict[int, list[float]] = {}
    for batch, row in measured.items():
        if not str(batch).isdigit() or not isinstance(row, Mapping):
            raise ValueError(f"step_cost: {batch!r} is not a batch size with a row of ratios")
        costs = []
        while f"k{len(costs) + 1}_ratio" in row:
            cost = row[f"k{len(costs) + 1}_ratio"]
            if not isinstance(cost, (int, float)) or cost <= 0:
                raise ValueError(f"step_cost[{batch}].k{len(costs) + 1}_ratio = {cost!r} is "
                                 "not a positive number")
            costs.append(float(cost))
        if not costs:
            raise ValueError(f"step_cost[{batch}] has no k1_ratio")
        table[int(batch)] = costs
    if not table:
        raise ValueError("step_cost has no rows")
    return table


@dataclass(slots=True)
class Speculator:
    """A drafter, how many tokens it may propose per step, and what it achieved.

    With a `step_cost` table (batch size -> [c(B, 1), ..., c(B, K)]: a verification step's
    time relative to a plain one, as tools/gpu/bench_spec.py measures it) each step drafts
    `drafts_per_sequence(batch)`: best_num_drafts at the measured per-token acceptance, so a
    batch where verification costs more than its expected tokens repay decodes plainly
    (K = 0). Without one every step drafts num_draft_tokens."""

    drafter: Drafter
    num_draft_tokens: int
    step_cost: Mapping[int, Seq[float]] | None = None
    #: per-token acceptance assumed before any verification (token_acceptance's prior)
    prior_acceptance: float = 0.7
    drafted: int = 0
    accepted: int = 0
    verify_steps: int = 0
    #: verification steps that rejected a draft (the others accepted all they verified)
    rejections: int = 0

    def __post_init__(self) -> None:
        if self.num_draft_tokens < 1:
            raise ValueError(f"num_draft_tokens must be >= 1, got {self.num_draft_tokens}")
        if not 0.0 <= self.prior_acceptance <= 1.0:
            raise ValueError(f"prior_acceptance must be in [0, 1], got {self.prior_acceptance}")
        for batch, costs in (self.step_cost or {}).items():
            if batch < 1 or not costs or any(c <= 0 for c in costs):
                raise ValueError(f"step_cost[{batch}] = {costs!r}: need batch >= 1 and "
                                 "positive relative costs for K = 1, 2, ...")

    @staticmethod
    def applies_to(seq: Sequence) -> bool:
        return not seq.sampling.params.has_penalties and seq.sampling.thinking is None

    def record(self, num_drafts: int, num_accepted: int) -> None:
        self.drafted += num_drafts
        self.accepted += num_accepted
        self.verify_steps += 1
        self.rejections += num_accepted < num_drafts

    @property
    def mean_accepted_length(self) -> float:
        """Drafts accepted per verification step (tokens per step is one more)."""
        return self.accepted / self.verify_steps if self.verify_steps else 0.0

    @property
    def token_acceptance(self) -> float:
        """Per-token acceptance p: P(a draft is accepted | the ones before it were), the
        maximum-likelihood p of runs cut at the first rejection (accepted / (accepted +
        rejections)), with PRIOR_DRAFTS pseudo-drafts at prior_acceptance."""
        prior = PRIOR_DRAFTS * self.prior_acceptance
        return (self.accepted + prior) / (self.accepted + self.rejections + PRIOR_DRAFTS)

    def drafts_per_sequence(self, batch: int) -> int:
        """Drafts each sequence may carry in a step with `batch` decoding sequences."""
        if self.step_cost is None:
            return self.num_draft_tokens
        return best_num_drafts(self.step_cost, batch, self.num_draft_tokens,
                               self.token_acceptance)


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
