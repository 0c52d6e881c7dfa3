"""ATLAS_MOE_ROUTER_NORM (default on): a decode MoE block's residual add + RMSNorm done by its
fused router launch (moe_router.cu NormIn) instead of an add_rmsnorm launch before it: when
the model hands it over, and that MoE models decode the same tokens from the same logits
either way."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from atlas.runtime.host import HostBackend
from atlas.runtime.kernel_abi import (ADD_RMSNORM, ADD_RMSNORM_EARLY, ADD_RMSNORM_OFFSET,
                                      ADD_RMSNORM_OFFSET_EARLY,
                                      MOE_ADD_RMSNORM_GATE_TOPK_SOFTMAX)
from atlas.runtime.ops import KernelCache, moe
from atlas.runtime.ops.routes import KernelRoutes
from tests.unit.decode_support import decode_recorded

PROMPTS = ([3, 17, 42, 99, 5], [200, 1, 77])
DECODE_STEPS = 3


def test_the_router_takes_the_norm_only_where_switched_on_and_it_fits() -> None:
    shape = moe.MoeShape(128, 8, 2048, 768)
    routes = KernelRoutes()
    assert routes.moe_router_norm is True  # gpu58 / gpu59: the 35B b1 -0.8%
    assert not KernelRoutes.from_env({"ATLAS_MOE_ROUTER_NORM": "0"}).moe_router_norm
    on = KernelCache(HostBackend(), routes)
    assert moe.router_takes_norm(on, 1, shape) and moe.router_takes_norm(on, 8, shape)
    assert not moe.router_takes_norm(on, 9, shape)  # not a fused-router decode step
    assert not moe.router_takes_norm(on, 1, moe.MoeShape(128, 8, 8192 + 16, 768))
    off = replace(routes, moe_router_norm=False)
    assert not moe.router_takes_norm(KernelCache(HostBackend(), off), 1, shape)


@pytest.mark.parametrize("model", ["tiny-qwen3-moe", "tiny-qwen3_5_moe"])
def test_moe_models_decode_the_same_with_the_norm_in_the_router(
        model: str, monkeypatch: pytest.MonkeyPatch) -> None:
    fused_logits, fused_toks, fused = decode_recorded(
        model, monkeypatch, {"ATLAS_MOE_ROUTER_NORM": "1"}, list(PROMPTS), DECODE_STEPS)
    plain_logits, plain_toks, plain = decode_recorded(
        model, monkeypatch, {"ATLAS_MOE_ROUTER_NORM": "0"}, list(PROMPTS), DECODE_STEPS)
    norms = {ADD_RMSNORM.func, ADD_RMSNORM_OFFSET.func, ADD_RMSNORM_EARLY.func,
             ADD_RMSNORM_OFFSET_EARLY.func}
    assert MOE_ADD_RMSNORM_GATE_TOPK_SOFTMAX.func in fused
    assert MOE_ADD_RMSNORM_GATE_TOPK_SOFTMAX.func not in plain
    # one add_rmsnorm launch fewer per MoE layer and step
    n_norm = sum(f in norms for f in plain) - sum(f in norms for f in fused)
    assert n_norm == fused.count(MOE_ADD_RMSNORM_GATE_TOPK_SOFTMAX.func) > 0
    assert fused_toks == plain_toks
    for a, b in zip(fused_logits, plain_logits):
        np.testing.assert_array_equal(a, b)
