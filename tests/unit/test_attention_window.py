"""Sliding-window attention (`window` > 0: a query at position p sees keys
max(0, p - window + 1) .. p; 0: every key up to p) in the tensor-core attention kernels: a
transliteration of their window index math held to set-based references built from that
definition alone.

* Decode (attention_long.cu decode_attn_long and attention.cu decode_attn_combine): the
  window's n = min(kv_len, window) keys are split as a history of n keys whose key j is
  cache key kv_len - n + j, under every split rule the kernel has (the plain rule, the early
  entry's whole tiles, one split); the combine re-derives the same active splits; the
  block-table entries requested with kv_len (a guess made before the window's start is
  known) are used only where they are the real first tile's; the rope entries' step key is
  in the last active split.
* Prefill (attention.cu prefill_attn_bf16, attention_sm90.cu prefill_attn_sm90 and its wide
  tiles): each block's key tiles, the keys it copies (the first tile's keys before the
  window zero-filled), and per row the keys its masks let through (both-sided below
  lo_tiles, the unmasked tiles of the wgmma kernel, the causal rest) are exactly the row's
  window, each once, and every such key was copied from the cache (a zero-filled key that
  passes a mask would count as a score of 0).
* The rings still hand each tile to its readers intact when the loop starts at tile t0.

There is no GPU in CI; tools/gpu/check_kernels.py runs the windowed cases on the device."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from atlas.runtime.ops import attention, attention_long

KERNELS = Path(__file__).resolve().parents[2] / "kernels/hopper/common"
LONG_SOURCE = (KERNELS / "attention_long.cu").read_text()
PREFILL_SOURCE = (KERNELS / "attention.cu").read_text()
SM90_SOURCE = (KERNELS / "attention_sm90.cu").read_text()
TILE_SOURCE = (KERNELS / "attention_tile.cuh").read_text()

BKV = attention_long.LONG_TILE_KEYS            # attention_long.cu kBKV
MIN_KEYS = attention.DECODE_MIN_KEYS_PER_SPLIT  # kMinKeysPerSplit
THREADS = attention_long.LONG_THREADS
U32 = 0xFFFFFFFF


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def test_the_models_transliterate_the_kernels_lines() -> None:
    """The lines the models below restate (a change to one means re-deriving its model)."""
    for line in (
            "const int n = window > 0 ? min(kv_len, window) : kv_len, lo = kv_len - n;",
            "const int per = (n + num_splits - 1) / num_splits;",
            "const int begin = lo + split * chunk, end = min(begin + chunk, kv_len);",
            "const int active = (n + chunk - 1) / chunk;",
            "if (t > 0 || (kEarly ? guess != begin : num_splits != 1 || begin != 0)) "
            "lookup(t, page);"):
        assert line in LONG_SOURCE, line
    assert "const int n = window > 0 ? min(kv_len, static_cast<int>(window)) : kv_len;" \
        in PREFILL_SOURCE
    # the wgmma kernel's rows are queries q0 / pk.. (pk = 1: the plain entries these models
    # restate; the split entry's GQA-packed rows are its host reference's, attention_split)
    assert "const int lo_key = window > 0 ? max(first_pos + q0 - span, 0) : 0;" in PREFILL_SOURCE
    assert "const int lo_key = window > 0 ? max(first_pos + q0 / pk - span, 0) : 0;" \
        in SM90_SOURCE
    for source in (PREFILL_SOURCE, SM90_SOURCE):
        assert "p < n_keys && (!first || p >= lo_key)" in source
    assert "const int lo_tiles = window > 0 ? (max(n_keys - window, 0) + P::kBKV - 1) / " \
        "P::kBKV : 0;" in PREFILL_SOURCE
    assert "const int lo_tiles = window > 0 ? (max(n_keys - window, 0) + kBKV - 1) / kBKV : 0;" \
        in SM90_SOURCE
    assert "static_cast<unsigned>(last[hh] - (key0 + j * 8 + e)) >" in TILE_SOURCE


# ---- decode ------------------------------------------------------------------------------

def _long_split(kv_len: int, window: int, num_splits: int, split: int, early: bool,
                counters: bool) -> tuple[int, int, int, int]:
    """decode_attn_long's (begin, end, active, chunk) for one split."""
    n = min(kv_len, window) if window > 0 else kv_len
    lo = kv_len - n
    per = (n + num_splits - 1) // num_splits
    chunk = (max((per + BKV - 1) // BKV * BKV, BKV) if early and counters
             else max(per, MIN_KEYS))
    begin = lo + split * chunk
    return begin, min(begin + chunk, kv_len), (n + chunk - 1) // chunk, chunk


def _combine_active(kv_len: int, window: int, num_splits: int) -> int:
    """decode_attn_combine's active splits (decode_attn.cuh decode_active_splits of n)."""
    n = min(kv_len, window) if window > 0 else kv_len
    chunk = max((n + num_splits - 1) // num_splits, MIN_KEYS)
    return (n + chunk - 1) // chunk


def _window_keys(kv_len: int, window: int) -> set[int]:
    """The keys the query at position kv_len - 1 sees (the definition)."""
    p = kv_len - 1
    return {k for k in range(kv_len) if k <= p and (window == 0 or k >= p - window + 1)}


DECODE_LENS = [0, 1, 2, 31, 32, 33, 63, 64, 65, 100, 127, 128, 129, 568, 1000, 1920, 1921,
               4096, 5000]
DECODE_WINDOWS = [0, 1, 2, 31, 32, 33, 63, 64, 65, 100, 300, 1000, 4096]
DECODE_SPLITS = [1, 2, 3, 4, 5, 7, 16, 30, 33]


@pytest.mark.parametrize("early, counters", [(False, False), (False, True), (True, False),
                                             (True, True)])
def test_decode_splits_cover_the_window_once(early: bool, counters: bool) -> None:
    """The active splits' keys are the window's, each once, split i from lo + i chunk with
    the spec's chunk for n keys (early_split_rule where the early entry merges, else
    decode_split_rule); the rest hold none (begin >= kv_len: they exit)."""
    for kv_len in DECODE_LENS:
        for window in DECODE_WINDOWS:
            want = _window_keys(kv_len, window)
            n = len(want)
            lo = min(want) if want else 0
            for ns in DECODE_SPLITS:
                rule = attention_long.early_split_rule if early and counters \
                    else attention.decode_split_rule
                spec_chunk, spec_active = rule(n, ns)
                seen: list[int] = []
                for split in range(ns):
                    begin, end, active, chunk = _long_split(kv_len, window, ns, split, early,
                                                            counters)
                    assert (chunk, active) == (spec_chunk, spec_active)
                    if split < active:
                        assert begin == lo + split * spec_chunk and begin < end <= kv_len
                        # the tiles of the loop, rows past the split zero-filled (ok = p < end)
                        n_tiles = _cdiv(end - begin, BKV)
                        seen += [p for t in range(n_tiles)
                                 for p in range(begin + t * BKV, begin + (t + 1) * BKV)
                                 if p < end]
                    else:
                        assert begin >= kv_len
                assert sorted(seen) == sorted(want), (kv_len, window, ns)
                if not (early and counters):  # the launches the combine merges
                    assert _combine_active(kv_len, window, ns) == spec_active


def test_decode_unwindowed_is_todays_rule() -> None:
    """window 0 and windows no shorter than the history split exactly as before the window
    existed: from key 0, decode_split_rule / early_split_rule of kv_len."""
    for kv_len in DECODE_LENS:
        for ns in DECODE_SPLITS:
            for window in (0, kv_len, kv_len + 1, 1 << 20):
                for early, rule in ((False, attention.decode_split_rule),
                                    (True, attention_long.early_split_rule)):
                    chunk, active = rule(kv_len, ns)
                    for split in range(ns):
                        got = _long_split(kv_len, window, ns, split, early, True)
                        assert got == (split * chunk, min(split * chunk + chunk, kv_len),
                                       active, chunk)


def _prologue_first_tile_key(kv_len: int, window: int, ns: int, split: int, early: bool,
                             counters: bool, table: np.ndarray, block_size: int,
                             d: int) -> list[tuple[int, int]]:
    """decode_attn_long's copies of tile 0: (key, page entry used) per row this thread's
    lookups cover, every thread; the entries from the lookup made with kv_len (a guess) or
    the one after it, as the prologue decides."""
    chunks = d // 8
    rows_per_thread, row_step = BKV * chunks // THREADS, THREADS // chunks
    table_keys = len(table) * block_size
    begin, end, _, _ = _long_split(kv_len, window, ns, split, early, counters)

    def lookup_at(base: int, row0: int) -> list[int]:
        return [int(table[(base + row0 + j * row_step) // block_size])
                if base + row0 + j * row_step < table_keys else 0
                for j in range(rows_per_thread)]

    copies = []
    for tid in range(THREADS):
        row0 = tid // chunks
        guess = -1
        page: list[int] | None = None
        if early:
            guess = 0 if ns == 1 else split * BKV if counters else -1
            if guess >= 0:
                page = lookup_at(guess, row0)
        elif ns == 1:
            page = lookup_at(0, row0)
        relook = guess != begin if early else (ns != 1 or begin != 0)
        if relook:
            page = lookup_at(begin, row0)
        assert page is not None
        for j in range(rows_per_thread):
            p = begin + row0 + j * row_step
            if p < end:
                copies.append((p, page[j]))
    return copies


@pytest.mark.parametrize("early, counters", [(False, False), (False, True), (True, True)])
@pytest.mark.parametrize("block_size, d", [(16, 128), (7, 64), (32, 256)])
def test_guessed_table_entries_are_the_first_tiles(early, counters, block_size, d) -> None:
    """Every copy of a split's first tile uses the page of its own key: a guess made with
    kv_len (key 0 on one split, tile `split` on the early entry) stands only where it is the
    split's real first key, lo + split chunk, else the entries are looked up again."""
    rng = np.random.default_rng(5)
    for kv_len in (1, 65, 300, 1920, 1921, 3000):
        for window in (0, 1, 64, 100, 1000, 5000):
            for ns in (1, 2, 30):
                blocks = _cdiv(kv_len, block_size) + 2
                table = rng.permutation(10 * blocks)[:blocks]
                for split in range(ns):
                    for p, page in _prologue_first_tile_key(kv_len, window, ns, split, early,
                                                            counters, table, block_size, d):
                        assert page == table[p // block_size], (kv_len, window, ns, split, p)


def test_the_rope_step_key_is_in_the_last_active_split() -> None:
    """The rope entries substitute the step's key (kv_len - 1) in the split whose range ends
    at kv_len (sub: kv_len - 1 < end, the split active), in its tile (kv_len - 1 - begin) /
    kBKV at row kv_len - 1 - begin - t kBKV: one split of the window's."""
    for kv_len in DECODE_LENS[1:]:
        for window in DECODE_WINDOWS:
            for ns in DECODE_SPLITS:
                for early in (False, True):
                    subs = []
                    for split in range(ns):
                        begin, end, active, _ = _long_split(kv_len, window, ns, split, early,
                                                            True)
                        if begin < kv_len and kv_len - 1 < end:
                            t = (kv_len - 1 - begin) // BKV
                            r = kv_len - 1 - begin - t * BKV
                            assert 0 <= t < _cdiv(end - begin, BKV) and 0 <= r < BKV
                            subs.append(split)
                    assert subs == [active - 1]


def test_a_sequence_without_keys_keeps_todays_zeros() -> None:
    """kv_len 0: no split is active whatever the window, and the combine merges none (its
    zeros); with SplitMerge or one split the first split writes the zeros."""
    for window in DECODE_WINDOWS:
        for ns in DECODE_SPLITS:
            for early in (False, True):
                for split in range(ns):
                    begin, _, active, _ = _long_split(0, window, ns, split, early, True)
                    assert active == 0 and begin >= 0
            assert _combine_active(0, window, ns) == 0


# ---- prefill -----------------------------------------------------------------------------

#: kernel -> (queries a block, [(first row, rows) of its mask groups], key tile by head dim,
#: whether the mask group skips the mask on the tiles below its diagonal)
PREFILL_KERNELS = {
    "prefill_attn_bf16": (64, [(0, 64)], {64: 64, 128: 32, 256: 16}, False),
    "prefill_attn_sm90_bf16": (128, [(0, 64), (64, 64)], {128: 64, 256: 32}, True),
    "prefill_attn_sm90_wide_bf16": (128, [(0, 64), (64, 64)], {128: 128}, True),
}


def _prefill_block(kernel: str, d: int, first_pos: int, q_len: int, window: int, q0: int
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The block at chunk row q0: which keys it copies from the cache (bool [keys]), how
    often each of its rows counts each key (int [rows, keys]) and which rows are in a mask
    group with a row of the chunk (bool [rows]; the wgmma kernel's second warpgroup past the
    chunk runs the tiles for the schedule's sake, its rows' counts unused as before windows),
    transliterating the kernel's tile range, copies and masks."""
    bq, groups, tiles, unmasked = PREFILL_KERNELS[kernel]
    bkv = tiles[d]
    kv_len = first_pos + q_len
    n_keys = first_pos + min(q0 + bq, q_len)
    span = window - 1
    lo_key = max(first_pos + q0 - span, 0) if window > 0 else 0
    t0 = lo_key // bkv
    n_tiles = (n_keys + bkv - 1) // bkv
    lo_tiles = (max(n_keys - window, 0) + bkv - 1) // bkv if window > 0 else 0
    width = n_tiles * bkv
    copied = np.zeros(width, bool)
    counted = np.zeros((bq, width), int)
    rows = q0 + np.arange(bq)
    limit = np.where(rows < q_len, first_pos + rows, kv_len - 1)
    live = np.zeros(bq, bool)
    for g0, g_rows in groups:
        live[g0:g0 + g_rows] = q0 + g0 < q_len
    for t in range(t0, n_tiles):
        keys = t * bkv + np.arange(bkv)
        ok = (keys < n_keys) & ((keys >= lo_key) | (t != t0))
        copied[keys] = ok
        for g0, g_rows in groups:
            full_tiles = (first_pos + q0 + g0 + 1) // bkv if unmasked else -1
            lim = limit[g0:g0 + g_rows, None]
            if t < lo_tiles:  # both ends: (unsigned)(last - key) > (unsigned)span masks
                seen = ((lim - keys[None, :]) & U32) <= (span & U32)
            elif t < full_tiles:
                seen = np.ones((g_rows, bkv), bool)
            else:
                seen = keys[None, :] <= lim
            counted[g0:g0 + g_rows, keys] += seen
            # a key a mask lets through must hold the cache's row, not a zero-filled one
            assert not (live[g0] and (seen & ~ok[None, :]).any()), \
                (kernel, d, first_pos, q_len, window, q0, t)
    return copied, counted, live


def _row_window(p: int, window: int, width: int) -> np.ndarray:
    keys = np.arange(width)
    return (keys <= p) & ((keys >= p - window + 1) if window else True)


PREFILL_FIRST = [0, 1, 14, 15, 30, 62, 63, 64, 65, 126, 127, 200, 1000]
PREFILL_Q_LENS = [1, 2, 16, 63, 64, 65, 127, 128, 129, 300]
PREFILL_WINDOWS = [0, 1, 2, 15, 16, 17, 31, 32, 33, 63, 64, 65, 100, 127, 128, 129, 300, 5000]


@pytest.mark.parametrize("kernel, d", [(k, d) for k, spec in PREFILL_KERNELS.items()
                                       for d in spec[2]])
def test_prefill_rows_count_exactly_their_window(kernel: str, d: int) -> None:
    """Every row of every block counts each key of its window once and nothing else; a row
    past the chunk (padding, never stored) beside rows of it counts the chunk's last row's
    keys; a block copies exactly the keys some row of it sees (none below the first row's
    window: the first tile's are zero-filled, never read)."""
    bq = PREFILL_KERNELS[kernel][0]
    for first_pos in PREFILL_FIRST:
        for q_len in PREFILL_Q_LENS:
            kv_len = first_pos + q_len
            for window in PREFILL_WINDOWS:
                for q0 in range(0, q_len, bq):
                    copied, counted, live = _prefill_block(kernel, d, first_pos, q_len,
                                                           window, q0)
                    width = copied.size
                    assert width >= kv_len or q0 + bq < q_len
                    union = np.zeros(width, bool)
                    for i in np.flatnonzero(live):
                        p = first_pos + min(q0 + i, q_len - 1)  # padding: the last row's
                        want = _row_window(p, window, width)
                        assert (counted[i] == want).all(), (first_pos, q_len, window, q0, i)
                        if q0 + i < q_len:
                            union |= want
                    assert (copied == union).all(), (first_pos, q_len, window, q0)


@pytest.mark.parametrize("kernel, d", [(k, d) for k, spec in PREFILL_KERNELS.items()
                                       for d in spec[2]])
def test_prefill_unwindowed_blocks_are_todays(kernel: str, d: int) -> None:
    """window 0: tile 0 on, nothing zero-filled below n_keys, no tile masked on both ends."""
    bq, _, tiles, _ = PREFILL_KERNELS[kernel]
    for first_pos in PREFILL_FIRST:
        for q_len in PREFILL_Q_LENS:
            for q0 in range(0, q_len, bq):
                copied, _, _ = _prefill_block(kernel, d, first_pos, q_len, 0, q0)
                n_keys = first_pos + min(q0 + bq, q_len)
                assert copied.size == _cdiv(n_keys, tiles[d]) * tiles[d]
                assert (copied == (np.arange(copied.size) < n_keys)).all()


# ---- the rings from tile t0 --------------------------------------------------------------

@pytest.mark.parametrize("stages, ahead", [(2, 1), (4, 2), (3, 1)])
def test_rings_from_the_first_seen_tile(stages: int, ahead: int) -> None:
    """Replays a ring whose loop runs tiles t0..n_tiles-1: prefill_attn_bf16 (2 slots, tile
    t + 1 issued at the top of iteration t, then wait<1>; the barrier ending iteration t - 1
    freed its slot) and attention_sm90.cu (kStages slots, kAhead = kStages - 2 tiles ahead
    issued after wait<kAhead - 1> and the barrier; tile u's PV completes in iteration u + 1).
    The prologue's commit groups hold tiles t0.., each iteration commits one group; tile t
    must have landed when iteration t reads it, in slot t % stages, and no copy may land in
    a slot before its tile's last reader is done."""
    sm90 = stages > 2
    for t0 in (0, 1, 2, 3, 5):
        for count in range(1, 8):
            n_tiles = t0 + count
            groups: list[list[int]] = []
            slot_of: dict[int, int] = {}
            busy_until: dict[int, int] = {}  # slot -> iteration whose end frees it

            def issue(tile: int, it: int) -> None:
                s = tile % stages
                assert busy_until.get(s, t0 - 2) < it, (t0, n_tiles, tile)
                slot_of[s] = tile
                # its readers: S (and, prefill_attn_bf16, PV) in iteration `tile`; sm90's PV
                # in iteration tile + 1 (done there, before that iteration ends)
                busy_until[s] = tile + 1 if sm90 else tile

            prologue = ahead if sm90 else 1
            for i in range(prologue):
                if i == 0 or t0 + i < n_tiles:
                    issue(t0 + i, t0 - 1)
                    groups.append([t0 + i])
                else:
                    groups.append([])
            for t in range(t0, n_tiles):
                if sm90:
                    done = len(groups) - (ahead - 1)  # wait<kAhead - 1>, then the barrier
                    nxt = t + ahead
                else:
                    nxt = t + 1
                if nxt < n_tiles:
                    issue(nxt, t)
                groups.append([nxt] if nxt < n_tiles else [])
                if not sm90:
                    done = len(groups) - 1  # wait<1> after this iteration's commit
                assert t in [x for g in groups[:done] for x in g], (t0, n_tiles, t)
                assert slot_of[t % stages] == t
