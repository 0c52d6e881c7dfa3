"""The persistent TMA decode GEMM (gemm_decode_tma_*_persistent*): its route (on by default,
ATLAS_DECODE_GEMM_PERSISTENT=0 off), which launches take it (TMA grids of several waves at a
split with persistent entries) and with what grid (every cluster the device holds) and shared
memory (the ring and the partial tile, the one-tile form's blocks an SM), its references and
check cases on the host backend, and its tuning key. The device check is
tools/gpu/check_kernels.py -k "gemm_decode_tma persistent"."""

from __future__ import annotations

import numpy as np
import pytest

from atlas.runtime.cases import gemm_decode_tma as case_defs
from atlas.runtime.host import HostBackend
from atlas.runtime.kernel_check import check
from atlas.runtime.ops import KernelCache, matmul_decode
from atlas.runtime.ops.decode_gemm_tune import TuneKey
from atlas.runtime.ops.routes import KernelRoutes
from test_gemm_decode_tma import _TmaDecodeMock

ON = {"ATLAS_DECODE_GEMM_PERSISTENT": "1"}
OFF = {"ATLAS_DECODE_GEMM_PERSISTENT": "0"}
#: an SM's shared memory, and what the driver reserves a block (sm_90)
SM_SHARED, BLOCK_RESERVED = 228 * 1024, 1024


class _ResidentMock(_TmaDecodeMock):
    """A device holding `per_split[cluster]` blocks of any launch, recording each question."""

    def __init__(self, per_split: dict[int, int]) -> None:
        super().__init__()
        self.per_split = per_split
        self.asked: list[tuple[str, int, int, int]] = []

    def resident_blocks(self, handle, block: int, shared_mem: int, cluster: int) -> int:
        self.asked.append((handle.func, block, shared_mem, cluster))
        return self.per_split[cluster]


def _launch(dev: _TmaDecodeMock, env: dict[str, str], m: int, n: int, k: int, *,
            out_f32: bool = False, swiglu: bool = False, **kw) -> tuple[str, int, int, int]:
    """(entry point, grid, threads, dynamic shared memory) of one decode_gemm call."""
    kc = KernelCache(dev, KernelRoutes.from_env(env))
    x, w, y = dev.alloc(m * k * 2), dev.alloc(n * k * 2), dev.alloc(m * n * 4)
    matmul_decode.decode_gemm(kc, 0, x, w, y, m, n, k, out_f32, glu=swiglu, **kw)
    (record,) = dev.drain_launches()
    return record.func, record.grid[0], record.block[0], record.shared


def test_route_is_on_by_default_and_an_env_switch() -> None:
    assert KernelRoutes.from_env({}).decode_gemm_persistent
    assert KernelRoutes.from_env(ON).decode_gemm_persistent
    assert not KernelRoutes.from_env(OFF).decode_gemm_persistent


@pytest.mark.parametrize("m, n, k, f32, swiglu, one_tile, looped, grid, threads, cols", [
    # Qwen3-8B gate_up at 64 rows: 192 two-warpgroup tiles x 2 = 384 blocks, 2.9 waves of
    # 132 -> 66 clusters of 2 looping over them
    (64, 24576, 4096, False, True, ("gemm_decode_tma_swiglu_bf16_split2", 384),
     "gemm_decode_tma_swiglu_bf16_persistent_split2", 132, 288, 64),
    # the LM head at 9 rows: 2,374 one-warpgroup tiles, two blocks an SM -> 264 of them
    (9, 151936, 4096, True, False, ("gemm_decode_tma_bf16_f32", 2374),
     "gemm_decode_tma_bf16_f32_persistent", 264, 160, 16),
])
def test_route_takes_the_persistent_entry_with_every_resident_cluster(
        m, n, k, f32, swiglu, one_tile, looped, grid, threads, cols) -> None:
    off = _launch(_TmaDecodeMock(), OFF, m, n, k, out_f32=f32, swiglu=swiglu)
    assert off[:2] == one_tile
    assert off[3] == matmul_decode.smem_bytes(cols, threads // 128, matmul_decode.TMA_MAX_STAGES)
    on = _launch(_TmaDecodeMock(), ON, m, n, k, out_f32=f32, swiglu=swiglu)
    assert on == (looped, grid, threads, matmul_decode.persistent_smem_bytes(cols, threads // 128))


def test_grid_is_the_devices_resident_clusters_asked_at_the_persistent_shape() -> None:
    """The driver's count of the persistent entry at its own shared memory sizes the grid:
    an odd count of blocks still gives whole clusters."""
    dev = _ResidentMock({1: 132, 2: 130, 4: 124, 8: 120})
    func, grid, threads, shared = _launch(dev, ON, 64, 24576, 4096, swiglu=True)
    assert (func, grid) == ("gemm_decode_tma_swiglu_bf16_persistent_split2", 130)
    dev = _ResidentMock({1: 132, 2: 131, 4: 124, 8: 120})
    assert _launch(dev, ON, 64, 24576, 4096, swiglu=True)[1] == 130  # 65 whole clusters
    asked = [a for a in dev.asked if "persistent" in a[0]]
    assert asked == [("gemm_decode_tma_swiglu_bf16_persistent_split2", 288, shared, 2)]


@pytest.mark.parametrize("m, n, k, kw, func", [
    # Qwen3-8B o_proj at 64 rows: 32 tiles x 4 = 128 blocks fit one wave: nothing to overlap
    (64, 4096, 4096, {}, "gemm_decode_tma_bf16_split4"),
    # a forced split without persistent entries
    (64, 24576, 4096, {"split": 4}, "gemm_decode_tma_bf16_split4"),
    # the cp.async kernel has no persistent form
    (64, 24576, 4096, {"tma": False}, "gemm_decode_sm90_bf16_split2"),
])
def test_route_keeps_the_one_tile_form_where_persistence_has_nothing_to_win(m, n, k, kw,
                                                                            func) -> None:
    assert _launch(_TmaDecodeMock(), ON, m, n, k, **kw)[0] == func


@pytest.mark.parametrize("tiles, split, resident, grid", [
    (192, 2, 132, 132),   # 2.9 waves -> 66 clusters of 2
    (192, 2, 131, 130),   # whole clusters only
    (2374, 1, 264, 264),
    (66, 2, 132, None),   # exactly one wave: the one-tile grid
    (32, 2, 132, None),   # under a wave
    (192, 4, 124, None),  # no persistent entry at split 4
    (192, 2, 1, None),    # the device holds no cluster of 2
])
def test_persistent_grid_rule(tiles, split, resident, grid) -> None:
    assert matmul_decode.persistent_grid(tiles, split, resident) == grid


@pytest.mark.parametrize("cols", matmul_decode.DECODE_COLS)
@pytest.mark.parametrize("groups", matmul_decode.DECODE_GROUPS)
def test_persistent_shared_memory_keeps_blocks_per_sm_and_a_free_slot(cols, groups) -> None:
    """The partial tile past the ring or over its top slots: the one-tile form's blocks an SM
    still fit, slot 0 at least stays free for the next tile during an epilogue, and at N =
    64 on two warpgroups (the b64 step's shape) no slot is shared at all."""
    ring = (matmul_decode.ring_stages(cols, groups, matmul_decode.TMA_MAX_STAGES)
            * matmul_decode.stage_bytes(cols, groups))
    smem = matmul_decode.persistent_smem_bytes(cols, groups)
    part = matmul_decode.persistent_part_offset(cols, groups)
    per_sm = matmul_decode.blocks_per_sm(cols, groups)
    assert per_sm * (smem + matmul_decode.TMA_BARRIER_BYTES + BLOCK_RESERVED) <= SM_SHARED
    assert smem <= matmul_decode.TMA_PERSISTENT_MAX_SHARED <= 227 * 1024
    assert smem >= ring + 1024 and part % 16 == 0
    assert part >= matmul_decode.stage_bytes(cols, groups)
    assert smem == max(ring, part + matmul_decode.partial_bytes(cols, groups)) + 1024
    if (cols, groups) == (64, 2):
        assert part == ring


def test_tune_key_says_persistent_and_the_one_tile_keys_keep_their_text() -> None:
    plain = TuneKey(64, 24576, 4096, False, True, True)
    assert plain.text() == "cols=64 n=24576 k=4096 f32=0 swiglu=1 tma=1"
    looped = TuneKey(64, 24576, 4096, False, True, True, True)
    assert looped.text() == plain.text() + " persistent=1" and looped != plain


CASES = [case_defs.gemm_decode_tma_persistent_case(np.random.default_rng(17), *shape)
         for shape in case_defs.GEMM_DECODE_TMA_PERSISTENT_SHAPES
         if shape[0] * shape[1] * shape[2] <= 2 ** 27]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_reference_matches_oracle_and_the_one_tile_entry(case) -> None:
    result = check(HostBackend(), case)
    assert result.passed, result.detail


def test_cases_cover_tiles_per_cluster_widths_and_entries() -> None:
    shapes = case_defs.GEMM_DECODE_TMA_PERSISTENT_SHAPES
    assert {matmul_decode.decode_cols(m) for m, *_ in shapes} == set(matmul_decode.DECODE_COLS)
    assert {1, 17, 64, 256} <= {m for m, *_ in shapes}
    assert any(n % 64 for _, n, *_ in shapes) and any(k % 64 for _, _, k, *_ in shapes)
    assert {s for *_, s, _, _, _ in shapes} == set(matmul_decode.PERSISTENT_SPLITS)
    assert any(g for *_, g, _ in shapes) and any(f for _, _, _, f, *_ in shapes)
    per_cluster = set()
    for m, n, _, _, _, wide, _, clusters in shapes:
        tiles = -(-n // (64 * matmul_decode.decode_groups(m, wide, True)))
        if clusters is not None:
            per_cluster.add("several" if tiles > clusters else "one or none")
    assert per_cluster == {"several", "one or none"}
    # the route's own grid too, at shapes where it takes the persistent form
    kc = KernelCache(_TmaDecodeMock(), KernelRoutes.from_env(ON))
    routed = [(m, n, f, g, (s, matmul_decode.decode_groups(m, w, True)))
              for m, n, _, f, s, w, g, c in shapes if c is None]
    assert routed and all(matmul_decode.persistent_launch_grid(kc, m, n, f, g, pick)
                          for m, n, f, g, pick in routed)
    assert all(c.same_bits for c in CASES) and len(CASES) >= 10  # the host runs these
