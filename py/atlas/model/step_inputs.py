"""Packing one step's host-side inputs into the layout the device buffers expect.

The per-step 4-byte inputs live in one region (ids | positions | slots | cu_q | kv_lens |
sample_rows | state_slots | state_out | sampler row records), so a step costs one
host-to-device copy (the sampler writes its row records into their part: `sample_params`);
block tables are kept by the paged KV cache, which re-uploads only rows that changed. Pure
numpy; no device access.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ..runtime.ops.attention import DECODE_MIN_KEYS_PER_SPLIT
from ..runtime.ops.attention_long import LONG_CONTEXT_KEYS, long_decode_splits
from .batch import SeqChunk


@dataclass(frozen=True, slots=True)
class StepLayout:
    """Element offsets of each input inside the int32 region."""

    max_tokens: int
    max_seqs: int
    max_blocks: int
    #: sampled rows per step beyond one per sequence (speculative verification samples
    #: num_draft + 1 rows of one sequence); at least max_seqs
    max_sample_rows: int = 0
    #: 4-byte words of the sampler's record of one sampled row (kernel_abi.SAMPLE_ROW),
    #: `sample_capacity` of them at `sample_params`; 0: the sampler uploads its own
    record_words: int = 0

    @property
    def sample_capacity(self) -> int:
        return max(self.max_sample_rows, self.max_seqs)

    @property
    def ids(self) -> int:
        return 0

    @property
    def positions(self) -> int:
        return self.max_tokens

    @property
    def slots(self) -> int:
        return 2 * self.max_tokens

    @property
    def cu_q(self) -> int:
        return 3 * self.max_tokens

    @property
    def kv_lens(self) -> int:
        return self.cu_q + self.max_seqs + 1

    @property
    def sample_rows(self) -> int:
        return self.kv_lens + self.max_seqs

    @property
    def state_slots(self) -> int:
        """Recurrent-state slot of each sequence (hybrid models; written by the runner)."""
        return self.sample_rows + self.sample_capacity

    @property
    def state_out(self) -> int:
        """Recurrent-state slot each decode row leaves its state in (hybrid models)."""
        return self.state_slots + self.max_seqs

    @property
    def io_parity(self) -> int:
        """One word: which of the host's two sampled-id buffers a captured step publishes
        into (ops/step_io.py; the runner's launch parity)."""
        return self.state_out + self.max_seqs

    @property
    def io_seq(self) -> int:
        """One word: the step's launch number, which a captured step's staging kernel echoes
        to the host once it has read the inputs (ops/step_io.py)."""
        return self.io_parity + 1

    @property
    def sample_params(self) -> int:
        """The sampler's row records (record_words each), 64-byte aligned like any struct
        array the kernels read."""
        return -(-(self.io_seq + 1) // 16) * 16

    @property
    def total(self) -> int:
        return self.sample_params + self.sample_capacity * self.record_words


class StepError(ValueError):
    """A step asked for more than the runner was sized for, or is inconsistent."""


def leading_decode_rows(chunks: Sequence[SeqChunk]) -> int:
    """How many of a prefill-shaped step's first chunks are one token each (sequences
    decoding beside prompt chunks; the scheduler puts them first): decode attention takes
    them, with their kv_len = position + 1 as `pack_step` packs any chunk's."""
    rows = 0
    for c in chunks:
        if len(c.token_ids) != 1:
            break
        rows += 1
    return rows


def pack_step(buf: np.ndarray, layout: StepLayout, chunks: Sequence[SeqChunk], block_size: int,
              pad_to: int = 0, per_row: bool = False) -> tuple[int, int, int]:
    """Fill `buf` (int32 [layout.total]) for `chunks`; return (n_tokens, n_sample, max_q_len).

    `per_row` packs a decode-shaped step (the captured graphs' form): every token is its own
    attention row, with kv_len = its position + 1, so decode attention lets a verification
    chunk's row i see its sequence's keys up to its own position (the drafts' K/V are
    written before attention reads them). Rows are then the unit of `pad_to` and of the
    per-row inputs (kv_lens, cu_q, block-table rows: see `row_owners`).

    Rows past the chunks' up to `pad_to` are padding for a captured decode graph: token 0 at
    position 0, KV slot -1 (not written), kv_len 1 (their block-table row must list block
    0, which holds finite data), so they compute harmless values that nobody reads.

    Rows that score prompt tokens (`SeqChunk.prompt_logprobs`) follow every sampled row in
    `sample_rows`, in chunk order, so their logits come after the sampler's rows; n_sample
    does not count them.
    """
    lens = [len(c.token_ids) for c in chunks]
    n_real = sum(lens) if per_row else len(chunks)
    if per_row and any(not c.sample or n != c.num_draft + 1 or c.prompt_logprobs is not None
                       for c, n in zip(chunks, lens)):
        raise StepError("a decode-shaped step holds only sampling chunks of one token plus "
                        "their drafts, scoring no prompt token")
    n_seqs = max(n_real, pad_to)
    if n_seqs > layout.max_seqs:
        raise StepError(f"{n_seqs} {'rows' if per_row else 'sequences'} in one step exceeds "
                        f"the runner's {layout.max_seqs}")
    n_tokens = sum(lens) + (n_seqs - n_real)
    if n_tokens > layout.max_tokens:
        raise StepError(f"{n_tokens} tokens in one step exceeds the step budget "
                        f"{layout.max_tokens}")
    # Built as Python lists and stored with one slice assignment per field: a decode step
    # touches a handful of ints per sequence, and per-element numpy stores would dominate.
    ids: list[int] = []
    pos: list[int] = []
    slots: list[int] = []
    cu_q, kv_lens, sample_rows, scored = [0], [], [], []
    for c, n in zip(chunks, lens):
        if n == 0:
            raise StepError(f"sequence {c.seq_id}: a step must feed at least one token")
        end = c.start_pos + n
        table = c.block_table
        if end > len(table) * block_size:
            raise StepError(f"sequence {c.seq_id}: {end} tokens need "
                            f"{-(-end // block_size)} KV blocks, block table has {len(table)}")
        if len(table) > layout.max_blocks:
            raise StepError(f"sequence {c.seq_id}: {len(table)} blocks exceed max "
                            f"{layout.max_blocks} per sequence")
        ids += c.token_ids
        positions = range(c.start_pos, end)
        pos += positions
        if n <= 32:  # decode and short chunks: plain ints
            slots += [table[p // block_size] * block_size + p % block_size for p in positions]
        else:
            p = np.arange(c.start_pos, end)
            slots += (np.asarray(table)[p // block_size] * block_size + p % block_size).tolist()
        if per_row:
            kv_lens += range(c.start_pos + 1, end + 1)
            cu_q += range(len(ids) - n + 1, len(ids) + 1)
        else:
            kv_lens.append(end)
            cu_q.append(len(ids))
        if c.sample:   # the last token's row, and each draft's before it in a verification
            sample_rows += range(len(ids) - 1 - c.num_draft, len(ids))
        if c.prompt_logprobs is not None:
            first = len(ids) - n + c.prompt_logprobs.first
            scored += range(first, first + len(c.prompt_logprobs.targets))
    for _ in range(n_real, n_seqs):  # graph padding rows
        ids.append(0)
        pos.append(0)
        slots.append(-1)
        kv_lens.append(1)
        cu_q.append(len(ids))
        sample_rows.append(len(ids) - 1)
    n_sample = len(sample_rows)
    if n_sample + len(scored) > layout.sample_capacity:
        raise StepError(f"{n_sample} sampled and {len(scored)} prompt-scoring rows in one step "
                        f"exceed {layout.sample_capacity}; size the runner for the draft "
                        "count, and prompt chunks by the logits rows")
    sample_rows += scored
    if per_row:  # a graph's step: one store through the index of its row count
        buf[_row_step_index(layout, n_seqs)] = ids + pos + slots + cu_q + kv_lens + sample_rows
    else:
        for offset, values in ((layout.ids, ids), (layout.positions, pos),
                               (layout.slots, slots), (layout.cu_q, cu_q),
                               (layout.kv_lens, kv_lens), (layout.sample_rows, sample_rows)):
            buf[offset:offset + len(values)] = values
    return n_tokens, n_sample, 1 if per_row else max(lens, default=1)


@functools.lru_cache(maxsize=None)
def _row_step_index(layout: StepLayout, rows: int) -> np.ndarray:
    """Where the fields of a decode-shaped step of `rows` rows (`pack_step`'s per_row form:
    as many tokens, kv_lens and sampled rows, rows + 1 cu_q entries) go in the input region,
    in the order ids, positions, slots, cu_q, kv_lens, sample_rows: the step's inputs are
    stored with one numpy call instead of six (a graph replay's host work is mostly such
    per-call overhead). One index per row count, at most sample_capacity of them."""
    return np.concatenate([np.arange(offset, offset + n) for offset, n in (
        (layout.ids, rows), (layout.positions, rows), (layout.slots, rows),
        (layout.cu_q, rows + 1), (layout.kv_lens, rows), (layout.sample_rows, rows))])


def row_owners(chunks: Sequence[SeqChunk], per_row: bool) -> list[SeqChunk]:
    """The chunk each attention row of a packed step belongs to (one row per chunk, or one
    per token of a decode-shaped step): whose block table and state slot the row uses."""
    if not per_row:
        return list(chunks)
    return [c for c in chunks for _ in c.token_ids]


def decode_buckets(max_batch: int) -> list[int]:
    """Batch sizes that get a captured decode graph: 1, 2, 4, 8, then every 16."""
    sizes = [b for b in (1, 2, 4, 8) if b <= max_batch]
    sizes += list(range(16, max_batch + 1, 16))
    if not sizes or sizes[-1] != max_batch:
        sizes.append(max_batch)
    return sizes


def verification_buckets(max_rows: int, exact_upto: int) -> list[int]:
    """Row counts that get a captured verification graph: every count from 2 up to
    `exact_upto` (so no step in that range is padded past it: the row-invariant range, see
    runner.row_invariant_rows), then decode_buckets' sizes above it."""
    exact = list(range(2, min(exact_upto, max_rows) + 1))
    return exact + [b for b in decode_buckets(max_rows) if b > max(exact_upto, 1)]


def decode_splits(batch: int, kv_heads: int, max_seq_len: int, num_sms: int) -> int:
    """Split-K factor for decode attention: enough blocks to cover the GPU twice, but no
    more splits than the longest allowed history fills at the kernel's shortest split
    (DECODE_MIN_KEYS_PER_SPLIT keys; the kernel sizes each step's splits from the live
    kv_len, so a short context runs a few one-round-trip splits whatever the grid, and the
    guess of its first keys' table entries holds). Long contexts (the
    long-context kernel's engines) fill whole waves instead (attention_long.
    long_decode_splits), never more splits than batch 1 gets (the partial buffers are sized
    by it)."""
    if max_seq_len >= LONG_CONTEXT_KEYS:
        return long_decode_splits(max(batch, 1) * kv_heads, max_seq_len, num_sms,
                                  cap=long_decode_splits(kv_heads, max_seq_len, num_sms))
    want = -(-2 * num_sms // max(batch * kv_heads, 1))
    return max(1, min(want, -(-max_seq_len // DECODE_MIN_KEYS_PER_SPLIT), 64))
