"""The launch sequence of the mixture-of-experts layers, recorded by MockGpuBackend: a decode
step is one graph replay whose MoE layers are three launches (router, gate/up (batch 1: the
single-token GEMV entry), down into delta, which the next add_rmsnorm adds; a shared expert
rides along as more slots of the same launches), with no host sync on routing; a prefill
chunk runs the grouped path with the shared expert's own launches after it. Opt-in
(ATLAS_MOE_ROUTE_IN_EXPERTS=1 ATLAS_MOE_GATE_UP_TILED=1), batch 1 with inter a multiple of 256:
the expert launches route from the router's logits themselves."""

from pathlib import Path

import pytest

from atlas.core.sampling import GREEDY
from atlas.model.batch import PenaltyHistory, SeqChunk
from atlas.model.load import load_runner

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def _runner(name: str):
    return load_runner(FIXTURES / name, backend="mock", max_seq_len=64, max_batch_size=4,
                       max_prefill_tokens=32)


def _mlp_launches(names: list[str]) -> list[list[str]]:
    """Each layer's launches between its post-attention norm and the next norm. For
    prefill steps (no norm taken by a router launch)."""
    out, cur = [], None
    for n in names:
        if n in ("add_rmsnorm_bf16", "add_rmsnorm_early_bf16", "rmsnorm_bf16",
                 "embed_rmsnorm_bf16"):
            if cur is not None:
                out.append(cur)
            cur = []
        elif cur is not None:
            cur.append(n)
    return out[1::2]  # every other segment: [attention, mlp, attention, mlp, ...]


#: a batch-1 decode step's attention after its norm (embed_rmsnorm for the first layer,
#: add_rmsnorm after): the qkv GEMV, the attention, o_proj
QKV = "gemv_bf16_single"
ATTENTION = ["decode_attn_rope_bf16", "gemv_bf16_single"]
#: the router launch also does the input residual add + RMSNorm (ATLAS_MOE_ROUTER_NORM), at
#: batch 1 as one cluster (ATLAS_MOE_ROUTER_CLUSTER)
NORM_ROUTE_AND_GATE_UP = ["moe_add_rmsnorm_gate_topk_cluster_softmax_bf16",
                          "moe_gate_up_gemv_bf16_single"]
#: the down launch writes delta (the tiny fixtures' inter is no multiple of 256: the row-group
#: kernel); the next add_rmsnorm launch adds it
SPARSE = NORM_ROUTE_AND_GATE_UP + ["moe_down_sum_bf16"]
DENSE = ["add_rmsnorm_bf16", "gemv_swiglu_bf16_single", "gemv_bf16_single"]


@pytest.mark.parametrize("name, layers", [
    # the next layer (and the final norm) adds the MoE block's delta in its add_rmsnorm
    ("tiny-qwen3-moe", [["embed_rmsnorm_bf16", QKV, *ATTENTION, *SPARSE],
                        ["add_rmsnorm_bf16", QKV, *ATTENTION, *DENSE], ["add_rmsnorm_bf16"]]),
    ("tiny-qwen2-moe", [["embed_rmsnorm_bf16", QKV, *ATTENTION, *DENSE],
                        ["add_rmsnorm_bf16", QKV, *ATTENTION, *SPARSE], ["add_rmsnorm_bf16"]]),
])
def test_decode_graph_routes_on_the_device(name, layers):
    runner = _runner(name)
    dev = runner.backend
    dev.drain_launches()
    dev.graph_launches.clear()
    runner.execute([SeqChunk(7, [3], 5, [0], GREEDY, history=PenaltyHistory([1, 2, 3, 4, 5]))])
    assert dev.drain_launches() == []  # nothing outside the graph: no host sync on routing
    (replay,) = dev.graph_launches
    names = [r.func for r in replay.graph]
    body = [n for layer in layers for n in layer]
    assert names[:len(body)] == body  # the first norm looks the embeddings up
    # every row of a decode-shaped step samples: the LM head reads the normed rows in place
    assert names[len(body)] == "gemv_bf16_f32_single"
    assert "moe_shared_add_bf16" not in names  # tiny-qwen2-moe's shared expert: in the slots


def test_down_leaves_the_residual_add_to_the_next_layer():
    """The MoE down launch writes delta (moe_down_sum_bf16) and the next layer adds and
    normalizes in its own add_rmsnorm launch before the qkv GEMV."""
    runner = _runner("tiny-qwen3-moe")
    dev = runner.backend
    dev.drain_launches()
    dev.graph_launches.clear()
    runner.execute([SeqChunk(7, [3], 5, [0], GREEDY, history=PenaltyHistory([1, 2, 3, 4, 5]))])
    (replay,) = dev.graph_launches
    names = [r.func for r in replay.graph]
    at = names.index("moe_down_sum_bf16")
    assert names[at - 2:at] == NORM_ROUTE_AND_GATE_UP
    assert names[at + 1:at + 3] == ["add_rmsnorm_bf16", QKV]
    assert not any(n.startswith("moe_down") and "rmsnorm" in n for n in names)


def test_prefill_takes_the_grouped_path():
    runner = _runner("tiny-qwen2-moe")
    dev = runner.backend
    dev.drain_launches()
    runner.execute([SeqChunk(8, list(range(1, 21)), 0, [1, 2], GREEDY,
                             history=PenaltyHistory(list(range(1, 21))))])
    names = [r.func for r in dev.drain_launches()]
    mlp = _mlp_launches(names)[1]
    # 6 experts (n not a multiple of 16): the router logits of 20 rows come from the (ring)
    # GEMV in chunks of 8; the shared expert's gate is a GEMM over its zero-padded 16-row weight
    assert mlp == ["gemv_ring_bf16_f32"] * 3 + [
        "moe_topk_softmax_f32", "moe_align_i32", "moe_grouped_gate_up_silu_bf16",
        "moe_grouped_down_bf16", "moe_combine_bf16",
        "gemm_bf16_skinny", "silu_mul_early_bf16", "gemm_bf16_skinny",  # shared expert SwiGLU
        "gemm_bf16_f32_skinny", "moe_shared_add_bf16"]


ROUTE_IN = {"ATLAS_MOE_ROUTE_IN_EXPERTS": "1", "ATLAS_MOE_GATE_UP_TILED": "1"}


@pytest.mark.parametrize("env,tokens,names", [
    (ROUTE_IN, 1, ["moe_gate_logits_bf16", "moe_gate_up_gemv_tiles_route_bf16",
                   "moe_down_gemv_route_sum_bf16"]),
    ({"ATLAS_MOE_GATE_UP_TILED": "1"}, 1,
     ["moe_gate_topk_softmax_bf16", "moe_gate_up_gemv_tiles_bf16", "moe_down_gemv_sum_s3_bf16"]),
    ({}, 1, ["moe_gate_topk_softmax_bf16", "moe_gate_up_gemv_bf16_single",
             "moe_down_gemv_sum_s3_bf16"]),
    (ROUTE_IN, 2, ["moe_gate_topk_softmax_bf16", "moe_gate_up_silu_bf16", "moe_down_sum_bf16"]),
])
def test_batch_one_moe_block_routes_inside_its_expert_launches(env, tokens, names):
    """The flagship's MoE block (256 experts, a shared expert) at batch 1 with routing inside
    the expert launches switched on: the router writes only the logits and gate/up and down
    route from them (the router's logits and shared logit buffers passed through); the tiled
    gate/up alone, the defaults and batch 2 keep the router's top-k. The down writes delta."""
    from types import SimpleNamespace

    from atlas.model.moe import MoeBuffers, MoeMlp, SharedExpert
    from atlas.runtime.mock import MockGpuBackend
    from atlas.runtime.ops import KernelCache
    from atlas.runtime.ops import moe as moe_ops
    from atlas.runtime.ops.routes import KernelRoutes

    shape = moe_ops.MoeShape(256, 8, 2048, 512, 512)
    bufs = MoeBuffers(0x10000, 0x20000, 0x30000, moe_ops.MoeScratch(act=0x40000), 0x50000,
                      shared_out=0x60000, shared_gate=0x70000)
    mlp = MoeMlp(shape, moe_ops.Routing(), 0x1000, 0x2000, 0x3000, bufs,
                 SharedExpert(0x4000, 0x5000, 0x6000, 512))
    mock = MockGpuBackend()
    kc = KernelCache(mock, KernelRoutes.from_env(env))
    b = SimpleNamespace(normed=0x80000, delta=0x90000, resid=0xa0000)
    mlp.forward(kc, 0, b, tokens)
    launches = mock.drain_launches()
    assert [r.func for r in launches] == names
    assert launches[2].args["out"] == b.delta
    if names[0] == "moe_gate_logits_bf16":
        assert launches[0].args["shared_logits"] == bufs.shared_gate
        assert launches[2].args["logits"] == bufs.logits
        assert launches[2].args["shared_logits"] == bufs.shared_gate
