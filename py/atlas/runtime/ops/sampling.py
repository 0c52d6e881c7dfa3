"""Launch builders for the sampler kernels (sampler.cu); `runtime.sampler.Sampler` drives them.

row_params is SAMPLE_ROW [rows]; counts i32 and prompt_mask u8 are [max_slots, vocab];
bias_ids i32 and bias_vals f32 are [max_slots, max_bias].
"""

from __future__ import annotations

from dataclasses import dataclass

from ..gpu import DevicePtr, Stream
from ..kernel_abi import (SAMPLER_LOGPROBS, SAMPLER_PENALTIES, SAMPLER_SAMPLE,
                          SAMPLER_TOKEN_BITMASK)
from . import KernelCache
from ._preconditions import require_aligned

#: sampler.cu: apply_penalties_f32 covers 1024-token spans with 256-thread blocks
PENALTY_TOKENS_PER_BLOCK = 1024
PENALTY_THREADS = 256
#: apply_penalties_f32 blocks a launch aims at (~8 a SM of an H200): a row keeps one block
#: per span while rows x spans stays under it, and its blocks stride over the spans beyond
PENALTY_TARGET_BLOCKS = 1024
#: sampler.cu kChunk / kThreads: sample_f32 splits a row into 4096-logit chunks, one
#: 512-thread block each; the last block of a row to finish completes it
SAMPLE_CHUNK = 4096
SAMPLE_THREADS = 512
#: sampler.cu ChunkScratch: one chunk's argmax, cutoff, count and up to 64 candidates
SAMPLE_CHUNK_BYTES = 528
#: sampler.cu kMaxChunks
SAMPLE_MAX_VOCAB = 128 * SAMPLE_CHUNK
#: sampler.cu apply_token_bitmask_f32: one thread per logit a pass, over the kBitmaskSpan
#: tokens of its block
BITMASK_THREADS = 256
BITMASK_SPAN = 8192
#: sampler.cu logprobs_f32: one 512-thread block per row
LOGPROB_THREADS = 512


def _check(kernel: str, vocab: int, **ptrs: DevicePtr) -> None:
    if vocab < 1:
        raise ValueError(f"{kernel}: vocab={vocab} must be positive")
    for name, ptr in ptrs.items():
        require_aligned(kernel, name, ptr, 4)


def penalty_blocks(rows: int, vocab: int) -> int:
    """Blocks per row of apply_penalties_f32: one per 1024-token span up to
    PENALTY_TARGET_BLOCKS / rows (at least one). Every step launches it, and rows without
    penalties exit at once, so at a large batch the grid's size is its whole cost (one block
    per span: 9,536 blocks, 12.2 us at 64 rows of Qwen3's vocabulary); a row with penalties
    still spreads over ~8 blocks a SM."""
    spans = -(-vocab // PENALTY_TOKENS_PER_BLOCK)
    return max(1, min(spans, -(-PENALTY_TARGET_BLOCKS // max(rows, 1))))


def apply_penalties(kc: KernelCache, stream: Stream, logits: DevicePtr, row_params: DevicePtr,
                    counts: DevicePtr, prompt_mask: DevicePtr, bias_ids: DevicePtr,
                    bias_vals: DevicePtr, rows: int, vocab: int, max_bias: int) -> None:
    """Repetition, presence and frequency penalties, then each row's logit biases (the
    first row_params[r].num_bias entries of its slot's bias row, `max_bias` entries a row),
    on f32 logits [rows, vocab], in place."""
    _check("apply_penalties", vocab, logits=logits, row_params=row_params, counts=counts,
           bias_ids=bias_ids, bias_vals=bias_vals)
    if rows > 65535:
        raise ValueError(f"apply_penalties: rows={rows} exceeds the grid's 65535 rows")
    if max_bias < 1:
        raise ValueError(f"apply_penalties: max_bias={max_bias} must be positive")
    if rows:
        grid = (penalty_blocks(rows, vocab), rows, 1)
        kc.get(SAMPLER_PENALTIES)(stream, grid, PENALTY_THREADS, 0, logits, row_params, counts,
                                  prompt_mask, bias_ids, bias_vals, rows, vocab, max_bias)


def sample_chunks(vocab: int) -> int:
    """Blocks per row of sample_f32."""
    return -(-vocab // SAMPLE_CHUNK)


def sample_scratch_bytes(rows: int, vocab: int) -> tuple[int, int]:
    """(scratch, counters) bytes for sample launches of up to `rows` rows. The counters must
    start zeroed (each launch leaves them zero); the scratch needs no initialization."""
    return rows * sample_chunks(vocab) * SAMPLE_CHUNK_BYTES, 4 * rows


@dataclass(frozen=True, slots=True)
class PublishIds:
    """Where a captured step's sampler also writes its ids for the host: host_ids[parity[0]
    * pitch + r] (host_ids: mapped page-locked i32 [2, pitch]; parity: a device i32 word,
    0 or 1, the buffer the host reads this step)."""

    host_ids: DevicePtr
    parity: DevicePtr
    pitch: int


@dataclass(frozen=True, slots=True)
class LogprobRows:
    """Where `sample` also reports each row's logprobs, as `logprobs` would for the sampled
    tokens: top_n i32 [rows] (< 0: none for the row), out_logprob f32 [rows], top_ids i32 /
    top_logprobs f32 [rows, max_top]."""

    top_n: DevicePtr
    out_logprob: DevicePtr
    top_ids: DevicePtr
    top_logprobs: DevicePtr
    max_top: int


def sample(kc: KernelCache, stream: Stream, logits: DevicePtr, row_params: DevicePtr,
           out: DevicePtr, scratch: DevicePtr, counters: DevicePtr, rows: int,
           vocab: int, counts: DevicePtr = 0, publish: PublishIds | None = None,
           logprobs: LogprobRows | None = None) -> None:
    """out[r] (i32) = the token drawn from logits row r under row_params[r]; with `counts`
    (i32 [slots, vocab]), counts[slot_r, out[r]] += 1 for every row with a penalty slot (the
    next step's penalties read them); with `publish`, the ids copied to the host's buffer;
    with `logprobs`, the rows' logprobs. All by the row's finishing block: no launch of
    their own (the logprobs launch after the sampler, ~1 us of a decode step's critical
    path, until session 54).

    `scratch` and `counters` are sized by sample_scratch_bytes (at least `rows` rows)."""
    _check("sample", vocab, logits=logits, row_params=row_params, out=out, scratch=scratch,
           counters=counters, counts=counts)
    if publish is not None:
        _check("sample", vocab, host_ids=publish.host_ids, parity=publish.parity)
        if rows > publish.pitch:
            raise ValueError(f"sample: {rows} rows exceed the host buffer's {publish.pitch}")
    if logprobs is not None:
        _check("sample", vocab, top_n=logprobs.top_n, out_logprob=logprobs.out_logprob,
               top_ids=logprobs.top_ids, top_logprobs=logprobs.top_logprobs)
        if logprobs.max_top < 1:
            raise ValueError(f"sample: max_top={logprobs.max_top} must be positive")
    if vocab > SAMPLE_MAX_VOCAB:
        raise ValueError(f"sample: vocab={vocab} exceeds {SAMPLE_MAX_VOCAB}")
    if rows > 65535:
        raise ValueError(f"sample: rows={rows} exceeds the grid's 65535 rows")
    if rows:
        host_ids, parity, pitch = ((publish.host_ids, publish.parity, publish.pitch)
                                   if publish is not None else (0, 0, 0))
        lp = ((logprobs.top_n, logprobs.out_logprob, logprobs.top_ids, logprobs.top_logprobs,
               logprobs.max_top) if logprobs is not None else (0, 0, 0, 0, 0))
        kc.get(SAMPLER_SAMPLE)(stream, (sample_chunks(vocab), rows, 1), SAMPLE_THREADS, 0,
                               logits, row_params, out, scratch, counters, rows, vocab, counts,
                               host_ids, parity, pitch, *lp)


def bitmask_words(vocab: int) -> int:
    """uint32 words per token-mask row (bit t % 32 of word t // 32 is token t)."""
    return -(-vocab // 32)


def apply_token_bitmask(kc: KernelCache, stream: Stream, logits: DevicePtr, bitmask: DevicePtr,
                        mask_rows: DevicePtr, rows: int, vocab: int, words: int) -> None:
    """logits[r, t] = -inf where token t is not allowed by mask row mask_rows[r] (u32 words,
    1 = allowed); rows whose mask_rows entry is negative are untouched."""
    _check("apply_token_bitmask", vocab, logits=logits, bitmask=bitmask, mask_rows=mask_rows)
    if words < 1:
        raise ValueError(f"apply_token_bitmask: words={words} must be positive")
    if rows > 65535:
        raise ValueError(f"apply_token_bitmask: rows={rows} exceeds the grid's 65535 rows")
    if rows:
        grid = (-(-vocab // BITMASK_SPAN), rows, 1)
        kc.get(SAMPLER_TOKEN_BITMASK)(stream, grid, BITMASK_THREADS, 0, logits, bitmask,
                                      mask_rows, rows, vocab, words)


def logprobs(kc: KernelCache, stream: Stream, logits: DevicePtr, tokens: DevicePtr,
             top_n: DevicePtr, out_logprob: DevicePtr, top_ids: DevicePtr,
             top_logprobs: DevicePtr, rows: int, vocab: int, max_top: int) -> None:
    """For rows with top_n[r] >= 0: the log-probability of tokens[r] under logits row r
    and the top_n[r] (at most max_top) most likely tokens with theirs (rows scored outside
    sampling; `sample` reports its sampled rows' itself)."""
    _check("logprobs", vocab, logits=logits, tokens=tokens, top_n=top_n,
           out_logprob=out_logprob, top_ids=top_ids, top_logprobs=top_logprobs)
    if max_top < 1:
        raise ValueError(f"logprobs: max_top={max_top} must be positive")
    if rows:
        kc.get(SAMPLER_LOGPROBS)(stream, rows, LOGPROB_THREADS, 0, logits, tokens, top_n,
                                 out_logprob, top_ids, top_logprobs, rows, vocab, max_top)
