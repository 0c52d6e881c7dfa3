"""The TMA decode GEMM (gemm_decode_tma): its references and check cases (the TMA kernel's
output against the float64 oracle and, bit for bit, the cp.async kernel's), the launch
builder's geometry, entry points, tensor maps and switch, the kernel constants the builder
mirrors, and the launch plumbing tensor maps need (ArgKind.TMAP's 128-byte, 64-byte
aligned parameter slots; the maps' checks and their cache). There is no GPU in CI; the
device check is tools/gpu/check_kernels.py -k gemm_decode_tma over the same cases."""

from __future__ import annotations

import ctypes
import re
import struct
import threading
from pathlib import Path

import numpy as np
import pytest

from atlas.runtime.cases import gemm_decode_tma as case_defs
from atlas.runtime.cuda import (PARAM_BLOCK_BYTES, CudaBackend, _Kernel, _ThreadState,
                                slot_layout)
from atlas.runtime.gpu import (TENSOR_MAP_BYTES, ArgKind, GpuError, KernelHandle, KernelLaunch,
                               KernelSig, check_tensor_map_2d)
from atlas.runtime.host import HostBackend
from atlas.runtime.kernel_abi import GEMM_DECODE_TMA
from atlas.runtime.kernel_check import check
from atlas.runtime.mock import MockGpuBackend
from atlas.runtime.ops import KernelCache, matmul, matmul_decode
from atlas.runtime.ops.routes import DECODE_GEMM_SPLITS, DECODE_GEMM_TMA_SPLITS, KernelRoutes
from test_gemm_decode_sm90 import _constant as _kernel_constant
from test_reference_kernels_a import test_cuda_entry_points_match_the_abi as _declares_abi


#: these tests pin the one-tile entries (the persistent form: test_decode_gemm_persistent.py)
ONE_TILE = {"ATLAS_DECODE_GEMM_PERSISTENT": "0"}


@pytest.fixture(autouse=True)
def _one_tile_entries(monkeypatch: pytest.MonkeyPatch) -> None:
    """KernelCache(dev) reads the environment: the one-tile entries there too."""
    monkeypatch.setenv("ATLAS_DECODE_GEMM_PERSISTENT", "0")

SOURCE = Path(__file__).resolve().parents[2] / "kernels/hopper/common/gemm_decode_tma.cu"

CASES = [case_defs.gemm_decode_tma_case(np.random.default_rng(93), *shape)
         for shape in case_defs.tma_case_shapes() if shape[0] * shape[1] * shape[2] <= 2 ** 21]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_reference_matches_oracle_and_the_cp_async_kernel(case) -> None:
    result = check(HostBackend(), case)
    assert result.passed, result.detail


def test_cases_cover_widths_splits_shapes_and_edges() -> None:
    shapes = case_defs.tma_case_shapes()
    assert {matmul_decode.decode_cols(m) for m, *_ in shapes} == set(matmul_decode.DECODE_COLS)
    assert any(m % 2 for m, *_ in shapes) and {1, 255, 256} <= {m for m, *_ in shapes}
    assert any(n % 64 for _, n, *_ in shapes) and any(k % 64 for _, _, k, *_ in shapes)
    assert {s for *_, s, _, _ in shapes} >= {1, 2, 3, 4, 5, 6, 7, 8, None}
    assert {s for *_, s, _, g in shapes if g} >= {1, 2, 3, 4, 5, 8}  # SwiGLU entries too
    for wide in (False, True):
        for glu in matmul_decode.Glu:
            assert any(w == wide and g == glu for *_, w, g in shapes)
    # the GeGLU entries at every split, 1..8 and the rule's
    assert {s for *_, s, _, g in shapes if g == matmul_decode.Glu.GEGLU} >= {*range(1, 9), None}
    # two warpgroups at N = 16 (the cp.async kernel runs one there)
    assert any(w and m <= 16 for m, *_, w, _ in shapes)
    # every case at a split both kernels have compares their bits; the others the oracle's
    for case, shape in zip(CASES, (s for s in shapes if s[0] * s[1] * s[2] <= 2 ** 21)):
        assert bool(case.same_bits) == (shape[4] in (None, 1, 2, 4, 8)), case.name
    assert len(CASES) >= 15 and any(not c.same_bits for c in CASES)  # the host runs these


def test_cuda_entry_points_declare_exactly_the_abi() -> None:
    _declares_abi("gemm_decode_tma")


def _constant(name: str) -> int:
    """A namespace-level `constexpr int` of the kernel or the shared tile header."""
    return _kernel_constant(name, SOURCE)


def test_launch_constants_match_the_kernel() -> None:
    assert matmul_decode.TMA_PRODUCER_THREADS == _constant("kProducerThreads") == 32
    assert matmul_decode.TMA_MAX_STAGES == _constant("kMaxStages")
    assert matmul_decode.DECODE_PAIR_BUDGET == _constant("kPairBudget")
    assert matmul_decode.DECODE_SOLO_BUDGET == _constant("kSoloBudget")
    assert _constant("kMaxThreads") == 2 * 128 + 32  # every entry's __launch_bounds__
    text = SOURCE.read_text()
    for split in range(2, 9):  # every portable cluster size (DECODE_GEMM_TMA_SPLITS)
        # bf16, f32, SwiGLU, GeGLU; their persistent forms at PERSISTENT_SPLITS
        persistent = 4 if split in matmul_decode.PERSISTENT_SPLITS else 0
        assert text.count(f"__cluster_dims__({split}, 1, 1)") == 4 + persistent
    entries = re.findall(r"\bgemm_decode_tma_\w+_persistent\w*\(", text)
    assert len(entries) == 4 * len(matmul_decode.PERSISTENT_SPLITS)
    assert DECODE_GEMM_TMA_SPLITS == tuple(range(1, 9))
    # 160 or 288 threads select the block shape
    assert "kGroupThreads * kMaxGroups + kProducerThreads" in text
    assert "kGroupThreads + kProducerThreads" in text


@pytest.mark.parametrize("cols, groups, stages, per_sm", [
    (16, 1, 11, 2), (32, 1, 9, 2), (64, 1, 6, 2), (128, 1, 4, 2), (256, 1, 5, 1),
    (16, 2, 11, 1), (32, 2, 10, 1), (64, 2, 8, 1), (128, 2, 6, 1), (256, 2, 4, 1)])
def test_ring_geometry(cols: int, groups: int, stages: int, per_sm: int) -> None:
    """Up to 16 stages within the cp.async kernel's budgets; per_sm blocks, each with its
    256 bytes of mbarriers and 1 KiB reservation, fit an SM's 228 KiB; the epilogue's
    partial tile fits in the ring; the opt-in covers every launch."""
    assert matmul_decode.ring_stages(cols, groups, matmul_decode.TMA_MAX_STAGES) == stages
    assert matmul_decode.blocks_per_sm(cols, groups) == per_sm
    smem = matmul_decode.smem_bytes(cols, groups, matmul_decode.TMA_MAX_STAGES)
    assert smem == stages * (64 * groups + cols) * 128 + 1024
    assert per_sm * (smem + 256 + 1024) <= 228 * 1024
    assert cols * (64 * groups + 4) * 4 <= smem - 1024
    assert smem <= matmul_decode.TMA_MAX_SHARED <= 227 * 1024 - 256


# ---- launch builder ----------------------------------------------------------------------

class _TmaDecodeMock(MockGpuBackend):
    """A mock device whose loaded set has both decode GEMM modules (an sm_90a leaf's does),
    counting the tensor maps it encodes."""

    def __init__(self) -> None:
        super().__init__()
        self.encoded: list[tuple[int, int, int, int]] = []

    @property
    def module_names(self) -> list[str]:
        return ["gemm", "gemm_sm90", "gemv", "gemv_mma", "gemm_decode_sm90", "gemm_decode_tma"]

    def tensor_map_2d(self, ptr: int, rows: int, cols: int, box_rows: int,
                      box_cols: int = 64) -> bytes:
        self.encoded.append((ptr, rows, cols, box_rows))
        return super().tensor_map_2d(ptr, rows, cols, box_rows, box_cols)


def _fields(tmap: bytes) -> tuple[int, ...]:
    """The (ptr, rows, cols, box_rows, box_cols) a device-less backend's map records."""
    return struct.unpack_from("<QQQII", tmap)


@pytest.mark.parametrize("m, n, k, f32, wide, swiglu, func, grid, threads, cols, box", [
    (64, 4096, 4096, False, False, False, "gemm_decode_tma_bf16_split4", 256, 160, 64, 64),
    (64, 4096, 4096, False, True, False, "gemm_decode_tma_bf16_split4", 128, 288, 64, 128),
    (9, 151936, 4096, True, False, False, "gemm_decode_tma_bf16_f32", 2374, 160, 16, 64),
    (8, 6144, 4096, False, True, False, "gemm_decode_tma_bf16_split2", 96, 288, 16, 128),
    (64, 24576, 4096, False, False, True, "gemm_decode_tma_swiglu_bf16_split2", 768, 160, 64,
     32),
    (200, 24576, 4096, False, True, True, "gemm_decode_tma_swiglu_bf16_split2", 384, 288, 256,
     64),
    # Gemma 3 4B's gate_up at 64 rows on the GeGLU entry (Glu.GEGLU = 2)
    (64, 20480, 2560, False, True, 2, "gemm_decode_tma_geglu_bf16_split4", 640, 288, 64, 64),
])
def test_geometry_entry_point_and_tensor_maps(m, n, k, f32, wide, swiglu, func, grid, threads,
                                              cols, box) -> None:
    dev = _TmaDecodeMock()
    x, w, y = dev.alloc(m * k * 2), dev.alloc(n * k * 2), dev.alloc(m * n * 4)
    matmul_decode.decode_gemm(KernelCache(dev), 0, x, w, y, m, n, k, f32, wide=wide,
                              glu=swiglu)
    (record,) = dev.drain_launches()
    groups = threads // 128
    assert (record.module, record.func) == ("gemm_decode_tma", func)
    assert record.grid == (grid, 1, 1) and record.block == (threads, 1, 1)
    assert record.shared == matmul_decode.smem_bytes(cols, groups, matmul_decode.TMA_MAX_STAGES)
    args = record.args
    assert {key: args[key] for key in "xwymnk"} == {"x": x, "w": w, "y": y, "m": m, "n": n,
                                                     "k": k}
    # w's map boxes 64 G weight rows (a SwiGLU stage: two halves), x's the batch's width
    assert _fields(args["wmap"]) == (w, n, k, box, 64)
    assert _fields(args["xmap"]) == (x, m, k, cols, 64)


def test_tensor_maps_are_encoded_once_per_buffer_shape_and_box() -> None:
    dev = _TmaDecodeMock()
    kc = KernelCache(dev)
    x, w, y = dev.alloc(256 * 1024 * 2), dev.alloc(512 * 1024 * 2), dev.alloc(256 * 512 * 2)
    for _ in range(3):  # three decode steps of 64 rows, then a batch of 40, then of 9
        matmul_decode.decode_gemm(kc, 0, x, w, y, 64, 512, 1024)
    matmul_decode.decode_gemm(kc, 0, x, w, y, 40, 512, 1024)
    matmul_decode.decode_gemm(kc, 0, x, w, y, 9, 512, 1024)
    # two warpgroups (128-row weight boxes) from N = 64, one below
    assert dev.encoded == [(w, 512, 1024, 128), (x, 64, 1024, 64), (x, 40, 1024, 64),
                           (w, 512, 1024, 64), (x, 9, 1024, 16)]
    records = dev.drain_launches()
    assert len(records) == 5 and records[0].args["wmap"] == records[3].args["wmap"]


def test_switch_and_absence_choose_the_cp_async_kernel() -> None:
    def launched(env: dict[str, str], dev: MockGpuBackend) -> str:
        kc = KernelCache(dev, KernelRoutes.from_env({**ONE_TILE, **env}))
        x, w, y = dev.alloc(64 * 4096 * 2), dev.alloc(4096 * 4096 * 2), dev.alloc(64 * 8192)
        matmul.linear(kc, 0, x, w, y, 64, 4096, 4096)
        (record,) = dev.drain_launches()
        return record.module

    assert KernelRoutes.from_env({}).decode_gemm_tma
    assert launched({}, _TmaDecodeMock()) == "gemm_decode_tma"
    assert launched({"ATLAS_DECODE_GEMM_TMA": "0"}, _TmaDecodeMock()) == "gemm_decode_sm90"

    class CpAsyncOnly(_TmaDecodeMock):  # a set built before the TMA kernel existed
        @property
        def module_names(self) -> list[str]:
            return [m for m in super().module_names if m != "gemm_decode_tma"]

    assert launched({}, CpAsyncOnly()) == "gemm_decode_sm90"


@pytest.mark.parametrize("ptr, rows, cols, box_rows, box_cols, match", [
    (8, 4, 64, 16, 64, "not 16-byte aligned"), (16, 0, 64, 16, 64, "rows, cols >= 1"),
    (16, 4, 60, 16, 64, "multiple of 16"), (16, 4, 64, 257, 64, "box"),
    (16, 4, 64, 0, 64, "box"), (16, 4, 64, 16, 32, "box")])
def test_tensor_map_checks(ptr, rows, cols, box_rows, box_cols, match) -> None:
    with pytest.raises(ValueError, match=match):
        check_tensor_map_2d(ptr, rows, cols, box_rows, box_cols)
    with pytest.raises(ValueError, match=match):
        HostBackend().tensor_map_2d(ptr, rows, cols, box_rows, box_cols)


# ---- tensor-map parameters ---------------------------------------------------------------

def test_slot_layout_aligns_tensor_maps() -> None:
    st, offsets = slot_layout([p.kind for p in GEMM_DECODE_TMA.params])
    # x, w, y, m, n, k in 8-byte slots, the two maps on 64-byte boundaries
    assert offsets == (0, 8, 16, 24, 32, 40, 64, 192) and st.size == 320
    wmap, xmap = bytes(range(128)), bytes(range(128, 256))
    raw = st.pack(1, 2, 3, 4, 5, 6, wmap, xmap)
    assert raw[64:192] == wmap and raw[192:320] == xmap
    assert struct.unpack_from("<QQQIxxxxI", raw, 0) == (1, 2, 3, 4, 5)
    # scalars only: slot i at 8 i, as before
    assert slot_layout([ArgKind.PTR, ArgKind.U32, ArgKind.F32])[1] == (0, 8, 16)
    with pytest.raises(GpuError, match="exceed"):
        slot_layout([ArgKind.TMAP] * 7 + [ArgKind.PTR] * 20)


def test_thread_state_points_each_slot_into_an_aligned_block() -> None:
    ts = _ThreadState()
    base = ts.params.ctypes.data
    assert base % 64 == 0 and ts.params.size == PARAM_BLOCK_BYTES
    offsets = (0, 8, 64, 192)
    addr = ts.ptrs_for(offsets)
    assert ts.ptrs_for(offsets) == addr  # made once
    table = np.frombuffer(ts.layouts[offsets].tobytes(), np.uint64)
    assert list(table - np.uint64(base)) == list(offsets)
    assert ts.ptrs_for(None) == ts.ptrs_addr


def test_launch_values_of_a_tensor_map_are_checked() -> None:
    sig = KernelSig.of("m", "f", "p:ptr n:u32 map:tmap")
    good = bytes(TENSOR_MAP_BYTES)
    assert sig.pack((16, 3, good)) == ((ArgKind.PTR, 16), (ArgKind.U32, 3), (ArgKind.TMAP, good))
    with pytest.raises(TypeError, match="128 bytes of a tensor map"):
        sig.pack((16, 3, bytes(64)))
    with pytest.raises(TypeError, match="128 bytes of a tensor map"):
        sig.pack((16, 3, 7))
    dev = MockGpuBackend()
    launch = KernelLaunch(dev, GEMM_DECODE_TMA)
    launch(0, 1, 160, 0, 16, 32, 48, 1, 2, 8, good, good)  # the fast path takes the bytes
    (record,) = dev.drain_launches()
    assert record.args == {"x": 16, "w": 32, "y": 48, "m": 1, "n": 2, "k": 8, "wmap": good,
                           "xmap": good}
    with pytest.raises(TypeError, match="tensor map"):
        launch(0, 1, 160, 0, 16, 32, 48, 1, 2, 8, good, b"short")


# ---- the split rule with the device's cluster occupancy ----------------------------------

@pytest.mark.parametrize("m, n, k, resident, split", [
    (64, 4096, 4096, None, 4),                            # the model: 264 slots, 64 x 4
    (64, 4096, 4096, {1: 264, 2: 264, 4: 132, 8: 128}, 2),  # split 4 holds 132: 64 x 2
    (64, 6144, 4096, {1: 264, 2: 200, 4: 264, 8: 264}, 2),  # 96 x 2 = 192 fits 200
    (64, 6144, 4096, {1: 264, 2: 160, 4: 264, 8: 264}, 1),  # ... but not 160
    (64, 24576, 4096, {1: 264, 2: 1, 4: 264, 8: 264}, 4),   # no cluster of 2: x 4 fills
    (64, 4096, 4096, {1: 264, 2: 264, 4: 264, 8: 0}, 4),    # no cluster of 8 fits: skipped
])
def test_split_rule_counts_resident_blocks_per_split(m, n, k, resident, split) -> None:
    assert matmul_decode.decode_split(m, n, k, sm_count=132, resident=resident) == split


class _OccupancyMock(_TmaDecodeMock):
    """A device whose clusters of 4 or more leave 32 SMs idle."""

    def __init__(self) -> None:
        super().__init__()
        self.asked: list[tuple[str, int, int, int]] = []

    def resident_blocks(self, handle, block: int, shared_mem: int, cluster: int) -> int:
        self.asked.append((handle.func, block, shared_mem, cluster))
        return 100 if cluster >= 4 else 132


def test_occupancy_switch_asks_the_device_once_per_shape() -> None:
    dev = _OccupancyMock()
    x, w, y = dev.alloc(64 * 4096 * 2), dev.alloc(4096 * 4096 * 2), dev.alloc(64 * 4096 * 2)
    plain = KernelCache(dev, KernelRoutes.from_env({**ONE_TILE,
                                                    "ATLAS_DECODE_GEMM_OCCUPANCY": "0"}))
    matmul_decode.decode_gemm(plain, 0, x, w, y, 64, 4096, 4096)
    assert dev.drain_launches()[0].func == "gemm_decode_tma_bf16_split4" and not dev.asked
    kc = KernelCache(dev)  # the default counts the driver's resident blocks
    for _ in range(2):
        matmul_decode.decode_gemm(kc, 0, x, w, y, 64, 4096, 4096)
    assert [r.func for r in dev.drain_launches()] == ["gemm_decode_tma_bf16_split2"] * 2
    # 32 two-warpgroup tiles: x 4 = 128 blocks exceed the 100 the device holds; x 2 fits
    smem = matmul_decode.smem_bytes(64, 2, matmul_decode.TMA_MAX_STAGES)
    assert sorted(a[3] for a in dev.asked) == [1, 2, 4, 8]  # once per split, then kept
    assert all(a[1:3] == (288, smem) for a in dev.asked)


# H200-like residency of two-warpgroup blocks (one an SM): clusters of 4 and 8 leave SMs idle
_ONE_PER_SM = {1: 132, 2: 132, 3: 129, 4: 124, 5: 120, 6: 126, 7: 119, 8: 120}


@pytest.mark.parametrize("m, n, k, groups, resident, powers, every", [
    (64, 4096, 4096, 2, _ONE_PER_SM, 2, 3),      # Qwen3-8B o_proj: 32 tiles, 64 -> 96 blocks
    (64, 4096, 12288, 2, _ONE_PER_SM, 2, 3),     # Qwen3-8B down
    (64, 6144, 4096, 2, _ONE_PER_SM, 2, 2),      # qkv: 48 tiles x 3 = 144 exceed a wave
    (64, 2560, 4096, 2, _ONE_PER_SM, 4, 6),      # Qwen3-4B o_proj: 20 tiles, 80 -> 120
    (64, 2048, 4096, 2, _ONE_PER_SM, 4, 7),      # Qwen3-30B-A3B o_proj: 16 tiles, 64 -> 112
    (64, 24576, 4096, 2, _ONE_PER_SM, 2, 2),     # gate_up: split 2's 2.9 waves stay fullest
    (64, 4096, 640, 2, _ONE_PER_SM, 2, 2),       # 10 k-tiles: 3 would leave < 4 a block
])
def test_split_rule_over_every_cluster_size(m, n, k, groups, resident, powers, every) -> None:
    """The same rule over the powers of two and over every cluster size 1..8."""
    for splits, want in ((DECODE_GEMM_SPLITS, powers), (DECODE_GEMM_TMA_SPLITS, every)):
        assert matmul_decode.decode_split(m, n, k, 132, None, groups, resident, splits) == want


def test_any_split_switch_reaches_the_odd_clusters_on_the_tma_kernel_only() -> None:
    """ATLAS_DECODE_GEMM_ANY_SPLIT=1: the TMA kernel's rule asks the driver about, and picks
    among, clusters of 1..8; the cp.async kernel keeps the powers of two, and a forced split
    it lacks is refused."""
    m, n, k = 64, 4096, 4096
    for env, func, grid, asked in (
            ({}, "gemm_decode_tma_bf16_split2", 64, [1, 2, 4, 8]),
            ({"ATLAS_DECODE_GEMM_ANY_SPLIT": "1"}, "gemm_decode_tma_bf16_split3", 96,
             list(range(1, 9))),
            ({"ATLAS_DECODE_GEMM_ANY_SPLIT": "1", "ATLAS_DECODE_GEMM_TMA": "0"},
             "gemm_decode_sm90_bf16_split2", 64, [1, 2, 4, 8]),
            ({"ATLAS_DECODE_GEMM_SPLIT": "5"}, "gemm_decode_tma_bf16_split5", 160, [])):
        dev = _OccupancyMock()
        x, w, y = dev.alloc(m * k * 2), dev.alloc(n * k * 2), dev.alloc(m * n * 2)
        wide = {"ATLAS_DECODE_GEMM_WIDE": "1"}  # two warpgroups on both kernels
        kc = KernelCache(dev, KernelRoutes.from_env({**ONE_TILE, **env, **wide}))
        matmul_decode.decode_gemm(kc, 0, x, w, y, m, n, k)
        (record,) = dev.drain_launches()
        assert (record.func, record.grid[0]) == (func, grid), env
        assert sorted(a[3] for a in dev.asked) == asked, env
    assert not KernelRoutes.from_env({}).decode_gemm_any_split
    dev = _OccupancyMock()
    kc = KernelCache(dev, KernelRoutes.from_env({**ONE_TILE, "ATLAS_DECODE_GEMM_SPLIT": "3"}))
    x, w, y = dev.alloc(m * k * 2), dev.alloc(n * k * 2), dev.alloc(m * n * 2)
    with pytest.raises(ValueError, match="split 3 is not one of"):
        matmul_decode.decode_gemm(kc, 0, x, w, y, m, n, k, tma=False)


@pytest.mark.parametrize("m, wide, tma, groups", [
    (32, None, True, 1), (33, None, True, 2), (256, None, True, 2),   # the TMA kernel's default
    (64, None, False, 1), (8, True, True, 2), (8, True, False, 1),    # cp.async: N >= 32 only
    (64, False, True, 1)])
def test_block_shape_defaults_and_overrides(m, wide, tma, groups) -> None:
    assert matmul_decode.decode_groups(m, wide, tma) == groups


def test_wide_switch_is_a_tristate() -> None:
    assert KernelRoutes.from_env({}).decode_gemm_wide is None
    assert KernelRoutes.from_env({"ATLAS_DECODE_GEMM_WIDE": "0"}).decode_gemm_wide is False
    dev = _TmaDecodeMock()
    x, w, y = dev.alloc(64 * 4096 * 2), dev.alloc(4096 * 4096 * 2), dev.alloc(64 * 8192)
    for env, threads in (({}, 288), ({"ATLAS_DECODE_GEMM_WIDE": "0"}, 160)):
        kc = KernelCache(dev, KernelRoutes.from_env({**ONE_TILE, **env}))
        matmul_decode.decode_gemm(kc, 0, x, w, y, 64, 4096, 4096)
        assert dev.drain_launches()[0].block == (threads, 1, 1)


class _RecordingDriver:
    """Stands in for cuda.bindings.driver at cuLaunchKernel: reads each parameter back
    through the slot-address array the way the driver does (sizeof(param) bytes at each
    address), so the test sees what a kernel would receive."""

    def __init__(self, sizes: list[int]) -> None:
        self.sizes = sizes
        self.params: list[bytes] = []

    def cuLaunchKernel(self, func, gx, gy, gz, bx, by, bz, smem, stream, ptrs, extra):
        slots = (ctypes.c_uint64 * len(self.sizes)).from_address(ptrs)
        self.params = [ctypes.string_at(slots[i], size) for i, size in enumerate(self.sizes)]
        return (0,)


def test_cuda_launch_hands_the_driver_each_tensor_map_at_its_slot() -> None:
    sig = GEMM_DECODE_TMA
    driver = _RecordingDriver([8, 8, 8, 4, 4, 4, 128, 128])
    backend = object.__new__(CudaBackend)  # the launch path only: no device, no context
    backend._drv, backend._cu_launch = driver, driver.cuLaunchKernel
    backend._tls, backend._streams = threading.local(), {0: "stream 0"}
    backend._tls.state = _ThreadState()
    handle = KernelHandle(sig.module, sig.func, _Kernel("f", "gemm_decode_tma.f", pdl=False))
    wmap, xmap = bytes(range(128)), bytes(range(255, 127, -1))
    values = (0x1000, 0x2000, 0x3000, 64, 4096, 4096, wmap, xmap)
    for _ in range(2):  # the second launch reuses the kernel's cached layout
        backend.launch(handle, (128, 1, 1), (288, 1, 1), 0, 0, sig.pack(values))
        got = driver.params
        assert [struct.unpack("<Q", p)[0] for p in got[:3]] == [0x1000, 0x2000, 0x3000]
        assert [struct.unpack("<I", p)[0] for p in got[3:6]] == [64, 4096, 4096]
        assert got[6:] == [wmap, xmap]
    # both maps sit on 64-byte boundaries of the parameter block
    table = backend._tls.state.layouts[handle.native.offsets]
    assert all(int(a) % 64 == 0 for a in table[6:])
