"""The mixture-of-experts reference kernels agree with independent float64 oracles on the
host (cases/moe.py), the decode and grouped paths compute the same values, and the launch
builders compute the geometry the CUDA kernels expect and reject what they cannot do."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from atlas.runtime.cases import moe as moe_cases
from atlas.runtime.host import HostBackend
from atlas.runtime.kernel_check import KernelCase, check, module_cases
from atlas.runtime.mock import MockGpuBackend
from atlas.runtime.ops import KernelCache, matmul, moe
from atlas.runtime.ops.routes import KernelRoutes
from atlas.runtime.reference import REFERENCES
from atlas.runtime.reference import moe as moe_ref
from test_reference_kernels_a import test_cuda_entry_points_match_the_abi as _declares_abi

MODULES = ("moe_router", "moe_decode", "moe_grouped", "moe_grouped_sm90")


#: the leaf-shape cases (their host references take seconds), left to the GPU check: only
#: their names are kept, as the factories make them
HEAVY_NAMES: list[str] = []


def _light(case: KernelCase) -> bool:
    if moe_cases.is_heavy(case):
        HEAVY_NAMES.append(case.name)
        return False
    return True


CASES = module_cases(MODULES, 97, keep=_light)


@pytest.fixture(scope="module")
def backend() -> HostBackend:
    return HostBackend()


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_reference_matches_oracle(backend: HostBackend, case) -> None:
    result = check(backend, case)
    assert result.passed, result.detail


def test_every_module_has_cases() -> None:
    assert {c.module for c in CASES} == set(MODULES)


@pytest.mark.parametrize("module", MODULES)
def test_cuda_entry_points_match_the_abi(module: str) -> None:
    _declares_abi(module)


# ---- router rules ---------------------------------------------------------------------------
def test_ties_go_to_the_lower_expert_like_torch_topk() -> None:
    logits = np.array([[1.0, 3.0, 3.0, 0.5, 3.0, 2.0]], np.float32)
    ids, w = moe_ref.topk_softmax(logits, 4, renormalize=True, scale=1.0)
    assert ids.tolist() == [[1, 2, 4, 5]]
    assert w[0, 0] == w[0, 1] == w[0, 2] and abs(float(w.sum()) - 1.0) < 1e-6


def test_sigmoid_bias_moves_selection_but_not_weights() -> None:
    logits = np.array([[0.0, 1.0, 2.0]], np.float32)
    bias = np.array([5.0, 0.0, 0.0], np.float32)
    ids, w = moe_ref.topk_sigmoid(logits, bias, 2, renormalize=False, scale=1.0)
    assert ids.tolist() == [[0, 2]]  # expert 0 wins only through its bias
    np.testing.assert_allclose(w[0], [0.5, 1 / (1 + np.exp(-2.0))], rtol=1e-7)


def test_all_underflowed_sigmoid_row_gives_zero_weights_not_nan() -> None:
    ids, w = moe_ref.topk_sigmoid(np.full((1, 8), -300.0, np.float32), None, 3, True, 1.0)
    assert ids.tolist() == [[0, 1, 2]] and not np.isnan(w).any() and (w == 0).all()


# ---- the two expert paths agree -------------------------------------------------------------
def _run_experts(backend: HostBackend, shape: moe.MoeShape, x, w_gu, w_d, ids, weights,
                 max_tokens: int) -> np.ndarray:
    tokens = len(ids)
    layout = moe.scratch_layout(shape, max_tokens)
    p = {name: backend.upload(a) for name, a in
         dict(x=x, w_gu=w_gu, w_d=w_d, ids=ids, weights=weights).items()}
    out = backend.alloc(2 * tokens * shape.hidden)
    scratch = moe.MoeScratch(*(backend.alloc(max(n, 1)) for n in
                               (layout.act, layout.y, layout.sorted_slots, layout.tile_expert)),
                             max_tokens=max_tokens)
    moe.experts(KernelCache(backend), 0, p["x"], p["w_gu"], p["w_d"], p["ids"], p["weights"],
                out, tokens, shape, scratch)
    return backend.download(out, np.uint16, (tokens, shape.hidden))


def test_a_token_gives_the_same_bits_alone_and_in_a_grouped_batch(backend) -> None:
    rng = np.random.default_rng(5)
    shape = moe.MoeShape(experts=12, top_k=3, hidden=64, inter=48)
    w_gu, w_d = moe_cases.expert_weights(rng, shape)
    x = moe_cases.random_bf16(rng, (30, shape.hidden))
    ids = moe_cases.random_ids(rng, 30, shape.experts, shape.top_k)
    weights = rng.uniform(0.1, 1, (30, shape.top_k)).astype(np.float32)
    batched = _run_experts(backend, shape, x, w_gu, w_d, ids, weights, 30)
    for t in (0, 17, 29):
        solo = _run_experts(backend, shape, x[t:t + 1], w_gu, w_d, ids[t:t + 1],
                            weights[t:t + 1], 1)
        assert (solo[0] == batched[t]).all()


def test_align_layout_matches_its_bound() -> None:
    rng = np.random.default_rng(3)
    for slots, experts in [(1, 1), (64, 1), (65, 2), (2048, 128), (300, 512)]:
        ids = rng.integers(0, experts, slots).astype(np.int32)
        tiles = moe.max_tiles(slots, experts)
        sorted_slots, tile_expert = moe_ref.align(ids, experts, tiles)
        live = sorted_slots >= 0
        assert sorted(sorted_slots[live].tolist()) == list(range(slots))
        row_expert = np.repeat(tile_expert, moe.MOE_TILE_M)
        assert (row_expert[live] == ids[sorted_slots[live]]).all()
    # the worst case fills the bound exactly: every expert one slot past a whole tile
    ids = np.repeat(np.arange(4, dtype=np.int32), moe.MOE_TILE_M + 1)
    tiles = moe.max_tiles(len(ids), 4)
    _, tile_expert = moe_ref.align(ids, 4, tiles)
    assert (tile_expert >= 0).sum() == 8 and tiles == 9


# ---- launch geometry and preconditions ------------------------------------------------------
def _launches(fn, *args, **kwargs):
    mock = MockGpuBackend()
    fn(KernelCache(mock), 0, *args, **kwargs)
    return [(r.func, tuple(r.grid), tuple(r.block)) for r in mock.drain_launches()]


QWEN3_30B = moe.MoeShape(experts=128, top_k=8, hidden=2048, inter=768)


def test_decode_path_is_two_launches_over_the_selected_experts() -> None:
    scratch = moe.MoeScratch(act=0x1000)
    got = _launches(moe.experts, 0x2000, 0x3000, 0x4000, 0x5000, 0x6000, 0x7000, 3, QWEN3_30B,
                    scratch)
    # gate/up at batch 3: the column-loop kernel (the GEMV-shaped one takes batch 1 unless
    # ATLAS_MOE_GATE_UP_GEMV_MAX_M says more), 9 column groups a block (96 groups x 24 pairs
    # over 2 x 132 blocks); down: 24 rows a block (3 x 2048 rows over 2 x 132 blocks: 86 a
    # token)
    assert got == [("moe_gate_up_silu_bf16", (11, 24, 1), (256, 1, 1)),
                   ("moe_down_sum_bf16", (86, 3, 1), (256, 1, 1))]
    mock = MockGpuBackend()
    wide = KernelRoutes.from_env({"ATLAS_MOE_GATE_UP_GEMV_MAX_M": "8"})
    moe.experts(KernelCache(mock, wide), 0, 0x2000, 0x3000, 0x4000, 0x5000, 0x6000, 0x7000, 3,
                QWEN3_30B, scratch)
    gate_up = mock.drain_launches()[0]
    # the GEMV-shaped batch entry: 2 columns a block (384 blocks a pair), 128 threads
    assert (gate_up.func, tuple(gate_up.grid), tuple(gate_up.block)) == (
        "moe_gate_up_gemv_bf16", (384, 24, 1), (128, 1, 1))
    # ATLAS_MOE_GATE_UP_GEMV=0 / ATLAS_MOE_DOWN_WAVE=0: the session-6 launches (gate/up 9
    # column groups a block, 96 groups x 24 pairs over 2 x 132 blocks; down 5 groups of 5
    # rows a block)
    mock = MockGpuBackend()
    old = KernelRoutes.from_env({"ATLAS_MOE_GATE_UP_GEMV": "0", "ATLAS_MOE_DOWN_WAVE": "0"})
    moe.experts(KernelCache(mock, old), 0, 0x2000, 0x3000, 0x4000, 0x5000, 0x6000, 0x7000, 3,
                QWEN3_30B, scratch)
    got = [(r.func, tuple(r.grid), tuple(r.block)) for r in mock.drain_launches()]
    assert got == [("moe_gate_up_silu_bf16", (11, 24, 1), (256, 1, 1)),
                   ("moe_down_sum_bf16", (82, 3, 1), (256, 1, 1))]


def test_batch_one_takes_the_gemv_shaped_expert_kernels() -> None:
    """Batch 1 of Qwen3-30B-A3B: gate/up on the tiled entry (the wave-fill rule's pick), 3
    column pairs a block (8 slots x 384 pairs over 132 SMs x 8 blocks of 128 threads: 128 x 8
    blocks, one wave); ATLAS_MOE_GATE_UP_TILED=0: the two-column single-token GEMV entry,
    384 x 8 blocks of 128 threads; down on the GEMV-shaped kernel's twin for 3 chunk steps,
    256 blocks of two 4-row tiles (ATLAS_MOE_DOWN_GEMV_TILES=1: 512 of one).
    ATLAS_MOE_DOWN_GEMV=0: the row-group kernel, 256 blocks of 8 rows (two a SM on 128 of
    the 132), where whole groups gave 205 blocks of 10 rows."""
    got = _launches(moe.experts, 0x2000, 0x3000, 0x4000, 0x5000, 0x6000, 0x7000, 1, QWEN3_30B,
                    moe.MoeScratch(act=0x1000))
    assert got == [("moe_gate_up_gemv_tiles_bf16", (128, 8, 1), (128, 1, 1)),
                   ("moe_down_gemv_sum_s3_bf16", (256, 1, 1), (256, 1, 1))]
    mock = MockGpuBackend()
    two = KernelRoutes.from_env({"ATLAS_MOE_GATE_UP_TILED": "0"})
    moe.experts(KernelCache(mock, two), 0, 0x2000, 0x3000, 0x4000, 0x5000, 0x6000, 0x7000,
                1, QWEN3_30B, moe.MoeScratch(act=0x1000))
    gate_up = mock.drain_launches()[0]
    assert (gate_up.func, tuple(gate_up.grid), tuple(gate_up.block)) == (
        "moe_gate_up_gemv_bf16_single", (384, 8, 1), (128, 1, 1))
    mock = MockGpuBackend()
    one = KernelRoutes.from_env({"ATLAS_MOE_DOWN_GEMV_TILES": "1"})
    moe.experts(KernelCache(mock, one), 0, 0x2000, 0x3000, 0x4000, 0x5000, 0x6000, 0x7000, 1,
                QWEN3_30B, moe.MoeScratch(act=0x1000))
    down = mock.drain_launches()[1]
    assert (down.func, tuple(down.grid)) == ("moe_down_gemv_sum_s3_bf16", (512, 1, 1))
    assert down.args["rows_per_block"] == 4  # one tile
    mock = MockGpuBackend()
    old = KernelRoutes.from_env({"ATLAS_MOE_DOWN_GEMV": "0"})
    moe.experts(KernelCache(mock, old), 0, 0x2000, 0x3000, 0x4000, 0x5000, 0x6000, 0x7000, 1,
                QWEN3_30B, moe.MoeScratch(act=0x1000))
    assert [(r.func, tuple(r.grid)) for r in mock.drain_launches()][1] == (
        "moe_down_sum_bf16", (256, 1, 1))
    assert moe.down_rows(8, 1, 2048, 768, 132, wave=False) == 10
    # Qwen3.5-35B-A3B at batch 8 (9 slots): 63 rows a block, 33 blocks a token
    assert moe.down_rows(9, 8, 2048, 512, 132) == 63


class _Resident(MockGpuBackend):
    """A mock whose device holds `blocks` blocks of any launch at once."""

    def __init__(self, blocks: int) -> None:
        super().__init__()
        self.blocks = blocks

    def resident_blocks(self, handle, block: int, shared_mem: int, cluster: int) -> int:
        return self.blocks


@pytest.mark.parametrize("backend,env,shape,tiles,grid", [
    # no device to ask: 132 SMs x 8 blocks of 128 threads; the flagship's 9 slots of 256
    # pairs: 3 a block, 86 x 9 blocks (the last block of a slot one pair)
    (MockGpuBackend(), {}, moe.MoeShape(256, 8, 2048, 512, 512), 3, (86, 9, 1)),
    # the driver's count wins: 3,072 pairs over 512 resident blocks: 6 a block
    (_Resident(512), {}, QWEN3_30B, 6, (64, 8, 1)),
    # more resident blocks than pairs: one pair a block
    (_Resident(100_000), {}, QWEN3_30B, 1, (384, 8, 1)),
    # ATLAS_MOE_GATE_UP_TILES=N: N pairs a block, at most all of a slot's
    (MockGpuBackend(), {"ATLAS_MOE_GATE_UP_TILES": "5"}, QWEN3_30B, 5, (77, 8, 1)),
    (MockGpuBackend(), {"ATLAS_MOE_GATE_UP_TILES": "1000"}, QWEN3_30B, 384, (1, 8, 1)),
])
def test_tiled_gate_up_grid(backend: MockGpuBackend, env: dict, shape: moe.MoeShape,
                            tiles: int, grid: tuple[int, int, int]) -> None:
    kc = KernelCache(backend, KernelRoutes.from_env({"ATLAS_MOE_GATE_UP_TILED": "1"} | env))
    moe.decode_gate_up(kc, 0, 0x2000, 0x3000, 0x4000, 0x5000, 1, shape,
                       moe.SharedExpertWeights(0x6000, 0x7000, 0x8000) if shape.shared_inter
                       else None)
    (launch,) = backend.drain_launches()
    assert (launch.func, tuple(launch.grid), launch.args["tiles"]) == (
        "moe_gate_up_gemv_tiles_bf16", grid, tiles)


def test_tiled_gate_up_reference_refuses_what_the_kernel_traps_on() -> None:
    """The kernel traps on batches of more than one token and on zero pairs a block; the host
    reference raises instead of computing what the GPU would not."""
    with pytest.raises(ValueError, match="tiles=0"):
        moe_ref.moe_gate_up_gemv_tiles_bf16(None, (1, 1, 1), (128, 1, 1), 0, 0, 0, 0, 1,
                                            2, 16, 16, 4, 0, 0, 0, 0)
    with pytest.raises(ValueError, match="tokens=2"):
        moe_ref.moe_gate_up_gemv_tiles_bf16(None, (1, 1, 1), (128, 1, 1), 0, 0, 0, 0, 2,
                                            2, 16, 16, 4, 0, 0, 0, 1)


@pytest.mark.parametrize("value", ["48", "512", "0x80"])
def test_gate_up_threads_switch_refuses_bad_widths(value: str) -> None:
    with pytest.raises(ValueError, match="ATLAS_MOE_GATE_UP_GEMV_THREADS"):
        KernelRoutes.from_env({"ATLAS_MOE_GATE_UP_GEMV_THREADS": value})


@pytest.mark.parametrize("tokens,inter,env,gemv", [
    (1, 512, {}, True),             # Qwen3.5-35B-A3B's experts
    (2, 768, {}, False),            # batch 2: the row-group kernel unless MAX_M says more
    (2, 768, {"ATLAS_MOE_DOWN_GEMV_MAX_M": "8"}, True),
    (1, 96, {}, False),             # 12 chunks a row: a warp's span would cross slots
    (1, 768, {"ATLAS_MOE_DOWN_GEMV": "0"}, False),
])
def test_down_gemv_rule(tokens: int, inter: int, env: dict, gemv: bool) -> None:
    kc = KernelCache(MockGpuBackend(), KernelRoutes.from_env(env))
    assert moe.down_uses_gemv(kc, tokens, moe.MoeShape(16, 8, 256, inter)) is gemv
    # 32 slots of 8,192 columns: 1,024 groups of 32 chunks fit; 8,448 do not
    assert moe.down_uses_gemv(KernelCache(MockGpuBackend()), 1,
                              moe.MoeShape(32, 32, 256, 8192)) is True
    assert moe.down_uses_gemv(KernelCache(MockGpuBackend()), 1,
                              moe.MoeShape(32, 32, 256, 8448)) is False


@pytest.mark.parametrize("tokens,env,func,grid", [
    # one wave of 8-row blocks; 8 slots x 96 chunks on 256 threads: 3 steps, the twin
    # holding that count's code
    (1, {}, "moe_down_gemv_sum_s3_bf16", (256, 1, 1)),
    (2, {}, "moe_down_sum_bf16", (128, 2, 1)),            # no GEMV past batch 1
    (1, {"ATLAS_MOE_DOWN_GEMV": "0"}, "moe_down_sum_bf16", (256, 1, 1)),
    (1, {"ATLAS_MOE_DOWN_ONE_STEP": "0"}, "moe_down_gemv_sum_bf16", (256, 1, 1)),
    (2, {"ATLAS_MOE_DOWN_ONE_STEP": "0"}, "moe_down_sum_bf16", (128, 2, 1)),
])
def test_down_kernel_choice(tokens: int, env: dict, func: str, grid: tuple) -> None:
    """The down launch takes the GEMV-shaped kernel at batch 1 (one wave of 8-row blocks;
    its twin for the shape's chunk steps, ATLAS_MOE_DOWN_ONE_STEP=0 the one switching between
    them) and the row-group kernel
    past it or when switched off; it writes out (delta)."""
    mock = MockGpuBackend()
    moe.decode_down(KernelCache(mock, KernelRoutes.from_env(env)), 0, 0x1000, 0x2000, 0x3000,
                    0x4000, 0x5000, tokens, QWEN3_30B)
    (got,) = mock.drain_launches()
    assert (got.func, tuple(got.grid)) == (func, grid)
    assert got.args["out"] == 0x5000


@pytest.mark.parametrize("slots, inter, steps", [
    (2, 512, 1), (4, 512, 1), (6, 512, 2), (8, 768, 3), (9, 512, 3), (12, 512, 3),
    (13, 512, 4), (22, 512, 4)])
def test_down_gemv_steps_match_the_kernel_switch(slots: int, inter: int, steps: int) -> None:
    """down_gemv_run's case: ceil(slots x inter / 8 / 256) chunks a thread, 4 and more on the
    last twin; the host reference of each twin refuses a launch of another count."""
    assert moe.down_gemv_steps(slots, inter) == steps
    for other in {1, 2, 3, 4} - {steps}:
        run = REFERENCES[("moe_decode", f"moe_down_gemv_sum_s{other}_bf16")]
        with pytest.raises(ValueError, match=f"a launch of {steps} chunk steps"):
            run(HostBackend(), (1, 1, 1), (256, 1, 1), 0, 0, 0, 0, 0, 1, slots, 2048, inter,
                128, 8, 0, 0, 0)


def test_grouped_path_grid_is_sized_for_the_worst_case() -> None:
    layout = moe.scratch_layout(QWEN3_30B, 256)
    assert layout.act == 2 * (32 + 128) * 64 * 768 and layout.y == 2 * 2048 * 2048
    scratch = moe.MoeScratch(0x1000, 0x2000, 0x3000, 0x4000, max_tokens=256)
    got = _launches(moe.experts, 0x10000, 0x20000, 0x30000, 0x40000, 0x50000, 0x60000, 256,
                    QWEN3_30B, scratch)
    assert got == [("moe_align_i32", (16, 1, 1), (256, 1, 1)),
                   ("moe_grouped_gate_up_silu_bf16", (12, 160, 1), (128, 1, 1)),
                   ("moe_grouped_down_bf16", (16, 160, 1), (128, 1, 1)),
                   ("moe_combine_bf16", (1, 256, 1), (256, 1, 1))]


class _HopperMock(MockGpuBackend):
    """A mock whose PTX set has the wgmma grouped GEMMs, as the hopper leaves do."""

    @property
    def module_names(self) -> list[str]:
        return ["moe_grouped", "moe_grouped_sm90"]


def test_grouped_gemms_take_wgmma_where_the_module_is_loaded() -> None:
    scratch = moe.MoeScratch(0x1000, 0x2000, 0x3000, 0x4000, max_tokens=256)
    mock = _HopperMock()
    moe.experts(KernelCache(mock), 0, 0x10000, 0x20000, 0x30000, 0x40000, 0x50000, 0x60000,
                256, QWEN3_30B, scratch)
    got = [(r.func, tuple(r.grid), tuple(r.block), r.shared) for r in mock.drain_launches()]
    assert got[1:3] == [("moe_grouped_gate_up_silu_sm90_bf16", (6, 160, 1), (128, 1, 1),
                         moe.MOE_SM90_SMEM),
                        ("moe_grouped_down_sm90_bf16", (8, 160, 1), (128, 1, 1),
                         moe.MOE_SM90_SMEM)]
    assert not KernelRoutes.from_env({"ATLAS_MOE_SM90": "0"}).moe_sm90
    moe.experts(KernelCache(mock, KernelRoutes(moe_sm90=False)), 0, 0x10000, 0x20000, 0x30000,
                0x40000, 0x50000, 0x60000, 256, QWEN3_30B, scratch)
    assert [r.func for r in mock.drain_launches()][1] == "moe_grouped_gate_up_silu_bf16"


def test_router_geometry_and_sigmoid_launch() -> None:
    got = _launches(moe.topk, 0x100, 0x200, 0x300, 9, 128, 8, moe.Routing("sigmoid", bias=0x600))
    assert got == [("moe_topk_sigmoid_f32", (3, 1, 1), (128, 1, 1))]


def test_fused_router_grid() -> None:
    """The fused router: a warp a gate row, 8 a block: Qwen3.5-35B-A3B's 256 experts + the
    shared gate take 33 blocks of 256 threads."""
    mock = MockGpuBackend()
    shape = moe.MoeShape(256, 8, 2048, 512, shared_inter=512)
    moe.gate_topk(KernelCache(mock), 0, 0x1000, 0x2000, 0x3000, 0x4000, 0x5000, 0x6000, 1,
                  shape, moe.Routing(), moe.SharedExpertWeights(0x7000, 0x8000, 0x9000), 0xa000)
    got = [(r.func, tuple(r.grid), tuple(r.block)) for r in mock.drain_launches()]
    assert got == [("moe_gate_topk_softmax_bf16", (33, 1, 1), (256, 1, 1))]


@pytest.mark.parametrize("shape,match", [
    (moe.MoeShape(8, 9, 64, 64), "top_k"),
    (moe.MoeShape(1024, 8, 64, 64), "experts"),
    (moe.MoeShape(8, 2, 72, 64), "hidden"),
    (moe.MoeShape(8, 2, 64, 40), "inter"),
])
def test_bad_shapes_are_refused(shape, match) -> None:
    with pytest.raises(ValueError, match=match):
        _launches(moe.experts, 0, 0, 0, 0, 0, 0, 1, shape, moe.MoeScratch(0))


@pytest.mark.parametrize("shape,match", [
    (moe.MoeShape(8, 2, 64, 64, shared_inter=40), "shared_inter"),
    (moe.MoeShape(64, 24, 64, 16, shared_inter=160), "exceed"),  # 24 + 10 slots > 32
])
def test_bad_shared_expert_shapes_are_refused(shape, match) -> None:
    shared = moe.SharedExpertWeights(0x1000, 0x2000, 0x3000)
    with pytest.raises(ValueError, match=match):
        _launches(moe.experts, 0, 0, 0, 0, 0, 0, 1, shape, moe.MoeScratch(0), shared=shared)


def test_shared_expert_weights_and_shape_must_agree() -> None:
    with pytest.raises(ValueError, match="shared-expert weights"):
        _launches(moe.decode_gate_up, 0, 0, 0, 0, 1, moe.MoeShape(8, 2, 64, 64, 64))
    with pytest.raises(ValueError, match="shared-expert weights"):
        _launches(moe.decode_down, 0, 0, 0, 0, 0, 1, moe.MoeShape(8, 2, 64, 64),
                  moe.SharedExpertWeights(0x1000, 0x2000, 0x3000))


def test_fused_paths_are_decode_only() -> None:
    scratch = moe.MoeScratch(0x1000, 0x2000, 0x3000, 0x4000, max_tokens=64)
    shared = moe.SharedExpertWeights(0x100, 0x200, 0x300)
    with pytest.raises(ValueError, match="decode-path"):
        _launches(moe.experts, 0, 0, 0, 0, 0, 0, 9, QWEN3_30B, scratch, shared=shared)
    with pytest.raises(ValueError, match="fused router"):
        _launches(moe.gate_topk, 0, 0, 0, 0, 0, 0, 9, QWEN3_30B)


def test_decode_launch_geometry_with_a_shared_expert() -> None:
    """Qwen3.5-35B-A3B's shape: 8 routed + 1 shared slot; the router has 257 rows."""
    shape = moe.MoeShape(256, 8, 2048, 512, shared_inter=512)
    shared = moe.SharedExpertWeights(0x1000, 0x2000, 0x3000)
    got = _launches(moe.experts, 0x2000, 0x3000, 0x4000, 0x5000, 0x6000, 0x7000, 2, shape,
                    moe.MoeScratch(act=0x8000), shared=shared)
    # down: 16 rows a block (a group of 6, one of 6, one of 4)
    assert got == [("moe_gate_up_silu_bf16", (13, 18, 1), (256, 1, 1)),
                   ("moe_down_sum_bf16", (128, 2, 1), (256, 1, 1))]
    got = _launches(moe.gate_topk, 0x100, 0x200, 0x300, 0x400, 0x500, 0x600, 2, shape,
                    moe.Routing(), shared, 0x700)
    assert got == [("moe_gate_topk_softmax_bf16", (33, 1, 1), (256, 1, 1))]


def test_router_shared_memory_is_every_token_x() -> None:
    assert moe.gate_topk_smem(8, 2048) == 2 * 8 * 2048
    with pytest.raises(ValueError, match="shared memory"):
        moe.gate_topk_smem(8, 14336)


def test_grouped_batch_without_grouped_scratch_is_refused() -> None:
    with pytest.raises(ValueError, match="grouped scratch"):
        _launches(moe.experts, 0, 0, 0, 0, 0, 0, 9, QWEN3_30B, moe.MoeScratch(0, max_tokens=9))


def test_bias_needs_sigmoid_scoring() -> None:
    with pytest.raises(ValueError, match="sigmoid"):
        moe.Routing("softmax", bias=0x100)


def test_heavy_cases_exist_for_the_leaf_shapes() -> None:
    # 3 of them gpt-oss-20b's, 1 the one-step down twin's
    assert len(HEAVY_NAMES) == len(set(HEAVY_NAMES)) == 25


def _constant(stem: str, name: str) -> int:
    """A `constexpr int` of kernels/hopper/common/<stem>.cu (or <stem> itself: a header)."""
    source = (Path(__file__).resolve().parents[2] / "kernels/hopper/common"
              / (stem if "." in stem else f"{stem}.cu"))
    (value,) = re.findall(rf"constexpr int {name} = (\d+);", source.read_text())
    return int(value)


def _down_tiles() -> dict[int, int]:
    """moe_decode.cu's DownTile: chunk steps -> items per warp (0: the general tile)."""
    source = (Path(__file__).resolve().parents[2] / "kernels/hopper/common/moe_decode.cu")
    text = source.read_text()
    tiles = {int(k): int(v) for k, v in re.findall(
        r"struct DownTile<(\d)> \{ static constexpr int kItems = (\d+), kBatch = \1; \};", text)}
    (general,) = re.findall(r"struct DownTile \{ static constexpr int kItems = (\d+),", text)
    return tiles | {0: int(general)}


def test_launch_constants_match_the_kernels() -> None:
    assert moe.DECODE_ROWS_PER_BLOCK == _constant("moe_decode", "kWarps")
    assert moe.DECODE_THREADS == 32 * moe.DECODE_ROWS_PER_BLOCK
    tiles = _down_tiles()
    assert moe.DOWN_TILE_ITEMS == {k: v for k, v in tiles.items() if k} and \
        moe.DOWN_TILE_ITEMS_LONG == tiles[0]
    assert max(tiles.values()) == _constant("moe_decode", "kMaxDownItems")
    assert moe.ROUTER_MAX_TOP_K == _constant("moe_decode", "kMaxSlots")
    assert moe.GATE_UP_GROUP_PAIRS == _constant("moe_decode", "kGroupPairs")
    assert moe.DOWN_GEMV_ROWS == _constant("moe_decode", "kGemvRows")
    assert moe.DOWN_GEMV_MAX_GROUPS == _constant("moe_decode", "kGemvMaxGroups")
    # the GEMV-shaped gate/up block: the gate and up rows of its columns are the GEMV's rows
    assert 2 * moe.GATE_UP_GEMV_COLS == matmul.GEMV_ROWS_PER_BLOCK
    # a group's items (rows x slots) fit the kernel's shared array for every slot count and
    # row length, and a block takes whole groups
    for inter in (16, 256, 512, 768, 1024, 1536, 14336):
        for k in range(1, moe.ROUTER_MAX_TOP_K + 1):
            if inter > 1024 and k > 8 * moe.DOWN_TILE_ITEMS_LONG:  # more than one group holds
                with pytest.raises(ValueError, match="exceed one group"):
                    moe.down_rows_per_group(k, inter)
                continue
            per_group = moe.down_rows_per_group(k, inter)
            assert k * per_group <= moe.DECODE_ROWS_PER_BLOCK * _constant(
                "moe_decode", "kMaxDownItems")
            assert moe.down_rows_grouped(k, 8, 2048, inter, 132) % per_group == 0
            assert 1 <= moe.down_rows(k, 8, 2048, inter, 132) <= 2048


def test_down_grid_is_about_one_wave() -> None:
    """Equal blocks (the default): ceil(tokens x hidden / 264) rows at 132 SMs, 8 at batch 1
    (256 blocks), 63 at batch 8 (33 blocks a token, 264 in all); at most the whole row.
    Whole groups (ATLAS_MOE_DOWN_WAVE=0): Qwen3-30B-A3B (inter 768: 5 items a warp, 3 chunks
    each): 5 rows a group, 410 groups -> 2 groups a block at batch 1 (205 blocks), 13 at batch
    8 (8 x 32 blocks); Qwen3.5-35B-A3B (inter 512, 9 slots: 7 items a warp): 6 rows a group,
    2 / 11 groups a block."""
    assert moe.down_rows(8, 1, 2048, 768, 132) == 8 and moe.down_rows(8, 8, 2048, 768, 132) == 63
    assert moe.down_rows(9, 1, 2048, 512, 132) == 8 and moe.down_rows(3, 1, 64, 96, 132) == 1
    assert moe.down_rows(8, 8, 128, 768, 4) == 128  # fewer SMs than a token's rows need
    assert moe.down_rows_per_group(8, 768) == 5 and moe.down_rows_per_group(9, 512) == 6
    grouped = moe.down_rows_grouped
    assert grouped(8, 1, 2048, 768, 132) == 10 and grouped(8, 8, 2048, 768, 132) == 65
    assert grouped(9, 1, 2048, 512, 132) == 12 and grouped(9, 8, 2048, 512, 132) == 66
    assert grouped(3, 1, 64, 96, 132) == 21  # fewer groups than a wave: one group
    assert moe.down_smem(9, 512) == 9216
    with pytest.raises(ValueError, match="shared memory"):
        moe.down_smem(32, 14336)
    assert moe.ROUTER_TOKENS_PER_BLOCK == _constant("moe_router", "kWarpsPerBlock")
    assert moe.ROUTER_MAX_EXPERTS == 32 * _constant("moe_route.cuh", "kMaxPerLane")
    assert moe.ROUTE_IN_EXPERTS_MAX_EXPERTS == 32 * _constant("moe_decode", "kRouteMaxTier")


ROUTE_IN = {"ATLAS_MOE_ROUTE_IN_EXPERTS": "1", "ATLAS_MOE_GATE_UP_TILED": "1"}


@pytest.mark.parametrize("env,tokens,shape,routes", [
    ({}, 1, QWEN3_30B, False),                              # off by default (no gain measured)
    (ROUTE_IN, 1, QWEN3_30B, True),
    (ROUTE_IN, 1, moe.MoeShape(256, 8, 2048, 512, 512), True),  # the flagship, shared expert
    ({"ATLAS_MOE_ROUTE_IN_EXPERTS": "1"}, 1, QWEN3_30B, False),  # needs the tiled gate/up
    (ROUTE_IN, 2, QWEN3_30B, False),                        # batch 1 only
    (ROUTE_IN, 1, moe.MoeShape(512, 10, 2048, 512), False),  # more experts than the tier holds
    (ROUTE_IN, 1, moe.MoeShape(16, 4, 256, 96), False),     # down not GEMV-shaped
    (ROUTE_IN | {"ATLAS_MOE_DOWN_GEMV": "0"}, 1, QWEN3_30B, False),
])
def test_routes_in_experts_rule(env: dict, tokens: int, shape: moe.MoeShape,
                                routes: bool) -> None:
    kc = KernelCache(MockGpuBackend(), KernelRoutes.from_env(env))
    assert moe.routes_in_experts(kc, tokens, shape) is routes


def test_routing_inside_the_expert_launches() -> None:
    """Batch 1 of Qwen3-30B-A3B routing inside the expert launches: the router's gate GEMV
    alone (16 blocks of 8 rows), the tiled gate/up and the down GEMV twins reading the
    logits, the router's rule passed through (sigmoid with a bias here); a launch the rule
    refuses raises instead of routing from topk_ids nobody wrote."""
    mock = MockGpuBackend()
    kc = KernelCache(mock, KernelRoutes.from_env(ROUTE_IN))
    moe.gate_logits(kc, 0, 0x100, 0x200, 0x300, 1, QWEN3_30B)
    route = moe.LogitRoute(0x300, 0, moe.Routing("sigmoid", False, 2.5, 0x900))
    moe.experts(kc, 0, 0x2000, 0x3000, 0x4000, 0, 0, 0x7000, 1, QWEN3_30B,
                moe.MoeScratch(act=0x1000), route=route)
    got = mock.drain_launches()
    assert [(r.func, tuple(r.grid), tuple(r.block)) for r in got] == [
        ("moe_gate_logits_bf16", (16, 1, 1), (256, 1, 1)),
        ("moe_gate_up_gemv_tiles_route_bf16", (128, 8, 1), (128, 1, 1)),
        ("moe_down_gemv_route_sum_bf16", (256, 1, 1), (256, 1, 1))]
    assert got[1].args["logits"] == 0x300 and got[1].args["bias"] == 0x900
    assert got[1].args["sigmoid"] == 1 and got[1].args["tiles"] == 3
    down = got[2].args
    assert (down["logits"], down["bias"], down["out"]) == (0x300, 0x900, 0x7000)
    assert (down["renormalize"], down["scale"], down["sigmoid"],
            down["rows_per_block"]) == (0, 2.5, 1, 8)
    moe.decode_down(kc, 0, 0x1000, 0x4000, 0, 0, 0x7000, 1, QWEN3_30B, route=route)
    assert mock.drain_launches()[0].func == "moe_down_gemv_route_sum_bf16"
    off = KernelCache(MockGpuBackend())  # the defaults: off
    with pytest.raises(ValueError, match="routes_in_experts"):
        moe.experts(off, 0, 0x2000, 0x3000, 0x4000, 0, 0, 0x7000, 1, QWEN3_30B,
                    moe.MoeScratch(act=0x1000), route=route)
    with pytest.raises(ValueError, match="routes_in_experts"):
        moe.experts(kc, 0, 0x2000, 0x3000, 0x4000, 0, 0, 0x7000, 2, QWEN3_30B,
                    moe.MoeScratch(act=0x1000), route=route)
