"""LLMEngine: the offline loop over the engine core, for `atlas generate`, tools and tests.

`generate(requests)` queues every request and steps the same `EngineCore` the server runs
until all of them finish: chunked prefill, continuous batching, and preemption when the KV
pool runs short (never an out-of-memory error for a request that fits on its own).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Callable, Sequence as Seq

import numpy as np

from ..model.batch import StepExecutor, TokenLogprobs
from .core import DEFAULT_SNAPSHOT_INTERVAL, EngineCore
from .request import EngineRequest, FinishReason
from .scheduling_policy import SchedulingPolicy
from .speculative import Speculator

#: `stop_check(i, output_ids)`: True ends request i now (a caller with a tokenizer uses it
#: for stop strings)
StopCheck = Callable[[int, list[int]], bool]


@dataclass(frozen=True, slots=True)
class Completion:
    """One finished request: its generated tokens and why it stopped (and its prompt
    tokens' logprobs, from the second on, when it asked for them)."""

    token_ids: list[int]
    finish_reason: str
    prompt_logprobs: tuple[TokenLogprobs, ...] | None = None
    #: `EngineRequest.embed`: the last prompt token's final-norm hidden state
    embedding: np.ndarray | None = None


class LLMEngine:
    """An `EngineCore` over one executor, run to completion per `generate` call. Sequence ids
    count up across calls, so several calls may share an executor."""

    def __init__(self, executor: StepExecutor, *, max_prefill_tokens: int,
                 max_num_seqs: int | None = None, policy: SchedulingPolicy | None = None,
                 seed: int | None = None, prefix_caching: bool = True,
                 speculator: Speculator | None = None,
                 snapshot_interval: int = DEFAULT_SNAPSHOT_INTERVAL,
                 async_scheduling: bool = True) -> None:
        """`async_scheduling`: plan and launch each step before the previous one's tokens
        are committed, where safe (see `EngineCore`)."""
        self.core = EngineCore.build(executor, max_prefill_tokens=max_prefill_tokens,
                                     max_num_seqs=max_num_seqs, policy=policy, seed=seed,
                                     prefix_caching=prefix_caching, speculator=speculator,
                                     snapshot_interval=snapshot_interval,
                                     async_scheduling=async_scheduling)
        self._ids = itertools.count()

    def generate(self, requests: Seq[EngineRequest],
                 stop_check: StopCheck | None = None) -> list[Completion]:
        """Run every request to completion; results in request order.

        A request that can never run is a ValueError before any work starts. An executor
        failure is re-raised (after every sequence was ended and its blocks freed)."""
        scheduler = self.core.scheduler
        for r in requests:
            scheduler.check(r)
        ids = [next(self._ids) for _ in requests]
        index = {seq_id: i for i, seq_id in enumerate(ids)}
        tokens: list[list[int]] = [[] for _ in requests]
        reasons: list[str | None] = [None] * len(requests)
        prompt_logprobs: list[tuple[TokenLogprobs, ...] | None] = [None] * len(requests)
        embeddings: list[np.ndarray | None] = [None] * len(requests)
        for seq_id, r in zip(ids, requests):
            self.core.add(seq_id, r)
        while self.core.has_work:
            report = self.core.step()
            if report.error is not None:
                self.core.fail_all()
                raise RuntimeError(f"the executor failed: {report.error}") from report.error
            if not report.made_progress:
                self.core.fail_all()
                raise RuntimeError("the engine made no progress: no waiting sequence fits "
                                   "in the free KV blocks")
            for out in report.outputs:
                i = index[out.seq_id]
                tokens[i] += out.new_token_ids
                reasons[i] = out.finish_reason
                if out.prompt_logprobs is not None:
                    prompt_logprobs[i] = out.prompt_logprobs
                if out.embedding is not None:
                    embeddings[i] = out.embedding
                if (out.finish_reason is None and stop_check is not None
                        and stop_check(i, tokens[i])):
                    reasons[i] = FinishReason.STOP
                    self.core.abort(out.seq_id, FinishReason.STOP)
        return [Completion(t, r or FinishReason.ERROR, p, e)
                for t, r, p, e in zip(tokens, reasons, prompt_logprobs, embeddings)]
