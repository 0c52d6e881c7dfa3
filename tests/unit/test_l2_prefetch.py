"""The next layer's weights asked into L2 by batch-1 decode attention (ops/l2_prefetch.py,
ATLAS_L2_PREFETCH_NEXT): which bytes, which launches carry them, and that the switch is
off by default."""

from __future__ import annotations

from pathlib import Path

import pytest

from atlas.core.sampling import GREEDY
from atlas.model.batch import PenaltyHistory, SeqChunk
from atlas.model.load import load_runner
from atlas.runtime.mock import MockGpuBackend
from atlas.runtime.ops import KernelCache, attention_long, l2_prefetch
from atlas.runtime.ops.matmul_quant import Bf16Linear
from atlas.runtime.ops.routes import KernelRoutes

from test_attention_long import _HopperMock

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "tiny-qwen3"


def test_weights_of_takes_a_bf16_prefix_in_16_byte_units() -> None:
    small = Bf16Linear(0x1000, 96, 64)
    assert l2_prefetch.weights_of(small) == (0x1000, 2 * 96 * 64)
    big = Bf16Linear(0x2000, 151_936, 2_048)   # an LM head: its first MAX_BYTES
    assert l2_prefetch.weights_of(big) == (0x2000, l2_prefetch.MAX_BYTES)
    assert l2_prefetch.weights_of(Bf16Linear(0x3000, 3, 5)) == (0x3000, 16)  # 30 bytes
    assert l2_prefetch.weights_of(None) == l2_prefetch.NONE == (0, 0)


def test_route_is_off_unless_asked() -> None:
    assert not KernelRoutes.from_env({}).l2_prefetch_next
    assert KernelRoutes.from_env({"ATLAS_L2_PREFETCH_NEXT": "1"}).l2_prefetch_next


def _decode_attention_launches(monkeypatch, env: dict[str, str]):
    """A batch-1 decode step of the tiny Qwen3 on a mock device whose set has attention_long:
    the runner and its attention launches (the early entry, one a layer)."""
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(MockGpuBackend, "module_names",
                        property(lambda self: ["attention_long"]))
    runner = load_runner(FIXTURE, backend="mock", max_seq_len=64, max_batch_size=2,
                         max_prefill_tokens=32, batch_invariant=False)
    dev = runner.backend
    dev.drain_launches()
    dev.graph_launches.clear()
    runner.execute([SeqChunk(5, [3], 5, [0], GREEDY, history=PenaltyHistory([1, 2, 3, 4, 5]))])
    runner.release(5)
    launches = [r for g in dev.graph_launches for r in g.graph] + dev.drain_launches()
    return runner, [r for r in launches if r.func.startswith("decode_attn_long_rope_early")]


def test_each_layer_asks_for_the_next_projection_then_the_lm_head(monkeypatch) -> None:
    runner, attn = _decode_attention_launches(monkeypatch, {"ATLAS_L2_PREFETCH_NEXT": "1"})
    layers = runner.model.layers
    assert len(attn) == len(layers) >= 2
    want = [(nxt.qkv.ptr, nxt.qkv.nbytes) for nxt in layers[1:]]
    lm_head = runner.model.lm_head
    want.append((lm_head.ptr, min(lm_head.nbytes, l2_prefetch.MAX_BYTES)))
    assert [(r.args["l2_next"], r.args["l2_next_bytes"]) for r in attn] == want


def test_without_the_route_no_launch_prefetches(monkeypatch) -> None:
    monkeypatch.delenv("ATLAS_L2_PREFETCH_NEXT", raising=False)
    _, attn = _decode_attention_launches(monkeypatch, {})
    assert attn and {(r.args["l2_next"], r.args["l2_next_bytes"]) for r in attn} == {(0, 0)}


def test_misaligned_prefetch_is_refused() -> None:
    dev = _HopperMock()
    ptrs = [dev.alloc(1 << 12) for _ in range(14)]
    with pytest.raises(ValueError, match="16-byte units"):
        attention_long.decode_attention_long_rope(
            KernelCache(dev), 0, *ptrs, 1, 32, 8, 128, 16, 64, 5, 0.088, 1e-6,
            l2_next=l2_prefetch.L2Prefetch(ptrs[0], 30))
