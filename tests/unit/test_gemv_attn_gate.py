"""Batch-1 decode of gated full attention (Qwen3.5, Qwen3-Next) with the sigmoid output gate
in the o_proj GEMV's x load (ATLAS_GEMV_ATTN_GATE, on by default): the launches of a batch-1
step with the switch on and off (MockGpuBackend), the check cases on the references, and
bit-identical decode logprobs with the switch on and off (HostBackend, the hybrid fixtures)."""

from __future__ import annotations

import numpy as np
import pytest

from atlas.runtime.cases.gemv_attn_gate import gemv_attn_gate_cases
from atlas.runtime.host import HostBackend
from atlas.runtime.kernel_check import check
from test_gemv_swiglu import _decode_graph, _decode_logprobs, _runner

GATE = "sigmoid_gate_mul_bf16"
#: the o_proj launch with the gate on load
FOLDED = "gemv_attn_gate_bf16_single"


@pytest.mark.parametrize("switch", ["1", "0"])
def test_batch_one_o_proj_takes_the_gate(monkeypatch, switch) -> None:
    """tiny-qwen3_5 (one gated full-attention layer of 2 heads of 128): its o_proj reads the
    gate of head h at qkv + (2 h + 1) x 128 values on load; switched off, sigmoid_gate_mul
    runs before the plain o_proj as before."""
    monkeypatch.setenv("ATLAS_GEMV_ATTN_GATE", switch)
    runner = _runner(monkeypatch, "mock", "tiny-qwen3_5", "1")
    graph = _decode_graph(runner)
    names = [r.func for r in graph]
    if switch == "0":
        assert names.count(GATE) == 1 and FOLDED not in names
        return
    assert GATE not in names
    (o_proj,) = [r for r in graph if r.func == FOLDED]
    d = runner.cfg.head_dim
    assert (o_proj.args["x"], o_proj.args["gate"]) == (runner.bufs.attn, runner.bufs.qkv + 2 * d)
    assert (o_proj.args["head_dim"], o_proj.args["head_pitch"], o_proj.args["k"]) == (
        d, 2 * d, runner.cfg.num_attention_heads * d)


CASES = gemv_attn_gate_cases(np.random.default_rng(1234))


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_check_cases_hold_on_the_host(case) -> None:
    """The device check's cases (`-k "gemv attn_gate"`): the fused entry against the float64
    oracle and bit for bit against sigmoid_gate_mul, then the plain GEMV."""
    result = check(HostBackend(), case)
    assert result.passed, result.detail
    assert "gemv attn_gate" in case.name


@pytest.mark.parametrize("name", ["tiny-qwen3_5", "tiny-qwen3_next"])
def test_hybrid_decode_is_bit_identical_with_the_switch(monkeypatch, name) -> None:
    """A hybrid model's batch-1 decode gives the same logprobs with the gate in o_proj's x
    load and with its own launch (tiny-qwen3_5's dense MLP also takes the SwiGLU GEMV)."""
    runs = []
    for switch in ("1", "0"):
        monkeypatch.setenv("ATLAS_GEMV_ATTN_GATE", switch)
        runs.append(_decode_logprobs(_runner(monkeypatch, "host", name, "1")))
    assert runs[0] == runs[1]
