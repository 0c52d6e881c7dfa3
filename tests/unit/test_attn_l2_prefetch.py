"""The batch-1..4 decode attention's L2 prefetch of the next kernels' weights
(ATLAS_ATTN_L2_PREFETCH=1, ops/l2_prefetch.py): the region plan (order, 16-byte granules,
budget, the kernel's two slots), the route (the clustered rope-fused kernel's twin only, with
the planned regions; off: the launches as before), the regions the model passes (o_proj,
then the post-attention block's first weights), and a host-backend decode with the switch
on giving the same bits as with it off."""

from pathlib import Path

import numpy as np
import pytest

from atlas.core.sampling import GREEDY
from atlas.model.batch import PenaltyHistory, SeqChunk
from atlas.model.load import load_runner
from atlas.model.model import DenseMlp
from atlas.model.moe import MoeMlp
from atlas.runtime.gpu import H200_FACTS
from atlas.runtime.mock import MockGpuBackend
from atlas.runtime.ops import KernelCache, attention
from atlas.runtime.ops.l2_prefetch import (MAX_REGION_BYTES, kernel_args, l2_prefetch_budget,
                                           plan_l2_regions)
from atlas.runtime.ops.routes import KernelRoutes

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
PLAIN = "decode_attn_rope_cluster_bf16"
TWIN = "decode_attn_rope_cluster_l2pf_bf16"
MIB = 1 << 20


def test_plan_keeps_order_and_granules_within_the_budget() -> None:
    # start rounded up, end rounded down to 16 bytes; a region with no whole granule skipped
    assert plan_l2_regions([(0x1008, 100), (0x3000, 8), (0x5000, 64)], 1 << 30) == (
        (0x1010, 80), (0x5000, 64))
    # the budget cuts the region where it runs out (whole granules) and drops the rest
    assert plan_l2_regions([(0x10000, 4096), (0x40000, 4096)], 4096 + 1000) == (
        (0x10000, 4096), (0x40000, 992))
    assert plan_l2_regions([(0x10000, 4096), (0x40000, 4096)], 4096) == ((0x10000, 4096),)
    # two slots: a third region is left out, never put before the others
    assert plan_l2_regions([(0x100, 32), (0x1000, 32), (0x2000, 32)], 1 << 20) == (
        (0x100, 32), (0x1000, 32))
    # one that starts where the previous ends is joined to it (takes no slot)
    assert plan_l2_regions([(0x100, 32), (0x120, 64), (0x2000, 16), (0x3000, 16)],
                           1 << 20) == ((0x100, 96), (0x2000, 16))
    # a region larger than the kernel's u32 byte count is cut to it
    assert plan_l2_regions([(0x1000, 1 << 33)], 1 << 34) == ((0x1000, MAX_REGION_BYTES),)
    assert plan_l2_regions([], 1 << 20) == () == plan_l2_regions([(0x100, 64)], 0)
    with pytest.raises(ValueError, match="negative"):
        plan_l2_regions([(0x100, -16)], 1 << 20)


def test_kernel_args_pad_the_missing_region_and_reject_partial_granules() -> None:
    assert kernel_args(((0x1000, 64),)) == (0x1000, 64, 0, 0)
    assert kernel_args(((0x1000, 64), (0x9000, 32))) == (0x1000, 64, 0x9000, 32)
    assert kernel_args(()) == (0, 0, 0, 0)
    for bad in (((0x1008, 64),), ((0x1000, 60),), ((0x10, 16),) * 3):
        with pytest.raises(ValueError):
            kernel_args(bad)


def test_switches_and_budget() -> None:
    assert not KernelRoutes.from_env({}).attn_l2_prefetch
    on = KernelRoutes.from_env({"ATLAS_ATTN_L2_PREFETCH": "1", "ATLAS_ATTN_L2_PREFETCH_MB": "12"})
    assert on.attn_l2_prefetch and on.attn_l2_prefetch_mb == 12
    assert l2_prefetch_budget(KernelCache(MockGpuBackend(), routes=on)) == 12 * MIB
    # unset: 60% of the device's L2 (the backend's facts: an H200's 50 MiB)
    default = KernelCache(MockGpuBackend(), routes=KernelRoutes(attn_l2_prefetch=True))
    assert l2_prefetch_budget(default) == int(H200_FACTS.l2_cache_bytes * 0.6) == 30 * MIB
    with pytest.raises(ValueError, match="ATLAS_ATTN_L2_PREFETCH_MB"):
        KernelRoutes.from_env({"ATLAS_ATTN_L2_PREFETCH_MB": "lots"})


def _rope_launch(routes: KernelRoutes, splits: int, regions=()):
    mock = MockGpuBackend()
    attention.decode_attention_rope(KernelCache(mock, routes=routes), 0, 0x1000, 0x2000, 0x3000,
                                    0x4000, 0x5000, 0x6000, 0x7000, 0x7400, 0x7800, 0x7c00,
                                    0x8000, 0x9000, 0xa000, 0xb000, 1, 16, 8, 128, 16, 64,
                                    splits, 0.088, 1e-6, l2_regions=regions)
    rec, = mock.drain_launches()
    return rec


def test_the_switch_takes_the_twin_with_the_planned_regions() -> None:
    regions = ((0x100000, 4 * MIB), (0x900000, 40 * MIB), (0x4000000, MIB))
    on = KernelRoutes(attn_l2_prefetch=True, attn_l2_prefetch_mb=20)
    rec = _rope_launch(on, 33, regions)
    assert (rec.func, rec.module, rec.grid) == (TWIN, "attention_twins", (40, 8, 1))
    # o_proj's whole, then what the 20 MiB budget leaves of the next; the third: no slot
    assert [rec.args[k] for k in ("pf0", "pf0_bytes", "pf1", "pf1_bytes")] == [
        0x100000, 4 * MIB, 0x900000, 16 * MIB]
    plain = _rope_launch(KernelRoutes(), 33, regions)
    assert plain.func == PLAIN and "pf0" not in plain.args
    # the other arguments are the plain launch's
    assert {k: v for k, v in rec.args.items() if not k.startswith("pf")} == plain.args


@pytest.mark.parametrize("routes,splits,func", [
    (KernelRoutes(attn_l2_prefetch=True), 2, "decode_attn_rope_bf16"),  # unclustered
    (KernelRoutes(attn_l2_prefetch=True, decode_attn_split_major=True), 33,
     "decode_attn_rope_cluster_splitmajor_bf16"),
    (KernelRoutes(attn_l2_prefetch=True, decode_attn_b1_chain=False), 33,
     "decode_attn_rope_cluster_pull_bf16")])
def test_the_switch_leaves_the_other_kernels_alone(routes, splits, func) -> None:
    assert _rope_launch(routes, splits, ((0x100000, MIB),)).func == func


def test_no_region_keeps_the_plain_kernel() -> None:
    on = KernelRoutes(attn_l2_prefetch=True)
    assert _rope_launch(on, 33).func == PLAIN
    assert _rope_launch(on, 33, ((0x100008, 8),)).func == PLAIN  # no whole granule


def _runner(name: str, backend: str, monkeypatch, on: bool):
    monkeypatch.setenv("ATLAS_ATTN_L2_PREFETCH", "1" if on else "0")
    # 256 keys: 8 splits at batch 1, the clustered kernels
    return load_runner(FIXTURES / name, backend=backend, max_seq_len=256, max_batch_size=2,
                       max_prefill_tokens=32)


def _decode_step_attention(runner) -> list:
    """The attention launches of one batch-1 decode step (a graph replay)."""
    dev = runner.backend
    runner.execute([SeqChunk(7, [3], 5, [0], GREEDY, history=PenaltyHistory([1, 2, 3, 4, 5]))])
    (replay,) = dev.graph_launches[-1:]
    runner.release(7)
    return [r for r in replay.graph if r.func.startswith("decode_attn")]


def _next_weights(lw) -> list[tuple[int, int]]:
    """What the launches after a layer's attention read first, in order, by hand: o_proj,
    then a dense MLP's gate_up and down, or a MoE block's router (and shared expert)."""
    weights = [(lw.o.ptr, 2 * lw.o.n * lw.o.k)]
    if isinstance(lw.mlp, DenseMlp):
        weights += [(w.ptr, 2 * w.n * w.k) for w in (lw.mlp.gate_up, lw.mlp.down)]
    else:
        assert isinstance(lw.mlp, MoeMlp)
        sh, se = lw.mlp.shape, lw.mlp.shared
        weights.append((lw.mlp.router, 2 * sh.experts * sh.hidden))
        if se is not None:
            weights += [(se.gate_up, 4 * se.inter * sh.hidden), (se.down, 2 * sh.hidden * se.inter)]
    return weights


@pytest.mark.parametrize("name", ["tiny-qwen3", "tiny-qwen3-moe"])
def test_the_model_passes_o_proj_then_the_mlp_weights(name, monkeypatch) -> None:
    runner = _runner(name, "mock", monkeypatch, True)
    launches = _decode_step_attention(runner)
    layers = runner.model.layers
    assert [r.func for r in launches] == [TWIN] * len(layers)
    for rec, lw in zip(launches, layers):
        # neighbours in memory form one region; the first two regions (the kernel's slots)
        runs: list[list[int]] = []
        for ptr, nbytes in _next_weights(lw):
            if runs and runs[-1][0] + runs[-1][1] == ptr:
                runs[-1][1] += nbytes
            else:
                runs.append([ptr, nbytes])
        want = [v for run in runs[:2] for v in run] + [0, 0] * (2 - min(len(runs), 2))
        assert [rec.args[k] for k in ("pf0", "pf0_bytes", "pf1", "pf1_bytes")] == want
        assert want[0] == lw.o.ptr and want[1] >= 2 * lw.o.n * lw.o.k
    off = _decode_step_attention(_runner(name, "mock", monkeypatch, False))
    assert [r.func for r in off] == [PLAIN] * len(layers)


def _greedy_logits(runner, prompt: list[int], steps: int) -> tuple[list[int], np.ndarray]:
    hist = PenaltyHistory(list(prompt))
    out = runner.execute([SeqChunk(1, list(prompt), 0, [0, 1], GREEDY, history=hist)])
    tokens, logits = [out[0]], []
    for i in range(steps):
        out = runner.execute([SeqChunk(1, [tokens[-1]], len(prompt) + i, [0, 1], GREEDY,
                                       rng_position=i + 1)])
        logits.append(runner.read_logits(1)[0].copy())
        tokens.append(out[0])
    runner.release(1)
    return tokens, np.stack(logits)


def test_host_decode_is_bit_identical_with_the_switch_on(monkeypatch) -> None:
    prompt = [5, 9, 200, 17, 3, 3, 8, 41, 7, 12, 99, 4, 6, 1]
    want_tokens, want = _greedy_logits(_runner("tiny-qwen3", "host", monkeypatch, False),
                                       prompt, 4)
    runner = _runner("tiny-qwen3", "host", monkeypatch, True)
    assert runner.model.kc.routes.attn_l2_prefetch  # the twin: the mock test above
    got_tokens, got = _greedy_logits(runner, prompt, 4)
    assert got_tokens == want_tokens
    np.testing.assert_array_equal(got, want)
    assert not np.array_equal(got[0], got[-1])


def _kernel_requests(bytes0: int, bytes1: int, seqs: int, keyed: list[int]
                     ) -> list[tuple[int, int, int]]:
    """(region, offset, bytes) of every request decode_attn.cuh L2Prefetch issues, its
    arithmetic restated: per sequence z a 16-byte-rounded part of the concatenation, cut
    into 16 KiB pieces dealt round-robin to that row's `keyed[z]` blocks, thread-major."""
    piece, threads = 16384, 128
    total = bytes0 + bytes1
    part = (-(-total // seqs) + 15) & ~15
    out = []
    for z in range(seqs):
        lo, hi = min(total, z * part), min(total, z * part + part)
        count = keyed[z]
        for index in range(count):
            for t in range(threads):
                at = lo + (index + count * t) * piece
                while at < hi:
                    end = min(hi, at + piece)
                    if at < bytes0:
                        out.append((0, at, min(end, bytes0) - at))
                    if end > bytes0:
                        frm = max(at, bytes0)
                        out.append((1, frm - bytes0, end - frm))
                    at += count * threads * piece
    return out


@pytest.mark.parametrize("bytes0,bytes1,seqs,keyed", [
    (4 * MIB, 12 * MIB + 48, 1, [64]),        # a 0.6B-like layer, 8 slots x 8 splits
    (1_048_592, 40_000, 1, [64]),             # the check case's regions
    (300_000, 65_536, 1, [8]),                 # the first token: split 0 of 8 slots
    (1_000_016, 48_000, 3, [128, 64, 8]),      # three rows, different keyed blocks
    (30 * MIB, 0, 2, [64, 8]),                 # one region
    (16, 16, 4, [8, 8, 8, 8])])                # parts smaller than a row's share
def test_the_kernels_requests_cover_the_regions_once(bytes0, bytes1, seqs, keyed) -> None:
    reqs = _kernel_requests(bytes0, bytes1, seqs, keyed)
    for region, size in ((0, bytes0), (1, bytes1)):
        spans = sorted((off, n) for r, off, n in reqs if r == region)
        assert all(off % 16 == 0 and 0 < n <= 16384 and n % 16 == 0 for off, n in spans)
        at = 0
        for off, n in spans:  # no gap, no overlap
            assert off == at
            at += n
        assert at == size


def test_quantized_weights_are_their_codes_then_their_scales() -> None:
    from atlas.core.quant import Fp8ScaleMap
    from atlas.runtime.ops.matmul_nvfp4 import Nvfp4Weight
    from atlas.runtime.ops.matmul_quant import Fp8Weight, QuantLinear

    fp8 = Fp8Weight(0x10000, 0x90000, 256, 384, Fp8ScaleMap.block(256, 384))
    # 256 x 384 one-byte codes, then 2 x 3 f32 block scales
    assert QuantLinear(fp8).l2_regions() == ((0x10000, 256 * 384), (0x90000, 4 * 2 * 3))
    assert Fp8Weight(0x10000, 0x90000, 8, 64, Fp8ScaleMap.tensor()).l2_regions()[1] == (
        0x90000, 4)
    nv = Nvfp4Weight(0x10000, 0x80000, 0x90000, 64, 128)
    # 4-bit codes, an E4M3 scale per 16 values, an f32 scale per row
    assert QuantLinear(nv).l2_regions() == ((0x10000, 64 * 64), (0x80000, 64 * 8),
                                            (0x90000, 4 * 64))
    assert sum(n for _, n in nv.l2_regions()) == nv.nbytes
