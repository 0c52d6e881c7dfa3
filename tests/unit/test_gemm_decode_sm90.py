"""The skinny wgmma GEMM of decode batches (gemm_decode_sm90): its reference and check cases,
the launch builder's geometry, split rule and preconditions, the route `linear` takes to it,
and a numpy model of the kernel's index math (k-tile split over the cluster, the wgmma
accumulator layout scattered into the partial tile, each rank's batch-row slice of the sum)
checked against float64 x @ w.T. There is no GPU in CI; the device check of the kernel is
tools/gpu/check_kernels.py over the same cases."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from atlas.runtime.cases import gemm_decode_sm90 as case_defs
from atlas.runtime.host import HostBackend
from atlas.runtime.kernel_check import check
from atlas.runtime.mock import MockGpuBackend
from atlas.runtime.ops import KernelCache, matmul, matmul_decode
from atlas.runtime.ops.matmul_decode import Glu
from atlas.runtime.ops.routes import DEFAULT_DECODE_GEMM_L2_TILES, KernelRoutes
# the elementwise kernels' check that a .cu file declares exactly its module's ABI entries
from test_reference_kernels_a import test_cuda_entry_points_match_the_abi as _declares_abi

SOURCE = Path(__file__).resolve().parents[2] / "kernels/hopper/common/gemm_decode_sm90.cu"
#: the geometry and epilogue both decode GEMM kernels share
TILE = SOURCE.with_name("gemm_decode_tile.cuh")
CASES = ([case_defs.gemm_decode_case(np.random.default_rng(90), *shape)
          for shape in case_defs.GEMM_DECODE_SHAPES if shape[0] * shape[1] * shape[2] <= 2 ** 22]
         + [case_defs.gemm_decode_case(np.random.default_rng(91), *shape, wide=True)
            for shape in case_defs.GEMM_DECODE_WIDE_SHAPES
            if shape[0] * shape[1] * shape[2] <= 2 ** 22]
         + [case_defs.gemm_decode_swiglu_case(np.random.default_rng(92), *shape)
            for shape in case_defs.GEMM_DECODE_SWIGLU_SHAPES
            if shape[0] * shape[1] * shape[2] <= 2 ** 21]
         + [case_defs.gemm_decode_swiglu_case(np.random.default_rng(94), *shape, glu=Glu.GEGLU)
            for shape in case_defs.GEMM_DECODE_GEGLU_SHAPES
            if shape[0] * shape[1] * shape[2] <= 2 ** 23])


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_reference_matches_oracle(case) -> None:
    result = check(HostBackend(), case)
    assert result.passed, result.detail


def test_cases_cover_widths_splits_and_edges() -> None:
    shapes = case_defs.GEMM_DECODE_SHAPES
    assert {matmul_decode.decode_cols(m) for m, *_ in shapes} == set(matmul_decode.DECODE_COLS)
    assert {9, 17, 33, 65, 129, 256, 1} <= {m for m, *_ in shapes}
    assert {s for *_, s in shapes} >= {1, 2, 4, 8, None}
    assert any(n % 64 and n % 16 for _, n, *_ in shapes)
    assert any(k % 64 == 8 for _, _, k, *_ in shapes)
    assert any(f32 and s and s > 1 for *_, f32, s in shapes)
    # a split with ranks that own no k-tile, and one with ranks that write no batch row
    assert any(s and -(-k // 64) < s for _, _, k, _, s in shapes)
    assert any(s and m < s for m, _, _, _, s in shapes)
    assert len(shapes) >= 15 and len(CASES) >= 8  # the host runs the small ones
    wide = case_defs.GEMM_DECODE_WIDE_SHAPES
    # every width two warpgroups take, and the fallback below it
    assert {matmul_decode.decode_cols(m) for m, *_ in wide} == set(matmul_decode.DECODE_COLS)
    assert {s for *_, s in wide} >= {1, 2, 4, 8, None}
    # n ending inside the first and inside the second warpgroup's half of the last tile
    assert {(n % 128 > 0, n % 128 > 64) for _, n, *_ in wide} >= {(True, False), (True, True)}
    assert any(-(-k // 64) < 4 for _, _, k, *_ in wide)   # below the prefetch depth


def test_swiglu_cases_cover_widths_splits_and_edges() -> None:
    shapes = case_defs.GEMM_DECODE_SWIGLU_SHAPES
    assert {matmul_decode.decode_cols(m) for m, *_ in shapes} == set(matmul_decode.DECODE_COLS)
    assert {s for *_, s, _ in shapes} >= {1, 2, 4, 8, None}
    # I ending inside a one- and a two-warpgroup block's pairs, I odd (no twin), both shapes
    assert any(i % 32 and not wide for _, i, _, _, wide in shapes)
    assert any(i % 64 and wide for _, i, _, _, wide in shapes)
    assert any(i % 2 for _, i, *_ in shapes)
    twins = [c for c in CASES if "swiglu" in c.name and c.same_bits]
    assert len(twins) >= 4 and all(c.same_bits == (("act", "act_unfused"),) for c in twins)


def test_geglu_cases_cover_every_split_shape_and_the_unfused_twin() -> None:
    """Gemma 3's GeGLU entries: every split and block shape, I past a tile's pairs on each,
    and (I a multiple of 8) the bits of the product then gelu_tanh_mul."""
    shapes = case_defs.GEMM_DECODE_GEGLU_SHAPES
    assert {s for *_, s, _ in shapes} >= {1, 2, 4, 8, None}
    assert {9, 16, 64, 256} <= {m for m, *_ in shapes}
    assert any(i % 32 and not wide for _, i, _, _, wide in shapes)
    assert any(i % 64 and wide for _, i, _, _, wide in shapes)
    twins = [c for c in CASES if "geglu" in c.name and c.same_bits]
    assert len(twins) >= 3 and all(c.same_bits == (("act", "act_unfused"),) for c in twins)
    case = case_defs.gemm_decode_swiglu_case(np.random.default_rng(3), 9, 104, 200, 1, False,
                                             glu=Glu.GEGLU)
    dev = _Sm90DecodeMock()
    case.run(dev, 0, {name: dev.alloc(1 << 16) for name in (*case.inputs, *case.outputs)})
    assert [r.func for r in dev.drain_launches()] == [
        "gemm_decode_sm90_geglu_bf16", "gemm_decode_sm90_bf16", "gelu_tanh_mul_bf16"]


def test_cuda_entry_points_declare_exactly_the_abi() -> None:
    _declares_abi("gemm_decode_sm90")


def _constant(name: str, source: Path = SOURCE) -> int:
    """A namespace-level `constexpr int` of the kernel `source` or the shared tile header: a
    literal, a product of literals (110 * 1024) or a sum of products with other constants
    (kGroupThreads * kMaxGroups)."""
    (value,) = re.findall(rf"constexpr int {name} = ([\w *+]+);",
                          source.read_text() + TILE.read_text())
    total = 0
    for term in value.split("+"):
        product = 1
        for factor in term.split("*"):
            factor = factor.strip()
            product *= int(factor) if factor.isdigit() else _constant(factor, source)
        total += product
    return total


def _pitch(groups: int) -> int:
    """The partial tile's row pitch in f32 words: the block's weight rows + 4 (the shared
    epilogue's partial_pitch(G) = kGroupRows * G + 4)."""
    assert "return kGroupRows * groups + 4;" in TILE.read_text()
    assert "partial_pitch(kGroups)" in SOURCE.read_text()
    return _constant("kGroupRows") * groups + 4


def test_launch_constants_match_the_kernel() -> None:
    assert matmul_decode.DECODE_THREADS == _constant("kGroupThreads")
    assert matmul_decode.DECODE_ROWS == _constant("kGroupRows")
    assert max(matmul_decode.DECODE_GROUPS) == _constant("kMaxGroups") == 2
    assert _constant("kMaxThreads") == 256   # every entry point's __launch_bounds__
    assert matmul_decode.DECODE_MAX_M == _constant("kMaxCols") == matmul_decode.DECODE_COLS[-1]
    assert matmul_decode.DECODE_MAX_STAGES == _constant("kMaxStages")
    assert matmul_decode.DECODE_PAIR_BUDGET == _constant("kPairBudget")
    assert matmul_decode.DECODE_SOLO_BUDGET == _constant("kSoloBudget")
    text = SOURCE.read_text()
    for split in (2, 4, 8):
        # bf16, f32, SwiGLU and GeGLU entries
        assert text.count(f"__cluster_dims__({split}, 1, 1)") == 4


@pytest.mark.parametrize("cols, groups, stages, per_sm", [
    (16, 1, 8, 2), (32, 1, 8, 2), (64, 1, 6, 2), (128, 1, 4, 2), (256, 1, 5, 1),
    (32, 2, 8, 1), (64, 2, 8, 1), (128, 2, 6, 1), (256, 2, 4, 1)])
def test_ring_geometry(cols: int, groups: int, stages: int, per_sm: int) -> None:
    """(64 G + N) x 64 bf16 per stage; as many stages (<= 8, >= 3 for the prefetch distance)
    as the budget holds; per_sm blocks with their 1 KiB reservation fit the 228 KiB of an SM
    (and its 64 K registers at up to 210 a thread: the SwiGLU entries), the partial tile
    [N][64 G + 4] f32 fits in the ring, and the opt-in covers every launch."""
    assert matmul_decode.ring_stages(cols, groups) == stages >= 3
    assert matmul_decode.blocks_per_sm(cols, groups) == per_sm
    smem = matmul_decode.smem_bytes(cols, groups)
    assert smem == stages * (64 * groups + cols) * 128 + 1024
    assert per_sm * (smem + 1024) <= 228 * 1024
    assert per_sm * 128 * groups * 210 <= 64 * 1024
    assert cols * _pitch(groups) * 4 <= smem - 1024
    assert smem <= matmul_decode.DECODE_MAX_SHARED <= 227 * 1024


@pytest.mark.parametrize("m, n, k, split", [
    (32, 4096, 4096, 4),     # Qwen3-8B o_proj: 64 tiles x 4 = 256 of 264 slots
    (32, 6144, 4096, 2),     # qkv: 96 x 2 = 192 (x 4 would be two waves)
    (32, 24576, 4096, 2),    # gate_up: 384 tiles are 1.45 waves (73% full), x 2 2.9 (97%)
    (64, 4096, 12288, 4),    # down
    (32, 151936, 4096, 1),   # lm_head
    (256, 4096, 4096, 2),    # N 256: one block per SM, 64 x 2 = 128 of 132
    (256, 6144, 4096, 1),
    (32, 1024, 2048, 8),     # Qwen3-0.6B o_proj: 16 tiles x 8
    (32, 1024, 1024, 4),     # k = 16 k-tiles: at most 4 splits of 4
    (32, 4096, 1024, 4),
    (32, 960, 576, 2),       # SmolLM2: 9 k-tiles
    (16, 64, 64, 1),         # one k-tile: nothing to split
])
def test_split_rule(m: int, n: int, k: int, split: int) -> None:
    assert matmul_decode.decode_split(m, n, k, sm_count=132) == split


@pytest.mark.parametrize("m, n, k, split", [
    (64, 4096, 4096, 4),     # Qwen3-8B o_proj: 32 tiles of 128 rows x 4 = 128 of 132 SMs
    (64, 6144, 4096, 2),     # qkv: 48 x 2 = 96 (x 4 would be two waves)
    (64, 24576, 4096, 2),    # gate_up: 192 tiles are 1.45 waves, x 2 2.9
    (64, 4096, 12288, 4),    # down
    (256, 4096, 4096, 4),    # N 256 is one block per SM either way
])
def test_split_rule_of_two_warpgroup_blocks(m: int, n: int, k: int, split: int) -> None:
    assert matmul_decode.decode_split(m, n, k, sm_count=132, groups=2) == split


@pytest.mark.parametrize("m, tiles, split", [
    (64, 384, 2),      # 264 slots: 1.45 waves (73% full) -> x 2: 2.9 waves (97%)
    (64, 2374, 1),     # 99.9% full alone
    (64, 264, 1),      # exactly a wave
    (64, 300, 4),      # 57% -> x 2 76% -> x 4 91% -> x 8 91% (no gain over 4)
    (256, 384, 1),     # 132 slots (N 256): 97% alone
])
def test_split_rule_fills_the_waves(m: int, tiles: int, split: int) -> None:
    """From a wave of tiles up, each larger split must fill the waves SPLIT_FILL_GAIN
    better than the best smaller one."""
    assert matmul_decode.decode_split(m, tiles * 64, 4096, sm_count=132) == split
    assert matmul_decode.wave_fill(384, 264) == pytest.approx(384 / 528)


def test_split_rule_follows_the_device_and_the_override() -> None:
    assert matmul_decode.decode_split(32, 4096, 4096, sm_count=66) == 2
    assert matmul_decode.decode_split(32, 24576, 4096, forced=8) == 8
    assert matmul_decode.decode_split(32, 4096, 4096, forced=3) == 3  # the TMA kernel has it
    with pytest.raises(ValueError, match="split 9"):
        matmul_decode.decode_split(32, 4096, 4096, forced=9)


# ---- launch builder ----------------------------------------------------------------------

class _Sm90DecodeMock(MockGpuBackend):
    """A mock device whose loaded PTX set has gemm_decode_sm90 (an sm_90a leaf's does) and
    that records the dynamic shared memory opt-ins."""

    def __init__(self) -> None:
        super().__init__()
        self.opt_ins: list[tuple[str, int]] = []

    @property
    def module_names(self) -> list[str]:
        return ["gemm", "gemm_sm90", "gemv", "gemv_mma", "gemm_decode_sm90"]

    def set_max_dynamic_shared(self, handle, nbytes: int) -> None:
        self.opt_ins.append((handle.func, nbytes))


def _launch(m: int, n: int, k: int, out_f32: bool = False, offset: int = 0,
            split: int | None = None, dev: _Sm90DecodeMock | None = None,
            wide: bool | None = None):
    dev = dev or _Sm90DecodeMock()
    x, w, y = dev.alloc(m * k * 2 + 16), dev.alloc(n * k * 2), dev.alloc(m * n * 4)
    matmul_decode.decode_gemm(KernelCache(dev), 0, x + offset, w, y, m, n, k, out_f32,
                              split=split, wide=wide)
    (record,) = dev.drain_launches()
    return record, (x + offset, w, y)


@pytest.mark.parametrize("m, n, k, f32, func, grid, cols", [
    (32, 4096, 4096, False, "gemm_decode_sm90_bf16_split4", 256, 32),
    (9, 151936, 4096, True, "gemm_decode_sm90_bf16_f32", 2374, 16),
    (64, 6144, 4096, False, "gemm_decode_sm90_bf16_split2", 192, 64),
    (100, 24576, 4096, False, "gemm_decode_sm90_bf16_split2", 768, 128),
    (256, 4096, 12288, False, "gemm_decode_sm90_bf16_split2", 128, 256),
    (17, 1024, 3072, True, "gemm_decode_sm90_bf16_f32_split8", 128, 32),
    (1, 33, 8, False, "gemm_decode_sm90_bf16", 1, 16),
])
def test_geometry_and_entry_point(m, n, k, f32, func, grid, cols) -> None:
    record, (x, w, y) = _launch(m, n, k, f32)
    assert (record.module, record.func) == ("gemm_decode_sm90", func)
    assert record.grid == (grid, 1, 1) and record.block == (128, 1, 1)
    assert record.shared == matmul_decode.smem_bytes(cols)
    assert record.args == {"x": x, "w": w, "y": y, "m": m, "n": n, "k": k,
                           "l2_tiles": DEFAULT_DECODE_GEMM_L2_TILES}


@pytest.mark.parametrize("m, n, k, func, grid, threads, cols, groups", [
    (64, 4096, 4096, "gemm_decode_sm90_bf16_split4", 128, 256, 64, 2),
    (64, 24576, 4096, "gemm_decode_sm90_bf16_split2", 384, 256, 64, 2),
    (17, 200, 520, "gemm_decode_sm90_bf16_split2", 4, 256, 32, 2),   # 2 tiles, 9 k-tiles
    (256, 6144, 4096, "gemm_decode_sm90_bf16_split2", 96, 256, 256, 2),
    (16, 4096, 4096, "gemm_decode_sm90_bf16_split4", 256, 128, 16, 1),   # N 16: one group
])
def test_two_warpgroup_geometry(m, n, k, func, grid, threads, cols, groups) -> None:
    record, _ = _launch(m, n, k, wide=True)
    assert matmul_decode.decode_groups(m, True) == groups
    assert record.func == func and record.grid == (grid, 1, 1)
    assert record.block == (threads, 1, 1)
    assert record.shared == matmul_decode.smem_bytes(cols, groups)


def test_forced_split_multiplies_the_grid() -> None:
    record, _ = _launch(48, 200, 1040, True, split=4)
    assert record.func == "gemm_decode_sm90_bf16_f32_split4" and record.grid == (16, 1, 1)


@pytest.mark.parametrize("m, n, k, offset, split, match", [
    (0, 64, 64, 0, None, "m=0"), (257, 64, 64, 0, None, "m=257"), (16, 0, 64, 0, None, "n=0"),
    (16, 64, 60, 0, None, "k=60"), (16, 64, 0, 0, None, "k=0"),
    (16, 64, 64, 8, None, "x pointer"), (16, 64, 64, 0, 16, "split 16")])
def test_preconditions(m, n, k, offset, split, match) -> None:
    with pytest.raises(ValueError, match=match):
        _launch(m, n, k, offset=offset, split=split)


def test_shared_memory_opt_in_happens_once_per_entry_point() -> None:
    dev = _Sm90DecodeMock()
    kc = KernelCache(dev)
    x, w, y = dev.alloc(256 * 1024 * 2), dev.alloc(512 * 1024 * 2), dev.alloc(256 * 512 * 4)
    for m in (9, 256, 33, 100):
        matmul_decode.decode_gemm(kc, 0, x, w, y, m, 512, 1024, split=1)
    assert [r.shared for r in dev.drain_launches()] == [
        matmul_decode.smem_bytes(c) for c in (16, 256, 64, 128)]
    assert dev.opt_ins == [("gemm_decode_sm90_bf16", matmul_decode.DECODE_MAX_SHARED)]
    assert matmul_decode.DECODE_MAX_SHARED == matmul_decode.smem_bytes(256)


# ---- the route ---------------------------------------------------------------------------

def _route(m: int, n: int = 4096, env: dict[str, str] | None = None,
           dev: MockGpuBackend | None = None) -> str:
    kc = KernelCache(dev or _Sm90DecodeMock(), KernelRoutes.from_env(env or {}))
    return matmul.linear_route(kc, m, n)


@pytest.mark.parametrize("m, route", [(1, "gemv"), (8, "gemv_mma"), (9, "gemm_decode_sm90"),
                                      (64, "gemm_decode_sm90"), (256, "gemm_decode_sm90"),
                                      (257, "gemm")])
def test_linear_sends_decode_batches_to_the_decode_gemm(m: int, route: str) -> None:
    assert _route(m) == route


def test_decode_gemm_switches_and_absence() -> None:
    assert _route(32, env={"ATLAS_DECODE_GEMM": "0"}) == "gemv_mma"
    assert _route(32, env={"ATLAS_DECODE_GEMM_MIN_M": "33"}) == "gemv_mma"
    assert _route(128, env={"ATLAS_DECODE_GEMM_MAX_M": "64"}) == "gemm"
    assert _route(32, dev=MockGpuBackend()) == "gemm"  # no module loaded: the old routes
    routes = KernelRoutes.from_env({"ATLAS_DECODE_GEMM_SPLIT": "2"})
    assert routes.decode_gemm_split == 2 and not routes.decode_gemm_wide
    assert KernelRoutes.from_env({"ATLAS_DECODE_GEMM_WIDE": "1"}).decode_gemm_wide
    assert KernelRoutes.from_env({"ATLAS_DECODE_GEMM_SPLIT": "3"}).decode_gemm_split == 3
    with pytest.raises(ValueError, match="ATLAS_DECODE_GEMM_SPLIT='9'"):
        KernelRoutes.from_env({"ATLAS_DECODE_GEMM_SPLIT": "9"})
    with pytest.raises(ValueError, match="ATLAS_DECODE_GEMM_MIN_M='x'"):
        KernelRoutes.from_env({"ATLAS_DECODE_GEMM_MIN_M": "x"})


@pytest.mark.parametrize("env, m, n, func, grid, threads", [
    ({"ATLAS_DECODE_GEMM_SPLIT": "8"}, 32, 24576, "gemm_decode_sm90_bf16_split8", 384 * 8, 128),
    ({"ATLAS_DECODE_GEMM_WIDE": "1"}, 64, 6144, "gemm_decode_sm90_bf16_split2", 48 * 2, 256),
])
def test_linear_launches_the_decode_gemm_as_the_routes_say(env, m, n, func, grid,
                                                           threads) -> None:
    dev = _Sm90DecodeMock()
    kc = KernelCache(dev, KernelRoutes.from_env(env))
    x, w, y = dev.alloc(m * 4096 * 2), dev.alloc(n * 4096 * 2), dev.alloc(m * n * 2)
    matmul.linear(kc, 0, x, w, y, m, n, 4096)
    (record,) = dev.drain_launches()
    assert record.func == func
    assert record.grid == (grid, 1, 1) and record.block == (threads, 1, 1)


# ---- numpy model of the kernel's index math ----------------------------------------------

LANES = np.arange(32)


def _accumulator_coords(cols: int, groups: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """(weight row, batch row) of d[j] of every thread of the block, per the wgmma m64nNk16
    f32 accumulator layout (PTX ISA) and the kernel's 64 rows per warpgroup: thread
    t = 32 q + l (warp q of the block, warp q % 4 of warpgroup q / 4) holds for j < N / 2
    row 64 (q / 4) + 16 (q % 4) + l / 4 + 8 ((j / 2) % 2) = 16 q + ..., column
    8 (j / 4) + 2 (l % 4) + j % 2."""
    threads = 128 * groups
    t = np.arange(threads)[:, None]
    j = np.arange(cols // 2)[None, :]
    q, lane = t // 32, t % 32
    r = 64 * (q // 4) + 16 * (q % 4) + lane // 4 + 8 * ((j // 2) % 2)
    c = 8 * (j // 4) + 2 * (lane % 4) + j % 2
    return (np.broadcast_to(r, (threads, cols // 2)),
            np.broadcast_to(c, (threads, cols // 2)))


def model_gemm_decode(x: np.ndarray, w: np.ndarray, split: int, groups: int = 1) -> np.ndarray:
    """y = x @ w.T the way gemm_decode_sm90.cu splits and gathers it: per tile of 64 G
    weight rows, each rank's k-tiles [kt * r / S, kt * (r + 1) / S), its accumulators
    scattered into part[c][r] (pitch 64 G + 4), then rank r summing batch rows
    [m r / S, m (r + 1) / S) over the ranks' partials in rank order. Unwritten outputs stay
    NaN."""
    (m, k), n = x.shape, w.shape[0]
    cols = matmul_decode.decode_cols(m)
    if groups == 2:
        cols = max(cols, matmul_decode.WIDE_MIN_COLS)
    rows, pitch = 64 * groups, _pitch(groups)
    k_tiles = -(-k // 64)
    xp = np.zeros((cols, k_tiles * 64))
    xp[:m, :k] = x
    y = np.full((m, n), np.nan)
    rows_acc, cols_acc = _accumulator_coords(cols, groups)
    for row0 in range(0, n, rows):
        wp = np.zeros((rows, k_tiles * 64))
        wp[:min(rows, n - row0), :k] = w[row0:row0 + rows]
        parts = []
        for rank in range(split):
            kt0, kt1 = k_tiles * rank // split, k_tiles * (rank + 1) // split
            d = wp[:, 64 * kt0:64 * kt1] @ xp[:, 64 * kt0:64 * kt1].T  # [rows, cols]
            part = np.full(cols * pitch, np.nan)
            part[cols_acc * pitch + rows_acc] = d[rows_acc, cols_acc]
            parts.append(part)
        for rank in range(split):
            for mi in range(m * rank // split, m * (rank + 1) // split):
                for r in range(rows):
                    if row0 + r < n:
                        y[mi, row0 + r] = sum(p[mi * pitch + r] for p in parts)
    return y


@pytest.mark.parametrize("groups", [1, 2])
def test_accumulator_layout_covers_the_tile_once(groups: int) -> None:
    for cols in matmul_decode.DECODE_COLS:
        r, c = _accumulator_coords(cols, groups)
        cells = r * cols + c
        assert sorted(cells.ravel()) == list(range(64 * groups * cols))


@pytest.mark.parametrize("m, n, k, split, groups", [
    (9, 100, 200, 1, 1), (17, 64, 136, 2, 1), (33, 70, 520, 4, 1), (1, 130, 264, 4, 1),
    (40, 65, 64, 8, 1), (65, 40, 1040, 8, 1), (130, 20, 72, 2, 1),
    (17, 200, 136, 1, 2), (33, 130, 520, 4, 2), (40, 100, 64, 8, 2), (130, 300, 72, 2, 2)])
def test_index_model_computes_the_product(m: int, n: int, k: int, split: int,
                                          groups: int) -> None:
    rng = np.random.default_rng(m * n + k)
    x, w = rng.standard_normal((m, k)), rng.standard_normal((n, k))
    got = model_gemm_decode(x, w, split, groups)
    assert not np.isnan(got).any()
    np.testing.assert_allclose(got, x @ w.T, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("groups", [1, 2])
def test_partial_scatter_is_bank_conflict_free(groups: int) -> None:
    """One warp's store of d[j] hits 32 distinct banks (pitch 68 / 132 words)."""
    pitch = _pitch(groups)
    for cols in matmul_decode.DECODE_COLS:
        r, c = _accumulator_coords(cols, groups)
        for q in range(4 * groups):
            for j in range(cols // 2):
                banks = (c[32 * q:32 * q + 32, j] * pitch + r[32 * q:32 * q + 32, j]) % 32
                assert len(set(banks.tolist())) == 32


# ---- the SwiGLU epilogue -----------------------------------------------------------------

def model_gemm_decode_swiglu(x: np.ndarray, w: np.ndarray, split: int,
                             groups: int = 1) -> np.ndarray:
    """swiglu(x @ w.T) the way the SwiGLU entries lay out and combine it (float64, no
    rounding): tile t's weight rows are gate rows [32 G t, 32 G t + 32 G) then the up rows I
    past them (zero past I, cp_async_gate_up_tile), multiplied as `model_gemm_decode`
    multiplies any tile, and output column 32 G t + r combines tile rows r and 32 G + r."""
    inter, half = w.shape[0] // 2, 32 * groups
    tiles = -(-inter // half)
    laid = np.zeros((tiles * 2 * half, w.shape[1]))
    for t in range(tiles):
        for r in range(2 * half):
            j = t * half + r % half
            if j < inter:
                laid[t * 2 * half + r] = w[j if r < half else inter + j]
    y = model_gemm_decode(x, laid, split, groups)
    act = np.full((x.shape[0], inter), np.nan)
    for t in range(tiles):
        for r in range(half):
            if t * half + r < inter:
                g, u = y[:, t * 2 * half + r], y[:, t * 2 * half + half + r]
                act[:, t * half + r] = g / (1 + np.exp(-g)) * u
    return act


@pytest.mark.parametrize("m, inter, k, split, groups", [
    (9, 100, 200, 1, 1), (33, 40, 520, 4, 1), (17, 77, 136, 2, 1), (40, 72, 64, 8, 2),
    (130, 130, 72, 2, 2)])
def test_index_model_of_the_swiglu_layout(m: int, inter: int, k: int, split: int,
                                         groups: int) -> None:
    rng = np.random.default_rng(m + inter + k)
    x, w = rng.standard_normal((m, k)), rng.standard_normal((2 * inter, k))
    got = model_gemm_decode_swiglu(x, w, split, groups)
    gu = x @ w.T
    gate, up = gu[:, :inter], gu[:, inter:]
    assert not np.isnan(got).any()
    np.testing.assert_allclose(got, gate / (1 + np.exp(-gate)) * up, rtol=1e-10, atol=1e-12)


def test_swiglu_kernel_pairs_rows_as_the_model() -> None:
    """The kernel's loader and epilogue are the ones the model above follows."""
    text = SOURCE.read_text() + TILE.read_text()
    assert "return j >= inter ? -1 : r < ROWS / 2 ? j : inter + j;" in text
    assert "constexpr int kOutRows = kGated ? kRows / 2 : kRows;" in text
    assert "whole(mi, r + kOutRows)" in text


@pytest.mark.parametrize("m, n, k, wide, glu, func, grid, threads", [
    (64, 24576, 4096, False, Glu.SWIGLU, "gemm_decode_sm90_swiglu_bf16_split2", 768, 128),
    (64, 24576, 4096, True, Glu.SWIGLU, "gemm_decode_sm90_swiglu_bf16_split2", 384, 256),
    (9, 200, 200, False, Glu.SWIGLU, "gemm_decode_sm90_swiglu_bf16", 4, 128),
    # Gemma 3 4B's gate_up at 64 rows: the same grid on the GeGLU entry
    (64, 20480, 2560, False, Glu.GEGLU, "gemm_decode_sm90_geglu_bf16_split4", 1280, 128),
    (9, 200, 200, False, Glu.GEGLU, "gemm_decode_sm90_geglu_bf16", 4, 128),
])
def test_swiglu_geometry_and_entry_point(m, n, k, wide, glu, func, grid, threads) -> None:
    dev = _Sm90DecodeMock()
    x, w, act = dev.alloc(m * k * 2), dev.alloc(n * k * 2), dev.alloc(m * n)
    matmul_decode.decode_gemm(KernelCache(dev), 0, x, w, act, m, n, k, wide=wide, glu=glu)
    (record,) = dev.drain_launches()
    assert record.func == func and record.grid == (grid, 1, 1)
    assert record.block == (threads, 1, 1)
    assert record.args == {"x": x, "w": w, "act": act, "m": m, "n": n, "k": k,
                           "l2_tiles": DEFAULT_DECODE_GEMM_L2_TILES}


@pytest.mark.parametrize("n, f32, match", [(201, False, "even n"), (200, True, "even n")])
def test_swiglu_preconditions(n: int, f32: bool, match: str) -> None:
    dev = _Sm90DecodeMock()
    with pytest.raises(ValueError, match=match):
        matmul_decode.decode_gemm(KernelCache(dev), 0, dev.alloc(4096), dev.alloc(n * 64 * 2),
                                  dev.alloc(4096), 16, n, 64, f32, glu=Glu.SWIGLU)


@pytest.mark.parametrize("env, m, fused", [
    ({}, 64, True), ({}, 9, True), ({}, 256, True),
    ({"ATLAS_DECODE_GEMM_SWIGLU": "0"}, 64, False),   # the A/B switch: silu_mul again
    ({"ATLAS_DECODE_GEMM": "0"}, 64, False),          # gemv_mma / GEMM routes: unfused
    ({}, 257, False), ({"ATLAS_GEMV_SWIGLU": "0"}, 1, False)])
def test_gate_up_ends_with_the_swiglu_on_the_decode_gemm(env, m, fused) -> None:
    """Decode rows 9..256 end gate_up with the SwiGLU on the decode GEMM (one row takes the
    single-row GEMV's SwiGLU entry instead: tests/unit/test_gemv_swiglu.py)."""
    from atlas.runtime.ops.matmul_quant import Bf16Linear

    dev = _Sm90DecodeMock()
    kc = KernelCache(dev, KernelRoutes.from_env(env))
    gate_up = Bf16Linear(dev.alloc(24576 * 4096 * 2), 24576, 4096)
    assert gate_up.fuses_swiglu(kc, m) is fused
    assert not Bf16Linear(0, 24575, 4096).fuses_swiglu(kc, m)   # odd n: no [gate | up]
    if fused:
        x, act = dev.alloc(m * 4096 * 2), dev.alloc(m * 12288 * 2)
        gate_up.linear_swiglu(kc, 0, x, act, m)
        (record,) = dev.drain_launches()
        assert record.func.startswith("gemm_decode_sm90_swiglu_bf16")
        assert record.args["act"] == act and record.args["n"] == 24576


def test_l2_prefetch_depth_follows_the_switch() -> None:
    """ATLAS_DECODE_GEMM_L2_TILES sets the kernel's l2_tiles argument (0: the session-6
    prologue, the ring's tiles only); a malformed value names the variable."""
    assert DEFAULT_DECODE_GEMM_L2_TILES == 0  # opt-in (gpu17): routes.py says why
    for env, tiles in (({}, DEFAULT_DECODE_GEMM_L2_TILES), ({"ATLAS_DECODE_GEMM_L2_TILES": "8"}, 8),
                       ({"ATLAS_DECODE_GEMM_L2_TILES": "16"}, 16)):
        dev = _Sm90DecodeMock()
        kc = KernelCache(dev, KernelRoutes.from_env(env))
        matmul_decode.decode_gemm(kc, 0, dev.alloc(64 * 4096 * 2), dev.alloc(4096 * 4096 * 2),
                                  dev.alloc(64 * 4096 * 2), 64, 4096, 4096)
        (record,) = dev.drain_launches()
        assert record.args["l2_tiles"] == tiles
    with pytest.raises(ValueError, match="ATLAS_DECODE_GEMM_L2_TILES='x'"):
        KernelRoutes.from_env({"ATLAS_DECODE_GEMM_L2_TILES": "x"})
