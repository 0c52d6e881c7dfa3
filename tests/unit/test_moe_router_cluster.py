"""ATLAS_MOE_ROUTER_CLUSTER (default on): a batch-1 decode MoE block's fused router (with the
norm before it) as one cluster of 16 blocks whose logits meet in rank 0's shared memory
(moe_router.cu kCluster) instead of a ticket: where it runs, that the launch opts in to the
non-portable cluster size, and that MoE models decode the same tokens from the same logits
either way."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from atlas.runtime.host import HostBackend
from atlas.runtime.kernel_abi import (MOE_ADD_RMSNORM_GATE_TOPK_CLUSTER_SOFTMAX,
                                      MOE_ADD_RMSNORM_GATE_TOPK_SOFTMAX)
from atlas.runtime.ops import KernelCache, moe
from atlas.runtime.ops.routes import KernelRoutes
from tests.unit.decode_support import decode_recorded

PROMPT = [3, 17, 42, 99, 5]
DECODE_STEPS = 3
SHAPE_35B = moe.MoeShape(256, 8, 2048, 512, shared_inter=512)


class _Recording(HostBackend):
    """The host backend, with the device's answer on how many clusters it holds and a record
    of the non-portable opt-ins."""

    def __init__(self, clusters: int | None) -> None:
        super().__init__()
        self.clusters, self.opted_in = clusters, []

    def resident_blocks(self, handle, block, shared_mem, cluster):
        return None if self.clusters is None else self.clusters * cluster

    def allow_non_portable_cluster(self, handle) -> None:
        self.opted_in.append(handle.func)


def test_the_cluster_router_runs_only_where_switched_on_and_it_fits() -> None:
    assert KernelRoutes().moe_router_cluster is True  # gpu86: 35B -2.9%, 30B -2.1%
    assert not KernelRoutes.from_env({"ATLAS_MOE_ROUTER_CLUSTER": "0"}).moe_router_cluster
    on = replace(KernelRoutes(), moe_router_cluster=True)
    backend = _Recording(clusters=None)
    kc = KernelCache(backend, on)
    assert moe.router_uses_cluster(kc, 1, SHAPE_35B, moe.Routing())
    assert backend.opted_in == [MOE_ADD_RMSNORM_GATE_TOPK_CLUSTER_SOFTMAX.func]
    moe.router_uses_cluster(kc, 1, SHAPE_35B, moe.Routing())
    assert len(backend.opted_in) == 1  # once per kernel
    assert not moe.router_uses_cluster(kc, 2, SHAPE_35B, moe.Routing())  # batch 1 only
    assert not moe.router_uses_cluster(kc, 1, moe.MoeShape(257, 8, 2048, 512), moe.Routing())
    off = KernelCache(HostBackend(), replace(KernelRoutes(), moe_router_cluster=False))
    assert not moe.router_uses_cluster(off, 1, SHAPE_35B, moe.Routing())
    # a device that cannot hold a cluster of 16 such blocks keeps the ticket router
    none_held = KernelCache(_Recording(clusters=0), on)
    assert not moe.router_uses_cluster(none_held, 1, SHAPE_35B, moe.Routing())


def test_the_cluster_blocks_hold_a_warp_an_expert() -> None:
    assert moe.router_cluster_warps(128) == 8  # Qwen3-30B-A3B
    assert moe.router_cluster_warps(256) == 16  # Qwen3.5-35B-A3B (its shared row: rank 0's)
    assert moe.router_cluster_warps(200) == 13
    assert moe.router_cluster_warps(60) == moe.ROUTER_CLUSTER_MIN_WARPS
    assert moe.ROUTER_CLUSTER_BLOCKS * moe.router_cluster_warps(
        moe.ROUTER_CLUSTER_MAX_EXPERTS) == moe.ROUTER_CLUSTER_MAX_EXPERTS


@pytest.mark.parametrize("model", ["tiny-qwen3-moe", "tiny-qwen3_5_moe"])
def test_moe_models_decode_the_same_with_the_cluster_router(
        model: str, monkeypatch: pytest.MonkeyPatch) -> None:
    cluster_logits, cluster_toks, cluster = decode_recorded(
        model, monkeypatch, {"ATLAS_MOE_ROUTER_CLUSTER": "1"}, [PROMPT], DECODE_STEPS)
    ticket_logits, ticket_toks, ticket = decode_recorded(
        model, monkeypatch, {"ATLAS_MOE_ROUTER_CLUSTER": "0"}, [PROMPT], DECODE_STEPS)
    name = MOE_ADD_RMSNORM_GATE_TOPK_CLUSTER_SOFTMAX.func
    assert cluster.count(name) > 0 and name not in ticket
    # the cluster router replaces the ticket router launch for launch
    assert cluster.count(name) == ticket.count(MOE_ADD_RMSNORM_GATE_TOPK_SOFTMAX.func)
    assert MOE_ADD_RMSNORM_GATE_TOPK_SOFTMAX.func not in cluster
    assert cluster_toks == ticket_toks
    for a, b in zip(cluster_logits, ticket_logits):
        np.testing.assert_array_equal(a, b)
