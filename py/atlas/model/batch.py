"""The contract between the engine core and the model: what one engine step computes.

The scheduler (pure logic, `atlas.engine`) decides every step which sequences advance by how
many tokens and which KV blocks they own; a `StepExecutor` runs that on a device and returns
the sampled token of every chunk that asked for one. Nothing else crosses the boundary, so a
scripted executor can stand in for the model in scheduler and server tests.

Device state per sequence (the sampler's penalty counts and seed) is a cache of what the
sequence owns: the first chunk an executor sees of a sequence, and the first after it was
released (finished or preempted), carries the `PenaltyHistory` to rebuild it from. That is
how a preempted sequence resumes sampling exactly where it stopped.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Mapping, Protocol, Sequence

import numpy as np

from ..core.sampling import SamplingParams

#: the most alternatives a sampled token reports with its logprob (OpenAI's top_logprobs cap)
MAX_TOP_LOGPROBS = 20

#: writes a sampling row's allowed-token bitmask: (the [rows, words] uint32 host rows, row)
TokenMaskFiller = Callable[[np.ndarray, int], None]


@dataclass(frozen=True, slots=True)
class PenaltyHistory:
    """What a sequence's penalties have seen so far: its prompt (the repetition penalty's
    mask) and how often the sampler drew each token (presence/frequency counts)."""

    prompt_ids: Sequence[int]
    drawn_counts: Mapping[int, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class TokenLogprobs:
    """A sampled token with its log-probability and the `top` most likely (id, logprob)
    pairs, best first, from the distribution it was drawn from (see runtime.sampler)."""

    token: int
    logprob: float
    top: tuple[tuple[int, float], ...] = ()


@dataclass(frozen=True, slots=True)
class PromptScoring:
    """Rows of a chunk whose logits score the prompt token that follows each (prompt
    logprobs): row `first + i` of the chunk (its token at start_pos + first + i) reports
    the logprob of `targets[i]` and the `top_n` best alternatives, from the raw logits (no
    penalty, mask or temperature: the model's own log-softmax, as vLLM reports them)."""

    first: int
    targets: tuple[int, ...]
    top_n: int


@dataclass(frozen=True, slots=True)
class WithPromptLogprobs:
    """The result of a chunk that scored prompt tokens: their logprobs in position order,
    and what the chunk returns besides (None, or its sampled token: such a chunk never
    verifies drafts)."""

    prompt: tuple[TokenLogprobs, ...]
    result: int | TokenLogprobs | None


@dataclass(frozen=True, slots=True)
class WithEmbedding:
    """The result of a chunk that asked for its last token's hidden state (`SeqChunk.embed`):
    the final-norm hidden row, float32 [hidden] (bf16 values), and the chunk's sampled token."""

    vector: np.ndarray
    result: int | TokenLogprobs | None


#: what a step returns per chunk: None, the sampled token (with its logprobs when the chunk
#: asked for them), a verification's samples, or one of those with the prompt logprobs the
#: chunk scored or the hidden state it pooled
StepResult = (int | TokenLogprobs | tuple[int, ...] | WithPromptLogprobs | WithEmbedding
              | None)


@dataclass(slots=True)
class SeqChunk:
    """One sequence's share of a step.

    `token_ids` are fed at positions start_pos .. start_pos+len-1 (a prefill chunk, or one
    decode token). `block_table` lists the KV blocks of the whole sequence so far, enough to
    hold start_pos + len(token_ids) tokens. `sample` is False for a prefill chunk that is not
    the last one (and where the engine forces the next token instead of drawing it).
    `rng_position` is how many tokens the sequence had generated before this chunk: with the
    seed in `sampling`, it keys the sampler's counter-based RNG. `history` is set when the
    executor holds no state for the sequence yet (see the module doc). `token_mask`, on a
    sampling chunk under a grammar, fills the row's allowed-token bitmask before sampling
    (never on a verification chunk: a constrained sequence does not draft). `logprobs` >= 0
    asks for the sampled token's logprob and its `logprobs` best alternatives (a
    `TokenLogprobs` result; never on a verification chunk either). `prompt_logprobs`
    scores prompt tokens with some of the chunk's rows (`PromptScoring`; the result is then
    a `WithPromptLogprobs`): each such row gets a logits row of its own, so the scheduler
    sizes these chunks by the executor's logits rows.

    `num_draft` > 0 makes it a speculative verification chunk: its last `num_draft` tokens
    are drafts, and the executor samples at each of its last num_draft + 1 positions (row i
    at RNG position rng_position + i), returning those tokens as a tuple.

    Hybrid models with a prefix cache: `state_restore` names the recurrent-state snapshot
    (0 .. num_state_snapshots - 1) to load into the sequence's state before the chunk (a
    prefix-cache hit that starts it at start_pos > 0), `state_save` the snapshot to store
    its state into after the chunk (the state at start_pos + len(token_ids)).

    `carried`: the chunk's last token (a placeholder in `token_ids`) is the one the
    executor sampled for this sequence in the step launched just before, not yet read back:
    the executor feeds it from the device (`ModelRunner.launch`), so the engine can plan
    and launch a step before the previous one's tokens reach the host.
    """

    seq_id: int
    token_ids: list[int]
    start_pos: int
    block_table: list[int]
    sampling: SamplingParams
    sample: bool = True
    rng_position: int = 0
    history: PenaltyHistory | None = None
    num_draft: int = 0
    token_mask: TokenMaskFiller | None = None
    state_restore: int | None = None
    state_save: int | None = None
    logprobs: int = -1
    carried: bool = False
    prompt_logprobs: PromptScoring | None = None
    #: a sampling chunk reports its last token's final-norm hidden state (`WithEmbedding`):
    #: the last-token pooled embedding of an embedding request
    embed: bool = False


def accept(drafts: Sequence[int], sampled: Sequence[int]) -> list[int]:
    """The tokens a verification emits: the drafts the target's samples agree with, then
    the first sample that disagrees (or the one after the last draft). The scheduler
    commits by it; a hybrid model's executor rolls its recurrent state back by it."""
    n = 0
    while n < len(drafts) and sampled[n] == drafts[n]:
        n += 1
    return list(sampled[:n + 1])


class StepExecutor(Protocol):
    """A model bound to a device. Implemented by ModelRunner and by scripted fakes.

    This is also where tensor parallelism will plug in: a multi-GPU executor broadcasts
    the chunks to one worker per GPU and returns rank 0's tokens; the engine core above it
    stays single.

    An executor class that also defines `launch(chunks) -> handle`, `collect(handle) ->
    results` (execute = collect(launch)) and `can_run_ahead` lets the engine launch the
    next step before collecting this one, feeding `carried` tokens (ModelRunner does).
    """

    block_size: int
    num_kv_blocks: int
    max_batch_size: int
    max_seq_len: int
    vocab_size: int
    #: the most drafts one verification chunk may carry (the sampled rows it is sized for)
    max_num_draft_tokens: int
    #: per-sequence recurrent state (hybrid models): a sequence starts at position 0 or
    #: from a state snapshot (`SeqChunk.state_restore`); a verification chunk's executor
    #: restores the state past rejected drafts itself (by `accept`)
    has_recurrent_state: bool
    #: recurrent-state snapshot slots the prefix cache may use (0: none, or no state)
    num_state_snapshots: int

    def execute(self, chunks: Sequence[SeqChunk]) -> list[StepResult]:
        """Run one step; return the sampled token per chunk (None where sample=False, a
        tuple of num_draft + 1 tokens for a verification chunk)."""

    def release(self, seq_id: int) -> None:
        """Forget per-sequence device state (penalty counts, sampler slot)."""

    def state_slot_usage(self) -> tuple[int, int]:
        """(held, total) recurrent-state slots (hybrid models; (0, 0) otherwise)."""
