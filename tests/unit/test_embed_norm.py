"""The embedding lookup in the step's first norm (embed_rmsnorm_*, ATLAS_EMBED_NORM, on by
default): which launches a decode step and a prefill start with (MockGpuBackend), and that
the model's prefill and batch-1 decode give the same logprobs bit for bit with the switch on
and off (HostBackend, real safetensors fixtures: plain, (1 + w), one-rounding and scaled
embedding families)."""

from __future__ import annotations

from pathlib import Path

import pytest

from atlas.core.sampling import GREEDY
from atlas.model.batch import PenaltyHistory, SeqChunk, TokenLogprobs
from atlas.model.load import load_runner
from atlas.runtime.mock import MockGpuBackend
from atlas.runtime.ops import KernelCache, norm
from atlas.runtime.ops.routes import KernelRoutes
from test_gemv_swiglu import _decode_logprobs

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def _runner(monkeypatch, backend: str, name: str, switch: str):
    monkeypatch.setenv("ATLAS_EMBED_NORM", switch)
    return load_runner(FIXTURES / name, backend=backend, max_seq_len=64, max_batch_size=4,
                       max_prefill_tokens=32)


def _first_launches(runner) -> tuple[list[str], list[str]]:
    """The kernel names a 5-token prefill (eager) and then a batch-1 decode step (its graph)
    start with, up to their first projection."""
    dev = runner.backend
    prompt = [1, 2, 3, 4, 5]
    dev.drain_launches()
    runner.execute([SeqChunk(7, prompt, 0, [0], GREEDY, history=PenaltyHistory(prompt))])
    prefill = [r.func for r in dev.drain_launches()]
    dev.graph_launches.clear()
    runner.execute([SeqChunk(7, [3], 5, [0], GREEDY, rng_position=1)])
    (replay,) = dev.graph_launches
    runner.release(7)
    decode = [r.func for r in replay.graph]

    def head(names: list[str]) -> list[str]:
        first = next(i for i, n in enumerate(names) if "gemv" in n or "gemm" in n)
        return [n for n in names[:first] if "step_inputs" not in n]

    return head(prefill), head(decode)


@pytest.mark.parametrize("switch", ["1", "0"])
def test_decode_steps_start_with_the_fused_lookup(monkeypatch, switch) -> None:
    """A decode step's graph starts with embed_rmsnorm (no embedding launch) with the switch
    on, with embedding then rmsnorm with it off; a 5-token prefill fuses too (5 rows), and
    Qwen3.5's (1 + w) weights take the offset entry."""
    for name, entry in (("tiny-qwen3", "embed_rmsnorm_bf16"),
                        ("tiny-qwen3_5", "embed_rmsnorm_offset_bf16")):
        prefill, decode = _first_launches(_runner(monkeypatch, "mock", name, switch))
        want = [entry] if switch == "1" else ["embedding_bf16", entry.removeprefix("embed_")]
        assert decode == want, name
        assert prefill == want, name


def test_the_route_takes_decode_batches_only() -> None:
    """Up to RMSNORM_LATENCY_ROWS rows (one block a row); none, or a prefill chunk past it,
    keeps the two launches; ATLAS_EMBED_NORM=0 turns it off; a launch past it is refused."""
    kc = KernelCache(MockGpuBackend(), routes=KernelRoutes())
    assert norm.embed_norm_fuses(kc, 1) and norm.embed_norm_fuses(kc, norm.RMSNORM_LATENCY_ROWS)
    assert not norm.embed_norm_fuses(kc, 0)
    assert not norm.embed_norm_fuses(kc, norm.RMSNORM_LATENCY_ROWS + 1)
    off = KernelCache(MockGpuBackend(), routes=KernelRoutes.from_env({"ATLAS_EMBED_NORM": "0"}))
    assert not norm.embed_norm_fuses(off, 1)
    with pytest.raises(ValueError, match="one block a row"):
        norm.embed_rmsnorm(kc, 0, 0x1000, 0x2000, 0x3000, 0x4000, 0x5000,
                           norm.RMSNORM_LATENCY_ROWS + 1, 1024, 100, 1e-6)


@pytest.mark.parametrize("name", ["tiny-qwen3", "tiny-qwen3_5", "tiny-gpt-oss", "tiny-gemma3"])
def test_steps_are_bit_identical_with_the_switch(monkeypatch, name) -> None:
    """Prefill and decode logprobs with ATLAS_EMBED_NORM on and off (host references: the
    lookup then the norm either way), for the plain, (1 + w), one-rounding and scaled-
    embedding families."""
    on = _decode_logprobs(_runner(monkeypatch, "host", name, "1"))
    off = _decode_logprobs(_runner(monkeypatch, "host", name, "0"))
    assert all(isinstance(r, TokenLogprobs) for r in on)
    assert on == off
