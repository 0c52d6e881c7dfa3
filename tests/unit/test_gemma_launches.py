"""The batch-1 decode graph of Gemma 3 (tiny-gemma3: two sliding layers of 6 keys, then a full
one), recorded by MockGpuBackend: the embedding scaled by bf16(sqrt(hidden)); each sublayer's
output norm, residual add and next norm in one launch; batch 1's gate_up GEMV ending with the
GELU GLU (no gelu_tanh_mul launch); the sliding layers' attention on the long kernel with
their window, the full layer's without one; the softmax scale query_pre_attn_scalar^-0.5."""

from pathlib import Path

from tests.unit.decode_support import batch1_decode_graph

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "tiny-gemma3"

ATTENTION = ["gemv_bf16_single", "qk_norm_rope_kv_partial_bf16"]
MLP = ["gemv_bf16_single", "norm_add_rmsnorm_offset_bf16", "gemv_geglu_bf16_single",
       "gemv_bf16_single", "norm_add_rmsnorm_offset_bf16"]


def test_batch1_decode_graph():
    launches = batch1_decode_graph(FIXTURE)
    names = [r.func for r in launches]
    sliding = ATTENTION + ["decode_attn_long_d256_bf16"] + MLP
    full = ATTENTION + ["decode_attn_bf16"] + MLP
    # the scaled lookup in the first norm's launch (embed_rmsnorm, its scale argument)
    assert names[:1] == ["embed_rmsnorm_offset_bf16"]
    assert names[1:1 + 3 * len(sliding)] == sliding + sliding + full
    assert "gelu_tanh_mul_bf16" not in names and "add_rmsnorm_offset_bf16" not in names
    assert launches[0].args["scale"] == 11.3125  # sqrt(128) = 11.31 as bf16
    attention = [r for r in launches if r.func.startswith("decode_attn")]
    assert [r.args.get("window", 0) for r in attention] == [6, 6, 0]
    assert {r.args["scale"] for r in attention} == {64 ** -0.5}
