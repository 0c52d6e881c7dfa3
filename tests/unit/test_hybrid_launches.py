"""The launch sequence of the hybrid Qwen3.5 decoder, recorded by MockGpuBackend: the decode
graph holds the fused decode step of every linear layer between its two projections (the
conv, recurrent delta rule and gated norm as three launches under ATLAS_GDN_FUSED=0) and the
gated attention of every full layer; prefill runs the chunked form; the state slot of each
row and the padding rows' slot reach the kernels."""

from pathlib import Path

import numpy as np
import pytest

from atlas.core.sampling import GREEDY
from atlas.model.batch import PenaltyHistory, SeqChunk
from atlas.model.load import load_runner
from atlas.runtime.ops.linear_attention import GDN_DECODE_SPLIT

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "tiny-qwen3_5"

# a decode bucket of 2 rows: the multi-row GEMV (the ring kernel)
LINEAR_DECODE = ["gemv_ring_bf16", "gated_deltanet_decode_bf16", "gemv_ring_bf16"]
LINEAR_DECODE_UNFUSED = ["gemv_ring_bf16", "causal_conv1d_silu_bf16", "gated_delta_step_bf16",
                         "gated_rmsnorm_bf16", "gemv_ring_bf16"]
FULL_DECODE = ["gemv_ring_bf16", "qk_norm_rope_kv_partial_bf16", "decode_attn_bf16",
               "sigmoid_gate_mul_early_bf16", "gemv_ring_bf16"]
# (2 rows: the early-trigger entries, ops/early_trigger.EARLY_MIN_ROWS)
MLP = ["add_rmsnorm_offset_early_bf16", "gemv_ring_bf16", "gemv_ring_silu_bf16",
       "add_rmsnorm_offset_early_bf16"]


@pytest.fixture(scope="module")
def runner():
    return load_runner(FIXTURE, backend="mock", max_seq_len=64, max_batch_size=4,
                       max_prefill_tokens=32)


def _decode_graph(runner) -> list[str]:
    """The kernels of the decode graph a 2-sequence step replays."""
    dev = runner.backend
    runner.execute([SeqChunk(7, [1, 2, 3, 4, 5], 0, [0], GREEDY,
                             history=PenaltyHistory([1, 2, 3, 4, 5])),
                    SeqChunk(9, [1, 2], 0, [1], GREEDY, history=PenaltyHistory([1, 2]))])
    dev.drain_launches()
    dev.graph_launches.clear()
    runner.execute([SeqChunk(7, [3], 5, [0], GREEDY), SeqChunk(9, [4], 2, [1], GREEDY)])
    assert dev.drain_launches() == []  # nothing launched outside the graph
    (replay,) = dev.graph_launches
    return [r.func for r in replay.graph]


def test_decode_graph_holds_both_mixers_per_layer_type(runner):
    names = _decode_graph(runner)
    assert names[:1] == ["embed_rmsnorm_offset_bf16"]  # the lookup in the first norm
    body = LINEAR_DECODE + MLP + LINEAR_DECODE + MLP + FULL_DECODE + MLP
    assert names[1:1 + len(body)] == body
    fused = [r for r in runner.backend.graph_launches[0].graph
             if r.func == "gated_deltanet_decode_bf16"]
    # a cluster of GDN_DECODE_SPLIT blocks per (value head, row), each of whole warps:
    # tiny-qwen3_5's 8 value heads of 32 and key dim 32 fit one warp a block
    assert [(r.grid, r.block, r.args["num_seqs"]) for r in fused] == [
        ((GDN_DECODE_SPLIT, 8, 2), (32, 1, 1), 2)] * 2
    # the bucket of 2 rows: each row's state slot is its sampler slot, and graph padding
    # would use the pad slot (max_batch_size)
    base = runner.layout.state_slots
    assert runner.host_i32[base:base + 2].tolist() == [runner._slot_of[7], runner._slot_of[9]]
    runner.release(7)
    runner.release(9)


def test_switched_off_paths_run_the_unfused_step_and_the_cuda_core_chunks(monkeypatch):
    monkeypatch.setenv("ATLAS_GDN_FUSED", "0")
    monkeypatch.setenv("ATLAS_GDN_CHUNK_TC", "0")
    unfused = load_runner(FIXTURE, backend="mock", max_seq_len=64, max_batch_size=4,
                          max_prefill_tokens=32)
    body = LINEAR_DECODE_UNFUSED + MLP + LINEAR_DECODE_UNFUSED + MLP + FULL_DECODE + MLP
    assert _decode_graph(unfused)[1:1 + len(body)] == body
    unfused.backend.drain_launches()
    unfused.execute([SeqChunk(3, list(range(1, 9)), 0, [2], GREEDY,
                              history=PenaltyHistory(list(range(1, 9))))])
    chunks = {r.func for r in unfused.backend.drain_launches()}
    assert "gated_delta_chunk_bf16" in chunks and "gated_delta_chunk_tc_bf16" not in chunks


def test_prefill_runs_the_chunked_rule_and_skips_the_kv_cache_of_linear_layers(runner):
    dev = runner.backend
    dev.drain_launches()
    runner.execute([SeqChunk(8, list(range(1, 21)), 0, [1, 2], GREEDY,
                             history=PenaltyHistory(list(range(1, 21))))])
    launches = dev.drain_launches()
    # key dim 32: the chunked rule's products on tensor cores
    chunk = [r for r in launches if r.func == "gated_delta_chunk_tc_bf16"]
    assert len(chunk) == 2 and chunk[0].shared > 0
    conv = [r for r in launches if r.func == "causal_conv1d_silu_bf16"]
    assert [r.grid for r in conv] == [(3, 1, 1)] * 2  # 384 channels, 20 tokens, 1 sequence
    rope = [r for r in launches if r.func == "qk_norm_rope_kv_partial_bf16"]
    assert len(rope) == 1
    assert (rope[0].args["q_pitch"], rope[0].args["rotary_dim"], rope[0].args["norm_offset"]) \
        == (256, 32, 1)
    assert not [r for r in launches if r.func in ("gated_delta_step_bf16",
                                                   "gated_delta_chunk_bf16")]
    runner.release(8)
    assert np.array_equal(sorted(runner._free_slots), list(range(runner.max_batch_size)))
