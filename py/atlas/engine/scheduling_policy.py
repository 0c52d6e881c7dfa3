"""Which running sequence goes first when the batch or the KV pool is short.

Each policy is one method: order the running sequences, most urgent first. The last ones
are the preemption victims.
"""

from __future__ import annotations

import abc
from typing import Sequence as Seq

from .sequence import Sequence


class SchedulingPolicy(abc.ABC):
    name: str

    @abc.abstractmethod
    def order(self, running: Seq[Sequence], now: float) -> list[Sequence]:
        """Most urgent first."""


class FifoPolicy(SchedulingPolicy):
    """First come, first served: the oldest request keeps its place."""

    name = "fifo"

    def order(self, running: Seq[Sequence], now: float) -> list[Sequence]:
        return sorted(running, key=lambda s: s.arrival_index)


class SlaiPolicy(SchedulingPolicy):
    """SLO-aware: least slack to the time-between-tokens deadline first.

    A sequence's deadline is its last emitted token (or its arrival, before the first
    token) plus `tbt_deadline`. Under mixed load this keeps every stream moving instead of
    letting one long prefill starve the others' next tokens.
    """

    name = "slai"

    def __init__(self, tbt_deadline_s: float) -> None:
        if tbt_deadline_s <= 0:
            raise ValueError("tbt deadline must be positive")
        self.tbt_deadline_s = tbt_deadline_s

    def order(self, running: Seq[Sequence], now: float) -> list[Sequence]:
        return sorted(running, key=lambda s: (s.last_emit_time + self.tbt_deadline_s - now,
                                              s.arrival_index))


def make_policy(name: str, tbt_deadline_ms: float) -> SchedulingPolicy:
    if name == "fifo":
        return FifoPolicy()
    if name == "slai":
        return SlaiPolicy(tbt_deadline_ms / 1000.0)
    raise ValueError(f"unknown scheduling policy {name!r}; known: fifo, slai")
