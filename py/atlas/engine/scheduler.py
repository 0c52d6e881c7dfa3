"""The continuous-batching scheduler: pure logic over ids, counts and KV block numbers.

Every step it decides which sequences advance by how many tokens, in the style of vLLM v1:
there are no separate prefill and decode phases, each sequence's `num_computed` catches up
to its length. A token budget bounds a step. While no sequence decodes it is
max(max_prefill_tokens, max_num_seqs), the bound the model runner sizes its step buffers
for: nobody waits on the step for a token, so large prompt chunks cut time to first token.
While any sequence decodes it is the mixed-step budget (`max_mixed_step_tokens`, at most
the former, at least max_num_seqs so prompts always advance): every decoding stream waits
for the whole step, so its prompt work bounds their inter-token latency (see
DEFAULT_MIXED_STEP_TOKENS). Decode tokens are reserved first so a long prompt never stalls
running streams; prefill chunks of running sequences (in policy order) and then of newly
admitted ones share the rest, while the batch and the KV pool allow; the plan lists the
one-token chunks first (the executor attends to them with the decode kernel). When a running
sequence cannot get a block, the least urgent running sequence is preempted: its blocks
are freed and it waits at the head of the queue to be recomputed from prompt + generated
tokens, with its sampling state intact (see `sequence`). A preempted request is therefore
resumed, never dropped. Admission starts a sequence after the part of its tokens the prefix
cache holds (`BlockManager.admit`), and every committed chunk offers the blocks it filled to
that cache, so a preempted sequence usually resumes from its own cached blocks instead of
recomputing them.

The executor computes logits for a fixed number of rows a step (`max_logit_rows`): one per
sequence, K + 1 per verifying one. Decode rows are reserved first; drafts, the sampled rows
of prompts' last chunks, and the rows that score a prompt for its prompt logprobs take the
rest (a scoring chunk is cut to fit: `prompt_logprobs.fit_logit_rows`). Without prompt
logprobs the rows never bind.

Planning a step also advances its sequences (`num_computed`, and one pending token for
each chunk that ends its sequence's known tokens), so the next step can be planned before
this one's tokens are back: that is how `EngineCore` keeps the device a step ahead of the
host. `commit` then resolves the pending tokens. A sequence whose next token needs the last
one on the host (a grammar mask, bad words, a thinking budget, speculative drafts) makes the
engine step synchronously (`needs_sync`).

No I/O and no device: `EngineCore` feeds `plan.chunks` to a StepExecutor and hands the
sampled tokens back to `commit`.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

from ..model.batch import (MAX_TOP_LOGPROBS, SeqChunk, StepResult, TokenLogprobs,
                           WithEmbedding, WithPromptLogprobs, accept)
from .block_manager import BlockManager
from .grammar_state import GrammarState
from .prompt_logprobs import fit_logit_rows, logit_rows, plan_scoring, still_scoring
from .request import EngineOutput, EngineRequest, FinishReason
from .scheduling_policy import SchedulingPolicy
from .sequence import SamplingState, Sequence, ThinkingState
from .speculative import Speculator
from .token_masks import bad_word_bans, restricting


#: Tokens a step may hold while sequences decode (the server's --max-mixed-step-tokens).
#: A mixed step's time is about its prompt tokens at the prefill rate plus its decode rows'
#: own work, and every decoding stream waits for it. Qwen3-8B bf16 on an H200 (2026-12-01,
#: 64 streams of 1,024 + 1,024 tokens): prefill ~35k tok/s (29 us a token), and 2,048-token
#: steps gave an inter-token p99 of 69.4 ms, so ~59 ms of prompt + ~10 ms for up to 64
#: decode rows (then on the prefill attention kernel, now on the decode one: less). 1,024
#: tokens: ~29 + 10 = ~39 ms at most, under the 40 ms p99 target (tools/throughput_model.py,
#: calibrated on that run, puts the p99 at ~35 ms at unchanged tok/s), and a multiple
#: of the prefill GEMM's 128-row tile that still fills the device (Qwen3-8B's o_proj / down:
#: 8 x 16 = 128 tiles of 128 x 256 on 132 SMs, qkv 192, gate_up 768; at 768 tokens o_proj
#: and down would idle a quarter of the SMs), so chunking the prompts costs little throughput.
DEFAULT_MIXED_STEP_TOKENS = 1024


@dataclass(slots=True)
class StepPlan:
    """One step: the chunks to execute (`seqs[i]` owns `chunks[i]`), whether each ends its
    sequence's tokens (so yields the next one: sampled or forced), and the sequences that
    ended while scheduling (timeouts)."""

    seqs: list[Sequence]
    chunks: list[SeqChunk]
    finished: list[EngineOutput]
    emits: list[bool]

    @property
    def is_empty(self) -> bool:
        return not self.chunks


class Scheduler:
    def __init__(self, blocks: BlockManager, policy: SchedulingPolicy, *, max_num_seqs: int,
                 max_seq_len: int, max_prefill_tokens: int,
                 max_mixed_step_tokens: int | None = None,
                 speculator: Speculator | None = None, verify_apart: bool = False,
                 max_logit_rows: int | None = None) -> None:
        """`max_mixed_step_tokens`: the step budget while sequences decode (None: the same
        as when none does; see the module doc). `verify_apart`: a step that verifies drafts
        holds no prefill chunk (a hybrid model verifies in decode-shaped steps only, where its
        recurrent state is kept per token: model/runner.py); such a step drafts nothing while
        prefill work waits. `max_logit_rows`: the logits rows a step may fill (None: one per
        sequence and draft, max_num_seqs x (1 + the speculator's drafts))."""
        mixed = max_prefill_tokens if max_mixed_step_tokens is None else max_mixed_step_tokens
        if min(max_num_seqs, max_seq_len, max_prefill_tokens, mixed) <= 0:
            raise ValueError("scheduler limits must be positive")
        self.blocks = blocks
        self.policy = policy
        self.speculator = speculator
        self.verify_apart = verify_apart
        self.max_num_seqs = max_num_seqs
        self.max_seq_len = max_seq_len
        self.max_prefill_tokens = max_prefill_tokens
        self.step_token_budget = max(max_prefill_tokens, max_num_seqs)
        #: the budget of a step with decode tokens: never above the buffers' bound, never
        #: below a decode token per sequence (so a prompt chunk always fits beside them)
        self.mixed_step_budget = max(min(mixed, max_prefill_tokens), max_num_seqs)
        per_seq = 1 + (speculator.num_draft_tokens if speculator is not None else 0)
        self.max_logit_rows = (max_num_seqs * per_seq if max_logit_rows is None
                               else max_logit_rows)
        if self.max_logit_rows < max_num_seqs * per_seq:
            raise ValueError(f"max_logit_rows={self.max_logit_rows} leaves no row for some of "
                             f"{max_num_seqs} sequences x {per_seq} sampled rows")
        self.token_limit = min(max_seq_len, blocks.num_blocks * blocks.block_size)
        self.waiting: list[Sequence] = []     # sorted by policy.waiting_key
        self.running: list[Sequence] = []
        self._by_id: dict[int, Sequence] = {}
        self._released: list[int] = []
        self._arrivals = 0
        self.num_preemptions = 0
        #: sequences whose next token needs their last one on the host (see `needs_sync`)
        self._num_sync_seqs = 0

    # --- queries ---------------------------------------------------------------------------

    @property
    def has_work(self) -> bool:
        return bool(self.waiting or self.running)

    @property
    def needs_sync(self) -> bool:
        """Steps must run one at a time, each committed before the next is planned: a
        sequence has a grammar or multi-token bad words (its mask needs the last tokens) or a
        thinking budget
        (whether the next token is forced depends on it), or drafts are proposed (from the
        tokens so far)."""
        return self._num_sync_seqs > 0 or self.speculator is not None

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
        if request.embed and (request.logprobs is not None or request.prompt_logprobs is not None):
            raise ValueError("an embedding request reports no logprobs")
        if request.priority and not self.policy.uses_priority:
            raise ValueError(f"priority={request.priority} needs the priority scheduling "
                             f"policy (this scheduler's is {self.policy.name})")
        top_n = request.prompt_logprobs
        if top_n is not None and not 0 <= top_n <= MAX_TOP_LOGPROBS:
            raise ValueError(f"prompt_logprobs={top_n} is outside 0..{MAX_TOP_LOGPROBS}")

    def add(self, seq_id: int, request: EngineRequest, now: float) -> None:
        """Queue a request (after `check`); ValueError for a duplicate id or a bad request."""
        if seq_id in self._by_id:
            raise ValueError(f"sequence {seq_id} already scheduled")
        self.check(request)
        thinking = request.thinking
        state = SamplingState(request.sampling, thinking=None if thinking is None else
                              ThinkingState(thinking, inside=thinking.starts_inside),
                              grammar=None if request.grammar is None else
                              GrammarState(request.grammar, min(
                                  request.max_tokens,
                                  self.token_limit - len(request.prompt_ids))))
        seq = Sequence(seq_id, request, self._arrivals, self.token_limit, state,
                       last_emit_time=now)
        self._arrivals += 1
        self._num_sync_seqs += _steps_synchronously(request)
        self._by_id[seq_id] = seq
        self._enqueue(seq)

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
        plan = StepPlan([], [], finished, [])
        decodes = sum(1 for s in self.running if s.num_tokens - s.num_computed == 1)
        # what prefill chunks (and drafts) may use
        budget = (self.mixed_step_budget if decodes else self.step_token_budget) - decodes
        rows = self.max_logit_rows - decodes   # logits rows the same may use
        preempted_before = self.num_preemptions
        k = self.speculator.drafts_per_sequence(decodes) if self.speculator else 0
        if k and self.verify_apart and self._prefill_waits():
            k = 0
        queue = self.policy.order(self.running, now)
        while queue:
            seq = queue.pop(0)
            if seq.num_pending and seq.ends_by_length:
                continue  # its step in flight brings its last token
            need = seq.num_tokens - seq.num_computed
            start = seq.num_computed
            chunk = (need if need == 1 else
                     fit_logit_rows(seq, start, min(need, budget), rows) if budget > 0 else 0)
            if chunk <= 0:
                continue
            if need > 1:
                chunk = self.blocks.cut_chunk(seq, start, chunk)
            drafts = self._drafts(seq, min(budget, rows), k) if need == 1 and k else []
            if drafts and not self.blocks.can_reserve(seq, seq.num_tokens + len(drafts)):
                drafts = []   # never preempt for a guess
            if not self._reserve(seq, chunk + len(drafts), queue):
                continue  # seq itself was preempted
            budget -= len(drafts) + (chunk if need > 1 else 0)
            rows -= len(drafts) + (logit_rows(seq, start, start + chunk) if need > 1 else 0)
            self._add_chunk(plan, seq, chunk, drafts)
        # admit only when nothing was preempted for space in this step: re-admitting a
        # victim at once would thrash
        while (self.waiting and len(self.running) < self.max_num_seqs and budget > 0
               and rows > 0 and self.num_preemptions == preempted_before):
            seq = self.waiting[0]
            scoring = still_scoring(seq)   # then it starts at 0: every row is computed
            chunk = self.blocks.admit(seq, fit_logit_rows(seq, 0, min(budget, seq.num_tokens),
                                                          rows) if scoring else budget,
                                      reuse=not scoring)
            if not chunk:
                break
            self.waiting.pop(0)
            self.running.append(seq)
            budget -= chunk
            rows -= logit_rows(seq, seq.num_computed, seq.num_computed + chunk)
            self._add_chunk(plan, seq, chunk)
        _decodes_first(plan)
        return plan

    def commit(self, plan: StepPlan, sampled: list[StepResult],
               now: float) -> list[EngineOutput]:
        """Apply the executor's sampled tokens; return one output per sequence that got a
        token. A chunk that completes its sequence's known tokens yields the next token:
        the sampled one, or the one the thinking budget forces. The plan's sequences were
        advanced when it was made; this resolves their pending tokens."""
        outputs: list[EngineOutput] = []
        for seq, chunk, emits, token in zip(plan.seqs, plan.chunks, plan.emits, sampled,
                                            strict=True):
            if self._by_id.get(seq.seq_id) is not seq:
                continue  # ended while the step ran (its id may already name a new request)
            if chunk.prompt_logprobs is not None:
                if not isinstance(token, WithPromptLogprobs):
                    raise RuntimeError(f"sequence {seq.seq_id}: the executor returned "
                                       f"{token!r} for a chunk that scored prompt tokens")
                seq.prompt_logprobs += token.prompt
                token = token.result
            if chunk.embed:
                if not isinstance(token, WithEmbedding):
                    raise RuntimeError(f"sequence {seq.seq_id}: the executor returned "
                                       f"{token!r} for a chunk that asked for its embedding")
                seq.embedding, token = token.vector, token.result
            end = chunk.start_pos + len(chunk.token_ids) - chunk.num_draft
            self.blocks.cache_computed(seq, end)
            if not emits:
                continue  # a prefill chunk that is not the last
            seq.num_pending -= 1
            if chunk.num_draft:
                outputs.append(self._commit_verified(seq, chunk, token, now))
                continue
            logprobs = None
            if isinstance(token, TokenLogprobs):
                logprobs, token = token, token.token
            if chunk.sample:
                if not isinstance(token, int):
                    raise RuntimeError(f"sequence {seq.seq_id}: the executor returned "
                                       f"{token!r} for a chunk that asked to sample one token")
                seq.sampling.record(token, drawn=True)
            else:
                token = seq.sampling.take_forced()
                seq.sampling.record(token, drawn=False)
            outputs.append(self._append(seq, [token], now, [logprobs]))
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
        if not self.blocks.blocks_missing(seq, tokens):
            return True  # a decode step inside its last block: the common case
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
        self._enqueue(seq)

    def _enqueue(self, seq: Sequence) -> None:
        """Into the waiting queue, in the policy's order (arrival, or priority then arrival)."""
        key = self.policy.waiting_key
        keys = [key(s) for s in self.waiting]
        self.waiting.insert(bisect.bisect(keys, key(seq)), seq)

    def _prefill_waits(self) -> bool:
        """A running sequence has more than its next token to compute, or a waiting one
        could be admitted (what a step may plan beside its decodes)."""
        return (any(s.num_tokens - s.num_computed > 1 for s in self.running)
                or (bool(self.waiting) and len(self.running) < self.max_num_seqs))

    def _drafts(self, seq: Sequence, budget: int, k: int) -> list[int]:
        """Up to `k` draft tokens for a decoding sequence (the speculator's choice for this
        step's batch), within the step budget and such that every token the verification
        may emit fits its max_tokens and context."""
        spec = self.speculator
        if (spec is None or not spec.applies_to(seq) or seq.sampling.forced_next
                or seq.sampling.grammar is not None   # drafts would need masks per row
                or _bans_stops(seq) or _restricts(seq.request)
                or seq.request.logprobs is not None):  # and logprobs rows per draft
            return []
        room = min(k, budget,
                   seq.request.max_tokens - len(seq.output_ids) - 1,
                   seq.token_limit - seq.num_tokens - 1)
        return spec.drafter.propose(seq, room)[:room] if room > 0 else []

    def _commit_verified(self, seq: Sequence, chunk: SeqChunk, sampled: StepResult,
                         now: float) -> EngineOutput:
        """Keep the accepted drafts' KV and emit the tokens the verification produced.

        Rollback is `num_computed`: the rejected positions' KV is dead and the next steps
        overwrite it. Their blocks stay in the table (at most ceil(K / block_size) per
        sequence) and are reused as the sequence grows; a table never shrinks while its
        sequence runs, which the runner's block-table upload relies on."""
        assert self.speculator is not None
        if not isinstance(sampled, tuple) or len(sampled) != chunk.num_draft + 1:
            raise RuntimeError(f"sequence {seq.seq_id}: the executor returned {sampled!r} for "
                               f"a verification of {chunk.num_draft} drafts")
        emitted = accept(chunk.token_ids[1:], sampled)
        self.speculator.record(chunk.num_draft, len(emitted) - 1)
        seq.num_computed = chunk.start_pos + len(emitted)
        for token in emitted:
            seq.sampling.record(token, drawn=True)
        return self._append(seq, emitted, now)

    def _add_chunk(self, plan: StepPlan, seq: Sequence, chunk: int,
                   drafts: list[int] | None = None) -> None:
        """Plan `chunk` tokens of `seq` from `num_computed` and advance it past them. The
        one token past what the host knows (the step in flight samples it) is `carried`: the
        executor reads it from the device."""
        start = seq.num_computed
        end = start + chunk
        known = seq.num_known
        carried = end > known
        if carried and (end - known > 1 or drafts):
            raise AssertionError(f"sequence {seq.seq_id}: a chunk may carry only its last "
                                 "token from the step before, and never drafts")
        completes = end == seq.num_tokens
        grammar = seq.sampling.grammar if completes else None
        token_mask = (grammar.fill_mask if grammar is not None and grammar.constrains_next
                      else None)
        if completes and (_bans_stops(seq) or _restricts(seq.request)):
            banned = seq.request.banned_tokens | bad_word_bans(seq.request.bad_words,
                                                               seq.output_ids)
            if _bans_stops(seq):
                banned = banned | seq.request.stop_token_ids
            token_mask = restricting(token_mask, banned, seq.request.allowed_tokens)
        restore, seq.state_restore = seq.state_restore, None
        plan.seqs.append(seq)
        plan.emits.append(completes)
        plan.chunks.append(SeqChunk(
            seq_id=seq.seq_id,
            token_ids=(seq.token_slice(start, end - 1) + [0] if carried
                       else seq.token_slice(start, end)) + (drafts or []),
            start_pos=start,
            block_table=seq.block_table,   # the live list: read during execute, never copied
            sampling=seq.sampling.params,
            sample=completes and not seq.sampling.forced_next,
            token_mask=token_mask,
            rng_position=len(seq.output_ids) + seq.num_pending,
            history=seq.penalty_history() if seq.needs_history else None,
            num_draft=len(drafts or ()),
            state_restore=restore,
            state_save=None if drafts else self.blocks.claim_snapshot(seq, start, end),
            logprobs=seq.request.logprobs if seq.request.logprobs is not None and completes
            else -1,
            carried=carried,
            prompt_logprobs=plan_scoring(seq, start, end),
            embed=completes and seq.request.embed and not seq.output_ids,
        ))
        seq.needs_history = False
        seq.num_computed = end
        seq.num_pending += completes

    def _append(self, seq: Sequence, tokens: list[int], now: float,
                logprobs: list[TokenLogprobs | None] | None = None) -> EngineOutput:
        """Append generated tokens up to the first that ends the sequence (`logprobs`: the
        executor's per token, reported when the request asked)."""
        lps = tuple(logprobs or ()) if seq.request.logprobs is not None else ()
        seq.last_emit_time = now
        grammar = seq.sampling.grammar
        if grammar is not None and grammar.error is not None:
            # drawn without a valid mask (a constrained sequence never drafts): dropped
            return self._finish(seq, FinishReason.ERROR, (), grammar.error)
        for i, token in enumerate(tokens):
            seq.output_ids.append(token)
            reason = None
            if token in seq.request.stop_token_ids or (grammar is not None
                                                        and grammar.is_terminated):
                reason = FinishReason.STOP
            elif (len(seq.output_ids) >= seq.request.max_tokens
                  or seq.num_tokens >= seq.token_limit):
                reason = FinishReason.LENGTH
            if reason is not None:
                return self._finish(seq, reason, tuple(tokens[:i + 1]), logprobs=lps[:i + 1])
        return self._output(seq, tuple(tokens), None, logprobs=lps)

    def _finish(self, seq: Sequence, reason: str, new: tuple[int, ...],
                error: str | None = None, logprobs: tuple[TokenLogprobs | None, ...] = ()
                ) -> EngineOutput:
        if seq in self.running:
            self.running.remove(seq)
            self._released.append(seq.seq_id)
        elif seq in self.waiting:
            self.waiting.remove(seq)  # its executor state went at preemption, if it had any
        if reason != FinishReason.ERROR:
            # blocks a step still in flight fills are offered too: whatever reads them later
            # runs after that step on the same stream (an error's KV is not trusted)
            self.blocks.cache_computed(seq, seq.num_computed)
        self.blocks.release(seq)
        del self._by_id[seq.seq_id]
        self._num_sync_seqs -= _steps_synchronously(seq.request)
        return self._output(seq, new, reason, error, logprobs)

    @staticmethod
    def _output(seq: Sequence, new: tuple[int, ...], reason: str | None,
                error: str | None = None, logprobs: tuple[TokenLogprobs | None, ...] = ()
                ) -> EngineOutput:
        """The output of `seq`'s step; its first tokens carry the prompt logprobs (every
        prompt chunk was committed before the one that yields them) and the embedding."""
        first = bool(new) and len(seq.output_ids) == len(new)
        prompt = (tuple(seq.prompt_logprobs) if first and seq.request.prompt_logprobs is not None
                  else None)
        return EngineOutput(seq.seq_id, new, reason, seq.num_prompt_tokens, len(seq.output_ids),
                            seq.num_cached_tokens, error, logprobs, prompt,
                            seq.embedding if first else None)


def _decodes_first(plan: StepPlan) -> None:
    """Put the one-token chunks first, each group in planning order: the executor attends
    to a prefill-shaped step's leading one-token rows with the decode kernel
    (`model.step_inputs.leading_decode_rows`), not the prefill kernel's query tiles."""
    order = sorted(range(len(plan.chunks)), key=lambda i: len(plan.chunks[i].token_ids) != 1)
    if order != list(range(len(order))):
        plan.seqs = [plan.seqs[i] for i in order]
        plan.chunks = [plan.chunks[i] for i in order]
        plan.emits = [plan.emits[i] for i in order]


def _bans_stops(seq: Sequence) -> bool:
    """Whether the token `seq` draws next comes before its request's `min_tokens` (its
    output index: the known outputs plus the one a step in flight samples)."""
    return (len(seq.output_ids) + seq.num_pending < seq.request.min_tokens
            and bool(seq.request.stop_token_ids))


def _restricts(request: EngineRequest) -> bool:
    """Whether every draw of the request is masked (its logit_bias, allowed tokens or bad
    words)."""
    return (bool(request.banned_tokens) or request.allowed_tokens is not None
            or bool(request.bad_words))


def _steps_synchronously(request: EngineRequest) -> bool:
    """The request's next token depends on its last one on the host (see `needs_sync`)."""
    return request.grammar is not None or request.thinking is not None or bool(request.bad_words)
