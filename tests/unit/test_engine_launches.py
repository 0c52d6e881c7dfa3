"""The launch sequence of the dense decoder, recorded by MockGpuBackend (no GPU, no numerics):
what one decode step replays and what a prefill step launches, per layer and in order."""

from pathlib import Path

import pytest

from atlas.core.sampling import GREEDY
from atlas.model.batch import PenaltyHistory, SeqChunk
from atlas.model.load import load_runner

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "tiny-qwen3"

#: batch-1 decode by default (the fastest measured), 7 launches a layer: add + RMSNorm, qkv,
#: attention with q/k norm + RoPE + KV append inside, o_proj, add + RMSNorm, gate_up ending
#: with its SwiGLU (ATLAS_GEMV_SWIGLU), down; the first layer's norm has nothing to add
DEFAULT_LAYER = ["add_rmsnorm_bf16", "gemv_bf16_single", "decode_attn_rope_bf16",
                 "gemv_bf16_single", "add_rmsnorm_bf16", "gemv_swiglu_bf16_single",
                 "gemv_bf16_single"]


@pytest.fixture(scope="module")
def runner():
    return load_runner(FIXTURE, backend="mock", max_seq_len=64, max_batch_size=4,
                       max_prefill_tokens=32)


def _replay_decode_graph(runner) -> list:
    """The launch records of one batch-1 decode step, which must be a single graph replay."""
    dev = runner.backend
    dev.drain_launches()
    dev.graph_launches.clear()
    runner.execute([SeqChunk(7, [3], 5, [0], GREEDY, history=PenaltyHistory([1, 2, 3, 4, 5]))])
    assert dev.drain_launches() == []  # nothing launched outside the graph
    (replay,) = dev.graph_launches
    runner.release(7)
    return replay.graph


def _replay_decode_step(runner) -> list[str]:
    """The kernel names of one batch-1 decode step (_replay_decode_graph)."""
    return [r.func for r in _replay_decode_graph(runner)]


def test_decode_graph_is_one_launch_with_the_layer_sequence(runner):
    names = _replay_decode_step(runner)
    layers, n = runner.cfg.num_hidden_layers, len(DEFAULT_LAYER)
    # the first norm looks the token's embedding up (embed_rmsnorm: no embedding launch)
    assert names[:n * layers] == ["embed_rmsnorm_bf16", *DEFAULT_LAYER[1:]] + DEFAULT_LAYER * (
        layers - 1)
    # no grammar-mask launch (the sampler reports logprobs itself)
    # (every row of a decode-shaped step samples: no gather before the LM head)
    assert names[n * layers:] == ["add_rmsnorm_bf16", "gemv_bf16_f32_single", *GRAPH_SAMPLER]


#: (logprobs come from the sampling launch's finishing blocks)
SAMPLER = ["apply_token_bitmask_f32", "apply_penalties_f32", "sample_f32"]
#: the sampler inside a decode graph: the runner replays it only for steps without a grammar
#: mask, so the mask launch is left out
GRAPH_SAMPLER = SAMPLER[1:]


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


def test_the_decode_graph_keeps_the_residual_stream_in_one_buffer(runner):
    """Every add + RMSNorm of a batch-1 decode step adds delta into b.resid in place and
    normalizes into b.normed; the first layer's norm writes b.resid from the embeddings."""
    dev = runner.backend
    dev.drain_launches()
    dev.graph_launches.clear()
    runner.execute([SeqChunk(8, [3], 5, [0], GREEDY, history=PenaltyHistory([1, 2, 3, 4, 5]))])
    (replay,) = dev.graph_launches
    bufs = runner.bufs
    adds = [r.args for r in replay.graph if r.func == "add_rmsnorm_bf16"]
    assert len(adds) == 2 * runner.cfg.num_hidden_layers
    for a in adds:
        assert (a["residual"], a["delta"], a["out"]) == (bufs.resid, bufs.delta, bufs.normed)
    (first,) = [r.args for r in replay.graph if r.func == "embed_rmsnorm_bf16"]
    assert (first["ids"], first["residual"], first["out"]) == (bufs.ids, bufs.resid,
                                                               bufs.normed)
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


def test_mixed_step_attends_leading_decode_rows_with_the_decode_kernel(runner):
    """Two sequences decoding beside a prompt chunk (the scheduler puts one-token chunks
    first): per layer, decode attention over rows 0..1 (split-K, the runner's split count for
    two rows) and prefill attention over the chunk after them, its per-sequence inputs
    (block-table row, cu_q, kv_len) offset past the decode rows."""
    dev = runner.backend
    hist = PenaltyHistory([1, 2, 3])
    runner.execute([SeqChunk(20, [1, 2, 3], 0, [0], GREEDY, history=hist),
                    SeqChunk(21, [1, 2, 3], 0, [1], GREEDY, history=hist)])
    dev.drain_launches()
    runner.execute([SeqChunk(20, [4], 3, [0], GREEDY), SeqChunk(21, [5], 3, [1], GREEDY),
                    SeqChunk(22, list(range(1, 11)), 0, [2], GREEDY,
                             history=PenaltyHistory(list(range(1, 11))))])
    launches = dev.drain_launches()
    layers = runner.cfg.num_hidden_layers
    decode = [r for r in launches if r.func == "decode_attn_bf16"]
    prefill = [r for r in launches if r.func == "prefill_attn_bf16"]
    assert len(decode) == len(prefill) == layers
    bufs, pitch = runner.bufs, 4 * runner.model.max_blocks
    assert decode[0].args["num_seqs"] == 2
    assert decode[0].args["num_splits"] == runner.decode_splits(2)
    assert (decode[0].args["block_tables"], decode[0].args["kv_lens"]) == (
        bufs.block_tables, bufs.kv_lens)
    assert prefill[0].args["num_seqs"] == 1 and prefill[0].grid[2] == 1
    assert (prefill[0].args["block_tables"], prefill[0].args["cu_q"],
            prefill[0].args["kv_lens"]) == (bufs.block_tables + 2 * pitch, bufs.cu_q + 8,
                                            bufs.kv_lens + 8)
    for seq in (20, 21, 22):
        runner.release(seq)


def test_a_sequence_new_to_the_runner_must_bring_its_history(runner):
    with pytest.raises(ValueError, match="new to the runner"):
        runner.execute([SeqChunk(9, [3], 0, [0], GREEDY)])


def _decode_step_launches(monkeypatch, switch: str) -> tuple[list[str], int]:
    """The kernel names of one batch-1 decode graph replay under `switch`=1, and the
    fixture's layer count."""
    monkeypatch.setenv(switch, "1")
    runner = load_runner(FIXTURE, backend="mock", max_seq_len=64, max_batch_size=4,
                         max_prefill_tokens=32)
    return _replay_decode_step(runner), runner.cfg.num_hidden_layers


def test_persistent_decode_graph_runs_the_layers_in_one_launch(monkeypatch):
    """ATLAS_PERSISTENT_DECODE=1: the batch-1 decode graph is the embedding, ONE persistent
    launch for every layer, then the final norm and the LM head."""
    names, _ = _decode_step_launches(monkeypatch, "ATLAS_PERSISTENT_DECODE")
    assert names == ["embedding_bf16", "decode_persistent_bf16", "rmsnorm_bf16",
                     "gemv_bf16_f32_single", *GRAPH_SAMPLER]
