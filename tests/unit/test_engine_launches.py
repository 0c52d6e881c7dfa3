"""The launch sequence of the dense decoder, recorded by MockGpuBackend (no GPU, no numerics):
what one decode step replays and what a prefill step launches, per layer and in order."""

from pathlib import Path

import pytest

from atlas.core.sampling import GREEDY
from atlas.model.batch import PenaltyHistory, SeqChunk
from atlas.model.load import load_runner

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "tiny-qwen3"

#: batch-1 decode, 5 launches a layer: the add + RMSNorm before qkv and gate_up run inside
#: those GEMVs, q/k norm + RoPE + KV append inside the attention, SwiGLU inside down
DECODE_LAYER = ["gemv_add_rmsnorm_bf16_single", "decode_attn_rope_bf16", "gemv_bf16_single",
                "gemv_add_rmsnorm_bf16_single", "gemv_silu_bf16_single"]


@pytest.fixture(scope="module")
def runner():
    return load_runner(FIXTURE, backend="mock", max_seq_len=64, max_batch_size=4,
                       max_prefill_tokens=32)


def test_decode_graph_is_one_launch_with_the_layer_sequence(runner):
    dev = runner.backend
    dev.drain_launches()
    dev.graph_launches.clear()
    runner.execute([SeqChunk(7, [3], 5, [0], GREEDY, history=PenaltyHistory([1, 2, 3, 4, 5]))])
    assert dev.drain_launches() == []  # nothing launched outside the graph
    (replay,) = dev.graph_launches
    names = [r.func for r in replay.graph]
    layers, n = runner.cfg.num_hidden_layers, len(DECODE_LAYER)
    assert names[:1] == ["embedding_bf16"]
    assert names[1:1 + n * layers] == DECODE_LAYER * layers
    # the grammar mask and logprobs launches exit early on rows that ask for neither
    assert names[1 + n * layers:] == ["add_rmsnorm_bf16", "embedding_bf16",
                                      "gemv_bf16_f32_single", *SAMPLER]
    runner.release(7)


SAMPLER = ["apply_token_bitmask_f32", "apply_penalties_f32", "sample_f32", "logprobs_f32",
           "count_tokens_i32"]


def test_a_masked_decode_step_fills_masks_while_the_forward_graph_runs(runner):
    """Under a grammar the decode step replays the forward-only graph first, then the host
    fills the mask (overlapping the device's forward), then the sampler runs eagerly."""
    dev = runner.backend
    dev.drain_launches()
    dev.graph_launches.clear()
    graphs_when_filled = []

    def fill(bitmask, row):
        graphs_when_filled.append(len(dev.graph_launches))
        bitmask[row] = 0xFFFFFFFF

    runner.execute([SeqChunk(7, [3], 5, [0], GREEDY, history=PenaltyHistory([1, 2, 3]),
                             token_mask=fill)])
    assert graphs_when_filled == [1]
    (replay,) = dev.graph_launches
    assert replay.graph[-1].func == "gemv_bf16_f32_single"   # ends at the LM head
    assert [r.func for r in dev.drain_launches()] == SAMPLER
    runner.release(7)


def test_fused_norms_alternate_the_residual_buffers(runner):
    """Each fused add+norm reads the current residual and writes the other buffer (its
    blocks still read the current one); the first layer's has nothing to add or store, and
    the final norm adds the last delta to wherever the stream ended."""
    dev = runner.backend
    dev.drain_launches()
    dev.graph_launches.clear()
    runner.execute([SeqChunk(8, [3], 5, [0], GREEDY, history=PenaltyHistory([1, 2, 3, 4, 5]))])
    (replay,) = dev.graph_launches
    fused = [r.args for r in replay.graph if r.func == "gemv_add_rmsnorm_bf16_single"]
    a, b = runner.bufs.resid, runner.bufs.resid_alt
    assert (fused[0]["resid"], fused[0]["delta"], fused[0]["resid_out"]) == (a, 0, 0)
    cur = a
    for args in fused[1:]:
        assert (args["resid"], args["delta"], args["resid_out"]) == (cur, runner.bufs.delta,
                                                                     a + b - cur)
        cur = args["resid_out"]
    (final,) = [r.args for r in replay.graph if r.func == "add_rmsnorm_bf16"]
    assert final["residual"] == cur
    runner.release(8)


def test_prefill_step_launches_eagerly_with_packed_attention(runner):
    dev = runner.backend
    dev.drain_launches()
    runner.execute([SeqChunk(8, list(range(1, 21)), 0, [1, 2], GREEDY,
                             history=PenaltyHistory(list(range(1, 21))))])
    launches = dev.drain_launches()
    attn = [r for r in launches if r.func == "prefill_attn_bf16"]
    assert len(attn) == runner.cfg.num_hidden_layers
    assert attn[0].args["num_seqs"] == 1 and attn[0].grid[2] == 1
    # 20 prompt rows go through the tensor-core GEMM; only the sampled row hits the LM head
    assert {r.func for r in launches if r.func.startswith("gemm")} == {"gemm_bf16_skinny"}
    lm_head = [r for r in launches if r.func == "gemv_bf16_f32_single"]
    assert len(lm_head) == 1 and lm_head[0].args["m"] == 1
    rope = [r for r in launches if r.func == "qk_norm_rope_kv_bf16"]
    assert rope[0].args["tokens"] == 20 and rope[0].args["q_norm_w"] != 0
    runner.release(8)


def test_a_sequence_new_to_the_runner_must_bring_its_history(runner):
    with pytest.raises(ValueError, match="new to the runner"):
        runner.execute([SeqChunk(9, [3], 0, [0], GREEDY)])
