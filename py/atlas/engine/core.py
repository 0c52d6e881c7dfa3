"""EngineCore: one step of schedule -> execute -> commit, the loop every driver shares.

The server's engine thread calls `step` forever (requests arrive through its command queue);
`LLMEngine.generate` calls it until its requests finish; tests drive either. The core keeps
the executor's per-sequence state in step with the scheduler (released sequences are
forgotten before the next execute) and fixes each request's seed on admission, so a
sampled request is reproducible across preemption whether or not the client gave a seed.

Async scheduling (on by default where the executor can launch ahead): the host work of a
step (planning, packing, upload, then committing and streaming the tokens) overlaps the
device running the step before. Each `step` plans step N+1 while step N is in flight,
launches it (its decode tokens come from step N's sampler output on the device), and only
then waits for step N's tokens and commits them, one step behind. A sequence that step N
ends (a stop token, an abort, a stop string) costs at most the one row of step N+1 it was
already given; max_tokens and the context limit are known ahead, so they cost none. Steps
whose next token needs the last one on the host (grammar masks, thinking budgets,
speculative verification: `Scheduler.needs_sync`) drain the step in flight and run
synchronously, as does an executor that cannot launch ahead.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field, replace
from typing import Callable

from ..model.batch import StepExecutor, StepResult
from ..runtime.kv_cache import BlockAllocator
from .block_manager import BlockManager, BlockPool
from .prefix_cache import StateSnapshots
from .request import EngineOutput, EngineRequest
from .scheduler import Scheduler, StepPlan
from .scheduling_policy import FifoPolicy, SchedulingPolicy
from .speculative import Speculator


#: tokens between a hybrid model's state-snapshot checkpoints (a multiple of the block size;
#: the book's --ssm-checkpoint-interval default)
DEFAULT_SNAPSHOT_INTERVAL = 256


@dataclass(slots=True)
class StepReport:
    """What one step did. `num_chunks` 0: nothing could run (every sequence waits for
    blocks). `error`: the executor raised; the running sequences ended with "error"."""

    outputs: list[EngineOutput] = field(default_factory=list)
    num_chunks: int = 0
    error: Exception | None = None
    #: chunks of an earlier step committed by this one (running ahead, a step's tokens are
    #: committed by the next call)
    num_committed: int = 0

    @property
    def made_progress(self) -> bool:
        return bool(self.num_chunks or self.num_committed or self.outputs)

    @property
    def num_generated(self) -> int:
        return sum(len(o.new_token_ids) for o in self.outputs)


class EngineCore:
    """A scheduler and an executor stepped together; drivers call `add`, `abort`, `step`."""

    def __init__(self, scheduler: Scheduler, executor: StepExecutor, seed: int | None = None,
                 clock: Callable[[], float] = time.monotonic,
                 async_scheduling: bool = True) -> None:
        """`seed` seeds the seeds given to requests that bring none; `clock` stamps
        arrivals, deadlines and emit times (the SLO-aware policy reads them).
        `async_scheduling`: run a step ahead where the executor can (see the module doc)."""
        self.scheduler = scheduler
        self.executor = executor
        self.clock = clock
        self._seeds = random.Random(seed)
        # looked up on the class: a wrapper forwarding unknown attributes to a runner (the
        # tensor-parallel executor) must not be mistaken for one that launches ahead
        self._launches = async_scheduling and callable(getattr(type(executor), "launch", None))
        #: the step launched and not yet committed: its plan and the executor's handle
        self._in_flight: tuple[StepPlan, object] | None = None

    @classmethod
    def build(cls, executor: StepExecutor, *, max_prefill_tokens: int,
              max_mixed_step_tokens: int | None = None,
              max_num_seqs: int | None = None, max_seq_len: int | None = None,
              policy: SchedulingPolicy | None = None,
              pool_factory: Callable[[int], BlockPool] = BlockAllocator,
              seed: int | None = None, prefix_caching: bool = True,
              speculator: Speculator | None = None,
              snapshot_interval: int = DEFAULT_SNAPSHOT_INTERVAL,
              clock: Callable[[], float] = time.monotonic,
              async_scheduling: bool = True) -> "EngineCore":
        """A core whose scheduler is sized by the executor (limits beyond it are capped;
        `max_mixed_step_tokens`: the step budget while sequences decode, see `scheduler`).

        An executor with recurrent state (a hybrid model) caches prefixes only with state
        snapshots (`executor.num_state_snapshots` > 0): a hit must restore the state at its
        end, so hits stop at snapshots, taken where chunks end on a multiple of
        `snapshot_interval` tokens. It speculates like any other, in steps without prefill
        (`verify_apart`): the executor keeps the state after the accepted drafts (see
        ModelRunner.launch)."""
        snapshots = None
        if executor.has_recurrent_state:
            if prefix_caching and executor.num_state_snapshots:
                snapshots = StateSnapshots(executor.num_state_snapshots, snapshot_interval)
            else:
                prefix_caching = False
        if speculator is not None and speculator.num_draft_tokens > executor.max_num_draft_tokens:
            raise ValueError(f"{speculator.num_draft_tokens} draft tokens per step, but the "
                             f"executor was sized for {executor.max_num_draft_tokens}")
        blocks = BlockManager(pool_factory(executor.num_kv_blocks), executor.num_kv_blocks,
                              executor.block_size, prefix_caching=prefix_caching,
                              snapshots=snapshots)
        scheduler = Scheduler(
            blocks, policy or FifoPolicy(),
            max_num_seqs=min(max_num_seqs or executor.max_batch_size, executor.max_batch_size),
            max_seq_len=min(max_seq_len or executor.max_seq_len, executor.max_seq_len),
            max_prefill_tokens=max_prefill_tokens, max_mixed_step_tokens=max_mixed_step_tokens,
            speculator=speculator, verify_apart=executor.has_recurrent_state,
            # the executor's logits buffer: a row per sequence and draft (model/runner.py)
            max_logit_rows=executor.max_batch_size * (1 + executor.max_num_draft_tokens))
        return cls(scheduler, executor, seed, clock, async_scheduling)

    @property
    def has_work(self) -> bool:
        return self.scheduler.has_work or self._in_flight is not None

    @property
    def runs_ahead(self) -> bool:
        """The next step may be launched before this one is committed."""
        return (self._launches and not self.scheduler.needs_sync
                and self.executor.can_run_ahead)

    def counters(self) -> dict[str, float]:
        """Feature counters for /metrics (the server names them in its ENGINE_COUNTERS)."""
        out: dict[str, float] = {}
        stats = self.scheduler.blocks.prefix_cache_stats()
        if stats is not None:
            out.update(prefix_cache_queries_total=stats.query_tokens,
                       prefix_cache_hits_total=stats.hit_tokens,
                       prefix_cache_blocks=stats.cached_blocks,
                       prefix_cache_evictions_total=stats.evictions)
        snapshots = self.scheduler.blocks.snapshots
        if snapshots is not None:
            snap = snapshots.stats()
            out.update(prefix_cache_state_snapshots=snap.held,
                       prefix_cache_state_restores_total=snap.hits,
                       prefix_cache_state_saves_total=snap.saves,
                       prefix_cache_state_evictions_total=snap.evictions)
        spec = self.scheduler.speculator
        if spec is not None:
            out.update(spec_draft_tokens_total=spec.drafted,
                       spec_accepted_tokens_total=spec.accepted,
                       spec_verify_steps_total=spec.verify_steps,
                       spec_mean_accepted_length=spec.mean_accepted_length,
                       spec_token_acceptance=spec.token_acceptance)
        return out

    def add(self, seq_id: int, request: EngineRequest, now: float | None = None) -> None:
        """Queue a request (arrived at `now`, default the clock); ValueError when it can
        never run."""
        params = request.sampling
        if params.seed is None and not params.is_greedy:
            request = replace(request, sampling=replace(params,
                                                        seed=self._seeds.getrandbits(63)))
        self.scheduler.add(seq_id, request, self.clock() if now is None else now)

    def abort(self, seq_id: int, reason: str) -> EngineOutput | None:
        out = self.scheduler.abort(seq_id, reason)
        self._release()
        return out

    def step(self) -> StepReport:
        """Plan and launch a step; commit the step before it (running ahead) or this one."""
        report = StepReport()
        ahead = self.runs_ahead
        if not ahead:
            self._commit_in_flight(report)  # what is planned next needs its tokens
        plan = self.scheduler.schedule(self.clock())
        self._release()   # preempted sequences, before the executor sees the next chunks
        report.outputs += plan.finished
        report.num_chunks = len(plan.chunks)
        launched = None
        if not plan.is_empty:
            try:
                launched = (self.executor.launch(plan.chunks) if self._launches else
                            self.executor.execute(plan.chunks))
            except Exception as exc:  # the model failed: end the batch, keep the engine usable
                self._fail(report, exc)
                return report
        self._commit_in_flight(report)
        if launched is not None:
            self._in_flight = (plan, launched)
            if not ahead:
                self._commit_in_flight(report)
        return report

    def _commit_in_flight(self, report: StepReport) -> None:
        """Wait for the step in flight (if any) and commit its tokens into `report`."""
        if self._in_flight is None or report.error is not None:
            return
        plan, launched = self._in_flight
        self._in_flight = None
        try:
            sampled: list[StepResult] = (self.executor.collect(launched) if self._launches
                                         else launched)
        except Exception as exc:  # the model failed: end the batch, keep the engine usable
            self._fail(report, exc)
            return
        report.outputs += self.scheduler.commit(plan, sampled, self.clock())
        report.num_committed += len(plan.chunks)
        self._release()

    def _fail(self, report: StepReport, exc: Exception) -> None:
        """End every running sequence with an error; a step still in flight is forgotten
        (the next launch waits for the device before reusing its buffers)."""
        self._in_flight = None
        report.error = exc
        report.outputs += self.scheduler.fail_running()
        self._release()

    def fail_all(self) -> list[EngineOutput]:
        """End every sequence with an error (the driver's loop itself failed)."""
        self._in_flight = None
        outputs = self.scheduler.fail_all()
        self._release()
        return outputs

    def _release(self) -> None:
        for seq_id in self.scheduler.take_released():
            self.executor.release(seq_id)
