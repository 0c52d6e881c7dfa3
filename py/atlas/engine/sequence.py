"""One request's live state inside the engine: everything that must survive preemption.

Preemption frees device memory (KV blocks, the executor's sampler slot), never request
state: the tokens so far, the seed, what the penalties have counted and where a thinking
budget stands all live here, so a recomputed sequence continues exactly as if it had never
been interrupted. The grammar matcher lives in `SamplingState` too. Speculative decoding's
drafter keeps its per-sequence index in `draft_state`; the drafts themselves live only in
the step's chunk, and `commit` keeps what the verification accepted.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..core.sampling import SamplingParams
from ..model.batch import PenaltyHistory, TokenLogprobs
from .grammar_state import GrammarState
from .request import EngineRequest, ThinkingBudget


@dataclass(slots=True)
class ThinkingState:
    """Where a sequence stands against its thinking budget."""

    budget: ThinkingBudget
    inside: bool
    num_tokens: int = 0
    forced: list[int] = field(default_factory=list)

    def observe(self, token: int) -> None:
        """Count `token`; once the budget is spent, queue the close tokens to be forced."""
        b = self.budget
        if token == b.open_id:
            self.inside, self.num_tokens = True, 0
        elif b.close_ids and token == b.close_ids[0]:
            self.inside = False
        elif self.inside:
            self.num_tokens += 1
            if self.num_tokens >= b.budget and not self.forced:
                self.forced = list(b.close_ids)


@dataclass(slots=True)
class SamplingState:
    """What a sequence's next token depends on besides the logits.

    `params` carry the seed fixed at admission, so the counter-based RNG (keyed by seed and
    output position) draws the same token after a recompute. `drawn_counts` mirrors the
    executor's penalty counts (kept only when the request has penalties) so they can be
    rebuilt when the sequence returns from preemption. A token forced by the thinking budget
    is not drawn: it neither advances the sampler nor counts as drawn. `grammar` advances
    with every token, drawn or forced.
    """

    params: SamplingParams
    drawn_counts: dict[int, int] = field(default_factory=dict)
    thinking: ThinkingState | None = None
    grammar: GrammarState | None = None

    @property
    def forced_next(self) -> bool:
        return self.thinking is not None and bool(self.thinking.forced)

    def take_forced(self) -> int:
        assert self.thinking is not None and self.thinking.forced
        return self.thinking.forced.pop(0)

    def record(self, token: int, drawn: bool) -> None:
        if drawn and self.params.has_penalties:
            self.drawn_counts[token] = self.drawn_counts.get(token, 0) + 1
        if self.thinking is not None:
            self.thinking.observe(token)
        if self.grammar is not None:
            self.grammar.observe(token)


@dataclass(slots=True, eq=False)
class Sequence:
    """A request being generated: prompt + output tokens, how many of them the KV cache
    holds (`num_computed`), the blocks holding them, and its sampling state."""

    seq_id: int
    request: EngineRequest
    arrival_index: int
    token_limit: int
    sampling: SamplingState
    output_ids: list[int] = field(default_factory=list)
    num_computed: int = 0
    block_table: list[int] = field(default_factory=list)
    last_emit_time: float = 0.0
    num_preemptions: int = 0
    #: the executor holds no state for this sequence (new, or released at preemption): its
    #: next chunk carries the history to rebuild it from
    needs_history: bool = True
    #: prefix-cache chain keys of the first full blocks (see `block_manager`)
    block_keys: list[int] = field(default_factory=list)
    #: leading blocks of `block_table` already offered to the prefix cache
    num_cached_blocks: int = 0
    #: prompt tokens found in the prefix cache at first admission (the usage field)
    num_cached_tokens: int = 0
    #: the drafter's incremental state for this sequence (see `speculative`)
    draft_state: object | None = None
    #: hybrid models: the state snapshot its next chunk starts from (a prefix-cache hit),
    #: and the (snapshot slot, prefix length) of each chunk in flight that saves its state
    #: (the prefix's key is computed at commit, once its tokens are all known)
    state_restore: int | None = None
    pending_snapshots: list[tuple[int, int]] = field(default_factory=list)
    #: tokens a scheduled step will produce that `output_ids` does not hold yet: 1 from the
    #: plan of a chunk that ends the known tokens until its step is committed. With the
    #: engine running one step ahead, the next step feeds such a token straight from the
    #: device (`SeqChunk.carried`); its value reaches `output_ids` at the commit
    num_pending: int = 0
    #: prompt logprobs (`EngineRequest.prompt_logprobs`): rows below this are planned to
    #: score the prompt token after them (see `prompt_logprobs`), and the logprobs their
    #: committed steps reported, prompt token 1 first
    num_scored: int = 0
    prompt_logprobs: list[TokenLogprobs] = field(default_factory=list)
    #: `EngineRequest.embed`: the last prompt token's final-norm hidden state, once computed
    embedding: np.ndarray | None = None

    @property
    def num_prompt_tokens(self) -> int:
        return len(self.request.prompt_ids)

    @property
    def num_known(self) -> int:
        """Prompt and output tokens the host holds (`num_tokens` less the pending ones)."""
        return len(self.request.prompt_ids) + len(self.output_ids)

    @property
    def num_tokens(self) -> int:
        """The sequence's length, counting tokens that steps in flight will produce."""
        return len(self.request.prompt_ids) + len(self.output_ids) + self.num_pending

    @property
    def ends_by_length(self) -> bool:
        """Its pending tokens reach max_tokens or the context limit: the commit ends it, so
        no step may be scheduled past them."""
        return (len(self.output_ids) + self.num_pending >= self.request.max_tokens
                or self.num_tokens >= self.token_limit)

    def token_slice(self, start: int, stop: int) -> list[int]:
        """Tokens start..stop-1 of prompt + output, without concatenating the two."""
        prompt = self.request.prompt_ids
        n = len(prompt)
        if stop <= n:
            return prompt[start:stop]
        if start >= n:
            return self.output_ids[start - n:stop - n]
        return prompt[start:] + self.output_ids[:stop - n]

    def penalty_history(self) -> PenaltyHistory:
        return PenaltyHistory(self.request.prompt_ids, dict(self.sampling.drawn_counts))
