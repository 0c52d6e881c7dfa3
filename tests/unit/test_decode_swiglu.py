"""A decode batch's dense MLP on the decode GEMM ends gate_up with its SwiGLU
(gemm_decode_sm90_swiglu_*, ATLAS_DECODE_GEMM_SWIGLU): the launch sequence a 12-row step
replays (no silu_mul; the switch restores it), and the values it produces on the CPU
reference backend, which must equal the unfused path's to the bit (the two are specified
alike), on the tiny Qwen3 fixture with real safetensors."""

from pathlib import Path

import pytest

from atlas.core.sampling import GREEDY
from atlas.model.batch import PenaltyHistory, SeqChunk, TokenLogprobs
from atlas.model.load import load_runner
from atlas.runtime.host import HostBackend
from atlas.runtime.mock import MockGpuBackend

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "tiny-qwen3"
ROWS = 12  # past the GEMV's 8 rows: the decode GEMM's route
HOPPER_MODULES = ["gemm", "gemm_sm90", "gemv", "gemv_mma", "gemm_decode_sm90"]


def report_modules(monkeypatch, modules: list[str]):
    """The mock and the CPU reference backend report an sm_90a PTX set's `modules`, so the
    decode GEMM route (and its gated entries) is taken as on an H200."""
    for cls in (MockGpuBackend, HostBackend):
        monkeypatch.setattr(cls, "module_names", property(lambda self: modules))
    monkeypatch.setattr(MockGpuBackend, "set_max_dynamic_shared", lambda self, h, n: None,
                        raising=False)
    return monkeypatch


@pytest.fixture
def hopper(monkeypatch):
    return report_modules(monkeypatch, HOPPER_MODULES)


def _chunks(logprobs: int = -1) -> list[SeqChunk]:
    """ROWS new sequences of one token each (a decode-shaped step: one row per sequence)."""
    return [SeqChunk(i, [3 + 5 * i], 0, [i], GREEDY, logprobs=logprobs,
                     history=PenaltyHistory([])) for i in range(ROWS)]


def _mlp_launches(monkeypatch, swiglu: str) -> list[str]:
    monkeypatch.setenv("ATLAS_DECODE_GEMM_SWIGLU", swiglu)
    runner = load_runner(FIXTURE, backend="mock", max_seq_len=64, max_batch_size=16,
                         max_prefill_tokens=32)
    dev = runner.backend
    dev.drain_launches()
    dev.graph_launches.clear()
    runner.execute(_chunks())
    names = [r.func for g in dev.graph_launches for r in g.graph] + [
        r.func for r in dev.drain_launches()]
    return names


def test_decode_step_gate_up_ends_with_the_swiglu(hopper) -> None:
    names = _mlp_launches(hopper, "1")
    layers = 2
    fused = [n for n in names if n.startswith("gemm_decode_sm90_swiglu_bf16")]
    assert len(fused) == layers and not any(n.startswith("silu_mul") for n in names)
    # each is followed by the down projection on the decode GEMM, reading the activation
    for i, name in enumerate(names):
        if name in fused:
            assert names[i + 1].startswith("gemm_decode_sm90_bf16")


def test_switch_restores_silu_mul(hopper) -> None:
    names = _mlp_launches(hopper, "0")
    assert names.count("silu_mul_early_bf16") == 2  # a batched step: the early entry
    assert not any(n.startswith("gemm_decode_sm90_swiglu") for n in names)


def _logprobs(monkeypatch, swiglu: str) -> list[TokenLogprobs]:
    monkeypatch.setenv("ATLAS_DECODE_GEMM_SWIGLU", swiglu)
    runner = load_runner(FIXTURE, backend="host", max_seq_len=64, max_batch_size=16,
                         max_prefill_tokens=32)
    out = runner.execute(_chunks(logprobs=5))
    assert all(isinstance(r, TokenLogprobs) for r in out)
    return out


def test_fused_and_unfused_steps_agree_bit_for_bit(hopper) -> None:
    fused, unfused = _logprobs(hopper, "1"), _logprobs(hopper, "0")
    assert fused == unfused
    # the rows are distinct sequences: a wiring slip (rows or halves crossed) would not hide
    assert len({r.top for r in fused}) > 1
