"""The tensor-core MoE gate/up for decode batches (moe_gate_up_mma_bf16, moe_decode_mma.cu):
its route switch (ATLAS_MOE_GATE_UP_MMA, default off), which launches decode_gate_up makes
under it (recorded by MockGpuBackend), the host backend's act through the new entry against
the existing kernel's, its check cases against float64 on the host, and a numpy model of the
kernel's index math transliterated from the .cu: the distinct-expert derivation (shared
chunks first, then the routed experts in ascending id order), each block's B rows (the
tokens that selected its expert), the K split over warps, the mma.m16n8k16 fragment -> act
cell map and the zero writes: every (token, slot, column) written exactly once, nothing else.
There is no GPU in CI: tools/gpu/check_kernels.py -m moe_decode_mma checks the hardware."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from atlas.core.numerics import bf16_bits_to_f32, f32_to_bf16_bits
from atlas.runtime.cases import moe as moe_cases
from atlas.runtime.host import HostBackend
from atlas.runtime.kernel_abi import MOE_GATE_UP_MMA, MOE_GATE_UP_SILU
from atlas.runtime.kernel_check import CASE_FACTORIES, check, factory_rng
from atlas.runtime.mock import MockGpuBackend
from atlas.runtime.ops import KernelCache, moe
from atlas.runtime.ops.routes import KernelRoutes
from test_reference_kernels_a import test_cuda_entry_points_match_the_abi as _declares_abi

SOURCE = Path(__file__).resolve().parents[2] / "kernels/hopper/common/moe_decode_mma.cu"
ON = KernelRoutes(moe_gate_up_mma=True)
Q30 = moe.MoeShape(experts=128, top_k=8, hidden=2048, inter=768)
Q35 = moe.MoeShape(experts=256, top_k=8, hidden=2048, inter=512, shared_inter=512)

#: the light factory's cases (the full-size ones, gate_up_mma_leaf_cases, draw 5.6 GB of
#: weights: left to the GPU check and the host check script), its " leaf " case dropped
LIGHT = "moe_decode_mma:gate_up_mma_cases"
CASES = [c for c in CASE_FACTORIES[LIGHT](factory_rng(131, LIGHT)) if not moe_cases.is_heavy(c)]


def _constant(name: str) -> int:
    (value,) = re.findall(rf"constexpr int {name} = (\d+);", SOURCE.read_text())
    return int(value)


# ---- route and launches -------------------------------------------------------------------
@pytest.mark.parametrize("env, on", [({}, False), ({"ATLAS_MOE_GATE_UP_MMA": "1"}, True),
                                     ({"ATLAS_MOE_GATE_UP_MMA": "0"}, False)])
def test_the_switch_parses_and_defaults_off(env: dict[str, str], on: bool) -> None:
    assert KernelRoutes.from_env(env).moe_gate_up_mma is on
    assert KernelRoutes().moe_gate_up_mma is False


def _launch(backend, routes: KernelRoutes | None, tokens: int, shape: moe.MoeShape):
    shared = moe.SharedExpertWeights(0x5000, 0x6000, 0) if shape.shared_inter else None
    moe.decode_gate_up(KernelCache(backend, routes), 0, 0x1000, 0x2000, 0x3000, 0x4000, tokens,
                       shape, shared)
    (rec,) = backend.drain_launches()
    return rec


@pytest.mark.parametrize("shape", [Q30, Q35], ids=["qwen3-30b-a3b", "qwen3.5-35b-a3b"])
@pytest.mark.parametrize("tokens", range(1, moe.DECODE_MAX_TOKENS + 1))
@pytest.mark.parametrize("routes", [None, ON, KernelRoutes(moe_gate_up_mma=True,
                                                           moe_gate_up_gemv_max_m=8)],
                         ids=["default", "mma", "mma over the batched GEMV"])
def test_decode_gate_up_takes_the_new_entry_exactly_when_on_at_2_to_8(
        shape: moe.MoeShape, tokens: int, routes: KernelRoutes | None) -> None:
    rec = _launch(MockGpuBackend(), routes, tokens, shape)
    takes = routes is not None and routes.moe_gate_up_mma and tokens >= 2
    assert (rec.func == MOE_GATE_UP_MMA.func) is takes
    if not takes:
        return
    assert rec.module == "moe_decode_mma"
    per = moe.gate_up_mma_tiles(tokens, shape, 132)  # the mock's H200 facts
    assert rec.grid == (-(-(shape.inter // 16) // per),
                        shape.shared_slots + min(tokens * 8, shape.experts), 1)
    assert rec.block == (256, 1, 1) and rec.shared == moe.gate_up_mma_smem() == 102400
    assert [rec.args[n] for n in ("x", "w_gate_up", "topk_ids", "act", "tokens", "top_k",
                                  "hidden", "inter", "experts")] == [
        0x1000, 0x2000, 0x3000, 0x4000, tokens, 8, 2048, shape.inter, shape.experts]
    assert (rec.args["shared_gate_up"], rec.args["shared_slots"],
            rec.args["shared_inter"]) == ((0x5000, 1, 512) if shape.shared_inter else (0, 0, 0))


class _SetWithout(MockGpuBackend):
    """A CUDA kernel set without the module (gb10's): the route falls back."""

    @property
    def module_names(self) -> list[str]:
        return ["moe_decode", "moe_router"]


class _SetWith(MockGpuBackend):
    @property
    def module_names(self) -> list[str]:
        return ["moe_decode", "moe_decode_mma", "moe_router"]


def test_a_kernel_set_without_the_module_keeps_the_column_loop() -> None:
    assert _launch(_SetWithout(), ON, 8, Q30).func == MOE_GATE_UP_SILU.func
    assert _launch(_SetWith(), ON, 8, Q30).func == MOE_GATE_UP_MMA.func


def test_the_launch_geometry_matches_the_kernel_constants() -> None:
    assert moe.GATE_UP_MMA_THREADS == 32 * _constant("kWarps")
    assert moe.GATE_UP_MMA_COLS == _constant("kCols")
    assert moe.GATE_UP_MMA_RING_BUDGET == _constant("kRingBudget")
    assert moe.GATE_UP_MMA_MAX_STAGES == _constant("kMaxStages")
    assert moe.DECODE_MAX_TOKENS * moe.ROUTER_MAX_TOP_K == _constant("kMaxPairs")
    assert moe.ROUTER_MAX_EXPERTS == 32 * _constant("kKeyWords")
    # two blocks an SM: 2 x (rings + 5.1 KiB static (routing 1.1 KiB, the reduction's
    # exchange 4 KiB) + 1 KiB the driver keeps) <= 228 KiB
    assert moe.GATE_UP_MMA_BLOCKS_PER_SM == 2
    assert 2 * (moe.gate_up_mma_smem() + 5200 + 1024) <= 228 * 1024


@pytest.mark.parametrize("shape, tokens, per, grid", [
    (Q30, 8, 12, (4, 64, 1)), (Q30, 4, 6, (8, 32, 1)),
    (Q35, 8, 8, (4, 65, 1)), (Q35, 4, 4, (8, 33, 1))])
def test_tiles_a_block_make_about_one_wave_on_an_h200(shape, tokens, per, grid) -> None:
    assert moe.gate_up_mma_tiles(tokens, shape, 132) == per
    assert moe.gate_up_mma_grid(tokens, shape, 132) == grid
    assert grid[0] * grid[1] <= 132 * moe.GATE_UP_MMA_BLOCKS_PER_SM


def test_tiles_a_block_are_what_the_kernel_derives_from_its_grid() -> None:
    for sm in (1, 2, 3, 7, 66, 132, 1000):
        for shape in (Q30, Q35, moe.MoeShape(4, 4, 144, 1008), moe.MoeShape(40, 28, 64, 1008,
                                                                             1040)):
            for tokens in range(2, 9):
                tiles = shape.inter // 16
                per = moe.gate_up_mma_tiles(tokens, shape, sm)
                gx, _, _ = moe.gate_up_mma_grid(tokens, shape, sm)
                assert 1 <= per <= tiles and per == -(-tiles // gx)  # the kernel's T
                assert per * (gx - 1) < tiles <= per * gx  # no empty block, every tile


def test_cuda_entry_points_declare_exactly_the_abi() -> None:
    _declares_abi("moe_decode_mma")


# ---- host backend and cases ---------------------------------------------------------------
def test_host_act_through_the_new_entry_equals_the_column_loop_kernels() -> None:
    rng = np.random.default_rng(7)
    shape = moe.MoeShape(experts=16, top_k=4, hidden=256, inter=96, shared_inter=160)
    tokens = 6
    ids = moe_cases.random_ids(rng, tokens, 16, 4)
    ids[2, 1] = -1
    ids = np.concatenate([ids, np.tile(16 + np.arange(shape.shared_slots), (tokens, 1))], axis=1)
    backend = HostBackend()
    x = backend.upload(moe_cases.random_bf16(rng, (tokens, 256)))
    w = backend.upload(moe_cases.random_bf16(rng, (16, 192, 256), 1 / 16))
    sh = backend.upload(moe_cases.random_bf16(rng, (320, 256), 1 / 16))
    topk = backend.upload(ids.astype(np.int32))
    acts = []
    for routes in (ON, KernelRoutes(moe_gate_up_gemv=False)):
        act = backend.alloc(2 * tokens * shape.slots * shape.inter)
        kc = KernelCache(backend, routes)
        moe.decode_gate_up(kc, 0, x, w, topk, act, tokens, shape,
                           moe.SharedExpertWeights(sh, 0, 0))
        acts.append(backend.download(act, np.uint16, (tokens, shape.slots, shape.inter)))
    np.testing.assert_array_equal(acts[0], acts[1])
    assert (acts[0][2, 1] == 0).all()  # the id of another rank: zeros


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_reference_matches_oracle(case) -> None:
    result = check(HostBackend(), case)
    assert result.passed, result.detail


def test_cases_cover_the_edges() -> None:
    factories = {k for k in CASE_FACTORIES if k.startswith("moe_decode_mma:")}
    assert factories == {LIGHT, "moe_decode_mma:gate_up_mma_leaf_cases"}
    names = [c.name for c in CASES]
    assert all("mma" in n for n in names) and len(CASES) >= 10
    assert {c.module for c in CASES} == {"moe_decode_mma"}
    for edge in ("all tokens the same", "every token a different set", "k=e=4", "t8 ties",
                 "invalid ids", "partial chunk", "then the down"):
        assert any(edge in n for n in names), edge


# ---- the kernel's index math in numpy -----------------------------------------------------
WARPS, COLS = 8, 16


def _bf(v: float) -> float:
    """A float32 value rounded to bf16 (atlas::round_bf16)."""
    return float(bf16_bits_to_f32(f32_to_bf16_bits(np.asarray([v], np.float32)))[0])


def _pair_key(ids: np.ndarray, q: int, slots: int, top_k: int, experts: int) -> int:
    j = q % slots
    if j >= top_k:
        return experts + (j - top_k)
    e = int(ids[q])
    return e if 0 <= e < experts else -1 - q


def _nth_key(bits: list[int], r: int) -> int:
    """nth_key: a warp scan of the words' set-bit counts, then the word's r - before-th bit."""
    counts = [bin(w).count("1") for w in bits] + [0] * (32 - len(bits))
    incl = np.cumsum(counts)
    for lane in range(32):
        before = int(incl[lane]) - counts[lane]
        if before <= r < incl[lane]:
            w = bits[lane]
            for _ in range(r - before):
                w &= w - 1
            return 32 * lane + (w & -w).bit_length() - 1
    return -1


def _nth_bit(mask: int, n: int) -> int:
    for _ in range(n):
        mask &= mask - 1
    return (mask & -mask).bit_length() - 1


def model_gate_up_mma(x: np.ndarray, w: np.ndarray, ids: np.ndarray, top_k: int,
                      sh: np.ndarray | None, shared_slots: int, sm_count: int = 132
                      ) -> tuple[np.ndarray, np.ndarray, list[tuple[int, int]]]:
    """act [tokens, slots, inter] (NaN where unwritten), the write count of every cell, and
    the (expert key, column tile) weight streams, as the grid of moe_gate_up_mma_bf16 (for
    `sm_count` SMs) computes them: T = ceil(tiles / gridDim.x) column tiles a block, the
    routing read once a block, the tiles streamed in order."""
    tokens, hidden = x.shape
    experts, rows2, _ = w.shape
    inter = rows2 // 2
    shared_inter = 0 if sh is None else sh.shape[0] // 2
    slots = top_k + shared_slots
    n = tokens * slots
    flat = ids.reshape(-1)
    shape = moe.MoeShape(experts, top_k, hidden, inter, shared_inter)
    gx, gy, _ = moe.gate_up_mma_grid(tokens, shape, sm_count)
    col_tiles = inter // COLS
    per = -(-col_tiles // gx)  # the kernel's T, from its grid
    kc = hidden // 8
    steps = -(-kc // 4)
    # the K split: every k-step of a row in exactly one warp's range
    spans = [(steps * wp // WARPS, steps * (wp + 1) // WARPS) for wp in range(WARPS)]
    assert [s for a, b in spans for s in range(a, b)] == list(range(steps))
    act = np.full((tokens, slots, inter), np.nan)
    writes = np.zeros((tokens, slots, inter), np.int64)
    streamed = []
    for d in range(gy):
        for bx in range(gx):
            tile0 = min(per * bx, col_tiles)
            tile_end = min(tile0 + per, col_tiles)
            col_lo, col_hi = COLS * tile0, COLS * tile_end
            assert tile_end > tile0  # no idle block
            key = [_pair_key(flat, q, slots, top_k, experts) for q in range(n)]
            bits = [0] * (moe.ROUTER_MAX_EXPERTS // 32)
            for k in key:
                if 0 <= k < experts:
                    bits[k >> 5] |= 1 << (k & 31)
            shared_block = d < shared_slots
            live_end = tile_end
            if shared_block:  # the chunk's tiles below shared_inter stream, the rest are zeros
                live_end = min(max((shared_inter - d * inter) // COLS, tile0), tile_end)
            e = experts + d if shared_block else _nth_key(bits, d - shared_slots)
            mask = 0
            if e >= 0:
                for t in range(tokens):
                    if any(key[t * slots + j] == e for j in range(slots)):
                        mask |= 1 << t
            if d == 0:  # the zeros of ids outside [0, experts)
                for q in range(n):
                    if key[q] < 0:
                        cells = (q // slots, q % slots, slice(col_lo, col_hi))
                        act[cells] = 0.0
                        writes[cells] += 1
            if e < 0:
                continue
            if shared_block:
                for t in range(tokens):
                    cells = (t, top_k + d, slice(COLS * live_end, col_hi))
                    act[cells] = 0.0
                    writes[cells] += 1
            nrows = bin(mask).count("1")
            assert 1 <= nrows <= 8
            b = np.zeros((8, hidden))
            for g in range(nrows):
                b[g] = x[_nth_bit(mask, g)]
            for tile in range(tile0, live_end):  # in order, the next one's weights prefetched
                col0 = COLS * tile
                streamed.append((e, tile))
                # A tile 0: the gate rows of columns col0 .. col0 + 15 (lane g: rows g, g + 8),
                # tile 1 their up rows; B row g: token nth_bit(mask, g), zero-filled past nrows
                if shared_block:
                    shared_col = d * inter + col0
                    assert shared_col + COLS <= shared_inter
                    gate = sh[shared_col:shared_col + COLS]
                    up = sh[shared_inter + shared_col:shared_inter + shared_col + COLS]
                else:
                    gate, up = w[e, col0:col0 + COLS], w[e, inter + col0:inter + col0 + COLS]
                c_gate, c_up = gate @ b.T, up @ b.T  # C^T [weight row][B row]
                for lane in range(32):
                    g, c = lane >> 2, lane & 3
                    for i in range(4):
                        r = 2 * c + (i & 1)
                        if r >= nrows:
                            continue
                        t, m = _nth_bit(mask, r), g + 8 * (i >> 1)
                        gs, us = np.float32(_bf(c_gate[m, r])), np.float32(_bf(c_up[m, r]))
                        with np.errstate(over="ignore"):  # float32, as the kernel's expf
                            v = _bf(np.float32(_bf(gs / (np.float32(1) + np.exp(-gs)))) * us)
                        for j in range(slots):
                            if key[t * slots + j] == e:
                                act[t, j, col0 + m] = v
                                writes[t, j, col0 + m] += 1
    return act, writes, streamed


def _inputs(rng: np.random.Generator, shape: moe.MoeShape, ids: np.ndarray
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None, np.ndarray]:
    tokens = len(ids)
    x = bf16_bits_to_f32(moe_cases.random_bf16(rng, (tokens, shape.hidden))).astype(np.float64)
    w = bf16_bits_to_f32(moe_cases.random_bf16(
        rng, (shape.experts, 2 * shape.inter, shape.hidden), shape.hidden ** -0.5)
    ).astype(np.float64)
    sh = None
    full = ids
    if shape.shared_inter:
        sh = bf16_bits_to_f32(moe_cases.random_bf16(
            rng, (2 * shape.shared_inter, shape.hidden), shape.hidden ** -0.5)).astype(np.float64)
        full = np.concatenate([ids, np.tile(shape.experts + np.arange(shape.shared_slots),
                                            (tokens, 1))], axis=1)
    return x, w, sh, full.astype(np.int32)


def _oracle(x, w, sh, ids, shape: moe.MoeShape) -> np.ndarray:
    k = shape.top_k
    act = np.zeros((len(x), shape.slots, shape.inter))
    act[:, :k] = moe_cases.oracle_gate_up(x, f32_to_bf16_bits(w.astype(np.float32)),
                                          ids[:, :k], shape.inter)
    if sh is not None:
        full = np.zeros((len(x), shape.shared_slots * shape.inter))
        full[:, :shape.shared_inter] = moe_cases.oracle_gate_up(
            x, f32_to_bf16_bits(sh.astype(np.float32))[None], np.zeros((len(x), 1), np.int32),
            shape.shared_inter)[:, 0]
        act[:, k:] = full.reshape(len(x), shape.shared_slots, shape.inter)
    return act


def _ties(tokens: int) -> np.ndarray:
    ids = np.tile(np.arange(4, dtype=np.int32), (tokens, 1))
    ids[1] = ids[1][::-1]
    ids[tokens - 1, 2:] = [11, 7]
    return ids


MODEL_SHAPES = [
    # (name, shape, ids from rng)
    ("t2 e16 k4", moe.MoeShape(16, 4, 64, 48), lambda r: moe_cases.random_ids(r, 2, 16, 4)),
    ("t8 all tokens the same experts", moe.MoeShape(16, 4, 64, 32),
     lambda r: np.stack([np.roll(np.arange(4), t) + 5 for t in range(8)])),
    ("t8 every token a different set", moe.MoeShape(32, 4, 64, 32),
     lambda r: r.permutation(32).reshape(8, 4)),
    ("t5 k=e=4 partial k-step", moe.MoeShape(4, 4, 48, 32),
     lambda r: moe_cases.random_ids(r, 5, 4, 4)),
    ("t8 ties", moe.MoeShape(12, 4, 64, 32), lambda r: _ties(8)),
    ("t3 invalid ids", moe.MoeShape(16, 4, 64, 48),
     lambda r: np.array([[3, -1, 9, 16], [3, 5, 9, 1], [200, 9, 3, 0]])),
    ("t4 shared partial chunk", moe.MoeShape(8, 3, 64, 32, 48),
     lambda r: moe_cases.random_ids(r, 4, 8, 3)),
    ("t8 shared four chunks", moe.MoeShape(6, 2, 32, 16, 64),
     lambda r: moe_cases.random_ids(r, 8, 6, 2)),
    ("t3 duplicate id in one token", moe.MoeShape(8, 3, 32, 16),
     lambda r: np.array([[2, 2, 5], [5, 1, 2], [0, 7, 6]])),
    # 7 column tiles, the shared chunk 1 live for 4 (sm16: T = 4, the last block 3 tiles)
    ("t3 invalid ids shared 176 i112", moe.MoeShape(16, 4, 32, 112, 176),
     lambda r: np.array([[3, -1, 9, 16], [3, 5, 9, 1], [200, 9, 3, 0]])),
]


@pytest.mark.parametrize("sm_count", [132, 16, 3, 1], ids=["h200", "sm16", "sm3", "sm1"])
@pytest.mark.parametrize("name, shape, make", MODEL_SHAPES, ids=[m[0] for m in MODEL_SHAPES])
def test_index_model_writes_every_cell_once_with_the_oracles_values(name, shape, make,
                                                                    sm_count) -> None:
    rng = np.random.default_rng(len(name))
    ids = np.asarray(make(rng), np.int32)
    x, w, sh, full = _inputs(rng, shape, ids)
    act, writes, streamed = model_gate_up_mma(x, w, full, shape.top_k, sh, shape.shared_slots,
                                              sm_count)
    assert (writes == 1).all(), np.argwhere(writes != 1)[:4]
    # each (distinct expert, column tile) streamed exactly once: the rows read once a batch
    routed = {int(e) for e in ids.reshape(-1) if 0 <= e < shape.experts}
    tiles = shape.inter // 16
    live_shared = [(shape.experts + c, t) for c in range(shape.shared_slots)
                   for t in range(tiles) if c * shape.inter + 16 * t < shape.shared_inter]
    assert sorted(streamed) == sorted([(e, t) for e in routed for t in range(tiles)]
                                      + live_shared)
    want = _oracle(x, w, sh, full, shape)
    # the model sums in float64 where the oracle does too: the same bf16 values, except where
    # a dot product sits on a rounding midpoint (none in these draws)
    np.testing.assert_array_equal(act, want)


def test_the_grid_covers_every_distinct_expert_of_any_routing() -> None:
    rng = np.random.default_rng(3)
    for shape in (Q30, Q35, moe.MoeShape(4, 4, 64, 32), moe.MoeShape(10, 3, 64, 32, 32)):
        for tokens in range(2, 9):
            _, gy, _ = moe.gate_up_mma_grid(tokens, shape, 132)
            for _ in range(20):
                ids = moe_cases.random_ids(rng, tokens, shape.experts, shape.top_k)
                assert len(np.unique(ids)) + shape.shared_slots <= gy
            worst = min(tokens * shape.top_k, shape.experts) + shape.shared_slots
            assert gy == worst


def test_nth_key_walks_the_bitmap_in_ascending_order() -> None:
    rng = np.random.default_rng(5)
    for _ in range(50):
        present = sorted(rng.choice(512, size=rng.integers(1, 72), replace=False).tolist())
        bits = [0] * 16
        for e in present:
            bits[e >> 5] |= 1 << (e & 31)
        assert [_nth_key(bits, r) for r in range(len(present) + 2)] == present + [-1, -1]
