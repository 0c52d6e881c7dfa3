"""Prompt logprobs in the scheduler: which rows of a prefill chunk score the prompt, and how
long a chunk may be for its rows to fit the step's logits rows.

Row p of a sequence (its token at position p) predicts the token at p + 1, so for a prompt
of P tokens rows 0 .. P - 2 give the logprobs of prompt tokens 1 .. P - 1 (token 0 has
none). The executor computes logits only for the rows a step names, in a buffer of a fixed
number of rows (one per sampled row at most: `EngineCore.build`'s `max_logit_rows`), so a
chunk that scores the prompt is cut to the rows left in its step. A row is planned once
(`Sequence.num_scored`): a sequence recomputed after preemption scores only what no earlier
step was planned to, and its planned rows reach it with their steps' commits.
"""

from __future__ import annotations

from ..model.batch import PromptScoring
from .sequence import Sequence


def still_scoring(seq: Sequence) -> bool:
    """Prompt rows remain to be scored: a prefix-cache hit would skip computing them, so
    the sequence is admitted without one."""
    return (seq.request.prompt_logprobs is not None
            and seq.num_scored < seq.num_prompt_tokens - 1)


def scored_span(seq: Sequence, start: int, end: int) -> range:
    """Rows of the chunk [start, end) that score a prompt token no step has been planned to
    score (empty when the request asks for no prompt logprobs)."""
    if seq.request.prompt_logprobs is None:
        return range(0)
    return range(max(start, seq.num_scored), min(end, seq.num_prompt_tokens - 1))


def logit_rows(seq: Sequence, start: int, end: int) -> int:
    """Logits rows the chunk [start, end) takes: its scoring rows, and its sampled row when
    it completes the sequence's tokens."""
    return len(scored_span(seq, start, end)) + (end == seq.num_tokens)


def fit_logit_rows(seq: Sequence, start: int, chunk: int, rows: int) -> int:
    """The longest chunk from `start`, of at most `chunk` tokens, whose logits rows fit in
    `rows` (0: none fits). `logit_rows` grows by at most one a token, from 0 for an empty
    chunk, so a bisection finds it."""
    if logit_rows(seq, start, start + chunk) <= rows:
        return chunk
    fits, too_long = start, start + chunk
    while too_long - fits > 1:
        mid = (fits + too_long) // 2
        if logit_rows(seq, start, mid) <= rows:
            fits = mid
        else:
            too_long = mid
    return fits - start


def plan_scoring(seq: Sequence, start: int, end: int) -> PromptScoring | None:
    """The scoring rows of the chunk [start, end) for its SeqChunk, marked planned."""
    span = scored_span(seq, start, end)
    if not span:
        return None
    seq.num_scored = span.stop
    top_n = seq.request.prompt_logprobs
    assert top_n is not None
    return PromptScoring(span.start - start,
                         tuple(seq.request.prompt_ids[span.start + 1:span.stop + 1]), top_n)
