"""The launch sequence of the mixture-of-experts layers, recorded by MockGpuBackend: a decode
step is one graph replay whose MoE layers are three launches (router, gate/up (batch 1: the
tiled single-token GEMV entry), down + the next residual add and RMSNorm; a shared expert rides along
as more slots of the same launches), with no host sync on routing; a prefill chunk runs the
grouped path with the shared expert's own launches after it."""

from pathlib import Path

import pytest

from atlas.core.sampling import GREEDY
from atlas.model.batch import PenaltyHistory, SeqChunk
from atlas.model.load import load_runner

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"

ROUTE_AND_GATE_UP = ["moe_gate_topk_softmax_bf16", "moe_gate_up_gemv_tiles_bf16"]
FUSED_NORM = "moe_down_add_rmsnorm_bf16"


def _runner(name: str):
    return load_runner(FIXTURES / name, backend="mock", max_seq_len=64, max_batch_size=4,
                       max_prefill_tokens=32)


def _mlp_launches(names: list[str]) -> list[list[str]]:
    """Each layer's launches between its post-attention norm and the next norm (a fused
    down + norm launch ends its segment and is kept in it). For unfused (prefill) steps."""
    out, cur = [], None
    for n in names:
        if n in ("add_rmsnorm_bf16", "rmsnorm_bf16", FUSED_NORM):
            if n == FUSED_NORM and cur is not None:
                cur.append(n)
            if cur is not None:
                out.append(cur)
            cur = []
        elif cur is not None:
            cur.append(n)
    return out[1::2]  # every other segment: [attention, mlp, attention, mlp, ...]


#: a batch-1 decode step's attention: its norm (rmsnorm for the first layer, add_rmsnorm
#: after), the qkv GEMV, or the qkv GEMV alone when the MoE layer before already left the
#: norm in `normed`
QKV = "gemv_bf16_single"
ATTENTION = ["decode_attn_rope_bf16", "gemv_bf16_single"]
#: the input add_rmsnorm is its own launch
SPARSE = ["add_rmsnorm_bf16"] + ROUTE_AND_GATE_UP + [FUSED_NORM]
DENSE = ["add_rmsnorm_bf16", "gemv_bf16_single", "gemv_silu_bf16_single"]


@pytest.mark.parametrize("name, layers", [
    # the MoE layer fuses the next norm, so layer 1's qkv is a plain GEMV
    ("tiny-qwen3-moe", [["rmsnorm_bf16", QKV, *ATTENTION, *SPARSE],
                        [QKV, *ATTENTION, *DENSE], ["add_rmsnorm_bf16"]]),
    # the last layer's MoE block fuses the final norm
    ("tiny-qwen2-moe", [["rmsnorm_bf16", QKV, *ATTENTION, *DENSE],
                        ["add_rmsnorm_bf16", QKV, *ATTENTION, *SPARSE]]),
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
    assert names[:1 + len(body)] == ["embedding_bf16", *body]
    assert names[1 + len(body)] == "embedding_bf16"  # the sampled rows' gather
    assert "moe_shared_add_bf16" not in names  # tiny-qwen2-moe's shared expert: in the slots


@pytest.mark.parametrize("norm_gemv, qkv", [("0", ["add_rmsnorm_bf16", QKV]),
                                             ("1", ["gemv_add_rmsnorm_bf16_single"])])
def test_down_without_the_fused_norm_leaves_it_to_the_next_layer(monkeypatch, norm_gemv, qkv):
    """ATLAS_MOE_DOWN_NORM=0: the MoE down launch writes delta (moe_down_sum_bf16) and the
    next layer adds and normalizes: its own add_rmsnorm launch, or inside the qkv GEMV with
    ATLAS_NORM_GEMV=1."""
    monkeypatch.setenv("ATLAS_MOE_DOWN_NORM", "0")
    monkeypatch.setenv("ATLAS_NORM_GEMV", norm_gemv)
    runner = _runner("tiny-qwen3-moe")
    dev = runner.backend
    dev.drain_launches()
    dev.graph_launches.clear()
    runner.execute([SeqChunk(7, [3], 5, [0], GREEDY, history=PenaltyHistory([1, 2, 3, 4, 5]))])
    (replay,) = dev.graph_launches
    names = [r.func for r in replay.graph]
    at = names.index("moe_down_sum_bf16")
    assert names[at - 3:at] == ["add_rmsnorm_bf16", *ROUTE_AND_GATE_UP]
    assert names[at + 1:at + 1 + len(qkv)] == qkv
    assert FUSED_NORM not in names


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
        "gemm_bf16_skinny", "silu_mul_bf16", "gemm_bf16_skinny",  # shared expert SwiGLU
        "gemm_bf16_f32_skinny", "moe_shared_add_bf16"]
