"""The wgmma GEMM (gemm_sm90): its reference and check cases, the dispatch rule that routes
prefill GEMMs to it, and a numpy model of the kernel's shared-memory and register index math
checked against the hardware's documented rules (there is no GPU in CI; the device check of
the kernel itself is tools/gpu/check_kernels.py)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from atlas.runtime.cases import gemm as gemm_case_defs
from atlas.runtime.gpu import H200_FACTS, DeviceFacts
from atlas.runtime.host import HostBackend
from atlas.runtime.kernel_check import check
from atlas.runtime.mock import MockGpuBackend
from atlas.runtime.ops import KernelCache, matmul
from atlas.runtime.ops.routes import KernelRoutes, env_switch
# the elementwise kernels' check that a .cu file declares exactly its module's ABI entries
from test_reference_kernels_a import test_cuda_entry_points_match_the_abi as _declares_abi

CASES = gemm_case_defs.gemm_sm90_cases(np.random.default_rng(90))


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_reference_matches_oracle(case) -> None:
    result = check(HostBackend(), case)
    assert result.passed, result.detail


def test_cases_target_the_sm90_module_only() -> None:
    assert {c.module for c in CASES} == {"gemm_sm90"}
    assert all(c.module == "gemm" for c in gemm_case_defs.gemm_cases(np.random.default_rng(0)))


def test_cuda_entry_points_declare_exactly_the_abi() -> None:
    _declares_abi("gemm_sm90")


# ---- dispatch ----------------------------------------------------------------------------

class _Sm90Mock(MockGpuBackend):
    """A mock device whose PTX set has gemm_sm90 (like a Hopper leaf) and that counts the
    dynamic shared memory opt-ins."""

    def __init__(self) -> None:
        super().__init__()
        self.opt_ins: list[tuple[str, int]] = []

    @property
    def module_names(self) -> list[str]:
        return ["gemm", "gemm_sm90", "gemv"]

    def set_max_dynamic_shared(self, handle, nbytes: int) -> None:
        self.opt_ins.append((handle.func, nbytes))


@pytest.fixture
def enabled(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ATLAS_GEMM_SM90", raising=False)


def _launch(backend: MockGpuBackend, m: int, n: int, k: int, **kw):
    a, w, c = backend.alloc(m * k * 2), backend.alloc(n * k * 2), backend.alloc(m * n * 4)
    matmul.linear(KernelCache(backend), 0, a, w, c, m, n, k, **kw)
    (record,) = backend.drain_launches()
    return record


def test_prefill_goes_to_wgmma_with_its_shared_memory(enabled) -> None:
    dev = _Sm90Mock()
    kc = KernelCache(dev)
    a, w, c = dev.alloc(4096 * 4096 * 2), dev.alloc(6144 * 4096 * 2), dev.alloc(4096 * 6144 * 2)
    for _ in range(2):
        matmul.linear(kc, 0, a, w, c, 4096, 6144, 4096)
    first, second = dev.drain_launches()
    assert first == second
    assert (first.module, first.func) == ("gemm_sm90", "gemm_sm90_bf16")
    assert first.grid == (32 * 24, 1, 1) and first.block == (256, 1, 1)
    assert first.shared == matmul.GEMM_SM90_SMEM == 4 * (128 + 256) * 64 * 2 + 1024
    assert first.shared <= 227 * 1024
    assert first.args == {"a": a, "w": w, "c": c, "m": 4096, "n": 6144, "k": 4096}
    assert dev.opt_ins == [("gemm_sm90_bf16", matmul.GEMM_SM90_SMEM)]  # once per kernel


def test_f32_output_uses_the_f32_entry(enabled) -> None:
    record = _launch(_Sm90Mock(), 2048, 8192, 1024, out_f32=True)
    assert record.func == "gemm_sm90_bf16_f32"


@pytest.mark.parametrize("m, n, sm90", [
    (8192, 1024, True),    # 64 x 4 = 256 tiles
    (2048, 1024, False),   # 16 x 4 = 64 tiles: below half the H200's 132 SMs
    (2112, 1024, True),    # 17 x 4 = 68 tiles
    (512, 6144, True),     # a 512-token chunk of Qwen3-8B qkv: 4 x 24 = 96 tiles
    (256, 4096, False),    # 2 x 16 = 32 tiles
    (64, 6144, False),     # a decode batch: 1 x 24 = 24 tiles
])
def test_minimum_grid(enabled, m: int, n: int, sm90: bool) -> None:
    blocks = -(-m // 128) * -(-n // 256)
    assert (blocks >= matmul.gemm_sm90_min_blocks(132)) == sm90
    assert (_launch(_Sm90Mock(), m, n, 1024).module == "gemm_sm90") == sm90


def test_falls_back_without_the_module_or_the_switch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ATLAS_GEMM_SM90", "0")  # read when the KernelCache is built
    assert _launch(_Sm90Mock(), 4096, 6144, 4096).func == "gemm_bf16"
    monkeypatch.setenv("ATLAS_GEMM_SM90", "1")
    # the gb10 sets, the host references and the plain mock have no gemm_sm90 module
    assert MockGpuBackend().module_names == [] and HostBackend().module_names == []
    assert _launch(MockGpuBackend(), 4096, 6144, 4096).func == "gemm_bf16"


def test_explicit_tile_choices_win(enabled) -> None:
    dev = _Sm90Mock()
    kc = KernelCache(dev)
    a, w, c = dev.alloc(1 << 26), dev.alloc(1 << 26), dev.alloc(1 << 26)
    matmul.gemm(kc, 0, a, w, c, 4096, 4096, 4096, skinny=False)  # an mma.sync tile asked for
    matmul.gemm(kc, 0, a, w, c, 4096, 4096, 4096, sm90=False)
    matmul.gemm(kc, 0, a, w, c, 3, 16, 16, sm90=True)  # forced below the rule's minimum
    funcs = [r.func for r in dev.drain_launches()]
    assert funcs == ["gemm_bf16", "gemm_bf16", "gemm_sm90_bf16"]


# ---- index math of gemm_sm90.cu, modelled in numpy ----------------------------------------

BM, BN, BK, GROUP_M = 128, 256, 64, 8


def _swizzle128(row: np.ndarray, chunk: np.ndarray) -> np.ndarray:
    """gemm_sm90.cu swizzle128: byte offset of 16-byte chunk `chunk` of tile row `row`."""
    return row * 128 + ((chunk ^ (row & 7)) << 4)


def _hardware_address(start: int, row: np.ndarray, col_byte: np.ndarray) -> np.ndarray:
    """Where wgmma reads byte `col_byte` (< 32: one k16 slice) of operand row `row` for a
    K-major, 128-byte-swizzled descriptor with stride byte offset 1024 (PTX ISA: 8-row core
    groups SBO apart, rows of a group 128 bytes apart, then address bits [4:6] ^= [7:9])."""
    linear = start + (row // 8) * 1024 + (row % 8) * 128 + col_byte
    return linear ^ (((linear >> 7) & 7) << 4)


@pytest.mark.parametrize("rows, base", [(64, 0), (64, 8192), (256, 16384)])
def test_descriptor_slices_read_what_the_copies_wrote(rows: int, base: int) -> None:
    # shared memory as the copies leave it: element (r, kcol) of the tile at its swizzled byte
    smem = np.full(base + rows * 128, -1, dtype=np.int64)
    r, ch = np.meshgrid(np.arange(rows), np.arange(BK // 8), indexing="ij")
    for e in range(8):  # 8 bf16 per chunk; store the element id at its first byte
        smem[base + _swizzle128(r, ch) + 2 * e] = r * BK + ch * 8 + e
    for kk in range(BK // 16):  # descriptor start advanced 32 bytes per k16 slice
        rr, kb = np.meshgrid(np.arange(rows), np.arange(0, 32, 2), indexing="ij")
        got = smem[_hardware_address(base + 32 * kk, rr, kb)]
        np.testing.assert_array_equal(got, rr * BK + 16 * kk + kb // 2)


def test_accumulator_fragments_tile_the_warpgroup_block_once() -> None:
    hits = np.zeros((64, BN), dtype=np.int64)
    for tid in range(128):
        lane, warp = tid % 32, tid // 32
        for j in range(128):
            row = 16 * warp + lane // 4 + 8 * ((j >> 1) & 1)
            col = 8 * (j >> 2) + 2 * (lane % 4) + (j & 1)
            hits[row, col] += 1
    assert (hits == 1).all()


@pytest.mark.parametrize("tiles_m, tiles_n", [(1, 1), (10, 2), (32, 24), (8, 3), (17, 5)])
def test_raster_groups_visit_every_tile_once(tiles_m: int, tiles_n: int) -> None:
    seen = np.zeros((tiles_m, tiles_n), dtype=np.int64)
    per_group = GROUP_M * tiles_n
    for pid in range(tiles_m * tiles_n):
        first_m = pid // per_group * GROUP_M
        group_m = min(tiles_m - first_m, GROUP_M)
        in_group = pid % per_group
        seen[first_m + in_group % group_m, in_group // group_m] += 1
    assert (seen == 1).all()


def test_copies_cover_each_stage_once() -> None:
    # load_tile: thread t, iteration it -> chunk i = t + 256 it -> (row i / 8, chunk i % 8)
    for rows in (BM, BN):
        i = np.arange(256)[:, None] + 256 * np.arange(rows * 8 // 256)[None, :]
        offsets = _swizzle128(i // 8, i % 8).ravel()
        assert sorted(offsets) == list(range(0, rows * 128, 16))



class _HopperMock(_Sm90Mock):
    """A mock whose PTX set also has the tensor-core batched GEMV (a hopper leaf)."""

    @property
    def module_names(self) -> list[str]:
        return ["gemm", "gemm_sm90", "gemv", "gemv_mma"]


@pytest.mark.parametrize("m, module", [(1, "gemv"), (2, "gemv"), (3, "gemv_mma"),
                                       (7, "gemv_mma"), (64, "gemv_mma"), (65, "gemm")])
def test_linear_sends_decode_batches_to_the_batched_gemv(m: int, module: str) -> None:
    assert _launch(_HopperMock(), m, 4096, 4096).module == module


def test_batched_gemv_switch_and_absence_fall_back_to_the_gemm(monkeypatch) -> None:
    assert _launch(_Sm90Mock(), 32, 4096, 4096).module == "gemm"  # no gemv_mma module
    monkeypatch.setenv("ATLAS_BATCHED_GEMV", "0")
    assert _launch(_HopperMock(), 32, 4096, 4096).module == "gemm"


def test_env_switch_reads_zero_and_one() -> None:
    assert env_switch({"ATLAS_X": "0"}, "ATLAS_X", True) is False
    assert env_switch({"ATLAS_X": "1"}, "ATLAS_X", False) is True
    assert env_switch({}, "ATLAS_X", True) is True


def test_switches_are_read_when_the_kernel_cache_is_built_not_at_import(monkeypatch) -> None:
    monkeypatch.setenv("ATLAS_GEMV_MMA_WIDE", "1")
    monkeypatch.setenv("ATLAS_BATCHED_GEMV_MIN_M", "5")
    routes = KernelCache(_HopperMock()).routes
    assert routes == KernelRoutes(gemm_sm90=True, batched_gemv=True, batched_gemv_min_m=5,
                                  gemv_mma_wide=True)
    monkeypatch.delenv("ATLAS_GEMV_MMA_WIDE")
    monkeypatch.delenv("ATLAS_BATCHED_GEMV_MIN_M")
    assert KernelCache(_HopperMock()).routes == KernelRoutes()
    with pytest.raises(ValueError, match="ATLAS_GEMV_MMA_WIDE='2'"):
        KernelRoutes.from_env({"ATLAS_GEMV_MMA_WIDE": "2"})
    with pytest.raises(ValueError, match="ATLAS_BATCHED_GEMV_MIN_M='x'"):
        KernelRoutes.from_env({"ATLAS_BATCHED_GEMV_MIN_M": "x"})


class _SmallGpu(_HopperMock):
    """A Hopper-like device with a third of the H200's SMs (its facts from the "driver")."""

    def device_facts(self) -> DeviceFacts:
        return dataclasses.replace(H200_FACTS, sm_count=44)


def test_grids_are_sized_by_the_devices_sm_count() -> None:
    """128x128 tiles fill a 44-SM device sooner, and half of 44 SMs of wgmma tiles is enough:
    the same product takes different kernels than on an H200."""
    m, n = 1024, 2048  # 8 x 16 = 128 mma.sync tiles, 8 x 8 = 64 wgmma tiles
    assert _launch(_Sm90Mock(), m, n, 1024).func == "gemm_bf16_skinny"  # 64 < 66, 128 < 132
    small = _SmallGpu()
    assert KernelCache(small).facts.sm_count == 44
    assert _launch(small, m, n, 1024).func == "gemm_sm90_bf16"  # 64 >= 22


def test_batched_gemv_min_m_moves_small_batches_off_the_cuda_core_gemv(monkeypatch) -> None:
    monkeypatch.setenv("ATLAS_BATCHED_GEMV_MIN_M", "5")
    kc = KernelCache(_HopperMock())
    assert [matmul.linear_route(kc, m, 4096) for m in (1, 4, 5, 8, 64, 65)] == [
        "gemv", "gemv", "gemv_mma", "gemv_mma", "gemv_mma", "gemm"]
    assert matmul.linear_route(KernelCache(_Sm90Mock()), 5, 4096) == "gemv"  # no gemv_mma
    assert _launch(_HopperMock(), 6, 4096, 4096).module == "gemv_mma"
