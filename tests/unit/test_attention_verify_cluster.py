"""The verification attention's clustered entry (attention_verify.cu
decode_attn_verify_cluster_bf16, ATLAS_DECODE_ATTN_VERIFY_CLUSTER=1): its reference and check
cases against the float64 oracle, a numpy model of the kernel's split of a piece's keys over
its cluster and the on-chip merge, the launch, the switch and the routing of a speculating
runner's verification steps (and greedy speculation on the host backend with it). The device
check is tools/gpu/check_kernels.py -k "verify cluster" over the same cases."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from atlas.core.sampling import GREEDY
from atlas.engine.llm_engine import LLMEngine
from atlas.engine.request import EngineRequest
from atlas.engine.speculative import OracleDrafter, Speculator
from atlas.model.batch import PenaltyHistory, SeqChunk
from atlas.runtime.cases import attention_verify as case_defs
from atlas.runtime.host import HostBackend
from atlas.runtime.kernel_check import check
from atlas.runtime.ops import KernelCache, attention_verify as av
from atlas.runtime.ops.routes import KernelRoutes
# the verification kernel's tests' mock device and speculating runner (tiny-qwen3, K = 3)
from test_attention_verify import _HopperMock, _speculating_runner
from test_gemm_decode_sm90 import _constant as _kernel_constant

SOURCE = Path(__file__).resolve().parents[2] / "kernels/hopper/common/attention_verify.cu"
CASES = case_defs.verify_cluster_cases(np.random.default_rng(7))


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_reference_matches_oracle(case) -> None:
    result = check(HostBackend(), case)
    assert result.passed, result.detail


def test_constants_match_the_kernel() -> None:
    assert av.VERIFY_CLUSTER_BLOCKS == _kernel_constant("kClusterBlocks", SOURCE)
    for d in av.VERIFY_HEAD_DIMS:   # ClusterSmem: VerifyTile's bytes and the key staging
        assert av.verify_cluster_smem_bytes(d) == av.verify_smem_bytes(d) + 2 * 8 * d * 2
        assert av.verify_cluster_smem_bytes(d) <= 227 * 1024


def cluster_model(lens: list[int]) -> list[list[tuple[int, int]]]:
    """attention_verify.cu cluster_piece's key ranges for a piece whose rows hold `lens`
    keys: per row, the (first, end) each of the cluster's blocks attends for it, by the
    row's own kv_len alone (cluster_chunk: whole 64-key tiles), so that a row's partition
    and sums are the same whichever rows share its step."""
    blocks, tile = av.VERIFY_CLUSTER_BLOCKS, av.VERIFY_TILE_KEYS
    ranges = []
    for n in lens:
        chunk = tile * max(-(-n // (blocks * tile)), 1)
        ranges.append([(b * chunk, min((b + 1) * chunk, n)) for b in range(blocks)])
    return ranges


@pytest.mark.parametrize("history, drafts", [(0, 3), (1, 1), (63, 2), (64, 3), (65, 4),
                                             (509, 3), (512, 3), (1021, 3), (2000, 3),
                                             (16380, 7)])
def test_a_clusters_blocks_cover_each_rows_keys_once(history, drafts) -> None:
    """Row j of a piece sees keys < history + j + 1: its blocks' ranges (those not empty)
    cover exactly those, each once, and the merge of their partials (weights l 2^(m - top),
    a block without the row's keys weighing 0) is the softmax over them."""
    lens = [history + j + 1 for j in range(drafts + 1)]
    rng = np.random.default_rng(history)
    scores = rng.normal(size=lens[-1]) * 4
    values = rng.normal(size=lens[-1])
    for n, ranges in zip(lens, cluster_model(lens)):
        covered = np.concatenate([np.arange(a, b) for a, b in ranges if a < b])
        assert np.array_equal(covered, np.arange(n))
        parts = []
        for a, b in ranges:   # each block's normalized partial, m, l (log2 units)
            if a >= b:
                parts.append((-np.inf, 0.0, 0.0))
                continue
            s = scores[a:b] * np.log2(np.e)
            m = s.max()
            p = np.exp2(s - m)
            parts.append((m, p.sum(), (p * values[a:b]).sum() / p.sum()))
        top = max(m for m, _, _ in parts)
        w = np.array([l * np.exp2(m - top) for m, l, _ in parts])
        got = (w * np.array([o for _, _, o in parts])).sum() / w.sum()
        want = np.exp(scores[:n] - scores[:n].max())
        assert np.isclose(got, (want * values[:n]).sum() / want.sum(), rtol=1e-12)
    # each block loads the union of its rows' ranges from an absolute tile; the step's keys
    # it stages (positions history .. history + drafts in that union) fit its staging
    for block in zip(*cluster_model(lens)):
        used = [(a, b) for a, b in block if a < b]
        if not used:
            continue
        lo, hi = min(a for a, _ in used), max(b for _, b in used)
        assert lo % av.VERIFY_TILE_KEYS == 0
        assert len(range(max(lo, history), min(hi, lens[-1]))) <= av.VERIFY_MAX_STEP_ROWS


def test_launch_arguments_and_checks() -> None:
    dev = _HopperMock()
    kc = KernelCache(dev, KernelRoutes.from_env({}))
    p = [dev.alloc(1 << 12) for _ in range(11)]
    av.decode_attention_verify_cluster(kc, 0, *p, 8, 32, 8, 128, 16, 40, 0.1, 1e-6,
                                       rows_per_block=3)
    (rec,) = dev.drain_launches()
    assert (rec.module, rec.func) == ("attention_verify", "decode_attn_verify_cluster_bf16")
    # one cluster of 8 blocks per (kv head, window of 3 rows): ceil(8 / 3) windows
    assert (rec.grid, rec.block, rec.shared) == ((8, 8, 3), (128, 1, 1),
                                                 av.verify_cluster_smem_bytes(128))
    assert dev.opt_ins == [("decode_attn_verify_cluster_bf16", av.verify_cluster_smem_bytes(256))]
    assert (rec.args["qkv"], rec.args["out"], rec.args["eps"]) == (p[0], p[10], 1e-6)
    with pytest.raises(ValueError, match="decode_attention_verify_cluster: qkv pointer"):
        av.decode_attention_verify_cluster(kc, 0, p[0] + 8, *p[1:], 8, 32, 8, 128, 16, 40,
                                           0.1, 1e-6)
    with pytest.raises(ValueError, match="head_dim=96"):
        av.decode_attention_verify_cluster(kc, 0, *p, 8, 32, 8, 96, 16, 40, 0.1, 1e-6)
    with pytest.raises(ValueError, match="both be set"):
        av.decode_attention_verify_cluster(kc, 0, *p[:3], p[3], 0, *p[5:], 8, 32, 8, 128, 16,
                                           40, 0.1, 1e-6)


@pytest.mark.parametrize("hq, hkv, step_rows, slots", [
    (32, 8, 1, 1), (32, 8, 4, 1),    # Qwen3-8B: a plain row, K = 3 (16 tile rows)
    (32, 8, 5, 2), (32, 8, 8, 2),    # K = 4 (20 tile rows) and K = 7 (32): two tiles
    (32, 4, 2, 1), (32, 4, 3, 2), (32, 4, 5, 3), (32, 4, 8, 4),   # group 8: up to four
    (16, 1, 8, 4),                   # group 16: a piece is 4 rows (64 tile rows), not 8
    (64, 1, 1, 4), (4, 4, 8, 1),     # group 64: one row, four tiles; MHA: 8 rows, one
])
def test_tile_slots_cover_the_longest_piece(hq, hkv, step_rows, slots) -> None:
    """One cluster a (kv head, m16 tile of a piece): the kernel's piece is at most
    min(8, 64 / group) rows, and slot t serves tile t of it; or one slot (tiles in turn)."""
    assert av.cluster_tile_slots(hq, hkv, step_rows) == slots
    assert av.cluster_tile_slots(hq, hkv, step_rows, side_by_side=False) == 1


def test_a_two_tile_step_launches_a_cluster_per_tile() -> None:
    """Qwen3-8B's K = 4 step (5 rows x 4 q heads: 20 tile rows): two clusters per kv head,
    kv head fastest along y, so the second tile's rows take the one-tile arithmetic too."""
    dev = _HopperMock()
    kc = KernelCache(dev, KernelRoutes.from_env({}))
    p = [dev.alloc(1 << 12) for _ in range(11)]
    av.decode_attention_verify_cluster(kc, 0, *p, 10, 32, 8, 128, 16, 40, 0.1, 1e-6,
                                       rows_per_block=5)
    av.decode_attention_verify_cluster(kc, 0, *p, 10, 32, 8, 128, 16, 40, 0.1, 1e-6,
                                       rows_per_block=2, step_rows=5)
    whole, windows = dev.drain_launches()
    assert whole.grid == (av.VERIFY_CLUSTER_BLOCKS, 2 * 8, 2)
    assert windows.grid == (av.VERIFY_CLUSTER_BLOCKS, 2 * 8, 5)
    # ATLAS_DECODE_ATTN_VERIFY_TILE_CLUSTERS=0: one cluster a kv head serves both tiles
    kc = KernelCache(dev, KernelRoutes.from_env({"ATLAS_DECODE_ATTN_VERIFY_TILE_CLUSTERS": "0"}))
    av.decode_attention_verify_cluster(kc, 0, *p, 10, 32, 8, 128, 16, 40, 0.1, 1e-6,
                                       rows_per_block=5)
    (in_turn,) = dev.drain_launches()
    assert in_turn.grid == (av.VERIFY_CLUSTER_BLOCKS, 8, 2)
    with pytest.raises(ValueError, match="step_rows >= 0"):
        av.decode_attention_verify_cluster(kc, 0, *p, 10, 32, 8, 128, 16, 40, 0.1, 1e-6,
                                           step_rows=-1)


@pytest.mark.parametrize("env, keys, uses", [
    ({}, 4, True),                                               # on by default
    ({"ATLAS_DECODE_ATTN_VERIFY_CLUSTER": "1"}, 4, True),
    ({"ATLAS_DECODE_ATTN_VERIFY_CLUSTER": "1"}, 8, True),
    ({"ATLAS_DECODE_ATTN_VERIFY_CLUSTER": "1"}, 9, False),       # past the key staging
    ({"ATLAS_DECODE_ATTN_VERIFY_CLUSTER": "0"}, 4, False),
])
def test_the_switch(env, keys, uses) -> None:
    kc = KernelCache(_HopperMock(), KernelRoutes.from_env(env))
    assert av.uses_cluster(kc, keys) is uses


def test_verification_steps_take_the_clustered_entry(monkeypatch) -> None:
    """With the switch (over the rope switch too) a verification step's layers run one
    launch each for q/k norm, RoPE, the append and attention; plain steps are untouched."""
    runner = _speculating_runner(monkeypatch, "mock", {"ATLAS_DECODE_ATTN_VERIFY_CLUSTER": "1",
                                                       "ATLAS_DECODE_ATTN_VERIFY_ROPE": "1"})
    layers, d, b = runner.cfg.num_hidden_layers, runner.model.dims, runner.bufs
    dev = runner.backend
    dev.drain_launches()
    dev.graph_launches.clear()
    runner.execute([SeqChunk(2, [3, 4, 5, 6], 5, [0], GREEDY, num_draft=3,
                             history=PenaltyHistory([1, 2, 3, 4, 5]))])
    runner.release(2)
    (replay,) = dev.graph_launches
    names = [r.func for r in replay.graph]
    assert "qk_norm_rope_kv_bf16" not in names
    attn = [r for r in replay.graph if r.func.startswith("decode_attn")]
    assert [r.func for r in attn] == ["decode_attn_verify_cluster_bf16"] * layers
    # one sequence's 4 rows: one window, one cluster per kv head
    assert {r.grid for r in attn} == {(av.VERIFY_CLUSTER_BLOCKS, d.kv_heads, 1)}
    assert all((r.args["qkv"], r.args["positions"], r.args["slots"], r.args["out"]) ==
               (b.qkv, b.positions, b.slots, b.attn) for r in attn)
    dev.drain_launches()
    dev.graph_launches.clear()
    runner.execute([SeqChunk(5, [3], 5, [0], GREEDY, history=PenaltyHistory([1, 2, 3, 4, 5]))])
    (replay,) = dev.graph_launches
    assert "decode_attn_verify_cluster_bf16" not in [r.func for r in replay.graph]


def test_oracle_speculation_on_the_clustered_entry_changes_no_token(monkeypatch) -> None:
    """Host backend, the clustered entry's reference: greedy output with the oracle drafting
    equals the plain output."""
    runner = _speculating_runner(monkeypatch, "host", {"ATLAS_DECODE_ATTN_VERIFY_CLUSTER": "1"})
    assert runner.model._verify_clustered(4)

    def generate(speculator=None):
        engine = LLMEngine(runner, max_prefill_tokens=32, speculator=speculator)
        return [c.token_ids for c in engine.generate(reqs)]

    reqs = [EngineRequest(p, GREEDY, 12) for p in ([5, 9, 200, 17, 5, 9], [44, 45, 46])]
    plain = generate()
    spec = Speculator(OracleDrafter({tuple(r.prompt_ids): t for r, t in zip(reqs, plain)},
                                    0.7, runner.vocab_size, seed=5), 3)
    assert generate(spec) == plain
    assert 0 < spec.accepted < spec.drafted
