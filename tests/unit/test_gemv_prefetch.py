"""The prefetching single-row GEMV (opt-in: ATLAS_GEMV_PREFETCH=1) and its launch plan
(ops/matmul.py gemv_prefetch_plan), against what gemv_prefetch.cuh assumes of it: every
block's tiles fit the ring it is given, whole weight slices are prefetched at small-model
shapes, two blocks share an SM, and rows that do not fit stay on the 4-row-block kernel."""

from __future__ import annotations

import dataclasses

import pytest

from atlas.runtime.cases.gemv import GEMV_PREFETCH_SHAPES
from atlas.runtime.gpu import H200_FACTS
from atlas.runtime.mock import MockGpuBackend
from atlas.runtime.ops import KernelCache, matmul
from atlas.runtime.ops.routes import KernelRoutes

H200_BUDGET = matmul.PREFETCH_SHARED
PREFETCH = KernelRoutes(gemv_prefetch=True)
#: the same with 2..8 rows on the register-tiled general GEMV (no dynamic shared memory)
PREFETCH_NO_RING = KernelRoutes(gemv_prefetch=True, gemv_ring=False)
#: PrefetchShared: 32 mbarriers + [2][8][4] floats (gemv_prefetch.cuh)
STATIC_SHARED = 32 * 8 + 2 * 8 * 4 * 4


def block_tiles(n: int, k: int, grid: int) -> list[int]:
    """Tiles of each block as the kernel partitions them: 4-row groups [b G / grid,
    (b + 1) G / grid), ceil(k / 8 / threads) tiles a group."""
    groups = -(-n // 4)
    per_group = -(-(k // 8) // matmul.gemv_threads(k))
    return [((b + 1) * groups // grid - b * groups // grid) * per_group for b in range(grid)]


def kernel_stages(plan: matmul.PrefetchPlan, k: int, tiles: int) -> int:
    """The ring depth the kernel derives from its dynamic shared memory."""
    x_chunks = -(-(k // 8) // 8) * 8
    fit = (plan.shared // 16 - x_chunks) // (plan.tile_bytes // 16)
    return min(matmul.PREFETCH_MAX_STAGES, tiles, fit)


QWEN3_0_6B = [(4096, 1024), (1024, 2048), (6144, 1024), (1024, 3072)]  # qkv, o, gate_up, down
QWEN3_8B = [(6144, 4096), (4096, 4096), (24576, 4096), (4096, 12288), (151936, 4096)]


@pytest.mark.parametrize("n,k", QWEN3_0_6B + QWEN3_8B + [(151936, 1024), (33, 2048), (5, 1000),
                                                        (6, 64), (1000, 10000)])
def test_every_block_gets_a_ring_that_holds_its_tiles(n: int, k: int) -> None:
    plan = matmul.gemv_prefetch_plan(n, k, H200_FACTS.sm_count, H200_BUDGET)
    assert plan is not None and plan.shared <= H200_BUDGET
    tiles = block_tiles(n, k, plan.grid)
    assert sum(tiles) == -(-n // 4) * -(-(k // 8) // plan.threads)  # every group, once
    assert max(tiles) == plan.tiles and min(tiles) >= 1
    for t in tiles:  # the kernel traps on a ring of 0; a deeper one than planned over-reads
        assert 1 <= kernel_stages(plan, k, t) <= plan.stages
        assert kernel_stages(plan, k, t) >= min(2, t)


@pytest.mark.parametrize("n,k", QWEN3_0_6B)
def test_qwen3_0_6b_weights_are_prefetched_whole(n: int, k: int) -> None:
    """At 0.6B shapes a block's whole weight slice is requested before the PDL wait."""
    plan = matmul.gemv_prefetch_plan(n, k, H200_FACTS.sm_count, H200_BUDGET)
    assert plan.stages == plan.tiles
    # spread over as many blocks as keep it whole: 4 a SM where the 4-row groups suffice
    assert plan.grid == min(4 * 132, -(-n // 4)) or plan.shared > H200_BUDGET // 4
    assert plan.grid * plan.shared <= 132 * H200_BUDGET


@pytest.mark.parametrize("n,k", QWEN3_8B)
def test_qwen3_8b_weights_stream_through_the_ring(n: int, k: int) -> None:
    plan = matmul.gemv_prefetch_plan(n, k, H200_FACTS.sm_count, H200_BUDGET)
    assert plan.grid == 132 and plan.tiles > plan.stages >= 4  # >= 64 KiB in flight a SM


def test_a_streaming_small_k_product_takes_two_blocks_per_sm() -> None:
    """Qwen3-0.6B's LM head: 8 KiB tiles, 6 in flight for each of 2 blocks per SM."""
    plan = matmul.gemv_prefetch_plan(151936, 1024, H200_FACTS.sm_count, H200_BUDGET)
    assert (plan.grid, plan.stages) == (264, 6) and plan.tiles > plan.stages


def test_two_blocks_fit_one_h200_sm() -> None:
    """The next GEMV's blocks prefetch while this one's still run (1 KiB reserve a block)."""
    assert 2 * (H200_BUDGET + STATIC_SHARED + 1024) <= H200_FACTS.shared_memory_per_sm
    kc = KernelCache(MockGpuBackend())
    assert matmul.prefetch_budget(kc) == H200_BUDGET
    small = dataclasses.replace(H200_FACTS, shared_memory_per_sm=100 * 1024,
                                shared_memory_per_block=99 * 1024)
    kc.facts = small
    assert matmul.prefetch_budget(kc) == 48 * 1024


def test_check_cases_reach_the_ring_paths_they_name() -> None:
    plans = {(n, k): matmul.gemv_prefetch_plan(n, k, 132, H200_BUDGET)
             for n, k, _ in GEMV_PREFETCH_SHAPES}
    qkv, small_k = plans[4096, 1024], plans[20011, 1024]
    assert qkv.grid == 4 * 132 and qkv.stages == qkv.tiles
    assert plans[4096, 4096].tiles > plans[4096, 4096].stages
    assert small_k.grid == 2 * 132 and small_k.tiles > small_k.stages
    assert plans[8003, 2048].tiles > 2 * plans[8003, 2048].stages  # phases flip twice
    assert plans[1000, 10000].tiles > plans[1000, 10000].stages
    assert plans[5, 1000].threads > 1000 // 8  # whole rows, one copy a tile
    assert plans[6, 64].grid == 2
    assert plans[8, 40000] is None


def test_launches_carry_the_plan_and_fall_back_past_the_budget() -> None:
    mock = MockGpuBackend()
    kc = KernelCache(mock, routes=PREFETCH)
    matmul.gemv(kc, 0, 0x1000, 0x2000, 0x3000, 1, 6144, 1024)
    matmul.gemv_silu(kc, 0, 0x1000, 0x2000, 0x3000, 1, 4096, 12288)
    matmul.gemv(kc, 0, 0x1000, 0x2000, 0x3000, 1, 8, 40000, out_f32=True)
    first, silu, fallback = mock.drain_launches()
    plan = matmul.gemv_prefetch_plan(6144, 1024, 132, H200_BUDGET)
    assert (first.func, first.grid, first.block, first.shared) == (
        "gemv_prefetch_bf16_single", (528, 1, 1), (128, 1, 1), plan.shared)
    assert (silu.func, silu.grid, silu.block) == ("gemv_prefetch_silu_bf16_single",
                                                  (132, 1, 1), (256, 1, 1))
    assert (fallback.func, fallback.grid, fallback.shared) == ("gemv_bf16_f32_single",
                                                               (2, 1, 1), 0)


def test_prefetching_one_row_fuses_the_swiglu_at_every_width() -> None:
    """Under ATLAS_GEMV_PREFETCH=1 Qwen3-8B's down projection (k = 12,288) fuses its SwiGLU
    (the prefetching kernel computes the activation once per block); by default it stays
    silu_mul + the GEMV past FUSED_SILU_MAX_K, as measured."""
    mock = MockGpuBackend()
    matmul.linear_silu(KernelCache(mock, routes=PREFETCH), 0, 0x1000, 0x2000, 0x3000, 1, 4096,
                       12288)
    assert [r.func for r in mock.drain_launches()] == ["gemv_prefetch_silu_bf16_single"]
    matmul.linear_silu(KernelCache(mock, routes=KernelRoutes()), 0, 0x1000, 0x2000, 0x3000, 1,
                       4096, 12288, scratch=0x9000)
    assert [r.func for r in mock.drain_launches()] == ["silu_mul_bf16", "gemv_bf16_single"]


def test_the_prefetch_switch_is_off_by_default() -> None:
    """Unset or ATLAS_GEMV_PREFETCH=0: the 4-row-block single-row kernels (the faster ones
    measured) and, past FUSED_SILU_MAX_K, silu_mul before the GEMV."""
    for env in ({}, {"ATLAS_GEMV_PREFETCH": "0"}):
        mock = MockGpuBackend()
        kc = KernelCache(mock, routes=KernelRoutes.from_env(env))
        matmul.gemv(kc, 0, 0x1000, 0x2000, 0x3000, 1, 6144, 1024)
        matmul.linear_silu(kc, 0, 0x1000, 0x2000, 0x3000, 1, 1024, 3072)
        matmul.linear_silu(kc, 0, 0x1000, 0x2000, 0x3000, 1, 4096, 12288, scratch=0x9000)
        recs = mock.drain_launches()
        assert [(r.func, r.grid[0], r.shared) for r in recs] == [
            ("gemv_bf16_single", 1536, 0), ("gemv_silu_bf16_single", 256, 0),
            ("silu_mul_bf16", 1, 0), ("gemv_bf16_single", 1024, 0)]


def test_gate_up_ends_with_the_swiglu_on_one_prefetching_row_only() -> None:
    """matmul.fuses_gate_up_swiglu: batch-1 bf16 gate_up on the prefetching GEMV, n even, and
    no norm fusion asked for (which puts the norm in gate_up's x load instead)."""
    def fuses(env: dict[str, str], m: int = 1, n: int = 6144, k: int = 1024) -> bool:
        kc = KernelCache(MockGpuBackend(),
                         routes=KernelRoutes.from_env({"ATLAS_GEMV_PREFETCH": "1", **env}))
        return matmul.fuses_gate_up_swiglu(kc, m, n, k)

    assert fuses({}) and fuses({}, n=24576, k=4096)
    assert not fuses({}, m=2)
    assert not fuses({}, n=6146 - 1)
    for env in ({"ATLAS_NORM_GEMV": "1"}, {"ATLAS_FUSED_NORM": "1"}, {"ATLAS_GEMV_PREFETCH": "0"}):
        assert not fuses(env), env
    mock = MockGpuBackend()
    matmul.gemv_swiglu(KernelCache(mock), 0, 0x1000, 0x2000, 0x3000, 6144, 1024)
    (rec,) = mock.drain_launches()
    plan = matmul.gemv_prefetch_plan(6144, 1024, 132, H200_BUDGET)
    assert (rec.func, rec.grid[0], rec.block[0], rec.shared) == (
        "gemv_swiglu_bf16_single", plan.grid, plan.threads, plan.shared)
    assert (rec.args["act"], rec.args["n"]) == (0x3000, 6144)
    with pytest.raises(ValueError, match="even"):
        matmul.gemv_swiglu(KernelCache(mock), 0, 0x1000, 0x2000, 0x3000, 6145, 1024)


class CarveoutMock(MockGpuBackend):
    """Records the shared-memory opt-ins and carveout preferences the launch builders ask."""

    def __init__(self) -> None:
        super().__init__()
        self.opt_ins: list[tuple[str, int]] = []
        self.most_shared: list[str] = []

    def set_max_dynamic_shared(self, handle, nbytes: int) -> None:
        self.opt_ins.append((handle.func, nbytes))

    def prefer_shared_memory(self, handle) -> None:
        self.most_shared.append(handle.func)


def test_prefetching_kernels_ask_for_the_most_shared_memory_once() -> None:
    """Two GEMVs' 2 x 104 KiB share an SM only in the all-shared configuration."""
    mock = CarveoutMock()
    kc = KernelCache(mock, routes=PREFETCH_NO_RING)
    for _ in range(2):
        matmul.gemv(kc, 0, 0x1000, 0x2000, 0x3000, 1, 6144, 1024)
        matmul.gemv_swiglu(kc, 0, 0x1000, 0x2000, 0x3000, 6144, 1024)
        matmul.gemv(kc, 0, 0x1000, 0x2000, 0x3000, 2, 6144, 1024)  # the general kernel: no
    assert mock.most_shared == ["gemv_prefetch_bf16_single", "gemv_swiglu_bf16_single"]
    assert mock.opt_ins == [("gemv_prefetch_bf16_single", H200_BUDGET),
                            ("gemv_swiglu_bf16_single", H200_BUDGET)]
