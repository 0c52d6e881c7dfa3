"""The batch-1 cluster router's L2 prefetches: ATLAS_MOE_ROUTER_PREFETCH_KB, the routed
experts' gate/up weights once it has routed (moe_router.cu prefetch_experts), and
ATLAS_MOE_ROUTER_NEXT_MB, the next layer's first projection after its PDL wait
(prefetch_next): the shares, the launch arguments only the cluster launch carries, the
weights a model hands each router, and a MoE model's decode giving the same tokens with them
on the host backend (the prefetches are hints with no value of their own)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from decode_support import batch1_decode_graph, decode_recorded

from atlas.runtime.mock import LaunchRecord, MockGpuBackend
from atlas.runtime.ops import KernelCache, moe
from atlas.runtime.ops.routes import KernelRoutes

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
#: Qwen3.5-35B-A3B's experts: gate (or up) rows of one expert, 512 x 2,048 bf16
HALF = 2 * 512 * 2048


def test_the_share_is_whole_pieces_for_every_rank_and_at_most_the_half() -> None:
    unit = 16 * moe.ROUTER_PREFETCH_RANKS
    assert moe.ROUTER_PREFETCH_RANKS == moe.ROUTER_CLUSTER_BLOCKS - 1 == 15
    assert moe.prefetch_share(0, HALF) == 0
    assert moe.prefetch_share(1024, HALF) == 512 * 1024 // unit * unit
    assert moe.prefetch_share(1 << 20, HALF) == HALF // unit * unit <= HALF
    assert moe.prefetch_share(1024, HALF) % unit == 0
    assert KernelRoutes().moe_router_prefetch_kb == 0
    assert KernelRoutes.from_env({"ATLAS_MOE_ROUTER_PREFETCH_KB": "2048"}
                                 ).moe_router_prefetch_kb == 2048
    with pytest.raises(ValueError, match="ATLAS_MOE_ROUTER_PREFETCH_KB"):
        KernelRoutes.from_env({"ATLAS_MOE_ROUTER_PREFETCH_KB": "many"})


def _router_launch(kb: int, top_k: int = 8, weights_offset: int = 0,
                   tokens: int = 1, next_mb: int = 0, next_bytes: int = 40 << 20
                   ) -> LaunchRecord:
    dev = MockGpuBackend()
    kc = KernelCache(dev, KernelRoutes(moe_router_prefetch_kb=kb, moe_router_next_mb=next_mb))
    shape = moe.MoeShape(256, top_k, 2048, 512)
    p = dev.alloc(1 << 20)
    w = dev.alloc(256 * 2 * HALF)
    prefetch = moe.ExpertPrefetch(w + weights_offset, 2 * HALF, HALF)
    nxt = dev.alloc(next_bytes)
    moe.gate_topk(kc, 0, p, p, p, p, p, p, tokens, shape, norm=moe.RouterNorm(p, p, p, 1e-6),
                  prefetch=prefetch, next_weights=moe.NextWeights(nxt + weights_offset,
                                                                  next_bytes))
    (rec,) = dev.drain_launches()
    return rec


def _prefetch_args(rec: LaunchRecord) -> tuple[int, int, int, int]:
    a = rec.args
    return a["prefetch"], a["prefetch_stride"], a["prefetch_half"], a["prefetch_bytes"]


def test_the_cluster_launch_carries_the_experts_when_asked() -> None:
    on = _router_launch(1024)
    assert on.func == "moe_add_rmsnorm_gate_topk_cluster_softmax_bf16"
    weights, stride, half, nbytes = _prefetch_args(on)
    assert weights != 0 and (stride, half) == (2 * HALF, HALF)
    assert nbytes == moe.prefetch_share(1024, HALF) > 0
    # the knob at 0, more routed slots than a warp's lanes have halves, unaligned weights
    for rec in (_router_launch(0), _router_launch(1024, top_k=17),
                _router_launch(1024, weights_offset=8)):
        assert _prefetch_args(rec) == (0, 0, 0, 0)


def test_the_next_projection_s_share_is_capped_by_the_knob_and_its_size() -> None:
    assert moe.next_share(0, 40 << 20) == 0
    assert moe.next_share(16, 40 << 20) == 16 << 20
    assert moe.next_share(64, 40 << 20) == 40 << 20
    assert moe.next_share(1 << 20, 1 << 40) == (1 << 32) - 16
    assert moe.next_share(1, 100) == 96
    assert KernelRoutes.from_env({"ATLAS_MOE_ROUTER_NEXT_MB": "24"}).moe_router_next_mb == 24
    rec = _router_launch(0, next_mb=16)
    assert rec.args["next"] != 0 and rec.args["next_bytes"] == 16 << 20
    assert _prefetch_args(rec) == (0, 0, 0, 0)  # one knob does not set the other
    for off in (_router_launch(0), _router_launch(0, next_mb=16, weights_offset=8)):
        assert (off.args["next"], off.args["next_bytes"]) == (0, 0)


def test_batches_take_the_ticket_router_without_the_arguments() -> None:
    rec = _router_launch(1024, tokens=2)
    assert rec.func == "moe_add_rmsnorm_gate_topk_softmax_bf16"
    assert "prefetch" not in rec.args


def test_a_moe_model_s_routers_carry_their_experts_and_the_next_gemv_s_weight(
        monkeypatch) -> None:
    """tiny-qwen3_5_moe's batch-1 decode graph on the mock backend: with both knobs set,
    each MoE layer's cluster router carries the gate/up buffer its gate/up launch reads, and
    the weight of the first GEMV after it: the next layer's input projection (its
    Gated-DeltaNet in_proj or attention qkv), after the last layer the LM head."""
    monkeypatch.setenv("ATLAS_MOE_ROUTER_PREFETCH_KB", "64")
    monkeypatch.setenv("ATLAS_MOE_ROUTER_NEXT_MB", "1")
    graph = batch1_decode_graph(FIXTURES / "tiny-qwen3_5_moe")
    routers = [i for i, r in enumerate(graph) if "gate_topk_cluster" in r.func]
    assert len(routers) > 1
    for i in routers:
        weights, stride, half, nbytes = _prefetch_args(graph[i])
        gate_up = next(r for r in graph[i + 1:] if "gate_up" in r.func)
        assert weights == gate_up.args["w_gate_up"] and stride == 2 * half and nbytes > 0
        gemv = next(r for r in graph[i + 1:] if r.func.startswith("gemv_"))
        assert graph[i].args["next"] == gemv.args["w"]
        assert graph[i].args["next_bytes"] == 2 * gemv.args["n"] * gemv.args["k"]


def test_a_moe_model_decodes_the_same_on_the_host(monkeypatch) -> None:
    """The host references ignore the hint: the same logits and tokens with it on."""
    prompts = [[3, 5, 7, 11]]
    off = decode_recorded("tiny-qwen3_5_moe", monkeypatch, {}, prompts, 3)
    on = decode_recorded("tiny-qwen3_5_moe", monkeypatch,
                         {"ATLAS_MOE_ROUTER_PREFETCH_KB": "64", "ATLAS_MOE_ROUTER_NEXT_MB": "1"},
                         prompts, 3)
    assert on[1] == off[1] and on[2] == off[2]
    for a, b in zip(on[0], off[0]):
        np.testing.assert_array_equal(a, b)
