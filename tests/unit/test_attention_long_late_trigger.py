"""ATLAS_DECODE_ATTN_LONG_LATE_TRIGGER: which rope-fused long-attention entry the routes pick,
and the loader's rule where the variable is unset (by the size of the o_proj the attention
precedes and whether the attention is gated: ops/attention_long.late_trigger_pays)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from atlas.model.load import load_runner
from atlas.runtime.kernel_abi import (DECODE_ATTN_LONG_ROPE_LATE, DECODE_ATTN_LONG_ROPE_STAGED,
                                      DECODE_ATTN_LONG_ROPE_WAIT)
from atlas.runtime.ops.attention_long import (LATE_TRIGGER_MIN_O_BYTES, late_trigger_pays,
                                              long_rope_kernel_for)
from atlas.runtime.ops.routes import KernelRoutes

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def test_the_routes_pick_the_entry() -> None:
    routes = KernelRoutes(decode_attn_long_early=False)  # the early twins: their own test
    assert routes.decode_attn_long_late_trigger is None
    assert long_rope_kernel_for(routes, 1) is DECODE_ATTN_LONG_ROPE_STAGED
    late = replace(routes, decode_attn_long_late_trigger=True)
    assert long_rope_kernel_for(late, 1) is DECODE_ATTN_LONG_ROPE_LATE
    # batches keep the entry trigger: only batch 1's o_proj floods DRAM before its wait
    assert long_rope_kernel_for(late, 8) is DECODE_ATTN_LONG_ROPE_STAGED
    # the waiting prologue has no late twin: it wins over the trigger switch
    assert long_rope_kernel_for(replace(late, decode_attn_long_staged=False), 1) \
        is DECODE_ATTN_LONG_ROPE_WAIT
    env = KernelRoutes.from_env({"ATLAS_DECODE_ATTN_LONG_LATE_TRIGGER": "0"})
    assert env.decode_attn_long_late_trigger is False


def test_the_rule_follows_the_attention_and_the_o_proj_bytes() -> None:
    # gated attention: Qwen3.5-35B-A3B's o_proj (2048 x 4096 bf16, 16.8 MB) pays, a small one
    # not; ungated attention triggers on entry whatever its o_proj (gpu192: Qwen3-8B's 33.5 MB)
    assert late_trigger_pays(2 * 2048 * 4096, gated=True)
    assert not late_trigger_pays(2 * 1024 * 2048, gated=True)
    assert late_trigger_pays(LATE_TRIGGER_MIN_O_BYTES, gated=True)
    assert not late_trigger_pays(LATE_TRIGGER_MIN_O_BYTES - 1, gated=True)
    assert not late_trigger_pays(2 * 4096 * 4096, gated=False)


@pytest.mark.parametrize("model, env, expect", [
    ("tiny-qwen3", None, False), ("tiny-qwen3", "1", True), ("tiny-qwen3-moe", "0", False)])
def test_the_loader_resolves_the_switch(monkeypatch, model, env, expect) -> None:
    """Unset, a tiny model's o_proj is far below the threshold; the variable forces it."""
    if env is None:
        monkeypatch.delenv("ATLAS_DECODE_ATTN_LONG_LATE_TRIGGER", raising=False)
    else:
        monkeypatch.setenv("ATLAS_DECODE_ATTN_LONG_LATE_TRIGGER", env)
    runner = load_runner(FIXTURES / model, backend="host", max_seq_len=64, max_batch_size=1)
    assert runner.model.kc.routes.decode_attn_long_late_trigger is expect
