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
expert. The bulk-copy paths (down_bulk, gate_up_bulk): each stage's copies (offsets, sizes,
the byte count its barrier waits for) into a ring that holds nothing else, the products read
from it, the ring refilled as the kernels do. Checked against the float64 oracles of
cases/moe.py. There is no GPU in CI:
tools/gpu/check_kernels.py checks the hardware."""

from __future__ import annotations

import numpy as np
import pytest

from atlas.core.numerics import bf16_bits_to_f32
from atlas.runtime.cases import moe as moe_cases
from atlas.runtime.cases.gemv import random_bf16
from atlas.runtime.ops import moe

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


# ---- down: the bulk-copy path ---------------------------------------------------------------
def model_down_bulk(act: np.ndarray, w: np.ndarray, ids: np.ndarray, weights: np.ndarray,
                    top_k: int, sh_down: np.ndarray | None, sm_count: int, smem_limit: int
                    ) -> tuple[np.ndarray, dict[tuple[int, int, int], int]]:
    """down_bulk: out [tokens, hidden] (float64) and how often each (row, slot, chunk) landed
    in a ring stage. The ring is an array of chunks written only by the modelled copies
    (request_stage: offsets, sizes and the byte count its barrier expects) and read by the
    items (offsets from the compute loop), initially NaN: a product that reads a chunk no
    copy of its stage wrote (a stale or foreign one) is NaN or wrong."""
    tokens, slots, inter = act.shape
    experts, hidden, _ = w.shape
    kc = inter // 8
    plan = moe.down_bulk_plan(slots, tokens, hidden, inter, sm_count, smem_limit)
    assert plan is not None
    sr, stages, rows = plan.stage_rows, plan.stages, plan.rows
    assert 1 <= stages <= moe.DOWN_BULK_MAX_STAGES and sr <= moe.DECODE_THREADS
    stage_vecs = slots * sr * kc
    sh_kc = sh_down.shape[1] // 8 if sh_down is not None else 0
    wc = w.reshape(experts * hidden * kc, 8)  # 16-byte chunks of w_down
    shc = sh_down.reshape(-1, 8) if sh_down is not None else None
    landed: dict[tuple[int, int, int], int] = {}
    out = np.full((tokens, hidden), np.nan)

    def slot_chunks(ids_t: np.ndarray, j: int) -> int:
        if j < top_k:
            return kc if 0 <= ids_t[j] < experts else 0
        return max(0, min(kc, sh_kc - (j - top_k) * kc))

    for t in range(tokens):
        ids_t = ids[t]
        for bx in range(-(-hidden // rows)):
            row0 = bx * rows
            n_rows = min(hidden, row0 + rows) - row0
            groups = -(-n_rows // sr)
            ring = np.full((stages * stage_vecs, 8), np.nan)
            barrier_bytes = [0] * stages

            def request(g: int) -> None:
                buf, row, n = g % stages, row0 + g * sr, min(sr, n_rows - g * sr)
                expect = sum(16 * slot_chunks(ids_t, j) * n for j in range(slots))
                ring[buf * stage_vecs:(buf + 1) * stage_vecs] = np.nan  # reused: stale
                got = 0
                for q in range(top_k + (slots - top_k) * n):
                    j = q if q < top_k else top_k + (q - top_k) // n
                    r = 0 if q < top_k else (q - top_k) % n
                    chunks = slot_chunks(ids_t, j)
                    if chunks == 0:
                        continue
                    copied = chunks * (n if j < top_k else 1)
                    if j < top_k:
                        src = (int(ids_t[j]) * hidden + row) * kc
                        block = wc[src:src + copied]
                    else:
                        src = (row + r) * sh_kc + (j - top_k) * kc
                        assert src + copied <= (row + r + 1) * sh_kc, "past the shared row"
                        block = shc[src:src + copied]
                    assert len(block) == copied, "a copy past the weights"
                    dst = buf * stage_vecs + (j * sr + r) * kc
                    assert buf * stage_vecs <= dst and dst + copied <= (buf + 1) * stage_vecs
                    ring[dst:dst + copied] = block
                    got += 16 * copied
                    for rr in range(n if j < top_k else 1):
                        for c in range(chunks):
                            key = (row + r + rr, j, c)
                            landed[key] = landed.get(key, 0) + 1
                assert got == expect, "the barrier would wait for other bytes than land"
                barrier_bytes[buf] += got

            for g in range(min(stages, groups)):
                request(g)
            for g in range(groups):
                buf, n = g % stages, min(sr, n_rows - g * sr)
                items = n * slots
                ys = np.full(sr * slots, np.nan)
                for warp in range(WARPS):
                    for i0 in range(warp, items, 2 * WARPS):
                        for i in (i0, i0 + WARPS):
                            if i >= items:
                                continue
                            r, j = divmod(i, slots)
                            nc = slot_chunks(ids_t, j)
                            base = buf * stage_vecs + (j * sr + r) * kc
                            acc = 0.0
                            for lane in range(32):
                                for c in range(lane, kc, 32):
                                    if c < nc:
                                        acc += float(ring[base + c] @ act[t, j, 8 * c:8 * c + 8])
                            ys[i] = acc
                if g + stages < groups:
                    request(g + stages)
                for r in range(n):
                    y = ys[r * slots:(r + 1) * slots]
                    total = 0.0
                    for j in range(top_k):
                        if 0 <= ids_t[j] < experts:
                            assert not np.isnan(y[j]), "a product read a chunk no copy wrote"
                            total += float(weights[t, j]) * _bf(y[j])
                    if slots > top_k:
                        total = _bf(total) + _bf(float(weights[t, top_k]) * _bf(y[top_k:].sum()))
                    row = row0 + g * sr + r
                    assert np.isnan(out[t, row]), "two blocks wrote one row"
                    out[t, row] = total
    return out, landed


@pytest.mark.parametrize("experts,top_k,hidden,inter,shared_inter,tokens,sm_count,smem", [
    (8, 8, 64, 768, 0, 2, 6, 227 * 1024),    # Qwen3-30B-A3B's rows: stages of 2 rows, ring wraps
    (6, 3, 40, 96, 48, 3, 2, 227 * 1024),    # two shared chunks (the second partial)
    (5, 4, 36, 1008, 512, 2, 2, 227 * 1024),  # a shared expert of one partial chunk
    (24, 20, 16, 32, 0, 2, 1, 227 * 1024),   # 20 slots, one stage a block
    (8, 8, 70 * 16, 512, 512, 1, 3, 99 * 1024),  # the smaller shared memory: fewer stages
])
def test_down_bulk_model_matches_the_oracle(experts: int, top_k: int, hidden: int, inter: int,
                                            shared_inter: int, tokens: int, sm_count: int,
                                            smem: int) -> None:
    check_down_model(moe.MoeShape(experts, top_k, hidden, inter, shared_inter), tokens,
                     lambda *a: model_down_bulk(*a, sm_count, smem),
                     np.random.default_rng(hidden + inter + 1))


def test_down_bulk_plan_geometry() -> None:
    """The full-size shapes on an H200 (one block per SM, ~96 KB of ring), on a GB10-sized
    device (99 KB a block: fewer stages), and a ring that cannot fit (the register path)."""
    q30 = moe.down_bulk_plan(8, 1, 2048, 768, 132, 227 * 1024)
    assert q30 == moe.DownBulkPlan(rows=16, stage_rows=2, stages=4, smem=q30.smem)
    assert -(-2048 // q30.rows) <= 132 and q30.smem + moe.DOWN_STATIC_SMEM <= 227 * 1024
    q35_b8 = moe.down_bulk_plan(9, 8, 2048, 512, 132, 227 * 1024)
    assert (q35_b8.rows, q35_b8.stage_rows, q35_b8.stages) == (128, 2, 5)
    assert 8 * -(-2048 // q35_b8.rows) <= 132
    small = moe.down_bulk_plan(8, 1, 2048, 768, 48, 99 * 1024)
    assert small.stages == 3 and small.smem + moe.DOWN_STATIC_SMEM <= 99 * 1024
    assert moe.down_bulk_plan(32, 1, 2048, 1536, 132, 227 * 1024) is None  # 96 KB a row


# ---- gate/up --------------------------------------------------------------------------------
def model_gate_up_bulk(x: np.ndarray, w: np.ndarray, ids: np.ndarray, top_k: int,
                       sh_gate_up: np.ndarray | None, sm_count: int, smem_limit: int
                       ) -> tuple[np.ndarray, dict[tuple[int, int], int]]:
    """gate_up_bulk (batch 1): act [slots, inter] (NaN: never written) and how often each
    (slot, column) was written; the ring is NaN but for the modelled copies (offsets, sizes,
    the barrier's byte count), so a column computed from rows no copy of its stage wrote is
    NaN."""
    (hidden,) = x.shape
    experts, inter = w.shape[0], w.shape[1] // 2
    slots = ids.shape[0]
    sh_inter = sh_gate_up.shape[0] // 2 if sh_gate_up is not None else 0
    kc = hidden // 8
    plan = moe.gate_up_bulk_plan(1, slots, hidden, inter, sm_count, smem_limit)
    assert plan is not None and plan.stage_cols <= WARPS
    sc, stages, cols = plan.stage_cols, plan.stages, plan.cols
    stage_vecs = 2 * sc * kc
    act = np.full((slots, inter), np.nan)
    writes: dict[tuple[int, int], int] = {}
    wc = w.reshape(-1, 8)
    shc = sh_gate_up.reshape(-1, 8) if sh_gate_up is not None else None
    for j in range(slots):
        for bx in range(-(-inter // cols)):
            col0 = bx * cols
            n_cols = min(inter, col0 + cols) - col0
            groups = -(-n_cols // sc)
            if j < top_k:
                e = int(ids[j])
                ok = 0 <= e < experts
                src, gate, up = wc, (e * 2 * inter + col0) * kc if ok else None, inter * kc
                live = n_cols if ok else 0
            else:
                first = (j - top_k) * inter + col0
                src, gate, up = shc, first * kc, sh_inter * kc
                live = max(0, min(n_cols, sh_inter - first))
            ring = np.full((stages * stage_vecs, 8), np.nan)

            def live_of(g: int) -> int:
                return max(0, min(min(sc, n_cols - g * sc), live - g * sc))

            def request(g: int) -> None:
                n, buf = live_of(g), g % stages
                ring[buf * stage_vecs:(buf + 1) * stage_vecs] = np.nan
                landed = 0
                for lane in range(2):
                    if n > 0:
                        s0 = gate + g * sc * kc + lane * up
                        block = src[s0:s0 + n * kc]
                        assert len(block) == n * kc, "a copy past the weights"
                        d0 = buf * stage_vecs + lane * sc * kc
                        ring[d0:d0 + n * kc] = block
                        landed += 16 * n * kc
                assert landed == 2 * 16 * n * kc

            for g in range(min(stages, groups)):
                request(g)
            for g in range(groups):
                buf = g % stages
                for warp in range(WARPS):
                    i = g * sc + warp
                    if warp >= sc or i >= n_cols:
                        continue
                    v = 0.0
                    if warp < live_of(g):
                        wg = ring[buf * stage_vecs + warp * kc:][:kc].reshape(-1)
                        wu = ring[buf * stage_vecs + (sc + warp) * kc:][:kc].reshape(-1)
                        gs = moe_cases._bf16(np.array([wg @ x]))[0]
                        us = moe_cases._bf16(np.array([wu @ x]))[0]
                        assert not (np.isnan(gs) or np.isnan(us)), "a row no copy wrote"
                        v = _bf(moe_cases._bf16(np.array([gs / (1 + np.exp(-gs))]))[0] * us)
                    writes[(j, col0 + i)] = writes.get((j, col0 + i), 0) + 1
                    act[j, col0 + i] = v
                if g + stages < groups:
                    request(g + stages)
    return act, writes


@pytest.mark.parametrize("experts,top_k,hidden,inter,shared_inter,sm_count,smem", [
    (8, 8, 64, 768, 0, 20, 227 * 1024),       # 8 slots, 48 stages a block: the ring wraps
    (6, 3, 64, 96, 200, 10, 227 * 1024),      # a shared expert of 3 chunks, the last partial
    (40, 28, 64, 1008, 1040, 132, 227 * 1024),  # 30 slots, 4 blocks a slot, the last partial
    (8, 8, 2048, 512, 512, 48, 99 * 1024),    # the smaller shared memory: fewer stages
])
def test_gate_up_bulk_model_matches_the_oracle(experts: int, top_k: int, hidden: int,
                                               inter: int, shared_inter: int, sm_count: int,
                                               smem: int) -> None:
    rng = np.random.default_rng(inter + hidden)
    shape = moe.MoeShape(experts, top_k, hidden, inter, shared_inter)
    ids = np.concatenate([rng.permutation(experts)[:top_k],
                          experts + np.arange(shape.shared_slots)]).astype(np.int32)
    ids[1] = -1  # another rank's expert: zeros
    x = bf16_bits_to_f32(random_bf16(rng, (hidden,))).astype(np.float64)
    w = bf16_bits_to_f32(random_bf16(rng, (experts, 2 * inter, hidden), hidden ** -0.5)
                         ).astype(np.float64)
    sh = (bf16_bits_to_f32(random_bf16(rng, (2 * shared_inter, hidden), hidden ** -0.5))
          .astype(np.float64) if shared_inter else None)
    act, writes = model_gate_up_bulk(x, w, ids, top_k, sh, sm_count, smem)
    assert set(writes.values()) == {1} and len(writes) == shape.slots * inter
    want = moe_cases.oracle_experts(x[None], w, np.zeros((experts, hidden, inter)),
                                    ids[None, :top_k], np.ones((1, top_k)))["act"][0]
    np.testing.assert_array_equal(act[:top_k], want)
    if shared_inter:
        sh_want = moe_cases.oracle_shared(x[None], sh, np.zeros((hidden, shared_inter)),
                                          np.ones(1), np.zeros((1, hidden)), inter)
        np.testing.assert_array_equal(act[top_k:], sh_want["act"][0])


def test_gate_up_bulk_plan_geometry() -> None:
    """Batch 1 only; Qwen3-30B-A3B on an H200: 16 blocks a slot of 16 stages of 3 columns,
    100 KB, so a down block of the bulk path (110 KB) fits beside it on an SM."""
    q30 = moe.gate_up_bulk_plan(1, 8, 2048, 768, 132, 227 * 1024)
    assert (q30.cols, q30.stage_cols, q30.stages, q30.smem) == (48, 3, 4, 100 * 1024)
    down = moe.down_bulk_plan(8, 1, 2048, 768, 132, 227 * 1024)
    assert q30.smem + down.smem + 2 * (moe.DOWN_STATIC_SMEM + 1024) <= 228 * 1024
    assert moe.gate_up_bulk_plan(2, 8, 2048, 768, 132, 227 * 1024) is None
    assert moe.gate_up_bulk_plan(1, 8, 2048, 768, 48, 99 * 1024).stages == 3


# ---- gate/up --------------------------------------------------------------------------------
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
        j = q % slots
        if j >= top_k:
            return experts + (j - top_k)
        return int(flat[q]) if 0 <= flat[q] < experts else -1 - q

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


@pytest.mark.parametrize("experts,top_k,inter,shared_inter,tokens,sm_count,repeat", [
    (8, 3, 40, 0, 1, 2, False),     # batch 1: every pair a leader
    (6, 4, 24, 0, 8, 1, True),      # 8 tokens over 6 experts: shared reads
    (6, 2, 16, 40, 3, 2, True),     # a shared expert of 3 chunks (the last partial), 3 tokens
])
def test_gate_up_kernel_model_matches_the_oracle(experts: int, top_k: int, inter: int,
                                                 shared_inter: int, tokens: int, sm_count: int,
                                                 repeat: bool) -> None:
    rng = np.random.default_rng(inter * tokens)
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
    act, writes, streamed = model_gate_up(x, w, ids, top_k, sh, sm_count)
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
