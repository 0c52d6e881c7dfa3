"""The persistent batch-1 decode kernel (ATLAS_PERSISTENT_DECODE=1) in the engine, on the host
backend (its reference is the per-op references composed): the same tokens and logits as the
per-op path, and the models and steps it must leave to that path."""

import re
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from atlas.core.sampling import GREEDY
from atlas.model.batch import PenaltyHistory, SeqChunk
from atlas.model.load import load_runner
from atlas.model.model import persistent_pointers
from atlas.runtime.host import HostBackend
from atlas.runtime.ops import KernelCache, decode_persistent
from atlas.runtime.ops.decode_persistent import PersistentTables, build_tables
from atlas.runtime.ops.matmul_quant import Bf16Linear

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
SOURCE = (Path(__file__).resolve().parents[2] / "kernels" / "hopper" / "common"
          / "decode_persistent.cu")


def _runner(name: str, monkeypatch, persistent: bool):
    monkeypatch.setenv("ATLAS_PERSISTENT_DECODE", "1" if persistent else "0")
    return load_runner(FIXTURES / name, backend="host", max_seq_len=64, max_batch_size=4,
                       max_prefill_tokens=32)


def _decode_logits(runner, prompt: list[int], steps: int) -> tuple[list[int], np.ndarray]:
    """Greedy tokens and f32 logits of `steps` batch-1 decode steps after the prompt."""
    hist = PenaltyHistory(list(prompt))
    out = runner.execute([SeqChunk(1, list(prompt), 0, [0, 1], GREEDY, history=hist)])
    tokens, logits = [out[0]], []
    for i in range(steps):
        pos = len(prompt) + i
        out = runner.execute([SeqChunk(1, [tokens[-1]], pos, [0, 1], GREEDY,
                                       rng_position=i + 1)])
        logits.append(runner.read_logits(1)[0].copy())
        tokens.append(out[0])
    runner.release(1)
    return tokens, np.stack(logits)


@pytest.mark.parametrize("name", ["tiny-qwen3", "tiny-llama"])
def test_persistent_decode_gives_the_per_op_tokens_and_logits(name, monkeypatch):
    """Decode through the persistent kernel across a KV block boundary (block size 16):
    the greedy tokens of the per-op path, logits within f32 rounding of its sums (the
    attention splits differ: the persistent kernel splits by the SM count)."""
    prompt = [5, 9, 200, 17, 3, 3, 8, 41, 7, 12, 99, 4]
    want_tokens, want = _decode_logits(_runner(name, monkeypatch, False), prompt, 8)
    runner = _runner(name, monkeypatch, True)
    assert runner.model.persistent is not None
    got_tokens, got = _decode_logits(runner, prompt, 8)
    assert got_tokens == want_tokens
    np.testing.assert_allclose(got, want, atol=2e-2, rtol=0)
    assert not np.array_equal(got[0], got[-1])  # the steps attend over different keys


def test_models_it_does_not_cover_keep_the_per_op_path(monkeypatch):
    runner = _runner("tiny-qwen3", monkeypatch, True)
    model = runner.model
    assert persistent_pointers(model.dims, model.layers, tensor_parallel=False) is not None
    assert persistent_pointers(model.dims, model.layers, tensor_parallel=True) is None
    # the hybrid families' gated attention and zero-centred norms
    assert persistent_pointers(replace(model.dims, gated_attn=True), model.layers, False) is None
    # a projection not of the model's own widths (a padded or quantized weight)
    lw = model.layers[0]
    assert isinstance(lw.qkv, Bf16Linear)
    bad = replace(lw, qkv=Bf16Linear(lw.qkv.ptr, lw.qkv.n + 8, lw.qkv.k))
    assert persistent_pointers(model.dims, [bad, *model.layers[1:]], False) is None
    # quantized KV pools
    quant = replace(lw, kv_scales=lw.k_cache)
    assert persistent_pointers(model.dims, [quant, *model.layers[1:]], False) is None


def test_a_batch_of_two_keeps_the_per_op_kernels(monkeypatch):
    """Only one-sequence steps run persistent: a two-sequence decode step (its own graph)
    gives the per-op path's tokens."""
    def two(runner) -> list[int]:
        chunks = [SeqChunk(s, p, 0, [s], GREEDY, history=PenaltyHistory(list(p)))
                  for s, p in ((0, [5, 9, 200]), (1, [300, 2, 2, 9]))]
        first = runner.execute(chunks)
        out = runner.execute([SeqChunk(c.seq_id, [r], len(c.token_ids), c.block_table,
                                       GREEDY, rng_position=1) for c, r in zip(chunks, first)])
        return list(out) + list(runner.read_logits(2).reshape(-1)[:64])

    assert two(_runner("tiny-qwen3", monkeypatch, True)) == two(
        _runner("tiny-qwen3", monkeypatch, False))


def test_build_tables_and_the_launch_builder_refuse_what_the_kernel_cannot_do():
    dev = HostBackend()
    row = dict(in_norm=256, qkv_w=512, q_norm=0, k_norm=0, k_cache=768, v_cache=1024,
               o_w=1280, post_norm=1536, gate_up_w=1792, down_w=0)
    with pytest.raises(ValueError, match="layer 0 lacks"):
        build_tables(dev, [row], 4, 2)
    tables = PersistentTables(dev.alloc(80), dev.alloc(24), 1)
    ptr = dev.alloc(4096)
    for head_dim, inter, message in ((96, 64, "head_dim=96"), (64, 60, "inter=60")):
        with pytest.raises(ValueError, match=message):
            decode_persistent.decode_persistent(
                KernelCache(dev), dev.default_stream(), tables, ptr, ptr, ptr, ptr, ptr, ptr,
                ptr, ptr, ptr, ptr, ptr, 64, 4, 2, head_dim, inter, 16, 4, 0.125, 1e-6)


def test_splits_give_every_block_an_attention_item_within_the_partials():
    assert decode_persistent.persistent_splits(132, 16, 33) == 8     # Qwen3-0.6B: 128 items
    assert decode_persistent.persistent_splits(132, 32, 33) == 4     # Llama-1B / Qwen3-8B
    assert decode_persistent.persistent_splits(132, 16, 2) == 2      # the buffers' bound
    assert decode_persistent.persistent_splits(132, 200, 33) == 1


def test_stage_plan_stages_what_fits_shared_memory():
    """Qwen3-0.6B stages every weight phase (qkv and gate/up share a 96 KB buffer, o and down a
    48 KB one); a Llama-1B-like layer its qkv and o only; Qwen3-8B none (all stream)."""
    limit = 227 * 1024 - decode_persistent.STATIC_SHARED_RESERVE

    def plan(hidden, hq, hkv, d, inter, grid=132):
        budget = limit - decode_persistent.base_shared_bytes(hidden, hq, d, inter)
        return decode_persistent.stage_plan(grid, budget, hidden, hq, hkv, d, inter)

    assert plan(1024, 16, 8, 128, 3072) == (96 * 1024, 48 * 1024)
    assert plan(2048, 32, 8, 64, 8192) == (96 * 1024, 64 * 1024)
    assert plan(4096, 32, 8, 128, 12288) == (0, 0)
    # half the blocks (ATLAS_PERSISTENT_BLOCKS=66): twice the rows a block; the 188 KB gate/up
    # slice (which holds qkv's 126 KB too) leaves no room for o's or down's
    assert plan(1024, 16, 8, 128, 3072, grid=66) == (47 * 4096, 0)


def test_the_sync_layout_mirrors_the_kernel():
    """decode_persistent.cu's ticket word and its per-layer edge counts are what sync_words
    sizes the buffer by; the exit ticket and the counts sit past the split tickets."""
    src = SOURCE.read_text()
    assert f"constexpr int kTicketWord = {decode_persistent.TICKET_WORD};" in src
    assert f"constexpr int kTableSlots = {decode_persistent.TABLE_SLOTS};" in src
    (names,) = re.findall(r"enum EdgeCount \{([^}]*)\}", src)
    assert len([n for n in names.split(",") if n.strip()]) - 1 == decode_persistent.EDGE_COUNTS
    for hq in (1, 16, 32, 40, 64):
        exit_word = decode_persistent.exit_word(hq)
        assert exit_word >= decode_persistent.TICKET_WORD + hq and exit_word % 32 == 0
        assert decode_persistent.sync_words(28, hq, 8) == exit_word + 32 + 28 * (hq + 16 + 4)


@pytest.mark.parametrize("grid", [1, 3, 7, 132, 200, 1000])
@pytest.mark.parametrize("hq,hkv,d", [(16, 8, 128), (32, 8, 64), (16, 2, 256), (6, 2, 128)])
def test_every_head_tile_waits_for_exactly_the_blocks_that_write_it(grid, hq, hkv, d):
    """The counter schedule's bookkeeping: an attention item waits on its head tile's count
    for tile_blocks arrivals; the blocks that arrive on it (arrive_tiles) are exactly that
    many, every tile has one, and they are the blocks holding its rows."""
    n = (hq + 2 * hkv) * d
    per = -(-n // grid)
    arrivals = [0] * (hq + 2 * hkv)
    for blk in range(grid):
        rows = range(min(n, blk * per), min(n, blk * per + per))
        touched = decode_persistent.tiles_touched(blk, d, n, grid)
        assert set(touched) == {r // d for r in rows}
        for t in touched:
            arrivals[t] += 1
    assert arrivals == [decode_persistent.tile_blocks(t, d, n, grid) for t in range(len(arrivals))]
    assert min(arrivals) >= 1


@pytest.mark.parametrize("env,schedule", [({}, 1), ({"ATLAS_PERSISTENT_FLAGS": "0"}, 0),
                                          ({"ATLAS_PERSISTENT_FLAGS": "1"}, 1)])
def test_the_launch_takes_the_schedule_the_switch_asks_for(env, schedule):
    """ATLAS_PERSISTENT_FLAGS=0 restores the device-wide barriers (schedule 0); unset, the
    readiness counts (1). One block per SM either way."""
    from atlas.runtime.mock import MockGpuBackend
    from atlas.runtime.ops.routes import KernelRoutes

    mock = MockGpuBackend()
    kc = KernelCache(mock, KernelRoutes.from_env(env))
    tables = PersistentTables(mock.alloc(80), mock.alloc(4096), 1)
    ptr = mock.alloc(1 << 16)
    decode_persistent.decode_persistent(
        kc, 0, tables, ptr, ptr, ptr, ptr, ptr, ptr, ptr, ptr, ptr, ptr, ptr, 1024, 16, 8, 128,
        3072, 16, 33, 0.088, 1e-6)
    (launch,) = mock.drain_launches()
    assert launch.args["schedule"] == schedule
    assert launch.grid == (mock.device_facts().sm_count, 1, 1)
