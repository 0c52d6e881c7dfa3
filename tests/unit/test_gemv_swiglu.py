"""Batch-1 decode's gate_up GEMV that ends with its SwiGLU (ATLAS_GEMV_SWIGLU, on by
default): which entries a batch-1 step launches and that the switch restores the earlier
launches (MockGpuBackend), that the host reference of the fused entry is its unfused pair
(GEMV, then silu_mul) bit for bit, and that a dense model's batch-1 decode
gives the same logprobs bit for bit with the switch on and off (HostBackend, real
safetensors fixtures)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from atlas.core.sampling import GREEDY
from atlas.model.batch import PenaltyHistory, SeqChunk, TokenLogprobs
from atlas.model.load import load_runner
from atlas.runtime.cases.gemv import UNFUSED
from atlas.runtime.cases.gemv_swiglu import gemv_swiglu_case, gemv_swiglu_cases
from atlas.runtime.host import HostBackend
from atlas.runtime.kernel_check import check, execute
from atlas.runtime.mock import MockGpuBackend
from atlas.runtime.ops import KernelCache, matmul
from atlas.runtime.ops.routes import KernelRoutes

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"

#: a batch-1 layer's MLP launches after the attention's o_proj: with the switch off, on
MLP_OFF = ["add_rmsnorm_bf16", "gemv_bf16_single", "gemv_silu_bf16_single"]
MLP_ON = ["add_rmsnorm_bf16", "gemv_swiglu_bf16_single", "gemv_bf16_single"]


def _runner(monkeypatch, backend: str, name: str, swiglu: str):
    monkeypatch.setenv("ATLAS_GEMV_SWIGLU", swiglu)
    return load_runner(FIXTURES / name, backend=backend, max_seq_len=64, max_batch_size=4,
                       max_prefill_tokens=32)


def _decode_graph(runner):
    """The launch records of one batch-1 decode step (one graph replay) after a 5-token
    prefill (a hybrid model's recurrent state starts at position 0)."""
    dev = runner.backend
    prompt = [1, 2, 3, 4, 5]
    runner.execute([SeqChunk(7, prompt, 0, [0], GREEDY, history=PenaltyHistory(prompt))])
    dev.drain_launches()
    dev.graph_launches.clear()
    runner.execute([SeqChunk(7, [3], 5, [0], GREEDY, rng_position=1)])
    (replay,) = dev.graph_launches
    runner.release(7)
    return replay.graph


@pytest.mark.parametrize("swiglu", ["1", "0"])
def test_batch_one_mlp_launches(monkeypatch, swiglu) -> None:
    """Each layer's MLP at batch 1: gate_up ends with its SwiGLU into act and the down GEMV
    reads act (plain x); ATLAS_GEMV_SWIGLU=0 gives the launches before it (the SwiGLU in
    down's x load: tiny-qwen3's I = 384 <= FUSED_SILU_MAX_K)."""
    runner = _runner(monkeypatch, "mock", "tiny-qwen3", swiglu)
    graph = _decode_graph(runner)
    names = [r.func for r in graph]
    want = MLP_ON if swiglu == "1" else MLP_OFF
    starts = [i for i in range(len(names)) if names[i:i + len(want)] == want]
    assert len(starts) == runner.cfg.num_hidden_layers
    if swiglu == "0":
        assert not any("swiglu" in n for n in names)
        return
    assert not any("silu" in n for n in names if "swiglu" not in n)
    inter, hidden, bufs = runner.cfg.intermediate_size, runner.cfg.hidden_size, runner.bufs
    for i in starts:
        gate_up, down = graph[i + len(want) - 2], graph[i + len(want) - 1]
        assert gate_up.grid[0] == -(-inter // 2)  # two features a block
        assert (gate_up.args["act"], gate_up.args["n"], gate_up.args["k"]) == (
            bufs.act, 2 * inter, hidden)
        assert (down.args["x"], down.args["n"], down.args["k"]) == (bufs.act, hidden, inter)


def test_the_swiglu_gemv_route_is_one_row_on_the_single_row_gemv() -> None:
    """Only one row takes it (more go to the ring GEMV's [gate | up], then down's fused x
    load), n must split in halves, and the switch turns it off."""
    kc = KernelCache(MockGpuBackend(), routes=KernelRoutes())
    assert matmul.fuses_gate_up_swiglu(kc, 1, 2 * 12288, 4096)
    assert not matmul.fuses_gate_up_swiglu(kc, 2, 2 * 12288, 4096)
    assert not matmul.fuses_gate_up_swiglu(kc, 1, 2 * 12288 + 1, 4096)
    off = KernelCache(MockGpuBackend(), routes=KernelRoutes.from_env({"ATLAS_GEMV_SWIGLU": "0"}))
    assert not matmul.fuses_gate_up_swiglu(off, 1, 2 * 12288, 4096)
    with pytest.raises(ValueError, match="even n"):
        matmul.gemv_swiglu(kc, 0, 0x1000, 0x2000, 0x3000, 1, 6145, 1024)


def test_fused_reference_is_the_gemv_then_silu_mul() -> None:
    """The host reference of the fused entry equals its unfused twin (the plain GEMV, then
    silu_mul) bit for bit, on random-valued rows (not the exact-sum inputs of the check
    cases) with a ragged K."""
    rng = np.random.default_rng(7)
    case = gemv_swiglu_case(rng, 96, 1032)
    for name in ("w", "x"):  # any bf16 values: the reference must still hold the twin
        bits = rng.integers(0x3c00, 0x4000, case.inputs[name].shape).astype(np.uint16)
        case.inputs[name] = bits | rng.choice([0, 0x8000], bits.shape).astype(np.uint16)
    got = execute(HostBackend(), case)
    assert np.array_equal(got["act"], got["act" + UNFUSED])
    assert len(np.unique(got["act"])) > 48  # not a degenerate row


CASES = gemv_swiglu_cases(np.random.default_rng(1234))


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_check_cases_hold_on_the_host(case) -> None:
    """The device check's cases (`-k "gemv swiglu"`, `-k "gemv geglu"`: Gemma 3's GELU GLU)
    on the references: act against the float64 oracle and, where the activation kernel takes
    I, bit for bit against the unfused twin."""
    result = check(HostBackend(), case)
    assert result.passed, result.detail
    assert case.name.startswith(("gemv swiglu", "gemv geglu"))


def _decode_logprobs(runner, steps: int = 4) -> list[TokenLogprobs]:
    """A 6-token prompt, then `steps` batch-1 decode steps feeding back the greedy token,
    each with its top-5 logprobs."""
    prompt = [5, 9, 200, 17, 44, 3]
    out = runner.execute([SeqChunk(1, prompt, 0, [0, 1], GREEDY, logprobs=5,
                                   history=PenaltyHistory(prompt))])
    for i in range(steps):
        out += runner.execute([SeqChunk(1, [out[-1].token], len(prompt) + i, [0, 1], GREEDY,
                                        rng_position=i + 1, logprobs=5)])
    runner.release(1)
    return out


@pytest.mark.parametrize("name", ["tiny-qwen3", "tiny-llama"])
def test_batch_one_decode_is_bit_identical_with_the_switch(monkeypatch, name) -> None:
    """The model's batch-1 decode steps give the same logprobs with ATLAS_GEMV_SWIGLU on and
    off (on the host backend, which runs the references)."""
    on = _decode_logprobs(_runner(monkeypatch, "host", name, "1"))
    off = _decode_logprobs(_runner(monkeypatch, "host", name, "0"))
    assert all(isinstance(r, TokenLogprobs) for r in on)
    assert on == off
