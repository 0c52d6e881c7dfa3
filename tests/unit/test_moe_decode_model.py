"""A numpy model of moe_decode.cu's index math, transliterated from the kernels.

Down: the tile (DownTile by the row's chunk steps), the rows of a group and of a block
(ops.moe.down_rows), each warp's items (row r, slot j) and the chunks each lane loads for them
(step batches, the pipelined next group), the shared expert's partial chunks, and the row sums
in slot order: every (row, slot, chunk) product taken exactly once, nothing past a row, an
item or the block's rows read. Gate/up: the leader rule (the pairs of one expert go
GATE_UP_GROUP_PAIRS to a block, led by ranks 0, 4, ...; the others' blocks exit), the column
groups of a block
(ops.moe.gate_up_groups_per_block), zeros for ids outside [0, experts) and past the shared
expert's width: every (pair, column) written exactly once, one weight stream per distinct
expert. The GEMV-shaped twins: down_gemv's chunk spans (a warp's in one slot), groups and
slot sums; gate_up_gemv's loop cover and pairs. Checked against the float64 oracles of
cases/moe.py. There is no GPU in CI:
tools/gpu/check_kernels.py checks the hardware."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from atlas.core.numerics import bf16_bits_to_f32
from atlas.runtime.cases import moe as moe_cases
from atlas.runtime.cases.gemv import random_bf16
from atlas.runtime.mock import MockGpuBackend
from atlas.runtime.ops import KernelCache, moe
from atlas.runtime.ops.routes import KernelRoutes

WARPS = moe.DECODE_ROWS_PER_BLOCK


def _bf(v: float) -> float:
    return float(moe_cases._bf16(np.array([v]))[0])


def _tile(inter: int) -> tuple[int, int]:
    """(kItems, kBatch) of DownTile<steps> (steps > 4: the general tile, batches of 5)."""
    steps = -(-inter // 256)
    if steps in moe.DOWN_TILE_ITEMS:
        return moe.DOWN_TILE_ITEMS[steps], steps
    return moe.DOWN_TILE_ITEMS_LONG, 5


def model_down(act: np.ndarray, w: np.ndarray, ids: np.ndarray, weights: np.ndarray,
               top_k: int, sh_down: np.ndarray | None, sm_count: int
               ) -> tuple[np.ndarray, dict[tuple[int, int, int], int]]:
    """out [tokens, hidden] (float64) and how often each (row, slot, chunk) was loaded."""
    tokens, slots, inter = act.shape
    experts, hidden, _ = w.shape
    kc = inter // 8
    rows = moe.down_rows(slots, tokens, hidden, inter, sm_count)
    items_per_warp, batch = _tile(inter)
    steps = -(-kc // 32)
    rpg = max(1, WARPS * items_per_warp // slots)
    items = rpg * slots
    groups = -(-rows // rpg)
    loads: dict[tuple[int, int, int], int] = {}
    out = np.full((tokens, hidden), np.nan)
    sh_kc = sh_down.shape[1] // 8 if sh_down is not None else 0

    def item(i: int, row0: int, row_end: int) -> tuple[int, int, int, int]:
        """down_item: (kind 0 routed / 1 shared / -1 dead, expert or chunk, n, slot)."""
        r, j = divmod(i, slots)
        row = row0 + r
        if i >= items or row >= row_end:
            return -1, 0, 0, 0
        if j >= top_k:
            c = j - top_k
            return 1, c, max(0, min(kc, sh_kc - c * kc)), j
        e = int(ids_t[j])
        if not 0 <= e < experts:
            return -1, 0, 0, j
        return 0, e, kc, j

    for t in range(tokens):
        ids_t, w_t = ids[t], weights[t]
        for bx in range(-(-hidden // rows)):
            row_end = min(hidden, (bx + 1) * rows)
            for g in range(groups):
                row0 = bx * rows + g * rpg
                ys = np.full(WARPS * items_per_warp, np.nan)
                for warp in range(WARPS):
                    for m in range(items_per_warp):
                        i = warp + WARPS * m
                        kind, which, n, slot = item(i, row0, row_end)
                        acc = 0.0
                        for s0 in range(0, steps, batch):
                            for s in range(batch):
                                for lane in range(32):
                                    c = lane + 32 * (s0 + s)
                                    if c >= n:
                                        continue
                                    r = i // slots
                                    if kind == 0:
                                        wrow = w[which, row0 + r, 8 * c:8 * c + 8]
                                    else:
                                        col = which * kc + c  # chunk of the shared row
                                        assert col < sh_kc
                                        wrow = sh_down[row0 + r, 8 * col:8 * col + 8]
                                    key = (row0 + r, slot, c)
                                    loads[key] = loads.get(key, 0) + 1
                                    acc += float(wrow @ act[t, slot, 8 * c:8 * c + 8])
                        if i < items:
                            ys[i] = acc
                for r in range(rpg):
                    row = row0 + r
                    if row >= row_end:
                        continue
                    y = ys[r * slots:(r + 1) * slots]
                    assert not np.isnan(y).any(), "a product of the row was never computed"
                    total = 0.0
                    for j in range(top_k):
                        if 0 <= ids_t[j] < experts:
                            total += float(w_t[j]) * _bf(y[j])
                    if slots > top_k:
                        total = _bf(total) + _bf(float(w_t[top_k]) * _bf(y[top_k:].sum()))
                    assert np.isnan(out[t, row]), "two blocks wrote one row"
                    out[t, row] = total
    return out, loads


@pytest.mark.parametrize("experts,top_k,hidden,inter,shared_inter,tokens,sm_count", [
    (8, 8, 64, 768, 0, 2, 3),       # Qwen3-30B-A3B's tile (3 steps, 5 rows a group)
    (6, 3, 40, 96, 48, 3, 2),       # one step, two shared chunks (the second partial)
    (4, 2, 24, 1552, 0, 1, 4),      # 7 steps: the general tile's batches of 5
    (24, 20, 16, 32, 0, 2, 1),      # 20 slots: 3 rows a group
    (5, 4, 36, 1008, 512, 2, 2),    # 4 steps, a shared expert of one partial chunk
])
def test_down_kernel_model_matches_the_oracle(experts: int, top_k: int, hidden: int, inter: int,
                                              shared_inter: int, tokens: int,
                                              sm_count: int) -> None:
    check_down_model(moe.MoeShape(experts, top_k, hidden, inter, shared_inter), tokens,
                     lambda *a: model_down(*a, sm_count), np.random.default_rng(hidden + inter))


def check_down_model(shape: moe.MoeShape, tokens: int, model, rng: np.random.Generator) -> None:
    """Random inputs (an id of another rank among them) through a model of a down kernel
    (`model(act, w, ids, weights, top_k, sh_down)` -> (out, loads)): every real chunk of every
    (row, slot) a token uses is loaded once for that token, nothing past an item's chunks, a
    row, or the block's rows; the sums match the float64 oracle."""
    experts, top_k, hidden, inter = shape.experts, shape.top_k, shape.hidden, shape.inter
    shared_inter, slots = shape.shared_inter, shape.slots
    ids = moe_cases.random_ids(rng, tokens, experts, top_k)
    ids[0, -1] = -1  # another rank's expert: skipped
    weights = rng.uniform(0.1, 1.0, (tokens, slots))
    act = bf16_bits_to_f32(random_bf16(rng, (tokens, slots, inter))).astype(np.float64)
    act.reshape(tokens, -1)[:, top_k * inter + shared_inter:] = 0  # past the shared width
    w = bf16_bits_to_f32(random_bf16(rng, (experts, hidden, inter), inter ** -0.5)).astype(
        np.float64)
    sh_down = (bf16_bits_to_f32(random_bf16(rng, (hidden, shared_inter), shared_inter ** -0.5))
               .astype(np.float64) if shared_inter else None)
    out, loads = model(act, w, ids, weights, top_k, sh_down)
    kc, want_loads = inter // 8, {}
    for t in range(tokens):
        for j in range(slots):
            if j < top_k:
                n = kc if 0 <= ids[t, j] < experts else 0
            else:
                n = max(0, min(kc, shared_inter // 8 - (j - top_k) * kc))
            for row in range(hidden):
                for c in range(n):
                    want_loads[(row, j, c)] = want_loads.get((row, j, c), 0) + 1
    assert loads == want_loads
    routed = np.zeros((tokens, hidden))
    for t in range(tokens):
        for j in range(top_k):
            e = ids[t, j]
            if 0 <= e < experts:
                routed[t] += weights[t, j] * moe_cases._bf16(w[e] @ act[t, j])
    want = routed
    if shared_inter:
        y = moe_cases._bf16(act[:, top_k:].reshape(tokens, -1)[:, :shared_inter] @ sh_down.T)
        want = moe_cases._bf16(routed) + moe_cases._bf16(weights[:, top_k:top_k + 1] * y)
    np.testing.assert_allclose(out, want, rtol=1e-9, atol=1e-9)


def model_down_gemv(act: np.ndarray, w: np.ndarray, ids: np.ndarray, weights: np.ndarray,
                    top_k: int, sh_down: np.ndarray | None, sm_count: int, tiles: int
                    ) -> tuple[np.ndarray, dict[tuple[int, int, int], int]]:
    """moe_down_gemv_*: out [tokens, hidden] (float64) and how often each (row, slot, chunk)
    was loaded. Block (bx, token) takes rows [bx rows, (bx + 1) rows) (ops.moe.down_gemv_rows)
    in tiles of DOWN_GEMV_ROWS, unit q = (tile q // batches, batch q % batches); thread t
    takes chunks t + 256 (kU b + u) of the row's slots x kc for the tile's rows; a warp's 32
    chunks are one group of one slot, its sums land in part[group][r]; after a tile's last
    batch thread (r, j) adds slot j's groups in order and thread r writes row r."""
    tokens, slots, inter = act.shape
    experts, hidden, _ = w.shape
    kc, tile, threads = inter // 8, moe.DOWN_GEMV_ROWS, moe.DECODE_THREADS
    n = slots * kc
    assert kc % 32 == 0 and n // 32 <= moe.DOWN_GEMV_MAX_GROUPS
    rows_per_block = moe.down_gemv_rows(tokens, hidden, sm_count, tiles)
    assert rows_per_block % tile == 0
    k_u = min(4, -(-n // threads))
    batches = -(-n // (k_u * threads))
    sh_kc = sh_down.shape[1] // 8 if sh_down is not None else 0
    loads: dict[tuple[int, int, int], int] = {}
    out = np.full((tokens, hidden), np.nan)

    def chunk(ids_t: np.ndarray, i: int) -> tuple[np.ndarray | None, int, int]:
        """down_gemv_chunk: (the weight matrix whose rows hold it or None, slot, column chunk)."""
        if i >= n:
            return None, -1, -1
        j, c = divmod(i, kc)
        if j >= top_k:
            col = (j - top_k) * kc + c
            return (sh_down, j, col) if col < sh_kc else (None, j, c)
        e = int(ids_t[j])
        return (w[e], j, c) if 0 <= e < experts else (None, j, c)

    for t in range(tokens):
        for bx in range(-(-hidden // rows_per_block)):
            first = bx * rows_per_block
            end = min(hidden, first + rows_per_block)
            units = -(-(end - first) // tile) * batches
            part = np.full((moe.DOWN_GEMV_MAX_GROUPS, tile), np.nan)
            for q in range(units):
                b, row0 = q % batches, first + (q // batches) * tile
                rows = min(tile, end - row0)
                for warp in range(WARPS):
                    for u in range(k_u):
                        sums = np.zeros(tile)
                        slots_seen = set()
                        for lane in range(32):
                            i = warp * 32 + lane + threads * (k_u * b + u)
                            mat, j, col = chunk(ids[t], i)
                            if i < n:
                                slots_seen.add(j)
                            if mat is None:
                                continue
                            c = i - j * kc  # the act chunk: the slot's own column chunk
                            for r in range(rows):
                                key = (row0 + r, j, c)
                                loads[key] = loads.get(key, 0) + 1
                                sums[r] += float(mat[row0 + r, 8 * col:8 * col + 8]
                                                 @ act[t, j, 8 * c:8 * c + 8])
                        assert len(slots_seen) <= 1, "a warp's chunks span two slots"
                        g = (k_u * b + u) * WARPS + warp
                        if 32 * g < n:
                            assert np.isnan(part[g]).all(), "a group written twice"
                            part[g] = sums
                if b + 1 < batches:
                    continue
                per_slot = kc // 32
                for r in range(rows):
                    y = [sum(part[j * per_slot + k, r] for k in range(per_slot))
                         for j in range(slots)]
                    assert not np.isnan(y).any(), "a group of the row was never written"
                    total = 0.0
                    for j in range(top_k):
                        if 0 <= ids[t, j] < experts:
                            total += float(weights[t, j]) * _bf(y[j])
                    if slots > top_k:
                        total = _bf(total) + _bf(float(weights[t, top_k]) * _bf(sum(y[top_k:])))
                    assert np.isnan(out[t, row0 + r]), "two blocks wrote one row"
                    out[t, row0 + r] = total
                part[:] = np.nan  # the next tile's groups
    return out, loads


@pytest.mark.parametrize("experts,top_k,hidden,inter,shared_inter,tokens,sm_count,tiles", [
    (8, 8, 8, 768, 0, 2, 1, 1),      # Qwen3-30B-A3B's row: 768 chunks, 3 a thread
    (8, 8, 24, 768, 0, 1, 1, 0),     # one wave of 2 blocks: 3 tiles a block
    (6, 2, 12, 256, 0, 1, 4, 0),     # 64 chunks: warps 2..7 idle; a tile a block
    (6, 3, 20, 512, 640, 2, 1, 2),   # two shared slots (the second's 16 of 64 chunks live),
                                     # blocks of 2 tiles, the last block 1
    (24, 20, 8, 512, 0, 1, 1, 0),    # 1,280 chunks: two batches of 4 a thread, 2 tiles
])
def test_down_gemv_kernel_model_matches_the_oracle(experts: int, top_k: int, hidden: int,
                                                   inter: int, shared_inter: int, tokens: int,
                                                   sm_count: int, tiles: int) -> None:
    check_down_model(moe.MoeShape(experts, top_k, hidden, inter, shared_inter), tokens,
                     lambda *a: model_down_gemv(*a, sm_count, tiles),
                     np.random.default_rng(hidden + inter + top_k))


def test_down_gemv_blocks_fill_one_wave() -> None:
    """ops.moe.down_gemv_rows: Qwen3-30B-A3B / Qwen3.5-35B-A3B at batch 1 on 132 SMs, 512
    tiles over 264 block slots: 2 tiles a block (256 blocks); batch 8: 16 (32 blocks a token);
    ATLAS_MOE_DOWN_GEMV_TILES=1: a block a tile; never more tiles than the row has."""
    assert moe.down_gemv_rows(1, 2048, 132) == 8
    assert moe.down_gemv_rows(8, 2048, 132) == 64
    assert moe.down_gemv_rows(1, 2048, 132, tiles=1) == 4
    assert moe.down_gemv_rows(1, 16, 1) == 8 and moe.down_gemv_rows(1, 16, 1, tiles=9) == 16


# ---- gate/up ---------------------------------------------------------------------------------
def pair_key(flat: np.ndarray, q: int, slots: int, top_k: int, experts: int) -> int:
    """moe_decode.cu pair_key: the expert pair q reads (its routed id, experts + c for the
    shared expert's chunk c, -1 - q for an id outside [0, experts): never shared)."""
    j = q % slots
    if j >= top_k:
        return experts + (j - top_k)
    return int(flat[q]) if 0 <= flat[q] < experts else -1 - q


def model_gate_up(x: np.ndarray, w: np.ndarray, ids: np.ndarray, top_k: int,
                  sh_gate_up: np.ndarray | None, sm_count: int
                  ) -> tuple[np.ndarray, dict[tuple[int, int], int], int]:
    """act [tokens, slots, inter] (NaN: never written), how often each (pair, column) was
    written, and how many weight rows were streamed (gate and up rows of a column: one)."""
    tokens, hidden = x.shape
    experts, inter = w.shape[0], w.shape[1] // 2
    slots = ids.shape[1]
    sh_inter = sh_gate_up.shape[0] // 2 if sh_gate_up is not None else 0
    flat = ids.reshape(-1)
    n = tokens * slots
    groups = -(-inter // WARPS)
    per_block = moe.gate_up_groups_per_block(tokens, slots, inter, sm_count)
    grid_x = -(-groups // per_block)
    cpb = -(-groups // grid_x)  # the kernel's own column groups per block
    act = np.full((n, inter), np.nan)
    writes: dict[tuple[int, int], int] = {}
    streamed = 0

    def key(q: int) -> int:
        return pair_key(flat, q, slots, top_k, experts)

    group = 1 if tokens == 1 else moe.GATE_UP_GROUP_PAIRS
    for p in range(n):
        k = key(p)
        if sum(key(q) == k for q in range(p)) % group:
            continue  # an earlier pair's block computes this one
        pairs = [q for q in range(p, n) if key(q) == k][:group]
        e = experts + (slots - top_k) if k < 0 else k
        for bx in range(grid_x):
            for c in range(cpb):
                for warp in range(WARPS):
                    i = (bx * cpb + c) * WARPS + warp
                    if i >= inter:
                        continue
                    if e >= experts:
                        col = (e - experts) * inter + i
                        live = col < sh_inter
                        rows = (sh_gate_up[col], sh_gate_up[sh_inter + col]) if live else None
                    else:
                        live, rows = True, (w[e, i], w[e, inter + i])
                    streamed += live
                    for q in pairs:
                        writes[(q, i)] = writes.get((q, i), 0) + 1
                        if not live:
                            act[q, i] = 0.0
                            continue
                        gs = moe_cases._bf16(np.array([rows[0] @ x[q // slots]]))[0]
                        us = moe_cases._bf16(np.array([rows[1] @ x[q // slots]]))[0]
                        silu = moe_cases._bf16(np.array([gs / (1 + np.exp(-gs))]))[0]
                        act[q, i] = _bf(silu * us)
    return act.reshape(tokens, slots, inter), writes, streamed


def _check_gate_up_model(model, seed: int, experts: int, top_k: int, inter: int,
                         shared_inter: int, tokens: int, repeat: bool) -> None:
    """Run a transliterated gate/up kernel `model(x, w, ids, top_k, sh) -> (act, writes,
    streamed)` on random routing (one slot of another rank, the shared expert's slots last):
    every output written once, each expert's rows streamed once per group of pairs, and the
    activations equal to the float64 oracle's."""
    rng = np.random.default_rng(seed)
    hidden = 32
    shape = moe.MoeShape(experts, top_k, hidden, inter, shared_inter)
    ids = moe_cases.random_ids(rng, tokens, experts, top_k)
    ids[0, 0] = -1  # another rank's expert: zeros
    ids = np.concatenate([ids, np.tile(experts + np.arange(shape.shared_slots), (tokens, 1))],
                         axis=1).astype(np.int32)
    x = bf16_bits_to_f32(random_bf16(rng, (tokens, hidden))).astype(np.float64)
    w = bf16_bits_to_f32(random_bf16(rng, (experts, 2 * inter, hidden), hidden ** -0.5)
                         ).astype(np.float64)
    sh = (bf16_bits_to_f32(random_bf16(rng, (2 * shared_inter, hidden), hidden ** -0.5))
          .astype(np.float64) if shared_inter else None)
    act, writes, streamed = model(x, w, ids, top_k, sh)
    assert set(writes.values()) == {1} and len(writes) == tokens * shape.slots * inter
    # one stream of a column's rows per GATE_UP_GROUP_PAIRS pairs of an expert, not per pair
    group = 1 if tokens == 1 else moe.GATE_UP_GROUP_PAIRS
    routed = ids[:, :top_k].reshape(-1)
    reads = sum(-(-int((routed == e).sum()) // group) for e in range(experts))
    assert streamed == reads * inter + -(-tokens // group) * shared_inter
    if repeat:
        assert streamed < tokens * (top_k * inter + shared_inter)
    want = moe_cases.oracle_experts(x, w, np.zeros((experts, hidden, inter)), ids[:, :top_k],
                                    np.ones((tokens, top_k)))["act"]
    np.testing.assert_array_equal(act[:, :top_k], want)
    if shared_inter:
        sh_want = moe_cases.oracle_shared(x, sh, np.zeros((hidden, shared_inter)),
                                          np.ones(tokens), np.zeros((tokens, hidden)), inter)
        np.testing.assert_array_equal(act[:, top_k:], sh_want["act"])


@pytest.mark.parametrize("experts,top_k,inter,shared_inter,tokens,sm_count,repeat", [
    (8, 3, 40, 0, 1, 2, False),     # batch 1: every pair a leader
    (6, 4, 24, 0, 8, 1, True),      # 8 tokens over 6 experts: shared reads
    (6, 2, 16, 40, 3, 2, True),     # a shared expert of 3 chunks (the last partial), 3 tokens
])
def test_gate_up_kernel_model_matches_the_oracle(experts: int, top_k: int, inter: int,
                                                 shared_inter: int, tokens: int, sm_count: int,
                                                 repeat: bool) -> None:
    _check_gate_up_model(lambda *a: model_gate_up(*a, sm_count), inter * tokens, experts,
                         top_k, inter, shared_inter, tokens, repeat)


def gemv_chunk_cover(hidden: int, threads: int) -> np.ndarray:
    """How often gate_up_gemv_block's loop (`threads` threads, kUnroll chunks a row per
    thread and iteration) touches each 16-byte chunk of a row."""
    kc = hidden // 8
    cover = np.zeros(kc, np.int64)
    for t in range(threads):
        for c0 in range(t, kc, moe.GATE_UP_GEMV_UNROLL * threads):
            for u in range(moe.GATE_UP_GEMV_UNROLL):
                c = c0 + u * threads
                if c >= kc:
                    break
                cover[c] += 1
    return cover


def model_gate_up_gemv(x: np.ndarray, w: np.ndarray, ids: np.ndarray, top_k: int,
                       sh_gate_up: np.ndarray | None
                       ) -> tuple[np.ndarray, dict[tuple[int, int], int], int]:
    """moe_gate_up_gemv_bf16[_single]: act [tokens, slots, inter] (NaN: never written), how
    often each (pair, column) was written, and how many columns' gate/up rows were streamed."""
    tokens, hidden = x.shape
    experts, inter = w.shape[0], w.shape[1] // 2
    slots = ids.shape[1]
    sh_inter = sh_gate_up.shape[0] // 2 if sh_gate_up is not None else 0
    flat, n = ids.reshape(-1), tokens * slots
    act = np.full((n, inter), np.nan)
    writes: dict[tuple[int, int], int] = {}
    streamed = 0

    def key(q: int) -> int:
        return pair_key(flat, q, slots, top_k, experts)

    group = moe.GATE_UP_GROUP_PAIRS
    for y in range(n):
        # batch 1 (the _single entry): the shared expert's slots first
        p = (y + top_k) % slots if tokens == 1 else y
        k = key(p)
        if tokens == 1:
            pairs = [p]
        else:
            if sum(key(q) == k for q in range(p)) % group:
                continue
            pairs = [q for q in range(p, n) if key(q) == k][:group]
        for bx in range(-(-inter // moe.GATE_UP_GEMV_COLS)):
            col0 = moe.GATE_UP_GEMV_COLS * bx
            if k >= experts:
                c0 = (k - experts) * inter + col0
                mat, up = sh_gate_up, sh_inter
                first, width = min(c0, sh_inter - 1), min(inter - col0, sh_inter - c0)
            elif k >= 0:
                mat, up = w[k], inter
                first, width = col0, inter - col0
            else:
                mat, up, first, width = None, 0, 0, 0
            if width > 0:
                g1 = first + 1 if width > 1 else first
                rows = [mat[first], mat[g1], mat[first + up], mat[g1 + up]]
                streamed += min(width, 2)
            for m, q in enumerate(pairs):
                for r in range(2):
                    if col0 + r >= inter:
                        continue
                    writes[(q, col0 + r)] = writes.get((q, col0 + r), 0) + 1
                    if r >= width:
                        act[q, col0 + r] = 0.0
                        continue
                    xt = x[q // slots]
                    gs = moe_cases._bf16(np.array([rows[r] @ xt]))[0]
                    us = moe_cases._bf16(np.array([rows[2 + r] @ xt]))[0]
                    silu = moe_cases._bf16(np.array([gs / (1 + np.exp(-gs))]))[0]
                    act[q, col0 + r] = _bf(silu * us)
    return act.reshape(tokens, slots, inter), writes, streamed


@pytest.mark.parametrize("hidden,threads", [(32, None), (2048, None), (4160, None), (24, None),
                                            (2048, 256), (8192, None), (2048, 32)])
def test_gate_up_gemv_reads_every_chunk_once(hidden: int, threads: int | None) -> None:
    """Every 16-byte chunk of a weight row exactly once, at every row length and block width
    (the rule's: 128 threads at 2,048, two chunks each; 256 at 4,160 with a partial second
    unroll slot, and at 8,192 looping twice; 3 chunks on 32 threads; the session-7 256 at
    2,048, one chunk each; 32 threads at 2,048: eight iterations)."""
    env = {"ATLAS_MOE_GATE_UP_GEMV_THREADS": str(threads)} if threads else {}
    kc = KernelCache(MockGpuBackend(), KernelRoutes.from_env(env))
    width = moe.gate_up_gemv_threads(kc, hidden)
    assert width == (threads or {2048: 128, 4160: 256, 8192: 256}.get(hidden, 32))
    assert (gemv_chunk_cover(hidden, width) == 1).all()
    core = Path(__file__).resolve().parents[2] / "kernels/hopper/common/gemv_core.cuh"
    assert f"constexpr int kUnroll = {moe.GATE_UP_GEMV_UNROLL};" in core.read_text()


@pytest.mark.parametrize("experts,top_k,inter,shared_inter,tokens,repeat", [
    (8, 3, 40, 0, 1, False),     # batch 1: every pair its own block (the _single entry)
    (6, 4, 24, 0, 8, True),      # 8 tokens over 6 experts: 4 pairs a weight read
    (6, 2, 17 * 16, 40 * 16, 3, True),  # a shared expert of 3 chunks (the last partial)
    (5, 2, 16, 48, 1, False),    # batch 1 with a shared expert, odd column counts per chunk
])
def test_gate_up_gemv_model_matches_the_oracle(experts: int, top_k: int, inter: int,
                                               shared_inter: int, tokens: int,
                                               repeat: bool) -> None:
    _check_gate_up_model(model_gate_up_gemv, inter * tokens + 7, experts, top_k, inter,
                         shared_inter, tokens, repeat)


@pytest.mark.parametrize("inter,shared_inter,tiles", [
    (768, 0, 0),      # Qwen3-30B-A3B's leaf, the one-wave rule: 3 pairs a block
    (768, 0, 5),      # a partial last block (384 = 76 x 5 + 4)
    (96, 0, 1000),    # a whole slot a block
    (512, 512, 2),    # Qwen3.5-35B-A3B: 9 slots, the shared one first
    (48, 80, 7),      # a shared expert of 2 chunks, the second partial (zeros past 80)
])
def test_tiled_gate_up_writes_every_column_once(inter: int, shared_inter: int,
                                                tiles: int) -> None:
    """moe_gate_up_gemv_tiles_bf16's index math over the launch builder's grid: block (bx, y)
    serves slot (y + top_k) mod slots, column pairs [bx tiles, min(bx tiles + tiles, pairs)),
    each pair writing columns 2 t and 2 t + 1 below inter: every (slot, column) exactly once,
    and no block past the pairs."""
    shape = moe.MoeShape(16, 4, 256, inter, shared_inter)
    mock = MockGpuBackend()
    env = {"ATLAS_MOE_GATE_UP_TILED": "1"} | ({"ATLAS_MOE_GATE_UP_TILES": str(tiles)}
                                             if tiles else {})
    shared = moe.SharedExpertWeights(0x6000, 0x7000, 0x8000) if shared_inter else None
    moe.decode_gate_up(KernelCache(mock, KernelRoutes.from_env(env)), 0, 0x2000, 0x3000,
                       0x4000, 0x5000, 1, shape, shared)
    (launch,) = mock.drain_launches()
    n_tiles, (gx, gy, _) = launch.args["tiles"], launch.grid
    pairs = -(-inter // moe.GATE_UP_GEMV_COLS)
    writes = np.zeros((shape.slots, inter), np.int64)
    for y in range(gy):
        p = (y + shape.top_k) % shape.slots
        for bx in range(gx):
            t0 = bx * n_tiles
            assert t0 < pairs  # every block has work
            for t in range(t0, min(pairs, t0 + n_tiles)):
                for r in range(moe.GATE_UP_GEMV_COLS):
                    if 2 * t + r < inter:
                        writes[p, 2 * t + r] += 1
    assert gy == shape.slots and (writes == 1).all()
