"""The ring GEMV's launch plan and routing (ops/matmul.py gemv_ring_plan, gemv, gemv_silu),
recorded by MockGpuBackend on the H200's facts: 2..8 rows take the ring kernels unless
ATLAS_GEMV_RING=0, one row only under ATLAS_GEMV_RING_SINGLE=1; the geometry keeps the
general GEMV's threads (the sums' order), two persistent blocks per SM, and a ring that two
blocks fit in an SM's shared memory. The numerics are the GPU check cases' (cases/gemv.py
"gemv ring ...", cases/row_invariance.py)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from atlas.runtime.gpu import H200_FACTS
from atlas.runtime.mock import MockGpuBackend
from atlas.runtime.ops import KernelCache, matmul
from atlas.runtime.ops.routes import KernelRoutes

SMS, SHARED = H200_FACTS.sm_count, H200_FACTS.shared_memory_per_sm


def launches(routes: KernelRoutes, fn, *args, **kwargs):
    mock = MockGpuBackend()
    fn(KernelCache(mock, routes=routes), 0, *args, **kwargs)
    return mock.drain_launches()


@pytest.mark.parametrize("n,k,stages,want", [
    # Qwen3-8B qkv at k = 4,096: 256 threads, 2 stages of 32 KiB, 2 blocks on each SM
    (6144, 4096, None, matmul.RingPlan(2 * SMS, 256, 2, 64 * 1024)),
    # asked for 3 stages of 32 KiB: two blocks fit them in an SM's 228 KiB
    (4096, 12288, 3, matmul.RingPlan(2 * SMS, 256, 3, 96 * 1024)),
    # k = 1,024: two chunks a thread, 8 blocks of 64 threads a SM, 8 KiB stages (a row's
    # whole width), 3 of them fit 8 blocks
    (20011, 1024, None, matmul.RingPlan(8 * SMS, 64, 3, 24 * 1024)),
    # k = 576: 72 chunks, 36 a thread's two slots -> 64 threads, 8 blocks a SM, 8 KiB stages
    (20011, 576, None, matmul.RingPlan(8 * SMS, 64, 3, 24 * 1024)),
    # fewer 4-row groups than blocks: one group a block (k = 2,048: 128 threads, 16 KiB)
    (33, 2048, None, matmul.RingPlan(9, 128, 3, 48 * 1024)),
    # k = 192: blocks of one warp (16 a SM), 4 KiB stages
    (1001, 192, 2, matmul.RingPlan(251, 32, 2, 2 * 4096)),
    (100001, 192, None, matmul.RingPlan(16 * SMS, 32, 2, 2 * 4096)),
])
def test_ring_plan(n, k, stages, want) -> None:
    assert matmul.gemv_ring_plan(n, k, SMS, SHARED, stages) == want


def test_without_room_for_two_rings_the_register_tiled_kernel_runs_the_product() -> None:
    # a GB10's 100 KiB SMs: two 256-thread blocks hold one 32 KiB stage each at k = 4,096,
    # four 128-thread blocks one 16 KiB stage each at k = 1,024
    assert matmul.gemv_ring_plan(4096, 4096, 48, 100 * 1024) is None
    assert matmul.gemv_ring_plan(4096, 1024, 48, 100 * 1024) is None

    class Gb10Mock(MockGpuBackend):
        def device_facts(self):
            return replace(H200_FACTS, sm_count=48, shared_memory_per_sm=100 * 1024)

    mock = Gb10Mock()
    matmul.linear(KernelCache(mock, routes=KernelRoutes()), 0, 0x1000, 0x2000, 0x3000, 4, 6144,
                  4096)
    assert [r.func for r in mock.drain_launches()] == ["gemv_bf16"]


@pytest.mark.parametrize("m", range(2, matmul.GEMV_MAX_M + 1))
def test_m_rows_take_the_ring_kernel_by_default(m) -> None:
    (rec,) = launches(KernelRoutes(), matmul.linear, 0x1000, 0x2000, 0x3000, m, 6144, 4096)
    assert (rec.func, rec.grid, rec.block, rec.shared) == (
        "gemv_ring_bf16", (2 * SMS, 1, 1), (256, 1, 1), 64 * 1024)
    assert [rec.args[a] for a in ("x", "w", "y", "m", "n", "k", "stages")] == [
        0x1000, 0x2000, 0x3000, m, 6144, 4096, 2]


def test_the_lm_head_and_the_down_projection_take_their_ring_twins() -> None:
    (rec,) = launches(KernelRoutes(), matmul.linear, 0x1000, 0x2000, 0x3000, 4, 151936, 4096,
                      out_f32=True)
    assert rec.func == "gemv_ring_bf16_f32"
    # k <= FUSED_SILU_MAX_K: the SwiGLU fused into the ring kernel's x load
    (rec,) = launches(KernelRoutes(), matmul.linear_silu, 0x1000, 0x2000, 0x3000, 4, 1024, 3072)
    assert (rec.func, rec.args["gate_up"], rec.args["k"]) == ("gemv_ring_silu_bf16", 0x1000, 3072)
    # past it: silu_mul into the scratch, then the ring GEMV on it
    recs = launches(KernelRoutes(), matmul.linear_silu, 0x1000, 0x2000, 0x3000, 4, 4096, 12288,
                    scratch=0x9000)
    assert [r.func for r in recs] == ["silu_mul_early_bf16", "gemv_ring_bf16"]
    assert recs[1].args["x"] == 0x9000


def test_switches_restore_the_register_tiled_kernel_and_put_one_row_on_the_ring() -> None:
    off = KernelRoutes.from_env({"ATLAS_GEMV_RING": "0"})
    (rec,) = launches(off, matmul.linear, 0x1000, 0x2000, 0x3000, 4, 6144, 4096)
    assert (rec.func, rec.grid, rec.shared) == ("gemv_bf16", (1536, 1, 1), 0)
    (rec,) = launches(off, matmul.linear_silu, 0x1000, 0x2000, 0x3000, 4, 1024, 3072)
    assert rec.func == "gemv_silu_bf16"
    (rec,) = launches(KernelRoutes(), matmul.linear, 0x1000, 0x2000, 0x3000, 1, 6144, 4096)
    assert rec.func == "gemv_bf16_single"
    single = KernelRoutes.from_env({"ATLAS_GEMV_RING_SINGLE": "1", "ATLAS_GEMV_RING_STAGES": "3"})
    (rec,) = launches(single, matmul.linear, 0x1000, 0x2000, 0x3000, 1, 6144, 4096)
    assert (rec.func, rec.args["m"], rec.args["stages"], rec.shared) == (
        "gemv_ring_bf16", 1, 3, 96 * 1024)


def test_the_ring_depth_switch_is_checked() -> None:
    with pytest.raises(ValueError, match="ATLAS_GEMV_RING_STAGES"):
        KernelRoutes.from_env({"ATLAS_GEMV_RING_STAGES": "4"})


# ---- gemv_ring.cuh's tile walk, transliterated ---------------------------------------------

def tiled_order(n: int, k: int, threads: int) -> dict[tuple[int, int], list[int]]:
    """gemv_core.cuh gemv_rows (one block per 4-row group): the chunks thread t accumulates
    into weight row `row`, in order, keyed (row, t)."""
    kc, rows = k // 8, matmul.GEMV_ROWS_PER_BLOCK
    order = {}
    for g in range(-(-n // rows)):
        for t in range(threads):
            chunks = [c0 + u * threads for c0 in range(t, kc, 2 * threads) for u in (0, 1)
                      if c0 + u * threads < kc]
            for r in range(rows):
                if g * rows + r < n:
                    order[(g * rows + r, t)] = chunks
    return order


def ring_order(n: int, k: int, plan: matmul.RingPlan) -> dict[tuple[int, int], list[int]]:
    """gemv_ring_rows, thread by thread: the issuer's counters request tile after tile into
    the ring (each slot remembers the (row, chunk) and the commit group that wrote it), the
    consumer waits for its tile's group, reads its slots and accumulates; at a group's last
    tile the block stores the group's rows. Asserts that every read finds the tile the
    consumer expects, already committed, and that each output row is stored exactly once."""
    kc, rows, T, S = k // 8, matmul.GEMV_ROWS_PER_BLOCK, plan.threads, plan.stages
    per_iter = 2 * T
    iters, groups = -(-kc // per_iter), -(-n // rows)
    order: dict[tuple[int, int], list[int]] = {}
    stored: list[int] = []
    for block in range(plan.grid):
        tiles = ((groups - 1 - block) // plan.grid + 1) * iters if block < groups else 0
        for tid in range(T):
            ring: dict[tuple[int, int, int], tuple[int, int | None]] = {}
            state = {"next": 0, "it": 0, "row0": block * rows, "q": 0, "groups": 0}

            def issue() -> None:
                if state["next"] < tiles:
                    for r in range(rows):
                        for u in (0, 1):
                            c = state["it"] * per_iter + tid + u * T
                            ring[(state["q"], u, r)] = (state["groups"], (
                                min(state["row0"] + r, n - 1), c) if c < kc else None)
                state["groups"] += 1
                state["next"] += 1
                state["it"] += 1
                if state["it"] == iters:
                    state["it"], state["row0"] = 0, state["row0"] + plan.grid * rows
                state["q"] = (state["q"] + 1) % S

            for _ in range(S - 1):
                issue()
            it, row0, q = 0, block * rows, 0
            acc: dict[int, list[int]] = {r: [] for r in range(rows)}
            for t in range(tiles):
                issue()
                complete = state["groups"] - (S - 1)   # groups 0 .. complete - 1 have landed
                for u in (0, 1):
                    c = it * per_iter + tid + u * T
                    if c >= kc:
                        break
                    for r in range(rows):
                        group, got = ring[(q, u, r)]
                        assert group < complete and got == (min(row0 + r, n - 1), c)
                        acc[r].append(c)
                q = (q + 1) % S
                it += 1
                if it != iters:
                    continue
                for r in range(rows):
                    if row0 + r < n:
                        order[(row0 + r, tid)] = acc[r]
                        if tid == 0:
                            stored.append(row0 + r)
                acc = {r: [] for r in range(rows)}
                it, row0 = 0, row0 + plan.grid * rows
    assert sorted(stored) == list(range(n))
    return order


@pytest.mark.parametrize("n,k,sms,stages", [
    (37, 10000, 2, None),   # 3 tiles a group (the last partial), 2-3 groups a block, 2 stages
    (37, 10000, 2, 3),      # the same through 3 stages: slots wrap mid-group
    (61, 1024, 3, None),    # 128 threads, 3 stages, one tile a group, 1-2 groups a block
    (10, 192, 8, 3),        # one warp, threads past the row's 24 chunks; a group a block
    (262, 4096, 16, 3),     # 66 groups on 32 blocks of 256 threads, 3 stages
])
def test_the_ring_accumulates_each_threads_chunks_in_the_tiled_kernels_order(n, k, sms, stages):
    plan = matmul.gemv_ring_plan(n, k, sms, SHARED, stages)
    assert ring_order(n, k, plan) == tiled_order(n, k, plan.threads)


def test_one_row_takes_the_single_row_kernels() -> None:
    """One row: the 4-row-block single-row kernels (no dynamic shared memory), the SwiGLU
    fused into down's x load up to FUSED_SILU_MAX_K and silu_mul before the GEMV past it;
    gate_up ends with its SwiGLU on the single-row GEMV unless ATLAS_GEMV_SWIGLU=0 or the
    ring kernel takes one row (ATLAS_GEMV_RING_SINGLE=1)."""
    mock = MockGpuBackend()
    kc = KernelCache(mock, routes=KernelRoutes())
    matmul.gemv(kc, 0, 0x1000, 0x2000, 0x3000, 1, 6144, 1024)
    matmul.linear_silu(kc, 0, 0x1000, 0x2000, 0x3000, 1, 1024, 3072)
    matmul.linear_silu(kc, 0, 0x1000, 0x2000, 0x3000, 1, 4096, 12288, scratch=0x9000)
    assert [(r.func, r.grid[0], r.block[0], r.shared) for r in mock.drain_launches()] == [
        ("gemv_bf16_single", 1536, 64, 0), ("gemv_silu_bf16_single", 256, 192, 0),
        ("silu_mul_bf16", 1, 256, 0), ("gemv_bf16_single", 1024, 256, 0)]
    assert matmul.fuses_gate_up_swiglu(kc, 1, 6144, 1024)
    # ATLAS_GEMV_CHUNKS=1 (the A/B): one chunk of each row a thread, as before session 30
    one = KernelCache(mock, routes=KernelRoutes.from_env({"ATLAS_GEMV_CHUNKS": "1"}))
    matmul.gemv(one, 0, 0x1000, 0x2000, 0x3000, 1, 6144, 1024)
    assert [r.block[0] for r in mock.drain_launches()] == [128]
    with pytest.raises(ValueError, match="ATLAS_GEMV_CHUNKS"):
        KernelRoutes.from_env({"ATLAS_GEMV_CHUNKS": "3"})
    # ATLAS_GEMV_ROWS=8: the plain single-row product on its 8-row twin (grid n / 8, the
    # same threads), beside the SwiGLU one's (its default); the f32 logits keep 4-row blocks
    x8 = KernelCache(mock, routes=KernelRoutes.from_env({"ATLAS_GEMV_ROWS": "8"}))
    matmul.gemv(x8, 0, 0x1000, 0x2000, 0x3000, 1, 6144, 2048)
    matmul.gemv_swiglu(x8, 0, 0x1000, 0x2000, 0x3000, 1, 6144, 2048)
    matmul.gemv(x8, 0, 0x1000, 0x2000, 0x3000, 1, 6144, 2048, out_f32=True)
    assert [(r.func, r.grid[0], r.block[0]) for r in mock.drain_launches()] == [
        ("gemv_bf16_x8_single", 768, 128), ("gemv_swiglu_bf16_x8n_single", 768, 128),
        ("gemv_bf16_f32_single", 1536, 128)]
    with pytest.raises(ValueError, match="ATLAS_GEMV_ROWS"):
        KernelRoutes.from_env({"ATLAS_GEMV_ROWS": "6"})
    # ATLAS_GEMV_SWIGLU_ROWS sets the SwiGLU product's own count, either way round; unset, 8
    # from 4,096-byte weight rows (k 2,048) and 4 below; 8-row blocks under 256 threads on the
    # register-capped entry (k 4,096: 256 threads, the uncapped one)
    for env, k, plain, swiglu in (({}, 2048, 4, 8), ({}, 2040, 4, 4), ({}, 3072, 4, 8),
                                  ({}, 4096, 4, 8),
                                  ({"ATLAS_GEMV_SWIGLU_ROWS": "4"}, 2048, 4, 4),
                                  ({"ATLAS_GEMV_SWIGLU_ROWS": "8"}, 1024, 4, 8),
                                  ({"ATLAS_GEMV_ROWS": "8", "ATLAS_GEMV_SWIGLU_ROWS": "4"}, 2048,
                                   8, 4)):
        kc_rows = KernelCache(mock, routes=KernelRoutes.from_env(env))
        matmul.gemv(kc_rows, 0, 0x1000, 0x2000, 0x3000, 1, 6144, k)
        matmul.gemv_swiglu(kc_rows, 0, 0x1000, 0x2000, 0x3000, 1, 6144, k)
        assert [(r.func, r.grid[0]) for r in mock.drain_launches()] == [
            ("gemv_bf16_x8_single" if plain == 8 else "gemv_bf16_single", 6144 // plain),
            ("gemv_swiglu_bf16_single" if swiglu == 4 else "gemv_swiglu_bf16_x8_single"
             if matmul.gemv_threads(k) == 256 else "gemv_swiglu_bf16_x8n_single",
             6144 // swiglu)], (env, k)
    with pytest.raises(ValueError, match="ATLAS_GEMV_SWIGLU_ROWS"):
        KernelRoutes.from_env({"ATLAS_GEMV_SWIGLU_ROWS": "16"})
    for routes in (KernelRoutes(gemv_swiglu=False), KernelRoutes(gemv_ring_single=True)):
        assert not matmul.fuses_gate_up_swiglu(KernelCache(mock, routes=routes), 1, 6144, 1024)


class _Occupancy(MockGpuBackend):
    """A mock whose device holds, per kernel, its blocks an SM times 132 SMs (a 256-thread
    gemv_bf16_single: 4 an SM at 56 registers, its 48-register twin 5)."""

    def __init__(self, per_sm: dict[str, int]) -> None:
        super().__init__()
        self.per_sm = per_sm

    def resident_blocks(self, handle, block: int, shared_mem: int, cluster: int) -> int:
        return 132 * self.per_sm[handle.func]


@pytest.mark.parametrize("env,n,k,func", [
    # Qwen3-4B's down (640 blocks): 528 resident at 4 an SM, two waves; 660 at 5, one
    ({}, 2560, 9728, "gemv_bf16_lean_single"),
    # Qwen3-8B's o_proj (1,024 blocks): two waves either way, so the free entry
    ({}, 4096, 4096, "gemv_bf16_single"),
    # one wave either way
    ({}, 2048, 4096, "gemv_bf16_single"),
    # ATLAS_GEMV_LEAN forces either entry
    ({"ATLAS_GEMV_LEAN": "0"}, 2560, 9728, "gemv_bf16_single"),
    ({"ATLAS_GEMV_LEAN": "1"}, 4096, 4096, "gemv_bf16_lean_single"),
])
def test_single_gemv_takes_the_lean_twin_where_it_saves_a_wave(env: dict, n: int, k: int,
                                                                func: str) -> None:
    mock = _Occupancy({"gemv_bf16_single": 4, "gemv_bf16_lean_single": 5})
    kc = KernelCache(mock, routes=KernelRoutes.from_env(env))
    matmul.gemv(kc, 0, 0x1000, 0x2000, 0x3000, 1, n, k)
    assert [(r.func, r.grid[0], r.block[0]) for r in mock.drain_launches()] == [
        (func, -(-n // 4), 256)]


def test_single_gemv_keeps_the_free_entry_without_a_device_to_ask() -> None:
    """No occupancy to read (the host backends): the 56-register entry, whatever the waves."""
    mock = MockGpuBackend()
    matmul.gemv(KernelCache(mock, routes=KernelRoutes()), 0, 0x1000, 0x2000, 0x3000, 1, 2560,
                9728)
    assert [r.func for r in mock.drain_launches()] == ["gemv_bf16_single"]
    with pytest.raises(ValueError, match="ATLAS_GEMV_LEAN"):
        KernelRoutes.from_env({"ATLAS_GEMV_LEAN": "2"})
