"""Packing a step's chunks into the device input layout."""

import numpy as np
import pytest

from atlas.core.sampling import GREEDY
from atlas.model.batch import SeqChunk
from atlas.model.step_inputs import (StepError, StepLayout, decode_buckets, decode_splits,
                                     pack_step, row_owners, verification_buckets)

LAYOUT = StepLayout(max_tokens=64, max_seqs=4, max_blocks=8)


def _unpack(buf, lay, n_tokens, n_seqs):
    return (buf[lay.ids:lay.ids + n_tokens], buf[lay.positions:lay.positions + n_tokens],
            buf[lay.slots:lay.slots + n_tokens], buf[lay.cu_q:lay.cu_q + n_seqs + 1],
            buf[lay.kv_lens:lay.kv_lens + n_seqs])


def test_mixed_prefill_and_decode_step():
    buf = np.full(LAYOUT.total, -7, dtype=np.int32)
    chunks = [SeqChunk(1, [5, 6, 7], 16, [3, 9], GREEDY, sample=False),  # pos 16..18
              SeqChunk(2, [8], 4, [2], GREEDY)]
    n_tokens, n_sample, max_q = pack_step(buf, LAYOUT, chunks, block_size=16)
    assert (n_tokens, n_sample, max_q) == (4, 1, 3)
    ids, pos, slots, cu_q, kv_lens = _unpack(buf, LAYOUT, 4, 2)
    assert ids.tolist() == [5, 6, 7, 8]
    assert pos.tolist() == [16, 17, 18, 4]
    # positions 16..18 live in the second block (id 9); position 4 in block 2
    assert slots.tolist() == [9 * 16 + 0, 9 * 16 + 1, 9 * 16 + 2, 2 * 16 + 4]
    assert cu_q.tolist() == [0, 3, 4]
    assert kv_lens.tolist() == [19, 5]
    assert buf[LAYOUT.sample_rows] == 3  # only the decode row samples


def test_padding_rows_never_write_kv():
    buf = np.zeros(LAYOUT.total, dtype=np.int32)
    n_tokens, n_sample, _ = pack_step(buf, LAYOUT, [SeqChunk(1, [4], 0, [1], GREEDY)], 16,
                                      pad_to=4)
    assert (n_tokens, n_sample) == (4, 4)
    _, _, slots, _, kv_lens = _unpack(buf, LAYOUT, 4, 4)
    assert slots.tolist() == [16, -1, -1, -1]
    assert kv_lens.tolist() == [1, 1, 1, 1]


@pytest.mark.parametrize("chunks, message", [
    ([SeqChunk(1, [1] * 17, 0, [0], GREEDY)], "need 2 KV blocks"),
    ([SeqChunk(1, [1] * 65, 0, list(range(8)), GREEDY)], "step budget"),
    ([SeqChunk(i, [1], 0, [0], GREEDY) for i in range(5)], "5 sequences"),
    ([SeqChunk(1, [], 0, [0], GREEDY)], "at least one token"),
])
def test_inconsistent_chunks_are_refused(chunks, message):
    with pytest.raises(StepError, match=message):
        pack_step(np.zeros(LAYOUT.total, dtype=np.int32), LAYOUT, chunks, 16)


def test_decode_shaped_verification_gives_each_token_its_own_row():
    """B sequences x (K + 1) tokens become decode rows: row i of a verification attends to
    its sequence's keys up to its own position, on its sequence's block table."""
    lay = StepLayout(max_tokens=64, max_seqs=8, max_blocks=8, max_sample_rows=8)
    buf = np.full(lay.total, -7, dtype=np.int32)
    chunks = [SeqChunk(1, [5, 6, 7], 15, [3, 9], GREEDY, num_draft=2),   # pos 15..17
              SeqChunk(2, [8], 4, [2], GREEDY)]
    n_tokens, n_sample, max_q = pack_step(buf, lay, chunks, 16, pad_to=6, per_row=True)
    assert (n_tokens, n_sample, max_q) == (6, 6, 1)
    ids, pos, slots, cu_q, kv_lens = _unpack(buf, lay, 6, 6)
    assert ids.tolist() == [5, 6, 7, 8, 0, 0]
    assert pos.tolist() == [15, 16, 17, 4, 0, 0]
    assert slots.tolist() == [3 * 16 + 15, 9 * 16 + 0, 9 * 16 + 1, 2 * 16 + 4, -1, -1]
    assert cu_q.tolist() == [0, 1, 2, 3, 4, 5, 6]
    assert kv_lens.tolist() == [16, 17, 18, 5, 1, 1]
    assert buf[lay.sample_rows:lay.sample_rows + 6].tolist() == [0, 1, 2, 3, 4, 5]
    assert [c.seq_id for c in row_owners(chunks, per_row=True)] == [1, 1, 1, 2]
    assert [c.seq_id for c in row_owners(chunks, per_row=False)] == [1, 2]


@pytest.mark.parametrize("chunk", [SeqChunk(1, [5, 6], 0, [0], GREEDY),   # a prefill chunk
                                   SeqChunk(1, [5], 0, [0], GREEDY, sample=False)])
def test_decode_shaped_step_refuses_prefill_chunks(chunk):
    with pytest.raises(StepError, match="decode-shaped"):
        pack_step(np.zeros(LAYOUT.total, dtype=np.int32), LAYOUT, [chunk], 16, per_row=True)


def test_decode_buckets_and_splits():
    assert decode_buckets(1) == [1]
    assert decode_buckets(8) == [1, 2, 4, 8]
    assert decode_buckets(40) == [1, 2, 4, 8, 16, 32, 40]
    assert decode_splits(1, 8, 4096, 132) == 33
    assert decode_splits(64, 8, 4096, 132) == 1
    assert decode_splits(1, 8, 128, 132) == 4  # no more splits than 128 keys fill at 32 each


def test_verification_buckets_are_exact_in_the_row_invariant_range():
    """A verification of 5..7 rows must not pad into the batched GEMV's 8 rows."""
    assert verification_buckets(160, 7) == [2, 3, 4, 5, 6, 7, 8, 16, 32, 48, 64, 80, 96,
                                            112, 128, 144, 160]
    assert verification_buckets(5, 7) == [2, 3, 4, 5]
    assert verification_buckets(12, 0) == [2, 4, 8, 12]
