"""The continuous-batching scheduler: pure logic over ids, counts and KV block numbers.

Every step it decides which sequences advance by how many tokens, in the style of vLLM v1:
there are no separate prefill and decode phases, each sequence's `num_computed` catches up
to its length. One token budget bounds a step, max(max_prefill_tokens, max_num_seqs), the
same bound the model runner sizes its step buffers for. Decode tokens are reserved first so
a long prompt never stalls running streams; prefill chunks of running sequences (in policy
order) and then of newly admitted ones share the rest, while the batch and the KV pool
allow. When a running sequence cannot get a block, the least urgent running sequence is
preempted: its blocks are freed and it waits at the head of the queue to be recomputed from
prompt + generated tokens, with its sampling state intact (see `sequence`). A preempted
request is therefore resumed, never dropped.

No I/O and no device: `EngineCore` feeds `plan.chunks` to a StepExecutor and hands the
sampled tokens back to `commit`.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

from ..model.batch import SeqChunk
from .block_manager import BlockManager
from .grammar_state import GrammarState
from .request import EngineOutput, EngineRequest, FinishReason
from .scheduling_policy import SchedulingPolicy
from .sequence import SamplingState, Sequence, ThinkingState


@dataclass(slots=True)
class StepPlan:
    """One step: the chunks to execute (`seqs[i]` owns `chunks[i]`), and the sequences that
    ended while scheduling (timeouts)."""

    seqs: list[Sequence]
    chunks: list[SeqChunk]
    finished: list[EngineOutput]

    @property
    def is_empty(self) -> bool:
        return not self.chunks


class Scheduler:
    def __init__(self, blocks: BlockManager, policy: SchedulingPolicy, *, max_num_seqs: int,
                 max_seq_len: int, max_prefill_tokens: int) -> None:
        if min(max_num_seqs, max_seq_len, max_prefill_tokens) <= 0:
            raise ValueError("scheduler limits must be positive")
        self.blocks = blocks
        self.policy = policy
        self.max_num_seqs = max_num_seqs
        self.max_seq_len = max_seq_len
        self.max_prefill_tokens = max_prefill_tokens
        self.step_token_budget = max(max_prefill_tokens, max_num_seqs)
        self.token_limit = min(max_seq_len, blocks.num_blocks * blocks.block_size)
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
        return self.blocks.utilization

    def take_released(self) -> list[int]:
        """Sequences whose executor state must be forgotten (finished or preempted).

        Call it after `schedule` and before executing the plan (preemption happens in
        `schedule`), and after `commit`/`abort`."""
        released, self._released = self._released, []
        return released

    # --- requests in and out ---------------------------------------------------------------

    def check(self, request: EngineRequest) -> None:
        """ValueError when `request` can never run (empty, or no room to generate)."""
        if not request.prompt_ids:
            raise ValueError("empty prompt")
        if len(request.prompt_ids) >= self.token_limit:
            raise ValueError(f"prompt of {len(request.prompt_ids)} tokens leaves no room to "
                             f"generate within {self.token_limit} tokens")
        if request.max_tokens <= 0:
            raise ValueError("max_tokens must be positive")

    def add(self, seq_id: int, request: EngineRequest, now: float) -> None:
        """Queue a request (after `check`); ValueError for a duplicate id or a bad request."""
        if seq_id in self._by_id:
            raise ValueError(f"sequence {seq_id} already scheduled")
        self.check(request)
        thinking = request.thinking
        state = SamplingState(request.sampling, thinking=None if thinking is None else
                              ThinkingState(thinking, inside=thinking.starts_inside),
                              grammar=None if request.grammar is None else
                              GrammarState(request.grammar))
        seq = Sequence(seq_id, request, self._arrivals, self.token_limit, state,
                       last_emit_time=now)
        self._arrivals += 1
        self._by_id[seq_id] = seq
        self.waiting.append(seq)

    def abort(self, seq_id: int, reason: str = FinishReason.ABORT) -> EngineOutput | None:
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
            self._add_chunk(plan, seq, chunk)
        # admit only when nothing was preempted for space in this step: re-admitting a
        # victim at once would thrash
        while (self.waiting and len(self.running) < self.max_num_seqs and budget > 0
               and self.num_preemptions == preempted_before):
            seq = self.waiting[0]
            chunk = min(seq.num_tokens - seq.num_computed, budget)
            if not self.blocks.can_reserve(seq, seq.num_computed + chunk):
                break
            self.blocks.reserve(seq, seq.num_computed + chunk)
            self.waiting.pop(0)
            self.running.append(seq)
            budget -= chunk
            self._add_chunk(plan, seq, chunk)
        return plan

    def commit(self, plan: StepPlan, sampled: list[int | None],
               now: float) -> list[EngineOutput]:
        """Apply the executor's sampled tokens; return one output per sequence that got a
        token. A chunk that completes its sequence's known tokens yields the next token:
        the sampled one, or the one the thinking budget forces."""
        outputs: list[EngineOutput] = []
        for seq, chunk, token in zip(plan.seqs, plan.chunks, sampled, strict=True):
            if seq.seq_id not in self._by_id:
                continue  # aborted while the step ran
            seq.num_computed = chunk.start_pos + len(chunk.token_ids)
            if seq.num_computed < seq.num_tokens:
                continue  # a prefill chunk that is not the last
            if chunk.sample:
                if token is None:
                    raise RuntimeError(f"sequence {seq.seq_id}: the executor returned no "
                                       "token for a chunk that asked to sample")
                seq.sampling.record(token, drawn=True)
            else:
                token = seq.sampling.take_forced()
                seq.sampling.record(token, drawn=False)
            outputs.append(self._append(seq, token, now))
        return outputs

    def fail_running(self) -> list[EngineOutput]:
        """The executor raised: end every running sequence with an error."""
        return [self._finish(s, FinishReason.ERROR, ()) for s in list(self.running)]

    def fail_all(self) -> list[EngineOutput]:
        """Last resort of the engine loop: end every sequence, running or waiting."""
        return [self._finish(s, FinishReason.ERROR, ()) for s in [*self.running, *self.waiting]]

    # --- internals -------------------------------------------------------------------------

    def _reserve(self, seq: Sequence, chunk: int, queue: list[Sequence]) -> bool:
        """Give `seq` blocks for `chunk` more tokens, preempting the least urgent running
        sequences (never one already in this step); False when `seq` itself had to go."""
        tokens = seq.num_computed + chunk
        while not self.blocks.can_reserve(seq, tokens):
            victim = queue.pop() if queue else seq
            self._preempt(victim)
            if victim is seq:
                return False
        self.blocks.reserve(seq, tokens)
        return True

    def _preempt(self, seq: Sequence) -> None:
        """Free the sequence's device memory; its request state stays on `seq`."""
        self.running.remove(seq)
        self.blocks.release(seq)
        seq.num_computed = 0
        seq.num_preemptions += 1
        seq.needs_history = True
        self.num_preemptions += 1
        self._released.append(seq.seq_id)
        keys = [s.arrival_index for s in self.waiting]
        self.waiting.insert(bisect.bisect(keys, seq.arrival_index), seq)

    def _add_chunk(self, plan: StepPlan, seq: Sequence, chunk: int) -> None:
        start = seq.num_computed
        completes = start + chunk == seq.num_tokens
        grammar = seq.sampling.grammar if completes else None
        plan.seqs.append(seq)
        plan.chunks.append(SeqChunk(
            seq_id=seq.seq_id,
            token_ids=seq.token_slice(start, start + chunk),
            start_pos=start,
            block_table=seq.block_table,   # the live list: read during execute, never copied
            sampling=seq.sampling.params,
            sample=completes and not seq.sampling.forced_next,
            token_mask=grammar.fill_mask if grammar is not None and grammar.constrains_next
            else None,
            rng_position=len(seq.output_ids),
            history=seq.penalty_history() if seq.needs_history else None,
        ))
        seq.needs_history = False

    def _append(self, seq: Sequence, token: int, now: float) -> EngineOutput:
        seq.output_ids.append(token)
        seq.last_emit_time = now
        reason = None
        grammar = seq.sampling.grammar
        if grammar is not None and grammar.error is not None:
            # the token was drawn without a valid mask: drop it
            seq.output_ids.pop()
            return self._finish(seq, FinishReason.ERROR, (), grammar.error)
        if token in seq.request.stop_token_ids or (grammar is not None
                                                    and grammar.is_terminated):
            reason = FinishReason.STOP
        elif (len(seq.output_ids) >= seq.request.max_tokens
              or seq.num_tokens >= seq.token_limit):
            reason = FinishReason.LENGTH
        if reason is not None:
            return self._finish(seq, reason, (token,))
        return self._output(seq, (token,), None)

    def _finish(self, seq: Sequence, reason: str, new: tuple[int, ...],
                error: str | None = None) -> EngineOutput:
        if seq in self.running:
            self.running.remove(seq)
            self._released.append(seq.seq_id)
        elif seq in self.waiting:
            self.waiting.remove(seq)  # its executor state went at preemption, if it had any
        self.blocks.release(seq)
        del self._by_id[seq.seq_id]
        return self._output(seq, new, reason, error)

    @staticmethod
    def _output(seq: Sequence, new: tuple[int, ...], reason: str | None,
                error: str | None = None) -> EngineOutput:
        return EngineOutput(seq.seq_id, new, reason, seq.num_prompt_tokens, len(seq.output_ids),
                            error)
