"""ATLAS_DECODE_ATTN_LONG_EXACT: batch 1's early rope entries compiled for heads of head_dim
elements without attention sinks (decode_attn_long_rope_early[_late]_exact_bf16, 456 SASS
instructions fewer than the general code), and ATLAS_DECODE_ATTN_LONG_ONE_DIM: the twins of
either compiled for one head dim (_d128 / _d64): which launches take them (the route, and a
batch-1 step of models with plain, padded and sink-carrying heads on MockGpuBackend), the
host reference refusing what the kernel traps on, and the same batch-1 logprobs with the
switch on and off (HostBackend, the real tiny-qwen3 safetensors fixture)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from atlas.model.load import load_runner
from atlas.runtime.host import HostBackend
from atlas.runtime.mock import MockGpuBackend
from atlas.runtime.kernel_abi import (DECODE_ATTN_LONG_ROPE_EARLY,
                                      DECODE_ATTN_LONG_ROPE_EARLY_D64,
                                      DECODE_ATTN_LONG_ROPE_EARLY_D128,
                                      DECODE_ATTN_LONG_ROPE_EARLY_EXACT,
                                      DECODE_ATTN_LONG_ROPE_EARLY_EXACT_D64,
                                      DECODE_ATTN_LONG_ROPE_EARLY_EXACT_D128,
                                      DECODE_ATTN_LONG_ROPE_EARLY_LATE,
                                      DECODE_ATTN_LONG_ROPE_EARLY_LATE_D64,
                                      DECODE_ATTN_LONG_ROPE_EARLY_LATE_D128,
                                      DECODE_ATTN_LONG_ROPE_EARLY_LATE_EXACT,
                                      DECODE_ATTN_LONG_ROPE_EARLY_LATE_EXACT_D64,
                                      DECODE_ATTN_LONG_ROPE_EARLY_LATE_EXACT_D128,
                                      DECODE_ATTN_LONG_ROPE_STAGED)
from atlas.runtime.ops.attention_long import exact_heads, long_rope_kernel_for
from atlas.runtime.ops.routes import KernelRoutes
from atlas.runtime.reference.attention import decode_attn_long_rope_early_exact_bf16

from test_gemv_swiglu import _decode_graph, _decode_logprobs

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
EARLY = {"decode_attn_long_rope_early_d128_bf16", "decode_attn_long_rope_early_late_d128_bf16",
         "decode_attn_long_rope_early_d64_bf16", "decode_attn_long_rope_early_late_d64_bf16"}
EXACT = {"decode_attn_long_rope_early_exact_d128_bf16",
         "decode_attn_long_rope_early_late_exact_d128_bf16"}


def test_the_route_takes_the_exact_twins_for_exact_heads_at_one_sequence() -> None:
    both = KernelRoutes.from_env({"ATLAS_DECODE_ATTN_LONG_ONE_DIM": "0"})
    assert both.decode_attn_long_exact  # the default
    late = replace(both, decode_attn_long_late_trigger=True)
    assert long_rope_kernel_for(both, 1) is DECODE_ATTN_LONG_ROPE_EARLY_EXACT
    assert long_rope_kernel_for(late, 1) is DECODE_ATTN_LONG_ROPE_EARLY_LATE_EXACT
    # padded heads or sinks: the general code
    assert long_rope_kernel_for(both, 1, exact=False) is DECODE_ATTN_LONG_ROPE_EARLY
    assert long_rope_kernel_for(late, 1, exact=False) is DECODE_ATTN_LONG_ROPE_EARLY_LATE
    # batches never run the early entries
    assert long_rope_kernel_for(both, 2) is DECODE_ATTN_LONG_ROPE_STAGED
    off = replace(both, decode_attn_long_exact=False)
    assert not KernelRoutes.from_env({"ATLAS_DECODE_ATTN_LONG_EXACT": "0"}).decode_attn_long_exact
    assert long_rope_kernel_for(off, 1) is DECODE_ATTN_LONG_ROPE_EARLY


@pytest.mark.parametrize("exact, late, dim, want", [
    (True, False, 128, DECODE_ATTN_LONG_ROPE_EARLY_EXACT_D128),
    (True, True, 128, DECODE_ATTN_LONG_ROPE_EARLY_LATE_EXACT_D128),
    (True, False, 64, DECODE_ATTN_LONG_ROPE_EARLY_EXACT_D64),
    (True, True, 64, DECODE_ATTN_LONG_ROPE_EARLY_LATE_EXACT_D64),
    (False, False, 128, DECODE_ATTN_LONG_ROPE_EARLY_D128),
    (False, True, 128, DECODE_ATTN_LONG_ROPE_EARLY_LATE_D128),
    (False, False, 64, DECODE_ATTN_LONG_ROPE_EARLY_D64),
    (False, True, 64, DECODE_ATTN_LONG_ROPE_EARLY_LATE_D64),
    (True, False, 0, DECODE_ATTN_LONG_ROPE_EARLY_EXACT),  # no head dim given: both dims
])
def test_one_dim_twins_follow_the_head_dim(exact, late, dim, want) -> None:
    """The default (ATLAS_DECODE_ATTN_LONG_ONE_DIM=1): the early twin compiled for the
    launch's head dim alone, exact or general."""
    routes = replace(KernelRoutes(), decode_attn_long_late_trigger=late)
    assert routes.decode_attn_long_one_dim
    assert long_rope_kernel_for(routes, 1, exact=exact, head_dim=dim) is want


@pytest.mark.parametrize("exact, dim, want", [
    (True, 128, "decode_attn_long_rope_staged_exact_d128_bf16"),
    (True, 64, "decode_attn_long_rope_staged_exact_d64_bf16"),
    (False, 128, "decode_attn_long_rope_staged_bf16"),   # padded heads or sinks
    (True, 0, "decode_attn_long_rope_staged_bf16"),      # no head dim given
])
def test_batches_take_the_staged_one_dim_twins_unless_switched_off(exact, dim, want) -> None:
    """Batches of exact heads run the staged entry's twin for their head dim (the default);
    ATLAS_DECODE_ATTN_LONG_BATCHED_ONE_DIM=0, the staged entry with both dims' code."""
    on = KernelRoutes()
    off = KernelRoutes.from_env({"ATLAS_DECODE_ATTN_LONG_BATCHED_ONE_DIM": "0"})
    assert long_rope_kernel_for(on, 8, exact=exact, head_dim=dim).func == want
    assert long_rope_kernel_for(off, 8, exact=exact, head_dim=dim
                                ).func == "decode_attn_long_rope_staged_bf16"
    assert long_rope_kernel_for(on, 1, exact=exact, head_dim=dim).func.startswith(
        "decode_attn_long_rope_early")  # batch 1 keeps its early entries


def test_exact_heads_are_unpadded_without_sinks() -> None:
    assert exact_heads(128, None, 0) and exact_heads(128, 128, 0) and exact_heads(64, 64, 0)
    assert not exact_heads(128, 96, 0)  # Phi-3-mini's 96 padded to 128
    assert not exact_heads(64, 64, 0x1000)  # gpt-oss's sinks


def _attention(monkeypatch, fixture: str, switch: str) -> set[str]:
    """The long-attention entries of a batch-1 step on a mock that loaded attention_long
    (as a Hopper device's kernel set does)."""
    monkeypatch.setenv("ATLAS_DECODE_ATTN_LONG_EXACT", switch)
    monkeypatch.setattr(MockGpuBackend, "module_names", property(lambda self: ["attention_long"]))
    runner = load_runner(FIXTURES / fixture, backend="mock", max_seq_len=64,
                         max_batch_size=4, max_prefill_tokens=32)
    return {r.func for r in _decode_graph(runner) if "decode_attn_long_rope" in r.func}


@pytest.mark.parametrize("fixture,switch,want", [
    ("tiny-qwen3", "1", EXACT), ("tiny-qwen3", "0", EARLY),
    ("tiny-phi3-d96", "1", EARLY),  # head_dim 96 padded to 128
    ("tiny-gpt-oss", "1", EARLY),  # attention sinks
])
def test_batch_one_steps_take_the_twin_their_heads_allow(monkeypatch, fixture, switch,
                                                         want) -> None:
    names = _attention(monkeypatch, fixture, switch)
    assert names and names <= want, names


@pytest.mark.parametrize("proj_dim,sinks,only_dim,match", [
    (96, 0, 0, "needs neither"), (128, 0x4000, 0, "needs neither"),
    (128, 0, 64, "_d64_bf16: head_dim 128")])
def test_the_reference_refuses_what_the_kernel_traps_on(proj_dim, sinks, only_dim,
                                                        match) -> None:
    args = [0] * 14 + [1, 8, 4, 128, 16, 4, 1, 0.1, 1e-6, 0, proj_dim, sinks]
    with pytest.raises(ValueError, match=match):
        decode_attn_long_rope_early_exact_bf16(HostBackend(), (1, 4, 1), (128, 1, 1),
                                               *args, only_dim=only_dim)


def test_exact_and_general_twins_give_the_same_logprobs(monkeypatch) -> None:
    """The host references of both twins on the real tiny-qwen3 checkpoint: the same batch-1
    logprobs (the device check's `-k "early general"` cases compare the kernels)."""
    runs = {}
    for switch in ("1", "0"):
        monkeypatch.setenv("ATLAS_DECODE_ATTN_LONG_EXACT", switch)
        runs[switch] = _decode_logprobs(load_runner(
            FIXTURES / "tiny-qwen3", backend="host", max_seq_len=64, max_batch_size=4,
            max_prefill_tokens=32))
    assert runs["1"] == runs["0"]
