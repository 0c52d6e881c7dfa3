"""The continuous-batching scheduler: pure logic over ids, counts and KV block numbers.

Every step it decides which sequences advance by how many tokens, in the style of vLLM v1:
there are no separate prefill and decode phases, each sequence's `num_computed` catches up
to its length. One token budget bounds a step, max(max_prefill_tokens, max_num_seqs), the
same bound the model runner sizes its step buffers for. Decode tokens are reserved first so
a long prompt never stalls running streams; prefill chunks of running sequences (in policy
order) and then of newly admitted ones share the rest, while the batch and the KV pool
allow. When a running sequence cannot
get a block, the least urgent running sequence is preempted: its blocks are freed and it
waits at the head of the queue to be recomputed from prompt + generated tokens. A
preempted request is therefore resumed, never dropped.

No I/O and no device: the engine thread feeds `plan.steps` to a StepExecutor and hands the
sampled tokens back to `commit`.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from typing import Protocol, Sequence as Seq

from ..core.sampling import SamplingParams
from ..model.batch import SeqStep
from .scheduling_policy import SchedulingPolicy


class BlockPool(Protocol):
    """The KV block allocator the scheduler owns (atlas.runtime.kv_cache.BlockAllocator)."""

    @property
    def num_free(self) -> int: ...

    def can_allocate(self, n: int) -> bool: ...

    def allocate(self, n: int) -> list[int]: ...

    def free(self, blocks: Seq[int]) -> None: ...


@dataclass(frozen=True, slots=True)
class ThinkingBudget:
    """Cap on reasoning tokens: after `budget` tokens inside a think block, the close tokens
    are forced in place of what the model samples."""

    open_id: int | None
    close_ids: tuple[int, ...]
    budget: int
    starts_inside: bool = False


@dataclass(slots=True)
class SeqRequest:
    """What the scheduler needs of a request: tokens, limits, and when to give up."""

    prompt_ids: list[int]
    sampling: SamplingParams
    max_tokens: int
    stop_token_ids: frozenset[int] = frozenset()
    deadline: float | None = None
    thinking: ThinkingBudget | None = None


class FinishReason:
    STOP = "stop"          # a stop token id
    LENGTH = "length"      # max_tokens or the context limit
    ABORT = "abort"        # the client went away
    TIMEOUT = "timeout"    # --request-timeout
    ERROR = "error"        # the executor failed


@dataclass(slots=True, eq=False)
class Sequence:
    seq_id: int
    request: SeqRequest
    arrival_index: int
    token_limit: int
    output_ids: list[int] = field(default_factory=list)
    num_computed: int = 0
    blocks: list[int] = field(default_factory=list)
    last_emit_time: float = 0.0
    num_preemptions: int = 0
    thinking_inside: bool = False
    thinking_tokens: int = 0
    forced: list[int] = field(default_factory=list)

    @property
    def num_tokens(self) -> int:
        return len(self.request.prompt_ids) + len(self.output_ids)

    def token_at(self, start: int, stop: int) -> list[int]:
        """Tokens start..stop-1 of prompt + output, without concatenating the two."""
        prompt = self.request.prompt_ids
        n = len(prompt)
        if stop <= n:
            return prompt[start:stop]
        if start >= n:
            return self.output_ids[start - n:stop - n]
        return prompt[start:] + self.output_ids[:stop - n]


@dataclass(frozen=True, slots=True)
class SeqOutput:
    """What one step produced for one sequence."""

    seq_id: int
    new_token_ids: tuple[int, ...]
    finish_reason: str | None
    num_prompt_tokens: int
    num_output_tokens: int


@dataclass(slots=True)
class StepPlan:
    seqs: list[Sequence]
    steps: list[SeqStep]
    finished: list[SeqOutput]

    @property
    def is_empty(self) -> bool:
        return not self.steps


class Scheduler:
    def __init__(self, pool: BlockPool, policy: SchedulingPolicy, *, block_size: int,
                 num_kv_blocks: int, max_num_seqs: int, max_seq_len: int,
                 max_prefill_tokens: int) -> None:
        if min(block_size, num_kv_blocks, max_num_seqs, max_seq_len, max_prefill_tokens) <= 0:
            raise ValueError("scheduler limits must be positive")
        self.pool = pool
        self.policy = policy
        self.block_size = block_size
        self.num_kv_blocks = num_kv_blocks
        self.max_num_seqs = max_num_seqs
        self.max_seq_len = max_seq_len
        self.max_prefill_tokens = max_prefill_tokens
        self.step_token_budget = max(max_prefill_tokens, max_num_seqs)
        self.token_limit = min(max_seq_len, num_kv_blocks * block_size)
        self.waiting: list[Sequence] = []     # sorted by arrival_index
        self.running: list[Sequence] = []
        self._by_id: dict[int, Sequence] = {}
        self._released: list[int] = []
        self._arrivals = 0
        self.num_preemptions = 0

    # --- queries ---------------------------------------------------------------------------

    @property
    def has_work(self) -> bool:
        return bool(self.waiting or self.running)

    @property
    def kv_utilization(self) -> float:
        return 1.0 - self.pool.num_free / self.num_kv_blocks

    def blocks_for(self, num_tokens: int) -> int:
        return -(-num_tokens // self.block_size)

    def take_released(self) -> list[int]:
        """Sequences whose executor state must be forgotten (finished or preempted).

        Call it after `schedule` and before executing the plan (preemption happens in
        `schedule`), and after `commit`/`abort`."""
        released, self._released = self._released, []
        return released

    # --- requests in and out ---------------------------------------------------------------

    def add(self, seq_id: int, request: SeqRequest, now: float) -> None:
        """Queue a request. ValueError when it can never fit (prompt at the context limit)."""
        if seq_id in self._by_id:
            raise ValueError(f"sequence {seq_id} already scheduled")
        if not request.prompt_ids:
            raise ValueError("empty prompt")
        if len(request.prompt_ids) >= self.token_limit:
            raise ValueError(f"prompt of {len(request.prompt_ids)} tokens leaves no room to "
                             f"generate within {self.token_limit} tokens")
        if request.max_tokens <= 0:
            raise ValueError("max_tokens must be positive")
        seq = Sequence(seq_id, request, self._arrivals, self.token_limit, last_emit_time=now)
        if request.thinking is not None:
            seq.thinking_inside = request.thinking.starts_inside
        self._arrivals += 1
        self._by_id[seq_id] = seq
        self.waiting.append(seq)

    def abort(self, seq_id: int, reason: str = FinishReason.ABORT) -> SeqOutput | None:
        """Stop a sequence now and free its blocks; None when it is already gone."""
        seq = self._by_id.get(seq_id)
        if seq is None:
            return None
        return self._finish(seq, reason, ())

    # --- the step --------------------------------------------------------------------------

    def schedule(self, now: float) -> StepPlan:
        finished = [self._finish(s, FinishReason.TIMEOUT, ())
                    for s in [*self.running, *self.waiting]
                    if s.request.deadline is not None and s.request.deadline <= now]
        plan = StepPlan([], [], finished)
        decodes = sum(1 for s in self.running if s.num_tokens - s.num_computed == 1)
        budget = self.step_token_budget - decodes   # what prefill chunks may use
        preempted_before = self.num_preemptions
        queue = self.policy.order(self.running, now)
        while queue:
            seq = queue.pop(0)
            need = seq.num_tokens - seq.num_computed
            chunk = need if need == 1 else min(need, budget)
            if chunk <= 0:
                continue
            if not self._reserve(seq, chunk, queue):
                continue  # seq itself was preempted
            if need > 1:
                budget -= chunk
            self._add_step(plan, seq, chunk)
        # admit only when nothing was preempted for space in this step: re-admitting a
        # victim at once would thrash
        while (self.waiting and len(self.running) < self.max_num_seqs and budget > 0
               and self.num_preemptions == preempted_before):
            seq = self.waiting[0]
            chunk = min(seq.num_tokens - seq.num_computed, budget)
            needed = self.blocks_for(chunk) - len(seq.blocks)
            if not self.pool.can_allocate(needed):
                break
            seq.blocks.extend(self.pool.allocate(needed))
            self.waiting.pop(0)
            self.running.append(seq)
            budget -= chunk
            self._add_step(plan, seq, chunk)
        return plan

    def commit(self, plan: StepPlan, sampled: Seq[int | None], now: float) -> list[SeqOutput]:
        """Apply the executor's sampled tokens; return one output per sequence that got one."""
        outputs: list[SeqOutput] = []
        for seq, step, token in zip(plan.seqs, plan.steps, sampled, strict=True):
            if seq.seq_id not in self._by_id:
                continue  # aborted while the step ran
            seq.num_computed = step.start_pos + len(step.token_ids)
            if token is None:
                continue
            token = self._apply_thinking_budget(seq, token)
            seq.output_ids.append(token)
            seq.last_emit_time = now
            reason = None
            if token in seq.request.stop_token_ids:
                reason = FinishReason.STOP
            elif (len(seq.output_ids) >= seq.request.max_tokens
                  or seq.num_tokens >= seq.token_limit):
                reason = FinishReason.LENGTH
            if reason is not None:
                outputs.append(self._finish(seq, reason, (token,)))
            else:
                outputs.append(self._output(seq, (token,), None))
        return outputs

    def fail_running(self) -> list[SeqOutput]:
        """The executor raised: end every running sequence with an error."""
        return [self._finish(s, FinishReason.ERROR, ()) for s in list(self.running)]

    def fail_all(self) -> list[SeqOutput]:
        """Last resort of the engine loop: end every sequence, running or waiting."""
        return [self._finish(s, FinishReason.ERROR, ()) for s in [*self.running, *self.waiting]]

    # --- internals -------------------------------------------------------------------------

    def _reserve(self, seq: Sequence, chunk: int, queue: list[Sequence]) -> bool:
        """Give `seq` blocks for `chunk` more tokens, preempting the least urgent running
        sequences (never one already in this step); False when `seq` itself had to go."""
        needed = self.blocks_for(seq.num_computed + chunk) - len(seq.blocks)
        while needed > 0 and not self.pool.can_allocate(needed):
            victim = queue.pop() if queue else seq
            self._preempt(victim)
            if victim is seq:
                return False
        if needed > 0:
            seq.blocks.extend(self.pool.allocate(needed))
        return True

    def _preempt(self, seq: Sequence) -> None:
        self.running.remove(seq)
        self.pool.free(seq.blocks)
        seq.blocks = []
        seq.num_computed = 0
        seq.num_preemptions += 1
        self.num_preemptions += 1
        self._released.append(seq.seq_id)
        keys = [s.arrival_index for s in self.waiting]
        self.waiting.insert(bisect.bisect(keys, seq.arrival_index), seq)

    def _add_step(self, plan: StepPlan, seq: Sequence, chunk: int) -> None:
        start = seq.num_computed
        plan.seqs.append(seq)
        plan.steps.append(SeqStep(
            seq_id=seq.seq_id,
            token_ids=seq.token_at(start, start + chunk),
            start_pos=start,
            block_table=seq.blocks,   # the live list: read during execute, never copied
            sampling=seq.request.sampling,
            sample=start + chunk == seq.num_tokens,
            prompt_ids=seq.request.prompt_ids if start == 0 else None,
        ))

    def _apply_thinking_budget(self, seq: Sequence, token: int) -> int:
        budget = seq.request.thinking
        if budget is None:
            return token
        if seq.forced:
            token = seq.forced.pop(0)
        if token == budget.open_id:
            seq.thinking_inside, seq.thinking_tokens = True, 0
        elif budget.close_ids and token == budget.close_ids[0]:
            seq.thinking_inside = False
        elif seq.thinking_inside:
            seq.thinking_tokens += 1
            if seq.thinking_tokens >= budget.budget and not seq.forced:
                seq.forced = list(budget.close_ids)
        return token

    def _finish(self, seq: Sequence, reason: str, new: tuple[int, ...]) -> SeqOutput:
        if seq in self.running:
            self.running.remove(seq)
            self._released.append(seq.seq_id)
        elif seq in self.waiting:
            self.waiting.remove(seq)  # its executor state went at preemption, if it had any
        self.pool.free(seq.blocks)
        seq.blocks = []
        del self._by_id[seq.seq_id]
        return self._output(seq, new, reason)

    @staticmethod
    def _output(seq: Sequence, new: tuple[int, ...], reason: str | None) -> SeqOutput:
        return SeqOutput(seq.seq_id, new, reason, len(seq.request.prompt_ids), len(seq.output_ids))
