"""What a speculating runner launches (MockGpuBackend, no numerics): verification steps
replay graphs of their own, on batch 1's split count, in which each row attends to the keys
its sequence's earlier rows append: by default every row's K/V is appended by one launch
before decode attention reads it; under ATLAS_DECODE_ATTN_FUSED_VERIFY=1 the rope-fused
kernel computes those keys itself (up to ops.attention.DECODE_ROPE_MAX_STEP_KEYS of one
sequence); and no single-row-only fusion runs in plain decode either, so a verification row
computes what the decode row at its position does."""

from pathlib import Path

import pytest

from atlas.core.sampling import GREEDY
from atlas.model.batch import PenaltyHistory, SeqChunk
from atlas.model.load import load_runner
from atlas.runtime.ops import attention

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "tiny-qwen3"


@pytest.fixture(scope="module")
def runner():
    return load_runner(FIXTURE, backend="mock", max_seq_len=64, max_batch_size=4,
                       max_prefill_tokens=32, num_draft_tokens=3, batch_invariant=False)


def replayed(runner, chunks):
    dev = runner.backend
    dev.drain_launches()
    dev.graph_launches.clear()
    runner.execute(chunks)
    assert dev.drain_launches() == []   # nothing outside the graph
    (replay,) = dev.graph_launches
    return replay.graph


def test_plain_decode_keeps_its_norm_launches_when_speculating(runner):
    """A speculating runner's plain batch-1 step runs the same add + RMSNorm launches as any
    decode step (two a layer, the first layer's without the add but with the embedding
    lookup, the final norm)."""
    names = [r.func for r in replayed(runner, [SeqChunk(
        1, [3], 5, [0], GREEDY, history=PenaltyHistory([1, 2, 3, 4, 5]))])]
    runner.release(1)
    layers = runner.cfg.num_hidden_layers
    assert names.count("add_rmsnorm_bf16") == 2 * layers
    assert names.count("embed_rmsnorm_bf16") == 1 and "rmsnorm_bf16" not in names
    assert names.count("decode_attn_rope_bf16") == layers


def test_verification_appends_the_drafts_keys_before_attention_by_default(runner):
    kv_heads = runner.model.dims.kv_heads
    graph = replayed(runner, [SeqChunk(2, [3, 4, 5, 6], 5, [0], GREEDY, num_draft=3,
                                       history=PenaltyHistory([1, 2, 3, 4, 5]))])
    runner.release(2)
    names = [r.func for r in graph]
    layers = runner.cfg.num_hidden_layers
    assert runner.invariant_rows >= 4 and 4 in runner.verify_graphs
    assert "decode_attn_rope_bf16" not in names and names.count("qk_norm_rope_kv_bf16") == layers
    attn = [r for r in graph if r.func.startswith("decode_attn")]
    assert len(attn) == layers
    assert all(r.grid[1:] == (kv_heads, 4) and r.args["num_splits"] ==
               runner.limits.decode_splits(1, kv_heads) for r in attn)
    assert not [n for n in names if n.endswith("_single")]   # 4-row products throughout


def test_verification_fuses_the_drafts_keys_into_attention_when_asked(monkeypatch):
    """ATLAS_DECODE_ATTN_FUSED_VERIFY=1: the session-6 fused verification (the A/B)."""
    monkeypatch.setenv("ATLAS_DECODE_ATTN_FUSED_VERIFY", "1")
    fused = load_runner(FIXTURE, backend="mock", max_seq_len=64, max_batch_size=4,
                        max_prefill_tokens=32, num_draft_tokens=3, batch_invariant=False)
    kv_heads = fused.model.dims.kv_heads
    graph = replayed(fused, [SeqChunk(2, [3, 4, 5, 6], 5, [0], GREEDY, num_draft=3,
                                      history=PenaltyHistory([1, 2, 3, 4, 5]))])
    names = [r.func for r in graph]
    assert fused.invariant_rows >= 4 and 4 in fused.verify_graphs
    assert "qk_norm_rope_kv_bf16" not in names and "decode_attn_bf16" not in names
    attn = [r for r in graph if r.func == "decode_attn_rope_bf16"]
    assert len(attn) == fused.cfg.num_hidden_layers
    assert all(r.grid == (fused.limits.decode_splits(1, kv_heads), kv_heads, 4) for r in attn)
    assert not [n for n in names if n.endswith("_single")]   # 4-row products throughout


def test_verification_past_the_fused_kernels_keys_appends_kv_before_attention() -> None:
    drafts = attention.DECODE_ROPE_MAX_STEP_KEYS   # K + 1 keys of one sequence: one too many
    many = load_runner(FIXTURE, backend="mock", max_seq_len=64, max_batch_size=2,
                       max_prefill_tokens=32, num_draft_tokens=drafts, batch_invariant=False)
    rows = drafts + 1
    graph = replayed(many, [SeqChunk(3, list(range(3, 3 + rows)), 5, [0], GREEDY,
                                     num_draft=drafts,
                                     history=PenaltyHistory([1, 2, 3, 4, 5]))])
    many.release(3)
    names = [r.func for r in graph]
    layers = many.cfg.num_hidden_layers
    assert "decode_attn_rope_bf16" not in names
    assert names.count("qk_norm_rope_kv_bf16") == names.count("decode_attn_bf16") == layers


def test_a_persistent_plain_step_drops_the_claim(monkeypatch):
    """ATLAS_PERSISTENT_DECODE=1: a plain batch-1 step runs the persistent kernel, whose GEMV
    sums are its own, so no verification row is claimed to compute what it does."""
    monkeypatch.setenv("ATLAS_PERSISTENT_DECODE", "1")
    persistent = load_runner(FIXTURE, backend="mock", max_seq_len=64, max_batch_size=2,
                             max_prefill_tokens=32, num_draft_tokens=2)
    assert persistent.model.persistent is not None and persistent.invariant_rows == 0


def test_a_hybrid_verifies_in_a_graph_through_the_decode_kernel():
    """tiny-qwen3_5 (two Gated-DeltaNet layers): a verification of 3 drafts replays a
    captured graph whose linear layers run the fused decode kernel over the 4 rows (a
    cluster per value head and row; the run is its first row's), never the chunked form,
    and whose rows name 4 out slots apart from the sequence's (the state after each token)."""
    hybrid = load_runner(FIXTURE.parent / "tiny-qwen3_5", backend="mock", max_seq_len=64,
                         max_batch_size=2, max_prefill_tokens=32, num_draft_tokens=3)
    assert 4 in hybrid.verify_graphs
    hybrid.execute([SeqChunk(2, [1, 2, 3, 4, 5], 0, [0], GREEDY,
                             history=PenaltyHistory([1, 2, 3, 4, 5]))])
    graph = replayed(hybrid, [SeqChunk(2, [3, 4, 5, 6], 5, [0], GREEDY, num_draft=3)])
    la = hybrid.cfg.linear_attention
    gdn = [r for r in graph if r.func == "gated_deltanet_decode_bf16"]
    assert len(gdn) == hybrid.cfg.layer_types.count("linear_attention")
    assert all(r.grid == (4, la.num_value_heads, 4) for r in gdn)
    assert not [r for r in graph if r.func.startswith("gated_delta_chunk")]
    lay, i32 = hybrid.layout, hybrid.host_i32
    slots, outs = i32[lay.state_slots:lay.state_slots + 4], i32[lay.state_out:lay.state_out + 4]
    assert len(set(slots)) == 1 and slots[0] not in outs and len(set(outs)) == 4
    hybrid.release(2)


def test_a_row_invariant_runner_keeps_batch_one_attention_at_every_row_count(monkeypatch):
    """Up to invariant_rows rows a step must compute what batch 1 computes, so its decode
    attention never takes the tensor-core kernel's batch routing (ATLAS_DECODE_ATTN_LONG_MIN
    _BATCH, 2 by default): every launch of the speculating runner's captured steps passes
    long=False there, and a runner without speculation leaves the routing to the batch."""
    seen: list[tuple[int, object]] = []
    real = attention.decode_attention_rope

    def spy(*args, **kwargs):
        seen.append((args[16], kwargs.get("long")))  # num_seqs, long
        return real(*args, **kwargs)

    monkeypatch.setattr(attention, "decode_attention_rope", spy)
    spec = load_runner(FIXTURE, backend="mock", max_seq_len=64, max_batch_size=4,
                       max_prefill_tokens=32, num_draft_tokens=3, batch_invariant=False)
    assert spec.invariant_rows >= 4 and spec.row_invariant(2) and not spec.row_invariant(0)
    spec.execute([SeqChunk(i, [3], 5, [0], GREEDY, history=PenaltyHistory([1, 2, 3, 4, 5]))
                  for i in (1, 2)])
    assert (2, False) in seen
    assert all(long is False for rows, long in seen if rows <= spec.invariant_rows)
    seen.clear()
    plain = load_runner(FIXTURE, backend="mock", max_seq_len=64, max_batch_size=4,
                        max_prefill_tokens=32)
    assert plain.invariant_rows == 0
    plain.execute([SeqChunk(i, [3], 5, [0], GREEDY, history=PenaltyHistory([1, 2, 3, 4, 5]))
                   for i in (1, 2)])
    assert seen and all(long is None for _, long in seen)
