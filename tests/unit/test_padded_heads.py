"""Heads whose dim no attention kernel is compiled for (Phi-3-mini's 96: tiny-phi3-d96, two
sliding layers of 16 keys) attend padded to D = 128: the K/V pool and the rotated q rows at
128, the projections compact, and every attention launch takes proj_dim 96
(ops.attention.padded_head_dim; docs/kernels.md "Head dims below the kernel's D"). Recorded
on MockGpuBackend: the decode graphs (batch 1 on the long kernel's early rope entry, a batch
on its staged one), a prefill and a mixed step; and what such a model refuses at load."""

from pathlib import Path

import pytest

from atlas.core.sampling import GREEDY
from atlas.model.batch import PenaltyHistory, SeqChunk
from atlas.model.load import StartupError, load_runner
from atlas.runtime.mock import MockGpuBackend
from atlas.runtime.ops import KernelCache, attention
from tests.unit.decode_support import decode_graph

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "tiny-phi3-d96"
WINDOW = 16


def _attention(launches: list) -> list:
    """The launches that read or write attention rows (rotary, attention, combine)."""
    return [r for r in launches if "attn" in r.func or "rope" in r.func]


def _padded(record) -> tuple[int, int]:
    return record.args["head_dim"], record.args["proj_dim"]


def test_padded_head_dims_are_the_multiples_of_16_between_the_compiled_ones():
    assert [attention.padded_head_dim(d) for d in (64, 80, 96, 112, 128, 256)] == [
        64, 128, 128, 128, 128, 256]
    for head_dim in (48, 72, 160):
        with pytest.raises(ValueError, match=f"head_dim={head_dim} unsupported"):
            attention.padded_head_dim(head_dim)


@pytest.mark.parametrize("rows, entry", [(1, "decode_attn_long_rope_early_d128_bf16"),
                                         (3, "decode_attn_long_rope_staged_bf16")])
def test_decode_graphs_launch_the_long_rope_entries_with_proj_dim(rows, entry):
    launches = _attention(decode_graph(FIXTURE, rows))
    assert [r.func for r in launches] == [entry, entry]  # one a layer, merged in-kernel
    for r in launches:
        assert _padded(r) == (128, 96)
        assert r.args["window"] == WINDOW and r.args["scale"] == 96 ** -0.5


def test_prefill_and_mixed_steps_launch_the_padded_entries():
    runner = load_runner(FIXTURE, backend="mock", max_seq_len=64, max_batch_size=4,
                         max_prefill_tokens=32)
    assert runner.kv.cfg.head_dim == 128  # the pool's rows (and bytes a token) at D
    dev = runner.backend
    dev.drain_launches()  # preflight's
    prompt = list(range(3, 23))
    runner.execute([SeqChunk(1, prompt, 0, [0, 1], GREEDY, history=PenaltyHistory(prompt))])
    prefill = _attention(dev.drain_launches())
    assert [r.func for r in prefill] == ["qk_norm_rope_kv_partial_bf16", "prefill_attn_bf16"] * 2
    rope = prefill[0].args
    assert (rope["q_pitch"], rope["rotary_dim"], rope["norm_offset"]) == (96, 96, 0)
    # a decode row beside a prompt chunk: the row on the long kernel, the chunk on prefill
    runner.execute([SeqChunk(1, [5], len(prompt), [0, 1], GREEDY),
                    SeqChunk(2, prompt[:7], 0, [2], GREEDY, history=PenaltyHistory(prompt[:7]))])
    mixed = _attention(dev.drain_launches())
    assert [r.func for r in mixed] == ["qk_norm_rope_kv_partial_bf16", "decode_attn_long_bf16",
                                       "prefill_attn_bf16"] * 2
    assert all(_padded(r) == (128, 96) for r in prefill + mixed)
    assert {r.args["window"] for r in prefill + mixed if "window" in r.args} == {WINDOW}


def test_padded_heads_refuse_the_routes_that_write_no_compact_rows(monkeypatch):
    """Quantized KV pools' attention and the decode kernels but the long one take no
    proj_dim: refused at load by name (an engine within the window, so that nothing binds
    but the padding)."""
    options = dict(backend="host", max_seq_len=WINDOW, max_batch_size=2, max_prefill_tokens=16)
    with pytest.raises(StartupError, match=r"head_dim 96 \(attention computed at 128, "
                                           r"padded\) runs on bf16 KV pools only"):
        load_runner(FIXTURE, kv_cache_dtype="fp8", **options)
    monkeypatch.setenv("ATLAS_DECODE_ATTN_LONG", "0")
    with pytest.raises(StartupError, match="needs the long decode attention kernel"):
        load_runner(FIXTURE, **options)


def test_speculating_runner_verifies_padded_rows_on_the_long_kernel():
    runner = load_runner(FIXTURE, backend="mock", max_seq_len=64, max_batch_size=2,
                         max_prefill_tokens=32, num_draft_tokens=3)
    assert runner.invariant_rows == 0 and not runner.verify_kernel


def test_decode_launches_refuse_a_padded_head_off_the_long_kernel():
    dev = MockGpuBackend()
    kc = KernelCache(dev)
    ptrs = [dev.alloc(1 << 16) for _ in range(9)]
    launch = dict(num_seqs=1, hq=4, hkv=4, head_dim=128, block_size=16, max_blocks=4,
                  num_splits=2, scale=96 ** -0.5)
    with pytest.raises(ValueError, match="padded head runs on the long kernel only"):
        attention.decode_attention(kc, 0, *ptrs, **launch, long=False, proj_dim=96)
    with pytest.raises(ValueError, match="proj_dim=100 must be a positive multiple of 8"):
        attention.decode_attention(kc, 0, *ptrs, **launch, proj_dim=100)
    attention.decode_attention(kc, 0, *ptrs, **launch, proj_dim=96)
    assert [(r.func, r.args["proj_dim"]) for r in dev.drain_launches()] == [
        ("decode_attn_long_bf16", 96)]
