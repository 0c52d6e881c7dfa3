"""Which sequence goes first when the batch or the KV pool is short.

A policy orders the running sequences, most urgent first (the last ones are the preemption
victims), and keys the waiting queue (admitted in key order): arrival for FIFO and SLO-aware,
the request's `priority` then arrival for the priority policy (vLLM's, lower values first).
"""

from __future__ import annotations

import abc
from typing import Sequence as Seq

from .sequence import Sequence


class SchedulingPolicy(abc.ABC):
    name: str
    #: whether requests' `priority` means anything (otherwise a non-zero one is refused)
    uses_priority = False

    @abc.abstractmethod
    def order(self, running: Seq[Sequence], now: float) -> list[Sequence]:
        """Most urgent first."""

    def waiting_key(self, seq: Sequence) -> tuple[int, ...]:
        """The waiting queue's order (smallest admitted first): arrival."""
        return (seq.arrival_index,)


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


class PriorityPolicy(SchedulingPolicy):
    """The request's `priority` first (lower values first, as vLLM orders them), then
    arrival: admitted in that order, and the least urgent are preempted first."""

    name = "priority"
    uses_priority = True

    def order(self, running: Seq[Sequence], now: float) -> list[Sequence]:
        return sorted(running, key=self.waiting_key)

    def waiting_key(self, seq: Sequence) -> tuple[int, ...]:
        return (seq.request.priority, seq.arrival_index)


POLICIES = ("fifo", "slai", "priority")


def make_policy(name: str, tbt_deadline_ms: float) -> SchedulingPolicy:
    if name == "fifo":
        return FifoPolicy()
    if name == "slai":
        return SlaiPolicy(tbt_deadline_ms / 1000.0)
    if name == "priority":
        return PriorityPolicy()
    raise ValueError(f"unknown scheduling policy {name!r}; known: {', '.join(POLICIES)}")
