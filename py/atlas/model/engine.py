"""The generation loop for whole requests: chunked prefill, then batched decode.

Used by `atlas generate`, the tests and the benchmarks; the server drives the same
StepExecutor through its own scheduler. Pure logic: it moves token ids and block ids.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Protocol, Sequence

from ..core.sampling import SamplingParams
from .batch import SeqStep, StepExecutor


class BlockPool(Protocol):
    num_free: int

    def allocate(self, n: int) -> list[int]: ...

    def free(self, blocks: Sequence[int]) -> None: ...


@dataclass
class GenerationRequest:
    prompt_ids: list[int]
    sampling: SamplingParams
    max_tokens: int
    stop_token_ids: frozenset[int] = frozenset()


@dataclass
class GenerationResult:
    token_ids: list[int]
    finish_reason: str  # "stop" | "length"


@dataclass
class _Seq:
    seq_id: int
    req: GenerationRequest
    blocks: list[int] = field(default_factory=list)
    prefilled: int = 0
    out: list[int] = field(default_factory=list)
    finish: str | None = None

    @property
    def length(self) -> int:
        return self.prefilled + max(len(self.out) - 1, 0)


StopCheck = Callable[[int, list[int]], bool]


def generate(executor: StepExecutor, pool: BlockPool, requests: Sequence[GenerationRequest],
             max_prefill_tokens: int,
             stop_check: StopCheck | None = None) -> list[GenerationResult]:
    """Run every request to completion; sequences decode together once prefilled.

    `stop_check(i, tokens)` lets a caller with a tokenizer end request i on a stop string.
    """
    for r in requests:
        if not r.prompt_ids:
            raise ValueError("a prompt must contain at least one token")
        if len(r.prompt_ids) + r.max_tokens > executor.max_seq_len:
            raise ValueError(f"prompt ({len(r.prompt_ids)} tokens) + max_tokens "
                             f"({r.max_tokens}) exceeds max_seq_len {executor.max_seq_len}")
    seqs = [_Seq(i, r) for i, r in enumerate(requests)]
    try:
        _prefill_all(executor, pool, seqs, max_prefill_tokens, stop_check)
        active = [s for s in seqs if s.finish is None]
        while active:
            for group in _batches(active, executor.max_batch_size):
                _decode_step(executor, pool, group, stop_check)
            active = [s for s in active if s.finish is None]
    finally:
        for s in seqs:
            pool.free(s.blocks)
            executor.release(s.seq_id)
    return [GenerationResult(s.out, s.finish or "length") for s in seqs]


def _batches(items: list[_Seq], size: int) -> list[list[_Seq]]:
    return [items[i:i + size] for i in range(0, len(items), size)]


def _reserve(pool: BlockPool, seq: _Seq, tokens: int, block_size: int) -> None:
    need = -(-tokens // block_size) - len(seq.blocks)
    if need > 0:
        if pool.num_free < need:
            raise MemoryError(f"KV cache exhausted: sequence {seq.seq_id} needs {need} more "
                              f"blocks, {pool.num_free} free")
        seq.blocks.extend(pool.allocate(need))


def _prefill_all(executor: StepExecutor, pool: BlockPool, seqs: list[_Seq], budget: int,
                 stop_check: StopCheck | None) -> None:
    pending = list(seqs)
    while pending:
        steps: list[SeqStep] = []
        owners: list[_Seq] = []
        left = budget
        for s in pending:
            if left == 0 or len(steps) == executor.max_batch_size:
                break
            remaining = len(s.req.prompt_ids) - s.prefilled
            n = min(remaining, left)
            _reserve(pool, s, s.prefilled + n, executor.block_size)
            steps.append(SeqStep(s.seq_id, s.req.prompt_ids[s.prefilled:s.prefilled + n],
                                 s.prefilled, list(s.blocks), s.req.sampling,
                                 sample=(n == remaining),
                                 prompt_ids=s.req.prompt_ids if s.prefilled == 0 else None))
            owners.append(s)
            left -= n
        results = executor.execute(steps)
        for s, st, tok in zip(owners, steps, results):
            s.prefilled += len(st.token_ids)
            if tok is not None:
                _accept(s, tok, stop_check)
        pending = [s for s in pending if s.prefilled < len(s.req.prompt_ids)]


def _decode_step(executor: StepExecutor, pool: BlockPool, group: list[_Seq],
                 stop_check: StopCheck | None) -> None:
    steps = []
    for s in group:
        pos = s.prefilled + len(s.out) - 1
        _reserve(pool, s, pos + 1, executor.block_size)
        steps.append(SeqStep(s.seq_id, [s.out[-1]], pos, list(s.blocks), s.req.sampling))
    for s, tok in zip(group, executor.execute(steps)):
        _accept(s, tok, stop_check)


def _accept(s: _Seq, tok: int | None, stop_check: StopCheck | None) -> None:
    if tok is None:
        raise RuntimeError(f"sequence {s.seq_id}: the executor returned no token for a "
                           "step that asked to sample")
    s.out.append(tok)
    if tok in s.req.stop_token_ids:
        s.finish = "stop"
    elif stop_check is not None and stop_check(s.seq_id, s.out):
        s.finish = "stop"
    elif len(s.out) >= s.req.max_tokens:
        s.finish = "length"
