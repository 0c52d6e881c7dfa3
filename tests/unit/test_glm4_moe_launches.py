"""The batch-1 decode graph of GLM-4.5 (tiny-glm4-moe: a dense layer, then two sparse ones),
recorded by MockGpuBackend: q/k/v biases added by the qkv GEMV itself, per-head q/k norms with
half of each head rotating; a sparse layer in the fused three launches of every MoE family:
the router (also the residual add + RMSNorm before the block, at batch 1 one cluster) in its
float32-logit mode (`unrounded`: GLM-4.5's router is float32) with no shared gate (the
shared expert's slot weighted 1), the sigmoid top-k with the score bias, renormalized and
scaled by 2.5, then gate/up and down over the routed slots and the shared expert's. With
ATLAS_MOE_FUSED_DECODE=0 the separate launches remain: the float32 router GEMV, the top-k,
the experts, the shared expert's SwiGLU and its add without a gate. With FP8 experts
(`atlas models quantize`'s fp8-block) the same router launch precedes the quantized expert
launches, the shared expert folded in as expert 8; its prefill chunk takes the float32
router GEMV and adds the shared expert without a gate."""

from pathlib import Path

import pytest

from atlas.core.sampling import GREEDY
from atlas.model.batch import PenaltyHistory, SeqChunk
from atlas.model.load import load_runner
from atlas.runtime.quantize import quantize_checkpoint
from tests.unit.decode_support import batch1_decode_graph

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "tiny-glm4-moe"

ATTENTION = ["gemv_bias_bf16_single", "qk_norm_rope_kv_partial_bf16", "decode_attn_bf16",
             "gemv_bf16_single"]
DENSE = ["gemv_swiglu_bf16_single", "gemv_bf16_single"]
ROUTER = "moe_add_rmsnorm_gate_topk_cluster_sigmoid_bf16"
FUSED = [ROUTER, "moe_gate_up_gemv_bf16_single", "moe_down_sum_bf16"]
SEPARATE = ["add_rmsnorm_bf16", "gemv_bf16_f32_unrounded", "moe_topk_sigmoid_f32",
            "moe_gate_up_gemv_bf16_single", "moe_down_sum_bf16", "gemv_bf16_single",
            "gemv_silu_bf16_single", "moe_shared_add_bf16"]


def _names(launches: list) -> list[str]:
    return [r.func for r in launches]


def test_sparse_layers_take_the_fused_decode_launches():
    launches = batch1_decode_graph(FIXTURE)
    names = _names(launches)
    layers = (ATTENTION + ["add_rmsnorm_bf16"] + DENSE + ["add_rmsnorm_bf16"]
              + 2 * (ATTENTION + FUSED + ["add_rmsnorm_bf16"]))
    assert names[:1] == ["embed_rmsnorm_bf16"]  # the embedding lookup in the first norm
    assert names[1:1 + len(layers)] == layers
    assert not any(n in names for n in ("gemv_bf16_f32_unrounded", "moe_topk_sigmoid_f32",
                                        "moe_shared_add_bf16"))
    routers = [r.args for r in launches if r.func == ROUTER]
    assert [(a["top_k"], a["renormalize"], a["scale"], a["unrounded"]) for a in routers] == [
        (2, 1, 2.5, 1)] * 2
    assert all(a["bias"] for a in routers)  # e_score_correction_bias
    # the ungated shared expert: one slot, no gate row, no gate logit
    assert [(a["shared_slots"], a["shared_gate"], a["shared_logits"]) for a in routers] == [
        (1, 0, 0)] * 2
    downs = [r.args for r in launches if r.func == "moe_down_sum_bf16"]
    assert [(a["shared_slots"], bool(a["shared_down"])) for a in downs] == [(1, True)] * 2


def test_fused_decode_switch_keeps_the_separate_launches(monkeypatch):
    monkeypatch.setenv("ATLAS_MOE_FUSED_DECODE", "0")
    launches = batch1_decode_graph(FIXTURE)
    names = _names(launches)
    layers = (ATTENTION + ["add_rmsnorm_bf16"] + DENSE
              + 2 * (["add_rmsnorm_bf16"] + ATTENTION + SEPARATE))
    assert names[1:1 + len(layers)] == layers
    assert not any(n.startswith(("moe_gate_topk", "moe_add_rmsnorm_gate_topk")) for n in names)
    shared = [r.args for r in launches if r.func == "moe_shared_add_bf16"]
    assert [a["gate"] for a in shared] == [0, 0]  # ungated


@pytest.mark.parametrize("env", [{"ATLAS_MOE_ROUTER_CLUSTER": "0"},
                                 {"ATLAS_MOE_ROUTER_NORM": "0"}])
def test_the_other_fused_routers_take_the_float32_mode(monkeypatch, env: dict[str, str]):
    """The ticket router with the norm, and the router alone after the model's add_rmsnorm."""
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    want = ("moe_add_rmsnorm_gate_topk_sigmoid_bf16" if "ATLAS_MOE_ROUTER_CLUSTER" in env
            else "moe_gate_topk_sigmoid_bf16")
    routers = [r.args for r in batch1_decode_graph(FIXTURE) if r.func == want]
    assert [(a["unrounded"], a["shared_gate"], a["shared_slots"]) for a in routers] == [
        (1, 0, 1)] * 2


@pytest.fixture(scope="module")
def fp8_glm(tmp_path_factory: pytest.TempPathFactory) -> Path:
    qdir = tmp_path_factory.mktemp("glm") / "fp8"
    quantize_checkpoint(FIXTURE, qdir, "fp8-block")
    return qdir


def test_fp8_experts_take_the_router_and_the_quantized_expert_launches(fp8_glm: Path):
    launches = batch1_decode_graph(fp8_glm)
    names = _names(launches)
    sparse = [ROUTER, "moe_gate_up_silu_fp8", "moe_down_sum_fp8", "add_rmsnorm_bf16"]
    routers = [i for i, n in enumerate(names) if n == ROUTER]
    assert len(routers) == 2 and all(names[i:i + 4] == sparse for i in routers)
    assert not any(n in names for n in ("gemv_bf16_f32_unrounded", "moe_shared_add_bf16"))
    for i in routers:
        router, down = launches[i].args, launches[i + 2].args
        assert (router["unrounded"], router["shared_gate"], router["shared_slots"]) == (1, 0, 1)
        assert router["experts"] == 8 and router["bias"] and router["scale"] == 2.5
        assert (down["slots"], down["routed"], down["experts"]) == (3, 2, 9)


def test_fp8_prefill_takes_the_float32_router_and_the_ungated_shared_add(fp8_glm: Path):
    runner = load_runner(fp8_glm, backend="mock", max_seq_len=64, max_batch_size=4,
                         max_prefill_tokens=32)
    dev = runner.backend
    dev.drain_launches()
    prompt = list(range(1, 21))
    runner.execute([SeqChunk(8, prompt, 0, [1, 2], GREEDY, history=PenaltyHistory(prompt))])
    launches = dev.drain_launches()
    names = _names(launches)
    assert names.count("moe_topk_sigmoid_f32") == 2
    # 20 rows of an 8-expert router: the float32 GEMV 8 rows at a time (n = 8 < 16)
    assert names.count("gemv_bf16_f32_unrounded") == 2 * 3
    assert [r.args["gate"] for r in launches if r.func == "moe_shared_add_bf16"] == [0, 0]
