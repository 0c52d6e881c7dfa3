"""The matrix and attention reference kernels agree with their float64 oracles on the host,
and the launch builders reject what the CUDA kernels cannot do. Fused kernels (gemv_silu)
equal their unfused twins bit for bit: on the host here, and on the GPU in the
`gpu`-marked test at the end."""

from __future__ import annotations

import re
from functools import partial
from pathlib import Path

import numpy as np
import pytest

from atlas.runtime.cases import attention as attention_cases  # noqa: F401 (registers)
from atlas.runtime.cases import attention_rope as attention_rope_cases  # noqa: F401
from atlas.runtime.cases import gemm as gemm_cases  # noqa: F401 (registers)
from atlas.runtime.cases import gemv as gemv_cases  # noqa: F401 (registers)
from atlas.runtime.cases import row_invariance as row_invariance_cases  # noqa: F401
from atlas.runtime.cases.gemv import UNFUSED
from atlas.runtime.host import HostBackend
from atlas.runtime.kernel_check import KernelCase, check, execute, module_cases
from atlas.runtime.mock import MockGpuBackend
from atlas.runtime.ops import KernelCache, attention, matmul
from atlas.runtime.ops.routes import KernelRoutes
# the elementwise kernels' check that a .cu file declares exactly its module's ABI entries
from test_reference_kernels_a import test_cuda_entry_points_match_the_abi as _declares_abi

MODULES = ("gemv", "gemm", "attention", "attention_twins")
ROOT = Path(__file__).resolve().parents[2]




CASES = module_cases(MODULES, 1234)
#: cases that also run the unfused path into `<output>_unfused`
TWINNED = [c for c in CASES if any(name.endswith(UNFUSED) for name in c.outputs)]


def _assert_twins_identical(case: KernelCase, got: dict[str, np.ndarray]) -> None:
    pairs = [(n[:-len(UNFUSED)], n) for n in case.outputs if n.endswith(UNFUSED)]
    assert pairs
    for fused, unfused in pairs:
        diff = np.count_nonzero(got[fused] != got[unfused])
        assert diff == 0, f"{case.name}: {fused} differs from {unfused} in {diff} elements"


@pytest.fixture(scope="module")
def backend() -> HostBackend:
    return HostBackend()


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_reference_matches_oracle(backend: HostBackend, case) -> None:
    result = check(backend, case)
    assert result.passed, result.detail


def test_every_module_has_cases() -> None:
    assert {c.module for c in CASES} == set(MODULES)
    assert {c.module for c in TWINNED} == {"gemv"}


@pytest.mark.parametrize("case", TWINNED, ids=[c.name for c in TWINNED])
def test_fused_references_equal_their_unfused_twins(backend: HostBackend, case) -> None:
    _assert_twins_identical(case, execute(backend, case))


def _launches(fn, *args, **kwargs):
    mock = MockGpuBackend()
    fn(KernelCache(mock), 0, *args, **kwargs)
    return mock.drain_launches()


@pytest.mark.parametrize("m,n,func,grid,block", [
    (1, 576, "gemv_bf16_single", (144, 1, 1), (64, 1, 1)),   # k=576: 72 chunks, 2 a thread
    (8, 4097, "gemv_ring_bf16", (1025, 1, 1), (64, 1, 1)),   # 1,025 groups, 8 blocks a SM
    (9, 4096, "gemm_bf16_skinny", (128, 1, 1), (128, 1, 1)),  # 32 big tiles < 132 SMs
    (2048, 4096, "gemm_bf16", (32, 16, 1), (256, 1, 1)),
])
def test_linear_dispatch_and_geometry(m, n, func, grid, block) -> None:
    (rec,) = _launches(matmul.linear, 0x1000, 0x2000, 0x3000, m, n, 576)
    assert (rec.func, rec.grid, rec.block) == (func, grid, block)
    assert (rec.args["m"], rec.args["n"], rec.args["k"]) == (m, n, 576)


def test_gemv_threads_cover_k() -> None:
    """Two 16-byte chunks of a row a thread (every load slot of gemv_core's kUnroll used)."""
    assert [matmul.gemv_threads(k) for k in (64, 576, 1024, 2048, 3072, 4096, 12288)] == [
        32, 64, 64, 128, 192, 256, 256]
    assert [matmul.gemv_threads(k, 1) for k in (64, 576, 1024, 4096)] == [32, 96, 128, 256]


def test_f32_output_selects_the_f32_entry_points() -> None:
    (rec,) = _launches(matmul.linear, 0x1000, 0x2000, 0x3000, 1, 151936, 1024, out_f32=True)
    assert rec.func == "gemv_bf16_f32_single"
    (rec,) = _launches(matmul.linear, 0x1000, 0x2000, 0x3000, 2, 151936, 1024, out_f32=True)
    assert rec.func == "gemv_ring_bf16_f32"
    (rec,) = _launches(matmul.linear, 0x1000, 0x2000, 0x3000, 2048, 2048, 1024, out_f32=True)
    assert rec.func == "gemm_bf16_f32"


@pytest.mark.parametrize("fn,args,match", [
    (matmul.gemv, (0x1000, 0x2000, 0x3000, 9, 64, 64), "m=9"),
    (matmul.gemv, (0x1000, 0x2000, 0x3000, 1, 64, 100), "multiple of 8"),
    (matmul.gemv, (0x1008, 0x2000, 0x3000, 1, 64, 64), "aligned"),
    (partial(matmul.gemv, single=True), (0x1000, 0x2000, 0x3000, 2, 64, 64), "m=1"),
    (matmul.gemm, (0x1000, 0x2000, 0x3000, 20, 72, 64), "multiples of 16"),
    (matmul.gemm, (0x1000, 0x2000, 0x3000, 20, 64, 24), "multiples of 16"),
])
def test_matmul_preconditions(fn, args, match) -> None:
    with pytest.raises(ValueError, match=match):
        _launches(fn, *args)


@pytest.mark.parametrize("m,scratch,funcs", [
    (1, None, ["gemv_silu_bf16_single"]),
    (8, None, ["gemv_ring_silu_bf16"]),
    (12, 0x9000, ["silu_mul_early_bf16", "gemm_bf16_skinny"]),  # beyond the GEMV: the fallback
])
def test_linear_silu_dispatch(m, scratch, funcs) -> None:
    recs = _launches(matmul.linear_silu, 0x1000, 0x2000, 0x3000, m, 1024, 3072,
                     scratch=scratch)
    assert [r.func for r in recs] == funcs
    if scratch is None:
        assert (recs[0].grid, recs[0].block) == ((256, 1, 1), (192, 1, 1))  # 384 chunks, 2 a thread
        assert (recs[0].args["gate_up"], recs[0].args["k"]) == (0x1000, 3072)
    else:  # silu_mul writes the scratch, the GEMM reads it
        assert recs[0].args["out"] == recs[1].args["a"] == scratch
        assert recs[1].args["c"] == 0x3000


@pytest.mark.parametrize("fn,args,kwargs,match", [
    (matmul.linear_silu, (0x1000, 0x2000, 0x3000, 9, 64, 64), {}, "scratch"),
    (matmul.gemv_silu, (0x1000, 0x2000, 0x3000, 2, 64, 64), {"single": True}, "m=1"),
    (matmul.gemv_silu, (0x1000, 0x2000, 0x3000, 1, 64, 60), {}, "multiple of 8"),
    (matmul.gemv_silu, (0x1008, 0x2000, 0x3000, 1, 64, 64), {}, "aligned"),
])
def test_fused_gemv_preconditions(fn, args, kwargs, match) -> None:
    with pytest.raises(ValueError, match=match):
        _launches(fn, *args, **kwargs)


@pytest.mark.parametrize("hq,hkv", [(16, 8), (32, 8), (32, 4), (16, 2), (12, 2), (9, 3),
                                     (64, 4), (8, 8)])
def test_decode_head_slices_cover_each_q_head_once(hq: int, hkv: int) -> None:
    """attention.cu HeadSlice::of_block, restated: grid y = hkv x slices; block y serves
    q heads [h0, h0 + count) of kv head y / slices, and its split ticket is counter y of the
    row, which the runner's [rows, hq] counters hold."""
    slices = attention.decode_head_slices(hq, hkv)
    group, per = hq // hkv, attention.DECODE_HEADS_PER_BLOCK
    served = []
    for y in range(hkv * slices):
        kvh, index = divmod(y, slices)
        first = index * per
        count = min(per, group - first)
        assert 1 <= count <= per
        heads = range(kvh * group + first, kvh * group + first + count)
        assert all(h // group == kvh for h in heads)  # the slice's K/V are its kv head's
        served += heads
    assert sorted(served) == list(range(hq))
    assert hkv * slices <= hq
    rec, = _launches(attention.decode_attention, 0x1000, 0x2000, 0x3000, 0x4000, 0x5000,
                     0x6000, 0x7000, 0x7800, 0x8000, 2, hq, hkv, 64, 16, 8, 5, 0.1)
    assert rec.grid == (5, hkv * slices, 2)


@pytest.mark.parametrize("splits,func,grid_x", [
    (5, "decode_attn_bf16", 5), (7, "decode_attn_bf16", 7),
    # a cluster's splits or more: the clustered kernel, the grid in whole clusters
    (8, "decode_attn_cluster_bf16", 8), (16, "decode_attn_cluster_bf16", 16),
    (33, "decode_attn_cluster_bf16", 40)])
def test_decode_attention_is_one_launch_over_the_splits(splits: int, func: str,
                                                         grid_x: int) -> None:
    recs = _launches(attention.decode_attention, 0x1000, 0x2000, 0x3000, 0x4000, 0x5000,
                     0x6000, 0x7000, 0x7800, 0x8000, 4, 32, 8, 128, 16, 64, splits, 0.088)
    assert [(r.func, r.grid, r.block) for r in recs] == [(func, (grid_x, 8, 4), (128, 1, 1))]
    # the last writer of each (seq, kv head) merges into out, ticketed by the counters
    assert (recs[0].args["counters"], recs[0].args["out"]) == (0x7800, 0x8000)
    assert recs[0].args["num_splits"] == splits  # the split rule's, not the grid's


def test_the_latency_switch_restores_the_unclustered_waiting_kernels() -> None:
    """ATLAS_DECODE_ATTN_LATENCY=0: the session-start decode path at batch 1 (the A/B)."""
    off = KernelRoutes.from_env({"ATLAS_DECODE_ATTN_LATENCY": "0"})
    assert not off.decode_attn_latency and KernelRoutes.from_env({}).decode_attn_latency
    for routes, plain, rope, x in ((off, "decode_attn_bf16", "decode_attn_rope_wait_bf16", 33),
                                   (KernelRoutes(), "decode_attn_cluster_bf16",
                                    "decode_attn_rope_cluster_bf16", 40)):
        mock = MockGpuBackend()
        kc = KernelCache(mock, routes=routes)
        attention.decode_attention(kc, 0, 0x1000, 0x2000, 0x3000, 0x4000, 0x5000, 0x6000,
                                   0x7000, 0x7800, 0x8000, 1, 16, 8, 128, 16, 64, 33, 0.088)
        attention.decode_attention_rope(kc, 0, 0x1000, 0x2000, 0x3000, 0x4000, 0x5000, 0x6000,
                                        0x7000, 0x7400, 0x7800, 0x7c00, 0x8000, 0x9000,
                                        0xa000, 0xb000, 1, 16, 8, 128, 16, 64, 33, 0.088, 1e-6)
        assert [(r.func, r.grid[0]) for r in mock.drain_launches()] == [(plain, x), (rope, x)]
    assert attention.decode_partial_rule(512, 33, off) == (32, 16)


def test_the_ahead_switch_takes_the_one_round_twins_of_the_unclustered_kernels() -> None:
    """ATLAS_DECODE_ATTN_AHEAD=0: the unclustered kernels without the loop's L2 prefetch
    (batch 64's 1-split grid); the clustered ones (batch 1) are the same kernels either way."""
    off = KernelRoutes.from_env({"ATLAS_DECODE_ATTN_AHEAD": "0"})
    assert not off.decode_attn_ahead and KernelRoutes().decode_attn_ahead
    for routes, plain, rope in ((off, "decode_attn_ahead1_bf16", "decode_attn_rope_ahead1_bf16"),
                                (KernelRoutes(), "decode_attn_bf16", "decode_attn_rope_bf16")):
        for splits, want in ((1, (plain, rope)),
                             (33, ("decode_attn_cluster_bf16", "decode_attn_rope_cluster_bf16"))):
            mock = MockGpuBackend()
            kc = KernelCache(mock, routes=routes)
            attention.decode_attention(kc, 0, 0x1000, 0x2000, 0x3000, 0x4000, 0x5000, 0x6000,
                                       0x7000, 0x7800, 0x8000, 64, 32, 8, 128, 16, 96, splits,
                                       0.088)
            attention.decode_attention_rope(kc, 0, 0x1000, 0x2000, 0x3000, 0x4000, 0x5000,
                                            0x6000, 0x7000, 0x7400, 0x7800, 0x7c00, 0x8000,
                                            0x9000, 0xa000, 0xb000, 64, 32, 8, 128, 16, 96,
                                            splits, 0.088, 1e-6)
            assert tuple(r.func for r in mock.drain_launches()) == want


@pytest.mark.parametrize("env,twin", [({"ATLAS_DECODE_ATTN_SPLIT_MAJOR": "1"}, "splitmajor"),
                                      ({"ATLAS_DECODE_ATTN_B1_CHAIN": "0"}, "pull")])
def test_the_cluster_switches_take_the_clustered_twins_only(env: dict[str, str],
                                                             twin: str) -> None:
    on = KernelRoutes.from_env(env)
    assert on != KernelRoutes() and KernelRoutes.from_env({}) == KernelRoutes()
    for splits, want in ((33, (f"decode_attn_cluster_{twin}_bf16",
                               f"decode_attn_rope_cluster_{twin}_bf16")),
                         (2, ("decode_attn_bf16", "decode_attn_rope_bf16"))):
        mock = MockGpuBackend()
        kc = KernelCache(mock, routes=on)
        attention.decode_attention(kc, 0, 0x1000, 0x2000, 0x3000, 0x4000, 0x5000, 0x6000,
                                   0x7000, 0x7800, 0x8000, 1, 16, 8, 128, 16, 64, splits, 0.088)
        attention.decode_attention_rope(kc, 0, 0x1000, 0x2000, 0x3000, 0x4000, 0x5000, 0x6000,
                                        0x7000, 0x7400, 0x7800, 0x7c00, 0x8000, 0x9000,
                                        0xa000, 0xb000, 1, 16, 8, 128, 16, 64, splits, 0.088,
                                        1e-6)
        assert tuple(r.func for r in mock.drain_launches()) == want
    with pytest.raises(ValueError, match="traced twin"):
        attention.decode_attention_rope(KernelCache(MockGpuBackend(), routes=on), 0, 0x1000,
                                        0x2000, 0x3000, 0x4000, 0x5000, 0x6000, 0x7000, 0x7400,
                                        0x7800, 0x7c00, 0x8000, 0x9000, 0xa000, 0xb000, 1, 16,
                                        8, 128, 16, 64, 33, 0.088, 1e-6, trace=0xc000)


def test_split_major_order_is_a_bijection_that_keeps_clusters_whole() -> None:
    """decode_attn.cuh HeadSlice::of_block<true>, restated: every (slot, split) once, the 8
    blocks of a hardware cluster (consecutive x) on one slot and one cluster of splits in
    rank order, and every slot's first cluster among the first gridDim.y clusters."""
    for gx, gy in ((40, 8), (64, 8), (64, 4), (8, 3)):
        seen = {}
        for y in range(gy):
            for x in range(gx):
                linear = y * (gx // 8) + x // 8
                seen[(x, y)] = (linear % gy, linear // gy * 8 + x % 8)
        assert sorted(seen.values()) == [(s, p) for s in range(gy) for p in range(gx)]
        for y in range(gy):
            for c in range(gx // 8):
                got = [seen[(8 * c + r, y)] for r in range(8)]
                assert len({slot for slot, _ in got}) == 1
                assert [p % 8 for _, p in got] == list(range(8))
        first = {seen[(x, y)][0] for y in range(gy) for x in range(gx)
                 if (y * (gx // 8) + x // 8) < gy}
        assert first == set(range(gy))
        assert all(seen[(x, y)][1] < 8 for y in range(gy) for x in range(gx)
                   if (y * (gx // 8) + x // 8) < gy)


@pytest.mark.parametrize("kv_len,num_splits,rule", [
    (1, 5, (32, 1)), (300, 5, (60, 5)),          # unclustered: a partial per active split
    (1, 33, (512, 1)), (512, 33, (512, 1)),      # clustered: 8 splits of 64 keys, one cluster
    (513, 33, (512, 2)), (2048, 33, (512, 4)),   # beyond 512 keys: a partial per cluster
    (4096, 33, (1000, 5)), (300, 8, (512, 1)),   # (125-key splits: 33 in 5 clusters)
])
def test_decode_partial_rule(kv_len: int, num_splits: int, rule: tuple[int, int]) -> None:
    assert attention.decode_partial_rule(kv_len, num_splits) == rule


def test_decode_cluster_constants_match_the_kernel() -> None:
    common = ROOT / "kernels" / "hopper" / "common"
    # the template's constants, and the phase trace's (its own header since session 20)
    source = (common / "decode_attn.cuh").read_text() + (common / "phase_trace.cuh").read_text()
    for name, value in (("kClusterSplits", attention.DECODE_CLUSTER_SPLITS),
                        ("kClusterMinKeys", attention.DECODE_CLUSTER_MIN_KEYS),
                        ("kMinKeysPerSplit", attention.DECODE_MIN_KEYS_PER_SPLIT),
                        ("kTraceWords", attention.TRACE_WORDS),
                        ("kTraceSmWord", attention.TRACE_SM_WORD),
                        ("kTraceKeyedWord", attention.TRACE_KEYED_WORD)):
        assert re.search(rf"constexpr int {name} = {value};", source), name
    # the stamps' order is the enum's, and the cycles sit TRACE_CYCLES_WORD words after
    enum = re.search(r"enum TracePhase : int \{(.*?)\};", source, re.S).group(1)
    names = re.findall(r"kTrace(\w+)", enum)
    assert names[-1] == "Phases" and len(names) - 1 == len(attention.TRACE_PHASES)
    assert [n.lower() for n in names[:-1]] == [p.replace("_", "") for p in
                                               attention.TRACE_PHASES]
    assert f"block[{attention.TRACE_CYCLES_WORD} + phase]" in source


def test_traced_twins_take_the_kernel_the_rules_pick() -> None:
    """The trace argument selects the twin of the kernel the routes pick, with the same grid
    and the trace pointer last; kernels without a twin refuse it."""
    mock = MockGpuBackend()
    kc = KernelCache(mock)
    rope_args = (0x1000, 0x2000, 0x3000, 0x4000, 0x5000, 0x6000, 0x7000, 0x7400, 0x7800,
                 0x7c00, 0x8000, 0x9000, 0xa000, 0xb000, 1, 16, 8, 128, 16, 64)
    for splits, func in ((33, "decode_attn_rope_cluster_trace_bf16"),
                         (2, "decode_attn_rope_trace_bf16")):
        attention.decode_attention_rope(kc, 0, *rope_args, splits, 0.088, 1e-6, trace=0xc000)
        (rec,) = mock.drain_launches()
        assert (rec.func, rec.grid, rec.args["trace"]) == (
            func, attention.decode_grid(splits, 16, 8, 1), 0xc000)
    attention.decode_attention(kc, 0, 0x1000, 0x2000, 0x3000, 0x4000, 0x5000, 0x6000, 0x7000,
                               0x7400, 0x8000, 1, 16, 2, 256, 16, 64, 16, 0.06, long=False,
                               trace=0xc000)
    (rec,) = mock.drain_launches()
    assert rec.func == "decode_attn_cluster_trace_bf16" and rec.grid == (16, 4, 1)
    with pytest.raises(ValueError, match="traced twin"):
        attention.decode_attention(kc, 0, 0x1000, 0x2000, 0x3000, 0x4000, 0x5000, 0x6000,
                                   0x7000, 0x7400, 0x8000, 1, 16, 2, 256, 16, 64, 4, 0.06,
                                   long=False, trace=0xc000)
    off = KernelCache(mock, KernelRoutes.from_env({"ATLAS_DECODE_ATTN_LATENCY": "0"}))
    with pytest.raises(ValueError, match="traced twin"):
        attention.decode_attention_rope(off, 0, *rope_args, 2, 0.088, 1e-6, trace=0xc000)


def test_prefill_attention_grid_comes_from_max_q_len() -> None:
    (rec,) = _launches(attention.prefill_attention, 0x1000, 0x2000, 0x3000, 0x4000, 0x5000,
                       0x6000, 0x7000, 3, 16, 8, 64, 16, 32, 0.125, 130)
    assert rec.grid == (16, 3, 3)


@pytest.mark.parametrize("hq,hkv,d,match", [
    (32, 8, 96, "head_dim=96"), (30, 8, 128, "multiple"), (4, 8, 128, "multiple"),
    (8, 0, 64, "multiple")])
def test_attention_preconditions(hq, hkv, d, match) -> None:
    with pytest.raises(ValueError, match=match):
        _launches(attention.decode_attention, 0x1000, 0x2000, 0x3000, 0x4000, 0x5000, 0x6000,
                  0x7000, 0x7800, 0x8000, 1, hq, hkv, d, 16, 8, 4, 0.1)


@pytest.mark.parametrize("module", MODULES)
def test_cuda_entry_points_declare_exactly_the_abi(module: str) -> None:
    _declares_abi(module)


@pytest.mark.gpu
def test_fused_kernels_equal_their_unfused_twins_on_the_gpu(hopper_ptx_backend) -> None:
    """The CUDA fused kernels against silu_mul + gemv, bit for bit
    (the check script compares each with the reference only to a couple of ulps)."""
    _, gpu = hopper_ptx_backend
    for case in TWINNED:
        _assert_twins_identical(case, execute(gpu, case))


@pytest.mark.parametrize("kv_len,num_splits,rule", [
    (1, 33, (32, 1)), (0, 8, (32, 0)),           # the minimum split: one active
    (32, 33, (32, 1)), (33, 33, (32, 2)),        # one key past the minimum opens a split
    (512, 33, (32, 16)), (1056, 33, (32, 33)),   # 33 x 32 keys fill every split
    (1057, 33, (33, 33)), (300, 8, (38, 8)),     # beyond that, ceil(kv_len / num_splits)
    (2000, 1, (2000, 1)),
])
def test_decode_split_rule(kv_len: int, num_splits: int, rule: tuple[int, int]) -> None:
    assert attention.decode_split_rule(kv_len, num_splits) == rule
