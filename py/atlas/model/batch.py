"""The contract between a scheduler and the model: what one engine step computes.

The scheduler (pure logic) decides, every step, which sequences advance by how many tokens
and which KV blocks they own; the `StepExecutor` runs that on a device and returns the
sampled token of every sequence that asked for one. Nothing else crosses the boundary, so
a scripted executor can stand in for the model in scheduler and server tests.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, Sequence

from ..core.sampling import SamplingParams


@dataclass(slots=True)
class SeqStep:
    """One sequence's share of a step.

    `token_ids` are fed at positions start_pos .. start_pos+len-1 (a prefill chunk, or one
    decode token). `block_table` lists the KV blocks of the whole sequence so far, enough
    to hold start_pos + len(token_ids) tokens. `sample` is False for a prefill chunk that is
    not the last one. `prompt_ids` is set on a sequence's first step (penalties need it).
    """

    seq_id: int
    token_ids: list[int]
    start_pos: int
    block_table: list[int]
    sampling: SamplingParams
    sample: bool = True
    prompt_ids: list[int] | None = None


class StepExecutor(Protocol):
    """A model bound to a device. Implemented by ModelRunner and by scripted fakes."""

    block_size: int
    num_kv_blocks: int
    max_batch_size: int
    max_seq_len: int
    vocab_size: int

    def execute(self, steps: Sequence[SeqStep]) -> list[int | None]:
        """Run one step; return the sampled token per step (None where sample=False)."""

    def release(self, seq_id: int) -> None:
        """Forget per-sequence device state (penalty counts, sampler slot)."""
