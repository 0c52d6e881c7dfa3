"""ATLAS_GDN_DECODE_LATE_TRIGGER: which fused Gated-DeltaNet decode entry the routes pick
(unset: the default entry, until the H200 A/B decides), the hybrid model's decode graph
taking it, its check cases on the references, and bit-identical decode with it on and off
(real launches through the route on the host backend)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from atlas.runtime.cases.gdn_decode import gdn_decode_cases
from atlas.runtime.host import HostBackend
from atlas.runtime.kernel_abi import GDN_DECODE, GDN_DECODE_LATE
from atlas.runtime.kernel_check import check
from atlas.runtime.ops.linear_attention import gdn_decode_kernel_for
from atlas.runtime.ops.routes import KernelRoutes
from test_gemv_swiglu import _decode_graph, _decode_logprobs, _runner

ENV = "ATLAS_GDN_DECODE_LATE_TRIGGER"


def test_the_routes_pick_the_entry() -> None:
    routes = KernelRoutes()
    assert routes.gdn_decode_late_trigger is None
    assert gdn_decode_kernel_for(routes) is GDN_DECODE  # unset: off until measured
    assert gdn_decode_kernel_for(replace(routes, gdn_decode_late_trigger=True)) \
        is GDN_DECODE_LATE
    for value, want in (("1", GDN_DECODE_LATE), ("0", GDN_DECODE), ("", GDN_DECODE)):
        assert gdn_decode_kernel_for(KernelRoutes.from_env({ENV: value})) is want
    with pytest.raises(ValueError, match=ENV):
        KernelRoutes.from_env({ENV: "yes"})


@pytest.mark.parametrize("switch, want", [("1", GDN_DECODE_LATE), ("0", GDN_DECODE),
                                          (None, GDN_DECODE)])
def test_the_decode_graph_takes_the_entry(monkeypatch, switch, want) -> None:
    """tiny-qwen3_5's linear layers (2 of 3) each run the entry the variable picks."""
    if switch is None:
        monkeypatch.delenv(ENV, raising=False)
    else:
        monkeypatch.setenv(ENV, switch)
    graph = _decode_graph(_runner(monkeypatch, "mock", "tiny-qwen3_5", "1"))
    names = [r.func for r in graph]
    other = GDN_DECODE if want is GDN_DECODE_LATE else GDN_DECODE_LATE
    assert names.count(want.func) == 2 and other.func not in names


CASES = [c for c in gdn_decode_cases(np.random.default_rng(1234))
         if c.name.startswith("gdn_decode_late_") and "qwen3.5" not in c.name]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_check_cases_hold_on_the_host(case) -> None:
    """The device check's late-trigger cases (`-k gdn_decode_late`) at the small head shape:
    the twin against the float64 oracle, its runs bit for bit against the default entry's
    one-row steps."""
    result = check(HostBackend(), case)
    assert result.passed, result.detail


def test_hybrid_decode_is_bit_identical_with_the_switch(monkeypatch) -> None:
    """tiny-qwen3_5's batch-1 decode gives the same logprobs with the late entry and without."""
    runs = []
    for switch in ("1", "0"):
        monkeypatch.setenv(ENV, switch)
        runs.append(_decode_logprobs(_runner(monkeypatch, "host", "tiny-qwen3_5", "1")))
    assert runs[0] == runs[1]
