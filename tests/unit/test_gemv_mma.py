"""The batched decode GEMV on tensor cores (gemv_mma): its reference and check cases, the
launch builder's geometry and preconditions, and a numpy model of the kernel's fragment
index math (lane loads -> mma.m16n8k16 operands per the PTX ISA layouts -> warp split of K
-> output scatter, for 32- and 64-row blocks) checked against float64 x @ w.T, and the rule
by which the kernel recovers the host's row choice from the grid. There is no GPU in CI;
the device check of the kernel itself is tools/gpu/check_kernels.py over the same cases."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from atlas.runtime.cases import gemv_mma as gemv_mma_case_defs
from atlas.runtime.host import HostBackend
from atlas.runtime.kernel_check import check
from atlas.runtime.mock import MockGpuBackend
from atlas.runtime.ops import KernelCache, matmul_batched
# the elementwise kernels' check that a .cu file declares exactly its module's ABI entries
from test_reference_kernels_a import test_cuda_entry_points_match_the_abi as _declares_abi

SOURCE = Path(__file__).resolve().parents[2] / "kernels/hopper/common/gemv_mma.cu"
#: the host reference of the small shapes (the wide cases' 10..50M-element inputs would take
#: seconds to draw and multiply here, and exercise nothing the small ones do not on the host)
CASES = [gemv_mma_case_defs.gemv_mma_case(np.random.default_rng(64), *shape)
         for shape in gemv_mma_case_defs.GEMV_MMA_SHAPES if shape[1] * shape[2] <= 2 ** 21]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_reference_matches_oracle(case) -> None:
    result = check(HostBackend(), case)
    assert result.passed, result.detail


def test_cases_cover_the_layout_edges() -> None:
    shapes = gemv_mma_case_defs.GEMV_MMA_SHAPES
    assert {c.module for c in CASES} == {"gemv_mma"}
    assert len(CASES) >= 10
    assert {9, 16, 17, 33, 64} <= {m for m, _, _, _ in shapes}
    assert any(n % 32 == 16 for _, n, _, _ in shapes)  # n = 16 * odd
    assert any(k % 32 for _, _, k, _ in shapes)  # a partial k-step
    assert any(f32 for *_, f32 in shapes)
    wide = [(m, n, k, f32) for m, n, k, f32 in shapes
            if matmul_batched.rows_per_block(m, n, None) == matmul_batched.WIDE_ROWS]
    assert {33, 48, 64} <= {m for m, *_ in wide}
    assert {n % 64 // 16 for _, n, _, _ in wide} >= {0, 1}  # 1..3 A tiles wholly past n
    assert any(k % 32 for _, _, k, _ in wide) and any(k >= 3072 for _, _, k, _ in wide)
    assert any(k < 8 * 32 for _, _, k, _ in wide)  # warps without k-steps
    assert any(f32 for *_, f32 in wide)


def test_cuda_entry_points_declare_exactly_the_abi() -> None:
    _declares_abi("gemv_mma")


def _constant(name: str) -> int:
    (value,) = re.findall(rf"constexpr int {name} = (\d+);", SOURCE.read_text())
    return int(value)


def test_launch_constants_match_the_kernel() -> None:
    assert matmul_batched.BATCHED_THREADS == 32 * _constant("kWarps")
    assert matmul_batched.NARROW_ROWS == 16 * _constant("kNarrowTiles")
    assert matmul_batched.WIDE_ROWS == 16 * _constant("kWideTiles")
    assert matmul_batched.BATCHED_MAX_M == 8 * _constant("kMaxBTiles")
    assert matmul_batched.BATCHED_MAX_STAGES == _constant("kMaxStages")
    assert matmul_batched.BATCHED_RING_BUDGET == _constant("kRingBudget")


@pytest.mark.parametrize("m, rows, stages", [
    (1, 32, 8), (9, 32, 8), (16, 32, 8), (17, 32, 6), (32, 32, 6), (33, 32, 5), (41, 32, 4),
    (64, 32, 4), (17, 64, 4), (32, 64, 4), (33, 64, 3), (64, 64, 3), (1, 64, 5)])
def test_ring_bytes(m: int, rows: int, stages: int) -> None:
    """8 warps x stages x (rows / 8 weight + ceil(m / 8) x chunks) x 32 lanes x 16 bytes,
    with as many stages (<= 8) as fit in 192 KiB; the opt-in covers every launch and
    Hopper's 227 KiB."""
    stage = (rows // 8 + -(-m // 8)) * 512
    assert matmul_batched.ring_bytes(m, rows) == 8 * stages * stage <= 192 * 1024
    assert 8 * (stages + 1) * stage > 192 * 1024 or stages == 8
    assert matmul_batched.ring_bytes(m, rows) <= matmul_batched.BATCHED_MAX_SHARED <= 227 * 1024


@pytest.mark.parametrize("m, n, rows", [
    (16, 6144, 32),     # m <= 16 keeps the narrow blocks
    (17, 6144, 64),     # qkv: 192 narrow blocks are two waves of 132, 96 wide ones one
    (32, 6144, 64),
    (64, 6144, 64),
    (32, 24576, 64),    # gate_up: 6 narrow waves x (32 + 32) rows > 3 wide x (64 + 32)
    (64, 151936, 64),   # lm_head
    (64, 4096, 32),     # down: 128 narrow blocks are one wave; wide would idle 68 SMs
    (32, 4096, 32),
    (64, 1024, 32),     # Qwen3-0.6B down: one wave either way
    (64, 64, 32),       # n <= 64: the grid could not tell the variants apart
    (64, 4224, 32),     # exactly one narrow wave
    (64, 4225, 64),
])
def test_rows_per_block(m: int, n: int, rows: int) -> None:
    assert matmul_batched.rows_per_block(m, n, override=None) == rows


@pytest.mark.parametrize("m, n, override, rows", [
    (64, 4096, True, 64), (8, 6144, True, 64), (64, 64, True, 32), (64, 6144, False, 32)])
def test_rows_per_block_override(m: int, n: int, override: bool, rows: int) -> None:
    """The A/B switch forces a variant, except where the grid could not tell them apart."""
    assert matmul_batched.rows_per_block(m, n, override) == rows


def test_kernel_recovers_the_row_choice_from_the_grid() -> None:
    """gemv_mma.cu dispatch: 32-row blocks iff gridDim.x * 32 >= n; the blocks cover n."""
    for m in (1, 16, 17, 33, 64):
        for n in [*range(1, 300), 4224, 4225, 6144, 151936]:
            for rows in {matmul_batched.rows_per_block(m, n, o) for o in (None, True, False)}:
                grid = -(-n // rows)
                assert (grid * 32 >= n) == (rows == 32), (m, n)
                assert grid * rows >= n > (grid - 1) * rows


# ---- launch builder ----------------------------------------------------------------------

class _HopperMock(MockGpuBackend):
    """A mock device whose loaded PTX set includes gemv_mma, as a hopper leaf's does, and
    that records the dynamic shared memory opt-ins."""

    def __init__(self) -> None:
        super().__init__()
        self.opt_ins: list[tuple[str, int]] = []

    @property
    def module_names(self) -> list[str]:
        return ["gemm", "gemv", "gemv_mma"]

    def set_max_dynamic_shared(self, handle, nbytes: int) -> None:
        self.opt_ins.append((handle.func, nbytes))


def _launch(m: int, n: int, k: int, out_f32: bool = False, offset: int = 0):
    dev = _HopperMock()
    x, w, y = dev.alloc(m * k * 2), dev.alloc(n * k * 2), dev.alloc(m * n * 4)
    matmul_batched.batched_gemv(KernelCache(dev), 0, x + offset, w, y, m, n, k, out_f32)
    (record,) = dev.drain_launches()
    return record, (x, w, y)


@pytest.mark.parametrize("m, n, k, f32, func, grid, rows", [
    (32, 4096, 4096, False, "gemv_mma_bf16", 128, 32),
    (9, 151936, 4096, True, "gemv_mma_bf16_f32", 4748, 32),
    (64, 151936, 4096, True, "gemv_mma_bf16_f32", 2374, 64),
    (48, 6144, 4096, False, "gemv_mma_bf16", 96, 64),
    (64, 48, 16, False, "gemv_mma_bf16", 2, 32),
    (1, 33, 8, True, "gemv_mma_bf16_f32", 2, 32),
])
def test_geometry_and_entry_point(m, n, k, f32, func, grid, rows) -> None:
    record, (x, w, y) = _launch(m, n, k, f32)
    assert (record.module, record.func) == ("gemv_mma", func)
    assert record.grid == (grid, 1, 1) and record.block == (256, 1, 1)
    assert record.shared == matmul_batched.ring_bytes(m, rows)
    assert record.args == {"x": x, "w": w, "y": y, "m": m, "n": n, "k": k}


@pytest.mark.parametrize("m, n, k, offset, match", [
    (0, 64, 64, 0, "m=0"), (65, 64, 64, 0, "m=65"), (16, 0, 64, 0, "n=0"),
    (16, 64, 60, 0, "k=60"), (16, 64, 0, 0, "k=0"), (16, 64, 64, 8, "x pointer")])
def test_preconditions(m, n, k, offset, match) -> None:
    with pytest.raises(ValueError, match=match):
        _launch(m, n, k, offset=offset)


def test_shared_memory_opt_in_happens_once_per_entry_point() -> None:
    dev = _HopperMock()
    kc = KernelCache(dev)
    x, w, y = dev.alloc(64 * 1024 * 2), dev.alloc(512 * 1024 * 2), dev.alloc(64 * 512 * 4)
    for m, f32 in [(9, False), (64, False), (33, True), (17, False)]:
        matmul_batched.batched_gemv(kc, 0, x, w, y, m, 512, 1024, f32)
    assert [r.shared for r in dev.drain_launches()] == [
        matmul_batched.ring_bytes(m) for m in (9, 64, 33, 17)]
    assert matmul_batched.BATCHED_MAX_SHARED == 192 * 1024
    assert dev.opt_ins == [("gemv_mma_bf16", matmul_batched.BATCHED_MAX_SHARED),
                           ("gemv_mma_bf16_f32", matmul_batched.BATCHED_MAX_SHARED)]


def test_available_only_where_the_module_is_loaded() -> None:
    assert matmul_batched.available(KernelCache(_HopperMock()))
    assert not matmul_batched.available(KernelCache(MockGpuBackend()))


# ---- numpy model of the kernel's index math ----------------------------------------------
# Fragment layouts of mma.m16n8k16 from the PTX ISA (g = lane // 4, c = lane % 4; each
# register holds two consecutive-column elements, the lower column in the low half):
#   A a0: [g][2c..]  a1: [g+8][2c..]  a2: [g][2c+8..]  a3: [g+8][2c+8..]
#   B b0: [k 2c..][n g]  b1: [k 2c+8..][n g]
#   D d0, d1: [g][2c], [g][2c+1]   d2, d3: [g+8][2c], [g+8][2c+1]
LANES = np.arange(32)
G, C = LANES // 4, LANES % 4


def _mma(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """D [32 lanes, 4] of A @ B from per-lane registers a [32, 4, 2] and b [32, 2, 2]."""
    am, bm = np.zeros((16, 16)), np.zeros((16, 8))
    for reg, (dr, dc) in enumerate([(0, 0), (8, 0), (0, 8), (8, 8)]):
        for e in range(2):
            am[G + dr, 2 * C + dc + e] = a[:, reg, e]
    for reg in range(2):
        for e in range(2):
            bm[2 * C + 8 * reg + e, G] = b[:, reg, e]
    d = am @ bm
    return np.stack([d[G, 2 * C], d[G, 2 * C + 1], d[G + 8, 2 * C], d[G + 8, 2 * C + 1]], 1)


def _chunks(mat: np.ndarray, rows: np.ndarray, chunk: np.ndarray) -> np.ndarray:
    """Per lane, the 8 values of 16-byte chunk `chunk` of row `rows` (zeros past the row)."""
    kc = mat.shape[1] // 8
    out = np.zeros((32, 8))
    ok = chunk < kc
    for lane in LANES[ok]:
        out[lane] = mat[rows[lane], 8 * chunk[lane]:8 * chunk[lane] + 8]
    return out


def _word(v: np.ndarray, i: int) -> np.ndarray:
    return v[:, 2 * i:2 * i + 2]


def model_gemv_mma(x: np.ndarray, w: np.ndarray, grid: int) -> np.ndarray:
    """y = x @ w.T computed the way gemv_mma.cu indexes it for a launch of `grid` blocks
    (the row count per block follows from it, as in the kernel's dispatch); unwritten
    outputs stay NaN."""
    (m, k), n = x.shape, w.shape[0]
    warps = _constant("kWarps")
    tiles = _constant("kNarrowTiles") if grid * 32 >= n else _constant("kWideTiles")
    kc = k // 8
    steps, btiles = -(-kc // 4), -(-m // 8)
    y = np.full((m, n), np.nan)
    for row0 in range(0, 16 * tiles * grid, 16 * tiles):
        total = np.zeros((tiles, btiles, 32, 4))
        for warp in range(warps):
            for s in range(steps * warp // warps, steps * (warp + 1) // warps):
                chunk = 4 * s + C
                a = [[_chunks(w, np.minimum(row0 + 16 * t + 8 * h + G, n - 1), chunk)
                      for h in range(2)] for t in range(tiles)]
                xv = [_chunks(x, np.minimum(8 * b + G, m - 1), chunk) for b in range(btiles)]
                for t in range(tiles):
                    for j in range(2):
                        af = np.stack([_word(a[t][0], 2 * j), _word(a[t][1], 2 * j),
                                       _word(a[t][0], 2 * j + 1), _word(a[t][1], 2 * j + 1)], 1)
                        for b in range(btiles):
                            bf = np.stack([_word(xv[b], 2 * j), _word(xv[b], 2 * j + 1)], 1)
                            total[t, b] += _mma(af, bf)
        for t in range(tiles):
            for b in range(btiles):
                for i in range(4):
                    mi, r = 8 * b + 2 * C + (i & 1), 16 * t + G + 8 * (i >> 1)
                    keep = (mi < m) & (row0 + r < n)
                    y[mi[keep], row0 + r[keep]] = total[t, b][keep, i]
    return y


@pytest.mark.parametrize("m, n, k, rows", [
    (17, 48, 200, 32), (9, 33, 16, 32), (64, 80, 96, 32), (24, 16, 264, 32),
    (17, 76, 200, 64), (33, 200, 96, 64), (64, 144, 48, 64), (1, 65, 16, 64)])
def test_fragment_index_model_computes_the_product(m: int, n: int, k: int, rows: int) -> None:
    rng = np.random.default_rng(m * n + k)
    x, w = rng.standard_normal((m, k)), rng.standard_normal((n, k))
    got = model_gemv_mma(x, w, -(-n // rows))
    assert not np.isnan(got).any()
    np.testing.assert_allclose(got, x @ w.T, rtol=1e-12, atol=1e-12)


def test_kernel_table_has_batched_rows_the_kernel_takes() -> None:
    from atlas.bench import kernel_shapes as ks

    rows = [s for s in ks.table_shapes() if s.family is ks.Family.DECODE_BATCHED_GEMV]
    assert {s.m for s in rows} == {16, 32, 64}
    assert any(s.out_f32 and s.n == 151936 for s in rows)
    assert any(s.n == 1024 and s.k == 3072 for s in rows)  # Qwen3-0.6B down: 32 blocks
    assert all(s.m <= matmul_batched.BATCHED_MAX_M and s.k % 8 == 0 for s in rows)


def _ring_schedule(stages: int, count: int) -> None:
    """Replays gemv_mma.cu's per-warp ring (prologue, then one commit per step) and checks
    that step i is complete and in slot i % stages when its MMAs read it, and that no refill
    lands in a slot whose step is still unread."""
    slots: list[int | None] = [None] * stages  # step held by each slot
    groups: list[list[int]] = []  # steps whose copies each commit group carries
    for i in range(stages - 1):
        if i < count:
            slots[i] = i
        groups.append([i] if i < count else [])
    consumed = -1
    slot, refill = 0, stages - 1
    for i in range(count):
        complete = len(groups) - (stages - 2)  # cp.async.wait_group stages - 2
        assert i in [s for g in groups[:complete] for s in g]
        assert slots[slot] == i
        consumed = i
        if i + stages - 1 < count:
            assert slots[refill] is None or slots[refill] <= consumed
            slots[refill] = i + stages - 1
            groups.append([i + stages - 1])
        else:
            groups.append([])
        slot = 0 if slot + 1 == stages else slot + 1
        refill = stages - 1 if slot == 0 else slot - 1


@pytest.mark.parametrize("m", [1, 9, 17, 33, 48, 64])
@pytest.mark.parametrize("rows", [32, 64])
def test_ring_schedule_for_every_stage_count(m: int, rows: int) -> None:
    stage = (rows // 8 + -(-m // 8)) * 512
    stages = matmul_batched.ring_bytes(m, rows) // (8 * stage)
    for count in range(0, 3 * stages + 2):
        _ring_schedule(stages, count)
