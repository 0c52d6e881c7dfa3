"""The TMA prefill GEMM (gemm_sm90_tma): its references and check cases (its output against
the float64 oracle and, bit for bit, gemm_sm90's), the launch builder's routing, geometry,
tensor maps and switch, and the kernel constants the builder mirrors. There is no GPU in
CI; the device check is tools/gpu/check_kernels.py -k gemm_sm90_tma over the same cases."""

from __future__ import annotations

import re
import struct
from pathlib import Path

import numpy as np
import pytest

from atlas.runtime.cases import gemm as case_defs
from atlas.runtime.host import HostBackend
from atlas.runtime.kernel_check import check
from atlas.runtime.mock import MockGpuBackend
from atlas.runtime.ops import KernelCache, matmul
from atlas.runtime.ops.routes import KernelRoutes
from test_reference_kernels_a import test_cuda_entry_points_match_the_abi as _declares_abi

KERNELS = Path(__file__).resolve().parents[2] / "kernels/hopper/common"
SOURCE = KERNELS / "gemm_sm90_tma.cu"
TILE = KERNELS / "gemm_sm90_tile.cuh"

CASES = case_defs.gemm_sm90_tma_cases(np.random.default_rng(91))


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_reference_matches_oracle_and_the_cp_async_kernel(case) -> None:
    result = check(HostBackend(), case)
    assert result.passed, result.detail


def test_cases_cover_the_tile_edges_and_compare_both_kernels() -> None:
    shapes = case_defs.GEMM_SM90_TMA_SHAPES
    assert {1, 127, 129, 2048 + 65} <= {m for m, *_ in shapes}
    assert any(n % 256 for _, n, *_ in shapes) and any(k % 64 for _, _, k, _ in shapes)
    assert any(f32 for *_, f32 in shapes)
    assert any(-(-k // 64) < 4 for _, _, k, _ in shapes)    # fewer k-tiles than the ring
    assert any(-(-k // 64) > 8 * 4 for _, _, k, _ in shapes)  # many laps of it
    assert {c.module for c in CASES} == {"gemm_sm90_tma"}
    # every shape one block a tile and in clusters of two; an odd m-tile count (a pad block
    # wholly past m) and a last n-tile of at most 128 columns (a W half wholly past n)
    persistent = case_defs.GEMM_SM90_TMA_PERSISTENT_SHAPES
    gated = case_defs.GEMM_SM90_TMA_GLU_SHAPES
    plain = [c for c in CASES if c.same_bits == (("y", "y_cpasync"),)]
    assert len(plain) == 2 * (len(shapes) + len(persistent))
    assert sum("cluster2" in c.name for c in plain) == len(shapes) + len(persistent)
    # the persistent grid with more tiles than an H200 holds blocks (several tiles a block)
    assert sum("persistent" in c.name for c in plain) == 2 * len(persistent)
    assert any(-(-m // 128) * -(-n // 256) > 2 * 132 for m, n, *_ in persistent)
    assert any(-(-m // 128) % 2 for m, *_ in shapes)
    assert any(0 < n % 256 <= 128 for _, n, *_ in shapes)
    assert all(c.name.startswith("gemm_sm90_tma ") for c in CASES)  # -k gemm_sm90_tma
    # the gated entries: bit for bit the plain twin then the activation, I past a pair tile,
    # both activations, and the persistent grid with more tiles than an H100 / H200 holds
    rest = [c for c in CASES if c not in plain]
    assert len(rest) == len(gated)
    assert all(c.same_bits == (("act", "act_unfused"),) for c in rest)
    assert {glu for *_, glu in gated} == {case_defs.Glu.SWIGLU, case_defs.Glu.GEGLU}
    assert any(i % 128 for _, i, *_ in gated)
    assert any(p and -(-m // 128) * -(-2 * i // 256) > 132 for m, i, _, p, _ in gated)


def test_cuda_entry_points_declare_exactly_the_abi() -> None:
    _declares_abi("gemm_sm90_tma")


def _constant(name: str) -> int:
    """A namespace-level `constexpr int` of the kernel or its shared tile header (a literal,
    or a sum / product of literals and other constants)."""
    text = SOURCE.read_text() + TILE.read_text()
    (value,) = re.findall(rf"\b{name} = ([\w *+]+)[;,]", text)
    total = 0
    for term in value.split("+"):
        product = 1
        for factor in term.split("*"):
            factor = factor.strip()
            product *= int(factor) if factor.isdigit() else _constant(factor)
        total += product
    return total


def test_launch_constants_match_the_kernel() -> None:
    assert matmul.GEMM_SM90_TMA_THREADS == _constant("THREADS") == 256 + 32
    assert matmul.GEMM_SM90_TMA_SMEM == _constant("SMEM_BYTES") == matmul.GEMM_SM90_SMEM
    assert (_constant("BM"), _constant("BN"), _constant("kConsumerThreads")) == \
        matmul.GEMM_SM90_TILE
    # the ring, the static mbarriers and the 1 KiB the driver reserves fit one block an SM
    assert _constant("SMEM_BYTES") + _constant("kBarrierBytes") <= 227 * 1024
    assert _constant("STAGES") == 4 and 5 * _constant("kStageBytes") > 227 * 1024
    # both kernels take the raster and the epilogue from the shared header
    for cu in ("gemm_sm90.cu", "gemm_sm90_tma.cu"):
        text = (KERNELS / cu).read_text()
        assert '#include "gemm_sm90_tile.cuh"' in text and "store_tile<kF32Out>" in text


# ---- launch builder ----------------------------------------------------------------------

class _TmaMock(MockGpuBackend):
    """A mock device whose loaded set has both prefill wgmma modules (an sm_90a leaf's does),
    counting the tensor maps it encodes and the shared-memory opt-ins."""

    def __init__(self, modules: tuple[str, ...] = ("gemm", "gemm_sm90", "gemm_sm90_tma",
                                                   "gemv")) -> None:
        super().__init__()
        self.modules = list(modules)
        self.encoded: list[tuple[int, int, int, int]] = []
        self.opt_ins: list[tuple[str, int]] = []

    @property
    def module_names(self) -> list[str]:
        return self.modules

    def tensor_map_2d(self, ptr: int, rows: int, cols: int, box_rows: int,
                      box_cols: int = 64) -> bytes:
        self.encoded.append((ptr, rows, cols, box_rows))
        return super().tensor_map_2d(ptr, rows, cols, box_rows, box_cols)

    def set_max_dynamic_shared(self, handle, nbytes: int) -> None:
        self.opt_ins.append((handle.func, nbytes))


def _fields(tmap: bytes) -> tuple[int, ...]:
    """The (ptr, rows, cols, box_rows, box_cols) a device-less backend's map records."""
    return struct.unpack_from("<QQQII", tmap)


@pytest.mark.parametrize("m, n, k, f32, func", [
    (2048, 6144, 4096, False, "gemm_sm90_tma_bf16"),        # Qwen3-8B qkv: 16 x 24 tiles
    (2048 + 65, 4096, 12288, False, "gemm_sm90_tma_bf16"),  # down, a partial row tile
    (8192, 1024, 1024, True, "gemm_sm90_tma_bf16_f32"),
])
def test_prefill_goes_to_the_tma_twin_with_its_maps(m, n, k, f32, func) -> None:
    dev = _TmaMock()
    kc = KernelCache(dev, KernelRoutes.from_env({}))
    a, w, c = dev.alloc(m * k * 2), dev.alloc(n * k * 2), dev.alloc(m * n * 4)
    assert matmul.linear_route(kc, m, n) == "gemm_sm90_tma"
    for _ in range(2):
        matmul.linear(kc, 0, a, w, c, m, n, k, f32)
    first, second = dev.drain_launches()
    assert first == second
    assert (first.module, first.func) == ("gemm_sm90_tma", func)
    assert first.grid == (-(-m // 128) * -(-n // 256), 1, 1) and first.block == (288, 1, 1)
    assert first.shared == matmul.GEMM_SM90_TMA_SMEM
    args = first.args
    assert {key: args[key] for key in "awcmnk"} == {"a": a, "w": w, "c": c, "m": m, "n": n,
                                                     "k": k}
    assert _fields(args["amap"]) == (a, m, k, 128, 64)
    assert _fields(args["wmap"]) == (w, n, k, 256, 64)
    # each map encoded once, the opt-in made once
    assert dev.encoded == [(a, m, k, 128), (w, n, k, 256)]
    assert dev.opt_ins == [(func, matmul.GEMM_SM90_TMA_SMEM)]


@pytest.mark.parametrize("m, n, f32, func, grid", [
    (2048, 6144, False, "gemm_sm90_tma_cluster2_bf16", 16 * 24),
    (2048 + 65, 4096, False, "gemm_sm90_tma_cluster2_bf16", 18 * 16),  # 17 m-tiles + a pad
    (1, 528, True, "gemm_sm90_tma_cluster2_bf16_f32", 2 * 3),
])
def test_multicast_clusters_pair_m_tiles_and_halve_the_weight_box(m, n, f32, func,
                                                                   grid) -> None:
    dev = _TmaMock()
    kc = KernelCache(dev, KernelRoutes.from_env({"ATLAS_GEMM_TMA_MULTICAST": "1"}))
    a, w, c = dev.alloc(m * 4096 * 2), dev.alloc(n * 4096 * 2), dev.alloc(m * n * 4)
    matmul.gemm(kc, 0, a, w, c, m, n, 4096, f32, sm90=True)
    (record,) = dev.drain_launches()
    assert (record.module, record.func) == ("gemm_sm90_tma", func)
    assert record.grid == (grid, 1, 1) and grid % 2 == 0 and record.block == (288, 1, 1)
    assert _fields(record.args["amap"]) == (a, m, 4096, 128, 64)
    assert _fields(record.args["wmap"]) == (w, n, 4096, 128, 64)
    assert "__cluster_dims__(2, 1, 1)" in SOURCE.read_text()


@pytest.mark.parametrize("tiles, persistent, resident, cluster, grid", [
    (384, False, 132, 1, 384),    # one block a tile
    (384, True, 132, 1, 132),     # the resident blocks, each looping
    (384, True, None, 1, 132),    # no driver to ask: one an SM
    (96, True, 132, 1, 96),       # fewer tiles than blocks
    (288, True, 128, 2, 128),     # clusters: the driver's count (whole clusters)
    (288, True, None, 2, 132),
    (2, True, 132, 2, 2),
])
def test_persistent_grid(tiles, persistent, resident, cluster, grid) -> None:
    assert matmul.tma_grid(tiles, persistent, resident, 132, cluster) == grid
    assert grid % cluster == 0


def test_persistent_launch_asks_the_driver_for_the_resident_blocks() -> None:
    class Resident(_TmaMock):
        def resident_blocks(self, handle, block, shared_mem, cluster) -> int:
            self.asked = (handle.func, block, shared_mem, cluster)
            return 130

    dev = Resident()
    env = {"ATLAS_GEMM_TMA_PERSISTENT": "1", "ATLAS_GEMM_TMA_MULTICAST": "1"}
    kc = KernelCache(dev, KernelRoutes.from_env(env))
    a, w, c = dev.alloc(2048 * 4096 * 2), dev.alloc(6144 * 4096 * 2), dev.alloc(1 << 26)
    matmul.linear(kc, 0, a, w, c, 2048, 6144, 4096)
    (record,) = dev.drain_launches()
    assert record.func == "gemm_sm90_tma_cluster2_bf16" and record.grid == (130, 1, 1)
    assert dev.asked == ("gemm_sm90_tma_cluster2_bf16", 288, matmul.GEMM_SM90_TMA_SMEM, 2)


def test_switch_absence_and_forcing_choose_the_cp_async_kernel() -> None:
    def launched(env: dict[str, str], dev: MockGpuBackend, **kw) -> tuple[str, int]:
        kc = KernelCache(dev, KernelRoutes.from_env(env))
        a, w, c = dev.alloc(2048 * 4096 * 2), dev.alloc(6144 * 4096 * 2), dev.alloc(1 << 26)
        matmul.gemm(kc, 0, a, w, c, 2048, 6144, 4096, **kw)
        (record,) = dev.drain_launches()
        return record.func, record.block[0]

    routes = KernelRoutes.from_env({})
    assert routes.gemm_tma and not routes.gemm_tma_multicast and not routes.gemm_tma_persistent
    assert launched({}, _TmaMock()) == ("gemm_sm90_tma_bf16", 288)
    assert launched({"ATLAS_GEMM_TMA": "0"}, _TmaMock()) == ("gemm_sm90_bf16", 256)
    assert launched({}, _TmaMock(), tma=False) == ("gemm_sm90_bf16", 256)
    assert launched({"ATLAS_GEMM_TMA": "0"}, _TmaMock(), sm90=True, tma=True) == (
        "gemm_sm90_tma_bf16", 288)
    # a set built before the twin existed; the mma.sync switch still wins over both
    assert launched({}, _TmaMock(("gemm", "gemm_sm90", "gemv"))) == ("gemm_sm90_bf16", 256)
    assert launched({"ATLAS_GEMM_SM90": "0"}, _TmaMock()) == ("gemm_bf16", 256)
    kc = KernelCache(_TmaMock(), KernelRoutes.from_env({"ATLAS_GEMM_TMA": "0"}))
    assert matmul.linear_route(kc, 2048, 6144) == "gemm_sm90"


def test_each_kernels_cases_launch_that_kernel_whatever_the_routes() -> None:
    """On a set with both modules (the twin on by default), gemm_sm90's cases still run
    gemm_sm90 and the twin's run the twin beside it."""
    for factory, funcs in ((case_defs.gemm_sm90_cases, {"gemm_sm90_bf16"}),
                           (case_defs.gemm_sm90_tma_cases,
                            {"gemm_sm90_tma_bf16", "gemm_sm90_bf16"})):
        case = factory(np.random.default_rng(0))[0]
        dev = _TmaMock()
        case.run(dev, 0, {name: dev.alloc(1 << 20) for name in (*case.inputs, *case.outputs)})
        assert {r.func for r in dev.drain_launches()} == funcs


def test_activation_maps_follow_the_row_count() -> None:
    """A prefill chunk's row count is part of a's map (its zero fill starts at row m): a new
    m encodes a new map for the same buffer, the weight's is reused."""
    dev = _TmaMock()
    kc = KernelCache(dev, KernelRoutes.from_env({}))
    a, w, c = dev.alloc(4096 * 4096 * 2), dev.alloc(6144 * 4096 * 2), dev.alloc(1 << 26)
    for m in (2048, 4096, 2048):
        matmul.gemm(kc, 0, a, w, c, m, 6144, 4096)
    assert dev.encoded == [(a, 2048, 4096, 128), (w, 6144, 4096, 256), (a, 4096, 4096, 128)]
    assert len(dev.drain_launches()) == 3


@pytest.mark.parametrize("tiles_m, tiles_n", [(1, 1), (17, 16), (16, 24), (9, 3), (2, 5)])
def test_cluster_raster_pairs_share_an_n_tile_and_cover_every_tile(tiles_m: int,
                                                                   tiles_n: int) -> None:
    """tile_origin<2> (gemm_sm90_tile.cuh) modelled: the m-tiles counted up to an even
    number, blocks 2i and 2i + 1 (one cluster) get the same n-tile and two m-tiles, and every
    real tile is some block's exactly once (the pad m-tile only past m)."""
    group_m_tiles, pair = 8, 2
    padded = -(-tiles_m // pair) * pair
    per_group = group_m_tiles * tiles_n
    seen = np.zeros((padded, tiles_n), dtype=np.int64)
    origin = []
    for t in range(padded * tiles_n):
        first_m = t // per_group * group_m_tiles
        group_m = min(padded - first_m, group_m_tiles)
        in_group = t % per_group
        origin.append((first_m + in_group % group_m, in_group // group_m))
        seen[origin[-1]] += 1
    assert (seen == 1).all()
    for t in range(0, len(origin), 2):
        (m0, n0), (m1, n1) = origin[t], origin[t + 1]
        assert n0 == n1 and m1 == m0 + 1
    assert "const int tiles_m = ((m + BM - 1) / BM + kPairM - 1) / kPairM * kPairM;" in \
        TILE.read_text()
