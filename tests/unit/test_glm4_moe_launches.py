"""The batch-1 decode graph of GLM-4.5 (tiny-glm4-moe: a dense layer, then two sparse ones),
recorded by MockGpuBackend: q/k/v biases added after the qkv GEMV, per-head q/k norms with
half of each head rotating; a sparse layer's router on the float32 GEMV (its logits not
rounded to bf16, so not the fused three-launch router), the sigmoid top-k with the score bias,
renormalized and scaled by 2.5, the routed experts' decode kernels, then the shared expert's
SwiGLU added without a gate (moe_shared_add_bf16 with a null gate pointer)."""

from pathlib import Path

from tests.unit.decode_support import batch1_decode_graph

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "tiny-glm4-moe"

ATTENTION = ["gemv_bf16_single", "bias_add_bf16", "qk_norm_rope_kv_partial_bf16",
             "decode_attn_bf16", "gemv_bf16_single", "add_rmsnorm_bf16"]
DENSE = ["gemv_swiglu_bf16_single", "gemv_bf16_single", "add_rmsnorm_bf16"]
SPARSE = ["gemv_bf16_f32_unrounded", "moe_topk_sigmoid_f32", "moe_gate_up_gemv_bf16_single",
          "moe_down_sum_bf16", "gemv_bf16_single", "gemv_silu_bf16_single",
          "moe_shared_add_bf16", "add_rmsnorm_bf16"]


def test_batch1_decode_graph():
    launches = batch1_decode_graph(FIXTURE)
    names = [r.func for r in launches]
    layers = ATTENTION + DENSE + 2 * (ATTENTION + SPARSE)
    assert names[:2] == ["embedding_bf16", "rmsnorm_bf16"]
    assert names[2:2 + len(layers)] == layers
    assert not any(n.startswith(("moe_gate_topk", "moe_add_rmsnorm_gate_topk")) for n in names)
    routers = [r for r in launches if r.func == "moe_topk_sigmoid_f32"]
    assert [(r.args["top_k"], r.args["renormalize"], r.args["scale"]) for r in routers] == [
        (2, 1, 2.5)] * 2
    assert all(r.args["bias"] for r in routers)  # e_score_correction_bias
    shared = [r for r in launches if r.func == "moe_shared_add_bf16"]
    assert [r.args["gate"] for r in shared] == [0, 0]  # ungated
    rope = [r for r in launches if r.func == "qk_norm_rope_kv_partial_bf16"]
    assert all(r.args["q_norm_w"] and r.args["k_norm_w"] and r.args["rotary_dim"] == 32
               for r in rope)
