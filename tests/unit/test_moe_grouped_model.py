"""A numpy model of moe_grouped.cu's index math, transliterated from the kernel: the align
kernel's count / scan / ballot placement, and the grouped GEMM's per-thread row pointers,
cp.async copies into the swizzled shared tiles, ldmatrix fragment loads, mma.m16n8k16
accumulation (the PTX ISA fragment layouts of test_gemv_mma) and both epilogues (SwiGLU over
interleaved gate/up n-tiles; the un-permuting scatter of the down projection). Checked
against the float64 oracles of cases/moe.py. There is no GPU in CI: this checks the kernel's
indexing against the documented layouts; tools/gpu/check_kernels.py checks the hardware."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from atlas.core.numerics import bf16_bits_to_f32, f32_to_bf16_bits
from atlas.runtime.cases import moe as moe_cases
from atlas.runtime.ops import moe
from test_gemv_mma import C, G, LANES, _mma

SOURCE = Path(__file__).resolve().parents[2] / "kernels/hopper/common/moe_grouped.cu"


def _constant(name: str) -> int:
    (value,) = re.findall(rf"constexpr int {name} = (\d+);", SOURCE.read_text())
    return int(value)


TILE_M, TILE_N, THREADS = _constant("kTileM"), _constant("kTileN"), _constant("kThreads")
BK = _constant("kBK")
CHUNKS = BK // 8
WARP_M, WARP_N = TILE_M // 2, TILE_N // 2


def test_launch_constants_match_the_kernel() -> None:
    assert (moe.MOE_TILE_M, moe.MOE_TILE_N, moe.MOE_GROUPED_THREADS) == (TILE_M, TILE_N, THREADS)
    assert moe.ALIGN_MAX_EXPERTS == _constant("kMaxExperts")
    assert moe.ALIGN_EXPERTS_PER_BLOCK == _constant("kAlignWarps")


def _bf16(x: np.ndarray) -> np.ndarray:
    return bf16_bits_to_f32(f32_to_bf16_bits(np.asarray(x, np.float32))).astype(np.float64)


# ---- align ----------------------------------------------------------------------------------
def model_align(ids: np.ndarray, experts: int, max_tiles: int) -> tuple[np.ndarray, np.ndarray]:
    """moe_align_i32 block by block, warp by warp (poisoned outputs: -7 never written)."""
    slots = len(ids)
    sorted_slots = np.full(max_tiles * TILE_M, -7, np.int64)
    tile_expert = np.full(max_tiles, -7, np.int64)
    warps = moe.ALIGN_EXPERTS_PER_BLOCK
    for bx in range(-(-experts // warps)):
        counts = np.zeros(experts, np.int64)
        for s in range(slots):
            if 0 <= ids[s] < experts:
                counts[ids[s]] += 1
        first = np.zeros(experts + 1, np.int64)
        carry = 0
        for base in range(0, experts, 32):  # warp 0: inclusive scan of 32 tile counts a step
            e = base + LANES
            tiles = np.where(e < experts, -(-counts[np.minimum(e, experts - 1)] // TILE_M), 0)
            inclusive = np.cumsum(tiles)
            first[e[e < experts]] = (carry + inclusive - tiles)[e < experts]
            carry += inclusive[31]
        first[experts] = carry
        used, capacity = min(first[experts], max_tiles), max_tiles * TILE_M
        if bx == 0:
            for e in range(experts):
                for t in range(first[e], min(first[e + 1], max_tiles)):
                    tile_expert[t] = e
            tile_expert[used:] = -1
            sorted_slots[used * TILE_M:capacity] = -1
        for warp in range(warps):
            e = bx * warps + warp
            if e >= experts:
                continue
            base, placed = first[e] * TILE_M, 0
            for s0 in range(0, slots, 32):
                s = s0 + LANES
                mine = (s < slots) & (ids[np.minimum(s, slots - 1)] == e)
                at = base + placed + np.cumsum(mine) - mine  # popc(hits & lanes below)
                ok = mine & (at < capacity)
                sorted_slots[at[ok]] = s[ok]
                placed += int(mine.sum())
            end = -(-placed // TILE_M) * TILE_M
            sorted_slots[base + placed:min(base + end, capacity)] = -1
    return sorted_slots, tile_expert


@pytest.mark.parametrize("tokens, top_k, experts, seed", [
    (40, 4, 16, 0), (1, 8, 128, 1), (300, 8, 128, 2), (70, 2, 3, 3), (9, 4, 600, 4)])
def test_align_model_matches_the_oracle(tokens: int, top_k: int, experts: int, seed: int
                                        ) -> None:
    rng = np.random.default_rng(seed)
    ids = moe_cases.random_ids(rng, tokens, experts, top_k).reshape(-1)
    ids[::7] = -1  # not this rank's
    tiles = moe.max_tiles(len(ids), experts)
    got = model_align(ids, experts, tiles)
    want = moe_cases.oracle_align(ids, experts, tiles)
    assert (got[0] == want[0]).all() and (got[1] == want[1]).all()


# ---- grouped GEMM -------------------------------------------------------------------------
def swizzle(row: np.ndarray | int, chunk: np.ndarray | int) -> np.ndarray:
    """atlas::swizzle_offset<4> (mma_util.cuh): element offset of a 16-byte chunk."""
    return (np.asarray(row) * 4 + (np.asarray(chunk) ^ ((np.asarray(row) >> 1) & 3))) * 8


def copy_row(tid: int, it: int) -> int:
    return tid // CHUNKS + it * (THREADS // CHUNKS)


def load_rows(rows_of: list[list[np.ndarray | None]], nrows: int, k: int, kt: int
              ) -> np.ndarray:
    """load_rows<NROWS>: thread tid copies chunk tid % 4 of its rows; every element once."""
    smem = np.full(nrows * BK, np.nan)
    for tid in range(THREADS):
        ch = tid % CHUNKS
        gk = kt * BK + ch * 8
        for it in range(nrows * CHUNKS // THREADS):
            r = tid // CHUNKS + it * (THREADS // CHUNKS)
            src = rows_of[tid][it]
            at = int(swizzle(r, ch))
            assert np.isnan(smem[at:at + 8]).all(), "two copies to one chunk"
            smem[at:at + 8] = src[gk:gk + 8] if src is not None and gk < k else 0.0
    assert not np.isnan(smem).any(), "a chunk of the stage was never copied"
    return smem


def ldmatrix_x4(smem: np.ndarray, addr: np.ndarray) -> np.ndarray:
    """[32 lanes, 4 regs, 2]: lanes 8i..8i+7 address the rows of matrix i; lane l receives
    row l // 4, elements 2 (l % 4), 2 (l % 4) + 1 of each matrix."""
    out = np.zeros((32, 4, 2))
    for i in range(4):
        rows = np.stack([smem[a:a + 8] for a in addr[8 * i:8 * i + 8]])
        out[:, i, 0], out[:, i, 1] = rows[G, 2 * C], rows[G, 2 * C + 1]
    return out


def mainloop(a_rows: list[list], b_rows: list[list], k: int) -> np.ndarray:
    """acc [warps=4][kMTiles=2][kNTiles=8][32 lanes, 4] of grouped_mainloop."""
    acc = np.zeros((4, WARP_M // 16, WARP_N // 8, 32, 4))
    for kt in range(-(-k // BK)):
        sa = load_rows(a_rows, TILE_M, k, kt)
        sb = load_rows(b_rows, TILE_N, k, kt)
        for warp in range(4):
            wm, wn = warp // 2, warp % 2
            for kk in range(BK // 16):
                af = [ldmatrix_x4(sa, swizzle(wm * WARP_M + i * 16 + (LANES & 15),
                                              2 * kk + (LANES >> 4)))
                      for i in range(WARP_M // 16)]
                bf = {}
                for j in range(0, WARP_N // 8, 2):
                    r = wn * WARP_N + j * 8 + (LANES & 7) + ((LANES >> 4) << 3)
                    t = ldmatrix_x4(sb, swizzle(r, 2 * kk + ((LANES >> 3) & 1)))
                    bf[j], bf[j + 1] = t[:, 0:2], t[:, 2:4]
                for i in range(WARP_M // 16):
                    for j in range(WARP_N // 8):
                        acc[warp, i, j] += _mma(af[i], bf[j])
    return acc


def acc_row(warp: int, i: int, h: int) -> np.ndarray:
    return (warp // 2) * WARP_M + i * 16 + (LANES >> 2) + h * 8


def model_grouped(x, w_gu, w_d, ids, shape: moe.MoeShape):
    """(act, y, sorted_slots, tile_expert) through the kernels' index math; unwritten
    elements stay NaN."""
    flat = ids.reshape(-1)
    tiles = moe.max_tiles(len(flat), shape.experts)
    sorted_slots, tile_expert = model_align(flat, shape.experts, tiles)
    inter, hidden, top_k = shape.inter, shape.hidden, shape.top_k
    act = np.full((tiles * TILE_M, inter), np.nan)
    y = np.full((len(flat), hidden), np.nan)
    n_rows_a, n_rows_b = TILE_M * CHUNKS // THREADS, TILE_N * CHUNKS // THREADS
    for tile in range(tiles):
        e = tile_expert[tile]
        if not 0 <= e < shape.experts:
            continue
        p0 = tile * TILE_M
        for bx in range(-(-2 * inter // TILE_N)):  # gate_up
            col0 = bx * (TILE_N // 2)
            a_rows, b_rows = [], []
            for tid in range(THREADS):
                slots = [sorted_slots[p0 + copy_row(tid, it)] for it in range(n_rows_a)]
                a_rows.append([x[s // top_k] if s >= 0 else None for s in slots])
                rows = []
                for it in range(n_rows_b):
                    r = copy_row(tid, it)
                    col = col0 + (r >> 4) * 8 + (r & 7)
                    wrow = ((r >> 3) & 1) * inter + col
                    rows.append(w_gu[e][wrow] if col < inter else None)
                b_rows.append(rows)
            acc = mainloop(a_rows, b_rows, hidden)
            for warp in range(4):
                wn = warp % 2
                for i in range(WARP_M // 16):
                    for j in range(0, WARP_N // 8, 2):
                        col = col0 + (wn * WARP_N + j * 8) // 2 + (LANES & 3) * 2
                        for h in range(2):
                            p = p0 + acc_row(warp, i, h)
                            for c in range(2):
                                g = _bf16(acc[warp, i, j][:, 2 * h + c]).astype(np.float32)
                                u = _bf16(acc[warp, i, j + 1][:, 2 * h + c])
                                v = _bf16(_bf16(g / (np.float32(1) + np.exp(-g))) * u)
                                keep = col < inter
                                act[p[keep], col[keep] + c] = v[keep]
        for bx in range(-(-hidden // TILE_N)):  # down
            n0 = bx * TILE_N
            a_rows = [[act[p0 + copy_row(tid, it)] for it in range(n_rows_a)]
                      for tid in range(THREADS)]
            b_rows = [[w_d[e][n0 + copy_row(tid, it)] if n0 + copy_row(tid, it) < hidden
                       else None for it in range(n_rows_b)] for tid in range(THREADS)]
            acc = mainloop(a_rows, b_rows, inter)
            for warp in range(4):
                wn = warp % 2
                for i in range(WARP_M // 16):
                    for h in range(2):
                        slot = sorted_slots[p0 + acc_row(warp, i, h)]
                        for j in range(WARP_N // 8):
                            col = n0 + wn * WARP_N + j * 8 + (LANES & 3) * 2
                            keep = (slot >= 0) & (col < hidden)
                            for c in range(2):
                                y[slot[keep], col[keep] + c] = _bf16(
                                    acc[warp, i, j][keep, 2 * h + c])
    return act, y, sorted_slots, tile_expert


# ---- the wgmma kernels (moe_grouped_sm90.cu) ----------------------------------------------
SM90_SOURCE = SOURCE.with_name("moe_grouped_sm90.cu")


def _sm90_constant(name: str) -> int:
    (value,) = re.findall(rf"constexpr int {name} = (\d+);", SM90_SOURCE.read_text())
    return int(value)


SM90_N, SM90_THREADS, SM90_BK = (_sm90_constant(n) for n in ("kTileN", "kThreads", "kBK"))


def test_sm90_launch_constants_match_the_kernel() -> None:
    assert _sm90_constant("kTileM") == moe.MOE_TILE_M
    assert (moe.MOE_SM90_TILE_N, moe.MOE_SM90_THREADS) == (SM90_N, SM90_THREADS)
    stages = _sm90_constant("kStages")
    assert moe.MOE_SM90_SMEM == stages * (TILE_M + SM90_N) * SM90_BK * 2 + 1024


def _sm90_copies(nrows: int) -> list[list[int]]:
    """Tile rows each thread copies (chunk tid % 8 of rows tid / 8 + 16 it); every (row,
    chunk) of the tile exactly once."""
    chunks, step = SM90_BK // 8, SM90_THREADS // (SM90_BK // 8)
    rows = [[tid // chunks + it * step for it in range(nrows * chunks // SM90_THREADS)]
            for tid in range(SM90_THREADS)]
    seen = sorted((r, tid % chunks) for tid in range(SM90_THREADS) for r in rows[tid])
    assert seen == [(r, c) for r in range(nrows) for c in range(chunks)]
    return rows


def _sm90_block(a_tile: np.ndarray, b_tile: np.ndarray) -> np.ndarray:
    """acc [128 threads, 128 registers] of a 64 x 256 block, placed by the documented wgmma
    accumulator fragment layout (wgmma_util.cuh)."""
    prod = a_tile @ b_tile.T
    acc = np.zeros((SM90_THREADS, 128))
    for tid in range(SM90_THREADS):
        lane, warp = tid % 32, tid // 32
        for j in range(128):
            acc[tid, j] = prod[16 * warp + lane // 4 + 8 * ((j >> 1) & 1),
                               8 * (j >> 2) + 2 * (lane % 4) + (j & 1)]
    return acc


def _sm90_row(tid: int, j: int) -> int:
    return 16 * (tid // 32) + (tid % 32) // 4 + 8 * ((j >> 1) & 1)


def model_grouped_sm90(x, w_gu, w_d, ids, shape: moe.MoeShape):
    """(act, y) of the wgmma kernels' row pointers, B row maps and epilogues (the main loop's
    shared layout is gemm_sm90's, modelled in test_gemm_sm90)."""
    flat = ids.reshape(-1)
    tiles = moe.max_tiles(len(flat), shape.experts)
    sorted_slots, tile_expert = moe_cases.oracle_align(flat, shape.experts, tiles)
    inter, hidden, top_k = shape.inter, shape.hidden, shape.top_k
    act = np.full((tiles * TILE_M, inter), np.nan)
    y = np.full((len(flat), hidden), np.nan)
    a_copy, b_copy = _sm90_copies(TILE_M), _sm90_copies(SM90_N)

    def tile_of(rows_of, nrows: int, width: int, fetch) -> np.ndarray:
        tile = np.full((nrows, width), np.nan)
        for tid in range(SM90_THREADS):
            for r in rows_of[tid]:
                src = fetch(tid, r)
                tile[r] = src if src is not None else 0.0
        return tile

    for tile in range(tiles):
        e = tile_expert[tile]
        if e < 0:
            continue
        p0 = tile * TILE_M

        def x_row(tid: int, r: int):
            slot = sorted_slots[p0 + r]
            return x[slot // top_k] if slot >= 0 else None

        a_tile = tile_of(a_copy, TILE_M, hidden, x_row)
        for bx in range(-(-2 * inter // SM90_N)):
            col0 = bx * (SM90_N // 2)

            def gu_row(tid: int, r: int):
                col = col0 + (r >> 4) * 8 + (r & 7)
                return w_gu[e][((r >> 3) & 1) * inter + col] if col < inter else None

            acc = _sm90_block(a_tile, tile_of(b_copy, SM90_N, hidden, gu_row))
            for tid in range(SM90_THREADS):
                for j in range(0, 128, 2):
                    if (j >> 2) & 1:
                        continue
                    col = col0 + (j >> 3) * 8 + 2 * (tid & 3)
                    if col >= inter:
                        continue
                    g = _bf16(acc[tid, j:j + 2]).astype(np.float32)
                    u = _bf16(acc[tid, j + 4:j + 6])
                    act[p0 + _sm90_row(tid, j), col:col + 2] = _bf16(
                        _bf16(g / (np.float32(1) + np.exp(-g))) * u)
        act_tile = tile_of(a_copy, TILE_M, inter, lambda tid, r: act[p0 + r])
        for bx in range(-(-hidden // SM90_N)):
            n0 = bx * SM90_N
            acc = _sm90_block(act_tile, tile_of(
                b_copy, SM90_N, inter,
                lambda tid, r: w_d[e][n0 + r] if n0 + r < hidden else None))
            for tid in range(SM90_THREADS):
                lo, hi = (sorted_slots[p0 + _sm90_row(tid, j)] for j in (0, 2))
                for j in range(0, 128, 2):
                    slot = hi if (j >> 1) & 1 else lo
                    col = n0 + 8 * (j >> 2) + 2 * (tid & 3)
                    if slot >= 0 and col < hidden:
                        y[slot, col:col + 2] = _bf16(acc[tid, j:j + 2])
    return act, y, sorted_slots, tile_expert


@pytest.mark.parametrize("model, tokens, shape", [
    ("mma.sync", 40, moe.MoeShape(experts=3, top_k=2, hidden=80, inter=80)),  # partial tiles
    ("mma.sync", 9, moe.MoeShape(experts=4, top_k=4, hidden=48, inter=144)),  # K 1.5 tiles
    ("wgmma", 20, moe.MoeShape(experts=3, top_k=2, hidden=320, inter=208)),  # partial blocks
    ("wgmma", 9, moe.MoeShape(experts=4, top_k=4, hidden=48, inter=144)),
])
def test_grouped_gemm_models_match_the_oracle(model: str, tokens: int, shape: moe.MoeShape
                                              ) -> None:
    """Both grouped GEMMs' index models: every row of a used tile written (padding rows
    zero), act and the un-permuted y equal to the oracle, rows of invalid slots untouched."""
    rng = np.random.default_rng(tokens)
    ids = moe_cases.random_ids(rng, tokens, shape.experts, shape.top_k)
    ids[2, 0] = -1
    w_gu_bits, w_d_bits = moe_cases.expert_weights(rng, shape)
    x_bits = moe_cases.random_bf16(rng, (tokens, shape.hidden))
    f64 = [bf16_bits_to_f32(b).astype(np.float64) for b in (x_bits, w_gu_bits, w_d_bits)]
    run = model_grouped if model == "mma.sync" else model_grouped_sm90
    act, y, sorted_slots, tile_expert = run(*f64, ids, shape)
    want = moe_cases.oracle_experts(*f64, ids, np.ones(ids.shape, np.float32))
    flat = ids.reshape(-1)
    live = sorted_slots >= 0
    used_rows = np.repeat(tile_expert >= 0, TILE_M)
    assert not np.isnan(act[used_rows]).any() and (act[used_rows & ~live] == 0).all()
    np.testing.assert_allclose(act[live], want["act"].reshape(len(flat), -1)[sorted_slots[live]],
                               atol=1e-2, rtol=1e-2)
    valid = flat >= 0
    assert not np.isnan(y[valid]).any() and np.isnan(y[~valid]).all()
    np.testing.assert_allclose(y[valid], want["y"].reshape(len(flat), -1)[valid],
                               atol=1e-2, rtol=1e-2)
