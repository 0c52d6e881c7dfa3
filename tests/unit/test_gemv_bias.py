"""Batch-1 decode's qkv GEMV that adds Qwen2's q/k/v biases itself (the default since gpu128;
ATLAS_GEMV_BIAS=0 the GEMV then bias_add): the launches of a batch-1 step with the switch on and
off (MockGpuBackend), the route's conditions, the check cases on the host references (bit for
bit the GEMV then bias_add), and the same batch-1 logprobs with the switch on and off
(HostBackend, the real tiny-qwen2 safetensors fixture)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from atlas.model.load import load_runner
from atlas.runtime.cases.bias_add import gemv_bias_cases
from atlas.runtime.host import HostBackend
from atlas.runtime.kernel_check import check
from atlas.runtime.mock import MockGpuBackend
from atlas.runtime.ops import KernelCache, matmul
from atlas.runtime.ops.routes import KernelRoutes

from test_gemv_swiglu import _decode_graph, _decode_logprobs

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def _runner(monkeypatch, backend: str, switch: str):
    monkeypatch.setenv("ATLAS_GEMV_BIAS", switch)
    return load_runner(FIXTURES / "tiny-qwen2", backend=backend, max_seq_len=64,
                       max_batch_size=4, max_prefill_tokens=32)


@pytest.mark.parametrize("switch", ["1", "0"])
def test_batch_one_qkv_launches(monkeypatch, switch) -> None:
    """On: each layer's qkv projection is one gemv_bias_bf16_single launch into the qkv rows
    with the layer's bias, and the attention follows it; off: the GEMV, then bias_add."""
    runner = _runner(monkeypatch, "mock", switch)
    graph = _decode_graph(runner)
    names = [r.func for r in graph]
    layers = runner.cfg.num_hidden_layers
    if switch == "0":
        assert "gemv_bias_bf16_single" not in names
        assert names.count("bias_add_bf16") == layers
        return
    assert "bias_add_bf16" not in names
    fused = [i for i, n in enumerate(names) if n == "gemv_bias_bf16_single"]
    assert len(fused) == layers
    qkv_width = (runner.cfg.num_attention_heads + 2 * runner.cfg.num_key_value_heads) \
        * runner.cfg.head_dim
    for i in fused:
        r = graph[i]
        assert (r.args["y"], r.args["n"], r.args["k"], r.args["m"]) == (
            runner.bufs.qkv, qkv_width, runner.cfg.hidden_size, 1)
        assert r.args["bias"] != 0
        assert "attn" in names[i + 1]  # the attention kernel right after the projection


def test_the_bias_gemv_route_is_one_row_on_the_single_row_gemv() -> None:
    """One row in 4-row blocks on the single-row GEMV only, under the switch (on by
    default); 8-row blocks and the ring kernel for one row turn it off."""
    for on in ({}, {"ATLAS_GEMV_BIAS": "1"}):
        kc = KernelCache(MockGpuBackend(), routes=KernelRoutes.from_env(on))
        assert matmul.fuses_bias(kc, 1, 2048)
        assert not matmul.fuses_bias(kc, 2, 2048)
    for env in ({"ATLAS_GEMV_BIAS": "0"}, {"ATLAS_GEMV_ROWS": "8"},
                {"ATLAS_GEMV_RING_SINGLE": "1"}):
        off = KernelCache(MockGpuBackend(), routes=KernelRoutes.from_env(env))
        assert not matmul.fuses_bias(off, 1, 2048), env


CASES = gemv_bias_cases(np.random.default_rng(99))


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_check_cases_hold_on_the_host(case) -> None:
    """The device check's cases (`-k gemv_bias`) on the references: against the float64
    oracle, and bit for bit against the GEMV followed by bias_add."""
    result = check(HostBackend(), case)
    assert result.passed, result.detail


def test_batch_one_decode_is_bit_identical_with_the_switch(monkeypatch) -> None:
    """tiny-qwen2's batch-1 decode gives the same logprobs with ATLAS_GEMV_BIAS on and off."""
    on = _decode_logprobs(_runner(monkeypatch, "host", "1"))
    off = _decode_logprobs(_runner(monkeypatch, "host", "0"))
    assert on == off and len(on) == 5
